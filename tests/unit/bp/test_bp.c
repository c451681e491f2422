/*
 * tests/unit/bp/test_bp.c - the breakpoint engine through the embedding
 * API: tvm_trace_pattern, tvm_trace_info, tvm_call_count, tvm_trace_calls
 * and the call hook, checked against BEAM behaviours 1-10,
 * 32, 33 and 37 (item 38, the concurrency torture, is
 * tests/stress/stress_bp.c).
 *
 * The hook (call_events.h) records every traced call as
 * "mod:fun/arity(args) local|global"; tests compare the whole sequence of
 * events, joined with " | ", against the exact expected text.  The
 * call context `env` is traced (tvm_trace_calls(env, 0, true)), so
 * tvm_call() runs produce events too.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <unistd.h>

#include "tests/unit/bp/call_events.h"
#include "tests/unit/helpers.h"

/* ---- the module under test ---- */

/* Functions of bt, and the exported ones among them. */
#define BT_FUNCS 20
#define BT_EXPORTS 15

/* The natives every VM has: erlang's 40 of vm/bif.c, monitor/2,
 * demonitor/1 and /2 (vm/monitors.c), processes/0 and process_info/1 and /2
 * (vm/procinfo.c), put/2, get/0 and /1, get_keys/0 and /1, erase/0 and
 * /1 (vm/dict.c), system_monitor/0, /1 and /2 (vm/sysmon.c), register/2,
 * unregister/1, whereis/1 and registered/0 (vm/registry.c), link/1,
 * unlink/1, exit/2 and process_flag/2 (vm/links.c), erlang:trace/3 and
 * trace/4 (trace/tr_bif.c), erlang:trace_delivered/1
 * (trace/tr_delivered.c), erlang:trace_pattern/3 and /4 and
 * erlang:trace_info/2 and /3 (breakpoints/), erlang:delete_module/1,
 * purge_module/1, check_old_code/1, module_loaded/1 and
 * function_exported/3 (loader/), 11 time natives (vm/time.c:
 * monotonic_time/0,1, system_time/0,1, time_offset/0,1,
 * convert_time_unit/3, timestamp/0, now/0, unique_integer/0,1); and
 * lists 4, timer 1, io 2 (vm/bif.c), os:timestamp/0 (vm/time.c), trace 5 (OTP 27's trace module:
 * session_create/3, session_destroy/1, function/4, process/4, info/3),
 * code:load_binary/3 (loader/), tracevm:trace_pattern/3, seq_trace 9
 * (vm/seqtrace.c).  A native added
 * or lost changes what a pattern matches: update these. */
#define ERLANG_NATIVES 89
#define OTHER_NATIVES 24

static const char *const bt_src =
    "module bt\n"
    "export wrap/1, exported/1, ex/1, ex/2, both/1, calls_loc/1, len/1, dbl/1\n"
    "export loop/2, tp/3, info/2, waiter/0, loc_only/1, viafun/1, viaapply/1\n"
    /* item 2's chain: wrap -tail, remote-> exported -body-> local -body->
     * local2 -tail-> local_tail */
    "function wrap/1 regs 1\n    tailcallx r0, bt:exported/1\nend\n"
    "function exported/1 regs 1\n    call r0, r0, local/1\n    ret r0\nend\n"
    "function local/1 regs 1\n    call r0, r0, local2/1\n    ret r0\nend\n"
    "function local2/1 regs 1\n    tailcall r0, local_tail/1\nend\n"
    "function local_tail/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function ex/1 regs 1\n    ret r0\nend\n"
    "function ex/2 regs 2\n    add r0, r0, r1\n    ret r0\nend\n"
    /* both(X): ex(X) by a local call, then bt:ex(X + 10) by a remote one */
    "function both/1 regs 3\n"
    "    move r1, r0\n    call r1, r1, ex/1\n"
    "    addi r2, r0, 10\n    callx r2, r2, bt:ex/1\n    ret r2\nend\n"
    /* calls_loc(X): the unexported loc(X) */
    "function calls_loc/1 regs 1\n    call r0, r0, loc/1\n    ret r0\nend\n"
    "function loc/1 regs 1\n    addi r0, r0, 100\n    ret r0\nend\n"
    "function loc_only/1 regs 1\n    tailcall r0, loc2/1\nend\n"
    "function loc2/1 regs 1\n    addi r0, r0, 200\n    ret r0\nend\n"
    /* viafun(X): callf on fun bt:ex/1; viaapply(X): erlang:apply(bt, ex, [X]) */
    "function viafun/1 regs 3\n"
    "    move r2, r0\n    loadk r1, fun bt:ex/1\n    callf r0, r1, 1\n    ret r0\nend\n"
    "function viaapply/1 regs 4\n"
    "    loadk r3, []\n    cons r3, r0, r3\n    loadk r1, bt\n    loadk r2, ex\n"
    "    callx r0, r1, erlang:apply/3\n    ret r0\nend\n"
    "function len/1 regs 1\n    callx r0, r0, erlang:length/1\n    ret r0\nend\n"
    "function dbl/1 regs 1\n    callx r0, r0, t:dbl/1\n    ret r0\nend\n"
    /* loop(N, X): N times ex(X) by a local call and bt:ex(X) by a remote
     * one; returns N */
    "function loop/2 regs 4\n"
    "    move r2, r0\n"
    "top:\n"
    "    jeqi r2, 0, done\n"
    "    move r3, r1\n    call r3, r3, ex/1\n"
    "    move r3, r1\n    callx r3, r3, bt:ex/1\n"
    "    addi r2, r2, -1\n    jump top\n"
    "done:\n    ret r0\nend\n"
    "function tp/3 regs 3\n    callx r0, r0, erlang:trace_pattern/3\n    ret r0\nend\n"
    "function info/2 regs 2\n    callx r0, r0, erlang:trace_info/2\n    ret r0\nend\n"
    /* waiter(): receives one message X and returns bt:ex(X) */
    "function waiter/0 regs 2\n"
    "loop:\n"
    "    recv r0, none\n    accept\n    callx r0, r0, bt:ex/1\n    ret r0\n"
    "none:\n"
    "    loadk r1, infinity\n    wait r1, never\n    jump loop\n"
    "never:\n    ret r1\nend\n";

/* t:dbl/1, a native of the test */
static tvm_status dbl(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    int64_t v;
    if (tvm_get_int(e, argv[0], &v) != TVM_OK)
        return tvm_raise_badarg(e);
    return tvm_make_int(e, 2 * v, result);
}

/* ---- fixture ---- */

static tvm_vm *vm;
static tvm_env *env;

static void start_vm(const tvm_config *cfg)
{
    vm = tvm_new(cfg);
    cr_assert_not_null(vm);
    env = tvm_env_new(vm);
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "t", "dbl", 1, dbl, NULL, &err), TVM_OK, "%s",
                 err.message);
    load_ok(vm, "bt.tasm", bt_src);
    record_calls(vm, env);
}

static void setup(void)
{
    start_vm(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true });
}

static void teardown(void)
{
    tvm_env_free(env);
    tvm_destroy(vm);
}

TestSuite(bp, .init = setup, .fini = teardown, .timeout = 60);

/* ---- helpers ---- */

/* trace_pattern that must succeed; returns the number matched. */
static int tp(const char *pattern, tvm_tp_action how, unsigned flags)
{
    tvm_error err;
    int n = -1;
    tvm_status st = tvm_trace_pattern(vm, pattern, how, flags, &n, &err);
    cr_assert_eq(st, TVM_OK, "trace_pattern(%s): %s", pattern, err.message);
    cr_assert_str_eq(err.message, "");
    return n;
}

/* trace_pattern that must fail with `message`. */
static void tp_bad(const char *pattern, tvm_tp_action how, unsigned flags, const char *message)
{
    tvm_error err;
    int n = -7;
    tvm_status st = tvm_trace_pattern(vm, pattern, how, flags, &n, &err);
    cr_assert_eq(st, TVM_ERR_BADARG, "trace_pattern(%s) gave %s", pattern, tvm_status_name(st));
    cr_assert_eq(err.status, TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, message);
    cr_assert_eq(n, -7, "a failed trace_pattern wrote *matched");
}

/* trace_info(mfa, item) formatted. */
static const char *info(const char *mfa, const char *item)
{
    static char out[512];
    tvm_term t;
    tvm_error err;
    cr_assert_eq(tvm_trace_info(env, mfa, item, &t, &err), TVM_OK, "trace_info(%s, %s): %s",
                 mfa, item, err.message);
    tvm_format_term(env, t, out, sizeof out);
    return out;
}

/* mod:fun(args) with integer arguments on the call context, formatted. */
static const char *call(const char *mod, const char *fun, int argc, int64_t a, int64_t b)
{
    static char out[512];
    int64_t args[2] = { a, b };
    tvm_status st = call_fmt(env, mod, fun, argc, args, out, sizeof out);
    cr_assert(st == TVM_OK || st == TVM_EXCEPTION, "%s:%s: %s", mod, fun, tvm_status_name(st));
    return out;
}

/* mod:fun(ArgText) where ArgText is one term in literal syntax. */
static const char *call_term(const char *mod, const char *fun, const char *arg)
{
    static char out[512];
    tvm_term a, r;
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, arg, &a, &err), TVM_OK, "%s", err.message);
    tvm_status st = tvm_call(env, mod, fun, 1, &a, &r);
    cr_assert_eq(st, TVM_OK, "%s:%s(%s): %s", mod, fun, arg, tvm_status_name(st));
    tvm_format_term(env, r, out, sizeof out);
    return out;
}

static int64_t count_of(const char *mfa)
{
    int64_t n = -1;
    tvm_status st = tvm_call_count(vm, mfa, &n);
    cr_assert_eq(st, TVM_OK, "call_count(%s): %s", mfa, tvm_status_name(st));
    return n;
}

/* Spawns mod:fun(Args) where Args is a list in literal syntax. */
static tvm_pid spawn_terms(const char *mod, const char *fun, const char *args)
{
    tvm_term l, a[8];
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, args, &l, &err), TVM_OK, "%s", err.message);
    int n = 0;
    tvm_term h, t;
    while (tvm_list_cell(env, l, &h, &t) == TVM_OK) {
        a[n++] = h;
        l = t;
    }
    tvm_pid pid = 0;
    cr_assert_eq(tvm_spawn(env, mod, fun, n, a, &pid), TVM_OK);
    return pid;
}

static const char *join(tvm_pid pid)
{
    static char out[512];
    tvm_term r;
    tvm_status st = tvm_join(env, pid, &r);
    if (st == TVM_EXCEPTION) {
        tvm_format_exception(env, out, sizeof out);
        cr_assert_fail("process raised: %s", out);
    }
    cr_assert_eq(st, TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    return out;
}

static void send_int(tvm_pid pid, int64_t v)
{
    tvm_term m;
    cr_assert_eq(tvm_make_int(env, v, &m), TVM_OK);
    cr_assert_eq(tvm_send(env, pid, m), TVM_OK);
}

#define ALL_FALSE_BUT(traced, ms, cc)                                                      \
    "{all,[{traced," traced "},{match_spec," ms "},{meta,false},{meta_match_spec,false},"  \
    "{call_time,false},{call_count," cc "}]}"

/* ==== item 1: global traces remote calls only ==== */

Test(bp, global_traces_remote_calls_only)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, 0), 1);
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    cr_assert_str_eq(take_events(), "bt:ex/1(11) global");
    /* tvm_call goes through the export table: a remote call */
    cr_assert_str_eq(call("bt", "ex", 1, 5, 0), "5");
    cr_assert_str_eq(take_events(), "bt:ex/1(5) global");
    /* loop/2 makes 3 local and 3 remote calls */
    cr_assert_str_eq(call("bt", "loop", 2, 3, 4), "3");
    cr_assert_str_eq(take_events(), "bt:ex/1(4) global | bt:ex/1(4) global | bt:ex/1(4) global");
    /* TVM_TP_GLOBAL is the same as flags 0 */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, 0), 1);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    cr_assert_str_eq(call("bt", "both", 1, 2, 0), "12");
    cr_assert_str_eq(take_events(), "bt:ex/1(12) global");
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,global}");
    /* functions that are not traced produce nothing even when called remotely */
    cr_assert_str_eq(call("bt", "ex", 2, 1, 2), "3");
    cr_assert_str_eq(take_events(), "");
}

/* funs and erlang:apply/3 call through the export entry: remote calls */
Test(bp, funs_and_apply_are_remote_calls)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    cr_assert_str_eq(call("bt", "viafun", 1, 3, 0), "3");
    cr_assert_str_eq(call("bt", "viaapply", 1, 4, 0), "4");
    cr_assert_str_eq(take_events(), "bt:ex/1(3) global | bt:ex/1(4) global");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(call("bt", "viafun", 1, 5, 0), "5");
    cr_assert_str_eq(call("bt", "viaapply", 1, 6, 0), "6");
    cr_assert_str_eq(take_events(), "bt:ex/1(5) local | bt:ex/1(6) local");
    /* apply itself is a native and can be traced too */
    cr_assert_eq(tp("erlang:apply/3", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    cr_assert_str_eq(call("bt", "viaapply", 1, 7, 0), "7");
    cr_assert_str_eq(take_events(), "erlang:apply/3(bt,ex,[7]) global | bt:ex/1(7) local");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("erlang:apply/3", TVM_TP_FALSE, TVM_TP_GLOBAL), 1);
    cr_assert_str_eq(call("bt", "viafun", 1, 8, 0), "8");
    cr_assert_str_eq(call("bt", "viaapply", 1, 9, 0), "9");
    cr_assert_str_eq(take_events(), "");
}

/* exceptions through traced functions keep their stack traces */
Test(bp, exceptions_through_traced_functions)
{
    cr_assert_eq(tp("erlang:length/1", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    cr_assert_eq(tp("bt:len/1", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    tvm_term a, r;
    cr_assert_eq(tvm_make_int(env, 5, &a), TVM_OK);
    cr_assert_eq(tvm_call(env, "bt", "len", 1, &a, &r), TVM_EXCEPTION);
    char buf[512];
    tvm_format_exception(env, buf, sizeof buf);
    cr_assert_str_eq(buf, "exception error: badarg\n  in erlang:length/1 (native)\n"
                          "  in bt:len/1 (bt.tasm:66)\n");
    cr_assert_str_eq(take_events(), "bt:len/1(5) global | erlang:length/1(5) global");
    cr_assert_eq(tp("bt:len/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tvm_call(env, "bt", "len", 1, &a, &r), TVM_EXCEPTION);
    tvm_format_exception(env, buf, sizeof buf);
    cr_assert_str_eq(buf, "exception error: badarg\n  in erlang:length/1 (native)\n"
                          "  in bt:len/1 (bt.tasm:66)\n");
    cr_assert_str_eq(take_events(), "bt:len/1(5) local | erlang:length/1(5) global");
}

/* ==== item 2: local traces every call, in call order ==== */

Test(bp, local_traces_local_remote_and_tail_calls_in_order)
{
    cr_assert_eq(tp("bt:wrap/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("bt:exported/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("bt:local/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("bt:local2/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("bt:local_tail/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(call("bt", "wrap", 1, 1, 0), "2");
    cr_assert_str_eq(take_events(), "bt:wrap/1(1) local | bt:exported/1(1) local | "
                                    "bt:local/1(1) local | bt:local2/1(1) local | "
                                    "bt:local_tail/1(1) local");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(call("bt", "both", 1, 7, 0), "17");
    cr_assert_str_eq(take_events(), "bt:ex/1(7) local | bt:ex/1(17) local");
    cr_assert_str_eq(call("bt", "loop", 2, 2, 9), "2");
    cr_assert_str_eq(take_events(),
                     "bt:ex/1(9) local | bt:ex/1(9) local | bt:ex/1(9) local | bt:ex/1(9) local");
    /* a tail-called unexported function */
    cr_assert_eq(tp("bt:loc2/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(call("bt", "loc_only", 1, 1, 0), "201");
    cr_assert_str_eq(take_events(), "bt:loc2/1(1) local");
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,local}");
    cr_assert_str_eq(info("bt:loc2/1", "traced"), "{traced,local}");
}

/* ==== item 3: the number matched ==== */

Test(bp, return_value_is_the_number_matched)
{
    cr_assert_eq(tp("bt:_/_", TVM_TP_TRUE, TVM_TP_LOCAL), BT_FUNCS);
    cr_assert_eq(tp("bt:_/_", TVM_TP_TRUE, TVM_TP_LOCAL), BT_FUNCS);
    cr_assert_eq(tp("bt:_/_", TVM_TP_FALSE, TVM_TP_LOCAL), BT_FUNCS);
    cr_assert_eq(tp("bt:_/_", TVM_TP_FALSE, TVM_TP_LOCAL), BT_FUNCS);
    /* global counts exported functions only */
    cr_assert_eq(tp("bt:_/_", TVM_TP_TRUE, 0), BT_EXPORTS);
    cr_assert_eq(tp("bt:_/_", TVM_TP_TRUE, TVM_TP_GLOBAL), BT_EXPORTS);
    cr_assert_eq(tp("bt:_/_", TVM_TP_FALSE, TVM_TP_GLOBAL), BT_EXPORTS);
    cr_assert_eq(tp("bt:_/_", TVM_TP_TRUE, TVM_TP_CALL_COUNT), BT_FUNCS);
    cr_assert_eq(tp("bt:_/_", TVM_TP_PAUSE, TVM_TP_CALL_COUNT), BT_FUNCS);
    cr_assert_eq(tp("bt:_/_", TVM_TP_RESTART, TVM_TP_CALL_COUNT), BT_FUNCS);
    cr_assert_eq(tp("bt:_/_", TVM_TP_FALSE, TVM_TP_CALL_COUNT), BT_FUNCS);
    /* m:f/_ matches every arity; m:f/a one function */
    cr_assert_eq(tp("bt:ex/_", TVM_TP_TRUE, TVM_TP_LOCAL), 2);
    cr_assert_eq(tp("bt:ex/_", TVM_TP_TRUE, TVM_TP_LOCAL), 2);
    cr_assert_eq(tp("bt:ex/2", TVM_TP_FALSE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("bt:ex/3", TVM_TP_TRUE, TVM_TP_LOCAL), 0);
    cr_assert_eq(tp("bt:loc/_", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    /* natives: every one of erlang's, each time */
    int n = tp("erlang:_/_", TVM_TP_TRUE, TVM_TP_LOCAL);
    cr_assert_eq(n, ERLANG_NATIVES);
    cr_assert_eq(tp("erlang:_/_", TVM_TP_FALSE, TVM_TP_LOCAL), n);
    cr_assert_eq(tp("erlang:_/_", TVM_TP_TRUE, 0), n);
    cr_assert_eq(tp("erlang:_/_", TVM_TP_FALSE, 0), n);
    cr_assert_eq(tp("t:_/_", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("t:_/_", TVM_TP_FALSE, TVM_TP_LOCAL), 1);
    /* _:_/_ covers bt, t and every native */
    int all = tp("_:_/_", TVM_TP_TRUE, TVM_TP_LOCAL);
    cr_assert_eq(all, BT_FUNCS + 1 + ERLANG_NATIVES + OTHER_NATIVES);
    cr_assert_eq(tp("_:_/_", TVM_TP_FALSE, TVM_TP_LOCAL), all);
    cr_assert_str_eq(take_events(), "");
}

/* ==== items 4 and 10: trace_info ==== */

Test(bp, trace_info_traced_and_all)
{
    cr_assert_str_eq(info("bt:nope/1", "traced"), "{traced,undefined}");
    cr_assert_str_eq(info("bt:ex/3", "traced"), "{traced,undefined}");
    cr_assert_str_eq(info("nomod:ex/1", "all"), "{all,undefined}");
    cr_assert_str_eq(info("nomod:ex/1", "call_count"), "{call_count,undefined}");
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,false}");
    cr_assert_str_eq(info("bt:ex/1", "call_count"), "{call_count,false}");
    cr_assert_str_eq(info("bt:ex/1", "all"), "{all,false}");
    cr_assert_eq(tp("bt:nope/1", TVM_TP_TRUE, TVM_TP_LOCAL), 0);
    cr_assert_str_eq(info("bt:nope/1", "traced"), "{traced,undefined}");

    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, 0), 1);
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,global}");
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("global", "[]", "false"));
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,local}");
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("local", "[]", "false"));
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(info("bt:ex/1", "call_count"), "{call_count,0}");
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("local", "[]", "0"));
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("false", "false", "0"));
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("false", "false", "2"));
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), "{all,false}");
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,false}");
    /* natives */
    cr_assert_str_eq(info("erlang:length/1", "traced"), "{traced,false}");
    cr_assert_str_eq(info("t:dbl/1", "all"), "{all,false}");
    cr_assert_str_eq(info("t:dbl/2", "all"), "{all,undefined}");

    /* bad arguments */
    tvm_term t;
    tvm_error err;
    cr_assert_eq(tvm_trace_info(env, "bt:_/_", "traced", &t, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message,
                     "tvm_trace_info: bad function \"bt:_/_\": wildcards are not allowed here");
    cr_assert_eq(tvm_trace_info(env, "bt:ex/1", "match_specs", &t, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_info: bad item: expected traced, call_count, "
                                  "call_time, match_spec, meta, meta_match_spec or all");
    cr_assert_eq(tvm_trace_info(env, "bt:ex/1", NULL, &t, &err), TVM_ERR_BADARG);
    cr_assert_eq(tvm_trace_info(env, "bt.ex", "traced", &t, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_info: bad pattern \"bt.ex\": expected mod:fun/arity");
    cr_assert_eq(tvm_trace_info(env, "bt:ex/1", "traced", NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_info: NULL out");
    cr_assert_eq(tvm_trace_info(NULL, "bt:ex/1", "traced", &t, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_info: NULL env");
    int64_t c;
    cr_assert_eq(tvm_call_count(vm, "bt:_/1", &c), TVM_ERR_BADARG);
    cr_assert_eq(tvm_call_count(vm, "bt:ex/1", NULL), TVM_ERR_BADARG);
    cr_assert_eq(tvm_call_count(vm, "bt:ex/1", &c), TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_call_count(vm, "bt:nope/1", &c), TVM_ERR_NOTFOUND);
}

/* trace_info and trace_pattern from VM code (the natives) */
Test(bp, trace_info_from_vm_code)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    tvm_term a[2], r;
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, "{bt, ex, 1}", &a[0], &err), TVM_OK);
    cr_assert_eq(tvm_make_atom(env, "all", &a[1]), TVM_OK);
    cr_assert_eq(tvm_call(env, "bt", "info", 2, a, &r), TVM_OK);
    char out[512];
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, ALL_FALSE_BUT("false", "false", "2"));
    cr_assert_eq(tvm_make_atom(env, "call_count", &a[1]), TVM_OK);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "bt", "info", 2, a, &pid), TVM_OK);
    cr_assert_str_eq(join(pid), "{call_count,2}");
}

/* ==== item 5: module not loaded ==== */

Test(bp, module_not_loaded_matches_nothing)
{
    cr_assert_eq(tp("nomod:_/_", TVM_TP_TRUE, TVM_TP_LOCAL), 0);
    cr_assert_eq(tp("nomod:f/1", TVM_TP_TRUE, 0), 0);
    cr_assert_eq(tp("nomod:f/_", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 0);
    int64_t c;
    cr_assert_eq(tvm_call_count(vm, "nomod:f/1", &c), TVM_ERR_NOTFOUND);
    /* not loaded as a side effect: a call is still undef */
    cr_assert_str_eq(call("nomod", "f", 1, 1, 0), "error:undef");
    cr_assert_str_eq(take_events(), "");
    cr_assert_str_eq(info("nomod:f/1", "traced"), "{traced,undefined}");
}

/* ==== item 6: bad requests change nothing ==== */

Test(bp, bad_requests_are_badarg_and_change_nothing)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("bt:ex/2", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    tp_bad("_:ex/1", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"_:ex/1\": only trailing wildcards are allowed");
    tp_bad("_:_/1", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"_:_/1\": only trailing wildcards are allowed");
    tp_bad("bt:_/1", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"bt:_/1\": only trailing wildcards are allowed");
    tp_bad("_:ex/_", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"_:ex/_\": only trailing wildcards are allowed");
    tp_bad("bt:ex/b", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"bt:ex/b\": arity must be 0..255 or _");
    tp_bad("bt:ex/01", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"bt:ex/01\": arity must be 0..255 or _");
    tp_bad("bt:ex/-1", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"bt:ex/-1\": arity must be 0..255 or _");
    tp_bad("bt:ex/256", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"bt:ex/256\": arity must be 0..255 or _");
    tp_bad("bt:ex/", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"bt:ex/\": arity must be 0..255 or _");
    tp_bad("bt.ex/1", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"bt.ex/1\": expected mod:fun/arity");
    tp_bad("bt:ex", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"bt:ex\": expected mod:fun/arity");
    tp_bad(NULL, TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"(null)\": expected mod:fun/arity");
    tp_bad(":ex/1", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \":ex/1\": module and function must be 1..255 bytes");
    tp_bad("bt:/1", TVM_TP_FALSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad pattern \"bt:/1\": module and function must be 1..255 bytes");
    tp_bad("bt:ex/1", (tvm_tp_action)7, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad action 7: expected true, false, pause or restart");
    tp_bad("bt:ex/1", (tvm_tp_action)-1, TVM_TP_LOCAL,
           "tvm_trace_pattern: bad action -1: expected true, false, pause or restart");
    tp_bad("bt:ex/1", TVM_TP_FALSE, 32, "tvm_trace_pattern: unknown flags 0x20");
    tp_bad("bt:ex/1", TVM_TP_FALSE, TVM_TP_LOCAL | 0x300, "tvm_trace_pattern: unknown flags 0x300");
    tp_bad("bt:ex/1", TVM_TP_FALSE, TVM_TP_GLOBAL | TVM_TP_LOCAL,
           "tvm_trace_pattern: global cannot be combined with local, call_count or call_time");
    tp_bad("bt:ex/1", TVM_TP_TRUE, TVM_TP_GLOBAL | TVM_TP_CALL_COUNT,
           "tvm_trace_pattern: global cannot be combined with local, call_count or call_time");
    tp_bad("bt:ex/1", TVM_TP_PAUSE, TVM_TP_LOCAL,
           "tvm_trace_pattern: pause applies only to call_count and call_time");
    tp_bad("bt:ex/_", TVM_TP_PAUSE, 0, "tvm_trace_pattern: pause applies only to call_count and call_time");
    tp_bad("bt:ex/2", TVM_TP_PAUSE, TVM_TP_CALL_COUNT | TVM_TP_LOCAL,
           "tvm_trace_pattern: pause applies only to call_count and call_time");
    tp_bad("bt:ex/2", TVM_TP_RESTART, TVM_TP_GLOBAL,
           "tvm_trace_pattern: restart applies only to call_count and call_time");
    tp_bad("bt:ex/2", TVM_TP_RESTART, 0, "tvm_trace_pattern: restart applies only to call_count and call_time");
    tvm_error err;
    cr_assert_eq(tvm_trace_pattern(NULL, "bt:ex/1", TVM_TP_FALSE, 0, NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_pattern: NULL vm");
    /* err may be NULL */
    cr_assert_eq(tvm_trace_pattern(vm, "_:ex/1", TVM_TP_FALSE, 0, NULL, NULL), TVM_ERR_BADARG);
    /* nothing changed: ex/1 still traced, ex/2 still counting */
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    cr_assert_str_eq(call("bt", "ex", 2, 1, 1), "2");
    cr_assert_str_eq(take_events(), "bt:ex/1(1) local | bt:ex/1(11) local");
    cr_assert_eq(count_of("bt:ex/2"), 1);
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,local}");
    /* matched may be NULL on success */
    cr_assert_eq(tvm_trace_pattern(vm, "bt:ex/1", TVM_TP_FALSE, TVM_TP_LOCAL, NULL, NULL), TVM_OK);
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,false}");
}

/* the natives' argument checks: error:badarg, nothing changes;
 * tracevm:trace_pattern/3 gives {error, Why} for each */
Test(bp, bad_requests_from_vm_code_are_badarg)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    static const char *const bad[][3] = {
        { "{'_', ex, 1}", "false", "[local]" },  { "{bt, '_', 1}", "false", "[local]" },
        { "{bt, ex, b}", "false", "[local]" },    { "{bt, ex, -1}", "false", "[local]" },
        { "{bt, ex, 256}", "false", "[local]" },  { "{bt, ex}", "false", "[local]" },
        { "bt", "false", "[local]" },             { "{bt, ex, 1}", "maybe", "[local]" },
        { "{bt, ex, 1}", "false", "[locl]" },     { "{bt, ex, 1}", "false", "local" },
        { "{bt, ex, 1}", "false", "[local|x]" },  { "{bt, ex, 1}", "false", "[global, local]" },
        { "{bt, ex, 1}", "pause", "[local]" },    { "{bt, ex, 1}", "restart", "[]" },
        { "{\"bt\", ex, 1}", "false", "[local]" }, { "{bt, 1, 1}", "false", "[local]" },
    };
#define BAD_FN "{error,<<\"bad function: expected {Mod, Fun, Arity} with trailing '_' wildcards, " \
               "or on_load\">>}"
#define BAD_FLAGS "{error,<<\"bad flags: expected a list of global, local, call_count, " \
                  "call_time, meta or {meta, Pid}\">>}"
    static const char *const bad_why[] = {
        BAD_FN, BAD_FN, BAD_FN, BAD_FN, BAD_FN, BAD_FN, BAD_FN,
        "{error,<<\"bad action: expected true, false, pause, restart or a match spec\">>}",
        BAD_FLAGS, BAD_FLAGS, BAD_FLAGS,
        "{error,<<\"global cannot be combined with local, call_count or call_time\">>}",
        "{error,<<\"pause applies only to call_count and call_time\">>}",
        "{error,<<\"restart applies only to call_count and call_time\">>}",
        BAD_FN, BAD_FN,
    };
    _Static_assert(sizeof bad_why / sizeof bad_why[0] == sizeof bad / sizeof bad[0], "one each");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tvm_term a[3], r;
        tvm_error err;
        for (int k = 0; k < 3; k++)
            cr_assert_eq(tvm_parse_term(env, bad[i][k], &a[k], &err), TVM_OK, "%s", bad[i][k]);
        cr_assert_eq(tvm_call(env, "bt", "tp", 3, a, &r), TVM_EXCEPTION, "case %zu", i);
        tvm_term cls, reason;
        cr_assert_eq(tvm_get_exception(env, &cls, &reason), TVM_OK);
        char c[64], rs[64];
        tvm_format_term(env, cls, c, sizeof c);
        tvm_format_term(env, reason, rs, sizeof rs);
        cr_assert_str_eq(c, "error", "case %zu", i);
        cr_assert_str_eq(rs, "badarg", "case %zu: %s %s %s", i, bad[i][0], bad[i][1], bad[i][2]);
        tvm_clear_exception(env);
        /* tracevm:trace_pattern/3 gives the reason instead. */
        char why[200];
        cr_assert_eq(tvm_call(env, "tracevm", "trace_pattern", 3, a, &r), TVM_OK, "case %zu", i);
        tvm_format_term(env, r, why, sizeof why);
        cr_assert_str_eq(why, bad_why[i], "case %zu", i);
    }
    cr_assert_str_eq(take_events(), "");
    cr_assert_str_eq(call("bt", "ex", 1, 3, 0), "3");
    cr_assert_str_eq(take_events(), "bt:ex/1(3) local");
}

/* Match specs through the C API: a spec filters the hook's calls, a bad
 * spec is refused with the compiler's message and changes nothing, a
 * spec goes only with true, meta needs a tracer, a bad one from VM code
 * raises badarg (as BEAM) and tracevm:trace_pattern/3 gives {error, Why}. */
Test(bp, match_specs_from_c_and_bad_specs_change_nothing)
{
    tvm_error err;
    int n = -1;
    const char *spec = "[{['$1'],[{'>','$1',5}],[]}]";
    cr_assert_eq(tvm_trace_pattern_ms(vm, "bt:ex/1", spec, TVM_TP_TRUE, TVM_TP_LOCAL, 0, &n,
                                      &err), TVM_OK, "%s", err.message);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(call("bt", "ex", 1, 3, 0), "3");
    cr_assert_str_eq(call("bt", "ex", 1, 7, 0), "7");
    cr_assert_str_eq(take_events(), "bt:ex/1(7) local");
    static const char *const bad[][2] = {
        { "[{['$1'],[{'>','$1'}],[]}]",
          "tvm_trace_pattern: match spec clause 1: guard 1: unknown function '>'/1" },
        { "[{['$1'],[],[{return_trace}]}|x]",
          "tvm_trace_pattern: match spec: not a proper list" },
        { "[{['$1'],[{'>','$1',5}],[]}", "tvm_trace_pattern: bad match spec: term:1:28: "
                                          "error: bad literal: expected ',' or ']', got end of file" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = -7;
        cr_assert_eq(tvm_trace_pattern_ms(vm, "bt:ex/1", bad[i][0], TVM_TP_TRUE, TVM_TP_LOCAL, 0,
                                          &n, &err), TVM_ERR_BADARG, "case %zu", i);
        cr_assert_str_eq(err.message, bad[i][1]);
        cr_assert_eq(n, -7);
    }
    cr_assert_eq(tvm_trace_pattern_ms(vm, "bt:ex/1", spec, TVM_TP_FALSE, TVM_TP_LOCAL, 0, &n,
                                      &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_pattern: a match spec goes only with true");
    cr_assert_eq(tvm_trace_pattern_ms(vm, "bt:ex/1", NULL, TVM_TP_TRUE, TVM_TP_META, 0, &n,
                                      &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_pattern: meta needs a tracer process");
    /* Nothing changed: the first spec still filters, trace_info gives it. */
    cr_assert_str_eq(info("bt:ex/1", "match_spec"), "{match_spec,[{['$1'],[{'>','$1',5}],[]}]}");
    /* local trace but no meta: [] (BEAM) */
    cr_assert_str_eq(info("bt:ex/1", "meta"), "{meta,[]}");
    cr_assert_str_eq(call("bt", "ex", 1, 4, 0), "4");
    cr_assert_str_eq(call("bt", "ex", 1, 9, 0), "9");
    cr_assert_str_eq(take_events(), "bt:ex/1(9) local");
    /* From VM code: badarg, as BEAM. */
    tvm_term a[3], r, cls, reason;
    cr_assert_eq(tvm_parse_term(env, "{bt, ex, 1}", &a[0], &err), TVM_OK);
    cr_assert_eq(tvm_parse_term(env, "[{['$1'],[{foo,'$1'}],[]}]", &a[1], &err), TVM_OK);
    cr_assert_eq(tvm_parse_term(env, "[local]", &a[2], &err), TVM_OK);
    cr_assert_eq(tvm_call(env, "bt", "tp", 3, a, &r), TVM_EXCEPTION);
    cr_assert_eq(tvm_get_exception(env, &cls, &reason), TVM_OK);
    char rs[200];
    tvm_format_term(env, reason, rs, sizeof rs);
    cr_assert_str_eq(rs, "badarg");
    tvm_clear_exception(env);
    /* tracevm:trace_pattern/3 says why, and changes nothing either. */
    cr_assert_eq(tvm_call(env, "tracevm", "trace_pattern", 3, a, &r), TVM_OK);
    tvm_format_term(env, r, rs, sizeof rs);
    cr_assert_str_eq(rs, "{error,<<\"match spec clause 1: guard 1: unknown function foo/1\">>}");
    cr_assert_str_eq(info("bt:ex/1", "match_spec"), "{match_spec,[{['$1'],[{'>','$1',5}],[]}]}");
    /* true without a spec: every call again, trace_info []. */
    tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL);
    cr_assert_str_eq(info("bt:ex/1", "match_spec"), "{match_spec,[]}");
    cr_assert_str_eq(call("bt", "ex", 1, 1, 0), "1");
    cr_assert_str_eq(take_events(), "bt:ex/1(1) local");
}

/* ==== item 7: off stops events for later calls ==== */

Test(bp, turning_off_stops_events)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(call("bt", "ex", 1, 1, 0), "1");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(call("bt", "both", 1, 2, 0), "12");
    cr_assert_str_eq(take_events(), "bt:ex/1(1) local");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, 0), 1);
    cr_assert_str_eq(call("bt", "ex", 1, 3, 0), "3");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, 0), 1);
    cr_assert_str_eq(call("bt", "both", 1, 4, 0), "14");
    cr_assert_str_eq(take_events(), "bt:ex/1(3) global");
    /* on the whole module, and off again */
    cr_assert_eq(tp("bt:_/_", TVM_TP_TRUE, TVM_TP_LOCAL), BT_FUNCS);
    cr_assert_str_eq(call("bt", "calls_loc", 1, 1, 0), "101");
    cr_assert_eq(tp("bt:_/_", TVM_TP_FALSE, TVM_TP_LOCAL), BT_FUNCS);
    cr_assert_str_eq(call("bt", "calls_loc", 1, 2, 0), "102");
    cr_assert_str_eq(call("bt", "wrap", 1, 2, 0), "3");
    cr_assert_str_eq(take_events(), "bt:calls_loc/1(1) local | bt:loc/1(1) local");
    /* process tracing off stops events too, the pattern staying */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tvm_trace_calls(env, 0, false), TVM_OK);
    cr_assert_str_eq(call("bt", "ex", 1, 5, 0), "5");
    cr_assert_str_eq(take_events(), "");
    cr_assert_eq(tvm_trace_calls(env, 0, true), TVM_OK);
    cr_assert_str_eq(call("bt", "ex", 1, 6, 0), "6");
    cr_assert_str_eq(take_events(), "bt:ex/1(6) local");
    /* a NULL hook: no events; a new hook gets them */
    tvm_set_call_hook(vm, NULL, NULL);
    cr_assert_str_eq(call("bt", "ex", 1, 7, 0), "7");
    cr_assert_str_eq(take_events(), "");
    tvm_set_call_hook(vm, hook, NULL);
    cr_assert_str_eq(call("bt", "ex", 1, 8, 0), "8");
    cr_assert_str_eq(take_events(), "bt:ex/1(8) local");
}

/* ==== item 8: global on an unexported function ==== */

Test(bp, global_on_unexported_function_matches_nothing_and_removes_local)
{
    cr_assert_eq(tp("bt:loc/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("bt:calls_loc/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(call("bt", "calls_loc", 1, 1, 0), "101");
    cr_assert_str_eq(take_events(), "bt:calls_loc/1(1) local | bt:loc/1(1) local");
    cr_assert_eq(tp("bt:loc/1", TVM_TP_TRUE, 0), 0);
    cr_assert_str_eq(info("bt:loc/1", "traced"), "{traced,false}");
    cr_assert_str_eq(call("bt", "calls_loc", 1, 2, 0), "102");
    cr_assert_str_eq(take_events(), "bt:calls_loc/1(2) local");
    /* the same through a wildcard: loc/1 is not counted, calls_loc/1 is */
    cr_assert_eq(tp("bt:loc/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("bt:calls_loc/_", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    cr_assert_eq(tp("bt:loc/_", TVM_TP_TRUE, TVM_TP_GLOBAL), 0);
    cr_assert_str_eq(call("bt", "calls_loc", 1, 3, 0), "103");
    cr_assert_str_eq(take_events(), "bt:calls_loc/1(3) global");
    /* global false on it matches nothing and changes nothing */
    cr_assert_eq(tp("bt:loc/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_eq(tp("bt:loc/1", TVM_TP_FALSE, TVM_TP_GLOBAL), 0);
    cr_assert_str_eq(info("bt:loc/1", "traced"), "{traced,local}");
}

/* ==== item 9: switching kinds, systematic ==== */

Test(bp, switching_global_and_local_replaces_the_other)
{
    /* global -> local: one event per call, local */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, 0), 1);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,local}");
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    cr_assert_str_eq(take_events(), "bt:ex/1(1) local | bt:ex/1(11) local");
    /* local -> global */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,global}");
    cr_assert_str_eq(call("bt", "both", 1, 2, 0), "12");
    cr_assert_str_eq(take_events(), "bt:ex/1(12) global");
    /* false local leaves global */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,global}");
    /* local + call_count; false global leaves both */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("local", "[]", "0"));
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_GLOBAL), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("local", "[]", "0"));
    cr_assert_str_eq(call("bt", "both", 1, 3, 0), "13");
    cr_assert_str_eq(take_events(), "bt:ex/1(3) local | bt:ex/1(13) local");
    cr_assert_eq(count_of("bt:ex/1"), 2);
    /* true global clears local and call_count (OTP 25.2.3: after true
     * [global] on a function with local trace and a counter,
     * trace_info(MFA, all) is {traced,global} ... {call_count,false}) */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("global", "[]", "false"));
    cr_assert_str_eq(call("bt", "both", 1, 4, 0), "14");
    cr_assert_str_eq(take_events(), "bt:ex/1(14) global");
    /* a counter again; true local clears global, keeps call_count */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(call("bt", "both", 1, 4, 0), "14");
    cr_assert_str_eq(take_events(), "bt:ex/1(14) global");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("local", "[]", "2"));
    cr_assert_str_eq(call("bt", "both", 1, 5, 0), "15");
    cr_assert_str_eq(take_events(), "bt:ex/1(5) local | bt:ex/1(15) local");
    cr_assert_eq(count_of("bt:ex/1"), 4);
    /* call_count false leaves local */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("local", "[]", "false"));
    /* local and call_count false together clears everything */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), "{all,false}");
    /* global + call_count, then call_count false: global stays */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, 0), 1);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("global", "[]", "0"));
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("global", "[]", "false"));
    cr_assert_str_eq(call("bt", "both", 1, 5, 0), "15");
    cr_assert_str_eq(take_events(), "bt:ex/1(15) global");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, 0), 1);
    cr_assert_str_eq(info("bt:ex/1", "all"), "{all,false}");
    cr_assert_str_eq(call("bt", "both", 1, 6, 0), "16");
    cr_assert_str_eq(take_events(), "");
}

/* ==== items 32 and 33: call_count ==== */

Test(bp, call_count_counts_every_call_of_every_process)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(tp("bt:loop/2", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(tp("bt:ex/2", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(count_of("bt:ex/1"), 0);
    cr_assert_str_eq(call("bt", "loop", 2, 10, 1), "10");
    cr_assert_eq(count_of("bt:ex/1"), 20);
    cr_assert_eq(count_of("bt:loop/2"), 1);
    /* 6 processes, untraced (no trace flag needed) */
    tvm_pid pids[6];
    for (int i = 0; i < 6; i++)
        pids[i] = spawn_terms("bt", "loop", "[5000, 1]");
    for (int i = 0; i < 6; i++)
        cr_assert_str_eq(join(pids[i]), "5000");
    cr_assert_eq(count_of("bt:ex/1"), 20 + 6 * 10000);
    cr_assert_eq(count_of("bt:loop/2"), 7);
    cr_assert_eq(count_of("bt:ex/2"), 0);
    cr_assert_str_eq(info("bt:ex/1", "call_count"), "{call_count,60020}");
    cr_assert_str_eq(take_events(), "");
    /* true again restarts at 0 */
    cr_assert_eq(tp("bt:ex/_", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 2);
    cr_assert_eq(count_of("bt:ex/1"), 0);
    cr_assert_eq(count_of("bt:loop/2"), 7);
    for (int i = 0; i < 3; i++)
        pids[i] = spawn_terms("bt", "loop", "[1000, 2]");
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(join(pids[i]), "1000");
    cr_assert_eq(count_of("bt:ex/1"), 6000);
    /* pause freezes */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_PAUSE, TVM_TP_CALL_COUNT), 1);
    pids[0] = spawn_terms("bt", "loop", "[1000, 2]");
    cr_assert_str_eq(join(pids[0]), "1000");
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    cr_assert_eq(count_of("bt:ex/1"), 6000);
    cr_assert_str_eq(info("bt:ex/1", "call_count"), "{call_count,6000}");
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("false", "false", "6000"));
    /* pause again keeps the value; restart zeroes and counts on */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_PAUSE, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(count_of("bt:ex/1"), 6000);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_RESTART, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(count_of("bt:ex/1"), 0);
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    cr_assert_eq(count_of("bt:ex/1"), 2);
    /* restart while counting zeroes too */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_RESTART, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(count_of("bt:ex/1"), 0);
    /* pause, then true: a fresh active counter */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_PAUSE, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(call("bt", "ex", 1, 1, 0), "1");
    cr_assert_eq(count_of("bt:ex/1"), 1);
    /* false removes it */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_CALL_COUNT), 1);
    int64_t c;
    cr_assert_eq(tvm_call_count(vm, "bt:ex/1", &c), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(info("bt:ex/1", "call_count"), "{call_count,false}");
    /* pause and restart never create a counter */
    cr_assert_eq(tp("bt:ex/1", TVM_TP_PAUSE, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_RESTART, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(tvm_call_count(vm, "bt:ex/1", &c), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(info("bt:ex/1", "all"), "{all,false}");
}

Test(bp, call_count_of_tail_and_body_recursion_and_natives)
{
    cr_assert_eq(tp("bt:_/_", TVM_TP_TRUE, TVM_TP_CALL_COUNT), BT_FUNCS);
    cr_assert_eq(tp("erlang:length/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_eq(tp("t:dbl/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(call("bt", "wrap", 1, 1, 0), "2");
    cr_assert_str_eq(call("bt", "wrap", 1, 1, 0), "2");
    cr_assert_str_eq(call_term("bt", "len", "[a, b, c]"), "3");
    cr_assert_str_eq(call_term("erlang", "length", "[a]"), "1");
    cr_assert_str_eq(call("bt", "dbl", 1, 21, 0), "42");
    static const char *const want[][2] = {
        { "bt:wrap/1", "2" },       { "bt:exported/1", "2" },    { "bt:local/1", "2" },
        { "bt:local2/1", "2" },     { "bt:local_tail/1", "2" },  { "bt:ex/1", "0" },
        { "bt:len/1", "1" },        { "bt:dbl/1", "1" },         { "erlang:length/1", "2" },
        { "t:dbl/1", "1" },         { "bt:loc/1", "0" },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char w[64];
        snprintf(w, sizeof w, "{call_count,%s}", want[i][1]);
        cr_assert_str_eq(info(want[i][0], "call_count"), w, "%s", want[i][0]);
    }
    cr_assert_str_eq(take_events(), "");
}

Test(bp, all_functions_false_matches_as_many_as_true)
{
    int n = tp("_:_/_", TVM_TP_TRUE, TVM_TP_CALL_COUNT);
    cr_assert_eq(n, BT_FUNCS + 1 + ERLANG_NATIVES + OTHER_NATIVES);
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    cr_assert_eq(count_of("bt:ex/1"), 2);
    cr_assert_eq(count_of("bt:both/1"), 1);
    cr_assert_eq(count_of("erlang:length/1"), 0);
    cr_assert_eq(tp("_:_/_", TVM_TP_PAUSE, TVM_TP_CALL_COUNT), n);
    cr_assert_eq(tp("_:_/_", TVM_TP_RESTART, TVM_TP_CALL_COUNT), n);
    cr_assert_eq(tp("_:_/_", TVM_TP_FALSE, TVM_TP_CALL_COUNT), n);
    int64_t c;
    cr_assert_eq(tvm_call_count(vm, "bt:ex/1", &c), TVM_ERR_NOTFOUND);
    cr_assert_eq(tp("_:_/_", TVM_TP_FALSE, TVM_TP_CALL_COUNT), n);
}

/* ==== item 37: a new version of a traced module starts untraced ==== */

static const char *const up_v1 =
    "module up\nexport f/1, g/1, old/0\n"
    "function f/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function g/1 regs 1\n    call r0, r0, f/1\n    ret r0\nend\n"
    "function old/0 regs 1\n    loadk r0, old\n    ret r0\nend\n";
static const char *const up_v2 =
    "module up\nexport f/1, g/1\n"
    "function f/1 regs 1\n    addi r0, r0, 2\n    ret r0\nend\n"
    "function g/1 regs 1\n    call r0, r0, f/1\n    ret r0\nend\n";
/* cl:f(X) calls up:f(X) remotely */
static const char *const cl_src =
    "module cl\nexport f/1\nfunction f/1 regs 1\n    callx r0, r0, up:f/1\n    ret r0\nend\n";

Test(bp, reload_clears_local_trace_and_counts)
{
    load_ok(vm, "up.tasm", up_v1);
    load_ok(vm, "cl.tasm", cl_src);
    cr_assert_eq(tp("up:_/_", TVM_TP_TRUE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT), 3);
    cr_assert_str_eq(call("up", "g", 1, 1, 0), "2");
    cr_assert_str_eq(call("cl", "f", 1, 1, 0), "2");
    cr_assert_str_eq(take_events(), "up:g/1(1) local | up:f/1(1) local | up:f/1(1) local");
    cr_assert_eq(count_of("up:f/1"), 2);
    load_ok(vm, "up.tasm", up_v2);
    cr_assert_str_eq(info("up:f/1", "all"), "{all,false}");
    cr_assert_str_eq(info("up:g/1", "traced"), "{traced,false}");
    cr_assert_str_eq(info("up:old/0", "traced"), "{traced,undefined}");
    int64_t c;
    cr_assert_eq(tvm_call_count(vm, "up:f/1", &c), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(call("up", "g", 1, 1, 0), "3");
    cr_assert_str_eq(call("cl", "f", 1, 1, 0), "3");
    cr_assert_str_eq(take_events(), "");
    cr_assert_eq(tvm_call_count(vm, "up:f/1", &c), TVM_ERR_NOTFOUND);
    /* the new version can be traced like any other */
    cr_assert_eq(tp("up:f/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(call("up", "g", 1, 1, 0), "3");
    cr_assert_str_eq(take_events(), "up:f/1(1) local");
}

Test(bp, reload_clears_global_trace)
{
    load_ok(vm, "up.tasm", up_v1);
    load_ok(vm, "cl.tasm", cl_src);
    cr_assert_eq(tp("up:_/_", TVM_TP_TRUE, 0), 3);
    cr_assert_str_eq(call("cl", "f", 1, 1, 0), "2");
    cr_assert_str_eq(call("up", "old", 0, 0, 0), "old");
    cr_assert_str_eq(take_events(), "up:f/1(1) global | up:old/0() global");
    load_ok(vm, "up.tasm", up_v2);
    cr_assert_str_eq(info("up:f/1", "traced"), "{traced,false}");
    cr_assert_str_eq(call("cl", "f", 1, 1, 0), "3");
    cr_assert_str_eq(call("up", "f", 1, 1, 0), "3");
    /* an export the new version dropped: undef, no event */
    cr_assert_str_eq(call("up", "old", 0, 0, 0), "error:undef");
    cr_assert_str_eq(take_events(), "");
    /* a reload of a module with a global trace on another module's export
     * keeps that one */
    cr_assert_eq(tp("cl:f/1", TVM_TP_TRUE, 0), 1);
    load_ok(vm, "up.tasm", up_v1);
    cr_assert_str_eq(call("cl", "f", 1, 1, 0), "2");
    cr_assert_str_eq(take_events(), "cl:f/1(1) global");
    cr_assert_str_eq(info("cl:f/1", "traced"), "{traced,global}");
    cr_assert_eq(tp("cl:f/1", TVM_TP_FALSE, 0), 1);
    cr_assert_str_eq(call("cl", "f", 1, 1, 0), "2");
    cr_assert_str_eq(take_events(), "");
}

/* A breakpoint switched off leaves an idle record on its function, which
 * the next call re-arms before its first wait; the last call's
 * consolidation is done by the next engine call (the stage that finds a
 * record, trace_info, a reload).  Every path gives the exact events. */
Test(bp, idle_records_rearmed_and_reloaded)
{
    load_ok(vm, "up.tasm", up_v1);
    load_ok(vm, "cl.tasm", cl_src);
    for (int round = 0; round < 3; round++) {
        cr_assert_eq(tp("up:_/_", TVM_TP_TRUE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT), 3);
        cr_assert_str_eq(call("up", "g", 1, 1, 0), "2");
        cr_assert_str_eq(take_events(), "up:g/1(1) local | up:f/1(1) local");
        cr_assert_eq(count_of("up:f/1"), 1);
        cr_assert_eq(tp("up:_/_", TVM_TP_FALSE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT), 3);
        cr_assert_str_eq(info("up:f/1", "all"), "{all,false}");
        cr_assert_str_eq(call("up", "g", 1, 1, 0), "2");
        cr_assert_str_eq(take_events(), "");
        /* global on the idle records' functions, off, local on again */
        cr_assert_eq(tp("up:_/_", TVM_TP_TRUE, 0), 3);
        cr_assert_str_eq(call("cl", "f", 1, 1, 0), "2");
        cr_assert_str_eq(take_events(), "up:f/1(1) global");
        cr_assert_eq(tp("up:_/_", TVM_TP_FALSE, 0), 3);
        cr_assert_str_eq(call("cl", "f", 1, 1, 0), "2");
        cr_assert_str_eq(take_events(), "");
    }
    /* a count on an idle record starts from 0 */
    cr_assert_eq(tp("up:f/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(call("up", "g", 1, 1, 0), "2");
    cr_assert_eq(count_of("up:f/1"), 1);
    cr_assert_eq(tp("up:f/1", TVM_TP_FALSE, TVM_TP_CALL_COUNT), 1);
    /* a reload right after (the records idle, their consolidation left to
     * the next engine call): the new version untraced, traceable */
    load_ok(vm, "up.tasm", up_v2);
    cr_assert_str_eq(info("up:f/1", "all"), "{all,false}");
    cr_assert_str_eq(call("cl", "f", 1, 1, 0), "3");
    cr_assert_str_eq(take_events(), "");
    cr_assert_eq(tp("up:f/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(call("cl", "f", 1, 1, 0), "3");
    cr_assert_str_eq(take_events(), "up:f/1(1) local");
}

/* ==== natives ==== */

Test(bp, natives_traced_locally_and_globally)
{
    cr_assert_eq(tp("erlang:length/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(info("erlang:length/1", "traced"), "{traced,local}");
    cr_assert_str_eq(call_term("bt", "len", "[1, 2, 3]"), "3");
    cr_assert_str_eq(call_term("erlang", "length", "[x]"), "1");
    cr_assert_str_eq(take_events(), "erlang:length/1([1,2,3]) local | erlang:length/1([x]) local");
    cr_assert_eq(tp("erlang:length/1", TVM_TP_TRUE, 0), 1);
    cr_assert_str_eq(info("erlang:length/1", "traced"), "{traced,global}");
    cr_assert_str_eq(call_term("bt", "len", "[1, 2]"), "2");
    cr_assert_str_eq(take_events(), "erlang:length/1([1,2]) global");
    cr_assert_eq(tp("erlang:length/1", TVM_TP_FALSE, 0), 1);
    cr_assert_str_eq(call_term("bt", "len", "[1]"), "1");
    cr_assert_str_eq(take_events(), "");
    /* a native failing under trace still raises as before */
    cr_assert_eq(tp("erlang:length/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    tvm_term a, r;
    cr_assert_eq(tvm_make_int(env, 5, &a), TVM_OK);
    cr_assert_eq(tvm_call(env, "bt", "len", 1, &a, &r), TVM_EXCEPTION);
    char buf[256];
    tvm_format_exception(env, buf, sizeof buf);
    cr_assert(strncmp(buf, "exception error: badarg\n  in erlang:length/1 (native)\n", 54) == 0,
              "%s", buf);
    cr_assert_str_eq(take_events(), "erlang:length/1(5) local");
    /* a native of the embedder */
    cr_assert_eq(tp("t:dbl/1", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
    cr_assert_str_eq(call("bt", "dbl", 1, 4, 0), "8");
    cr_assert_str_eq(call("t", "dbl", 1, 5, 0), "10");
    cr_assert_str_eq(take_events(), "t:dbl/1(4) local | t:dbl/1(5) local");
    cr_assert_eq(tp("t:dbl/1", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    cr_assert_str_eq(call("bt", "dbl", 1, 6, 0), "12");
    cr_assert_str_eq(take_events(), "t:dbl/1(6) global");
    cr_assert_eq(tp("t:dbl/1", TVM_TP_FALSE, TVM_TP_GLOBAL), 1);
    cr_assert_str_eq(call("bt", "dbl", 1, 7, 0), "14");
    cr_assert_str_eq(take_events(), "");
}

/* registering a native (a change of the export table, like a load) keeps
 * global traces of other exports, and a new native can be traced at once */
Test(bp, registering_a_native_keeps_global_traces)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    cr_assert_eq(tp("t:_/_", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "t", "dbl2", 1, dbl, NULL, &err), TVM_OK, "%s",
                 err.message);
    cr_assert_str_eq(info("t:dbl2/1", "traced"), "{traced,false}");
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    cr_assert_str_eq(call("bt", "dbl", 1, 2, 0), "4");
    cr_assert_str_eq(call("t", "dbl2", 1, 3, 0), "6");
    cr_assert_str_eq(take_events(), "bt:ex/1(11) global | t:dbl/1(2) global");
    cr_assert_eq(tp("t:_/_", TVM_TP_TRUE, TVM_TP_LOCAL), 2);
    cr_assert_str_eq(call("t", "dbl2", 1, 3, 0), "6");
    cr_assert_str_eq(take_events(), "t:dbl2/1(3) local");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_GLOBAL), 1);
    cr_assert_eq(tp("t:_/_", TVM_TP_FALSE, TVM_TP_LOCAL), 2);
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    cr_assert_str_eq(call("bt", "dbl", 1, 2, 0), "4");
    cr_assert_str_eq(take_events(), "");
}

/* ==== processes and the hook ==== */

Test(bp, trace_calls_on_processes)
{
    int64_t c;
    tvm_pid nobody = 999999;
    cr_assert_eq(tvm_trace_calls(env, nobody, true), TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_trace_calls(NULL, 0, true), TVM_ERR_BADARG);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, 0), 1);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    /* a traced process: events carry its pid */
    tvm_pid w1 = spawn_terms("bt", "waiter", "[]");
    cr_assert_eq(tvm_trace_calls(env, w1, true), TVM_OK);
    send_int(w1, 42);
    cr_assert_str_eq(join(w1), "42");
    pthread_mutex_lock(&ev_lock);
    int n = nevents;
    tvm_pid p0 = nevents ? event_pid[0] : 0;
    pthread_mutex_unlock(&ev_lock);
    cr_assert_eq(n, 1);
    cr_assert_eq(p0, w1, "event pid %llu, expected %llu", (unsigned long long)p0,
                 (unsigned long long)w1);
    cr_assert_str_eq(take_events(), "bt:ex/1(42) global");
    cr_assert_eq(tvm_trace_calls(env, w1, true), TVM_ERR_NOTFOUND, "a joined process");
    /* an untraced process: no events, but counted */
    tvm_pid w2 = spawn_terms("bt", "waiter", "[]");
    send_int(w2, 43);
    cr_assert_str_eq(join(w2), "43");
    cr_assert_str_eq(take_events(), "");
    cr_assert_eq(count_of("bt:ex/1"), 2);
    /* traced, then untraced before the call */
    tvm_pid w3 = spawn_terms("bt", "waiter", "[]");
    cr_assert_eq(tvm_trace_calls(env, w3, true), TVM_OK);
    cr_assert_eq(tvm_trace_calls(env, w3, false), TVM_OK);
    send_int(w3, 44);
    cr_assert_str_eq(join(w3), "44");
    cr_assert_str_eq(take_events(), "");
    cr_assert_eq(tvm_call_count(vm, "bt:ex/1", &c), TVM_OK);
    cr_assert_eq(c, 3);
    /* the call context's events carry pid 0 */
    cr_assert_str_eq(call("bt", "ex", 1, 1, 0), "1");
    pthread_mutex_lock(&ev_lock);
    n = nevents;
    p0 = event_pid[0];
    pthread_mutex_unlock(&ev_lock);
    cr_assert_eq(n, 1);
    cr_assert_eq(p0, 0);
    cr_assert_str_eq(take_events(), "bt:ex/1(1) global");
    /* another call context is not traced */
    tvm_env *other = tvm_env_new(vm);
    tvm_term a, r;
    cr_assert_eq(tvm_make_int(other, 2, &a), TVM_OK);
    cr_assert_eq(tvm_call(other, "bt", "ex", 1, &a, &r), TVM_OK);
    cr_assert_str_eq(take_events(), "");
    tvm_env_free(other);
    cr_assert_eq(count_of("bt:ex/1"), 5);
}

/* trace_pattern from VM code (erlang:trace_pattern/3 in a process) while
 * other processes run the function it changes. */
Test(bp, trace_pattern_from_a_process_while_others_run)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    tvm_pid busy[4];
    for (int i = 0; i < 4; i++)
        busy[i] = spawn_terms("bt", "loop", "[200000, 1]");
    for (int round = 0; round < 20; round++) {
        static const char *const reqs[][2] = {
            { "true", "[local]" }, { "false", "[local]" }, { "true", "[global]" },
            { "true", "[]" },      { "false", "[]" },      { "pause", "[call_count]" },
            { "restart", "[call_count]" },
        };
        for (size_t k = 0; k < sizeof reqs / sizeof reqs[0]; k++) {
            char args[128];
            snprintf(args, sizeof args, "[{bt, ex, 1}, %s, %s]", reqs[k][0], reqs[k][1]);
            tvm_pid p = spawn_terms("bt", "tp", args);
            cr_assert_str_eq(join(p), "1", "%s", args);
        }
    }
    for (int i = 0; i < 4; i++)
        cr_assert_str_eq(join(busy[i]), "200000");
    /* the last round left neither local nor global trace */
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,false}");
    /* and no counter: true, [global] removed it (as BEAM's does) */
    cr_assert_str_eq(info("bt:ex/1", "call_count"), "{call_count,false}");
    tvm_pid p = spawn_terms("bt", "tp", "[{bt, ex, 1}, true, [call_count]]");
    cr_assert_str_eq(join(p), "1");
    cr_assert_str_eq(info("bt:ex/1", "all"), ALL_FALSE_BUT("false", "false", "0"));
    /* and over the whole module from a process */
    p = spawn_terms("bt", "tp", "[{bt, '_', '_'}, true, [local]]");
    cr_assert_str_eq(join(p), "20");
    cr_assert_str_eq(info("bt:loop/2", "traced"), "{traced,local}");
    p = spawn_terms("bt", "tp", "[{bt, '_', '_'}, false, [local]]");
    cr_assert_str_eq(join(p), "20");
    cr_assert_str_eq(info("bt:loop/2", "traced"), "{traced,false}");
    /* exact counting from here on */
    cr_assert_str_eq(call("bt", "loop", 2, 10, 1), "10");
    cr_assert_eq(count_of("bt:ex/1"), 20);
    p = spawn_terms("bt", "tp", "[{bt, ex, 1}, true, [call_count]]");
    cr_assert_str_eq(join(p), "1");
    cr_assert_eq(count_of("bt:ex/1"), 0);
    cr_assert_str_eq(take_events(), "");
}

/* trace_pattern from VM code run by tvm_call on a foreign thread: the
 * thread is a thread-progress reader while inside tvm_call, and must not
 * hold back the waits of the call it makes. */
Test(bp, trace_pattern_from_vm_code_on_a_call_context)
{
    /* busy schedulers too */
    tvm_pid busy = spawn_terms("bt", "loop", "[100000, 1]");
    tvm_term a[3], r;
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, "{bt, ex, 1}", &a[0], &err), TVM_OK);
    cr_assert_eq(tvm_parse_term(env, "true", &a[1], &err), TVM_OK);
    cr_assert_eq(tvm_parse_term(env, "[local]", &a[2], &err), TVM_OK);
    cr_assert_eq(tvm_call(env, "bt", "tp", 3, a, &r), TVM_OK);
    char out[64];
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "1");
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,local}");
    cr_assert_eq(tvm_parse_term(env, "false", &a[1], &err), TVM_OK);
    cr_assert_eq(tvm_call(env, "bt", "tp", 3, a, &r), TVM_OK);
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,false}");
    cr_assert_str_eq(join(busy), "100000");
    cr_assert_str_eq(take_events(), "");
}

/* ==== the same behaviour with stop_the_world_tracing ==== */

/* A run through items 1, 2, 9, 32 and 33 with exact results, made in
 * both modes. */
static void scenario(void)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, 0), 1);
    cr_assert_str_eq(call("bt", "both", 1, 1, 0), "11");
    cr_assert_str_eq(take_events(), "bt:ex/1(11) global");
    cr_assert_eq(tp("bt:_/_", TVM_TP_TRUE, TVM_TP_LOCAL), BT_FUNCS);
    cr_assert_str_eq(info("bt:ex/1", "traced"), "{traced,local}");
    cr_assert_str_eq(call("bt", "wrap", 1, 1, 0), "2");
    cr_assert_str_eq(take_events(), "bt:wrap/1(1) local | bt:exported/1(1) local | "
                                    "bt:local/1(1) local | bt:local2/1(1) local | "
                                    "bt:local_tail/1(1) local");
    cr_assert_eq(tp("bt:_/_", TVM_TP_TRUE, TVM_TP_GLOBAL), BT_EXPORTS);
    /* global on the unexported ones cleared their local trace too */
    cr_assert_str_eq(info("bt:loc/1", "traced"), "{traced,false}");
    cr_assert_str_eq(info("bt:exported/1", "traced"), "{traced,global}");
    cr_assert_str_eq(call("bt", "wrap", 1, 1, 0), "2");
    cr_assert_str_eq(take_events(), "bt:wrap/1(1) global | bt:exported/1(1) global");
    cr_assert_eq(tp("bt:_/_", TVM_TP_FALSE, TVM_TP_GLOBAL), BT_EXPORTS);
    cr_assert_eq(tp("bt:_/_", TVM_TP_FALSE, TVM_TP_LOCAL), BT_FUNCS);
    cr_assert_str_eq(call("bt", "wrap", 1, 1, 0), "2");
    cr_assert_str_eq(take_events(), "");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    tvm_pid pids[4];
    for (int i = 0; i < 4; i++)
        pids[i] = spawn_terms("bt", "loop", "[3000, 1]");
    /* trace_pattern on other functions while they run */
    for (int i = 0; i < 30; i++) {
        cr_assert_eq(tp("bt:ex/2", TVM_TP_TRUE, TVM_TP_LOCAL), 1);
        cr_assert_eq(tp("bt:ex/2", TVM_TP_FALSE, TVM_TP_LOCAL), 1);
        cr_assert_eq(tp("bt:loop/2", TVM_TP_TRUE, 0), 1);
        cr_assert_eq(tp("bt:loop/2", TVM_TP_FALSE, 0), 1);
    }
    for (int i = 0; i < 4; i++)
        cr_assert_str_eq(join(pids[i]), "3000");
    cr_assert_eq(count_of("bt:ex/1"), 4 * 6000);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_PAUSE, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(call("bt", "loop", 2, 10, 1), "10");
    cr_assert_eq(count_of("bt:ex/1"), 4 * 6000);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_RESTART, TVM_TP_CALL_COUNT), 1);
    cr_assert_str_eq(call("bt", "loop", 2, 10, 1), "10");
    cr_assert_eq(count_of("bt:ex/1"), 20);
    tvm_pid p = spawn_terms("bt", "tp", "[{bt, ex, 1}, false, [call_count]]");
    cr_assert_str_eq(join(p), "1");
    cr_assert_str_eq(info("bt:ex/1", "all"), "{all,false}");
    int n = tp("_:_/_", TVM_TP_TRUE, TVM_TP_CALL_COUNT);
    cr_assert_eq(tp("_:_/_", TVM_TP_FALSE, TVM_TP_CALL_COUNT), n);
    cr_assert_str_eq(take_events(), "");
}

Test(bp, scenario_without_stopping_the_world)
{
    scenario();
}

static void setup_stw(void)
{
    start_vm(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true,
                            .stop_the_world_tracing = true });
}

TestSuite(bp_stw, .init = setup_stw, .fini = teardown, .timeout = 60);

Test(bp_stw, scenario_stopping_the_world)
{
    scenario();
}

/* ==== a process spawned on a globally traced function ==== */

static void setup_one(void)
{
    start_vm(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 1, .quiet_crashes = true });
}

TestSuite(bp_one, .init = setup_one, .fini = teardown, .timeout = 60);

/* tvm_spawn resolves the export entry when it is called, and the process
 * starts later: with global trace on, that is the trampoline.  Turning the
 * trace off before the process runs must not leave it a freed trampoline
 * to run (one scheduler, 20 busy processes queued ahead of it).  A
 * process keeps its entry's export and reads the target when it starts
 * (this failed under ASan while vm_spawn kept the trampoline itself). */
Test(bp_one, spawn_of_a_globally_traced_function_then_trace_off)
{
    for (int round = 0; round < 5; round++) {
        cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, 0), 1);
        tvm_pid busy[20];
        for (int i = 0; i < 20; i++)
            busy[i] = spawn_terms("bt", "loop", "[20000, 1]");
        tvm_pid p = spawn_terms("bt", "ex", "[7]");
        cr_assert_eq(tvm_trace_calls(env, p, true), TVM_OK);
        cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, 0), 1);
        cr_assert_str_eq(join(p), "7");
        for (int i = 0; i < 20; i++)
            cr_assert_str_eq(join(busy[i]), "20000");
        take_events();
    }
}

/* A hook may suspend its process (vm/breakpoint.h).  While a hook for a
 * global hit runs, the frame of the call names the trampoline; turning
 * the global trace off then frees the trampoline and tvm_processes()
 * reads the freed one.  The BREAKPOINT instruction hands the frame to
 * the real function before the hook runs (this failed under ASan, in
 * tvm_processes, while it did so after the hook). */
static void sleepy_hook(tvm_env *e, const tvm_call_event *ev, void *data)
{
    (void)data;
    if (ev->global) {
        tvm_term go;    /* suspended until the test sends it */
        cr_assert_eq(tvm_receive(e, -1, &go), TVM_OK);
        cr_assert(tvm_is_atom(e, go, "go"));
    }
    hook(e, ev, NULL);
}

Test(bp, a_hook_that_suspends_during_a_global_hit)
{
    tvm_set_call_hook(vm, sleepy_hook, NULL);
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_GLOBAL), 1);
    tvm_pid w = spawn_terms("bt", "waiter", "[]");
    cr_assert_eq(tvm_trace_calls(env, w, true), TVM_OK);
    send_int(w, 5);
    /* until it waits in the hook */
    wait_proc_state(vm, w, "waiting");
    cr_assert_eq(tp("bt:ex/1", TVM_TP_FALSE, TVM_TP_GLOBAL), 1);
    tvm_process_info info[8];
    size_t n = tvm_processes(vm, info, 8);
    int seen = 0;
    for (size_t i = 0; i < n && i < 8; i++)
        if (info[i].pid == w) {
            cr_assert_str_eq(info[i].function, "bt:ex/1");
            cr_assert_str_eq(info[i].state, "waiting");
            seen++;
        }
    cr_assert_eq(seen, 1);
    tvm_term go;
    cr_assert_eq(tvm_make_atom(env, "go", &go), TVM_OK);
    cr_assert_eq(tvm_send(env, w, go), TVM_OK);
    cr_assert_str_eq(join(w), "5");
    cr_assert_str_eq(take_events(), "bt:ex/1(5) global");
}

/* One scheduler: processes waiting for the permission and for thread
 * progress are suspended, so the scheduler keeps running the others (the
 * busy ones and the waiters' successors) and nothing deadlocks. */
Test(bp_one, trace_pattern_from_many_processes_on_one_scheduler)
{
    cr_assert_eq(tp("bt:ex/1", TVM_TP_TRUE, TVM_TP_CALL_COUNT), 1);
    tvm_pid busy[2], tps[12];
    for (int i = 0; i < 2; i++)
        busy[i] = spawn_terms("bt", "loop", "[20000, 1]");
    static const char *const reqs[] = {
        "[{bt, ex, 1}, true, [local]]", "[{bt, '_', '_'}, false, [global]]",
        "[{bt, ex, '_'}, false, [local]]", "[{bt, loop, 2}, true, [call_count]]",
    };
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 12; i++)
            tps[i] = spawn_terms("bt", "tp", reqs[i % 4]);
        for (int i = 0; i < 12; i++) {
            const char *want = i % 4 == 1 ? "15" : i % 4 == 2 ? "2" : "1";
            cr_assert_str_eq(join(tps[i]), want, "%s", reqs[i % 4]);
        }
    }
    for (int i = 0; i < 2; i++)
        cr_assert_str_eq(join(busy[i]), "20000");
    /* the counter was never touched (global off, unlike global on,
     * leaves call counts alone) */
    cr_assert_str_eq(info("bt:ex/1", "call_count"), "{call_count,80000}");
    cr_assert_str_eq(take_events(), "");
}
