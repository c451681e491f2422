/*
 * trace/tr_sink_ctf_raw.c - raw CTF 1.8: each ring's records written to
 * its stream file as they are, with metadata that describes the ring's
 * record layout, so that the collector copies byte ranges and decodes
 * nothing (the decoded CTF sink, tr_sink_ctf.c, re-encodes every event
 * and is many times slower).
 *
 * A packet is a header and context (88 bytes) followed by one range of a
 * ring (TrRange: whole records, no PAD), written with one writev straight
 * from the ring's memory:
 *
 *   packet header   as trace/tr_ctf.h says
 *   packet context  u64 timestamp_begin, u64 timestamp_end (ticks),
 *                   u64 content_size (bits, up to the last payload's
 *                   end), u64 packet_size (bits, the last pad included),
 *                   u64 packet_seq_num, u64 events_discarded (cumulative,
 *                   this packet's LOST markers included), s64 sched_id
 *                   (-1: shared)
 *   event header    the record's first 9 bytes (trace/tr_event.h),
 *                   aligned 4: u64 timestamp (ticks), u8 id (the TrKind)
 *   event context   the rest of the record header: u8 flags, u8 arity,
 *                   u8 nterms, u16 size, u16 paylen, u64 pid (LOST: the
 *                   events dropped), u32 mod, u32 fun (atom indices)
 *   event fields    u8 payload[paylen]: the terms in trace/tr_encode.h's
 *                   encoding; the next header's align(4) skips the pad
 *
 * The header holds only the id and the timestamp because those are the
 * only header fields CTF readers give a meaning to (babeltrace2 warns
 * about any other and leaves it out of the event); a clock-mapped field
 * elsewhere does not become the event's time, so the timestamp stays in
 * the header.  The integer types of trace/tr_ctf.c are byte-aligned, so
 * the context starts right after the id and its fields fall at the
 * record's offsets (flags 9, arity 10, nterms 11, size 12, paylen 14, pid
 * 16, mod 24, fun 28), which tr_event.h's static assertions pin down.
 *
 * The clock class `ticks` runs at the trace clock's rate (the TSC's, as
 * calibrated by trace/tr_clock.c, or 1 GHz when ticks are ns) and its
 * offset places tick 0 on the wall clock, so readers show the same times
 * the decoded sinks do, without the collector converting anything.
 *
 * Atom names: the records carry atom indices (mod, fun, and ATOM terms
 * in payloads).  At close the metadata is written again with the atom
 * table in its env block, `atom_N = "name";` for every atom (the table
 * never shrinks, so every index the trace holds is there); a `"` or `\`
 * in a name is escaped, a control character becomes `?`.
 *
 * Losses: a LOST marker is an event of class "lost" where the drop
 * happened (its count in pid) and is added to events_discarded; drops no
 * marker reported get a packet with one made-up LOST record at shutdown.
 * Unlike the decoded sinks, streams are not merged: readers merge them by
 * timestamp, and a session's last record (STOPPED, in the shared stream)
 * is last only by its time.
 */
#include "trace/tr_sink.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "trace/tr_clock.h"
#include "trace/tr_ctf.h"
#include "vm/atom.h"
#include "vm/common.h"

/* Packet header (32) and context (56) bytes: a multiple of 4, so the
 * first record is where its align(4) puts it. */
#define RAW_HEAD (TR_CTF_HEADER + 56)

/* One ring's stream: written only by the collector thread of that ring
 * (tr_sink.h: a raw sink's rings may be written at the same time). */
typedef struct RawStream {
    int fd;                  /* -1 until the first packet */
    bool failed;             /* its file could not be made or written: no more tries */
    uint64_t seq;            /* packets written */
    uint64_t discarded;      /* cumulative events_discarded */
    uint64_t last_ticks;     /* the last record's, for made-up LOST records */
} RawStream;

typedef struct RawSink {
    TrSink base;
    /* out.failed is the streams' shared state: written under report_lock
     * by whichever thread fails (tr_ctf_failed), read at close (after
     * every collector thread ended). */
    TrCtfOut out;
    pthread_mutex_t report_lock;
    int nscheds;
    RawStream *streams;      /* nscheds + 1; the last is shared */
} RawSink;

/* Stream i's file could not be made or written (errno says why): no
 * more tries for it, and the sink's failure (the first one is kept). */
static void stream_failed(RawSink *c, int i)
{
    int e = errno;
    char path[TR_CTF_PATH_MAX];
    c->streams[i].failed = true;
    tr_ctf_stream_path(c->out.dir, i, c->nscheds, path, sizeof path);
    pthread_mutex_lock(&c->report_lock);
    tr_ctf_failed(&c->base, &c->out, e, path);
    pthread_mutex_unlock(&c->report_lock);
}

/* ==== packets ==== */

static bool write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return true;
}

static int stream_fd(RawSink *c, int i)
{
    RawStream *s = &c->streams[i];
    if (s->fd < 0 && !s->failed) {
        char path[TR_CTF_PATH_MAX];
        tr_ctf_stream_path(c->out.dir, i, c->nscheds, path, sizeof path);
        s->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (s->fd < 0)
            stream_failed(c, i);
    }
    return s->failed ? -1 : s->fd;
}

/* One packet: the head, then r's records straight from the ring. */
static void write_packet(RawSink *c, const TrRange *r)
{
    int i = r->sched < 0 ? c->nscheds : r->sched;
    RawStream *s = &c->streams[i];
    uint8_t head[RAW_HEAD];
    /* The content ends with the last payload: a reader that saw room
     * for another header after it would look for one in the pad. */
    uint64_t bits = (uint64_t)(RAW_HEAD + r->len) * 8;
    uint64_t content = bits - (uint64_t)r->last_pad * 8;
    int64_t sched = r->sched;
    s->discarded += r->lost;
    tr_ctf_packet_header(head, c->out.uuid, i);
    memcpy(head + 32, &r->first_ticks, 8);
    memcpy(head + 40, &r->last_ticks, 8);
    memcpy(head + 48, &content, 8);  /* content_size */
    memcpy(head + 56, &bits, 8);     /* packet_size */
    memcpy(head + 64, &s->seq, 8);
    memcpy(head + 72, &s->discarded, 8);
    memcpy(head + 80, &sched, 8);
    s->seq++;
    s->last_ticks = r->last_ticks;
    int fd = stream_fd(c, i);
    struct iovec iov[2] = { { head, RAW_HEAD }, { (void *)(uintptr_t)r->data, r->len } };
    if (fd >= 0 && !write_all(fd, iov, 2))
        stream_failed(c, i);
}

static void raw_range(TrSink *sink, const TrRange *r)
{
    write_packet((RawSink *)sink, r);
}

/* Only the collector's made-up LOST events come here (tr_sink.h): a
 * packet of one LOST record at the stream's last time. */
static void raw_event(TrSink *sink, const TrEvent *ev)
{
    RawSink *c = (RawSink *)sink;
    VM_ASSERT(ev->kind == TR_K_LOST, "a raw sink gets ranges, not events");
    RawStream *s = &c->streams[ev->sched < 0 ? c->nscheds : ev->sched];
    TrRecord rec = { .ticks = s->last_ticks, .kind = TR_K_LOST, .flags = TR_F_NO_MFA,
                     .size = sizeof rec, .pid = ev->lost };
    TrRange r = { .sched = ev->sched, .data = (const uint8_t *)&rec, .len = sizeof rec,
                  .first_ticks = rec.ticks, .last_ticks = rec.ticks,
                  .lost = ev->lost };
    write_packet(c, &r);
}

/* ==== metadata ==== */

/* `atom_N = "name";` for every atom of the table. */
static void put_atoms(FILE *f)
{
    size_t n = vm_atom_count();
    for (size_t a = 0; a < n; a++) {
        size_t len;
        const char *name = vm_atom_name((Atom)a, &len);
        fprintf(f, "\tatom_%zu = \"", a);
        for (size_t k = 0; k < len; k++) {
            unsigned char ch = (unsigned char)name[k];
            if (ch == '"' || ch == '\\')
                fputc('\\', f);
            fputc(ch < 0x20 || ch == 0x7f ? '?' : ch, f);
        }
        fputs("\";\n", f);
    }
}

/* The clock's rate and where its zero is: ns = mono0 + (t - tsc0) * mult
 * / 2^32 (trace/tr_clock.h), so tick 0 is at mono0 - tsc0 * mult / 2^32
 * on CLOCK_MONOTONIC, plus the offset to the wall clock. */
static void clock_params(const RawSink *c, uint64_t *freq, int64_t *offset_ns)
{
    *freq = 1000000000u;
    *offset_ns = c->out.clock_offset;
    if (!tr_clock.tsc)
        return;
    *freq = (uint64_t)((((unsigned __int128)1000000000u << 32) + tr_clock.mult / 2) /
                       tr_clock.mult);
    uint64_t zero = (uint64_t)(((unsigned __int128)tr_clock.tsc0 * tr_clock.mult) >> 32);
    *offset_ns += (int64_t)tr_clock.mono0 - (int64_t)zero;
}

static void put_event_classes(FILE *f)
{
    for (int k = 0; k <= TR_K_LOST; k++)
        fprintf(f,
                "event {\n\tname = \"%s\";\n\tid = %d;\n\tstream_id = 0;\n"
                "\tfields := struct {\n"
                "\t\tuint8_t payload[stream.event.context.paylen];\n\t};\n};\n\n",
                tr_kind_name((TrKind)k), k);
}

static int write_metadata(RawSink *c, bool atoms)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/metadata", c->out.dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        tr_ctf_failed(&c->base, &c->out, errno, path);
        return -1;
    }
    tr_ctf_preamble(f, c->out.uuid);
    fprintf(f, "\tlayout = \"tracevm-ring\";\n\tpayload_encoding = \"tr_encode\";\n");
    if (atoms)
        put_atoms(f);
    fputs("};\n\n", f);
    uint64_t freq;
    int64_t offset_ns;
    clock_params(c, &freq, &offset_ns);
    tr_ctf_clock(f, "ticks", c->out.uuid, "the trace clock's ticks", freq, offset_ns);
    fputs("typealias integer {\n\tsize = 64; align = 8; signed = false;\n"
          "\tmap = clock.ticks.value;\n} := uint64_clock_ticks_t;\n\n"
          "stream {\n\tid = 0;\n\tpacket.context := struct {\n"
          "\t\tuint64_clock_ticks_t timestamp_begin;\n"
          "\t\tuint64_clock_ticks_t timestamp_end;\n"
          "\t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n"
          "\t\tuint64_t packet_seq_num;\n\t\tuint64_t events_discarded;\n"
          "\t\tint64_t sched_id;\n\t};\n"
          "\tevent.header := struct {\n\t\tuint64_clock_ticks_t timestamp;\n"
          "\t\tuint8_t id;\n\t} align(32);\n"
          "\tevent.context := struct {\n\t\tuint8_t flags;\n\t\tuint8_t arity;\n"
          "\t\tuint8_t nterms;\n\t\tuint16_t size;\n\t\tuint16_t paylen;\n"
          "\t\tuint64_t pid;\n\t\tuint32_t mod;\n\t\tuint32_t fun;\n\t};\n};\n\n",
          f);
    put_event_classes(f);
    if (fclose(f) != 0) {
        tr_ctf_failed(&c->base, &c->out, errno, path);
        return -1;
    }
    return 0;
}

/* ==== life cycle ==== */

static int raw_open(TrSink *sink, const TrSinkInfo *info)
{
    RawSink *c = (RawSink *)sink;
    c->nscheds = info->nscheds;
    c->streams = vm_calloc((size_t)c->nscheds + 1, sizeof *c->streams);
    for (int i = 0; i <= c->nscheds; i++)
        c->streams[i].fd = -1;
    return write_metadata(c, false);
}

/* Frees c; `finish`: write the metadata again with the atoms the
 * streams name (close), or remove what the start made (discard: the
 * pipeline never started, trace/tr_sink.h). */
static void raw_end(RawSink *c, bool finish)
{
    for (int i = 0; c->streams && i <= c->nscheds; i++)
        if (c->streams[i].fd >= 0 && close(c->streams[i].fd) != 0 && finish)
            stream_failed(c, i);
    if (finish && c->streams && !c->out.failed)
        write_metadata(c, true);
    free(c->streams);
    if (finish)
        tr_ctf_out_free(&c->out);
    else
        tr_ctf_out_discard(&c->out, c->nscheds);
    pthread_mutex_destroy(&c->report_lock);
    free(c);
}

static void raw_close(TrSink *sink)
{
    raw_end((RawSink *)sink, true);
}

static void raw_discard(TrSink *sink)
{
    raw_end((RawSink *)sink, false);
}

static const TrSinkOps raw_ops = {
    .name = "ctf-raw",
    .open = raw_open,
    .event = raw_event,
    .close = raw_close,
    .discard = raw_discard,
    .range = raw_range,
};

TrSink *tr_sink_ctf_raw_new(const char *dir, int64_t clock_offset_ns, char *err, size_t errlen)
{
    RawSink *c = vm_calloc(1, sizeof *c);
    if (!tr_ctf_out_init(&c->out, dir, clock_offset_ns, err, errlen)) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->report_lock, NULL);
    c->base.ops = &raw_ops;
    return &c->base;
}
