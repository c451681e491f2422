/*
 * vm/sched_internal.h - what vm/sched.c and vm/sched_cache.c share: the
 * cache of ended processes and the spare list, as the scheduler loop and
 * vm_sched_stop drive them.
 */
#ifndef VM_SCHED_INTERNAL_H
#define VM_SCHED_INTERNAL_H

#include "vm/sched.h"

/* Moves s's whole cache to the spare list (its owner only); false,
 * leaving it in place, when the list has no room for it. */
bool vm_sched_spare_give(Scheduler *s);

/* Frees the spare list (the last scheduler to go idle, or vm_sched_stop
 * after the join). */
void vm_sched_spare_flush(SchedSystem *sys);

/* Frees s's cache (its owner when idle, or vm_sched_stop after the
 * join). */
void vm_sched_cache_flush(Scheduler *s);

#endif /* VM_SCHED_INTERNAL_H */
