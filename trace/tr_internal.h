/*
 * trace/tr_internal.h - the pipeline's private structures, shared by the
 * producer side (tr_buffer.c) and the collector (tr_collector.c).
 */
#ifndef TRACE_TR_INTERNAL_H
#define TRACE_TR_INTERNAL_H

#include <pthread.h>

#include "trace/tr.h"
#include "vm/atomics.h"
#include "vm/common.h"

#define TR_CACHE_LINE 64

/* Cut table slots per ring: the granule is the ring's size over this,
 * or the largest record rounded up to a power of two if that is more. */
#define TR_CUTS 64

/*
 * One ring: a single producer, one collector thread as the single
 * consumer (the only one, or the ring's own for a raw sink).
 * Positions are byte counts since the start (never wrap in practice:
 * 2^64 bytes); the offset in `data` is pos & (size - 1).  The fields are
 * grouped by writer so that the producer's and the consumer's lines do
 * not bounce.  Protocol and orderings: trace/tr_buffer.c.
 */
typedef struct TrRing {
    /* ---- written by the producer ---- */
    /* Bytes published.  [TB1] release store by the producer after the
     * record bytes; [TB1'] acquire load by the collector before reading
     * them. */
    VmAtomic head __attribute__((aligned(TR_CACHE_LINE)));
    uint64_t head_local;     /* producer only: == head */
    uint64_t tail_cache;     /* producer only: the last tail it loaded */
    uint64_t pending_lost;   /* producer only: drops not yet marked in the ring */
    /* Immutable after creation: the most immediates a payload may hold on
     * the fast path (trace/tr_fast.h; 0 if the payload cap is too small). */
    unsigned imm_terms;
    /* Immutable once the ring is published: whose ring it is, for the
     * fast path's check (trace/tr_vm_fast.h: the sid of the session whose
     * pipeline it belongs to; 0 outside the VM's pipelines). */
    unsigned tag;
    /* Immutable after creation: log2 of the cut granule (the cut table,
     * below). */
    unsigned cut_shift;
    /* Producer only: the fast path may write below this position: the
     * end of the array's current lap, tail_cache + size, wake_at or the
     * next granule boundary of the cut table (less one: a record that
     * ends there reaches it), whichever is first, or 0 while a LOST
     * marker is pending (so one comparison covers the reasons to take
     * tr_emit).  Set by tr_emit after every
     * write or drop (fast_end_update in tr_buffer.c); the fast path itself
     * never moves head past it, so it stays right.  Below the lap's end
     * the fast path never needs a PAD: it may leave any space before the
     * end (4 to 12 bytes too, where no PAD fits: tr_emit's next write
     * skips them without writing, by the protocol's rule in
     * tr_buffer.c). */
    uint64_t fast_end;
    /* Producer only: where the producer next looks whether the collector
     * should be woken (tr_buffer.c, "Waking the collector"); fast_end
     * stays at or below it, so the fast path hands the check to tr_emit
     * by the comparison it makes anyway. */
    uint64_t wake_at;
    uint64_t n_lost, n_full, n_yields;   /* producer only; mirrored below */
    uint64_t n_marked;       /* producer only: drops written into LOST markers so far */
    /* Statistics: relaxed stores by the producer (`emitted` is its own
     * counter: the producer is its one writer, so it adds with a relaxed
     * load and store; `lost`, `full` and `yields` mirror n_lost, n_full
     * and n_yields), relaxed loads by tr_pipeline_stats (a slightly stale
     * value is fine).  `lost`
     * is also read by the collector at shutdown, after the producers
     * stopped (the thread join or the caller's own synchronisation orders
     * it). */
    VmAtomic emitted, lost, full, yields;

    /* ---- written by the collector ---- */
    /* Bytes consumed.  [TB2] seq_cst add (a release) by the collector after it
     * finished reading the records below it; [TB2'] acquire load by the
     * producer before it overwrites that space. */
    VmAtomic tail __attribute__((aligned(TR_CACHE_LINE)));
    uint64_t tail_local;     /* collector only: consumed, not yet released */
    uint64_t head_seen;      /* collector only: the last head it loaded */
    uint64_t lost_reported;  /* collector only: drops delivered as LOST so far */
    uint64_t last_ts;        /* collector only: ns of the last record delivered */
    uint64_t marked_seen;    /* collector only: LOST markers' counts below tail_local */
    uint64_t n_cut_ranges;   /* collector only: ranges found by a cut (tests read it) */

    /* ---- both ---- */
    /* Lossless wake-up requests, a count (Dekker with [TB3]/[TB3']): a
     * producer adds 1 and then re-reads `tail`; the collector adds to
     * `tail`, reads this and subtracts what it read.  All seq_cst RMWs,
     * so one of them sees the other and a producer that got TR_FULL is
     * always woken.  Read relaxed by the collector as a pressure hint. */
    VmAtomic waiting __attribute__((aligned(TR_CACHE_LINE)));

    /* ---- the cut table: written by the producer, read by the collector ----
     * Where a raw sink's ranges may end without walking the records
     * (trace/tr_buffer.c, "Cuts").  For a multiple B of the granule
     * (1 << cut_shift), slot (B >> cut_shift) % TR_CUTS holds the start of
     * the record that begins before B and ends at or after it, and the
     * producer's n_marked once that record was written; UINT64_MAX as the
     * start where no record does (the end of a lap that a PAD or an
     * unwritten tail closes).  Relaxed stores by the producer before the
     * [TB1] release that publishes a head at or past B; relaxed loads by
     * the collector after the [TB1'] acquire of such a head.  A slot is
     * next written for B + TR_CUTS granules, past the ring's size, which
     * needs the space below B back: not before the collector is done
     * with it ([TB2]/[TB2']). */
    VmAtomic cut_start[TR_CUTS] __attribute__((aligned(TR_CACHE_LINE)));
    VmAtomic cut_marked[TR_CUTS];

    /* ---- immutable after creation ---- */
    uint8_t *data;
    size_t size;
    int sched;               /* scheduler id; -1 for the shared ring */
} TrRing;

/* A collector thread and the rings it drains, [from, to): every ring for
 * decoded sinks, one ring each for a raw sink (tr_collector.c). */
typedef struct TrWorker {
    struct TrPipeline *tp;
    int from, to;            /* immutable once the thread runs */
    pthread_t thread;
    uint64_t flush_done;     /* under the pipeline's lock */
    uint64_t mark_seen;      /* under the pipeline's lock: mark_gen its last pass saw */
} TrWorker;

/*
 * An open mark (tr_pipeline_mark): pos[i] is ring i's head when it was
 * made, 0 once ring i's collector has delivered and flushed everything
 * below it (or it was 0: nothing to wait for); `left` counts the rings
 * not passed yet.  pos, left and the list are under the pipeline's lock;
 * a ring's entry is cleared by the one collector thread that drains it
 * (it compares its own tail_local), so several threads of a raw sink
 * each clear their own, and the one that clears the last takes the mark
 * off the list and answers it.
 */
typedef struct TrMark {
    struct TrMark *next;
    TrMarkFn fn;
    void *data;
    int left;
    uint64_t pos[];
} TrMark;

struct TrPipeline {
    TrOptions opts;          /* immutable after tr_pipeline_new */
    size_t cap;              /* payload cap */
    size_t max_record;       /* header + cap, aligned */
    int nrings;              /* opts.nscheds + 1; the last is shared */
    TrRing *rings;
    /* Producers on other threads than schedulers share the last ring
     * under this lock (taken around the stamp and the write, so the
     * ring's timestamps stay in order). */
    pthread_mutex_t shared_lock;

    TrSink **sinks;          /* collector only after start */
    int nsinks;
    /* The one sink is a raw sink (tr_sink.h): the collector hands it
     * ranges.  Set by tr_pipeline_start before the collector starts. */
    bool raw;

    /*
     * lock protects: stop, flush_req, the workers' flush_done, sleeping,
     * holds; the collector threads wait on `kick` (work, a flush request,
     * stop), flushers on `done`, tr_pipeline_free on `done` for holds,
     * tr_wait_space() callers on `space`.
     */
    pthread_mutex_t lock;
    pthread_cond_t kick, done, space;
    bool stop;
    uint64_t flush_req;
    /* Flushers that hold the pipeline (tr_pipeline_hold): written under
     * `lock` by them, read under it by tr_pipeline_free, which waits for
     * 0 before it stops the collectors. */
    int holds;
    /* The collector threads sleeping on `kick`.  Written under `lock`;
     * read relaxed by producers whose ring is half full or full, who then
     * kick them (a stale 0 only costs one poll interval, or the next look
     * a TR_WAKE_STEPS part of half a ring later). */
    VmAtomic sleeping;
    bool started;
    /* Open marks, oldest first, and a count of those ever made (both
     * under `lock`: written by tr_pipeline_mark, read and taken off by
     * the collector threads; a thread sleeps only once its pass has seen
     * mark_gen, so a new mark is never left for a poll interval).
     * `finished`, under `lock`: the collectors stopped after their last
     * drain (tr_pipeline_finish); marks are refused from then on. */
    TrMark *marks;
    uint64_t mark_gen;
    bool finished;
    int nworkers;            /* set by tr_pipeline_start */
    TrWorker *workers;
};

/* ---- tr_buffer.c: ring primitives used by the collector ---- */

/* Allocates ring memory (zeroed); `cap` is the pipeline's payload cap.
 * False, with nothing allocated, when the memory is not there. */
bool tr_ring_init(TrRing *r, size_t size, int sched, size_t cap);
void tr_ring_destroy(TrRing *r);

/* Collector: the next record below the head snapshot, skipping padding;
 * NULL when the ring is empty up to head_seen. */
const TrRecord *tr_ring_peek(TrRing *r);

/*
 * Collector: the bytes to step over at `pos` (published, below
 * head_seen) before the next record, or 0 if a record starts there.  The
 * ring protocol's rule (tr_buffer.c): where fewer than TR_PAD_MIN bytes
 * are left before the end of the array the producer writes nothing and
 * the rest of the array is skipped; elsewhere a PAD record says how much
 * it covers (up to the end of the array).
 */
static inline size_t tr_ring_skip(const TrRing *r, uint64_t pos)
{
    size_t left = r->size - (size_t)(pos & (r->size - 1));
    if (left < TR_PAD_MIN)
        return left;   /* nothing was written there: do not read it */
    const TrRecord *h = (const TrRecord *)(const void *)(r->data + (r->size - left));
    return h->kind == TR_K_PAD ? h->size : 0;
}

/* Collector: loads head ([TB1']) into head_seen; true if records wait. */
bool tr_ring_snapshot(TrRing *r);

/* Collector: bytes in use (head_seen - tail_local). */
static inline size_t tr_ring_used(const TrRing *r)
{
    return (size_t)(r->head_seen - r->tail_local);
}

/*
 * Collector: records from tail_local on, as a range for a raw sink: up
 * to the record that reaches the last granule boundary within `limit`
 * bytes (head_seen and the end of the array bounding it too), found in
 * the cut table without reading the records between; or, where no cut
 * is there (less than a granule, a lap's end), up to head_seen, the end
 * of the array or the first record that reaches `limit` bytes, headers
 * walked.  No payload is read; len 0 when there are only skipped bytes
 * (tr_ring_skip).  Returns the bytes to add to tail_local (the range
 * and the skipped bytes after it).
 */
size_t tr_ring_range(TrRing *r, size_t limit, TrRange *rg);

/* Collector: publishes tail_local ([TB2]) and wakes a waiting producer. */
void tr_ring_release(TrPipeline *tp, TrRing *r);

/* True when a record of tp->max_record (plus a marker) would fit now. */
bool tr_ring_has_room(const TrPipeline *tp, TrRing *r);

/* ---- tr_collector.c ---- */

/* A producer found its ring full: make sure the collector runs soon. */
void tr_collector_kick(TrPipeline *tp);

#endif /* TRACE_TR_INTERNAL_H */
