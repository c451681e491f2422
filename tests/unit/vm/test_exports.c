/*
 * tests/unit/vm/test_exports.c - max_exports: the export table's bound on
 * the entries VM code and the C API make by name at run time
 * (make_fun/3, apply/3, spawn/3, tvm_call, tvm_spawn), which are never
 * freed; loaded code and registered natives are never refused
 * (docs/safety.md, section 3).
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "loader/loader.h"
#include "tests/unit/helpers.h"
#include "vm/config.h"
#include "vm/vm.h"

/* mk(N): make_fun(ex, g, A) for A = N-1 down to 0, then ok.
 * ap(F, Args): apply(ex, F, Args).  sp(F): spawn(ex, F, []).
 * one(X): X (defined, exported).  ld(Mod, Text): code:load_binary. */
static const char *const ex_src =
    "module ex\n"
    "export mk/1, ap/2, sp/1, one/1, ld/2\n"
    "function mk/1 regs 4\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    addi r0, r0, -1\n"
    "    loadk r1, ex\n"
    "    loadk r2, g\n"
    "    move r3, r0\n"
    "    callx r1, r1, erlang:make_fun/3\n"
    "    jump loop\n"
    "done:\n"
    "    loadk r0, ok\n"
    "    ret r0\n"
    "end\n"
    "function ap/2 regs 3\n"
    "    move r2, r1\n"
    "    move r1, r0\n"
    "    loadk r0, ex\n"
    "    callx r0, r0, erlang:apply/3\n"
    "    ret r0\n"
    "end\n"
    "function sp/1 regs 3\n"
    "    move r1, r0\n"
    "    loadk r0, ex\n"
    "    loadk r2, []\n"
    "    callx r0, r0, erlang:spawn/3\n"
    "    loadk r0, spawned\n"
    "    ret r0\n"
    "end\n"
    "function one/1 regs 1\n"
    "    ret r0\n"
    "end\n"
    "function ld/2 regs 3\n"
    "    move r2, r1\n"
    "    loadk r1, \"x.tasm\"\n"
    "    callx r0, r0, code:load_binary/3\n"
    "    ret r0\n"
    "end\n";

static const char *const ex2_src =
    "module ex2\n"
    "export a/0, b/0\n"
    "function a/0 regs 1\n    loadk r0, a\n    ret r0\nend\n"
    "function b/0 regs 1\n    loadk r0, b\n    ret r0\nend\n";

static size_t export_count(tvm_vm *vm)
{
    pthread_mutex_lock(&vm->export_lock);
    size_t n = vm->export_count;
    pthread_mutex_unlock(&vm->export_lock);
    return n;
}

/* A VM with ex loaded whose export table has room for `room` entries
 * more: the table's size after the builtins and ex (*base) is measured in
 * a first VM, which the second, with max_exports = *base + room, repeats. */
static tvm_vm *vm_with_room(size_t room, size_t *base)
{
    tvm_config cfg = { .size = sizeof cfg, .schedulers = 1, .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    load_ok(vm, "ex", ex_src);
    *base = export_count(vm);
    tvm_destroy(vm);
    cfg.max_exports = *base + room;
    vm = tvm_new(&cfg);
    load_ok(vm, "ex", ex_src);
    cr_assert_eq(export_count(vm), *base);
    return vm;
}

/* ex:fun(args...) in a process (each argument a term's text): its
 * result, or Class:Reason. */
static void expect(tvm_env *env, const char *fun, const char *a0, const char *a1,
                   const char *want)
{
    const char *text[2] = { a0, a1 };
    tvm_term argv[2], r;
    int argc = 0;
    for (; argc < 2 && text[argc]; argc++) {
        tvm_error err;
        cr_assert_eq(tvm_parse_term(env, text[argc], &argv[argc], &err), TVM_OK, "%s",
                     err.message);
    }
    char out[200];
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "ex", fun, argc, argv, &pid), TVM_OK);
    if (tvm_join(env, pid, &r) == TVM_OK) {
        tvm_format_term(env, r, out, sizeof out);
    } else {
        tvm_term c, reason;
        char cb[32], rb[160];
        cr_assert_eq(tvm_get_exception(env, &c, &reason), TVM_OK);
        tvm_format_term(env, c, cb, sizeof cb);
        tvm_format_term(env, reason, rb, sizeof rb);
        snprintf(out, sizeof out, "%s:%s", cb, rb);
    }
    cr_assert_str_eq(out, want, "ex:%s(%s%s%s)", fun, a0 ? a0 : "", a1 ? ", " : "",
                     a1 ? a1 : "");
}

/* code:load_binary(Mod, "x.tasm", Text) from a process: its result. */
static void expect_load(tvm_env *env, const char *mod, const char *text, const char *want)
{
    tvm_term argv[2];
    cr_assert_eq(tvm_make_atom(env, mod, &argv[0]), TVM_OK);
    cr_assert_eq(tvm_make_binary(env, text, strlen(text), &argv[1]), TVM_OK);
    char out[100];
    spawn_fmt(env, "ex", "ld", 2, argv, out, sizeof out);
    cr_assert_str_eq(out, want, "loading %s", mod);
}

static tvm_status native_seven(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                               void *data)
{
    (void)argc;
    (void)argv;
    (void)data;
    return tvm_make_int(env, 7, result);
}

Test(exports, the_default_bound_is_beams)
{
    tvm_config cfg = { .size = sizeof cfg, .schedulers = 1 };
    tvm_vm *vm = tvm_new(&cfg);
    cr_assert_eq(vm->max_exports, (size_t)524288);
    tvm_destroy(vm);
}

Test(exports, new_names_past_max_exports_are_a_system_limit)
{
    size_t base;
    tvm_vm *vm = vm_with_room(3, &base);
    tvm_env *env = tvm_env_new(vm);

    /* g/0, g/1 and g/2 fill it; g/3 is one too many; names that exist
     * are found as before. */
    expect(env, "mk", "3", NULL, "ok");
    cr_assert_eq(export_count(vm), base + 3);
    expect(env, "mk", "4", NULL, "error:system_limit");
    expect(env, "mk", "3", NULL, "ok");
    expect(env, "ap", "one", "[x]", "x");
    expect(env, "ap", "g", "[1, 2]", "error:undef");
    expect(env, "ap", "h", "[]", "error:system_limit");
    expect(env, "sp", "g", NULL, "spawned");
    expect(env, "sp", "h", NULL, "error:system_limit");
    cr_assert_eq(export_count(vm), base + 3);

    /* From C: the same names, TVM_ERR_LIMIT for a new one. */
    tvm_term a, r;
    tvm_pid pid;
    cr_assert_eq(tvm_make_int(env, 5, &a), TVM_OK);
    cr_assert_eq(tvm_call(env, "ex", "one", 1, &a, &r), TVM_OK);
    cr_assert_eq(tvm_call(env, "ex", "h", 0, NULL, &r), TVM_ERR_LIMIT);
    cr_assert_eq(tvm_spawn(env, "ex", "h", 0, NULL, &pid), TVM_ERR_LIMIT);
    cr_assert_eq(tvm_call(env, "ex", "g", 0, NULL, &r), TVM_EXCEPTION);   /* undef */

    /* Code and natives are never refused, past the bound too. */
    load_ok(vm, "ex2", ex2_src);
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "nat", "seven", 0, native_seven, NULL, &err), TVM_OK,
                 "%s", err.message);
    cr_assert_eq(export_count(vm), base + 6);
    char out[16];
    cr_assert_eq(tvm_call(env, "ex2", "b", 0, NULL, &r), TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "b");
    cr_assert_eq(tvm_call(env, "nat", "seven", 0, NULL, &r), TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "7");
    expect(env, "ap", "one", "[y]", "y");
    tvm_env_free(env);
    tvm_destroy(vm);
}

/* code:load_binary/3 is VM code naming functions too: a load, delete and
 * purge of modules with new names each time would grow the table without
 * end, so the names a load from VM code needs count against the bound
 * (the load fails whole: {error, system_limit}); a load from C is never
 * refused. */
Test(exports, a_load_from_vm_code_past_max_exports_is_refused)
{
    size_t base;
    tvm_vm *vm = vm_with_room(2, &base);
    tvm_env *env = tvm_env_new(vm);

    /* One new entry (n2:a/0; ex:one/1 has one): loaded. */
    expect_load(env, "n2", "module n2\nexport a/0\n"
                           "function a/0 regs 1\n    loadi r0, 1\n"
                           "    callx r0, r0, ex:one/1\n    ret r0\nend\n",
                "{module,n2}");
    /* Three (x, y and z): the second is one too many; nothing is loaded. */
    const char *n1 = "module n1\nexport x/0, y/0, z/0\n"
                     "function x/0 regs 1\n    ret r0\nend\n"
                     "function y/0 regs 1\n    ret r0\nend\n"
                     "function z/0 regs 1\n    ret r0\nend\n";
    expect_load(env, "n1", n1, "{error,system_limit}");
    cr_assert_eq(export_count(vm), base + 2);
    tvm_term r;
    cr_assert_eq(tvm_call(env, "n1", "x", 0, NULL, &r), TVM_EXCEPTION);   /* undef */
    /* A fun literal names a function too. */
    expect_load(env, "n3", "module n3\nexport b/0\n"
                           "function b/0 regs 1\n    loadk r0, fun zz:top/0\n    ret r0\nend\n",
                "{error,system_limit}");
    /* The diagnostic (what ld_load gives code:load_binary/3, which keeps
     * only {error, system_limit}) names the bound and the function at
     * its line. */
    StrBuf diag;
    sb_init(&diag);
    tvm_status st;
    cr_assert_null(ld_build_status(vm, "n1.tasm", n1, strlen(n1), true, &diag, &st));
    cr_assert_eq(st, TVM_ERR_LIMIT);
    char want[128];
    snprintf(want, sizeof want, "n1.tasm:6:1: error: export table full (%zu entries): n1:y/0\n",
             base + 2);
    cr_assert_str_eq(diag.s, want);
    sb_free(&diag);
    tvm_error err;
    cr_assert_eq(tvm_call(env, "n2", "a", 0, NULL, &r), TVM_OK);
    /* From C the same text loads. */
    cr_assert_eq(tvm_load_string(vm, "n1", n1, strlen(n1), &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_call(env, "n1", "z", 0, NULL, &r), TVM_OK);
    tvm_env_free(env);
    tvm_destroy(vm);
}
