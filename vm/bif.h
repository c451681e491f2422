/*
 * vm/bif.h - built-in natives (erlang:, lists:, io:).
 */
#ifndef VM_BIF_H
#define VM_BIF_H

#include "include/tracevm.h"

/* Registers every built-in native in `vm` (at creation). */
void vm_bifs_register(tvm_vm *vm);

#endif /* VM_BIF_H */
