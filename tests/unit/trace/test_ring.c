/*
 * tests/unit/trace/test_ring.c - the rings and the collector through the
 * pipeline API, with a recording callback sink: wrap-around with
 * variable-size records, exact drop counts and their place in the stream,
 * lossless mode with a slow sink, the shared ring, the merge by
 * timestamp, and bad options; the fast path; a lap that ends 8 bytes
 * (too few for a PAD) or 16 before the array's end, through tr_emit and
 * the fast path, read by a decoded and a raw sink; raw ranges found by
 * the cut table, and the LOST counts they carry.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "tests/unit/trace/tr_fixture.h"
#include "trace/tr_fast.h"
#include "trace/tr_internal.h"

static Arena arena;

static void setup(void)
{
    vm_atoms_init();
    arena.used = 0;
}

TestSuite(ring, .init = setup);

/* What the callback sink saw.  Written by the collector thread only;
 * read by the test after tr_flush / tr_pipeline_free (which synchronise
 * through the pipeline's lock or the thread join). */
typedef struct Seen {
    uint64_t events, lost, lost_records;
    uint64_t next_pid[8];      /* per ring: the pid expected next (pids count up) */
    bool order_ok, payload_ok, ts_sorted;
    uint64_t last_ts;
    VmAtomic *gate;            /* if set, the sink waits at its first event until it is 1 */
    char first_lost_after[64]; /* ring/pid of the event before the first LOST */
    uint64_t prev_pid;
} Seen;

static void seen_init(Seen *s)
{
    memset(s, 0, sizeof *s);
    s->order_ok = s->payload_ok = s->ts_sorted = true;
}

/* Events carry pid = sequence number per ring and a binary payload of
 * (pid % 61) bytes, each byte = pid & 0xff. */
static void record(const TrEvent *ev, void *data)
{
    Seen *s = data;
    if (ev->ts < s->last_ts)
        s->ts_sorted = false;
    s->last_ts = ev->ts;
    if (ev->kind == TR_K_LOST) {
        if (!s->lost_records)
            snprintf(s->first_lost_after, sizeof s->first_lost_after, "%d/%llu", ev->sched,
                     (unsigned long long)s->prev_pid);
        s->lost += ev->lost;
        s->lost_records++;
        return;
    }
    s->prev_pid = ev->pid;
    int ring = ev->sched + 1;
    if (ev->pid < s->next_pid[ring])
        s->order_ok = false;
    s->next_pid[ring] = ev->pid + 1;
    s->events++;
    const uint8_t *p = ev->payload;
    uint64_t n = ev->pid % 61;
    if (ev->nterms != 1 || ev->paylen != 3 + n || p[0] != TR_T_BIN || p[1] != n || p[2] != n)
        s->payload_ok = false;
    for (uint64_t i = 0; i < n && s->payload_ok; i++)
        if (p[3 + i] != (uint8_t)ev->pid)
            s->payload_ok = false;
    while (s->gate && !vm_atomic_load_acquire(s->gate))
        sched_yield();
}

static TrPipeline *make(const TrOptions *o, Seen *seen)
{
    char err[256];
    TrPipeline *tp = tr_pipeline_new(o, err, sizeof err);
    cr_assert(tp, "%s", err);
    tr_pipeline_add_sink(tp, tr_sink_callback_new(record, seen));
    return tp;
}

static TrStatus emit_seq(TrPipeline *tp, int sched, uint64_t pid)
{
    uint8_t bytes[64];
    memset(bytes, (int)(pid & 0xff), sizeof bytes);
    Term *p = arena_alloc(&arena, binary_words(pid % 61));
    p[0] = MAKE_HEADER(IMM_HDR_BINARY, pid % 61);
    memcpy(p + 1, bytes, pid % 61);
    Term b = make_boxed(p);
    arena.used -= binary_words(pid % 61);   /* copied at emit: reuse the words */
    TrEmit ev = { .kind = TR_K_CALL, .pid = pid, .mod = ATOM_TRUE, .fun = ATOM_TRUE,
                  .arity = 1, .terms = &b, .nterms = 1 };
    return tr_emit(tp, sched, &ev);
}

Test(ring, wraps_around_with_variable_sizes_in_order)
{
    Seen seen;
    seen_init(&seen);
    TrOptions o = { .nscheds = 1, .ring_bytes = 4096, .payload_cap = 128 };
    TrPipeline *tp = make(&o, &seen);
    tr_pipeline_start(tp);
    uint64_t pid = 0;
    /* Bursts that fit (at most 30 x 96 bytes), flushed each time: the
     * ring wraps about 200 times at every possible offset. */
    for (int burst = 0; burst < 600; burst++) {
        for (int i = 0; i < 1 + burst % 30; i++)
            cr_assert_eq(emit_seq(tp, 0, pid++), TR_OK);
        tr_flush(tp);
    }
    cr_expect_eq(seen.events, pid);
    cr_expect(seen.order_ok);
    cr_expect(seen.payload_ok);
    cr_expect_eq(seen.lost, 0);
    TrStats *st = tr_pipeline_stats(tp);
    cr_expect_eq(st->nrings, 2);
    cr_expect_eq(st->ring[0].emitted, pid);
    cr_expect_eq(st->ring[0].lost, 0);
    free(st);
    tr_pipeline_free(tp);
}

Test(ring, a_full_ring_drops_counts_exactly_and_reports_in_place)
{
    Seen seen;
    seen_init(&seen);
    TrOptions o = { .nscheds = 2, .ring_bytes = 4096, .payload_cap = 128 };
    TrPipeline *tp = make(&o, &seen);
    /* Before start nothing drains: pid 61*k has an empty binary (3
     * bytes), a 36-byte record; 4096 / 36 = 113 fit, the rest drop. */
    uint64_t pid = 0, dropped = 0;
    for (int i = 0; i < 200; i++, pid += 61) {
        TrStatus st = emit_seq(tp, 1, pid);
        cr_assert(st == (i < 113 ? TR_OK : TR_DROPPED), "event %d: %d", i, st);
        dropped += st == TR_DROPPED;
    }
    cr_expect_eq(dropped, 87);
    tr_pipeline_start(tp);
    tr_flush(tp);
    cr_expect_eq(seen.events, 113);
    cr_expect_eq(seen.lost, 0, "the loss is reported where it happened, not yet");
    /* The next event carries a LOST marker before it. */
    cr_assert_eq(emit_seq(tp, 1, pid), TR_OK);
    tr_flush(tp);
    cr_expect_eq(seen.lost, 87);
    cr_expect_eq(seen.lost_records, 1);
    cr_expect_str_eq(seen.first_lost_after, "1/6832");   /* after event 112 = pid 112*61 */
    cr_expect_eq(seen.events, 114);
    /* Drops at the very end are reported at shutdown. */
    for (int i = 0; i < 300; i++)
        emit_seq(tp, 0, (uint64_t)i * 61);
    TrStats *st = tr_pipeline_stats(tp);
    uint64_t emitted = st->ring[0].emitted + st->ring[1].emitted + st->ring[2].emitted;
    uint64_t lost = st->ring[0].lost + st->ring[1].lost + st->ring[2].lost;
    free(st);
    tr_pipeline_free(tp);
    cr_expect_eq(emitted + lost, 200 + 1 + 300);
    cr_expect_eq(seen.events, emitted);
    cr_expect_eq(seen.lost, lost);
    cr_expect(seen.order_ok);
}

/* The smallest pid above `after` whose payload has n bytes (emit_seq). */
static uint64_t pid_with(uint64_t after, uint64_t n)
{
    uint64_t pid = after + 1;
    while (pid % 61 != n)
        pid++;
    return pid;
}

Test(ring, a_dropping_ring_still_takes_what_fits)
{
    Seen seen;
    seen_init(&seen);
    TrOptions o = { .nscheds = 1, .ring_bytes = 4096, .payload_cap = 128 };
    TrPipeline *tp = make(&o, &seen);
    /* Nothing drains before start.  41 records of 96 bytes (60-byte
     * binaries) and one of 80 leave 80 bytes: a 96-byte record is
     * dropped, then a 36-byte one still fits with its 32-byte LOST
     * marker (68 bytes); the 12 bytes left take nothing. */
    uint64_t pid = 0;
    for (int i = 0; i < 41; i++)
        cr_assert_eq(emit_seq(tp, 0, pid = pid_with(pid, 60)), TR_OK, "record %d", i);
    cr_assert_eq(emit_seq(tp, 0, pid = pid_with(pid, 45)), TR_OK);
    cr_assert_eq(emit_seq(tp, 0, pid = pid_with(pid, 60)), TR_DROPPED);
    cr_assert_eq(emit_seq(tp, 0, pid = pid_with(pid, 0)), TR_OK, "36 bytes and a marker fit in 80");
    cr_assert_eq(emit_seq(tp, 0, pid = pid_with(pid, 0)), TR_DROPPED);
    tr_pipeline_start(tp);
    tr_pipeline_free(tp);
    cr_expect_eq(seen.events, 43);
    cr_expect_eq(seen.lost, 2);
    cr_expect_eq(seen.lost_records, 2, "one marker in place, one at shutdown");
    cr_expect(seen.order_ok);
    cr_expect(seen.payload_ok);
}

/* Producer thread of the lossless test: waits whenever the ring is full. */
typedef struct LosslessRun {
    TrPipeline *tp;
    uint64_t n, full, ok;
    VmAtomic gate;             /* opened at the first full ring */
} LosslessRun;

static void *lossless_producer(void *arg)
{
    LosslessRun *run = arg;
    for (uint64_t pid = 0; pid < run->n;) {
        TrStatus st = emit_seq(run->tp, 0, pid);
        if (st == TR_OK) {
            pid++;
            run->ok++;
        } else {
            cr_assert_eq(st, TR_FULL);
            run->full++;
            vm_atomic_store_release(&run->gate, 1);
            cr_assert(tr_wait_space(run->tp, 0, 10u * 1000000000u), "no wake-up in 10 s");
        }
    }
    return NULL;
}

static VmAtomic wakeups = VM_ATOMIC_INIT(0);

static void on_space(void *data, int sched)
{
    (void)data;
    cr_assert_eq(sched, 0);
    vm_atomic_fetch_add_relaxed(&wakeups, 1);
}

Test(ring, lossless_never_loses_and_the_producer_waits)
{
    /* The sink holds the collector at its first event until the producer
     * found the ring full: the wait is taken for certain. */
    LosslessRun run = { .n = 3000 };
    Seen seen;
    seen_init(&seen);
    seen.gate = &run.gate;
    TrOptions o = { .nscheds = 1, .ring_bytes = 4096, .payload_cap = 128,
                    .policy = TR_POLICY_LOSSLESS, .on_space = on_space };
    TrPipeline *tp = make(&o, &seen);
    run.tp = tp;
    tr_pipeline_start(tp);
    pthread_t t;
    pthread_create(&t, NULL, lossless_producer, &run);
    pthread_join(t, NULL);
    tr_flush(tp);
    cr_expect_eq(seen.events, 3000);
    cr_expect_eq(seen.lost, 0);
    cr_expect(seen.order_ok);
    cr_expect(seen.payload_ok);
    cr_expect_gt(run.full, 0, "the producer never had to wait");
    cr_expect_gt(vm_atomic_load_relaxed(&wakeups), 0, "on_space never called");
    TrStats *st = tr_pipeline_stats(tp);
    cr_expect_eq(st->ring[0].lost, 0);
    cr_expect_eq(st->ring[0].full, run.full);
    cr_expect_eq(st->ring[0].yields, 0, "lossless never offers the CPU");
    free(st);
    tr_pipeline_free(tp);
}

Test(ring, a_large_ring_is_mapped_on_a_huge_page_boundary_and_wraps_in_order, .timeout = 120)
{
    /* 4 MiB rings have a mapping of their own, aligned to 2 MiB for
     * transparent huge pages (tr_buffer.c, ring_alloc); every byte of it
     * is used: 300,000 events of 40-100 bytes wrap the ring several
     * times and arrive exactly, in order. */
    Seen seen;
    seen_init(&seen);
    TrOptions o = { .nscheds = 1, .ring_bytes = 4u << 20, .payload_cap = 128,
                    .policy = TR_POLICY_LOSSLESS };
    TrPipeline *tp = make(&o, &seen);
    for (int i = 0; i < tp->nrings; i++)
        cr_expect_eq((uintptr_t)tp->rings[i].data & ((2u << 20) - 1), 0, "ring %d at %p", i,
                     (void *)tp->rings[i].data);
    tr_pipeline_start(tp);
    uint64_t full = 0;
    for (uint64_t pid = 0; pid < 300000;) {
        TrStatus st = emit_seq(tp, 0, pid);
        if (st == TR_OK) {
            pid++;
        } else {
            cr_assert_eq(st, TR_FULL);
            full++;
            cr_assert(tr_wait_space(tp, 0, 10u * 1000000000u), "no wake-up in 10 s");
        }
    }
    TrStats *st = tr_pipeline_stats(tp);
    cr_expect_eq(st->ring[0].emitted, 300000);
    cr_expect_eq(st->ring[0].full, full);
    free(st);
    tr_pipeline_free(tp);
    cr_expect_eq(seen.events, 300000);
    cr_expect_eq(seen.lost, 0);
    cr_expect(seen.order_ok);
    cr_expect(seen.payload_ok);
}

/* Counts events for a reader on another thread than the collector. */
static void count_atomic(const TrEvent *ev, void *data)
{
    if (ev->kind != TR_K_LOST)
        vm_atomic_fetch_add_relaxed((VmAtomic *)data, 1);
}

/* Waits until `n` holds `want`, for at most `seconds`. */
static bool reaches(VmAtomic *n, uintptr_t want, int seconds)
{
    struct timespec nap = { 0, 1000000 };
    for (int i = 0; i < seconds * 1000; i++) {
        if (vm_atomic_load_relaxed(n) == want)
            return true;
        nanosleep(&nap, NULL);
    }
    return false;
}

Test(ring, a_half_full_ring_wakes_the_sleeping_collector, .timeout = 60)
{
    /* The collector sleeps an hour between polls, and nothing flushes:
     * only the producer's look at half the ring can wake it. */
    VmAtomic n = VM_ATOMIC_INIT(0);
    char err[256];
    TrOptions o = { .nscheds = 1, .ring_bytes = 4096, .payload_cap = 128,
                    .poll_ns = 3600ull * 1000000000u };
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    cr_assert(tp, "%s", err);
    tr_pipeline_add_sink(tp, tr_sink_callback_new(count_atomic, &n));
    tr_pipeline_start(tp);
    cr_assert(reaches(&tp->sleeping, 1, 30), "the collector never went to sleep");
    /* 57 records of 36 bytes (pid 61 * k: an empty binary): the last
     * passes 2048 bytes, half the ring; a full ring is 113. */
    for (uint64_t i = 0; i < 57; i++)
        cr_assert_eq(emit_seq(tp, 0, i * 61), TR_OK);
    cr_expect(reaches(&n, 57, 30), "the collector delivered %llu of 57 events",
              (unsigned long long)vm_atomic_load_relaxed(&n));
    TrStats *st = tr_pipeline_stats(tp);
    cr_expect_eq(st->ring[0].lost, 0);
    free(st);
    tr_pipeline_free(tp);
    cr_expect_eq(vm_atomic_load_relaxed(&n), 57);
}

/* Foreign threads share the last ring. */
static void *shared_producer(void *arg)
{
    TrPipeline *tp = arg;
    for (int i = 0; i < 2000; i++) {
        Term t = make_small(i);
        TrEmit ev = { .kind = TR_K_SEND, .flags = TR_F_NO_MFA, .pid = 1000 + (uint64_t)i,
                      .terms = &t, .nterms = 1 };
        while (tr_emit(tp, -1, &ev) == TR_FULL)
            tr_wait_space(tp, -1, 0);
    }
    return NULL;
}

static void count(const TrEvent *ev, void *data)
{
    uint64_t *n = data;
    if (ev->kind != TR_K_LOST)
        (*n)++;
}

Test(ring, the_shared_ring_takes_several_threads)
{
    uint64_t n = 0;
    char err[256];
    TrOptions o = { .nscheds = 0, .ring_bytes = 8192, .policy = TR_POLICY_LOSSLESS };
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    tr_pipeline_add_sink(tp, tr_sink_callback_new(count, &n));
    tr_pipeline_start(tp);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, shared_producer, tp);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    tr_pipeline_free(tp);
    cr_expect_eq(n, 8000);
}

Test(ring, a_flush_merges_rings_by_timestamp)
{
    Seen seen;
    seen_init(&seen);
    TrOptions o = { .nscheds = 3, .ring_bytes = 1 << 16 };
    TrPipeline *tp = make(&o, &seen);
    /* One thread may stand in for three schedulers, one after another.
     * Every record is published before the collector starts, so the
     * order it delivers is the merge's alone: with the collector running,
     * a producer kept off the CPU between stamping a record and
     * publishing it for longer than the merge window (under qemu on a
     * loaded machine) publishes it after later ones went out, which the
     * window allows (docs/tracing.md). */
    for (uint64_t i = 0; i < 900; i++)
        cr_assert_eq(emit_seq(tp, (int)(i * 7 % 3), i / 3), TR_OK);
    tr_pipeline_start(tp);
    tr_flush(tp);
    cr_expect_eq(seen.events, 900);
    cr_expect(seen.ts_sorted, "events of different rings out of timestamp order");
    tr_pipeline_free(tp);
}

Test(ring, bad_options_are_refused_with_a_reason)
{
    char err[256];
    TrOptions o = { .nscheds = 1, .ring_bytes = 5000 };
    cr_expect_null(tr_pipeline_new(&o, err, sizeof err));
    cr_expect(strstr(err, "power of two"), "%s", err);
    o.ring_bytes = 4096;
    o.payload_cap = 2048;
    cr_expect_null(tr_pipeline_new(&o, err, sizeof err));
    cr_expect(strstr(err, "at least 8320"), "%s", err);
    o.payload_cap = TR_PAYLOAD_MAX + 1;
    cr_expect_null(tr_pipeline_new(&o, err, sizeof err));
    cr_expect(strstr(err, "payload cap"), "%s", err);
    o = (TrOptions){ .nscheds = 1, .ring_bytes = TR_RING_MAX * 2 };
    cr_expect_null(tr_pipeline_new(&o, err, sizeof err));
    cr_expect_str_eq(err, "trace: ring size 2147483648 is above the maximum 1073741824");
    o = (TrOptions){ .nscheds = -1 };
    cr_expect_null(tr_pipeline_new(&o, err, sizeof err));
    /* Freed without ever starting: the sinks are closed all the same. */
    o = (TrOptions){ .nscheds = 2 };
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    cr_assert(tp);
    uint64_t n = 0;
    tr_pipeline_add_sink(tp, tr_sink_callback_new(count, &n));
    tr_pipeline_free(tp);
}

/* The default ring: the budget over the scheduler rings, a power of two
 * between 1 and 8 MiB, the same for every ring of a pipeline. */
Test(ring, the_default_ring_shares_a_budget_among_the_schedulers)
{
    const size_t mib = (size_t)1 << 20;
    const int scheds[] = { 0, 1, 2, 4, 5, 8, 12, 16, 32, 64, 4096 };
    const size_t want[] = { 8, 8, 8, 8, 4, 4, 2, 2, 1, 1, 1 };
    for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++)
        cr_expect_eq(tr_ring_default(scheds[i]), want[i] * mib, "%d schedulers: %zu",
                     scheds[i], tr_ring_default(scheds[i]));
    char err[256];
    TrOptions o = { .nscheds = 8 };
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    cr_assert(tp, "%s", err);
    for (int i = 0; i < tp->nrings; i++)
        cr_expect_eq(tp->rings[i].size, 4 * mib, "ring %d: %zu", i, tp->rings[i].size);
    tr_pipeline_free(tp);
}

/* ==== the fast path (trace/tr_fast.h) ==== */

/* The bytes of ring 0's records in [from, to), with each record's ticks
 * zeroed (the only field that differs between two writes of one event). */
static size_t ring_bytes_no_ticks(TrPipeline *tp, uint64_t from, uint64_t to, uint8_t *out)
{
    TrRing *r = &tp->rings[0];
    size_t n = (size_t)(to - from);
    memcpy(out, r->data + (from & (r->size - 1)), n);
    for (size_t at = 0; at < n;) {
        TrRecord *h = (TrRecord *)(void *)(out + at);
        cr_assert(h->size >= sizeof(TrRecord) && at + h->size <= n, "record at %zu", at);
        h->ticks = 0;
        at += h->size;
    }
    return n;
}

Test(ring, the_fast_path_writes_the_bytes_tr_emit_writes)
{
    Term args[][4] = {
        { I(5) },
        { I(-300), A("ok"), TERM_NIL, make_pid(77) },
        { I((int64_t)1 << 40), I(0) },
    };
    unsigned nargs[] = { 1, 4, 2 };
    TrOptions o = { .nscheds = 1, .ring_bytes = 4096, .payload_cap = 512 };
    char err[256];
    TrPipeline *slow = tr_pipeline_new(&o, err, sizeof err);
    TrPipeline *fast = tr_pipeline_new(&o, err, sizeof err);
    cr_assert(slow && fast, "%s", err);
    for (unsigned i = 0; i < 3; i++) {
        TrEmit ev = { .kind = i ? TR_K_RETURN_FROM : TR_K_CALL, .flags = TR_F_RETURNS,
                      .pid = 40 + i, .mod = ATOM_TRUE, .fun = ATOM_FALSE, .arity = nargs[i],
                      .terms = args[i], .nterms = nargs[i] };
        cr_assert_eq(tr_emit(slow, 0, &ev), TR_OK);
        cr_assert(tr_ring_put_imm(&fast->rings[0], &ev), "event %u", i);
    }
    uint64_t head = fast->rings[0].head_local;
    cr_assert_eq(head, slow->rings[0].head_local);
    cr_assert_eq(vm_atomic_load_relaxed(&fast->rings[0].head), head);
    cr_assert_eq(vm_atomic_load_relaxed(&fast->rings[0].emitted), 3);
    static uint8_t a[4096], b[4096];
    size_t n = ring_bytes_no_ticks(slow, 0, head, a);
    ring_bytes_no_ticks(fast, 0, head, b);
    cr_expect_eq(memcmp(a, b, n), 0, "the two rings' records differ");
    tr_pipeline_free(slow);
    tr_pipeline_free(fast);
}

Test(ring, the_fast_path_declines_without_writing)
{
    TrOptions o = { .nscheds = 1, .ring_bytes = 4096, .payload_cap = 512 };
    char err[256];
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    cr_assert(tp, "%s", err);
    TrRing *r = &tp->rings[0];
    /* A compound term: declined, head unchanged. */
    Term tup = T2(&arena, I(1), I(2));
    TrEmit ev = { .kind = TR_K_CALL, .pid = 1, .mod = ATOM_TRUE, .fun = ATOM_TRUE, .arity = 1,
                  .terms = &tup, .nterms = 1 };
    cr_expect_not(tr_ring_put_imm(r, &ev));
    cr_expect_eq(r->head_local, 0);
    /* More immediates than the fast path takes. */
    Term many[9] = { I(1), I(2), I(3), I(4), I(5), I(6), I(7), I(8), I(9) };
    ev.terms = many;
    ev.nterms = ev.arity = 9;
    cr_expect_not(tr_ring_put_imm(r, &ev));
    cr_expect_eq(r->head_local, 0);
    /* Fill the ring with 36-byte records (the collector is not running).
     * The fast path first stops where a record could reach the first
     * granule boundary of the cut table (1024: 4096 / TR_CUTS doubled up
     * to the largest record, 544), which tr_emit notes: 28 records, the
     * last starting where 43 bytes (a header and the largest
     * one-immediate payload) still fit below 1024. */
    Term one = I(7);
    ev.terms = &one;
    ev.nterms = ev.arity = 1;
    unsigned fast_n = 0, emit_n = 0;
    while (tr_ring_put_imm(r, &ev))
        fast_n++;
    cr_expect_eq(fast_n, 28, "fast records before the first boundary: %u", fast_n);
    cr_expect_eq(vm_atomic_load_relaxed(&r->cut_start[0]), UINT64_MAX, "no cut yet");
    /* From there tr_emit writes the record at each boundary (1008 to
     * 1044, and at 2016, 3060) and looks at the collector where a record
     * could pass wake_at: half the ring, then every 512 bytes (an eighth
     * of the ring).  The ring is at least half full at each look from
     * 2048 on and the policy is drop, so those offer the CPU, at 2052,
     * 2592, 3096 and 3636 bytes (the records at 2016 and 3060 both reach
     * a boundary and pass wake_at); the fast path writes what lies
     * between.  It stops short of the array's end (28 bytes stay) and
     * leaves the padding, the drop and its LOST marker to tr_emit. */
    for (;;) {
        if (tr_ring_put_imm(r, &ev)) {
            fast_n++;
        } else if (r->head_local + 43 <= 4096) {
            cr_assert_eq(tr_emit(tp, 0, &ev), TR_OK);
            emit_n++;
        } else {
            break;
        }
    }
    cr_expect_eq(fast_n + emit_n, 113, "records: %u fast, %u by tr_emit", fast_n, emit_n);
    cr_expect_eq(emit_n, 5);
    cr_expect_eq(r->head_local, 113 * 36);
    /* The boundaries 1024, 2048 and 3072, reached by the records
     * starting at 1008, 2016 and 3060. */
    static const uint64_t reach[] = { 1008, 2016, 3060 };
    for (unsigned b = 1; b < 4; b++)
        cr_expect_eq(vm_atomic_load_relaxed(&r->cut_start[b]), reach[b - 1], "the cut at %u",
                     b * 1024);
    TrStats *st = tr_pipeline_stats(tp);
    cr_expect_eq(st->ring[0].yields, 4);
    free(st);
    cr_expect_eq(tr_emit(tp, 0, &ev), TR_DROPPED);   /* no room even with a pad */
    cr_expect_eq(r->pending_lost, 1);
    cr_expect_not(tr_ring_put_imm(r, &ev), "a LOST marker is pending");
    /* The collector takes everything; tr_emit writes the pad, the marker
     * and the event; the fast path takes over again after it. */
    tr_pipeline_start(tp);
    cr_assert(tr_wait_space(tp, 0, 2000000000ull));
    cr_expect_eq(tr_emit(tp, 0, &ev), TR_OK);
    cr_expect_eq(r->pending_lost, 0);
    cr_expect(tr_ring_put_imm(r, &ev), "the fast path after the marker");
    tr_pipeline_free(tp);
}

/* ==== the end of the array: 8 bytes (no room for a PAD) or 16 left ==== */

/*
 * The sequence these tests write into ring 0 of a 4096-byte pipeline:
 * calls with pids 0, 1, ..., first `nbig` of 36 bytes (one argument, 7)
 * and then 32-byte ones (the arity only) up to `nlap`, where the array's
 * first lap ends exactly `left` bytes before its end; then 12 more,
 * alternately 36 and 32 bytes, the first of which does not fit there and
 * starts the second lap at offset 0.  Immutable once the pipeline starts.
 */
typedef struct WrapSeq {
    uint64_t nbig, nlap, total;
    unsigned left;
} WrapSeq;

static WrapSeq wrap_seq(unsigned left)
{
    uint64_t end = 4096 - left;
    uint64_t nbig = end % 32 / 4;   /* 36 = 32 + 4 */
    uint64_t nlap = nbig + (end - 36 * nbig) / 32;
    return (WrapSeq){ .nbig = nbig, .nlap = nlap, .total = nlap + 12, .left = left };
}

static bool wrap_small(const WrapSeq *q, uint64_t pid)
{
    return pid < q->nlap ? pid >= q->nbig : (pid - q->nlap) % 2 == 1;
}

static TrEmit wrap_event(const WrapSeq *q, uint64_t pid, const Term *seven)
{
    bool small = wrap_small(q, pid);
    return (TrEmit){ .kind = TR_K_CALL, .flags = small ? TR_F_ARITY : 0, .pid = pid,
                     .mod = ATOM_TRUE, .fun = ATOM_FALSE, .arity = 1, .terms = seven,
                     .nterms = small ? 0 : 1 };
}

/* What a sink saw of the sequence.  Written by the collector thread
 * only; read by the test after tr_pipeline_free (the thread join). */
typedef struct WrapSeen {
    const WrapSeq *q;
    uint64_t n;                /* events seen */
    uint64_t bad, bad_at;      /* events unlike the sequence's, the first's index */
    uint64_t ranges_bad;       /* raw: ranges whose counts, ticks or pad are wrong */
} WrapSeen;

/* Counts an event or record, as bad unless its fields are those of the
 * sequence's next one. */
static void wrap_check(WrapSeen *w, TrKind kind, unsigned flags, uint64_t pid, Atom mod,
                       Atom fun, unsigned arity, unsigned nterms, const uint8_t *pay,
                       size_t paylen)
{
    bool ok = kind == TR_K_CALL && pid == w->n && mod == ATOM_TRUE && fun == ATOM_FALSE &&
              arity == 1;
    if (wrap_small(w->q, w->n))
        ok = ok && flags == TR_F_ARITY && nterms == 0 && paylen == 0;
    else   /* SMALL 7: the tag, then the zigzag varint 14 (trace/tr_encode.h) */
        ok = ok && flags == 0 && nterms == 1 && paylen == 2 && pay[0] == TR_T_SMALL &&
             pay[1] == 14;
    if (!ok && !w->bad++)
        w->bad_at = w->n;
    w->n++;
}

static void wrap_event_seen(const TrEvent *ev, void *data)
{
    wrap_check(data, ev->kind, ev->flags, ev->pid, ev->mod, ev->fun, ev->arity, ev->nterms,
               ev->payload, ev->paylen);
}

/* A raw sink (tr_sink.h) that walks each range's records by their size,
 * as a CTF reader does, and checks them and the range's summary. */
typedef struct WrapRaw {
    TrSink base;
    WrapSeen seen;
} WrapRaw;

static void wrap_range(TrSink *s, const TrRange *rg)
{
    WrapSeen *w = &((WrapRaw *)s)->seen;
    size_t at = 0, last = 0;
    uint64_t n = 0;
    while (at + sizeof(TrRecord) <= rg->len) {
        const TrRecord *h = (const TrRecord *)(const void *)(rg->data + at);
        if (h->size < sizeof(TrRecord) || at + h->size > rg->len)
            break;
        wrap_check(w, (TrKind)h->kind, h->flags, h->pid, h->mod, h->fun, h->arity, h->nterms,
                   (const uint8_t *)(h + 1), h->paylen);
        last = at;
        at += h->size;
        n++;
    }
    const TrRecord *l = (const TrRecord *)(const void *)(rg->data + last);
    if (at != rg->len || n == 0 || rg->last_ticks != l->ticks ||
        rg->first_ticks != ((const TrRecord *)(const void *)rg->data)->ticks ||
        rg->last_pad != l->size - sizeof(TrRecord) - l->paylen)
        w->ranges_bad++;
}

static void wrap_close(TrSink *s)
{
    (void)s;   /* the test owns it */
}

static const TrSinkOps wrap_raw_ops = { .name = "wrap-raw", .close = wrap_close,
                                        .range = wrap_range };

/* Lossless: waits for room as the VM's producers do. */
static void wrap_emit(TrPipeline *tp, const TrEmit *ev)
{
    TrStatus st;
    while ((st = tr_emit(tp, 0, ev)) == TR_FULL)
        cr_assert(tr_wait_space(tp, 0, 2000000000ull), "no room for event %llu",
                  (unsigned long long)ev->pid);
    cr_assert_eq(st, TR_OK, "event %llu", (unsigned long long)ev->pid);
}

/* The first lap ends `left` bytes before the end of the array: nothing
 * written there (8), or a PAD over them (16).  The ring's memory starts
 * zeroed and the second lap is far from there. */
static void wrap_check_end(const TrRing *r, unsigned left)
{
    size_t end = r->size - left;
    if (left < TR_PAD_MIN) {
        for (size_t i = end; i < r->size; i++)
            cr_expect_eq(r->data[i], 0, "byte %zu: nothing is written there", i);
        return;
    }
    const TrRecord *pad = (const TrRecord *)(const void *)(r->data + end);
    cr_expect_eq(pad->kind, TR_K_PAD);
    cr_expect_eq(pad->size, left);
}

/*
 * The sequence through tr_emit.  tr_emit leaves fewer bytes than its
 * largest record before the end of the array only when the ring is
 * (nearly) full, so the first lap is written before the collector starts
 * (tail 0: near the end each record is reserved at its exact size).  The
 * test then reads the first two records as the collector would and hands
 * their 72 bytes back: room for the wrap, which skips the end (a PAD, or
 * nothing for 8 bytes) and starts the second lap; then the collector
 * starts and reads the rest of the first lap across the end in one pass.
 */
enum { WRAP_CONSUMED = 2 };   /* the records the test reads itself */

static void wrap_write_emit(TrPipeline *tp, const WrapSeq *q)
{
    TrRing *r = &tp->rings[0];
    const Term seven = I(7);
    for (uint64_t pid = 0; pid < q->nlap; pid++) {
        TrEmit ev = wrap_event(q, pid, &seven);
        cr_assert_eq(tr_emit(tp, 0, &ev), TR_OK, "event %llu", (unsigned long long)pid);
    }
    cr_assert_eq(r->head_local, r->size - q->left, "the first lap ends %u bytes early", q->left);
    WrapSeen mine = { .q = q };
    cr_assert(tr_ring_snapshot(r));
    for (int i = 0; i < WRAP_CONSUMED; i++) {
        const TrRecord *h = tr_ring_peek(r);
        cr_assert(h);
        wrap_check(&mine, (TrKind)h->kind, h->flags, h->pid, h->mod, h->fun, h->arity,
                   h->nterms, (const uint8_t *)(h + 1), h->paylen);
        r->tail_local += h->size;
    }
    cr_assert_eq(mine.bad, 0, "the first two records");
    tr_ring_release(tp, r);
    TrEmit ev = wrap_event(q, q->nlap, &seven);
    cr_assert_eq(tr_emit(tp, 0, &ev), TR_OK, "the wrap");
    cr_assert_eq(r->head_local, r->size + 36, "the wrap: the end skipped, 36 bytes at 0");
    tr_pipeline_start(tp);
    for (uint64_t pid = q->nlap + 1; pid < q->total; pid++) {
        ev = wrap_event(q, pid, &seven);
        wrap_emit(tp, &ev);
    }
    wrap_check_end(r, q->left);
}

/*
 * The sequence through the fast path, with the collector running (a
 * flush half-way gives tr_emit the room for the wrap).  The fast path
 * writes up to the end whenever its largest record fits, so it leaves 8
 * bytes whatever the collector does; it declines the wrap, which tr_emit
 * writes, and takes the rest, except where a record could pass wake_at
 * (tr_emit looks at the collector there and writes that record) or
 * reach a granule boundary (tr_emit notes the cut).
 */
static void wrap_write_fast(TrPipeline *tp, const WrapSeq *q)
{
    TrRing *r = &tp->rings[0];
    const Term seven = I(7);
    tr_pipeline_start(tp);
    for (uint64_t pid = 0; pid < q->total; pid++) {
        TrEmit ev = wrap_event(q, pid, &seven);
        if (pid == q->nlap) {
            cr_assert_eq(r->head_local, r->size - q->left, "the first lap ends %u bytes early",
                         q->left);
            cr_assert_not(tr_ring_put_imm(r, &ev), "the fast path declines the wrap");
            wrap_emit(tp, &ev);
            cr_assert_eq(r->head_local, r->size + 36, "the wrap: the end skipped, 36 at 0");
        } else if (!tr_ring_put_imm(r, &ev)) {
            /* Declined only where the record could pass wake_at (tr_emit
             * looks at the collector there) or reach a granule boundary
             * (tr_emit notes the cut); tr_emit writes it. */
            uint64_t most = r->head_local + sizeof(TrRecord) + ev.nterms * TR_IMM_MAX;
            uint64_t boundary = ((r->head_local >> r->cut_shift) + 1) << r->cut_shift;
            cr_assert(most > r->wake_at || most >= boundary,
                      "the fast path takes event %llu", (unsigned long long)pid);
            wrap_emit(tp, &ev);
        }
        if (pid == q->nlap / 2)
            tr_flush(tp);
    }
    wrap_check_end(r, q->left);
}

/* One run of the sequence through tr_emit or the fast path, to a
 * decoded sink (callback) or a raw one: every event arrives, exact. */
static void wrap_case(unsigned left, bool fast, bool raw)
{
    const WrapSeq q = wrap_seq(left);
    TrOptions o = { .nscheds = 1, .ring_bytes = 4096, .payload_cap = 128,
                    .policy = TR_POLICY_LOSSLESS };
    char err[256];
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    cr_assert(tp, "%s", err);
    WrapRaw sink = { .base = { .ops = &wrap_raw_ops }, .seen = { .q = &q } };
    WrapSeen seen = { .q = &q };
    WrapSeen *w = raw ? &sink.seen : &seen;
    tr_pipeline_add_sink(tp, raw ? &sink.base : tr_sink_callback_new(wrap_event_seen, &seen));
    /* The sink expects the pids after those the test consumes itself
     * (set before the collector starts). */
    w->n = fast ? 0 : WRAP_CONSUMED;
    if (fast)
        wrap_write_fast(tp, &q);
    else
        wrap_write_emit(tp, &q);
    tr_pipeline_free(tp);
    cr_expect_eq(w->n, q.total, "events seen up to %llu of %llu", (unsigned long long)w->n,
                 (unsigned long long)q.total);
    cr_expect_eq(w->bad, 0, "%llu events differ, the first at %llu", (unsigned long long)w->bad,
                 (unsigned long long)w->bad_at);
    cr_expect_eq(w->ranges_bad, 0, "ranges that disagree with their records");
}

/* A reader that takes the unwritten end for a record walks off the array
 * and may never come back: the timeout makes that a failure. */
Test(ring, eight_bytes_left_at_the_end_are_skipped_unwritten, .timeout = 60)
{
    wrap_case(8, false, false);
    wrap_case(8, true, false);
    wrap_case(8, false, true);
    wrap_case(8, true, true);
}

/* Four and twelve bytes, which records aligned to 4 leave too: nothing
 * is written there. */
Test(ring, four_and_twelve_bytes_left_at_the_end_are_skipped_unwritten, .timeout = 60)
{
    for (unsigned left = 4; left <= 12; left += 8) {
        wrap_case(left, false, false);
        wrap_case(left, true, false);
        wrap_case(left, false, true);
        wrap_case(left, true, true);
    }
}

Test(ring, sixteen_bytes_left_at_the_end_take_a_pad, .timeout = 60)
{
    wrap_case(16, false, false);
    wrap_case(16, true, false);
    wrap_case(16, false, true);
    wrap_case(16, true, true);
}

/* Records of 36 bytes (a call with one small integer: the header and a
 * payload of 2, rounded up to 4) into a 4 KiB ring whose granule is 256 bytes
 * (4096 / TR_CUTS is 64, doubled up to the largest record, 160). */
static TrPipeline *cut_pipeline(TrPolicy policy)
{
    TrOptions o = { .nscheds = 1, .ring_bytes = 4096, .payload_cap = 128, .policy = policy };
    char err[256];
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    cr_assert(tp, "%s", err);
    cr_assert_eq(tp->rings[0].cut_shift, 8, "a granule of 256 bytes");
    return tp;
}

static TrStatus cut_emit(TrPipeline *tp, uint64_t pid)
{
    const Term seven = I(7);
    TrEmit ev = { .kind = TR_K_CALL, .pid = pid, .mod = ATOM_TRUE, .fun = ATOM_FALSE,
                  .arity = 1, .terms = &seven, .nterms = 1 };
    return tr_emit(tp, 0, &ev);
}

/* The record at ring position `pos`. */
static const TrRecord *cut_rec(const TrRing *r, uint64_t pos)
{
    return (const TrRecord *)(const void *)(r->data + (pos & (r->size - 1)));
}

/* A range and the records it must hold, [from, to): its bytes, both
 * ends' ticks, the last pad, the drops its LOST markers carry. */
static void cut_expect(TrRing *r, size_t limit, uint64_t from, uint64_t to, uint64_t lost,
                       bool by_cut)
{
    uint64_t cuts = r->n_cut_ranges;
    TrRange rg;
    size_t n = tr_ring_range(r, limit, &rg);
    cr_expect_eq(n, to - from, "the range from %llu", (unsigned long long)from);
    cr_expect_eq(rg.len, to - from);
    cr_expect_eq(rg.data, r->data + (from & (r->size - 1)));
    cr_expect_eq(rg.first_ticks, cut_rec(r, from)->ticks);
    cr_expect_eq(rg.last_ticks, cut_rec(r, to - 36)->ticks);
    cr_expect_eq(rg.last_pad, 2);
    cr_expect_eq(rg.lost, lost, "the range from %llu", (unsigned long long)from);
    cr_expect_eq(r->n_cut_ranges - cuts, by_cut ? 1 : 0, "found %s",
                 by_cut ? "by a cut" : "by the walk");
    r->tail_local += n;
}

/* The cut table gives the end of a raw range without reading the records
 * before it: the walk would end at the first record reaching the limit
 * (1,000 bytes: record 27's end, 1,008), the cut ends with the record
 * that reaches the granule boundary below it (768: record 21, 756 to
 * 792). */
Test(ring, a_raw_range_ends_at_a_cut_without_walking_the_records)
{
    TrPipeline *tp = cut_pipeline(TR_POLICY_DROP);
    TrRing *r = &tp->rings[0];
    for (uint64_t pid = 0; pid < 52; pid++)
        cr_assert_eq(cut_emit(tp, pid), TR_OK);
    cr_assert(tr_ring_snapshot(r));
    cut_expect(r, 1000, 0, 792, 0, true);
    /* From 792, 1,000 bytes reach 1,792, a boundary, which record 49
     * (1,764 to 1,800) reaches. */
    cut_expect(r, 1000, 792, 1800, 0, true);
    /* 72 bytes left, no boundary among them: walked. */
    cut_expect(r, 1000, 1800, 1872, 0, false);
    tr_ring_release(tp, r);
    tr_pipeline_free(tp);
}

/* Drops, then a LOST marker before the next record: a range found by a
 * cut carries the marker's count (from the table, the producer's drops
 * marked so far), as a walked one does. */
Test(ring, a_range_found_by_a_cut_counts_its_lost_markers)
{
    TrPipeline *tp = cut_pipeline(TR_POLICY_DROP);
    TrRing *r = &tp->rings[0];
    uint64_t pid = 0, dropped = 0;
    /* Fill: 4096 / 36 = 113 records fit, then 5 drops. */
    while (dropped < 5) {
        TrStatus st = cut_emit(tp, pid++);
        cr_assert(st == TR_OK || st == TR_DROPPED);
        dropped += st == TR_DROPPED;
    }
    cr_assert_eq(r->head_local, 113 * 36, "113 records written");
    cr_assert(tr_ring_snapshot(r));
    /* The boundary 3,840 is in record 106 (3,816 to 3,852); the lap's
     * last 216 bytes have none, and are walked. */
    cut_expect(r, 4096, 0, 3852, 0, true);
    cut_expect(r, 4096, 3852, 4068, 0, false);
    tr_ring_release(tp, r);
    /* The 28 bytes left before the end get a PAD; the marker (a bare
     * header: 32 bytes, 5 drops) and 30 records start the second lap. */
    for (int i = 0; i < 30; i++)
        cr_assert_eq(cut_emit(tp, pid++), TR_OK);
    cr_assert_eq(r->head_local, 4096 + 32 + 30 * 36);
    cr_assert_eq(cut_rec(r, 4096)->kind, TR_K_LOST);
    cr_assert(tr_ring_snapshot(r));
    TrRange pad;
    cr_expect_eq(tr_ring_range(r, 4096, &pad), 28, "the PAD: stepped over");
    cr_expect_eq(pad.len, 0, "and not a range");
    r->tail_local += 28;
    /* 4,096 + 1,024 is in the 28th record after the marker (5,100 to
     * 5,136); the range holds the marker. */
    cut_expect(r, 4096, 4096, 5136, 5, true);
    cut_expect(r, 4096, 5136, 5208, 0, false);
    tr_ring_release(tp, r);
    tr_pipeline_free(tp);
}

/* ==== cuts against the records, at random ==== */

typedef struct Mixed {
    uint64_t next_pid;         /* the pid the next event must have, drops aside */
    uint64_t pending;          /* drops the LOST markers read so far announced */
    uint64_t events, marked, bad;
} Mixed;

static uint64_t mixed_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One range, read as a CTF reader would: its records in order (a pid
 * skips exactly the drops the markers before it announced), and its
 * summary true to them. */
static void mixed_check(Mixed *m, const TrRange *rg)
{
    size_t at = 0, last = 0;
    uint64_t lost = 0;
    while (at < rg->len) {
        const TrRecord *h = (const TrRecord *)(const void *)(rg->data + at);
        if (h->size < sizeof(TrRecord) || at + h->size > rg->len || h->kind == TR_K_PAD) {
            m->bad++;
            return;
        }
        if (h->kind == TR_K_LOST) {
            lost += h->pid;
            m->pending += h->pid;
        } else {
            m->bad += h->pid != m->next_pid + m->pending;
            m->next_pid = h->pid + 1;
            m->pending = 0;
            m->events++;
        }
        last = at;
        at += h->size;
    }
    const TrRecord *l = (const TrRecord *)(const void *)(rg->data + last);
    m->bad += rg->lost != lost || rg->last_ticks != l->ticks ||
              rg->first_ticks != ((const TrRecord *)(const void *)rg->data)->ticks ||
              rg->last_pad != l->size - sizeof(TrRecord) - l->paylen;
    m->marked += lost;
}

/* A seeded run of 200,000 steps on one thread: events of 36 to about 290
 * bytes through tr_emit and the fast path, under the drop policy, and
 * ranges of random limits taken between them, as the collector would.
 * Every event written is read once and in order, every range agrees with
 * its records, the markers announce every drop, and both the cut table
 * and the walk found ranges. */
Test(ring, random_ranges_agree_with_the_records_they_hold)
{
    TrOptions o = { .nscheds = 1, .ring_bytes = 16384, .payload_cap = 256,
                    .policy = TR_POLICY_DROP };
    char err[256];
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    cr_assert(tp, "%s", err);
    TrRing *r = &tp->rings[0];
    cr_assert_eq(r->cut_shift, 9, "a granule of 512 bytes");
    uint8_t bytes[220];
    memset(bytes, 0xab, sizeof bytes);
    uint64_t seed = 0x9e3779b97f4a7c15ull, pid = 0, written = 0, dropped = 0;
    Mixed m = { 0 };
    for (int step = 0; step < 200000; step++) {
        uint64_t x = mixed_rand(&seed);
        if (x % 16) {
            Term arg = x % 3 ? I((int64_t)(x >> 20)) : bin_of(&arena, bytes, (x >> 8) % 220);
            TrEmit ev = { .kind = TR_K_CALL, .pid = pid++, .mod = ATOM_TRUE, .fun = ATOM_FALSE,
                          .arity = 1, .terms = &arg, .nterms = 1 };
            if (x % 2 && tr_ring_put_imm(r, &ev)) {
                written++;
            } else {
                TrStatus st = tr_emit(tp, 0, &ev);
                cr_assert(st == TR_OK || st == TR_DROPPED);
                written += st == TR_OK;
                dropped += st == TR_DROPPED;
            }
            arena.used = 0;
            continue;
        }
        /* Ranges of up to an eighth of the ring, about what 16 events
         * take, so that the ring fills and drops now and then; one time in
         * eight all of it, as a flush does. */
        bool all = (x >> 4) % 8 == 0;
        tr_ring_snapshot(r);
        do {
            TrRange rg;
            size_t n = tr_ring_range(r, 1 + (size_t)(mixed_rand(&seed) % (r->size / 8)), &rg);
            if (rg.len)
                mixed_check(&m, &rg);
            r->tail_local += n;
        } while (all && r->tail_local != r->head_seen);
        tr_ring_release(tp, r);
    }
    tr_ring_snapshot(r);
    while (r->tail_local != r->head_seen) {
        TrRange rg;
        r->tail_local += tr_ring_range(r, r->size, &rg);
        if (rg.len)
            mixed_check(&m, &rg);
    }
    cr_expect_eq(m.bad, 0, "records or ranges that disagree");
    cr_expect_eq(m.events, written, "events read %llu of %llu", (unsigned long long)m.events,
                 (unsigned long long)written);
    cr_expect_gt(dropped, 0, "the ring overflowed");
    /* The drops after the last event written are still pending. */
    cr_expect_eq(m.marked + r->pending_lost, dropped);
    cr_expect_gt(r->n_cut_ranges, 1000, "ranges found by a cut: %llu",
                 (unsigned long long)r->n_cut_ranges);
    tr_pipeline_free(tp);
}

/* A raw range that starts where 4 bytes are left before the array's end
 * (the last one ended there, at the head of the time): those bytes are
 * stepped over, and nothing is read there.  The walk once took them for
 * a record and read its kind past the array's end (fuzz_run found it
 * under ASan; this test fails the same way without the fix). */
Test(ring, a_range_from_four_bytes_before_the_end_reads_nothing_there)
{
    TrPipeline *tp = cut_pipeline(TR_POLICY_DROP);
    TrRing *r = &tp->rings[0];
    /* 7 records of 36 bytes and 120 of 32 (a call without arguments):
     * 4,092 bytes. */
    uint64_t pid = 0;
    for (; pid < 7; pid++)
        cr_assert_eq(cut_emit(tp, pid), TR_OK);
    for (; pid < 127; pid++) {
        TrEmit ev = { .kind = TR_K_CALL, .flags = TR_F_ARITY, .pid = pid, .mod = ATOM_TRUE,
                      .fun = ATOM_FALSE, .arity = 1 };
        cr_assert_eq(tr_emit(tp, 0, &ev), TR_OK);
    }
    cr_assert_eq(r->head_local, 4092);
    cr_assert(tr_ring_snapshot(r));
    while (r->tail_local != r->head_seen) {
        TrRange rg;
        r->tail_local += tr_ring_range(r, r->size, &rg);
    }
    cr_assert_eq(r->tail_local, 4092, "the ranges end at the head, 4 bytes before the end");
    tr_ring_release(tp, r);
    cr_assert_eq(cut_emit(tp, pid), TR_OK);
    cr_assert_eq(r->head_local, 4096 + 36, "the wrap: 4 bytes skipped, the record at 0");
    cr_assert(tr_ring_snapshot(r));
    TrRange rg;
    cr_expect_eq(tr_ring_range(r, r->size, &rg), 4, "the 4 bytes: stepped over");
    cr_expect_eq(rg.len, 0, "and not a range");
    r->tail_local += 4;
    cr_expect_eq(tr_ring_range(r, r->size, &rg), 36);
    cr_expect_eq(rg.len, 36);
    cr_expect_eq(cut_rec(r, 4096)->pid, 127);
    tr_pipeline_free(tp);
}
