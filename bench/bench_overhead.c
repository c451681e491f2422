/*
 * bench/bench_overhead.c - what breakpoints cost the code they sit on (the
 * tracevm side of reference/beam.md §3.1 (a), (b), (e1)).
 *
 * fib(27) (interp:fib/1 of bench/interp.tasm: 635,621 calls) runs in a VM
 * process on a one-scheduler VM: the process ovh:run(K) calls the native
 * ovh_nat:fibs/1, which times K calls of fib(27) with CLOCK_MONOTONIC
 * around tvm_call() on the process's env (a nested activation: the fib
 * runs on the scheduler thread, as process code, and the timing leaves
 * out the process's spawn).  Scenarios, set with tvm_trace_pattern from
 * this thread before each spawn, in rotating order from round to round:
 *   untraced   no breakpoint anywhere
 *   elsewhere  breakpoints armed on other functions of the same module:
 *              local on interp:empty/0, global on interp:rev/1, call_count
 *              on interp:build/1 (fib's own code is untouched, so this
 *              must cost nothing)
 *   armed      trace_pattern(interp:fib/1, true, local); the process is
 *              not traced, so every call enters BREAKPOINT and goes on
 *   call_count trace_pattern(interp:fib/1, true, call_count)
 *   call_event trace_pattern(interp:fib/1, true, local) and the process
 *              has the call flag: every call writes a call event with its
 *              argument into the scheduler's ring.  One pipeline runs for
 *              the whole benchmark (drop policy, text into /dev/null,
 *              64 MiB rings, written through once by the warm-up so that
 *              no timed event takes a first-touch page fault); the other
 *              scenarios write no events.  call_event_lost says how many
 *              events the collector could not take in time (a dropped
 *              event costs less than a written one, so a large count
 *              would make call_event_ns an underestimate)
 * Each fib is timed with the scheduler thread's CPU-time clock
 * (CLOCK_THREAD_CPUTIME_ID: a preempted thread does not count, which on a
 * shared machine is most of the noise) and with CLOCK_MONOTONIC.
 * Printed (key=value): the median ns per fib call of each scenario over
 * every timed fib (--runs rounds x --reps fibs each; *_wall_* with the
 * wall clock), and the differences armed_ns, call_count_ns, elsewhere_ns,
 * call_event_ns
 * (ns per call over untraced: per round, the median of the scenario's
 * fibs minus the median of untraced's, then the median over the rounds).
 *
 * --callgrind SCENARIO runs one round of that scenario only (no warm-up,
 * no timing output beyond the count check): under
 *   valgrind --tool=callgrind --toggle-collect=ovh_fib_call ...
 * the collected instructions are exactly those of the fib calls
 * (bench/run compares them across scenarios).
 *
 * usage: bench_overhead [--tasm FILE] [--runs R] [--reps K] [--fib N]
 *                       [--callgrind SCENARIO]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_PROG "bench_overhead"
#include "bench/bench_util.h"
#include "include/tracevm.h"
#include "trace/tr_vm_internal.h"

#define MAX_SAMPLES 100000

enum { S_UNTRACED, S_ELSEWHERE, S_ARMED, S_COUNT, S_EVENT, NSCEN };
static const char *const scen_name[NSCEN] = { "untraced", "elsewhere", "armed", "call_count",
                                              "call_event" };

/* What the native works on (one process at a time). */
static struct {
    int64_t fib_n, expect;
    double *out;       /* K durations, ns of the thread's CPU time */
    double *wall;      /* K durations, ns of CLOCK_MONOTONIC */
} job;

/* The calling thread's CPU time: leaves out the time the scheduler
 * thread was preempted (on a shared machine, most of the noise). */
static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The collected function for callgrind: exactly the fib call.  Not static
 * and not inlined, so --toggle-collect can name it. */
tvm_status ovh_fib_call(tvm_env *env, tvm_term arg, tvm_term *res);
__attribute__((noinline)) tvm_status ovh_fib_call(tvm_env *env, tvm_term arg, tvm_term *res)
{
    return tvm_call(env, "interp", "fib", 1, &arg, res);
}

/* ovh_nat:fibs(K): K timed calls of fib(fib_n) into job.out. */
static tvm_status nat_fibs(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc, (void)data;
    int64_t k, v;
    tvm_term arg, res;
    if (tvm_get_int(env, argv[0], &k) != TVM_OK || tvm_make_int(env, job.fib_n, &arg) != TVM_OK)
        return tvm_raise_badarg(env);
    for (int64_t i = 0; i < k; i++) {
        double w0 = now_ns(), t0 = cpu_ns();
        tvm_status st = ovh_fib_call(env, arg, &res);
        double t1 = cpu_ns(), w1 = now_ns();
        if (st != TVM_OK)
            return st;
        if (tvm_get_int(env, res, &v) != TVM_OK || v != job.expect)
            die("fib returned a wrong value", NULL);
        job.out[i] = t1 - t0;
        job.wall[i] = w1 - w0;
    }
    return tvm_make_int(env, k, result);
}

static const char drv_text[] =
    "module ovh\n"
    "export run/1\n"
    "function run/1 regs 1\n"
    "    callx r0, r0, ovh_nat:fibs/1\n"
    "    ret r0\n"
    "end\n";

static void tp(tvm_vm *vm, const char *pat, tvm_tp_action how, unsigned flags)
{
    tvm_error err;
    if (tvm_trace_pattern(vm, pat, how, flags, NULL, &err) != TVM_OK)
        die("tvm_trace_pattern", err.message);
}

static void set_scenario(tvm_vm *vm, int s)
{
    tp(vm, "interp:_/_", TVM_TP_FALSE, TVM_TP_LOCAL);
    tp(vm, "interp:_/_", TVM_TP_FALSE, TVM_TP_GLOBAL);
    tp(vm, "interp:_/_", TVM_TP_FALSE, TVM_TP_CALL_COUNT);
    switch (s) {
    case S_ELSEWHERE:
        tp(vm, "interp:empty/0", TVM_TP_TRUE, TVM_TP_LOCAL);
        tp(vm, "interp:rev/1", TVM_TP_TRUE, TVM_TP_GLOBAL);
        tp(vm, "interp:build/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT);
        break;
    case S_ARMED:
    case S_EVENT:
        tp(vm, "interp:fib/1", TVM_TP_TRUE, TVM_TP_LOCAL);
        break;
    case S_COUNT:
        tp(vm, "interp:fib/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT);
        break;
    }
}

/* call_event's pipeline, into /dev/null. */
static void events_on(tvm_vm *vm)
{
    tvm_error err;
    tvm_trace_options o = { .format = TVM_TRACE_TEXT, .path = "/dev/null",
                            .ring_bytes = (size_t)1 << 26 };
    if (tvm_trace_start(vm, &o, &err) != TVM_OK)
        die("tvm_trace_start", err.message);
}

/* Events dropped so far (a peek at the pipeline's counters, internal). */
static uint64_t events_lost(tvm_vm *vm)
{
    TrVm *t = vm_atomic_load_ptr_acquire(&vm->trace_out);
    TrStats *st = t ? tr_pipeline_stats(t->tp) : NULL;
    uint64_t lost = 0;
    for (int i = 0; st && i < st->nrings; i++)
        lost += st->ring[i].lost;
    free(st);
    return lost;
}

/* Runs ovh:run(K) as a process; the durations land in out[0..K-1]. */
static void run_fibs(tvm_vm *vm, tvm_env *env, int s, int k, double *out, double *wall)
{
    set_scenario(vm, s);
    job.out = out;
    job.wall = wall;
    tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, s == S_EVENT);
    tvm_term a, r;
    tvm_pid pid;
    tvm_status st = tvm_make_int(env, k, &a);
    if (st == TVM_OK)
        st = tvm_spawn(env, "ovh", "run", 1, &a, &pid);
    if (st == TVM_OK)
        st = tvm_join(env, pid, &r);
    tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, false);
    if (st != TVM_OK) {
        char buf[4096];
        if (st == TVM_EXCEPTION)
            tvm_format_exception(env, buf, sizeof buf);
        else
            snprintf(buf, sizeof buf, "%s", tvm_status_name(st));
        die("ovh:run", buf);
    }
}

static int64_t fib_value(int64_t n)
{
    int64_t a = 0, b = 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = a + b;
        a = b;
        b = c;
    }
    return a;
}

int main(int argc, char **argv)
{
    const char *path = "bench/interp.tasm";
    int runs = 7, reps = 5, only = -1;
    long fib_n = 27;
    for (int i = 1; i < argc; i++) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--tasm") && val)
            path = val, i++;
        else if (!strcmp(argv[i], "--runs"))
            runs = (int)arg_long(argv[i], val, 1, 1000), i++;
        else if (!strcmp(argv[i], "--reps"))
            reps = (int)arg_long(argv[i], val, 1, 100), i++;
        else if (!strcmp(argv[i], "--fib"))
            fib_n = arg_long(argv[i], val, 1, 35), i++;
        else if (!strcmp(argv[i], "--callgrind") && val) {
            for (int s = 0; s < NSCEN; s++)
                if (!strcmp(val, scen_name[s]))
                    only = s;
            if (only < 0)
                die("unknown scenario", val);
            i++;
        } else {
            fprintf(stderr, "usage: bench_overhead [--tasm FILE] [--runs R] [--reps K] "
                    "[--fib N] [--callgrind untraced|elsewhere|armed|call_count|call_event]\n");
            return 2;
        }
    }
    job.fib_n = fib_n;
    job.expect = fib_value(fib_n);
    /* fib(N) makes 2*fib(N+1) - 1 calls. */
    const int64_t calls = 2 * fib_value(fib_n + 1) - 1;

    tvm_config cfg = { .schedulers = 1, .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (!vm)
        die("tvm_new failed", NULL);
    if (tvm_register_native(vm, "ovh_nat", "fibs", 1, nat_fibs, NULL, &err) != TVM_OK ||
        tvm_load_file(vm, path, &err) != TVM_OK ||
        tvm_load_string(vm, "ovh.tasm", drv_text, sizeof drv_text - 1, &err) != TVM_OK)
        die("loading", err.message);
    tvm_env *env = tvm_env_new(vm);

    if (only >= 0) {
        double t[100], w[100];
        run_fibs(vm, env, only, reps, t, w);
        if (only == S_COUNT) {
            int64_t n = 0;
            tvm_call_count(vm, "interp:fib/1", &n);
            printf("fib_call_count=%lld\n", (long long)n);
        }
        printf("scenario=%s\nfib_calls=%lld\nreps=%d\n", scen_name[only], (long long)calls, reps);
        tvm_env_free(env);
        tvm_destroy(vm);
        return 0;
    }

    static double samples[NSCEN][MAX_SAMPLES], wall[NSCEN][MAX_SAMPLES];
    static double round_med[NSCEN][MAX_SAMPLES];  /* per round, CPU ns */
    if ((long)runs * reps > MAX_SAMPLES)
        die("--runs x --reps is too large", NULL);
    int n = 0;
    double warm[100], warmw[100];
    events_on(vm);
    for (int s = 0; s < NSCEN; s++)
        run_fibs(vm, env, s, s == S_EVENT ? 3 : 1, warm, warmw);
    uint64_t lost0 = events_lost(vm);
    int64_t counted = 0;
    for (int r = 0; r < runs; r++) {
        for (int j = 0; j < NSCEN; j++) {
            int s = (j + r) % NSCEN;
            run_fibs(vm, env, s, reps, &samples[s][n], &wall[s][n]);
            double tmp[100];
            memcpy(tmp, &samples[s][n], (size_t)reps * sizeof *tmp);
            round_med[s][r] = median(tmp, reps);
            if (s == S_COUNT) {
                int64_t c;
                if (tvm_call_count(vm, "interp:fib/1", &c) != TVM_OK)
                    die("no call count on interp:fib/1", NULL);
                counted = c;
            }
        }
        n += reps;
    }
    uint64_t lost = events_lost(vm) - lost0;
    tvm_trace_stop(vm);
    tvm_env_free(env);
    tvm_destroy(vm);
    if (counted != calls * reps) {
        fprintf(stderr, "bench_overhead: call_count says %lld, expected %lld\n",
                (long long)counted, (long long)(calls * reps));
        return 1;
    }

    double med[NSCEN];
    printf("fib_n=%ld\nfib_calls=%lld\nfib_call_count=%lld\nruns=%d\nreps=%d\n", fib_n,
           (long long)calls, (long long)(counted / reps), runs, reps);
    for (int s = 0; s < NSCEN; s++) {
        med[s] = median(samples[s], n) / (double)calls;
        printf("%s_ns_per_call=%.3f\n", scen_name[s], med[s]);
        printf("%s_wall_ns_per_call=%.3f\n", scen_name[s], median(wall[s], n) / (double)calls);
    }
    /* Each scenario against untraced in the same round (seconds apart, so
     * they share the machine's state), median over the rounds. */
    static const char *const delta_key[NSCEN] = { NULL, "elsewhere_ns", "armed_ns",
                                                  "call_count_ns", "call_event_ns" };
    for (int s = 1; s < NSCEN; s++) {
        static double d[MAX_SAMPLES];
        for (int r = 0; r < runs; r++)
            d[r] = (round_med[s][r] - round_med[S_UNTRACED][r]) / (double)calls;
        printf("%s=%.3f\n", delta_key[s], median(d, runs));
    }
    printf("elsewhere_ratio=%.4f\n", med[S_ELSEWHERE] / med[S_UNTRACED]);
    printf("call_event_lost=%llu\ncall_events=%lld\n", (unsigned long long)lost,
           (long long)(calls * reps * runs));
    return 0;
}
