/*
 * tests/stress/stress_time.c - call_time's tables under concurrency (the
 * protocol in breakpoints/bp_time.c), for TSan and ASan:
 *   1. the tables alone: a writer per scheduler shard and two sharing
 *      shard 0, a reader walking them meanwhile (counts only grow, never
 *      past the final value); the final sums are exact;
 *   2. the VM: processes on two schedulers and a foreign thread (tvm_call,
 *      shard 0) call call_time-traced functions in a loop while one thread
 *      reads tvm_call_time and trace_info without pause and another runs
 *      true / pause / restart / false over and over (fresh tables swapped
 *      in, old ones freed after the grace period, tables growing as new
 *      processes appear); afterwards, a restart and a process making
 *      exactly 1,000 calls read back exactly 1,000;
 *   3. on_load: a module reloaded 60 times (on_load local + call_count +
 *      call_time) while processes on both schedulers call it remotely
 *      without pause: each version is armed before its load publishes it,
 *      with no wait (TSan checks that the publication orders it); after
 *      the last load, 1,000 calls read back as exactly 1,000 in both.
 * A plain program (exit 0 = pass).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "breakpoints/bp_time.h"
#include "include/tracevm.h"
#include "tests/stress/stress_util.h"
#include "vm/atomics.h"

static const char *const stress_name = "stress_time";

/* ==== 1. the tables ==== */

#define T_PIDS 300
#define T_ROUNDS 200

typedef struct TabWriter {
    BpTime *t;
    uint32_t slot;
} TabWriter;

static VmAtomic tab_stop, tab_reader_ready;

static void *tab_writer(void *arg)
{
    TabWriter *w = arg;
    /* Not before the reader runs: the point is to overlap with it. */
    while (!vm_atomic_load_acquire(&tab_reader_ready))
        sched_yield();
    for (int r = 0; r < T_ROUNDS; r++)
        for (uint64_t pid = 0; pid < T_PIDS; pid++)
            bp_time_add(w->t, w->slot, pid * 31 + 5, 1, 2);
    return NULL;
}

static void *tab_reader(void *arg)
{
    BpTime *t = arg;
    static uint64_t last[T_PIDS];
    do {
        BpTimeSample *v;
        size_t n = bp_time_read(t, &v);
        for (size_t i = 0; i < n; i++) {
            uint64_t k = (v[i].pid - 5) / 31;
            if (k >= T_PIDS || v[i].count < last[k] || v[i].count > 4 * T_ROUNDS)
                exit(fail("tables: a reader saw a count go back or past the end"));
            last[k] = v[i].count;
        }
        free(v);
        vm_atomic_store_release(&tab_reader_ready, 1);
    } while (!vm_atomic_load_acquire(&tab_stop));
    return NULL;
}

static int tables(void)
{
    BpTime *t = bp_time_new(3);
    TabWriter w[4] = { { t, 1 }, { t, 2 }, { t, 0 }, { t, 0 } };
    pthread_t th[4], rd;
    pthread_create(&rd, NULL, tab_reader, t);
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, tab_writer, &w[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    vm_atomic_store_release(&tab_stop, 1);
    pthread_join(rd, NULL);
    BpTimeSample *v;
    size_t n = bp_time_read(t, &v);
    int bad = n != T_PIDS;
    for (size_t i = 0; i < n && !bad; i++)
        bad = v[i].count != 4 * T_ROUNDS;
    free(v);
    bp_time_free(t);
    return bad ? fail("tables: final sums are wrong") : 0;
}

/* ==== 2. the VM ==== */

static VmAtomic stop;

static tvm_status nat_stop(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res,
                           void *data)
{
    (void)argc, (void)argv, (void)data;
    return tvm_make_int(env, (int64_t)vm_atomic_load_relaxed(&stop), res);
}

/* loop(0): f() and g() until st:stop() says so; count(N): f() N times.
 * f calls g; g calls h (both traced); h is untraced. */
static const char src[] =
    "module ct\n"
    "export loop/1, count/1, f/0\n"
    "function loop/1 regs 2\n"
    "top:\n"
    "    call r1, r1, f/0\n"
    "    callx r1, r1, st:stop/0\n"
    "    jnei r1, 0, done\n"
    "    jump top\n"
    "done:\n    ret r1\nend\n"
    "function count/1 regs 2\n"
    "top:\n    jeqi r0, 0, done\n    call r1, r1, f/0\n    addi r0, r0, -1\n    jump top\n"
    "done:\n    ret r0\nend\n"
    "function f/0 regs 1\n    call r0, r0, g/0\n    ret r0\nend\n"
    "function g/0 regs 1\n    call r0, r0, h/0\n    ret r0\nend\n"
    "function h/0 regs 1\n    loadi r0, 1\n    ret r0\nend\n";

static tvm_vm *vm;

static void tp(const char *pat, tvm_tp_action how)
{
    tvm_error err;
    if (tvm_trace_pattern(vm, pat, how, TVM_TP_CALL_TIME, NULL, &err) != TVM_OK)
        exit(fail(err.message));
}

static void *reader(void *arg)
{
    (void)arg;
    tvm_env *env = tvm_env_new(vm);
    long reads = 0;
    while (!vm_atomic_load_acquire(&stop)) {
        tvm_call_time_entry e[64];
        size_t n;
        tvm_status st = tvm_call_time(vm, "ct:f/0", e, 64, &n);
        if (st != TVM_OK && st != TVM_ERR_NOTFOUND)
            exit(fail("tvm_call_time failed"));
        for (size_t i = 1; i < n && i < 64; i++)
            if (e[i].pid <= e[i - 1].pid)
                exit(fail("lines not ordered by pid"));
        tvm_term t;
        if (tvm_trace_info(env, "ct:g/0", "call_time", &t, NULL) != TVM_OK)
            exit(fail("trace_info failed"));
        reads++;
    }
    tvm_env_free(env);
    return (void *)reads;
}

/* A foreign thread calling traced code through tvm_call: shard 0. */
static void *foreign(void *arg)
{
    (void)arg;
    tvm_env *env = tvm_env_new(vm);
    while (!vm_atomic_load_acquire(&stop)) {
        tvm_term r;
        if (tvm_call(env, "ct", "f", 0, NULL, &r) != TVM_OK)
            exit(fail("foreign tvm_call failed"));
    }
    tvm_env_free(env);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int vm_run(void)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true };
    vm = tvm_new(&cfg);
    tvm_error err;
    if (!vm || tvm_register_native(vm, "st", "stop", 0, nat_stop, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "ct.tasm", src, sizeof src - 1, &err) != TVM_OK)
        return fail(err.message);
    tvm_env *env = tvm_env_new(vm);
    tvm_trace_flags_all(vm, TVM_TRACE_ALL, TVM_TRACE_CALL, true);
    tp("ct:f/0", TVM_TP_TRUE);
    tp("ct:g/0", TVM_TP_TRUE);
    tvm_pid pids[4];
    for (int i = 0; i < 4; i++)
        pids[i] = spawn_int(env, "ct", "loop", 0);
    pthread_t rd, fg;
    pthread_create(&rd, NULL, reader, NULL);
    pthread_create(&fg, NULL, foreign, NULL);
    static const tvm_tp_action seq[] = { TVM_TP_RESTART, TVM_TP_PAUSE, TVM_TP_RESTART,
                                         TVM_TP_FALSE, TVM_TP_TRUE };
    double end = now_s() + 1.5;
    int toggles = 0;
    while (now_s() < end) {
        tp(toggles % 2 ? "ct:g/0" : "ct:_/_", seq[toggles % 5]);
        toggles++;
        /* a new process now and then: new lines, tables that grow */
        if (toggles % 10 == 0) {
            tvm_term r;
            tvm_pid p = spawn_int(env, "ct", "count", 20);
            if (tvm_join(env, p, &r) != TVM_OK)
                return fail("count/1 failed");
        }
    }
    vm_atomic_store_release(&stop, 1);
    void *reads;
    pthread_join(rd, &reads);
    pthread_join(fg, NULL);
    for (int i = 0; i < 4; i++) {
        tvm_term r;
        if (tvm_join(env, pids[i], &r) != TVM_OK)
            return fail("loop/1 failed");
    }
    /* exact after a restart: 1,000 calls of f by one new process */
    tp("ct:f/0", TVM_TP_TRUE);
    tp("ct:f/0", TVM_TP_RESTART);
    tvm_term r;
    tvm_pid p = spawn_int(env, "ct", "count", 1000);
    if (tvm_join(env, p, &r) != TVM_OK)
        return fail("count/1 failed");
    tvm_call_time_entry e[4];
    size_t n;
    if (tvm_call_time(vm, "ct:f/0", e, 4, &n) != TVM_OK || n != 1 || e[0].pid != p ||
        e[0].count != 1000)
        return fail("after restart, 1,000 calls did not read back as 1,000");
    printf("stress_time: %d toggles, %ld reads while 4 processes and a foreign thread wrote\n",
           toggles, (long)reads);
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}

/* ==== 3. on_load while the module is called ==== */

/* rl:f() returns its version; ct:rl_loop(0) calls rl:f() until stop. */
static const char rl_loop_src[] =
    "module rlc\n"
    "export loop/1, count/1\n"
    "function loop/1 regs 2\n"
    "top:\n"
    "    callx r1, r1, rl:f/0\n"
    "    callx r1, r1, st:stop/0\n"
    "    jnei r1, 0, done\n"
    "    jump top\n"
    "done:\n    ret r1\nend\n"
    "function count/1 regs 2\n"
    "top:\n    jeqi r0, 0, done\n    callx r1, r1, rl:f/0\n    addi r0, r0, -1\n    jump top\n"
    "done:\n    ret r0\nend\n";

static void load_version(int v)
{
    char text[160];
    int n = snprintf(text, sizeof text,
                     "module rl\nexport f/0\nfunction f/0 regs 1\n    loadi r0, %d\n    ret r0\nend\n",
                     v);
    tvm_error err;
    if (tvm_load_string(vm, "rl.tasm", text, (size_t)n, &err) != TVM_OK)
        exit(fail(err.message));
}

static int on_load_run(void)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true };
    vm = tvm_new(&cfg);
    tvm_error err;
    vm_atomic_store_release(&stop, 0);
    if (!vm || tvm_register_native(vm, "st", "stop", 0, nat_stop, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "rlc.tasm", rl_loop_src, sizeof rl_loop_src - 1, &err) != TVM_OK ||
        tvm_trace_pattern(vm, "on_load", TVM_TP_TRUE,
                          TVM_TP_LOCAL | TVM_TP_CALL_COUNT | TVM_TP_CALL_TIME, NULL, &err) != TVM_OK)
        return fail(err.message);
    tvm_trace_flags_all(vm, TVM_TRACE_ALL, TVM_TRACE_CALL, true);
    load_version(0);
    tvm_env *env = tvm_env_new(vm);
    tvm_pid pids[3];
    for (int i = 0; i < 3; i++)
        pids[i] = spawn_int(env, "rlc", "loop", 0);
    for (int v = 1; v <= 60; v++)
        load_version(v);
    vm_atomic_store_release(&stop, 1);
    for (int i = 0; i < 3; i++) {
        tvm_term r;
        if (tvm_join(env, pids[i], &r) != TVM_OK)
            return fail("rlc:loop/1 failed");
    }
    load_version(61);
    tvm_term r;
    tvm_pid p = spawn_int(env, "rlc", "count", 1000);
    if (tvm_join(env, p, &r) != TVM_OK)
        return fail("rlc:count/1 failed");
    int64_t c = 0;
    tvm_call_time_entry e[2];
    size_t n;
    if (tvm_call_count(vm, "rl:f/0", &c) != TVM_OK || c != 1000 ||
        tvm_call_time(vm, "rl:f/0", e, 2, &n) != TVM_OK || n != 1 || e[0].count != 1000)
        return fail("on_load: 1,000 calls of the last version did not read back as 1,000");
    tvm_env_free(env);
    tvm_destroy(vm);
    printf("stress_time: 62 loads with on_load armed while 3 processes called the module\n");
    return 0;
}

int main(void)
{
    alarm(120);
    int rc = tables();
    if (!rc)
        rc = vm_run();
    if (!rc)
        rc = on_load_run();
    if (!rc)
        printf("stress_time: ok\n");
    return rc;
}
