/*
 * tests/unit/vm/test_seq_api.c - seq_trace tokens and messages from C
 * (vm/seqtrace.c, BEAM behaviour 63 in docs/beam.md): tvm_send is a send
 * of its env's process or call context, so one from a native run by a
 * process with a token carries that token (its serial moved on), and one
 * from the test's call context, which has none, clears the receiver's;
 * the VM's own messages (trace_delivered's reply) leave it as it is.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/helpers.h"

TVM_FIXTURE(seqapi, (&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2,
                                    .quiet_crashes = true, .max_message_words = 64 }));

/* holder(): takes a token labelled 5, waits for a message and returns
 * {Msg, get_token()}.  sender(To): takes a token labelled 6, sends To hi
 * through host:send/2 (tvm_send on its own env) and returns ok.
 * delivered(): takes a token labelled 8, asks trace_delivered(all) and
 * returns {Reply, get_token()} of the reply.  labels(): the results of
 * set_token(label, L) (or the error's reason) for L a list of 64 words,
 * one of 66 and a term of 3(2^70 - 1) words flat (max_message_words 64),
 * and then get_token(label).  prints(): with the print flag, the results
 * of print(I) for I the list of 64 words and the term of 3(2^70 - 1),
 * then get_token(serial). */
static const char *const src =
    "module sq\n"
    "export holder/0, sender/1, delivered/0, labels/0, prints/0\n"
    "function pr/1 regs 4\n"
    "    try r1, caught\n"
    "    callx r0, r0, seq_trace:print/1\n"
    "    endtry\n    ret r0\n"
    "caught:\n    ret r2\nend\n"
    "function prints/0 regs 6\n"
    "    loadk r0, print\n    loadk r1, true\n"
    "    callx r0, r0, seq_trace:set_token/2\n"
    "    loadi r0, 32\n    call r0, r0, list/1\n    call r0, r0, pr/1\n"
    "    loadi r1, 70\n    call r1, r1, dag/1\n    call r1, r1, pr/1\n"
    "    loadk r2, serial\n    callx r2, r2, seq_trace:get_token/1\n"
    "    tuple r0, 3, r0\n    ret r0\nend\n"
    TASM_WAITER
    TASM_DAG_LIST
    "function setl/1 regs 5\n"
    "    move r1, r0\n    loadk r0, label\n"
    "    try r2, caught\n"
    "    callx r0, r0, seq_trace:set_token/2\n"
    "    endtry\n    ret r0\n"
    "caught:\n    ret r3\nend\n"
    "function labels/0 regs 6\n"
    "    loadi r0, 32\n    call r0, r0, list/1\n    call r0, r0, setl/1\n"
    "    loadi r1, 33\n    call r1, r1, list/1\n    call r1, r1, setl/1\n"
    "    loadi r2, 70\n    call r2, r2, dag/1\n    call r2, r2, setl/1\n"
    "    loadk r3, label\n    callx r3, r3, seq_trace:get_token/1\n"
    "    tuple r0, 4, r0\n    ret r0\nend\n"
    "function label/1 regs 2\n"
    "    move r1, r0\n    loadk r0, label\n"
    "    callx r0, r0, seq_trace:set_token/2\n    ret r0\nend\n"
    "function holder/0 regs 2\n"
    "    loadi r0, 5\n    call r0, r0, label/1\n"
    "    call r0, r0, waiter/0\n"
    "    callx r1, r1, seq_trace:get_token/0\n"
    "    tuple r0, 2, r0\n    ret r0\nend\n"
    "function sender/1 regs 3\n"
    "    loadi r1, 6\n    call r1, r1, label/1\n"
    "    loadk r1, hi\n    callx r0, r0, host:send/2\n"
    "    loadk r0, ok\n    ret r0\nend\n"
    "function delivered/0 regs 2\n"
    "    loadi r0, 8\n    call r0, r0, label/1\n"
    "    loadk r0, all\n    callx r0, r0, erlang:trace_delivered/1\n"
    "    call r0, r0, waiter/0\n"
    "    callx r1, r1, seq_trace:get_token/0\n"
    "    tuple r0, 2, r0\n    ret r0\nend\n";

/* host:send(Pid, Msg): tvm_send on the caller's env. */
static tvm_status nat_send(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res, void *d)
{
    (void)argc, (void)d;
    tvm_pid pid;
    cr_assert_eq(tvm_get_pid(e, argv[0], &pid), TVM_OK);
    cr_assert_eq(tvm_send(e, pid, argv[1]), TVM_OK);
    return tvm_make_atom(e, "ok", res);
}

static void load(void)
{
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "host", "send", 2, nat_send, NULL, &err), TVM_OK);
    load_ok(vm, "sq.tasm", src);
}

/* Spawns sq:fun(Args) and waits until it waits for a message. */
static tvm_pid start(const char *fun, int argc, const tvm_term *argv)
{
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "sq", fun, argc, argv, &pid), TVM_OK);
    wait_proc_state(vm, pid, "waiting");
    return pid;
}

/* Joins pid: its result, printed. */
static const char *result(tvm_pid pid, char *out, size_t size)
{
    tvm_term r;
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    tvm_format_term(env, r, out, size);
    return out;
}

Test(seqapi, a_native_sends_with_its_process_token)
{
    load();
    tvm_pid h = start("holder", 0, NULL), s;
    tvm_term to;
    cr_assert_eq(tvm_make_pid(env, h, &to), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "sq", "sender", 1, &to, &s), TVM_OK);
    char out[128], want[128];
    snprintf(want, sizeof want, "{hi,{0,6,1,<0.%llu.0>,0}}", (unsigned long long)s);
    cr_assert_str_eq(result(h, out, sizeof out), want);
}

Test(seqapi, a_send_from_a_call_context_without_a_token_clears)
{
    load();
    tvm_pid h = start("holder", 0, NULL);
    tvm_term msg;
    cr_assert_eq(tvm_make_atom(env, "hello", &msg), TVM_OK);
    cr_assert_eq(tvm_send(env, h, msg), TVM_OK);
    char out[128];
    cr_assert_str_eq(result(h, out, sizeof out), "{hello,[]}");
}

Test(seqapi, the_vms_own_message_keeps_the_token)
{
    load();
    tvm_pid d;
    cr_assert_eq(tvm_spawn(env, "sq", "delivered", 0, NULL, &d), TVM_OK);
    char out[128], want[128];
    /* trace_delivered/1's reply {trace_delivered, all, Ref}; the token
     * as the process made it (label 8, nothing sent). */
    cr_assert(strstr(result(d, out, sizeof out), "{{trace_delivered,all,"), "%s", out);
    snprintf(want, sizeof want, "},{0,8,0,<0.%llu.0>,0}}", (unsigned long long)d);
    cr_assert(strstr(out, want), "%s", out);
}

/* sq:fun() run in the test's call context: its result, printed. */
static const char *call(const char *fun, char *out, size_t size)
{
    tvm_term r;
    cr_assert_eq(tvm_call(env, "sq", fun, 0, NULL, &r), TVM_OK);
    tvm_format_term(env, r, out, size);
    return out;
}

Test(seqapi, a_label_is_bounded_as_a_message)
{
    load();
    char out[512];
    cr_assert_str_eq(call("labels", out, sizeof out),
                     "{0,system_limit,system_limit,{label,[1,2,3,4,5,6,7,8,9,10,11,12,13,14,"
                     "15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]}}");
}

Test(seqapi, a_print_is_bounded_as_a_message)
{
    load();
    char out[128];
    /* The second print moved nothing: the serial is the first's. */
    cr_assert_str_eq(call("prints", out, sizeof out), "{ok,system_limit,{serial,{0,1}}}");
}
