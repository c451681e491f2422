/*
 * vm/progress.c - thread progress on liburcu QSBR.
 *
 * Protocol: waiting for thread progress.
 *
 * Terms.  A *grace period* (GP) is one synchronize_rcu() call made by the
 * progress thread; `started` counts the GPs begun, `completed` the ones
 * finished.  A *ticket* is the number of a GP that began after the
 * ticket was taken.
 *
 * Writer (any thread):  writes; ticket = started + 1 (under lock, which
 * orders the writes before the progress thread's next `started++`); waits
 * until completed >= ticket.
 * Progress thread:  while requested > completed: started++ (lock);
 * synchronize_rcu(); completed = started ([PG1] release), then wakes the
 * blocked threads and the suspended processes whose tickets are reached.
 * Readers (scheduler threads):  report a quiescent state between two
 * processes and go offline while idle (vm/sched.c, vm/qsbr.h).
 * A writer on a foreign thread (vm_progress_sync) skips the progress
 * thread: it calls synchronize_rcu() itself, which begins after its own
 * earlier writes, so the guarantee below holds for it as well.
 *
 * Guarantee.  When vm_progress_wait(t) returns, every scheduler has been
 * quiescent at least once after the writes made before vm_progress_ticket()
 * returned t: QSBR's synchronize_rcu() returns only after every online
 * reader reported a quiescent state after it began, and it began after the
 * writes (lock order above).  A reader holds references to VM code and
 * breakpoint data only while it runs a process, never across a quiescent
 * state, so it cannot still hold anything the writes replaced.
 *
 * Handing over the CPU.  A waiter sleeps in synchronize_rcu() (a futex)
 * until the last scheduler's quiescent report wakes it, and the progress
 * thread sleeps until a ticket asks for a grace period.  On a machine
 * whose CPUs the schedulers keep busy, the woken thread then waited for a
 * time slice of the OS's: that was the long tail of trace_pattern's
 * latency (bench_pausefree on 2 vCPUs with a worker busy on each: the
 * slowest 5% of calls waited 2.4-4.7 ms for a CPU, p99 4.5-5.6 ms against
 * a median of 0.3-0.5; BEAM, whose schedulers run its thread progress
 * themselves, 0.41 ms in the same run).  So a scheduler that reports a
 * quiescent state while a grace period is wanted (vm_progress_wanted)
 * offers its CPU (sched_yield, at most once per VM_OFFER_GAP_NS; vm/sched.c,
 * offer_cpu): the waiter, runnable or about to be, runs at once, for the
 * microseconds it needs, and the scheduler carries on where it was.  In
 * runs taken in turn with the build before: p99 0.52-0.55 ms against
 * 4.9-5.1 (bench/run pausefree: 0.50, and BEAM 0.57 in that run), and
 * with 8 schedulers on the 2 vCPUs, where every grace period waited for
 * six threads the OS kept off the CPUs, a median of 0.98-1.0 ms against
 * 30.7.  The hint is only a hint: the guarantee below does not depend on
 * it, and a scheduler that misses it costs a waiter the OS's delay.
 *
 * Short time slices.  A grace period waits for every scheduler's next
 * switch, and a process it woke waits for the switch of the process
 * running on its scheduler: a full time slice (VM_REDUCTIONS) each, at
 * worst.  So for VM_PROGRESS_HURRY_NS after a ticket asks for a grace
 * period, after a foreign thread begins one, and after one's end wakes
 * processes, slices that begin are a quarter as long (vm_progress_hurry,
 * vm/sched.c, slice_start): a process's trace_pattern took a median of
 * 0.31-0.42 ms against 0.47-0.54 (bench_pausefree --caller process; BEAM
 * 0.35 in the same benchmark).  For a bounded time rather than for as
 * long as a grace period lasts: one held up by a long native gains
 * nothing from short slices elsewhere, which would only add switches.
 * Also a hint: the guarantee does not depend on it.
 *
 * Why not call_rcu: its worker batches callbacks with a 10 ms sleep
 * (liburcu 0.13's urcu-call-rcu-impl.h); a dedicated thread running synchronize_rcu()
 * on demand costs one GP, microseconds when schedulers are not starved.
 *
 * Memory ordering: the guarantee is QSBR's, whose barriers liburcu gives
 * per architecture (a full barrier, mfence on x86_64 and dmb ish on
 * aarch64, on both sides of a quiescent report and around
 * synchronize_rcu's reads of the readers' counters): it holds on a weakly
 * ordered machine as it does under TSO.  [PG1]/[PG1'] (and [PR1]) are
 * release/acquire pairs, stlr/ldar on aarch64.
 *
 * ThreadSanitizer: readers release vm_qsbr_clock before each quiescent
 * report; the progress thread acquires it after synchronize_rcu(), and
 * waiters acquire `completed` ([PG1']), so the happens-before the GP gives
 * is visible to TSan.
 */
#include "vm/progress.h"

#include <pthread.h>
#include <stdlib.h>

#include "vm/atomics.h"
#include "vm/qsbr.h"
#include "vm/sched.h"
#include "vm/timer.h"

VmAtomic vm_progress_wanted;
VmAtomic vm_progress_hurry_until;

void vm_progress_hurry_set(void)
{
    vm_atomic_store_relaxed(&vm_progress_hurry_until,
                            (uintptr_t)(vm_now_ns() + VM_PROGRESS_HURRY_NS));
}

bool vm_progress_hurry_ahead(uintptr_t until)
{
    if (vm_now_ns() < until)
        return true;
    /* Past: cleared, unless another thread stored a later time. */
    vm_atomic_cas_full(&vm_progress_hurry_until, until, 0);
    return false;
}

/* The calling thread's part of vm_progress_wanted: +1 or -1. */
static void want(int d)
{
    vm_atomic_fetch_add_relaxed(&vm_progress_wanted, (uintptr_t)(intptr_t)d);
}

typedef struct Waiter {
    struct Waiter *next;
    uint64_t ticket;
    uint64_t pid;
} Waiter;

struct VmProgress {
    tvm_vm *vm;
    pthread_t thread;
    /* lock protects started, requested, stop and waiters. */
    pthread_mutex_t lock;
    pthread_cond_t work;       /* the progress thread waits for requests */
    pthread_cond_t done;       /* blocked threads wait for completions */
    uint64_t started, requested;
    bool stop;
    bool running;              /* `thread` was started and not joined: the stopper only */
    bool wanted;               /* its +1 is in vm_progress_wanted (under lock) */
    Waiter *waiters;           /* suspended processes */
    VmAtomic completed;        /* [PG1] release by the progress thread; [PG1'] acquire by waiters */
};

/* The progress thread's part of vm_progress_wanted, with bp->lock held:
 * counted while it has a grace period to run (`on`), and never once the
 * service is stopped (its tickets are never reached then). */
static void thread_wanted(VmProgress *bp, bool on)
{
    on = on && !bp->stop;
    if (on != bp->wanted)
        want(on ? 1 : -1);
    bp->wanted = on;
}

static void wake_reached(VmProgress *bp, uint64_t completed)
{
    /* Called with bp->lock held; wakes outside it. */
    Waiter *ready = NULL, **link = &bp->waiters;
    while (*link) {
        Waiter *w = *link;
        if (w->ticket <= completed) {
            *link = w->next;
            w->next = ready;
            ready = w;
        } else {
            link = &w->next;
        }
    }
    pthread_mutex_unlock(&bp->lock);
    SchedSystem *sys = vm_sched_of(bp->vm);
    if (ready)
        vm_progress_hurry_set();    /* they start when their schedulers switch */
    while (ready) {
        Waiter *n = ready->next;
        if (sys)
            vm_proc_wake(sys, ready->pid);
        free(ready);
        ready = n;
    }
    pthread_mutex_lock(&bp->lock);
}

static void *progress_main(void *arg)
{
    VmProgress *bp = arg;
    pthread_mutex_lock(&bp->lock);
    for (;;) {
        while (!bp->stop && bp->requested <= vm_atomic_load_relaxed(&bp->completed)) {
            thread_wanted(bp, false);
            pthread_cond_wait(&bp->work, &bp->lock);
        }
        if (bp->stop)
            break;
        uint64_t gp = ++bp->started;
        pthread_mutex_unlock(&bp->lock);
        /* This thread is not a registered reader: the call only waits. */
        VM_QSBR_PUBLISH();
        synchronize_rcu();
        VM_QSBR_ACQUIRE();
        pthread_mutex_lock(&bp->lock);
        /* [PG1] release: everything the grace period ordered before the
         * count that reports it; pairs with [PG1'] in vm_progress_reached(). */
        vm_atomic_store_release(&bp->completed, gp);
        pthread_cond_broadcast(&bp->done);
        wake_reached(bp, gp);
    }
    pthread_mutex_unlock(&bp->lock);
    return NULL;
}

/*
 * Lifetime.  The service is made on first use (vm->code_lock serializes
 * the makers) and lives as long as the VM: tvm_destroy stops its thread
 * before it stops the schedulers (the thread wakes processes through the
 * scheduler system, which vm_sched_stop frees), and frees it last, in
 * vm_release.  Between the two, a process still running on a scheduler may
 * ask for progress (VM code calling trace_pattern while the VM is being
 * destroyed): it gets the stopped service, whose tickets are never
 * reached, so the process stays suspended until its scheduler stops, and
 * no thread is started that nobody would join.  (Before, the service was
 * freed at the stop and such a process started a new thread, which then
 * read the freed VM: found by fuzz/fuzz_run.c.)
 */
static VmProgress *progress_new(tvm_vm *vm, bool start)
{
    VmProgress *bp = vm_calloc(1, sizeof *bp);
    bp->vm = vm;
    bp->stop = !start;
    pthread_mutex_init(&bp->lock, NULL);
    pthread_cond_init(&bp->work, NULL);
    pthread_cond_init(&bp->done, NULL);
    if (start && pthread_create(&bp->thread, NULL, progress_main, bp) != 0)
        vm_die("cannot start the thread-progress thread");
    bp->running = start;
    /* [PR1] release: the service's initialisation before its use. */
    vm_atomic_store_ptr_release(&vm->progress, bp);
    return bp;
}

VmProgress *vm_progress_get(tvm_vm *vm)
{
    /* [PR1'] acquire; pairs with [PR1] in progress_new(). */
    VmProgress *bp = vm_atomic_load_ptr_acquire(&vm->progress);
    if (bp)
        return bp;
    pthread_mutex_lock(&vm->code_lock);
    bp = vm_atomic_load_ptr_relaxed(&vm->progress);
    if (!bp)
        bp = progress_new(vm, true);
    pthread_mutex_unlock(&vm->code_lock);
    return bp;
}

void vm_progress_stop(tvm_vm *vm)
{
    pthread_mutex_lock(&vm->code_lock);
    VmProgress *bp = vm_atomic_load_ptr_relaxed(&vm->progress);
    if (!bp)
        bp = progress_new(vm, false);   /* never used: none will start */
    pthread_mutex_unlock(&vm->code_lock);
    pthread_mutex_lock(&bp->lock);
    bp->stop = true;
    thread_wanted(bp, false);
    pthread_cond_signal(&bp->work);
    pthread_mutex_unlock(&bp->lock);
    if (bp->running)
        pthread_join(bp->thread, NULL);
    bp->running = false;
}

void vm_progress_free(tvm_vm *vm)
{
    VmProgress *bp = vm_atomic_load_ptr_relaxed(&vm->progress);
    if (!bp)
        return;
    while (bp->waiters) {
        Waiter *n = bp->waiters->next;
        free(bp->waiters);
        bp->waiters = n;
    }
    pthread_mutex_destroy(&bp->lock);
    pthread_cond_destroy(&bp->work);
    pthread_cond_destroy(&bp->done);
    free(bp);
    vm_atomic_store_relaxed(&vm->progress, (uintptr_t)0);
}

uint64_t vm_progress_ticket(VmProgress *bp)
{
    pthread_mutex_lock(&bp->lock);
    uint64_t t = bp->started + 1;
    if (bp->requested < t) {
        bp->requested = t;
        thread_wanted(bp, true);    /* the progress thread is to run now */
        vm_progress_hurry_set();
        pthread_cond_signal(&bp->work);
    }
    pthread_mutex_unlock(&bp->lock);
    return t;
}

void vm_progress_sync(VmProgress *bp, Process *self)
{
    if (self && self->fiber) {
        vm_progress_wait(bp, self, vm_progress_ticket(bp));
        return;
    }
    /* A foreign thread runs the grace period itself: asking the progress
     * thread costs two more thread wake-ups per wait (to start it and to
     * report it), and on a machine whose cores are all busy each wake-up
     * waits for a time slice.  liburcu serializes concurrent grace periods.
     * Offline meanwhile if it is a reader (a native inside tvm_call). */
    bool was_online = vm_qsbr_block_begin();
    want(1);
    vm_progress_hurry_set();
    VM_QSBR_PUBLISH();
    synchronize_rcu();
    VM_QSBR_ACQUIRE();
    want(-1);
    vm_qsbr_block_end(was_online);
}

bool vm_progress_reached(VmProgress *bp, uint64_t ticket)
{
    /* [PG1'] acquire; pairs with [PG1] in progress_main(). */
    return vm_atomic_load_acquire(&bp->completed) >= ticket;
}

uint64_t vm_progress_completed(VmProgress *bp)
{
    return vm_atomic_load_acquire(&bp->completed);
}

void vm_progress_wait(VmProgress *bp, Process *self, uint64_t ticket)
{
    if (vm_progress_reached(bp, ticket))
        return;
    if (!self || !self->fiber) {
        /* A foreign thread (or a call context) blocks.  Inside tvm_call it
         * is a reader (VM code calling trace_pattern or loading a module
         * through a native): offline while it blocks, or the grace period
         * it waits for would wait for it.  Like a process suspended here,
         * it holds no breakpoint data meanwhile (the interpreter copies
         * what it needs out of a record before any call). */
        bool was = vm_qsbr_block_begin();
        pthread_mutex_lock(&bp->lock);
        while (!vm_progress_reached(bp, ticket))
            pthread_cond_wait(&bp->done, &bp->lock);
        pthread_mutex_unlock(&bp->lock);
        vm_qsbr_block_end(was);
        return;
    }
    /* A process: register, then suspend until woken with the ticket reached.
     * A wake that comes between the check and the switch sets `signaled`,
     * so the scheduler runs us again (vm/sched.c, run()). */
    Waiter *w = vm_malloc(sizeof *w);
    w->ticket = ticket;
    w->pid = self->pid;
    pthread_mutex_lock(&bp->lock);
    if (vm_progress_reached(bp, ticket)) {
        pthread_mutex_unlock(&bp->lock);
        free(w);
        return;
    }
    w->next = bp->waiters;
    bp->waiters = w;
    pthread_mutex_unlock(&bp->lock);
    while (!vm_progress_reached(bp, ticket)) {
        self->want_wait = true;
        vm_proc_yield(self);
    }
}
