/*
 * vm/overflow.h - a process's native stack overflow ends that process:
 * the SIGSEGV handler on each scheduler thread's alternate signal stack
 * (vm/overflow.c has the protocol).
 */
#ifndef VM_OVERFLOW_H
#define VM_OVERFLOW_H

#include "vm/sched.h"

/*
 * On a scheduler thread, before it runs any process: installs the
 * handler (once per OS process, keeping the one that was there for the
 * faults that are not a process's overflow) and gives the thread its
 * alternate signal stack (s->alt_stack; none if it cannot be mapped, and
 * then an overflow ends the OS process as it always did).
 */
void vm_overflow_thread_start(Scheduler *s);
/* On the same thread, after its last process: the stack goes. */
void vm_overflow_thread_stop(Scheduler *s);

#endif /* VM_OVERFLOW_H */
