/*
 * trace/tr_event.h - trace event kinds, the fixed record layout that
 * producers write into the per-scheduler rings, and the decoded event the
 * collector hands to sinks.
 *
 * A record in a ring is a 32-byte header followed by its payload, padded
 * to a multiple of 4 bytes:
 *
 *   offset  size  field
 *        0     8  ticks    clock ticks (trace/tr_clock.h); the collector
 *                          converts them to CLOCK_MONOTONIC ns
 *        8     1  kind     TrKind
 *        9     1  flags    TR_F_*
 *       10     1  arity    arity of the MFA (VM_MAX_ARITY is 255)
 *       11     1  nterms   terms in the payload (see trace/tr_encode.h)
 *       12     2  size     whole record in bytes (header + payload + pad)
 *       14     2  paylen   payload bytes actually used
 *       16     8  pid      the traced process (or a count, for TR_K_LOST)
 *       24     4  mod      atom index of the module
 *       28     4  fun      atom index of the function
 *       32     -  payload  terms in the encoding of trace/tr_encode.h
 *
 * The order is the raw CTF sink's (trace/tr_sink_ctf_raw.c), which hands
 * the rings' bytes to readers as they are: CTF readers give meaning only
 * to an event header's id and timestamp, so those two come first (the
 * header) and everything else follows as the event context, each field
 * where CTF's packing of byte-aligned integers puts it.
 *
 * Why 4 and not 8: a call with one small argument is 34 bytes, so 36
 * rather than 40, a tenth fewer bytes through the ring and into a raw
 * CTF stream (bench_events --only raw: 84-130 against 59-111 M events/s
 * in five invocations each, in turn, 2026-11-27), at no cost measured
 * to the producer (bench_overhead's return_trace pairs: 31.7 against
 * 31.8 ns, medians of 7 invocations each).  The 8-byte fields at
 * offsets 0 and 16 are then only 4-byte aligned: the struct is packed
 * with alignment 4, so the compiler makes every access one that such an
 * address allows (x86_64 and aarch64 both load and store them as one
 * instruction; none is atomic).
 *
 * A padding record (kind TR_K_PAD, written where a record would not fit
 * before the ring's end) needs its kind and size, so TR_PAD_MIN bytes.
 * Where fewer are left before the ring's end (4, 8 or 12: positions are
 * multiples of 4) nothing is written: producer and collector both step
 * over them to the start of the array (the ring protocol, trace/tr_buffer.c).  The
 * scheduler is not in the record: each ring has one producer scheduler,
 * so the collector knows it from the ring.
 */
#ifndef TRACE_TR_EVENT_H
#define TRACE_TR_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/term.h"

/* Event kinds, from trace/tr_events.def (what each carries and how the
 * sinks show it).  PAD fills the end of a ring and is never shown to
 * sinks. */
typedef enum TrKind {
#define TR_EVENT(K, name, tag, atom, text, nfixed, rest, f1, f2, f3) TR_K_##K,
#include "trace/tr_events.def"
#undef TR_EVENT
    TR_K__COUNT,
    TR_K_PAD = 0xff,
} TrKind;

_Static_assert(TR_K_LOST == TR_K__COUNT - 1, "LOST is the last kind (tr_events.def)");

/* Record flags. */
enum {
    /* The payload was cut at the size cap or the depth bound; the
     * encoding holds a truncation marker where terms were left out. */
    TR_F_TRUNCATED = 1u << 0,
    /* CALL: no arguments were recorded, print the arity (the `arity`
     * process flag). */
    TR_F_ARITY = 1u << 1,
    /* CALL: a RETURN_FROM or EXCEPTION_FROM for this call will follow
     * (a return-trace frame was pushed), so sinks that draw durations
     * (Chrome) open a slice instead of an instant. */
    TR_F_RETURNS = 1u << 2,
    /* IN, OUT, RETURN_TO, EXIT: the MFA is unknown or not part of the
     * event (mod/fun not valid). */
    TR_F_NO_MFA = 1u << 3,
    /* The traced process has a timestamp flag: the text sink prints this
     * event as trace_ts with its timestamp last (the other sinks always
     * carry the timestamp), in the form TR_F_TIMESTAMP and TR_F_TS_MONO
     * say together (tr_ts_form). */
    TR_F_TIMESTAMP = 1u << 4,
    /* CALL: the last payload term (before the backtrace, if any) is the
     * match spec's {message, X}: {trace,Pid,call,{M,F,Args},X}. */
    TR_F_MESSAGE = 1u << 5,
    /* CALL: the last payload term is the calling process's stack (the
     * match spec's {backtrace} action). */
    TR_F_BACKTRACE = 1u << 6,
    /* With TR_F_TIMESTAMP: the monotonic ns (monotonic_timestamp);
     * alone: {Mono, Unique} (strict_monotonic_timestamp). */
    TR_F_TS_MONO = 1u << 7,
};

/* The form of a trace_ts message's timestamp (BEAM's three flags). */
typedef enum TrTsForm {
    TR_TS_NONE,     /* a trace message, no timestamp */
    TR_TS_NOW,      /* {MegaSecs, Secs, MicroSecs} of the system time */
    TR_TS_MONO,     /* the monotonic time in ns */
    TR_TS_STRICT,   /* {Mono, Unique} */
} TrTsForm;

static inline TrTsForm tr_ts_form(unsigned flags)
{
    switch (flags & (TR_F_TIMESTAMP | TR_F_TS_MONO)) {
    case TR_F_TIMESTAMP: return TR_TS_NOW;
    case TR_F_TIMESTAMP | TR_F_TS_MONO: return TR_TS_MONO;
    case TR_F_TS_MONO: return TR_TS_STRICT;
    default: return TR_TS_NONE;
    }
}

/* The header of a record in a ring (layout above; 4-byte aligned). */
typedef struct TrRecord {
    uint64_t ticks;
    uint8_t kind;
    uint8_t flags;
    uint8_t arity;
    uint8_t nterms;
    uint16_t size;
    uint16_t paylen;
    uint64_t pid;
    uint32_t mod;
    uint32_t fun;
} __attribute__((packed, aligned(4))) TrRecord;

/* The raw CTF sink's metadata describes exactly these offsets. */
_Static_assert(sizeof(TrRecord) == 32, "the record header is 32 bytes");
_Static_assert(offsetof(TrRecord, ticks) == 0 && offsetof(TrRecord, kind) == 8 &&
                   offsetof(TrRecord, flags) == 9 && offsetof(TrRecord, arity) == 10 &&
                   offsetof(TrRecord, nterms) == 11 && offsetof(TrRecord, size) == 12 &&
                   offsetof(TrRecord, paylen) == 14 && offsetof(TrRecord, pid) == 16 &&
                   offsetof(TrRecord, mod) == 24 && offsetof(TrRecord, fun) == 28,
               "the layout above (and tr_sink_ctf_raw.c's metadata)");

/* Records are 4-byte aligned and at most this big (size is a u16). */
#define TR_RECORD_ALIGN 4u
#define TR_RECORD_MAX 65528u

/* The bytes a PAD record takes at least: its kind and size.  Space
 * before a ring's end is a multiple of the alignment, so it is 0, 4, 8
 * or 12 (too little for a PAD: left empty, see above) or at least
 * TR_PAD_MIN. */
#define TR_PAD_MIN 16u
_Static_assert(offsetof(TrRecord, kind) < TR_PAD_MIN &&
                   offsetof(TrRecord, size) + sizeof(uint16_t) <= TR_PAD_MIN &&
                   TR_PAD_MIN % TR_RECORD_ALIGN == 0,
               "a PAD's kind and size fit in TR_PAD_MIN bytes");

/*
 * A decoded event, as the collector hands it to sinks.  `payload` points
 * into the ring (or into a sink test's buffer) and is valid only during the
 * call; sinks that keep anything copy it.
 */
typedef struct TrEvent {
    uint64_t ts;           /* CLOCK_MONOTONIC nanoseconds */
    int sched;             /* scheduler id; -1 for the shared (non-scheduler) ring */
    TrKind kind;
    unsigned flags;        /* TR_F_* */
    uint64_t pid;          /* the process; 0 for LOST */
    Atom mod, fun;         /* valid unless TR_F_NO_MFA (and not for LOST) */
    unsigned arity;
    unsigned nterms;       /* payload terms */
    const uint8_t *payload;
    size_t paylen;
    uint64_t lost;         /* LOST only: events dropped at this point */
} TrEvent;

/* What trace/tr_events.def says of a kind (one entry per TrKind). */
typedef struct TrKindInfo {
    const char *name;      /* as sinks print it: "call", "return_from", ... */
    const char *tag;       /* the text sink's atom after the pid */
    const char *text;      /* the text sink's message shape (tr_events.def) */
    unsigned nfixed;       /* payload terms that are one field each */
    bool rest;             /* the remaining terms make one more field */
    const char *fields[3]; /* the field names */
} TrKindInfo;

extern const TrKindInfo tr_kinds[TR_K__COUNT];

/* Kind names as sinks print them ("call", "return_from", ..., "lost"). */
static inline const char *tr_kind_name(TrKind k)
{
    return (unsigned)k < TR_K__COUNT ? tr_kinds[k].name : "?";
}

#endif /* TRACE_TR_EVENT_H */
