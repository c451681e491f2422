/*
 * bench/bench_ms.c - the cost of running a compiled match spec
 * (trace/tr_ms_compile.c, trace/tr_ms_run.c) on one thread, in ns per run:
 *   match       [{[{'$1', ok}, '_'], [{'>', '$1', 3}], []}] on ({5, ok}, x)
 *   head_fail   the same spec on ({5, error}, x): the head fails
 *   guard_fail  the same spec on ({2, ok}, x): the guard is false
 *   message     [{[{'$1', ok}, '_'], [{'>', '$1', 3}],
 *                 [{message, {{'$1', '$_'}}}, {return_trace}]}]
 *               (builds a tuple and the argument list in the scratch)
 * Prints key=value lines: medians over --runs timed loops of --iters runs.
 */
#define BENCH_PROG "bench_ms"

#include <string.h>

#include "bench/bench_util.h"
#include "include/tracevm.h"
#include "trace/tr_ms.h"
#include "vm/atom.h"

static TrMsScratch scratch;

/* Keeps the compiler from dropping the loop. */
static volatile unsigned sink;

static TrMs *compile(tvm_env *env, const char *text)
{
    tvm_term h;
    tvm_error err;
    char msg[256];
    if (tvm_parse_term(env, text, &h, &err) != TVM_OK)
        die("parse", err.message);
    TrMs *ms = tr_ms_compile(vm_root_get(env->p, h), 2, msg, sizeof msg);
    if (!ms)
        die("compile", msg);
    return ms;
}

static double ns_per_run(const TrMs *ms, const Term *args, long iters, int runs)
{
    double v[64];
    for (int r = 0; r < runs; r++) {
        TrMsResult res;
        unsigned n = 0;
        double t0 = now_ns();
        for (long i = 0; i < iters; i++)
            n += tr_ms_run(ms, args, 2, NULL, &scratch, &res);
        v[r] = (now_ns() - t0) / (double)iters;
        sink += n;
    }
    return median(v, runs);
}

int main(int argc, char **argv)
{
    int runs = 7;
    long iters = 2000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = (int)arg_long("--runs", argv[++i], 1, 64);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = arg_long("--iters", argv[++i], 1, 1000000000);
        else
            die("unknown option", argv[i]);
    }
    tvm_vm *vm = tvm_new(NULL);
    tvm_env *env = tvm_env_new(vm);
    TrMs *plain = compile(env, "[{[{'$1', ok}, '_'], [{'>', '$1', 3}], []}]");
    TrMs *msg = compile(env, "[{[{'$1', ok}, '_'], [{'>', '$1', 3}],"
                             " [{message, {{'$1', '$_'}}}, {return_trace}]}]");
    Term t[3] = { MAKE_HEADER(IMM_HDR_TUPLE, 2), make_small(5), make_atom(ATOM_OK) };
    Term args[2] = { make_boxed(t), make_atom(vm_atom_cstr("x")) };
    printf("match_ns=%.2f\n", ns_per_run(plain, args, iters, runs));
    printf("message_ns=%.2f\n", ns_per_run(msg, args, iters, runs));
    t[2] = make_atom(ATOM_ERROR);
    printf("head_fail_ns=%.2f\n", ns_per_run(plain, args, iters, runs));
    t[2] = make_atom(ATOM_OK);
    t[1] = make_small(2);
    printf("guard_fail_ns=%.2f\n", ns_per_run(plain, args, iters, runs));
    tr_ms_free(plain);
    tr_ms_free(msg);
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}
