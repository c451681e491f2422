/*
 * tests/unit/vm/test_procinfo_ctx.c - process_info/2's frames asked from
 * a call context on the embedder's thread (tvm_call): a waiting process
 * is read under its lock, a running one is asked and answers at its next
 * reduction check while this thread sleeps a millisecond at a time
 * (vm/procinfo.c, "Asking a running process"); and from a call context
 * made inside a native on a scheduler thread, of a process queued there.
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

/* process_info(T, current_function) from a call context made inside a
 * native, on the scheduler thread of a VM of one scheduler, where T
 * waits in that scheduler's queue behind the native's caller: such a
 * context cannot wait for T to answer (it would hold the very thread T
 * needs), but T cannot move either, so its frames are read where it
 * stopped (vm_sched_holds_queued), not `undefined`. */
static char asked[256];

static tvm_status nat_ask(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result,
                          void *data)
{
    (void)argc;
    tvm_pid t;
    cr_assert_eq(tvm_get_pid(e, argv[0], &t), TVM_OK);
    tvm_env *c = tvm_env_new(data);
    tvm_term a[2], r;
    cr_assert_eq(tvm_make_pid(c, t, &a[0]), TVM_OK);
    cr_assert_eq(tvm_make_atom(c, "current_function", &a[1]), TVM_OK);
    cr_assert_eq(tvm_call(c, "erlang", "process_info", 2, a, &r), TVM_OK);
    tvm_format_term(c, r, asked, sizeof asked);
    tvm_env_free(c);
    return tvm_make_atom(e, "ok", result);
}

static const char *const queued_src =
    "module pq\n"
    "export main/0, spinner/1\n"
    "function spinner/1 regs 2\n"
    "    loadk r1, ready\n"
    "    callx r0, r0, erlang:send/2\n"
    "    tailcall r0, spin/0\n"
    "end\n"
    "function spin/0 regs 1\n"
    "top:\n"
    "    jump top\n"
    "end\n"
    "function main/0 regs 8\n"
    "    self r0\n"
    "    loadk r4, pq\n"
    "    loadk r5, spinner\n"
    "    loadk r6, []\n"
    "    cons r6, r0, r6\n"
    "    callx r4, r4, erlang:spawn/3\n"
    "    move r1, r4\n"
    "top:\n"
    "    recv r4, w\n"
    "    accept\n"
    "    jump got\n"
    "w:\n"
    "    loadk r5, infinity\n"
    "    wait r5, got\n"
    "    jump top\n"
    "got:\n"
    "    move r4, r1\n"
    "    callx r4, r4, host:ask/1\n"
    "    move r4, r1\n"
    "    loadk r5, kill\n"
    "    callx r4, r4, erlang:exit/2\n"
    "    ret r4\n"
    "end\n";

Test(procinfo_ctx, frames_of_a_process_queued_behind_a_native_on_one_scheduler)
{
    tvm_vm *v = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 1,
                                       .quiet_crashes = true });
    tvm_env *e = tvm_env_new(v);
    tvm_error err;
    cr_assert_eq(tvm_register_native(v, "host", "ask", 1, nat_ask, v, &err), TVM_OK);
    load_ok(v, "pq", queued_src);
    tvm_pid m;
    tvm_term r;
    cr_assert_eq(tvm_spawn(e, "pq", "main", 0, NULL, &m), TVM_OK);
    cr_assert_eq(tvm_join(e, m, &r), TVM_OK);
    cr_expect_str_eq(asked, "{current_function,{pq,spin,0}}");
    tvm_env_free(e);
    tvm_destroy(v);
}
