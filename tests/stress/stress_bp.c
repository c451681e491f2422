/*
 * tests/stress/stress_bp.c - the breakpoint torture test, after OTP's
 * trace_local_SUITE:concurrency (BEAM behaviour 38).
 *
 * 2 x schedulers worker processes loop over calls of candidate functions
 * (remote and local calls, body and tail recursion, a remote tail call,
 * two natives) while, for TOGGLE_SECONDS (10.5 s; STRESS_BP_SECONDS
 * shortens it for a quick local run; a loaded machine gets up to 60 s for
 * the foreign threads to do a minimum of work):
 *   - two VM processes apply trace_pattern requests with
 *     erlang:trace_pattern/3 in a loop;
 *   - a foreign thread applies others with tvm_trace_pattern (single
 *     functions, m:f/_, m:_/_ and now and then _:_/_; local, global,
 *     call_count with true/false/pause/restart) and reads trace_info and
 *     call counts;
 *   - a foreign thread calls the candidates through tvm_call (a reader
 *     that is not a scheduler);
 *   - a foreign thread reloads an unrelated module (sometimes traced).
 * Two workers and the calling thread are traced, so the hook runs too.
 * Then the togglers stop, every worker acknowledges that it stopped
 * calling, every trace pattern is cleared and call_count set on the
 * candidates, and each worker makes exactly ROUNDS more rounds: every
 * call count must be exact, and no hook event may come from those rounds;
 * over the whole run, hook events come from every traced process and from
 * no other.
 * A crash, an exception in any process, or a sanitizer report fails.
 * A plain program (exit 0 = pass), run under ASan and TSan by the suite.
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

static const char *const stress_name = "stress_bp";

#define SCHEDULERS 2
#define WORKERS (2 * SCHEDULERS)
#define TRACED_WORKERS 2
#define TOGGLE_SECONDS 10.5
#define ROUNDS 10000

/* The candidates.  Per round of w:round/1: a/1 twice (directly and by
 * d/2's remote tail call), rec/1 four times (body recursion rec(3)), the
 * others once. */
static const char *const c_src =
    "module c\n"
    "export a/1, b/1, tl/1, d/2, rec/1\n"
    "function a/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function b/1 regs 1\n    call r0, r0, la/1\n    ret r0\nend\n"
    "function la/1 regs 1\n    addi r0, r0, 2\n    ret r0\nend\n"
    "function tl/1 regs 1\n    tailcall r0, t2/1\nend\n"
    "function t2/1 regs 1\n    addi r0, r0, 3\n    ret r0\nend\n"
    "function d/2 regs 2\n    add r0, r0, r1\n    tailcallx r0, c:a/1\nend\n"
    "function rec/1 regs 2\n"
    "    jeqi r0, 0, zero\n    addi r1, r0, -1\n    call r1, r1, rec/1\n    addi r0, r1, 1\n"
    "zero:\n    ret r0\nend\n";

static const struct {
    const char *mfa;
    int per_round;
} expected[] = {
    { "c:a/1", 2 },  { "c:b/1", 1 },   { "c:la/1", 1 },  { "c:tl/1", 1 },
    { "c:t2/1", 1 }, { "c:d/2", 1 },   { "c:rec/1", 4 }, { "t:nat/1", 1 },
    { "erlang:length/1", 1 },
};
#define NEXPECTED (sizeof expected / sizeof expected[0])
#define C_FUNCS 7

/* The workers and the VM togglers. */
static const char *const w_src =
    "module w\n"
    "export worker/0, fround/1, toggle/2\n"
    /* round(X): one round of candidate calls */
    "function round/1 regs 3\n"
    "    move r1, r0\n    callx r1, r1, c:a/1\n"
    "    move r1, r0\n    callx r1, r1, c:b/1\n"
    "    move r1, r0\n    callx r1, r1, c:tl/1\n"
    "    move r1, r0\n    move r2, r0\n    callx r1, r1, c:d/2\n"
    "    loadi r1, 3\n    callx r1, r1, c:rec/1\n"
    "    move r1, r0\n    callx r1, r1, t:nat/1\n"
    "    loadk r1, [a, b]\n    callx r1, r1, erlang:length/1\n"
    "    ret r0\nend\n"
    "function fround/1 regs 1\n    call r0, r0, round/1\n    ret r0\nend\n"
    /* worker(): rounds until any message comes; then t:ack(), then waits
     * for K and makes exactly K rounds; returns K */
    "function worker/0 regs 4\n"
    "top:\n"
    "    loadi r1, 1\n    call r1, r1, round/1\n"
    "    recv r1, none\n    accept\n    jump stopped\n"
    "none:\n    jump top\n"
    "stopped:\n    callx r1, r1, t:ack/0\n"
    "wait_go:\n"
    "    recv r1, nomsg\n    accept\n    jump go\n"
    "nomsg:\n    loadk r3, infinity\n    wait r3, never\n    jump wait_go\n"
    "never:\n    jump wait_go\n"
    "go:\n    move r2, r1\n"
    "rounds:\n"
    "    jeqi r2, 0, done\n    loadi r3, 1\n    call r3, r3, round/1\n"
    "    addi r2, r2, -1\n    jump rounds\n"
    "done:\n    ret r1\nend\n"
    /* toggle(Reqs, I): applies request I rem size + 1 of the tuple Reqs
     * ({MFA, How, Flags} each), then the next, until any message comes;
     * returns how many it applied */
    "function toggle/2 regs 8\n"
    "    move r2, r1\n    loadi r3, 0\n"
    "top:\n"
    "    recv r4, none\n    accept\n    ret r3\n"
    "none:\n"
    "    move r4, r0\n    callx r4, r4, erlang:tuple_size/1\n"
    "    rem r4, r2, r4\n    addi r4, r4, 1\n    move r5, r0\n"
    "    callx r4, r4, erlang:element/2\n"
    "    getel r5, r4, 1\n    getel r6, r4, 2\n    getel r7, r4, 3\n"
    "    callx r5, r5, erlang:trace_pattern/3\n"
    "    addi r2, r2, 1\n    addi r3, r3, 1\n    jump top\nend\n";

/* What the VM togglers apply, in turn. */
static const char *const vm_requests =
    "{{{c, a, 1}, true, [local]}, {{c, '_', '_'}, true, [global]},"
    " {{c, b, '_'}, true, [call_count]}, {{c, a, 1}, false, [local]},"
    " {{c, la, 1}, true, [local, call_count]}, {{c, '_', '_'}, pause, [call_count]},"
    " {{t, nat, 1}, true, [local]}, {{erlang, length, 1}, true, [global]},"
    " {{c, rec, 1}, true, []}, {{c, '_', '_'}, restart, [call_count]},"
    " {{erlang, length, 1}, false, [global]}, {{c, tl, '_'}, true, [local]},"
    " {{c, '_', '_'}, false, [local]}, {{t, nat, 1}, true, []},"
    " {{c, d, 2}, true, [call_count]}, {{c, '_', '_'}, false, [call_count]},"
    " {{c, '_', '_'}, false, []}, {{t, '_', '_'}, false, [local]},"
    " {{erlang, length, 1}, true, [local, call_count]}, {{c, t2, 1}, true, [local]},"
    " {{c, a, '_'}, true, []}, {{erlang, length, 1}, false, [local, call_count]}}";

/* What the foreign toggler applies, in turn. */
static const struct {
    const char *pattern;
    tvm_tp_action how;
    unsigned flags;
} c_requests[] = {
    { "c:_/_", TVM_TP_TRUE, TVM_TP_LOCAL },
    { "c:a/1", TVM_TP_TRUE, TVM_TP_GLOBAL },
    { "c:_/_", TVM_TP_TRUE, TVM_TP_CALL_COUNT },
    { "c:rec/_", TVM_TP_FALSE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT },
    { "t:nat/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT | TVM_TP_LOCAL },
    { "c:d/2", TVM_TP_TRUE, 0 },
    { "c:_/_", TVM_TP_PAUSE, TVM_TP_CALL_COUNT },
    { "c:b/1", TVM_TP_FALSE, TVM_TP_GLOBAL },
    { "erlang:length/1", TVM_TP_TRUE, TVM_TP_LOCAL },
    { "c:_/_", TVM_TP_RESTART, TVM_TP_CALL_COUNT },
    { "u:_/_", TVM_TP_TRUE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT },
    { "c:_/_", TVM_TP_FALSE, TVM_TP_GLOBAL },
    { "t:_/_", TVM_TP_FALSE, TVM_TP_CALL_COUNT | TVM_TP_LOCAL },
    { "c:la/1", TVM_TP_TRUE, TVM_TP_GLOBAL }, /* unexported: clears its local trace */
    { "erlang:length/1", TVM_TP_FALSE, TVM_TP_LOCAL },
    { "c:t2/_", TVM_TP_TRUE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT },
    { "u:_/_", TVM_TP_FALSE, TVM_TP_LOCAL },
    { "c:_/_", TVM_TP_FALSE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT },
};
#define NC_REQUESTS (sizeof c_requests / sizeof c_requests[0])

/* An unrelated module, reloaded now and then. */
static const char *const u_src =
    "module u\nexport f/1\n"
    "function f/1 regs 1\n    call r0, r0, g/1\n    ret r0\nend\n"
    "function g/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n";

static tvm_vm *vm;
static atomic_bool stop_foreign;
static atomic_int acks;
static atomic_long hook_events;
/* Hook events by pid (pids here are small; 255 stands for any larger) */
static atomic_long events_of[256];
static atomic_long natives_called;

/* t:nat/1 - a candidate native: X + 4. */
static tvm_status nat(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    int64_t v;
    if (tvm_get_int(env, argv[0], &v) != TVM_OK)
        return tvm_raise_badarg(env);
    atomic_fetch_add_explicit(&natives_called, 1, memory_order_relaxed);
    return tvm_make_int(env, v + 4, result);
}

/* t:ack/0 - a worker saying it stopped calling candidates. */
static tvm_status ack(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)argv;
    (void)data;
    atomic_fetch_add(&acks, 1);
    return tvm_make_atom(env, "ok", result);
}

/* The hook checks what it is given and counts. */
static void hook(tvm_env *env, const tvm_call_event *ev, void *data)
{
    (void)data;
    char buf[128];
    if (ev->arity > 0)
        tvm_format_term(env, ev->argv[0], buf, sizeof buf);
    if (!ev->module || !ev->function || ev->arity < 0 || ev->arity > 255)
        abort();
    atomic_fetch_add_explicit(&hook_events, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&events_of[ev->pid < 255 ? ev->pid : 255], 1, memory_order_relaxed);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void load_or_die(const char *name, const char *text)
{
    tvm_error err;
    if (tvm_load_string(vm, name, text, strlen(text), &err) != TVM_OK) {
        fprintf(stderr, "%s: load %s failed: %s\n", stress_name, name, err.message);
        exit(1);
    }
}

static int tp_or_die(const char *pattern, tvm_tp_action how, unsigned flags)
{
    tvm_error err;
    int n = -1;
    if (tvm_trace_pattern(vm, pattern, how, flags, &n, &err) != TVM_OK) {
        fprintf(stderr, "%s: trace_pattern %s: %s\n", stress_name, pattern, err.message);
        exit(1);
    }
    return n;
}

/* ---- foreign threads ---- */

static char thread_failure[3][4200];
/* Progress of the three threads, stored by each as it goes (relaxed is
 * enough: main only compares them with minimums, and reads the final
 * values after pthread_join). */
static atomic_long foreign_toggles, foreign_calls, reloads;
static double tp_total, tp_max; /* the foreign toggler's trace_pattern latency, s */

/* The minimums of the final sanity check, for what the foreign threads do. */
static bool foreign_enough(void)
{
    return atomic_load(&foreign_toggles) >= 5 && atomic_load(&foreign_calls) >= 10 &&
           atomic_load(&reloads) >= 5;
}

/* *out = mod:fun(arg) on a call context; false if it did not return an
 * integer. */
static bool call_int(tvm_env *env, const char *mod, const char *fun, int64_t arg, int64_t *out)
{
    size_t mark = tvm_handles_mark(env);
    tvm_term a, r;
    bool ok = tvm_make_int(env, arg, &a) == TVM_OK && tvm_call(env, mod, fun, 1, &a, &r) == TVM_OK &&
              tvm_get_int(env, r, out) == TVM_OK;
    tvm_handles_release(env, mark);
    return ok;
}

static void *foreign_toggler(void *arg)
{
    (void)arg;
    tvm_env *env = tvm_env_new(vm);
    long i = 0;
    while (!atomic_load(&stop_foreign) && !thread_failure[0][0]) {
        tvm_error err;
        int n = -1;
        tvm_status st;
        double t0 = now_s();
        if (i % 25 == 24) /* everything now and then, natives and workers included */
            st = tvm_trace_pattern(vm, "_:_/_", (i / 25) % 2 ? TVM_TP_FALSE : TVM_TP_TRUE,
                                   (i / 50) % 2 ? TVM_TP_CALL_COUNT : TVM_TP_LOCAL, &n, &err);
        else
            st = tvm_trace_pattern(vm, c_requests[i % NC_REQUESTS].pattern,
                                   c_requests[i % NC_REQUESTS].how,
                                   c_requests[i % NC_REQUESTS].flags, &n, &err);
        double dt = now_s() - t0;
        tp_total += dt;
        if (dt > tp_max)
            tp_max = dt;
        if (st != TVM_OK || n < 0)
            snprintf(thread_failure[0], sizeof thread_failure[0], "trace_pattern: %s",
                     err.message);
        /* readers of the engine's state */
        size_t mark = tvm_handles_mark(env);
        tvm_term t;
        if (tvm_trace_info(env, "c:a/1", i % 2 ? "all" : "traced", &t, &err) != TVM_OK)
            snprintf(thread_failure[0], sizeof thread_failure[0], "trace_info: %s",
                     err.message);
        tvm_handles_release(env, mark);
        int64_t cnt;
        tvm_status cs = tvm_call_count(vm, "c:b/1", &cnt);
        if ((cs != TVM_OK && cs != TVM_ERR_NOTFOUND) || (cs == TVM_OK && cnt < 0))
            snprintf(thread_failure[0], sizeof thread_failure[0], "call_count");
        atomic_store_explicit(&foreign_toggles, ++i, memory_order_relaxed);
    }
    tvm_env_free(env);
    return NULL;
}

static void *foreign_caller(void *arg)
{
    (void)arg;
    tvm_env *env = tvm_env_new(vm);
    tvm_trace_calls(env, 0, true);
    long i = 0;
    while (!atomic_load(&stop_foreign) && !thread_failure[1][0]) {
        int64_t v = -1;
        if (!call_int(env, "w", "fround", i, &v) || v != i)
            snprintf(thread_failure[1], sizeof thread_failure[1], "w:fround(%ld) gave %lld", i,
                     (long long)v);
        atomic_store_explicit(&foreign_calls, ++i, memory_order_relaxed);
        if (i % 64 == 0) /* leave the two CPUs to the schedulers now and then */
            usleep(500);
    }
    tvm_env_free(env);
    return NULL;
}

static void *reloader(void *arg)
{
    (void)arg;
    tvm_env *env = tvm_env_new(vm);
    long i = 0;
    while (!atomic_load(&stop_foreign) && !thread_failure[2][0]) {
        tvm_error err;
        if (tvm_load_string(vm, "u.tasm", u_src, strlen(u_src), &err) != TVM_OK)
            snprintf(thread_failure[2], sizeof thread_failure[2], "reload: %s", err.message);
        int64_t v = -1;
        if (!call_int(env, "u", "f", i, &v) || v != i + 1)
            snprintf(thread_failure[2], sizeof thread_failure[2], "u:f(%ld) gave %lld", i,
                     (long long)v);
        atomic_store_explicit(&reloads, ++i, memory_order_relaxed);
        usleep(20 * 1000);
    }
    tvm_env_free(env);
    return NULL;
}

/*
 * The tvm_call window: three foreign threads call c:a/1 through tvm_call
 * while the main thread turns its global trace on and off for about a
 * second.  tvm_call must read the export's target (the trampoline, while
 * global trace is on) only once the thread is online as a thread-progress
 * reader; when it read it before, ASan reported a heap-use-after-free in
 * execute() within a second.
 */
static void *window_caller(void *arg)
{
    (void)arg;
    tvm_env *env = tvm_env_new(vm);
    int64_t v;
    while (!atomic_load(&stop_foreign))
        if (!call_int(env, "c", "a", 1, &v) || v != 2)
            abort();
    tvm_env_free(env);
    return NULL;
}

static int tvm_call_window(void)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1 };
    vm = tvm_new(&cfg);
    load_or_die("c.tasm", c_src);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, window_caller, NULL);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 20000; i++) {
        tp_or_die("c:a/1", i % 2 ? TVM_TP_FALSE : TVM_TP_TRUE, TVM_TP_GLOBAL);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (i % 2 && (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 1000000000L)
            break;
    }
    atomic_store(&stop_foreign, true);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stop_foreign, false);
    tvm_destroy(vm);
    return 0;
}

int main(void)
{
    if (tvm_call_window() != 0)
        return 1;
    (void)spawn_int; /* of stress_util.h; every process here takes other arguments */
    double seconds = TOGGLE_SECONDS;
    const char *s = getenv("STRESS_BP_SECONDS");
    if (s && atof(s) > 0)
        seconds = atof(s);

    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = SCHEDULERS };
    vm = tvm_new(&cfg);
    tvm_error err;
    if (tvm_register_native(vm, "t", "nat", 1, nat, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "t", "ack", 0, ack, NULL, &err) != TVM_OK) {
        fprintf(stderr, "%s: %s\n", stress_name, err.message);
        return 1;
    }
    load_or_die("c.tasm", c_src);
    load_or_die("w.tasm", w_src);
    load_or_die("u.tasm", u_src);
    tvm_set_call_hook(vm, hook, NULL);
    tvm_env *env = tvm_env_new(vm);

    tvm_pid workers[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        if (tvm_spawn(env, "w", "worker", 0, NULL, &workers[i]) != TVM_OK)
            return fail("spawn worker");
        if (i < TRACED_WORKERS && tvm_trace_calls(env, workers[i], true) != TVM_OK)
            return fail("trace_calls on a worker");
    }
    tvm_pid togglers[2];
    for (int i = 0; i < 2; i++) {
        tvm_term a[2];
        if (tvm_parse_term(env, vm_requests, &a[0], &err) != TVM_OK) {
            fprintf(stderr, "%s: %s\n", stress_name, err.message);
            return 1;
        }
        tvm_make_int(env, i * 7, &a[1]);
        if (tvm_spawn(env, "w", "toggle", 2, a, &togglers[i]) != TVM_OK)
            return fail("spawn toggler");
    }
    pthread_t th[3];
    pthread_create(&th[0], NULL, foreign_toggler, NULL);
    pthread_create(&th[1], NULL, foreign_caller, NULL);
    pthread_create(&th[2], NULL, reloader, NULL);

    /* Toggle for `seconds`; on a loaded machine longer (up to 60 s), until
     * the foreign threads reach the minimums the sanity check below asks. */
    double t0 = now_s();
    while (now_s() - t0 < seconds || (!foreign_enough() && now_s() - t0 < 60))
        usleep(50 * 1000);

    /* Stop the togglers and the foreign threads. */
    atomic_store(&stop_foreign, true);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    double toggled = now_s() - t0;
    int64_t vm_toggles = 0;
    tvm_term stop, r;
    tvm_make_atom(env, "stop", &stop);
    for (int i = 0; i < 2; i++) {
        if (tvm_send(env, togglers[i], stop) != TVM_OK)
            return fail("a toggler died");
        tvm_status st = tvm_join(env, togglers[i], &r);
        if (st != TVM_OK) {
            char buf[1024];
            tvm_format_exception(env, buf, sizeof buf);
            fprintf(stderr, "%s: toggler raised: %s\n", stress_name, buf);
            return 1;
        }
        int64_t n;
        tvm_get_int(env, r, &n);
        vm_toggles += n;
    }
    int status = 0;
    for (int i = 0; i < 3; i++)
        if (thread_failure[i][0]) {
            fprintf(stderr, "%s: thread %d: %s\n", stress_name, i, thread_failure[i]);
            status = 1;
        }

    /* Stop the workers: each acknowledges once it makes no more calls. */
    for (int i = 0; i < WORKERS; i++)
        if (tvm_send(env, workers[i], stop) != TVM_OK)
            return fail("a worker died");
    double w0 = now_s();
    while (atomic_load(&acks) < WORKERS) {
        if (now_s() - w0 > 60)
            return fail("the workers did not acknowledge the stop");
        usleep(1000);
    }

    /* Stable patterns: nothing but call_count on the candidates. */
    tp_or_die("_:_/_", TVM_TP_FALSE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT);
    tp_or_die("_:_/_", TVM_TP_FALSE, TVM_TP_GLOBAL);
    if (tp_or_die("c:_/_", TVM_TP_TRUE, TVM_TP_CALL_COUNT) != C_FUNCS ||
        tp_or_die("t:nat/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT) != 1 ||
        tp_or_die("erlang:length/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT) != 1)
        return fail("call_count matched the wrong number of functions");
    for (size_t k = 0; k < NEXPECTED; k++) {
        int64_t n = -1;
        tvm_term t;
        char buf[256];
        if (tvm_call_count(vm, expected[k].mfa, &n) != TVM_OK || n != 0)
            return fail("a fresh counter is not 0");
        if (tvm_trace_info(env, expected[k].mfa, "all", &t, &err) != TVM_OK)
            return fail("trace_info");
        tvm_format_term(env, t, buf, sizeof buf);
        if (strcmp(buf, "{all,[{traced,false},{match_spec,false},{meta,false},"
                        "{meta_match_spec,false},{call_time,false},{call_count,0}]}") != 0) {
            fprintf(stderr, "%s: trace_info(%s, all) = %s\n", stress_name, expected[k].mfa, buf);
            return 1;
        }
    }
    long events_before = atomic_load(&hook_events);

    /* Exactly ROUNDS rounds per worker. */
    tvm_term k;
    tvm_make_int(env, ROUNDS, &k);
    for (int i = 0; i < WORKERS; i++)
        if (tvm_send(env, workers[i], k) != TVM_OK)
            return fail("a worker died");
    for (int i = 0; i < WORKERS; i++) {
        tvm_status st = tvm_join(env, workers[i], &r);
        int64_t n = -1;
        if (st != TVM_OK || tvm_get_int(env, r, &n) != TVM_OK || n != ROUNDS) {
            char buf[1024] = "";
            if (st == TVM_EXCEPTION)
                tvm_format_exception(env, buf, sizeof buf);
            fprintf(stderr, "%s: worker %d: status %s %s\n", stress_name, i, tvm_status_name(st),
                    buf);
            return 1;
        }
    }
    fprintf(stderr, "%s: %.1f s of toggling: %lld trace_pattern calls from %d processes, "
                    "%ld from a foreign thread, %ld tvm_call rounds, %ld reloads, %ld hook events\n",
            stress_name, toggled, (long long)vm_toggles, 2, atomic_load(&foreign_toggles),
            atomic_load(&foreign_calls), atomic_load(&reloads), events_before);
    for (size_t i = 0; i < NEXPECTED; i++) {
        int64_t n = -1;
        int64_t want = (int64_t)WORKERS * ROUNDS * expected[i].per_round;
        if (tvm_call_count(vm, expected[i].mfa, &n) != TVM_OK || n != want) {
            fprintf(stderr, "%s: call_count(%s) = %lld, expected %lld\n", stress_name,
                    expected[i].mfa, (long long)n, (long long)want);
            status = 1;
        }
    }
    long nft = atomic_load(&foreign_toggles);
    fprintf(stderr, "%s: foreign trace_pattern latency: mean %.2f ms, max %.2f ms\n", stress_name,
            nft ? 1e3 * tp_total / (double)nft : 0.0, 1e3 * tp_max);
    fprintf(stderr, "%s: after %d x %d rounds: call counts c:a/1 %d, c:rec/1 %d, others %d each%s\n",
            stress_name, WORKERS, ROUNDS, WORKERS * ROUNDS * 2, WORKERS * ROUNDS * 4,
            WORKERS * ROUNDS, status ? " expected (MISMATCH above)" : ", all exact");
    if (atomic_load(&hook_events) != events_before) {
        fprintf(stderr, "%s: %ld hook events with no call trace set\n", stress_name,
                atomic_load(&hook_events) - events_before);
        status = 1;
    }
    /* Sanity: everything ran (under TSan a trace_pattern takes ~0.2 s). */
    if (events_before == 0 || vm_toggles < 10 || !foreign_enough())
        return fail("too little happened: no hook events, toggles, foreign calls or reloads");
    /* Events came from the traced workers and the traced call context
     * (pid 0) only, and from each of them. */
    for (int i = 0; i < 256; i++) {
        bool traced = i == 0;
        for (int w = 0; w < TRACED_WORKERS; w++)
            traced = traced || (tvm_pid)i == workers[w];
        long n = atomic_load(&events_of[i]);
        if (traced ? n == 0 : n != 0) {
            fprintf(stderr, "%s: %ld hook events from pid %d, which is %straced\n", stress_name,
                    n, i, traced ? "" : "not ");
            status = 1;
        }
    }
    if (tp_or_die("c:_/_", TVM_TP_FALSE, TVM_TP_CALL_COUNT) != C_FUNCS)
        status = fail("c:_/_ false matched the wrong number");
    tvm_env_free(env);
    tvm_destroy(vm);
    return status;
}
