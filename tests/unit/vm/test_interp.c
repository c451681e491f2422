/*
 * tests/unit/vm/test_interp.c - the interpreter through the embedding API:
 * arithmetic, calls, exceptions and stack traces, natives, limits.
 */
#include <criterion/criterion.h>

#include "tests/unit/helpers.h"

TVM_FIXTURE(interp, (&(tvm_config){ .size = sizeof(tvm_config), .stack_limit_words = 4096 }));

static const char *const arith =
    "module ar\n"
    "export add/2, mul/2, div/2, rem/2, bsl/2, sub/2, inc/1\n"
    "function add/2 regs 2\n    add r0, r0, r1\n    ret r0\nend\n"
    "function sub/2 regs 2\n    sub r0, r0, r1\n    ret r0\nend\n"
    "function mul/2 regs 2\n    mul r0, r0, r1\n    ret r0\nend\n"
    "function div/2 regs 2\n    div r0, r0, r1\n    ret r0\nend\n"
    "function rem/2 regs 2\n    rem r0, r0, r1\n    ret r0\nend\n"
    "function bsl/2 regs 2\n    bsl r0, r0, r1\n    ret r0\nend\n"
    "function inc/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n";

#define MAXI ((int64_t)(((uint64_t)1 << 61) - 1))

static void expect(const char *fun, int64_t a, int64_t b, tvm_status st, const char *want)
{
    char out[256];
    int64_t args[2] = { a, b };
    cr_assert_eq(call_fmt(env, "ar", fun, strcmp(fun, "inc") ? 2 : 1, args, out, sizeof out), st,
                 "%s(%lld, %lld) -> %s", fun, (long long)a, (long long)b, out);
    cr_assert_str_eq(out, want, "%s(%lld, %lld)", fun, (long long)a, (long long)b);
}

Test(interp, arithmetic_and_overflow_raise_badarith)
{
    load_ok(vm, "ar.tasm", arith);
    expect("add", 2, 3, TVM_OK, "5");
    expect("add", MAXI, 0, TVM_OK, "2305843009213693951");
    expect("add", MAXI, 1, TVM_EXCEPTION, "error:badarith");
    expect("sub", -MAXI - 1, 1, TVM_EXCEPTION, "error:badarith");
    expect("sub", 5, 7, TVM_OK, "-2");
    expect("mul", 1 << 30, 1 << 30, TVM_OK, "1152921504606846976");
    expect("mul", (int64_t)1 << 31, (int64_t)1 << 31, TVM_EXCEPTION, "error:badarith");
    expect("div", 7, -2, TVM_OK, "-3");
    expect("div", 7, 0, TVM_EXCEPTION, "error:badarith");
    expect("div", -MAXI - 1, -1, TVM_EXCEPTION, "error:badarith");
    expect("rem", -7, 2, TVM_OK, "-1");
    expect("rem", 1, 0, TVM_EXCEPTION, "error:badarith");
    expect("bsl", 1, 60, TVM_OK, "1152921504606846976");
    expect("bsl", 1, 61, TVM_EXCEPTION, "error:badarith");
    expect("bsl", -8, -2, TVM_OK, "-2");
    expect("inc", MAXI, 0, TVM_EXCEPTION, "error:badarith");
}

Test(interp, arithmetic_on_a_non_integer_is_badarith)
{
    load_ok(vm, "ar.tasm", arith);
    tvm_term a[2], r;
    cr_assert_eq(tvm_make_atom(env, "x", &a[0]), TVM_OK);
    cr_assert_eq(tvm_make_int(env, 1, &a[1]), TVM_OK);
    cr_assert_eq(tvm_call(env, "ar", "add", 2, a, &r), TVM_EXCEPTION);
    char buf[512];
    tvm_format_exception(env, buf, sizeof buf);
    cr_assert_str_eq(buf, "exception error: badarith\n  in ar:add/2 (ar.tasm:4)\n");
}

static const char *const exc =
    "module exc\n"                                        /* 1 */
    "export top/1, thrower/1, nocatch/0, deep/1\n"        /* 2 */
    "function top/1 regs 4\n"                             /* 3 */
    "    try r1, caught\n"                                /* 4 */
    "    call r0, r0, deep/1\n"                           /* 5 */
    "    endtry\n"                                        /* 6 */
    "    ret r0\n"                                        /* 7 */
    "caught:\n"                                           /* 8 */
    "    tuple r0, 3, r1\n"                               /* 9 */
    "    ret r0\n"                                        /* 10 */
    "end\n"                                               /* 11 */
    "function deep/1 regs 2\n"                            /* 12 */
    "    call r1, r0, thrower/1\n"                        /* 13 */
    "    ret r1\n"                                        /* 14 */
    "end\n"                                               /* 15 */
    "function thrower/1 regs 2\n"                         /* 16 */
    "    loadk r1, throw\n"                               /* 17 */
    "    jeqi r0, 1, t\n"                                 /* 18 */
    "    loadk r1, error\n"                               /* 19 */
    "    jeqi r0, 2, t\n"                                 /* 20 */
    "    loadk r1, exit\n"                                /* 21 */
    "    jeqi r0, 3, t\n"                                 /* 22 */
    "    ret r0\n"                                        /* 23 */
    "t:\n"                                                /* 24 */
    "    raise r1, r0\n"                                  /* 25 */
    "end\n"                                               /* 26 */
    "function nocatch/0 regs 2\n"                         /* 27 */
    "    loadi r0, 7\n"                                   /* 28 */
    "    loadk r1, throw\n"                               /* 29 */
    "    raise r1, r0\n"                                  /* 30 */
    "end\n";                                              /* 31 */

Test(interp, try_catches_each_class_with_a_stack_trace)
{
    load_ok(vm, "exc.tasm", exc);
    char out[512];
    int64_t v = 1;
    cr_assert_eq(call_fmt(env, "exc", "top", 1, &v, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "{throw,1,[{exc,thrower,1,[{file,<<\"exc.tasm\">>},{line,25}]},"
                          "{exc,deep,1,[{file,<<\"exc.tasm\">>},{line,13}]},"
                          "{exc,top,1,[{file,<<\"exc.tasm\">>},{line,5}]}]}");
    v = 2;
    cr_assert_eq(call_fmt(env, "exc", "top", 1, &v, out, sizeof out), TVM_OK);
    cr_assert(strncmp(out, "{error,2,[", 10) == 0, "%s", out);
    v = 3;
    cr_assert_eq(call_fmt(env, "exc", "top", 1, &v, out, sizeof out), TVM_OK);
    cr_assert(strncmp(out, "{exit,3,[", 9) == 0, "%s", out);
    v = 9;
    cr_assert_eq(call_fmt(env, "exc", "top", 1, &v, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "9");
}

Test(interp, uncaught_throw_becomes_nocatch_with_trace)
{
    load_ok(vm, "exc.tasm", exc);
    char out[512];
    cr_assert_eq(call_fmt(env, "exc", "nocatch", 0, NULL, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:{nocatch,7}");
    tvm_format_exception(env, out, sizeof out);
    cr_assert_str_eq(out, "exception error: {nocatch,7}\n  in exc:nocatch/0 (exc.tasm:30)\n");
    int64_t v = 2;
    cr_assert_eq(call_fmt(env, "exc", "deep", 1, &v, out, sizeof out), TVM_EXCEPTION);
    tvm_format_exception(env, out, sizeof out);
    cr_assert_str_eq(out, "exception error: 2\n  in exc:thrower/1 (exc.tasm:25)\n"
                          "  in exc:deep/1 (exc.tasm:13)\n");
}

Test(interp, calling_an_undefined_function_raises_undef)
{
    load_ok(vm, "u.tasm", "module u\nexport f/0\nfunction f/0 regs 1\n    callx r0, r0, nomod:nofun/0\n    ret r0\nend\n");
    char out[512];
    cr_assert_eq(call_fmt(env, "u", "f", 0, NULL, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:undef");
    tvm_format_exception(env, out, sizeof out);
    cr_assert_str_eq(out, "exception error: undef\n  in nomod:nofun/0\n  in u:f/0 (u.tasm:4)\n");
    cr_assert_eq(call_fmt(env, "u", "missing", 0, NULL, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:undef");
}

static const char *const rec =
    "module rec\n"
    "export deep/1, loop/1\n"
    "function deep/1 regs 2\n"
    "    jeqi r0, 0, done\n"
    "    addi r1, r0, -1\n"
    "    call r1, r1, deep/1\n"
    "    addi r0, r1, 1\n"
    "done:\n"
    "    ret r0\n"
    "end\n"
    "function loop/1 regs 2\n"
    "    jeqi r0, 0, done\n"
    "    addi r0, r0, -1\n"
    "    tailcall r0, loop/1\n"
    "done:\n"
    "    loadk r0, done\n"
    "    ret r0\n"
    "end\n";

Test(interp, stack_overflow_raises_system_limit_and_tail_calls_do_not_grow)
{
    load_ok(vm, "rec.tasm", rec);
    char out[256];
    int64_t n = 1000;
    cr_assert_eq(call_fmt(env, "rec", "deep", 1, &n, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "1000");
    n = 1000000;
    cr_assert_eq(call_fmt(env, "rec", "deep", 1, &n, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    cr_assert_eq(call_fmt(env, "rec", "loop", 1, &n, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "done");
    /* The env is still usable after the limit was hit. */
    n = 10;
    cr_assert_eq(call_fmt(env, "rec", "deep", 1, &n, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "10");
}

/* ---- natives ---- */

static int native_calls;

static tvm_status twice(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    native_calls += (int)(intptr_t)data;
    int64_t v;
    if (tvm_get_int(e, argv[0], &v) != TVM_OK)
        return tvm_raise_badarg(e);
    return tvm_make_int(e, 2 * v, result);
}

/* callback(F, X): calls the VM function cb:F(X) from C and adds one. */
static tvm_status callback(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    char name[64];
    if (tvm_get_atom(e, argv[0], name, sizeof name) != TVM_OK)
        return tvm_raise_badarg(e);
    tvm_term r;
    tvm_status st = tvm_call(e, "cb", name, 1, &argv[1], &r);
    if (st != TVM_OK)
        return st;
    int64_t v;
    tvm_get_int(e, r, &v);
    return tvm_make_int(e, v + 1, result);
}

static const char *const cb =
    "module cb\n"
    "export run/1, inner/1, bad/1, catcher/1\n"
    "function run/1 regs 3\n"
    "    loadk r1, inner\n"
    "    move r2, r0\n"
    "    callx r1, r1, c:callback/2\n"
    "    ret r1\n"
    "end\n"
    "function inner/1 regs 1\n"
    "    callx r0, r0, c:twice/1\n"
    "    ret r0\n"
    "end\n"
    "function bad/1 regs 2\n"
    "    loadk r1, oops\n"
    "    callx r1, r1, erlang:error/1\n"
    "    ret r1\n"
    "end\n"
    "function catcher/1 regs 6\n"
    "    try r3, caught\n"
    "    loadk r1, bad\n"
    "    move r2, r0\n"
    "    callx r1, r1, c:callback/2\n"
    "    endtry\n"
    "    ret r1\n"
    "caught:\n"
    "    tuple r0, 2, r3\n"
    "    ret r0\n"
    "end\n";

Test(interp, natives_call_back_into_vm_code_and_exceptions_cross_them)
{
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "c", "twice", 1, twice, (void *)(intptr_t)1, &err), TVM_OK);
    cr_assert_eq(tvm_register_native(vm, "c", "callback", 2, callback, NULL, &err), TVM_OK);
    load_ok(vm, "cb.tasm", cb);
    char out[512];
    int64_t v = 20;
    native_calls = 0;
    cr_assert_eq(call_fmt(env, "cb", "run", 1, &v, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "41"); /* 2 * 20 + 1 */
    cr_assert_eq(native_calls, 1);
    /* erlang:error raised two activations deep reaches the VM handler. */
    cr_assert_eq(call_fmt(env, "cb", "catcher", 1, &v, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "{error,oops}");
    /* Uncaught: the trace shows VM and native frames in order. */
    cr_assert_eq(call_fmt(env, "cb", "bad", 1, &v, out, sizeof out), TVM_EXCEPTION);
    tvm_format_exception(env, out, sizeof out);
    cr_assert_str_eq(out, "exception error: oops\n  in erlang:error/1 (native)\n"
                          "  in cb:bad/1 (cb.tasm:15)\n");
}

Test(interp, native_registration_errors)
{
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "c", "twice", 1, twice, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_register_native(vm, "c", "twice", 1, twice, NULL, &err), TVM_ERR_EXISTS);
    cr_assert_str_eq(err.message, "tvm_register_native: c:twice/1: already defined");
    cr_assert_eq(tvm_register_native(vm, "c", "twice", 300, twice, NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_register_native: c:twice/300: arity out of range 0..255");
    load_ok(vm, "cb.tasm", cb);
    cr_assert_eq(tvm_register_native(vm, "cb", "x", 0, twice, NULL, &err), TVM_ERR_EXISTS);
    cr_assert_str_eq(err.message, "tvm_register_native: cb:x/0: module is loaded as bytecode");
    cr_assert_eq(tvm_load_string(vm, "c.tasm", "module c\n", 9, &err), TVM_ERR_LOAD);
    cr_assert_str_eq(err.message, "c.tasm:1:1: error: module c is provided by natives and cannot be loaded from assembly\n");
}

Test(interp, funs_and_callf)
{
    load_ok(vm, "f.tasm",
            "module f\nexport apply1/2, sq/1\n"
            "function sq/1 regs 1\n    mul r0, r0, r0\n    ret r0\nend\n"
            "function apply1/2 regs 3\n    callf r0, r0, 1\n    ret r0\nend\n");
    tvm_term a[2], r;
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, "fun f:sq/1", &a[0], &err), TVM_OK);
    cr_assert_eq(tvm_make_int(env, 9, &a[1]), TVM_OK);
    cr_assert_eq(tvm_call(env, "f", "apply1", 2, a, &r), TVM_OK);
    char out[128];
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "81");
    cr_assert_eq(tvm_parse_term(env, "fun f:sq/2", &a[0], &err), TVM_OK);
    cr_assert_eq(tvm_call(env, "f", "apply1", 2, a, &r), TVM_EXCEPTION);
    tvm_term c, reason;
    tvm_get_exception(env, &c, &reason);
    tvm_format_term(env, reason, out, sizeof out);
    cr_assert_str_eq(out, "{badarity,fun f:sq/2}");
    cr_assert_eq(tvm_make_int(env, 3, &a[0]), TVM_OK);
    cr_assert_eq(tvm_call(env, "f", "apply1", 2, a, &r), TVM_EXCEPTION);
    tvm_get_exception(env, &c, &reason);
    tvm_format_term(env, reason, out, sizeof out);
    cr_assert_str_eq(out, "{badfun,3}");
}

Test(interp, api_rejects_bad_arguments)
{
    tvm_term r, bogus = { 12345 };
    cr_assert_eq(tvm_call(env, NULL, "f", 0, NULL, &r), TVM_ERR_BADARG);
    cr_assert_eq(tvm_call(env, "m", "f", -1, NULL, &r), TVM_ERR_BADARG);
    cr_assert_eq(tvm_call(env, "m", "f", 1, &bogus, &r), TVM_ERR_BADARG);
    cr_assert_eq(tvm_make_int(env, (int64_t)1 << 62, &r), TVM_ERR_LIMIT);
    int64_t v;
    cr_assert_eq(tvm_get_int(env, bogus, &v), TVM_ERR_BADARG);
    cr_assert_eq(tvm_make_atom(env, "ok", &r), TVM_OK);
    cr_assert_eq(tvm_get_int(env, r, &v), TVM_ERR_TYPE);
    cr_assert_eq(tvm_new(&(tvm_config){ .size = sizeof(tvm_config),
                                        .stack_limit_words = 10 }), NULL);
}

/* nest(N): recurses through erlang:apply/2, one nested activation per level. */
static const char *const nest =
    "module nest\nexport down/1\n"
    "function down/1 regs 3\n"
    "    jeqi r0, 0, done\n"
    "    addi r2, r0, -1\n"
    "    loadk r1, []\n"
    "    cons r2, r2, r1\n"
    "    loadk r1, fun nest:down/1\n"
    "    callx r1, r1, erlang:apply/2\n"
    "    ret r1\n"
    "done:\n"
    "    loadk r0, bottom\n"
    "    ret r0\n"
    "end\n";

Test(interp, nested_activations_are_bounded_by_system_limit)
{
    load_ok(vm, "nest.tasm", nest);
    char out[256];
    int64_t n = 100;
    cr_assert_eq(call_fmt(env, "nest", "down", 1, &n, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "bottom");
    n = 100000;
    cr_assert_eq(call_fmt(env, "nest", "down", 1, &n, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
}

static tvm_status no_result(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)e; (void)argc; (void)argv; (void)result; (void)data;
    return TVM_OK;
}

static tvm_status fake_exception(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result,
                                 void *data)
{
    (void)e; (void)argc; (void)argv; (void)result; (void)data;
    return TVM_EXCEPTION;
}

Test(interp, misbehaving_natives_raise_badarg)
{
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "bad", "nores", 0, no_result, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_register_native(vm, "bad", "noexc", 0, fake_exception, NULL, &err), TVM_OK);
    char out[256];
    cr_assert_eq(call_fmt(env, "bad", "nores", 0, NULL, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:badarg");
    cr_assert_eq(call_fmt(env, "bad", "noexc", 0, NULL, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:badarg");
    /* After a successful call there is no pending exception. */
    tvm_term r, c, reason;
    cr_assert_eq(tvm_call(env, "erlang", "abs", 0, NULL, &r), TVM_EXCEPTION); /* undef */
    cr_assert_eq(tvm_make_int(env, -3, &c), TVM_OK);
    cr_assert_eq(tvm_call(env, "erlang", "abs", 1, &c, &r), TVM_OK);
    cr_assert_eq(tvm_get_exception(env, &c, &reason), TVM_ERR_NOTFOUND);
}

Test(interp, handles_can_be_released_in_scopes)
{
    tvm_term keep, tmp;
    cr_assert_eq(tvm_make_int(env, 1, &keep), TVM_OK);
    size_t mark = tvm_handles_mark(env);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(tvm_make_int(env, i, &tmp), TVM_OK);
    tvm_handles_release(env, mark);
    cr_assert_eq(tvm_handles_mark(env), mark);
    cr_assert_eq(tvm_type_of(env, keep), TVM_T_INT);
    cr_assert_eq(tvm_type_of(env, tmp), TVM_T_INVALID);
}

/* tvm_consume_timeslice: a native's work charged to the slice. */
Test(interp, consume_timeslice_charges_the_slice)
{
    tvm_env *e = tvm_env_new(vm);
    cr_assert_not(tvm_consume_timeslice(e, 50));   /* 4000 -> 2000 reductions left */
    cr_assert(tvm_consume_timeslice(e, 50));       /* -> 0: used up */
    cr_assert_not(tvm_consume_timeslice(e, 0));    /* out of range: nothing */
    cr_assert_not(tvm_consume_timeslice(e, 101));
    cr_assert_not(tvm_consume_timeslice(NULL, 10));
    tvm_env_free(e);
}
