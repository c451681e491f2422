/*
 * tests/unit/vm/test_exit_api.c - exit signals from C: tvm_exit from a
 * call context and from a native (include/tracevm.h), and erlang:exit/2
 * run in a call context, each with the exact outcome of docs/asm.md
 * section 11.6's table: what a trapping process receives (From
 * `undefined` from a call context, the sender's pid from a process), what
 * ends a process that does not trap, and the statuses.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/helpers.h"
#include "vm/atomics.h"

TVM_FIXTURE(exitapi, (&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2,
                                     .quiet_crashes = true }));

/* trapper(): traps exits, then returns the first message it receives.
 * plain(): the same without trapping.  sender(To, Reason): calls
 * host:exit(To, Reason) (tvm_exit from a native on this process) and
 * returns what it returned.  suicide(Reason): host:exit(self(), Reason),
 * then returns survived.  spin(N): counts N down, returns N.  Each
 * waits in `wait` while it has no message, so "waiting" in tvm_processes
 * means its flag is set. */
static const char *const src =
    "module xa\n"
    "export trapper/0, plain/0, sender/2, suicide/1, spin/1, waiter/0\n"
    TASM_WAITER
    "function trapper/0 regs 2\n"
    "    loadk r0, trap_exit\n    loadk r1, true\n"
    "    callx r0, r0, erlang:process_flag/2\n"
    "    call r0, r0, waiter/0\n    ret r0\nend\n"
    "function plain/0 regs 1\n    call r0, r0, waiter/0\n    ret r0\nend\n"
    "function sender/2 regs 2\n    callx r0, r0, host:exit/2\n    ret r0\nend\n"
    "function suicide/1 regs 2\n"
    "    move r1, r0\n    self r0\n    callx r0, r0, host:exit/2\n"
    "    loadk r0, survived\n    ret r0\nend\n"
    "function spin/1 regs 2\n    move r1, r0\n"
    "top:\n    jeqi r1, 0, done\n    addi r1, r1, -1\n    jump top\n"
    "done:\n    ret r0\nend\n";

/* host:exit(Pid, Reason): tvm_exit on the caller's env; the status's name
 * as an atom. */
static tvm_status nat_exit(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res, void *d)
{
    (void)argc, (void)d;
    tvm_pid pid;
    cr_assert_eq(tvm_get_pid(e, argv[0], &pid), TVM_OK);
    return tvm_make_atom(e, tvm_status_name(tvm_exit(e, pid, argv[1])), res);
}

static void load(void)
{
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "host", "exit", 2, nat_exit, NULL, &err), TVM_OK);
    load_ok(vm, "xa.tasm", src);
}

/* Spawns xa:fun() and waits until it waits for a message. */
static tvm_pid start(const char *fun)
{
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "xa", fun, 0, NULL, &pid), TVM_OK);
    wait_proc_state(vm, pid, "waiting");
    return pid;
}

/* Joins pid: its result, or its exception as class:reason. */
static const char *outcome(tvm_pid pid, char *out, size_t size)
{
    tvm_term r;
    tvm_status st = tvm_join(env, pid, &r);
    if (st == TVM_OK) {
        tvm_format_term(env, r, out, size);
        return out;
    }
    cr_assert_eq(st, TVM_EXCEPTION);
    exception_fmt(env, out, size);
    tvm_clear_exception(env);
    return out;
}

static tvm_term term(const char *text)
{
    tvm_term t;
    cr_assert_eq(tvm_parse_term(env, text, &t, NULL), TVM_OK, "%s", text);
    return t;
}

/* tvm_exit(env, pid, Reason) from the test's call context, then a
 * message `after` (which a process still alive returns), then pid's end. */
static void exit_from_c(const char *fun, const char *reason, const char *want)
{
    tvm_pid pid = start(fun);
    char out[256];
    cr_assert_eq(tvm_exit(env, pid, term(reason)), TVM_OK, "%s %s", fun, reason);
    /* Ignored only if it is still there to take this. */
    tvm_status st = tvm_send(env, pid, term("after"));
    cr_assert(st == TVM_OK || st == TVM_ERR_NOTFOUND);
    cr_assert_str_eq(outcome(pid, out, sizeof out), want, "%s %s", fun, reason);
}

Test(exitapi, from_a_call_context_as_exit_2)
{
    load();
    /* A trapping process gets the message, From undefined, but for kill. */
    exit_from_c("trapper", "shutdown", "{'EXIT',undefined,shutdown}");
    exit_from_c("trapper", "normal", "{'EXIT',undefined,normal}");
    exit_from_c("trapper", "{bad,[1,2]}", "{'EXIT',undefined,{bad,[1,2]}}");
    exit_from_c("trapper", "kill", "exit:killed");
    /* One that does not trap ends with the reason; normal is ignored. */
    exit_from_c("plain", "shutdown", "exit:shutdown");
    exit_from_c("plain", "normal", "'after'");
    exit_from_c("plain", "kill", "exit:killed");
}

Test(exitapi, statuses)
{
    load();
    tvm_pid pid = start("plain");
    cr_assert_eq(tvm_exit(NULL, pid, term("x")), TVM_ERR_BADARG);
    cr_assert_eq(tvm_exit(env, pid, (tvm_term){ 1u << 30 }), TVM_ERR_BADARG, "a bad handle");
    /* Nothing was sent by those: it is still there. */
    cr_assert_eq(tvm_send(env, pid, term("still")), TVM_OK);
    char out[64];
    cr_assert_str_eq(outcome(pid, out, sizeof out), "still");
    /* Gone, never used, and 0 (no process has it). */
    cr_assert_eq(tvm_exit(env, pid, term("kill")), TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_exit(env, 1000000, term("kill")), TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_exit(env, 0, term("kill")), TVM_ERR_NOTFOUND);
}

Test(exitapi, a_reason_over_max_message_words_is_limit)
{
    tvm_vm *v = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 1,
                                       .quiet_crashes = true, .max_message_words = 16 });
    tvm_env *e = tvm_env_new(v);
    load_ok(v, "xa.tasm", src);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(e, "xa", "trapper", 0, NULL, &pid), TVM_OK);
    wait_proc_state(v, pid, "waiting");
    tvm_term big, fits, r;
    /* Six cells (12 words) and the signal's tuple (4) fit in 16; seven do
     * not, and nothing is sent: the trapper returns the next message. */
    cr_assert_eq(tvm_parse_term(e, "[1,2,3,4,5,6,7]", &big, NULL), TVM_OK);
    cr_assert_eq(tvm_exit(e, pid, big), TVM_ERR_LIMIT);
    cr_assert_eq(tvm_make_atom(e, "still", &r), TVM_OK);
    cr_assert_eq(tvm_send(e, pid, r), TVM_OK);
    cr_assert_eq(tvm_join(e, pid, &r), TVM_OK);
    cr_assert(tvm_is_atom(e, r, "still"));
    cr_assert_eq(tvm_spawn(e, "xa", "plain", 0, NULL, &pid), TVM_OK);
    wait_proc_state(v, pid, "waiting");
    cr_assert_eq(tvm_parse_term(e, "[1,2,3,4,5,6]", &fits, NULL), TVM_OK);
    cr_assert_eq(tvm_exit(e, pid, fits), TVM_OK);
    /* Ended by it; a reason of 12 words is more than an exit reason may
     * keep under this cap, and becomes system_limit (docs/safety.md). */
    cr_assert_eq(tvm_join(e, pid, &r), TVM_EXCEPTION);
    tvm_term c, why;
    cr_assert_eq(tvm_get_exception(e, &c, &why), TVM_OK);
    cr_assert(tvm_is_atom(e, c, "exit"));
    cr_assert(tvm_is_atom(e, why, "system_limit"));
    tvm_env_free(e);
    tvm_destroy(v);
}

Test(exitapi, from_a_native_the_sender_is_its_process)
{
    load();
    tvm_pid target = start("trapper"), sender;
    tvm_term a[2], r;
    cr_assert_eq(tvm_make_pid(env, target, &a[0]), TVM_OK);
    a[1] = term("bye");
    cr_assert_eq(tvm_spawn(env, "xa", "sender", 2, a, &sender), TVM_OK);
    cr_assert_eq(tvm_join(env, sender, &r), TVM_OK);
    cr_assert(tvm_is_atom(env, r, "TVM_OK"));
    char out[128], want[128];
    snprintf(want, sizeof want, "{'EXIT',<0.%llu.0>,bye}", (unsigned long long)sender);
    cr_assert_str_eq(outcome(target, out, sizeof out), want);
    /* To a process that is gone: the status comes back to the native. */
    cr_assert_eq(tvm_spawn(env, "xa", "sender", 2, a, &sender), TVM_OK);
    cr_assert_eq(tvm_join(env, sender, &r), TVM_OK);
    cr_assert(tvm_is_atom(env, r, "TVM_ERR_NOTFOUND"));
}

/* xa:suicide(Reason): its own signal is taken in before tvm_exit
 * returns, and ends it as the native returns (exit(self(), normal) too,
 * as BEAM since OTP 23). */
Test(exitapi, a_native_that_signals_its_own_process)
{
    load();
    const struct {
        const char *reason, *want;
    } cases[] = {
        { "kill", "exit:killed" },
        { "normal", "exit:normal" },
        { "{shutdown,x}", "exit:{shutdown,x}" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tvm_term a = term(cases[i].reason);
        tvm_pid pid;
        char out[128];
        cr_assert_eq(tvm_spawn(env, "xa", "suicide", 1, &a, &pid), TVM_OK);
        cr_assert_str_eq(outcome(pid, out, sizeof out), cases[i].want, "%s", cases[i].reason);
    }
}

/* erlang:exit/2 by tvm_call on a call context: sent, From undefined,
 * true also for a process that is gone; badarg for a non-pid.  link/1
 * and process_flag/2 stay badarg there (a call context has no links and
 * takes no signals). */
Test(exitapi, exit_2_in_a_call_context)
{
    load();
    tvm_pid pid = start("trapper");
    tvm_term a[2], r;
    cr_assert_eq(tvm_make_pid(env, pid, &a[0]), TVM_OK);
    a[1] = term("from_code");
    cr_assert_eq(tvm_call(env, "erlang", "exit", 2, a, &r), TVM_OK);
    cr_assert(tvm_is_atom(env, r, "true"));
    char out[128];
    cr_assert_str_eq(outcome(pid, out, sizeof out), "{'EXIT',undefined,from_code}");
    cr_assert_eq(tvm_call(env, "erlang", "exit", 2, a, &r), TVM_OK, "a process that is gone");
    cr_assert(tvm_is_atom(env, r, "true"));

    tvm_pid plain = start("plain");
    cr_assert_eq(tvm_make_pid(env, plain, &a[0]), TVM_OK);
    a[1] = term("kill");
    cr_assert_eq(tvm_call(env, "erlang", "exit", 2, a, &r), TVM_OK);
    cr_assert_str_eq(outcome(plain, out, sizeof out), "exit:killed");

    tvm_term c, why;
    a[0] = term("not_a_pid");
    cr_assert_eq(tvm_call(env, "erlang", "exit", 2, a, &r), TVM_EXCEPTION);
    cr_assert_eq(tvm_get_exception(env, &c, &why), TVM_OK);
    cr_assert(tvm_is_atom(env, why, "badarg"));
    tvm_clear_exception(env);
    cr_assert_eq(tvm_make_pid(env, plain, &a[0]), TVM_OK);
    cr_assert_eq(tvm_call(env, "erlang", "link", 1, a, &r), TVM_EXCEPTION);
    cr_assert_eq(tvm_get_exception(env, &c, &why), TVM_OK);
    cr_assert(tvm_is_atom(env, why, "badarg"));
    tvm_clear_exception(env);
}

/* ---- signals racing the targets' own exits ---- */

enum { SPINNERS = 16 };

typedef struct Storm {
    tvm_pid pids[SPINNERS];
    VmAtomic stop;
} Storm;

/* normal to every spinner until told to stop: a process that does not
 * trap exits ignores it, alive or exiting, and the status is one of two. */
static void *storm(void *arg)
{
    Storm *st = arg;
    tvm_env *e = tvm_env_new(vm);
    tvm_term normal;
    cr_assert_eq(tvm_make_atom(e, "normal", &normal), TVM_OK);
    while (!vm_atomic_load_acquire(&st->stop))
        for (int i = 0; i < SPINNERS; i++) {
            tvm_status s = tvm_exit(e, st->pids[i], normal);
            cr_assert(s == TVM_OK || s == TVM_ERR_NOTFOUND, "%s", tvm_status_name(s));
        }
    tvm_env_free(e);
    return NULL;
}

Test(exitapi, signals_race_exits)
{
    load();
    const int64_t n = test_full_scale() ? 500000 : 50000;
    static Storm st;
    memset(&st, 0, sizeof st);
    tvm_term a;
    cr_assert_eq(tvm_make_int(env, n, &a), TVM_OK);
    for (int i = 0; i < SPINNERS; i++)
        cr_assert_eq(tvm_spawn(env, "xa", "spin", 1, &a, &st.pids[i]), TVM_OK);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, storm, &st), 0);
    /* Every spinner ends by itself, with its count. */
    char out[64], want[32];
    snprintf(want, sizeof want, "%lld", (long long)n);
    for (int i = 0; i < SPINNERS; i++)
        cr_assert_str_eq(outcome(st.pids[i], out, sizeof out), want, "spinner %d", i);
    vm_atomic_store_release(&st.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    /* kill, sent as each starts: killed, or done first. */
    tvm_term kill = term("kill");
    for (int i = 0; i < SPINNERS; i++) {
        cr_assert_eq(tvm_spawn(env, "xa", "spin", 1, &a, &st.pids[i]), TVM_OK);
        tvm_status s = tvm_exit(env, st.pids[i], kill);
        cr_assert(s == TVM_OK || s == TVM_ERR_NOTFOUND);
    }
    for (int i = 0; i < SPINNERS; i++) {
        outcome(st.pids[i], out, sizeof out);
        cr_assert(!strcmp(out, "exit:killed") || !strcmp(out, want), "%s", out);
        cr_assert_eq(tvm_exit(env, st.pids[i], kill), TVM_ERR_NOTFOUND);
    }
}
