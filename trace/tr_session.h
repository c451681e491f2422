/*
 * trace/tr_session.h - trace sessions: several independent tracers in one
 * VM, each with its own sink, limits, counters and stop.  What a session
 * sets (process flags here in trace/, breakpoints in breakpoints/) is
 * kept per session by the layer that owns it; this table says which
 * sessions exist and carries what their events need on the way out.
 * trace/tr_session.c has the protocol; docs/tracing.md ("Sessions") the
 * long version.
 */
#ifndef TRACE_TR_SESSION_H
#define TRACE_TR_SESSION_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "trace/tr.h"
#include "trace/tr_outfail.h"
#include "vm/process.h"
#include "vm/vm.h"

/* A session's name: 1..TR_SESSION_NAME_MAX bytes. */
#define TR_SESSION_NAME_MAX 255

/* Where a session is in its life (TrSession.state). */
typedef enum TrSessState {
    TR_SESS_FREE = 0,      /* the slot is unused */
    TR_SESS_CREATING,      /* reserved by a create that has not published it yet */
    TR_SESS_LIVE,
    TR_SESS_STOPPING,      /* a limit or its owner ended it: the stopper removes its settings */
    TR_SESS_STOPPED,       /* settings removed, final record written; sink and counters kept */
    TR_SESS_DESTROYING,    /* being destroyed: settings, then the sink */
} TrSessState;

/* Why a session stopped (the final record says it). */
typedef enum TrStopReason {
    TR_STOP_NONE = 0,
    TR_STOP_MAX_EVENTS,    /* it wrote its max_events */
    TR_STOP_RATE,          /* more than `rate` events in one window (the stop policy) */
    TR_STOP_DURATION,      /* its duration ran out */
    TR_STOP_OWNER,         /* its owner process exited */
    TR_STOP_DESTROYED,     /* destroyed by its creator */
} TrStopReason;

/* The reason's name: "max_events", "rate", "duration", "owner_exit", "destroyed". */
const char *tr_stop_reason_name(TrStopReason r);

/* A session's limits (0: none). */
typedef struct TrLimits {
    uint64_t max_events;       /* stop once this many events were admitted */
    uint64_t rate;             /* at most this many events per window ... */
    uint64_t window_ns;        /* ... of this many ns (0: 1 s) */
    bool rate_drop;            /* above the rate: drop and count (else stop) */
    uint64_t duration_ns;      /* stop this long after the start */
} TrLimits;

typedef struct TrSession {
    /* Written by a create while the slot is FREE or CREATING, under
     * TrSessions.lock, and published by the state's release store ([SS1]);
     * read by anyone who acquired a state past CREATING ([SS1']).
     * Unchanged until the slot is FREE again, which happens only after a
     * grace period that follows the session's last use (tr_session.c). */
    uint64_t id;               /* the public id: serial << 8 | slot */
    unsigned sid;              /* slot | generation << 8 (vm/traceword.h) */
    unsigned slot;
    char name[TR_SESSION_NAME_MAX + 1];
    uint64_t tracer;           /* events as messages to this process, or 0 */
    uint64_t owner;            /* destroyed when this process exits, or 0 */
    TrLimits lim;
    /* 1 when lim has max_events or a rate: every event passes
     * tr_session_admit, which reads `lim`, `start` and the counters only
     * after loading this with acquire ([SS2']).  Stored with release
     * ([SS2]) after `lim`; the default session, which is always live,
     * changes its limits by storing 0, waiting for a grace period (no
     * emitter still reads the old ones), writing the new ones and
     * storing 1 (tr_session_restart_default). */
    VmAtomic gated;
    uint64_t start;            /* tr_mono_ns() when it went live: rate windows count from it */
    uint64_t deadline;         /* tr_mono_ns() when the duration ends, or 0 */

    /* TrSessState | sid << 8, so that one load says which incarnation is
     * in which state: [SS1] release stores under TrSessions.lock; [SS1']
     * acquire by emitters and API calls (relaxed under the lock). */
    VmAtomic state;
    /* The running pipeline (struct TrVm *) or 0: [TP1] release store by
     * its start (before the schedulers' ring pointers, [TP2]), release
     * NULL by its stop (after them) before a grace period; [TP1']
     * acquire by emitters (trace/tr_vm.c). */
    VmAtomic out;
    /* The pipeline a tvm_trace_stop unpublished and drains outside the
     * code-modification permission (trace/tr_vm.c, stop_pipeline), or
     * NULL: set by that stop while it holds the permission, cleared by it
     * with its counts added (tr_session_add_counts) before the pipeline
     * is freed; both under TrSessions.lock, where counts read it, so a
     * count during the drain includes the pipeline's events. */
    struct TrVm *draining;

    /* Counters, any thread: events the gate admitted, the current rate
     * window (index << 32 | count, one CAS word), events dropped above
     * the rate, messages delivered to the tracer, and why it stopped. */
    VmAtomic admitted;
    VmAtomic rate_win;
    VmAtomic rate_dropped;
    VmAtomic sent;
    VmAtomic reason;
    /* What its pipelines wrote and lost, added when each is freed (under
     * TrSessions.lock). */
    uint64_t written_done, lost_done;
    /* The stop's progress, so that a destroy after a stop does not do it
     * twice: written and read under the code-modification permission (the
     * stopper and destroy in breakpoints/bp_session.c; final_written also
     * by a pipeline stop in trace/tr_vm.c that comes before the stopper
     * (it may claim a record that it writes after the permission: the
     * stopper finds it done), and by a destroy after it released the
     * permission, when it alone has the session, DESTROYING, and its
     * unpublished pipeline), reset by a create or a restart. */
    bool settings_removed, final_written;
    /* The last record went into a pipeline (counted there): written by
     * whoever writes the record, read by counts, under TrSessions.lock. */
    bool final_in_pipe;
    /* Its output's first failure (its own lock: trace/tr_outfail.h):
     * reset for the session by its reserve and by each pipeline's start
     * (trace/tr_vm.c), written by the sink that fails, read by
     * tvm_session_error and a destroy. */
    TrOutFail fail;
} TrSession;

/*
 * The changes of one slot's flags for all existing processes, as a
 * process that has not folded them in yet needs them: for each flag, the
 * generation (tvm_vm.trace_gen) of its last change and the value it was
 * given; applying "every flag changed after my generation takes its last
 * value" is applying every change after it, in order.  Written and read
 * under TrSessions.flags_lock (trace/tr_flags_all.c has the protocol).
 */
typedef struct TrFlagsAll {
    unsigned sid;              /* the session of the slot's last change */
    unsigned on;               /* each flag's value after its last change */
    uint64_t last;             /* the newest generation in gen[] (0: none) */
    uint64_t gen[32];          /* by flag bit: its last change's generation */
} TrFlagsAll;

typedef struct TrSessions {
    /* lock protects: the states' transitions, `pending`, `retry`,
     * `retry_at`, `quit`, `serial`, written_done/lost_done; the stopper
     * waits on `cond`. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint32_t pending;          /* slots whose stop the stopper owes (bit per slot) */
    uint32_t pending_destroy;  /* ... and that it destroys afterwards */
    uint32_t retry;            /* stops whose last record found the ring full */
    uint64_t retry_at;         /* when they become pending again (monotonic ns) */
    bool quit;
    uint64_t serial;
    /* Live sessions with an owner (relaxed: the exit hook's cheap test). */
    VmAtomic owned;
    /* flags_lock protects the defaults for new processes
     * (vm->trace_new, trace_new_tab: their writers, trace/tr_flags.c),
     * `all` and the bumps of vm->trace_gen (trace/tr_flags_all.c). */
    pthread_mutex_t flags_lock;
    TrFlagsAll all[VM_SESSIONS_MAX];
    TrSession s[VM_SESSIONS_MAX];
    /* Every pipeline whose collectors run, published, draining or being
     * freed (trace/tr_delivered.c): added once it started, taken off
     * once its last drain is done.  pipes_lock protects the list and
     * TrVm.pipe_next; a leaf lock (held only to walk or link). */
    pthread_mutex_t pipes_lock;
    struct TrVm *pipes;
} TrSessions;

/* The session in slot `slot`. */
static inline TrSession *tr_session_at(tvm_vm *vm, unsigned slot)
{
    return &vm->sessions->s[slot];
}

/* The state word's parts. */
static inline TrSessState tr_sess_st(uintptr_t w)
{
    return (TrSessState)(w & 0xffu);
}

static inline unsigned tr_sess_sid(uintptr_t w)
{
    return (unsigned)(w >> 8) & 0xffffu;
}

/* The state, acquired ([SS1']). */
static inline TrSessState tr_session_state(TrSession *s)
{
    return tr_sess_st(vm_atomic_load_acquire(&s->state));
}

/* Whether session `sid` is the live incarnation of its slot. */
bool tr_session_live(tvm_vm *vm, unsigned sid);

/* The trace layer's set-up and end (api/root.c): the table, with the
 * default session live in slot 0 (no sink until tvm_trace_start). */
void tr_sessions_init(tvm_vm *vm);
void tr_sessions_free(tvm_vm *vm);

/*
 * The session whose public id is `id` while it is not FREE; NULL
 * otherwise (with why[] saying so).  Any thread.
 */
TrSession *tr_session_find(tvm_vm *vm, uint64_t id, char *why, size_t whylen);

/*
 * The live session `id` names: its sid; false with a status and a reason
 * otherwise (TVM_ERR_NOTFOUND "no session N (destroyed, or never
 * created)", TVM_ERR_BADARG "session NAME (N) stopped: REASON").  Any
 * thread.
 */
bool tr_session_resolve(tvm_vm *vm, uint64_t id, unsigned *sid, tvm_status *st, char *why,
                        size_t whylen);

/* s's public id, or 0 when its slot is FREE or CREATING (under the lock). */
uint64_t tr_session_id(tvm_vm *vm, TrSession *s);

/* What tvm_session_info_get shows of s, if it is still session `id`:
 * its name, whether it is live (until its stop is done), and why it
 * stopped, from the moment the stop was asked (NULL before). */
bool tr_session_info(tvm_vm *vm, TrSession *s, uint64_t id, char *name, size_t namelen,
                     bool *live, const char **stopped);

/* Session sid's tracer process, or 0. */
uint64_t tr_session_tracer(tvm_vm *vm, unsigned sid);

/* Whether session `id` (not FREE) sends its events to a tracer process. */
bool tr_session_has_tracer(tvm_vm *vm, uint64_t id);

/* {trace_session, Id}: Id, without looking it up. */
bool tr_session_term_id(Term t, uint64_t *id);

/*
 * Reserves a slot (1..VM_SESSIONS_MAX-1) for a new session: CREATING,
 * with its identity and limits set and its counters at zero.  NULL with
 * a reason when every slot is taken.  tr_session_publish makes it LIVE;
 * tr_session_release gives the slot back (a create that failed, or the
 * end of a destroy).
 */
TrSession *tr_session_reserve(tvm_vm *vm, const char *name, uint64_t tracer, uint64_t owner,
                              const TrLimits *lim, char *why, size_t whylen);
void tr_session_publish(tvm_vm *vm, TrSession *s);
void tr_session_release(tvm_vm *vm, TrSession *s);

/* ms in ns, saturating: a window or a duration too long to count in ns
 * (over 584 years) is as long as the counter goes, never a short one
 * that the product wrapped to. */
uint64_t tr_ms_to_ns(uint64_t ms);

/* Checks limits; false with a reason. */
bool tr_limits_check(const TrLimits *lim, char *why, size_t whylen);

/* Sets the default session's limits, counters and state afresh
 * (tvm_trace_start: a new pipeline starts a new run).  trace_lock held
 * (so no tvm_trace_stop still drains, or writes a claimed last record,
 * into the counts this resets) and the permission. */
void tr_session_restart_default(tvm_vm *vm, const TrLimits *lim);

/*
 * The gate of a session with limits (s->gated), on the emitter's thread:
 * whether this event may be written.  Exactly max_events events pass,
 * however many threads emit at once; above the rate, events are dropped
 * (and counted) or the session is asked to stop.  Never blocks: a stop is
 * only requested (tr_session_request_stop).
 */
bool tr_session_admit(tvm_vm *vm, TrSession *s);

/*
 * Asks the stopper to stop s for `why` (LIVE -> STOPPING, once; later
 * requests do nothing).  `destroy`: destroy it after the stop (its owner
 * went away).  Any thread, including a scheduler's on the traced call's
 * path: it takes the table lock for a moment and signals, nothing more.
 */
void tr_session_request_stop(tvm_vm *vm, TrSession *s, TrStopReason why, bool destroy);

/*
 * The stopper's wait (breakpoints/bp_session.c runs the stopper thread):
 * blocks until a stop is owed or a duration runs out (then marks that
 * session STOPPING), and returns the slot, the public id of the session
 * that owes it (the slot may be another session's by the time the
 * stopper acts: it acts on this id only) and whether to destroy it
 * afterwards; false when the VM ends (tr_sessions_quit).
 */
bool tr_sessions_wait(tvm_vm *vm, unsigned *slot, uint64_t *id, bool *destroy);
void tr_sessions_quit(tvm_vm *vm);

/* The stopper's stop of s could not write its last record (its ring is
 * full): the stop is owed again after TR_FINAL_RETRY_NS. */
#define TR_FINAL_RETRY_NS ((uint64_t)10000000u)
void tr_session_retry_stop(tvm_vm *vm, TrSession *s);

/*
 * Destroy's first step: marks s DESTROYING (from LIVE, STOPPING or
 * STOPPED), recording `why` if none yet; false (with a reason) if s is
 * not id's session any more or is being destroyed already.
 */
bool tr_session_begin_destroy(tvm_vm *vm, TrSession *s, uint64_t id, TrStopReason why,
                              char *whybuf, size_t whylen);

/* A stop's end: STOPPING -> STOPPED (a destroy goes on instead). */
void tr_session_stopped(tvm_vm *vm, TrSession *s);

/*
 * Writes s's final record (trace/tr_events.def: stopped, with the reason
 * and the events written and dropped so far) into its pipeline or as a
 * message to its tracer.  From a thread that is not a scheduler, or a
 * process, after the grace period that ended every earlier emit
 * (bp_session.c).
 */
/* The sessions live now (or stopping), the default one included (the
 * control endpoint's info). */
unsigned tr_sessions_live(tvm_vm *vm);
/* Never waits for room: false (nothing written, final_written still
 * false) when its pipeline's shared ring is full, under the lossless
 * policy as under drop.  Under the permission, which must never wait for
 * a sink (tr_session.c says why). */
bool tr_session_final_record(tvm_vm *vm, TrSession *s);
/* The same into t, the session's pipeline that its stop has unpublished
 * (after the grace period, before the pipeline is freed); `wait`: wait
 * for room (then it returns true), only by the pipeline's sole owner, or
 * under the permission where the caller waits for the sink anyway. */
struct TrVm;
bool tr_session_final_record_in(tvm_vm *vm, TrSession *s, struct TrVm *t, bool wait);

/*
 * A pipeline stop that drains t after releasing the permission
 * (tvm_trace_stop): under the permission, after the grace period, its
 * last record goes into t if it fits (or was written, or is owed to no
 * pipeline); else it is claimed: final_written is set, so the stopper
 * and a destroy, under the permission later, find it done, and *owed
 * gets the record (its counts are final: the grace period came first),
 * which tr_session_final_record_put writes, waiting for room, once the
 * permission is released.  True when a record is owed.
 */
typedef struct TrFinalRec {
    Atom reason;
    uint64_t written, lost;
} TrFinalRec;
bool tr_session_final_record_claim(tvm_vm *vm, TrSession *s, struct TrVm *t, TrFinalRec *owed);
void tr_session_final_record_put(tvm_vm *vm, TrSession *s, struct TrVm *t, const TrFinalRec *owed);

/* t, which a tvm_trace_stop unpublished, drains outside the permission:
 * counts include it until tr_session_add_counts takes it back.  The
 * permission held. */
void tr_session_draining(tvm_vm *vm, TrSession *s, struct TrVm *t);

/* A pipeline's totals, added to s's counts when it is freed (before its
 * rings are: if it was s's draining pipeline, it is no longer). */
void tr_session_add_counts(tvm_vm *vm, TrSession *s, struct TrVm *t, uint64_t written,
                           uint64_t lost);

/* Events written into s's sink and lost (full buffers, the rate), so far,
 * over every pipeline it had (its last record not counted). */
void tr_session_counts(tvm_vm *vm, TrSession *s, uint64_t *written, uint64_t *lost);

/* {trace_session, Id} of a live session: its sid (trace/tr_bif.c; the
 * natives of every layer read sessions this way). */
bool tr_session_term(tvm_vm *vm, Term t, unsigned *sid);

/* An exiting process: sessions it owns are stopped and destroyed (the
 * exit hook, trace/tr_vm.c). */
void tr_sessions_owner_exit(tvm_vm *vm, uint64_t pid);

#endif /* TRACE_TR_SESSION_H */
