/*
 * vm/sched.c - scheduler threads, run queues with stealing, the timer
 * thread, and QSBR scheduling points.
 *
 * Protocol: running a process.
 *   Each scheduler has a local run queue that only its own thread touches
 *   (no lock), but for the lend below, and a shared one, under its lock,
 *   for processes put there by other threads; it moves the shared queue
 *   behind the local one between two processes, and an idle scheduler
 *   steals from the shared queues of the others, and from a lent local
 *   queue.  A busy scheduler hands half of its local backlog to a
 *   sleeping one between two processes (share_with_sleeper).
 *   A scheduler pops a process and, if it is RUNNABLE (just spawned or
 *   woken), marks it RUNNING under the process lock; a process queued
 *   again after a yield is still RUNNING.  It switches into the process's
 *   fiber and gets control back when the process yields, waits or exits.
 *   Only then, with the process's context saved, does the scheduler decide
 *   what it becomes.  A plain yield (want_wait clear, not EXITED: both
 *   written by the process itself, on this thread) takes no lock: the
 *   process stays RUNNING and goes to the back of the local queue; wakers
 *   treat a queued RUNNING process like a running one (they set
 *   `signaled`).  Otherwise, under the process lock: it is reaped
 *   (EXITED), queued again, still RUNNING (it asked to wait but `signaled`
 *   is set: something arrived meanwhile), or made WAITING.  Because the
 *   WAITING decision is made after the switch, a sender or timer that
 *   wakes a WAITING process always finds a saved context, and a wake-up
 *   that arrives while the process is still RUNNING sets `signaled`,
 *   which the scheduler sees under the same lock.
 *   The direct switch (vm_sched_yield_to_next): a plain yield whose next
 *   local process also yielded, with no stop, stop-the-world, shared-queue
 *   work or sleeping scheduler pending, does the scheduler's part itself
 *   (queue the yielder, report the quiescent state, start the next) and
 *   switches fiber to fiber; the scheduler's context stays suspended in
 *   run(), which reads s->current when resumed to learn who came back.
 *   A stop-the-world park is the one thing this path can delay: it
 *   falls back as soon as the request is visible.
 *
 * Lending the local queue.
 *   A process inside an embedder's native (FuncInfo.lends: one registered
 *   by tvm_register_native, which may block or compute for long), or a
 *   built-in one whose arguments give it long work, or a long walk of a
 *   term (a comparison, a copy: vm/lend.h), holds
 *   its scheduler's thread; the processes queued behind it on the local
 *   queue would wait for it even with another scheduler idle.  So the
 *   native's call (vm/interp.c; the built-in native itself) lends the
 *   queue for as long as it runs, through one word per scheduler, `lend`
 *   (sched.h):
 *     OWNED -> EMPTY           the owner, as the native starts with its
 *                              queue empty ([LQ0], a relaxed store);
 *     OWNED -> WORK            the owner, as the native starts with
 *                              processes queued ([LQ1], a release store);
 *     WORK -> TAKING           a thief, in steal() ([LQ2'], full CAS: one
 *                              thief at a time, and never the owner);
 *     TAKING -> EMPTY          the same thief, once it has moved the whole
 *                              queue to its own local queue ([LQ2] release);
 *     WORK or EMPTY -> OWNED   the owner, as the native returns, when the
 *                              process switches out inside it, or at a
 *                              yield inside it (vm_sched_yield_to_next):
 *                              from EMPTY an acquire load ([LQ3'], pairs
 *                              with [LQ2]) and a relaxed store; from WORK
 *                              a full CAS ([LQ3], against [LQ2']; on
 *                              TAKING it yields and retries: the thief is
 *                              a few stores from EMPTY).
 *   Only the owner leaves OWNED and EMPTY (thieves act on WORK alone, and
 *   the [LQ4'] reads below are RMWs that write back what they read), so
 *   the owner needs no CAS there: a plain store cannot overwrite anyone's
 *   change.  Only WORK is contended, and only its end is a CAS.
 *   The owner keeps off the queue while it is lent: nothing pushes to it
 *   (vm_sched_enqueue from the lending thread, a spawn or a send made by
 *   the native, goes the way of another thread's: a shared queue, which
 *   thieves steal from too), and every path that pops or pushes it first
 *   takes it back: run() when the process comes back to the scheduler
 *   (a wait, a yield, an exit or a stack overflow inside the native),
 *   vm_sched_yield_to_next (a yield inside the native, which then
 *   switches straight to the next process as any yield does).  So between
 *   the lend and [LQ3] the queue's fields are the thieves', one at a time,
 *   and [LQ1] (read by [LQ2']) and [LQ2] (read by [LQ3'] or the [LQ3]
 *   CAS) order every plain access to them (and to the processes' fields
 *   written before they were queued) between the owner and each thief.
 *   The queue only shrinks while lent, so WORK always means a non-empty
 *   queue, EMPTY stays true until the owner takes the queue back, and
 *   EMPTY lets idle schedulers skip it without reading it.
 *   A scheduler alone in its system (one scheduler) does not lend at all
 *   (vm_sched_lend_useful, vm_sched_lend): nobody could take the queue,
 *   and the processes behind the native wait for this thread either way.
 *   A process that comes back inside the native (a wait or a yield from
 *   it: tvm_receive, tvm_sleep, vm_yield_point) lends again, on whichever
 *   scheduler it came back to (vm_proc_switch_out, by p->lending, which
 *   only p's own thread reads or writes): that scheduler took its queue
 *   back as the process switched out, and the rest of the native may be
 *   long.
 *   A thief takes the whole queue: its owner is inside a native of
 *   unknown length; if that native returns first and its scheduler finds
 *   nothing else, it steals or, asleep, is handed half of the thief's
 *   backlog by share_with_sleeper.
 *   Waking: a native that starts with processes queued reads nidle with a
 *   full RMW after [LQ1] ([LQ1']) and, if a scheduler is idle, wakes a
 *   sleeping one, taking each other scheduler's lock in turn; a scheduler
 *   going idle adds itself to nidle ([LQ4], full) and then, under its
 *   lock, looks at the lend words ([LQ4'], full RMW reads) before it
 *   sleeps.  [LQ1'] and [LQ4] are RMWs of the same word, so one comes
 *   first: if [LQ4] did, [LQ1'] reads its count and the lender wakes the
 *   idle one (it is then asleep, having set `sleeping` under the lock the
 *   lender takes, or about to look at the lend words after the lender
 *   released that lock); if [LQ1'] did, [LQ4] reads from it (a release
 *   read by an acquire), so [LQ1] happens before [LQ4'], which sees WORK
 *   (or what a thief or the owner made of it since) and does not sleep.
 *   A native that starts with an empty queue wakes nobody: there is
 *   nothing to take.
 *   Stop-the-world, QSBR, the direct switch: a thief takes processes
 *   between two processes of its own, where it would take from a shared
 *   queue; it parks for a stop-the-world at the top of its loop and
 *   reports its quiescent states as before; the lending owner is inside
 *   a process (not quiescent, not parkable) exactly as without the lend.
 *   The direct switch reads the local queue, so it takes the queue back
 *   first.  The VM's own natives do not lend at their call: a short one
 *   (erlang:send/2 among them) pays one predicted test of fi->lends and,
 *   if its work depends on its arguments, one compare of that work with
 *   VM_BIF_LEND_WORK (vm/lend.h, vm_lend_if_long, which lends the same
 *   way for a long one; the comparisons and copies of terms made for VM
 *   code lend there too); the switch and the enqueue pay one load and
 *   test of `lend` each.
 *   Cost of an embedder native's call (bench_procs, docs/benchmarks.md):
 *   on one scheduler a load of p->sched->sys->n; else, with an empty
 *   queue, two plain stores and a load; with processes queued, one RMW
 *   at the call and one CAS at the return (the two locked instructions
 *   a call had before were a CAS each way, and [LQ1'] a third).
 *
 * Ended processes: each scheduler keeps those that ended on it, with
 * their fibers, for its next spawns (its cache), and hands them to the
 * others through the spare list (vm/sched_cache.c).
 *
 * No spin before sleeping: an idle scheduler sleeps once it finds no
 * work, where BEAM's spins first (+sbwt).  A bounded spin (50 us, offline
 * for thread progress) was tried and measured against this build on the
 * 2 vCPUs shared with other jobs (bench_procs, two schedulers, medians of
 * runs taken in turn): it paid nothing there.  With busy schedulers
 * handing their backlog to spinners as to sleepers (6 runs of each):
 * spawn + exit 2.24 us without, 2.64 with; round trip 722 ns, 625; ring
 * 396 ns per message, 512.  To sleepers only (8 of each): 4.13 us, 4.21;
 * 843 ns, 1025; 683 ns, 920.  On a machine whose CPUs are all taken, a
 * spinner takes a CPU
 * from the thread that would run the work it waits for; and the message
 * benchmarks run on one scheduler once started (a message wakes its
 * receiver on the sender's local queue), so they have no wake-up to save.
 *
 * Thread progress: each scheduler is registered with liburcu QSBR, calls
 * rcu_quiescent_state() between two processes (the process has switched
 * out, so the scheduler holds no reference to VM code or breakpoint data)
 * and is offline while it sleeps or, going idle, frees its cache of ended
 * processes and trims the fiber pool, so a grace period never waits for
 * an idle scheduler.  After a report, while a thread waits for a grace
 * period (vm_progress_wanted), it offers that thread its CPU (offer_cpu,
 * at most once per VM_OFFER_GAP_NS; vm/progress.c, "Handing over the
 * CPU"): a hint that shortens the wait, not part of the guarantee.
 */
#define _GNU_SOURCE
#include "vm/sched.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vm/hook.h"
#include "vm/interlock_switch.h"
#include "vm/module.h"
#include "vm/overflow.h"
#include "vm/progress.h"
#include "vm/qsbr.h"
#include "vm/sched_internal.h"

/* The scheduler this thread is (NULL on any other thread).  Written once
 * by sched_main before its loop; read only by the same thread. */
static _Thread_local Scheduler *tls_sched;

Process *vm_running_process(void)
{
    Scheduler *s = tls_sched;
    return s ? s->current : NULL;
}

Scheduler *vm_current_scheduler(void)
{
    return tls_sched;
}

bool vm_sched_holds_queued(const Process *t)
{
    Scheduler *s = tls_sched;
    /* Relaxed: the owner reads its own writes (or a thief's TAKING or
     * EMPTY, and then it keeps off the queue). */
    if (!s || vm_atomic_load_relaxed(&s->lend) != LEND_OWNED)
        return false;
    const Process *q = s->local_head;
    for (int i = 0; q && i < VM_QUEUED_SCAN; i++, q = q->rq_next)
        if (q == t)
            return true;
    return false;
}

/* ==== run queues ==== */

/* Appends the chain first..last (linked by rq_next) to a queue. */
static void list_append(Process **head, Process **tail, Process *first, Process *last)
{
    last->rq_next = NULL;
    if (*tail)
        (*tail)->rq_next = first;
    else
        *head = first;
    *tail = last;
}

static Process *list_pop(Process **head, Process **tail)
{
    Process *p = *head;
    if (p) {
        *head = p->rq_next;
        if (!*head)
            *tail = NULL;
    }
    return p;
}

/* Appends first..last (n processes) to s's shared queue and wakes s if it
 * sleeps (any thread). */
static void rq_push_chain(Scheduler *s, Process *first, Process *last, size_t n)
{
    pthread_mutex_lock(&s->lock);
    list_append(&s->rq_head, &s->rq_tail, first, last);
    /* Relaxed: rq_len is a hint for readers without the lock (sched.h). */
    vm_atomic_store_relaxed(&s->rq_len, vm_atomic_load_relaxed(&s->rq_len) + n);
    bool wake = vm_atomic_load_relaxed(&s->sleeping);
    pthread_mutex_unlock(&s->lock);
    if (wake)
        pthread_cond_signal(&s->cond);
}

static Process *rq_pop_locked(Scheduler *s)
{
    Process *p = list_pop(&s->rq_head, &s->rq_tail);
    if (p)
        vm_atomic_store_relaxed(&s->rq_len, vm_atomic_load_relaxed(&s->rq_len) - 1);
    return p;
}

/* Appends p to s's local queue: only s's own thread. */
static void local_push(Scheduler *s, Process *p)
{
    list_append(&s->local_head, &s->local_tail, p, p);
    s->local_len++;
}

/* Moves the shared queue to the end of the local one (owner only). */
static void rq_drain(Scheduler *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->rq_head) {
        list_append(&s->local_head, &s->local_tail, s->rq_head, s->rq_tail);
        s->local_len += vm_atomic_load_relaxed(&s->rq_len);
        s->rq_head = s->rq_tail = NULL;
        vm_atomic_store_relaxed(&s->rq_len, 0);
    }
    pthread_mutex_unlock(&s->lock);
}

/* The next process to run (owner only): what others pushed is queued
 * behind what is already local, so both are served in order. */
static Process *rq_pop(Scheduler *s)
{
    if (vm_atomic_load_relaxed(&s->rq_len) > 0)
        rq_drain(s);
    Process *p = list_pop(&s->local_head, &s->local_tail);
    if (p)
        s->local_len--;
    return p;
}

/*
 * Hands the newer half of s's local queue to a sleeping scheduler and
 * wakes it (owner only; called between two processes when s has a
 * backlog).  Thieves take from a local queue only while it is lent (an
 * embedder native runs), so this is how idle schedulers get work a busy
 * one queued for itself.
 */
static void share_with_sleeper(Scheduler *s)
{
    SchedSystem *sys = s->sys;
    Scheduler *o = NULL;
    for (int k = 1; k < sys->n && !o; k++) {
        Scheduler *c = &sys->scheds[(s->id + k) % sys->n];
        if (vm_atomic_load_relaxed(&c->sleeping))
            o = c;
    }
    if (!o)
        return;
    size_t keep = (s->local_len + 1) / 2, give = s->local_len - keep;
    Process *last = s->local_head;
    for (size_t i = 1; i < keep; i++)
        last = last->rq_next;
    Process *first = last->rq_next, *tail = s->local_tail;
    last->rq_next = NULL;
    s->local_tail = last;
    s->local_len = keep;
    rq_push_chain(o, first, tail, give);
}

/*
 * Makes a RUNNABLE process run somewhere.  On a scheduler thread of this
 * system: on that scheduler's local queue (no lock, no wake-up; a backlog
 * is shared with sleepers between two processes), unless the queue is
 * lent (an embedder native of the running process spawned or woke p):
 * then as from any other thread.  From any other thread: on the
 * process's last scheduler, unless another one sleeps (then that one, so
 * idle cores pick work up at once).
 */
void vm_sched_enqueue(SchedSystem *sys, Process *p)
{
    Scheduler *self = tls_sched;
    /* Relaxed: the owner reads its own writes (or a thief's TAKING). */
    if (self && self->sys == sys && vm_atomic_load_relaxed(&self->lend) == LEND_OWNED) {
        local_push(self, p);
        return;
    }
    Scheduler *target = p->sched;
    if (!target) {
        unsigned i = (unsigned)vm_atomic_fetch_add_relaxed(&sys->spawn_rr, 1);
        target = &sys->scheds[i % (unsigned)sys->n];
    }
    if (!vm_atomic_load_relaxed(&target->sleeping)) {
        for (int i = 0; i < sys->n; i++) {
            if (vm_atomic_load_relaxed(&sys->scheds[i].sleeping)) {
                target = &sys->scheds[i];
                break;
            }
        }
    }
    rq_push_chain(target, p, p, 1);
}

/*
 * Takes the whole local queue of v, which is lent with work in it, if no
 * other thief or the owner got there first: returns its first process
 * and queues the others on self's local queue (self's own thread).
 */
static Process *take_lent(Scheduler *self, Scheduler *v)
{
    /* [LQ2'] full CAS (acquire): the queue as the owner's [LQ1] or the
     * last thief's [LQ2] left it. */
    if (vm_atomic_load_relaxed(&v->lend) != LEND_WORK ||
        !vm_atomic_cas_full(&v->lend, LEND_WORK, LEND_TAKING))
        return NULL;
    Process *first = v->local_head, *last = v->local_tail;
    size_t n = v->local_len;
    v->local_head = v->local_tail = NULL;
    v->local_len = 0;
    /* [LQ2] release: the emptied queue before the owner's [LQ3'] load
     * (or a failed [LQ3] CAS) reads EMPTY. */
    vm_atomic_store_release(&v->lend, LEND_EMPTY);
    if (!first)
        return NULL; /* LEND_WORK always has work: not reached */
    if (first != last) {
        list_append(&self->local_head, &self->local_tail, first->rq_next, last);
        self->local_len += n - 1;
    }
    return first;
}

/* Takes work from another scheduler: the oldest process of its shared
 * queue, or else everything queued behind an embedder native there. */
static Process *steal(Scheduler *self)
{
    SchedSystem *sys = self->sys;
    for (int k = 1; k < sys->n; k++) {
        Scheduler *v = &sys->scheds[(self->id + k) % sys->n];
        if (vm_atomic_load_relaxed(&v->rq_len) == 0 || pthread_mutex_trylock(&v->lock) != 0)
            continue;
        Process *p = rq_pop_locked(v);
        pthread_mutex_unlock(&v->lock);
        if (p)
            return p;
    }
    for (int k = 1; k < sys->n; k++) {
        Process *p = take_lent(self, &sys->scheds[(self->id + k) % sys->n]);
        if (p)
            return p;
    }
    return NULL;
}

/* Whether some other scheduler lends a queue with work in it ([LQ4']: a
 * full RMW read, after the caller's [LQ4] add to nidle). */
static bool lent_work(Scheduler *self)
{
    SchedSystem *sys = self->sys;
    for (int k = 1; k < sys->n; k++)
        if (vm_atomic_load_rmw_full(&sys->scheds[(self->id + k) % sys->n].lend) == LEND_WORK)
            return true;
    return false;
}

/* Wakes a sleeping scheduler other than s (one with work to lend).  Each
 * one's lock is taken, so that one between its idle add and its wait
 * either sees the lend ([LQ4']) before it waits or is waiting (sleeping
 * set under that lock) when signalled.  Out of line: inlined, its loop's
 * registers made every lend save and restore five (callgrind). */
static __attribute__((noinline)) void wake_one_sleeper(Scheduler *s)
{
    SchedSystem *sys = s->sys;
    for (int k = 1; k < sys->n; k++) {
        Scheduler *c = &sys->scheds[(s->id + k) % sys->n];
        pthread_mutex_lock(&c->lock);
        bool asleep = vm_atomic_load_relaxed(&c->sleeping);
        if (asleep)
            pthread_cond_signal(&c->cond);
        pthread_mutex_unlock(&c->lock);
        if (asleep)
            return;
    }
}

bool vm_sched_lend(Process *p)
{
    Scheduler *s = tls_sched;
    /* Alone in its system, a scheduler has nobody to lend to: a process
     * queued behind the native waits for this thread whatever is done. */
    if (!s || s->current != p || s->sys->n == 1 ||
        vm_atomic_load_relaxed(&s->lend) != LEND_OWNED)
        return false;
    p->lending = true;   /* p's own thread only (vm/process.h) */
    if (!s->local_head) {
        /* [LQ0] relaxed: nothing to take, and no thief or idle scheduler
         * acts on EMPTY; it only keeps this thread off its own queue (a
         * spawn or a wake-up by the native goes to a shared queue).  The
         * queue cannot gain work while lent, so EMPTY stays true. */
        vm_atomic_store_relaxed(&s->lend, LEND_EMPTY);
        return true;
    }
    /* [LQ1] release (only the owner leaves OWNED, so no CAS): the queue's
     * links and its processes before a thief's [LQ2'] CAS reads WORK. */
    vm_atomic_store_release(&s->lend, LEND_WORK);
    /* [LQ1'] full RMW read of nidle, pairs with [LQ4]: the two RMWs on
     * nidle are ordered; if [LQ4] came first this reads its count and
     * wakes a sleeper; if this came first, it is a release that [LQ4]
     * (acquire) reads from, so [LQ1] happens before that scheduler's
     * [LQ4'] reads of the lend words, which see WORK or later. */
    if (vm_atomic_load_rmw_full(&s->sys->nidle) > 0)
        wake_one_sleeper(s);
    return true;
}

/* Takes the local queue back (owner only): waits out a thief between its
 * [LQ2'] and [LQ2], a few stores long. */
static void lend_end(Scheduler *s)
{
    for (;;) {
        /* [LQ3'] acquire: an EMPTY stored by a thief's [LQ2] release, with
         * the queue as it left it. */
        uintptr_t st = vm_atomic_load_acquire(&s->lend);
        if (st == LEND_OWNED)
            return;
        /* EMPTY (the owner's [LQ0] or a thief's [LQ2]) has no other
         * writer: nobody but the owner leaves it ([LQ4']'s RMW reads
         * write back what they read). */
        if (st == LEND_EMPTY) {
            vm_atomic_store_relaxed(&s->lend, LEND_OWNED);
            return;
        }
        /* [LQ3] full CAS from WORK, against a thief's [LQ2'] CAS. */
        if (st == LEND_WORK && vm_atomic_cas_full(&s->lend, LEND_WORK, LEND_OWNED))
            return;
        if (st == LEND_TAKING)
            sched_yield();
    }
}

void vm_sched_lend_end(Process *p)
{
    /* The queue of the scheduler p is on now: the native may have
     * switched out and come back on another. */
    p->lending = false;
    Scheduler *s = tls_sched;
    if (s && vm_atomic_load_relaxed(&s->lend) != LEND_OWNED)
        lend_end(s);
}

/* ==== switching out, from the process's side ==== */

/* What the profiler wants (vm/hook.h). */
VmAtomic vm_pf_want;

/* To the scheduler's context; back when p is switched in again. */
static inline void switch_to_scheduler(Process *p)
{
    vm_il_switch_out(p);
    vm_fiber_tsan_switch(p->sched->tsan);
    vm_fiber_switch(&p->fiber->sp, p->sched->sp);
}

/* A wait while the off-CPU profile is on: its start and end reported. */
static __attribute__((noinline)) void wait_profiled(Process *p)
{
    vm_hook_pf_wait_begin(p);
    switch_to_scheduler(p);
    vm_hook_pf_wait_end(p);
}

void vm_proc_switch_out(Process *p)
{
    if (!p->want_wait) {
        if (!vm_sched_yield_to_next(p))
            switch_to_scheduler(p);
    } else if (vm_pf_wanted(VM_PF_OFF)) {
        /* A wait: one predicted branch more while no off-CPU profile
         * runs (a plain yield, above, has none). */
        wait_profiled(p);
    } else {
        switch_to_scheduler(p);
    }
    /* Back inside an embedder native that lent its queue (a wait or a
     * yield from it, through tvm_receive, tvm_sleep ...): the scheduler
     * took its queue back at the switch out (run()), so the rest of the
     * native, which may be long, would again hold up the processes
     * queued behind it.  Lend the queue of the scheduler p is on now. */
    if (VM_UNLIKELY(p->lending))
        vm_sched_lend(p);
}

/* A process inside a call_time-traced function (its clock stops while it
 * is switched out: breakpoints/bp_time.h), or with the running flag (the
 * out and in events are written on its own fiber, before and after the
 * switch, whichever way it goes: trace/tr_vm_proc.c). */
static void yield_traced(Process *p, bool running)
{
    if (running)
        vm_hook_sched_out(p);
    if (p->ct_live)
        vm_hook_time_out(p);
    vm_proc_switch_out(p);
    if (p->ct_live)
        vm_hook_time_in(p);
    /* Whatever the flag was at the switch out: the in event goes by the
     * flag now (the hook looks at it), see vm_proc_yield. */
    vm_hook_sched_in(p);
}

void vm_proc_yield(Process *p)
{
    /* Two predictable branches when p is neither timed nor traced. */
    bool running = vm_atomic_load_relaxed(&p->trace) & VM_TRACE_RUNNING;
    if (VM_UNLIKELY(p->ct_live != 0 || running)) {
        yield_traced(p, running);
        return;
    }
    vm_proc_switch_out(p);
    /* The running flag may have been set while p was switched out (a
     * waiting process traced by another): as BEAM's scheduler does, a
     * process that has the flag when it is switched in reports `in`,
     * though its `out` was never written.  A change for all was folded
     * into p's word before the switch in (trace_catch_up); a change of p
     * alone made before whatever woke p (a send after erlang:trace/3)
     * is ordered before this load by p's lock, which the wake takes; one
     * that races with the switch in is seen or not, as for any event.
     * One load and a predicted branch per switch. */
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&p->trace) & VM_TRACE_RUNNING))
        vm_hook_sched_in(p);
}

/* Makes a process that waits for some condition look at it again. */

/* ==== the scheduler loop ==== */


/* A process taken from a queue after a spawn or a wake-up (RUNNABLE):
 * RUNNING from now on, under its lock (tvm_processes reads the frames of
 * a process that is not RUNNING while holding it). */
static void mark_running(Process *p)
{
    pthread_mutex_lock(&p->lock);
    p->state = PS_RUNNING;
    pthread_mutex_unlock(&p->lock);
}

/* After a switch out that was not a plain yield: reaps an exited process
 * or decides between RUNNING (queued again) and WAITING; true to queue. */
static bool after_wait_or_exit(Scheduler *s, Process *p)
{
    pthread_mutex_lock(&p->lock);
    if (p->state == PS_EXITED) {
        pthread_mutex_unlock(&p->lock);
        vm_proc_reap(s->sys, p);
        return false;
    }
    p->want_wait = false;
    bool again = p->signaled;
    p->signaled = false;
    if (!again)
        p->state = PS_WAITING;
    pthread_mutex_unlock(&p->lock);
    return again;
}

/*
 * Right before switching into p, after this scheduler's quiescent state:
 * the changes of flags for all processes that p's word has not taken in
 * are folded in now.  The thread-progress wait that ends each
 * tvm_trace_flags_all orders its bump before this relaxed load (as it
 * orders the flip of vm->bp_ix before a breakpoint hit): a switch that
 * comes after the wait sees the bump (trace/tr_flags_all.c).  Two loads
 * (one acquire: a plain move on x86, ldar on aarch64) and a predicted
 * branch per switch.
 */
static inline void trace_catch_up(Process *p)
{
    /* Acquire ([TG2'] of trace/tr_flags_all.c): when another thread
     * folded p in, its word is read after the generation that says so. */
    if (VM_UNLIKELY(vm_atomic_load_acquire(&p->trace_gen) !=
                    vm_atomic_load_relaxed(&p->vm->trace_gen)))
        vm_hook_trace_fold(p);
}

/*
 * A time slice begins: VM_REDUCTIONS, or VM_REDUCTIONS_GP (a quarter)
 * within VM_PROGRESS_HURRY_NS of a grace period's ticket or of the wake
 * of the processes that waited for it (vm/progress.h,
 * vm_progress_hurry_until).  A process suspended in such a wait
 * (trace_pattern from VM code) starts again only when the process
 * running on its scheduler yields, and if that one had just begun a full
 * slice, the wait took that slice more.  A relaxed load per switch, and a
 * few more switches for a fraction of a millisecond after each grace
 * period (bench_pausefree --caller process, four invocations of each
 * build in turn: median latency 0.47-0.54 ms before, 0.31-0.42 after;
 * from a thread 0.29-0.44 and 0.27-0.28; the workers' gap ratios and
 * throughput unchanged, also with a 20 ms native holding each grace
 * period, which a window bounded in time, not one as long as the wait,
 * keeps from switching the other schedulers every short slice for 20 ms).
 */
static inline void slice_start(Process *p)
{
    p->reds = p->reds_slice = VM_UNLIKELY(vm_progress_hurry()) ? VM_REDUCTIONS_GP : VM_REDUCTIONS;
}

/*
 * The system monitor at a switch: in, one relaxed load of the VM's word
 * and a predicted branch while no monitor is set (vm/sysmon.c); out, a
 * test of the scheduler's own word, set only by a timed switch in.  The
 * out comes before anything else may take p (a queue, a waker, the
 * reaper), while its frames are still where it stopped.
 */
static inline void sysmon_in(Scheduler *s, Process *p)
{
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&p->vm->sysmon.on)))
        vm_sysmon_in(s, p);
}

static inline void sysmon_out(Scheduler *s, Process *p)
{
    if (VM_UNLIKELY(s->sysmon_in.ns))
        vm_sysmon_out(s, p);
}

static void run(Scheduler *s, Process *p)
{
    /* A process queued again after a yield is still RUNNING (nobody else
     * writes the state of a RUNNING process: this read races with nothing). */
    if (p->state != PS_RUNNING)
        mark_running(p);
    p->sched = s;
    p->bp_slot = 1 + (uint32_t)s->id;
    slice_start(p);
    s->current = p;
    trace_catch_up(p);
    sysmon_in(s, p);
    vm_fiber_tsan_switch(p->fiber->tsan);
    vm_fiber_switch(&s->sp, vm_il_switch_in(p));
    /* The process that switched back to us: not necessarily p, which may
     * have handed the scheduler straight to another (vm_sched_yield_to_next). */
    p = s->current;
    s->current = NULL;
    /* A process that switched out inside an embedder native (a wait, a
     * yield, its exit or a stack overflow) left the queue lent. */
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&s->lend) != LEND_OWNED))
        lend_end(s);
    vm_reds_account(p);
    sysmon_out(s, p);
    /* The process switched out: its context is saved in p->fiber->sp.  A
     * plain yield (no wait asked, not exited: both written by the process
     * on this thread) needs no lock: it stays RUNNING and queues again. */
    if (!(p->want_wait || p->state == PS_EXITED) || after_wait_or_exit(s, p))
        local_push(s, p);
    /* A backlog here while another scheduler sleeps: give it half. */
    if (s->local_len > 1 && vm_atomic_load_relaxed(&s->sys->nidle) > 0)
        share_with_sleeper(s);
}

/*
 * After a quiescent report: while a thread waits for a grace period, the
 * CPU is offered to it (vm/progress.c, "Handing over the CPU").  The
 * report that completes a grace period wakes its waiter on some CPU;
 * the scheduler that reports next there gives way to it, instead of the
 * waiter waiting for the OS to preempt a busy scheduler.  At most once
 * per VM_OFFER_GAP_NS per scheduler: a yield costs about 1.3 us even with
 * nothing else to run (on the development VM), and a grace period held up
 * by a long native would otherwise have the other schedulers yield at
 * every report for as long (bench_pausefree --hog-ms 20: the worker's
 * throughput 0.81-0.86 of the run without calls, against 0.87-0.92
 * without the offers; 0.89-0.91 with them at this rate).
 */
static void offer_cpu_now(Scheduler *s)
{
    const uint64_t now = vm_now_ns();
    if (now - s->offered_ns < VM_OFFER_GAP_NS)
        return;
    s->offered_ns = now;
    vm_atomic_fetch_add_relaxed(&s->sys->offers, 1);
    sched_yield();
}

static inline void offer_cpu(Scheduler *s)
{
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&vm_progress_wanted)))
        offer_cpu_now(s);
}

uint64_t vm_sched_offers(tvm_vm *vm)
{
    SchedSystem *sys = vm_sched_of(vm);
    return sys ? vm_atomic_load_relaxed(&sys->offers) : 0;
}

/*
 * The direct switch: a process that yields at the end of its time slice
 * (no wait asked) hands the scheduler straight to the next process of the
 * local queue, fiber to fiber, instead of switching to the scheduler's
 * context and from there to the next (two switches, and the scheduler
 * loop, per process switch).  It does on the process's behalf exactly
 * what run() and sched_main() would do between the two: queue p again
 * (still RUNNING), report a quiescent state (p has switched out as far as
 * thread progress is concerned: a yield point holds no reference to code
 * or breakpoint data), and start q.  Only when nothing else is due: no
 * stop or stop-the-world request, nothing pushed to the shared queue,
 * nobody asleep to share a backlog with, and q itself a process that
 * yielded (RUNNING, so starting it takes no lock).  Otherwise false, and
 * the caller takes the ordinary path through the scheduler.  The
 * scheduler's own context stays where it was, suspended in run(), which
 * reads s->current when it is resumed to learn who came back.
 */
bool vm_sched_yield_to_next(Process *p)
{
    Scheduler *s = p->sched;
    SchedSystem *sys = s->sys;
    /* A yield inside a native that lent the queue: take it back here, as
     * run() would after the switch out, before reading it; p lends again
     * when it is switched in (vm_proc_switch_out), and so does q if it
     * too was switched out inside such a native. */
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&s->lend) != LEND_OWNED))
        lend_end(s);
    Process *q = s->local_head;
    if (!q || q->state != PS_RUNNING || vm_atomic_load_relaxed(&s->rq_len) > 0 ||
        vm_atomic_load_relaxed(&sys->nidle) > 0 || vm_atomic_load_acquire(&sys->stopping) ||
        vm_atomic_load_acquire(&sys->stw))
        return false;
    list_pop(&s->local_head, &s->local_tail);
    s->local_len--;
    vm_reds_account(p);
    sysmon_out(s, p);
    local_push(s, p);
    vm_qsbr_quiescent();
    offer_cpu(s);
    q->sched = s;
    q->bp_slot = 1 + (uint32_t)s->id;
    slice_start(q);
    s->current = q;
    trace_catch_up(q);
    sysmon_in(s, q);
    vm_il_switch_out(p);
    void *sp = vm_il_switch_in(q);
    vm_fiber_tsan_switch(q->fiber->tsan);
    vm_fiber_switch_peer(&p->fiber->sp, sp);
    return true;
}

/*
 * Idle, with s->lock held and nothing queued: offline for thread progress,
 * then sleep until work is pushed here, a busy scheduler with a backlog
 * hands us some, or `ms` pass.  The one-second timeout of the ordinary
 * sleep is a safety net for a hand-over missed by the race between our
 * `sleeping` store and a busy scheduler's check; nothing is lost meanwhile
 * (the busy one runs its queue).
 */
static void sleep_locked(Scheduler *s, unsigned ms)
{
    vm_atomic_store_relaxed(&s->sleeping, 1);
    vm_qsbr_offline();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)ms * 1000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    vm_qsbr_online();
    vm_atomic_store_relaxed(&s->sleeping, 0);
}

/* Nothing to do, here or lent by another scheduler, and nobody asking
 * us to stop or to park ([SW1']).  After our [LQ4] add to nidle. */
static bool idle_locked(Scheduler *s)
{
    return !s->rq_head && !vm_atomic_load_acquire(&s->sys->stopping) &&
           !vm_atomic_load_acquire(&s->sys->stw) && !lent_work(s);
}

/* Whether no scheduler has gone idle again since our own entry number
 * `entry`, and all still are: nobody ran work in between (a scheduler that
 * found work left the idle count, and counts a new entry when it is back). */
static bool stayed_idle(SchedSystem *sys, uintptr_t entry)
{
    return vm_atomic_load_relaxed(&sys->idle_entries) == entry &&
           vm_atomic_load_relaxed(&sys->nidle) == (uintptr_t)sys->n;
}

static void *sched_main(void *arg)
{
    Scheduler *s = arg;
    SchedSystem *sys = s->sys;
    s->tsan = vm_fiber_tsan_current();
    tls_sched = s;
    vm_overflow_thread_start(s);
    /* [TID1] release: pairs with [TID1'] in the profiler, which aims its
     * per-thread CPU-time timer at this id. */
    vm_atomic_store_release(&s->tid, (uintptr_t)gettid());
    vm_qsbr_sched_register();
    for (;;) {
        /* A VM being destroyed stops between two processes, even with work
         * queued: whatever is left is freed by vm_sched_stop(). */
        if (vm_atomic_load_acquire(&sys->stopping))
            break;
        /* [SW1'] acquire: a stop-the-world trace_pattern parks us here,
         * between two processes. */
        if (VM_UNLIKELY(vm_atomic_load_acquire(&sys->stw)))
            vm_stw_park(sys);
        Process *p = rq_pop(s);
        if (!p)
            p = steal(s);
        if (p) {
            run(s, p);
            /* Between two processes: a quiescent state for thread progress. */
            vm_qsbr_quiescent();
            offer_cpu(s);
            continue;
        }
        pthread_mutex_lock(&s->lock);
        if (vm_atomic_load_acquire(&sys->stopping)) {
            pthread_mutex_unlock(&s->lock);
            break;
        }
        if (!s->rq_head) {
            /* Going idle: the cache of ended processes goes to the spare
             * list, where a scheduler still busy spawns from it; the last
             * scheduler to go idle frees the spare list and gives the
             * stacks of processes that ended back to the OS, once the VM
             * has stayed idle a little while, so that a burst that follows
             * at once reuses them without a system call. */
            /* [LQ4] full: this add before the [LQ4'] reads of the lend
             * words in idle_locked (pairs with a lender's [LQ1]/[LQ1']). */
            uintptr_t idle = vm_atomic_fetch_add_full(&sys->nidle, 1);
            uintptr_t entry = vm_atomic_fetch_add_relaxed(&sys->idle_entries, 1) + 1;
            bool last = idle == (uintptr_t)sys->n - 1;
            if (last) {
                sleep_locked(s, VM_POOL_TRIM_DELAY_MS);
                last = stayed_idle(sys, entry);
            }
            if (idle_locked(s) && (s->cache || last)) {
                pthread_mutex_unlock(&s->lock);
                vm_qsbr_offline();
                /* A busy scheduler may spawn from what we ended; once the
                 * whole VM stayed idle, everything goes. */
                if (last || !vm_sched_spare_give(s))
                    vm_sched_cache_flush(s);
                if (last) {
                    vm_sched_spare_flush(sys);
                    vm_fiber_pool_trim(&sys->pool);
                }
                vm_qsbr_online();
                pthread_mutex_lock(&s->lock);
            }
            if (idle_locked(s))
                sleep_locked(s, 1000);
            vm_atomic_fetch_add_relaxed(&sys->nidle, (uintptr_t)-1);
        }
        pthread_mutex_unlock(&s->lock);
    }
    vm_qsbr_sched_unregister();
    vm_overflow_thread_stop(s);
    tls_sched = NULL;
    return NULL;
}

/* ==== start and stop ==== */

int vm_sched_count_for(int n)
{
    if (n > 0)
        return n;
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

SchedSystem *vm_sched_start(tvm_vm *vm, int n)
{
    pthread_mutex_lock(&vm->code_lock);
    SchedSystem *sys = vm_sched_of(vm);
    if (sys) {
        pthread_mutex_unlock(&vm->code_lock);
        return sys;
    }
    n = vm_sched_count_for(n);
    sys = vm_calloc(1, sizeof(SchedSystem));
    sys->vm = vm;
    sys->n = n;
    sys->crash_reports = vm->crash_reports;
    pthread_mutex_init(&sys->lock, NULL);
    pthread_cond_init(&sys->exited, NULL);
    sys->cap = 1024;
    sys->table = vm_calloc(sys->cap, sizeof(Process *));
    sys->next_pid = 1;
    vm_fiber_pool_init(&sys->pool, vm->fiber_stack, 4096);
    if (vm->fiber_slabs)
        vm_fiber_pool_use_slabs(&sys->pool);
    pthread_mutex_init(&sys->spare_lock, NULL);
    pthread_mutex_init(&sys->stw_lock, NULL);
    pthread_cond_init(&sys->stw_cond, NULL);
    sys->scheds = vm_calloc((size_t)n, sizeof(Scheduler));
    for (int i = 0; i < n; i++) {
        Scheduler *s = &sys->scheds[i];
        s->sys = sys;
        s->id = i;
        pthread_mutex_init(&s->lock, NULL);
        vm_cond_init_monotonic(&s->cond);
    }
    for (int i = 0; i < n; i++)
        if (pthread_create(&sys->scheds[i].thread, NULL, sched_main, &sys->scheds[i]) != 0)
            vm_die("cannot start a scheduler thread");
    vm_timers_start(&sys->timers, sys);
    /* Publish last: everything above is initialised before anyone can see it. */
    /* [SC1] release: pairs with [SC1'] in vm_sched_of(). */
    vm_atomic_store_ptr_release(&vm->sched, sys);
    pthread_mutex_unlock(&vm->code_lock);
    return sys;
}

void vm_sched_stop(tvm_vm *vm)
{
    SchedSystem *sys = vm_sched_of(vm);
    if (!sys)
        return;
    /* [ST1] release: pairs with the acquire loads in sched_main(). */
    vm_atomic_store_release(&sys->stopping, 1);
    for (int i = 0; i < sys->n; i++) {
        pthread_mutex_lock(&sys->scheds[i].lock);
        pthread_cond_signal(&sys->scheds[i].cond);
        pthread_mutex_unlock(&sys->scheds[i].lock);
    }
    for (int i = 0; i < sys->n; i++) {
        pthread_join(sys->scheds[i].thread, NULL);
        vm_sched_cache_flush(&sys->scheds[i]);
    }
    vm_sched_spare_flush(sys);
    vm_timers_stop(&sys->timers);
    vm_proc_free_all(sys);
    vm_fiber_pool_destroy(&sys->pool);
    for (int i = 0; i < sys->n; i++) {
        pthread_mutex_destroy(&sys->scheds[i].lock);
        pthread_cond_destroy(&sys->scheds[i].cond);
    }
    pthread_mutex_destroy(&sys->spare_lock);
    pthread_mutex_destroy(&sys->stw_lock);
    pthread_cond_destroy(&sys->stw_cond);
    free(sys->scheds);
    free(sys->table);
    free(sys);
    vm_atomic_store_ptr_release(&vm->sched, NULL);
}
