/*
 * vm/process.h - a process: the whole state of one running VM context.
 *
 * Everything an executing function touches lives here (heap, register
 * stack, frame stack, try handlers, exception, native roots), so the
 * interpreter is re-entrant and any number of processes run in parallel.
 * A Process is owned by exactly one thread at a time.
 *
 * Register stack: one array of terms; each frame's registers are a window
 * [base, base + nregs).  Frames store offsets, not pointers, because the
 * array moves when it grows.  The whole array is always initialised (NIL
 * above anything written), so the collector can scan all of it without
 * knowing which registers are live.
 */
#ifndef VM_PROCESS_H
#define VM_PROCESS_H

#include <pthread.h>

#include "include/tracevm.h"
#include "vm/interlock.h"
#include "vm/traceword.h"
#include "vm/module.h"
#include "vm/term.h"

/*
 * Process trace flags (Process.trace), the public TVM_TRACE_* bits:
 *   CALL       call events at traced functions (the call hook runs too)
 *   ARITY      call events carry the arity, not the arguments
 *   TIMESTAMP  text output as trace_ts, the timestamp last ({Mega,Sec,Micro});
 *              MONO_TS, STRICT_TS: the monotonic ns, or {Mono, Unique}
 *              instead (tr_vm_record_flags chooses one)
 *   PROCS      spawn (by the parent) and exit events
 *   RETURN_TO  return_to events at returns through local trace frames
 *   SILENT     no call/return/exception/return_to events (match specs run)
 *   RUNNING    in/out when scheduled in and out (trace/tr_vm_proc.c)
 *   SEND       send events, by the sender; RECEIVE: receive events
 *   SOS        children inherit the flags (trace/tr_flags.c,
 *              tr_flags_inherit); SOS1: the next child only
 *   GC         gc_major_start/gc_major_end around each collection
 *              (vm/heap.c, vm_hook_gc)
 *   SOL        children spawned with a link inherit the flags (after SOS,
 *              tr_flags_inherit); SOL1: the next such child only
 *   EXITING    out_exited as the last event (vm_hook_sched_exit)
 */
enum {
    VM_TRACE_CALL = TVM_TRACE_CALL,
    VM_TRACE_ARITY = TVM_TRACE_ARITY,
    VM_TRACE_TIMESTAMP = TVM_TRACE_TIMESTAMP,
    VM_TRACE_PROCS = TVM_TRACE_PROCS,
    VM_TRACE_RETURN_TO = TVM_TRACE_RETURN_TO,
    VM_TRACE_SILENT = TVM_TRACE_SILENT,
    VM_TRACE_RUNNING = TVM_TRACE_RUNNING,
    VM_TRACE_SEND = TVM_TRACE_SEND,
    VM_TRACE_RECEIVE = TVM_TRACE_RECEIVE,
    VM_TRACE_SOS = TVM_TRACE_SET_ON_SPAWN,
    VM_TRACE_SOS1 = TVM_TRACE_SET_ON_FIRST_SPAWN,
    VM_TRACE_GC = TVM_TRACE_GARBAGE_COLLECTION,
    VM_TRACE_SOL = TVM_TRACE_SET_ON_LINK,
    VM_TRACE_SOL1 = TVM_TRACE_SET_ON_FIRST_LINK,
    VM_TRACE_EXITING = TVM_TRACE_EXITING,
    VM_TRACE_MONO_TS = TVM_TRACE_MONOTONIC_TIMESTAMP,
    VM_TRACE_STRICT_TS = TVM_TRACE_STRICT_MONOTONIC_TIMESTAMP,
    /* Any of the three timestamp flags: one test on the hot paths. */
    VM_TRACE_ANY_TS = VM_TRACE_TIMESTAMP | VM_TRACE_MONO_TS | VM_TRACE_STRICT_TS,
    VM_TRACE_ALL = VM_TRACE_CALL | VM_TRACE_ARITY | VM_TRACE_TIMESTAMP | VM_TRACE_PROCS |
                   VM_TRACE_RETURN_TO | VM_TRACE_SILENT | VM_TRACE_RUNNING | VM_TRACE_SEND |
                   VM_TRACE_RECEIVE | VM_TRACE_SOS | VM_TRACE_SOS1 | VM_TRACE_GC |
                   VM_TRACE_SOL | VM_TRACE_SOL1 | VM_TRACE_EXITING | VM_TRACE_MONO_TS |
                   VM_TRACE_STRICT_TS,
    /* Internal, default session only (erlang:trace/3's {tracer, T}): the
     * process's events go to the process Process.tracer as messages
     * instead of the session's sink (trace/tr_vm_sess.c).  Not one of
     * the API's flags; the fast paths leave such events to tr_sess_emit. */
    VM_TRACE_TRACER = 1u << 24,
};

enum {
    FRAME_CALL = 0,   /* an ordinary function activation */
    FRAME_ENTRY = 1,  /* the bottom of one vm_execute activation */
    /* A trace frame (breakpoints/bp_frame.c): pushed below the activation
     * of a traced function so that its return (or an exception passing
     * it) is reported; fn is the traced function, pc the trace
     * instruction, and the upper bits of kind say what to report. */
    FRAME_TRACE = 2,
};

/* The FRAME_* of a frame's kind word (trace frames keep flags above). */
#define FRAME_KIND(k) ((k) & 0xffu)

typedef struct Frame {
    const FuncInfo *fn;   /* function of this frame (NULL for an entry frame) */
    const Instr *pc;      /* where this frame resumes when the frame above returns */
    uint32_t base;        /* register window offset into p->stack */
    uint32_t ret_reg;     /* result register, relative to the frame below's base;
                             entry frames: Process.entry_top as it was when the
                             activation began (the enclosing activation's entry) */
    uint32_t hbase;       /* handler depth when the frame was entered */
    uint32_t kind;        /* FRAME_* in the low byte (FRAME_KIND) */
    union {
        void *native_fp;  /* entry frames: native frame address of the activation */
        void *tdata;      /* trace frames: what the trace needs at the return */
    };
} Frame;

typedef struct Handler {
    uint32_t frame;       /* index of the frame that executed TRY */
    uint32_t reg;         /* first of the three result registers, relative */
    const Instr *pc;      /* handler code */
} Handler;

typedef struct RawFrame {
    const FuncInfo *fn;
    uint32_t line;
} RawFrame;

typedef struct Process Process;
typedef struct VmDict VmDict;
struct Fiber;
struct Scheduler;

/* A message: its term is a private copy in `data` (a heap fragment). */
typedef struct Message {
    struct Message *next;
    Term term;
    size_t words;
    uint8_t sig;           /* VM_SIG_* (vm/links.h): an exit signal, or an ordinary message */
    /* Its seq_trace token (vm/seqtrace.h): NULL (sent without one),
     * VM_SEQ_KEEP, or a token in this block after data[words].  Written
     * by the sender before the delivery, read by the receiver as it
     * takes the message (the receiver's lock orders them). */
    const struct VmSeqToken *seq;
    Term data[];
} Message;

/* Who watches a process: each gets a 'DOWN' message when it exits.  A
 * node is on its target's list (under the target's lock) from monitor/2
 * until the watcher takes it off (demonitor, its own exit) or the target,
 * exiting, takes it off to send its 'DOWN' (vm/mailbox.c). */
typedef struct Monitor {
    struct Monitor *next;
    struct Monitor **pprev; /* the link that points here: O(1) removal */
    uint64_t watcher;      /* pid of the watching process */
    uint64_t ref;          /* the monitor reference (an integer) */
    Term name;             /* monitor(process, Name): the 'DOWN' names
                            * {Name, nonode@nohost}; else TERM_NIL */
} Monitor;

/* A monitor as its watcher keeps it (vm/mailbox.c): whom it watches, its
 * reference (the list is in the order of the references, for
 * demonitor's binary search) and its node on the target, which is valid
 * while the target is neither exiting nor exited (only its exit takes
 * the node off then).  target 0: removed by demonitor/1, not yet
 * compacted away. */
typedef struct MonitorOut {
    uint64_t target;
    uint64_t ref;
    Monitor *node;
} MonitorOut;

/* A monitor taken off by demonitor while its target was delivering its
 * 'DOWN': that delivery drops it (vm/mailbox.c). */
typedef struct DownDrop {
    struct DownDrop *next;
    uint64_t ref;
} DownDrop;

/* The words a monitor costs, counted toward its watcher's max_heap_size:
 * its node on the target and its entry in the watcher's list. */
#define VM_MONITOR_WORDS ((sizeof(Monitor) + sizeof(MonitorOut) + sizeof(Term) - 1) / sizeof(Term))

/*
 * Process states.  Transitions (all under p->lock except the first):
 *   NEW -> RUNNABLE (spawn, before it is visible to anyone else)
 *   RUNNABLE -> RUNNING (a scheduler took it from a run queue)
 *   RUNNING -> WAITING (it waits, decided by its scheduler after the
 *     switch), EXITED
 *   WAITING -> RUNNABLE (a message, a timer, or an exit it waits for)
 * A process that yields stays RUNNING while it is queued again (vm/sched.c):
 * RUNNING means "taken by a scheduler and not waiting since": running, or
 * queued again after a yield.  Only the thread running it writes the
 * state of a RUNNING process (and a waker only sets `signaled`), so that
 * thread reads it without the lock.  tvm_processes() shows a process
 * queued after a yield as running.
 */
enum { PS_NEW, PS_RUNNABLE, PS_RUNNING, PS_WAITING, PS_EXITED };

/* The env handed to natives and embedders: a view of a process. */
struct tvm_env {
    Process *p;
};

/*
 * Resolves mod:fun/argc through the export table and reads the argument
 * handles into args[]; TVM_ERR_BADARG on any bad argument, TVM_ERR_LIMIT
 * when a name is no atom yet and the atom table is full.  Shared by
 * tvm_call() and tvm_spawn().  The result is the export entry, not its
 * target: a target may be a breakpoint trampoline, which lives only while
 * thread progress protects it, so it is read by whoever runs the call, as
 * a reader (see vm/qsbr.h).
 */
tvm_status vm_env_resolve(tvm_env *env, const char *mod, const char *fun, int argc,
                          const tvm_term *argv, Term *args, const Export **fn);

struct Process {
    tvm_vm *vm;
    struct tvm_env env;

    /* Heap: [heap, htop) is in use, [htop, hend) free. */
    Term *heap, *htop, *hend;
    /* What vm_heap_ensure compares against: hend, or lower while the
     * allocation profiler waits for this process's next sample point
     * (vm/heap.c).  Only the process's own thread touches it, and the
     * profiler's fields below. */
    Term *hlim;
    size_t heap_min;
    size_t gc_count;
    /* The used words the last collection left (BEAM's recent_size in
     * the garbage_collection trace's Info); p's own thread only. */
    size_t gc_recent;
    /*
     * max_heap_size (words; 0: none), set at spawn.  When a collection
     * leaves the heap, with the messages in the process's own queue
     * (mq_words), bigger than this, the process is killed: `kill` gets the
     * reason and reds 0, so the interpreter's next reduction check (a call
     * or a backward jump), or the return of the native that was running,
     * raises exit:kill, which no handler catches (vm/interp.c).  A
     * process being killed never waits (vm_proc_wait, tvm_sleep,
     * tvm_receive return at once): a wait is no reduction check, and the
     * process would hold its heap for as long as it waited.  The
     * process's own thread only.
     */
    size_t max_heap;
    size_t mq_words;       /* words of the messages in mq */
    /*
     * The monitors this process set (erlang:monitor/2), one entry each:
     * the target, the reference and the node.  Each live one costs
     * VM_MONITOR_WORDS toward
     * max_heap_size, as a message in its queue does: without that, a
     * loop of monitor/2 grew the node's memory without bound under any
     * limit.  An entry outlives its node when the target exits first
     * (the target frees the node as it sends the 'DOWN'); such entries
     * are dropped when the list doubles, and before a kill they would
     * cause (vm_proc_monitors_prune), as are the entries demonitor/1
     * removed (mon_out_dead of them), which it also compacts away once
     * they are half the list.  When this process exits, it takes
     * its nodes off its targets (vm_proc_monitors_drop), so a watcher
     * that dies leaves nothing behind on a target that lives on.  The
     * process's own thread only (the nodes are under their target's
     * lock).
     */
    MonitorOut *mon_out;
    size_t mon_out_len, mon_out_cap;
    size_t mon_out_dead;   /* entries removed by demonitor (target 0), not counted */
    size_t mon_out_prune;  /* the length at which the next pruning is due */
    /* Its registered name (vm/registry.c): reg_named says whether it has
     * one; reg_closed, set as it exits, that it can have none from then
     * on.  Under the VM's registry lock: written by register/2 and
     * unregister/1 of any process and by this process's exit. */
    Atom reg_name;
    bool reg_named, reg_closed;
    /* Its links (vm/links.c): the pids at their other ends, under the
     * VM's link_lock, as links_closed is, set as it exits (no link is
     * made to it from then on). */
    uint64_t *links;
    uint32_t nlinks, links_cap;
    bool links_closed;
    /* Exit signals (vm/links.c), this process's own thread only (it acts
     * on its signals itself): whether its kill came from one, whose
     * message kill_msg holds the reason `kill` points into (off the heap,
     * freed with the process). */
    bool kill_signal;
    /* Whether it traps exit signals: written by the process itself
     * (process_flag/2), read by it and, relaxed, by process_info/2 of
     * another process (a moment's picture: nothing else is ordered by
     * it). */
    VmAtomic trap_exit;
    /* process_info/2's current_function, current_stacktrace, messages
     * or monitors asked of this process while it runs (vm/procinfo.c, "Asking a running
     * process"): the head of a list of requests (struct VmInfoReq, on the
     * askers' stacks), which askers add and take off under lock; the
     * process answers them all at its next reduction check, under its
     * lock, after a relaxed load of the head there (a request missed
     * waits for the next check; the asker looks again). */
    VmAtomic info_reqs;
    Message *kill_msg;
    /* The process dictionary (vm/dict.c; NULL: empty): its keys and
     * values on the heap, the table off it, a root of the collector.
     * Written only by the process itself while it runs (put/2, erase/0,1,
     * its exit); read by process_info/2 of another process as its own
     * queue is (vm/procinfo.c), under its lock while it is held still. */
    struct VmDict *dict;
    /* Sequential tracing (vm/seqtrace.c): the token (NULL: none; its own
     * allocation), the counters curr_cnt and prev_cnt, and the
     * reset_trace generation the counters are of.  The process's own
     * thread only (a child's are set by its parent before it is
     * published); `seq` is the one field a send and a receive test. */
    struct VmSeqToken *seq;
    int64_t seq_clock, seq_lastcnt;
    uint64_t seq_cgen;
    Term kill;             /* the reason it is being killed, or 0 */
    size_t kill_heap;      /* heap + queue + monitor + dictionary words when it was (crash report) */
    size_t kill_monitors;  /* the monitors it held then (crash report) */
    size_t kill_dict;      /* the words of its dictionary's table then (crash report) */
    /* The allocation profile (vm/heap.c): words left to the next sample
     * point, counted from where htop will be after the allocation that
     * set them (pf_base; 0 words left: not sampling), and the state of
     * the random intervals between sample points. */
    int64_t pf_left;
    Term *pf_base;
    uint64_t pf_rng;
    /* The off-CPU profile (profile/): when the current wait began (p's
     * own thread), and when a waker made p runnable again (the waker,
     * under p->lock, only while the profile runs; 0 if none did: a wake
     * that came before p switched out).  p reads it after its scheduler
     * took p->lock to run it again, which orders the two. */
    uint64_t pf_wait_t0;
    uint64_t pf_woken;

    /* Register stack. */
    Term *stack;
    uint32_t stack_size, stack_limit;

    /* Frame stack: frames[0 .. nframes-1]; the top is the running frame. */
    Frame *frames;
    uint32_t nframes, frames_cap, frames_limit;
    /* How many of them are trace frames (FRAME_TRACE), so that an
     * exception looks for them only when there are some.  The process's
     * own thread only (breakpoints/bp_frame.c). */
    uint32_t ntrace;
    /* Index + 1 of the innermost activation's entry frame (0: none); each
     * entry frame's ret_reg links to the one before, outward.  Written by
     * the process's own thread (vm_execute); read by a capture or profile
     * that copies the innermost frames of a deep stack and needs the entry
     * of the activation it cuts (stacks/st_walk.c, st_copy_vm): from a
     * signal handler on this thread, or from another thread while the
     * process is held still.  A reader checks what it finds (an index
     * below nframes, of an entry frame) and falls back to leaving the
     * activation unplaced, so a value caught mid-update costs order, never
     * memory safety. */
    uint32_t entry_top;

    /* Try handlers. */
    Handler *handlers;
    uint32_t nhandlers, handlers_cap;

    int32_t reds;          /* reductions left in this time slice */
    int32_t reds_slice;    /* the reductions this time slice began with */

    /* The pending exception (valid after an activation returned TVM_EXCEPTION). */
    Term exc_class, exc_reason;
    RawFrame exc_trace[VM_STACKTRACE_DEPTH];
    uint32_t exc_depth;
    Term exc_trace_term;   /* exc_trace as a term, built on first use; THE_NONE until then */
    /* The mixed stack where the pending exception was raised (only with
     * vm->crash_stacks; allocated at the first raise, owned by p). */
    struct StStack *exc_stack;

    /* Handles held by natives and embedders (GC roots). */
    Term *roots;
    uint32_t nroots, roots_cap;

    uint32_t nesting;      /* vm_execute activations running on this process */
    bool exc_pending;      /* exc_* holds an exception nobody has caught yet */

    uint64_t pid;          /* 0 for a call context (not a scheduled process) */

    /* The trace word (see VmTraceTab above).  Written by any thread
     * under p->lock (trace/tr_flags.c: the union is recomputed from the
     * sessions' words there) and at spawn, before the process is
     * visible, from vm->trace_new; read relaxed by the process itself at
     * breakpoint hits, spawn, exit and its other events, and by other
     * threads after folding (trace_info).  A change of this process
     * applies from its next read (no barrier); a change for all
     * processes is folded in before the process next runs
     * (trace_gen below). */
    VmAtomic trace;
    /* The pid of the tracer of VM_TRACE_TRACER, or 0.  Written under
     * p->lock by erlang:trace/3 before the flag is set (both under the
     * lock, the flag's word store after it); read relaxed by p itself
     * when its word has the flag. */
    VmAtomic tracer;
    /* Each session's word while several sessions trace p (VmTraceTab *,
     * or 0).  Allocated by the first writer that needs it, under
     * p->lock (or by vm_spawn before p is visible), and published
     * ([TF1] release) before any trace word says VM_SID_MULTI; loaded
     * ([TF1'] acquire) by readers that saw VM_SID_MULTI.  Freed only with
     * the process: a reader may still hold it while the word changes. */
    VmAtomic trace_tab;
    /* The generation of flags for all (tvm_vm.trace_gen) this trace word
     * has taken in: written under p->lock by whoever folds the changes in
     * (trace/tr_flags_all.c; [TG2] release, after the word), and by
     * vm_spawn before p is visible; read acquire ([TG2']) by the
     * scheduler switching p in and by lookers, who fold when it differs
     * and otherwise read the word it covers.  0 forever for a call context (pid 0), which flags for all
     * do not reach. */
    VmAtomic trace_gen;

    /* Stack capture: the interlock's state, flag and lock (vm/interlock.h). */
    VmInterlock il;

    /*
     * Statistics for tvm_processes (an observer on any thread):
     *   reductions  made in the time slices that ended (the running slice
     *               is added when the process is next scheduled in);
     *               written by the scheduler switching it in (relaxed load
     *               and store: one writer at a time, the scheduler that
     *               owns the process), read relaxed;
     *   heap_words  its heap's size; written by the process itself when
     *               the collector resizes it, read relaxed;
     *   mq_len      messages in its own queue (mq); written by the process
     *               (fetch, accept), read relaxed.  Messages still in the
     *               inbox are inbox_len, under `lock`.
     * Relaxed: each is a number on its own, read for display; a reader
     * sees a value from a moment ago, never a torn one.
     */
    VmAtomic reductions, heap_words, mq_len;

    /* ---- scheduled processes only (see vm/sched.c, vm/proc.c) ---- */

    /*
     * lock protects: state, the inbox, signaled, timed_out, monitors,
     * exit_value/exit_class.  Written by the process's scheduler, senders,
     * the timer thread and exiting processes it monitors.
     */
    pthread_mutex_t lock;
    int state;                     /* PS_* (written under lock; see the states above) */
    Message *inbox, **inbox_tail;  /* sent, not yet seen by the receiver (under lock) */
    size_t inbox_len;              /* messages in the inbox (under lock) */
    size_t inbox_words;            /* words of the messages in inbox (under lock) */
    bool signaled;                 /* something arrived while RUNNING (under lock) */
    bool timed_out;                /* the wait's timer fired (under lock) */
    bool exiting;                  /* past the point of taking new monitors (under lock) */
    /* 1 while an exit signal waits in the inbox: written under lock (by
     * its sender, and cleared as the process takes it in), read relaxed
     * by the process at its reduction checks (a late look only delays
     * the signal to the next one, or to its wait, which the signal ends). */
    VmAtomic sig_pending;
    uint64_t timer_seq;            /* identifies the current wait's timer (under lock) */
    Monitor *monitors;             /* under lock */
    /*
     * The reference of the monitor whose 'DOWN' this process, exiting,
     * is delivering (0: none).  Set by the process under its own lock,
     * in the same critical section that takes the node off `monitors`;
     * cleared under the watcher's lock, in the critical section that
     * puts the 'DOWN' in the watcher's inbox (or drops it).  Read by a
     * watcher's demonitor under this process's lock and again under its
     * own: still set then, the 'DOWN' is not in its inbox yet, and a
     * DownDrop added under that lock reaches the delivery (vm/mailbox.c).
     * Atomic (relaxed: the locks order the two sides) because other
     * watchers read it under this lock while it is cleared under theirs.
     */
    VmAtomic mon_firing;
    /* Monitors demonitored while their 'DOWN' was being delivered; each
     * entry is taken by that one delivery (at most one per process
     * delivering at that moment, so a handful).  Under lock. */
    DownDrop *down_drop;
    Term exit_class;               /* after EXITED: normal (class none) or the exception */
    Message *exit_value;           /* after EXITED: the result or reason, copied out
                                    * (joinable processes only: nobody else reads it) */

    /* Owned by the process itself (only its own fiber touches them). */
    Message *mq, **mq_tail;        /* received messages, oldest first */
    Message **cursor;              /* the next message `recv` looks at */
    bool want_wait;                /* asks its scheduler to make it WAITING */
    /* Inside a native whose call lent its scheduler's local queue (an
     * embedder's, vm/interp.c, or a built-in one given long work, or a
     * long walk of a term, vm/lend.h; set by vm_sched_lend, cleared by
     * vm_sched_lend_end): a switch out takes the queue back, so the
     * switch in lends the new scheduler's again (vm_proc_switch_out). */
    bool lending;
    struct Fiber *fiber;
    /* The first function (its export entry, resolved when the process
     * starts: the target may be a breakpoint trampoline) and arguments. */
    const Export *entry;
    Message *entry_args;

    /* Written by the scheduler that runs it (before switching in). */
    struct Scheduler *sched;
    uint32_t bp_slot;              /* 1 + that scheduler's id: its call-counter shard
                                    * (vm/breakpoint.h); 0 when not scheduled */
    /* call_time (breakpoints/bp_time.c): the call_time-traced function the
     * process is in (NULL: none) and the tick its current stretch of time
     * began.  Written and read only by the thread running the process. */
    const FuncInfo *ct_fn;         /* the default session's */
    uint64_t ct_mark;
    /* Bit i: session slot i has a current function (ct_fn for slot 0,
     * ct_sess for the others), so the scheduler stops and restarts the
     * clock (vm_hook_time_out/in) while this is non-zero. */
    uint32_t ct_live;
    /* The other sessions' current functions and marks, allocated by
     * breakpoints/bp_time.c at the first it needs (its layout is that
     * file's); freed with the process. */
    void *ct_sess;
    struct Process *rq_next;       /* run-queue link: a local queue's owner, or a shared
                                    * queue's lock (vm/sched.h) */

    /* The table's reference + lookups + the joiner's; freed (or cached) by
     * whoever drops the last (vm/proc.c, [RF1]).  Taken only under the
     * table lock while the process is in the table; dropped anywhere. */
    VmAtomic refs;
    bool joinable;                 /* someone will join it (no crash report) */
    struct Process *join_next;     /* on sys->joinables until joined (sys->lock) */
};

/* Creates a process (call context) of `vm`. */
Process *vm_process_new(tvm_vm *vm);
void vm_process_free(Process *p);
/* True when p's buffers are still at their start sizes (worth keeping). */
bool vm_process_recyclable(const Process *p);
/* Makes an ended, recyclable process as vm_process_new() would, keeping
 * its buffers (and nothing else: every other field starts at zero). */
void vm_process_recycle(Process *p);

/*
 * Makes sure the register stack has `words` entries; returns false (and
 * leaves the stack as it was) if that exceeds the process's limit.  May
 * move p->stack.
 */
bool vm_stack_ensure(Process *p, size_t words);

/* Makes room for one more frame; false at the limit.  May move p->frames. */
bool vm_frames_ensure(Process *p, uint32_t n);

/* Pushes a try handler. */
void vm_handler_push(Process *p, uint32_t frame, uint32_t reg, const Instr *pc);

/* Handle management (roots). */
tvm_term vm_root_push(Process *p, Term t);
static inline Term vm_root_get(const Process *p, tvm_term h)
{
    return p->roots[h.h];
}

/*
 * Runs `fn` with `argc` arguments (copied into a new register window) in a
 * new activation on `p`, on the calling thread.  Returns TVM_OK with the
 * result in *result, or TVM_EXCEPTION with p->exc_* set.  Re-entrant: a
 * native may call it on its own process.
 */
tvm_status vm_execute(Process *p, const FuncInfo *fn, int argc, const Term *args,
                      Term *result);

/*
 * Records an exception in p: class, reason and the stack trace of the
 * frames from the top down (skipping non-call frames), starting at
 * `top_pc` for the top frame.
 */
void vm_exception_set(Process *p, Term cls, Term reason, const Instr *top_pc);

/* Ends p's time slice: the reductions it made go to its total (what
 * tvm_processes shows) and its budget is full again.  On the thread that
 * owns p: the process itself at a yield point, its scheduler when it has
 * switched out. */
static inline void vm_reds_account(Process *p)
{
    uintptr_t used = (uintptr_t)(p->reds_slice - p->reds);
    vm_atomic_store_relaxed(&p->reductions, vm_atomic_load_relaxed(&p->reductions) + used);
    p->reds = p->reds_slice = VM_REDUCTIONS;
}

/* The words of p's stack as BEAM counts its stack_size (the
 * garbage_collection trace's and the system monitor's Info): the
 * register words the frames use and the frame records themselves, as
 * BEAM's stack holds both. */
static inline size_t vm_stack_words(const Process *p)
{
    if (!p->nframes)
        return 0;
    const Frame *top = &p->frames[p->nframes - 1];
    size_t regs = top->base + (top->fn ? top->fn->nregs : 0u);
    return regs + p->nframes * (sizeof(Frame) / sizeof(Term));
}

/* The monitors p set that count toward its max_heap_size: its entries
 * but those demonitor/1 removed (vm/process.h, mon_out). */
static inline size_t vm_monitors_live(const Process *p)
{
    return p->mon_out_len - p->mon_out_dead;
}

/* Builds the term form of p's exception stack trace on its heap. */
Term vm_exception_trace_term(Process *p);

/*
 * The call frames among p's frames[0 .. n-1], from the top down (trace
 * and entry frames skipped), at most max of them, into out: each
 * function and the line it is at, the top one's from top_pc (NULL: no
 * line) and each other's from the call it made (the pc it resumes at,
 * less one).  Returns how many.  p's own thread, or another holding p's
 * lock while p is not running (its frames do not change then).
 */
uint32_t vm_raw_frames(const Process *p, uint32_t n, const Instr *top_pc, RawFrame *out,
                       uint32_t max);

/* The list [{M, F, A, [{file, File}, {line, Line}]}] of n raw frames on
 * p's heap (either item left out when unknown), as stack traces are. */
Term vm_stacktrace_term(Process *p, const RawFrame *frames, uint32_t n);

/* Appends p's pending exception, class, reason and stack trace, as the
 * crash report and tvm_format_exception print it. */
struct StrBuf;
void vm_format_exception(Process *p, struct StrBuf *sb);

#endif /* VM_PROCESS_H */
