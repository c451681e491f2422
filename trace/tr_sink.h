/*
 * trace/tr_sink.h - what the collector writes events to.
 *
 * A sink is a struct that starts with a TrSink; the collector calls its
 * operations from the collector thread only, one at a time, so a sink
 * needs no locking of its own:
 *   open   once, before the first event (the rings' layout);
 *   event  for every event in delivery order (per ring: emission order),
 *          including LOST pseudo-events;
 *   flush  at tr_flush() and when the collector goes idle;
 *   close  once, after the last event: finish the output and free the sink;
 *   discard instead of close when the pipeline never started.
 * Sinks that write to a FILE * never close it (it is the caller's).
 *
 * A raw sink (one with `range`) takes the rings' records as they are
 * instead of decoded events: the collector hands it each ring's
 * published records as contiguous ranges, per ring in ring order, with
 * no merge across rings; `event` then only gets the LOST events the
 * collector makes up for drops no marker reported (at shutdown).  A raw
 * sink is its pipeline's only sink (tr_pipeline_add_sink).  Each ring has
 * a collector thread of its own for a raw sink (tr_collector.c), so
 * `range` and `event` calls for different rings may run at the same
 * time on different threads; the calls for one ring come from one
 * thread, in order, and open and close run alone.
 */
#ifndef TRACE_TR_SINK_H
#define TRACE_TR_SINK_H

#include <stdio.h>

#include "include/tracevm.h"
#include "trace/tr_event.h"
#include "vm/strbuf.h"

typedef struct TrSinkInfo {
    int nscheds;               /* scheduler rings 0..nscheds-1, plus the shared ring (-1) */
} TrSinkInfo;

typedef struct TrSink TrSink;

/*
 * Records of one ring for a raw sink: whole records (trace/tr_event.h),
 * no PAD among them, in the ring's memory (valid during the call only;
 * the space goes back to the producer after it).  The collector reads
 * the first and last records' headers, and the LOST markers' counts from
 * the ring's cut table or its walk of the headers (tr_ring_range); it
 * decodes no payload.
 */
typedef struct TrRange {
    int sched;                 /* the ring: scheduler id, -1 for shared */
    const uint8_t *data;
    size_t len;                /* bytes: a multiple of 4, at least one record */
    uint64_t first_ticks, last_ticks;
    uint64_t lost;             /* the LOST markers' counts added up */
    size_t last_pad;           /* bytes after the last record's payload */
} TrRange;

typedef struct TrSinkOps {
    const char *name;
    /* Returns 0, or -1 with its failure recorded (tr_sink_failed: the CTF
     * metadata that cannot be written); the sink is then closed and
     * dropped from the pipeline. */
    int (*open)(TrSink *s, const TrSinkInfo *info);
    void (*event)(TrSink *s, const TrEvent *ev);
    void (*flush)(TrSink *s);
    void (*close)(TrSink *s);
    /* Instead of close, for a sink whose pipeline never started (the OS
     * refused a collector thread; tr_pipeline_free): free the sink and
     * remove the files it made, so that a failed start leaves nothing
     * behind.  NULL: close is called (a sink that makes no file, or
     * writes to a stream that is its caller's). */
    void (*discard)(TrSink *s);
    /* Raw sinks only (above); NULL for the others. */
    void (*range)(TrSink *s, const TrRange *r);
} TrSinkOps;

struct TrSink {
    const TrSinkOps *ops;
    /* Where the sink records its output's first failure (its session's,
     * trace/tr_outfail.h), or NULL: not recorded (a sink a unit test made).
     * Set by the pipeline's maker before the pipeline starts. */
    struct TrOutFail *fail;
};

/* The sink's output failed with errnum (a write, a flush, a file that
 * could not be made): recorded in s->fail, if any, with `file` (NULL: the
 * pipeline's output) and the sink's format name; only the first failure
 * is kept.  The thread that hit it. */
void tr_sink_failed(TrSink *s, int errnum, const char *file);

/* Erlang-like text, one event per line: {trace,<0.42.0>,call,{fib,fib,[10]}}.
 * TR_TEXT_TIMESTAMPS: trace_ts messages with the ns timestamp last. */
enum { TR_TEXT_TIMESTAMPS = 1u << 0 };
TrSink *tr_sink_text_new(FILE *out, unsigned flags);

/* One JSON object per line (fields in docs/tracing.md). */
TrSink *tr_sink_jsonl_new(FILE *out);

/* Chrome trace event JSON: a lane (tid) per process; valid JSON at close
 * even if calls are still open or events were lost.  os_pid names the
 * trace's process lane group ("pid" of every event). */
TrSink *tr_sink_chrome_new(FILE *out, int os_pid);

/*
 * CTF 1.8 into directory `dir` (created if missing): `metadata` plus one
 * stream file per ring (sched_0 ... sched_N-1, shared).  clock_offset_ns:
 * what to add to CLOCK_MONOTONIC to get wall-clock time (use
 * tr_ctf_clock_offset(); tests pass 0 for stable output).  NULL and a
 * message in err if the directory cannot be made.
 */
TrSink *tr_sink_ctf_new(const char *dir, int64_t clock_offset_ns, char *err, size_t errlen);
/* CLOCK_REALTIME - CLOCK_MONOTONIC now, in ns. */
int64_t tr_ctf_clock_offset(void);

/*
 * Raw CTF 1.8 into directory `dir` (created if missing, must be empty):
 * each ring's records copied as they are into its stream file, the
 * metadata describing the record layout (docs/tracing.md, "Raw CTF").
 * clock_offset_ns as for tr_sink_ctf_new.  NULL and a message in err if
 * the directory cannot be made.
 */
TrSink *tr_sink_ctf_raw_new(const char *dir, int64_t clock_offset_ns, char *err,
                            size_t errlen);

/* A C callback for embedders: fn(ev, data) for every event (LOST included).
 * ev and its payload are valid during the call only; format payload terms
 * with tr_event_term(). */
typedef void (*TrCallbackFn)(const TrEvent *ev, void *data);
TrSink *tr_sink_callback_new(TrCallbackFn fn, void *data);

/*
 * Appends payload term `i` of ev (0-based) in Erlang syntax; false (and
 * nothing appended) if there is no such term.  For sinks and callbacks.
 */
bool tr_event_term(const TrEvent *ev, unsigned i, StrBuf *sb);

/*
 * The Erlang-like text of an event, as the text sink writes it (no
 * newline); `ts` selects the trace_ts form and its timestamp's (a
 * strict one takes its unique integer now).  Shared by the text sink and
 * callbacks that want the same rendering (tr_sink_text.c).
 */
void tr_event_format(const TrEvent *ev, TrTsForm ts, StrBuf *sb);

/* The public callback format (tvm_trace_options.callback): each event
 * as a tvm_trace_event with its text form (trace/tr_sink_api.c). */
TrSink *tr_sink_api_new(tvm_trace_callback fn, void *data);

/* ---- for sink implementations (tr_sink.c) ---- */

/*
 * Sinks that print a line per event (text, JSON lines) append each line
 * to one StrBuf and call tr_lines_done after it: the lines go to `out` in
 * one fwrite once TR_LINES_BATCH bytes are gathered, and at the sink's
 * flush and close (tr_lines_flush, which also flushes `out`), which the
 * collector calls whenever a pass finds nothing new, at tr_flush() and at
 * the end.  stderr, the default output, is unbuffered: with a write(2)
 * per event a fully traced fib(25) into stderr took 0.46 s against 0.05 s
 * into a file (1.7 us more per event); both take 0.04 s now.  Only whole
 * lines are written, so lines of other writers to the same stream fall
 * between events, as before.  A write or flush that fails is the sink's
 * failure (tr_sink_failed, with the OS's errno): a stream's error flag
 * says only that something failed, and may be the caller's own.
 */
enum { TR_LINES_BATCH = 32 * 1024 };
void tr_lines_done(TrSink *s, StrBuf *lines, FILE *out);
void tr_lines_flush(TrSink *s, StrBuf *lines, FILE *out);

/*
 * The payload of an event as named fields whose values are Erlang text,
 * as the JSON lines and CTF sinks write them:
 *   call: args ("[10]", or "[...]" style when cut; none with the arity
 *   flag), then message and backtrace when the match spec attached them;
 *   return_from: value;
 *   exception_from: class, reason; spawn: child, args; exit: reason;
 *   send: msg, to; receive: msg; others: none.
 * Values are appended to sb; field i is sb->s[off .. off + len).  A field
 * the size cap left out reads "...".  Returns the number of fields.
 */
#define TR_MAX_FIELDS 3
typedef struct TrField {
    const char *name;
    size_t off, len;
} TrField;
unsigned tr_event_fields(const TrEvent *ev, StrBuf *sb, TrField f[TR_MAX_FIELDS]);

/* Field names of a kind (for CTF metadata); *n gets their count. */
const char *const *tr_kind_fields(TrKind k, unsigned *n);

/* Where an event's ring is, for messages: "sched 3" or "shared". */
void tr_ring_label(int sched, StrBuf *sb);

#endif /* TRACE_TR_SINK_H */
