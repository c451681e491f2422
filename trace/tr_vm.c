/*
 * trace/tr_vm.c - a session's trace pipeline: starting and publishing it,
 * retiring and freeing it; tvm_trace_start and tvm_trace_stop, which do it
 * for the default session.
 *
 * Protocol: publishing and retiring a session's pipeline.
 *
 * Terms.  A session's `out` (trace/tr_session.h) points at its running
 * TrVm (a pipeline with its sink) or is NULL.  An *emitter* is a thread
 * writing an event for a process: the scheduler thread running that
 * process, or a foreign thread with a call context (a call inside
 * tvm_call, a spawn through tvm_spawn, a send through tvm_send).
 *
 * Rule.  An emitter loads `out` ([TP1'] acquire) and uses what it found
 * only while it is an online QSBR reader, passing no quiescent state in
 * between.  A scheduler thread is online while it runs a process and
 * reports quiescent states only between two processes; a foreign thread is
 * online inside its outermost tvm_call; hooks that a foreign thread may
 * reach outside any tvm_call (spawn, send) bracket their use with
 * vm_qsbr_call_enter/leave (a no-op on a scheduler thread, nesting inside
 * tvm_call).  Under the lossless policy an emit may suspend the process
 * (trace/tr_vm_proc.c: the lossless wait), which passes a quiescent
 * state: it reloads the pointer afterwards and never uses the old one.
 *
 * Start.  The TrVm is built whole (pipeline, sink, collector running) and
 * then published ([TP1] release): an emitter that sees the pointer sees
 * it initialised.  Each scheduler also gets its ring's address
 * (Scheduler.trace_ring[slot], stored the same way just after `out`):
 * the fast path of call and return events (trace/tr_vm_fast.h) loads
 * that one pointer instead of the session, its TrVm and the scheduler
 * id.  It is the same pointer in another place, under the same rule: used
 * only while online, cleared in step (1).  A session whose events must
 * pass its gate (limits) or go to a tracer process gets no ring pointers,
 * so the fast path never skips the gate.
 *
 * Order of the two pointers ([TP2]).  Writer: the starting or stopping
 * thread (under the code permission).  Readers: every emitter, the fast
 * path loading the ring pointer and, when it finds none or the ring full,
 * the general path loading `out`.  A process's events must be in the
 * file from one point on and up to another (a lossless file may have no
 * hole in the middle), so the general path must find `out` whenever the
 * fast path found the ring: the start stores `out` first and the rings
 * after it (release), so an emitter that loaded a ring (acquire) loads
 * `out` set; the stop clears the rings first and `out` after them
 * (release), so an emitter that loaded `out` NULL (acquire) then loads
 * no ring.  The other way round, a fast-path emit that found the ring
 * full (lossless: the collector had not made room yet) fell back to a
 * general path that had no `out` yet and dropped the event, while the
 * next events found room and were written: a hole of as long as the
 * starting thread was delayed between its stores (stress_trace_vm).  An
 * emitter that finds `out` but no ring writes through the general path
 * into the same ring.
 *
 * Stop.  (1) out := NULL, and the session's slot of every
 * Scheduler.trace_ring.  (2) Wait for thread progress (vm_progress_sync):
 * every online reader passes a quiescent state or goes offline after the
 * store, so every emitter that loaded the old pointer is done with it, and
 * every later load returns NULL (the grace period's barriers order the
 * store before the readers' later loads).  (3) tr_pipeline_free drains
 * the rings into the sink, finishes the output and frees everything
 * (tr_vm_free: the last drain first, which answers trace_delivered's
 * marks, then the pipeline leaves the VM's list of running ones, which
 * such calls walk, trace/tr_delivered.c; then the rest).
 * Freeing before (2) could free a ring under a producer; unpublishing
 * after (2) would let a producer load the pointer after the wait.  For
 * ThreadSanitizer the wait is annotated (vm/qsbr.h): each reader's emits
 * happen before its report, the report before the free.  Steps (1) and
 * (2) of starts and stops hold the code-modification permission, which
 * orders them against each other and against the stopper's final record
 * (breakpoints/bp_session.c), the only other writer into a pipeline from
 * outside; step (3) of tvm_trace_stop and of a session's destroy runs
 * after it is released, by the only thread that still has the pipeline
 * (stop_pipeline below says why that is safe).
 *
 * Rings.  Ring i is written only by scheduler i's thread: an emitter for
 * a process passes p->sched->id, and a process's events are written on
 * its own fiber, which runs on p->sched's thread; call contexts have no
 * scheduler and write to the shared ring (-1, under its mutex), as does
 * the stopper's final record.  The pipeline has one ring per scheduler
 * because its start starts the schedulers first.
 */
#include "trace/tr_vm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace/tr.h"
#include "trace/tr_delivered.h"
#include "trace/tr_fdout.h"
#include "trace/tr_internal.h"
#include "trace/tr_outfail.h"
#include "trace/tr_session.h"
#include "trace/tr_sigpipe.h"
#include "trace/tr_vm_internal.h"
#include "vm/codeperm.h"
#include "vm/progress.h"
#include "vm/sched.h"

/* ==== start ==== */

static tvm_status fail(tvm_error *err, tvm_status st, const char *fn, const char *why)
{
    if (err) {
        err->status = st;
        snprintf(err->message, sizeof err->message, "%s: %s", fn, why);
    }
    return st;
}

bool tr_options_check(const tvm_trace_options *o, char *why, size_t n)
{
    int dests = !!o->path + !!o->file + !!o->use_fd;
    if ((unsigned)o->format > TVM_TRACE_CTF_RAW)
        snprintf(why, n,
                 "bad format %d (expected text, jsonl, chrome, ctf, callback or ctf-raw)",
                 (int)o->format);
    else if (o->format == TVM_TRACE_CALLBACK && !o->callback)
        snprintf(why, n, "the callback format needs a callback");
    else if (o->policy != TVM_TRACE_DROP && o->policy != TVM_TRACE_LOSSLESS)
        snprintf(why, n, "bad policy %d (expected drop or lossless)", (int)o->policy);
    else if ((o->format == TVM_TRACE_CTF || o->format == TVM_TRACE_CTF_RAW) && !o->path)
        snprintf(why, n, "the %s format needs a path (a directory)",
                 o->format == TVM_TRACE_CTF ? "ctf" : "ctf-raw");
    else if (o->format == TVM_TRACE_CHROME && !o->path && !o->file && !o->use_fd)
        snprintf(why, n, "the chrome format needs a path or a file");
    else if (dests > 1)
        snprintf(why, n, "give one of path, file and fd, not %d", dests);
    else if (o->use_fd && o->fd < 0)
        snprintf(why, n, "bad descriptor %d", o->fd);
    else if (o->rate_policy != TVM_RATE_STOP && o->rate_policy != TVM_RATE_DROP)
        snprintf(why, n, "bad rate policy %d (expected stop or drop)", (int)o->rate_policy);
    else
        return true;
    return false;
}

void tr_limits_of(const tvm_trace_options *o, TrLimits *lim)
{
    *lim = (TrLimits){
        .max_events = o->max_events,
        .rate = o->rate,
        .window_ns = tr_ms_to_ns(o->rate_window_ms),
        .rate_drop = o->rate_policy == TVM_RATE_DROP,
        .duration_ns = tr_ms_to_ns(o->duration_ms),
    };
}

/* Opens `path` for writing from its start, as fopen(path, "w") does;
 * *made: this call created the file, so a start that fails later removes
 * it again (a file that was there is left, truncated: its old contents
 * are gone either way). */
static FILE *open_output(const char *path, bool *made)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    *made = fd >= 0;
    if (fd < 0 && errno == EEXIST)
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (fd >= 0 && !f) {
        int e = errno;
        close(fd);
        if (*made)
            unlink(path);
        *made = false;
        errno = e;
    }
    return f;
}

/* The format's name, as its sink is named (TrSinkOps.name). */
static const char *format_name(tvm_trace_format f)
{
    static const char *const names[] = {
        [TVM_TRACE_TEXT] = "text", [TVM_TRACE_JSONL] = "jsonl", [TVM_TRACE_CHROME] = "chrome",
        [TVM_TRACE_CTF] = "ctf", [TVM_TRACE_CALLBACK] = "callback",
        [TVM_TRACE_CTF_RAW] = "ctf-raw",
    };
    return names[f];   /* checked by tr_options_check */
}

/* Where o's output goes, as a failure's message names it (dest: room
 * for VM_MSG_PATH_MAX + 1 bytes; the path is shortened by the record). */
static const char *output_name(const tvm_trace_options *o, char *dest, size_t n)
{
    if (o->format == TVM_TRACE_CALLBACK)
        return "the callback";
    if (o->path)
        return o->path;
    if (o->use_fd) {
        snprintf(dest, n, "fd %d", o->fd);
        return dest;
    }
    return o->file ? "the caller's FILE *" : "stderr";
}

/* The sink for o; NULL with a reason (and status) when the output cannot
 * be opened.  A stream opened here (from o->path, or on o->fd) goes to
 * *opened, fd's state to *fdout (its failures recorded in `fail`); *made
 * says the file at o->path was created by this call (open_output). */
static TrSink *sink_new(const tvm_trace_options *o, TrOutFail *fail, FILE **opened,
                        bool *made, TrFdOut **fdout, char *why, size_t n, tvm_status *st)
{
    *st = TVM_ERR_IO;
    if (o->format == TVM_TRACE_CALLBACK)
        return tr_sink_api_new(o->callback, o->callback_data);
    if (o->format == TVM_TRACE_CTF)
        return tr_sink_ctf_new(o->path, tr_ctf_clock_offset(), why, n);
    if (o->format == TVM_TRACE_CTF_RAW)
        return tr_sink_ctf_raw_new(o->path, tr_ctf_clock_offset(), why, n);
    FILE *out = o->file ? (FILE *)o->file : stderr;
    if (o->path) {
        out = open_output(o->path, made);
        if (!out) {
            int e = errno;
            char pb[VM_MSG_PATH_MAX + 1];
            snprintf(why, n, "cannot open %s: %s", vm_msg_path(o->path, pb), strerror(e));
            return NULL;
        }
        *opened = out;
    } else if (o->use_fd) {
        out = tr_fdout_open(o->fd, fail, format_name(o->format), fdout);
        if (!out) {
            snprintf(why, n, "cannot write to descriptor %d: %s", o->fd, strerror(errno));
            return NULL;
        }
        *opened = out;
    }
    switch (o->format) {
    case TVM_TRACE_TEXT: return tr_sink_text_new(out, 0);
    case TVM_TRACE_JSONL: return tr_sink_jsonl_new(out);
    default: return tr_sink_chrome_new(out, (int)getpid());
    }
}

/* Closes what sink_new opened; errno when the stream's last flush
 * failed, else 0.  A descriptor's stream records its own failures
 * (trace/tr_fdout.c): its fclose never fails. */
static int close_opened(FILE *f, TrFdOut *fdout)
{
    int e = f && fclose(f) != 0 ? errno : 0;
    if (fdout)
        tr_fdout_free(fdout);
    return e;
}

/* Builds and starts the pipeline of o for s with nscheds scheduler rings,
 * unpublished.  On failure nothing of it is left: no thread, no open
 * stream, no memory. */
static tvm_status tr_vm_new(tvm_vm *vm, TrSession *s, const tvm_trace_options *o, int nscheds,
                            TrVm **out, char *why, size_t n)
{
    TrVm *t = vm_calloc(1, sizeof *t);
    t->vm = vm;
    t->sess = s;
    t->sid = s->sid;
    t->nscheds = nscheds;
    t->lossless = o->policy == TVM_TRACE_LOSSLESS;
    /* 512 bytes of payload per event: room for a match spec's backtrace
     * of about 25 frames; what is longer is cut with a marker (and the
     * smallest ring, 4 KiB, still holds four of the largest records). */
    TrOptions to = { .nscheds = nscheds, .ring_bytes = o->ring_bytes, .payload_cap = 512,
                     .policy = t->lossless ? TR_POLICY_LOSSLESS : TR_POLICY_DROP };
    if (t->lossless) {
        tr_vm_waits_init(t);
        to.on_space = tr_vm_on_space;
        to.on_space_data = t;
    }
    TrPipeline *tp = tr_pipeline_new(&to, why, n);
    if (!tp) {
        tr_vm_waits_destroy(t);
        free(t);
        return TVM_ERR_BADARG;
    }
    FILE *opened = NULL;
    bool made = false;
    TrFdOut *fdout = NULL;
    tvm_status st;
    TrSink *sink = sink_new(o, &s->fail, &opened, &made, &fdout, why, n, &st);
    if (!sink) {
        tr_pipeline_free(tp);
        tr_vm_waits_destroy(t);
        free(t);
        return st;
    }
    /* No failure yet, before the sink first writes (its open, below):
     * the record is the new pipeline's from here on.  No thread of an
     * older pipeline of s writes it any more: that one was freed. */
    char dest[64];
    tr_outfail_reset(&s->fail, s->id, output_name(o, dest, sizeof dest));
    sink->fail = &s->fail;
    t->format = format_name(o->format);
    tr_pipeline_add_sink(tp, sink);
    TrSigpipe g;
    tr_sigpipe_hold(&g);      /* a sink's open may write to a pipe */
    if (!tr_pipeline_start(tp)) {
        /* The sink first (it may write its end to the stream), then the
         * stream and a descriptor's writer, as tr_vm_free does; then the
         * file the start created, if it did (a CTF sink removes its own
         * files: TrSinkOps.discard). */
        tr_pipeline_free(tp);
        close_opened(opened, fdout);
        tr_sigpipe_release(&g);
        if (made)
            unlink(o->path);
        tr_vm_waits_destroy(t);
        free(t);
        snprintf(why, n, "cannot start the collector thread");
        return TVM_ERR_LIMIT;
    }
    tr_sigpipe_release(&g);
    t->tp = tp;
    t->file = opened;
    t->fdout = fdout;
    /* trace_delivered waits for it from here to the end of its last
     * drain (trace/tr_delivered.c). */
    tr_delivered_add(vm, t);
    *out = t;
    return TVM_OK;
}

/* Publishes t, built for s by tr_vm_new, as s's pipeline.  The
 * permission held (or s not published yet). */
static void tr_vm_publish(TrSession *s, TrVm *t, SchedSystem *sys)
{
    /* [TP1] release: the TrVm whole before its pointers; pairs with
     * [TP1'] in the emitters (tr_vm_sess.c) and tr_vm_emit_fast(). */
    for (int i = 0; i < t->tp->nrings; i++)
        t->tp->rings[i].tag = s->sid;
    vm_atomic_store_ptr_release(&s->out, t);
    /* [TP2] `out` before the rings (release): an emitter that loads a
     * ring ([TP1'] acquire) and finds it full finds `out` in the general
     * path, never a NULL that would drop the event between two written
     * ones.  A process that sees `out` but no ring yet writes by the
     * general path into the same ring. */
    if (!vm_atomic_load_relaxed(&s->gated) && !s->tracer)   /* written by this thread */
        for (int i = 0; i < sys->n; i++)
            vm_atomic_store_ptr_release(&sys->scheds[i].trace_ring[s->slot], &t->tp->rings[i]);
}

tvm_status tr_vm_start(tvm_vm *vm, TrSession *s, const tvm_trace_options *o, char *why,
                       size_t n)
{
    SchedSystem *sys = vm_sched_start(vm, vm->schedulers);
    TrVm *t = NULL;
    tvm_status st = tr_vm_new(vm, s, o, sys->n, &t, why, n);
    if (st == TVM_OK)
        tr_vm_publish(s, t, sys);
    return st;
}

/* ==== stop ==== */

void tr_vm_unpublish_rings(tvm_vm *vm, TrSession *s)
{
    SchedSystem *sys = vm_sched_of(vm);
    for (int i = 0; sys && i < sys->n; i++)
        vm_atomic_store_relaxed(&sys->scheds[i].trace_ring[s->slot], 0);
}

TrVm *tr_vm_unpublish(tvm_vm *vm, TrSession *s)
{
    TrVm *t = vm_atomic_load_ptr_relaxed(&s->out);
    tr_vm_unpublish_rings(vm, s);                         /* (1) */
    /* [TP2] the rings before `out` (release): an emitter whose general
     * path loaded `out` NULL ([TP1'] acquire) loads no ring afterwards,
     * so nothing of its is written after an event it dropped. */
    vm_atomic_store_ptr_release(&s->out, NULL);
    return t;
}

bool tr_vm_free(tvm_vm *vm, TrVm *t)
{
    if (t->fdout)
        tr_fdout_closing(t->fdout);
    /* What it wrote and lost, for the session's counts (the producers
     * stopped: step (2) came before; so did the last record).  Added
     * before the rings are freed: a tvm_trace_stop's pipeline is counted
     * from them until then (TrSession.draining). */
    TrStats *st = tr_pipeline_stats(t->tp);
    uint64_t written = 0, lost = 0;
    for (int i = 0; i < st->nrings; i++) {
        written += st->ring[i].emitted;
        lost += st->ring[i].lost;
    }
    free(st);
    tr_session_add_counts(vm, t->sess, t, written, lost);
    /* The sinks' close and the stream's fclose write on this thread: a
     * pipe without a reader is their failure, not a SIGPIPE. */
    TrSigpipe g;
    tr_sigpipe_hold(&g);
    /* (3): the last drain (trace_delivered's marks answered once it is
     * in the sink), then no later call waits for t, then the rest. */
    tr_pipeline_finish(t->tp);
    tr_delivered_remove(vm, t);
    tr_pipeline_free(t->tp);
    tr_vm_waits_destroy(t);       /* lossless: wake whoever still waits for room */
    /* The close's own last flush fails like a sink's write (the sink's
     * close flushed already: it has rarely anything left). */
    int e = close_opened(t->file, t->fdout);
    tr_sigpipe_release(&g);
    TrOutFail *f = &t->sess->fail;
    if (e)
        tr_outfail_set(f, e, NULL, t->format);
    /* Each write was checked by its sink: the collector threads that
     * recorded a failure were joined by tr_pipeline_free. */
    bool ok = !tr_outfail_failed(f);
    free(t);
    return ok;
}

/* ==== the default session: tvm_trace_start, tvm_trace_stop ==== */

tvm_status tvm_trace_start(tvm_vm *vm, const tvm_trace_options *opts, tvm_error *err)
{
    static const char fn[] = "tvm_trace_start";
    tvm_trace_options o = { .format = TVM_TRACE_TEXT };
    /* Room for a path vm_msg_path shortened and the OS's reason after it. */
    char why[2048], bad[256];
    if (!vm)
        return fail(err, TVM_ERR_BADARG, fn, "NULL vm");
    if (opts && !vm_opts_copy(&o, sizeof o, opts, bad, sizeof bad)) {
        snprintf(why, sizeof why, "tvm_trace_options: %s", bad);
        return fail(err, TVM_ERR_BADARG, fn, why);
    }
    if (vm_running_process())
        return fail(err, TVM_ERR_BADARG, fn, "called from a process (a native); "
                                             "call it from a thread of the embedder");
    /* A collector thread (a sink's callback, any session's): the start
     * waits for a stop that drains, whose sink may be this very thread. */
    if (tr_in_collector())
        return fail(err, TVM_ERR_BADARG, fn, "called from a sink (a trace callback): a "
                                             "start waits for a stopping pipeline's sink");
    TrLimits lim;
    tr_limits_of(&o, &lim);
    if (!tr_options_check(&o, why, sizeof why) || !tr_limits_check(&lim, why, sizeof why))
        return fail(err, TVM_ERR_BADARG, fn, why);
    if (o.owner)
        return fail(err, TVM_ERR_BADARG, fn, "the default session has no owner");
    SchedSystem *sys = vm_sched_start(vm, vm->schedulers);
    /* After a tvm_trace_stop that still drains its pipeline: a start
     * right after a stop starts, whichever thread stopped (the stop
     * section below says why it waits). */
    pthread_mutex_lock(&vm->trace_lock);
    vm_code_perm_acquire(vm);
    TrSession *d = tr_session_at(vm, 0);
    tvm_status st = TVM_ERR_EXISTS;
    if (vm_atomic_load_ptr_relaxed(&d->out)) {
        snprintf(why, sizeof why, "a trace pipeline is already running");
    } else {
        /* The limits once the pipeline exists, before it is published
         * (its first event meets them): a start that fails (an output
         * that does not open, a refused thread) leaves the default
         * session's limits, state and counts as they were, and no
         * duration running out on a pipeline that never started, whose
         * stop would remove the session's patterns and flags. */
        TrVm *t = NULL;
        st = tr_vm_new(vm, d, &o, sys->n, &t, why, sizeof why);
        if (st == TVM_OK) {
            tr_session_restart_default(vm, &lim);
            tr_vm_publish(d, t, sys);
        }
    }
    vm_code_perm_release(vm);
    pthread_mutex_unlock(&vm->trace_lock);
    if (st != TVM_OK)
        return fail(err, st, fn, why);
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    return TVM_OK;
}

/*
 * The default session's stop (tvm_trace_stop): steps (1) and (2) under
 * the code-modification permission, the drain (3) after it is released.
 *
 * Why not drain under the permission.  Under the lossless policy the
 * drain waits for the sink: tr_pipeline_free hands every event still in
 * the rings to it, and a last record that finds the shared ring full
 * waits for room.  A sink that stalls (a callback that blocks, a pipe
 * nobody reads) then held every trace_pattern, load and session start or
 * stop in the VM, not only this caller, whose sink it is.  So the stop
 * keeps the permission only for what orders it against them:
 *
 *   Under the permission.  (1) Unpublish: `out` NULL and the ring
 *   pointers cleared; t becomes the session's `draining` pipeline, so a
 *   count (tvm_session_info_get, under the permission) still includes
 *   its events.  (2) The grace period: every emitter that loaded t is
 *   done with it; later ones find no pipeline and write nothing (a
 *   lossless process suspended for room in t reloads `out` when woken:
 *   NULL).  Then the last record, if a limit asked for the session's stop
 *   and the stopper has not written it yet: into t now if it fits, else
 *   claimed (tr_session_final_record_claim: final_written set, its counts
 *   taken now, final after (2)).  Written or claimed, the stopper (the
 *   only other writer of a last record, under the same permission later)
 *   finds it done, removes the settings and marks the session stopped;
 *   it never sees t (unpublished).  (So tvm_session_info_get may report
 *   the session stopped while a claimed record is still on its way; it
 *   is in the sink before tvm_trace_stop returns.)  Nothing else writes
 *   into t: its producers passed (2), and t is no session's `out` any
 *   more.  An embedder's thread blocked inside tvm_call on a full ring
 *   (lossless: a call context cannot be suspended) waits offline,
 *   holding the pipeline but not t (trace/tr_vm_proc.c): (2) does not
 *   wait for it, and tr_vm_free frees the pipeline once it let go.
 *
 *   After the release.  This thread alone has t.  A claimed record goes
 *   in first, waiting for room (it still follows every event: (2) came
 *   before it), then tr_vm_free drains the rings into the sink, finishes
 *   and closes the output, adds t's counts to the session and clears
 *   `draining` together (under the sessions' lock: a count sees them in
 *   one place or the other), then frees the rings.  Meanwhile the
 *   schedulers run on: trace_pattern, loads, flags and other sessions'
 *   starts and stops change code and settings as usual, and the events
 *   they cause find no pipeline for this session.  The return value is
 *   unchanged: TVM_ERR_IO when the output failed (tr_vm_free), and
 *   TVM_ERR_NOTFOUND when no pipeline ran.
 *
 *   trace_lock, held by tvm_trace_stop from before (1) to after the
 *   drain, and by tvm_trace_start and tr_vm_destroy around theirs, keeps
 *   the default session to one pipeline at a time.  A start that comes
 *   while a stop drains waits for it and then starts a new pipeline: a
 *   caller that stops and starts again (from two threads, say) gets its
 *   new pipeline, rather than an error that depends on how fast the old
 *   sink is, and the restart (tr_session_restart_default, which resets
 *   the counts and the last record's state) never meets a pipeline still
 *   counted in them.  Only the default session's start and stop wait so,
 *   for this caller's own sink.  A second tvm_trace_stop waits for the
 *   first and returns TVM_ERR_NOTFOUND, after the output is finished, as
 *   when the permission serialized them.  tvm_destroy (tr_vm_destroy)
 *   takes trace_lock first, so it never frees the session table under a
 *   drain (a destroy concurrent with a call is the caller's bug; this
 *   keeps it from being a use after free here).
 */
static tvm_status stop_pipeline(tvm_vm *vm, TrSession *s)
{
    vm_code_perm_acquire(vm);
    TrVm *t = tr_vm_unpublish(vm, s);                         /* (1) */
    TrFinalRec owed;
    bool owe = false;
    if (t) {
        tr_session_draining(vm, s, t);
        vm_progress_sync(vm_progress_get(vm), NULL);          /* (2) */
        /* A limit asked for the session's stop and the stopper has not
         * written its last record (tvm_trace_stop came first): it goes
         * in after every event of the session (the sync above), before
         * the pipeline drains and closes. */
        if (vm_atomic_load_relaxed(&s->reason) != TR_STOP_NONE)
            owe = tr_session_final_record_claim(vm, s, t, &owed);
    }
    vm_code_perm_release(vm);
    if (!t)
        return TVM_ERR_NOTFOUND;
    if (owe)
        tr_session_final_record_put(vm, s, t, &owed);
    return tr_vm_free(vm, t) ? TVM_OK : TVM_ERR_IO;            /* (3) */
}

tvm_status tvm_trace_stop(tvm_vm *vm)
{
    /* From a collector thread (a sink's callback, any session's) the stop
     * would wait for its sink, perhaps this very thread; no tvm_error
     * here, the status alone says it (include/tracevm.h). */
    if (!vm || vm_running_process() || tr_in_collector())
        return TVM_ERR_BADARG;
    pthread_mutex_lock(&vm->trace_lock);
    tvm_status st = stop_pipeline(vm, tr_session_at(vm, 0));
    pthread_mutex_unlock(&vm->trace_lock);
    return st;
}

/*
 * Every session's pipeline, the default's too (tvm_destroy, while the
 * schedulers run; the stopper has quit), after a tvm_trace_stop that
 * still drains (trace_lock: the stop section says why).
 *
 * A last record the stopper still owed when it quit (a limit asked for
 * the stop and the stopper had not come to it, or its record found the
 * shared ring full under the lossless policy and it was retrying every
 * 10 ms) is written here, after every event of the session (the grace
 * period), waiting for room: the stopper never comes back for it, and a
 * lossless record is never dropped.  A session still live gets none, as
 * before.
 *
 * Unlike tvm_trace_stop this drains holding the permission, as it
 * always did: a sink that stalls here delays only code changes that
 * processes of the VM being destroyed make (the embedder's threads may
 * no longer use it), and the destroyer waits for the same sinks anyway.
 */
void tr_vm_destroy(tvm_vm *vm)
{
    pthread_mutex_lock(&vm->trace_lock);
    vm_code_perm_acquire(vm);
    TrVm *t[VM_SESSIONS_MAX];
    bool any = false;
    for (unsigned i = 0; i < VM_SESSIONS_MAX; i++)
        any |= (t[i] = tr_vm_unpublish(vm, tr_session_at(vm, i))) != NULL;
    if (any)
        vm_progress_sync(vm_progress_get(vm), NULL);
    for (unsigned i = 0; i < VM_SESSIONS_MAX; i++) {
        if (!t[i])
            continue;
        TrSession *s = tr_session_at(vm, i);
        if (vm_atomic_load_relaxed(&s->reason) != TR_STOP_NONE)
            tr_session_final_record_in(vm, s, t[i], true);
        tr_vm_free(vm, t[i]);
    }
    vm_code_perm_release(vm);
    pthread_mutex_unlock(&vm->trace_lock);
}

TrPipeline *tr_vm_flush_begin(tvm_vm *vm, TrSession *s)
{
    (void)vm;
    TrVm *t = vm_atomic_load_ptr_acquire(&s->out);
    if (!t)
        return NULL;
    tr_pipeline_hold(t->tp);
    return t->tp;
}

void tr_vm_flush_end(TrPipeline *tp)
{
    tr_flush(tp);
    tr_pipeline_unhold(tp);
}

void tr_vm_init(tvm_vm *vm)
{
    tr_sessions_init(vm);
}

void tr_vm_release(tvm_vm *vm)
{
    tr_sessions_free(vm);
}
