/*
 * vm/interp.h - the interpreter entry points (see interp.c).
 */
#ifndef VM_INTERP_H
#define VM_INTERP_H

#include "vm/process.h"

/* Called when a process has used up its reductions (or was marked to be
 * killed, Process.kill, which zeroes them): true when it must die now,
 * false after it had its turn. */
bool vm_yield_point(Process *p);

/* Receive helpers that also work (trivially) for call contexts. */
void vm_proc_fetch_any(Process *p);
/* 1: a message is at the cursor; 0: timed out; -1: cannot wait here. */
int vm_receive_wait(Process *p, int64_t ms);

#endif /* VM_INTERP_H */
