/*
 * tests/unit/bp/test_plain.c - trace_pattern's plain step
 * (breakpoints/bp_pattern.c, stage_plain): a local call trace switched
 * on or off without a match spec, on a function whose record holds
 * nothing else, is staged by writing the staging generation whole
 * instead of consolidating, copying and editing it.  These tests cross
 * that step with the general one, function by function, and check after
 * every call what the general way would leave: the exact calls traced,
 * trace_info, counters kept, a spec dropped, another session's settings
 * kept, and records that went idle and came back.
 *
 * The call hook (call_events.h) records every traced call; the call
 * context is traced (tvm_trace_calls).
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "tests/unit/bp/call_events.h"
#include "tests/unit/helpers.h"

static const char *const pl_src =
    "module pl\n"
    "export a/1, b/1, c/1, run/1\n"
    "function a/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function b/1 regs 1\n    addi r0, r0, 2\n    ret r0\nend\n"
    "function c/1 regs 1\n    addi r0, r0, 3\n    ret r0\nend\n"
    /* run(X): a(X), then b(X) by a remote call, then c(X); returns c's */
    "function run/1 regs 2\n"
    "    move r1, r0\n    call r1, r1, a/1\n"
    "    move r1, r0\n    callx r1, r1, pl:b/1\n"
    "    call r0, r0, c/1\n    ret r0\nend\n";

/* ---- fixture ---- */

static tvm_vm *vm;
static tvm_env *env;

static void setup(void)
{
    vm = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2,
                                .quiet_crashes = true });
    cr_assert_not_null(vm);
    env = tvm_env_new(vm);
    load_ok(vm, "pl.tasm", pl_src);
    record_calls(vm, env);
}

static void teardown(void)
{
    tvm_env_free(env);
    tvm_destroy(vm);
}

TestSuite(plain, .init = setup, .fini = teardown, .timeout = 60);

/* ---- helpers ---- */

/* trace_pattern with an optional match spec, on the default session;
 * must succeed and match `want` functions. */
static void tp_ms(const char *pattern, const char *ms, tvm_tp_action how, unsigned flags,
                  int want)
{
    tvm_error err;
    int n = -1;
    tvm_status st = tvm_trace_pattern_ms(vm, pattern, ms, how, flags, 0, &n, &err);
    cr_assert_eq(st, TVM_OK, "trace_pattern(%s): %s", pattern, err.message);
    cr_assert_eq(n, want, "trace_pattern(%s) matched %d", pattern, n);
}

static void tp(const char *pattern, tvm_tp_action how, unsigned flags, int want)
{
    tp_ms(pattern, NULL, how, flags, want);
}

/* pl:run(X), which must return X + 3, and the calls it traced. */
static const char *run(int64_t x)
{
    char out[32], want[32];
    int64_t args[1] = { x };
    cr_assert_eq(call_fmt(env, "pl", "run", 1, args, out, sizeof out), TVM_OK);
    snprintf(want, sizeof want, "%lld", (long long)(x + 3));
    cr_assert_str_eq(out, want);
    return take_events();
}

static const char *info(const char *mfa, const char *item)
{
    static char out[256];
    tvm_term t;
    tvm_error err;
    cr_assert_eq(tvm_trace_info(env, mfa, item, &t, &err), TVM_OK, "%s", err.message);
    tvm_format_term(env, t, out, sizeof out);
    return out;
}

static int64_t count_of(const char *mfa)
{
    int64_t n = -1;
    cr_assert_eq(tvm_call_count(vm, mfa, &n), TVM_OK);
    return n;
}

/* The four events of a fully traced pl:run(X). */
static void expect_traced(int64_t x)
{
    char want[160];
    snprintf(want, sizeof want,
             "pl:run/1(%lld) local | pl:a/1(%lld) local | pl:b/1(%lld) local | "
             "pl:c/1(%lld) local", (long long)x, (long long)x, (long long)x, (long long)x);
    cr_assert_str_eq(run(x), want);
}

/* ---- tests ---- */

/* On and off many times: each call consolidates the last one's records
 * (its stage 5, left to the next call), which go idle when switched off
 * and are armed again when switched on. */
Test(plain, toggled_many_times_traces_exactly_while_on)
{
    for (int k = 0; k < 6; k++) {
        tp("pl:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
        expect_traced(10 * k);
        cr_assert_str_eq(info("pl:a/1", "traced"), "{traced,local}");
        /* on again: the same settings, still traced */
        tp("pl:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
        expect_traced(10 * k + 1);
        tp("pl:_/_", TVM_TP_FALSE, TVM_TP_LOCAL, 4);
        cr_assert_str_eq(run(10 * k + 2), "");
        cr_assert_str_eq(info("pl:a/1", "traced"), "{traced,false}");
        /* off again: nothing to clear */
        tp("pl:_/_", TVM_TP_FALSE, TVM_TP_LOCAL, 4);
        cr_assert_str_eq(run(10 * k + 3), "");
    }
    /* one function at a time, between whole-module calls */
    tp("pl:b/1", TVM_TP_TRUE, TVM_TP_LOCAL, 1);
    cr_assert_str_eq(run(7), "pl:b/1(7) local");
    tp("pl:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
    tp("pl:b/1", TVM_TP_FALSE, TVM_TP_LOCAL, 1);
    cr_assert_str_eq(run(8), "pl:run/1(8) local | pl:a/1(8) local | pl:c/1(8) local");
    tp("pl:_/_", TVM_TP_FALSE, TVM_TP_LOCAL, 4);
    cr_assert_str_eq(run(9), "");
}

/* A function that also counts is the general way's; the others stay
 * plain; the counter survives the call trace going off and on. */
Test(plain, a_counting_function_keeps_its_counter)
{
    tp("pl:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
    tp("pl:a/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT, 1);
    expect_traced(1);
    cr_assert_eq(count_of("pl:a/1"), 1);
    tp("pl:_/_", TVM_TP_FALSE, TVM_TP_LOCAL, 4);
    cr_assert_str_eq(run(2), "");
    cr_assert_eq(count_of("pl:a/1"), 2);
    cr_assert_str_eq(info("pl:a/1", "call_count"), "{call_count,2}");
    cr_assert_str_eq(info("pl:a/1", "traced"), "{traced,false}");
    tp("pl:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
    expect_traced(3);
    cr_assert_eq(count_of("pl:a/1"), 3);
    /* the counter gone, a/1 is plain again */
    tp("pl:a/1", TVM_TP_FALSE, TVM_TP_CALL_COUNT, 1);
    cr_assert_str_eq(info("pl:a/1", "call_count"), "{call_count,false}");
    tp("pl:_/_", TVM_TP_FALSE, TVM_TP_LOCAL, 4);
    cr_assert_str_eq(run(4), "");
    tp("pl:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
    expect_traced(5);
    cr_assert_str_eq(info("pl:a/1", "call_count"), "{call_count,false}");
}

/* A call trace with a spec is the general way's; switching it on again
 * without one drops the spec (every call traced), after which the
 * functions are plain again. */
Test(plain, a_spec_is_dropped_by_a_call_without_one)
{
    tp_ms("pl:_/_", "[{[11],[],[]}]", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
    expect_traced(11);
    cr_assert_str_eq(run(12), "");
    tp("pl:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
    expect_traced(12);
    tp("pl:_/_", TVM_TP_FALSE, TVM_TP_LOCAL, 4);
    cr_assert_str_eq(run(13), "");
    tp("pl:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
    expect_traced(14);
    /* and a spec again, over the plain records */
    tp_ms("pl:_/_", "[{[15],[],[]}]", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
    cr_assert_str_eq(run(16), "");
    expect_traced(15);
    tp("pl:_/_", TVM_TP_FALSE, TVM_TP_LOCAL, 4);
    cr_assert_str_eq(run(15), "");
}

/* A global record anywhere sends every function the general way (a
 * local call clears the global call trace of the function it stages). */
Test(plain, a_global_trace_is_replaced_by_the_local_one)
{
    tp("pl:b/1", TVM_TP_TRUE, TVM_TP_GLOBAL, 1);
    cr_assert_str_eq(run(1), "pl:b/1(1) global");
    tp("pl:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
    expect_traced(2);
    cr_assert_str_eq(info("pl:b/1", "traced"), "{traced,local}");
    tp("pl:_/_", TVM_TP_FALSE, TVM_TP_LOCAL, 4);
    cr_assert_str_eq(run(3), "");
    cr_assert_str_eq(info("pl:b/1", "traced"), "{traced,false}");
    tp("pl:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, 4);
    expect_traced(4);
    tp("pl:_/_", TVM_TP_FALSE, TVM_TP_LOCAL, 4);
    cr_assert_str_eq(run(5), "");
}
