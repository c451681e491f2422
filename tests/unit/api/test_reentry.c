/*
 * tests/unit/api/test_reentry.c - the public API called from inside the
 * VM's own callbacks (docs/embedding.md, "What may be called from
 * where"): from a trace callback of the default session and of another
 * session (a collector thread), from a native run by a process on a
 * scheduler, from the call hook, and from a native run by tvm_call on
 * this (foreign) thread.  Each context makes the same calls in the same
 * order and writes one line per call, "name: STATUS detail", which the
 * case compares whole: every call either works (its effect in the
 * detail) or is refused with its status and exact message, and a call
 * made afterwards from this thread works.  Then calls from a callback
 * while another thread waits for its collector (a flush; a call context
 * on a full lossless ring), and a hook that switches its own trace off.
 * A call that would wait for itself fails the case by its .timeout
 * instead of hanging the suite.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/helpers.h"

#define LEAF "    callx r0, r0, rx:leaf/1\n"
#define TEN_LEAVES LEAF LEAF LEAF LEAF LEAF LEAF LEAF LEAF LEAF LEAF

static const char *const rx_src =
    "module rx\n"
    "export waiter/0, leaf/1, other/1, run/1, run_self/0, hooked/1, ten/0\n" TASM_WAITER
    "function leaf/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function other/1 regs 1\n    addi r0, r0, 2\n    ret r0\nend\n"
    /* run(X): the native that makes the calls; run_self(): run(self()) */
    "function run/1 regs 1\n    callx r0, r0, rx_nat:probe/1\n    ret r0\nend\n"
    "function run_self/0 regs 1\n    self r0\n    callx r0, r0, rx_nat:probe/1\n"
    "    ret r0\nend\n"
    /* hooked(X): a traced call of leaf/1 (the call hook runs) */
    "function hooked/1 regs 1\n    callx r0, r0, rx:leaf/1\n    ret r0\nend\n"
    /* ten(): leaf/1 ten times, 10 */
    "function ten/0 regs 1\n    loadi r0, 0\n" TEN_LEAVES "    ret r0\nend\n";

static const char *const dyn_src =
    "module rx_dyn\nexport f/0\nfunction f/0 regs 1\n    loadk r0, 7\n    ret r0\nend\n";

static tvm_config two_sched = { .size = sizeof(tvm_config), .schedulers = 2 };
TVM_FIXTURE(reentry, &two_sched);


/* What one context reports.  Written by the context's thread, read by
 * this one after `done` (lock orders them). */
typedef struct Report {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool started, done;
    tvm_pid self;            /* the calling process (0: none), set by probe_all */
    tvm_pid waiter;          /* another process, waiting in receive */
    tvm_session own;         /* the session whose callback this is (id 0: none) */
    char text[4096];
} Report;

static Report rep = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void say(const char *name, tvm_status st, const char *fmt, ...)
{
    char detail[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    size_t n = strlen(rep.text);
    snprintf(rep.text + n, sizeof rep.text - n, "%s: %s%s%s\n", name, tvm_status_name(st),
             detail[0] ? " " : "", detail);
}

/* err's message when st is not TVM_OK. */
static const char *why(tvm_status st, const tvm_error *err)
{
    return st == TVM_OK ? "" : err->message;
}

static void noop_sink(const tvm_trace_event *ev, void *data)
{
    (void)ev, (void)data;
}

static void probe_trace(tvm_env *e)
{
    tvm_error err = { .message = "" };
    int m = -1;
    tvm_status st = tvm_trace_pattern(vm, "rx:other/1", TVM_TP_TRUE, TVM_TP_LOCAL, &m, &err);
    say("trace_pattern on", st, st == TVM_OK ? "matched %d" : "%s", st == TVM_OK ? m : 0,
        why(st, &err));
    st = tvm_trace_pattern(vm, "rx:other/1", TVM_TP_FALSE, TVM_TP_LOCAL, &m, &err);
    say("trace_pattern off", st, "%s", why(st, &err));
    st = tvm_trace_flags_all(vm, TVM_TRACE_ALL, TVM_TRACE_SEND, true);
    tvm_status st2 = tvm_trace_flags_all(vm, TVM_TRACE_ALL, TVM_TRACE_SEND, false);
    say("trace_flags_all on/off", st, "%s", tvm_status_name(st2));
    if (e) {
        st = tvm_trace_flags(e, rep.waiter, TVM_TRACE_SEND, true);
        st2 = tvm_trace_flags(e, rep.waiter, TVM_TRACE_SEND, false);
        say("trace_flags on/off", st, "%s", tvm_status_name(st2));
        tvm_term out;
        st = tvm_trace_info(e, "rx:leaf/1", "traced", &out, &err);
        char buf[128] = "";
        if (st == TVM_OK)
            tvm_format_term(e, out, buf, sizeof buf);
        say("trace_info", st, "%s", st == TVM_OK ? buf : why(st, &err));
    }
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CALLBACK,
                            .callback = noop_sink };
    st = tvm_trace_start(vm, &o, &err);
    say("trace_start", st, "%s", why(st, &err));
    st = tvm_trace_stop(vm);
    say("trace_stop", st, NULL);
    tvm_session s;
    st = tvm_session_create(vm, "probe", &o, &s, &err);
    say("session_create", st, "%s", why(st, &err));
    if (st == TVM_OK) {
        st = tvm_session_destroy(vm, s, &err);
        say("session_destroy other", st, "%s", why(st, &err));
    }
    if (rep.own.id) {
        st = tvm_session_destroy(vm, rep.own, &err);
        say("session_destroy own", st, "%s", why(st, &err));
    }
}

/* rx_nat:seven/0, registered by a context */
static tvm_status nat_seven(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res,
                            void *data)
{
    (void)argc, (void)argv, (void)data;
    return tvm_make_int(e, 7, res);
}

static void probe_code(tvm_env *e)
{
    tvm_error err = { .message = "" };
    tvm_status st = tvm_load_string(vm, "rx_dyn.tasm", dyn_src, strlen(dyn_src), &err);
    say("load_string", st, "%s", why(st, &err));
    st = tvm_register_native(vm, "rx_nat", "seven", 0, nat_seven, NULL, &err);
    say("register_native", st, "%s", why(st, &err));
    char bt[4096];
    if (rep.self) {
        st = tvm_backtrace(vm, rep.self, bt, sizeof bt, NULL, &err);
        say("backtrace self", st, "%s", st == TVM_OK ? (strstr(bt, "rx:") ? "rx frame" : bt)
                                                      : why(st, &err));
    }
    st = tvm_backtrace(vm, rep.waiter, bt, sizeof bt, NULL, &err);
    say("backtrace other", st, "%s", st == TVM_OK ? (strstr(bt, "rx:waiter/0") ? "rx:waiter/0"
                                                                                : bt)
                                                   : why(st, &err));
    tvm_profile *prof = NULL;
    tvm_profile_options po = { .size = sizeof po, .kind = TVM_PROFILE_ALLOC };
    st = tvm_profile_start(vm, &po, &prof, &err);
    say("profile_start", st, "%s", why(st, &err));
    if (st == TVM_OK) {
        tvm_profile_stop(prof);
        char *out = NULL;
        size_t len = 0;
        tvm_profile_write_options wo = { .size = sizeof wo, .format = TVM_PROFILE_FOLDED };
        st = tvm_profile_render(prof, &wo, &out, &len, &err);
        say("profile_render", st, "%s", why(st, &err));
        free(out);
        tvm_profile_free(prof);
    }
    st = tvm_control_start(vm, &err);
    say("control_start", st, "%s", why(st, &err));
    if (st == TVM_OK) {
        tvm_control_stop(vm);
        say("control_stop", tvm_control_path(vm) ? TVM_ERR_EXISTS : TVM_OK, NULL);
    }
    if (e) {
        tvm_term a, r;
        tvm_make_int(e, 1, &a);
        st = tvm_call(e, "rx", "leaf", 1, &a, &r);
        char buf[64] = "";
        if (st == TVM_OK)
            tvm_format_term(e, r, buf, sizeof buf);
        say("call", st, "%s", buf);
        tvm_pid p = 0;
        st = tvm_spawn(e, "rx", "other", 1, &a, &p);
        say("spawn", st, NULL);
        st = tvm_join(e, p, &r);
        buf[0] = '\0';
        if (st == TVM_OK)
            tvm_format_term(e, r, buf, sizeof buf);
        say("join", st, "%s", buf);
        /* Before the send, which ends the waiter; normal: a process that
         * does not trap exits ignores it. */
        tvm_term msg;
        tvm_make_atom(e, "normal", &msg);
        say("exit", tvm_exit(e, rep.waiter, msg), NULL);
        tvm_pid named = 0;
        st = tvm_whereis(vm, "rx_waiter", &named, &err);
        say("whereis", st, "%s", st == TVM_OK ? (named == rep.waiter ? "waiter" : "other")
                                              : why(st, &err));
        char name[256];
        st = tvm_process_name(vm, rep.waiter, name, sizeof name, &err);
        say("process_name", st, "%s", st == TVM_OK ? name : why(st, &err));
        tvm_make_atom(e, "hello", &msg);
        st = tvm_send(e, rep.waiter, msg);
        say("send", st, NULL);
    }
}

/* The calls of one context, once (the later events of a callback, the
 * later calls of a hook make none). */
static void probe_all(tvm_env *e, tvm_pid self)
{
    pthread_mutex_lock(&rep.lock);
    bool first = !rep.started;
    if (first)
        rep.self = self;
    rep.started = true;
    pthread_mutex_unlock(&rep.lock);
    if (!first)
        return;
    probe_trace(e);
    probe_code(e);
    tvm_destroy(vm);
    say("destroy", TVM_OK, "returned");
    pthread_mutex_lock(&rep.lock);
    rep.done = true;
    pthread_cond_broadcast(&rep.cond);
    pthread_mutex_unlock(&rep.lock);
}

static void wait_report(void)
{
    pthread_mutex_lock(&rep.lock);
    while (!rep.done)
        pthread_cond_wait(&rep.cond, &rep.lock);
    pthread_mutex_unlock(&rep.lock);
}

/* rx_nat:probe/1 */
static tvm_status nat_probe(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res,
                            void *data)
{
    (void)argc, (void)data;
    tvm_pid self = 0;
    if (tvm_get_pid(e, argv[0], &self) != TVM_OK)
        self = 0;
    probe_all(e, self);
    return tvm_make_atom(e, "ok", res);
}

static void on_call(tvm_env *e, const tvm_call_event *ev, void *data)
{
    (void)data;
    probe_all(e, ev->pid);
}

static void on_event(const tvm_trace_event *ev, void *data)
{
    (void)ev, (void)data;
    tvm_env *e = tvm_env_new(vm);
    probe_all(e, 0);
    tvm_env_free(e);
}

/* Runs rx:Fun(0) (0 arguments: rx:Fun()) as a process and joins it. */
static void run_proc(const char *fun, int argc)
{
    tvm_term a, r;
    tvm_make_int(env, 0, &a);
    tvm_pid p;
    cr_assert_eq(tvm_spawn(env, "rx", fun, argc, &a, &p), TVM_OK);
    cr_assert_eq(tvm_join(env, p, &r), TVM_OK);
}

static void setup_rx(void)
{
    load_ok(vm, "rx.tasm", rx_src);
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "rx_nat", "probe", 1, nat_probe, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "rx", "waiter", 0, NULL, &rep.waiter), TVM_OK);
    wait_proc_state(vm, rep.waiter, "waiting");
    /* Named, for tvm_whereis and tvm_process_name (register/2 from a call
     * context). */
    tvm_term reg[2], r;
    cr_assert_eq(tvm_make_atom(env, "rx_waiter", &reg[0]), TVM_OK);
    cr_assert_eq(tvm_make_pid(env, rep.waiter, &reg[1]), TVM_OK);
    cr_assert_eq(tvm_call(env, "erlang", "register", 2, reg, &r), TVM_OK);
}

/* After the calls: the VM works (a call, the module a context loaded, a
 * pattern), and the waiter got the context's message. */
static void still_works(void)
{
    char out[64];
    int64_t one = 1;
    cr_assert_eq(call_fmt(env, "rx", "leaf", 1, &one, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "2");
    cr_assert_eq(call_fmt(env, "rx_dyn", "f", 0, NULL, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "7");
    cr_assert_eq(call_fmt(env, "rx_nat", "seven", 0, NULL, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "7");
    tvm_error err;
    cr_assert_eq(tvm_trace_pattern(vm, "rx:other/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err),
                 TVM_OK);
    cr_assert_eq(tvm_trace_pattern(vm, "rx:other/1", TVM_TP_FALSE, TVM_TP_LOCAL, NULL, &err),
                 TVM_OK);
    tvm_term r;
    cr_assert_eq(tvm_join(env, rep.waiter, &r), TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    cr_assert_str_eq(out, "hello");
}

/* The lines every context writes alike. */
#define TRACE_OK                                                               \
    "trace_pattern on: TVM_OK matched 1\n"                                    \
    "trace_pattern off: TVM_OK\n"                                             \
    "trace_flags_all on/off: TVM_OK TVM_OK\n"                                 \
    "trace_flags on/off: TVM_OK TVM_OK\n"
#define PROC_REFUSED(fn) fn ": called from a process (a native); call it from a thread of the embedder"
#define SINK_DESTROY "TVM_ERR_BADARG tvm_session_destroy: called from a sink (a trace " \
                     "callback): a destroy waits for the session's sink\n"
#define CALLS_OK(join)                                                               \
    "control_start: TVM_OK\n"                                                 \
    "control_stop: TVM_OK\n"                                                  \
    "call: TVM_OK 2\n"                                                        \
    "spawn: TVM_OK\n"                                                         \
    "join: " join "\n"                                                            \
    "exit: TVM_OK\n"                                                          \
    "whereis: TVM_OK waiter\n"                                               \
    "process_name: TVM_OK rx_waiter\n"                                       \
    "send: TVM_OK\n"                                                          \
    "destroy: TVM_OK returned\n"
#define PROFILE_OK "profile_start: TVM_OK\nprofile_render: TVM_OK\n"
#define DESTROY_REFUSED(where)                                                 \
    "tracevm: tvm_destroy: called from " where ", which it would wait for; "   \
    "nothing was destroyed (call it from a thread of the embedder)\n"

/* A process: no pipeline nor profile starts there (each waits for thread
 * progress, which the process's own scheduler thread must report). */
static const char *const in_process_calls =
    "trace_start: TVM_ERR_BADARG " PROC_REFUSED("tvm_trace_start") "\n"
    "trace_stop: TVM_ERR_BADARG\n"
    "session_create: TVM_ERR_BADARG " PROC_REFUSED("tvm_session_create") "\n"
    "load_string: TVM_OK\n"
    "register_native: TVM_OK\n"
    "backtrace self: TVM_OK rx frame\n"
    "backtrace other: TVM_OK rx:waiter/0\n"
    "profile_start: TVM_ERR_BADARG tvm_profile_start: not from a process\n"
    CALLS_OK("TVM_ERR_BADARG");

/* A call context's thread inside tvm_call: everything but tvm_destroy. */
static const char *const in_call_calls =
    "trace_start: TVM_OK\n"
    "trace_stop: TVM_OK\n"
    "session_create: TVM_OK\n"
    "session_destroy other: TVM_OK\n"
    "load_string: TVM_OK\n"
    "register_native: TVM_OK\n"
    "backtrace other: TVM_OK rx:waiter/0\n" PROFILE_OK CALLS_OK("TVM_OK 3");

/* A collector: no call that waits for a pipeline's sink. */
static const char *const in_sink_calls =
    "trace_start: TVM_ERR_BADARG tvm_trace_start: called from a sink (a trace callback): a "
    "start waits for a stopping pipeline's sink\n"
    "trace_stop: TVM_ERR_BADARG\n"
    "session_create: TVM_OK\n"
    "session_destroy other: " SINK_DESTROY;
static const char *const in_sink_code =
    "load_string: TVM_OK\n"
    "register_native: TVM_OK\n"
    "backtrace other: TVM_OK rx:waiter/0\n" PROFILE_OK CALLS_OK("TVM_OK 3");

static void check(const char *want)
{
    cr_assert_str_eq(rep.text, want);
    fflush(stderr);
}

/* A case's .init, run with the suite's: stderr is read back (the refused
 * tvm_destroy writes there). */
static void quiet(void)
{
    cr_redirect_stderr();
}

/* The context's lines are a, b and c; its tvm_destroy was refused as
 * called from `where`; the VM works on. */
static void finish(const char *a, const char *b, const char *c, const char *where)
{
    char want[4096];
    snprintf(want, sizeof want, "%s%s%s", a, b, c);
    check(want);
    snprintf(want, sizeof want, DESTROY_REFUSED("%s"), where);
    cr_assert_stderr_eq_str(want);
    still_works();
}

/* Local call trace of rx:leaf/1. */
static void trace_leaf(void)
{
    tvm_error err;
    cr_assert_eq(tvm_trace_pattern(vm, "rx:leaf/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err),
                 TVM_OK);
}

Test(reentry, from_a_native, .init = quiet, .timeout = 30)
{
    setup_rx();
    run_proc("run_self", 0);
    wait_report();
    finish(TRACE_OK, "trace_info: TVM_OK {traced,false}\n", in_process_calls,
           "a process (a native or the call hook)");
}

Test(reentry, from_the_call_hook, .init = quiet, .timeout = 30)
{
    setup_rx();
    trace_leaf();
    tvm_set_call_hook(vm, on_call, NULL);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    run_proc("hooked", 1);
    wait_report();
    tvm_set_call_hook(vm, NULL, NULL);
    finish(TRACE_OK, "trace_info: TVM_OK {traced,local}\n", in_process_calls,
           "a process (a native or the call hook)");
}

Test(reentry, from_a_native_of_a_call_context, .init = quiet, .timeout = 30)
{
    setup_rx();
    char out[64];
    int64_t zero = 0;
    cr_assert_eq(call_fmt(env, "rx", "run", 1, &zero, out, sizeof out), TVM_OK);
    wait_report();
    finish(TRACE_OK, "trace_info: TVM_OK {traced,false}\n", in_call_calls,
           "inside tvm_call (a native or the call hook)");
}

/* The call hook of a call context (a traced call made by tvm_call on this
 * thread). */
Test(reentry, from_the_call_hook_of_a_call_context, .init = quiet, .timeout = 30)
{
    setup_rx();
    trace_leaf();
    tvm_set_call_hook(vm, on_call, NULL);
    cr_assert_eq(tvm_trace_calls(env, 0, true), TVM_OK);
    char out[64];
    int64_t zero = 0;
    cr_assert_eq(call_fmt(env, "rx", "hooked", 1, &zero, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "1");
    cr_assert_eq(tvm_trace_calls(env, 0, false), TVM_OK);
    tvm_set_call_hook(vm, NULL, NULL);
    wait_report();
    finish(TRACE_OK, "trace_info: TVM_OK {traced,local}\n", in_call_calls,
           "inside tvm_call (a native or the call hook)");
}

Test(reentry, from_the_default_sessions_callback, .init = quiet, .timeout = 30)
{
    setup_rx();
    tvm_error err;
    cr_assert_eq(tvm_trace_pattern(vm, "rx:leaf/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err),
                 TVM_OK);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CALLBACK,
                            .callback = on_event };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    run_proc("hooked", 1);
    wait_report();
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    finish(TRACE_OK "trace_info: TVM_OK {traced,local}\n", in_sink_calls, in_sink_code,
           "a trace callback (a collector thread)");
}

Test(reentry, from_a_sessions_callback, .init = quiet, .timeout = 30)
{
    setup_rx();
    tvm_error err;
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CALLBACK,
                            .callback = on_event };
    cr_assert_eq(tvm_session_create(vm, "rx", &o, &rep.own, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_trace_pattern(vm, rep.own, "rx:leaf/1", NULL, TVM_TP_TRUE,
                                           TVM_TP_LOCAL, 0, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_session_trace_flags_all(vm, rep.own, TVM_TRACE_NEW, TVM_TRACE_CALL, true,
                                             &err), TVM_OK);
    run_proc("hooked", 1);
    wait_report();
    cr_assert_eq(tvm_session_destroy(vm, rep.own, &err), TVM_OK);
    finish(TRACE_OK "trace_info: TVM_OK {traced,false}\n", in_sink_calls,
           "session_destroy own: " SINK_DESTROY "load_string: TVM_OK\n"
           "register_native: TVM_OK\n"
           "backtrace other: TVM_OK rx:waiter/0\n" PROFILE_OK CALLS_OK("TVM_OK 3"),
           "a trace callback (a collector thread)");
}

/* A trace callback that sets a pattern while another thread flushes its
 * session: the flush waits for the collector, which runs the callback,
 * whose pattern takes the code permission.  Before, the flush held that
 * permission while it waited, and each waited for the other.  The
 * callback gives the flush 100 ms to reach its wait (that makes the old
 * deadlock likely; nothing here depends on it). */
typedef struct Cross {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool in_callback, flushing, done;
    tvm_session s;
    tvm_status pattern, flush;
    int matched;
} Cross;

static Cross cross = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void cross_set(bool *flag)
{
    pthread_mutex_lock(&cross.lock);
    *flag = true;
    pthread_cond_broadcast(&cross.cond);
    pthread_mutex_unlock(&cross.lock);
}

static void cross_wait(const bool *flag)
{
    pthread_mutex_lock(&cross.lock);
    while (!*flag)
        pthread_cond_wait(&cross.cond, &cross.lock);
    pthread_mutex_unlock(&cross.lock);
}

static void on_event_pattern(const tvm_trace_event *ev, void *data)
{
    (void)ev, (void)data;
    pthread_mutex_lock(&cross.lock);
    bool first = !cross.in_callback;
    pthread_mutex_unlock(&cross.lock);
    if (!first)
        return;
    cross_set(&cross.in_callback);
    cross_wait(&cross.flushing);
    usleep(100 * 1000);
    tvm_error err;
    cross.pattern = tvm_trace_pattern(vm, "rx:other/1", TVM_TP_TRUE, TVM_TP_LOCAL,
                                      &cross.matched, &err);
    cross_set(&cross.done);
}

static void *flusher(void *arg)
{
    (void)arg;
    cross_wait(&cross.in_callback);
    cross_set(&cross.flushing);
    cross.flush = tvm_session_flush(vm, cross.s);
    return NULL;
}

Test(reentry, pattern_from_a_callback_while_a_flush_waits, .timeout = 30)
{
    setup_rx();
    tvm_error err;
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CALLBACK,
                            .callback = on_event_pattern };
    cr_assert_eq(tvm_session_create(vm, "rx", &o, &cross.s, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_trace_pattern(vm, cross.s, "rx:leaf/1", NULL, TVM_TP_TRUE,
                                           TVM_TP_LOCAL, 0, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_session_trace_flags_all(vm, cross.s, TVM_TRACE_NEW, TVM_TRACE_CALL, true,
                                             &err), TVM_OK);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, flusher, NULL), 0);
    run_proc("hooked", 1);
    cross_wait(&cross.done);
    pthread_join(th, NULL);
    cr_assert_eq(cross.pattern, TVM_OK);
    cr_assert_eq(cross.matched, 1);
    cr_assert_eq(cross.flush, TVM_OK);
    cr_assert_eq(tvm_session_destroy(vm, cross.s, &err), TVM_OK);
    char out[64];
    int64_t one = 1;
    cr_assert_eq(call_fmt(env, "rx", "leaf", 1, &one, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "2");
}

/* A lossless pipeline's callback that sets a pattern while this thread,
 * inside tvm_call (a call context: it cannot be suspended), waits for
 * room in the full shared ring.  Before, the thread waited online: the
 * pattern's grace period waited for it, it for the collector, and the
 * collector for the pattern.  The callback stalls 100 ms on its first
 * event so that the 4 KiB ring fills (nothing depends on it); no event
 * is lost. */
typedef struct Lossless {
    pthread_mutex_t lock;
    int events;
    tvm_status pattern;
    int matched;
} Lossless;

static Lossless lossless = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void on_event_lossless(const tvm_trace_event *ev, void *data)
{
    (void)ev, (void)data;
    pthread_mutex_lock(&lossless.lock);
    int n = ++lossless.events;
    pthread_mutex_unlock(&lossless.lock);
    if (n != 1)
        return;
    usleep(100 * 1000);
    tvm_error err;
    lossless.pattern = tvm_trace_pattern(vm, "rx:other/1", TVM_TP_TRUE, TVM_TP_LOCAL,
                                         &lossless.matched, &err);
}

Test(reentry, pattern_from_a_lossless_callback_while_a_call_waits_for_room, .timeout = 30)
{
    setup_rx();
    trace_leaf();
    tvm_error err;
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CALLBACK,
                            .callback = on_event_lossless, .policy = TVM_TRACE_LOSSLESS,
                            .ring_bytes = 4096 };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_calls(env, 0, true), TVM_OK);
    char out[64];
    int64_t one = 1;
    for (int i = 0; i < 300; i++)
        cr_assert_eq(call_fmt(env, "rx", "leaf", 1, &one, out, sizeof out), TVM_OK);
    cr_assert_eq(tvm_trace_calls(env, 0, false), TVM_OK);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    cr_assert_eq(lossless.pattern, TVM_OK);
    cr_assert_eq(lossless.matched, 1);
    cr_assert_eq(lossless.events, 300);
    tvm_session_info info;
    cr_assert_eq(tvm_session_info_get(vm, TVM_SESSION_DEFAULT, &info), TVM_OK);
    cr_assert_eq(info.lost, 0);
}

/* The call hook switches its own trace off on the third call of ten
 * calls (what an embedder that wants N calls does): the switch is in
 * effect when tvm_trace_pattern returns, so the hook runs exactly three
 * times, and the pipeline has exactly three call events. */
static int hook_calls;            /* the process's own: read after its join */
static tvm_status hook_off = -1;

static void on_call_three(tvm_env *e, const tvm_call_event *ev, void *data)
{
    (void)e, (void)ev, (void)data;
    if (++hook_calls == 3) {
        tvm_error err;
        hook_off = tvm_trace_pattern(vm, "rx:leaf/1", TVM_TP_FALSE, TVM_TP_LOCAL, NULL, &err);
    }
}

static int three_events;

static void count_event(const tvm_trace_event *ev, void *data)
{
    (void)data;
    if (strcmp(ev->kind, "call") == 0)
        three_events++;    /* the collector's own: read after the stop */
}

Test(reentry, the_call_hook_switches_its_trace_off, .timeout = 30)
{
    setup_rx();
    trace_leaf();
    tvm_error err;
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CALLBACK,
                            .callback = count_event };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    tvm_set_call_hook(vm, on_call_three, NULL);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    char out[64];
    spawn_fmt(env, "rx", "ten", 0, NULL, out, sizeof out);
    cr_assert_str_eq(out, "10");
    tvm_set_call_hook(vm, NULL, NULL);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    cr_assert_eq(hook_off, TVM_OK);
    cr_assert_eq(hook_calls, 3);
    cr_assert_eq(three_events, 3);
}
