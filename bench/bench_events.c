/*
 * bench/bench_events.c - setting trace flags for every process while the
 * schedulers run, and the trace pipeline's own costs, as key=value lines.
 *
 * Flags for all (on OTP 25, erlang:trace(all, true, [call]) stops every
 * scheduler for the whole walk: 160 ms at 300,000 processes on this
 * kind of machine): a VM with --schedulers
 * schedulers and slab stacks (tvm_config.fiber_slabs) holds --procs
 * processes waiting in receive, plus one worker per scheduler that loops
 * (a little VM code, then the native ev_nat:tick/1) and records the
 * largest gap between two of its ticks.  Each of --rounds rounds has two
 * windows of --window-ms each, in alternating order: a flags window
 * (tvm_trace_flags_all(vm, TVM_TRACE_EXISTING, F, on), on and off in
 * turn, F = call, procs, running, send and receive; then the host thread
 * sleeps for the rest of the window) and a no-op window, where the host
 * thread spins for as long as the last flags call took instead, then
 * sleeps: with as many schedulers as cores, any busy host thread takes a
 * core from a scheduler for that long, so the no-op window is the
 * baseline the flags window must not exceed.  No pipeline runs, so the
 * flags cost no events.
 *   procs                  processes alive during the rounds (+ workers)
 *   flags_all_ms           median duration of one tvm_trace_flags_all
 *   flags_all_max_ms       the longest
 *   flags_gap_max_ms       the largest worker gap in any flags window
 *   noop_gap_max_ms        the largest worker gap in any no-op window
 *   flags_gap_med_ms, noop_gap_med_ms   median over the rounds of each
 *                          window's largest gap
 *   flags_gap_p90_ms, noop_gap_p90_ms   their 90th percentile
 *
 * The pipeline (from the former bench_trace.c; internal API):
 *   emit_ns           ns per tr_emit() of a call event with one small-int
 *                     argument into a scheduler ring (the producer's whole
 *                     cost: clock, encoding, record, publish); median of
 *                     batches that fit the ring, so nothing is dropped
 *   tick_ns           one read of the trace clock (tr_clock_ticks), which
 *                     every event pays once
 *   emit3_ns          the same with three arguments {ok,[1,2]}, <<"bin">>, 7
 *   emit_shared_ns    the same through the shared (locked) ring, -1
 *   <sink>_mev_s      collector throughput, million events per second,
 *                     draining pre-filled rings into one sink: text, jsonl
 *                     and chrome write to /dev/null, ctf to a temporary
 *                     directory, callback calls an empty function;
 *                     ctf_raw (one ring, so one stream) to a directory on
 *                     tmpfs (/dev/shm); raw_null a raw sink that writes
 *                     nothing (the collector's part of ctf_raw); these two
 *                     are medians of --rounds runs (--only raw: just them)
 *   ctf_raw_bytes_per_event   the stream file's bytes per event
 *   shm_alloc_gb_s, shm_copy_gb_s, shm_write_gb_s   GB per second of
 *                     this thread's CPU time for a file in /dev/shm as
 *                     large as that stream: allocating its pages
 *                     (fallocate), writing into them once allocated, and
 *                     writing into a new file (what the raw sink pays);
 *                     1 MiB writes, medians of --rounds
 *
 * Fully traced fib (--only fib, and in the default run): a VM with
 * --schedulers schedulers runs one process per scheduler, each computing
 * interp:fib(27) (bench/interp.tasm: 635,621 calls), with interp:fib/1
 * traced [{'_',[],[{return_trace}]}] for every new process (a call and a
 * return_from event per call: 2,542,484 events) into raw CTF on tmpfs
 * with the default rings (tr_ring_default: 8 MiB per scheduler for up to
 * 4), under the drop policy and the lossless one, against the same run
 * untraced (no pattern, no flag);
 * wall time from the first spawn to the last join, median of --rounds
 * rounds (the three runs of a round back to back):
 *   fib_untraced_ms, fib_ctf_drop_ms, fib_ctf_lossless_ms
 *   fib_untraced_cpu_ms, fib_ctf_drop_cpu_ms, fib_ctf_lossless_cpu_ms
 *                      the CPU time of the whole OS process over the same
 *                      span (schedulers, collector, host thread): what
 *                      the tracing costs in CPU, and how much of the two
 *                      CPUs' wall time the run kept busy
 *   fib_ctf_lost       events the drop policy lost (median over rounds;
 *                      fib_ctf_lost_max the largest)
 *   fib_ctf_written    events the lossless run wrote (must be 2,542,484
 *                      per process)
 *   fib_ctf_lossless_ratio   fib_ctf_lossless_ms / fib_untraced_ms
 *
 * usage: bench_events [--procs N] [--schedulers S] [--rounds R]
 *                     [--window-ms W] [--events N] [--only flags|pipeline|raw|fib]
 *                     [--tasm FILE] [--fib-ring-bytes B]
 * (--fib-ring-bytes: the fib runs' rings instead of the default, to see
 * what a run needs to lose nothing)
 */
#define _GNU_SOURCE   /* fallocate */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PROG "bench_events"
#include "bench/bench_util.h"
#include "include/tracevm.h"
#include "trace/tr.h"
#include "trace/tr_clock.h"
#include "vm/atom.h"
#include "vm/atomics.h"

#define MAX_WORKERS 64
#define MAX_ROUNDS 1000

/* ==== the pipeline ==== */

#define MAX_FIB_PROCS 64

/* A raw sink that writes nothing: the collector's own cost of handing
 * ranges over (raw_null_mev_s), without a file system's. */
static void null_range(TrSink *s, const TrRange *r)
{
    (void)s, (void)r;
}
static void null_event(TrSink *s, const TrEvent *ev)
{
    (void)s, (void)ev;
}
static void null_close(TrSink *s)
{
    (void)s;
}
static const TrSinkOps null_raw_ops = {
    .name = "null-raw", .event = null_event, .close = null_close, .range = null_range,
};

static void remove_dir(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_events: could not remove %s\n", dir);
}

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
        fprintf(stderr, "bench_events: %s\n", err);
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
        fprintf(stderr, "bench_events: %llu events dropped while measuring emit\n",
                (unsigned long long)dropped);
    return median(per, ROUNDS);
}

/* ns per read of the trace clock (tr_clock_ticks: rdtsc on x86_64), the
 * part of every event's cost no change to the rings can remove: median
 * of ROUNDS batches. */
static double tick_cost(void)
{
    tr_clock_init();
    double per[ROUNDS];
    uint64_t sum = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < BATCH * 10; i++)
            sum += tr_clock_ticks();
        per[r] = (now_ns() - t0) / (BATCH * 10);
    }
    if (sum == 42)
        printf("#\n");   /* keeps the reads */
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
            fprintf(stderr, "bench_events: the ring is too small for %ld events\n", n);
            exit(1);
        }
    double t0 = now_ns();
    tr_pipeline_start(tp);
    tr_flush(tp);
    double secs = (now_ns() - t0) / 1e9;
    tr_pipeline_free(tp);
    return (double)n / secs / 1e6;
}

/* What a stream file on tmpfs costs per byte, in this thread's CPU time
 * (GB/s): allocating its pages (fallocate), writing into pages already
 * allocated, and writing into a new file (both at once, as the raw sink
 * does), 1 MiB per write, `bytes` in all. */
static void tmpfs_rates(size_t bytes, double *alloc, double *copy, double *fresh)
{
    static uint8_t buf[1 << 20];
    memset(buf, 0x5a, sizeof buf);
    bytes = (bytes + sizeof buf - 1) / sizeof buf * sizeof buf;
    double t[3];
    for (int k = 0; k < 2; k++) {
        char path[] = "/dev/shm/bench_events_tmpfs_XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0 || unlink(path) != 0)
            die("a file in /dev/shm", NULL);
        double t0 = thread_cpu_ns();
        if (k == 0 && fallocate(fd, 0, 0, (off_t)bytes) != 0)
            die("fallocate in /dev/shm", NULL);
        double t1 = thread_cpu_ns();
        for (size_t off = 0; off < bytes; off += sizeof buf)
            if (pwrite(fd, buf, sizeof buf, (off_t)off) != (ssize_t)sizeof buf)
                die("writing into /dev/shm", NULL);
        double t2 = thread_cpu_ns();
        if (k == 0) {
            t[0] = t1 - t0;
            t[1] = t2 - t1;
        } else {
            t[2] = t2 - t1;
        }
        close(fd);
    }
    *alloc = (double)bytes / t[0];
    *copy = (double)bytes / t[1];
    *fresh = (double)bytes / t[2];
}

/* Raw CTF into a new directory on tmpfs, and the null raw sink: medians
 * of `rounds` runs each (one run is a few tens of ms, so one noisy
 * moment of a shared machine would otherwise be the figure). */
static void raw_costs(long n, int rounds)
{
    static double raw[MAX_ROUNDS], none[MAX_ROUNDS], alloc[MAX_ROUNDS], copy[MAX_ROUNDS],
        fresh[MAX_ROUNDS];
    static TrSink null_raw = { .ops = &null_raw_ops };
    char err[256];
    double bytes = 0;
    for (int r = 0; r < rounds; r++) {
        char shm[] = "/dev/shm/bench_events_XXXXXX";
        if (!mkdtemp(shm)) {
            perror("bench_events: /dev/shm");
            exit(1);
        }
        TrSink *sink = tr_sink_ctf_raw_new(shm, 0, err, sizeof err);
        if (!sink) {
            fprintf(stderr, "bench_events: %s\n", err);
            exit(1);
        }
        raw[r] = sink_rate(sink, n);
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "%s/sched_0", shm);
        if (stat(path, &st) == 0)
            bytes = (double)st.st_size;
        remove_dir(shm);
        none[r] = sink_rate(&null_raw, n);
        tmpfs_rates((size_t)bytes, &alloc[r], &copy[r], &fresh[r]);
    }
    printf("ctf_raw_mev_s=%.2f\nraw_null_mev_s=%.2f\nctf_raw_bytes_per_event=%.2f\n",
           median(raw, rounds), median(none, rounds), bytes / (double)n);
    printf("shm_alloc_gb_s=%.2f\nshm_copy_gb_s=%.2f\nshm_write_gb_s=%.2f\n",
           median(alloc, rounds), median(copy, rounds), median(fresh, rounds));
}

/* The pipeline's costs: emit and the sinks' throughput. */
static void pipeline_costs(long n, int rounds)
{
    vm_atoms_init();
    Term one = make_small(10);
    printf("emit_ns=%.1f\n", emit_cost(0, &one, 1));
    printf("tick_ns=%.1f\n", tick_cost());

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
    char dir[] = "/tmp/bench_events_XXXXXX", err[256];
    if (!null || !mkdtemp(dir)) {
        perror("bench_events");
        exit(1);
    }
    printf("text_mev_s=%.2f\n", sink_rate(tr_sink_text_new(null, 0), n));
    printf("jsonl_mev_s=%.2f\n", sink_rate(tr_sink_jsonl_new(null), n));
    printf("chrome_mev_s=%.2f\n", sink_rate(tr_sink_chrome_new(null, 1), n));
    printf("callback_mev_s=%.2f\n", sink_rate(tr_sink_callback_new(nothing, NULL), n));
    TrSink *ctf = tr_sink_ctf_new(dir, 0, err, sizeof err);
    if (!ctf) {
        fprintf(stderr, "bench_events: %s\n", err);
        exit(1);
    }
    printf("ctf_mev_s=%.2f\n", sink_rate(ctf, n));
    remove_dir(dir);
    raw_costs(n, rounds);
    fclose(null);
}

/* ==== fully traced fib into raw CTF ==== */

#define FIB_N 27
#define FIB_CALLS 635621

/* CPU ms the whole OS process used so far (every thread: schedulers,
 * the collector, this one). */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU ms of the last fib_procs (all threads, from its first spawn to its
 * last join). */
static double fib_cpu;

/* Wall ms to run interp:fib(FIB_N) in nprocs processes at once. */
static double fib_procs(tvm_env *env, int nprocs)
{
    tvm_pid pids[MAX_FIB_PROCS];
    tvm_term arg, res;
    tvm_make_int(env, FIB_N, &arg);
    double c0 = cpu_ms();
    double t0 = now_ns();
    for (int i = 0; i < nprocs; i++)
        if (tvm_spawn(env, "interp", "fib", 1, &arg, &pids[i]) != TVM_OK)
            die("spawning fib", NULL);
    for (int i = 0; i < nprocs; i++)
        if (tvm_join(env, pids[i], &res) != TVM_OK)
            die("fib failed", NULL);
    double ms = (now_ns() - t0) / 1e6;
    fib_cpu = cpu_ms() - c0;
    return ms;
}

/* One traced run into raw CTF on tmpfs under `policy`: wall ms; the
 * events written and lost. */
static size_t fib_ring_bytes;   /* --fib-ring-bytes; 0: the default */

static double fib_traced(tvm_vm *vm, tvm_env *env, int nprocs, tvm_trace_policy policy,
                         uint64_t *written, uint64_t *lost)
{
    char dir[] = "/dev/shm/bench_fib_XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp in /dev/shm", NULL);
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CTF_RAW, .path = dir,
                            .policy = policy, .ring_bytes = fib_ring_bytes };
    tvm_error err;
    if (tvm_trace_start(vm, &o, &err) != TVM_OK)
        die("tvm_trace_start", err.message);
    if (tvm_trace_pattern_ms(vm, "interp:fib/1", "[{'_',[],[{return_trace}]}]", TVM_TP_TRUE,
                             TVM_TP_LOCAL, 0, NULL, &err) != TVM_OK)
        die("tvm_trace_pattern_ms", err.message);
    tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true);
    double ms = fib_procs(env, nprocs);
    tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, false);
    if (tvm_trace_pattern(vm, "interp:fib/1", TVM_TP_FALSE, TVM_TP_LOCAL, NULL, &err) != TVM_OK)
        die("tvm_trace_pattern", err.message);
    tvm_session_flush(vm, TVM_SESSION_DEFAULT);
    tvm_session_info info;
    tvm_session_info_get(vm, TVM_SESSION_DEFAULT, &info);
    *written = info.written;
    *lost = info.lost;
    tvm_trace_stop(vm);
    remove_dir(dir);
    return ms;
}

static void fib_ctf(const char *tasm, int nscheds, int rounds)
{
    int nprocs = nscheds < MAX_FIB_PROCS ? nscheds : MAX_FIB_PROCS;
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = nscheds,
                       .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (!vm || tvm_load_file(vm, tasm, &err) != TVM_OK)
        die("loading", vm ? err.message : "tvm_new");
    tvm_env *env = tvm_env_new(vm);
    static double plain[MAX_ROUNDS], drop[MAX_ROUNDS], lossless[MAX_ROUNDS];
    static double lost[MAX_ROUNDS];
    static double plain_cpu[MAX_ROUNDS], drop_cpu[MAX_ROUNDS], lossless_cpu[MAX_ROUNDS];
    double lost_max = 0;
    uint64_t written = 0, dropped = 0, w;
    fib_procs(env, nprocs);   /* warm-up */
    for (int r = 0; r < rounds; r++) {
        plain[r] = fib_procs(env, nprocs);
        plain_cpu[r] = fib_cpu;
        drop[r] = fib_traced(vm, env, nprocs, TVM_TRACE_DROP, &w, &dropped);
        drop_cpu[r] = fib_cpu;
        lost[r] = (double)dropped;
        lost_max = lost[r] > lost_max ? lost[r] : lost_max;
        lossless[r] = fib_traced(vm, env, nprocs, TVM_TRACE_LOSSLESS, &written, &dropped);
        lossless_cpu[r] = fib_cpu;
        if (written != 2 * (uint64_t)FIB_CALLS * (uint64_t)nprocs || dropped)
            fprintf(stderr, "bench_events: the lossless run wrote %llu events, lost %llu\n",
                    (unsigned long long)written, (unsigned long long)dropped);
    }
    double u = median(plain, rounds), l = median(lossless, rounds);
    printf("fib_procs=%d\nfib_untraced_ms=%.2f\nfib_ctf_drop_ms=%.2f\n", nprocs, u,
           median(drop, rounds));
    printf("fib_ctf_lossless_ms=%.2f\nfib_ctf_lossless_ratio=%.2f\n", l, l / u);
    printf("fib_ctf_lost=%.0f\nfib_ctf_lost_max=%.0f\nfib_ctf_written=%llu\n",
           median(lost, rounds), lost_max, (unsigned long long)written);
    printf("fib_untraced_cpu_ms=%.2f\nfib_ctf_drop_cpu_ms=%.2f\nfib_ctf_lossless_cpu_ms=%.2f\n",
           median(plain_cpu, rounds), median(drop_cpu, rounds), median(lossless_cpu, rounds));
    tvm_env_free(env);
    tvm_destroy(vm);
}

/* ==== flags for all processes ==== */


/* Per worker (written by its scheduler thread in tick, read by the host
 * between windows: relaxed, a stale value only blurs a window's edge). */
static struct {
    double last;        /* ns of its previous tick (worker only) */
    VmAtomic max_gap;   /* ns; reset to 0 by the host at a window's start */
    VmAtomic ticks;
} workers[MAX_WORKERS];
static VmAtomic stop_workers;

/* ev_nat:tick(K): worker K's tick; returns 1 when the workers must stop. */
static tvm_status nat_tick(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res,
                           void *data)
{
    (void)argc, (void)data;
    int64_t k;
    if (!bench_tick_index(env, argv, MAX_WORKERS, &k))
        return tvm_raise_badarg(env);
    double now = now_ns();
    if (workers[k].last > 0) {
        uintptr_t gap = (uintptr_t)(now - workers[k].last);
        if (gap > vm_atomic_load_relaxed(&workers[k].max_gap))
            vm_atomic_store_relaxed(&workers[k].max_gap, gap);
    }
    workers[k].last = now;
    vm_atomic_fetch_add_relaxed(&workers[k].ticks, 1);
    return tvm_make_int(env, (int64_t)vm_atomic_load_relaxed(&stop_workers), res);
}

static const char ev_text[] =
    "module ev\n"
    "export idler/0, worker/1\n"
    /* idler(): waits for one message */
    "function idler/0 regs 2\n"
    "top:\n"
    "    recv r0, none\n    accept\n    ret r0\n"
    "none:\n"
    "    loadk r1, infinity\n    wait r1, never\n    jump top\n"
    "never:\n    ret r1\n"
    "end\n"
    /* worker(K): 200 loop iterations, a message to itself and back (a send
     * looks the receiver up in the process table), tick(K); until tick
     * says stop */
    "function worker/1 regs 4\n"
    "top:\n"
    "    loadi r1, 200\n"
    "spin:\n"
    "    jeqi r1, 0, ticked\n"
    "    addi r1, r1, -1\n"
    "    jump spin\n"
    "ticked:\n"
    "    self r2\n"
    "    loadk r3, t\n"
    "    callx r2, r2, erlang:send/2\n"
    "    recv r2, nomsg\n"
    "    accept\n"
    "nomsg:\n"
    "    move r2, r0\n"
    "    callx r2, r2, ev_nat:tick/1\n"
    "    jeqi r2, 1, done\n"
    "    jump top\n"
    "done:\n    ret r0\n"
    "end\n";

/* The largest gap of any worker since the last reset, in ms; resets. */
static double take_max_gap(int n)
{
    uintptr_t m = 0;
    for (int k = 0; k < n; k++) {
        uintptr_t g = vm_atomic_load_relaxed(&workers[k].max_gap);
        m = g > m ? g : m;
        vm_atomic_store_relaxed(&workers[k].max_gap, 0);
    }
    return (double)m / 1e6;
}

static void sleep_ms(double ms)
{
    if (ms > 0)
        usleep((useconds_t)(ms * 1000));
}

static void flags_for_all(long nprocs, int nscheds, int rounds, double window_ms)
{
    tvm_config cfg = { .size = sizeof(tvm_config),
                       .schedulers = nscheds, .quiet_crashes = true, .fiber_slabs = true,
                       .fiber_stack_bytes = 64 * 1024 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (!vm || tvm_register_native(vm, "ev_nat", "tick", 1, nat_tick, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "ev.tasm", ev_text, sizeof ev_text - 1, &err) != TVM_OK)
        die("loading", vm ? err.message : "tvm_new");
    tvm_env *env = tvm_env_new(vm);
    double t0 = now_ns();
    for (long i = 0; i < nprocs; i++) {
        tvm_pid pid;
        if (tvm_spawn(env, "ev", "idler", 0, NULL, &pid) != TVM_OK)
            die("spawning the idle processes", tvm_status_name(TVM_ERR_LIMIT));
    }
    double spawn_ms = (now_ns() - t0) / 1e6;
    tvm_pid wpids[MAX_WORKERS];
    for (int k = 0; k < nscheds; k++) {
        tvm_term a;
        tvm_make_int(env, k, &a);
        if (tvm_spawn(env, "ev", "worker", 1, &a, &wpids[k]) != TVM_OK)
            die("spawning a worker", NULL);
    }
    /* Every worker ticking before the first window. */
    for (int k = 0; k < nscheds; k++)
        while (vm_atomic_load_relaxed(&workers[k].ticks) < 1000)
            usleep(1000);
    static double call_ms[MAX_ROUNDS], fgap[MAX_ROUNDS], ngap[MAX_ROUNDS];
    double fmax = 0, nmax = 0, cmax = 0;
    unsigned fl = TVM_TRACE_CALL | TVM_TRACE_PROCS | TVM_TRACE_RUNNING | TVM_TRACE_SEND |
                  TVM_TRACE_RECEIVE;
    /* One change before the rounds: the no-op's spin length to start with. */
    double last_ms = now_ns();
    tvm_trace_flags_all(vm, TVM_TRACE_EXISTING, fl, false);
    last_ms = (now_ns() - last_ms) / 1e6;
    for (int r = 0; r < rounds; r++) {
        for (int j = 0; j < 2; j++) {
            bool flags = (j + r) % 2 == 0;
            take_max_gap(nscheds);
            double w0 = now_ns();
            if (flags) {
                tvm_trace_flags_all(vm, TVM_TRACE_EXISTING, fl, r % 4 < 2);
                last_ms = call_ms[r] = (now_ns() - w0) / 1e6;
                cmax = call_ms[r] > cmax ? call_ms[r] : cmax;
            } else {
                while (now_ns() - w0 < last_ms * 1e6)
                    ;
            }
            sleep_ms(window_ms - (now_ns() - w0) / 1e6);
            double g = take_max_gap(nscheds);
            if (flags) {
                fgap[r] = g;
                fmax = g > fmax ? g : fmax;
            } else {
                ngap[r] = g;
                nmax = g > nmax ? g : nmax;
            }
        }
    }
    vm_atomic_store_relaxed(&stop_workers, 1);
    for (int k = 0; k < nscheds; k++) {
        tvm_term res;
        tvm_join(env, wpids[k], &res);
    }
    printf("procs=%ld\nschedulers=%d\nspawn_ms=%.1f\n", nprocs, nscheds, spawn_ms);
    printf("flags_all_ms=%.3f\nflags_all_max_ms=%.3f\n", median(call_ms, rounds), cmax);
    printf("flags_gap_max_ms=%.3f\nnoop_gap_max_ms=%.3f\n", fmax, nmax);
    printf("flags_gap_med_ms=%.3f\nnoop_gap_med_ms=%.3f\n", median(fgap, rounds),
           median(ngap, rounds));
    /* median() sorted both: the 90th percentile of each window's largest
     * gap, for comparing the tails (the largest of a run is one sample). */
    printf("flags_gap_p90_ms=%.3f\nnoop_gap_p90_ms=%.3f\n", fgap[(rounds - 1) * 9 / 10],
           ngap[(rounds - 1) * 9 / 10]);
    tvm_env_free(env);
    tvm_destroy(vm);
}

int main(int argc, char **argv)
{
    long n = 2000000, nprocs = 300000;
    int nscheds = 2, rounds = 10;
    double window_ms = 300;
    const char *only = NULL, *tasm = "bench/interp.tasm";
    for (int i = 1; i < argc; i++) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--events"))
            n = arg_long(argv[i], val, 1000, 100000000), i++;
        else if (!strcmp(argv[i], "--procs"))
            nprocs = arg_long(argv[i], val, 0, 10000000), i++;
        else if (!strcmp(argv[i], "--schedulers"))
            nscheds = (int)arg_long(argv[i], val, 1, MAX_WORKERS), i++;
        else if (!strcmp(argv[i], "--rounds"))
            rounds = (int)arg_long(argv[i], val, 1, MAX_ROUNDS), i++;
        else if (!strcmp(argv[i], "--window-ms"))
            window_ms = (double)arg_long(argv[i], val, 1, 100000), i++;
        else if (!strcmp(argv[i], "--only") && val &&
                 (!strcmp(val, "flags") || !strcmp(val, "pipeline") || !strcmp(val, "fib") ||
                  !strcmp(val, "raw")))
            only = val, i++;
        else if (!strcmp(argv[i], "--tasm") && val)
            tasm = val, i++;
        else if (!strcmp(argv[i], "--fib-ring-bytes"))
            fib_ring_bytes = (size_t)arg_long(argv[i], val, 4096, 1L << 30), i++;
        else {
            fprintf(stderr, "usage: bench_events [--procs N] [--schedulers S] [--rounds R] "
                            "[--window-ms W] [--events N] [--only flags|pipeline|raw|fib] "
                            "[--tasm FILE] [--fib-ring-bytes B]\n");
            return 2;
        }
    }
    if (!only || !strcmp(only, "flags"))
        flags_for_all(nprocs, nscheds, rounds, window_ms);
    if (!only || !strcmp(only, "pipeline"))
        pipeline_costs(n, rounds);
    if (only && !strcmp(only, "raw")) {
        vm_atoms_init();
        raw_costs(n, rounds);
    }
    if (!only || !strcmp(only, "fib"))
        fib_ctf(tasm, nscheds, rounds);
    return 0;
}
