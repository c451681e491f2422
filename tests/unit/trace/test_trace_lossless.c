/*
 * tests/unit/trace/test_trace_lossless.c - the full-ring policies through
 * the VM, with a sink the test holds: a callback that stops the collector
 * at the first event until the test opens a gate, so the traced process's
 * 4 KiB ring fills up and stays full for as long as the test wants.
 *   lossless: the traced process is suspended ("waiting", its progress
 *   counter stands still) while an untraced process on the same, only,
 *   scheduler ticks a thousand times more; once the gate opens every one
 *   of the N call events arrives, in order, and nothing is reported lost.
 *   drop: the traced process runs to its end behind the closed gate; what
 *   arrives is the events the ring held (no more than it can hold: nothing
 *   else kept them) and then one loss report for exactly the rest.
 * Nothing here depends on how long anything takes: each step waits for a
 * state the previous one must produce.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "trace/tr_event.h"
#include "vm/atomics.h"

static const char *const lt_src =
    "module lt\n"
    "export traced/1, spin/0, f/1\n"
    "function f/1 regs 1\n    ret r0\nend\n"
    /* traced(N): f(N), f(N-1), ..., f(1), ticking counter 0 after each */
    "function traced/1 regs 4\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    move r1, r0\n"
    "    call r1, r1, f/1\n"
    "    loadi r2, 0\n"
    "    callx r2, r2, lt_host:tick/1\n"
    "    addi r0, r0, -1\n"
    "    jump loop\n"
    "done:\n    loadk r0, ok\n    ret r0\n"
    "end\n"
    /* spin(): ticks counter 1 until tick says stop (1) */
    "function spin/0 regs 2\n"
    "loop:\n"
    "    loadi r0, 1\n"
    "    callx r0, r0, lt_host:tick/1\n"
    "    jeqi r0, 1, done\n"
    "    jump loop\n"
    "done:\n    ret r0\n"
    "end\n";

#define RING_BYTES 4096

static tvm_config one_sched = { .size = sizeof(tvm_config), .schedulers = 1 };
static tvm_vm *vm;
static tvm_env *env;

static void setup(void)
{
    vm = tvm_new(&one_sched);
    env = tvm_env_new(vm);
}

static void teardown(void)
{
    tvm_env_free(env);
    tvm_destroy(vm);
}

/* A broken policy hangs a step: fail it instead of the whole run. */
TestSuite(trace_lossless, .init = setup, .fini = teardown, .timeout = 120);

/* Written by the processes (tick), read by the test thread. */
static VmAtomic ticks[2], stop_spin;

static tvm_status tick(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    int64_t k = 0;
    cr_assert_eq(tvm_get_int(e, argv[0], &k), TVM_OK);
    vm_atomic_fetch_add_relaxed(&ticks[k], 1);
    return tvm_make_int(e, (int64_t)vm_atomic_load_relaxed(&stop_spin), result);
}

/* The sink: holds the collector in its first event until `open`, then
 * keeps the text of every event, one per line. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool open, held;
    char *text;
    size_t len, cap;
} gate = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void gate_event(const tvm_trace_event *ev, void *data)
{
    (void)data;
    pthread_mutex_lock(&gate.lock);
    gate.held = true;
    pthread_cond_broadcast(&gate.cond);
    while (!gate.open)
        pthread_cond_wait(&gate.cond, &gate.lock);
    size_t n = strlen(ev->text);
    if (gate.cap - gate.len < n + 2) {
        gate.cap = gate.cap ? 2 * gate.cap + n : 1 << 20;
        gate.text = realloc(gate.text, gate.cap);
    }
    memcpy(gate.text + gate.len, ev->text, n);
    gate.len += n;
    gate.text[gate.len++] = '\n';
    gate.text[gate.len] = '\0';
    pthread_mutex_unlock(&gate.lock);
}

static void gate_open(void)
{
    pthread_mutex_lock(&gate.lock);
    gate.open = true;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.lock);
}

/* Loads the program, starts the pipeline (4 KiB rings, the gated sink)
 * and the spinner (untraced); the traced process gets the call flag.
 * Returns once the collector is held in the sink. */
static tvm_pid start(tvm_trace_policy policy, int64_t n, tvm_pid *spinner)
{
    tvm_error err;
    load_ok(vm, "lt", lt_src);
    cr_assert_eq(tvm_register_native(vm, "lt_host", "tick", 1, tick, NULL, &err), TVM_OK);
    int n_matched = 0;
    cr_assert_eq(tvm_trace_pattern(vm, "lt:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, &n_matched, &err),
                 TVM_OK);
    cr_assert_eq(n_matched, 1);
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK, .callback = gate_event,
                            .ring_bytes = RING_BYTES, .policy = policy };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_spawn(env, "lt", "spin", 0, NULL, spinner), TVM_OK);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    tvm_term a;
    tvm_pid pid;
    cr_assert_eq(tvm_make_int(env, n, &a), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "lt", "traced", 1, &a, &pid), TVM_OK);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, false), TVM_OK);
    pthread_mutex_lock(&gate.lock);
    while (!gate.held)
        pthread_cond_wait(&gate.cond, &gate.lock);
    pthread_mutex_unlock(&gate.lock);
    return pid;
}

/* Opens the gate, joins both processes, stops the pipeline. */
static void finish(tvm_pid traced, tvm_pid spinner)
{
    tvm_term r;
    gate_open();
    cr_assert_eq(tvm_join(env, traced, &r), TVM_OK);
    vm_atomic_store_relaxed(&stop_spin, 1);
    cr_assert_eq(tvm_join(env, spinner, &r), TVM_OK);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
}

#define N_CALLS 20000

Test(trace_lossless, suspends_the_traced_process_only)
{
    tvm_pid spinner;
    tvm_pid pid = start(TVM_TRACE_LOSSLESS, N_CALLS, &spinner);
    /* The collector is held: the ring fills and the process is suspended. */
    wait_proc_state(vm, pid, "waiting");
    uintptr_t t1 = vm_atomic_load_relaxed(&ticks[0]), s1 = vm_atomic_load_relaxed(&ticks[1]);
    cr_assert_lt(t1, N_CALLS, "the traced process finished without being held up");
    /* The untraced process on the same scheduler runs on meanwhile. */
    while (vm_atomic_load_relaxed(&ticks[1]) < s1 + 1000)
        usleep(1000);
    cr_assert_eq(vm_atomic_load_relaxed(&ticks[0]), t1,
                 "the traced process ran on while its ring was full (%lu -> %lu)",
                 (unsigned long)t1, (unsigned long)vm_atomic_load_relaxed(&ticks[0]));
    char state[32];
    cr_assert_str_eq(proc_state(vm, pid, state, sizeof state), "waiting");
    finish(pid, spinner);
    cr_assert_eq(vm_atomic_load_relaxed(&ticks[0]), N_CALLS);
    /* Every event, in order, nothing lost. */
    char want[96];
    const char *p = gate.text;
    for (int i = N_CALLS; i > 0; i--) {
        int len = snprintf(want, sizeof want, "{trace,<0.%lu.0>,call,{lt,f,[%d]}}\n",
                           (unsigned long)pid, i);
        cr_assert(!strncmp(p, want, (size_t)len), "event for f(%d): got %.60s", i, p);
        p += len;
    }
    cr_assert_str_eq(p, "", "more than the calls: %.80s", p);
}

Test(trace_lossless, drop_counts_every_lost_event)
{
    tvm_pid spinner;
    tvm_pid pid = start(TVM_TRACE_DROP, 10 * N_CALLS, &spinner);
    /* The collector is held, yet the traced process runs to its end. */
    while (vm_atomic_load_relaxed(&ticks[0]) < 10 * N_CALLS)
        usleep(1000);
    finish(pid, spinner);
    /* What the ring held: calls f(N), f(N-1), ... f(N-K+1), in order, then
     * one report of the rest, at the end (nothing else fitted after the
     * ring filled). */
    int next = 10 * N_CALLS, events = 0;
    unsigned long sched = 9, lost = 0;
    char *line = strtok(gate.text, "\n");
    for (; line && strncmp(line, "{trace_lost,", 12) != 0; line = strtok(NULL, "\n")) {
        int arg;
        cr_assert_eq(sscanf(line, "{trace,<0.%*u.0>,call,{lt,f,[%d]}}", &arg), 1, "%s", line);
        cr_assert_eq(arg, next, "%s", line);
        next--;
        events++;
    }
    cr_assert_not_null(line, "no loss reported after %d events", events);
    cr_assert_eq(sscanf(line, "{trace_lost,{sched,%lu},%lu}", &sched, &lost), 2, "%s", line);
    cr_assert_eq(sched, 0);
    cr_assert_eq(lost, (unsigned long)next, "%d events, %lu reported lost", events, lost);
    cr_assert_null(strtok(NULL, "\n"), "more after the loss report");
    /* 200,000 events went by a 4 KiB ring: no more arrived than it holds. */
    cr_assert_gt(events, 0);
    cr_assert_leq(events, RING_BYTES / (int)sizeof(TrRecord), "%d events", events);
}
