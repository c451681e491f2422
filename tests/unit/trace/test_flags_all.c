/*
 * tests/unit/trace/test_flags_all.c - flags for all processes without a
 * walk of the process table (trace/tr_flags_all.c): BEAM's guarantee that
 * once tvm_trace_flags_all returns, every later event of every process
 * follows the new flags and trace_info of any process reports them, for
 * processes waiting, queued and running on another scheduler; a change of
 * one process after a change for all overrides it, and the next change
 * for all overrides that; several sessions; a session's end; processes
 * spawned before, during and after a change.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tests/unit/helpers.h"

static const char *const fa_src =
    "module fa\n"
    "export server/0, f/1, busy/1, spinner/0\n"
    "function f/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    /* server(): for each integer message N: f(N); 0 ends it */
    "function server/0 regs 2\n"
    "top:\n"
    "    recv r0, none\n    accept\n"
    "    jeqi r0, 0, done\n"
    "    callx r0, r0, fa:f/1\n"
    "    jump top\n"
    "none:\n"
    "    loadk r1, infinity\n    wait r1, again\n"
    "again:\n    jump top\n"
    "done:\n    ret r0\n"
    "end\n"
    /* busy(I): f(I), fa_nat:mark(I), busy(I + 1), until mark says 1 */
    "function busy/1 regs 2\n"
    "top:\n"
    "    move r1, r0\n"
    "    callx r1, r1, fa:f/1\n"
    "    move r1, r0\n"
    "    callx r1, r1, fa_nat:mark/1\n"
    "    jeqi r1, 1, done\n"
    "    addi r0, r0, 1\n"
    "    jump top\n"
    "done:\n    ret r0\n"
    "end\n"
    /* spinner(): f(1) in a loop until fa_nat:mark(1) says 1 */
    "function spinner/0 regs 2\n"
    "top:\n"
    "    loadi r0, 1\n"
    "    callx r0, r0, fa:f/1\n"
    "    loadi r1, 1\n"
    "    callx r1, r1, fa_nat:mark/1\n"
    "    jeqi r1, 1, done\n"
    "    jump top\n"
    "done:\n    ret r0\n"
    "end\n";

static tvm_config two_scheds = { .size = sizeof(tvm_config), .schedulers = 2 };
TVM_FIXTURE(flags_all, &two_scheds);

/* ==== the callback sink: call events of fa:f/1 by argument ==== */

#define MAX_ARG 4000000

typedef struct Calls {
    unsigned char traced[MAX_ARG];   /* by argument: call events seen */
    char text[4096];                  /* the first events' text, in order */
    int n;
} Calls;

static void on_event(const tvm_trace_event *ev, void *data)
{
    Calls *c = data;
    const char *args = strstr(ev->text, "{fa,f,[");
    long n = args ? strtol(args + 7, NULL, 10) : -1;
    if (n >= 0 && n < MAX_ARG && c->traced[n] < 255)
        c->traced[n]++;
    size_t len = strlen(c->text);
    snprintf(c->text + len, sizeof c->text - len, "%s\n", ev->text);
    c->n++;
}

static void start(Calls *c)
{
    tvm_error err;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK,
                            .callback = on_event, .callback_data = c,
                            .policy = TVM_TRACE_LOSSLESS };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
}

/* fa_nat:mark(I): the busy process's progress; 1 when it must stop. */
static atomic_long marked;
static atomic_int stop_busy;

static tvm_status nat_mark(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res, void *data)
{
    (void)argc, (void)data;
    int64_t i;
    if (tvm_get_int(e, argv[0], &i) != TVM_OK)
        return tvm_raise_badarg(e);
    atomic_store(&marked, (long)i);
    return tvm_make_int(e, atomic_load(&stop_busy), res);
}

static void load(void)
{
    atomic_store(&marked, 0);
    atomic_store(&stop_busy, 0);
    cr_assert_eq(tvm_register_native(vm, "fa_nat", "mark", 1, nat_mark, NULL, NULL), TVM_OK);
    load_ok(vm, "fa", fa_src);
    cr_assert_eq(tvm_trace_pattern(vm, "fa:f/1", TVM_TP_TRUE, TVM_TP_GLOBAL, NULL, NULL), TVM_OK);
}

static tvm_pid spawn0(const char *fun)
{
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "fa", fun, 0, NULL, &pid), TVM_OK);
    return pid;
}

static unsigned flags_of(tvm_pid pid)
{
    unsigned f = 0xdead;
    cr_assert_eq(tvm_trace_flags_get(env, pid, &f), TVM_OK);
    return f;
}

/* Sends n to the server and waits until it has handled it. */
static void serve(tvm_pid server, int64_t n)
{
    tvm_term t;
    cr_assert_eq(tvm_make_int(env, n, &t), TVM_OK);
    cr_assert_eq(tvm_send(env, server, t), TVM_OK);
    if (n)
        wait_proc_state(vm, server, "waiting");
}

static void all(tvm_trace_scope scope, unsigned flags, bool on)
{
    cr_assert_eq(tvm_trace_flags_all(vm, scope, flags, on), TVM_OK);
}

/* ==== a waiting process: each change applies to its next event ==== */

Test(flags_all, override_and_all_again)
{
    load();
    Calls *c = calloc(1, sizeof *c);
    start(c);
    tvm_pid s = spawn0("server");
    wait_proc_state(vm, s, "waiting");
    serve(s, 1);                                  /* no flags */
    all(TVM_TRACE_EXISTING, TVM_TRACE_CALL, true);
    cr_assert_eq(flags_of(s), TVM_TRACE_CALL);
    serve(s, 2);                                  /* traced */
    /* One process after all: the later change wins. */
    cr_assert_eq(tvm_trace_flags(env, s, TVM_TRACE_CALL, false), TVM_OK);
    cr_assert_eq(flags_of(s), 0);
    serve(s, 3);
    /* A change for all of other flags leaves the override alone. */
    all(TVM_TRACE_EXISTING, TVM_TRACE_SEND, true);
    cr_assert_eq(flags_of(s), TVM_TRACE_SEND);
    serve(s, 4);
    /* And the next change of the call flag for all overrides it. */
    all(TVM_TRACE_EXISTING, TVM_TRACE_CALL, true);
    cr_assert_eq(flags_of(s), TVM_TRACE_CALL | TVM_TRACE_SEND);
    serve(s, 5);
    all(TVM_TRACE_ALL, TVM_TRACE_CALL, false);
    cr_assert_eq(flags_of(s), TVM_TRACE_SEND);
    serve(s, 6);
    /* On and off again before the process looks: only the last counts. */
    all(TVM_TRACE_EXISTING, TVM_TRACE_CALL, true);
    all(TVM_TRACE_EXISTING, TVM_TRACE_CALL | TVM_TRACE_SEND, false);
    serve(s, 7);
    all(TVM_TRACE_EXISTING, TVM_TRACE_CALL, true);
    all(TVM_TRACE_EXISTING, TVM_TRACE_SEND, false);
    serve(s, 8);
    cr_assert_eq(flags_of(s), TVM_TRACE_CALL);
    serve(s, 0);
    tvm_term r;
    cr_assert_eq(tvm_join(env, s, &r), TVM_OK);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    char want[256];
    snprintf(want, sizeof want,
             "{trace,<0.%1$llu.0>,call,{fa,f,[2]}}\n{trace,<0.%1$llu.0>,call,{fa,f,[5]}}\n"
             "{trace,<0.%1$llu.0>,call,{fa,f,[8]}}\n",
             (unsigned long long)s);
    cr_assert_str_eq(c->text, want);
    free(c);
}

/* ==== processes spawned before and after; new processes ==== */

Test(flags_all, existing_new_and_spawned_later)
{
    load();
    tvm_pid a = spawn0("server");
    all(TVM_TRACE_EXISTING, TVM_TRACE_CALL, true);
    tvm_pid b = spawn0("server");                 /* after: not an existing one */
    cr_assert_eq(flags_of(a), TVM_TRACE_CALL);
    cr_assert_eq(flags_of(b), 0);
    all(TVM_TRACE_NEW, TVM_TRACE_PROCS, true);
    cr_assert_eq(flags_of(a), TVM_TRACE_CALL);    /* new alone: nobody existing */
    tvm_pid c = spawn0("server");
    cr_assert_eq(flags_of(c), TVM_TRACE_PROCS);
    all(TVM_TRACE_ALL, TVM_TRACE_RECEIVE, true);
    tvm_pid d = spawn0("server");
    cr_assert_eq(flags_of(a), TVM_TRACE_CALL | TVM_TRACE_RECEIVE);
    cr_assert_eq(flags_of(b), TVM_TRACE_RECEIVE);
    cr_assert_eq(flags_of(c), TVM_TRACE_PROCS | TVM_TRACE_RECEIVE);
    cr_assert_eq(flags_of(d), TVM_TRACE_PROCS | TVM_TRACE_RECEIVE);
    cr_assert_eq(tvm_trace_flags_new(vm), TVM_TRACE_PROCS | TVM_TRACE_RECEIVE);
    /* A call context is no process of the table. */
    cr_assert_eq(flags_of(0), 0);
    tvm_pid ps[] = { a, b, c, d };
    for (int i = 0; i < 4; i++) {
        tvm_term r;
        serve(ps[i], 0);
        cr_assert_eq(tvm_join(env, ps[i], &r), TVM_OK);
    }
}

/* erlang:trace(all, ...) counts the live processes, from VM code too. */
static const char *const fc_src =
    "module fc\n"
    "export main/0\n"
    "function main/0 regs 3\n"
    "    loadk r0, existing\n    loadk r1, true\n    loadk r2, [send]\n"
    "    callx r0, r0, erlang:trace/3\n"
    "    ret r0\n"
    "end\n";

Test(flags_all, count_from_vm_code)
{
    load();
    load_ok(vm, "fc", fc_src);
    tvm_pid a = spawn0("server"), b = spawn0("server"), m;
    cr_assert_eq(tvm_spawn(env, "fc", "main", 0, NULL, &m), TVM_OK);
    tvm_term r;
    cr_assert_eq(tvm_join(env, m, &r), TVM_OK);
    char out[32];
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "3");                  /* a, b and main itself */
    cr_assert_eq(flags_of(a), TVM_TRACE_SEND);
    cr_assert_eq(flags_of(b), TVM_TRACE_SEND);
    serve(a, 0);
    serve(b, 0);
    cr_assert_eq(tvm_join(env, a, &r), TVM_OK);
    cr_assert_eq(tvm_join(env, b, &r), TVM_OK);
}

/* ==== sessions ==== */

static void drop(const tvm_trace_event *ev, void *data)
{
    (void)ev, (void)data;
}

static tvm_session session(const char *name)
{
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK,
                            .callback = drop };
    tvm_session s;
    tvm_error err;
    cr_assert_eq(tvm_session_create(vm, name, &o, &s, &err), TVM_OK, "%s", err.message);
    return s;
}

static unsigned sflags(tvm_session s, tvm_pid pid)
{
    unsigned f = 0xdead;
    tvm_error err;
    cr_assert_eq(tvm_session_trace_flags_get(vm, s, pid, &f, &err), TVM_OK, "%s", err.message);
    return f;
}

static void sall(tvm_session s, unsigned flags, bool on)
{
    tvm_error err;
    cr_assert_eq(tvm_session_trace_flags_all(vm, s, TVM_TRACE_EXISTING, flags, on, &err), TVM_OK,
                 "%s", err.message);
}

Test(flags_all, several_sessions_and_an_end)
{
    load();
    tvm_pid w = spawn0("server");
    tvm_session a = session("a"), b = session("b");
    sall(a, TVM_TRACE_CALL, true);
    sall(b, TVM_TRACE_SEND, true);
    all(TVM_TRACE_EXISTING, TVM_TRACE_PROCS, true);
    cr_assert_eq(sflags(a, w), TVM_TRACE_CALL);
    cr_assert_eq(sflags(b, w), TVM_TRACE_SEND);
    cr_assert_eq(flags_of(w), TVM_TRACE_PROCS);
    /* One session's override of one process; the others keep theirs. */
    tvm_error err;
    cr_assert_eq(tvm_session_trace_flags(vm, a, w, TVM_TRACE_CALL, false, &err), TVM_OK);
    cr_assert_eq(sflags(a, w), 0);
    cr_assert_eq(sflags(b, w), TVM_TRACE_SEND);
    sall(b, TVM_TRACE_SEND, false);
    sall(a, TVM_TRACE_RUNNING, true);
    cr_assert_eq(sflags(a, w), TVM_TRACE_RUNNING);
    cr_assert_eq(sflags(b, w), 0);
    /* a ends: its flags go, b's and the default session's stay, and a
     * successor in a's slot starts with nothing. */
    sall(b, TVM_TRACE_RECEIVE, true);
    cr_assert_eq(tvm_session_destroy(vm, a, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(sflags(b, w), TVM_TRACE_RECEIVE);
    cr_assert_eq(flags_of(w), TVM_TRACE_PROCS);
    tvm_session c = session("c");
    cr_assert_eq(c.id & 0xff, a.id & 0xff, "the successor takes a's slot");
    cr_assert_eq(sflags(c, w), 0);
    sall(c, TVM_TRACE_ARITY, true);
    cr_assert_eq(sflags(c, w), TVM_TRACE_ARITY);
    cr_assert_eq(sflags(b, w), TVM_TRACE_RECEIVE);
    /* A destroyed session's change is refused and changes nothing. */
    cr_assert_eq(tvm_session_trace_flags_all(vm, a, TVM_TRACE_EXISTING, TVM_TRACE_CALL, true, &err),
                 TVM_ERR_NOTFOUND);
    cr_assert_eq(sflags(c, w), TVM_TRACE_ARITY);
    tvm_session_destroy(vm, b, NULL);
    tvm_session_destroy(vm, c, NULL);
    cr_assert_eq(flags_of(w), TVM_TRACE_PROCS);
    tvm_term r;
    serve(w, 0);
    cr_assert_eq(tvm_join(env, w, &r), TVM_OK);
}

/* ==== a process running on another scheduler ==== */

/*
 * busy(1) calls f(I) then mark(I) for I = 1, 2, ...  Around each change
 * the test reads the last mark before the call (lo) and after it returned
 * (hi): f(J) for J <= lo ran before the change began and follows the old
 * flags; f(J) for J >= hi + 2 comes after mark(hi + 1), which came after
 * the return, and follows the new ones (f(hi + 1) may have started
 * before).  Every f(J) is checked outside those windows, and the count
 * of traced calls among them is exact.
 */
Test(flags_all, running_process_follows_after_return, .timeout = 120)
{
    load();
    Calls *c = calloc(1, sizeof *c);
    start(c);
    tvm_term one;
    tvm_make_int(env, 1, &one);
    tvm_pid busy;
    cr_assert_eq(tvm_spawn(env, "fa", "busy", 1, &one, &busy), TVM_OK);
    enum { ROUNDS = 40, MAXLO = MAX_ARG - 1000 };
    static long lo[ROUNDS], hi[ROUNDS];
    int rounds = 0;
    for (int r = 0; r < ROUNDS; r++) {
        /* Let it run for a while under the current flags. */
        long from = atomic_load(&marked);
        while (atomic_load(&marked) < from + 50)
            usleep(100);
        lo[r] = atomic_load(&marked);
        if (lo[r] > MAXLO)
            break;
        all(TVM_TRACE_EXISTING, TVM_TRACE_CALL, r % 2 == 0);
        hi[r] = atomic_load(&marked);
        rounds++;
    }
    long from = atomic_load(&marked);
    while (atomic_load(&marked) < from + 50)
        usleep(100);
    long end = atomic_load(&marked);
    atomic_store(&stop_busy, 1);
    tvm_term res;
    cr_assert_eq(tvm_join(env, busy, &res), TVM_OK);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    cr_assert_geq(rounds, 10, "only %d rounds", rounds);
    /* Under flags k (traced when k is odd: round k - 1 turned call on
     * when k - 1 was even): J in [hi[k-1] + 2, lo[k]]. */
    long checked = 0, want_traced = 0, got_traced = 0;
    for (int k = 0; k <= rounds; k++) {
        long first = k == 0 ? 1 : hi[k - 1] + 2;
        long last = k == rounds ? end : lo[k];
        bool on = k % 2 == 1;
        for (long j = first; j <= last && j < MAX_ARG; j++) {
            cr_assert_eq(c->traced[j], on ? 1 : 0, "f(%ld) under %s flags (round %d: %ld..%ld)",
                         j, on ? "call" : "no", k, first, last);
            checked++;
            want_traced += on;
            got_traced += c->traced[j];
        }
    }
    cr_assert_eq(got_traced, want_traced);
    cr_assert_geq(checked, 50L * rounds / 2, "checked %ld calls", checked);
    free(c);
}

/* ==== many processes: one change, each folds it in once ==== */

Test(flags_all, queued_and_spinning_processes)
{
    load();
    enum { N = 64 };
    tvm_pid ps[N];
    for (int i = 0; i < N; i++)
        ps[i] = spawn0(i % 2 ? "spinner" : "server");
    all(TVM_TRACE_EXISTING, TVM_TRACE_RUNNING | TVM_TRACE_ARITY, true);
    for (int i = 0; i < N; i++)
        cr_assert_eq(flags_of(ps[i]), TVM_TRACE_RUNNING | TVM_TRACE_ARITY, "process %d", i);
    all(TVM_TRACE_EXISTING, TVM_TRACE_RUNNING, false);
    for (int i = 0; i < N; i++)
        cr_assert_eq(flags_of(ps[i]), TVM_TRACE_ARITY, "process %d", i);
    atomic_store(&stop_busy, 1);
    for (int i = 0; i < N; i++) {
        tvm_term r;
        if (i % 2 == 0)
            serve(ps[i], 0);
        cr_assert_eq(tvm_join(env, ps[i], &r), TVM_OK);
    }
}
