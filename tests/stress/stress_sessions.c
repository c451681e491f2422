/*
 * tests/stress/stress_sessions.c - trace sessions created and destroyed
 * in a loop while processes run traced code on every scheduler (the
 * breakpoint torture, stress_bp.c, extended to sessions).
 *
 * 2 x schedulers worker processes loop over calls of candidate functions
 * (remote and local calls, tail and body recursion) and send each other
 * messages, while for SECONDS (6 s; STRESS_SESSIONS_SECONDS changes it):
 *   - two foreign threads each create a session (a callback sink, the
 *     drop or the lossless policy, small or large rings, sometimes
 *     max_events or a rate that drops or stops), set patterns of every
 *     kind on the candidates (local with a return_trace spec, global,
 *     call_count, call_time, meta to a worker, on_load) and flags for
 *     every process and new ones (call, return_to, procs, running, send,
 *     receive), read trace_info, call counts and call times, let the
 *     workers run traced for a moment, then destroy it;
 *   - a VM process does the same with trace:session_create/3 (its tracer
 *     a process that drains its mailbox), trace:function/4,
 *     trace:process/4 and trace:session_destroy/1, and now and then
 *     lets the tracer exit instead (the owner's exit destroys it);
 *   - the default session keeps call_count on c:a/1 and call tracing of
 *     the workers into a counting sink throughout.
 * Then the churners stop, every worker acknowledges, and each makes
 * exactly ROUNDS more rounds: the default session's call count of c:a/1
 * must be exact, every session ever created must be gone
 * (tvm_session_info_get: TVM_ERR_NOTFOUND), and a new session must find
 * no setting left on any candidate or worker.  A crash, an exception, a
 * wrong count or a sanitizer report (ASan: a leak; TSan: a race) fails.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "include/tracevm.h"
#include "tests/stress/stress_util.h"
#include "trace/tr_vm.h"
#include "vm/atom.h"
#include "vm/breakpoint.h"
#include "vm/sched.h"
#include "vm/vm.h"

static const char *const stress_name = "stress_sessions";

#define SCHEDULERS 2
#define WORKERS (2 * SCHEDULERS)
#define SECONDS 6.0
#define ROUNDS 5000
#define MAX_IDS 100000

static const char *const c_src =
    "module c\n"
    "export a/1, b/1, tl/1, rec/1\n"
    "function a/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function b/1 regs 1\n    call r0, r0, la/1\n    ret r0\nend\n"
    "function la/1 regs 1\n    addi r0, r0, 2\n    ret r0\nend\n"
    "function tl/1 regs 1\n    tailcall r0, t2/1\nend\n"
    "function t2/1 regs 1\n    addi r0, r0, 3\n    ret r0\nend\n"
    "function rec/1 regs 2\n"
    "    jeqi r0, 0, zero\n    addi r1, r0, -1\n    call r1, r1, rec/1\n    addi r0, r1, 1\n"
    "zero:\n    ret r0\nend\n";

static const char *const w_src =
    "module w\n"
    "export worker/1, drain/0, churn/1\n"
    /* round(Peer): one round of candidate calls and a message to Peer */
    "function round/1 regs 3\n"
    "    loadi r1, 1\n    callx r1, r1, c:a/1\n"
    "    loadi r1, 2\n    callx r1, r1, c:b/1\n"
    "    loadi r1, 3\n    callx r1, r1, c:tl/1\n"
    "    loadi r1, 3\n    callx r1, r1, c:rec/1\n"
    "    move r1, r0\n    loadk r2, hello\n    callx r1, r1, erlang:send/2\n"
    "    ret r0\nend\n"
    /* worker(Peer): rounds until a message comes; then t:ack(), waits
     * for K and makes exactly K rounds */
    "function worker/1 regs 5\n"
    "top:\n"
    "    move r1, r0\n    call r1, r1, round/1\n"
    "    recv r1, again\n    accept\n    jump stop\n"
    "again:\n    jump top\n"
    "stop:\n    callx r1, r1, t:ack/0\n"
    "wait_go:\n"
    "    recv r1, nomsg\n    accept\n    jump go\n"
    "nomsg:\n    loadk r3, infinity\n    wait r3, never\n    jump wait_go\n"
    "never:\n    jump wait_go\n"
    "go:\n    move r2, r1\n"
    "rounds:\n"
    "    jeqi r2, 0, done\n    move r3, r0\n    call r3, r3, round/1\n"
    "    addi r2, r2, -1\n    jump rounds\n"
    "done:\n    ret r1\nend\n"
    /* drain(): drops every message until quit */
    "function drain/0 regs 3\n"
    "top:\n    recv r0, none\n    accept\n"
    "    loadk r1, quit\n    jeq r0, r1, out\n    jump top\n"
    "none:\n    loadk r2, infinity\n    wait r2, never\n    jump top\n"
    "never:\n    jump top\n"
    "out:\n    ret r0\nend\n"
    /* churn(I): sessions from VM code until any message comes; returns I.
     * Anything a session that a limit stopped raises ends that round. */
    "function churn/1 regs 12\n"
    "top:\n"
    "    recv r1, go\n    accept\n    ret r0\n"
    "go:\n"
    "    addi r0, r0, 1\n"
    "    loadk r1, w\n    loadk r2, drain\n    loadk r3, []\n"
    "    callx r1, r1, erlang:spawn/3\n    move r7, r1\n"
    "    loadk r1, vmsess\n    move r2, r7\n    loadk r3, [{max_events, 50}]\n"
    "    loadi r4, 3\n    rem r4, r0, r4\n    jeqi r4, 0, create\n    loadk r3, []\n"
    "create:\n"
    "    try r4, no_session\n"
    "    callx r1, r1, trace:session_create/3\n"
    "    endtry\n"
    "    move r6, r1\n"
    "    try r8, cleanup\n"
    "    move r1, r6\n    loadk r2, {c, '_', '_'}\n    loadk r3, true\n    loadk r4, [local]\n"
    "    callx r1, r1, trace:function/4\n"
    "    move r1, r6\n    loadk r2, {c, a, 1}\n    loadk r3, true\n"
    "    loadk r4, [call_count, call_time]\n"
    "    callx r1, r1, trace:function/4\n"
    "    move r1, r6\n    loadk r2, all\n    loadk r3, true\n    loadk r4, [call, procs, send]\n"
    "    callx r1, r1, trace:process/4\n"
    "    loadi r1, 1\n    callx r1, r1, timer:sleep/1\n"
    "    endtry\n"
    "    loadi r4, 4\n    rem r4, r0, r4\n    jeqi r4, 1, no_session\n"
    "cleanup:\n"
    "    move r1, r6\n    callx r1, r1, trace:session_destroy/1\n"
    "no_session:\n"
    "    move r1, r7\n    loadk r2, quit\n    callx r1, r1, erlang:send/2\n"
    "    jump top\nend\n";

static tvm_vm *vm;
static atomic_bool stop_churn;
static atomic_int acks;
static atomic_long events, default_events;
static uint64_t ids[MAX_IDS];
static atomic_int nids;
static tvm_pid meta_target;

static tvm_status ack(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc, (void)argv, (void)data;
    atomic_fetch_add(&acks, 1);
    return tvm_make_atom(env, "ok", result);
}

static void count(const tvm_trace_event *ev, void *data)
{
    atomic_fetch_add_explicit((atomic_long *)data, ev->lost ? (long)ev->lost : 1,
                              memory_order_relaxed);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void must(tvm_status st, const tvm_error *err, const char *what)
{
    if (st != TVM_OK && st != TVM_ERR_BADARG) {
        /* BADARG: a limit stopped the session meanwhile, which is fine. */
        fprintf(stderr, "%s: %s: %s %s\n", stress_name, what, tvm_status_name(st),
                err ? err->message : "");
        exit(1);
    }
}

/* One foreign churner: sessions of every kind, created and destroyed. */
static void *churner(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    tvm_env *env = tvm_env_new(vm);
    static const char *const patterns[] = { "c:a/1", "c:_/_", "c:b/1", "c:rec/1", "c:t2/1" };
    for (unsigned i = 0; !atomic_load(&stop_churn); i++) {
        seed = seed * 1103515245u + 12345u;
        tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK, .callback = count,
                                .callback_data = &events };
        o.policy = (seed >> 4) % 3 == 0 ? TVM_TRACE_LOSSLESS : TVM_TRACE_DROP;
        o.ring_bytes = (seed >> 6) % 2 ? 4096 : 0;
        if ((seed >> 8) % 4 == 0)
            o.max_events = 100 + (seed >> 10) % 400;
        if ((seed >> 12) % 4 == 1)
            o.rate = 50, o.rate_window_ms = 5, o.rate_policy = (seed >> 14) % 2;
        tvm_session s;
        tvm_error err;
        tvm_status st = tvm_session_create(vm, "churn", &o, &s, &err);
        if (st == TVM_ERR_LIMIT)
            continue;
        must(st, &err, "create");
        int k = atomic_fetch_add(&nids, 1);
        if (k < MAX_IDS)
            ids[k] = s.id;
        const char *pat = patterns[(seed >> 16) % 5];
        must(tvm_session_trace_pattern(vm, s, pat, "[{'_',[],[{return_trace}]}]", TVM_TP_TRUE,
                                       TVM_TP_LOCAL, 0, NULL, &err), &err, "local");
        must(tvm_session_trace_pattern(vm, s, "c:a/1", NULL, TVM_TP_TRUE, TVM_TP_GLOBAL, 0, NULL,
                                       &err), &err, "global");
        must(tvm_session_trace_pattern(vm, s, "c:_/_", NULL, TVM_TP_TRUE,
                                       TVM_TP_CALL_COUNT | TVM_TP_CALL_TIME, 0, NULL, &err),
             &err, "count");
        if (i % 3 == 0)
            must(tvm_session_trace_pattern(vm, s, "c:rec/1", NULL, TVM_TP_TRUE, TVM_TP_META,
                                           meta_target, NULL, &err), &err, "meta");
        must(tvm_session_trace_pattern(vm, s, "on_load", NULL, TVM_TP_TRUE, TVM_TP_LOCAL, 0, NULL,
                                       &err), &err, "on_load");
        unsigned flags = TVM_TRACE_CALL | TVM_TRACE_RETURN_TO;
        if (i % 2)
            flags |= TVM_TRACE_PROCS | TVM_TRACE_RUNNING | TVM_TRACE_SEND | TVM_TRACE_RECEIVE;
        must(tvm_session_trace_flags_all(vm, s, TVM_TRACE_ALL, flags, true, &err), &err,
             "flags");
        usleep(500 + (seed >> 20) % 3000);
        int64_t n;
        tvm_session_call_count(vm, s, "c:a/1", &n);
        tvm_call_time_entry ct[8];
        size_t nct;
        tvm_session_call_time(vm, s, "c:a/1", ct, 8, &nct);
        tvm_term t;
        tvm_session_trace_info(env, s, "c:a/1", "all", &t, &err);
        tvm_handles_release(env, 0);
        if (i % 5 == 0)
            tvm_session_trace_pattern(vm, s, "c:_/_", NULL, TVM_TP_FALSE, TVM_TP_LOCAL, 0, NULL,
                                      &err);
        st = tvm_session_destroy(vm, s, &err);
        if (st != TVM_OK) {
            fprintf(stderr, "%s: destroy: %s\n", stress_name, err.message);
            exit(1);
        }
    }
    tvm_env_free(env);
    return NULL;
}

static tvm_term int_term(tvm_env *env, int64_t v)
{
    tvm_term t;
    if (tvm_make_int(env, v, &t) != TVM_OK)
        exit(fail("make_int"));
    return t;
}

int main(void)
{
    double seconds = SECONDS;
    const char *e = getenv("STRESS_SESSIONS_SECONDS");
    if (e)
        seconds = atof(e);
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = SCHEDULERS, .quiet_crashes = true };
    vm = tvm_new(&cfg);
    tvm_error err;
    if (tvm_load_string(vm, "c", c_src, strlen(c_src), &err) != TVM_OK ||
        tvm_load_string(vm, "w", w_src, strlen(w_src), &err) != TVM_OK ||
        tvm_register_native(vm, "t", "ack", 0, ack, NULL, &err) != TVM_OK)
        return fail(err.message);
    tvm_env *env = tvm_env_new(vm);

    /* The default session throughout. */
    tvm_trace_options dopts = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK, .callback = count,
                                .callback_data = &default_events };
    if (tvm_trace_start(vm, &dopts, &err) != TVM_OK ||
        tvm_trace_pattern(vm, "c:a/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT, NULL, &err) != TVM_OK ||
        tvm_trace_pattern(vm, "c:b/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err) != TVM_OK)
        return fail(err.message);

    /* Workers in a ring (each sends to the next), traced by the default
     * session; a drain process for meta messages. */
    tvm_pid pids[WORKERS];
    tvm_term none[1];
    if (tvm_spawn(env, "w", "drain", 0, none, &meta_target) != TVM_OK)
        return fail("spawn drain");
    tvm_pid drain2;
    if (tvm_spawn(env, "w", "drain", 0, none, &drain2) != TVM_OK)
        return fail("spawn drain");
    for (int i = 0; i < WORKERS; i++) {
        tvm_term peer;
        tvm_make_pid(env, drain2, &peer);
        if (tvm_spawn(env, "w", "worker", 1, &peer, &pids[i]) != TVM_OK)
            return fail("spawn worker");
        if (tvm_trace_flags(env, pids[i], TVM_TRACE_CALL, true) != TVM_OK)
            return fail("flags");
    }
    tvm_pid vmchurn = spawn_int(env, "w", "churn", 0);

    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, churner, (void *)(uintptr_t)(i * 7919 + 1));
    double t0 = now_s();
    while (now_s() - t0 < seconds)
        usleep(50000);
    atomic_store(&stop_churn, true);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    tvm_term msg, r;
    tvm_make_atom(env, "stop", &msg);
    if (tvm_send(env, vmchurn, msg) != TVM_OK || tvm_join(env, vmchurn, &r) != TVM_OK)
        return fail("the VM churner raised");
    int64_t vm_sessions = 0;
    tvm_get_int(env, r, &vm_sessions);

    /* Every worker stops calling, then makes exactly ROUNDS rounds. */
    for (int i = 0; i < WORKERS; i++)
        tvm_send(env, pids[i], msg);
    for (double t1 = now_s(); atomic_load(&acks) < WORKERS && now_s() - t1 < 60;)
        usleep(1000);
    if (atomic_load(&acks) != WORKERS)
        return fail("workers did not stop");
    /* Every session is gone (the VM's too: their owners exited or they
     * were destroyed; wait for the stopper), and nothing is left. */
    tvm_session_info info;
    int total = atomic_load(&nids);
    for (int i = 0; i < total && i < MAX_IDS; i++)
        if (tvm_session_info_get(vm, (tvm_session){ ids[i] }, &info) != TVM_ERR_NOTFOUND)
            return fail("a destroyed session is still there");
    /* Sessions of VM code whose owner exited go away by themselves (the
     * stopper): wait until every slot but the default's is free. */
    tvm_session probe[TVM_SESSIONS_MAX];
    tvm_trace_options quiet = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_TEXT, .path = "/dev/null" };
    int got = 0;
    for (int tries = 0; tries < 3000 && got < TVM_SESSIONS_MAX - 1; tries++) {
        for (int i = 0; i < got; i++)
            tvm_session_destroy(vm, probe[i], NULL);
        got = 0;
        while (got < TVM_SESSIONS_MAX - 1 &&
               tvm_session_create(vm, "probe", &quiet, &probe[got], NULL) == TVM_OK)
            got++;
        if (got < TVM_SESSIONS_MAX - 1)
            usleep(10000);
    }
    if (got < TVM_SESSIONS_MAX - 1)
        return fail("sessions of VM code were left behind");
    for (int i = 1; i < got; i++)
        tvm_session_destroy(vm, probe[i], NULL);
    tvm_session s = probe[0];
    static const char *const fns[] = { "c:a/1", "c:b/1", "c:la/1", "c:tl/1", "c:t2/1", "c:rec/1",
                                       "on_load" };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        tvm_term t;
        char buf[256];
        if (tvm_session_trace_info(env, s, fns[i], "all", &t, &err) != TVM_OK)
            return fail(err.message);
        tvm_format_term(env, t, buf, sizeof buf);
        if (strcmp(buf, "{all,false}") != 0) {
            fprintf(stderr, "%s: %s left: %s\n", stress_name, fns[i], buf);
            return 1;
        }
    }
    /* White box: the workers' trace words (with the changes for all
     * folded in, as any reader sees them) hold the default session's
     * flags and nothing else, the defaults for new processes nothing, and
     * c:a/1's record the default session's entry only. */
    if (vm_atomic_load_relaxed(&vm->trace_new) != 0)
        return fail("flags for new processes were left");
    int probed = 0;
    for (int i = 0; i < WORKERS; i++) {
        Process *p = tr_proc_get(vm, pids[i]);
        if (!p)
            continue;     /* exited already */
        uintptr_t w = tr_pword(p);
        vm_proc_put(vm_sched_of(vm), p);
        if (w != TVM_TRACE_CALL) {
            fprintf(stderr, "%s: worker %d's trace word is %#lx\n", stress_name, i,
                    (unsigned long)w);
            return 1;
        }
        probed++;
    }
    if (probed != WORKERS)
        return fail("a worker exited early");
    Atom ma, fa;
    vm_atom_intern("c", 1, &ma);
    vm_atom_intern("a", 1, &fa);
    const FuncInfo *fn = vm_export_target(vm, vm_export_find(vm, ma, fa, 1));
    const BpRecord *rec = vm_atomic_load_ptr_relaxed(&fn->bp);
    if (!rec || rec->gen[vm_atomic_load_relaxed(&vm->bp_ix)].nsess != 1)
        return fail("c:a/1 has entries of ended sessions");
    tvm_session_destroy(vm, s, NULL);
    if (tvm_trace_pattern(vm, "c:a/1", TVM_TP_RESTART, TVM_TP_CALL_COUNT, NULL, &err) != TVM_OK)
        return fail(err.message);
    for (int i = 0; i < WORKERS; i++) {
        tvm_term k = int_term(env, ROUNDS);
        tvm_send(env, pids[i], k);
    }
    for (int i = 0; i < WORKERS; i++)
        if (tvm_join(env, pids[i], &r) != TVM_OK)
            return fail("a worker raised");
    int64_t n = -1;
    if (tvm_call_count(vm, "c:a/1", &n) != TVM_OK || n != (int64_t)WORKERS * ROUNDS) {
        fprintf(stderr, "%s: c:a/1 counted %lld, expected %d\n", stress_name, (long long)n,
                WORKERS * ROUNDS);
        return 1;
    }
    tvm_send(env, meta_target, (tvm_make_atom(env, "quit", &msg), msg));
    tvm_send(env, drain2, msg);
    tvm_trace_stop(vm);
    printf("%s: %d sessions from C, %lld from VM code, %ld events, %ld to the default session\n",
           stress_name, total, (long long)vm_sessions, atomic_load(&events),
           atomic_load(&default_events));
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}
