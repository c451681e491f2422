/*
 * trace/tr.h - the trace event pipeline: per-scheduler rings, the
 * collector thread and the sinks it feeds.  Internal API: the VM's
 * pipeline (trace/tr_vm.c, tvm_trace_start in include/tracevm.h) is one
 * of these, and its emitters (tr_vm_call.c, tr_vm_proc.c) call tr_emit().
 *
 * Life cycle:
 *   tp = tr_pipeline_new(&opts);           rings allocated, nothing running
 *   tr_pipeline_add_sink(tp, sink) ...     before start; the pipeline owns them
 *   tr_pipeline_start(tp);                 opens the sinks, starts the collector
 *   tr_emit(tp, sched, &ev) ...            from producers (before start the rings
 *                                          only fill up: nothing drains them)
 *   tr_flush(tp);                          everything emitted so far reaches the sinks
 *   tr_pipeline_free(tp);                  drains, reports losses, closes the sinks
 *
 * Producers: ring i (0 <= i < nscheds) has exactly one producer, the
 * thread of scheduler i; any other thread passes sched = -1 and writes
 * into the shared ring under a mutex.  See trace/tr_buffer.c for the ring
 * protocol and trace/tr_collector.c for the ordering guarantees.
 */
#ifndef TRACE_TR_H
#define TRACE_TR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/tr_event.h"
#include "trace/tr_sink.h"

typedef struct TrPipeline TrPipeline;

/* What a producer does when its ring is full. */
typedef enum TrPolicy {
    /* Drop the event and count it; the count reaches every sink as a LOST
     * record at the point of the loss. */
    TR_POLICY_DROP = 0,
    /* Write nothing and return TR_FULL: the caller suspends the traced
     * process and retries after the wake-up (on_space / tr_wait_space). */
    TR_POLICY_LOSSLESS = 1,
} TrPolicy;

typedef struct TrOptions {
    int nscheds;               /* scheduler rings (>= 0); plus one shared ring */
    size_t ring_bytes;         /* bytes per ring, a power of two (0: tr_ring_default) */
    TrPolicy policy;
    size_t payload_cap;        /* payload bytes per event (0: TR_PAYLOAD_DEFAULT;
                                  at most TR_PAYLOAD_MAX) */
    /* The collector holds back records younger than this so that records
     * of different rings come out in timestamp order (0: no holding back;
     * rings are merged only within what one pass sees). */
    uint64_t merge_window_ns;  /* 0: TR_MERGE_WINDOW_DEFAULT; TR_MERGE_OFF: none */
    uint64_t poll_ns;          /* collector's idle sleep (0: TR_POLL_DEFAULT) */
    /*
     * Lossless wake-up: called on the collector thread after it freed space
     * in a ring whose producer got TR_FULL (ring = sched id, -1 shared);
     * with a raw sink each ring has its own collector thread, so calls for
     * different rings may come at the same time from different threads.
     * It must not block or emit; the integration makes the suspended
     * processes of that scheduler runnable again.  May be NULL.
     */
    void (*on_space)(void *data, int sched);
    void *on_space_data;
} TrOptions;

/*
 * The default ring size: TR_RING_BUDGET shared among the scheduler rings,
 * as the largest power of two that fits, but no less than
 * TR_RING_DEFAULT_MIN and no more than TR_RING_DEFAULT_MAX per ring (the
 * shared ring gets the same).  So 1 to 4 schedulers get 8 MiB rings, 8 get
 * 4 MiB, 16 get 2 MiB and 32 or more 1 MiB.  Why 8 MiB: a scheduler that
 * traces every call fills a ring at about 1.5 GB/s, and a woken collector
 * thread may wait for a CPU for as long as the OS's time slice (a few ms
 * where the schedulers keep every CPU busy); a fully traced fib(27) on 2
 * schedulers and 2 vCPUs lost a median of 0 to 12,727 events per run with
 * 1 MiB rings, 0 with 4 MiB but up to 45,196 in a single run, and 0 with
 * 8 MiB (docs/tracing.md, "Benchmarks against the targets").  Why a
 * budget: the memory is committed as the rings fill, and a VM with a
 * scheduler per core on a large machine would otherwise commit 8 MiB per
 * core per session.
 */
#define TR_RING_BUDGET ((size_t)32 << 20)
#define TR_RING_DEFAULT_MIN ((size_t)1 << 20)
#define TR_RING_DEFAULT_MAX ((size_t)8 << 20)
size_t tr_ring_default(int nscheds);
#define TR_RING_MIN ((size_t)4096)
/* The largest ring: a gibibyte per scheduler is far more than any trace
 * needs, and a larger ring_bytes is far more likely a mistake (it used to
 * abort the program when the allocation failed). */
#define TR_RING_MAX ((size_t)1 << 30)
#define TR_PAYLOAD_DEFAULT 256
#define TR_PAYLOAD_MAX 4096
#define TR_MERGE_WINDOW_DEFAULT 1000000u
#define TR_MERGE_OFF UINT64_MAX
#define TR_POLL_DEFAULT 1000000u

/* An event as a producer hands it over (terms are copied at emit time). */
typedef struct TrEmit {
    TrKind kind;               /* not LOST or PAD */
    unsigned flags;            /* TR_F_ARITY, TR_F_RETURNS, TR_F_NO_MFA, TR_F_TIMESTAMP */
    uint64_t pid;
    Atom mod, fun;
    unsigned arity;
    const Term *terms;         /* payload terms (see tr_event.h per kind) */
    unsigned nterms;
} TrEmit;

typedef enum TrStatus {
    TR_OK = 0,
    TR_DROPPED,                /* drop policy: the ring was full; counted */
    TR_FULL,                   /* lossless: nothing written; retry after a wake-up */
} TrStatus;

typedef struct TrRingStats {
    uint64_t emitted;          /* events written */
    uint64_t lost;             /* events dropped (drop policy) */
    uint64_t full;             /* TR_FULL returns (lossless policy) */
    uint64_t yields;           /* CPU offered to the collector (drop policy,
                                  tr_buffer.c: "Waking the collector") */
} TrRingStats;

typedef struct TrStats {
    int nrings;                /* nscheds + 1; ring i is scheduler i, the last is shared */
    TrRingStats ring[];
} TrStats;

/*
 * Creates a pipeline with `opts` (copied).  Returns NULL with a message in
 * err (size errlen) on bad options (ring size not a power of two, too
 * small for two largest records, payload cap too large).
 */
TrPipeline *tr_pipeline_new(const TrOptions *opts, char *err, size_t errlen);

/* Adds a sink (owned by the pipeline from now on).  Before start only. */
void tr_pipeline_add_sink(TrPipeline *tp, TrSink *sink);

/* Opens the sinks and starts the collector thread.  Once.  False when the
 * thread cannot be started (the OS refuses one: tr_pipeline_free then
 * discards the sinks, which removes the files they made: TrSinkOps);
 * the result may be ignored where that is fatal. */
bool tr_pipeline_start(TrPipeline *tp);

/*
 * Records one event.  sched: the calling scheduler's id (the caller must
 * be that scheduler's thread), or -1 from any other thread.  The payload
 * terms are encoded at once (bounded, no allocation, no lock on a
 * scheduler ring).  Returns TR_OK, TR_DROPPED or TR_FULL (see TrPolicy).
 */
TrStatus tr_emit(TrPipeline *tp, int sched, const TrEmit *ev);

/*
 * Blocks the calling thread until ring `sched` has room for the largest
 * record, or `timeout_ns` passed (0: forever), or the pipeline is being
 * freed.  For threads that may block (tests, foreign threads); a
 * scheduler suspends the process instead and waits for on_space.  Only
 * after tr_pipeline_start (before it nothing frees space).  Returns false
 * on timeout.
 */
bool tr_wait_space(TrPipeline *tp, int sched, uint64_t timeout_ns);

/*
 * Waits until every event emitted before the call (by this thread, or by
 * threads that synchronised with it) reached the sinks, and the sinks
 * flushed their output.  Not from a scheduler thread (it blocks).
 */
void tr_flush(TrPipeline *tp);

/*
 * A mark (erlang:trace_delivered/1, trace/tr_delivered.c): fn(data) is
 * called once, on a collector thread, when every record published into
 * each ring before this call (its head then, an acquire load: [TB1'])
 * has been handed to the sinks and the sinks' output flushed (a raw
 * sink's range written); or, for marks still open when the collectors
 * stop, by tr_pipeline_finish after their last drain.  fn runs with no
 * pipeline lock held and must not free tp.  Returns false, and fn is
 * never called, when the pipeline never started or its collectors have
 * stopped (tr_pipeline_finish): nothing more will be delivered.  Any
 * thread; takes tp's lock for a moment and allocates a mark of a word
 * per ring, freed when it is answered.
 */
typedef void (*TrMarkFn)(void *data);
bool tr_pipeline_mark(TrPipeline *tp, TrMarkFn fn, void *data);

/* Keeps tp from being freed (tr_pipeline_free waits) until
 * tr_pipeline_unhold: a flusher takes it under whatever keeps tp alive
 * (the code permission, for a session's pipeline), then lets that go
 * before tr_flush waits for the collector, whose callbacks may need it. */
void tr_pipeline_hold(TrPipeline *tp);
void tr_pipeline_unhold(TrPipeline *tp);

/* Whether the calling thread is a pipeline's collector (a sink, or a
 * callback a sink calls, is running): such a thread must not stop a
 * pipeline, which waits for its collector. */
bool tr_in_collector(void);

/* Counters per ring (allocated; free() it). Any thread. */
TrStats *tr_pipeline_stats(TrPipeline *tp);

/*
 * Stops the collector after draining every ring, reports losses not yet
 * reported, closes the sinks and frees everything.  Producers must have
 * stopped emitting.
 */
void tr_pipeline_free(TrPipeline *tp);

/* The first part of tr_pipeline_free, for a caller that must know the
 * last drain is done before it lets go of tp (trace/tr_delivered.c):
 * the collectors drain every ring, flush the sinks and stop, and the
 * marks still open are answered.  Later marks are refused.  Idempotent;
 * the same rules as tr_pipeline_free (which calls it if nobody did). */
void tr_pipeline_finish(TrPipeline *tp);

#endif /* TRACE_TR_H */
