/*
 * bench/bench_attach.c - live control (docs/control.md) from a client's
 * side: how long an attached trace takes to deliver its first event,
 * what a client streaming events costs the program, and what `stacks` of
 * 20,000 processes costs it.
 *
 * The VM runs in this process with its control endpoint (tvm_control_start)
 * and 2 schedulers; the client is this program's main thread, through the
 * same public client API `tracevm attach` is built on (tvm_control_connect,
 * tvm_control_call): a real Unix-socket round trip, the greeting, the
 * request, the VM's checks and its session, without the fork and exec of
 * a `tracevm attach` process.  --workers processes (default 1, so that the
 * endpoint's thread and the session's collector have the other vCPU of a
 * 2-vCPU machine) loop making 20 remote calls of ba:work/1 and then the
 * native ba_nat:tick/1, which records on the worker's own scheduler
 * thread the gap since its previous tick (bench/bench_pausefree.c's
 * worker-gap method): a worker that is stopped shows a long gap.
 *
 *   first_event_us_median, _p99   --attaches times: connect, send
 *       `trace ba:work/1 --max-events 1`, until the first event's line
 *       arrives (the VM checks the pattern in a throwaway session, creates
 *       the client's session, arms the breakpoint and the flags; the next
 *       call of ba:work/1 makes the event, the collector writes it to the
 *       socket); attach_total_us_median: to the end of the reply (the
 *       session stopped and destroyed)
 *   calls_per_s_none            ba:work/1 calls per second of the workers,
 *                               no client (median of --runs windows)
 *   calls_per_s_armed           a client's trace of ba:cold/0 (never
 *                               called) running: the session armed, no
 *                               event
 *   calls_per_s_stream          a client streaming `trace ba:work/1`
 *                               (every call an event) and reading as fast
 *                               as it can; stream_events_per_s: the events
 *                               it read per second, stream_lost: events
 *                               the session dropped (its last record's
 *                               count)
 *   stacks_ms                   `stacks` of --procs (20,000) processes
 *                               waiting in a receive five calls deep,
 *                               every line read; stacks_lines
 *   stacks_gap_max_us, noop_gap_max_us   the largest worker gap during
 *                               the stacks call, and during a no-op window
 *                               (a sleep) as long; medians over --runs
 *   stacks_gap_max_us_worst, noop_gap_max_us_worst: the largest of all
 *   stacks_worker_vcsw, noop_worker_vcsw   the voluntary context switches
 *                               of the first worker's scheduler thread in
 *                               those windows (it blocked: what a scheduler
 *                               made to wait would do; a spinning worker
 *                               has none otherwise); stacks_worker_runq_us,
 *                               noop_worker_runq_us: its time runnable but
 *                               waiting for a CPU (the machine's noise, a
 *                               gap's usual cause on a shared machine);
 *                               medians over the windows the worker did
 *                               not migrate in (stacks_windows_unmigrated)
 * Printed as key=value lines.
 *
 * usage: bench_attach [--runs R] [--attaches N] [--procs N] [--window-ms MS]
 *                     [--workers W]
 */
#define BENCH_PROG "bench_attach"
#define _GNU_SOURCE

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "include/tracevm.h"

#define MAX_WORKERS 8
#define CALLS_PER_TICK 20

static const char *src =
    "module ba\n"
    "export worker/1, work/1, cold/0, idle/1\n"
    "function work/1 regs 2\n"
    "    addi r0, r0, 1\n"
    "    ret r0\n"
    "end\n"
    "function cold/0 regs 1\n"
    "    loadi r0, 0\n"
    "    ret r0\n"
    "end\n"
    "; worker(Idx): 20 calls of ba:work/1, then ba_nat:tick(Idx), until told to stop\n"
    "function worker/1 regs 5\n"
    "top:\n"
    "    loadi r1, 20\n"
    "inner:\n"
    "    move r2, r1\n"
    "    callx r2, r2, ba:work/1\n"
    "    addi r1, r1, -1\n"
    "    jeqi r1, 0, ticked\n"
    "    jump inner\n"
    "ticked:\n"
    "    move r2, r0\n"
    "    callx r2, r2, ba_nat:tick/1\n"
    "    jnei r2, 0, done\n"
    "    jump top\n"
    "done:\n"
    "    ret r2\n"
    "end\n"
    "; idle(N): N calls deep, waits for a message\n"
    "function idle/1 regs 3\n"
    "    jeqi r0, 0, bottom\n"
    "    addi r1, r0, -1\n"
    "    call r1, r1, idle/1\n"
    "    ret r1\n"
    "bottom:\n"
    "    loadk r1, infinity\n"
    "    wait r1, done\n"
    "done:\n"
    "    ret r1\n"
    "end\n";

/* One worker's record, written by its tick only; a window starts when
 * the controller bumps `generation` and each worker has seen it. */
typedef struct Worker {
    uint64_t prev;                 /* its last tick, ns */
    _Atomic uint64_t seen;         /* the generation its counts belong to */
    _Atomic uint64_t max_gap, ticks;
    _Atomic long tid;              /* the scheduler thread of its last tick */
    char pad[64];
} Worker;

static Worker workers[MAX_WORKERS];
static _Atomic uint64_t generation;
static _Atomic int stop;
static int nworkers = 1;
static __thread long my_tid;       /* a scheduler thread's id, once asked */

static tvm_status nat_tick(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc, (void)data;
    int64_t idx;
    if (!bench_tick_index(env, argv, MAX_WORKERS, &idx))
        return tvm_raise_badarg(env);
    Worker *w = &workers[idx];
    uint64_t t = (uint64_t)now_ns(), g = atomic_load_explicit(&generation, memory_order_acquire);
    if (g != atomic_load_explicit(&w->seen, memory_order_relaxed)) {
        atomic_store_explicit(&w->max_gap, 0, memory_order_relaxed);
        atomic_store_explicit(&w->ticks, 0, memory_order_relaxed);
        atomic_store_explicit(&w->seen, g, memory_order_release);
    } else {
        uint64_t gap = t - w->prev;
        if (gap > atomic_load_explicit(&w->max_gap, memory_order_relaxed))
            atomic_store_explicit(&w->max_gap, gap, memory_order_relaxed);
        atomic_fetch_add_explicit(&w->ticks, 1, memory_order_relaxed);
    }
    w->prev = t;
    if (!my_tid)
        my_tid = (long)syscall(SYS_gettid);
    atomic_store_explicit(&w->tid, my_tid, memory_order_relaxed);
    return tvm_make_int(env, atomic_load_explicit(&stop, memory_order_relaxed), result);
}

/* The OS's view of the first worker's scheduler thread over a window:
 * its voluntary context switches (it blocked or slept: a worker that
 * spins throughout never does unless its scheduler was made to wait) and
 * its time runnable but waiting for a CPU (the machine's noise).  A
 * migration to the other scheduler thread voids the window's figures. */
typedef struct Window {
    long tid;
    double rq0, runq_us;
    long vcsw0, vcsw;
    bool migrated;
} Window;

/* Thread tid's voluntary context switches so far. */
static long voluntary_switches(long tid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    FILE *f = fopen(path, "r");
    long n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

/* A measuring window: starts a generation and waits until every worker
 * counts in it. */
static void window_begin(Window *win)
{
    uint64_t g = atomic_fetch_add(&generation, 1) + 1;
    for (int i = 0; i < nworkers; i++)
        while (atomic_load_explicit(&workers[i].seen, memory_order_acquire) != g)
            ;
    *win = (Window){ .tid = atomic_load_explicit(&workers[0].tid, memory_order_relaxed) };
    double cpu = 0;
    schedstat(win->tid, &cpu, &win->rq0);
    win->vcsw0 = voluntary_switches(win->tid);
}

/* The window's largest gap (us) and calls of ba:work/1 over all workers. */
static void window_end(Window *win, double *gap_us, double *calls)
{
    uint64_t gap = 0, ticks = 0;
    for (int i = 0; i < nworkers; i++) {
        uint64_t m = atomic_load_explicit(&workers[i].max_gap, memory_order_relaxed);
        gap = m > gap ? m : gap;
        ticks += atomic_load_explicit(&workers[i].ticks, memory_order_relaxed);
    }
    *gap_us = (double)gap / 1000.0;
    *calls = (double)ticks * CALLS_PER_TICK;
    double cpu = 0, rq = 0;
    schedstat(win->tid, &cpu, &rq);
    win->vcsw = voluntary_switches(win->tid) - win->vcsw0;
    win->migrated = atomic_load_explicit(&workers[0].tid, memory_order_relaxed) != win->tid;
    win->runq_us = (rq - win->rq0) / 1000.0;
}

static void sleep_ms(double ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6) };
    nanosleep(&ts, NULL);
}

static double percentile(double *v, int n, int pct)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    int i = (n * pct) / 100;
    return v[i < n ? i : n - 1];
}

static tvm_control_client *connect_to(const char *path)
{
    tvm_control_client *c;
    tvm_error err;
    if (tvm_control_connect(path, &c, &err) != TVM_OK)
        die("connect", err.message);
    return c;
}

static void call(tvm_control_client *c, int argc, const char *const *argv,
                 tvm_control_line_fn fn, void *data)
{
    tvm_error err;
    if (tvm_control_call(c, argc, argv, fn, data, &err) != TVM_OK)
        die(argv[0], err.message);
}

/* ---- the time to the first event ---- */

typedef struct First {
    double t;          /* when the first line came, ns (0: none yet) */
} First;

static void on_first(const char *line, size_t len, void *data)
{
    (void)line, (void)len;
    First *f = data;
    if (f->t == 0)
        f->t = now_ns();
}

static void bench_first_event(const char *path, int n)
{
    static const char *const req[] = { "trace", "ba:work/1", "--max-events", "1" };
    double *first = malloc(sizeof(double) * (size_t)n), *total = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) {
        First f = { 0 };
        double t0 = now_ns();
        tvm_control_client *c = connect_to(path);
        call(c, 4, req, on_first, &f);
        double t1 = now_ns();
        tvm_control_close(c);
        if (f.t == 0)
            die("trace --max-events 1 returned no event", NULL);
        first[i] = (f.t - t0) / 1000.0;
        total[i] = (t1 - t0) / 1000.0;
    }
    printf("attaches=%d\n", n);
    printf("first_event_us_median=%.1f\n", percentile(first, n, 50));
    printf("first_event_us_p99=%.1f\n", percentile(first, n, 99));
    printf("attach_total_us_median=%.1f\n", percentile(total, n, 50));
    free(first);
    free(total);
}

/* ---- throughput while a client streams ---- */

typedef struct Stream {
    const char *path, *pattern, *seconds;
    _Atomic uint64_t lines;    /* events read */
    char stopped[256];         /* the session's {trace_stopped,...} record */
} Stream;

static void on_stream(const char *line, size_t len, void *data)
{
    Stream *s = data;
    if (!strncmp(line, "{trace,", 7))
        atomic_fetch_add_explicit(&s->lines, 1, memory_order_relaxed);
    else if (!strncmp(line, "{trace_stopped,", 15))
        snprintf(s->stopped, sizeof s->stopped, "%.*s", (int)len, line);
}

static void *stream_thread(void *arg)
{
    Stream *s = arg;
    const char *const req[] = { "trace", s->pattern, "--duration", s->seconds };
    tvm_control_client *c = connect_to(s->path);
    call(c, 4, req, on_stream, s);
    tvm_control_close(c);
    return NULL;
}

/* Calls per second in a window of ms, with a client tracing `pattern`
 * (NULL: no client); *events: lines per second the client read. */
static double window_calls(const char *path, const char *pattern, double ms, double *events,
                           double *lost)
{
    Stream s = { .path = path, .pattern = pattern };
    char secs[32];
    snprintf(secs, sizeof secs, "%.3f", ms / 1000.0 + 0.6);
    s.seconds = secs;
    pthread_t th;
    if (pattern) {
        pthread_create(&th, NULL, stream_thread, &s);
        sleep_ms(300);          /* connected, checked, armed; streaming */
    }
    uint64_t l0 = atomic_load(&s.lines);
    Window win;
    window_begin(&win);
    double t0 = now_ns();
    sleep_ms(ms);
    double gap, calls;
    window_end(&win, &gap, &calls);
    double dt = (now_ns() - t0) / 1e9;
    *events = (double)(atomic_load(&s.lines) - l0) / dt;
    *lost = 0;
    if (pattern) {
        pthread_join(th, NULL);
        unsigned long long w, l;
        if (sscanf(s.stopped, "{trace_stopped,duration,%llu,%llu}", &w, &l) != 2)
            die("the stream's last record", s.stopped);
        *lost = (double)l;
    }
    return calls / dt;
}

static void bench_stream(const char *path, int runs, double ms)
{
    double none[64], armed[64], stream[64], ev[64], lost[64], unused, unused2;
    for (int r = 0; r < runs; r++) {
        none[r] = window_calls(path, NULL, ms, &unused, &unused2);
        armed[r] = window_calls(path, "ba:cold/0", ms, &unused, &unused2);
        stream[r] = window_calls(path, "ba:work/1", ms, &ev[r], &lost[r]);
    }
    double n = median(none, runs), a = median(armed, runs), s = median(stream, runs);
    printf("calls_per_s_none=%.0f\n", n);
    printf("calls_per_s_armed=%.0f\n", a);
    printf("calls_per_s_stream=%.0f\n", s);
    printf("armed_over_none=%.3f\n", a / n);
    printf("stream_over_none=%.3f\n", s / n);
    printf("stream_events_per_s=%.0f\n", median(ev, runs));
    printf("stream_lost=%.0f\n", median(lost, runs));
}

/* ---- stacks of many processes ---- */

static void on_count(const char *line, size_t len, void *data)
{
    (void)line, (void)len;
    ++*(long *)data;
}

static void bench_stacks(tvm_env *env, const char *path, int runs, int procs)
{
    tvm_term n;
    tvm_make_int(env, 5, &n);
    for (int i = 0; i < procs; i++) {
        tvm_pid pid;
        if (tvm_spawn(env, "ba", "idle", 1, &n, &pid) != TVM_OK)
            die("spawn idle", NULL);
    }
    sleep_ms(1000);             /* every one in its receive */
    static const char *const req[] = { "stacks" };
    double ms[64], gap[64], noop[64], blocked[64], noop_blocked[64], runq[64], noop_runq[64];
    double calls, worst = 0, noop_worst = 0;
    long lines = 0;
    int valid = 0;
    for (int r = 0; r < runs; r++) {
        tvm_control_client *c = connect_to(path);
        lines = 0;
        Window a, b;
        window_begin(&a);
        double t0 = now_ns();
        call(c, 1, req, on_count, &lines);
        ms[r] = (now_ns() - t0) / 1e6;
        window_end(&a, &gap[r], &calls);
        tvm_control_close(c);
        window_begin(&b);
        sleep_ms(ms[r]);
        window_end(&b, &noop[r], &calls);
        worst = gap[r] > worst ? gap[r] : worst;
        noop_worst = noop[r] > noop_worst ? noop[r] : noop_worst;
        if (!a.migrated && !b.migrated) {
            blocked[valid] = (double)a.vcsw;
            noop_blocked[valid] = (double)b.vcsw;
            runq[valid] = a.runq_us;
            noop_runq[valid++] = b.runq_us;
        }
    }
    printf("stacks_procs=%d\n", procs);
    printf("stacks_lines=%ld\n", lines);
    printf("stacks_ms=%.1f\n", median(ms, runs));
    printf("stacks_gap_max_us=%.1f\n", median(gap, runs));
    printf("noop_gap_max_us=%.1f\n", median(noop, runs));
    printf("stacks_gap_max_us_worst=%.1f\n", worst);
    printf("noop_gap_max_us_worst=%.1f\n", noop_worst);
    printf("stacks_windows_unmigrated=%d\n", valid);
    if (valid) {
        printf("stacks_worker_vcsw=%.1f\n", median(blocked, valid));
        printf("noop_worker_vcsw=%.1f\n", median(noop_blocked, valid));
        printf("stacks_worker_runq_us=%.1f\n", median(runq, valid));
        printf("noop_worker_runq_us=%.1f\n", median(noop_runq, valid));
    }
}

int main(int argc, char **argv)
{
    int runs = 5, attaches = 200, procs = 20000;
    double window_ms = 1000;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--runs"))
            runs = (int)arg_long("--runs", v, 1, 64);
        else if (!strcmp(argv[i], "--attaches"))
            attaches = (int)arg_long("--attaches", v, 1, 100000);
        else if (!strcmp(argv[i], "--procs"))
            procs = (int)arg_long("--procs", v, 1, 1000000);
        else if (!strcmp(argv[i], "--window-ms"))
            window_ms = (double)arg_long("--window-ms", v, 10, 60000);
        else if (!strcmp(argv[i], "--workers"))
            nworkers = (int)arg_long("--workers", v, 1, MAX_WORKERS);
        else
            die("usage: bench_attach [--runs R] [--attaches N] [--procs N] [--window-ms MS] "
                "[--workers W]", NULL);
    }
    char dir[] = "/tmp/bench_attach.XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp", NULL);
    char ctl[64];
    snprintf(ctl, sizeof ctl, "%s/ctl", dir);
    setenv("TRACEVM_CONTROL_DIR", ctl, 1);
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (tvm_register_native(vm, "ba_nat", "tick", 1, nat_tick, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "ba.tasm", src, strlen(src), &err) != TVM_OK ||
        tvm_control_start(vm, &err) != TVM_OK)
        die("setup", err.message);
    const char *path = tvm_control_path(vm);
    tvm_env *env = tvm_env_new(vm);
    tvm_pid pids[MAX_WORKERS];
    for (int i = 0; i < nworkers; i++) {
        tvm_term idx;
        tvm_make_int(env, i, &idx);
        if (tvm_spawn(env, "ba", "worker", 1, &idx, &pids[i]) != TVM_OK)
            die("spawn worker", NULL);
    }
    Window w0;
    window_begin(&w0);          /* the workers run */
    printf("workers=%d\n", nworkers);
    bench_first_event(path, attaches);
    bench_stream(path, runs, window_ms);
    bench_stacks(env, path, runs, procs);
    atomic_store(&stop, 1);
    for (int i = 0; i < nworkers; i++) {
        tvm_term r;
        tvm_join(env, pids[i], &r);
    }
    tvm_env_free(env);
    tvm_destroy(vm);
    rmdir(ctl);
    rmdir(dir);
    return 0;
}
