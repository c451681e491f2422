/*
 * stacks/st_proc.h - the per-process part of the stack-capture interlock
 * (the protocol is in stacks/st_lock.h and docs/stacks.md).  Embedded in
 * every Process as `p->st`; a plain-C struct so that vm/process.h can
 * include it without pulling in the capture code.
 */
#ifndef STACKS_ST_PROC_H
#define STACKS_ST_PROC_H

#include <pthread.h>
#include <stdint.h>

#include "vm/atomics.h"

/*
 * Capture states of a process (the low ST_STATE_BITS of StProc.word):
 *   CREATED   not spawned yet (a fresh or recycled Process)
 *   NOSTACK   spawned, never switched in: its fiber holds no frame yet
 *   RUNNING   switched in (or about to be: its saved sp is gone)
 *   SUSPENDED switched out; its saved context is valid once fiber->sp is
 *             non-NULL again (the switch stores it)
 *   EXITED    reaped, or about to be: its fiber is going away
 * "Switching" is not a stored state: it is RUNNING or SUSPENDED seen with
 * no saved sp, or a signal that lands inside vm_fiber_switch*.
 * "Runnable" and "waiting" both show as SUSPENDED here; the capture tells
 * them apart by the process's own state (PS_WAITING).
 */
enum { ST_CREATED = 0, ST_NOSTACK, ST_RUNNING, ST_SUSPENDED, ST_EXITED };
#define ST_STATE_BITS 4
#define ST_STATE_OF(w) ((unsigned)((w) & ((1u << ST_STATE_BITS) - 1)))
/* The next word: a new state and the switch count one higher, so that two
 * observations of the same word mean "no switch in between". */
#define ST_STATE_MASK (((uintptr_t)1 << ST_STATE_BITS) - 1)
#define ST_NEXT(w, s) (((w) & ~ST_STATE_MASK) + (ST_STATE_MASK + 1 + (uintptr_t)(s)))

typedef struct StProc {
    /* state | switch count << ST_STATE_BITS.  Written (relaxed, no RMW)
     * only by the thread that owns the process at that moment: the
     * spawner, the thread switching it in, the process switching itself
     * out, the reaper (full store).  Read by tracers (acquire, and again
     * after the walk to validate it). */
    VmAtomic word;
    /* 1 while a capture holds the process ("stop the process").  Written
     * by the tracer holding `lock` (a full store to set, a release store
     * to clear); read relaxed by the switch paths before they switch, and
     * by the reaper after its full store of EXITED (Dekker with the
     * tracer's full store and load of `word`). */
    VmAtomic traced;
    /* The generation: the pid the state belongs to (pids are never
     * reused, while a Process slot is, through the schedulers' caches).
     * Written at spawn before the process is published; read by tracers. */
    uint64_t gen;
    /* Serialises the tracers of this process (held for a whole capture). */
    pthread_mutex_t lock;
} StProc;

#endif /* STACKS_ST_PROC_H */
