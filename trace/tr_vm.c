/*
 * trace/tr_vm.c - the VM's trace pipeline: tvm_trace_start and
 * tvm_trace_stop, and the events processes write into it (call, spawn,
 * exit).
 *
 * Protocol: publishing and retiring the pipeline.
 *
 * Terms.  vm->trace_out points at the running TrVm (a pipeline with its
 * sink) or is NULL.  An *emitter* is a thread writing an event for a
 * process: the scheduler thread running that process (call, spawn, exit),
 * or a foreign thread with a call context (a call inside tvm_call, a
 * spawn through tvm_spawn).
 *
 * Rule.  An emitter loads trace_out ([TP1'] acquire) and uses what it
 * found only while it is an online QSBR reader, passing no quiescent state
 * in between.  A scheduler thread is online while it runs a process and
 * reports quiescent states only between two processes; a foreign thread is
 * online inside its outermost tvm_call; vm_hook_spawn, which a foreign
 * thread may reach outside any tvm_call, brackets its use with
 * vm_qsbr_call_enter/leave (a no-op on a scheduler thread, nesting inside
 * tvm_call).  Under the lossless policy an emit may suspend the process
 * (trace/tr_vm_proc.c: the lossless wait), which passes a quiescent
 * state: it reloads the pointer afterwards and never uses the old one.
 *
 * Start.  The TrVm is built whole (pipeline, sink, collector running) and
 * then published ([TP1] release): an emitter that sees the pointer sees
 * it initialised.  trace_lock serializes start and stop.  Each scheduler
 * also gets its ring's address (Scheduler.trace_ring, stored the same way
 * just before trace_out): the fast path of call and return events
 * (trace/tr_vm_fast.h) loads that one pointer instead of trace_out, the
 * TrVm and the scheduler id.  It is the same pointer in another place,
 * under the same rule: used only while online, cleared in step (1).
 *
 * Stop.  (1) trace_out := NULL, and every Scheduler.trace_ring.  (2) Wait
 * for thread progress (vm_progress_sync): every online reader passes a quiescent state or goes
 * offline after the store, so every emitter that loaded the old pointer is
 * done with it, and every later load returns NULL (the grace period's
 * barriers order the store before the readers' later loads).  (3)
 * tr_pipeline_free drains the rings into the sink, finishes the output
 * and frees everything.  Freeing before (2) could free a ring under a
 * producer; unpublishing after (2) would let a producer load the pointer
 * after the wait.  For ThreadSanitizer the wait is annotated (vm/qsbr.h):
 * each reader's emits happen before its report, the report before the
 * free.
 *
 * Rings.  Ring i is written only by scheduler i's thread: an emitter for
 * a process passes p->sched->id, and a process's events are written on
 * its own fiber, which runs on p->sched's thread; call contexts have no
 * scheduler and write to the shared ring (-1, under its mutex).  The
 * pipeline has one ring per scheduler because tvm_trace_start starts the
 * schedulers first.
 */
#include "trace/tr_vm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vm/progress.h"
#include "trace/tr.h"
#include "trace/tr_internal.h"
#include "trace/tr_vm_internal.h"
#include "vm/qsbr.h"
#include "vm/sched.h"

/* ==== emitters ==== */

/* tr_vm_current ([TP1'] acquire, trace/tr_vm_internal.h) pairs with [TP1]
 * in tvm_trace_start(). */

void vm_hook_spawn(Process *parent, uint64_t child, const Export *entry, int argc,
                 const Term *args)
{
    uintptr_t tf = vm_atomic_load_relaxed(&parent->trace);
    if (!(tf & VM_TRACE_PROCS))
        return;
    Term terms[VM_MAX_ARITY + 1];
    terms[0] = make_pid(child);
    memcpy(terms + 1, args, (size_t)argc * sizeof(Term));
    TrEmit ev = {
        .kind = TR_K_SPAWN,
        .flags = tr_vm_record_flags(tf),
        .pid = parent->pid,
        .mod = entry->mod,
        .fun = entry->name,
        .arity = (unsigned)argc,
        .terms = terms,
        .nterms = (unsigned)argc + 1,
    };
    vm_qsbr_call_enter();
    TrVm *t = tr_vm_current(parent->vm);
    if (t)
        tr_vm_emit(parent, t, &ev);
    vm_qsbr_call_leave();
}

void vm_hook_exit(Process *p, Term reason)
{
    uintptr_t tf = vm_atomic_load_relaxed(&p->trace);
    if (!(tf & VM_TRACE_PROCS))
        return;
    TrVm *t = tr_vm_current(p->vm);
    if (!t)
        return;
    TrEmit ev = {
        .kind = TR_K_EXIT,
        .flags = tr_vm_record_flags(tf) | TR_F_NO_MFA,
        .pid = p->pid,
        .terms = &reason,
        .nterms = 1,
    };
    tr_vm_emit(p, t, &ev);
}

/* ==== start ==== */

static tvm_status fail(tvm_error *err, tvm_status st, const char *fn, const char *why)
{
    if (err) {
        err->status = st;
        snprintf(err->message, sizeof err->message, "%s: %s", fn, why);
    }
    return st;
}

/* The options that do not depend on the VM; false with a reason. */
static bool options_check(const tvm_trace_options *o, char *why, size_t n)
{
    if ((unsigned)o->format > TVM_TRACE_CALLBACK)
        snprintf(why, n, "bad format %d (expected text, jsonl, chrome, ctf or callback)",
                 (int)o->format);
    else if (o->format == TVM_TRACE_CALLBACK && !o->callback)
        snprintf(why, n, "the callback format needs a callback");
    else if (o->policy != TVM_TRACE_DROP && o->policy != TVM_TRACE_LOSSLESS)
        snprintf(why, n, "bad policy %d (expected drop or lossless)", (int)o->policy);
    else if (o->format == TVM_TRACE_CTF && !o->path)
        snprintf(why, n, "the ctf format needs a path (a directory)");
    else if (o->format == TVM_TRACE_CHROME && !o->path && !o->file)
        snprintf(why, n, "the chrome format needs a path or a file");
    else
        return true;
    return false;
}

/* The sink for o; NULL with a reason (and status) when the output cannot
 * be opened.  A file opened from o->path goes to *opened. */
static TrSink *sink_new(const tvm_trace_options *o, FILE **opened, char *why, size_t n,
                        tvm_status *st)
{
    *st = TVM_ERR_IO;
    if (o->format == TVM_TRACE_CALLBACK)
        return tr_sink_api_new(o->callback, o->callback_data);
    if (o->format == TVM_TRACE_CTF) {
        TrSink *s = tr_sink_ctf_new(o->path, tr_ctf_clock_offset(), why, n);
        return s;
    }
    FILE *out = o->file ? (FILE *)o->file : stderr;
    if (o->path) {
        out = fopen(o->path, "w");
        if (!out) {
            snprintf(why, n, "cannot open %s: %s", o->path, strerror(errno));
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

/* Builds and starts the pipeline of o with nscheds scheduler rings. */
static tvm_status tr_vm_new(tvm_vm *vm, const tvm_trace_options *o, int nscheds, TrVm **out,
                            char *why, size_t n)
{
    TrVm *t = vm_calloc(1, sizeof *t);
    t->vm = vm;
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
    tvm_status st;
    TrSink *sink = sink_new(o, &opened, why, n, &st);
    if (!sink) {
        tr_pipeline_free(tp);
        tr_vm_waits_destroy(t);
        free(t);
        return st;
    }
    tr_pipeline_add_sink(tp, sink);
    if (!tr_pipeline_start(tp)) {
        tr_pipeline_free(tp);
        if (opened)
            fclose(opened);
        tr_vm_waits_destroy(t);
        free(t);
        snprintf(why, n, "cannot start the collector thread");
        return TVM_ERR_LIMIT;
    }
    t->tp = tp;
    t->file = opened;
    *out = t;
    return TVM_OK;
}

/* trace_lock, offline meanwhile if the caller is a reader (a foreign
 * thread inside tvm_call): a stop holds it across a grace period. */
static void trace_lock(tvm_vm *vm)
{
    bool was = vm_qsbr_block_begin();
    pthread_mutex_lock(&vm->trace_lock);
    vm_qsbr_block_end(was);
}

tvm_status tvm_trace_start(tvm_vm *vm, const tvm_trace_options *opts, tvm_error *err)
{
    static const char fn[] = "tvm_trace_start";
    tvm_trace_options o = { .format = TVM_TRACE_TEXT };
    char why[512], bad[256];
    if (!vm)
        return fail(err, TVM_ERR_BADARG, fn, "NULL vm");
    if (opts && !vm_opts_copy(&o, sizeof o, opts, bad, sizeof bad)) {
        snprintf(why, sizeof why, "tvm_trace_options: %s", bad);
        return fail(err, TVM_ERR_BADARG, fn, why);
    }
    if (vm_running_process())
        return fail(err, TVM_ERR_BADARG, fn, "called from a process (a native); "
                                             "call it from a thread of the embedder");
    if (!options_check(&o, why, sizeof why))
        return fail(err, TVM_ERR_BADARG, fn, why);
    SchedSystem *sys = vm_sched_start(vm, vm->schedulers);
    trace_lock(vm);
    TrVm *t = NULL;
    tvm_status st = TVM_ERR_EXISTS;
    if (vm_atomic_load_ptr_relaxed(&vm->trace_out))
        snprintf(why, sizeof why, "a trace pipeline is already running");
    else
        st = tr_vm_new(vm, &o, sys->n, &t, why, sizeof why);
    if (st == TVM_OK) {
        /* [TP1] release: the TrVm whole before its pointers; pairs with
         * [TP1'] in tr_vm_current() and tr_vm_emit_fast().  The rings
         * first: a process that sees one but not trace_out yet takes the
         * general path, which finds trace_out or writes nothing. */
        for (int i = 0; i < sys->n; i++)
            vm_atomic_store_ptr_release(&sys->scheds[i].trace_ring, &t->tp->rings[i]);
        vm_atomic_store_ptr_release(&vm->trace_out, t);
    }
    pthread_mutex_unlock(&vm->trace_lock);
    if (st != TVM_OK)
        return fail(err, st, fn, why);
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    return TVM_OK;
}

/* ==== stop ==== */

/* Steps (1)-(3) of the stop (protocol above); trace_lock held. */
static void tr_vm_retire(tvm_vm *vm, TrVm *t)
{
    vm_atomic_store_relaxed(&vm->trace_out, 0);                /* (1) */
    SchedSystem *sys = vm_sched_of(vm);
    for (int i = 0; sys && i < sys->n; i++)
        vm_atomic_store_relaxed(&sys->scheds[i].trace_ring, 0);
    vm_progress_sync(vm_progress_get(vm), NULL);              /* (2) */
    tr_pipeline_free(t->tp);                                   /* (3) */
    tr_vm_waits_destroy(t);       /* lossless: wake whoever still waits for room */
    if (t->file)
        fclose(t->file);
    free(t);
}

tvm_status tvm_trace_stop(tvm_vm *vm)
{
    if (!vm || vm_running_process())
        return TVM_ERR_BADARG;
    trace_lock(vm);
    TrVm *t = vm_atomic_load_ptr_relaxed(&vm->trace_out);
    if (t)
        tr_vm_retire(vm, t);
    pthread_mutex_unlock(&vm->trace_lock);
    return t ? TVM_OK : TVM_ERR_NOTFOUND;
}

void tr_vm_destroy(tvm_vm *vm)
{
    tvm_trace_stop(vm);
}
