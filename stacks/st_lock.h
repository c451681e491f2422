/*
 * stacks/st_lock.h - the switch side of the capture interlock ("stop the
 * process", after brpc's STB).  The essay is docs/stacks.md; in short:
 *
 *   A tracer takes p->st.lock, stores p->st.traced = 1 (full), loads
 *   p->st.word, and reads what the state allows: the saved context of a
 *   SUSPENDED process (context mode) or, for a RUNNING one, the frames a
 *   signal handler on its thread writes (signal mode).  A context-mode
 *   capture is then validated: the word is loaded again after the walk
 *   and the capture is thrown away (and retried, a bounded number of
 *   times) if it changed.  It clears traced (release) at the end.
 *
 *   The switch paths, below, check traced before they switch a process
 *   in or out and wait while it is set: a captured process does not pass
 *   its context switch.  Then they publish the new state with a plain
 *   store (ST_NEXT: the switch count goes up).  No fence: the one window
 *   this leaves (traced set after the check, the state read before the
 *   store is visible) is caught by the validation, because on x86-64
 *   (TSO) a tracer that read any word the process wrote after its switch
 *   must also see the state store that preceded it.  Cost: a load, a
 *   predicted branch and a store or two per process switched.
 *
 *   Exit is the one transition that frees something (the fiber), so it is
 *   a real Dekker handshake: the reaper's full store of EXITED and load
 *   of traced against the tracer's full store of traced and load of the
 *   word; a tracer that saw the process alive is waited for.
 */
#ifndef STACKS_ST_LOCK_H
#define STACKS_ST_LOCK_H

#include "vm/common.h"
#include "vm/fiber.h"
#include "vm/process.h"

/* Waits (spinning, then yielding the CPU) until no capture holds p. */
void st_wait_untraced(Process *p);

/*
 * Called by the thread about to switch into q, right before the switch:
 * waits for a capture of q, marks it RUNNING and takes its saved stack
 * pointer away (a tracer that sees no saved sp knows the context is not
 * there to read).  Returns the sp to switch to.
 */
static inline void *st_switch_in(Process *q)
{
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&q->st.traced)))
        st_wait_untraced(q);
    uintptr_t w = vm_atomic_load_relaxed(&q->st.word);
    vm_atomic_store_relaxed(&q->st.word, ST_NEXT(w, ST_RUNNING));
    void *sp = q->fiber->sp;
    q->fiber->sp = NULL;
    return sp;
}

/*
 * Called by a running process right before it switches out: waits for a
 * capture of it (a signal-mode capture must find it on its thread), then
 * marks it SUSPENDED; the switch itself then stores the saved sp, which
 * is what makes the context readable.
 */
static inline void st_switch_out(Process *p)
{
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&p->st.traced)))
        st_wait_untraced(p);
    uintptr_t w = vm_atomic_load_relaxed(&p->st.word);
    vm_atomic_store_relaxed(&p->st.word, ST_NEXT(w, ST_SUSPENDED));
}

/* A process spawned (before it is published): generation and NOSTACK. */
static inline void st_spawned(Process *p)
{
    p->st.gen = p->pid;
    uintptr_t w = vm_atomic_load_relaxed(&p->st.word);
    vm_atomic_store_relaxed(&p->st.word, ST_NEXT(w, ST_NOSTACK));
}

/* An exited process is about to lose its fiber (the reaper, on the
 * scheduler's thread): EXITED, then waits for a capture that saw it
 * alive. */
void st_exited(Process *p);

#endif /* STACKS_ST_LOCK_H */
