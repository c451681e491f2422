/*
 * tests/progs/trace_gen.c - writes trace output for the shell tests
 * (tests/sh/trace_*.sh), which read it back with real tools.
 *
 *   trace_gen text|jsonl|chrome           the fixed sequence to stdout
 *   trace_gen ctf DIR                     the fixed sequence as CTF
 *   trace_gen ctf-losses DIR              losses where CTF needs extra packets:
 *                                         before a stream's first event (5 on
 *                                         sched 1), after its last one (7 on
 *                                         sched 0) and on a stream with no
 *                                         events at all (2 on shared)
 *   trace_gen pipeline-ctf DIR N          N events through a real pipeline
 *                                         (2 schedulers + the shared ring,
 *                                         small rings, drop policy) into
 *                                         CTF; prints "emitted=E lost=L"
 *   trace_gen pipeline-ctf-raw DIR N      the same into raw CTF
 *   trace_gen lossless-ctf-raw DIR N      N events through 4 KiB rings under
 *                                         the lossless policy into raw CTF,
 *                                         waiting for room when a ring is
 *                                         full; prints "emitted=E waits=W"
 *   trace_gen pipeline-chrome FILE N      the same into Chrome JSON, with
 *                                         calls left open at the end
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/trace/tr_fixture.h"

static TrSink *open_sink(const char *kind, const char *path)
{
    char err[256];
    TrSink *s = NULL;
    if (!strcmp(kind, "text"))
        s = tr_sink_text_new(stdout, 0);
    else if (!strcmp(kind, "jsonl"))
        s = tr_sink_jsonl_new(stdout);
    else if (!strcmp(kind, "chrome"))
        s = tr_sink_chrome_new(path ? fopen(path, "w") : stdout, 1);
    else if (!strcmp(kind, "ctf") && (s = tr_sink_ctf_new(path, 0, err, sizeof err)) == NULL)
        fprintf(stderr, "%s\n", err);
    return s;
}

static int fixed(const char *kind, const char *path)
{
    vm_atoms_init();
    TrSink *s = open_sink(kind, path);
    if (!s)
        return 2;
    TrSinkInfo info = { .nscheds = 2 };
    if (s->ops->open && s->ops->open(s, &info) != 0)
        return 1;
    fx_sequence(s);
    s->ops->close(s);
    return 0;
}

static int losses(const char *dir)
{
    char err[256];
    vm_atoms_init();
    TrSink *s = tr_sink_ctf_new(dir, 0, err, sizeof err);
    if (!s) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    TrSinkInfo info = { .nscheds = 2 };
    if (s->ops->open(s, &info) != 0)
        return 1;
    uint8_t b[2][64];
    Term one = make_small(1);
    TrEvent ev[] = {
        { .ts = 500, .sched = 1, .kind = TR_K_LOST, .lost = 5 },
        fx_event(b[0], 64, 1000, 1, TR_K_CALL, 0, 9, "a", "b", 1, &one, 1),
        fx_event(b[1], 64, 1100, 0, TR_K_CALL, 0, 9, "a", "b", 1, &one, 1),
        { .ts = 2000, .sched = 0, .kind = TR_K_LOST, .lost = 7 },
        { .ts = 2100, .sched = -1, .kind = TR_K_LOST, .lost = 2 },
    };
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        s->ops->event(s, &ev[i]);
        if (i == 2)
            s->ops->flush(s);   /* the trailing loss comes after a packet was cut */
    }
    s->ops->close(s);
    return 0;
}

/* Events through rings that overflow: emit before the collector starts. */
static int pipeline(const char *kind, const char *path, long n)
{
    char err[256];
    TrOptions o = { .nscheds = 2, .ring_bytes = 4096, .policy = TR_POLICY_DROP };
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    FILE *f = NULL;
    TrSink *s;
    if (!strcmp(kind, "chrome")) {
        f = fopen(path, "w");
        s = f ? tr_sink_chrome_new(f, getpid()) : NULL;
    } else if (!strcmp(kind, "ctf-raw")) {
        s = tr_sink_ctf_raw_new(path, tr_ctf_clock_offset(), err, sizeof err);
    } else {
        s = tr_sink_ctf_new(path, tr_ctf_clock_offset(), err, sizeof err);
    }
    if (!tp || !s) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    tr_pipeline_add_sink(tp, s);
    Term args[2] = { make_small(1), make_atom(vm_atom_cstr("x")) };
    Atom mod = vm_atom_cstr("fib"), fun = vm_atom_cstr("fib");
    uint64_t generated = 0;
    for (int round = 0; round < 2; round++) {
        /* Round 0 overflows the rings; round 1 runs with the collector. */
        if (round == 1)
            tr_pipeline_start(tp);
        for (long i = 0; i < n; i++) {
            int sched = (int)(i % 3) - 1;
            TrEmit ev = { .kind = (i / 3) % 2 ? TR_K_RETURN_FROM : TR_K_CALL,
                          .flags = TR_F_RETURNS, .pid = (uint64_t)(sched + 2),
                          .mod = mod, .fun = fun, .arity = 1, .terms = args,
                          .nterms = (i / 3) % 2 ? 1 : 2 };
            tr_emit(tp, sched, &ev);
            generated++;
        }
        tr_flush(tp);
    }
    /* Leave calls open: the Chrome sink must still close its JSON. */
    for (int sched = -1; sched < 2; sched++) {
        TrEmit ev = { .kind = TR_K_CALL, .flags = TR_F_RETURNS, .pid = (uint64_t)(sched + 2),
                      .mod = mod, .fun = fun, .arity = 1, .terms = args, .nterms = 1 };
        tr_emit(tp, sched, &ev);
        generated++;
    }
    TrStats *st = tr_pipeline_stats(tp);
    uint64_t emitted = 0, lost = 0;
    for (int i = 0; i < st->nrings; i++) {
        emitted += st->ring[i].emitted;
        lost += st->ring[i].lost;
    }
    free(st);
    tr_pipeline_free(tp);
    if (f)
        fclose(f);
    printf("generated=%llu emitted=%llu lost=%llu\n", (unsigned long long)generated,
           (unsigned long long)emitted, (unsigned long long)lost);
    return emitted + lost == generated ? 0 : 1;
}

/* Lossless into raw CTF: every full ring waits for the collector (which
 * writes and hands ranges back meanwhile), so every event arrives. */
static int lossless_raw(const char *path, long n)
{
    char err[256];
    TrOptions o = { .nscheds = 2, .ring_bytes = 4096, .policy = TR_POLICY_LOSSLESS };
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    TrSink *s = tp ? tr_sink_ctf_raw_new(path, tr_ctf_clock_offset(), err, sizeof err) : NULL;
    if (!s) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    tr_pipeline_add_sink(tp, s);
    tr_pipeline_start(tp);
    Term arg = make_small(7);
    Atom fib = vm_atom_cstr("fib");
    long waits = 0;
    for (long i = 0; i < n; i++) {
        int sched = (int)(i % 3) - 1;
        TrEmit ev = { .kind = TR_K_CALL, .pid = (uint64_t)i, .mod = fib, .fun = fib,
                      .arity = 1, .terms = &arg, .nterms = 1 };
        while (tr_emit(tp, sched, &ev) == TR_FULL) {
            waits++;
            tr_wait_space(tp, sched, 0);
        }
    }
    TrStats *st = tr_pipeline_stats(tp);
    uint64_t emitted = 0;
    for (int i = 0; i < st->nrings; i++)
        emitted += st->ring[i].emitted;
    free(st);
    tr_pipeline_free(tp);
    printf("emitted=%llu waits=%ld\n", (unsigned long long)emitted, waits);
    return emitted == (uint64_t)n ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "text") || !strcmp(argv[1], "jsonl") ||
                      !strcmp(argv[1], "chrome")))
        return fixed(argv[1], argc > 2 ? argv[2] : NULL);
    if (argc == 3 && !strcmp(argv[1], "ctf"))
        return fixed("ctf", argv[2]);
    if (argc == 3 && !strcmp(argv[1], "ctf-losses"))
        return losses(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "lossless-ctf-raw"))
        return lossless_raw(argv[2], atol(argv[3]));
    if (argc == 4 && !strncmp(argv[1], "pipeline-", 9))
        return pipeline(argv[1] + 9, argv[2], atol(argv[3]));
    fprintf(stderr, "usage: trace_gen text|jsonl|chrome [FILE] | ctf DIR | ctf-losses DIR | "
                    "pipeline-ctf DIR N | pipeline-ctf-raw DIR N | lossless-ctf-raw DIR N | "
                    "pipeline-chrome FILE N\n");
    return 2;
}
