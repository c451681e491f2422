/*
 * tests/unit/vm/test_atoms_full.c - the atom table full (2^20 atoms,
 * shared by every VM of the OS process, never shrinking) from the C API:
 * every call that would need a new atom returns TVM_ERR_LIMIT, patterns
 * make no atom at all (an unknown module matches nothing), and nothing
 * aborts; what exists keeps working, a new VM included.  (Criterion runs
 * each test in an OS process of its own, so the full table stays here.
 * tests/e2e/atom_table_full.tasm fills it from VM code.)
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "tests/unit/fill_atoms.h"
#include "tests/unit/helpers.h"
#include "vm/atom.h"

static const char *const src =
    "module af\n"
    "export f/1, to_atom/1, tp/0\n"
    "function f/1 regs 1\n"
    "    ret r0\n"
    "end\n"
    "function to_atom/1 regs 1\n"
    "    callx r0, r0, erlang:binary_to_atom/1\n"
    "    ret r0\n"
    "end\n"
    /* trace_pattern from VM code, with a match spec */
    "function tp/0 regs 4\n"
    "    loadk r0, {af, f, 1}\n"
    "    loadk r1, [{'_', [], [{return_trace}]}]\n"
    "    loadk r2, [local]\n"
    "    callx r0, r0, erlang:trace_pattern/3\n"
    "    ret r0\n"
    "end\n";

static tvm_status noop(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                       void *data)
{
    (void)argc;
    (void)data;
    *result = argv[0];
    (void)env;
    return TVM_OK;
}

Test(atoms_full, every_c_call_that_needs_a_new_atom_says_limit_and_nothing_aborts)
{
    tvm_vm *vm = tvm_new(NULL);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "af", src);
    fill_atom_table();
    tvm_error err;
    tvm_term t, r;
    /* Builders and the parser. */
    cr_assert_eq(tvm_make_atom(env, "brand_new", &t), TVM_ERR_LIMIT);
    cr_assert_eq(tvm_make_atom(env, "fill_7", &t), TVM_OK);
    cr_assert_eq(tvm_parse_term(env, "{ok, brand_new}", &t, &err), TVM_ERR_LIMIT);
    cr_assert_str_eq(err.message, "term:1:6: error: atom table full (1048576 atoms)\n");
    cr_assert_eq(tvm_parse_term(env, "{ok, fill_8}", &t, &err), TVM_OK);
    /* Loading: the load fails as a whole; what was loaded stays. */
    const char *m2 = "module brand_new_mod\nexport g/0\nfunction g/0 regs 1\n"
                     "    loadk r0, ok\n    ret r0\nend\n";
    cr_assert_eq(tvm_load_string(vm, "m2.tasm", m2, strlen(m2), &err), TVM_ERR_LIMIT);
    cr_assert_str_eq(err.message, "m2.tasm:1:8: error: atom table full (1048576 atoms)\n"
                                  "m2.tasm:2:8: error: atom table full (1048576 atoms)\n"
                                  "m2.tasm:3:10: error: atom table full (1048576 atoms)\n");
    /* Calls, spawns and natives with new names; known names work. */
    cr_assert_eq(tvm_call(env, "brand_new_mod", "g", 0, NULL, &r), TVM_ERR_LIMIT);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "af", "brand_new_fun", 0, NULL, &pid), TVM_ERR_LIMIT);
    cr_assert_eq(tvm_register_native(vm, "af2", "n", 1, noop, NULL, &err), TVM_ERR_LIMIT);
    cr_assert_str_eq(err.message, "tvm_register_native: af2:n/1: atom table full");
    tvm_term bin;
    cr_assert_eq(tvm_make_string(env, "brand_new", &bin), TVM_OK);
    cr_assert_eq(tvm_call(env, "af", "to_atom", 1, &bin, &r), TVM_EXCEPTION);
    tvm_term cls, reason;
    cr_assert_eq(tvm_get_exception(env, &cls, &reason), TVM_OK);
    cr_assert(tvm_is_atom(env, reason, "system_limit"));
    cr_assert_eq(tvm_make_string(env, "fill_9", &bin), TVM_OK);
    cr_assert_eq(tvm_call(env, "af", "to_atom", 1, &bin, &r), TVM_OK);
    cr_assert(tvm_is_atom(env, r, "fill_9"));
    /* Patterns look names up and make none: unknown ones match nothing. */
    int matched = -1;
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "no_such_mod_%d:f/1", i);
        cr_assert_eq(tvm_trace_pattern(vm, name, TVM_TP_TRUE, TVM_TP_LOCAL, &matched, &err),
                     TVM_OK, "%s", err.message);
        cr_assert_eq(matched, 0);
    }
    cr_assert_eq(tvm_trace_pattern(vm, "af:no_such_fun/_", TVM_TP_TRUE, 0, &matched, &err), TVM_OK);
    cr_assert_eq(matched, 0);
    cr_assert_eq(tvm_trace_info(env, "no_such_mod:f/1", "traced", &r, &err), TVM_OK);
    char out[100];
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "{traced,undefined}");
    int64_t count;
    cr_assert_eq(tvm_call_count(vm, "no_such_mod:f/1", &count), TVM_ERR_NOTFOUND);
    /* A match spec: its atoms are needed; new ones are a limit, existing
     * ones (here from the module's literals) work, and the compiler itself
     * needs none ('EXIT' and const are predefined). */
    cr_assert_eq(tvm_trace_pattern_ms(vm, "af:f/1", "[{'_',[],[{brand_new_action}]}]",
                                      TVM_TP_TRUE, TVM_TP_LOCAL, 0, &matched, &err),
                 TVM_ERR_LIMIT);
    cr_assert_eq(tvm_trace_pattern_ms(vm, "af:f/1", "[{'_',[],[{return_trace}]}]",
                                      TVM_TP_TRUE, TVM_TP_LOCAL, 0, &matched, &err),
                 TVM_OK, "%s", err.message);
    cr_assert_eq(matched, 1);
    cr_assert_eq(tvm_call(env, "af", "tp", 0, NULL, &r), TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "1");
    cr_assert_eq(vm_atom_count(), VM_ATOM_MAX_COUNT);
    /* Another VM: its built-in natives' names are atoms already. */
    tvm_vm *vm2 = tvm_new(NULL);
    cr_assert(vm2);
    tvm_destroy(vm2);
    tvm_env_free(env);
    tvm_destroy(vm);
}
