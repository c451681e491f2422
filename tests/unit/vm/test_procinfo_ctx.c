/*
 * tests/unit/vm/test_procinfo_ctx.c - process_info/2's frames asked from
 * a call context on the embedder's thread (tvm_call): a waiting process
 * is read under its lock, a running one is asked and answers at its next
 * reduction check while this thread sleeps a millisecond at a time
 * (vm/procinfo.c, "Asking a running process").
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/unit/helpers.h"

TVM_FIXTURE(procinfo_ctx, (&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2,
                                          .quiet_crashes = true }));

static const char *const src =
    "module pc\n"
    "export waiter/0, spin/0\n"
    TASM_WAITER
    "function spin/0 regs 1\n"
    "top:\n"
    "    jump top\n"
    "end\n";

/* process_info(Pid, Item) by tvm_call, formatted into out. */
static void info(tvm_pid pid, const char *item, char *out, size_t size)
{
    tvm_term a[2], r;
    cr_assert_eq(tvm_make_pid(env, pid, &a[0]), TVM_OK);
    cr_assert_eq(tvm_make_atom(env, item, &a[1]), TVM_OK);
    cr_assert_eq(tvm_call(env, "erlang", "process_info", 2, a, &r), TVM_OK);
    tvm_format_term(env, r, out, size);
}

Test(procinfo_ctx, frames_of_a_waiting_and_of_a_running_process)
{
    load_ok(vm, "pc", src);
    tvm_pid w, s;
    cr_assert_eq(tvm_spawn(env, "pc", "waiter", 0, NULL, &w), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "pc", "spin", 0, NULL, &s), TVM_OK);
    wait_proc_state(vm, w, "waiting");
    wait_proc_state(vm, s, "running");
    char out[512];
    info(w, "current_function", out, sizeof out);
    cr_expect_str_eq(out, "{current_function,{pc,waiter,0}}");
    info(w, "current_stacktrace", out, sizeof out);
    cr_expect_str_eq(out, "{current_stacktrace,[{pc,waiter,0,[{file,<<\"pc\">>},{line,10}]}]}");
    info(s, "current_function", out, sizeof out);
    cr_expect_str_eq(out, "{current_function,{pc,spin,0}}");
    info(s, "current_stacktrace", out, sizeof out);
    cr_expect_str_eq(out, "{current_stacktrace,[{pc,spin,0,[{file,<<\"pc\">>},{line,17}]}]}");
    tvm_term m;
    cr_assert_eq(tvm_make_atom(env, "kill", &m), TVM_OK);
    cr_assert_eq(tvm_exit(env, s, m), TVM_OK);
    cr_assert_eq(tvm_make_atom(env, "go", &m), TVM_OK);
    cr_assert_eq(tvm_send(env, w, m), TVM_OK);
    tvm_term r;
    cr_assert_eq(tvm_join(env, w, &r), TVM_OK);
}
