/*
 * bench/bench_interp.c - the interpreter benchmark (tracevm side).
 *
 * Loads bench/interp.tasm through the embedding API and times, with
 * clock_gettime(CLOCK_MONOTONIC) around tvm_call():
 *   fib(N)             ns per fib call (fib(N) makes 2*fib(N+1)-1 calls)
 *   calls(M) - loop(M) ns per call to an empty function (loop-only baseline
 *                      subtracted)
 *   build(L), rev/1    ns per list element: build [1..L] with cons, reverse
 *                      it in bytecode; lists:reverse/1 (the native) too
 * Every workload runs once to warm up, then --runs times; the medians are
 * printed as key=value lines (bench/run reads them):
 *   fib30_ns, fib_calls, empty_call_ns, call_loop_ns, loop_ns,
 *   list_build_ns, list_rev_ns, list_ns (build + reverse), list_rev_native_ns
 * and fib30_cpu_ns, fib(N) timed with the process CPU-time clock instead.
 *
 * usage: bench_interp [--tasm FILE] [--runs R] [--fib N] [--calls M] [--list L]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_PROG "bench_interp"
#include "bench/bench_util.h"
#include "include/tracevm.h"

#define MAX_RUNS 1000

static double clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Process CPU time: on a busy machine it leaves out the time the process
 * waited for a CPU, which CLOCK_MONOTONIC counts (Lua's os.clock() is CPU
 * time too). */
static double cpu_ns(void)
{
    return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

static void die_call(tvm_env *env, tvm_status st, const char *what)
{
    char buf[4096];
    if (st == TVM_EXCEPTION)
        tvm_format_exception(env, buf, sizeof buf);
    else
        snprintf(buf, sizeof buf, "%s\n", tvm_status_name(st));
    fprintf(stderr, "bench_interp: %s failed: %s", what, buf);
    exit(1);
}

/* Calls interp:fun(arg) and returns the time it took in ns. */
static double timed_call(tvm_env *env, const char *fun, tvm_term arg, tvm_term *res)
{
    double t0 = now_ns();
    tvm_status st = tvm_call(env, "interp", fun, 1, &arg, res);
    double t1 = now_ns();
    if (st != TVM_OK)
        die_call(env, st, fun);
    return t1 - t0;
}

static tvm_term int_term(tvm_env *env, int64_t v)
{
    tvm_term t;
    if (tvm_make_int(env, v, &t) != TVM_OK) {
        fprintf(stderr, "bench_interp: tvm_make_int(%lld) failed\n", (long long)v);
        exit(1);
    }
    return t;
}

static int64_t get_int(tvm_env *env, tvm_term t, const char *what)
{
    int64_t v;
    if (tvm_get_int(env, t, &v) != TVM_OK) {
        fprintf(stderr, "bench_interp: %s did not return an integer\n", what);
        exit(1);
    }
    return v;
}

/* The head of a list result (checks that the list workloads did their job). */
static int64_t list_head(tvm_env *env, tvm_term list, const char *what)
{
    tvm_term h, t;
    if (tvm_list_cell(env, list, &h, &t) != TVM_OK) {
        fprintf(stderr, "bench_interp: %s did not return a non-empty list\n", what);
        exit(1);
    }
    return get_int(env, h, what);
}

int main(int argc, char **argv)
{
    const char *path = "bench/interp.tasm";
    int runs = 7;
    long fib_n = 30, ncalls = 10 * 1000 * 1000, nlist = 1000 * 1000;
    for (int i = 1; i < argc; i += 2) { /* an option and its value */
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--tasm") == 0 && val)
            path = val;
        else if (strcmp(argv[i], "--runs") == 0)
            runs = (int)arg_long(argv[i], val, 1, MAX_RUNS);
        else if (strcmp(argv[i], "--fib") == 0)
            fib_n = arg_long(argv[i], val, 1, 40);
        else if (strcmp(argv[i], "--calls") == 0)
            ncalls = arg_long(argv[i], val, 1, 1000L * 1000 * 1000);
        else if (strcmp(argv[i], "--list") == 0)
            nlist = arg_long(argv[i], val, 1, 100L * 1000 * 1000);
        else {
            fprintf(stderr, "usage: bench_interp [--tasm FILE] [--runs R] [--fib N] "
                            "[--calls M] [--list L]\n");
            return 2;
        }
    }

    tvm_vm *vm = tvm_new(NULL);
    tvm_error err;
    if (!vm) {
        fprintf(stderr, "bench_interp: tvm_new failed\n");
        return 1;
    }
    if (tvm_load_file(vm, path, &err) != TVM_OK) {
        fprintf(stderr, "bench_interp: %s", err.message);
        return 1;
    }

    /* fib(N) makes 2*fib(N+1) - 1 calls; fib(N) itself checks the result. */
    int64_t f0 = 0, f1 = 1;
    for (long i = 0; i < fib_n; i++) {
        int64_t t = f0 + f1;
        f0 = f1;
        f1 = t;
    }
    const int64_t fib_expect = f0, fib_calls = 2 * f1 - 1;

    double fib_t[MAX_RUNS], fib_cpu[MAX_RUNS], call_t[MAX_RUNS], loop_t[MAX_RUNS];
    double build_t[MAX_RUNS], rev_t[MAX_RUNS], both_t[MAX_RUNS], native_t[MAX_RUNS];

    /* fib and the call loop run in one env: they allocate nothing. */
    tvm_env *env = tvm_env_new(vm);
    tvm_term fib_arg = int_term(env, fib_n), calls_arg = int_term(env, ncalls), res;
    for (int r = -1; r < runs; r++) { /* r = -1: warm-up */
        double c0 = cpu_ns();
        double t = timed_call(env, "fib", fib_arg, &res);
        double tc = cpu_ns() - c0;
        if (get_int(env, res, "fib") != fib_expect) {
            fprintf(stderr, "bench_interp: fib(%ld) returned a wrong value\n", fib_n);
            return 1;
        }
        double c = timed_call(env, "calls", calls_arg, &res);
        double l = timed_call(env, "loop", calls_arg, &res);
        if (r >= 0) {
            fib_t[r] = t;
            fib_cpu[r] = tc;
            call_t[r] = c;
            loop_t[r] = l;
        }
    }
    tvm_env_free(env);

    /* The lists: a fresh env (a fresh heap) per run, so that the lists of
     * earlier runs, kept alive by their handles, are not copied again. */
    for (int r = -1; r < runs; r++) {
        tvm_term list, rev;
        env = tvm_env_new(vm);
        tvm_term n = int_term(env, nlist);
        double tb = timed_call(env, "build", n, &list);
        double tr = timed_call(env, "rev", list, &rev);
        if (list_head(env, list, "build") != 1 || list_head(env, rev, "rev") != nlist) {
            fprintf(stderr, "bench_interp: build/rev returned a wrong list\n");
            return 1;
        }
        double t0 = now_ns();
        tvm_status st = tvm_call(env, "lists", "reverse", 1, &list, &rev);
        double tn = now_ns() - t0;
        if (st != TVM_OK)
            die_call(env, st, "lists:reverse");
        if (list_head(env, rev, "lists:reverse") != nlist) {
            fprintf(stderr, "bench_interp: lists:reverse returned a wrong list\n");
            return 1;
        }
        tvm_env_free(env);
        if (r >= 0) {
            build_t[r] = tb;
            rev_t[r] = tr;
            both_t[r] = tb + tr;
            native_t[r] = tn;
        }
    }

    double fib_ns = median(fib_t, runs) / (double)fib_calls;
    double call_loop_ns = median(call_t, runs) / (double)ncalls;
    double loop_ns = median(loop_t, runs) / (double)ncalls;
    printf("runs=%d\n", runs);
    printf("fib_n=%ld\n", fib_n);
    printf("fib_calls=%lld\n", (long long)fib_calls);
    printf("fib%ld_ns=%.2f\n", fib_n, fib_ns);
    printf("fib%ld_cpu_ns=%.2f\n", fib_n, median(fib_cpu, runs) / (double)fib_calls);
    printf("calls=%ld\n", ncalls);
    printf("call_loop_ns=%.2f\n", call_loop_ns);
    printf("loop_ns=%.2f\n", loop_ns);
    printf("empty_call_ns=%.2f\n", call_loop_ns - loop_ns);
    printf("list_n=%ld\n", nlist);
    printf("list_build_ns=%.2f\n", median(build_t, runs) / (double)nlist);
    printf("list_rev_ns=%.2f\n", median(rev_t, runs) / (double)nlist);
    printf("list_ns=%.2f\n", median(both_t, runs) / (double)nlist);
    printf("list_rev_native_ns=%.2f\n", median(native_t, runs) / (double)nlist);

    tvm_destroy(vm);
    return 0;
}
