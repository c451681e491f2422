/*
 * trace/tr_sink_text.c - the Erlang-like text sink: one trace message per
 * line, in the shapes BEAM's tracer receives (erlang:trace/3's messages):
 *
 *   {trace,<0.42.0>,call,{fib,fib,[10]}}
 *   {trace,<0.42.0>,call,{fib,fib,[10]},Msg}   (match spec {message, Msg})
 *   {trace,<0.42.0>,call,{fib,fib,[10]},{backtrace,[{fib,fib,1,7},...]}}
 *   {trace,<0.42.0>,return_from,{fib,fib,1},55}
 *   {trace,<0.42.0>,exception_from,{m,f,1},{error,badarg}}
 *   {trace,<0.42.0>,return_to,{m,f,1}}
 *   {trace,<0.42.0>,spawn,<0.43.0>,{m,start,[1]}}
 *   {trace,<0.42.0>,exit,normal}
 *   {trace,<0.42.0>,in,{m,loop,0}}        (out likewise; 0 for no MFA)
 *   {trace,<0.42.0>,send,hello,<0.43.0>}
 *   {trace,<0.43.0>,'receive',hello}
 *   {trace_lost,{sched,0},17}              (shared for the shared ring)
 *   {trace_stopped,max_events,10,0}        (a session's last record: why, written, lost)
 *
 * The shape of each kind's message is its text form in
 * trace/tr_events.def.
 * With a timestamp form on a record (the process's timestamp flags,
 * tr_ts_form) the tag is trace_ts and the stamp is the last element, as
 * BEAM's trace_ts appends it: {MegaSecs,Secs,MicroSecs} (timestamp),
 * the CLOCK_MONOTONIC ns (monotonic_timestamp), {Ns,Unique}
 * (strict_monotonic_timestamp).  TR_TEXT_TIMESTAMPS stamps every event
 * with its ns.
 * Payload terms cut at the size cap print as in io_lib's ~P:
 * {fib,fib,[1,2|...]}, {a,...}, <<"ab"...>>.
 */
#include "trace/tr_sink.h"

#include <stdlib.h>
#include <string.h>

#include "trace/tr_clock.h"
#include "trace/tr_encode.h"
#include "vm/common.h"
#include "vm/print.h"
#include "vm/time.h"

static void put_mfa(StrBuf *sb, const TrEvent *ev, const char *none)
{
    if (ev->flags & TR_F_NO_MFA) {
        sb_puts(sb, none);
        return;
    }
    sb_putc(sb, '{');
    vm_print_atom(sb, ev->mod);
    sb_putc(sb, ',');
    vm_print_atom(sb, ev->fun);
    sb_putc(sb, ',');
    tr_put_u64(sb, ev->arity);
    sb_putc(sb, '}');
}

/* {M,F,[Args]} from the remaining payload terms. */
static void put_mfargs(StrBuf *sb, const TrEvent *ev, const uint8_t **p,
                       const uint8_t *end, unsigned left)
{
    sb_putc(sb, '{');
    vm_print_atom(sb, ev->mod);
    sb_putc(sb, ',');
    vm_print_atom(sb, ev->fun);
    sb_puts(sb, ",[");
    tr_print_seq(sb, p, end, left, true);
    sb_puts(sb, "]}");
}

/* C: a call's message (tr_events.def). */
static void put_call(StrBuf *sb, const TrEvent *ev, const uint8_t **p, const uint8_t *end,
                     unsigned *left)
{
    unsigned extra = !!(ev->flags & TR_F_MESSAGE) + !!(ev->flags & TR_F_BACKTRACE);
    unsigned nargs = *left >= extra ? *left - extra : 0;
    if (ev->flags & TR_F_ARITY)
        put_mfa(sb, ev, "undefined");
    else
        put_mfargs(sb, ev, p, end, nargs);
    *left = extra;
    if (ev->flags & TR_F_MESSAGE) {
        sb_putc(sb, ',');
        tr_print_next(sb, p, end, left);
    }
    if (ev->flags & TR_F_BACKTRACE) {
        sb_puts(sb, ",{backtrace,");
        tr_print_next(sb, p, end, left);
        sb_putc(sb, '}');
    }
}

/* A trace_ts message's last element for an event at monotonic ns `ns`:
 * BEAM's three forms (tr_ts_form).  The system time is the monotonic
 * reading plus the offset between the two clocks, taken once
 * (tr_clock_realtime_offset). */
static void put_ts(StrBuf *sb, TrTsForm ts, uint64_t ns)
{
    switch (ts) {
    case TR_TS_NOW: {
        uint64_t us = (uint64_t)((int64_t)ns + tr_clock_realtime_offset()) / 1000;
        /* tr_put_u64, not sb_printf: printf's formatting cost 3,000
         * instructions a stamp (callgrind), more than the rest of the
         * event's text. */
        uint64_t v[3];
        vm_time_triple(us, v);
        for (int i = 0; i < 3; i++) {
            sb_putc(sb, i ? ',' : '{');
            tr_put_u64(sb, v[i]);
        }
        sb_putc(sb, '}');
        break;
    }
    case TR_TS_STRICT:
        sb_putc(sb, '{');
        tr_put_u64(sb, ns);
        int64_t u = vm_unique_integer(false);
        sb_puts(sb, u < 0 ? ",-" : ",");
        tr_put_u64(sb, u < 0 ? (uint64_t)-u : (uint64_t)u);
        sb_putc(sb, '}');
        break;
    default:
        tr_put_u64(sb, ns);
        break;
    }
}

void tr_event_format(const TrEvent *ev, TrTsForm ts, StrBuf *sb)
{
    if (ev->kind == TR_K_LOST) {
        sb_puts(sb, "{trace_lost,");
        if (ev->sched < 0)
            sb_puts(sb, "shared");
        else
            sb_printf(sb, "{sched,%d}", ev->sched);
        sb_printf(sb, ",%llu", (unsigned long long)ev->lost);
        if (ts) {
            sb_putc(sb, ',');
            put_ts(sb, ts, ev->ts);
        }
        sb_putc(sb, '}');
        return;
    }
    if ((unsigned)ev->kind >= TR_K__COUNT)
        return;
    const TrKindInfo *k = &tr_kinds[ev->kind];
    const uint8_t *p = ev->payload, *end = ev->payload + ev->paylen;
    unsigned left = ev->nterms;
    if (!strncmp(k->tag, "trace_", 6)) {
        /* A record of the session, not of a process (STOPPED). */
        sb_putc(sb, '{');
        sb_puts(sb, k->tag);
    } else {
        sb_puts(sb, ts ? "{trace_ts,<0." : "{trace,<0.");
        tr_put_u64(sb, ev->pid);
        sb_puts(sb, ".0>,");
        sb_puts(sb, k->tag);
    }
    sb_putc(sb, ',');
    /* The message's shape, letter by letter (tr_events.def). */
    for (const char *f = k->text; *f; f++) {
        switch (*f) {
        case 'M': put_mfa(sb, ev, "undefined"); break;
        case 'Z': put_mfa(sb, ev, "0"); break;
        case 'T': tr_print_next(sb, &p, end, &left); break;
        case 'R': put_mfargs(sb, ev, &p, end, left); left = 0; break;
        case 'C': put_call(sb, ev, &p, end, &left); break;
        default: sb_putc(sb, *f); break;
        }
    }
    if (ts) {
        sb_putc(sb, ',');
        put_ts(sb, ts, ev->ts);
    }
    sb_putc(sb, '}');
}

typedef struct TextSink {
    TrSink base;
    FILE *out;
    bool ts;
    StrBuf sb;      /* lines not written yet (tr_lines_done) */
} TextSink;

static void text_event(TrSink *s, const TrEvent *ev)
{
    TextSink *t = (TextSink *)s;
    /* TR_TEXT_TIMESTAMPS: every event with its monotonic ns. */
    tr_event_format(ev, t->ts ? TR_TS_MONO : tr_ts_form(ev->flags), &t->sb);
    sb_putc(&t->sb, '\n');
    tr_lines_done(&t->base, &t->sb, t->out);
}

static void text_flush(TrSink *s)
{
    TextSink *t = (TextSink *)s;
    tr_lines_flush(&t->base, &t->sb, t->out);
}

static void text_close(TrSink *s)
{
    TextSink *t = (TextSink *)s;
    tr_lines_flush(&t->base, &t->sb, t->out);
    sb_free(&t->sb);
    free(t);
}

static const TrSinkOps text_ops = {
    .name = "text",
    .event = text_event,
    .flush = text_flush,
    .close = text_close,
};

TrSink *tr_sink_text_new(FILE *out, unsigned flags)
{
    TextSink *t = vm_calloc(1, sizeof *t);
    t->base.ops = &text_ops;
    t->out = out;
    t->ts = flags & TR_TEXT_TIMESTAMPS;
    sb_init(&t->sb);
    return &t->base;
}
