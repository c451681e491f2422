/*
 * tests/unit/trace/test_set_on_spawn.c - trace flags handed from a
 * process to the processes it spawns (BEAM's set_on_spawn and
 * set_on_first_spawn): the exact events of a chain of spawns, the first
 * child only and the parent's flags after it, set_on_first_spawn over
 * set_on_spawn, one session's flags and not another's, the defaults for
 * new processes kept under the inherited flags, a child's spawned event
 * (after its parent's spawn, or alone where only the child is traced,
 * in the child's timestamped form), and the flags by name from the API,
 * erlang:trace/3 and erlang:trace_info/2.  One scheduler,
 * and every parent waits for its child, so the order is exact.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/helpers.h"

static const char *const sos_src =
    "module sos\n"
    "export f/1, go/1, tree/1, kid/2, first/1, self_trace/0, many/2\n"
    /* f(X) -> X + 1: the traced function */
    "function f/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    /* go(N): waits for a message, then tree(N) */
    "function go/1 regs 4\n"
    "top:\n    recv r1, none\n    accept\n    call r0, r0, tree/1\n    ret r0\n"
    "none:\n    loadk r2, infinity\n    wait r2, late\n    jump top\nlate:\n    jump top\nend\n"
    /* tree(N): f(N); for N > 0, spawns kid(Self, N - 1) and waits for
     * its message */
    "function tree/1 regs 8\n"
    "    move r1, r0\n    call r1, r1, f/1\n    jeqi r0, 0, out\n"
    "    self r2\n    addi r3, r0, -1\n    loadk r4, []\n    cons r4, r3, r4\n"
    "    cons r4, r2, r4\n    loadk r2, sos\n    loadk r3, kid\n"
    "    callx r2, r2, erlang:spawn/3\n"
    "wait:\n    recv r5, none\n    accept\n"
    "out:\n    ret r0\n"
    "none:\n    loadk r6, infinity\n    wait r6, late\n    jump wait\nlate:\n    jump wait\nend\n"
    /* kid(Parent, N): tree(N), then Parent ! done */
    "function kid/2 regs 4\n"
    "    move r2, r1\n    call r2, r2, tree/1\n    loadk r1, done\n"
    "    callx r0, r0, erlang:send/2\n    ret r0\nend\n"
    /* first(N): waits for a message, then twice: spawns kid(Self, N) and
     * waits for its message; returns trace_info(self(), flags) */
    "function first/1 regs 9\n"
    "top:\n    recv r1, none0\n    accept\n    loadi r7, 2\n    move r8, r0\n"
    "again:\n    self r2\n    move r3, r8\n    loadk r4, []\n    cons r4, r3, r4\n"
    "    cons r4, r2, r4\n    loadk r2, sos\n    loadk r3, kid\n"
    "    callx r2, r2, erlang:spawn/3\n"
    "wait:\n    recv r5, none\n    accept\n    addi r7, r7, -1\n    jeqi r7, 0, info\n"
    "    jump again\n"
    "info:\n    self r0\n    loadk r1, flags\n    callx r0, r0, erlang:trace_info/2\n"
    "    ret r0\n"
    "none:\n    loadk r6, infinity\n    wait r6, late\n    jump wait\nlate:\n    jump wait\n"
    "none0:\n    loadk r6, infinity\n    wait r6, late0\n    jump top\nlate0:\n    jump top\nend\n"
    /* self_trace(): erlang:trace(self(), true, [call, set_on_spawn]),
     * then tree(1); returns trace_info(self(), flags) */
    "function self_trace/0 regs 4\n"
    "    self r0\n    loadk r1, true\n    loadk r2, [call, set_on_spawn]\n"
    "    callx r0, r0, erlang:trace/3\n"
    "    loadi r0, 1\n    call r0, r0, tree/1\n"
    "    self r0\n    loadk r1, flags\n    callx r0, r0, erlang:trace_info/2\n"
    "    ret r0\nend\n"
    /* many(N, How): waits for a message, spawns N kid(Self, 0) with
     * erlang:How/3 (spawn or spawn_link) and waits for their N messages */
    "function many/2 regs 14\n"
    "    move r9, r1\n"
    "top:\n    recv r1, none0\n    accept\n    move r7, r0\n    move r8, r0\n"
    "spawn:\n    jeqi r7, 0, collect\n    self r4\n    loadi r5, 0\n    loadk r6, []\n"
    "    cons r6, r5, r6\n    cons r6, r4, r6\n    loadk r4, sos\n    loadk r5, kid\n"
    "    loadk r12, []\n    cons r6, r6, r12\n    cons r5, r5, r6\n    cons r12, r4, r5\n"
    "    loadk r10, erlang\n    move r11, r9\n"
    "    callx r10, r10, erlang:apply/3\n    addi r7, r7, -1\n    jump spawn\n"
    "collect:\n    jeqi r8, 0, done\n    recv r5, none\n    accept\n    addi r8, r8, -1\n"
    "    jump collect\n"
    "done:\n    ret r0\n"
    "none:\n    loadk r6, infinity\n    wait r6, late\n    jump collect\n"
    "late:\n    jump collect\n"
    "none0:\n    loadk r6, infinity\n    wait r6, late0\n    jump top\n"
    "late0:\n    jump top\nend\n";

static tvm_config one_sched = { .size = sizeof(tvm_config), .schedulers = 1 };
TVM_FIXTURE(sos, &one_sched);

/* Call trace on sos:f/1, its text into a new file: in the default
 * session's pipeline (created NULL), or in a new session (*created). */
static FILE *traced(tvm_session *created)
{
    FILE *f = tmpfile();
    tvm_error err;
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_TEXT, .file = f };
    tvm_session s = TVM_SESSION_DEFAULT;
    if (created) {
        cr_assert_eq(tvm_session_create(vm, "second", &o, created, &err), TVM_OK, "%s",
                     err.message);
        s = *created;
    } else {
        cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    }
    cr_assert_eq(tvm_session_trace_pattern(vm, s, "sos:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL, 0,
                                           NULL, &err),
                 TVM_OK, "%s", err.message);
    return f;
}

/* Spawns sos:Fun(N), which waits for a message: its pid. */
static tvm_pid spawn_waiting(const char *fun, int64_t n)
{
    tvm_term a;
    tvm_pid pid;
    cr_assert_eq(tvm_make_int(env, n, &a), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "sos", fun, 1, &a, &pid), TVM_OK);
    return pid;
}

/* Sends pid a message and joins it: its result, formatted. */
static void go_and_join(tvm_pid pid, char *out, size_t size)
{
    tvm_term msg, r;
    cr_assert_eq(tvm_make_atom(env, "go", &msg), TVM_OK);
    cr_assert_eq(tvm_send(env, pid, msg), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    tvm_format_term(env, r, out, size);
}

/* Runs sos:Fun(N) in the default session with `flags` on it from
 * before it starts, checks its result, and returns what the session
 * wrote (freed by the caller); *root gets its pid. */
static char *run_root(const char *fun, int64_t n, unsigned flags, const char *result,
                      tvm_pid *root)
{
    load_ok(vm, "sos", sos_src);
    FILE *f = traced(NULL);
    *root = spawn_waiting(fun, n);
    cr_assert_eq(tvm_trace_flags(env, *root, flags, true), TVM_OK);
    char r[128];
    go_and_join(*root, r, sizeof r);
    cr_assert_str_eq(r, result);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    char *got = file_text(f);
    fclose(f);
    return got;
}

/* "{trace,<0.N.0>," for pid base + k. */
#define P(k) (unsigned long long)(root + (k))

/* What f's text says when root calls f(1) and its child f(0), both
 * traced; f is closed. */
static void root_and_child_called(FILE *f, tvm_pid root)
{
    char want[256], *got = file_text(f);
    snprintf(want, sizeof want,
             "{trace,<0.%llu.0>,call,{sos,f,[1]}}\n{trace,<0.%llu.0>,call,{sos,f,[0]}}\n", P(0),
             P(1));
    cr_assert_str_eq(got, want);
    free(got);
    fclose(f);
}

/* set_on_spawn: every generation inherits, set_on_spawn included. */
Test(sos, a_chain_of_spawns_inherits_the_flags)
{
    tvm_pid root;
    char want[1024],
        *got = run_root("go", 2, TVM_TRACE_CALL | TVM_TRACE_PROCS | TVM_TRACE_SET_ON_SPAWN, "2",
                        &root);
    snprintf(want, sizeof want,
             "{trace,<0.%llu.0>,call,{sos,f,[2]}}\n"
             "{trace,<0.%llu.0>,spawn,<0.%llu.0>,{sos,kid,[<0.%llu.0>,1]}}\n"
             "{trace,<0.%llu.0>,spawned,<0.%llu.0>,{sos,kid,[<0.%llu.0>,1]}}\n"
             "{trace,<0.%llu.0>,call,{sos,f,[1]}}\n"
             "{trace,<0.%llu.0>,spawn,<0.%llu.0>,{sos,kid,[<0.%llu.0>,0]}}\n"
             "{trace,<0.%llu.0>,spawned,<0.%llu.0>,{sos,kid,[<0.%llu.0>,0]}}\n"
             "{trace,<0.%llu.0>,call,{sos,f,[0]}}\n"
             "{trace,<0.%llu.0>,exit,normal}\n"
             "{trace,<0.%llu.0>,exit,normal}\n"
             "{trace,<0.%llu.0>,exit,normal}\n",
             P(0), P(0), P(1), P(0), P(1), P(0), P(0), P(1), P(1), P(2), P(1), P(2), P(1),
             P(1), P(2), P(2), P(1), P(0));
    cr_assert_str_eq(got, want);
    free(got);
}

/* Runs sos:first(1) with `flags` set: two children, each spawning one.
 * Only the first child is traced, without either spawn flag (so its own
 * child is not), and the parent is left with call and procs. */
static void first_spawn_only(unsigned flags)
{
    tvm_pid root;
    char *got = run_root("first", 1, flags, "{flags,[call,procs]}", &root);
    /* Pids: the first child 1, its child 2, the second child 3, its 4.
     * The first child has procs, so its first event is spawned (its own
     * child and the second child, untraced, have none). */
    char want[1024];
    snprintf(want, sizeof want,
             "{trace,<0.%llu.0>,spawn,<0.%llu.0>,{sos,kid,[<0.%llu.0>,1]}}\n"
             "{trace,<0.%llu.0>,spawned,<0.%llu.0>,{sos,kid,[<0.%llu.0>,1]}}\n"
             "{trace,<0.%llu.0>,call,{sos,f,[1]}}\n"
             "{trace,<0.%llu.0>,spawn,<0.%llu.0>,{sos,kid,[<0.%llu.0>,0]}}\n"
             "{trace,<0.%llu.0>,exit,normal}\n"
             "{trace,<0.%llu.0>,spawn,<0.%llu.0>,{sos,kid,[<0.%llu.0>,1]}}\n"
             "{trace,<0.%llu.0>,exit,normal}\n",
             P(0), P(1), P(0), P(1), P(0), P(0), P(1), P(1), P(2), P(1), P(1), P(0), P(3), P(0),
             P(0));
    cr_assert_str_eq(got, want);
    free(got);
}

Test(sos, set_on_first_spawn_reaches_the_first_child_only)
{
    first_spawn_only(TVM_TRACE_CALL | TVM_TRACE_PROCS | TVM_TRACE_SET_ON_FIRST_SPAWN);
}

/* Both: set_on_first_spawn wins, as in BEAM, and takes set_on_spawn with
 * it (from the parent and from the child). */
Test(sos, set_on_first_spawn_overrides_set_on_spawn)
{
    first_spawn_only(TVM_TRACE_CALL | TVM_TRACE_PROCS | TVM_TRACE_SET_ON_SPAWN |
                     TVM_TRACE_SET_ON_FIRST_SPAWN);
}

/* Each session hands on its own flags: the default one asks for
 * set_on_spawn, a second one traces the same root without it, so the
 * children are traced in the first and not in the second. */
Test(sos, each_session_hands_on_its_own_flags)
{
    load_ok(vm, "sos", sos_src);
    FILE *f1 = traced(NULL);
    tvm_session s2;
    FILE *f2 = traced(&s2);
    tvm_pid root = spawn_waiting("go", 1);
    tvm_error err;
    cr_assert_eq(tvm_trace_flags(env, root, TVM_TRACE_CALL | TVM_TRACE_SET_ON_SPAWN, true),
                 TVM_OK);
    cr_assert_eq(tvm_session_trace_flags(vm, s2, root, TVM_TRACE_CALL, true, &err), TVM_OK,
                 "%s", err.message);
    char r[64];
    go_and_join(root, r, sizeof r);
    cr_assert_str_eq(r, "1");
    cr_assert_eq(tvm_session_destroy(vm, s2, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    root_and_child_called(f1, root);
    char want[512], *got = file_text(f2);
    snprintf(want, sizeof want,
             "{trace,<0.%llu.0>,call,{sos,f,[1]}}\n{trace_stopped,destroyed,1,0}\n", P(0));
    cr_assert_str_eq(got, want);
    free(got);
    fclose(f2);
}

/* The defaults for new processes stay under what a child inherits: with
 * receive for every new process, a child of a set_on_spawn parent has
 * both (its 'receive' of the grandchild's message shows it). */
Test(sos, the_defaults_for_new_processes_stay)
{
    load_ok(vm, "sos", sos_src);
    FILE *f = traced(NULL);
    tvm_pid root = spawn_waiting("go", 2);
    cr_assert_eq(tvm_trace_flags(env, root, TVM_TRACE_CALL | TVM_TRACE_SET_ON_SPAWN, true),
                 TVM_OK);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_RECEIVE, true), TVM_OK);
    char r[64];
    go_and_join(root, r, sizeof r);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_RECEIVE, false), TVM_OK);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    /* The root was spawned before the default: no receive of its own. */
    char want[1024], *got = file_text(f);
    snprintf(want, sizeof want,
             "{trace,<0.%llu.0>,call,{sos,f,[2]}}\n"
             "{trace,<0.%llu.0>,call,{sos,f,[1]}}\n"
             "{trace,<0.%llu.0>,call,{sos,f,[0]}}\n"
             "{trace,<0.%llu.0>,'receive',done}\n",
             P(0), P(1), P(2), P(1));
    cr_assert_str_eq(got, want);
    free(got);
    fclose(f);
}

/* A child traced by the defaults for new processes under an untraced
 * parent: its spawned event alone (BEAM's, since OTP 21), and in the
 * child's form: its session's timestamp flag makes it a trace_ts. */
Test(sos, spawned_alone_where_only_the_child_is_traced)
{
    load_ok(vm, "sos", sos_src);
    FILE *f = traced(NULL);
    tvm_pid root = spawn_waiting("go", 1);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW,
                                     TVM_TRACE_PROCS | TVM_TRACE_MONOTONIC_TIMESTAMP, true),
                 TVM_OK);
    char r[64];
    go_and_join(root, r, sizeof r);
    cr_assert_str_eq(r, "1");
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    /* Each line's timestamp (the last element) as TS. */
    char *got = file_text(f), norm[512], *o = norm;
    for (const char *l = got; *l;) {
        const char *nl = strchr(l, '\n'), *c = nl;
        cr_assert(nl);
        while (c > l && c[-1] != ',')
            c--;
        o += snprintf(o, norm + sizeof norm - o, "%.*sTS}\n", (int)(c - l), l);
        l = nl + 1;
    }
    char want[512];
    snprintf(want, sizeof want,
             "{trace_ts,<0.%llu.0>,spawned,<0.%llu.0>,{sos,kid,[<0.%llu.0>,0]},TS}\n"
             "{trace_ts,<0.%llu.0>,exit,normal,TS}\n",
             P(1), P(0), P(0), P(1));
    cr_assert_str_eq(norm, want);
    free(got);
    fclose(f);
}

/* By name: tvm_trace_flags_parse, erlang:trace/3 and trace_info/2. */
Test(sos, the_flags_by_name)
{
    unsigned fl;
    tvm_error err;
    cr_assert_eq(tvm_trace_flags_parse("set_on_spawn,set_on_first_spawn", &fl, &err), TVM_OK);
    cr_assert_eq(fl, TVM_TRACE_SET_ON_SPAWN | TVM_TRACE_SET_ON_FIRST_SPAWN);
    cr_assert_eq(tvm_trace_flags_parse("set_on_link,set_on_first_link", &fl, &err), TVM_OK);
    cr_assert_eq(fl, TVM_TRACE_SET_ON_LINK | TVM_TRACE_SET_ON_FIRST_LINK);
    cr_assert_eq(tvm_trace_flags_parse("all", &fl, &err), TVM_OK);
    cr_assert_eq(fl, (TVM_TRACE_STRICT_MONOTONIC_TIMESTAMP << 1) - 1);
    cr_assert_eq(tvm_trace_flags_parse("set_on_links", &fl, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message,
                     "unknown flag 'set_on_links' (expected a comma-separated list of call, "
                     "arity, timestamp, procs, return_to, silent, running, send, receive, "
                     "set_on_spawn, set_on_first_spawn, garbage_collection, set_on_link, "
                     "set_on_first_link, exiting, monotonic_timestamp, "
                     "strict_monotonic_timestamp or all)");
    load_ok(vm, "sos", sos_src);
    FILE *f = traced(NULL);
    tvm_term r;
    tvm_pid root;
    cr_assert_eq(tvm_spawn(env, "sos", "self_trace", 0, NULL, &root), TVM_OK);
    cr_assert_eq(tvm_join(env, root, &r), TVM_OK);
    char out[128];
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "{flags,[call,set_on_spawn]}");
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    root_and_child_called(f, root);
}

/* How many times `what` occurs in text (once a line at most, here). */
static int count_lines(const char *text, const char *what)
{
    int n = 0;
    for (const char *at = strstr(text, what); at; at = strstr(at + 1, what))
        n++;
    return n;
}

/* Two schedulers: a parent with call and `inherit` (set_on_spawn, or
 * set_on_link with spawn_link) spawns 300 children, each of which calls
 * f once, while this thread switches the parent's send flag on and off.
 * Every child is traced (exactly 300 calls), each with the send flag the
 * parent had at its spawn (so at most 300 sends); under TSan, the
 * parent's lock and each child's are the only order the handing-on
 * needs. */
static void children_traced_while_flags_change(unsigned inherit, const char *how)
{
    tvm_config two = { .size = sizeof(tvm_config), .schedulers = 2 };
    tvm_vm *v2 = tvm_new(&two);
    cr_assert(v2);
    tvm_env *e2 = tvm_env_new(v2);
    load_ok(v2, "sos", sos_src);
    FILE *f = tmpfile();
    tvm_error err;
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_TEXT, .file = f };
    cr_assert_eq(tvm_trace_start(v2, &o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_pattern(v2, "sos:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err), TVM_OK);
    tvm_term a[2], msg, r;
    tvm_pid root;
    cr_assert_eq(tvm_make_int(e2, 300, &a[0]), TVM_OK);
    cr_assert_eq(tvm_make_atom(e2, how, &a[1]), TVM_OK);
    cr_assert_eq(tvm_spawn(e2, "sos", "many", 2, a, &root), TVM_OK);
    cr_assert_eq(tvm_trace_flags(e2, root, TVM_TRACE_CALL | inherit, true), TVM_OK);
    cr_assert_eq(tvm_make_atom(e2, "go", &msg), TVM_OK);
    cr_assert_eq(tvm_send(e2, root, msg), TVM_OK);
    int toggles = 0;
    for (bool on = true; toggles < 100000; on = !on, toggles++)
        if (tvm_trace_flags(e2, root, TVM_TRACE_SEND, on) != TVM_OK)
            break;          /* the parent has exited */
    cr_assert_gt(toggles, 0);
    cr_assert_eq(tvm_join(e2, root, &r), TVM_OK);
    cr_assert_eq(tvm_trace_stop(v2), TVM_OK);
    char *got = file_text(f);
    cr_assert_eq(count_lines(got, ",call,{sos,f,[0]}}"), 300, "%d toggles", toggles);
    cr_assert_leq(count_lines(got, ",send,done,"), 300);
    free(got);
    fclose(f);
    tvm_env_free(e2);
    tvm_destroy(v2);
}

Test(sos_race, every_child_traced_while_the_parent_s_flags_change, .timeout = 60)
{
    children_traced_while_flags_change(TVM_TRACE_SET_ON_SPAWN, "spawn");
}

/* The same handing-on for set_on_link at spawn_link/3. */
Test(sos_race, every_linked_child_traced_while_the_parent_s_flags_change, .timeout = 60)
{
    children_traced_while_flags_change(TVM_TRACE_SET_ON_LINK, "spawn_link");
}
