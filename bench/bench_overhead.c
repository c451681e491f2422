/*
 * bench/bench_overhead.c - what breakpoints cost the code they sit on
 * (the same scenarios on OTP 25 here: fib(27) 2.1 ns per call untraced,
 * +2.9 ns with a disabled local breakpoint, +6.3 ns counting, +421 ns per
 * call event to a discarding tracer process).
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
 *   armed2, armed8  the same pattern in 2 and 8 trace sessions at once
 *              (the default one and 1 or 7 more): one breakpoint record
 *              with an entry per session, the process traced by none
 *   call_count trace_pattern(interp:fib/1, true, call_count)
 *   call_event the process has the call flag and fib a local pattern: a
 *              call event per call into the trace pipeline (running
 *              throughout, callback format with a counting callback on the
 *              collector thread, 64 MiB rings written through by three
 *              warm-up fibs, so no timed event takes a first-touch page
 *              fault).  Each timed fib starts once the collector has taken
 *              every earlier event, and a ring holds a whole fib's events,
 *              so every timed event is written (the collector, slower
 *              than fib, drains concurrently): events_lost must be 0
 *   call_event2 the same in two sessions (the default one and another,
 *              whose sink counts the same way): each call writes an event
 *              into each session's ring
 *   return_pair the same with [{'_',[],[{return_trace}]}]: a call event, a
 *              trace frame and a return_from event per call
 *   call_time  trace_pattern(interp:fib/1, true, call_time): every call
 *              pushes a time frame and counts; fib calling fib, the clock
 *              is read only at the outermost call and return (the count
 *              is checked after each run)
 *   calls_untraced, call_time_switch: the same number of calls made by
 *              interp:calls/1 to interp:empty/0 (instead of fib), untraced
 *              and with call_time on both: every call and every return
 *              changes the current function, so each reads the clock and
 *              charges (call_time_switch_ns is over calls_untraced)
 * Each fib is timed with the scheduler thread's CPU-time clock
 * (CLOCK_THREAD_CPUTIME_ID: a preempted thread does not count, which on a
 * shared machine is most of the noise) and with CLOCK_MONOTONIC.
 * Printed (key=value): the median ns per fib call of each scenario over
 * every timed fib (--runs rounds x --reps fibs each; *_wall_* with the
 * wall clock), and the differences armed_ns, armed2_ns, armed8_ns,
 * call_count_ns, elsewhere_ns, call_event_ns, call_event2_ns,
 * return_pair_ns, call_time_ns, call_time_switch_ns (ns per
 * call over untraced: per round, the median of the scenario's
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
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_PROG "bench_overhead"
#include "bench/bench_util.h"
#include "include/tracevm.h"
#include "vm/atomics.h"

#define MAX_SAMPLES 100000
#define WARM_EVENTS 3

enum { S_UNTRACED, S_ELSEWHERE, S_ARMED, S_ARMED2, S_ARMED8, S_COUNT, S_EVENT, S_EVENT2,
       S_PAIR, S_TIME, S_CALLS, S_TIME_SW, NSCEN };
static const char *const scen_name[NSCEN] = { "untraced",    "elsewhere",  "armed",
                                              "armed2",      "armed8",     "call_count",
                                              "call_event",  "call_event2", "return_pair",
                                              "call_time",   "calls_untraced",
                                              "call_time_switch" };

/* Trace sessions beside the default one: extra[0] counts events like the
 * default's sink (call_event2); the others only arm fib (armed2: the
 * default and extra[0]; armed8: the default and all seven). */
#define NEXTRA 7
static tvm_session extra[NEXTRA];

/* What the native works on (one process at a time). */
static struct {
    int64_t fib_n, expect;
    const char *fun;   /* "fib" (fib(fib_n)), or "calls" (calls(n_calls)) */
    int64_t n_calls;
    double *out;       /* K durations, ns of the thread's CPU time */
    double *wall;      /* K durations, ns of CLOCK_MONOTONIC */
    uint64_t fib_events;   /* events one fib writes in this scenario */
    uint64_t events;       /* events written by the fibs run so far */
} job;

/* What reached the sinks: added to by the callback on the collector
 * threads (relaxed: counts only), read by the native that waits for the
 * drain. */
static VmAtomic events_seen, events_lost;

/* Before each timed fib: waits until the collector has taken every event
 * written so far, so that the fib starts with empty rings (which hold a
 * whole fib's events: nothing timed is dropped; a dropped event costs
 * something else than a written one).  The collector runs on its own
 * thread meanwhile, as it does while the fib runs. */
static void wait_drained(void)
{
    while (vm_atomic_load_relaxed(&events_seen) + vm_atomic_load_relaxed(&events_lost) <
           job.events)
        sched_yield();
}

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
    return tvm_call(env, "interp", job.fun, 1, &arg, res);
}

/* ovh_nat:fibs(K): K timed calls of fib(fib_n) into job.out. */
static tvm_status nat_fibs(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc, (void)data;
    int64_t k, v;
    tvm_term arg, res;
    bool fib = job.fun[0] == 'f';
    if (tvm_get_int(env, argv[0], &k) != TVM_OK ||
        tvm_make_int(env, fib ? job.fib_n : job.n_calls, &arg) != TVM_OK)
        return tvm_raise_badarg(env);
    for (int64_t i = 0; i < k; i++) {
        wait_drained();
        double w0 = now_ns(), t0 = cpu_ns();
        tvm_status st = ovh_fib_call(env, arg, &res);
        double t1 = cpu_ns(), w1 = now_ns();
        job.events += job.fib_events;
        if (st != TVM_OK)
            return st;
        if (tvm_get_int(env, res, &v) != TVM_OK || v != (fib ? job.expect : 0))
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

static void stp(tvm_vm *vm, tvm_session s, const char *pat, tvm_tp_action how, unsigned flags)
{
    tvm_error err;
    if (tvm_session_trace_pattern(vm, s, pat, NULL, how, flags, 0, NULL, &err) != TVM_OK)
        die("tvm_session_trace_pattern", err.message);
}

static void set_scenario(tvm_vm *vm, int s)
{
    tvm_error err;
    /* call_time measures call-traced processes, as BEAM's. */
    bool traced = s == S_EVENT || s == S_EVENT2 || s == S_PAIR || s == S_TIME || s == S_TIME_SW;
    tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, traced);
    if (tvm_session_trace_flags_all(vm, extra[0], TVM_TRACE_NEW, TVM_TRACE_CALL, s == S_EVENT2,
                                    &err) != TVM_OK)
        die("tvm_session_trace_flags_all", err.message);
    tp(vm, "interp:_/_", TVM_TP_FALSE, TVM_TP_LOCAL);
    tp(vm, "interp:_/_", TVM_TP_FALSE, TVM_TP_GLOBAL);
    tp(vm, "interp:_/_", TVM_TP_FALSE, TVM_TP_CALL_COUNT);
    tp(vm, "interp:_/_", TVM_TP_FALSE, TVM_TP_CALL_TIME);
    for (int i = 0; i < NEXTRA; i++)
        stp(vm, extra[i], "interp:_/_", TVM_TP_FALSE, TVM_TP_LOCAL);
    int sessions = s == S_ARMED2 || s == S_EVENT2 ? 2 : s == S_ARMED8 ? 8 : 0;
    for (int i = 0; i + 1 < sessions; i++)
        stp(vm, extra[i], "interp:fib/1", TVM_TP_TRUE, TVM_TP_LOCAL);
    switch (s) {
    case S_ELSEWHERE:
        tp(vm, "interp:empty/0", TVM_TP_TRUE, TVM_TP_LOCAL);
        tp(vm, "interp:rev/1", TVM_TP_TRUE, TVM_TP_GLOBAL);
        tp(vm, "interp:build/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT);
        break;
    case S_ARMED:
    case S_ARMED2:
    case S_ARMED8:
        tp(vm, "interp:fib/1", TVM_TP_TRUE, TVM_TP_LOCAL);
        break;
    case S_COUNT:
        tp(vm, "interp:fib/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT);
        break;
    case S_EVENT:
    case S_EVENT2:
        tp(vm, "interp:fib/1", TVM_TP_TRUE, TVM_TP_LOCAL);
        break;
    case S_PAIR:
        if (tvm_trace_pattern_ms(vm, "interp:fib/1", "[{'_',[],[{return_trace}]}]", TVM_TP_TRUE,
                                 TVM_TP_LOCAL, 0, NULL, &err) != TVM_OK)
            die("tvm_trace_pattern_ms", err.message);
        break;
    case S_TIME:
        tp(vm, "interp:fib/1", TVM_TP_TRUE, TVM_TP_CALL_TIME);
        break;
    case S_TIME_SW:
        tp(vm, "interp:calls/1", TVM_TP_TRUE, TVM_TP_CALL_TIME);
        tp(vm, "interp:empty/0", TVM_TP_TRUE, TVM_TP_CALL_TIME);
        break;
    }
    job.fun = s == S_CALLS || s == S_TIME_SW ? "calls" : "fib";
    job.fib_events = s == S_EVENT ? (uint64_t)job.n_calls
                     : s == S_PAIR || s == S_EVENT2 ? 2 * (uint64_t)job.n_calls : 0;
}

/* The calls call_time counted on mfa (all processes). */
static int64_t time_count(tvm_vm *vm, const char *mfa)
{
    tvm_call_time_entry e[4];
    size_t n;
    if (tvm_call_time(vm, mfa, e, 4, &n) != TVM_OK || n > 4)
        die("no call time on", mfa);
    int64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += (int64_t)e[i].count;
    return c;
}

/* The pipeline's sink: counts what reaches it (the callback runs on the
 * collector thread; read after tvm_trace_stop). */

static void count_event(const tvm_trace_event *ev, void *data)
{
    (void)data;
    /* Two collectors count here (the default session's and extra[0]'s):
     * an atomic add, not a load and a store. */
    if (ev->lost)
        vm_atomic_fetch_add_relaxed(&events_lost, ev->lost);
    else
        vm_atomic_fetch_add_relaxed(&events_seen, 1);
}

/* Runs ovh:run(K) as a process; the durations land in out[0..K-1]. */
static void run_fibs(tvm_vm *vm, tvm_env *env, int s, int k, double *out, double *wall)
{
    set_scenario(vm, s);
    job.out = out;
    job.wall = wall;
    tvm_term a, r;
    tvm_pid pid;
    tvm_status st = tvm_make_int(env, k, &a);
    if (st == TVM_OK)
        st = tvm_spawn(env, "ovh", "run", 1, &a, &pid);
    if (st == TVM_OK)
        st = tvm_join(env, pid, &r);
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
                    "[--fib N] [--callgrind untraced|elsewhere|armed|armed2|armed8|call_count|"
                    "call_event|call_event2|return_pair|call_time|calls_untraced|"
                    "call_time_switch]\n");
            return 2;
        }
    }
    job.fib_n = fib_n;
    job.expect = fib_value(fib_n);
    /* fib(N) makes 2*fib(N+1) - 1 calls. */
    const int64_t calls = 2 * fib_value(fib_n + 1) - 1;
    job.n_calls = calls;   /* the calls scenarios make as many calls */

    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (!vm)
        die("tvm_new failed", NULL);
    if (tvm_register_native(vm, "ovh_nat", "fibs", 1, nat_fibs, NULL, &err) != TVM_OK ||
        tvm_load_file(vm, path, &err) != TVM_OK ||
        tvm_load_string(vm, "ovh.tasm", drv_text, sizeof drv_text - 1, &err) != TVM_OK)
        die("loading", err.message);
    tvm_env *env = tvm_env_new(vm);
    tvm_trace_options topts = { .size = sizeof(tvm_trace_options),
                                .format = TVM_TRACE_CALLBACK, .callback = count_event,
                                .ring_bytes = (size_t)64 << 20 };
    if (tvm_trace_start(vm, &topts, &err) != TVM_OK)
        die("tvm_trace_start", err.message);
    for (int i = 0; i < NEXTRA; i++) {
        tvm_trace_options o = topts;
        if (i > 0)
            o = (tvm_trace_options){ .size = sizeof(tvm_trace_options), .format = TVM_TRACE_TEXT, .path = "/dev/null",
                                     .ring_bytes = 4096 };
        if (tvm_session_create(vm, "bench", &o, &extra[i], &err) != TVM_OK)
            die("tvm_session_create", err.message);
    }

    if (only >= 0) {
        double t[100], w[100];
        run_fibs(vm, env, only, reps, t, w);
        if (only == S_COUNT) {
            int64_t n = 0;
            tvm_call_count(vm, "interp:fib/1", &n);
            printf("fib_call_count=%lld\n", (long long)n);
        }
        if (only == S_TIME)
            printf("fib_call_time_count=%lld\n", (long long)time_count(vm, "interp:fib/1"));
        printf("scenario=%s\nfib_calls=%lld\nreps=%d\n", scen_name[only], (long long)calls, reps);
        tvm_trace_stop(vm);
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
    /* Three warm-up fibs where events are written, so that the rings are
     * written through once and no timed event takes a first-touch page
     * fault. */
    for (int s = 0; s < NSCEN; s++)
        run_fibs(vm, env, s, s == S_EVENT || s == S_EVENT2 || s == S_PAIR ? WARM_EVENTS : 1, warm,
                 warmw);
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
            const char *timed = s == S_TIME ? "interp:fib/1" : "interp:empty/0";
            if ((s == S_TIME || s == S_TIME_SW) && time_count(vm, timed) != calls * reps) {
                fprintf(stderr, "bench_overhead: call_time counted %lld on %s, expected %lld\n",
                        (long long)time_count(vm, timed), timed, (long long)(calls * reps));
                return 1;
            }
        }
        n += reps;
    }
    tvm_trace_stop(vm);
    tvm_env_free(env);
    tvm_destroy(vm);
    /* Every traced call's events are accounted for: one (call_event) or
     * two (call_event2, return_pair) per call, in the warm-up and in every round,
     * written or counted as lost (with the drain before each fib none
     * should be lost; events_lost is printed next to the figures, since
     * a dropped event costs the producer something else than a written
     * one). */
    uint64_t want_events = (uint64_t)calls * (uint64_t)(WARM_EVENTS + runs * reps) * 5;
    uint64_t seen = vm_atomic_load_relaxed(&events_seen);
    uint64_t lost = vm_atomic_load_relaxed(&events_lost);
    if (seen + lost != want_events) {
        fprintf(stderr, "bench_overhead: %llu events reached the sink and %llu were lost, "
                "expected %llu in all\n", (unsigned long long)seen,
                (unsigned long long)lost, (unsigned long long)want_events);
        return 1;
    }
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
    static const char *const delta_key[NSCEN] = { NULL,           "elsewhere_ns",
                                                  "armed_ns",     "armed2_ns",
                                                  "armed8_ns",    "call_count_ns",
                                                  "call_event_ns", "call_event2_ns",
                                                  "return_pair_ns", "call_time_ns", NULL,
                                                  "call_time_switch_ns" };
    for (int s = 1; s < NSCEN; s++) {
        static double d[MAX_SAMPLES];
        int base = s == S_TIME_SW ? S_CALLS : S_UNTRACED;
        if (s == S_CALLS)
            continue;   /* a baseline itself */
        for (int r = 0; r < runs; r++)
            d[r] = (round_med[s][r] - round_med[base][r]) / (double)calls;
        printf("%s=%.3f\n", delta_key[s], median(d, runs));
    }
    printf("elsewhere_ratio=%.4f\n", med[S_ELSEWHERE] / med[S_UNTRACED]);
    /* Two sessions' call events against one's, each over untraced. */
    printf("call_event2_ratio=%.3f\n", (med[S_EVENT2] - med[S_UNTRACED]) /
                                          (med[S_EVENT] - med[S_UNTRACED]));
    printf("events_lost=%llu\n", (unsigned long long)lost);
    return 0;
}
