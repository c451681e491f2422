/*
 * vm/progress.h - thread progress on liburcu QSBR.
 *
 * A caller makes its writes, takes a ticket, and waits until the ticket
 * is reached: by then every scheduler thread has passed a quiescent state
 * (between two processes, or offline) after the writes, so no scheduler
 * still uses anything the writes replaced.  A VM process that waits is
 * suspended and its scheduler runs others; a foreign thread blocks.
 */
#ifndef VM_PROGRESS_H
#define VM_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/process.h"

typedef struct VmProgress VmProgress;

/* The VM's progress service, started on first use.  Any thread. */
VmProgress *vm_progress_get(tvm_vm *vm);
/* Stops the progress thread for good (tvm_destroy, before the schedulers
 * stop): later tickets are never reached. */
void vm_progress_stop(tvm_vm *vm);
/* Frees the service (vm_release, once no thread of the VM runs). */
void vm_progress_free(tvm_vm *vm);

/*
 * Takes a ticket for a grace period that starts after every write the
 * caller made before this call.  Any thread.
 */
uint64_t vm_progress_ticket(VmProgress *bp);

/* True once the ticket's grace period has completed (acquire). */
bool vm_progress_reached(VmProgress *bp, uint64_t ticket);

/*
 * Waits until the ticket is reached.  `self` is the calling process when
 * the caller runs on one (it is suspended, its scheduler goes on), or
 * NULL for a foreign thread (it blocks).
 */
void vm_progress_wait(VmProgress *bp, Process *self, uint64_t ticket);

/*
 * A wait for thread progress after every write the caller made before
 * the call: a process takes a ticket and waits as above; a foreign thread
 * runs a grace period itself (blocking), without the progress thread.
 */
void vm_progress_sync(VmProgress *bp, Process *self);

/*
 * Nonzero while a thread waits for a grace period: a foreign caller inside
 * vm_progress_sync, and the progress thread from the ticket that asks for
 * one until it finds nothing more to do.  Written by those threads
 * (relaxed read-modify-writes: a count, each thread adding 1 and taking it
 * back), read relaxed by every scheduler after each quiescent report
 * (vm/sched.c, offer_cpu), as a hint only: a stale 0 costs a waiter the
 * OS's delay, as before the hint, and a stale 1 one sched_yield().  One
 * count for the OS process, not one per VM: QSBR's grace periods are the
 * OS process's, so every VM's schedulers hold up each of them.
 */
extern VmAtomic vm_progress_wanted;

/*
 * A time (vm_now_ns) until which time slices that begin are short
 * (VM_REDUCTIONS_GP: vm/sched.c, slice_start), or 0.  A grace period ends
 * only when every scheduler has switched processes, and a process one
 * woke starts only when the process running on its scheduler yields, so
 * a wait lasted about two full slices.  Set VM_PROGRESS_HURRY_NS ahead
 * (vm_progress_hurry_set) when a grace period is asked for (a ticket that
 * starts the progress thread, a foreign thread's vm_progress_sync) and
 * when its end wakes processes; for a bounded time, not for as long as a
 * grace period lasts: one held up by a long native would gain nothing
 * from short slices elsewhere, and pay a switch per short slice.  Stored
 * relaxed by those threads; put back to 0 by a scheduler that finds it
 * past, with a CAS that fails if a later time was stored meanwhile.  A
 * hint, like vm_progress_wanted: a stale value costs a longer or a
 * shorter slice.  One for the OS process, as vm_progress_wanted.
 */
extern VmAtomic vm_progress_hurry_until;

/* Short slices from now for VM_PROGRESS_HURRY_NS.  Any thread. */
void vm_progress_hurry_set(void);

/* vm_progress_hurry's test of a time: true while it is ahead. */
bool vm_progress_hurry_ahead(uintptr_t until);

/* Whether a time slice that begins now should be short: one relaxed load,
 * and a read of the clock only within VM_PROGRESS_HURRY_NS of a setting. */
static inline bool vm_progress_hurry(void)
{
    const uintptr_t until = vm_atomic_load_relaxed(&vm_progress_hurry_until);
    return VM_UNLIKELY(until != 0) && vm_progress_hurry_ahead(until);
}

/* Grace periods completed so far (for tests and statistics). */
uint64_t vm_progress_completed(VmProgress *bp);

#endif /* VM_PROGRESS_H */
