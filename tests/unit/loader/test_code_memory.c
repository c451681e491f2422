/*
 * tests/unit/loader/test_code_memory.c - max_code_bytes: the bound on the
 * memory loaded code holds.  No version of a module is freed while the VM
 * lives (a process may still run it: vm/module.c), so without the bound a
 * loop of code:load_binary/3 and erlang:purge_module/1 grew the OS
 * process by a version per turn; past it a load from VM code is
 * {error, system_limit}, and one from C counts but is never refused
 * (docs/safety.md, section 3).
 */
#include <criterion/criterion.h>
#include "loader/loader.h"
#include "tests/unit/helpers.h"
#include "vm/module.h"
#include "vm/vm.h"

/* cycle(Text, N): N times code:load_binary(hot, "hot.tasm", Text), each
 * followed by purge_module(hot) when hot has old code; done, or
 * {Left, Result} for the first load that is not {module, hot} (Left: the
 * turns left, that one included). */
static const char *const cy_src =
    "module cy\n"
    "export cycle/2\n"
    "function cycle/2 regs 5\n"
    "    move r4, r1\n"
    "loop:\n"
    "    jeqi r4, 0, done\n"
    "    move r2, r0\n"
    "    move r3, r0\n"
    "    loadk r0, hot\n"
    "    loadk r1, \"hot.tasm\"\n"
    "    callx r0, r0, code:load_binary/3\n"
    "    loadk r1, {module, hot}\n"
    "    jne r0, r1, refused\n"
    "    loadk r0, hot\n"
    "    callx r0, r0, erlang:check_old_code/1\n"
    "    loadk r1, false\n"
    "    jeq r0, r1, next\n"
    "    loadk r0, hot\n"
    "    callx r0, r0, erlang:purge_module/1\n"
    "next:\n"
    "    move r0, r3\n"
    "    addi r4, r4, -1\n"
    "    jump loop\n"
    "refused:\n"
    "    move r1, r0\n"
    "    move r0, r4\n"
    "    tuple r0, 2, r0\n"
    "    ret r0\n"
    "done:\n"
    "    loadk r0, done\n"
    "    ret r0\n"
    "end\n";

static const char *const hot_src =
    "module hot\n"
    "export v/0\n"
    "function v/0 regs 1\n"
    "    loadk r0, {a, b, c, d, e, f, g, h}\n"
    "    ret r0\n"
    "end\n"
    "function w/0 regs 1\n"
    "    loadi r0, 1\n"
    "    ret r0\n"
    "end\n";

/* vm->code_bytes is read here without a lock: every load of these tests
 * ran in this thread or in a process it joined since. */
#define code_bytes(vm) ((vm)->code_bytes)

/* The bytes one version of hot_src, loaded as "hot.tasm", holds. */
static size_t hot_bytes(tvm_vm *vm)
{
    StrBuf diag;
    sb_init(&diag);
    Module *m = ld_build(vm, "hot.tasm", hot_src, strlen(hot_src), &diag);
    cr_assert_not_null(m, "%s", diag.s);
    size_t n = m->bytes;
    ld_module_free(m);
    sb_free(&diag);
    return n;
}

/* cy:cycle(hot_src, n) in a process: its result, printed. */
static void expect_cycle(tvm_env *env, int n, const char *want)
{
    tvm_term argv[2];
    cr_assert_eq(tvm_make_binary(env, hot_src, strlen(hot_src), &argv[0]), TVM_OK);
    cr_assert_eq(tvm_make_int(env, n, &argv[1]), TVM_OK);
    char out[100];
    spawn_fmt(env, "cy", "cycle", 2, argv, out, sizeof out);
    cr_assert_str_eq(out, want, "cycle(%d)", n);
}

Test(code_memory, the_default_bound_is_a_gibibyte)
{
    tvm_config cfg = { .size = sizeof cfg, .schedulers = 1 };
    tvm_vm *vm = tvm_new(&cfg);
    cr_assert_eq(vm->max_code_bytes, (size_t)1 << 30);
    tvm_destroy(vm);
}

/* Every load counts what its version holds, and nothing subtracts it:
 * a purged version stays allocated. */
Test(code_memory, every_version_counts_purged_ones_too)
{
    tvm_config cfg = { .size = sizeof cfg, .schedulers = 1, .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "cy", cy_src);
    size_t base = code_bytes(vm), one = hot_bytes(vm);
    cr_assert_gt(one, (size_t)0);
    expect_cycle(env, 10, "done");
    cr_assert_eq(code_bytes(vm), base + 10 * one);
    tvm_env_free(env);
    tvm_destroy(vm);
}

/* With room for three versions of hot, the fourth load from VM code is
 * refused, whole: hot's third version stays current and callable, and
 * the memory held does not move; from C the same text still loads. */
Test(code_memory, a_load_purge_loop_from_vm_code_ends_at_max_code_bytes)
{
    tvm_config cfg = { .size = sizeof cfg, .schedulers = 2, .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    load_ok(vm, "cy", cy_src);
    size_t base = code_bytes(vm), one = hot_bytes(vm);
    tvm_destroy(vm);
    cfg.max_code_bytes = base + 3 * one + one / 2;
    vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "cy", cy_src);
    cr_assert_eq(code_bytes(vm), base);

    expect_cycle(env, 1000, "{997,{error,system_limit}}");
    cr_assert_eq(code_bytes(vm), base + 3 * one);
    char out[64];
    cr_assert_eq(call_fmt(env, "hot", "v", 0, NULL, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "{a,b,c,d,e,f,g,h}");
    /* Refused again, at once, however often it is asked. */
    expect_cycle(env, 5, "{5,{error,system_limit}}");
    cr_assert_eq(code_bytes(vm), base + 3 * one);

    /* The diagnostic (code:load_binary/3 keeps only system_limit). */
    StrBuf diag;
    sb_init(&diag);
    cr_assert_eq(ld_load(vm, "hot.tasm", hot_src, strlen(hot_src), 0, true, &diag),
                 TVM_ERR_LIMIT);
    char want[200];
    snprintf(want, sizeof want,
             "hot.tasm:1:1: error: code memory full (%zu bytes held, at most %zu): "
             "the module needs %zu more\n", base + 3 * one, base + 3 * one + one / 2, one);
    cr_assert_str_eq(diag.s, want);
    sb_free(&diag);

    /* From C: loaded, and counted. */
    tvm_error err;
    cr_assert_eq(tvm_load_string(vm, "hot.tasm", hot_src, strlen(hot_src), &err), TVM_OK, "%s",
                 err.message);
    cr_assert_eq(code_bytes(vm), base + 4 * one);
    cr_assert_eq(call_fmt(env, "hot", "v", 0, NULL, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "{a,b,c,d,e,f,g,h}");
    tvm_env_free(env);
    tvm_destroy(vm);
}
