/*
 * bench/bench_trace.c - the trace pipeline's costs, as key=value lines.
 *
 *   emit_ns           ns per tr_emit() of a call event with one small-int
 *                     argument into a scheduler ring (the producer's whole
 *                     cost: clock, encoding, record, publish); median of
 *                     batches that fit the ring, so nothing is dropped
 *   emit3_ns          the same with three arguments {ok,[1,2]}, <<"bin">>, 7
 *   emit_shared_ns    the same through the shared (locked) ring, -1
 *   <sink>_mev_s      collector throughput, million events per second,
 *                     draining pre-filled rings into one sink: text, jsonl
 *                     and chrome write to /dev/null, ctf to a temporary
 *                     directory, callback calls an empty function
 *
 * Not part of bench/run yet.  Run it from a release build:
 *   scons -Q mode=release build/release/bench/bench_trace
 *   build/release/bench/bench_trace [--events N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PROG "bench_trace"
#include "bench/bench_util.h"
#include "trace/tr.h"
#include "vm/atom.h"

#define BATCH 20000
#define ROUNDS 31

static void nothing(const TrEvent *ev, void *data)
{
    (void)ev;
    (void)data;
}

static TrPipeline *pipeline(size_t ring_bytes)
{
    char err[256];
    TrOptions o = { .nscheds = 1, .ring_bytes = ring_bytes };
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    if (!tp) {
        fprintf(stderr, "bench_trace: %s\n", err);
        exit(1);
    }
    return tp;
}

/* Median ns per emit over ROUNDS batches of BATCH events, each drained. */
static double emit_cost(int sched, const Term *args, unsigned nargs)
{
    TrPipeline *tp = pipeline((size_t)1 << 23);
    tr_pipeline_add_sink(tp, tr_sink_callback_new(nothing, NULL));
    tr_pipeline_start(tp);
    TrEmit ev = { .kind = TR_K_CALL, .pid = 42, .mod = vm_atom_cstr("fib"),
                  .fun = vm_atom_cstr("fib"), .arity = nargs, .terms = args, .nterms = nargs };
    double per[ROUNDS];
    uint64_t dropped = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < BATCH; i++)
            dropped += tr_emit(tp, sched, &ev) != TR_OK;
        per[r] = (now_ns() - t0) / BATCH;
        tr_flush(tp);
    }
    tr_pipeline_free(tp);
    if (dropped)
        fprintf(stderr, "bench_trace: %llu events dropped while measuring emit\n",
                (unsigned long long)dropped);
    return median(per, ROUNDS);
}

/* Million events per second one sink takes from a pre-filled ring. */
static double sink_rate(TrSink *sink, long n)
{
    TrPipeline *tp = pipeline((size_t)1 << 27);
    tr_pipeline_add_sink(tp, sink);
    Term arg = make_small(10);
    TrEmit ev = { .kind = TR_K_CALL, .flags = TR_F_RETURNS, .pid = 42,
                  .mod = vm_atom_cstr("fib"), .fun = vm_atom_cstr("fib"), .arity = 1,
                  .terms = &arg, .nterms = 1 };
    TrEmit ret = ev;
    ret.kind = TR_K_RETURN_FROM;
    for (long i = 0; i < n; i++)
        if (tr_emit(tp, 0, i % 2 ? &ret : &ev) != TR_OK) {
            fprintf(stderr, "bench_trace: the ring is too small for %ld events\n", n);
            exit(1);
        }
    double t0 = now_ns();
    tr_pipeline_start(tp);
    tr_flush(tp);
    double secs = (now_ns() - t0) / 1e9;
    tr_pipeline_free(tp);
    return (double)n / secs / 1e6;
}

int main(int argc, char **argv)
{
    long n = 2000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--events") && i + 1 < argc) {
            n = atol(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_trace [--events N]\n");
            return 2;
        }
    }
    vm_atoms_init();
    Term one = make_small(10);
    printf("emit_ns=%.1f\n", emit_cost(0, &one, 1));

    static Term words[16];
    Term *tup = words, *c1 = words + 3, *c2 = words + 5, *bin = words + 7;
    c2[0] = make_small(2);
    c2[1] = TERM_NIL;
    c1[0] = make_small(1);
    c1[1] = make_cons_ptr(c2);
    tup[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
    tup[1] = make_atom(ATOM_OK);
    tup[2] = make_cons_ptr(c1);
    bin[0] = MAKE_HEADER(IMM_HDR_BINARY, 3);
    memcpy(bin + 1, "bin", 3);
    Term three[3] = { make_boxed(tup), make_boxed(bin), make_small(7) };
    printf("emit3_ns=%.1f\n", emit_cost(0, three, 3));
    printf("emit_shared_ns=%.1f\n", emit_cost(-1, &one, 1));

    FILE *null = fopen("/dev/null", "w");
    char dir[] = "/tmp/bench_trace_XXXXXX", err[256];
    if (!null || !mkdtemp(dir)) {
        perror("bench_trace");
        return 1;
    }
    printf("text_mev_s=%.2f\n", sink_rate(tr_sink_text_new(null, 0), n));
    printf("jsonl_mev_s=%.2f\n", sink_rate(tr_sink_jsonl_new(null), n));
    printf("chrome_mev_s=%.2f\n", sink_rate(tr_sink_chrome_new(null, 1), n));
    printf("callback_mev_s=%.2f\n", sink_rate(tr_sink_callback_new(nothing, NULL), n));
    TrSink *ctf = tr_sink_ctf_new(dir, 0, err, sizeof err);
    if (!ctf) {
        fprintf(stderr, "bench_trace: %s\n", err);
        return 1;
    }
    printf("ctf_mev_s=%.2f\n", sink_rate(ctf, n));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_trace: could not remove %s\n", dir);
    fclose(null);
    return 0;
}
