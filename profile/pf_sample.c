/*
 * profile/pf_sample.c - taking samples: the CPU-time timers and their
 * signal handler, the off-CPU and allocation hooks, the per-scheduler
 * rings they write into, and starting and stopping a session.
 *
 * Protocol 1: the CPU sample (async-signal-safety).
 *   Each scheduler thread gets a POSIX timer on its own CPU-time clock
 *   (pthread_getcpuclockid), delivered to that very thread
 *   (SIGEV_THREAD_ID, the kernel id the scheduler publishes in
 *   Scheduler.tid): the timer runs only while the thread runs, so idle
 *   schedulers are not sampled and a busy one is sampled in proportion to
 *   the CPU it uses.  The handler (SA_SIGINFO | SA_RESTART | SA_ONSTACK,
 *   every signal blocked while it runs, errno saved) runs on the thread it
 *   samples, so what it reads of the scheduler (s->current) and of the
 *   process it runs (its fiber's bounds, its frames) holds still: the
 *   interrupted code cannot run until the handler returns.  It
 *     - ignores signals not sent by a timer (si_code != SI_TIMER), signals
 *       on a thread that is not a scheduler of the profiled VM, and
 *       signals with no live session;
 *     - reserves room for the largest record in its scheduler's `sig`
 *       ring, or counts a lost sample when there is none;
 *     - walks the interrupted stack from the ucontext's pc, fp and sp with
 *       stacks/'s bounded walk (st_walk_interrupted: loads within bounds
 *       only, and the recovery above code without frame pointers), inside
 *       the running process's fiber when sp is in it and the pc is not in
 *       the context switch, else inside the scheduler thread's own stack
 *       (the scheduler itself: its loop, stealing, a process's switch);
 *     - copies the process's VM frames (function and pc pointers as they
 *       are: they are named later, off the scheduler, and only if they
 *       name a function the VM has: a frame being pushed at the instant
 *       of the signal may hold anything);
 *     - publishes the record ([PR1] release of head).
 *   No malloc, no lock, no libunwind, no symbol lookup, no system call
 *   but clock_gettime (vDSO) for its own cost: loads within known
 *   bounds, stores into the preallocated ring, and two atomic
 *   read-modify-writes on pf_inflight.  The weight of a sample is
 *   1 + si_overrun: expirations the kernel merged into this one (a CPU
 *   timer is checked at the scheduler tick, so above the tick rate
 *   several periods fall into one signal) count where they fell.
 *
 * Protocol 2: off-CPU and allocation samples.
 *   vm/ calls vm_hook_pf_wait_begin/_end around a wait and
 *   vm_hook_pf_alloc when an allocation passes a sample point (only while
 *   vm_pf_want asks for them).  They run on the process's own fiber, on a
 *   scheduler thread, as ordinary code: the stack is walked from the
 *   hook's caller within the fiber, and the record goes to the `thr`
 *   ring of the scheduler the process runs on.  The only other producer
 *   on that thread is the handler, which writes the other ring, so each
 *   ring has exactly one producer: its thread, in or out of the handler.
 *   A wait is charged when it ends, with the time since it began and the
 *   stack it waited in: the stack of a suspended process does not change
 *   while it waits.  A wait that began before the session did (under an
 *   earlier session, whose VM_PF_OFF it saw) is not charged.
 *
 * Protocol 3: the rings and the hand-off to the aggregator.
 *   PfRing is single-producer, single-consumer over a byte buffer with
 *   monotonic head and tail counters (see pf_internal.h).  The producer
 *   reserves PF_REC_MAX contiguous bytes (writing a skip mark, size 0,
 *   where the buffer's end is too near), writes the record in place and
 *   publishes head with a release store ([PR1]); the aggregator thread
 *   loads head with acquire ([PR1']), reads records up to it and then
 *   releases tail ([PR2]), which the producer loads with acquire before
 *   it reuses the space ([PR2']).  A full ring costs a lost sample, never
 *   a wait: nothing on a scheduler waits for the aggregator.
 *
 * Protocol 4: the session's end.
 *   A producer finds the session through pf_live and announces itself in
 *   pf_inflight: a full read-modify-write increment, then the load of
 *   pf_live, then the decrement when done.  Stopping deletes the timers,
 *   clears vm_pf_want, sets pf_live = NULL with a full-barrier CAS ([PF2])
 *   and then reads pf_inflight with a full read-modify-write until it is 0
 *   ([PF2']): a Dekker handshake, so every producer either saw NULL or is
 *   waited for.  Only then does the aggregator make its last drain.  A
 *   timer signal still pending after its timer was deleted arrives later
 *   and finds no session (or the next session: one stray sample); the
 *   handler stays installed for the life of the OS process, so such a
 *   signal never meets the default action.
 */
#define _GNU_SOURCE
#include "profile/pf_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vm/arch_ucontext.h"
#include "vm/api_error.h"
#include "vm/common.h"
#include "vm/fiber.h"
#include "vm/hook.h"
#include "vm/timer.h"
#include "vm/vm.h"

/* The session being sampled, or 0 ([PF1] release at the start, [PF2] full
 * store at the stop; loaded with acquire by producers). */
static VmAtomic pf_live;
/* Producers at work (see protocol 4). */
static VmAtomic pf_inflight;

/* ==== rings ==== */

/* Room for the largest record at the ring's head, or NULL (lost).  The
 * producer's own thread only. */
ST_NO_SANITIZE static PfRec *ring_reserve(PfRing *r, uint64_t *at)
{
    uint64_t head = vm_atomic_load_relaxed(&r->head);
    /* [PR2'] acquire: the consumer is done with the bytes before tail. */
    uint64_t tail = vm_atomic_load_acquire(&r->tail);
    size_t off = (size_t)(head % r->cap);
    if (r->cap - off < PF_REC_MAX) {
        if (head - tail + (r->cap - off) + PF_REC_MAX > r->cap)
            return NULL;
        ((PfRec *)(r->buf + off))->size = 0;
        head += r->cap - off;
        off = 0;
    } else if (head - tail + PF_REC_MAX > r->cap) {
        return NULL;
    }
    *at = head;
    return (PfRec *)(r->buf + off);
}

static void ring_commit(PfRing *r, uint64_t at, PfRec *rec)
{
    rec->size = (uint32_t)((sizeof(PfRec) + rec->nnative * sizeof(StNative) +
                            rec->nvm * sizeof(StVm) + 7) & ~(size_t)7);
    /* [PR1] release: the record's bytes before the head that shows them. */
    vm_atomic_store_release(&r->head, at + rec->size);
}

static void ring_lost(PfRing *r)
{
    vm_atomic_store_relaxed(&r->lost, vm_atomic_load_relaxed(&r->lost) + 1);
}

/* The VM frames of p into the record (st_copy_frames: its innermost
 * ST_MAX_VM); the caller makes sure they hold still. */
ST_NO_SANITIZE static void copy_vm(const Process *p, PfRec *rec)
{
    StVm *out = (StVm *)((char *)(rec + 1) + rec->nnative * sizeof(StNative));
    uint32_t dropped;
    rec->nvm = (uint16_t)st_copy_frames(p, out, &dropped);
    rec->cut = dropped > 0;
}

/* ==== protocol 1: the CPU sample ==== */

ST_NO_SANITIZE static bool in_switch(uintptr_t pc)
{
    return pc >= (uintptr_t)&vm_fiber_switch && pc < (uintptr_t)vm_fiber_switch_end;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

ST_NO_SANITIZE static void sample_cpu(PfSched *ps, Scheduler *s, const ucontext_t *uc,
                                      uint64_t weight)
{
    uint64_t t0 = mono_ns();
    uint64_t at;
    PfRec *rec = ring_reserve(&ps->sig, &at);
    if (!rec) {
        ring_lost(&ps->sig);
        return;
    }
    uintptr_t pc = vm_uc_pc(uc), fp = vm_uc_fp(uc), sp = vm_uc_sp(uc);
    StNative *nat = (StNative *)(rec + 1);
    bool broken = false;
    Process *cur = s->current;
    rec->sched = (uint32_t)s->id;
    rec->weight = weight;
    rec->nvm = 0;
    rec->cut = false;
    uintptr_t lo = 0, hi = 0;
    if (cur && cur->fiber) {
        lo = (uintptr_t)cur->fiber->stack_lo;
        hi = (uintptr_t)cur->fiber->stack_hi;
    }
    if (cur && sp >= lo && sp < hi && !in_switch(pc)) {
        rec->what = PF_WHAT_PROCESS;
        rec->pid = cur->pid;
        rec->nnative = (uint16_t)st_walk_interrupted(pc, fp, sp, lo, hi, vm_fiber_entry_ret,
                                                     nat, ST_MAX_NATIVE, &broken);
        copy_vm(cur, rec);
    } else {
        rec->what = PF_WHAT_SCHED;
        rec->pid = 0;
        if (sp >= ps->stack_lo && sp < ps->stack_hi)
            rec->nnative = (uint16_t)st_walk_interrupted(pc, fp, sp, ps->stack_lo, ps->stack_hi,
                                                         0, nat, ST_MAX_NATIVE, &broken);
        else {
            /* On another stack (a fiber in the middle of a switch, an
             * alternate signal stack): the pc alone. */
            nat[0] = (StNative){ pc, 0 };
            rec->nnative = 1;
        }
    }
    rec->broken = broken;
    ring_commit(&ps->sig, at, rec);
    vm_atomic_store_relaxed(&ps->handler_ns,
                            vm_atomic_load_relaxed(&ps->handler_ns) + (mono_ns() - t0));
}

ST_NO_SANITIZE static void handler(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    if (si->si_code != SI_TIMER)
        return;
    int saved_errno = errno;
    vm_atomic_fetch_add_full(&pf_inflight, 1);
    tvm_profile *S = vm_atomic_load_ptr_acquire(&pf_live);
    Scheduler *s = vm_current_scheduler();
    if (S && s && s->sys == S->sys && S->kind == TVM_PROFILE_CPU && s->id < S->n) {
        PfSched *ps = &S->sched[s->id];
        int over = si->si_overrun > 0 ? si->si_overrun : 0;
        if (over)
            vm_atomic_store_relaxed(&ps->overruns,
                                    vm_atomic_load_relaxed(&ps->overruns) + (uintptr_t)over);
        sample_cpu(ps, s, ucv, 1 + (uint64_t)over);
    }
    vm_atomic_fetch_add_full(&pf_inflight, (uintptr_t)-1);
    errno = saved_errno;
}

/* ==== protocol 2: samples taken by process code ==== */

/* The live session if it profiles `kind` and p runs on one of its
 * schedulers (*ps: that scheduler's part), announced in pf_inflight; the
 * caller calls leave() after, whatever this returned. */
static tvm_profile *enter(Process *p, tvm_profile_kind kind, PfSched **ps)
{
    vm_atomic_fetch_add_full(&pf_inflight, 1);
    tvm_profile *S = vm_atomic_load_ptr_acquire(&pf_live);
    Scheduler *s = vm_current_scheduler();
    if (!S || S->kind != kind || !s || s->sys != S->sys || p->sched != s || s->id >= S->n)
        return NULL;
    *ps = &S->sched[s->id];
    return S;
}

static void leave(void)
{
    vm_atomic_fetch_add_full(&pf_inflight, (uintptr_t)-1);
}

/*
 * Records p's stack, walked from the caller of the hook that called this
 * (the hook's own frame and this one are left out), into the scheduler's
 * thr ring; with_native false keeps the VM frames only.
 */
__attribute__((noinline)) ST_NO_SANITIZE static void sample_self(PfSched *ps, Process *p,
                                                                 uint64_t weight,
                                                                 bool with_native)
{
    uint64_t at;
    PfRec *rec = ring_reserve(&ps->thr, &at);
    if (!rec) {
        ring_lost(&ps->thr);
        return;
    }
    rec->what = PF_WHAT_PROCESS;
    rec->pid = p->pid;
    rec->sched = (uint32_t)p->sched->id;
    rec->weight = weight;
    rec->nnative = 0;
    rec->nvm = 0;
    bool broken = false;
    if (with_native && p->fiber) {
        uintptr_t lo = (uintptr_t)p->fiber->stack_lo, hi = (uintptr_t)p->fiber->stack_hi;
        const uintptr_t *fp = __builtin_frame_address(0);
        /* fp[0]: the hook's frame; its [0] and [1]: the hook's caller's
         * frame and the return address into it. */
        uintptr_t hook = fp[0];
        if (hook >= lo && hook + 16 <= hi && !(hook & 7)) {
            const uintptr_t *h = (const uintptr_t *)hook;
            rec->nnative = (uint16_t)st_walk_fp(h[1], h[0], lo, hi, (StNative *)(rec + 1),
                                                ST_MAX_NATIVE, &broken);
        }
    }
    rec->broken = broken;
    copy_vm(p, rec);
    ring_commit(&ps->thr, at, rec);
}

void vm_hook_pf_wait_begin(Process *p)
{
    p->pf_wait_t0 = vm_now_ns();
    p->pf_woken = 0;
}

__attribute__((noinline)) void vm_hook_pf_wait_end(Process *p)
{
    /* Up to the wake (vm/mailbox.c), or to now for a wait no waker ended
     * (a wake that came before the switch, a yield to the scheduler). */
    uint64_t t1 = p->pf_woken > p->pf_wait_t0 ? p->pf_woken : vm_now_ns();
    PfSched *ps;
    tvm_profile *S = enter(p, TVM_PROFILE_OFF, &ps);
    /* A wait that began before this session did is not counted
     * (docs/profiling.md): one that began under an earlier off-CPU
     * session and ended in this one was charged from this one's start.
     * A wait that saw this session's VM_PF_OFF began after t_start, which
     * is taken before the bit is set. */
    if (S && p->pf_wait_t0 >= S->t_start && t1 > p->pf_wait_t0)
        sample_self(ps, p, t1 - p->pf_wait_t0, true);
    leave();
}

__attribute__((noinline)) void vm_hook_pf_alloc(Process *p, uint64_t samples)
{
    PfSched *ps;
    tvm_profile *S = enter(p, TVM_PROFILE_ALLOC, &ps);
    if (S)
        sample_self(ps, p, samples * S->alloc_mean_words * sizeof(Term), false);
    leave();
}

/* ==== starting and stopping ==== */

static pthread_mutex_t pf_global = PTHREAD_MUTEX_INITIALIZER;
static tvm_profile *pf_active;       /* under pf_global */

static bool ring_init(PfRing *r, size_t cap)
{
    cap = (cap + 7) & ~(size_t)7;
    if (cap < 2 * PF_REC_MAX)
        cap = 2 * PF_REC_MAX;
    r->buf = malloc(cap);
    r->cap = cap;
    return r->buf != NULL;
}

void pf_rings_free(tvm_profile *S)
{
    for (int i = 0; S->sched && i < S->n; i++) {
        free(S->sched[i].sig.buf);
        free(S->sched[i].thr.buf);
    }
    free(S->sched);
    S->sched = NULL;
}

uint64_t pf_lost(const tvm_profile *S)
{
    uint64_t n = 0;
    for (int i = 0; S->sched && i < S->n; i++)
        n += vm_atomic_load_relaxed(&S->sched[i].sig.lost) +
             vm_atomic_load_relaxed(&S->sched[i].thr.lost);
    return n;
}

static void delete_timers(tvm_profile *S)
{
    for (int i = 0; i < S->n; i++) {
        if (S->sched[i].has_timer)
            timer_delete(S->sched[i].timer);
        S->sched[i].has_timer = false;
    }
}

/* The timers of every scheduler (not armed yet); false with err set. */
static bool make_timers(tvm_profile *S, tvm_error *err)
{
    for (int i = 0; i < S->n; i++) {
        Scheduler *s = &S->sys->scheds[i];
        PfSched *ps = &S->sched[i];
        /* [TID1'] acquire: the scheduler thread publishes its id as it
         * starts (vm/sched.c); a just-started VM may not be there yet. */
        uintptr_t tid;
        for (int k = 0; (tid = vm_atomic_load_acquire(&s->tid)) == 0 && k < 10000; k++) {
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
        }
        clockid_t cid;
        pthread_attr_t a;
        void *addr = NULL;
        size_t size = 0;
        if (pthread_getattr_np(s->thread, &a) == 0) {
            pthread_attr_getstack(&a, &addr, &size);
            pthread_attr_destroy(&a);
        }
        ps->stack_lo = (uintptr_t)addr;
        ps->stack_hi = (uintptr_t)addr + size;
        int rc = tid ? pthread_getcpuclockid(s->thread, &cid) : ESRCH;
        if (rc != 0) {
            vm_api_fail(err, TVM_ERR_IO, "tvm_profile_start: no CPU clock for scheduler %d: %s", i,
                        strerror(rc));
            return false;
        }
        struct sigevent sev;
        memset(&sev, 0, sizeof sev);
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = S->signo;
        sev.sigev_value.sival_int = i;
        sev._sigev_un._tid = (pid_t)tid;
        if (timer_create(cid, &sev, &ps->timer) != 0) {
            vm_api_fail(err, TVM_ERR_IO, "tvm_profile_start: timer_create for scheduler %d: %s", i,
                        strerror(errno));
            return false;
        }
        ps->has_timer = true;
    }
    return true;
}

/* Our handler on signo, unless the signal has another (the embedder's):
 * installing over it would take the signal from its owner without a
 * word, and its owner's signals would then be taken for timer samples.
 * Checked at every start, not once: the embedder may have installed its
 * own since an earlier profile (the capture refuses the same way:
 * st_configure).  Under pf_global. */
static tvm_status install(int signo, tvm_error *err)
{
    if (!st_signal_free(signo, handler))
        return vm_api_fail(err, TVM_ERR_BADARG,
                           "tvm_profile_start: signal %d (SIGRTMIN+%d) already has a handler that "
                           "is not the profiler's; give another signo",
                           signo, signo - SIGRTMIN);
    int e = st_install_handler(signo, handler);
    if (e != 0)
        return vm_api_fail(err, TVM_ERR_IO,
                           "tvm_profile_start: sigaction(%d): %s", signo, strerror(e));
    return TVM_OK;
}

tvm_status pf_start(tvm_profile *S, tvm_error *err)
{
    S->sys = vm_sched_start(S->vm, S->vm->schedulers);
    S->n = S->sys->n;
    S->sched = vm_calloc((size_t)S->n, sizeof(PfSched));
    /* The CPU ring holds about 200 ms of samples at the rate asked for
     * (drained every 50 ms), the other 1 MiB (drained every 10 ms). */
    size_t sig_cap = (size_t)S->hz * 2048 / 5, thr_cap = (size_t)1 << 20;
    for (int i = 0; i < S->n; i++) {
        bool ok = S->kind == TVM_PROFILE_CPU ? ring_init(&S->sched[i].sig, sig_cap)
                                             : ring_init(&S->sched[i].thr, thr_cap);
        if (!ok) {
            pf_rings_free(S);
            return vm_api_fail(err, TVM_ERR_LIMIT, "tvm_profile_start: no memory for the buffers");
        }
    }
    pthread_mutex_lock(&pf_global);
    if (pf_active) {
        pthread_mutex_unlock(&pf_global);
        pf_rings_free(S);
        return vm_api_fail(err, TVM_ERR_EXISTS, "tvm_profile_start: a profile is already running");
    }
    /* The aggregator first: the OS may refuse a thread (a limit, no
     * memory for its stack), and nothing is published yet to take back.
     * It drains empty rings until stopping is set (0 since the calloc). */
    if (pthread_create(&S->agg, NULL, pf_agg_main, S) != 0) {
        pthread_mutex_unlock(&pf_global);
        pf_rings_free(S);
        return vm_api_fail(err, TVM_ERR_LIMIT,
                           "tvm_profile_start: cannot start the profiler's thread");
    }
    if (S->kind == TVM_PROFILE_CPU) {
        tvm_status st = install(S->signo, err);
        if (st == TVM_OK && !make_timers(S, err))
            st = TVM_ERR_IO;
        if (st != TVM_OK) {
            delete_timers(S);
            vm_atomic_store_release(&S->stopping, 1);
            pthread_join(S->agg, NULL);
            pthread_mutex_unlock(&pf_global);
            pf_rings_free(S);
            return st;
        }
    }
    /* Before [PF1]: the handler's recovery above foreign code needs the
     * text range (stacks/st_walk.c). */
    st_walk_learn_text();
    pf_active = S;
    S->t_start = vm_now_ns();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    S->wall_start_ns = (uint64_t)wall.tv_sec * 1000000000u + (uint64_t)wall.tv_nsec;
    /* [PF1] release: the session's fields and rings before producers find
     * it (pairs with their acquire loads of pf_live). */
    vm_atomic_store_ptr_release(&pf_live, S);
    if (S->kind == TVM_PROFILE_OFF)
        vm_atomic_update_bits(&vm_pf_want, VM_PF_OFF, true);
    if (S->kind == TVM_PROFILE_ALLOC) {
        vm_atomic_store_relaxed(&vm_pf_alloc_mean, S->alloc_mean_words);
        vm_atomic_update_bits(&vm_pf_want, VM_PF_ALLOC, true);
    }
    if (S->kind == TVM_PROFILE_CPU) {
        long period = 1000000000L / (long)S->hz;
        struct itimerspec its = { { period / 1000000000L, period % 1000000000L },
                                  { period / 1000000000L, period % 1000000000L } };
        for (int i = 0; i < S->n; i++)
            timer_settime(S->sched[i].timer, 0, &its, NULL);
    }
    S->running = true;
    pthread_mutex_unlock(&pf_global);
    return TVM_OK;
}

tvm_profile *pf_running(tvm_vm *vm)
{
    pthread_mutex_lock(&pf_global);
    tvm_profile *S = pf_active && pf_active->vm == vm ? pf_active : NULL;
    pthread_mutex_unlock(&pf_global);
    return S;
}

void pf_stop(tvm_profile *S)
{
    pthread_mutex_lock(&pf_global);
    if (!S->running) {
        pthread_mutex_unlock(&pf_global);
        return;
    }
    delete_timers(S);
    vm_atomic_update_bits(&vm_pf_want, VM_PF_OFF | VM_PF_ALLOC, false);
    vm_atomic_store_relaxed(&vm_pf_alloc_mean, 0);
    /* [PF2] a full store, then [PF2'] full reads of pf_inflight: every
     * producer saw no session or is waited for (protocol 4). */
    /* (A CAS rather than a store and a fence: ThreadSanitizer knows
     * read-modify-writes, not fences.) */
    uintptr_t live = vm_atomic_load_relaxed(&pf_live);
    while (!vm_atomic_cas_full(&pf_live, live, 0))
        live = vm_atomic_load_relaxed(&pf_live);
    while (vm_atomic_load_rmw_full(&pf_inflight) != 0)
        sched_yield();
    /* Under S->lock: tvm_profile_get_stats and the writers read it from
     * other threads, under the same lock. */
    pthread_mutex_lock(&S->lock);
    S->t_stop = vm_now_ns();
    pthread_mutex_unlock(&S->lock);
    /* The aggregator's last drain sees every record. */
    vm_atomic_store_release(&S->stopping, 1);
    pthread_join(S->agg, NULL);
    S->running = false;
    pf_active = NULL;
    pthread_mutex_unlock(&pf_global);
}
