/*
 * trace/tr_sink_chrome.c - Chrome trace event JSON (Perfetto UI,
 * chrome://tracing, speedscope).
 *
 * Layout (the Trace Event Format document's JSON object form): one object {"traceEvents":[...],
 * "displayTimeUnit":"ns","otherData":{...}}.  Every event has pid = the
 * OS process given at creation and tid = the VM process id, so each VM
 * process gets its own lane (a process migrating between schedulers keeps
 * its lane; the scheduler is in args where useful).  ts is in
 * microseconds (three decimals: ns resolution) from the first event.
 *
 *   - a CALL with TR_F_RETURNS opens a duration slice ("ph":"B", name
 *     "mod:fun/arity"); its RETURN_FROM or EXCEPTION_FROM closes it
 *     ("ph":"E" with the same name and cat: speedscope pairs B and E by
 *     name and ignores an E that names nothing).  B/E carry no args, so
 *     that speedscope, which folds args into frame keys, aggregates by
 *     function and pairs them without a warning; an EXCEPTION_FROM writes
 *     its class and reason on an exception_from instant just before its E.
 *   - a CALL without a return to wait for, and every other kind, is an
 *     instant on the process's lane ("ph":"i","s":"t") named after the
 *     function (calls) or the kind, with the payload fields as args.
 *   - LOST is a global instant ("s":"g") named "lost" with the ring and
 *     count; otherData.lost_events holds the total.
 *   - the first event of a process writes a thread_name metadata event
 *     naming its lane "<0.N.0>"; the trace starts with process_name.
 *   - scheduling: IN and OUT are instants on the process's lane, and an
 *     OUT after an IN also draws the time in between as a complete slice
 *     ("ph":"X", named "<0.N.0>") on the lane of the scheduler that ran
 *     it (tid TR_CHROME_SCHED_TID + scheduler, named "scheduler N" by its
 *     first slice), so a scheduler's lane shows which process it ran
 *     when.  One scheduler runs one process at a time and writes its IN
 *     after the previous OUT, so these slices never overlap: an IN
 *     also ends the slice of the process the scheduler ran before, where
 *     no OUT did (none is written at exit; a lost one).  An OUT or
 *     OUT_EXITED that follows the process's EXIT (its lane is gone) is
 *     only an instant; the EXIT, or an OUT_EXITED without one, ends the
 *     running slice.
 *
 * B/E must nest per lane, and events may be missing (drops, tracing
 * switched on mid-call), so the sink keeps each lane's stack of open
 * calls: a return closes the innermost open call of the same function
 * and, first, any open calls above it (their returns were lost); a
 * return with no open call of its function becomes an instant.  An exit
 * and the end of the trace close whatever is open, so the output is
 * valid, well-nested JSON however the stream ends.  Lanes are freed at
 * exit; a lane's stack is bounded (TR_CHROME_MAX_DEPTH: deeper calls are
 * counted, not drawn).
 */
#include "trace/tr_sink.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace/tr_encode.h"
#include "vm/atom.h"
#include "vm/common.h"
#include "vm/print.h"

#define TR_CHROME_MAX_DEPTH 4096
/* Scheduler lanes' tids: above any pid a run can reach, and exact as a
 * JavaScript number (chrome://tracing parses JSON numbers as doubles). */
#define TR_CHROME_SCHED_TID ((uint64_t)1 << 52)
#define TR_CHROME_MAX_SCHED_LANES 1024

typedef struct OpenCall {
    Atom mod, fun;
    unsigned arity;
} OpenCall;

typedef struct Lane {
    struct Lane *next;       /* hash chain */
    uint64_t pid;
    uint64_t last_ts;        /* ts of its last event (slices never end before they begin) */
    OpenCall *stack;
    unsigned depth, cap;
    unsigned hidden;         /* open calls deeper than TR_CHROME_MAX_DEPTH */
    bool running;            /* an IN without its OUT yet */
    int in_sched;            /* the scheduler of that IN */
    uint64_t in_ts;          /* its ts */
} Lane;

/* One formatted, JSON-escaped "mod:fun/arity" (see put_name). */
typedef struct NameEntry {
    Atom mod, fun;
    unsigned arity;
    bool used;
    char *text;
    size_t len;
} NameEntry;

#define TR_CHROME_NAME_CACHE 256 /* direct-mapped; a power of two */

typedef struct ChromeSink {
    TrSink base;
    FILE *out;
    int os_pid;
    bool first_event;        /* no comma before the next event */
    bool have_origin;
    uint64_t origin;         /* ns of the first event: ts 0 */
    uint64_t last_ts;
    uint64_t lost;
    Lane **buckets;
    size_t nbuckets, nlanes;
    StrBuf sb, vals, name;   /* the event being written; payload fields; a slice name */
    NameEntry names[TR_CHROME_NAME_CACHE]; /* every B and E names its function */
    bool sched_named[TR_CHROME_MAX_SCHED_LANES];   /* scheduler lanes named so far */
    uint64_t sched_pid[TR_CHROME_MAX_SCHED_LANES];  /* each one's last IN's pid, 0: none */
} ChromeSink;

/* ==== lanes ==== */

static size_t lane_slot(const ChromeSink *c, uint64_t pid)
{
    return (size_t)((pid * 0x9E3779B97F4A7C15ull) >> 32) & (c->nbuckets - 1);
}

static void grow_buckets(ChromeSink *c)
{
    size_t n = c->nbuckets * 2;
    Lane **b = vm_calloc(n, sizeof *b);
    Lane **old = c->buckets;
    size_t oldn = c->nbuckets;
    c->buckets = b;
    c->nbuckets = n;
    for (size_t i = 0; i < oldn; i++) {
        for (Lane *l = old[i], *next; l; l = next) {
            next = l->next;
            size_t k = lane_slot(c, l->pid);
            l->next = b[k];
            b[k] = l;
        }
    }
    free(old);
}

static Lane *lane_find(ChromeSink *c, uint64_t pid)
{
    for (Lane *l = c->buckets[lane_slot(c, pid)]; l; l = l->next)
        if (l->pid == pid)
            return l;
    return NULL;
}

static void lane_remove(ChromeSink *c, Lane *l)
{
    Lane **pp = &c->buckets[lane_slot(c, l->pid)];
    while (*pp != l)
        pp = &(*pp)->next;
    *pp = l->next;
    c->nlanes--;
    free(l->stack);
    free(l);
}

/* ==== output ==== */

/* Events are appended to c->sb and written in batches (tr_lines_done),
 * as the line sinks write theirs: with an fwrite per event, the sink
 * moved 8.2-8.5 M events/s in bench_events' pipeline run, in batches
 * 12.5-18.3. */
static void begin_event(ChromeSink *c)
{
    sb_puts(&c->sb, c->first_event ? "\n" : ",\n");
    c->first_event = false;
}

static void end_event(ChromeSink *c)
{
    tr_lines_done(&c->base, &c->sb, c->out);
}

static void put_ts(StrBuf *sb, uint64_t ts)
{
    char frac[4] = { (char)('0' + ts % 1000 / 100), (char)('0' + ts % 100 / 10),
                     (char)('0' + ts % 10), 0 };
    tr_put_u64(sb, ts / 1000);
    sb_putc(sb, '.');
    sb_puts(sb, frac);
}

/* "mod:fun/arity" (quoted atoms as in Erlang), JSON-escaped.  Formatting
 * and escaping were a third of the sink's time once every E carried the
 * name too, so the text is kept in a small direct-mapped cache. */
static void put_name(ChromeSink *c, Atom mod, Atom fun, unsigned arity)
{
    uint64_t key = (uint64_t)mod * 0x9E3779B97F4A7C15ull ^
                   (uint64_t)fun * 0xC2B2AE3D27D4EB4Full ^ arity;
    size_t h = (size_t)(key >> 40) & (TR_CHROME_NAME_CACHE - 1);
    NameEntry *e = &c->names[h];
    if (e->used && e->mod == mod && e->fun == fun && e->arity == arity) {
        sb_put(&c->sb, e->text, e->len);
        return;
    }
    c->name.len = 0;
    vm_print_mfa(&c->name, mod, fun, arity);
    size_t start = c->sb.len;
    tr_json_escape(&c->sb, c->name.s, c->name.len);
    size_t len = c->sb.len - start;
    free(e->text);
    *e = (NameEntry){ .mod = mod, .fun = fun, .arity = arity, .used = true,
                      .text = vm_malloc(len + 1), .len = len };
    memcpy(e->text, c->sb.s + start, len);
}

/* Common fields of an event on `lane`'s track. */
static void put_head(ChromeSink *c, const char *ph, uint64_t tid, uint64_t ts)
{
    sb_puts(&c->sb, "{\"ph\":\"");
    sb_puts(&c->sb, ph);
    sb_puts(&c->sb, "\",\"pid\":");
    tr_put_i64(&c->sb, c->os_pid);
    sb_puts(&c->sb, ",\"tid\":");
    tr_put_u64(&c->sb, tid);
    sb_puts(&c->sb, ",\"ts\":");
    put_ts(&c->sb, ts);
}

/* Closes l's innermost open slice with an E named as its B: speedscope
 * ignores an E whose name differs from the B it would close
 * (chrome://tracing and Perfetto match by the stack alone). */
static void close_slice(ChromeSink *c, Lane *l, uint64_t ts)
{
    const OpenCall *o = &l->stack[l->depth - 1];
    begin_event(c);
    put_head(c, "E", l->pid, ts);
    sb_puts(&c->sb, ",\"cat\":\"call\",\"name\":\"");
    put_name(c, o->mod, o->fun, o->arity);
    sb_puts(&c->sb, "\"}");
    end_event(c);
    l->depth--;
}

/* Closes every open slice of l (exit, end of trace). */
static void close_all(ChromeSink *c, Lane *l, uint64_t ts)
{
    while (l->depth)
        close_slice(c, l, ts);
    l->hidden = 0;
}

static Lane *lane_get(ChromeSink *c, uint64_t pid)
{
    Lane *l = lane_find(c, pid);
    if (l)
        return l;
    if (c->nlanes >= c->nbuckets)
        grow_buckets(c);
    l = vm_calloc(1, sizeof *l);
    l->pid = pid;
    size_t k = lane_slot(c, pid);
    l->next = c->buckets[k];
    c->buckets[k] = l;
    c->nlanes++;
    begin_event(c);
    sb_printf(&c->sb,
              "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%llu,"
              "\"args\":{\"name\":\"<0.%llu.0>\"}}",
              c->os_pid, (unsigned long long)pid, (unsigned long long)pid);
    end_event(c);
    return l;
}

/* Payload fields as "args":{...} (nothing if there are none). */
static void put_args(ChromeSink *c, const TrEvent *ev, const char *extra)
{
    TrField f[TR_MAX_FIELDS];
    c->vals.len = 0;
    unsigned n = tr_event_fields(ev, &c->vals, f);
    sb_puts(&c->sb, ",\"args\":{\"sched\":");
    tr_put_i64(&c->sb, ev->sched);
    for (unsigned i = 0; i < n; i++) {
        sb_puts(&c->sb, ",\"");
        sb_puts(&c->sb, f[i].name);
        sb_puts(&c->sb, "\":\"");
        tr_json_escape(&c->sb, c->vals.s + f[i].off, f[i].len);
        sb_putc(&c->sb, '"');
    }
    if (extra)
        sb_puts(&c->sb, extra);
    sb_putc(&c->sb, '}');
}

static void instant(ChromeSink *c, const TrEvent *ev, uint64_t ts, bool fn_name)
{
    begin_event(c);
    put_head(c, "i", ev->pid, ts);
    sb_puts(&c->sb, ",\"s\":\"t\",\"cat\":\"");
    sb_puts(&c->sb, tr_kind_name(ev->kind));
    sb_puts(&c->sb, "\",\"name\":\"");
    if (fn_name && !(ev->flags & TR_F_NO_MFA))
        put_name(c, ev->mod, ev->fun, ev->arity);
    else
        sb_puts(&c->sb, tr_kind_name(ev->kind));
    sb_putc(&c->sb, '"');
    put_args(c, ev, (ev->flags & TR_F_TRUNCATED) ? ",\"truncated\":true" : NULL);
    sb_putc(&c->sb, '}');
    end_event(c);
}

/* The time l's process ran, from its IN to ts, on its scheduler's lane. */
static void run_slice(ChromeSink *c, Lane *l, uint64_t ts)
{
    l->running = false;
    if (l->in_sched < 0 || l->in_sched >= TR_CHROME_MAX_SCHED_LANES)
        return;
    uint64_t tid = TR_CHROME_SCHED_TID + (uint64_t)l->in_sched;
    if (!c->sched_named[l->in_sched]) {
        c->sched_named[l->in_sched] = true;
        begin_event(c);
        sb_printf(&c->sb,
                  "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%llu,"
                  "\"args\":{\"name\":\"scheduler %d\"}}",
                  c->os_pid, (unsigned long long)tid, l->in_sched);
        end_event(c);
    }
    begin_event(c);
    put_head(c, "X", tid, l->in_ts);
    sb_puts(&c->sb, ",\"dur\":");
    put_ts(&c->sb, ts - l->in_ts);
    sb_printf(&c->sb, ",\"cat\":\"running\",\"name\":\"<0.%llu.0>\"}",
              (unsigned long long)l->pid);
    end_event(c);
}

/*
 * An IN on scheduler s: the process that scheduler ran before, if its
 * slice is still open, stopped by now (it exited, with the running flag
 * alone, which writes no OUT at exit, or its OUT was lost): its slice
 * ends here, so a scheduler's slices never overlap.
 */
static void sched_switch(ChromeSink *c, const Lane *l, int s, uint64_t ts)
{
    if (s < 0 || s >= TR_CHROME_MAX_SCHED_LANES)
        return;
    uint64_t prev = c->sched_pid[s];
    Lane *o = prev && prev != l->pid ? lane_find(c, prev) : NULL;
    if (o && o->running && o->in_sched == s)
        run_slice(c, o, ts);
    c->sched_pid[s] = l->pid;
}

/* IN and OUT: instants, and the running slice (header comment). */
static void sched_event(ChromeSink *c, Lane *l, const TrEvent *ev, uint64_t ts)
{
    if (l->running)
        run_slice(c, l, ts);
    if (ev->kind == TR_K_IN) {
        sched_switch(c, l, ev->sched, ts);
        l->running = true;
        l->in_sched = ev->sched;
        l->in_ts = ts;
    }
    instant(c, ev, ts, false);
}

static void open_slice(ChromeSink *c, Lane *l, const TrEvent *ev, uint64_t ts)
{
    if (l->depth == TR_CHROME_MAX_DEPTH) {
        l->hidden++;
        return;
    }
    if (l->depth == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->stack = vm_realloc(l->stack, l->cap * sizeof *l->stack);
    }
    l->stack[l->depth++] = (OpenCall){ ev->mod, ev->fun, ev->arity };
    begin_event(c);
    put_head(c, "B", l->pid, ts);
    sb_puts(&c->sb, ",\"cat\":\"call\",\"name\":\"");
    put_name(c, ev->mod, ev->fun, ev->arity);
    sb_puts(&c->sb, "\"}");
    end_event(c);
}

/* A return: close the matching open call (see the header comment). */
static void return_slice(ChromeSink *c, Lane *l, const TrEvent *ev, uint64_t ts)
{
    if (l->hidden) {
        l->hidden--;
        return;
    }
    unsigned k = l->depth;
    while (k > 0) {
        const OpenCall *o = &l->stack[k - 1];
        if (o->mod == ev->mod && o->fun == ev->fun && o->arity == ev->arity)
            break;
        k--;
    }
    if (k == 0 || (ev->flags & TR_F_NO_MFA)) {
        instant(c, ev, ts, true);
        return;
    }
    while (l->depth > k)
        close_slice(c, l, ts);
    /* The class and reason go on an instant inside the slice, not on the
     * E: speedscope keys frames by name and args and warns about an E
     * whose key differs from its B's. */
    if (ev->kind == TR_K_EXCEPTION_FROM)
        instant(c, ev, ts, true);
    close_slice(c, l, ts);
}

static void chrome_event(TrSink *s, const TrEvent *ev)
{
    ChromeSink *c = (ChromeSink *)s;
    if (!c->have_origin) {
        c->origin = ev->ts;
        c->have_origin = true;
    }
    uint64_t ts = ev->ts > c->origin ? ev->ts - c->origin : 0;
    if (ev->kind == TR_K_LOST) {
        c->lost += ev->lost;
        begin_event(c);
        put_head(c, "i", 0, ts);
        sb_puts(&c->sb, ",\"s\":\"g\",\"cat\":\"lost\",\"name\":\"lost\",\"args\":{\"ring\":\"");
        tr_ring_label(ev->sched, &c->sb);
        sb_printf(&c->sb, "\",\"count\":%llu}}", (unsigned long long)ev->lost);
        end_event(c);
        return;
    }
    if ((ev->kind == TR_K_OUT || ev->kind == TR_K_OUT_EXITED) && !lane_find(c, ev->pid)) {
        instant(c, ev, ts, false);   /* after its EXIT: the lane is gone */
        return;
    }
    Lane *l = lane_get(c, ev->pid);
    /* Per lane, time never goes back (rings merge within a window). */
    if (ts < l->last_ts)
        ts = l->last_ts;
    l->last_ts = ts;
    if (ts > c->last_ts)
        c->last_ts = ts;
    switch (ev->kind) {
    case TR_K_CALL:
        if (ev->flags & TR_F_RETURNS)
            open_slice(c, l, ev, ts);
        else
            instant(c, ev, ts, true);
        break;
    case TR_K_RETURN_FROM:
    case TR_K_EXCEPTION_FROM:
        return_slice(c, l, ev, ts);
        break;
    case TR_K_IN:
    case TR_K_OUT:
        sched_event(c, l, ev, ts);
        break;
    case TR_K_EXIT:
    case TR_K_OUT_EXITED:
        if (l->running)
            run_slice(c, l, ts);
        close_all(c, l, ts);
        instant(c, ev, ts, false);
        lane_remove(c, l);
        break;
    default:
        instant(c, ev, ts, false);
        break;
    }
}

static int chrome_open(TrSink *s, const TrSinkInfo *info)
{
    ChromeSink *c = (ChromeSink *)s;
    (void)info;
    /* A failure here (on an unbuffered stream of the caller's; else at
     * the next flush) is the sink's, as any write's (tr_lines_flush). */
    if (fprintf(c->out,
                "{\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,"
                "\"tid\":0,\"args\":{\"name\":\"tracevm\"}}",
                c->os_pid) < 0)
        tr_sink_failed(s, errno, NULL);
    c->first_event = false;
    return 0;
}

static void chrome_flush(TrSink *s)
{
    ChromeSink *c = (ChromeSink *)s;
    tr_lines_flush(&c->base, &c->sb, c->out);
}

static void chrome_close(TrSink *s)
{
    ChromeSink *c = (ChromeSink *)s;
    for (size_t i = 0; i < c->nbuckets; i++) {
        while (c->buckets[i]) {
            Lane *l = c->buckets[i];
            uint64_t end = c->last_ts > l->last_ts ? c->last_ts : l->last_ts;
            if (l->running)
                run_slice(c, l, end);
            close_all(c, l, end);
            lane_remove(c, l);
        }
    }
    tr_lines_flush(&c->base, &c->sb, c->out);
    if (c->first_event)
        chrome_open(s, NULL);   /* never opened: still write a whole document */
    if (fprintf(c->out, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"lost_events\":%llu}}\n",
                (unsigned long long)c->lost) < 0 || fflush(c->out) != 0)
        tr_sink_failed(s, errno, NULL);
    free(c->buckets);
    sb_free(&c->sb);
    sb_free(&c->vals);
    sb_free(&c->name);
    for (size_t i = 0; i < TR_CHROME_NAME_CACHE; i++)
        free(c->names[i].text);
    free(c);
}

static const TrSinkOps chrome_ops = {
    .name = "chrome",
    .open = chrome_open,
    .event = chrome_event,
    .flush = chrome_flush,
    .close = chrome_close,
};

TrSink *tr_sink_chrome_new(FILE *out, int os_pid)
{
    ChromeSink *c = vm_calloc(1, sizeof *c);
    c->base.ops = &chrome_ops;
    c->out = out;
    c->os_pid = os_pid;
    c->first_event = true;   /* until open writes the process_name event */
    c->nbuckets = 64;
    c->buckets = vm_calloc(c->nbuckets, sizeof *c->buckets);
    sb_init(&c->sb);
    sb_init(&c->vals);
    sb_init(&c->name);
    return &c->base;
}
