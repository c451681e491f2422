/*
 * trace/tr_sink_api.c - the public callback format: each event handed to
 * the embedder's function as a tvm_trace_event (include/tracevm.h), with
 * its text form built by the text sink's formatter.  Runs on the
 * collector thread like every sink, so one line buffer per sink is
 * enough.
 */
#include "trace/tr_sink.h"

#include <stdlib.h>

#include "vm/atom.h"
#include "vm/common.h"

typedef struct ApiSink {
    TrSink base;
    tvm_trace_callback fn;
    void *data;
    StrBuf sb;      /* the current event's text, reused */
} ApiSink;

static void api_event(TrSink *s, const TrEvent *ev)
{
    ApiSink *a = (ApiSink *)s;
    a->sb.len = 0;
    tr_event_format(ev, tr_ts_form(ev->flags), &a->sb);
    bool mfa = ev->kind != TR_K_LOST && !(ev->flags & TR_F_NO_MFA);
    tvm_trace_event out = {
        .ts = ev->ts,
        .sched = ev->sched,
        .kind = tr_kind_name(ev->kind),
        .pid = ev->kind == TR_K_LOST ? 0 : ev->pid,
        .module = mfa ? vm_atom_name(ev->mod, NULL) : NULL,
        .function = mfa ? vm_atom_name(ev->fun, NULL) : NULL,
        .arity = mfa ? (int)ev->arity : 0,
        .text = a->sb.s,
        .lost = ev->kind == TR_K_LOST ? ev->lost : 0,
    };
    a->fn(&out, a->data);
}

static void api_close(TrSink *s)
{
    ApiSink *a = (ApiSink *)s;
    sb_free(&a->sb);
    free(a);
}

static const TrSinkOps api_ops = {
    .name = "callback",
    .event = api_event,
    .close = api_close,
};

TrSink *tr_sink_api_new(tvm_trace_callback fn, void *data)
{
    ApiSink *a = vm_calloc(1, sizeof *a);
    a->base.ops = &api_ops;
    a->fn = fn;
    a->data = data;
    sb_init(&a->sb);
    return &a->base;
}
