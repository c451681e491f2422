/*
 * trace/tr_collector.c - the pipeline's life cycle and the collector
 * threads that drain the rings into the sinks.
 *
 * Protocol: collecting.
 *
 *   The collector wakes every poll_ns, when a producer finds its ring
 *   half full or full (tr_collector_kick; tr_buffer.c, "Waking the
 *   collector"), at tr_flush() and at shutdown.  Each pass loads
 *   every ring's head ([TB1'], see tr_buffer.c) and then repeatedly takes,
 *   among the first unread records of all rings, the one with the smallest
 *   timestamp, and hands it to every sink.  Consumed space goes back to
 *   the producer ([TB2]) every TR_RELEASE_EVERY records and at the end of
 *   the pass, and a producer waiting for room is woken then.
 *
 *   Ordering guarantees:
 *   - Per ring (one scheduler): events reach the sinks exactly in the
 *     order they were emitted, LOST markers included where drops
 *     happened.
 *   - Across rings: a record is held back while it is younger than
 *     merge_window_ns, unless a ring is over half full, a producer waits
 *     for room, or a flush or shutdown drains everything.  So events come
 *     out in global timestamp order provided no producer takes longer
 *     than the window between stamping a record and publishing it (a
 *     producer preempted in between can be later by as much as it was
 *     preempted; under pressure the merge covers only what one pass
 *     sees).  With TR_MERGE_OFF the merge covers one pass only.
 *     Timestamps come from one clock on all threads (tr_clock.h).
 *
 *   Losses: a LOST marker in a ring is delivered as a LOST event in its
 *   place.  Just before a session's last record (STOPPED), and at
 *   shutdown, drops that no marker reported yet (the producer dropped
 *   and then wrote nothing more) are delivered as one LOST event per
 *   ring, so every sink sees the total (emitted + lost equals what
 *   producers generated) and the last record stays last.
 *
 *   A raw sink (tr_sink.h) gets none of this: each ring's records go to it
 *   as byte ranges without a merge or a window (the raw CTF format's
 *   readers merge by timestamp), and a range's space goes back to its
 *   producer as soon as the sink returns.
 *
 *   Marks (tr_pipeline_mark; erlang:trace_delivered/1), for decoded and
 *   raw sinks alike.  A mark holds each ring's head when it was made.
 *   After a pass and the sinks' flush, each collector thread clears the
 *   mark's entries for the rings it drains whose tail_local has reached
 *   them, and the thread that clears the last one answers the mark,
 *   outside the lock.  A thread sleeps only once a pass of its has seen
 *   every mark made so far (mark_gen), so a new mark gets a pass at once;
 *   one whose records the merge window holds back waits for the next
 *   poll, as the records do.  At the stop the last passes drain every
 *   ring, and tr_pipeline_finish answers what is still open.
 *
 *   Threads (TrWorker).  Decoded sinks have one collector thread for all
 *   rings: the merge needs every ring.  A raw sink needs no merge, so
 *   each ring gets a collector thread of its own, which alone reads that
 *   ring's records and advances its tail (so each ring still has one
 *   consumer, as tr_buffer.c's protocol requires) and alone writes its
 *   stream.  Why: with two schedulers busy on two CPUs, one collector
 *   thread gets a third of the CPU time and both rings fill while it
 *   writes one; with a thread per ring the kernel shares the CPUs among
 *   twice as many writers, and a fully traced fib(27) under the drop
 *   policy lost about half as many events (docs/benchmarks.md).  The
 *   threads share `lock`, `kick` (broadcast: a kick wakes every sleeping
 *   thread, each drains its ring) and `done`; each has its own
 *   flush_done, and tr_flush waits for all of them.
 *
 *   Memory: nothing here grows with the event rate (open marks, a word
 *   per ring each, with the calls that made them, until answered); the
 *   sinks keep what their formats need (the Chrome sink one open-call
 *   stack per process).
 */
#include "trace/tr_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/tr_clock.h"
#include "trace/tr_sigpipe.h"
#include "vm/atom.h"

/* Records a long pass consumes before it hands their space back. */
#define TR_RELEASE_EVERY 256
/* A raw sink gets at most this part of a ring at once, so that a waiting
 * producer has room again while the rest is written. */
#define TR_RAW_CHUNK_DIV 4

/* ==== delivery ==== */

static void deliver(TrPipeline *tp, const TrEvent *ev)
{
    for (int i = 0; i < tp->nsinks; i++)
        tp->sinks[i]->ops->event(tp->sinks[i], ev);
}

static void report_pending_losses(TrPipeline *tp, int from, int to);

static void deliver_record(TrPipeline *tp, TrRing *r, const TrRecord *h, uint64_t ts)
{
    /* A session's last record is the last thing its sinks see: the drops
     * that no marker reported yet go before it (its Lost counts them
     * already), not after it at shutdown.  It is written once the
     * session admits no more events, so no producer drops any more. */
    if (h->kind == TR_K_STOPPED)
        report_pending_losses(tp, 0, tp->nrings);
    TrEvent ev = {
        .ts = ts,
        .sched = r->sched,
        .kind = (TrKind)h->kind,
        .flags = h->flags,
    };
    if (h->kind == TR_K_LOST) {
        ev.lost = h->pid;
        r->lost_reported += h->pid;
    } else {
        ev.pid = h->pid;
        ev.mod = h->mod;
        ev.fun = h->fun;
        ev.arity = h->arity;
        ev.nterms = h->nterms;
        ev.payload = (const uint8_t *)(h + 1);
        ev.paylen = h->paylen;
    }
    r->last_ts = ts;
    deliver(tp, &ev);
}

static void flush_sinks(TrPipeline *tp)
{
    for (int i = 0; i < tp->nsinks; i++)
        if (tp->sinks[i]->ops->flush)
            tp->sinks[i]->ops->flush(tp->sinks[i]);
}

/*
 * A pass for a raw sink over the rings [from, to): each ring's records as
 * ranges (tr_ring_range), one range of each ring in turn (so that a long
 * write into one stream does not leave the other rings to fill up), each
 * range's space handed back to its producer once written.  No merge
 * window: readers of the raw format merge by timestamp.  Returns the
 * ranges delivered (0: the rings were empty).
 */
static size_t drain_raw(TrPipeline *tp, int from, int to)
{
    TrSink *s = tp->sinks[0];
    size_t n = 0;
    bool more = false;
    for (int i = from; i < to; i++)
        more |= tr_ring_snapshot(&tp->rings[i]);
    while (more) {
        more = false;
        for (int i = from; i < to; i++) {
            TrRing *r = &tp->rings[i];
            if (r->tail_local == r->head_seen)
                continue;
            TrRange rg;
            r->tail_local += tr_ring_range(r, r->size / TR_RAW_CHUNK_DIV, &rg);
            if (rg.len) {
                s->ops->range(s, &rg);
                r->lost_reported += rg.lost;
                n++;
            }
            tr_ring_release(tp, r);
            more |= r->tail_local != r->head_seen;
        }
    }
    return n;
}

/*
 * One pass over the rings (see the essay).  `all`: ignore the merge
 * window (flush, shutdown).  Returns the records delivered.
 */
static size_t drain(TrPipeline *tp, bool all)
{
    uint64_t limit = UINT64_MAX;
    bool pressed = false;
    for (int i = 0; i < tp->nrings; i++) {
        TrRing *r = &tp->rings[i];
        tr_ring_snapshot(r);
        if (tr_ring_used(r) > r->size / 2 || vm_atomic_load_relaxed(&r->waiting))
            pressed = true;
    }
    if (!all && !pressed && tp->opts.merge_window_ns != TR_MERGE_OFF) {
        uint64_t now = tr_mono_ns();
        limit = now > tp->opts.merge_window_ns ? now - tp->opts.merge_window_ns : 0;
    }

    size_t n = 0;
    unsigned since_release[tp->nrings];
    memset(since_release, 0, sizeof since_release);
    for (;;) {
        TrRing *best = NULL;
        const TrRecord *bh = NULL;
        uint64_t best_ts = 0;
        for (int i = 0; i < tp->nrings; i++) {
            const TrRecord *h = tr_ring_peek(&tp->rings[i]);
            if (!h)
                continue;
            uint64_t ts = tr_clock_ns(h->ticks);
            if (!best || ts < best_ts) {
                best = &tp->rings[i];
                bh = h;
                best_ts = ts;
            }
        }
        if (!best || best_ts > limit)
            break;
        deliver_record(tp, best, bh, best_ts);
        best->tail_local += bh->size;
        n++;
        if (++since_release[best - tp->rings] == TR_RELEASE_EVERY) {
            since_release[best - tp->rings] = 0;
            tr_ring_release(tp, best);
        }
    }
    for (int i = 0; i < tp->nrings; i++)
        tr_ring_release(tp, &tp->rings[i]);
    return n;
}

/* Shutdown, and before a session's last record: drops no marker
 * reported yet, one LOST event per ring of [from, to). */
static void report_pending_losses(TrPipeline *tp, int from, int to)
{
    for (int i = from; i < to; i++) {
        TrRing *r = &tp->rings[i];
        /* The producers stopped before tr_pipeline_free (its contract),
         * and the caller's synchronisation with them orders this load. */
        uint64_t lost = vm_atomic_load_relaxed(&r->lost);
        if (lost <= r->lost_reported)
            continue;
        TrEvent ev = {
            .ts = r->last_ts ? r->last_ts : tr_mono_ns(),
            .sched = r->sched,
            .kind = TR_K_LOST,
            .lost = lost - r->lost_reported,
        };
        r->lost_reported = lost;
        deliver(tp, &ev);
    }
}

/* ==== marks (tr_pipeline_mark) ==== */

/*
 * Takes off the list the marks that w's rings complete: each open entry
 * of a ring w drains whose position w's delivery has reached (its
 * tail_local, after the pass and the sinks' flush) is cleared, and a mark
 * with no entry left is moved to the returned list, oldest first.  Under
 * the pipeline's lock.
 */
static TrMark *marks_passed(TrPipeline *tp, const TrWorker *w)
{
    TrMark *done = NULL, **dtail = &done;
    for (TrMark **pm = &tp->marks; *pm;) {
        TrMark *m = *pm;
        for (int i = w->from; i < w->to; i++) {
            if (m->pos[i] && tp->rings[i].tail_local >= m->pos[i]) {
                m->pos[i] = 0;
                m->left--;
            }
        }
        if (m->left > 0) {
            pm = &m->next;
            continue;
        }
        *pm = m->next;
        m->next = NULL;
        *dtail = m;
        dtail = &m->next;
    }
    return done;
}

/* Answers and frees a list of marks; no pipeline lock held (fn may send
 * a message, which takes a process's lock). */
static void marks_answer(TrMark *m)
{
    while (m) {
        TrMark *next = m->next;
        m->fn(m->data);
        free(m);
        m = next;
    }
}

bool tr_pipeline_mark(TrPipeline *tp, TrMarkFn fn, void *data)
{
    TrMark *m = vm_malloc(sizeof *m + (size_t)tp->nrings * sizeof m->pos[0]);
    m->next = NULL;
    m->fn = fn;
    m->data = data;
    m->left = 0;
    for (int i = 0; i < tp->nrings; i++) {
        /* [TB1'] acquire: every record published below it counts. */
        m->pos[i] = vm_atomic_load_acquire(&tp->rings[i].head);
        m->left += m->pos[i] != 0;
    }
    pthread_mutex_lock(&tp->lock);
    bool open = tp->started && !tp->finished;
    if (open) {
        TrMark **pm = &tp->marks;
        while (*pm)
            pm = &(*pm)->next;
        *pm = m;
        tp->mark_gen++;
        pthread_cond_broadcast(&tp->kick);
    }
    pthread_mutex_unlock(&tp->lock);
    if (!open)
        free(m);
    return open;
}

/* ==== the collector thread ==== */

static void timed_wait(TrPipeline *tp)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + tp->opts.poll_ns;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    vm_atomic_store_relaxed(&tp->sleeping, vm_atomic_load_relaxed(&tp->sleeping) + 1);
    pthread_cond_timedwait(&tp->kick, &tp->lock, &ts);
    vm_atomic_store_relaxed(&tp->sleeping, vm_atomic_load_relaxed(&tp->sleeping) - 1);
}

/* Set on a collector thread: sinks (and the callbacks they call) run
 * there, and must not wait for a pipeline to stop (tr_in_collector). */
static __thread bool in_collector;

bool tr_in_collector(void)
{
    return in_collector;
}

static void *collector_main(void *arg)
{
    TrWorker *w = arg;
    TrPipeline *tp = w->tp;
    in_collector = true;
    /* A sink writing to a pipe whose reader went away gets EPIPE, which
     * it records (trace/tr_outfail.h), not a SIGPIPE that ends the
     * program: one raised here stays pending on this thread and goes
     * with it. */
    tr_sigpipe_block();
    bool dirty = false;   /* events delivered since the sinks were flushed */
    pthread_mutex_lock(&tp->lock);
    for (;;) {
        uint64_t req = tp->flush_req, mgen = tp->mark_gen;
        bool stop = tp->stop, flushing = req != w->flush_done, marked = tp->marks != NULL;
        pthread_mutex_unlock(&tp->lock);

        size_t n = tp->raw ? drain_raw(tp, w->from, w->to) : drain(tp, flushing || stop);
        dirty |= n > 0;
        if (stop)
            report_pending_losses(tp, w->from, w->to);
        if (dirty && (n == 0 || flushing || stop || marked)) {
            /* Idle, or asked to (a flush, a mark waiting for these
             * events): push buffered output out. */
            if (!tp->raw)
                flush_sinks(tp);
            dirty = false;
        }

        pthread_mutex_lock(&tp->lock);
        if (marked) {
            TrMark *done = marks_passed(tp, w);
            if (done) {
                pthread_mutex_unlock(&tp->lock);
                marks_answer(done);
                pthread_mutex_lock(&tp->lock);
            }
        }
        w->mark_seen = mgen;
        if (flushing) {
            w->flush_done = req;
            pthread_cond_broadcast(&tp->done);
        }
        if (stop)
            break;
        /* A mark made since this pass began gets a pass of its own; one
         * whose records the merge window holds back waits for the next
         * poll, as they do. */
        if (n == 0 && tp->flush_req == w->flush_done && tp->mark_gen == w->mark_seen &&
            !tp->stop)
            timed_wait(tp);
    }
    pthread_mutex_unlock(&tp->lock);
    return NULL;
}

void tr_collector_kick(TrPipeline *tp)
{
    if (!vm_atomic_load_relaxed(&tp->sleeping))
        return;
    pthread_mutex_lock(&tp->lock);
    pthread_cond_broadcast(&tp->kick);
    pthread_mutex_unlock(&tp->lock);
}

/* ==== life cycle ==== */

static bool is_pow2(size_t n)
{
    return n && !(n & (n - 1));
}

size_t tr_ring_default(int nscheds)
{
    size_t share = TR_RING_BUDGET / (size_t)(nscheds > 1 ? nscheds : 1);
    size_t bytes = TR_RING_DEFAULT_MIN;
    while (bytes * 2 <= share && bytes < TR_RING_DEFAULT_MAX)
        bytes *= 2;
    return bytes;
}

TrPipeline *tr_pipeline_new(const TrOptions *opts, char *err, size_t errlen)
{
    TrOptions o = *opts;
    if (!o.ring_bytes)
        o.ring_bytes = tr_ring_default(o.nscheds);
    if (!o.payload_cap)
        o.payload_cap = TR_PAYLOAD_DEFAULT;
    if (!o.merge_window_ns)
        o.merge_window_ns = TR_MERGE_WINDOW_DEFAULT;
    if (!o.poll_ns)
        o.poll_ns = TR_POLL_DEFAULT;
    size_t max_record = (sizeof(TrRecord) + o.payload_cap + TR_RECORD_ALIGN - 1) &
                        ~(size_t)(TR_RECORD_ALIGN - 1);
    if (o.nscheds < 0 || o.nscheds > 4096) {
        snprintf(err, errlen, "trace: bad scheduler count %d", o.nscheds);
        return NULL;
    }
    if (o.payload_cap > TR_PAYLOAD_MAX) {
        snprintf(err, errlen, "trace: payload cap %zu is above the maximum %d",
                 o.payload_cap, TR_PAYLOAD_MAX);
        return NULL;
    }
    if (!is_pow2(o.ring_bytes) || o.ring_bytes < TR_RING_MIN ||
        o.ring_bytes < 4 * max_record) {
        snprintf(err, errlen,
                 "trace: ring size %zu must be a power of two of at least %zu bytes",
                 o.ring_bytes, 4 * max_record > TR_RING_MIN ? 4 * max_record : TR_RING_MIN);
        return NULL;
    }
    if (o.ring_bytes > TR_RING_MAX) {
        snprintf(err, errlen, "trace: ring size %zu is above the maximum %zu", o.ring_bytes,
                 TR_RING_MAX);
        return NULL;
    }
    if (o.policy != TR_POLICY_DROP && o.policy != TR_POLICY_LOSSLESS) {
        snprintf(err, errlen, "trace: bad full-buffer policy %d", (int)o.policy);
        return NULL;
    }
    vm_atoms_init();
    tr_clock_init();
    TrPipeline *tp = vm_calloc(1, sizeof *tp);
    tp->opts = o;
    tp->cap = o.payload_cap;
    tp->max_record = max_record;
    tp->nrings = o.nscheds + 1;
    if (posix_memalign((void **)&tp->rings, TR_CACHE_LINE,
                       (size_t)tp->nrings * sizeof *tp->rings) != 0)
        vm_die("out of memory");
    for (int i = 0; i < tp->nrings; i++) {
        if (tr_ring_init(&tp->rings[i], o.ring_bytes, i < o.nscheds ? i : -1, o.payload_cap))
            continue;
        /* Out of memory (or of address space): an error for the caller,
         * who asked for this much, not the end of the program. */
        snprintf(err, errlen, "trace: cannot allocate %d rings of %zu bytes", tp->nrings,
                 o.ring_bytes);
        while (i-- > 0)
            tr_ring_destroy(&tp->rings[i]);
        free(tp->rings);
        free(tp);
        return NULL;
    }
    pthread_mutex_init(&tp->shared_lock, NULL);
    pthread_mutex_init(&tp->lock, NULL);
    pthread_cond_init(&tp->kick, NULL);
    pthread_cond_init(&tp->done, NULL);
    pthread_cond_init(&tp->space, NULL);
    return tp;
}

void tr_pipeline_add_sink(TrPipeline *tp, TrSink *sink)
{
    VM_ASSERT(!tp->started, "sinks are added before start");
    VM_ASSERT(!tp->nsinks || (!sink->ops->range && !tp->sinks[0]->ops->range),
              "a raw sink is its pipeline's only sink");
    tp->sinks = vm_realloc(tp->sinks, (size_t)(tp->nsinks + 1) * sizeof *tp->sinks);
    tp->sinks[tp->nsinks++] = sink;
}

/* Stops and joins the first n collector threads. */
static void stop_workers(TrPipeline *tp, int n)
{
    pthread_mutex_lock(&tp->lock);
    tp->stop = true;
    pthread_cond_broadcast(&tp->kick);
    pthread_cond_broadcast(&tp->space);
    pthread_mutex_unlock(&tp->lock);
    for (int i = 0; i < n; i++)
        pthread_join(tp->workers[i].thread, NULL);
}

bool tr_pipeline_start(TrPipeline *tp)
{
    VM_ASSERT(!tp->started, "started once");
    TrSinkInfo info = { .nscheds = tp->opts.nscheds };
    int kept = 0;
    for (int i = 0; i < tp->nsinks; i++) {
        TrSink *s = tp->sinks[i];
        if (s->ops->open && s->ops->open(s, &info) != 0) {
            s->ops->close(s);
            continue;
        }
        tp->sinks[kept++] = s;
    }
    tp->nsinks = kept;
    tp->raw = kept == 1 && tp->sinks[0]->ops->range;
    /* A raw sink gets a collector thread per ring; decoded sinks one for
     * all rings (their merge needs every ring). */
    tp->nworkers = tp->raw ? tp->nrings : 1;
    tp->workers = vm_calloc((size_t)tp->nworkers, sizeof *tp->workers);
    for (int i = 0; i < tp->nworkers; i++) {
        TrWorker *w = &tp->workers[i];
        w->tp = tp;
        w->from = tp->raw ? i : 0;
        w->to = tp->raw ? i + 1 : tp->nrings;
    }
    for (int i = 0; i < tp->nworkers; i++) {
        if (pthread_create(&tp->workers[i].thread, NULL, collector_main, &tp->workers[i]) != 0) {
            stop_workers(tp, i);
            return false;
        }
    }
    tp->started = true;
    return true;
}

void tr_flush(TrPipeline *tp)
{
    if (!tp->started)
        return;
    pthread_mutex_lock(&tp->lock);
    uint64_t want = ++tp->flush_req;
    pthread_cond_broadcast(&tp->kick);
    for (int i = 0; i < tp->nworkers; i++)
        while (tp->workers[i].flush_done < want)
            pthread_cond_wait(&tp->done, &tp->lock);
    pthread_mutex_unlock(&tp->lock);
}

void tr_pipeline_hold(TrPipeline *tp)
{
    pthread_mutex_lock(&tp->lock);
    tp->holds++;
    pthread_mutex_unlock(&tp->lock);
}

void tr_pipeline_unhold(TrPipeline *tp)
{
    pthread_mutex_lock(&tp->lock);
    if (--tp->holds == 0)
        pthread_cond_broadcast(&tp->done);
    pthread_mutex_unlock(&tp->lock);
}

/* Until no flusher holds tp (tr_pipeline_hold): one may be flushing. */
static void wait_unheld(TrPipeline *tp)
{
    pthread_mutex_lock(&tp->lock);
    while (tp->holds > 0)
        pthread_cond_wait(&tp->done, &tp->lock);
    pthread_mutex_unlock(&tp->lock);
}

TrStats *tr_pipeline_stats(TrPipeline *tp)
{
    TrStats *s = vm_malloc(sizeof *s + (size_t)tp->nrings * sizeof s->ring[0]);
    s->nrings = tp->nrings;
    for (int i = 0; i < tp->nrings; i++) {
        TrRing *r = &tp->rings[i];
        s->ring[i].emitted = vm_atomic_load_relaxed(&r->emitted);
        s->ring[i].lost = vm_atomic_load_relaxed(&r->lost);
        s->ring[i].full = vm_atomic_load_relaxed(&r->full);
        s->ring[i].yields = vm_atomic_load_relaxed(&r->yields);
    }
    return s;
}

void tr_pipeline_finish(TrPipeline *tp)
{
    /* The pipeline's owner alone calls this: `finished` is its write. */
    pthread_mutex_lock(&tp->lock);
    bool again = tp->finished;
    pthread_mutex_unlock(&tp->lock);
    if (again)
        return;
    wait_unheld(tp);
    if (tp->started)
        stop_workers(tp, tp->nworkers);
    /* The last passes delivered every ring whole (stop: no merge window)
     * and flushed, and the producers had stopped before: whatever a mark
     * still open waits for, one made during those passes too, is in the
     * sinks.  From here on marks are refused: nothing is left to
     * deliver. */
    pthread_mutex_lock(&tp->lock);
    TrMark *open = tp->marks;
    tp->marks = NULL;
    tp->finished = true;
    pthread_mutex_unlock(&tp->lock);
    marks_answer(open);
}

void tr_pipeline_free(TrPipeline *tp)
{
    tr_pipeline_finish(tp);
    free(tp->workers);
    /* A pipeline that never started (its start failed) leaves no file:
     * its sinks are discarded, not closed. */
    for (int i = 0; i < tp->nsinks; i++) {
        TrSink *k = tp->sinks[i];
        if (!tp->started && k->ops->discard)
            k->ops->discard(k);
        else
            k->ops->close(k);
    }
    free(tp->sinks);
    for (int i = 0; i < tp->nrings; i++)
        tr_ring_destroy(&tp->rings[i]);
    free(tp->rings);
    pthread_mutex_destroy(&tp->shared_lock);
    pthread_mutex_destroy(&tp->lock);
    pthread_cond_destroy(&tp->kick);
    pthread_cond_destroy(&tp->done);
    pthread_cond_destroy(&tp->space);
    free(tp);
}
