/*
 * tests/unit/bp/test_onload.c - on_load trace patterns: flags kept by the
 * engine and applied to every module loaded later (BEAM behaviour 39,
 * docs/beam.md), armed before the module is published.
 *
 * The call hook (call_events.h) records each traced call as
 * "mod:fun/arity(args) local|global"; tests compare the whole sequence of
 * events, joined with " | ", with the exact expected text.  The call
 * context `env` is traced.
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "tests/unit/bp/call_events.h"
#include "tests/unit/helpers.h"
#include "trace/tr_clock.h"

/* m(X): local call l(X), then remote call ol:r(X); returns l(X) + r(X). */
static const char *const ol_v1 =
    "module ol\n"
    "export m/1, r/1, tp/3, info/2\n"
    "function m/1 regs 3\n"
    "    move r1, r0\n    call r1, r1, l/1\n"
    "    move r2, r0\n    callx r2, r2, ol:r/1\n"
    "    add r0, r1, r2\n    ret r0\nend\n"
    "function l/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function r/1 regs 1\n    addi r0, r0, 10\n    ret r0\nend\n"
    "function tp/3 regs 3\n    callx r0, r0, erlang:trace_pattern/3\n    ret r0\nend\n"
    "function info/2 regs 2\n    callx r0, r0, erlang:trace_info/2\n    ret r0\nend\n";

/* version 2: r adds 20 */
static const char *const ol_v2 =
    "module ol\n"
    "export m/1, r/1\n"
    "function m/1 regs 3\n"
    "    move r1, r0\n    call r1, r1, l/1\n"
    "    move r2, r0\n    callx r2, r2, ol:r/1\n"
    "    add r0, r1, r2\n    ret r0\nend\n"
    "function l/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function r/1 regs 1\n    addi r0, r0, 20\n    ret r0\nend\n";

static const char *const other_src =
    "module other\nexport f/1\nfunction f/1 regs 1\n    ret r0\nend\n";

/* ---- fixture ---- */

static tvm_vm *vm;
static tvm_env *env;

static void setup(void)
{
    tr_clock_set_manual(0);     /* call_time's times are exact: 0 unless moved */
    vm = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true });
    env = tvm_env_new(vm);
    record_calls(vm, env);
}

static void teardown(void)
{
    tvm_env_free(env);
    tvm_destroy(vm);
}

TestSuite(onload, .init = setup, .fini = teardown, .timeout = 60);

/* ---- helpers ---- */

static void on_load(tvm_tp_action how, unsigned flags)
{
    tvm_error err;
    int n = -1;
    cr_assert_eq(tvm_trace_pattern(vm, "on_load", how, flags, &n, &err), TVM_OK, "%s",
                 err.message);
    cr_assert_eq(n, 0, "on_load matches no function now");
}

static const char *call1(const char *mod, const char *fun, int64_t x)
{
    static char out[256];
    cr_assert_eq(call_fmt(env, mod, fun, 1, &x, out, sizeof out), TVM_OK, "%s", out);
    return out;
}

static int64_t count(const char *mfa)
{
    int64_t c = -1;
    cr_assert_eq(tvm_call_count(vm, mfa, &c), TVM_OK, "no counter on %s", mfa);
    return c;
}

static const char *info(const char *mfa, const char *item)
{
    static char out[512];
    tvm_term t;
    tvm_error err;
    cr_assert_eq(tvm_trace_info(env, mfa, item, &t, &err), TVM_OK, "%s", err.message);
    tvm_format_term(env, t, out, sizeof out);
    return out;
}

/* ---- tests ---- */

/* local on_load: every call of the module loaded afterwards, from the first */
Test(onload, local_traces_a_module_loaded_later)
{
    on_load(TVM_TP_TRUE, TVM_TP_LOCAL);
    load_ok(vm, "ol.tasm", ol_v1);
    cr_assert_str_eq(call1("ol", "m", 1), "13");
    cr_assert_str_eq(take_events(),
                     "ol:m/1(1) local | ol:l/1(1) local | ol:r/1(1) local");
    cr_assert_str_eq(info("ol:l/1", "traced"), "{traced,local}");
}

/* on_load with a match spec (BEAM behaviour 39): trace_info gives
 * it back, a module loaded later is traced through it, false drops it */
Test(onload, with_a_match_spec)
{
    tvm_error err;
    int n = -1;
    cr_assert_eq(tvm_trace_pattern_ms(vm, "on_load", "[{[1],[],[]}]", TVM_TP_TRUE, TVM_TP_LOCAL,
                                      0, &n, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(n, 0);
    cr_assert_str_eq(info("on_load", "traced"), "{traced,local}");
    cr_assert_str_eq(info("on_load", "match_spec"), "{match_spec,[{[1],[],[]}]}");
    load_ok(vm, "ol.tasm", ol_v1);
    cr_assert_str_eq(info("ol:m/1", "match_spec"), "{match_spec,[{[1],[],[]}]}");
    cr_assert_str_eq(call1("ol", "m", 1), "13");
    cr_assert_str_eq(call1("ol", "m", 2), "15");
    /* only the calls whose one argument is 1 */
    cr_assert_str_eq(take_events(), "ol:m/1(1) local | ol:l/1(1) local | ol:r/1(1) local");
    on_load(TVM_TP_FALSE, TVM_TP_LOCAL);
    cr_assert_str_eq(info("on_load", "match_spec"), "{match_spec,false}");
}

/* a module loaded before on_load is set is not traced */
Test(onload, modules_loaded_before_are_untouched)
{
    load_ok(vm, "ol.tasm", ol_v1);
    on_load(TVM_TP_TRUE, TVM_TP_LOCAL);
    cr_assert_str_eq(call1("ol", "m", 1), "13");
    cr_assert_str_eq(take_events(), "");
    cr_assert_str_eq(info("ol:m/1", "traced"), "{traced,false}");
}

/* global on_load: remote calls of exported functions only */
Test(onload, global_traces_remote_calls)
{
    on_load(TVM_TP_TRUE, TVM_TP_GLOBAL);
    load_ok(vm, "ol.tasm", ol_v1);
    cr_assert_str_eq(call1("ol", "m", 2), "15");
    cr_assert_str_eq(take_events(), "ol:m/1(2) global | ol:r/1(2) global");
    cr_assert_str_eq(info("ol:r/1", "traced"), "{traced,global}");
    cr_assert_str_eq(info("ol:l/1", "traced"), "{traced,false}");
}

/* call_count on_load: exact counts from the first call */
Test(onload, call_count_counts_from_the_first_call)
{
    on_load(TVM_TP_TRUE, TVM_TP_CALL_COUNT);
    load_ok(vm, "ol.tasm", ol_v1);
    for (int i = 0; i < 5; i++)
        call1("ol", "m", i);
    for (int i = 0; i < 4; i++)
        cr_assert_str_eq(call1("ol", "r", 7), "17");
    cr_assert_eq(count("ol:m/1"), 5);
    cr_assert_eq(count("ol:l/1"), 5);
    cr_assert_eq(count("ol:r/1"), 9);
    cr_assert_eq(count("ol:tp/3"), 0);
    cr_assert_str_eq(take_events(), "");
}

/* on_load + false clears: a module loaded afterwards is not traced */
Test(onload, false_clears)
{
    on_load(TVM_TP_TRUE, TVM_TP_LOCAL);
    on_load(TVM_TP_TRUE, TVM_TP_CALL_COUNT);
    cr_assert_str_eq(info("on_load", "all"),
                     "{all,[{traced,local},{match_spec,[]},{meta,false},{meta_match_spec,false},"
                     "{call_count,true}]}");   /* no call_time item for on_load (BEAM) */
    on_load(TVM_TP_FALSE, TVM_TP_LOCAL);
    cr_assert_str_eq(info("on_load", "traced"), "{traced,false}");
    cr_assert_str_eq(info("on_load", "call_count"), "{call_count,true}");
    on_load(TVM_TP_FALSE, TVM_TP_CALL_COUNT);
    cr_assert_str_eq(info("on_load", "all"), "{all,false}");
    load_ok(vm, "ol.tasm", ol_v1);
    cr_assert_str_eq(call1("ol", "m", 1), "13");
    cr_assert_str_eq(take_events(), "");
    int64_t c;
    cr_assert_eq(tvm_call_count(vm, "ol:m/1", &c), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(info("ol:m/1", "all"), "{all,false}");
}

/* global and local exclude each other in on_load as on a function */
Test(onload, global_and_local_exclude_each_other)
{
    on_load(TVM_TP_TRUE, TVM_TP_LOCAL);
    on_load(TVM_TP_TRUE, TVM_TP_GLOBAL);
    cr_assert_str_eq(info("on_load", "traced"), "{traced,global}");
    on_load(TVM_TP_TRUE, TVM_TP_LOCAL);
    cr_assert_str_eq(info("on_load", "traced"), "{traced,local}");
    on_load(TVM_TP_TRUE, TVM_TP_CALL_TIME);
    cr_assert_str_eq(info("on_load", "call_time"), "{call_time,true}");
}

/* a reload of a traced module gets the on_load settings (the old
 * version's breakpoints go first, as for any load) */
Test(onload, reload_gets_the_settings)
{
    load_ok(vm, "ol.tasm", ol_v1);
    cr_assert_eq(tvm_trace_pattern(vm, "ol:_/_", TVM_TP_TRUE, TVM_TP_GLOBAL, NULL, NULL), TVM_OK);
    cr_assert_str_eq(call1("ol", "m", 1), "13");
    cr_assert_str_eq(take_events(), "ol:m/1(1) global | ol:r/1(1) global");
    on_load(TVM_TP_TRUE, TVM_TP_LOCAL);
    on_load(TVM_TP_TRUE, TVM_TP_CALL_COUNT);
    load_ok(vm, "ol.tasm", ol_v2);
    cr_assert_str_eq(call1("ol", "m", 1), "23");
    cr_assert_str_eq(take_events(),
                     "ol:m/1(1) local | ol:l/1(1) local | ol:r/1(1) local");
    cr_assert_eq(count("ol:r/1"), 1);
    cr_assert_str_eq(info("ol:r/1", "all"),
                     "{all,[{traced,local},{match_spec,[]},{meta,false},{meta_match_spec,false},"
                     "{call_time,false},{call_count,1}]}");
    /* a module loaded later gets them too; one loaded before does not */
    load_ok(vm, "other.tasm", other_src);
    cr_assert_str_eq(call1("other", "f", 4), "4");
    cr_assert_str_eq(take_events(), "other:f/1(4) local");
    /* and trace_pattern works on on_load-armed functions as on any other */
    cr_assert_eq(tvm_trace_pattern(vm, "ol:_/_", TVM_TP_FALSE, TVM_TP_LOCAL, NULL, NULL), TVM_OK);
    cr_assert_str_eq(call1("ol", "m", 1), "23");
    cr_assert_str_eq(take_events(), "");
    cr_assert_eq(count("ol:r/1"), 2);
}

/* a global on_load reload: the new version's exports enter through the
 * trampolines from the first call, and clearing disarms them */
Test(onload, global_reload_and_clear)
{
    on_load(TVM_TP_TRUE, TVM_TP_GLOBAL);
    load_ok(vm, "ol.tasm", ol_v1);
    load_ok(vm, "ol.tasm", ol_v2);
    cr_assert_str_eq(call1("ol", "m", 1), "23");
    cr_assert_str_eq(take_events(), "ol:m/1(1) global | ol:r/1(1) global");
    cr_assert_eq(tvm_trace_pattern(vm, "ol:_/_", TVM_TP_FALSE, TVM_TP_GLOBAL, NULL, NULL), TVM_OK);
    cr_assert_str_eq(call1("ol", "m", 1), "23");
    cr_assert_str_eq(take_events(), "");
}

/* from VM code: erlang:trace_pattern(on_load, true, [local]) and
 * erlang:trace_info(on_load, traced) */
Test(onload, from_vm_code)
{
    load_ok(vm, "ol.tasm", ol_v1);
    tvm_term a[3], r;
    tvm_error err;
    char out[256];
    cr_assert_eq(tvm_parse_term(env, "on_load", &a[0], &err), TVM_OK);
    cr_assert_eq(tvm_parse_term(env, "true", &a[1], &err), TVM_OK);
    cr_assert_eq(tvm_parse_term(env, "[local, call_time]", &a[2], &err), TVM_OK);
    cr_assert_eq(tvm_call(env, "ol", "tp", 3, a, &r), TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "0");
    cr_assert_eq(tvm_parse_term(env, "traced", &a[1], &err), TVM_OK);
    cr_assert_eq(tvm_call(env, "ol", "info", 2, a, &r), TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "{traced,local}");
    cr_assert_eq(tvm_parse_term(env, "call_time", &a[1], &err), TVM_OK);
    cr_assert_eq(tvm_call(env, "ol", "info", 2, a, &r), TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "{call_time,true}");
    take_events();
    load_ok(vm, "other.tasm", other_src);
    cr_assert_str_eq(call1("other", "f", 3), "3");
    cr_assert_str_eq(take_events(), "other:f/1(3) local");
    /* call_time counted the call (the test clock stood still) */
    cr_assert_str_eq(info("other:f/1", "call_time"), "{call_time,[{<0.0.0>,1,0,0}]}");
    /* pause on on_load returns 0 and changes nothing (BEAM behaviour
     * 39: OTP 25.2.3 returns 0 for pause and restart with any flags, and
     * trace_info(on_load, all) is the same before and after) */
    cr_assert_eq(tvm_parse_term(env, "pause", &a[1], &err), TVM_OK);
    cr_assert_eq(tvm_call(env, "ol", "tp", 3, a, &r), TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "0");
    cr_assert_str_eq(info("on_load", "call_time"), "{call_time,true}");
}

/* wrong forms: exact messages, nothing changes */
Test(onload, wrong_forms)
{
    tvm_error err;
    int n = -7;
    cr_assert_eq(tvm_trace_pattern(vm, "on_load", TVM_TP_TRUE, TVM_TP_GLOBAL | TVM_TP_CALL_COUNT,
                                   &n, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message,
                     "tvm_trace_pattern: global cannot be combined with local, call_count or "
                     "call_time");
    cr_assert_eq(tvm_trace_pattern_ms(vm, "on_load", "[{'_',[],[]}]", TVM_TP_TRUE, TVM_TP_META,
                                      7, &n, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_pattern: on_load takes no meta trace");
    cr_assert_eq(tvm_trace_pattern_ms(vm, "on_load", "[{'_',[],[]}", TVM_TP_TRUE, TVM_TP_LOCAL,
                                      0, &n, &err),
                 TVM_ERR_BADARG);
    cr_assert_eq(tvm_trace_pattern(vm, "on_load/1", TVM_TP_TRUE, TVM_TP_LOCAL, &n, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message,
                     "tvm_trace_pattern: bad pattern \"on_load/1\": expected mod:fun/arity");
    cr_assert_eq(n, -7);
    int64_t c;
    cr_assert_eq(tvm_call_count(vm, "on_load", &c), TVM_ERR_BADARG);
    size_t len;
    cr_assert_eq(tvm_call_time(vm, "on_load", NULL, 0, &len), TVM_ERR_BADARG);
    cr_assert_str_eq(info("on_load", "all"), "{all,false}");
    load_ok(vm, "ol.tasm", ol_v1);
    cr_assert_str_eq(call1("ol", "m", 1), "13");
    cr_assert_str_eq(take_events(), "");
}
