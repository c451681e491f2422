/*
 * trace/tr_sink_ctf.c - Common Trace Format 1.8 for babeltrace2 and Trace
 * Compass (CTF 1.8's TSDL metadata and packet layout, in the subset
 * babeltrace2 2.0 reads, with one event class per kind).
 *
 * The directory holds `metadata` (TSDL text) and one binary stream file
 * per ring that carried anything (trace/tr_ctf.h).  All integers are
 * little-endian and byte-aligned; strings are NUL-terminated.  (The raw
 * CTF sink, trace/tr_sink_ctf_raw.c, writes the rings' records as they
 * are instead.)
 *
 *   packet header   as trace/tr_ctf.h says
 *   packet context  u64 timestamp_begin, u64 timestamp_end,
 *                   u64 content_size, u64 packet_size (bits),
 *                   u64 packet_seq_num, u64 events_discarded (cumulative),
 *                   s32 sched_id (-1: shared)
 *   event header    u16 id (the TrKind), u64 timestamp (CLOCK_MONOTONIC ns)
 *   event fields    u64 pid, string module, string function, u8 arity,
 *                   then the kind's payload fields as strings in Erlang
 *                   syntax (args, value, class/reason, ...; see
 *                   tr_event_fields)
 *
 * Losses: a LOST event ends the stream's current packet and adds its count
 * to the stream's cumulative events_discarded, which the next packet
 * carries; babeltrace2 then reports "Tracer discarded N events between
 * [t1] and [t2]" at the right place.  A loss with no later event on that
 * stream gets an empty packet of its own at close; a loss before a
 * stream's first packet is preceded by an empty packet with count 0 so
 * that readers have a packet to count from.  Event timestamps are kept
 * non-decreasing per stream (a reader requires it), which the rings
 * already guarantee up to the clock's conversion.
 *
 * Packets are cut at TR_CTF_PACKET bytes, at every flush and at close, so
 * a trace read while it is written shows everything flushed.
 */
#include "trace/tr_sink.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trace/tr_ctf.h"
#include "vm/atom.h"
#include "vm/common.h"

#define TR_CTF_PACKET (64 * 1024)
/* Header (32) + context (52) bytes. */
#define CTF_PACKET_HEAD (TR_CTF_HEADER + 52)

typedef struct CtfStream {
    FILE *f;                 /* opened with the first packet */
    uint8_t *buf;            /* the current packet, head included */
    size_t len, cap;
    uint64_t nevents;
    uint64_t ts_begin, ts_end, last_ts;
    uint64_t seq;            /* packets written */
    uint64_t discarded;      /* cumulative events_discarded */
    bool discard_pending;    /* discarded grew since the last packet written */
} CtfStream;

typedef struct CtfSink {
    TrSink base;
    TrCtfOut out;
    int nscheds;
    CtfStream *streams;      /* nscheds + 1; the last is shared */
    StrBuf vals;
} CtfSink;

/* ==== bytes ==== */

static void put(CtfStream *s, const void *p, size_t n)
{
    if (s->len + n > s->cap) {
        while (s->len + n > s->cap)
            s->cap *= 2;
        s->buf = vm_realloc(s->buf, s->cap);
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
}

static void put_u8(CtfStream *s, uint8_t v) { put(s, &v, 1); }
static void put_u16(CtfStream *s, uint16_t v) { put(s, &v, 2); }
static void put_u64(CtfStream *s, uint64_t v) { put(s, &v, 8); }

static void put_str(CtfStream *s, const char *p, size_t n)
{
    /* A NUL inside would end the string early; printers escape them. */
    const char *nul = memchr(p, 0, n);
    put(s, p, nul ? (size_t)(nul - p) : n);
    put_u8(s, 0);
}

/* ==== packets ==== */

/* Stream i's file failed to take a write (errno says why). */
static void stream_failed(CtfSink *c, int i)
{
    int e = errno;
    char path[TR_CTF_PATH_MAX];
    tr_ctf_stream_path(c->out.dir, i, c->nscheds, path, sizeof path);
    tr_ctf_failed(&c->base, &c->out, e, path);
}

/* Writes the current packet (even if empty) and starts the next one. */
static void write_packet(CtfSink *c, int i)
{
    CtfStream *s = &c->streams[i];
    uint8_t *h = s->buf;
    uint64_t bits = (uint64_t)s->len * 8;
    int32_t sched = i == c->nscheds ? -1 : i;
    tr_ctf_packet_header(h, c->out.uuid, i);
    memcpy(h + 32, &s->ts_begin, 8);
    memcpy(h + 40, &s->ts_end, 8);
    memcpy(h + 48, &bits, 8);     /* content_size */
    memcpy(h + 56, &bits, 8);     /* packet_size: no padding */
    memcpy(h + 64, &s->seq, 8);
    memcpy(h + 72, &s->discarded, 8);
    memcpy(h + 80, &sched, 4);
    if (!s->f && !c->out.failed) {
        char path[TR_CTF_PATH_MAX];
        tr_ctf_stream_path(c->out.dir, i, c->nscheds, path, sizeof path);
        s->f = fopen(path, "wb");
        if (!s->f)
            tr_ctf_failed(&c->base, &c->out, errno, path);
    }
    if (s->f && fwrite(s->buf, 1, s->len, s->f) != s->len)
        stream_failed(c, i);
    s->seq++;
    s->discard_pending = false;
    s->len = CTF_PACKET_HEAD;
    s->nevents = 0;
}

static void event_fields(CtfSink *c, CtfStream *s, const TrEvent *ev)
{
    size_t n;
    const char *name;
    put_u64(s, ev->pid);
    name = (ev->flags & TR_F_NO_MFA) ? "" : vm_atom_name(ev->mod, &n);
    put_str(s, name, (ev->flags & TR_F_NO_MFA) ? 0 : n);
    name = (ev->flags & TR_F_NO_MFA) ? "" : vm_atom_name(ev->fun, &n);
    put_str(s, name, (ev->flags & TR_F_NO_MFA) ? 0 : n);
    put_u8(s, (uint8_t)ev->arity);
    TrField f[TR_MAX_FIELDS];
    c->vals.len = 0;
    unsigned got = tr_event_fields(ev, &c->vals, f), want;
    const char *const *names = tr_kind_fields(ev->kind, &want);
    /* Every field the metadata declares, by name: a field the event does
     * not carry (a call's args under the arity flag, its message or
     * backtrace without those actions) is an empty string. */
    for (unsigned k = 0; k < want; k++) {
        unsigned j = 0;
        while (j < got && strcmp(f[j].name, names[k]))
            j++;
        if (j < got)
            put_str(s, c->vals.s + f[j].off, f[j].len);
        else
            put_str(s, "", 0);
    }
}

static void ctf_event(TrSink *sink, const TrEvent *ev)
{
    CtfSink *c = (CtfSink *)sink;
    int i = ev->sched < 0 ? c->nscheds : ev->sched;
    CtfStream *s = &c->streams[i];
    uint64_t ts = ev->ts > s->last_ts ? ev->ts : s->last_ts;
    s->last_ts = ts;
    if (ev->kind == TR_K_LOST) {
        if (s->nevents || s->seq == 0) {
            /* Close what came before the loss (or give a loss before
             * the first event a packet to count from). */
            if (!s->nevents)
                s->ts_begin = s->ts_end = ts;
            write_packet(c, i);
        }
        s->discarded += ev->lost;
        s->discard_pending = true;
        s->ts_begin = s->ts_end = ts;
        return;
    }
    if (!s->nevents)
        s->ts_begin = ts;
    s->ts_end = ts;
    put_u16(s, (uint16_t)ev->kind);
    put_u64(s, ts);
    event_fields(c, s, ev);
    s->nevents++;
    if (s->len >= TR_CTF_PACKET)
        write_packet(c, i);
}

static void ctf_flush(TrSink *sink)
{
    CtfSink *c = (CtfSink *)sink;
    for (int i = 0; i <= c->nscheds; i++) {
        CtfStream *s = &c->streams[i];
        if (s->nevents)
            write_packet(c, i);
        if (s->f && fflush(s->f) != 0)
            stream_failed(c, i);
    }
}

/* ==== metadata ==== */

static void put_event_class(FILE *f, TrKind k)
{
    unsigned n;
    const char *const *names = tr_kind_fields(k, &n);
    fprintf(f,
            "event {\n\tname = \"%s\";\n\tid = %d;\n\tstream_id = 0;\n"
            "\tfields := struct {\n\t\tuint64_t pid;\n\t\tstring module;\n"
            "\t\tstring function;\n\t\tuint8_t arity;\n",
            tr_kind_name(k), (int)k);
    for (unsigned i = 0; i < n; i++)
        fprintf(f, "\t\tstring %s;\n", names[i]);
    fputs("\t};\n};\n\n", f);
}

static int write_metadata(CtfSink *c)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/metadata", c->out.dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        tr_ctf_failed(&c->base, &c->out, errno, path);
        return -1;
    }
    tr_ctf_preamble(f, c->out.uuid);
    fputs("};\n\n", f);
    tr_ctf_clock(f, "monotonic", c->out.uuid, "CLOCK_MONOTONIC, ns; the offset makes it wall-clock",
                 1000000000u, c->out.clock_offset);
    fputs("typealias integer {\n\tsize = 64; align = 8; signed = false;\n"
          "\tmap = clock.monotonic.value;\n} := uint64_clock_monotonic_t;\n\n"
          "stream {\n\tid = 0;\n\tpacket.context := struct {\n"
          "\t\tuint64_clock_monotonic_t timestamp_begin;\n"
          "\t\tuint64_clock_monotonic_t timestamp_end;\n"
          "\t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n"
          "\t\tuint64_t packet_seq_num;\n\t\tuint64_t events_discarded;\n"
          "\t\tint32_t sched_id;\n\t};\n"
          "\tevent.header := struct {\n\t\tuint16_t id;\n"
          "\t\tuint64_clock_monotonic_t timestamp;\n\t};\n};\n\n",
          f);
    for (int k = 0; k < TR_K_LOST; k++)
        put_event_class(f, (TrKind)k);
    if (fclose(f) != 0) {
        tr_ctf_failed(&c->base, &c->out, errno, path);
        return -1;
    }
    return 0;
}

/* ==== life cycle ==== */

static int ctf_open(TrSink *sink, const TrSinkInfo *info)
{
    CtfSink *c = (CtfSink *)sink;
    c->nscheds = info->nscheds;
    c->streams = vm_calloc((size_t)c->nscheds + 1, sizeof *c->streams);
    for (int i = 0; i <= c->nscheds; i++) {
        CtfStream *s = &c->streams[i];
        s->cap = 4096;
        s->buf = vm_calloc(1, s->cap);
        s->len = CTF_PACKET_HEAD;
    }
    return write_metadata(c);
}

/* Frees c; `finish`: write each stream's last packet first (close), or
 * not, and remove what the start made (discard: the pipeline never
 * started, trace/tr_sink.h). */
static void ctf_end(CtfSink *c, bool finish)
{
    for (int i = 0; c->streams && i <= c->nscheds; i++) {
        CtfStream *s = &c->streams[i];
        /* The last packet, or an empty one carrying a trailing loss. */
        if (finish && (s->nevents || s->discard_pending))
            write_packet(c, i);
        if (s->f && fclose(s->f) != 0 && finish)
            stream_failed(c, i);
        free(s->buf);
    }
    free(c->streams);
    sb_free(&c->vals);
    if (finish)
        tr_ctf_out_free(&c->out);
    else
        tr_ctf_out_discard(&c->out, c->nscheds);
    free(c);
}

static void ctf_close(TrSink *sink)
{
    ctf_end((CtfSink *)sink, true);
}

static void ctf_discard(TrSink *sink)
{
    ctf_end((CtfSink *)sink, false);
}

static const TrSinkOps ctf_ops = {
    .name = "ctf",
    .open = ctf_open,
    .event = ctf_event,
    .flush = ctf_flush,
    .close = ctf_close,
    .discard = ctf_discard,
};

TrSink *tr_sink_ctf_new(const char *dir, int64_t clock_offset_ns, char *err, size_t errlen)
{
    CtfSink *c = vm_calloc(1, sizeof *c);
    if (!tr_ctf_out_init(&c->out, dir, clock_offset_ns, err, errlen)) {
        free(c);
        return NULL;
    }
    c->base.ops = &ctf_ops;
    sb_init(&c->vals);
    return &c->base;
}

int64_t tr_ctf_clock_offset(void)
{
    struct timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    return ((int64_t)rt.tv_sec - (int64_t)mono.tv_sec) * 1000000000 +
           ((int64_t)rt.tv_nsec - (int64_t)mono.tv_nsec);
}
