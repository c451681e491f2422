/*
 * tests/stress/stress_trace.c - producers at full speed against the
 * collector.
 *
 * Phase 1 (drop): 4 scheduler rings, each with its own producer thread,
 * plus 2 foreign threads on the shared ring, write as fast as they can
 * into small rings for a fixed time while the collector drains into a
 * counting sink.  Afterwards, exactly: emitted + lost == generated (per
 * ring, from the producers' own counts), the sink saw every emitted event
 * and every lost one (as LOST records), and each ring's events arrived in
 * emission order with intact payloads.
 * Phase 2 (lossless): the same with producers that wait for room: nothing
 * lost, everything delivered in order.
 * Each policy's full-ring path is taken for certain: the sink holds the
 * collector at its first event until every producer has met a full ring
 * (a drop, or a wait for room), and a producer runs on past the phase's
 * time until it has.  So every ring of the drop phase lost events and
 * every producer of the lossless phase waited, and the pipeline's own
 * counters (TrStats: emitted, lost, full) agree exactly with the
 * producers' counts.
 * Run under ThreadSanitizer in `scons mode=tsan test`.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "trace/tr.h"
#include "vm/atom.h"

static const char *const stress_name = "stress_trace";

#define NSCHED 4
#define NFOREIGN 2
#define NRINGS (NSCHED + 1)
#define PHASE_NS 600000000ull

static int failures;

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "%s: %s\n", stress_name, what);
        failures++;
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The counting sink (collector thread only; read after the join). */
typedef struct Count {
    uint64_t events[NRINGS], lost[NRINGS];
    uint64_t next[NRINGS + NFOREIGN];   /* next sequence number per producer */
    bool order_ok, payload_ok;
} Count;

/* Producers that have met a full ring in this phase; the sink holds the
 * collector until all have. */
static _Atomic int producers_hit, nproducers;

static void count(const TrEvent *ev, void *data)
{
    Count *c = data;
    while (atomic_load(&producers_hit) < atomic_load(&nproducers))
        sched_yield();
    int ring = ev->sched < 0 ? NSCHED : ev->sched;
    if (ev->kind == TR_K_LOST) {
        c->lost[ring] += ev->lost;
        return;
    }
    c->events[ring]++;
    /* pid = producer index << 40 | sequence number. */
    unsigned prod = (unsigned)(ev->pid >> 40);
    uint64_t seq = ev->pid & ((1ull << 40) - 1);
    if (prod >= NRINGS + NFOREIGN || seq < c->next[prod])
        c->order_ok = false;
    else
        c->next[prod] = seq + 1;
    /* Payload: {Seq, [0, 1, ..., Seq % 8 - 1]} as encoded by tr_encode. */
    if (ev->nterms != 1 || ev->paylen < 4)
        c->payload_ok = false;
}

typedef struct Producer {
    TrPipeline *tp;
    int sched;          /* -1: foreign (shared ring) */
    unsigned index;
    uint64_t deadline;
    uint64_t generated, ok, dropped, full;
} Producer;

static void *produce(void *arg)
{
    Producer *p = arg;
    Term cells[16];
    Atom mod = vm_atom_cstr("stress"), fun = vm_atom_cstr("loop");
    for (uint64_t seq = 0;; seq++) {
        if ((p->dropped || p->full) && (seq & 255) == 0 && now_ns() > p->deadline)
            break;
        /* A list of seq % 8 small integers, built in place. */
        Term list = TERM_NIL;
        for (unsigned i = (unsigned)(seq % 8); i-- > 0;) {
            cells[2 * i] = make_small(i);
            cells[2 * i + 1] = list;
            list = make_cons_ptr(&cells[2 * i]);
        }
        Term tuple_words[3] = { MAKE_HEADER(IMM_HDR_TUPLE, 2), make_small((int64_t)seq), list };
        Term t = make_boxed(tuple_words);
        TrEmit ev = { .kind = TR_K_CALL, .pid = (uint64_t)p->index << 40 | seq,
                      .mod = mod, .fun = fun, .arity = 1, .terms = &t, .nterms = 1 };
        p->generated++;
        for (;;) {
            TrStatus st = tr_emit(p->tp, p->sched, &ev);
            if (st == TR_OK) {
                p->ok++;
                break;
            }
            /* The first full ring this producer meets counts it in. */
            if (!p->dropped && !p->full)
                atomic_fetch_add(&producers_hit, 1);
            if (st == TR_DROPPED) {
                p->dropped++;
                break;
            }
            p->full++;
            tr_wait_space(p->tp, p->sched, 0);
        }
    }
    return NULL;
}

static void phase(TrPolicy policy)
{
    char err[256];
    TrOptions o = { .nscheds = NSCHED, .ring_bytes = 1 << 16, .policy = policy };
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    if (!tp) {
        check(false, err);
        return;
    }
    Count c;
    memset(&c, 0, sizeof c);
    c.order_ok = c.payload_ok = true;
    tr_pipeline_add_sink(tp, tr_sink_callback_new(count, &c));
    tr_pipeline_start(tp);
    Producer prod[NRINGS + NFOREIGN];
    pthread_t th[NRINGS + NFOREIGN];
    uint64_t deadline = now_ns() + PHASE_NS;
    int nprod = NSCHED + NFOREIGN;
    atomic_store(&producers_hit, 0);
    atomic_store(&nproducers, nprod);
    for (int i = 0; i < nprod; i++) {
        prod[i] = (Producer){ .tp = tp, .sched = i < NSCHED ? i : -1, .index = (unsigned)i,
                              .deadline = deadline };
        pthread_create(&th[i], NULL, produce, &prod[i]);
    }
    for (int i = 0; i < nprod; i++)
        pthread_join(th[i], NULL);
    TrStats *st = tr_pipeline_stats(tp);
    tr_pipeline_free(tp);

    uint64_t gen[NRINGS] = { 0 }, ok[NRINGS] = { 0 }, dropped[NRINGS] = { 0 };
    uint64_t full[NRINGS] = { 0 };
    uint64_t total_gen = 0, total_full = 0;
    for (int i = 0; i < nprod; i++) {
        int ring = prod[i].sched < 0 ? NSCHED : prod[i].sched;
        gen[ring] += prod[i].generated;
        ok[ring] += prod[i].ok;
        dropped[ring] += prod[i].dropped;
        full[ring] += prod[i].full;
        total_gen += prod[i].generated;
        total_full += prod[i].full;
        char what[120];
        snprintf(what, sizeof what, "producer %d never met a full ring (%s)", i,
                 policy == TR_POLICY_DROP ? "dropped nothing" : "never waited");
        check(policy == TR_POLICY_DROP ? prod[i].dropped > 0 && prod[i].full == 0
                                       : prod[i].full > 0 && prod[i].dropped == 0, what);
    }
    uint64_t total_lost = 0;
    for (int r = 0; r < NRINGS; r++) {
        char what[200];
        snprintf(what, sizeof what,
                 "ring %d: generated %llu, emitted %llu (sink %llu), lost %llu (sink %llu)", r,
                 (unsigned long long)gen[r], (unsigned long long)st->ring[r].emitted,
                 (unsigned long long)c.events[r], (unsigned long long)st->ring[r].lost,
                 (unsigned long long)c.lost[r]);
        check(st->ring[r].emitted + st->ring[r].lost == gen[r], what);
        check(st->ring[r].emitted == ok[r] && st->ring[r].lost == dropped[r], what);
        check(c.events[r] == st->ring[r].emitted && c.lost[r] == st->ring[r].lost, what);
        snprintf(what, sizeof what, "ring %d: the producers waited %llu times, the ring counted %llu",
                 r, (unsigned long long)full[r], (unsigned long long)st->ring[r].full);
        check(st->ring[r].full == full[r], what);
        if (policy == TR_POLICY_LOSSLESS)
            check(st->ring[r].lost == 0, what);
        total_lost += st->ring[r].lost;
    }
    check(c.order_ok, "events of one producer out of order");
    check(c.payload_ok, "a payload was damaged");
    printf("%s: %s: generated %llu, lost %llu, producer waits %llu\n", stress_name,
           policy == TR_POLICY_DROP ? "drop" : "lossless", (unsigned long long)total_gen,
           (unsigned long long)total_lost, (unsigned long long)total_full);
    free(st);
}

int main(void)
{
    vm_atoms_init();
    phase(TR_POLICY_DROP);
    phase(TR_POLICY_LOSSLESS);
    return failures ? 1 : 0;
}
