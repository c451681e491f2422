/*
 * tests/unit/trace/test_sinks.c - every sink's exact output for the fixed
 * synthetic sequence of tr_fixture.h (a call tree, a loss, an exception,
 * scheduling, messages, a spawn, an exit, a payload cut at the cap, and a
 * call still open at the end), and text and JSON lines written in
 * batches of whole lines.  The Chrome JSON is also parsed back by
 * tests/sh/trace_chrome.sh and the CTF trace read by babeltrace2 in
 * tests/sh/trace_ctf.sh.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/trace/tr_fixture.h"

static void setup(void)
{
    vm_atoms_init();
}

TestSuite(sinks, .init = setup);

/* Runs `seq` through a sink from `make` (writing to a memory stream). */
static char *run_seq(TrSink *(*make)(FILE *), int nscheds, void (*seq)(TrSink *))
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    TrSink *s = make(f);
    TrSinkInfo info = { .nscheds = nscheds };
    if (s->ops->open)
        cr_assert_eq(s->ops->open(s, &info), 0);
    seq(s);
    s->ops->close(s);
    fclose(f);
    return text;
}

/* The fixed sequence of tr_fixture.h. */
static char *run(TrSink *(*make)(FILE *), int nscheds)
{
    return run_seq(make, nscheds, fx_sequence);
}

static TrSink *text_sink(FILE *f) { return tr_sink_text_new(f, 0); }
static TrSink *text_ts_sink(FILE *f) { return tr_sink_text_new(f, TR_TEXT_TIMESTAMPS); }
static TrSink *jsonl_sink(FILE *f) { return tr_sink_jsonl_new(f); }
static TrSink *chrome_sink(FILE *f) { return tr_sink_chrome_new(f, 1); }

Test(sinks, text)
{
    char *got = run(text_sink, 2);
    cr_expect_str_eq(got,
        "{trace,<0.42.0>,call,{fib,fib,[10]}}\n"
        "{trace,<0.42.0>,call,{fib,fib,[9]}}\n"
        "{trace,<0.7.0>,in,{m,loop,0}}\n"
        "{trace,<0.7.0>,call,{m,f,[badarg]}}\n"
        "{trace,<0.42.0>,return_from,{fib,fib,1},34}\n"
        "{trace_lost,{sched,0},3}\n"
        "{trace,<0.7.0>,exception_from,{m,f,1},{error,badarg}}\n"
        "{trace,<0.7.0>,return_to,{m,loop,0}}\n"
        "{trace,<0.42.0>,return_from,{fib,fib,1},55}\n"
        "{trace,<0.42.0>,spawn,<0.43.0>,{m,start,[1]}}\n"
        "{trace,<0.42.0>,send,{hello,<<\"hi\">>},<0.43.0>}\n"
        "{trace,<0.43.0>,'receive',{hello,<<\"hi\">>}}\n"
        "{trace,<0.7.0>,out,{m,loop,0}}\n"
        "{trace,<0.42.0>,call,{lists,seq,[<<\"0123456789abcdefghi\"...>>|...]}}\n"
        "{trace,<0.42.0>,call,{io,format,2}}\n"
        "{trace,<0.7.0>,exit,normal}\n");
    free(got);
}

Test(sinks, text_with_timestamps)
{
    char *got = run(text_ts_sink, 2);
    cr_expect_str_eq(got,
        "{trace_ts,<0.42.0>,call,{fib,fib,[10]},1000}\n"
        "{trace_ts,<0.42.0>,call,{fib,fib,[9]},1100}\n"
        "{trace_ts,<0.7.0>,in,{m,loop,0},1200}\n"
        "{trace_ts,<0.7.0>,call,{m,f,[badarg]},1300}\n"
        "{trace_ts,<0.42.0>,return_from,{fib,fib,1},34,1400}\n"
        "{trace_lost,{sched,0},3,1450}\n"
        "{trace_ts,<0.7.0>,exception_from,{m,f,1},{error,badarg},1500}\n"
        "{trace_ts,<0.7.0>,return_to,{m,loop,0},1600}\n"
        "{trace_ts,<0.42.0>,return_from,{fib,fib,1},55,1700}\n"
        "{trace_ts,<0.42.0>,spawn,<0.43.0>,{m,start,[1]},1800}\n"
        "{trace_ts,<0.42.0>,send,{hello,<<\"hi\">>},<0.43.0>,1900}\n"
        "{trace_ts,<0.43.0>,'receive',{hello,<<\"hi\">>},2000}\n"
        "{trace_ts,<0.7.0>,out,{m,loop,0},2100}\n"
        "{trace_ts,<0.42.0>,call,{lists,seq,[<<\"0123456789abcdefghi\"...>>|...]},2200}\n"
        "{trace_ts,<0.42.0>,call,{io,format,2},2300}\n"
        "{trace_ts,<0.7.0>,exit,normal,2400}\n");
    free(got);
}

Test(sinks, jsonl)
{
    char *got = run(jsonl_sink, 2);
    cr_expect_str_eq(got,
        "{\"ts\":1000,\"sched\":0,\"pid\":42,\"kind\":\"call\",\"mod\":\"fib\",\"fun\":\"fib\",\"arity\":1,\"args\":\"[10]\"}\n"
        "{\"ts\":1100,\"sched\":0,\"pid\":42,\"kind\":\"call\",\"mod\":\"fib\",\"fun\":\"fib\",\"arity\":1,\"args\":\"[9]\"}\n"
        "{\"ts\":1200,\"sched\":1,\"pid\":7,\"kind\":\"in\",\"mod\":\"m\",\"fun\":\"loop\",\"arity\":0}\n"
        "{\"ts\":1300,\"sched\":1,\"pid\":7,\"kind\":\"call\",\"mod\":\"m\",\"fun\":\"f\",\"arity\":1,\"args\":\"[badarg]\"}\n"
        "{\"ts\":1400,\"sched\":0,\"pid\":42,\"kind\":\"return_from\",\"mod\":\"fib\",\"fun\":\"fib\",\"arity\":1,\"value\":\"34\"}\n"
        "{\"ts\":1450,\"sched\":0,\"kind\":\"lost\",\"count\":3}\n"
        "{\"ts\":1500,\"sched\":1,\"pid\":7,\"kind\":\"exception_from\",\"mod\":\"m\",\"fun\":\"f\",\"arity\":1,\"class\":\"error\",\"reason\":\"badarg\"}\n"
        "{\"ts\":1600,\"sched\":1,\"pid\":7,\"kind\":\"return_to\",\"mod\":\"m\",\"fun\":\"loop\",\"arity\":0}\n"
        "{\"ts\":1700,\"sched\":0,\"pid\":42,\"kind\":\"return_from\",\"mod\":\"fib\",\"fun\":\"fib\",\"arity\":1,\"value\":\"55\"}\n"
        "{\"ts\":1800,\"sched\":-1,\"pid\":42,\"kind\":\"spawn\",\"mod\":\"m\",\"fun\":\"start\",\"arity\":1,\"child\":\"<0.43.0>\",\"args\":\"[1]\"}\n"
        "{\"ts\":1900,\"sched\":0,\"pid\":42,\"kind\":\"send\",\"msg\":\"{hello,<<\\\"hi\\\">>}\",\"to\":\"<0.43.0>\"}\n"
        "{\"ts\":2000,\"sched\":1,\"pid\":43,\"kind\":\"receive\",\"msg\":\"{hello,<<\\\"hi\\\">>}\"}\n"
        "{\"ts\":2100,\"sched\":1,\"pid\":7,\"kind\":\"out\",\"mod\":\"m\",\"fun\":\"loop\",\"arity\":0}\n"
        "{\"ts\":2200,\"sched\":0,\"pid\":42,\"kind\":\"call\",\"mod\":\"lists\",\"fun\":\"seq\",\"arity\":3,\"args\":\"[<<\\\"0123456789abcdefghi\\\"...>>|...]\",\"truncated\":true}\n"
        "{\"ts\":2300,\"sched\":0,\"pid\":42,\"kind\":\"call\",\"mod\":\"io\",\"fun\":\"format\",\"arity\":2}\n"
        "{\"ts\":2400,\"sched\":1,\"pid\":7,\"kind\":\"exit\",\"reason\":\"normal\"}\n");
    free(got);
}

Test(sinks, chrome)
{
    char *got = run(chrome_sink, 2);
    cr_expect_str_eq(got,
        "{\"traceEvents\":[\n"
        "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"tracevm\"}},\n"
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":42,\"args\":{\"name\":\"<0.42.0>\"}},\n"
        "{\"ph\":\"B\",\"pid\":1,\"tid\":42,\"ts\":0.000,\"cat\":\"call\",\"name\":\"fib:fib/1\"},\n"
        "{\"ph\":\"B\",\"pid\":1,\"tid\":42,\"ts\":0.100,\"cat\":\"call\",\"name\":\"fib:fib/1\"},\n"
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":7,\"args\":{\"name\":\"<0.7.0>\"}},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":7,\"ts\":0.200,\"s\":\"t\",\"cat\":\"in\",\"name\":\"in\",\"args\":{\"sched\":1}},\n"
        "{\"ph\":\"B\",\"pid\":1,\"tid\":7,\"ts\":0.300,\"cat\":\"call\",\"name\":\"m:f/1\"},\n"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":42,\"ts\":0.400,\"cat\":\"call\",\"name\":\"fib:fib/1\"},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":0,\"ts\":0.450,\"s\":\"g\",\"cat\":\"lost\",\"name\":\"lost\",\"args\":{\"ring\":\"sched 0\",\"count\":3}},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":7,\"ts\":0.500,\"s\":\"t\",\"cat\":\"exception_from\",\"name\":\"m:f/1\",\"args\":{\"sched\":1,\"class\":\"error\",\"reason\":\"badarg\"}},\n"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":7,\"ts\":0.500,\"cat\":\"call\",\"name\":\"m:f/1\"},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":7,\"ts\":0.600,\"s\":\"t\",\"cat\":\"return_to\",\"name\":\"return_to\",\"args\":{\"sched\":1}},\n"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":42,\"ts\":0.700,\"cat\":\"call\",\"name\":\"fib:fib/1\"},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":42,\"ts\":0.800,\"s\":\"t\",\"cat\":\"spawn\",\"name\":\"spawn\",\"args\":{\"sched\":-1,\"child\":\"<0.43.0>\",\"args\":\"[1]\"}},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":42,\"ts\":0.900,\"s\":\"t\",\"cat\":\"send\",\"name\":\"send\",\"args\":{\"sched\":0,\"msg\":\"{hello,<<\\\"hi\\\">>}\",\"to\":\"<0.43.0>\"}},\n"
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":43,\"args\":{\"name\":\"<0.43.0>\"}},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":43,\"ts\":1.000,\"s\":\"t\",\"cat\":\"receive\",\"name\":\"receive\",\"args\":{\"sched\":1,\"msg\":\"{hello,<<\\\"hi\\\">>}\"}},\n"
        /* The process's run on scheduler 1, from its in to its out. */
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":4503599627370497,\"args\":{\"name\":\"scheduler 1\"}},\n"
        "{\"ph\":\"X\",\"pid\":1,\"tid\":4503599627370497,\"ts\":0.200,\"dur\":0.900,\"cat\":\"running\",\"name\":\"<0.7.0>\"},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":7,\"ts\":1.100,\"s\":\"t\",\"cat\":\"out\",\"name\":\"out\",\"args\":{\"sched\":1}},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":42,\"ts\":1.200,\"s\":\"t\",\"cat\":\"call\",\"name\":\"lists:seq/3\",\"args\":{\"sched\":0,\"args\":\"[<<\\\"0123456789abcdefghi\\\"...>>|...]\",\"truncated\":true}},\n"
        "{\"ph\":\"B\",\"pid\":1,\"tid\":42,\"ts\":1.300,\"cat\":\"call\",\"name\":\"io:format/2\"},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":7,\"ts\":1.400,\"s\":\"t\",\"cat\":\"exit\",\"name\":\"exit\",\"args\":{\"sched\":1,\"reason\":\"normal\"}},\n"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":42,\"ts\":1.400,\"cat\":\"call\",\"name\":\"io:format/2\"}\n"
        "],\"displayTimeUnit\":\"ns\",\"otherData\":{\"lost_events\":3}}\n");
    free(got);
}

Test(sinks, chrome_is_a_whole_document_even_when_empty)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    TrSink *s = tr_sink_chrome_new(f, 5);
    s->ops->close(s);   /* never opened, no events */
    fclose(f);
    cr_expect_str_eq(text, "{\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"process_name\","
                           "\"pid\":5,\"tid\":0,\"args\":{\"name\":\"tracevm\"}}\n],"
                           "\"displayTimeUnit\":\"ns\",\"otherData\":{\"lost_events\":0}}\n");
    free(text);
}

/* The callback sink hands over decoded events; tr_event_term and
 * tr_event_format read their payloads. */
typedef struct Got {
    int n;
    char lines[FX_COUNT][160];
    char second_term[64];
} Got;

static void collect(const TrEvent *ev, void *data)
{
    Got *g = data;
    StrBuf sb;
    sb_init(&sb);
    tr_event_format(ev, TR_TS_NONE, &sb);
    snprintf(g->lines[g->n], sizeof g->lines[0], "%s", sb.s);
    if (ev->kind == TR_K_EXCEPTION_FROM) {
        sb.len = 0;
        cr_assert(tr_event_term(ev, 1, &sb));
        cr_assert(!tr_event_term(ev, 2, &sb));
        snprintf(g->second_term, sizeof g->second_term, "%s", sb.s);
    }
    sb_free(&sb);
    g->n++;
}

Test(sinks, callback)
{
    Got g = { 0 };
    TrSink *s = tr_sink_callback_new(collect, &g);
    fx_sequence(s);
    s->ops->close(s);
    cr_expect_eq(g.n, FX_COUNT);
    cr_expect_str_eq(g.lines[0], "{trace,<0.42.0>,call,{fib,fib,[10]}}");
    cr_expect_str_eq(g.lines[5], "{trace_lost,{sched,0},3}");
    cr_expect_str_eq(g.second_term, "badarg");
}

Test(sinks, ctf_writes_metadata_and_a_stream_per_ring)
{
    char dir[] = "/tmp/tr_ctf_XXXXXX", err[256], path[128];
    cr_assert(mkdtemp(dir));
    TrSink *s = tr_sink_ctf_new(dir, 0, err, sizeof err);
    cr_assert(s, "%s", err);
    TrSinkInfo info = { .nscheds = 2 };
    cr_assert_eq(s->ops->open(s, &info), 0);
    fx_sequence(s);
    s->ops->close(s);
    const char *files[] = { "metadata", "sched_0", "sched_1", "shared" };
    for (int i = 0; i < 4; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        cr_expect_eq(stat(path, &st), 0, "%s missing", files[i]);
        unlink(path);
    }
    /* A directory that is not empty is refused (stale streams would be
     * read as part of the trace). */
    snprintf(path, sizeof path, "%s/junk", dir);
    FILE *f = fopen(path, "w");
    fclose(f);
    cr_expect_null(tr_sink_ctf_new(dir, 0, err, sizeof err));
    cr_expect(strstr(err, "not empty"), "%s", err);
    unlink(path);
    rmdir(dir);
}

/* A Chrome sink writing to f, opened for one scheduler. */
static TrSink *chrome_opened(FILE *f)
{
    TrSink *s = tr_sink_chrome_new(f, 1);
    TrSinkInfo info = { .nscheds = 1 };
    cr_assert_eq(s->ops->open(s, &info), 0);
    return s;
}

/* Chrome: a return whose call is not the innermost open one closes the
 * calls above it first (their returns were lost); a return with no open
 * call of its function becomes an instant; slices close at the end. */
Test(sinks, chrome_recovers_from_lost_events)
{
    uint8_t b[6][64];
    Term v = I(1);
    TrEvent ev[] = {
        fx_event(b[0], 64, 0, 0, TR_K_CALL, TR_F_RETURNS, 5, "m", "a", 0, NULL, 0),
        fx_event(b[1], 64, 1000, 0, TR_K_CALL, TR_F_RETURNS, 5, "m", "b", 0, NULL, 0),
        fx_event(b[2], 64, 2000, 0, TR_K_CALL, TR_F_RETURNS, 5, "m", "c", 0, NULL, 0),
        fx_event(b[3], 64, 3000, 0, TR_K_RETURN_FROM, 0, 5, "m", "a", 0, &v, 1),
        fx_event(b[4], 64, 4000, 0, TR_K_RETURN_FROM, 0, 5, "m", "z", 0, &v, 1),
        fx_event(b[5], 64, 5000, 0, TR_K_CALL, TR_F_RETURNS, 5, "m", "d", 0, NULL, 0),
    };
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    TrSink *s = chrome_opened(f);
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
        s->ops->event(s, &ev[i]);
    s->ops->close(s);
    fclose(f);
    cr_expect_str_eq(text,
        "{\"traceEvents\":[\n"
        "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"tracevm\"}},\n"
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":5,\"args\":{\"name\":\"<0.5.0>\"}},\n"
        "{\"ph\":\"B\",\"pid\":1,\"tid\":5,\"ts\":0.000,\"cat\":\"call\",\"name\":\"m:a/0\"},\n"
        "{\"ph\":\"B\",\"pid\":1,\"tid\":5,\"ts\":1.000,\"cat\":\"call\",\"name\":\"m:b/0\"},\n"
        "{\"ph\":\"B\",\"pid\":1,\"tid\":5,\"ts\":2.000,\"cat\":\"call\",\"name\":\"m:c/0\"},\n"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":5,\"ts\":3.000,\"cat\":\"call\",\"name\":\"m:c/0\"},\n"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":5,\"ts\":3.000,\"cat\":\"call\",\"name\":\"m:b/0\"},\n"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":5,\"ts\":3.000,\"cat\":\"call\",\"name\":\"m:a/0\"},\n"
        "{\"ph\":\"i\",\"pid\":1,\"tid\":5,\"ts\":4.000,\"s\":\"t\",\"cat\":\"return_from\","
        "\"name\":\"m:z/0\",\"args\":{\"sched\":0,\"value\":\"1\"}},\n"
        "{\"ph\":\"B\",\"pid\":1,\"tid\":5,\"ts\":5.000,\"cat\":\"call\",\"name\":\"m:d/0\"},\n"
        "{\"ph\":\"E\",\"pid\":1,\"tid\":5,\"ts\":5.000,\"cat\":\"call\",\"name\":\"m:d/0\"}\n"
        "],\"displayTimeUnit\":\"ns\",\"otherData\":{\"lost_events\":0}}\n");
    free(text);
}

/* A call event carrying a match spec's message and a backtrace (and one
 * with the arity flag and a message only), through text, JSON lines and
 * Chrome JSON. */
static void message_events(TrSink *sink)
{
    static Arena arena;
    static uint8_t bufs[2][256];
    Arena *a = &arena;
    a->used = 0;
    Term fr[4] = { A("m"), A("f"), I(1), I(7) };
    Term tf[2] = { A("trace_frame"), T2(a, A("m"), A("g")) };
    Term frames[2] = { tuple_of(a, 4, fr), tuple_of(a, 2, tf) };
    Term t[3] = { I(5), A("hi"), list_of(a, 2, frames) };
    TrEvent ev[2];
    ev[0] = fx_event(bufs[0], 256, 1000, 0, TR_K_CALL, TR_F_MESSAGE | TR_F_BACKTRACE, 42, "m",
                     "f", 1, t, 3);
    ev[1] = fx_event(bufs[1], 256, 1100, 0, TR_K_CALL, TR_F_MESSAGE | TR_F_ARITY, 42, "m", "f",
                     1, &t[1], 1);
    for (int i = 0; i < 2; i++)
        sink->ops->event(sink, &ev[i]);
}

static char *run_messages(TrSink *(*make)(FILE *))
{
    return run_seq(make, 1, message_events);
}

Test(sinks, call_with_message_and_backtrace)
{
    char *got = run_messages(text_sink);
    cr_expect_str_eq(got, "{trace,<0.42.0>,call,{m,f,[5]},hi,{backtrace,[{m,f,1,7},{trace_frame,{m,g}}]}}\n"
                          "{trace,<0.42.0>,call,{m,f,1},hi}\n");
    free(got);
    got = run_messages(jsonl_sink);
    cr_expect_str_eq(got,
        "{\"ts\":1000,\"sched\":0,\"pid\":42,\"kind\":\"call\",\"mod\":\"m\",\"fun\":\"f\",\"arity\":1,"
        "\"args\":\"[5]\",\"message\":\"hi\",\"backtrace\":\"[{m,f,1,7},{trace_frame,{m,g}}]\"}\n"
        "{\"ts\":1100,\"sched\":0,\"pid\":42,\"kind\":\"call\",\"mod\":\"m\",\"fun\":\"f\",\"arity\":1,"
        "\"message\":\"hi\"}\n");
    free(got);
    got = run_messages(chrome_sink);
    cr_expect(strstr(got, "\"name\":\"m:f/1\",\"args\":{\"sched\":0,\"args\":\"[5]\","
                          "\"message\":\"hi\",\"backtrace\":\"[{m,f,1,7},{trace_frame,{m,g}}]\"}}")
                  != NULL, "%s", got);
    cr_expect(strstr(got, "\"args\":{\"sched\":0,\"message\":\"hi\"}}") != NULL, "%s", got);
    free(got);
}

/* Chrome: 600 functions, more than the sink's name cache holds, called
 * and returned twice over (evictions, then hits of other entries): every
 * B and E carries its own function's name, quoted as in Erlang where the
 * atom needs it. */
Test(sinks, chrome_names_past_the_cache)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    TrSink *s = chrome_opened(f);
    uint8_t buf[64];
    char fun[32];
    uint64_t ts = 0;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 600; i++) {
            snprintf(fun, sizeof fun, i % 7 ? "f%d" : "F %d", i);
            TrEvent call = fx_event(buf, sizeof buf, ts++, 0, TR_K_CALL, TR_F_RETURNS, 5, "m",
                                    fun, 0, NULL, 0);
            s->ops->event(s, &call);
            TrEvent ret = fx_event(buf, sizeof buf, ts++, 0, TR_K_RETURN_FROM, 0, 5, "m", fun, 0,
                                   NULL, 0);
            s->ops->event(s, &ret);
        }
    s->ops->close(s);
    fclose(f);
    const char *at = text;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 600; i++) {
            char want[64];
            snprintf(want, sizeof want, i % 7 ? "\"name\":\"m:f%d/0\"}" : "\"name\":\"m:'F %d'/0\"}",
                     i);
            for (int k = 0; k < 2; k++) {
                const char *next = strstr(at, k ? "{\"ph\":\"E\"" : "{\"ph\":\"B\"");
                cr_assert(next, "round %d, function %d: no %s", round, i, k ? "E" : "B");
                const char *eol = strchr(next, '\n');
                cr_assert(eol && eol - next < 200);
                char line[200];
                memcpy(line, next, (size_t)(eol - next));
                line[eol - next] = 0;
                cr_assert(strstr(line, want), "round %d, function %d: %s, want %s", round, i,
                          line, want);
                at = eol;
            }
        }
    cr_expect_null(strstr(at, "\"ph\":\"B\""));
    free(text);
}

/* An unbuffered stream (like stderr) that counts the writes it gets and
 * keeps their bytes. */
typedef struct Counted {
    int writes;
    size_t bytes;
    char last[64];
} Counted;

static ssize_t counted_write(void *c, const char *buf, size_t n)
{
    Counted *k = c;
    k->writes++;
    k->bytes += n;
    size_t tail = n < sizeof k->last - 1 ? n : sizeof k->last - 1;
    memcpy(k->last, buf + n - tail, tail);
    k->last[tail] = 0;
    return (ssize_t)n;
}

/* The Chrome sink gathers its events the same way: after the document's
 * head (written at open), nothing until a flush or 32 KiB, each write
 * ending with a whole event, and at close the rest and the document's
 * tail. */
Test(sinks, chrome_events_go_out_in_batches_and_at_flush)
{
    Counted k = { 0 };
    cookie_io_functions_t io = { .write = counted_write };
    FILE *f = fopencookie(&k, "w", io);
    cr_assert(f);
    setvbuf(f, NULL, _IONBF, 0);
    TrSink *s = chrome_opened(f);
    const int head = k.writes;
    cr_assert_gt(head, 0);
    static uint8_t buf[256];
    Term arg = I(10);
    /* An instant on pid 42's lane: the first also names the lane. */
    TrEvent ev = fx_event(buf, sizeof buf, 1000, 0, TR_K_CALL, 0, 42, "fib", "fib", 1, &arg, 1);
    for (int i = 0; i < 100; i++)
        s->ops->event(s, &ev);
    cr_assert_eq(k.writes, head, "%d writes before a flush", k.writes - head);
    s->ops->flush(s);
    cr_assert_eq(k.writes, head + 1);
    cr_assert_eq(k.last[strlen(k.last) - 1], '}', "a flush ends mid-event: %s", k.last);
    /* One more alone: ",\n" and the instant, the same bytes each time. */
    size_t before = k.bytes;
    s->ops->event(s, &ev);
    s->ops->flush(s);
    const size_t per = k.bytes - before;
    cr_assert_gt(per, 40);
    cr_assert_eq(k.writes, head + 2);
    const size_t flushed = k.bytes;
    for (int i = 0; i < 3000; i++) {
        s->ops->event(s, &ev);
        cr_assert_eq(k.last[strlen(k.last) - 1], '}', "a write ends mid-event: %s", k.last);
    }
    /* A write each time 32 KiB are gathered. */
    const size_t batch = (TR_LINES_BATCH + per - 1) / per;
    cr_assert_eq(k.writes, head + 2 + (int)(3000 / batch), "%d writes", k.writes - head - 2);
    cr_assert_eq(k.bytes, flushed + 3000 / batch * batch * per);
    s->ops->close(s);
    cr_assert_str_eq(k.last + strlen(k.last) - 3, "}}\n");
    cr_assert_gt(k.bytes, flushed);
    fclose(f);
}

/* Text and JSON lines gather their lines: into an unbuffered stream, one
 * write per 32 KiB (TR_LINES_BATCH) and one at each flush, never a write
 * per event, and never a line cut between two writes. */
Test(sinks, lines_go_out_in_batches_and_at_flush)
{
    TrSink *(*makers[2])(FILE *) = { text_sink, jsonl_sink };
    /* {trace,<0.42.0>,call,{fib,fib,[10]}}\n is 37 bytes; the JSON line
     * of the same call 93. */
    const size_t line[2] = { 37, 93 };
    for (int m = 0; m < 2; m++) {
        Counted k = { 0 };
        cookie_io_functions_t io = { .write = counted_write };
        FILE *f = fopencookie(&k, "w", io);
        cr_assert(f);
        setvbuf(f, NULL, _IONBF, 0);
        TrSink *s = makers[m](f);
        static uint8_t buf[256];
        Term arg = I(10);
        TrEvent ev = fx_event(buf, sizeof buf, 1000, 0, TR_K_CALL, 0, 42, "fib", "fib", 1, &arg, 1);
        for (int i = 0; i < 100; i++)
            s->ops->event(s, &ev);
        cr_assert_eq(k.writes, 0, "sink %d: %d writes before a flush", m, k.writes);
        s->ops->flush(s);
        cr_assert_eq(k.writes, 1, "sink %d", m);
        cr_assert_eq(k.bytes, 100 * line[m], "sink %d: %zu bytes", m, k.bytes);
        /* 3,000 more: a write each time 32 KiB are gathered, each ending
         * with a whole line. */
        size_t per = (TR_LINES_BATCH + line[m] - 1) / line[m];
        for (int i = 0; i < 3000; i++) {
            s->ops->event(s, &ev);
            cr_assert_eq(k.last[strlen(k.last) - 1], '\n', "sink %d: a write ends mid-line", m);
        }
        cr_assert_eq(k.writes, 1 + (int)(3000 / per), "sink %d: %d writes", m, k.writes);
        s->ops->close(s);
        cr_assert_eq(k.bytes, 3100 * line[m], "sink %d: %zu bytes at close", m, k.bytes);
        fclose(f);
    }
}
