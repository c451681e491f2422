/*
 * bench/bench_procs.c - the process benchmark (tracevm side).
 *
 * Loads bench/procs.tasm through the embedding API and runs its workloads
 * as processes, on a VM with ONE scheduler thread and (where it says so)
 * on a second VM with TWO:
 *
 *   switch     two processes on one scheduler yield to each other N times
 *              each (procs:switch/1).  switch_ns is the time per process
 *              switch: the time from one process giving the scheduler
 *              away (the reduction-exhaustion path, vm_yield_point) to
 *              the other running, i.e. process -> scheduler -> process,
 *              run-queue push and pop included.  Measured as
 *              (time of the 2N yields) / 2N minus the same loop calling a
 *              native that does not yield (noop_call_ns).
 *   spawn      a process spawns N processes that return at once; from
 *              tvm_spawn of the spawner until tvm_wait_idle() returns,
 *              per process: spawn_us (1 scheduler), spawn_s2_us (2);
 *              spawn_poll_us, the same (1 scheduler) with this thread
 *              polling instead of blocking in tvm_join/tvm_wait_idle.
 *   roundtrip  ping-pong of {ping, Self} / {pong, Self} with a second
 *              process, ns per round trip: roundtrip_ns (1 scheduler),
 *              roundtrip_s2_ns (2).  switch_msg_ns = roundtrip_ns / 2: a
 *              process switch driven by messages (a send, a receive and a
 *              switch).
 *   call       the round trip inside monitor/2 and demonitor(Ref,
 *              [flush]), as a gen_server call (1 scheduler, N of --rt):
 *              call_ns, and monitor_demonitor_ns = call_ns - roundtrip_ns.
 *   ring       N processes in a ring pass a token M times around (N*M
 *              messages): ring_hop_ns per message and ring_mmsgs, millions
 *              of messages per second (1 scheduler; ring_s2_* with 2);
 *              ring_spawn_us, the build of the ring per process spawned.
 *   idle       N processes spawned that wait in receive forever: resident
 *              memory (/proc/self/statm) after they all wait minus before,
 *              per process (idle_proc_kib); of it, what malloc holds
 *              (idle_proc_malloc_kib, from mallinfo2) and the rest, mostly
 *              touched fiber stack pages (idle_proc_stack_kib).  Then they
 *              are sent stop and exit.  malloc_trim(0) before each run
 *              gives back what glibc keeps of earlier runs, so every run
 *              starts from the same state.
 *
 * Timing is in-process: the .tasm programs read CLOCK_MONOTONIC through
 * the native procs_nat:now/0 (spawn is timed here around the API calls).
 * Every workload runs once to warm up, then --runs times; medians are
 * printed as key=value lines (bench/run reads them).
 *
 * procs_nat:yield/0 calls vm_yield_point(), an internal function (the one
 * the interpreter calls when a process's reductions run out): the public
 * API has no plain yield, and a loop that yields by running out of
 * reductions spends 4000 reductions of its own work per switch, which
 * would bury a switch of a few tens of ns in noise.
 *
 * usage: bench_procs [--tasm FILE] [--runs R] [--switch N] [--spawn N]
 *                    [--rt N] [--rt2 N] [--ring N M] [--ring2 M] [--idle N]
 *                    [--only W,...]
 * --only runs just the named workloads (switch, spawn, roundtrip (with call), ring,
 * idle; for profiling) and prints only their keys.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PROG "bench_procs"
#include "bench/bench_util.h"
#include "include/tracevm.h"
#include "vm/interp.h"   /* vm_yield_point(), for procs_nat:yield/0 */
#include "vm/process.h"  /* struct tvm_env: the env of a native is its process */

#define MAX_RUNS 1000

static void die_status(tvm_env *env, tvm_status st, const char *what)
{
    char buf[4096];
    if (st == TVM_EXCEPTION)
        tvm_format_exception(env, buf, sizeof buf);
    else
        snprintf(buf, sizeof buf, "%s", tvm_status_name(st));
    die(what, buf);
}

/* ---- the natives of procs.tasm ---- */

static tvm_status nat_now(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                          void *data)
{
    (void)argc, (void)argv, (void)data;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return tvm_make_int(env, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, result);
}

static tvm_status nat_noop(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc, (void)argv, (void)data;
    return tvm_make_int(env, 0, result);
}

static tvm_status nat_yield(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                            void *data)
{
    (void)argc, (void)argv, (void)data;
    vm_yield_point(env->p);
    return tvm_make_int(env, 0, result);
}

static tvm_vm *make_vm(int schedulers, const char *path)
{
    tvm_config cfg = { .size = sizeof(tvm_config),
                       .schedulers = schedulers, .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (!vm)
        die("tvm_new failed", NULL);
    if (tvm_register_native(vm, "procs_nat", "now", 0, nat_now, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "procs_nat", "noop", 0, nat_noop, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "procs_nat", "yield", 0, nat_yield, NULL, &err) != TVM_OK ||
        tvm_load_file(vm, path, &err) != TVM_OK)
        die("loading", err.message);
    return vm;
}

/* ---- helpers ---- */

static tvm_term int_term(tvm_env *env, int64_t v)
{
    tvm_term t;
    if (tvm_make_int(env, v, &t) != TVM_OK)
        die("tvm_make_int failed", NULL);
    return t;
}

static int64_t get_int(tvm_env *env, tvm_term t, const char *what)
{
    int64_t v;
    if (tvm_get_int(env, t, &v) != TVM_OK)
        die(what, "did not return an integer");
    return v;
}

/* Runs procs:fun(args...) as a process and returns what it returned, once
 * every process it left behind (a yielder's last yield, a pong or a ring
 * being stopped) has exited. */
static tvm_term run_proc(tvm_env *env, const char *fun, int argc, const tvm_term *argv)
{
    tvm_pid pid;
    tvm_term res;
    tvm_status st = tvm_spawn(env, "procs", fun, argc, argv, &pid);
    if (st != TVM_OK)
        die_status(env, st, fun);
    st = tvm_join(env, pid, &res);
    if (st != TVM_OK)
        die_status(env, st, fun);
    tvm_wait_idle(tvm_env_vm(env));
    return res;
}

static int64_t run_proc_int(tvm_env *env, const char *fun, int64_t n)
{
    tvm_term a = int_term(env, n);
    return get_int(env, run_proc(env, fun, 1, &a), fun);
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (!f || fscanf(f, "%ld %ld", &pages, &res) != 2)
        die("cannot read /proc/self/statm", NULL);
    fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static double malloc_kib(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (double)(mi.uordblks + mi.hblkhd) / 1024.0;
}

/* ---- the workloads; each returns one measurement ---- */

/* ns per switch including the loop and the native call. */
static double w_switch(tvm_env *env, long n)
{
    return (double)run_proc_int(env, "switch", n) / (2.0 * (double)n);
}

static double w_noops(tvm_env *env, long n)
{
    return (double)run_proc_int(env, "noops", n) / (double)n;
}

/* µs per spawn + exit. */
static double w_spawn(tvm_vm *vm, tvm_env *env, long n)
{
    tvm_term a = int_term(env, n), res;
    tvm_pid pid;
    double t0 = now_ns();
    tvm_status st = tvm_spawn(env, "procs", "spawner", 1, &a, &pid);
    if (st == TVM_OK)
        st = tvm_join(env, pid, &res);
    tvm_wait_idle(vm);
    double t1 = now_ns();
    if (st != TVM_OK)
        die_status(env, st, "spawner");
    return (t1 - t0) / (double)n / 1e3;
}

/*
 * The same, but this thread polls tvm_processes() every 0.2 ms instead of
 * blocking in tvm_join()/tvm_wait_idle(): a thread blocked there is woken
 * by the exits it waits for (sys->exited is broadcast when a joinable or
 * the last process exits) and then takes the table lock that spawn and
 * exit need too.  The comparison shows what those wake-ups cost.
 */
static double w_spawn_poll(tvm_vm *vm, tvm_env *env, long n)
{
    tvm_term a = int_term(env, n), res;
    tvm_pid pid;
    double t0 = now_ns();
    tvm_status st = tvm_spawn(env, "procs", "spawner", 1, &a, &pid);
    if (st != TVM_OK)
        die_status(env, st, "spawner");
    while (tvm_processes(vm, NULL, 0) > 0)
        usleep(200);
    double t1 = now_ns();
    st = tvm_join(env, pid, &res); /* it has exited: does not block */
    if (st != TVM_OK)
        die_status(env, st, "spawner");
    return (t1 - t0) / (double)n / 1e3;
}

static double w_roundtrip(tvm_env *env, long n)
{
    return (double)run_proc_int(env, "roundtrip", n) / (double)n;
}

static double w_call(tvm_env *env, long n)
{
    return (double)run_proc_int(env, "call", n) / (double)n;
}

/* ns per hop; *build_us: µs per process spawned for the ring. */
static double w_ring(tvm_env *env, long n, long m, double *build_us)
{
    tvm_term a[2] = { int_term(env, n), int_term(env, m) }, e;
    tvm_term r = run_proc(env, "ring", 2, a);
    if (tvm_tuple_get(env, r, 0, &e) != TVM_OK)
        die("ring", "did not return a tuple");
    *build_us = (double)get_int(env, e, "ring") / (double)(n - 1) / 1e3;
    if (tvm_tuple_get(env, r, 1, &e) != TVM_OK)
        die("ring", "did not return a pair");
    return (double)get_int(env, e, "ring") / ((double)n * (double)m);
}

/* KiB of RSS per idle process; *malloc_per: KiB of malloc'd memory per process. */
static double w_idle(tvm_vm *vm, tvm_env *env, long n, double *malloc_per)
{
    size_t mark = tvm_handles_mark(env);
    tvm_process_info *info = malloc(((size_t)n + 64) * sizeof *info);
    if (!info)
        die("out of memory", NULL);
    tvm_wait_idle(vm);
    malloc_trim(0); /* what glibc keeps in its free lists is not the processes' */
    long rss0 = rss_kib();
    double m0 = malloc_kib();
    tvm_term a = int_term(env, n), pids;
    tvm_status st = tvm_call(env, "procs", "idlers", 1, &a, &pids);
    if (st != TVM_OK)
        die_status(env, st, "idlers");
    /* Wait until every one of them has run and waits in receive. */
    for (int tries = 0;; tries++) {
        size_t live = tvm_processes(vm, info, (size_t)n + 64);
        size_t waiting = 0;
        for (size_t i = 0; i < live && i < (size_t)n + 64; i++)
            waiting += strcmp(info[i].state, "waiting") == 0;
        if (waiting == (size_t)n)
            break;
        if (tries > 10000)
            die("idle", "the processes never all waited");
        usleep(1000);
    }
    long rss1 = rss_kib();
    double m1 = malloc_kib();
    st = tvm_call(env, "procs", "stop_all", 1, &pids, &a);
    if (st != TVM_OK)
        die_status(env, st, "stop_all");
    tvm_wait_idle(vm);
    tvm_handles_release(env, mark);
    free(info);
    *malloc_per = (m1 - m0) / (double)n;
    return (double)(rss1 - rss0) / (double)n;
}

static const char *only; /* --only: comma-separated workload names, or NULL */

static bool want(const char *name)
{
    if (!only)
        return true;
    size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    const char *path = "bench/procs.tasm";
    int runs = 7;
    long n_switch = 500 * 1000, n_spawn = 20 * 1000, n_rt = 200 * 1000, n_rt2 = 20 * 1000;
    long ring_n = 1000, ring_m = 200, ring2_m = 20, n_idle = 10 * 1000;
    for (int i = 1; i < argc; i += 2) { /* an option and its value */
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--tasm") == 0 && val)
            path = val;
        else if (strcmp(argv[i], "--only") == 0 && val)
            only = val;
        else if (strcmp(argv[i], "--runs") == 0)
            runs = (int)arg_long(argv[i], val, 1, MAX_RUNS);
        else if (strcmp(argv[i], "--switch") == 0)
            n_switch = arg_long(argv[i], val, 1, 1000L * 1000 * 1000);
        else if (strcmp(argv[i], "--spawn") == 0)
            n_spawn = arg_long(argv[i], val, 1, 100L * 1000 * 1000);
        else if (strcmp(argv[i], "--rt") == 0)
            n_rt = arg_long(argv[i], val, 1, 1000L * 1000 * 1000);
        else if (strcmp(argv[i], "--rt2") == 0)
            n_rt2 = arg_long(argv[i], val, 1, 1000L * 1000 * 1000);
        else if (strcmp(argv[i], "--ring") == 0 && i + 2 < argc) {
            ring_n = arg_long(argv[i], val, 2, 10L * 1000 * 1000);
            ring_m = arg_long(argv[i], argv[i + 2], 1, 1000L * 1000 * 1000);
            i++;
        } else if (strcmp(argv[i], "--ring2") == 0)
            ring2_m = arg_long(argv[i], val, 1, 1000L * 1000 * 1000);
        else if (strcmp(argv[i], "--idle") == 0)
            n_idle = arg_long(argv[i], val, 1, 10L * 1000 * 1000);
        else {
            fprintf(stderr, "usage: bench_procs [--tasm FILE] [--runs R] [--switch N] "
                            "[--spawn N] [--rt N] [--rt2 N] [--ring N M] [--ring2 M] "
                            "[--idle N] [--only W,...]\n");
            return 2;
        }
    }

    static double sw[MAX_RUNS], noop[MAX_RUNS], sp1[MAX_RUNS], sp2[MAX_RUNS], spp[MAX_RUNS];
    static double rt1[MAX_RUNS], rt2[MAX_RUNS], call1[MAX_RUNS], ring1[MAX_RUNS], ring2[MAX_RUNS];
    static double rbuild[MAX_RUNS], idle[MAX_RUNS], idle_m[MAX_RUNS];

    /* One scheduler.  r = -1 is the warm-up run of each workload. */
    tvm_vm *vm = make_vm(1, path);
    tvm_env *env = tvm_env_new(vm);
    for (int r = -1; r < runs; r++) {
        size_t mark = tvm_handles_mark(env);
        if (want("switch")) {
            double s = w_switch(env, n_switch), nc = w_noops(env, n_switch);
            if (r >= 0)
                sw[r] = s, noop[r] = nc;
        }
        if (want("spawn")) {
            double sp = w_spawn(vm, env, n_spawn), pp = w_spawn_poll(vm, env, n_spawn);
            if (r >= 0)
                sp1[r] = sp, spp[r] = pp;
        }
        if (want("roundtrip")) {
            double rt = w_roundtrip(env, n_rt), c = w_call(env, n_rt);
            if (r >= 0)
                rt1[r] = rt, call1[r] = c;
        }
        if (want("ring")) {
            double rb, rg = w_ring(env, ring_n, ring_m, &rb);
            if (r >= 0)
                ring1[r] = rg, rbuild[r] = rb;
        }
        tvm_wait_idle(vm);
        tvm_handles_release(env, mark);
    }
    for (int r = -1; r < runs && want("idle"); r++) {
        double m, k = w_idle(vm, env, n_idle, &m);
        if (r >= 0)
            idle[r] = k, idle_m[r] = m;
    }
    tvm_env_free(env);
    tvm_destroy(vm);

    /* Two schedulers. */
    vm = make_vm(2, path);
    env = tvm_env_new(vm);
    for (int r = -1; r < runs; r++) {
        size_t mark = tvm_handles_mark(env);
        if (want("spawn")) {
            double sp = w_spawn(vm, env, n_spawn);
            if (r >= 0)
                sp2[r] = sp;
        }
        if (want("roundtrip")) {
            double rt = w_roundtrip(env, n_rt2);
            if (r >= 0)
                rt2[r] = rt;
        }
        if (want("ring")) {
            double rb, rg = w_ring(env, ring_n, ring2_m, &rb);
            if (r >= 0)
                ring2[r] = rg;
            (void)rb;
        }
        tvm_wait_idle(vm);
        tvm_handles_release(env, mark);
    }
    tvm_env_free(env);
    tvm_destroy(vm);

    printf("runs=%d\n", runs);
    if (want("switch")) {
        double loop = median(sw, runs), nc = median(noop, runs);
        printf("switch_n=%ld\n", n_switch);
        printf("switch_ns=%.2f\n", loop - nc);
        printf("switch_loop_ns=%.2f\n", loop);
        printf("noop_call_ns=%.2f\n", nc);
    }
    if (want("spawn")) {
        printf("spawn_n=%ld\n", n_spawn);
        printf("spawn_us=%.3f\n", median(sp1, runs));
        printf("spawn_s2_us=%.3f\n", median(sp2, runs));
        printf("spawn_poll_us=%.3f\n", median(spp, runs));
    }
    if (want("roundtrip")) {
        double rt = median(rt1, runs);
        printf("rt_n=%ld\n", n_rt);
        printf("roundtrip_ns=%.2f\n", rt);
        printf("switch_msg_ns=%.2f\n", rt / 2);
        printf("rt2_n=%ld\n", n_rt2);
        printf("roundtrip_s2_ns=%.2f\n", median(rt2, runs));
        printf("call_ns=%.2f\n", median(call1, runs));
        printf("monitor_demonitor_ns=%.2f\n", median(call1, runs) - rt);
    }
    if (want("ring")) {
        double h1 = median(ring1, runs), h2 = median(ring2, runs);
        printf("ring_n=%ld\n", ring_n);
        printf("ring_m=%ld\n", ring_m);
        printf("ring2_m=%ld\n", ring2_m);
        printf("ring_hop_ns=%.2f\n", h1);
        printf("ring_mmsgs=%.3f\n", 1e3 / h1);
        printf("ring_s2_hop_ns=%.2f\n", h2);
        printf("ring_s2_mmsgs=%.3f\n", 1e3 / h2);
        printf("ring_spawn_us=%.3f\n", median(rbuild, runs));
    }
    if (want("idle")) {
        double k = median(idle, runs), m = median(idle_m, runs);
        printf("idle_n=%ld\n", n_idle);
        printf("idle_proc_kib=%.2f\n", k);
        printf("idle_proc_malloc_kib=%.2f\n", m);
        printf("idle_proc_stack_kib=%.2f\n", k - m);
    }
    return 0;
}
