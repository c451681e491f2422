/*
 * bench/bench_profile.c - what the sampling profiler costs the program it
 * profiles.
 *
 * The interpreter benchmark's fib(N) (bench/interp.tasm), run as a VM
 * process on one scheduler, --reps times per timed run, without a profile
 * and under an on-CPU profile at 99, 999 and 4,999 Hz.  Each round runs
 * the four modes back to back, in a rotated order, so a noisy stretch of
 * the machine hits them alike; a mode's overhead is the median over the
 * rounds of its time over the round's unprofiled time (overhead_*_pct),
 * and the best (least) time of the mode over the best unprofiled time
 * (overhead_*_min_pct: on a shared machine a run can only be slowed by
 * others, so the least time is the one nothing disturbed; the figure
 * that bench/run reports).  Time is the OS
 * process's CPU time (CLOCK_PROCESS_CPUTIME_ID): the scheduler's work, the
 * signal deliveries charged to it and the profiler's own thread, which
 * drains and aggregates the samples, all count; the host thread sleeping
 * in tvm_join does not.
 *
 * Printed (key=value, bench/run reads them):
 *   base_ms, hz99_ms, hz999_ms, hz4999_ms   medians of one run's CPU time
 *   overhead_99hz_pct, overhead_999hz_pct, overhead_4999hz_pct   paired medians
 *   overhead_99hz_min_pct, overhead_999hz_min_pct, overhead_4999hz_min_pct
 *                                           best over best
 *   samples_99hz, samples_999hz, samples_4999hz   signals taken per run
 *   weight_4999hz         samples they stand for (with timer overruns)
 *   sample_us             what one sample costs the scheduler it interrupts:
 *                         handler_us + signal_us
 *   handler_us            the handler's own time per sample (it times itself:
 *                         the walk, the VM frames' copy, the ring)
 *   signal_us             the kernel's part: a signal raised to the thread
 *                         itself, taken by an empty handler and returned
 *                         from, timed over 100,000 of them
 *   sample_all_us         (4,999 Hz time - unprofiled time) / signals taken,
 *                         median of the rounds: every cost, the profiler's
 *                         thread too, but within the noise of the CPU clock
 *   lost                  samples dropped (full rings) in all the runs
 *
 * usage: bench_profile [--tasm FILE] [--runs R] [--fib N] [--reps K]
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_PROG "bench_profile"
#include "bench/bench_util.h"
#include "include/tracevm.h"

#define MAX_RUNS 200

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static tvm_vm *vm;
static tvm_env *env;
static long fib_n = 30, reps = 4;

/* One timed run: fib(N) `reps` times in a process, profiled at hz (0: not). */
static double run(unsigned hz, tvm_profile_stats *st)
{
    tvm_profile *p = NULL;
    tvm_error err;
    if (hz) {
        tvm_profile_options o = { .size = sizeof(tvm_profile_options), .kind = TVM_PROFILE_CPU, .hz = hz };
        if (tvm_profile_start(vm, &o, &p, &err) != TVM_OK)
            die("tvm_profile_start", err.message);
    }
    double t0 = cpu_ns();
    for (long i = 0; i < reps; i++) {
        tvm_term arg, res;
        tvm_pid pid;
        if (tvm_make_int(env, fib_n, &arg) != TVM_OK ||
            tvm_spawn(env, "interp", "fib", 1, &arg, &pid) != TVM_OK ||
            tvm_join(env, pid, &res) != TVM_OK)
            die("fib", "spawn or join failed");
    }
    if (p)
        tvm_profile_stop(p);
    double t = cpu_ns() - t0;
    if (p) {
        tvm_profile_get_stats(p, st);
        tvm_profile_free(p);
    }
    return t;
}

static void empty_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
}

/* The kernel's round trip for one signal to the calling thread, in us. */
static double signal_us(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = empty_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigfillset(&sa.sa_mask);
    sigaction(SIGRTMIN + 6, &sa, NULL);
    enum { N = 100000 };
    double best = 1e30;
    for (int k = 0; k < 3; k++) {
        double t0 = thread_cpu_ns();
        for (int i = 0; i < N; i++)
            raise(SIGRTMIN + 6);
        double t = (thread_cpu_ns() - t0) / N / 1e3;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *tasm = "bench/interp.tasm";
    int runs = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tasm") && i + 1 < argc)
            tasm = argv[++i];
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = (int)arg_long("--runs", argv[++i], 1, MAX_RUNS);
        else if (!strcmp(argv[i], "--fib") && i + 1 < argc)
            fib_n = arg_long("--fib", argv[++i], 1, 40);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = arg_long("--reps", argv[++i], 1, 1000);
        else
            die("usage", "bench_profile [--tasm FILE] [--runs R] [--fib N] [--reps K]");
    }
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .control = false };
    vm = tvm_new(&cfg);
    env = tvm_env_new(vm);
    tvm_error err;
    if (tvm_load_file(vm, tasm, &err) != TVM_OK)
        die("load", err.message);

    static const unsigned rates[4] = { 0, 99, 999, 4999 };
    static double t[4][MAX_RUNS], over[4][MAX_RUNS], samples[4][MAX_RUNS], weight[MAX_RUNS],
        cost[MAX_RUNS], handler[MAX_RUNS];
    uint64_t lost = 0;
    tvm_profile_stats st;
    run(0, &st);   /* warm-up: the scheduler, the fiber, the caches */
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < 4; k++) {
            int m = (k + r) % 4;
            memset(&st, 0, sizeof st);
            t[m][r] = run(rates[m], &st);
            samples[m][r] = (double)st.samples;
            lost += st.lost;
            if (m == 3) {
                weight[r] = (double)st.weight;
                handler[r] = st.samples ? (double)st.sample_ns / (double)st.samples / 1e3 : 0;
            }
        }
        for (int m = 1; m < 4; m++)
            over[m][r] = 100.0 * (t[m][r] / t[0][r] - 1.0);
        cost[r] = samples[3][r] > 0 ? (t[3][r] - t[0][r]) / samples[3][r] / 1e3 : 0;
    }
    printf("fib=%ld\nreps=%ld\n", fib_n, reps);
    printf("base_ms=%.3f\nhz99_ms=%.3f\nhz999_ms=%.3f\nhz4999_ms=%.3f\n", median(t[0], runs) / 1e6,
           median(t[1], runs) / 1e6, median(t[2], runs) / 1e6, median(t[3], runs) / 1e6);
    printf("overhead_99hz_pct=%.3f\noverhead_999hz_pct=%.3f\noverhead_4999hz_pct=%.3f\n",
           median(over[1], runs), median(over[2], runs), median(over[3], runs));
    double best[4];
    for (int m = 0; m < 4; m++) {
        best[m] = t[m][0];
        for (int r = 1; r < runs; r++)
            best[m] = t[m][r] < best[m] ? t[m][r] : best[m];
    }
    printf("base_min_ms=%.3f\n", best[0] / 1e6);
    printf("overhead_99hz_min_pct=%.3f\noverhead_999hz_min_pct=%.3f\n"
           "overhead_4999hz_min_pct=%.3f\n",
           100.0 * (best[1] / best[0] - 1), 100.0 * (best[2] / best[0] - 1),
           100.0 * (best[3] / best[0] - 1));
    printf("samples_99hz=%.1f\nsamples_999hz=%.1f\nsamples_4999hz=%.1f\nweight_4999hz=%.1f\n",
           median(samples[1], runs), median(samples[2], runs), median(samples[3], runs),
           median(weight, runs));
    double sig = signal_us(), h = median(handler, runs);
    printf("sample_us=%.3f\nhandler_us=%.3f\nsignal_us=%.3f\nsample_all_us=%.3f\nlost=%llu\n",
           h + sig, h, sig, median(cost, runs), (unsigned long long)lost);
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}
