/*
 * bench/bench_pausefree.c - pause-freedom of trace_pattern: worker
 * processes record the gaps between their iterations while another
 * toggles call trace on 5,000 functions (BEAM's trace_pattern, measured
 * the same way on OTP 25 here, leaves the workers' gaps at their
 * baseline too: its sequence waits for thread progress instead of
 * stopping the schedulers).
 *
 * A generated module, genmod, holds 5,000 functions fN(X) -> X + N and
 * work/1, which makes 20 nested local calls f250(f500(...f5000(X)))
 * (BEAM's genmod).  On a VM with S schedulers (--schedulers, default 2),
 * S worker processes (pfdrv:worker/1) loop calling genmod:work/1 (a remote
 * call) and then the native pf_nat:tick/1, which reads CLOCK_MONOTONIC on
 * the worker's own scheduler thread and records the gap since the
 * worker's previous tick in a 10 ns histogram: the gap is the time the
 * process needed for one iteration, so a worker that is stopped (by a
 * parked scheduler, a descheduled thread, anything) shows a long gap.
 *
 * The controller is this program's main thread (a foreign thread): it
 * makes --toggles calls (default 40: 20 rounds of tvm_trace_pattern(
 * "genmod:_/_", TVM_TP_TRUE, TVM_TP_LOCAL) then TVM_TP_FALSE; each call
 * counts as one toggle), sleeping --sleep-ms (default 25) after each, and
 * times every call.  Modes, each run once per round, in rotating order:
 *   none  the same schedule of sleeps without any call (the baseline)
 *   nb    the calls on a default VM (thread-progress waits)
 *   stw   the calls on a VM made with stop_the_world_tracing = true
 * --runs rounds (default 7).  Per mode and round: the gap p99 and max over
 * every worker's gaps, the throughput (iterations of all workers per
 * second), and the OS run-queue delay of the workers' scheduler threads (per thread, percent of the run)
 * (field 2 of /proc/self/task/TID/schedstat: time runnable but not
 * running, i.e. the machine's noise) and the throughput per second the
 * workers' threads were on a CPU (field 1: robust to that noise).  For
 * nb, the throughput is split into the phases in which the pattern is on
 * (every genmod call then enters its breakpoint: the armed cost, not a
 * pause) and off, each phase starting with its call.
 * Printed as key=value lines: the medians over the rounds per mode; the
 * ratios nb/none, each the median over the rounds of nb against the none
 * run of the same round (and, *_of_medians, the ratio of the medians);
 * the longest stretch in which every worker was stalled (a gap of 100 us
 * or more) at once, and for nb and stw the share of the calls' time in
 * which every worker was stalled (stop-the-world stalls them all; host
 * noise rarely does),
 * and the latency median and p99 of all nb (and stw) calls pooled.
 * Before the rounds, the same calls on the idle nb VM (no worker), with
 * the same sleeps between them: idle_latency_median_ms, the engine's own
 * cost.
 *
 * --hog-ms MS: one of the S processes is a hog instead of a worker: it
 * loops calling the native pf_nat:spin/1, which keeps its scheduler
 * thread busy in C for MS ms (a long native, or a dirty scheduler's
 * work).  A stop-the-world call must wait for that scheduler to reach
 * its next switch, with every other scheduler already parked: the
 * workers stall for up to MS; thread progress only waits longer, while
 * the workers go on.  The hog's own iterations are not measured.
 *
 * --caller process: the calls are made by a VM process, pfdrv:toggler/2,
 * through erlang:trace_pattern/3 (BEAM's benchmark calls it from an
 * Erlang process), with the same schedule (its waits are receives with a
 * timeout; in the none mode it keeps the schedule without calling).  A
 * process's thread-progress waits suspend it (vm/progress.c): the
 * progress thread runs the grace period and the process then waits its
 * turn on a scheduler, where the main thread runs synchronize_rcu()
 * itself.  The caller's CPU time, run-queue delay and page faults are
 * then not measured (0 in the tail report): a process may resume on
 * another scheduler thread, whose CPU time is mostly a worker's.
 *
 * usage: bench_pausefree [--schedulers S] [--runs R] [--toggles N]
 *                        [--sleep-ms MS] [--fns N] [--modes none,nb,stw]
 *                        [--hog-ms MS] [--caller thread|process]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PROG "bench_pausefree"
#include "bench/bench_genmod.h"
#include "bench/bench_util.h"
#include "breakpoints/bp.h" /* bp_waits(), for the report */
#include "include/tracevm.h"
#include "vm/atomics.h"
#include "vm/process.h"  /* struct tvm_env: the env of a native is its process */
#include "vm/sched.h"    /* the scheduler a worker runs on */

#define MAX_WORKERS 64
#define MAX_RUNS 100
#define MAX_TOGGLES 1000
#define BUCKET_NS 10
#define NBUCKETS 200000  /* 10 ns buckets up to 2 ms; longer gaps in the last */

enum { M_NONE, M_NB, M_STW, NMODES };
static const char *const mode_name[NMODES] = { "none", "nb", "stw" };

/* ---- per-worker state, written by its tick only ---- */

/* A stretch of time [a, b), ns. */
typedef struct Span {
    uint64_t a, b;
} Span;

#define STALL_NS 100000    /* a gap this long is a stall (kept with its times) */
#define MAX_STALLS 100000  /* per worker and run */

typedef struct Worker {
    uint64_t prev;        /* last tick, ns */
    uint64_t ticks;       /* every tick (warm-up included) */
    uint64_t iters;       /* ticks while recording */
    uint64_t iters_on;    /* ... of them while the pattern was on */
    uint64_t max_gap;     /* ns, while recording */
    uint64_t ge_1ms;      /* gaps of 1 ms or more, while recording */
    int sched_id, migrations;
    long tid;             /* the scheduler thread of its first tick */
    uint32_t *hist;       /* NBUCKETS */
    Span *stalls;         /* gaps of STALL_NS or more, while recording */
    size_t nstalls;
    char pad[64];
} Worker;

static Worker workers[MAX_WORKERS];
static VmAtomic phase;   /* 0 warm-up, 1 recording, 2 stop */
static VmAtomic tp_on;   /* the pattern is on: from an on call's start to the off call's */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* pf_nat:tick(Idx): records worker Idx's gap; returns 1 to stop, else 0. */
static tvm_status nat_tick(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc, (void)data;
    int64_t idx;
    if (!bench_tick_index(env, argv, MAX_WORKERS, &idx))
        return tvm_raise_badarg(env);
    Worker *w = &workers[idx];
    uint64_t t = mono_ns();
    long ph = (long)vm_atomic_load_acquire(&phase);
    int sid = env->p->sched ? env->p->sched->id : -1;
    if (w->ticks == 0) {
        w->tid = (long)syscall(SYS_gettid);
        w->sched_id = sid;
    } else if (sid != w->sched_id) {
        w->migrations++;
        w->sched_id = sid;
    }
    if (ph == 1 && w->ticks > 0) {
        uint64_t gap = t - w->prev;
        uint64_t b = gap / BUCKET_NS;
        w->hist[b < NBUCKETS ? b : NBUCKETS - 1]++;
        if (gap > w->max_gap)
            w->max_gap = gap;
        if (gap >= 1000000)
            w->ge_1ms++;
        if (gap >= STALL_NS && w->nstalls < MAX_STALLS)
            w->stalls[w->nstalls++] = (Span){ w->prev, t };
        w->iters++;
        w->iters_on += vm_atomic_load_relaxed(&tp_on);
    }
    w->prev = t;
    __atomic_store_n(&w->ticks, w->ticks + 1, __ATOMIC_RELAXED);
    return tvm_make_int(env, ph == 2, result);
}

/* pf_nat:spin(Ms): burns Ms ms of this thread in C; returns 1 once the
 * run is over (the hog then stops), else 0. */
static tvm_status nat_spin(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc, (void)data;
    int64_t ms;
    if (tvm_get_int(env, argv[0], &ms) != TVM_OK || ms < 0)
        return tvm_raise_badarg(env);
    uint64_t end = mono_ns() + (uint64_t)ms * 1000000u;
    while (mono_ns() < end)
        ;
    /* A whole slice's work: the hog yields after each spin, so a worker
     * queued behind it is handed to another scheduler (as a well-behaved
     * native says; a dirty NIF's scheduler would not run workers at all). */
    tvm_consume_timeslice(env, 100);
    return tvm_make_int(env, vm_atomic_load_acquire(&phase) == 2, result);
}

/* ---- the modules ---- */

static const char drv_text[] =
    "module pfdrv\n"
    "export worker/1, hog/1, toggler/2\n"
    "; hog(Ms): spin(Ms) until told to stop\n"
    "function hog/1 regs 2\n"
    "top:\n"
    "    move r1, r0\n"
    "    callx r1, r1, pf_nat:spin/1\n"
    "    jnei r1, 0, done\n"
    "    jump top\n"
    "done:\n"
    "    ret r1\n"
    "end\n"
    "; worker(Idx): Acc := genmod:work(Acc) band 65535, then tick, until told to stop\n"
    "function worker/1 regs 4\n"
    "    loadi r1, 0\n"
    "top:\n"
    "    move r2, r1\n"
    "    callx r2, r2, genmod:work/1\n"
    "    loadi r3, 65535\n"
    "    band r1, r2, r3\n"
    "    move r2, r0\n"
    "    callx r2, r2, pf_nat:tick/1\n"
    "    jnei r2, 0, done\n"
    "    jump top\n"
    "done:\n"
    "    ret r1\n"
    "end\n"
    "; toggler(N, Ms): N calls of erlang:trace_pattern/3 on genmod:_/_ (local;\n"
    "; on for an even K, off for an odd one), each timed by tp_begin and tp_end,\n"
    "; each followed by a wait of Ms ms (a receive that takes nothing)\n"
    "function toggler/2 regs 6\n"
    "    loadi r4, 0\n"
    "top:\n"
    "    jeq r4, r0, done\n"
    "    move r2, r4\n"
    "    callx r2, r2, pf_nat:tp_begin/1\n"
    "    loadk r5, skip\n"
    "    jeq r2, r5, timed\n"
    "    move r5, r1\n"
    "    loadk r1, {genmod, '_', '_'}\n"
    "    loadk r3, [local]\n"
    "    callx r1, r1, erlang:trace_pattern/3\n"
    "    move r1, r5\n"
    "timed:\n"
    "    move r2, r4\n"
    "    callx r2, r2, pf_nat:tp_end/1\n"
    "    wait r1, next\n"
    "next:\n"
    "    addi r4, r4, 1\n"
    "    jump top\n"
    "done:\n"
    "    ret r4\n"
    "end\n";

static tvm_status nat_tp_begin(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                               void *data);
static tvm_status nat_tp_end(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                             void *data);

static tvm_vm *make_vm(int schedulers, bool stw, const char *genmod, size_t genlen)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = schedulers, .quiet_crashes = true,
                       .stop_the_world_tracing = stw };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (!vm)
        die("tvm_new failed", NULL);
    if (tvm_register_native(vm, "pf_nat", "tick", 1, nat_tick, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "pf_nat", "spin", 1, nat_spin, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "pf_nat", "tp_begin", 1, nat_tp_begin, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "pf_nat", "tp_end", 1, nat_tp_end, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "genmod.tasm", genmod, genlen, &err) != TVM_OK ||
        tvm_load_string(vm, "pfdrv.tasm", drv_text, sizeof drv_text - 1, &err) != TVM_OK)
        die("loading", err.message);
    return vm;
}

/* The calling thread's minor page faults so far. */
static double minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (double)ru.ru_minflt;
}

/* ---- one mode, one round ---- */

typedef struct Result {
    double p99_ns, max_ns, tput, runq_ms, secs;
    double cpu_tput;          /* iterations per second on a CPU (schedstat) */
    double tput_on, tput_off; /* throughput while the pattern was on / off */
    uint64_t ge_1ms;
    int migrations;
    int nlat;
    double lat_ms[MAX_TOGGLES];
    /* What each call's latency was made of: the controller thread on a
     * CPU (thread CPU time), waiting for one (its schedstat run-queue
     * delay), inside the engine's thread-progress waits, and its minor
     * page faults. */
    double cpu_ms[MAX_TOGGLES], runq_ms_call[MAX_TOGGLES], wait_ms[MAX_TOGGLES];
    double faults[MAX_TOGGLES];
    double sched_runq_ms[MAX_TOGGLES]; /* the most any scheduler thread waited for a CPU */
    double waits_per_call;
    double common_max_ms;     /* longest time every worker was stalled at once */
    double common_in_calls_pct; /* of the calls' time, every worker stalled */
    double common_pct;        /* of the whole run, every worker stalled */
} Result;

/*
 * Intersects two sorted lists of disjoint spans into out (not a or b: one
 * span of a can meet several of b); returns the length of the result.
 */
static size_t intersect(const Span *a, size_t na, const Span *b, size_t nb, Span *out)
{
    size_t i = 0, j = 0, n = 0;
    while (i < na && j < nb) {
        uint64_t lo = a[i].a > b[j].a ? a[i].a : b[j].a;
        uint64_t hi = a[i].b < b[j].b ? a[i].b : b[j].b;
        if (lo < hi)
            out[n++] = (Span){ lo, hi };
        if (a[i].b < b[j].b)
            i++;
        else
            j++;
    }
    return n;
}

static void sleep_ms(double ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static Span windows[MAX_TOGGLES];  /* the calls of the running mode */

/* ---- the calls, timed ---- */

/*
 * One call's bookkeeping, shared by the two callers: this program's main
 * thread (a foreign thread, the default) and, with --caller process, the
 * toggler process pfdrv:toggler/2 on the VM's own schedulers (as BEAM's
 * benchmark calls erlang:trace_pattern/3 from an Erlang process), through
 * the natives pf_nat:tp_begin/1 and pf_nat:tp_end/1.  One call runs at a
 * time either way.  `calls` and the Result it points to are written only
 * by the caller; the main thread fills `calls` before the calls start and
 * reads the results after they end: for the toggler, tvm_spawn orders
 * the first against its natives and tvm_join their writes against the
 * second (a process may move between scheduler threads meanwhile; its
 * own switches order its natives' writes).
 * The caller's CPU time, run-queue delay and page faults are a thread's:
 * measured for the main thread only (a process may resume on another
 * scheduler thread, whose CPU time is mostly a worker's).
 */
typedef struct Calls {
    tvm_vm *vm;
    Result *res;
    int mode, nworkers;
    bool thread;                /* the caller is the main thread */
    long self;                  /* its thread id */
    uint64_t a, w0;
    double c0, run0, q0, f0, sq0[MAX_WORKERS];
    double on_ns, on_since;
} Calls;

static Calls calls;

static void call_begin(int k)
{
    Calls *c = &calls;
    c->a = mono_ns();
    /* The phase turns at the start of each call (its work and waits
     * count to the phase it begins). */
    vm_atomic_store_relaxed(&tp_on, k % 2 == 0);
    if (k % 2 == 0)
        c->on_since = (double)c->a;
    else
        c->on_ns += (double)c->a - c->on_since;
    if (c->thread) {
        c->c0 = thread_cpu_ns();
        c->f0 = minor_faults();
        c->run0 = c->q0 = 0;
        schedstat(c->self, &c->run0, &c->q0);
    }
    c->w0 = bp_wait_ns(c->vm);
    for (int w = 0; w < c->nworkers; w++) {
        double run = 0;
        c->sq0[w] = 0;
        schedstat(workers[w].tid, &run, &c->sq0[w]);
    }
}

static void call_end(void)
{
    Calls *c = &calls;
    Result *res = c->res;
    uint64_t b = mono_ns();
    const int i = res->nlat++;
    windows[i] = (Span){ c->a, b };
    res->lat_ms[i] = (double)(b - c->a) / 1e6;
    if (c->thread) {
        double run1 = 0, q1 = 0;
        schedstat(c->self, &run1, &q1);
        res->cpu_ms[i] = (thread_cpu_ns() - c->c0) / 1e6;
        res->runq_ms_call[i] = (q1 - c->q0) / 1e6;
        res->faults[i] = minor_faults() - c->f0;
    }
    res->wait_ms[i] = (double)(bp_wait_ns(c->vm) - c->w0) / 1e6;
    res->sched_runq_ms[i] = 0;
    for (int w = 0; w < c->nworkers; w++) {
        double run = 0, q = 0;
        schedstat(workers[w].tid, &run, &q);
        if ((q - c->sq0[w]) / 1e6 > res->sched_runq_ms[i])
            res->sched_runq_ms[i] = (q - c->sq0[w]) / 1e6;
    }
}

/* pf_nat:tp_begin(K): the toggler's call K begins; returns what it
 * passes to trace_pattern (true for an even K, false for an odd one), or
 * skip in the mode without calls (the toggler then only keeps the
 * schedule). */
static tvm_status nat_tp_begin(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                               void *data)
{
    (void)argc, (void)data;
    int64_t k;
    if (tvm_get_int(env, argv[0], &k) != TVM_OK || k < 0 || k >= MAX_TOGGLES)
        return tvm_raise_badarg(env);
    if (calls.mode == M_NONE)
        return tvm_make_atom(env, "skip", result);
    call_begin((int)k);
    return tvm_make_atom(env, k % 2 == 0 ? "true" : "false", result);
}

/* pf_nat:tp_end(K): the toggler's call K ended (or was skipped). */
static tvm_status nat_tp_end(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                             void *data)
{
    (void)env, (void)argc, (void)data;
    if (calls.mode != M_NONE)
        call_end();
    *result = argv[0];
    return TVM_OK;
}

static void run_mode(tvm_vm *vm, int mode, int nworkers, int toggles, double sleep,
                     int hog_ms, bool by_process, Result *res)
{
    tvm_env *env = tvm_env_new(vm);
    tvm_pid pids[MAX_WORKERS], hog = 0;
    memset(res, 0, sizeof *res);
    for (int i = 0; i < nworkers; i++) {
        uint32_t *h = workers[i].hist;
        Span *st = workers[i].stalls;
        memset(&workers[i], 0, sizeof workers[i]);
        memset(h, 0, NBUCKETS * sizeof *h);
        workers[i].hist = h;
        workers[i].stalls = st;
    }
    vm_atomic_store_release(&phase, 0);
    for (int i = 0; i < nworkers; i++) {
        tvm_term a;
        tvm_status st = tvm_make_int(env, i, &a);
        if (st == TVM_OK)
            st = tvm_spawn(env, "pfdrv", "worker", 1, &a, &pids[i]);
        if (st != TVM_OK)
            die("spawning a worker", tvm_status_name(st));
    }
    if (hog_ms > 0) {
        tvm_term a;
        tvm_status st = tvm_make_int(env, hog_ms, &a);
        if (st == TVM_OK)
            st = tvm_spawn(env, "pfdrv", "hog", 1, &a, &hog);
        if (st != TVM_OK)
            die("spawning the hog", tvm_status_name(st));
    }
    /* Warm up until every worker has run a while. */
    for (int i = 0; i < nworkers; i++)
        while (__atomic_load_n(&workers[i].ticks, __ATOMIC_RELAXED) < 10000)
            sleep_ms(1);
    sleep_ms(20);
    double rq0 = 0, rq1 = 0, cpu0 = 0, cpu1 = 0;
    for (int i = 0; i < nworkers; i++)
        schedstat(workers[i].tid, &cpu0, &rq0);
    uint64_t waits0 = bp_waits(vm);
    calls = (Calls){ .vm = vm, .res = res, .mode = mode, .nworkers = nworkers,
                     .thread = !by_process, .self = (long)syscall(SYS_gettid) };
    vm_atomic_store_release(&phase, 1);
    double t0 = now_ns();
    if (by_process) {
        /* pfdrv:toggler(Toggles, SleepMs), the same schedule from VM code. */
        tvm_term args[2], r;
        tvm_pid toggler;
        if (tvm_make_int(env, toggles, &args[0]) != TVM_OK ||
            tvm_make_int(env, (int64_t)sleep, &args[1]) != TVM_OK ||
            tvm_spawn(env, "pfdrv", "toggler", 2, args, &toggler) != TVM_OK ||
            tvm_join(env, toggler, &r) != TVM_OK)
            die("the toggler process failed", NULL);
    } else {
        tvm_error err;
        for (int k = 0; k < toggles; k++) {
            if (mode != M_NONE) {
                call_begin(k);
                if (tvm_trace_pattern(vm, "genmod:_/_", k % 2 == 0 ? TVM_TP_TRUE : TVM_TP_FALSE,
                                      TVM_TP_LOCAL, NULL, &err) != TVM_OK)
                    die("tvm_trace_pattern", err.message);
                call_end();
            }
            sleep_ms(sleep);
        }
    }
    vm_atomic_store_release(&phase, 2);
    double t1 = now_ns();
    double on_ns = calls.on_ns;
    if (vm_atomic_load_relaxed(&tp_on))
        on_ns += t1 - calls.on_since;
    vm_atomic_store_relaxed(&tp_on, 0);
    for (int i = 0; i < nworkers; i++)
        schedstat(workers[i].tid, &cpu1, &rq1);
    res->waits_per_call = res->nlat ? (double)(bp_waits(vm) - waits0) / res->nlat : 0;
    for (int i = 0; i < nworkers; i++) {
        tvm_term r;
        if (tvm_join(env, pids[i], &r) != TVM_OK)
            die("a worker failed", NULL);
    }
    if (hog) {
        tvm_term r;
        if (tvm_join(env, hog, &r) != TVM_OK)
            die("the hog failed", NULL);
    }
    tvm_env_free(env);

    /* Merge the histograms. */
    static uint32_t *all;
    if (!all)
        all = calloc(NBUCKETS, sizeof *all);
    memset(all, 0, NBUCKETS * sizeof *all);
    uint64_t n = 0, n_on = 0;
    for (int i = 0; i < nworkers; i++) {
        Worker *w = &workers[i];
        n_on += w->iters_on;
        for (int b = 0; b < NBUCKETS; b++)
            all[b] += w->hist[b];
        n += w->iters;
        if ((double)w->max_gap > res->max_ns)
            res->max_ns = (double)w->max_gap;
        res->ge_1ms += w->ge_1ms;
        res->migrations += w->migrations;
    }
    uint64_t target = (uint64_t)((double)n * 0.99), acc = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        acc += all[b];
        if (acc >= target) {
            res->p99_ns = (double)(b + 1) * BUCKET_NS;  /* the bucket's upper edge */
            break;
        }
    }
    /* The times every worker was stalled at once, and how much of the
     * calls' time they cover (a stop-the-world call stalls all). */
    static Span common[MAX_STALLS], next[MAX_STALLS];
    size_t nc = workers[0].nstalls;
    memcpy(common, workers[0].stalls, nc * sizeof *common);
    for (int i = 1; i < nworkers; i++) {
        nc = intersect(common, nc, workers[i].stalls, workers[i].nstalls, next);
        memcpy(common, next, nc * sizeof *common);
    }
    double all_stalled = 0;
    for (size_t i = 0; i < nc; i++) {
        all_stalled += (double)(common[i].b - common[i].a);
        if ((double)(common[i].b - common[i].a) / 1e6 > res->common_max_ms)
            res->common_max_ms = (double)(common[i].b - common[i].a) / 1e6;
    }
    res->common_pct = 100 * all_stalled / (t1 - t0);
    if (res->nlat) {
        static Span in_calls[MAX_STALLS];
        size_t ni = intersect(common, nc, windows, (size_t)res->nlat, in_calls);
        double stalled = 0, total = 0;
        for (size_t i = 0; i < ni; i++)
            stalled += (double)(in_calls[i].b - in_calls[i].a);
        for (int i = 0; i < res->nlat; i++)
            total += (double)(windows[i].b - windows[i].a);
        res->common_in_calls_pct = total > 0 ? 100 * stalled / total : 0;
    }
    res->secs = (t1 - t0) / 1e9;
    res->tput = (double)n / res->secs;
    if (on_ns > 0 && t1 - t0 > on_ns) {
        res->tput_on = (double)n_on / (on_ns / 1e9);
        res->tput_off = (double)(n - n_on) / ((t1 - t0 - on_ns) / 1e9);
    }
    res->cpu_tput = cpu1 > cpu0 ? (double)n / ((cpu1 - cpu0) / 1e9) : 0;
    res->runq_ms = (rq1 - rq0) / 1e6;
}

/*
 * What the slow calls were made of: over the calls at or above the p95
 * of latency (the tail, which decides the p99) and over those at or below
 * the median, the mean latency and its parts: the controller thread on a
 * CPU, waiting for a CPU (run queue), in thread-progress waits (the
 * engine's own count; the thread sleeps there, so it overlaps neither of
 * the first two), and its minor page faults.
 */
static void tail_report(const char *nm, const Result *res, int runs, double med, double p95)
{
    double sum[2][6] = { { 0 } };
    int cnt[2] = { 0, 0 };
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < res[r].nlat; k++) {
            const double l = res[r].lat_ms[k];
            const int g = l >= p95 ? 1 : l <= med ? 0 : -1;
            if (g < 0)
                continue;
            cnt[g]++;
            sum[g][0] += l;
            sum[g][1] += res[r].cpu_ms[k];
            sum[g][2] += res[r].runq_ms_call[k];
            sum[g][3] += res[r].wait_ms[k];
            sum[g][4] += res[r].faults[k];
            sum[g][5] += res[r].sched_runq_ms[k];
        }
    static const char *const part[6] = { "latency_ms", "cpu_ms", "runq_ms", "wait_ms", "faults",
                                         "sched_runq_ms" };
    static const char *const grp[2] = { "fast", "tail" };
    for (int g = 0; g < 2; g++)
        for (int j = 0; j < 6; j++)
            printf("%s_%s_%s=%.3f\n", nm, grp[g], part[j], cnt[g] ? sum[g][j] / cnt[g] : 0);
}

/* ---- main ---- */

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    int i = (int)(p * n + 0.999999) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static Result results[NMODES][MAX_RUNS];

int main(int argc, char **argv)
{
    int scheds = 2, runs = 7, toggles = 40, nfns = 5000, hog_ms = 0;
    double sleep = 25;
    bool by_process = false;
    bool want[NMODES] = { true, true, true };
    for (int i = 1; i < argc; i++) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--schedulers"))
            scheds = (int)arg_long(argv[i], val, 1, MAX_WORKERS), i++;
        else if (!strcmp(argv[i], "--runs"))
            runs = (int)arg_long(argv[i], val, 1, MAX_RUNS), i++;
        else if (!strcmp(argv[i], "--toggles"))
            toggles = (int)arg_long(argv[i], val, 2, MAX_TOGGLES), i++;
        else if (!strcmp(argv[i], "--sleep-ms"))
            sleep = (double)arg_long(argv[i], val, 0, 10000), i++;
        else if (!strcmp(argv[i], "--fns"))
            nfns = (int)arg_long(argv[i], val, 20, 100000), i++;
        else if (!strcmp(argv[i], "--hog-ms"))
            hog_ms = (int)arg_long(argv[i], val, 1, 10000), i++;
        else if (!strcmp(argv[i], "--caller") && val &&
                 (!strcmp(val, "thread") || !strcmp(val, "process")))
            by_process = !strcmp(argv[++i], "process");
        else if (!strcmp(argv[i], "--modes") && val) {
            for (int m = 0; m < NMODES; m++)
                want[m] = strstr(val, mode_name[m]) != NULL;
            i++;
        } else {
            fprintf(stderr, "usage: bench_pausefree [--schedulers S] [--runs R] [--toggles N] "
                    "[--sleep-ms MS] [--fns N] [--modes none,nb,stw] [--hog-ms MS] "
                    "[--caller thread|process]\n");
            return 2;
        }
    }
    if (hog_ms && scheds < 2) {
        fprintf(stderr, "bench_pausefree: --hog-ms needs at least 2 schedulers\n");
        return 2;
    }
    for (int i = 0; i < scheds; i++) {
        workers[i].hist = calloc(NBUCKETS, sizeof(uint32_t));
        workers[i].stalls = calloc(MAX_STALLS, sizeof(Span));
        if (!workers[i].hist || !workers[i].stalls)
            die("out of memory", NULL);
    }
    size_t genlen;
    char *gen = genmod_text(nfns, &genlen);
    tvm_vm *vm = make_vm(scheds, false, gen, genlen);
    tvm_vm *vm_stw = make_vm(scheds, true, gen, genlen);
    free(gen);

    /* The latency with no worker running (every scheduler idle, offline
     * for thread progress): the engine's own cost. */
    static double idle_lat[MAX_TOGGLES], idle_cpu[MAX_TOGGLES];
    for (int k = 0; k < toggles; k++) {
        tvm_error err;
        double a = now_ns(), c = thread_cpu_ns();
        if (tvm_trace_pattern(vm, "genmod:_/_", k % 2 == 0 ? TVM_TP_TRUE : TVM_TP_FALSE,
                              TVM_TP_LOCAL, NULL, &err) != TVM_OK)
            die("tvm_trace_pattern", err.message);
        idle_lat[k] = (now_ns() - a) / 1e6;
        idle_cpu[k] = (thread_cpu_ns() - c) / 1e6;
        /* Spaced as in the rounds: a call after a long sleep finds
         * the records no longer in cache (on this machine, a call over
         * 50,000 functions spends about twice the CPU time 25 ms after
         * the last one as 1 ms after it, with no worker running). */
        sleep_ms(sleep);
    }

    for (int r = 0; r < runs; r++)
        for (int j = 0; j < NMODES; j++) {
            int m = (j + r) % NMODES;  /* rotate the order from round to round */
            if (want[m])
                run_mode(m == M_STW ? vm_stw : vm, m, hog_ms ? scheds - 1 : scheds, toggles,
                         sleep, hog_ms, by_process, &results[m][r]);
        }
    tvm_destroy(vm);
    tvm_destroy(vm_stw);

    printf("fns=%d\nschedulers=%d\nruns=%d\ntoggles=%d\nsleep_ms=%.0f\nhog_ms=%d\ncaller=%s\n",
           nfns, scheds, runs, toggles, sleep, hog_ms, by_process ? "process" : "thread");
    printf("idle_latency_median_ms=%.3f\n", pct(idle_lat, toggles, 0.5));
    /* The calling thread's CPU time in those calls: the same cost without
     * the time the thread waited for a CPU (robust on a busy machine). */
    printf("idle_cpu_median_ms=%.3f\n", pct(idle_cpu, toggles, 0.5));
    double med[NMODES][3] = { { 0 } };
    static double v[MAX_RUNS * MAX_TOGGLES];
    for (int m = 0; m < NMODES; m++) {
        if (!want[m])
            continue;
        const char *nm = mode_name[m];
        for (int r = 0; r < runs; r++) v[r] = results[m][r].p99_ns / 1e3;
        printf("%s_gap_p99_us=%.3f\n", nm, med[m][0] = median(v, runs));
        for (int r = 0; r < runs; r++) v[r] = results[m][r].max_ns / 1e6;
        printf("%s_gap_max_ms=%.3f\n", nm, med[m][1] = median(v, runs));
        for (int r = 0; r < runs; r++) v[r] = results[m][r].tput;
        printf("%s_throughput=%.0f\n", nm, med[m][2] = median(v, runs));
        for (int r = 0; r < runs; r++) v[r] = results[m][r].cpu_tput;
        printf("%s_cpu_throughput=%.0f\n", nm, median(v, runs));
        for (int r = 0; r < runs; r++) v[r] = (double)results[m][r].ge_1ms;
        printf("%s_gaps_ge_1ms=%.1f\n", nm, median(v, runs));
        for (int r = 0; r < runs; r++) v[r] = results[m][r].runq_ms / results[m][r].secs / 10 / scheds;
        printf("%s_runq_pct=%.2f\n", nm, median(v, runs));
        for (int r = 0; r < runs; r++) v[r] = results[m][r].common_max_ms;
        printf("%s_common_stall_max_ms=%.3f\n", nm, median(v, runs));
        for (int r = 0; r < runs; r++) v[r] = results[m][r].common_pct;
        printf("%s_common_stall_pct=%.2f\n", nm, median(v, runs));
        if (m != M_NONE) {
            for (int r = 0; r < runs; r++) v[r] = results[m][r].common_in_calls_pct;
            printf("%s_common_stall_in_calls_pct=%.2f\n", nm, median(v, runs));
        }
        int mig = 0;
        for (int r = 0; r < runs; r++) mig += results[m][r].migrations;
        printf("%s_migrations=%d\n", nm, mig);
        if (m != M_NONE) {
            int n = 0;
            double w = 0;
            for (int r = 0; r < runs; r++) {
                for (int k = 0; k < results[m][r].nlat; k++)
                    v[n++] = results[m][r].lat_ms[k];
                w += results[m][r].waits_per_call;
            }
            printf("%s_latency_median_ms=%.3f\n", nm, pct(v, n, 0.5));
            printf("%s_latency_p99_ms=%.3f\n", nm, pct(v, n, 0.99));
            printf("%s_latency_max_ms=%.3f\n", nm, v[n - 1]);
            printf("%s_waits_per_call=%.2f\n", nm, w / runs);
            tail_report(nm, results[m], runs, pct(v, n, 0.5), pct(v, n, 0.95));
        }
    }
    if (want[M_NONE] && want[M_NB]) {
        /* nb against none of the same round (the two ran seconds apart, so
         * they share most of the machine's noise), median over the rounds;
         * and the ratio of the medians. */
#define PAIRED(key, expr)                                                   \
        do {                                                                \
            for (int r = 0; r < runs; r++) {                                \
                const Result *x = &results[M_NB][r], *y = &results[M_NONE][r]; \
                v[r] = (expr);                                              \
            }                                                               \
            printf("%s=%.3f\n", key, median(v, runs));                      \
        } while (0)
        PAIRED("gap_p99_ratio", x->p99_ns / y->p99_ns);
        PAIRED("gap_max_ratio", x->max_ns / y->max_ns);
        PAIRED("throughput_ratio", x->tput / y->tput);
        PAIRED("cpu_throughput_ratio", x->cpu_tput / y->cpu_tput);
        PAIRED("throughput_on_ratio", x->tput_on / y->tput);
        PAIRED("throughput_off_ratio", x->tput_off / y->tput);
#undef PAIRED
        printf("gap_p99_ratio_of_medians=%.3f\n", med[M_NB][0] / med[M_NONE][0]);
        printf("gap_max_ratio_of_medians=%.3f\n", med[M_NB][1] / med[M_NONE][1]);
        printf("throughput_ratio_of_medians=%.3f\n", med[M_NB][2] / med[M_NONE][2]);
    }
    return 0;
}
