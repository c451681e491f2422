/*
 * vm/interp.h - the interpreter entry points (see interp.c).
 */
#ifndef VM_INTERP_H
#define VM_INTERP_H

#include "vm/process.h"

/* Called when a process has used up its reductions. */
void vm_yield_point(Process *p);

#endif /* VM_INTERP_H */
