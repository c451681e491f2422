/*
 * tests/unit/bp/test_sessions.c - trace sessions through the C API: two
 * sessions tracing one process and one function each get their own
 * events; turning one off leaves the other; destroying one removes every
 * kind of setting (checked with trace_info, flags and a successor in the
 * same slot) and leaves the other; different match specs on one function;
 * return_from and return_to attributed per session; the limit on live
 * sessions; bad arguments change nothing; limits (exactly N events with
 * every scheduler emitting, the rate dropping or stopping, a duration);
 * the owner's exit; a descriptor sink destroyed while its reader does not
 * read; the default session's limits (BEAM behaviour 40 and the issue's
 * items 2-4); a stop whose last record finds its ring full while the
 * sink stalls holds no code change; a session from VM code on a full
 * atom table, every event kind a tracer process gets on one, and
 * trace_info's flags on one.

 * sink stalls holds no code change, nor does a tvm_trace_stop whose sink
 * stalls (draining, or owing the last record); a destroy writes the last
 * record a stopper still owes.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "tests/unit/fill_atoms.h"

#include "trace/tr_session.h"

static const char *const ss_src =
    "module ss\n"
    "export f/1, g/1, h/1, loop/2, waiter/0\n"
    "function f/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    /* g(X): f(X) by a remote call */
    "function g/1 regs 1\n    callx r0, r0, ss:f/1\n    ret r0\nend\n"
    /* h(X): f(X) by a local body call, then returns 0 (return_to h) */
    "function h/1 regs 2\n    call r1, r0, f/1\n    loadk r0, 0\n    ret r0\nend\n"
    /* loop(N, X): f(X) N times */
    "function loop/2 regs 3\n"
    "top:\n"
    "    jlti r0, 1, done\n"
    "    call r2, r1, f/1\n"
    "    addi r0, r0, -1\n"
    "    jump top\n"
    "done:\n"
    "    ret r0\n"
    "end\n"
    /* waiter(): returns the first message it receives */
    "function waiter/0 regs 2\n"
    "top:\n"
    "    recv r0, none\n    accept\n    ret r0\n"
    "none:\n"
    "    loadk r1, infinity\n    wait r1, never\n    jump top\n"
    "never:\n    ret r1\n"
    "end\n";

static tvm_config two_scheds = { .size = sizeof(tvm_config), .schedulers = 2 };
TVM_FIXTURE(sessions, &two_scheds);

/* ==== a sink that keeps every line ==== */

typedef struct Lines {
    pthread_mutex_t lock;
    char buf[1 << 16];
    size_t len;
    int n;
} Lines;

static void keep(const tvm_trace_event *ev, void *data)
{
    Lines *l = data;
    pthread_mutex_lock(&l->lock);
    size_t k = strlen(ev->text);
    if (l->len + k + 2 < sizeof l->buf) {
        memcpy(l->buf + l->len, ev->text, k);
        l->len += k;
        l->buf[l->len++] = '\n';
        l->buf[l->len] = '\0';
    }
    l->n++;
    pthread_mutex_unlock(&l->lock);
}

/* Sinks outlive the test's body (a session's callback runs until the
 * fixture destroys the VM), so they are static: a test uses at most three. */
static Lines *lines_new(void)
{
    static Lines pool[3];
    static int used;
    cr_assert_lt(used, 3, "a test takes at most three sinks");
    Lines *l = &pool[used++];
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
    return l;
}

/* A session whose events go to `l`, with limits from `o` (or none). */
static tvm_session session(const char *name, Lines *l, const tvm_trace_options *o)
{
    tvm_trace_options opts = o ? *o : (tvm_trace_options){ .size = sizeof(tvm_trace_options) };
    opts.format = TVM_TRACE_CALLBACK;
    opts.callback = keep;
    opts.callback_data = l;
    tvm_session s;
    tvm_error err;
    cr_assert_eq(tvm_session_create(vm, name, &opts, &s, &err), TVM_OK, "%s", err.message);
    return s;
}

/* What l holds once every event written so far reached it. */
static const char *text(tvm_session s, Lines *l)
{
    tvm_session_flush(vm, s);
    return l->buf;
}

static void tp(tvm_session s, const char *pattern, const char *ms, tvm_tp_action how,
               unsigned flags)
{
    tvm_error err;
    cr_assert_eq(tvm_session_trace_pattern(vm, s, pattern, ms, how, flags, 0, NULL, &err), TVM_OK,
                 "%s", err.message);
}

static void new_flags(tvm_session s, unsigned flags, bool on)
{
    tvm_error err;
    cr_assert_eq(tvm_session_trace_flags_all(vm, s, TVM_TRACE_NEW, flags, on, &err), TVM_OK, "%s",
                 err.message);
}

/* Runs ss:fun(args) as a joined process; returns its pid. */
static tvm_pid run(const char *fun, int argc, const int64_t *args)
{
    tvm_term a[4], r;
    tvm_pid pid;
    for (int i = 0; i < argc; i++)
        cr_assert_eq(tvm_make_int(env, args[i], &a[i]), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "ss", fun, argc, a, &pid), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    return pid;
}

static tvm_pid run1(const char *fun, int64_t x)
{
    return run(fun, 1, &x);
}

/* trace_info(mfa, item) in session s, formatted. */
static const char *info(tvm_session s, const char *mfa, const char *item)
{
    static char buf[512];
    tvm_term t;
    tvm_error err;
    cr_assert_eq(tvm_session_trace_info(env, s, mfa, item, &t, &err), TVM_OK, "%s", err.message);
    tvm_format_term(env, t, buf, sizeof buf);
    return buf;
}

static char *fmt(const char *f, unsigned long long a)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], f, a);
    return buf[k];
}

/* Waits (generously) until session s is no longer live; its info. */
static tvm_session_info wait_stopped(tvm_session s)
{
    tvm_session_info in;
    for (int i = 0; i < 2000; i++) {
        cr_assert_eq(tvm_session_info_get(vm, s, &in), TVM_OK);
        if (!in.live)
            return in;
        usleep(5000);
    }
    cr_assert_fail("session %llu still live", (unsigned long long)s.id);
    return in;
}

/* ==== BEAM behaviour 40 ==== */

/* Two sessions tracing the same process and function each get their own
 * message (trace_session_SUITE:call). */
Test(sessions, each_session_gets_its_own_events)
{
    load_ok(vm, "ss", ss_src);
    Lines *la = lines_new(), *lb = lines_new();
    tvm_session a = session("a", la, NULL), b = session("b", lb, NULL);
    tp(a, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    tp(b, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    new_flags(a, TVM_TRACE_CALL, true);
    new_flags(b, TVM_TRACE_CALL | TVM_TRACE_ARITY, true);
    tvm_pid p = run1("g", 7);
    cr_assert_str_eq(text(a, la), fmt("{trace,<0.%llu.0>,call,{ss,f,[7]}}\n", p));
    cr_assert_str_eq(text(b, lb), fmt("{trace,<0.%llu.0>,call,{ss,f,1}}\n", p));
    /* Each session's flags are its own. */
    unsigned fa, fb, fd;
    cr_assert_eq(tvm_session_trace_flags_get(vm, a, 0, &fa, NULL), TVM_OK);
    cr_assert_eq(tvm_session_trace_flags_get(vm, b, 0, &fb, NULL), TVM_OK);
    cr_assert_eq(fa, TVM_TRACE_CALL);
    cr_assert_eq(fb, TVM_TRACE_CALL | TVM_TRACE_ARITY);
    cr_assert_eq(tvm_trace_flags_new(vm), 0, "the default session has none");
    fd = 99;
    cr_assert_eq(tvm_session_trace_flags_get(vm, TVM_SESSION_DEFAULT, 0, &fd, NULL), TVM_OK);
    cr_assert_eq(fd, 0);
    cr_assert_str_eq(info(TVM_SESSION_DEFAULT, "ss:f/1", "traced"), "{traced,false}");
    cr_assert_eq(tvm_session_destroy(vm, a, NULL), TVM_OK);
    cr_assert_eq(tvm_session_destroy(vm, b, NULL), TVM_OK);
}

/* Disabling in one session leaves the other (trace_session_SUITE:call). */
Test(sessions, disabling_in_one_leaves_the_other)
{
    load_ok(vm, "ss", ss_src);
    Lines *la = lines_new(), *lb = lines_new();
    tvm_session a = session("a", la, NULL), b = session("b", lb, NULL);
    tp(a, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_GLOBAL);
    tp(b, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_GLOBAL);
    new_flags(a, TVM_TRACE_CALL, true);
    new_flags(b, TVM_TRACE_CALL, true);
    tvm_pid p1 = run1("g", 1);
    tp(a, "ss:f/1", NULL, TVM_TP_FALSE, TVM_TP_GLOBAL);
    tvm_pid p2 = run1("g", 2);
    new_flags(b, TVM_TRACE_CALL, false);
    new_flags(a, TVM_TRACE_CALL, false);
    tp(a, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_GLOBAL);
    run1("g", 3);
    cr_assert_str_eq(text(a, la), fmt("{trace,<0.%llu.0>,call,{ss,f,[1]}}\n", p1));
    char want[256];
    snprintf(want, sizeof want, "{trace,<0.%llu.0>,call,{ss,f,[1]}}\n{trace,<0.%llu.0>,call,{ss,f,[2]}}\n",
             (unsigned long long)p1, (unsigned long long)p2);
    cr_assert_str_eq(text(b, lb), want);
    cr_assert_str_eq(info(a, "ss:f/1", "traced"), "{traced,global}");
    cr_assert_str_eq(info(b, "ss:f/1", "traced"), "{traced,global}");
    tp(b, "ss:f/1", NULL, TVM_TP_FALSE, TVM_TP_GLOBAL);
    cr_assert_str_eq(info(b, "ss:f/1", "traced"), "{traced,false}");
    cr_assert_str_eq(info(a, "ss:f/1", "traced"), "{traced,global}");
}

/* Destroying a session removes all its settings (trace_session_SUITE:
 * destroy): every kind of pattern, on_load, the process flags, the flags
 * of new processes, call_count and call_time data; another session with
 * the same settings keeps them. */
Test(sessions, destroy_removes_everything_and_only_that)
{
    load_ok(vm, "ss", ss_src);
    Lines *la = lines_new(), *lb = lines_new();
    tvm_session a = session("a", la, NULL), b = session("b", lb, NULL);
    tvm_pid w;
    cr_assert_eq(tvm_spawn(env, "ss", "waiter", 0, NULL, &w), TVM_OK);
    tvm_session both[2] = { a, b };
    for (int i = 0; i < 2; i++) {
        tvm_session s = both[i];
        tvm_error err;
        tp(s, "ss:f/1", "[{'_',[],[{return_trace}]}]", TVM_TP_TRUE, TVM_TP_LOCAL);
        tp(s, "ss:g/1", NULL, TVM_TP_TRUE, TVM_TP_GLOBAL);
        cr_assert_eq(tvm_session_trace_pattern(vm, s, "ss:h/1", NULL, TVM_TP_TRUE, TVM_TP_META, w,
                                               NULL, &err), TVM_OK, "%s", err.message);
        tp(s, "ss:g/1", NULL, TVM_TP_TRUE, TVM_TP_CALL_COUNT);
        tp(s, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_CALL_TIME);
        tp(s, "on_load", NULL, TVM_TP_TRUE, TVM_TP_LOCAL | TVM_TP_CALL_COUNT);
        cr_assert_eq(tvm_session_trace_flags(vm, s, w, TVM_TRACE_PROCS, true, &err), TVM_OK);
        new_flags(s, TVM_TRACE_CALL, true);
    }
    run1("g", 1);
    for (int i = 0; i < 2; i++) {
        tvm_session s = both[i];
        cr_assert_str_eq(info(s, "ss:f/1", "traced"), "{traced,local}");
        cr_assert_str_eq(info(s, "ss:f/1", "match_spec"),
                         "{match_spec,[{'_',[],[{return_trace}]}]}");
        cr_assert_str_eq(info(s, "ss:g/1", "traced"), "{traced,global}");
        cr_assert_str_eq(info(s, "ss:h/1", "meta"), fmt("{meta,<0.%llu.0>}", w));
        cr_assert_str_eq(info(s, "ss:g/1", "call_count"), "{call_count,1}");
        cr_assert(strncmp(info(s, "ss:f/1", "call_time"), "{call_time,[{<0.", 16) == 0, "%s",
                  info(s, "ss:f/1", "call_time"));
        cr_assert_str_eq(info(s, "on_load", "traced"), "{traced,local}");
        cr_assert_str_eq(info(s, "on_load", "call_count"), "{call_count,true}");
    }
    cr_assert_eq(tvm_session_destroy(vm, a, NULL), TVM_OK);
    /* a is gone: every call about it says so, and changes nothing. */
    tvm_term t;
    tvm_error err;
    cr_assert_eq(tvm_session_trace_info(env, a, "ss:f/1", "traced", &t, &err), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(err.message, fmt("tvm_session_trace_info: no session %llu (destroyed, or "
                                      "never created)", a.id));
    /* b keeps everything. */
    cr_assert_str_eq(info(b, "ss:f/1", "traced"), "{traced,local}");
    cr_assert_str_eq(info(b, "ss:g/1", "traced"), "{traced,global}");
    cr_assert_str_eq(info(b, "ss:h/1", "meta"), fmt("{meta,<0.%llu.0>}", w));
    cr_assert_str_eq(info(b, "ss:g/1", "call_count"), "{call_count,1}");
    cr_assert_str_eq(info(b, "on_load", "call_count"), "{call_count,true}");
    unsigned f;
    cr_assert_eq(tvm_session_trace_flags_get(vm, b, w, &f, NULL), TVM_OK);
    cr_assert_eq(f, TVM_TRACE_PROCS);
    /* A successor in a's slot starts from nothing. */
    Lines *lc = lines_new();
    tvm_session c = session("c", lc, NULL);
    cr_assert_eq(c.id & 0xff, a.id & 0xff, "the successor takes a's slot");
    cr_assert_neq(c.id, a.id);
    cr_assert_str_eq(info(c, "ss:f/1", "all"), "{all,false}");
    cr_assert_str_eq(info(c, "ss:g/1", "all"), "{all,false}");
    cr_assert_str_eq(info(c, "ss:h/1", "all"), "{all,false}");
    cr_assert_str_eq(info(c, "on_load", "all"), "{all,false}");
    cr_assert_eq(tvm_session_trace_flags_get(vm, c, w, &f, NULL), TVM_OK);
    cr_assert_eq(f, 0);
    cr_assert_eq(tvm_session_trace_flags_get(vm, c, 0, &f, NULL), TVM_OK);
    cr_assert_eq(f, 0);
    /* a's sink got its events and, last, why it ended. */
    const char *la_text = la->buf;
    cr_assert(strstr(la_text, "{trace_stopped,destroyed,") != NULL, "%s", la_text);
    tvm_term m, r;
    cr_assert_eq(tvm_make_atom(env, "stop", &m), TVM_OK);
    cr_assert_eq(tvm_send(env, w, m), TVM_OK);
    cr_assert_eq(tvm_join(env, w, &r), TVM_OK);
}

/* Sessions with different match specs on one function. */
Test(sessions, different_match_specs_on_one_function)
{
    load_ok(vm, "ss", ss_src);
    Lines *la = lines_new(), *lb = lines_new();
    tvm_session a = session("a", la, NULL), b = session("b", lb, NULL);
    tp(a, "ss:f/1", "[{[1],[],[]}]", TVM_TP_TRUE, TVM_TP_LOCAL);
    tp(b, "ss:f/1", "[{[2],[],[{message,two}]}]", TVM_TP_TRUE, TVM_TP_LOCAL);
    new_flags(a, TVM_TRACE_CALL, true);
    new_flags(b, TVM_TRACE_CALL, true);
    tvm_pid p1 = run1("g", 1), p2 = run1("g", 2);
    run1("g", 3);
    cr_assert_str_eq(text(a, la), fmt("{trace,<0.%llu.0>,call,{ss,f,[1]}}\n", p1));
    cr_assert_str_eq(text(b, lb), fmt("{trace,<0.%llu.0>,call,{ss,f,[2]},two}\n", p2));
    cr_assert_str_eq(info(a, "ss:f/1", "match_spec"), "{match_spec,[{[1],[],[]}]}");
    cr_assert_str_eq(info(b, "ss:f/1", "match_spec"), "{match_spec,[{[2],[],[{message,two}]}]}");
}

/* return_from and return_to go to the session that pushed the frame. */
Test(sessions, return_frames_are_attributed_per_session)
{
    load_ok(vm, "ss", ss_src);
    Lines *la = lines_new(), *lb = lines_new();
    tvm_session a = session("a", la, NULL), b = session("b", lb, NULL);
    tp(a, "ss:f/1", "[{'_',[],[{return_trace}]}]", TVM_TP_TRUE, TVM_TP_LOCAL);
    tp(b, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    new_flags(a, TVM_TRACE_CALL, true);
    new_flags(b, TVM_TRACE_CALL | TVM_TRACE_RETURN_TO, true);
    tvm_pid p = run1("h", 5);
    char want[512];
    snprintf(want, sizeof want,
             "{trace,<0.%llu.0>,call,{ss,f,[5]}}\n{trace,<0.%llu.0>,return_from,{ss,f,1},6}\n",
             (unsigned long long)p, (unsigned long long)p);
    cr_assert_str_eq(text(a, la), want);
    snprintf(want, sizeof want,
             "{trace,<0.%llu.0>,call,{ss,f,[5]}}\n{trace,<0.%llu.0>,return_to,{ss,h,1}}\n",
             (unsigned long long)p, (unsigned long long)p);
    cr_assert_str_eq(text(b, lb), want);
}

/* At most TVM_SESSIONS_MAX live sessions, the default one included. */
Test(sessions, at_most_sessions_max)
{
    tvm_session s[TVM_SESSIONS_MAX];
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_TEXT, .path = "/dev/null", .ring_bytes = 4096 };
    tvm_error err;
    for (int i = 1; i < TVM_SESSIONS_MAX; i++)
        cr_assert_eq(tvm_session_create(vm, "many", &o, &s[i], &err), TVM_OK, "%s", err.message);
    tvm_session extra;
    cr_assert_eq(tvm_session_create(vm, "one more", &o, &extra, &err), TVM_ERR_LIMIT);
    cr_assert_str_eq(err.message, "tvm_session_create: 16 sessions are live, the most there can "
                                  "be (the default one included); destroy one first");
    cr_assert_eq(tvm_session_destroy(vm, s[5], &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_create(vm, "one more", &o, &extra, &err), TVM_OK, "%s", err.message);
    for (int i = 1; i < TVM_SESSIONS_MAX; i++)
        if (i != 5)
            cr_assert_eq(tvm_session_destroy(vm, s[i], NULL), TVM_OK);
    cr_assert_eq(tvm_session_destroy(vm, extra, NULL), TVM_OK);
}

/* Bad arguments get a precise error and change nothing. */
Test(sessions, bad_arguments_change_nothing)
{
    load_ok(vm, "ss", ss_src);
    tvm_error err;
    tvm_session s;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_TEXT, .file = stderr,
                            .rate = 5, .rate_policy = (tvm_rate_policy)4 };
    cr_assert_eq(tvm_session_create(vm, "x", &o, &s, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_session_create: bad rate policy 4 (expected stop or drop)");
    o.rate_policy = TVM_RATE_DROP;
    o.path = "/dev/null";
    cr_assert_eq(tvm_session_create(vm, "x", &o, &s, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_session_create: give one of path, file and fd, not 2");
    cr_assert_eq(tvm_session_create(vm, "", NULL, &s, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_session_create: a session's name is 1..255 bytes");
    cr_assert_eq(tvm_session_create(NULL, "x", NULL, &s, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_session_create: NULL vm");
    cr_assert_eq(tvm_session_create(vm, "x", NULL, NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_session_create: NULL out");
    unsigned fl;
    cr_assert_eq(tvm_session_trace_flags_get(vm, TVM_SESSION_DEFAULT, 0, NULL, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_session_trace_flags_get: NULL flags");
    cr_assert_eq(tvm_session_trace_flags_get(NULL, TVM_SESSION_DEFAULT, 0, &fl, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_session_trace_flags_get: NULL vm");
    cr_assert_eq(tvm_session_destroy(vm, TVM_SESSION_DEFAULT, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_session_destroy: the default session is never destroyed "
                                  "(tvm_trace_stop stops its pipeline)");
    Lines *l = lines_new();
    s = session("x", l, NULL);
    cr_assert_eq(tvm_session_destroy(vm, s, &err), TVM_OK);
    cr_assert_eq(tvm_session_destroy(vm, s, &err), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(err.message, fmt("tvm_session_destroy: no session %llu (destroyed, or never "
                                      "created)", s.id));
    int n = 7;
    cr_assert_eq(tvm_session_trace_pattern(vm, s, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL, 0, &n,
                                           &err), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(err.message, fmt("tvm_session_trace_pattern: no session %llu (destroyed, or "
                                      "never created)", s.id));
    cr_assert_eq(n, 7, "nothing was matched");
    cr_assert_eq(tvm_session_trace_flags_all(vm, s, TVM_TRACE_ALL, TVM_TRACE_CALL, true, &err),
                 TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_trace_flags_new(vm), 0);
    int64_t c;
    cr_assert_eq(tvm_session_call_count(vm, s, "ss:f/1", &c), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(info(TVM_SESSION_DEFAULT, "ss:f/1", "traced"), "{traced,false}");
    /* pid 0 is a call context: only the default session traces those. */
    Lines *l2 = lines_new();
    tvm_session s2 = session("y", l2, NULL);
    cr_assert_eq(tvm_session_trace_flags(vm, s2, 0, TVM_TRACE_CALL, true, &err), TVM_ERR_BADARG);
    cr_assert_eq(tvm_session_trace_flags(vm, s2, 99999, TVM_TRACE_CALL, true, &err),
                 TVM_ERR_NOTFOUND);
    cr_assert_str_eq(err.message, "tvm_session_trace_flags: no process <0.99999.0>");
}

/* ==== limits ==== */

/* Counts the calls of f in l (a call event per line that has {ss,f,). */
static int calls_in(const char *s)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, ",call,{ss,f,")); p++)
        n++;
    return n;
}

/* Exactly max_events events with every scheduler emitting at once. */
Test(sessions, max_events_is_exact_with_every_scheduler_emitting)
{
    load_ok(vm, "ss", ss_src);
    Lines *l = lines_new();
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .max_events = 1000 };
    tvm_session s = session("limited", l, &o);
    tp(s, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    new_flags(s, TVM_TRACE_CALL, true);
    tvm_pid pids[8];
    tvm_term a[2], r;
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(tvm_make_int(env, 20000, &a[0]), TVM_OK);
        cr_assert_eq(tvm_make_int(env, i, &a[1]), TVM_OK);
        cr_assert_eq(tvm_spawn(env, "ss", "loop", 2, a, &pids[i]), TVM_OK);
    }
    for (int i = 0; i < 8; i++)
        cr_assert_eq(tvm_join(env, pids[i], &r), TVM_OK);
    tvm_session_info in = wait_stopped(s);
    cr_assert_str_eq(in.stopped, "max_events");
    cr_assert_eq(in.written, 1000);
    cr_assert_eq(in.lost, 0);
    const char *t = text(s, l);
    cr_assert_eq(calls_in(t), 1000);
    /* The last record says why and how many. */
    const char *last = strstr(t, "{trace_stopped,");
    cr_assert_not_null(last);
    cr_assert_str_eq(last, "{trace_stopped,max_events,1000,0}\n");
    /* Its settings are gone; the stopped session refuses new ones. */
    cr_assert_str_eq(info(TVM_SESSION_DEFAULT, "ss:f/1", "traced"), "{traced,false}");
    tvm_error err;
    cr_assert_eq(tvm_session_trace_pattern(vm, s, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL, 0,
                                           NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, fmt("tvm_session_trace_pattern: session limited (%llu) stopped: "
                                      "max_events", s.id));
    cr_assert_eq(tvm_session_destroy(vm, s, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(calls_in(l->buf), 1000, "nothing more after the stop");
}

/* Above the rate: dropped and counted (rate_policy drop)... */
Test(sessions, rate_drop_counts_what_it_drops)
{
    load_ok(vm, "ss", ss_src);
    Lines *l = lines_new();
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .rate = 5, .rate_window_ms = 1000000, .rate_policy = TVM_RATE_DROP };
    tvm_session s = session("rated", l, &o);
    tp(s, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    new_flags(s, TVM_TRACE_CALL, true);
    int64_t args[2] = { 20, 1 };
    run("loop", 2, args);
    cr_assert_eq(calls_in(text(s, l)), 5);
    tvm_session_info in;
    cr_assert_eq(tvm_session_info_get(vm, s, &in), TVM_OK);
    cr_assert(in.live);
    cr_assert_null(in.stopped);
    cr_assert_eq(in.written, 5);
    cr_assert_eq(in.lost, 15);
    cr_assert_str_eq(in.name, "rated");
}

/* ... or the session stops (recon_trace's semantics). */
Test(sessions, rate_stop)
{
    load_ok(vm, "ss", ss_src);
    Lines *l = lines_new();
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .rate = 5, .rate_window_ms = 1000000 };
    tvm_session s = session("rated", l, &o);
    tp(s, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    new_flags(s, TVM_TRACE_CALL, true);
    int64_t args[2] = { 20, 1 };
    run("loop", 2, args);
    tvm_session_info in = wait_stopped(s);
    cr_assert_str_eq(in.stopped, "rate");
    const char *t = text(s, l);
    cr_assert_eq(calls_in(t), 5);
    cr_assert_str_eq(strstr(t, "{trace_stopped,"), "{trace_stopped,rate,5,0}\n");
}

/* A duration (no time is asserted: only that it stops, and why). */
Test(sessions, duration_stops_the_session)
{
    load_ok(vm, "ss", ss_src);
    Lines *l = lines_new();
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .duration_ms = 20 };
    tvm_session s = session("brief", l, &o);
    tp(s, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    tvm_session_info in = wait_stopped(s);
    cr_assert_str_eq(in.stopped, "duration");
    cr_assert_str_eq(text(s, l), "{trace_stopped,duration,0,0}\n");
    cr_assert_str_eq(info(TVM_SESSION_DEFAULT, "ss:f/1", "traced"), "{traced,false}");
}

/*
 * Windows and durations too long to count in ns are as long as the
 * counter goes.  The products in ns wrapped: a duration of UINT64_MAX ms
 * ended at once, and a window of 18,446,744,073,710 ms (584 years) was
 * refused as "at least 1 ms (got 448384 ns)".  "brief" stops by its
 * duration; the stopper has then looked at every deadline at least once
 * since "long" was published, so a wrapped one would have stopped it.
 */
Test(sessions, huge_durations_and_windows_do_not_wrap)
{
    load_ok(vm, "ss", ss_src);
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .duration_ms = UINT64_MAX,
                            .rate = 5, .rate_window_ms = 18446744073710u };
    tvm_session s = session("long", lines_new(), &o);
    tvm_trace_options b = { .size = sizeof(tvm_trace_options), .duration_ms = 1 };
    tvm_session brief = session("brief", lines_new(), &b);
    cr_assert_str_eq(wait_stopped(brief).stopped, "duration");
    tvm_session_info in;
    cr_assert_eq(tvm_session_info_get(vm, s, &in), TVM_OK);
    cr_assert(in.live);
    cr_assert_null(in.stopped);
}

/* A session whose owner exits is destroyed. */
Test(sessions, owner_exit_destroys_the_session)
{
    load_ok(vm, "ss", ss_src);
    tvm_pid w;
    cr_assert_eq(tvm_spawn(env, "ss", "waiter", 0, NULL, &w), TVM_OK);
    Lines *l = lines_new();
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .owner = w };
    tvm_session s = session("owned", l, &o);
    tp(s, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    tvm_term m, r;
    cr_assert_eq(tvm_make_atom(env, "stop", &m), TVM_OK);
    cr_assert_eq(tvm_send(env, w, m), TVM_OK);
    cr_assert_eq(tvm_join(env, w, &r), TVM_OK);
    tvm_session_info in;
    int i = 0;
    while (tvm_session_info_get(vm, s, &in) == TVM_OK && i++ < 2000)
        usleep(5000);
    cr_assert_eq(tvm_session_info_get(vm, s, &in), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(l->buf, "{trace_stopped,owner_exit,0,0}\n");
    cr_assert_str_eq(info(TVM_SESSION_DEFAULT, "ss:f/1", "traced"), "{traced,false}");
}

/* A descriptor sink: events arrive; a destroy while the reader does not
 * read returns (what cannot be written is dropped). */
Test(sessions, fd_sink_destroyed_while_its_reader_sleeps)
{
    load_ok(vm, "ss", ss_src);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_TEXT, .use_fd = true, .fd = fds[1] };
    tvm_session s;
    tvm_error err;
    cr_assert_eq(tvm_session_create(vm, "fd", &o, &s, &err), TVM_OK, "%s", err.message);
    tp(s, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    new_flags(s, TVM_TRACE_CALL, true);
    tvm_pid p = run1("g", 1);
    cr_assert_eq(tvm_session_flush(vm, s), TVM_OK);
    char buf[256] = { 0 };
    char want[128];
    snprintf(want, sizeof want, "{trace,<0.%llu.0>,call,{ss,f,[1]}}\n", (unsigned long long)p);
    cr_assert_eq(read(fds[0], buf, strlen(want)), (ssize_t)strlen(want));
    cr_assert_str_eq(buf, want);
    /* More than the pipe holds (64 KiB), and nobody reads. */
    int64_t args[2] = { 5000, 1 };
    run("loop", 2, args);
    cr_assert_eq(tvm_session_destroy(vm, s, &err), TVM_OK, "%s", err.message);
    close(fds[0]);
    close(fds[1]);
}

/* The default session's limits (tvm_trace_start's options, the CLI's
 * --max-events): it stops; the legacy calls say so; a new start makes it
 * live again. */
Test(sessions, default_session_limits)
{
    load_ok(vm, "ss", ss_src);
    Lines *l = lines_new();
    tvm_error err;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK, .callback = keep, .callback_data = l,
                            .max_events = 3 };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_pattern(vm, "ss:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    int64_t args[2] = { 10, 1 };
    run("loop", 2, args);
    tvm_session_info in = wait_stopped(TVM_SESSION_DEFAULT);
    cr_assert_str_eq(in.name, "default");
    cr_assert_str_eq(in.stopped, "max_events");
    cr_assert_eq(in.written, 3);
    cr_assert_eq(tvm_trace_pattern(vm, "ss:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_pattern: session default (0) stopped: max_events");
    cr_assert_eq(tvm_trace_flags_new(vm), 0, "its flags were removed");
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    cr_assert_eq(calls_in(l->buf), 3);
    cr_assert_str_eq(strstr(l->buf, "{trace_stopped,"), "{trace_stopped,max_events,3,0}\n");
    cr_assert_eq(tvm_trace_start(vm, NULL, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_pattern(vm, "ss:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_trace_pattern(vm, "ss:f/1", TVM_TP_FALSE, TVM_TP_LOCAL, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
}

/* Two sessions call-trace one function with plain specs: each gets its
 * own call (one with the arity, which takes the general emitter) and
 * the return_trace one its return_from. */
Test(sessions, two_plain_call_traces_on_one_function)
{
    load_ok(vm, "ss", ss_src);
    Lines *la = lines_new(), *lb = lines_new();
    tvm_session a = session("a", la, NULL), b = session("b", lb, NULL);
    tp(a, "ss:f/1", "[{'_',[],[{return_trace}]}]", TVM_TP_TRUE, TVM_TP_LOCAL);
    tp(b, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    new_flags(a, TVM_TRACE_CALL | TVM_TRACE_ARITY, true);
    new_flags(b, TVM_TRACE_CALL, true);
    tvm_pid p = run1("g", 4);
    char want[512];
    snprintf(want, sizeof want,
             "{trace,<0.%llu.0>,call,{ss,f,1}}\n{trace,<0.%llu.0>,return_from,{ss,f,1},5}\n",
             (unsigned long long)p, (unsigned long long)p);
    cr_assert_str_eq(text(a, la), want);
    cr_assert_str_eq(text(b, lb), fmt("{trace,<0.%llu.0>,call,{ss,f,[4]}}\n", p));
}

/* call_count in two sessions on one function: each counts every call;
 * restarting one leaves the other's count. */
Test(sessions, call_counts_in_two_sessions)
{
    load_ok(vm, "ss", ss_src);
    Lines *la = lines_new(), *lb = lines_new();
    tvm_session a = session("a", la, NULL), b = session("b", lb, NULL);
    tp(a, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_CALL_COUNT);
    tp(b, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_CALL_COUNT);
    int64_t args[2] = { 100, 1 };
    run("loop", 2, args);
    int64_t ca = -1, cb = -1;
    cr_assert_eq(tvm_session_call_count(vm, a, "ss:f/1", &ca), TVM_OK);
    cr_assert_eq(tvm_session_call_count(vm, b, "ss:f/1", &cb), TVM_OK);
    cr_assert_eq(ca, 100);
    cr_assert_eq(cb, 100);
    tp(a, "ss:f/1", NULL, TVM_TP_RESTART, TVM_TP_CALL_COUNT);
    run("loop", 2, args);
    cr_assert_eq(tvm_session_call_count(vm, a, "ss:f/1", &ca), TVM_OK);
    cr_assert_eq(tvm_session_call_count(vm, b, "ss:f/1", &cb), TVM_OK);
    cr_assert_eq(ca, 100);
    cr_assert_eq(cb, 200);
    cr_assert_eq(tvm_call_count(vm, "ss:f/1", &ca), TVM_ERR_NOTFOUND, "the default has none");
    cr_assert_eq(tvm_session_destroy(vm, a, NULL), TVM_OK);
    run("loop", 2, args);
    cr_assert_eq(tvm_session_call_count(vm, b, "ss:f/1", &cb), TVM_OK);
    cr_assert_eq(cb, 300);
}

/* A session's local call trace switched on and off without a spec (the
 * plain step of bp_pattern.c, which writes the session's entry and the
 * summary's session itself) reports to that session only; on a function
 * another session traces too, it takes the general way and leaves the
 * other's entry. */
Test(sessions, plain_toggles_of_one_session_keep_the_other)
{
    load_ok(vm, "ss", ss_src);
    Lines *la = lines_new(), *lb = lines_new();
    tvm_session a = session("a", la, NULL), b = session("b", lb, NULL);
    /* b's flags alone first: a hit then takes the one-session fast path,
     * which reads the summary's session (BpGen.call_sid) */
    new_flags(b, TVM_TRACE_CALL, true);
    tp(b, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    tvm_pid p1 = run1("g", 1);
    tp(b, "ss:f/1", NULL, TVM_TP_FALSE, TVM_TP_LOCAL);
    run1("g", 2);
    /* on again over the idle record: b's, not the default session's */
    tp(b, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    tvm_pid p3 = run1("g", 3);
    cr_assert_str_eq(info(b, "ss:f/1", "traced"), "{traced,local}");
    cr_assert_str_eq(info(TVM_SESSION_DEFAULT, "ss:f/1", "traced"), "{traced,false}");
    /* a's entry beside b's: b's toggles leave it */
    new_flags(a, TVM_TRACE_CALL, true);
    tp(a, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    tp(b, "ss:f/1", NULL, TVM_TP_FALSE, TVM_TP_LOCAL);
    tvm_pid p4 = run1("g", 4);
    tp(b, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    tvm_pid p5 = run1("g", 5);
    tp(a, "ss:f/1", NULL, TVM_TP_FALSE, TVM_TP_LOCAL);
    tvm_pid p6 = run1("g", 6);
    cr_assert_str_eq(info(a, "ss:f/1", "traced"), "{traced,false}");
    char want[512];
    snprintf(want, sizeof want,
             "{trace,<0.%llu.0>,call,{ss,f,[4]}}\n{trace,<0.%llu.0>,call,{ss,f,[5]}}\n",
             (unsigned long long)p4, (unsigned long long)p5);
    cr_assert_str_eq(text(a, la), want);
    snprintf(want, sizeof want,
             "{trace,<0.%llu.0>,call,{ss,f,[1]}}\n{trace,<0.%llu.0>,call,{ss,f,[3]}}\n"
             "{trace,<0.%llu.0>,call,{ss,f,[5]}}\n{trace,<0.%llu.0>,call,{ss,f,[6]}}\n",
             (unsigned long long)p1, (unsigned long long)p3, (unsigned long long)p5,
             (unsigned long long)p6);
    cr_assert_str_eq(text(b, lb), want);
}

/* The count of session s on ss:f/1, or -1 when it has none. */
static int64_t count_of(tvm_session s)
{
    int64_t n = -1;
    tvm_status st = tvm_session_call_count(vm, s, "ss:f/1", &n);
    cr_assert(st == TVM_OK || st == TVM_ERR_NOTFOUND, "status %d", (int)st);
    return st == TVM_OK ? n : -1;
}

/* Runs loop(n, 0): n calls of ss:f/1. */
static void calls(int64_t n)
{
    int64_t args[2] = { n, 0 };
    run("loop", 2, args);
}

/* One function's entries go from one (in the record) to two and three
 * (an array of their own, grown and kept ordered by slot), then back to
 * two and one as sessions leave from the middle and the front, and to
 * two again: every session keeps exactly its own counter and its call
 * trace through each move. */
Test(sessions, entries_grow_and_shrink_around_one_function)
{
    load_ok(vm, "ss", ss_src);
    Lines *la = lines_new(), *lb = lines_new(), *lc = lines_new();
    tvm_session a = session("a", la, NULL), b = session("b", lb, NULL),
                c = session("c", lc, NULL);
    tp(a, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_CALL_COUNT);
    calls(3);
    tp(b, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_CALL_COUNT);
    calls(2);
    tp(c, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_CALL_COUNT | TVM_TP_LOCAL);
    new_flags(c, TVM_TRACE_CALL | TVM_TRACE_ARITY, true);
    calls(4);
    cr_assert_eq(count_of(a), 9);
    cr_assert_eq(count_of(b), 6);
    cr_assert_eq(count_of(c), 4);
    cr_assert_str_eq(info(c, "ss:f/1", "traced"), "{traced,local}");
    cr_assert_str_eq(info(b, "ss:f/1", "traced"), "{traced,false}");
    /* b, in the middle, leaves: three entries become two */
    tp(b, "ss:f/1", NULL, TVM_TP_FALSE, TVM_TP_CALL_COUNT);
    calls(1);
    cr_assert_eq(count_of(a), 10);
    cr_assert_eq(count_of(b), -1);
    cr_assert_eq(count_of(c), 5);
    /* a, at the front, leaves: c's entry moves into the record */
    tp(a, "ss:f/1", NULL, TVM_TP_FALSE, TVM_TP_CALL_COUNT);
    calls(2);
    cr_assert_eq(count_of(a), -1);
    cr_assert_eq(count_of(c), 7);
    cr_assert_str_eq(info(c, "ss:f/1", "traced"), "{traced,local}");
    /* b again, with a new counter: two entries, b's first by slot */
    tp(b, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_CALL_COUNT);
    calls(3);
    cr_assert_eq(count_of(a), -1);
    cr_assert_eq(count_of(b), 3);
    cr_assert_eq(count_of(c), 10);
    /* c's call trace saw every call from its start, in four processes */
    tvm_session_flush(vm, c);
    cr_assert_eq(lc->n, 10, "%s", lc->buf);
    cr_assert_eq(la->n, 0);
    cr_assert_eq(lb->n, 0);
    int lines = 0;
    for (const char *at = lc->buf; *at; at = strchr(at, '\n') + 1, lines++) {
        unsigned long long pid = 0;
        int end = -1;
        sscanf(at, "{trace,<0.%llu.0>,call,{ss,f,1}}%n", &pid, &end);
        cr_assert(end > 0 && at[end] == '\n' && pid != 0, "line %d: %s", lines, at);
    }
    cr_assert_eq(lines, 10);
}

/* ==== a stop while the sink stalls ==== */

/* A sink that holds its collector at its first event until the test
 * opens the gate, then keeps every line in `l`. */
typedef struct Gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool open;
    Lines *l;
} Gate;

static void gated(const tvm_trace_event *ev, void *data)
{
    Gate *g = data;
    pthread_mutex_lock(&g->lock);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
    keep(ev, g->l);
}

static void gate_open(Gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* Another thread's change of code: b's trace_pattern, then a load. */
typedef struct Other {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    tvm_session b;
    tvm_status tp, load;
    bool done;
} Other;

static void *other_main(void *arg)
{
    Other *o = arg;
    static const char src[] = "module ss2\nexport k/0\nfunction k/0 regs 1\n"
                              "    loadk r0, 0\n    ret r0\nend\n";
    tvm_status tps = tvm_session_trace_pattern(vm, o->b, "ss:g/1", NULL, TVM_TP_TRUE,
                                               TVM_TP_GLOBAL, 0, NULL, NULL);
    tvm_status ld = tvm_load_string(vm, "ss2", src, strlen(src), NULL);
    pthread_mutex_lock(&o->lock);
    o->tp = tps;
    o->load = ld;
    o->done = true;
    pthread_cond_broadcast(&o->cond);
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

/* Whether o finished within ten seconds (generous: it needs no event). */
static bool other_done(Other *o)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&o->lock);
    while (!o->done && pthread_cond_timedwait(&o->cond, &o->lock, &ts) == 0)
        ;
    bool done = o->done;
    pthread_mutex_unlock(&o->lock);
    return done;
}

/* Whether the default session's flags for new processes were cleared
 * within ten seconds (generous): its stopper has taken the permission and
 * is past step 3 (bp_session.c). */
static bool new_flags_cleared(void)
{
    for (int i = 0; i < 2000; i++) {
        if (tvm_trace_flags_new(vm) == 0)
            return true;
        usleep(5000);
    }
    return false;
}

/* The events that fill the shared ring (4 KiB) while the sink holds the
 * first one: exactly 113 calls of f from a call context fit, which leaves
 * no room for the last record (the test checks that it found none).  Were
 * the records smaller, the test would say so; were they larger, the
 * call would wait for room, online, and the test would time out. */
#define SS_FILL 113

/*
 * A session that reaches its limit while its sink stalls, under the
 * lossless policy, with its last record finding the shared ring full: its
 * stopper must not hold the code-modification permission while it waits,
 * so another session's trace_pattern and a load complete before the sink
 * moves (they waited for it before the fix).  Once the sink moves, the
 * session gets every event and then its last record, nothing lost.
 */
Test(sessions, a_stalled_sink_does_not_hold_code_changes)
{
    load_ok(vm, "ss", ss_src);
    static Gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    g.l = lines_new();
    Lines *lb = lines_new();
    tvm_session b = session("b", lb, NULL);
    tvm_error err;
    /* The default session: the one that traces call contexts, whose
     * events go into the shared ring, where the last record goes too. */
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK,
                            .callback = gated, .callback_data = &g, .ring_bytes = 4096,
                            .policy = TVM_TRACE_LOSSLESS, .max_events = SS_FILL };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_pattern(vm, "ss:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_trace_flags(env, 0, TVM_TRACE_CALL, true), TVM_OK);
    /* Only so that the stop's step 3 can be seen (no process is spawned). */
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    tvm_term a[2], r;
    cr_assert_eq(tvm_make_int(env, SS_FILL, &a[0]), TVM_OK);
    cr_assert_eq(tvm_make_int(env, 1, &a[1]), TVM_OK);
    cr_assert_eq(tvm_call(env, "ss", "loop", 2, a, &r), TVM_OK);
    if (!new_flags_cleared()) {
        gate_open(&g);    /* else the fixture's teardown waits for the sink */
        cr_assert_fail("the stopper never cleared the flags");
    }
    static Other other = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    other.b = b;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, other_main, &other), 0);
    if (!other_done(&other)) {
        gate_open(&g);
        pthread_join(th, NULL);
        cr_assert_fail("a code change waited for another session's stalled sink");
    }
    pthread_join(th, NULL);
    /* Its stop is owed, not done: the last record did not fit (with more
     * room this test would not test the wait). */
    tvm_session_info in;
    cr_assert_eq(tvm_session_info_get(vm, TVM_SESSION_DEFAULT, &in), TVM_OK);
    bool live = in.live;
    gate_open(&g);
    cr_assert(live, "the last record found room: SS_FILL no longer fills the ring");
    cr_assert_str_eq(in.stopped, "max_events");
    cr_assert_eq(other.tp, TVM_OK);
    cr_assert_eq(other.load, TVM_OK);
    cr_assert_str_eq(info(b, "ss:g/1", "traced"), "{traced,global}");
    in = wait_stopped(TVM_SESSION_DEFAULT);
    cr_assert_str_eq(in.stopped, "max_events");
    cr_assert_eq(in.written, SS_FILL);
    cr_assert_eq(in.lost, 0);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    /* Every call, in order, then the last record. */
    char want[SS_FILL * 40 + 64];
    size_t n = 0;
    for (int i = 1; i <= SS_FILL; i++)
        n += (size_t)snprintf(want + n, sizeof want - n, "{trace,<0.0.0>,call,{ss,f,[%d]}}\n", i);
    snprintf(want + n, sizeof want - n, "{trace_stopped,max_events,%d,0}\n", SS_FILL);
    cr_assert_str_eq(g.l->buf, want);
}

/* trace:session_create/3 from VM code with the atom table full (2^20
 * atoms, for the whole OS process: Criterion runs each test in one of its
 * own).  A session makes no atom: its name is one already, and its
 * handle's tag, its last message's tag and its stop reasons are the
 * VM's own, predefined.  Before, the native published the session and
 * then interned trace_session, whose failure raised system_limit with
 * the session left live (until its tracer exited), and a session that
 * ended wrote no last record (its reason was interned too): its tracer
 * got no message, its pipeline no record. */
static const char *const sa_src =
    "module sa\n"
    "export create/1, destroy/1\n"
    /* create(Tracer): the session, or {Class, Reason} of what it raised */
    "function create/1 regs 6\n"
    "    move r1, r0\n"
    "    loadk r0, full_table\n"
    "    loadk r2, []\n"
    "    try r3, caught\n"
    "    callx r0, r0, trace:session_create/3\n"
    "    endtry\n"
    "    ret r0\n"
    "caught:\n"
    "    tuple r0, 2, r3\n"
    "    ret r0\n"
    "end\n"
    "function destroy/1 regs 1\n"
    "    callx r0, r0, trace:session_destroy/1\n"
    "    ret r0\n"
    "end\n";

/* Loads ss and module `name` (src), and spawns an ss:waiter(). */
static tvm_pid load_and_wait(const char *name, const char *src)
{
    load_ok(vm, "ss", ss_src);
    load_ok(vm, name, src);
    tvm_pid w;
    cr_assert_eq(tvm_spawn(env, "ss", "waiter", 0, NULL, &w), TVM_OK);
    return w;
}

Test(sessions, session_create_from_vm_code_with_the_atom_table_full)
{
    tvm_pid tracer = load_and_wait("sa", sa_src);
    fill_atom_table();
    tvm_term t, r;
    char got[128], want[128];
    cr_assert_eq(tvm_make_pid(env, tracer, &t), TVM_OK);
    cr_assert_eq(tvm_call(env, "sa", "create", 1, &t, &r), TVM_OK);
    tvm_format_term(env, r, got, sizeof got);
    cr_assert(strncmp(got, "{trace_session,", 15) == 0, "%s", got);
    cr_assert_eq(tr_sessions_live(vm), 2, "%s", got);
    /* It works, and it ends with its last message to its tracer. */
    cr_assert_eq(tvm_call(env, "sa", "destroy", 1, &r, &t), TVM_OK);
    tvm_format_term(env, t, want, sizeof want);
    cr_assert_str_eq(want, "true");
    cr_assert_eq(tr_sessions_live(vm), 1);
    cr_assert_eq(tvm_join(env, tracer, &t), TVM_OK);
    snprintf(want, sizeof want, "{trace_stopped,%s,destroyed,0,0}", got);
    tvm_format_term(env, t, got, sizeof got);
    cr_assert_str_eq(got, want);
    /* A session with a pipeline writes its last record too (it was
     * dropped: its reason was interned). */
    Lines *l = lines_new();
    tvm_session c = session("c", l, NULL);
    cr_assert_eq(tvm_session_destroy(vm, c, NULL), TVM_OK);
    cr_assert_str_eq(l->buf, "{trace_stopped,destroyed,0,0}\n");
    /* The VM runs on; still no new atom. */
    cr_assert_eq(tvm_make_atom(env, "brand_new", &t), TVM_ERR_LIMIT);
}

/* ==== tvm_trace_stop while the sink stalls ==== */

/* A call on a thread of its own, whose end the test can wait for
 * (bounded) or peek at. */
typedef struct Job {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void (*fn)(struct Job *);
    tvm_status st[4];          /* what fn's calls returned, in order */
    const tvm_trace_options *o;
    tvm_session sess;          /* changes_job: whose trace_pattern */
    tvm_vm *vm;                /* destroy_job: which VM */
    bool done;
    pthread_t th;
} Job;

static void *job_main(void *arg)
{
    Job *j = arg;
    j->fn(j);    /* writes st[] before done, under the lock below */
    pthread_mutex_lock(&j->lock);
    j->done = true;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

static void job_start(Job *j, void (*fn)(Job *), const tvm_trace_options *o)
{
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->cond, NULL);
    j->fn = fn;
    j->o = o;
    j->done = false;
    cr_assert_eq(pthread_create(&j->th, NULL, job_main, j), 0);
}

/* Whether j finished within `secs` seconds (0: whether it has). */
static bool job_done(Job *j, int secs)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += secs;
    pthread_mutex_lock(&j->lock);
    while (!j->done && secs && pthread_cond_timedwait(&j->cond, &j->lock, &ts) == 0)
        ;
    bool done = j->done;
    pthread_mutex_unlock(&j->lock);
    return done;
}

static void destroy_job(Job *j)
{
    tvm_destroy(j->vm);
}

static void stop_job(Job *j)
{
    j->st[0] = tvm_trace_stop(vm);
}

static void start_job(Job *j)
{
    j->st[0] = tvm_trace_start(vm, j->o, NULL);
}

/* Code changes of every kind: a trace_pattern in j->sess, a load, a
 * session's start and stop (its sink j->o's). */
static void changes_job(Job *j)
{
    static const char src[] = "module ss2\nexport k/0\nfunction k/0 regs 1\n"
                              "    loadk r0, 0\n    ret r0\nend\n";
    j->st[0] = tvm_session_trace_pattern(vm, j->sess, "ss:g/1", NULL, TVM_TP_TRUE,
                                         TVM_TP_GLOBAL, 0, NULL, NULL);
    j->st[1] = tvm_load_string(vm, "ss2", src, strlen(src), NULL);
    tvm_session c;
    j->st[2] = tvm_session_create(vm, "c", j->o, &c, NULL);
    j->st[3] = j->st[2] == TVM_OK ? tvm_session_destroy(vm, c, NULL) : TVM_ERR_NOTFOUND;
}

/* Whether a tvm_trace_stop (or a destroy) unpublished v's default
 * session's pipeline within ten seconds (generous).  White-box: every
 * call of the API that could tell takes the code-modification
 * permission, which the stop held throughout before the fix. */
static bool default_unpublished_of(tvm_vm *v)
{
    TrSession *d = tr_session_at(v, 0);
    for (int i = 0; i < 2000; i++) {
        if (!vm_atomic_load_ptr_acquire(&d->out))
            return true;
        usleep(5000);
    }
    return false;
}

static bool default_unpublished(void)
{
    return default_unpublished_of(vm);
}

/* The default session's pipeline, with the gated sink, lossless, the
 * shared ring (4 KiB) full of SS_FILL calls from a call context: nothing
 * drains until the gate opens. */
static void fill_default_of(tvm_vm *v, tvm_env *e, Gate *g, uint64_t max_events)
{
    tvm_error err;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK,
                            .callback = gated, .callback_data = g, .ring_bytes = 4096,
                            .policy = TVM_TRACE_LOSSLESS, .max_events = max_events };
    cr_assert_eq(tvm_trace_start(v, &o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_pattern(v, "ss:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_trace_flags(e, 0, TVM_TRACE_CALL, true), TVM_OK);
    tvm_term a[2], r;
    cr_assert_eq(tvm_make_int(e, SS_FILL, &a[0]), TVM_OK);
    cr_assert_eq(tvm_make_int(e, 1, &a[1]), TVM_OK);
    cr_assert_eq(tvm_call(e, "ss", "loop", 2, a, &r), TVM_OK);
}

static void fill_default(Gate *g, uint64_t max_events)
{
    fill_default_of(vm, env, g, max_events);
}

/*
 * Starts a tvm_trace_stop (stop) and, once it unpublished the pipeline,
 * code changes (changes: a trace_pattern in `sess`, a session whose sink
 * is lc), which must complete within ten seconds (generous: they need no
 * event) while g holds the sink.  On failure the gate opens first, so
 * the teardown does not wait for the sink.
 */
static void stop_while_changing(Gate *g, Job *stop, Job *changes, tvm_session sess, Lines *lc)
{
    static tvm_trace_options oc;
    oc = (tvm_trace_options){ .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK,
                              .callback = keep, .callback_data = lc };
    job_start(stop, stop_job, NULL);
    if (!default_unpublished()) {
        gate_open(g);
        pthread_join(stop->th, NULL);
        cr_assert_fail("tvm_trace_stop never unpublished the pipeline");
    }
    changes->sess = sess;
    job_start(changes, changes_job, &oc);
    if (!job_done(changes, 10)) {
        gate_open(g);
        pthread_join(changes->th, NULL);
        pthread_join(stop->th, NULL);
        cr_assert_fail("a code change waited for tvm_trace_stop's stalled sink");
    }
    pthread_join(changes->th, NULL);
}

/* The SS_FILL calls as the gated sink keeps them, then `last`. */
static const char *filled(const char *last)
{
    static char want[SS_FILL * 40 + 64];
    size_t n = 0;
    for (int i = 1; i <= SS_FILL; i++)
        n += (size_t)snprintf(want + n, sizeof want - n, "{trace,<0.0.0>,call,{ss,f,[%d]}}\n", i);
    snprintf(want + n, sizeof want - n, "%s", last);
    return want;
}

/*
 * tvm_trace_stop of the default session while its sink stalls (lossless,
 * a callback that blocks, its ring full): the stop waits for its own
 * sink, but code changes of every kind in other threads complete before
 * the sink moves (they waited for it before the fix: the stop drained the
 * pipeline holding the code-modification permission).  Meanwhile the
 * session's counts are exact, and a tvm_trace_start waits for the stop
 * (it cannot finish while the sink is held) and then starts a new
 * pipeline.  Once the sink moves every event arrives, the stop returns
 * TVM_OK and the new pipeline traces.
 */
Test(sessions, trace_stop_drains_a_stalled_sink_without_the_permission, .timeout = 60)
{
    load_ok(vm, "ss", ss_src);
    static Gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    g.l = lines_new();
    Lines *l2 = lines_new(), *lc = lines_new();
    fill_default(&g, 0);
    static Job stop, changes, start;
    /* live: no limit stopped it */
    stop_while_changing(&g, &stop, &changes, TVM_SESSION_DEFAULT, lc);
    tvm_session_info in;
    tvm_status ist = tvm_session_info_get(vm, TVM_SESSION_DEFAULT, &in);
    tvm_trace_options o2 = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK,
                             .callback = keep, .callback_data = l2 };
    job_start(&start, start_job, &o2);
    /* Neither can finish while the sink is held: the stop drains into
     * it, the start waits for the stop.  (The start is given a second:
     * one that did not wait would be done by then, one that waits never
     * is, however slow the machine.) */
    bool start_early = job_done(&start, 1);
    bool stop_early = job_done(&stop, 0);
    gate_open(&g);
    pthread_join(stop.th, NULL);
    pthread_join(start.th, NULL);
    cr_assert(!stop_early, "the stop returned before its sink took the events");
    cr_assert(!start_early, "the start did not wait for the stop");
    cr_assert_eq(changes.st[0], TVM_OK);
    cr_assert_eq(changes.st[1], TVM_OK);
    cr_assert_eq(changes.st[2], TVM_OK);
    cr_assert_eq(changes.st[3], TVM_OK);
    cr_assert_eq(ist, TVM_OK);
    cr_assert_eq(in.written, SS_FILL, "written while the stop drains: %llu",
                 (unsigned long long)in.written);
    cr_assert_eq(in.lost, 0);
    cr_assert_eq(stop.st[0], TVM_OK);
    cr_assert_eq(start.st[0], TVM_OK);
    cr_assert_str_eq(g.l->buf, filled(""));
    /* The new pipeline traces, the pattern kept across the restart. */
    tvm_term a, r;
    cr_assert_eq(tvm_make_int(env, 5, &a), TVM_OK);
    cr_assert_eq(tvm_call(env, "ss", "f", 1, &a, &r), TVM_OK);
    cr_assert_str_eq(text(TVM_SESSION_DEFAULT, l2), "{trace,<0.0.0>,call,{ss,f,[5]}}\n");
    /* The new run's counts only (the old pipeline's were added before
     * the restart reset them). */
    cr_assert_eq(tvm_session_info_get(vm, TVM_SESSION_DEFAULT, &in), TVM_OK);
    cr_assert_eq(in.written, 1);
    cr_assert_eq(in.lost, 0);
    cr_assert_str_eq(info(TVM_SESSION_DEFAULT, "ss:g/1", "traced"), "{traced,global}");
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    cr_assert_eq(tvm_trace_stop(vm), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(lc->buf, "{trace_stopped,destroyed,0,0}\n");
}

/*
 * The same when the session reached max_events and its stopper could not
 * write the last record (the ring is full: it retries every 10 ms): the
 * tvm_trace_stop that comes first writes it, waiting for room, without
 * the permission (it waited holding it before the fix).  Every event,
 * then the last record, exactly once; the counts exact.
 */
Test(sessions, trace_stop_owing_the_last_record_holds_no_code_change, .timeout = 60)
{
    load_ok(vm, "ss", ss_src);
    static Gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    g.l = lines_new();
    Lines *lb = lines_new(), *lc = lines_new();
    /* The default session refuses trace_pattern once a limit stopped it:
     * the change goes to another session. */
    tvm_session b = session("b", lb, NULL);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    fill_default(&g, SS_FILL);
    if (!new_flags_cleared()) {
        gate_open(&g);
        cr_assert_fail("the stopper never cleared the flags");
    }
    static Job stop, changes;
    stop_while_changing(&g, &stop, &changes, b, lc);
    /* Counted exactly while the stop waits to write the last record. */
    tvm_session_info in;
    tvm_status ist = tvm_session_info_get(vm, TVM_SESSION_DEFAULT, &in);
    bool stop_early = job_done(&stop, 0);
    gate_open(&g);
    pthread_join(stop.th, NULL);
    cr_assert(!stop_early, "the stop returned before its sink took the events");
    for (int i = 0; i < 4; i++)
        cr_assert_eq(changes.st[i], TVM_OK, "change %d: %d", i, (int)changes.st[i]);
    cr_assert_eq(ist, TVM_OK);
    cr_assert_eq(in.written, SS_FILL, "written while the stop waits: %llu",
                 (unsigned long long)in.written);
    cr_assert_eq(in.lost, 0);
    cr_assert_eq(stop.st[0], TVM_OK);
    cr_assert_str_eq(g.l->buf, filled(fmt("{trace_stopped,max_events,%llu,0}\n", SS_FILL)));
    in = wait_stopped(TVM_SESSION_DEFAULT);
    cr_assert_str_eq(in.stopped, "max_events");
    cr_assert_eq(in.written, SS_FILL);
    cr_assert_eq(in.lost, 0);
    cr_assert_eq(tvm_trace_stop(vm), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(info(b, "ss:g/1", "traced"), "{traced,global}");
    cr_assert_str_eq(lc->buf, "{trace_stopped,destroyed,0,0}\n");
    cr_assert_eq(lb->n, 0);
}

/*
 * A VM destroyed while a session's stopper owes its last record (a limit
 * reached, the record finding the shared ring full while the sink
 * stalls: the stopper retries every 10 ms) still writes it: the stopper
 * quits first (tvm_destroy stops the breakpoint layer before the trace
 * layer), and the trace layer's tear-down drained the pipeline without
 * it before the fix (the 113 calls arrived, the record never did).
 */
Test(sessions, a_destroy_writes_the_last_record_the_stopper_owes, .timeout = 60)
{
    tvm_vm *v = tvm_new(&two_scheds);
    tvm_env *e = tvm_env_new(v);
    load_ok(v, "ss", ss_src);
    static Gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    g.l = lines_new();
    /* Only so that the stop's step 3 can be seen (no process is spawned). */
    cr_assert_eq(tvm_trace_flags_all(v, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    fill_default_of(v, e, &g, SS_FILL);
    int i = 0;
    while (tvm_trace_flags_new(v) != 0 && i++ < 2000)
        usleep(5000);
    if (tvm_trace_flags_new(v) != 0) {
        gate_open(&g);
        cr_assert_fail("the stopper never cleared the flags");
    }
    tvm_session_info in;
    cr_assert_eq(tvm_session_info_get(v, TVM_SESSION_DEFAULT, &in), TVM_OK);
    bool live = in.live;
    tvm_env_free(e);
    static Job d;
    d.vm = v;
    /* The destroy cannot end while the gate holds the sink (the drain
     * waits for it), so v is still there for default_unpublished. */
    job_start(&d, destroy_job, NULL);
    bool unpublished = default_unpublished_of(v);
    bool early = job_done(&d, 0);
    gate_open(&g);
    pthread_join(d.th, NULL);
    cr_assert(live, "the last record found room: SS_FILL no longer fills the ring");
    cr_assert(unpublished, "the destroy never unpublished the pipeline");
    cr_assert(!early, "the destroy returned before its sink took the events");
    cr_assert_str_eq(g.l->buf, filled(fmt("{trace_stopped,max_events,%llu,0}\n", SS_FILL)));
}

/* ==== every event kind to a tracer process on a full atom table ==== */

/* The tags of the messages a tracer process gets ("spawn", "in",
 * "'receive'", "backtrace", ...) were interned at each delivery: on a full
 * table the ones not predefined came out as undefined. */
static const char *const sf_src =
    "module sf\n"
    "export mk/1, collect/1, worker/0, bad/0\n"
    /* mk(Tracer): a session whose tracer is Tracer */
    "function mk/1 regs 3\n"
    "    move r1, r0\n    loadk r0, kinds\n    loadk r2, []\n"
    "    callx r0, r0, trace:session_create/3\n    ret r0\nend\n"
    /* collect(Acc): every message until stop, oldest first */
    "function collect/1 regs 4\n"
    "top:\n    recv r1, none\n    accept\n    loadk r2, stop\n    jeq r1, r2, done\n"
    "    cons r0, r1, r0\n    jump top\n"
    "none:\n    loadk r3, infinity\n    wait r3, never\n    jump top\n"
    "never:\n    ret r3\n"
    "done:\n    callx r0, r0, lists:reverse/1\n    ret r0\nend\n"
    "function bad/0 regs 2\n    loadk r0, error\n    loadk r1, oops\n    raise r0, r1\nend\n"
    /* worker(): after go, a collection (gc_major_start, gc_major_end), h(1) (call, return_from, return_to), g(2)
     * (backtrace), bad() caught (exception_from), spawns a waiter
     * (spawn), sends itself hi and takes it (send, receive), exits */
    "function worker/0 regs 6\n"
    "w1:\n    recv r0, n1\n    accept\n    jump go\n"
    "n1:\n    loadk r1, infinity\n    wait r1, t1\n    jump w1\n"
    "t1:\n    jump w1\n"
    "go:\n    callx r0, r0, erlang:garbage_collect/0\n    loadi r0, 1\n    callx r0, r0, ss:h/1\n"
    "    loadi r0, 2\n    callx r0, r0, ss:g/1\n"
    "    try r2, caught\n    callx r0, r0, sf:bad/0\n    endtry\n"
    "caught:\n"
    "    loadk r0, ss\n    loadk r1, waiter\n    loadk r2, []\n"
    "    callx r0, r0, erlang:spawn/3\n"
    "    self r0\n    loadk r1, hi\n    callx r0, r0, erlang:send/2\n"
    "w2:\n    recv r0, n2\n    accept\n    loadi r1, 1\n    wait r1, t3\n"
    "t3:\n    ret r0\n"
    "n2:\n    loadk r1, infinity\n    wait r1, t2\n    jump w2\n"
    "t2:\n    jump w2\n"
    "end\n";

static const char *pid_text(tvm_pid pid, char *buf)
{
    snprintf(buf, 32, "<0.%llu.0>", (unsigned long long)pid);
    return buf;
}

Test(sessions, a_tracer_process_gets_every_kind_on_a_full_atom_table)
{
    load_ok(vm, "ss", ss_src);
    load_ok(vm, "sf", sf_src);
    tvm_pid tracer, worker;
    char wbuf[32], kbuf[32];
    tvm_term t, r;
    cr_assert_eq(tvm_make_list(env, 0, NULL, &t), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "sf", "collect", 1, &t, &tracer), TVM_OK);
    cr_assert_eq(tvm_make_pid(env, tracer, &t), TVM_OK);
    cr_assert_eq(tvm_call(env, "sf", "mk", 1, &t, &r), TVM_OK);
    char got[4096], want[4096];
    tvm_format_term(env, r, got, sizeof got);
    tvm_session s = { 0 };
    cr_assert_eq(sscanf(got, "{trace_session,%" SCNu64 "}", &s.id), 1, "%s", got);
    tp(s, "ss:h/1", "[{'_',[],[{return_trace}]}]", TVM_TP_TRUE, TVM_TP_LOCAL);
    tp(s, "ss:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL);
    tp(s, "ss:g/1", "[{'_',[],[{backtrace}]}]", TVM_TP_TRUE, TVM_TP_LOCAL);
    tp(s, "sf:bad/0", "[{'_',[],[{exception_trace}]}]", TVM_TP_TRUE, TVM_TP_LOCAL);
    /* The worker has every flag from its start, its children only procs. */
    const unsigned all = TVM_TRACE_CALL | TVM_TRACE_RETURN_TO | TVM_TRACE_PROCS |
                         TVM_TRACE_SEND | TVM_TRACE_RECEIVE | TVM_TRACE_RUNNING |
                         TVM_TRACE_GARBAGE_COLLECTION | TVM_TRACE_EXITING;
    tvm_error err;
    cr_assert_eq(tvm_session_trace_flags_all(vm, s, TVM_TRACE_NEW, all, true, &err), TVM_OK,
                 "%s", err.message);
    cr_assert_eq(tvm_spawn(env, "sf", "worker", 0, NULL, &worker), TVM_OK);
    cr_assert_eq(tvm_session_trace_flags_all(vm, s, TVM_TRACE_NEW, all & ~TVM_TRACE_PROCS, false,
                                             &err), TVM_OK, "%s", err.message);
    wait_proc_state(vm, worker, "waiting");
    fill_atom_table();
    cr_assert_eq(tvm_make_atom(env, "ok", &t), TVM_OK);   /* predefined */
    cr_assert_eq(tvm_send(env, worker, t), TVM_OK);
    cr_assert_eq(tvm_join(env, worker, &r), TVM_OK);
    cr_assert_eq(tvm_make_atom(env, "stop", &t), TVM_OK);
    cr_assert_eq(tvm_send(env, tracer, t), TVM_OK);
    cr_assert_eq(tvm_join(env, tracer, &r), TVM_OK);
    tvm_format_term(env, r, got, sizeof got);
    /* The backtrace's native frames depend on the build: its VM frames
     * are kept, the rest cut. */
    const char *bt = "{backtrace,[{ss,g,1,7},{sf,worker,0,49},";
    char *from = strstr(got, bt), *to = from ? strstr(from, "]}}") : NULL;
    cr_assert(to, "no backtrace in %s", got);
    memmove(from + strlen(bt) + 3, to, strlen(to) + 1);
    memcpy(from + strlen(bt), "...", 3);
    snprintf(want, sizeof want,
             "[{trace,%1$s,spawned,<0.0.0>,{sf,worker,[]}},"
             "{trace,%1$s,in,{sf,worker,0}},{trace,%1$s,out,{sf,worker,0}},"
             "{trace,%1$s,in,{sf,worker,0}},{trace,%1$s,'receive',ok},"
             "{trace,%1$s,gc_major_start,[{wordsize,0},{old_heap_block_size,0},"
             "{heap_block_size,128},{mbuf_size,0},{recent_size,0},{stack_size,15},"
             "{old_heap_size,0},{heap_size,0}]},"
             "{trace,%1$s,gc_major_end,[{wordsize,0},{old_heap_block_size,0},"
             "{heap_block_size,128},{mbuf_size,0},{recent_size,0},{stack_size,15},"
             "{old_heap_size,0},{heap_size,0}]},"
             "{trace,%1$s,call,{ss,h,[1]}},{trace,%1$s,call,{ss,f,[1]}},"
             "{trace,%1$s,return_to,{ss,h,1}},{trace,%1$s,return_from,{ss,h,1},0},"
             "{trace,%1$s,return_to,{sf,worker,0}},"
             "{trace,%1$s,call,{ss,g,[2]},{backtrace,[{ss,g,1,7},{sf,worker,0,49},...]}},"
             "{trace,%1$s,call,{ss,f,[2]}},{trace,%1$s,return_to,{ss,g,1}},"
             "{trace,%1$s,return_to,{sf,worker,0}},"
             "{trace,%1$s,call,{sf,bad,[]}},{trace,%1$s,exception_from,{sf,bad,0},{error,oops}},"
             "{trace,%1$s,return_to,{sf,worker,0}},"
             "{trace,%1$s,gc_major_start,[{wordsize,172},{old_heap_block_size,0},"
             "{heap_block_size,128},{mbuf_size,0},{recent_size,0},{stack_size,16},"
             "{old_heap_size,0},{heap_size,30}]},"
             "{trace,%1$s,gc_major_end,[{wordsize,30},{old_heap_block_size,0},"
             "{heap_block_size,512},{mbuf_size,0},{recent_size,0},{stack_size,16},"
             "{old_heap_size,0},{heap_size,0}]},"
             "{trace,%1$s,spawn,%2$s,{ss,waiter,[]}},{trace,%2$s,spawned,%1$s,{ss,waiter,[]}},"
             "{trace,%1$s,send,hi,%1$s},{trace,%1$s,'receive',hi},"
             "{trace,%1$s,out,{sf,worker,0}},{trace,%1$s,in,{sf,worker,0}},"
             "{trace,%1$s,exit,normal},{trace,%1$s,out_exited,0}]",
             pid_text(worker, wbuf), pid_text(worker + 1, kbuf));
    cr_assert_str_eq(got, want);
    /* Still no new atom: the table stayed full. */
    cr_assert_eq(tvm_make_atom(env, "brand_new", &t), TVM_ERR_LIMIT);
}

/* erlang:trace_info(Pid, flags) on a full atom table names every flag:
 * the names not predefined were left out of the list before. */
static const char *const sg_src =
    "module sg\n"
    "export info/1\n"
    "function info/1 regs 2\n"
    "    loadk r1, flags\n    callx r0, r0, erlang:trace_info/2\n    ret r0\nend\n";

Test(sessions, trace_info_names_every_flag_on_a_full_atom_table)
{
    tvm_pid w = load_and_wait("sg", sg_src);
    cr_assert_eq(tvm_trace_flags(env, w, (TVM_TRACE_STRICT_MONOTONIC_TIMESTAMP << 1) - 1, true),
                 TVM_OK);
    fill_atom_table();
    tvm_term t, r;
    char got[512];
    cr_assert_eq(tvm_make_pid(env, w, &t), TVM_OK);
    cr_assert_eq(tvm_call(env, "sg", "info", 1, &t, &r), TVM_OK);
    tvm_format_term(env, r, got, sizeof got);
    cr_assert_str_eq(got, "{flags,[call,arity,timestamp,procs,return_to,silent,running,send,"
                          "'receive',set_on_spawn,set_on_first_spawn,garbage_collection,"
                          "set_on_link,set_on_first_link,exiting,monotonic_timestamp,"
                          "strict_monotonic_timestamp]}");
}
