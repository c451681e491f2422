/*
 * vm/sched.c - scheduler threads, run queues with stealing, the timer
 * thread, and QSBR scheduling points.
 *
 * Protocol: running a process.
 *   A scheduler pops a RUNNABLE process from its queue (or steals one),
 *   marks it RUNNING under the process lock, switches into its fiber and
 *   gets control back when the process yields, waits or exits.  Only then,
 *   with the process's context saved, does the scheduler decide what it
 *   becomes: RUNNABLE again (yield), WAITING (it asked to wait and nothing
 *   arrived meanwhile: `signaled` is clear), or it is reaped (EXITED).
 *   Because the WAITING decision is made after the switch, a sender or
 *   timer that wakes a WAITING process always finds a saved context, and a
 *   wake-up that arrives while the process is still RUNNING sets
 *   `signaled`, which the scheduler sees under the same lock.
 *
 * Thread progress: each scheduler is registered with liburcu QSBR, calls
 * rcu_quiescent_state() between two processes (the process has switched
 * out, so the scheduler holds no reference to VM code or breakpoint data)
 * and is offline while it sleeps, so a grace period never waits for an
 * idle scheduler.
 */
#include "vm/sched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vm/module.h"
#include "vm/qsbr.h"

/* The scheduler the calling thread is, if it is one (set by sched_main). */
static _Thread_local Scheduler *tls_sched;

Process *vm_running_process(void)
{
    Scheduler *s = tls_sched;
    return s ? s->current : NULL;
}

uint64_t vm_now_ns(void);
uint64_t vm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ==== run queues ==== */

/* Appends p to s's queue and wakes s if it sleeps; returns the length. */
static size_t rq_push(Scheduler *s, Process *p)
{
    pthread_mutex_lock(&s->lock);
    p->rq_next = NULL;
    if (s->rq_tail)
        s->rq_tail->rq_next = p;
    else
        s->rq_head = p;
    s->rq_tail = p;
    size_t len = ++s->rq_len;
    bool wake = vm_atomic_load_relaxed(&s->sleeping);
    pthread_mutex_unlock(&s->lock);
    if (wake)
        pthread_cond_signal(&s->cond);
    return len;
}

/* Wakes one sleeping scheduler (other than `self`) so that it steals. */
static void wake_a_sleeper(SchedSystem *sys, const Scheduler *self)
{
    for (int i = 0; i < sys->n; i++) {
        Scheduler *o = &sys->scheds[i];
        if (o != self && vm_atomic_load_relaxed(&o->sleeping)) {
            pthread_mutex_lock(&o->lock);
            pthread_cond_signal(&o->cond);
            pthread_mutex_unlock(&o->lock);
            return;
        }
    }
}

static Process *rq_pop_locked(Scheduler *s)
{
    Process *p = s->rq_head;
    if (p) {
        s->rq_head = p->rq_next;
        if (!s->rq_head)
            s->rq_tail = NULL;
        s->rq_len--;
    }
    return p;
}

/*
 * Makes a RUNNABLE process run somewhere: on its last scheduler, unless
 * another one sleeps (then that one, so idle cores pick work up at once).
 */
void vm_sched_enqueue(SchedSystem *sys, Process *p);
void vm_sched_enqueue(SchedSystem *sys, Process *p)
{
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
    rq_push(target, p);
}

/* Takes work from another scheduler's queue (the oldest process). */
static Process *steal(Scheduler *self)
{
    SchedSystem *sys = self->sys;
    for (int k = 1; k < sys->n; k++) {
        Scheduler *v = &sys->scheds[(self->id + k) % sys->n];
        if (pthread_mutex_trylock(&v->lock) != 0)
            continue;
        Process *p = v->rq_len > 0 ? rq_pop_locked(v) : NULL;
        pthread_mutex_unlock(&v->lock);
        if (p)
            return p;
    }
    return NULL;
}

/* ==== the scheduler loop ==== */

void vm_proc_reap(SchedSystem *sys, Process *p);

static void run(Scheduler *s, Process *p)
{
    pthread_mutex_lock(&p->lock);
    p->state = PS_RUNNING;
    pthread_mutex_unlock(&p->lock);
    p->sched = s;
    p->reds = VM_REDUCTIONS;
    s->current = p;
    vm_fiber_tsan_switch(p->fiber->tsan);
    vm_fiber_switch(&s->sp, p->fiber->sp);
    s->current = NULL;
    /* The process switched out: its context is saved in p->fiber->sp. */
    pthread_mutex_lock(&p->lock);
    if (p->state == PS_EXITED) {
        pthread_mutex_unlock(&p->lock);
        vm_proc_reap(s->sys, p);
        return;
    }
    bool again = true;
    if (p->want_wait) {
        p->want_wait = false;
        if (p->signaled)
            p->signaled = false;
        else
            again = false;
    }
    p->state = again ? PS_RUNNABLE : PS_WAITING;
    pthread_mutex_unlock(&p->lock);
    /* More than one runnable process here: let an idle scheduler steal. */
    if (again && rq_push(s, p) > 1)
        wake_a_sleeper(s->sys, s);
}

/* ==== stop the world (the benchmark's baseline only) ==== */

/* Parks this scheduler until the world restarts; offline meanwhile. */
static void stw_park(SchedSystem *sys)
{
    vm_qsbr_offline();
    pthread_mutex_lock(&sys->stw_lock);
    sys->stw_parked++;
    pthread_cond_broadcast(&sys->stw_cond);
    while (vm_atomic_load_acquire(&sys->stw))
        pthread_cond_wait(&sys->stw_cond, &sys->stw_lock);
    sys->stw_parked--;
    pthread_mutex_unlock(&sys->stw_lock);
    vm_qsbr_online();
}

void vm_sched_stw_begin(tvm_vm *vm)
{
    SchedSystem *sys = vm_sched_start(vm, vm->schedulers);
    int others = sys->n - (tls_sched && tls_sched->sys == sys ? 1 : 0);
    /* [SW1] release: pairs with [SW1'] in sched_main(). */
    vm_atomic_store_release(&sys->stw, 1);
    for (int i = 0; i < sys->n; i++) {
        /* Under the queue lock, so a scheduler about to sleep either saw
         * the flag or is asleep and gets the signal. */
        Scheduler *o = &sys->scheds[i];
        pthread_mutex_lock(&o->lock);
        pthread_cond_signal(&o->cond);
        pthread_mutex_unlock(&o->lock);
    }
    pthread_mutex_lock(&sys->stw_lock);
    while (sys->stw_parked < others)
        pthread_cond_wait(&sys->stw_cond, &sys->stw_lock);
    pthread_mutex_unlock(&sys->stw_lock);
}

void vm_sched_stw_end(tvm_vm *vm)
{
    SchedSystem *sys = vm_sched_of(vm);
    pthread_mutex_lock(&sys->stw_lock);
    vm_atomic_store_release(&sys->stw, 0);
    pthread_cond_broadcast(&sys->stw_cond);
    pthread_mutex_unlock(&sys->stw_lock);
}

static void *sched_main(void *arg)
{
    Scheduler *s = arg;
    SchedSystem *sys = s->sys;
    s->tsan = vm_fiber_tsan_current();
    tls_sched = s;
    vm_qsbr_sched_register();
    for (;;) {
        /* A VM being destroyed stops between two processes, even with work
         * queued: whatever is left is freed by vm_sched_stop(). */
        if (vm_atomic_load_acquire(&sys->stopping))
            break;
        /* [SW1'] acquire: a stop-the-world trace_pattern parks us here,
         * between two processes. */
        if (VM_UNLIKELY(vm_atomic_load_acquire(&sys->stw)))
            stw_park(sys);
        pthread_mutex_lock(&s->lock);
        Process *p = rq_pop_locked(s);
        pthread_mutex_unlock(&s->lock);
        if (!p)
            p = steal(s);
        if (p) {
            run(s, p);
            /* Between two processes: a quiescent state for thread progress. */
            vm_qsbr_quiescent();
            continue;
        }
        pthread_mutex_lock(&s->lock);
        if (vm_atomic_load_acquire(&sys->stopping)) {
            pthread_mutex_unlock(&s->lock);
            break;
        }
        if (!s->rq_head) {
            /* Going idle: give the stacks of processes that ended back to
             * the OS (the burst that freed them paid no system call). */
            pthread_mutex_unlock(&s->lock);
            vm_fiber_pool_trim(&sys->pool);
            pthread_mutex_lock(&s->lock);
        }
        if (!s->rq_head && !vm_atomic_load_acquire(&sys->stopping) &&
            !vm_atomic_load_acquire(&sys->stw)) {
            /* Idle: offline for thread progress, then sleep until work is
             * pushed here or a busy scheduler with a backlog wakes us to
             * steal.  The one-second timeout is a safety net for a wake-up
             * lost to the race between our check and a busy scheduler's;
             * nothing is lost meanwhile (the busy one runs its queue). */
            vm_atomic_store_relaxed(&s->sleeping, 1);
            vm_qsbr_offline();
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&s->cond, &s->lock, &ts);
            vm_qsbr_online();
            vm_atomic_store_relaxed(&s->sleeping, 0);
        }
        pthread_mutex_unlock(&s->lock);
    }
    vm_qsbr_sched_unregister();
    tls_sched = NULL;
    return NULL;
}

/* ==== timers ==== */

static void theap_swap(Timer *a, Timer *b)
{
    Timer t = *a;
    *a = *b;
    *b = t;
}

void vm_timer_add(SchedSystem *sys, uint64_t deadline, uint64_t pid, uint64_t seq);
void vm_timer_add(SchedSystem *sys, uint64_t deadline, uint64_t pid, uint64_t seq)
{
    pthread_mutex_lock(&sys->tlock);
    if (sys->ntimers == sys->tcap) {
        sys->tcap = sys->tcap ? sys->tcap * 2 : 64;
        sys->timers = vm_realloc(sys->timers, sys->tcap * sizeof(Timer));
    }
    size_t i = sys->ntimers++;
    sys->timers[i] = (Timer){ deadline, pid, seq };
    while (i > 0 && sys->timers[(i - 1) / 2].deadline > sys->timers[i].deadline) {
        theap_swap(&sys->timers[(i - 1) / 2], &sys->timers[i]);
        i = (i - 1) / 2;
    }
    bool first = i == 0;
    pthread_mutex_unlock(&sys->tlock);
    if (first)
        pthread_cond_signal(&sys->tcond);
}

static Timer theap_pop(SchedSystem *sys)
{
    Timer top = sys->timers[0];
    sys->timers[0] = sys->timers[--sys->ntimers];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < sys->ntimers && sys->timers[l].deadline < sys->timers[m].deadline)
            m = l;
        if (r < sys->ntimers && sys->timers[r].deadline < sys->timers[m].deadline)
            m = r;
        if (m == i)
            break;
        theap_swap(&sys->timers[i], &sys->timers[m]);
        i = m;
    }
    return top;
}

void vm_proc_timeout(SchedSystem *sys, uint64_t pid, uint64_t seq);

static void *timer_main(void *arg)
{
    SchedSystem *sys = arg;
    pthread_mutex_lock(&sys->tlock);
    while (!sys->tstop) {
        if (sys->ntimers == 0) {
            pthread_cond_wait(&sys->tcond, &sys->tlock);
            continue;
        }
        uint64_t now = vm_now_ns(), due = sys->timers[0].deadline;
        if (due > now) {
            struct timespec ts = { (time_t)(due / 1000000000u), (long)(due % 1000000000u) };
            pthread_cond_timedwait(&sys->tcond, &sys->tlock, &ts);
            continue;
        }
        Timer t = theap_pop(sys);
        pthread_mutex_unlock(&sys->tlock);
        vm_proc_timeout(sys, t.pid, t.seq);
        pthread_mutex_lock(&sys->tlock);
    }
    pthread_mutex_unlock(&sys->tlock);
    return NULL;
}

/* ==== start and stop ==== */

static void cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

SchedSystem *vm_sched_start(tvm_vm *vm, int n)
{
    pthread_mutex_lock(&vm->code_lock);
    SchedSystem *sys = vm_sched_of(vm);
    if (sys) {
        pthread_mutex_unlock(&vm->code_lock);
        return sys;
    }
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
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
    pthread_mutex_init(&sys->tlock, NULL);
    cond_init_monotonic(&sys->tcond);
    pthread_mutex_init(&sys->stw_lock, NULL);
    pthread_cond_init(&sys->stw_cond, NULL);
    sys->scheds = vm_calloc((size_t)n, sizeof(Scheduler));
    for (int i = 0; i < n; i++) {
        Scheduler *s = &sys->scheds[i];
        s->sys = sys;
        s->id = i;
        pthread_mutex_init(&s->lock, NULL);
        cond_init_monotonic(&s->cond);
    }
    for (int i = 0; i < n; i++)
        if (pthread_create(&sys->scheds[i].thread, NULL, sched_main, &sys->scheds[i]) != 0)
            vm_die("cannot start a scheduler thread");
    if (pthread_create(&sys->timer_thread, NULL, timer_main, sys) != 0)
        vm_die("cannot start the timer thread");
    /* Publish last: everything above is initialised before anyone can see it. */
    /* [SC1] release: pairs with [SC1'] in vm_sched_of(). */
    vm_atomic_store_ptr_release(&vm->sched, sys);
    pthread_mutex_unlock(&vm->code_lock);
    return sys;
}

void vm_proc_free_all(SchedSystem *sys);

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
    for (int i = 0; i < sys->n; i++)
        pthread_join(sys->scheds[i].thread, NULL);
    pthread_mutex_lock(&sys->tlock);
    sys->tstop = true;
    pthread_cond_signal(&sys->tcond);
    pthread_mutex_unlock(&sys->tlock);
    pthread_join(sys->timer_thread, NULL);
    vm_proc_free_all(sys);
    vm_fiber_pool_destroy(&sys->pool);
    for (int i = 0; i < sys->n; i++) {
        pthread_mutex_destroy(&sys->scheds[i].lock);
        pthread_cond_destroy(&sys->scheds[i].cond);
    }
    pthread_mutex_destroy(&sys->stw_lock);
    pthread_cond_destroy(&sys->stw_cond);
    free(sys->scheds);
    free(sys->timers);
    free(sys->table);
    free(sys);
    vm_atomic_store_ptr_release(&vm->sched, NULL);
}
