/*
 * vm/interlock_switch.h - the switch side of the capture interlock
 * (vm/interlock.h has the protocol): what the scheduler, a process
 * switching itself out, the spawner and the reaper do.
 */
#ifndef VM_INTERLOCK_SWITCH_H
#define VM_INTERLOCK_SWITCH_H

#include "vm/common.h"
#include "vm/fiber.h"
#include "vm/interlock.h"
#include "vm/process.h"

/* Waits (spinning, then yielding the CPU) until no capture holds p. */
void vm_il_wait_untraced(Process *p);

/*
 * Called by the thread about to switch into q, right before the switch:
 * waits for a capture of q, marks it RUNNING and takes its saved stack
 * pointer away (a tracer that sees no saved sp knows the context is not
 * there to read).  Returns the sp to switch to.
 */
static inline void *vm_il_switch_in(Process *q)
{
    /* [IL2'] acquire: pairs with [IL2], the release clear of traced at
     * the end of a capture (stacks/st_capture.c): the capture's reads of
     * q's stack come before everything q writes once it runs again (its
     * new frames reuse the words the capture read). */
    if (VM_UNLIKELY(vm_atomic_load_acquire(&q->il.traced)))
        vm_il_wait_untraced(q);
    uintptr_t w = vm_atomic_load_relaxed(&q->il.word);
    vm_atomic_store_relaxed(&q->il.word, IL_NEXT(w, IL_RUNNING));
    /* The owner's read of its saved sp, and the store that takes it away:
     * a capture reads the word concurrently (saved_sp, stacks/
     * st_capture.c, an acquire load), so the store is an atomic one; the
     * read needs no atomicity, no other thread writes the word now. */
    void *sp = q->fiber->sp;
    vm_atomic_poke_relaxed((uintptr_t *)&q->fiber->sp, 0);
    /* [IL3] store-store: RUNNING and the cleared sp before every write q
     * makes to its stack once it runs; pairs with [ST-V], the capture's
     * load-load fence between its reads of the saved context and its
     * second load of the word: a capture that read a word q wrote after
     * this switch then sees the new state or the NULL sp, and throws its
     * walk away.  x86_64 (TSO) keeps stores in order: a compiler barrier
     * there; dmb ishst on aarch64, where without it the tracer could read
     * q's new frames and still the old word, and keep a torn walk. */
    vm_atomic_fence_store();
    return sp;
}

/*
 * Called by a running process right before it switches out: waits for a
 * capture of it (a signal-mode capture must find it on its thread), then
 * marks it SUSPENDED; the switch itself then stores the saved sp, which
 * is what makes the context readable.
 */
static inline void vm_il_switch_out(Process *p)
{
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&p->il.traced)))
        vm_il_wait_untraced(p);
    uintptr_t w = vm_atomic_load_relaxed(&p->il.word);
    /* [IL1] release: everything p wrote on its stack so far (frames the
     * saved context's words overwrite) before SUSPENDED; pairs with [IL1'],
     * the capture's load of the word (sequentially consistent), which then
     * reads the saved context.  A plain move on x86-64, like the relaxed
     * store it replaces; stlr on aarch64.  The saved words themselves are
     * written after this, by the switch: their order is [IL4] (the
     * switch's release store of the saved sp, vm/fiber_<arch>.S). */
    vm_atomic_store_release(&p->il.word, IL_NEXT(w, IL_SUSPENDED));
}

/* A process spawned (before it is published): generation and NOSTACK. */
static inline void vm_il_spawned(Process *p)
{
    p->il.gen = p->pid;
    uintptr_t w = vm_atomic_load_relaxed(&p->il.word);
    vm_atomic_store_relaxed(&p->il.word, IL_NEXT(w, IL_NOSTACK));
}

/* An exited process is about to lose its fiber (the reaper, on the
 * scheduler's thread): EXITED, then waits for a capture that saw it
 * alive. */
void vm_il_exited(Process *p);

#endif /* VM_INTERLOCK_SWITCH_H */
