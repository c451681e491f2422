/*
 * tests/unit/loader/test_load.c - loading: all-or-nothing, replacing a
 * module, keeping what was loaded when a load fails.
 */
#include <criterion/criterion.h>

#include "tests/unit/helpers.h"

TVM_FIXTURE(load, NULL);

static const char *const v1 =
    "module m\nexport f/0, g/0\n"
    "function f/0 regs 1\n    loadi r0, 1\n    ret r0\nend\n"
    "function g/0 regs 1\n    loadk r0, g1\n    ret r0\nend\n";
static const char *const v2 =
    "module m\nexport f/0\n"
    "function f/0 regs 1\n    loadi r0, 2\n    ret r0\nend\n";

static const char *call0(const char *mod, const char *fun)
{
    /* The result, or "class:reason" when the call raised. */
    static char out[256];
    call_fmt(env, mod, fun, 0, NULL, out, sizeof out);
    return out;
}

Test(load, reloading_replaces_the_module_and_drops_removed_exports)
{
    load_ok(vm, "m.tasm", v1);
    cr_assert_str_eq(call0("m", "f"), "1");
    cr_assert_str_eq(call0("m", "g"), "g1");
    load_ok(vm, "m.tasm", v2);
    cr_assert_str_eq(call0("m", "f"), "2");
    cr_assert_str_eq(call0("m", "g"), "error:undef");
}

Test(load, a_file_with_an_error_loads_nothing_and_keeps_the_old_version)
{
    load_ok(vm, "m.tasm", v1);
    const char *bad =
        "module m\nexport f/0\n"
        "function f/0 regs 1\n    loadi r0, 3\n    ret r0\nend\n"
        "function h/0 regs 1\n    bogus r0\n    ret r0\nend\n";
    tvm_error err;
    cr_assert_eq(tvm_load_string(vm, "m2.tasm", bad, strlen(bad), &err), TVM_ERR_LOAD);
    cr_assert_str_eq(err.message, "m2.tasm:8:5: error: unknown instruction 'bogus'\n");
    cr_assert_str_eq(call0("m", "f"), "1");
    cr_assert_str_eq(call0("m", "g"), "g1");
    /* A new module with an error is not loaded at all. */
    const char *bad2 = "module n\nexport f/0\nfunction f/0 regs 1\n    ret r5\nend\n";
    cr_assert_eq(tvm_load_string(vm, "n.tasm", bad2, strlen(bad2), &err), TVM_ERR_LOAD);
    cr_assert_str_eq(err.message,
                     "n.tasm:4:9: error: register r5 out of range: f/0 has 1 registers\n");
    cr_assert_str_eq(call0("n", "f"), "error:undef");
}

Test(load, every_error_of_a_file_is_reported)
{
    const char *bad =
        "module m\nexport f/0, nothere/3\n"
        "function f/0 regs 1\n    add r0, r0\n    jump nowhere\nend\n"
        "function f/0 regs 1\n    ret r0\nend\n";
    tvm_error err;
    cr_assert_eq(tvm_load_string(vm, "e.tasm", bad, strlen(bad), &err), TVM_ERR_LOAD);
    cr_assert_str_eq(err.message,
                     "e.tasm:4:15: error: 'add' takes 3 operands, got 2\n"
                     "e.tasm:7:1: error: duplicate function f/0 (first defined at line 3)\n"
                     "e.tasm:2:13: error: export of undefined function nothere/3\n"
                     "e.tasm:5:10: error: undefined label 'nowhere'\n");
}

Test(load, missing_files_and_bad_arguments)
{
    tvm_error err;
    cr_assert_eq(tvm_load_file(vm, "/nonexistent/x.tasm", &err), TVM_ERR_IO);
    cr_assert_str_eq(err.message, "/nonexistent/x.tasm: error: cannot open: No such file or directory\n");
    cr_assert_eq(tvm_load_string(vm, NULL, "", 0, &err), TVM_ERR_BADARG);
}

Test(load, module_can_call_another_module_loaded_later)
{
    load_ok(vm, "a.tasm", "module a\nexport f/0\nfunction f/0 regs 1\n    callx r0, r0, b:g/0\n    ret r0\nend\n");
    cr_assert_str_eq(call0("a", "f"), "error:undef");
    load_ok(vm, "b.tasm", "module b\nexport g/0\nfunction g/0 regs 1\n    loadk r0, {from, b}\n    ret r0\nend\n");
    cr_assert_str_eq(call0("a", "f"), "{from,b}");
}
