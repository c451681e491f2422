/*
 * tests/stress/stress_trace_pattern.c - trace_pattern while processes run:
 *   1. random local / global / call_count patterns (true, false, pause,
 *      restart) over a module, a single function and every module, while
 *      three processes call through local and remote calls; afterwards a
 *      fresh counter counts exactly the calls made;
 *   2. the call hook sees a global breakpoint only on remote calls and a
 *      local one on every call, with the right function;
 *   3. a native running inside tvm_call on a foreign thread (an online
 *      QSBR reader) can call tvm_trace_pattern (it used to hang: the
 *      progress thread waited for the caller, which waited for it).
 * A plain program (exit 0 = pass), run under TSan by `scons mode=tsan test`
 * and under ASan by `scons mode=asan test`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/tracevm.h"
#include "tests/stress/stress_util.h"
#include "vm/atomics.h"

static const char *const stress_name = "stress_trace_pattern";

#define NFUNS 200

static VmAtomic stop;

static tvm_status nat_stop(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res,
                           void *data)
{
    (void)argc, (void)argv, (void)data;
    return tvm_make_int(env, (int64_t)vm_atomic_load_relaxed(&stop), res);
}

/* gen: f1..fN (fK(X) -> 0) and work/1: 20 local calls and 20 remote ones. */
static char *gen_text(size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    n += (size_t)snprintf(s + n, cap - n, "module gen\nexport work/1\n");
    for (int i = 1; i <= NFUNS; i++)
        n += (size_t)snprintf(s + n, cap - n, "export f%d/1\n", i);
    n += (size_t)snprintf(s + n, cap - n, "function work/1 regs 1\n");
    for (int i = 1; i <= 20; i++)
        n += (size_t)snprintf(s + n, cap - n, "    call r0, r0, f%d/1\n    callx r0, r0, gen:f%d/1\n",
                              i * 10, i * 10 - 1);
    n += (size_t)snprintf(s + n, cap - n, "    ret r0\nend\n");
    for (int i = 1; i <= NFUNS; i++)
        n += (size_t)snprintf(s + n, cap - n, "function f%d/1 regs 1\n    loadi r0, 0\n    ret r0\nend\n", i);
    *len = n;
    return s;
}

static const char drv_text[] =
    "module drv\n"
    "export loop/1, nested/0\n"
    "function loop/1 regs 2\n"
    "    loadi r1, 0\n"
    "top:\n"
    "    callx r1, r1, gen:work/1\n"
    "    callx r1, r1, st:stop/0\n"
    "    jnei r1, 0, done\n"
    "    jump top\n"
    "done:\n"
    "    ret r1\n"
    "end\n"
    "function nested/0 regs 1\n"
    "    callx r0, r0, st:tp/0\n"
    "    ret r0\n"
    "end\n";

static int tp(tvm_vm *vm, const char *pat, tvm_tp_action how, unsigned flags)
{
    tvm_error err;
    int matched = -1;
    if (tvm_trace_pattern(vm, pat, how, flags, &matched, &err) != TVM_OK)
        exit(fail(err.message));
    return matched;
}

/* st:tp/0: switches a pattern on and off from inside VM code. */
static tvm_status nat_tp(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res,
                         void *data)
{
    (void)argc, (void)argv;
    tvm_vm *vm = data;
    int m = tp(vm, "gen:_/_", TVM_TP_TRUE, TVM_TP_LOCAL);
    tp(vm, "gen:_/_", TVM_TP_FALSE, TVM_TP_LOCAL);
    return tvm_make_int(env, m, res);
}

static int nglobal, nlocal;
static char last_fn[64];

static void hook(tvm_env *env, const tvm_call_event *ev, void *data)
{
    (void)env, (void)data;
    if (ev->global)
        nglobal++;
    else
        nlocal++;
    snprintf(last_fn, sizeof last_fn, "%s:%s/%d", ev->module, ev->function, ev->arity);
}

static int64_t count_of(tvm_vm *vm, const char *mfa)
{
    int64_t c = -1;
    if (tvm_call_count(vm, mfa, &c) != TVM_OK)
        exit(fail("no call count"));
    return c;
}

static void call_work(tvm_env *env, int times)
{
    tvm_term a, r;
    if (tvm_make_int(env, 1, &a) != TVM_OK)
        exit(fail("tvm_make_int"));
    for (int i = 0; i < times; i++)
        if (tvm_call(env, "gen", "work", 1, &a, &r) != TVM_OK)
            exit(fail("gen:work failed"));
}

int main(void)
{
    alarm(60); /* a hang (test 3's old failure) ends the program */
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    size_t len;
    char *src = gen_text(&len);
    if (!vm || tvm_register_native(vm, "st", "stop", 0, nat_stop, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "st", "tp", 0, nat_tp, vm, &err) != TVM_OK ||
        tvm_load_string(vm, "gen.tasm", src, len, &err) != TVM_OK ||
        tvm_load_string(vm, "drv.tasm", drv_text, sizeof drv_text - 1, &err) != TVM_OK)
        return fail(err.message);
    free(src);
    tvm_env *env = tvm_env_new(vm);

    /* 1. random patterns while three processes run. */
    tvm_pid pids[3];
    for (int i = 0; i < 3; i++)
        pids[i] = spawn_int(env, "drv", "loop", 0);
    static const char *const pats[] = { "gen:_/_", "gen:f10/1", "gen:f9/1", "gen:work/1", "_:_/_" };
    static const unsigned flags[] = { TVM_TP_LOCAL, TVM_TP_GLOBAL, TVM_TP_CALL_COUNT,
                                      TVM_TP_LOCAL | TVM_TP_CALL_COUNT };
    srand(1);
    for (int k = 0; k < 300; k++) {
        unsigned f = flags[rand() % 4];
        tvm_tp_action how = rand() % 3 ? TVM_TP_TRUE : TVM_TP_FALSE;
        if ((f & TVM_TP_CALL_COUNT) && rand() % 4 == 0) {
            how = rand() % 2 ? TVM_TP_PAUSE : TVM_TP_RESTART;
            f = TVM_TP_CALL_COUNT;
        }
        tp(vm, pats[rand() % 5], how, f);
        int64_t c;
        tvm_call_count(vm, "gen:f10/1", &c);
        usleep((useconds_t)(rand() % 200));
    }
    tp(vm, "_:_/_", TVM_TP_FALSE, TVM_TP_LOCAL);
    tp(vm, "_:_/_", TVM_TP_FALSE, TVM_TP_GLOBAL);
    tp(vm, "_:_/_", TVM_TP_FALSE, TVM_TP_CALL_COUNT);
    vm_atomic_store_relaxed(&stop, 1);
    for (int i = 0; i < 3; i++) {
        tvm_term r;
        if (tvm_join(env, pids[i], &r) != TVM_OK)
            return fail("a worker failed");
    }
    if (tp(vm, "gen:_/_", TVM_TP_TRUE, TVM_TP_CALL_COUNT) != NFUNS + 1)
        return fail("gen:_/_ did not match every function");
    call_work(env, 1000);
    if (count_of(vm, "gen:f10/1") != 1000 || count_of(vm, "gen:f9/1") != 1000 ||
        count_of(vm, "gen:work/1") != 1000 || count_of(vm, "gen:f1/1") != 0)
        return fail("call counts after the storm are not exact");
    tp(vm, "gen:_/_", TVM_TP_FALSE, TVM_TP_CALL_COUNT);

    /* 2. global breakpoints see remote calls only, local ones every call. */
    tvm_set_call_hook(vm, hook, NULL);
    tvm_trace_calls(env, 0, true);
    tp(vm, "gen:f9/1", TVM_TP_TRUE, TVM_TP_GLOBAL);   /* called remotely by work/1 */
    tp(vm, "gen:f10/1", TVM_TP_TRUE, TVM_TP_GLOBAL);  /* called locally: no event */
    call_work(env, 3);
    if (nglobal != 3 || nlocal != 0 || strcmp(last_fn, "gen:f9/1"))
        return fail("global breakpoints: wrong events");
    tp(vm, "gen:f10/1", TVM_TP_TRUE, TVM_TP_LOCAL);
    nglobal = nlocal = 0;
    call_work(env, 2);
    if (nglobal != 2 || nlocal != 2)
        return fail("local breakpoints: wrong events");
    tvm_trace_calls(env, 0, false);
    nglobal = nlocal = 0;
    call_work(env, 2);
    if (nglobal || nlocal)
        return fail("events from an untraced call context");
    tp(vm, "_:_/_", TVM_TP_FALSE, TVM_TP_LOCAL);
    tp(vm, "_:_/_", TVM_TP_FALSE, TVM_TP_GLOBAL);

    /* 3. trace_pattern from a native inside tvm_call on this thread. */
    tvm_term r;
    int64_t m = 0;
    if (tvm_call(env, "drv", "nested", 0, NULL, &r) != TVM_OK || tvm_get_int(env, r, &m) != TVM_OK ||
        m != NFUNS + 1)
        return fail("trace_pattern from a native inside tvm_call");

    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}
