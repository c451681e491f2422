/*
 * vm/interlock.h - the capture interlock ("stop the process", after
 * brpc's STB): the per-process word and the switch side.  The tracer
 * side (stacks/st_capture.c) is the only other party.  The essay is docs/stacks.md; in short:
 *
 *   A tracer takes p->il.lock, stores p->il.traced = 1 (full), loads
 *   p->il.word, and reads what the state allows: the saved context of a
 *   SUSPENDED process (context mode) or, for a RUNNING one, the frames a
 *   signal handler on its thread writes (signal mode).  A context-mode
 *   capture is then validated: the word is loaded again after the walk
 *   and the capture is thrown away (and retried, a bounded number of
 *   times) if it changed.  It clears traced (release) at the end.
 *
 *   The switch paths, below, check traced before they switch a process
 *   in or out and wait while it is set: a captured process does not pass
 *   its context switch.  Then they publish the new state with a plain
 *   store (IL_NEXT: the switch count goes up; a release store when
 *   switching out, and the check of traced an acquire load when switching
 *   in: both plain moves on x86-64, ldar/stlr on aarch64, which order the
 *   process's stack writes and a capture's reads of them).  The saved
 *   context is published by the switch's release store of the saved sp
 *   ([IL4]: a plain move on x86-64, stlr on aarch64) and read after an
 *   acquire load of it.  No full fence: the one window this leaves
 *   (traced set after the check, the state read before the store is
 *   visible) is caught by the validation, a seqlock's read side: a
 *   tracer that read any word the process wrote after its switch-in
 *   must also see the state store that preceded it.  On x86-64 (TSO)
 *   that holds for free; on aarch64 it takes the two fences TSO makes
 *   compiler barriers: a store-store fence on the switch-in after the
 *   state store ([IL3], dmb ishst) and a load-load fence in the tracer
 *   between the walk and the second load of the word ([ST-V], dmb
 *   ishld).  Cost: a load, a predicted branch and a store or two per
 *   process switched, and on aarch64 one dmb ishst per switch-in.
 *
 *   Exit is the one transition that frees something (the fiber), so it is
 *   a real Dekker handshake: the reaper's full store of EXITED and load
 *   of traced against the tracer's full store of traced and load of the
 *   word; a tracer that saw the process alive is waited for.  Each side
 *   is two sequentially consistent read-modify-writes, never a fence and
 *   a plain load: on x86-64 a locked instruction is a full barrier; on
 *   aarch64 the store half of the first (stlxr, or an LSE ldaddal) is a
 *   release and the load half of the second an acquire, which ARMv8 never
 *   reorders (release then acquire is kept in order: RCsc), so neither
 *   side's load passes its own store on either machine.
 */
#ifndef VM_INTERLOCK_H
#define VM_INTERLOCK_H

#include <pthread.h>
#include <stdint.h>

#include "vm/atomics.h"
#include "vm/common.h"

/*
 * Capture states of a process (the low IL_STATE_BITS of VmInterlock.word):
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
enum { IL_CREATED = 0, IL_NOSTACK, IL_RUNNING, IL_SUSPENDED, IL_EXITED };
#define IL_STATE_BITS 4
#define IL_STATE_OF(w) ((unsigned)((w) & ((1u << IL_STATE_BITS) - 1)))
/* The next word: a new state and the switch count one higher, so that two
 * observations of the same word mean "no switch in between". */
#define IL_STATE_MASK (((uintptr_t)1 << IL_STATE_BITS) - 1)
#define IL_NEXT(w, s) (((w) & ~IL_STATE_MASK) + (IL_STATE_MASK + 1 + (uintptr_t)(s)))

typedef struct VmInterlock {
    /* state | switch count << IL_STATE_BITS.  Written (no RMW) only by
     * the thread that owns the process at that moment: the spawner and
     * the thread switching it in (relaxed), the process switching itself
     * out (release, [IL1]: its stack writes before SUSPENDED), the reaper
     * (full store).  Read by tracers (sequentially consistent, [IL1'],
     * and again relaxed after the walk to validate it). */
    VmAtomic word;
    /* 1 while a capture holds the process ("stop the process").  Written
     * by the tracer holding `lock` (a full store to set, a release store
     * to clear, [IL2]: the capture's reads of the stack before it); read
     * by the switch paths before they switch (acquire when switching in,
     * [IL2']: the process's later writes to its stack come after the
     * capture's reads; relaxed when switching out, as a running process's
     * stack is read only on its own thread), and by the reaper after its
     * full store of EXITED (Dekker with the tracer's full store and load
     * of `word`). */
    VmAtomic traced;
    /* 1 while the process's switch (or its reaper) waits in
     * vm_il_wait_untraced for `traced` to clear.  Written by that thread
     * only (relaxed 1 before the wait, release 0 after); read by tracers
     * (acquire) before they set `traced`, so that a tracer that captures
     * the process again and again lets the waiting switch through first
     * instead of starving it (the waiter needs only to run once while
     * `traced` is clear, and a tracer holding `lock` keeps every other
     * tracer from setting it meanwhile).  A liveness hint: a stale value
     * costs one more round of waiting, never a wrong capture. */
    VmAtomic waiting;
    /* The generation: the pid the state belongs to (pids are never
     * reused, while a Process slot is, through the schedulers' caches).
     * Written at spawn before the process is published; read by tracers. */
    uint64_t gen;
    /* Serialises the tracers of this process (held for a whole capture). */
    pthread_mutex_t lock;
} VmInterlock;


/* The switch side needs Process (vm/process.h), which embeds VmInterlock:
 * the functions are declared in vm/interlock_switch.h. */

#endif /* VM_INTERLOCK_H */
