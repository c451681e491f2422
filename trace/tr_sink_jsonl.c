/*
 * trace/tr_sink_jsonl.c - JSON lines: one object per event, one line each,
 * for jq and log pipelines.
 *
 *   {"ts":1000,"sched":0,"pid":42,"kind":"call","mod":"fib","fun":"fib","arity":1,"args":"[10]"}
 *   {"ts":1500,"sched":0,"pid":42,"kind":"return_from","mod":"fib","fun":"fib","arity":1,"value":"55"}
 *   {"ts":1600,"sched":-1,"kind":"lost","count":17}
 *
 * ts: CLOCK_MONOTONIC ns.  sched: the scheduler whose ring carried the
 * event, -1 for the shared ring.  mod/fun are atom names (unquoted);
 * they are absent when the event has no MFA.  Payload fields (named per
 * kind, see tr_event_fields) hold terms in Erlang syntax as strings: a
 * term is richer than JSON (atoms vs strings, tuples, pids), and the text
 * form is what the other sinks print.  "truncated":true marks a payload
 * cut at the size cap.  Keys always come in this order.
 */
#include "trace/tr_sink.h"

#include <stdlib.h>

#include "trace/tr_encode.h"
#include "vm/atom.h"
#include "vm/common.h"

typedef struct JsonlSink {
    TrSink base;
    FILE *out;
    StrBuf line, vals;  /* line: lines not written yet (tr_lines_done) */
} JsonlSink;

static void put_key_str(StrBuf *sb, const char *key, const char *s, size_t n)
{
    sb_puts(sb, ",\"");
    sb_puts(sb, key);
    sb_puts(sb, "\":\"");
    tr_json_escape(sb, s, n);
    sb_putc(sb, '"');
}

static void put_atom(StrBuf *sb, const char *key, Atom a)
{
    size_t n;
    const char *s = vm_atom_name(a, &n);
    put_key_str(sb, key, s, n);
}

static void jsonl_event(TrSink *s, const TrEvent *ev)
{
    JsonlSink *j = (JsonlSink *)s;
    StrBuf *sb = &j->line;
    sb_puts(sb, "{\"ts\":");
    tr_put_u64(sb, ev->ts);
    sb_puts(sb, ",\"sched\":");
    tr_put_i64(sb, ev->sched);
    if (ev->kind == TR_K_LOST) {
        sb_printf(sb, ",\"kind\":\"lost\",\"count\":%llu}\n", (unsigned long long)ev->lost);
        tr_lines_done(&j->base, sb, j->out);
        return;
    }
    sb_puts(sb, ",\"pid\":");
    tr_put_u64(sb, ev->pid);
    sb_puts(sb, ",\"kind\":\"");
    sb_puts(sb, tr_kind_name(ev->kind));
    sb_putc(sb, '"');
    if (!(ev->flags & TR_F_NO_MFA)) {
        put_atom(sb, "mod", ev->mod);
        put_atom(sb, "fun", ev->fun);
        sb_puts(sb, ",\"arity\":");
        tr_put_u64(sb, ev->arity);
    }
    TrField f[TR_MAX_FIELDS];
    j->vals.len = 0;
    unsigned n = tr_event_fields(ev, &j->vals, f);
    for (unsigned i = 0; i < n; i++)
        put_key_str(sb, f[i].name, j->vals.s + f[i].off, f[i].len);
    if (ev->flags & TR_F_TRUNCATED)
        sb_puts(sb, ",\"truncated\":true");
    sb_puts(sb, "}\n");
    tr_lines_done(&j->base, sb, j->out);
}

static void jsonl_flush(TrSink *s)
{
    JsonlSink *j = (JsonlSink *)s;
    tr_lines_flush(&j->base, &j->line, j->out);
}

static void jsonl_close(TrSink *s)
{
    JsonlSink *j = (JsonlSink *)s;
    tr_lines_flush(&j->base, &j->line, j->out);
    sb_free(&j->line);
    sb_free(&j->vals);
    free(j);
}

static const TrSinkOps jsonl_ops = {
    .name = "jsonl",
    .event = jsonl_event,
    .flush = jsonl_flush,
    .close = jsonl_close,
};

TrSink *tr_sink_jsonl_new(FILE *out)
{
    JsonlSink *j = vm_calloc(1, sizeof *j);
    j->base.ops = &jsonl_ops;
    j->out = out;
    sb_init(&j->line);
    sb_init(&j->vals);
    return &j->base;
}
