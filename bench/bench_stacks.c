/*
 * bench/bench_stacks.c - the cost of capturing a process's stack
 * (stacks/st.h) and of the interlock on the context switch.
 *   suspended_us      st_capture of a process suspended in a receive
 *                     (context mode) whose joined stack has `frames`
 *                     frames (VM -> native -> VM -> native, about 30)
 *   join_us           st_join + st_format of that capture (names included,
 *                     cached)
 *   running_us        st_capture of the same stack while the native at its
 *                     top spins (signal mode: the round trip to the other
 *                     scheduler thread), median of --samples
 *   running_p99_us    its 99th percentile
 *   switch_plain_ns   a fiber round trip (in and out) with vm_fiber_switch
 *   switch_overhead_ns  what vm_il_switch_in + vm_il_switch_out add to it: the
 *                     interlock's cost per process switch
 * Prints key=value lines: medians over --runs timed rounds.
 *
 * usage: bench_stacks [--runs R] [--samples N]
 */
#define BENCH_PROG "bench_stacks"
#define _GNU_SOURCE

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "bench/bench_util.h"
#include "include/tracevm.h"
#include "stacks/st.h"
#include "vm/interlock_switch.h"
#include "vm/fiber.h"
#include "vm/sched.h"

/* deep(N) recurses N times, then calls host:outer/0 (which calls back
 * into cb(N), recursing again, then host:inner/0). */
static const char *src =
    "module bs\n"
    "export deep/1, cb/0\n"
    "function deep/1 regs 3\n"
    "    jeqi r0, 0, bottom\n"
    "    addi r1, r0, -1\n"
    "    move r0, r1\n"
    "    call r0, r0, deep/1\n"
    "    ret r0\n"
    "bottom:\n"
    "    callx r0, r0, host:outer/0\n"
    "    ret r0\n"
    "end\n"
    "function rec/1 regs 3\n"
    "    jeqi r0, 0, bottom\n"
    "    addi r1, r0, -1\n"
    "    move r0, r1\n"
    "    call r0, r0, rec/1\n"
    "    ret r0\n"
    "bottom:\n"
    "    callx r0, r0, host:inner/0\n"
    "    ret r0\n"
    "end\n"
    "function cb/0 regs 2\n"
    "    loadi r0, 8\n"
    "    call r0, r0, rec/1\n"
    "    ret r0\n"
    "end\n";

static _Atomic int spin_mode, reached, release;

static tvm_status nat_outer(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res, void *d)
{
    (void)argc, (void)argv, (void)d;
    tvm_status st = tvm_call(env, "bs", "cb", 0, NULL, res);
    __asm__ volatile("" ::: "memory");   /* no tail call: this frame stays */
    return st;
}

static tvm_status nat_inner(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res, void *d)
{
    (void)argc, (void)argv, (void)d;
    atomic_store(&reached, 1);
    if (atomic_load(&spin_mode)) {
        while (!atomic_load(&release))
            ;
        return tvm_make_atom(env, "ok", res);
    }
    return tvm_receive(env, -1, res);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static tvm_pid start(tvm_env *env, int spin)
{
    atomic_store(&spin_mode, spin);
    atomic_store(&reached, 0);
    atomic_store(&release, 0);
    tvm_term n;
    tvm_pid pid;
    tvm_make_int(env, 9, &n);
    if (tvm_spawn(env, "bs", "deep", 1, &n, &pid) != TVM_OK)
        die("spawn", NULL);
    while (!atomic_load(&reached))
        ;
    return pid;
}

static void finish(tvm_env *env, tvm_pid pid)
{
    tvm_term m, r;
    atomic_store(&release, 1);
    tvm_make_atom(env, "go", &m);
    tvm_send(env, pid, m);
    tvm_join(env, pid, &r);
}

/* ---- the interlock on a bare fiber round trip ---- */

static void *main_sp;
static Fiber *fib;
static Process *fp_proc;
static int hooks;

static void body(void *arg)
{
    (void)arg;
    for (;;) {
        if (hooks)
            vm_il_switch_out(fp_proc);
        vm_fiber_switch(&fib->sp, main_sp);
    }
}

static double round_trips(int with_hooks, long n)
{
    hooks = with_hooks;
    double t0 = now_ns();
    if (with_hooks) {
        for (long i = 0; i < n; i++)
            vm_fiber_switch(&main_sp, vm_il_switch_in(fp_proc));
    } else {
        for (long i = 0; i < n; i++)
            vm_fiber_switch(&main_sp, fib->sp);
    }
    return (now_ns() - t0) / (double)n;
}

static void bench_switch(int runs)
{
    FiberPool pool;
    vm_fiber_pool_init(&pool, 0, 1);
    fib = vm_fiber_alloc(&pool);
    fp_proc = calloc(1, sizeof(Process));
    fp_proc->fiber = fib;
    vm_fiber_init(fib, body, NULL);
    double plain[64], over[64];
    long n = 2000000;
    round_trips(0, n / 10);
    for (int r = 0; r < runs; r++) {
        double a = round_trips(0, n), b = round_trips(1, n), c = round_trips(0, n);
        plain[r] = (a + c) / 2;
        over[r] = b - plain[r];
    }
    printf("switch_plain_ns=%.2f\n", median(plain, runs));
    printf("switch_overhead_ns=%.2f\n", median(over, runs));
}

int main(int argc, char **argv)
{
    int runs = 7, samples = 1000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = (int)arg_long("--runs", argv[++i], 1, 64);
        else if (!strcmp(argv[i], "--samples") && i + 1 < argc)
            samples = (int)arg_long("--samples", argv[++i], 100, 100000);
        else
            die("usage: bench_stacks [--runs R] [--samples N]", NULL);
    }
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (tvm_register_native(vm, "host", "outer", 0, nat_outer, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "host", "inner", 0, nat_inner, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "bs.tasm", src, strlen(src), &err) != TVM_OK)
        die("setup", err.message);
    tvm_env *env = tvm_env_new(vm);
    SchedSystem *sys = vm_sched_start(vm, 2);
    StStack *s = malloc(sizeof *s);
    StFrame fr[ST_MAX_NATIVE + ST_MAX_VM];
    static char text[65536];

    /* Suspended: context mode. */
    tvm_pid pid = start(env, 0);
    Process *p = vm_proc_get(sys, pid);
    do
        st_capture(p, s, NULL);
    while (s->mode != ST_MODE_CONTEXT);
    bool trunc;
    size_t frames = st_join(s, fr, sizeof fr / sizeof fr[0], &trunc);
    double susp[64], join[64];
    for (int r = 0; r < runs; r++) {
        int n = 2000;
        double t0 = now_ns();
        for (int i = 0; i < n; i++)
            st_capture(p, s, NULL);
        susp[r] = (now_ns() - t0) / n / 1000.0;
        t0 = now_ns();
        for (int i = 0; i < n / 10; i++)
            st_format(s, text, sizeof text);
        join[r] = (now_ns() - t0) / (n / 10) / 1000.0;
    }
    vm_proc_put(sys, p);
    finish(env, pid);

    /* Running: signal mode. */
    pid = start(env, 1);
    p = vm_proc_get(sys, pid);
    double *rt = malloc(sizeof(double) * (size_t)samples);
    int got = 0;
    for (int i = 0; i < samples + 50; i++) {
        double t0 = now_ns();
        StResult res = st_capture(p, s, NULL);
        double dt = (now_ns() - t0) / 1000.0;
        if (res == ST_R_OK && s->mode == ST_MODE_SIGNAL && i >= 50)
            rt[got++] = dt;
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
    }
    size_t rframes = st_join(s, fr, sizeof fr / sizeof fr[0], &trunc);
    vm_proc_put(sys, p);
    finish(env, pid);
    if (got == 0)
        die("no signal-mode capture succeeded", NULL);
    qsort(rt, (size_t)got, sizeof *rt, cmp_d);

    printf("frames=%zu\n", frames);
    printf("running_frames=%zu\n", rframes);
    printf("suspended_us=%.3f\n", median(susp, runs));
    printf("join_us=%.3f\n", median(join, runs));
    printf("running_us=%.2f\n", rt[got / 2]);
    printf("running_p99_us=%.2f\n", rt[(got * 99) / 100]);
    printf("running_ok=%d\n", got);
    bench_switch(runs);
    free(rt);
    free(s);
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}
