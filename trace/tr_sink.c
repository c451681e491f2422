/*
 * trace/tr_sink.c - what every sink shares: reading an event's payload as
 * named fields or single terms, lines gathered into batches, and the C
 * callback sink for embedders.
 */
#include "trace/tr_sink.h"

#include <errno.h>
#include <stdlib.h>

#include "trace/tr_encode.h"
#include "trace/tr_outfail.h"
#include "vm/common.h"

/* The kinds' table, from trace/tr_events.def. */
const TrKindInfo tr_kinds[TR_K__COUNT] = {
#define TR_EVENT(K, name, tag, atom, text, nfixed, rest, f1, f2, f3) \
    [TR_K_##K] = { name, tag, text, nfixed, rest, { f1, f2, f3 } },
#include "trace/tr_events.def"
#undef TR_EVENT
};

const char *const *tr_kind_fields(TrKind k, unsigned *n)
{
    if ((unsigned)k >= TR_K__COUNT) {
        *n = 0;
        return NULL;
    }
    const TrKindInfo *ki = &tr_kinds[k];
    *n = ki->nfixed + (ki->rest ? 1 : 0);
    if (k == TR_K_CALL)
        *n = 3;     /* args, then the match spec's message and backtrace */
    return ki->fields;
}

/* One field holding the next payload term. */
static void next_field(TrField *f, const char *name, StrBuf *sb, const uint8_t **p,
                       const uint8_t *end, unsigned *left)
{
    f->name = name;
    f->off = sb->len;
    tr_print_next(sb, p, end, left);
    f->len = sb->len - f->off;
}

/* CALL: args (unless the arity flag left them out), then the message and
 * the backtrace when the event carries them. */
static unsigned call_fields(const TrEvent *ev, StrBuf *sb, TrField f[TR_MAX_FIELDS])
{
    const uint8_t *p = ev->payload, *end = ev->payload + ev->paylen;
    unsigned left = ev->nterms, n = 0;
    unsigned extra = !!(ev->flags & TR_F_MESSAGE) + !!(ev->flags & TR_F_BACKTRACE);
    unsigned nargs = left >= extra ? left - extra : 0;
    if (!(ev->flags & TR_F_ARITY)) {
        f[n].name = "args";
        f[n].off = sb->len;
        sb_putc(sb, '[');
        tr_print_seq(sb, &p, end, nargs, true);
        sb_putc(sb, ']');
        f[n].len = sb->len - f[n].off;
        n++;
    }
    left = extra;
    if (ev->flags & TR_F_MESSAGE)
        next_field(&f[n++], "message", sb, &p, end, &left);
    if (ev->flags & TR_F_BACKTRACE)
        next_field(&f[n++], "backtrace", sb, &p, end, &left);
    return n;
}

unsigned tr_event_fields(const TrEvent *ev, StrBuf *sb, TrField f[TR_MAX_FIELDS])
{
    if ((unsigned)ev->kind >= TR_K__COUNT)
        return 0;
    const TrKindInfo *s = &tr_kinds[ev->kind];
    const uint8_t *p = ev->payload, *end = ev->payload + ev->paylen;
    unsigned left = ev->nterms, n = 0;
    if (ev->kind == TR_K_CALL)
        return call_fields(ev, sb, f);
    for (; n < s->nfixed; n++) {
        f[n].name = s->fields[n];
        f[n].off = sb->len;
        tr_print_next(sb, &p, end, &left);
        f[n].len = sb->len - f[n].off;
    }
    if (s->rest) {
        f[n].name = s->fields[n];
        f[n].off = sb->len;
        sb_putc(sb, '[');
        tr_print_seq(sb, &p, end, left, true);
        sb_putc(sb, ']');
        f[n].len = sb->len - f[n].off;
        n++;
    }
    return n;
}

bool tr_event_term(const TrEvent *ev, unsigned i, StrBuf *sb)
{
    const uint8_t *p = ev->payload, *end = ev->payload + ev->paylen;
    if (i >= ev->nterms)
        return false;
    for (unsigned k = 0; k < i; k++)
        if (!tr_skip_term(&p, end))
            return false;
    return tr_print_term(sb, &p, end);
}

void tr_sink_failed(TrSink *s, int errnum, const char *file)
{
    if (s->fail)
        tr_outfail_set(s->fail, errnum, file, s->ops->name);
}

static void lines_write(TrSink *s, StrBuf *lines, FILE *out)
{
    if (lines->len && fwrite(lines->s, 1, lines->len, out) != lines->len)
        tr_sink_failed(s, errno, NULL);
    lines->len = 0;
}

void tr_lines_done(TrSink *s, StrBuf *lines, FILE *out)
{
    if (lines->len >= TR_LINES_BATCH)
        lines_write(s, lines, out);
}

void tr_lines_flush(TrSink *s, StrBuf *lines, FILE *out)
{
    lines_write(s, lines, out);
    if (fflush(out) != 0)
        tr_sink_failed(s, errno, NULL);
}

void tr_ring_label(int sched, StrBuf *sb)
{
    if (sched < 0)
        sb_puts(sb, "shared");
    else
        sb_printf(sb, "sched %d", sched);
}

/* ==== the callback sink ==== */

typedef struct CallbackSink {
    TrSink base;
    TrCallbackFn fn;
    void *data;
} CallbackSink;

static void cb_event(TrSink *s, const TrEvent *ev)
{
    CallbackSink *c = (CallbackSink *)s;
    c->fn(ev, c->data);
}

static void cb_close(TrSink *s)
{
    free(s);
}

static const TrSinkOps callback_ops = {
    .name = "callback",
    .event = cb_event,
    .close = cb_close,
};

TrSink *tr_sink_callback_new(TrCallbackFn fn, void *data)
{
    CallbackSink *c = vm_calloc(1, sizeof *c);
    c->base.ops = &callback_ops;
    c->fn = fn;
    c->data = data;
    return &c->base;
}
