/*
 * vm/sched.h - scheduler threads, and the processes they run: the process
 * table and lifecycle (vm/lifecycle.c), messages and waits
 * (vm/mailbox.c), stopping the world (vm/stw.c).
 *
 * Processes are fibers (vm/fiber.h) run by N scheduler threads, each with
 * its own run queues (a lock-free local one for its own thread, a locked
 * shared one for the others; see vm/sched.c); an idle scheduler steals
 * from the others' shared queues, and from the local queue of one that
 * is inside an embedder native (which lends it), and then sleeps; a busy
 * one hands part of its backlog to a sleeping one.  Every scheduler
 * thread is a liburcu QSBR reader: it reports a quiescent state between two processes
 * and goes offline while it sleeps, which is what the breakpoint engine's
 * thread-progress waits stand on.
 *
 * Locking order: a process's lock is never held while taking a run-queue
 * lock or the system lock, except that the system lock (table) may be
 * taken first and a process lock inside it.
 */
#ifndef VM_SCHED_H
#define VM_SCHED_H

#include <pthread.h>

#include "vm/atomics.h"
#include "vm/fiber.h"
#include "vm/process.h"
#include "vm/sysmon.h"
#include "vm/timer.h"

/* The states of Scheduler.lend (sched.c, "Lending the local queue"). */
enum { LEND_OWNED = 0, LEND_WORK = 1, LEND_EMPTY = 2, LEND_TAKING = 3 };

typedef struct Scheduler {
    struct SchedSystem *sys;
    int id;
    pthread_t thread;
    /*
     * Two run queues.  The local one is the scheduler's own: only its
     * thread pushes (a yield, or a spawn or wake-up done by a process
     * running here) and pops, without a lock, except while it is lent
     * (`lend`, below): then a thief that took `lend` from LEND_WORK to
     * LEND_TAKING may empty it.  The shared one takes processes from
     * other threads (wake-ups from host threads or the timer, a busy
     * scheduler's backlog handed over); `lock` protects rq_head/rq_tail,
     * and the owner moves the whole list to its local queue when rq_len
     * says something is there.
     */
    Process *local_head, *local_tail;
    size_t local_len;
    /*
     * Who may touch the local queue (sched.c, "Lending the local queue"):
     * LEND_OWNED, only this scheduler's thread; LEND_WORK or LEND_EMPTY,
     * lent while a process here is inside an embedder native (the queue
     * holds processes, or none) on a scheduler that has others: the
     * owner keeps off it and a thief may take LEND_WORK to LEND_TAKING,
     * and nobody else may.  Written by the owner (when the native starts:
     * a relaxed store of EMPTY, [LQ0], or a release store of WORK, [LQ1];
     * after it: a relaxed store of OWNED over EMPTY, or a full CAS from
     * WORK, [LQ3]) and by one thief at a time (a full CAS WORK->TAKING,
     * [LQ2'], then, the whole queue taken, a release store of EMPTY,
     * [LQ2]); [LQ1]/[LQ2'] and [LQ2]/[LQ3'] (the owner's acquire load)
     * order the queue's plain fields between the owner and the thief.
     * Read relaxed by the owner (only its own writes, TAKING or EMPTY can
     * be there), and by idle schedulers as a hint (full RMW after their
     * nidle add, [LQ4'], which writes back what it read).
     */
    VmAtomic lend;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    Process *rq_head, *rq_tail;
    /* Length of the shared queue.  Written under `lock` (relaxed, so that
     * the owner and thieves can read it without the lock as a hint: a
     * stale 0 only delays the pickup to the next switch or to the locked
     * check before sleeping; a stale non-zero costs one lock). */
    VmAtomic rq_len;
    /* 1 while the scheduler waits on cond.  Written by it under `lock`;
     * read relaxed by enqueuers choosing where to put work and by busy
     * schedulers looking for one to share a backlog with (a stale value
     * only costs a wake-up or a missed hand-over, never a lost process). */
    VmAtomic sleeping;
    /* Owned by the scheduler thread. */
    Process *cache;           /* ended processes kept for reuse, with their
                               * fibers and buffers (linked by rq_next);
                               * moved to sys->spare when full or idle */
    size_t ncache;
    void *sp;                 /* its own context while a process runs */
    void *tsan;               /* its ThreadSanitizer fiber (tsan builds) */
    void *alt_stack;          /* its alternate signal stack (vm/overflow.c), or NULL */
    Process *current;
    uint64_t offered_ns;      /* when it last offered its CPU (sched.c, offer_cpu) */
    /* When and where the process running here was switched in, while a
     * system monitor watched for long schedules (vm/sysmon.h). */
    VmSysmonIn sysmon_in;
    /* Each trace session's ring for this scheduler (a struct TrRing *),
     * or 0, by session slot.  Stored by the session's start after it
     * published the session's pipeline ([TP1], [TP2] release), only for sessions
     * whose events need no other check (no limits), and cleared by its
     * stop before its grace period (trace/tr_vm.c); loaded by this
     * scheduler's processes for their fast path (acquire,
     * trace/tr_vm_fast.h). */
    VmAtomic trace_ring[VM_SESSIONS_MAX];
    /* The thread's kernel id, for signals and timers aimed at it (the
     * sampling profiler's CPU-time timer).  Written once by the thread
     * when it starts ([TID1] release); 0 until then. */
    VmAtomic tid;
} Scheduler;

typedef struct SchedSystem {
    tvm_vm *vm;
    int n;
    Scheduler *scheds;
    /* lock protects: the table, next_pid, live, exit_waiters.
     * The fiber pool has its own lock. */
    pthread_mutex_t lock;
    pthread_cond_t exited;    /* broadcast when a joinable process exits or the last one does */
    Process **table;          /* open addressing by pid; NULL empty, (void*)1 deleted */
    size_t cap, used;
    uint64_t next_pid;
    size_t live;
    int exit_waiters;         /* threads in cond_wait(exited): broadcast only then */
    /* 1 once tvm_destroy stops the schedulers ([ST1] release in
     * vm_sched_stop; acquire in sched_main). */
    VmAtomic stopping;
    FiberPool pool;
    bool crash_reports;
    VmAtomic spawn_rr;        /* round-robin placement of new processes (relaxed) */
    /* How many schedulers are idle (from the failed look for work until
     * they wake again): each adds 1 when it goes idle ([LQ4] full
     * fetch-add, which a lender's [LQ1'] pairs with) and takes it back
     * after (relaxed; the one whose add completes the count trims the
     * fiber pool).  Read relaxed by busy schedulers as a hint to share a
     * backlog (a stale value costs a missed or a vain look), and by a
     * scheduler lending a queue that holds work ([LQ1'] full RMW): seeing
     * 0 there means any scheduler going idle after will see the lend. */
    VmAtomic nidle;
    /* How many times a scheduler has gone idle (relaxed fetch-add, beside
     * nidle's).  The one whose add completed nidle trims the fiber pool
     * after VM_POOL_TRIM_DELAY_MS only if the count has not moved and
     * every scheduler is still idle: the whole VM stayed idle that long.
     * A stale read costs a trim too many or one put off, never a stack in
     * use (the trim takes only free stacks, under the pool's lock). */
    VmAtomic idle_entries;
    VmAtomic next_ref;        /* references: monitors, trace_delivered (relaxed fetch-add) */
    /* How many times a scheduler offered its CPU to a thread waiting for
     * a grace period (sched.c, offer_cpu; relaxed fetch-add, read relaxed
     * by vm_sched_offers: a count for tests and statistics). */
    VmAtomic offers;
    /* Ended processes handed between schedulers (sched_cache.c), linked
     * by rq_next: spare_lock protects spare; nspare is written under it
     * (relaxed) and read relaxed without it by a scheduler whose cache
     * is empty, as a hint (a stale 0 costs an allocation, a stale
     * non-zero one lock). */
    pthread_mutex_t spare_lock;
    Process *spare;
    VmAtomic nspare;
    Process *joinables;       /* spawned joinable, not yet joined (lock) */
    VmTimers timers;          /* of waiting processes (vm/timer.h) */
    /* Stop the world (tvm_config.stop_the_world_tracing): stw is set by
     * the trace_pattern caller ([SW1] release) and read by schedulers
     * between processes ([SW1'] acquire); stw_lock protects stw_parked. */
    VmAtomic stw;
    pthread_mutex_t stw_lock;
    pthread_cond_t stw_cond;
    int stw_parked;
} SchedSystem;

/* The CPU offers made so far by the schedulers of `vm` (0 before they
 * start).  Any thread. */
uint64_t vm_sched_offers(tvm_vm *vm);

/* Starts the schedulers of `vm` (n = 0: one per core).  Idempotent. */
SchedSystem *vm_sched_start(tvm_vm *vm, int n);

/* The schedulers vm_sched_start(vm, n) starts: n, or for n <= 0 one per
 * online processor (at least one).  Any thread. */
int vm_sched_count_for(int n);

/* Stops them; processes still alive are freed. */
void vm_sched_stop(tvm_vm *vm);

/* Creates a process of parent's VM running entry(args), spawned by
 * `parent` (a process or a call context, on the calling thread), with a
 * max_heap_size of max_heap words (0: none); returns its pid, or 0 for a
 * system_limit: max_processes are alive, the arguments are over
 * max_message_words, or no fiber stack can be mapped.  An undefined entry
 * is not checked here: the process raises undef.  `joinable` keeps its
 * exit value until vm_proc_join(); `link` links it to parent (a process
 * on a fiber) before it can run (spawn_link/3). */
uint64_t vm_spawn(Process *parent, const Export *entry, int argc, const Term *args,
                  bool joinable, bool link, size_t max_heap);

/* What a send did. */
typedef enum VmSend {
    VM_SEND_OK,
    VM_SEND_NOPROC,     /* no such live process: nothing sent (not an error in Erlang) */
    VM_SEND_TOO_BIG,    /* msg is over the VM's max_message_words: nothing sent,
                         * whether or not the process lives (system_limit) */
} VmSend;

/*
 * Sends a copy of `msg` to pid.  `from` is the sending process or call
 * context, whose send event (vm_hook_send) is written after the size
 * check and before the delivery; NULL for the VM's own messages ('DOWN',
 * meta trace), which have none.  A message of more than VM_BIF_LEND_WORK
 * words lends from's queue while it is counted and copied (vm/lend.h;
 * the caller holds no lock).
 */
VmSend vm_send(tvm_vm *vm, Process *from, uint64_t pid, Term msg);
/* The same, the send event naming `to` (the registered name msg was sent
 * to, as BEAM's does) instead of the pid. */
VmSend vm_send_to(tvm_vm *vm, Process *from, uint64_t pid, Term to, Term msg);

/* Calls fn(p, data) for every process in the table, with the table lock
 * held (fn must not take it, nor a run-queue lock). */
void vm_proc_each(SchedSystem *sys, void (*fn)(Process *p, void *data), void *data);

/* Looks a process up (a reference the caller must drop with vm_proc_put). */
Process *vm_proc_get(SchedSystem *sys, uint64_t pid);
/* The same for a live process only: NULL also once it is exiting (the
 * point from which monitors see it gone), though it stays in the table
 * until its scheduler reaps it.  A snapshot: it may exit right after. */
Process *vm_proc_get_live(SchedSystem *sys, uint64_t pid);
void vm_proc_put(SchedSystem *sys, Process *p);

/* Waits until a joinable process exits; returns it (exit fields valid). */
Process *vm_proc_join(SchedSystem *sys, uint64_t pid);

/* ---- used by a running process (on its own fiber) ---- */

/* Gives the scheduler to others; returns when scheduled again.  Writes
 * the running flag's out and in events around the switch. */
void vm_proc_yield(Process *p);
/* vm_proc_yield without trace events (the lossless wait, trace/tr_vm_proc.c). */
void vm_proc_switch_out(Process *p);
/* The fast path of a plain yield: switches straight to the next local
 * process; false (nothing done) when the scheduler must decide. */
bool vm_sched_yield_to_next(Process *p);
/*
 * Around a long native called by p, an embedder's (vm/interp.c) or a
 * built-in one given much work, or a long walk of a term (vm/lend.h):
 * vm_sched_lend lends the local queue of p's scheduler to idle
 * schedulers (and wakes one if the queue holds work); true if it did,
 * and then p->lending is set (false: not on a scheduler, p is not its
 * current process, the scheduler is alone in its system, or the queue
 * is lent already by an enclosing native, whose lend p->lending still
 * marks).
 * vm_sched_lend_end(p), called only after a lend that returned true,
 * clears p->lending and takes the queue back if it still is lent (a
 * switch out inside the native took it back already).
 */
bool vm_sched_lend(Process *p);
void vm_sched_lend_end(Process *p);
/* Whether a lend by p could help anyone: p runs on a scheduler (p->sched,
 * written before p is switched in, read here on p's own thread; NULL for
 * a call context) that has others beside it (sys->n, fixed at start).
 * Alone, a scheduler has nobody to lend to: vm_sched_lend would return
 * false too, after an out-of-line call and a thread-local lookup. */
static inline bool vm_sched_lend_useful(const Process *p)
{
    const Scheduler *s = p->sched;
    return s && s->sys->n > 1;
}
/* Moves messages sent so far into the process's own queue, acting on the
 * exit signals among them (vm_signals_take). */
void vm_proc_fetch(Process *p);
/* Takes in the exit signals sent to p since it last looked (a fetch, only
 * when one is pending: its reduction checks and sleeps; p's own thread);
 * true when p is being killed (Process.kill), by one of them or before.
 * Inline: each yield looks twice, and out of line the look cost a call
 * and a frame for a load and two tests (callgrind, bench_procs). */
static inline bool vm_proc_signalled(Process *p)
{
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&p->sig_pending)) && p->fiber)
        vm_proc_fetch(p);
    return p->kill != 0;
}
/*
 * Waits until a message arrives or `timeout_ms` passes (< 0: forever).
 * Returns false on timeout.  Must run on a scheduled process.  A process
 * being killed (p->kill, set before or by this call's look at the
 * mailbox) does not wait: the answer is whether a message is under the
 * cursor now, and the caller must check p->kill.
 */
bool vm_proc_wait(Process *p, int64_t timeout_ms);
/* Removes the message under the cursor (and resets the cursor). */
void vm_proc_accept(Process *p);
/*
 * The 'DOWN' msg (`words` words) of monitor `ref`, which exiting process
 * t sends to `watcher`: put in its inbox unless the watcher has exited or
 * took the monitor off while t was delivering it (vm_down_drop); clears
 * t->mon_firing under the watcher's lock either way (vm/monitors.c).
 */
void vm_down_send(Process *t, uint64_t watcher, uint64_t ref, Term msg, size_t words);
/* p took monitor `ref` of t off after t took its node to deliver its
 * 'DOWN': when t still delivers it (mon_firing), that delivery will drop
 * it (true); otherwise it is in p's inbox already (false). */
bool vm_down_drop(Process *p, const Process *t, uint64_t ref);
/* demonitor's flush: p takes in what was sent and removes every
 * {'DOWN', ref, _, _, _} from its queue. */
void vm_proc_flush_down(Process *p, uint64_t ref);

/*
 * The process running on the calling thread, if the thread is a scheduler
 * and is running one (so the caller is on that process's fiber); NULL on
 * any other thread.
 */
Process *vm_running_process(void);

/* The scheduler the calling thread is, or NULL. */
Scheduler *vm_current_scheduler(void);

/*
 * Whether t waits in the local queue of the calling thread's scheduler
 * while that queue is the thread's alone (LEND_OWNED): then nothing can
 * switch t in until this thread pops it, which it does not do while it
 * runs the caller, so t's frames are still and readable here.  False on
 * any other thread, while the queue is lent, and past the first
 * VM_QUEUED_SCAN processes of the queue (the caller then asks t instead).
 */
bool vm_sched_holds_queued(const Process *t);

/*
 * Parks every scheduler (but the caller's own, if it is one) between two
 * processes, and restarts them (vm/stw.c).  Only trace_pattern's
 * stop-the-world baseline uses it.  vm_stw_park is the scheduler's side,
 * called at the top of its loop while sys->stw is set.
 */
void vm_stw_begin(tvm_vm *vm);
void vm_stw_end(tvm_vm *vm);
void vm_stw_park(SchedSystem *sys);

/* ---- between the scheduler loop and process lifecycle ---- */

/* Makes p runnable on a scheduler (its own thread's, or the least busy
 * one's shared queue).  Any thread. */
void vm_sched_enqueue(SchedSystem *sys, Process *p);
/* The calling scheduler's cache of ended processes (vm/sched_cache.c):
 * a process to reuse for a spawn, from the spare list when the cache is
 * empty (NULL if none or not a scheduler thread), and putting one back
 * (false: not a scheduler thread, or the cache and the spare list are
 * full). */
Process *vm_sched_cache_get(SchedSystem *sys);
bool vm_sched_cache_put(SchedSystem *sys, Process *p);
/* Frees a process no one references any more (the cache's overflow). */
void vm_proc_discard(SchedSystem *sys, Process *p);
/* An exited process, switched out for the last time: drops it from the
 * table and releases the table's reference (its scheduler's thread). */
void vm_proc_reap(SchedSystem *sys, Process *p);
/* Frees every process still in the table (vm_sched_stop, no thread runs). */
void vm_proc_free_all(SchedSystem *sys);
/* Wakes the waiting process pid (the permission's and thread progress's
 * hand-offs, the lossless trace wait); nothing if it is gone. */
void vm_proc_wake(SchedSystem *sys, uint64_t pid);
/* The timer of wait `seq` of process pid fired (the timer thread). */
void vm_proc_timeout(SchedSystem *sys, uint64_t pid, uint64_t seq);
/*
 * p overflowed its native stack (vm/overflow.c): pc and fp are where it
 * faulted.  Called on p's scheduler thread, off p's fiber (on the
 * alternate signal stack); records the fault's stack for the crash report,
 * drops p's frames, handlers and heap (the fault may have left them half
 * written), restarts its fiber from the top and exits it there with
 * error:{system_limit, native_stack}.  Never returns.
 */
VM_NORETURN void vm_proc_overflowed(Process *p, uintptr_t pc, uintptr_t fp);

/* Frees a chain of messages. */
void vm_messages_free(Message *m);

/* Copies of p's messages, oldest first, as a chain (NULL: none): those
 * in its own queue, then those still in its inbox, exit signals left
 * out.  p's lock held, on p's own thread or with p held still (not
 * running: the queue is only its own; vm/procinfo.c). */
Message *vm_messages_copy(const Process *p);

/* Copies a term into a new message (any thread); NULL when the term is
 * more than max_words words (term_size_capped: the count stops there).
 * A copy of more than VM_BIF_LEND_WORK words lends the queue of `by`,
 * the process whose thread makes it (vm/lend.h; NULL: none). */
Message *vm_message_new(Process *by, Term t, size_t max_words);

/* A message holding a copy of t (`words` words, term_size(t)) with
 * `extra` bytes after it for the caller (its seq_trace token), seq NULL. */
Message *vm_message_alloc(Term t, size_t words, size_t extra);

/* Delivers a message made whole by the caller (the system tracer's
 * events, vm/seqtrace.c) to pid; m is freed when pid is not live. */
VmSend vm_message_send(tvm_vm *vm, uint64_t pid, Message *m);

/* Puts the exit signal m (Message.sig set) in t's inbox, behind the
 * messages sent before it, and wakes t; m is freed when t has exited. */
void vm_signal_deliver(SchedSystem *sys, Process *t, Message *m);
/* Drops the exit signals of kind `sig` from `from` still in p's inbox
 * (p's own thread: unlink/1). */
void vm_signals_drop_from(Process *p, uint64_t from, int sig);

#endif /* VM_SCHED_H */
