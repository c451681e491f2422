/*
 * trace/tr_ctf.h - what the two CTF 1.8 sinks share: the output
 * directory, the trace's UUID, the stream files' names and the TSDL
 * preamble (integer types, the trace block with the packet header, env).
 *
 * Both write the same packet header (32 bytes, little-endian):
 *   u32 magic 0xC1FC1FC1, u8 uuid[16], u32 stream_id (0),
 *   u64 stream_instance_id (the ring: sched id, nscheds for shared)
 * and one stream file per ring that carried anything: sched_0 ...
 * sched_N-1 and `shared` (babeltrace2 reads every regular file beside
 * `metadata` as a stream, so the directory must start empty).
 */
#ifndef TRACE_TR_CTF_H
#define TRACE_TR_CTF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the CTF sinks write host integers and declare them little-endian"
#endif

#define TR_CTF_MAGIC 0xC1FC1FC1u
#define TR_CTF_HEADER 32   /* packet header bytes */
/* A buffer for a file name under the directory: room past PATH_MAX
 * (4,096 with its NUL) for "/sched_N", so that a name is never cut
 * (the OS then refuses it whole, with ENAMETOOLONG, rather than create
 * a shorter one). */
#define TR_CTF_PATH_MAX (4096 + 32)

/* What every CTF sink keeps: where, the clock's offset, the UUID, and
 * whether a write failed (collector thread only, like the sinks). */
typedef struct TrCtfOut {
    char *dir;
    int64_t clock_offset;    /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns (or 0) */
    uint8_t uuid[16];
    bool failed;             /* a write failed: recorded once (tr_ctf_failed) */
    bool made_dir;           /* tr_ctf_out_init created dir (a discard removes it) */
} TrCtfOut;

/* Creates `dir` if missing, and `metadata` in it, empty (the sink writes
 * it when it opens), and fills o (a random UUID); false with a message in
 * err, and o untouched, unless `dir` is an empty directory then and the
 * metadata file can be created there ("trace: cannot create CTF metadata
 * DIR/metadata: <errno's text>"; a directory this call made is removed
 * again). */
bool tr_ctf_out_init(TrCtfOut *o, const char *dir, int64_t clock_offset_ns, char *err,
                     size_t errlen);
void tr_ctf_out_free(TrCtfOut *o);

/* For a sink whose pipeline never started (the OS refused its collector
 * thread: trace/tr_collector.c, tr_pipeline_free): removes what the
 * start made, so that a failed start leaves nothing behind: `metadata`,
 * the stream file of every ring 0..nscheds that was created, and the
 * directory if tr_ctf_out_init made it (one that was there before, empty,
 * stays, empty again).  Then frees as tr_ctf_out_free. */
void tr_ctf_out_discard(TrCtfOut *o, int nscheds);

/* A file of the trace (`file`: a stream or the metadata) could not be
 * made or written, with errnum: the sink's failure (tr_sink_failed, which
 * keeps the first), and o stays failed.  The caller orders calls on one
 * sink (the raw sink's rings lock around it). */
struct TrSink;
void tr_ctf_failed(struct TrSink *sink, TrCtfOut *o, int errnum, const char *file);

/* The packet header of ring `ring` (0..nscheds; nscheds is shared) into
 * out[TR_CTF_HEADER]. */
void tr_ctf_packet_header(uint8_t *out, const uint8_t uuid[16], int ring);

/* The stream file of ring `ring` under dir (out: TR_CTF_PATH_MAX bytes). */
void tr_ctf_stream_path(const char *dir, int ring, int nscheds, char *out, size_t n);

/* Writes the metadata's start: the integer typealiases (uint8_t,
 * uint16_t, uint32_t, int32_t, uint64_t, int64_t), the trace block with
 * the packet header, and the env block opened (the caller adds its own
 * entries, then closes it with "};"). */
void tr_ctf_preamble(FILE *f, const uint8_t uuid[16]);

/* The clock class `name`: freq Hz; the clock's zero is offset_ns after
 * the epoch (it may be negative). */
void tr_ctf_clock(FILE *f, const char *name, const uint8_t uuid[16], const char *descr,
                  uint64_t freq, int64_t offset_ns);

#endif /* TRACE_TR_CTF_H */
