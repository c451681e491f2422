/*
 * breakpoints/bp_session.c - trace sessions' ends: the stopper thread,
 * destroy, and the C API and natives that create and end sessions.
 *
 * Protocol: ending a session while every scheduler runs.
 *
 * A session ends in one of three ways: a limit (trace/tr_session.c's
 * gate, on a traced call's path: it only asks), its owner process exiting
 * (the exit hook: it only asks too) or its creator destroying it.  Asking
 * moves the session from LIVE to STOPPING; from then on its gate admits
 * nothing.  The *stopper*, a thread of its own started with the VM, does
 * the work, so no traced call ever removes a breakpoint or waits: it
 * takes the code-modification permission (which orders it against
 * trace_pattern, loads, pipeline starts and stops, and any other end of
 * the same session) and then
 *   1. clears the session's ring pointers (Scheduler.trace_ring[slot]):
 *      its events leave the fast path for the general one, where the
 *      gate refuses them (state not LIVE);
 *   2. removes its breakpoints, on_load flags included, with the staged
 *      sequence (bp_remove_session: the same stages and waits as
 *      trace_pattern, for every record that has an entry of the session;
 *      other sessions' entries are mirrored unchanged);
 *   3. clears its process flags: the defaults for new processes and a
 *      generation of flags for all that clears every flag of the session,
 *      which each process folds in before it next runs (the wait of step
 *      4 is the one the change needs: trace/tr_flags_all.c);
 *   4. waits for a grace period: every emit that passed the gate before
 *      step 1 (an emitter is an online reader) has finished, so
 *   5. its last record (stopped, with the reason and the events written
 *      and lost) comes after every event of the session, into its
 *      pipeline (not flushed: a reader that does not read would hold the
 *      stopper; the collector delivers it within its poll interval) or to
 *      its tracer process; a full ring (lossless, a stalled sink) is not
 *      waited for under the permission: the stop is tried again later,
 *      steps 1-4 found done (trace/tr_session.c says why);
 *   6. marks it STOPPED.
 * A destroy (tvm_session_destroy, trace:session_destroy/1, or the
 * stopper after an owner's exit) marks it DESTROYING first, so neither a
 * limit nor the stopper starts on it again, does the same steps (skipping
 * those a stop already did: settings_removed, final_written, under the
 * permission), then unpublishes its pipeline, waits for a grace period,
 * releases the permission, frees the pipeline (its collector drains the
 * rings into the sink and closes it; a descriptor that does not drain is
 * given up after a slice: trace/tr_fdout.c) and frees the slot.  Other
 * sessions are not touched at any step: their entries, flags, rings and
 * sinks are their own.
 *
 * Why a session's events never outlive its end: an event is written only
 * by an emitter that saw the session LIVE (the gate) or found its ring
 * (the fast path), both while online; after steps 1 and 4 neither can
 * happen any more, and whatever did happen is finished.  Why nothing the
 * session set survives: breakpoint entries and process flags are set only
 * while the session is live, checked under the permission (trace_pattern)
 * or, for flags, under the flags lock or after a fold under the
 * process's lock, and steps 2 and 3 take the same permission and the
 * flags lock after the state changed (trace/tr_flags_all.c, "A session's
 * end").
 */
#include "breakpoints/bp_session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakpoints/bp.h"
#include "breakpoints/bp_engine_internal.h"
#include "trace/tr_vm.h"
#include "vm/atom.h"
#include "vm/codeperm.h"
#include "vm/heap.h"
#include "vm/progress.h"
#include "vm/sched.h"

bool bp_session_sid(tvm_vm *vm, tvm_session s, unsigned *sid, tvm_status *st, char *why,
                    size_t whylen)
{
    return tr_session_resolve(vm, s.id, sid, st, why, whylen);
}

/* Steps 1-4: everything the session set, gone.  The permission held. */
static void remove_settings(tvm_vm *vm, TrSession *s, unsigned sid)
{
    if (s->settings_removed)
        return;
    tr_vm_unpublish_rings(vm, s);
    bp_remove_session(vm, sid);
    tr_flags_all_publish(vm, sid, TVM_TRACE_ALL, VM_TRACE_ALL, false, true);
    vm_progress_sync(vm_progress_get(vm), vm_running_process());
    s->settings_removed = true;
}

/* The stopper's stop of s, if it is still session `id` (a limit, or
 * before an owner's destroy).  A last record that finds its ring full
 * (a stalled sink, lossless) is tried again later, the permission
 * released meanwhile (trace/tr_session.c, tr_session_final_record_in):
 * the session stays STOPPING until it is written. */
static void session_stop(tvm_vm *vm, TrSession *s, uint64_t id, bool destroy)
{
    vm_code_perm_acquire(vm);
    uintptr_t w = vm_atomic_load_acquire(&s->state);
    if (tr_sess_st(w) == TR_SESS_STOPPING && tr_session_id(vm, s) == id) {
        remove_settings(vm, s, tr_sess_sid(w));
        if (tr_session_final_record(vm, s))
            tr_session_stopped(vm, s);
        else if (!destroy)    /* else the destroy that follows writes it */
            tr_session_retry_stop(vm, s);
    }
    vm_code_perm_release(vm);
}

tvm_status bp_session_destroy(tvm_vm *vm, uint64_t id, TrStopReason why, char *whybuf,
                              size_t whylen)
{
    TrSession *s = tr_session_find(vm, id, whybuf, whylen);
    if (!s || !tr_session_begin_destroy(vm, s, id, why, whybuf, whylen))
        return TVM_ERR_NOTFOUND;
    /* DESTROYING: this call alone goes on with s, whose identity stays
     * until the release below. */
    vm_code_perm_acquire(vm);
    remove_settings(vm, s, s->sid);
    bool written = tr_session_final_record(vm, s);
    struct TrVm *t = tr_vm_unpublish(vm, s);
    if (t)
        vm_progress_sync(vm_progress_get(vm), vm_running_process());
    vm_code_perm_release(vm);
    /* A last record that found its ring full waits for room here, where
     * this call alone has s and t, and no code change waits with it. */
    if (!written && t)
        tr_session_final_record_in(vm, s, t, true);
    /* Its output's failure, taken before the slot is given back (a new
     * session there resets the record). */
    bool failed = t && !tr_vm_free(vm, t) && tr_outfail_get(&s->fail, id, whybuf, whylen);
    tr_session_release(vm, s);
    return failed ? TVM_ERR_IO : TVM_OK;
}

/* ==== the stopper ==== */

static void *stopper_main(void *arg)
{
    tvm_vm *vm = arg;
    unsigned slot;
    uint64_t id;
    bool destroy;
    while (tr_sessions_wait(vm, &slot, &id, &destroy)) {
        /* By id, not by slot: the session may be destroyed meanwhile
         * (tvm_session_destroy) and its slot given to a new session. */
        session_stop(vm, tr_session_at(vm, slot), id, destroy);
        if (destroy) {
            char why[160];
            bp_session_destroy(vm, id, TR_STOP_OWNER, why, sizeof why);
        }
    }
    return NULL;
}

void bp_sessions_start(tvm_vm *vm)
{
    BpEngine *E = vm->bp;
    int rc = pthread_create(&E->stopper, NULL, stopper_main, vm);
    if (rc != 0) {
        errno = rc;
        vm_die("pthread_create (trace session stopper)");
    }
    E->stopper_started = true;
}

void bp_sessions_stop(tvm_vm *vm)
{
    BpEngine *E = vm->bp;
    if (!E || !E->stopper_started)
        return;
    tr_sessions_quit(vm);
    pthread_join(E->stopper, NULL);
    E->stopper_started = false;
}

/* ==== the C API ==== */

static tvm_status fail(tvm_error *err, tvm_status st, const char *fn, const char *why)
{
    if (err) {
        err->status = st;
        snprintf(err->message, sizeof err->message, "%s: %s", fn, why);
    }
    return st;
}

static tvm_status ok(tvm_error *err)
{
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    return TVM_OK;
}

/* An owner that exited before its session was published: the exit hook
 * did not see the session, so ask for its end now. */
static void owner_check(tvm_vm *vm, TrSession *s)
{
    if (!s->owner)
        return;
    Process *o = tr_proc_get(vm, s->owner);    /* NULL once it is exiting */
    if (o)
        vm_proc_put(vm_sched_of(vm), o);
    else
        tr_session_request_stop(vm, s, TR_STOP_OWNER, true);
}

tvm_status tvm_session_create(tvm_vm *vm, const char *name, const tvm_trace_options *opts,
                              tvm_session *out, tvm_error *err)
{
    static const char fn[] = "tvm_session_create";
    /* The host's options as this library's struct (vm_opts_copy: the size
     * rule of include/tracevm.h); NULL is text to stderr. */
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_TEXT };
    /* Room for a path vm_msg_path shortened and the OS's reason after it. */
    char why[2048];
    if (!vm || !out)
        return fail(err, TVM_ERR_BADARG, fn, !vm ? "NULL vm" : "NULL out");
    if (opts && !vm_opts_copy(&o, sizeof o, opts, why, sizeof why))
        return fail(err, TVM_ERR_BADARG, fn, why);
    if (!name || !*name || strlen(name) > TR_SESSION_NAME_MAX)
        return fail(err, TVM_ERR_BADARG, fn, "a session's name is 1..255 bytes");
    if (vm_running_process())
        return fail(err, TVM_ERR_BADARG, fn, "called from a process (a native); "
                                             "call it from a thread of the embedder");
    TrLimits lim;
    tr_limits_of(&o, &lim);
    if (!tr_options_check(&o, why, sizeof why) || !tr_limits_check(&lim, why, sizeof why))
        return fail(err, TVM_ERR_BADARG, fn, why);
    TrSession *s = tr_session_reserve(vm, name, 0, o.owner, &lim, why, sizeof why);
    if (!s)
        return fail(err, TVM_ERR_LIMIT, fn, why);
    tvm_status st = tr_vm_start(vm, s, &o, why, sizeof why);
    if (st != TVM_OK) {
        tr_session_release(vm, s);
        return fail(err, st, fn, why);
    }
    out->id = s->id;
    tr_session_publish(vm, s);
    owner_check(vm, s);
    return ok(err);
}

tvm_status tvm_session_destroy(tvm_vm *vm, tvm_session s, tvm_error *err)
{
    static const char fn[] = "tvm_session_destroy";
    /* Room for an output failure's message: a path and the OS's reason. */
    char why[2048];
    if (!vm)
        return fail(err, TVM_ERR_BADARG, fn, "NULL vm");
    if (s.id == 0)
        return fail(err, TVM_ERR_BADARG, fn, "the default session is never destroyed "
                                             "(tvm_trace_stop stops its pipeline)");
    if (vm_running_process())
        return fail(err, TVM_ERR_BADARG, fn, "called from a process (a native); "
                                             "call it from a thread of the embedder");
    if (tr_in_collector())
        return fail(err, TVM_ERR_BADARG, fn, "called from a sink (a trace callback): a "
                                             "destroy waits for the session's sink");
    tvm_status st = bp_session_destroy(vm, s.id, TR_STOP_DESTROYED, why, sizeof why);
    return st == TVM_OK ? ok(err) : fail(err, st, fn, why);
}

tvm_status tvm_session_info_get(tvm_vm *vm, tvm_session s, tvm_session_info *out)
{
    char why[160];
    if (!vm || !out)
        return TVM_ERR_BADARG;
    TrSession *ts = tr_session_find(vm, s.id, why, sizeof why);
    if (!ts)
        return TVM_ERR_NOTFOUND;
    vm_code_perm_acquire(vm);
    bool ok2 = tr_session_info(vm, ts, s.id, out->name, sizeof out->name, &out->live,
                               &out->stopped);
    if (ok2)
        tr_session_counts(vm, ts, &out->written, &out->lost);
    vm_code_perm_release(vm);
    return ok2 ? TVM_OK : TVM_ERR_NOTFOUND;
}

tvm_status tvm_session_error(tvm_vm *vm, tvm_session s, tvm_error *err)
{
    static const char fn[] = "tvm_session_error";
    char why[2048];
    if (!vm)
        return fail(err, TVM_ERR_BADARG, fn, "NULL vm");
    TrSession *ts = tr_session_find(vm, s.id, why, sizeof why);
    if (!ts)
        return fail(err, TVM_ERR_NOTFOUND, fn, why);
    /* The record names its session: a slot given to a new session
     * meanwhile answers for that one only (trace/tr_outfail.h). */
    if (tr_outfail_get(&ts->fail, s.id, why, sizeof why))
        return fail(err, TVM_ERR_IO, fn, why);
    return ok(err);
}

tvm_status tvm_session_flush(tvm_vm *vm, tvm_session s)
{
    char why[160];
    /* From a collector thread the flush would wait for that thread. */
    if (!vm || vm_running_process() || tr_in_collector())
        return TVM_ERR_BADARG;
    TrSession *ts = tr_session_find(vm, s.id, why, sizeof why);
    if (!ts)
        return TVM_ERR_NOTFOUND;
    vm_code_perm_acquire(vm);
    bool live = tr_session_id(vm, ts) == s.id;
    struct TrPipeline *tp = live ? tr_vm_flush_begin(vm, ts) : NULL;
    vm_code_perm_release(vm);
    /* The wait without the permission: the collector may be running a
     * callback that takes it (a trace_pattern, a load). */
    if (tp)
        tr_vm_flush_end(tp);
    return tp ? TVM_OK : TVM_ERR_NOTFOUND;
}

/* ==== natives: trace:session_create/3, trace:session_destroy/1 ==== */

static tvm_status raise(Process *p, Atom reason)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(reason), NULL);
    return TVM_EXCEPTION;
}

static bool named(Term t, const char *name)
{
    return term_is_atom(t) && !strcmp(vm_atom_name(atom_value(t), NULL), name);
}

static bool count_of(Term t, uint64_t *v)
{
    if (!term_is_small(t) || small_value(t) < 0)
        return false;
    *v = (uint64_t)small_value(t);
    return true;
}

/* The option list: {max_events, N}, {rate, N} | {rate, {N, WindowMs}},
 * {rate_policy, stop | drop}, {duration, Ms}. */
static bool session_opts(Term l, TrLimits *lim)
{
    *lim = (TrLimits){ 0 };
    for (; term_is_cons(l); l = cons_tail(l)) {
        Term h = cons_head(l);
        if (!term_is_tuple(h) || tuple_arity(h) != 2)
            return false;
        Term k = tuple_elems(h)[0], v = tuple_elems(h)[1];
        uint64_t n, ms;
        if (named(k, "max_events") && count_of(v, &n) && n)
            lim->max_events = n;
        else if (named(k, "rate") && count_of(v, &n) && n)
            lim->rate = n;
        else if (named(k, "rate") && term_is_tuple(v) && tuple_arity(v) == 2 &&
                 count_of(tuple_elems(v)[0], &n) && n && count_of(tuple_elems(v)[1], &ms) && ms)
            lim->rate = n, lim->window_ns = tr_ms_to_ns(ms);
        else if (named(k, "rate_policy") && (named(v, "stop") || named(v, "drop")))
            lim->rate_drop = named(v, "drop");
        else if (named(k, "duration") && count_of(v, &ms) && ms)
            lim->duration_ns = tr_ms_to_ns(ms);
        else
            return false;
    }
    char why[128];
    return term_is_nil(l) && tr_limits_check(lim, why, sizeof why);
}

/*
 * trace:session_create(Name, Tracer, Opts) -> Session: a session whose
 * events go to the process Tracer as messages, destroyed when Tracer
 * exits; Opts are its limits.  badarg for a bad argument, system_limit
 * when every session slot is taken.
 */
tvm_status bp_nif_session_create(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                                 void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    Term name = vm_root_get(p, argv[0]), tracer = vm_root_get(p, argv[1]);
    TrLimits lim;
    if (!term_is_atom(name) || !term_is_pid(tracer) ||
        !session_opts(vm_root_get(p, argv[2]), &lim))
        return raise(p, ATOM_BADARG);
    char why[256];
    TrSession *s = tr_session_reserve(p->vm, vm_atom_name(atom_value(name), NULL),
                                      pid_value(tracer), pid_value(tracer), &lim, why,
                                      sizeof why);
    if (!s)
        return raise(p, ATOM_SYSTEM_LIMIT);
    uint64_t id = s->id;
    tr_session_publish(p->vm, s);
    owner_check(p->vm, s);
    /* Nothing after the publish may fail: a raise would leave the
     * session live, its handle lost, until its tracer exits.  So the tag
     * is predefined (interning it here failed on a full atom table). */
    Term e[2] = { make_atom(ATOM_TRACE_SESSION), make_small((int64_t)id) };
    *result = vm_root_push(p, vm_make_tuple(p, 2, e));
    return TVM_OK;
}

/* trace:session_destroy(Session) -> true, or false when it was destroyed
 * already.  A session with a pipeline (made from C) is the embedder's:
 * badarg. */
tvm_status bp_nif_session_destroy(tvm_env *env, int argc, const tvm_term *argv,
                                  tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    Term t = vm_root_get(p, argv[0]);
    uint64_t id;
    if (!tr_session_term_id(t, &id))
        return raise(p, ATOM_BADARG);
    char why[160];
    TrSession *s = tr_session_find(p->vm, id, why, sizeof why);
    if (s && !tr_session_has_tracer(p->vm, id))
        return raise(p, ATOM_BADARG);
    /* A tracer process's session has no output to fail. */
    bool done = s && bp_session_destroy(p->vm, id, TR_STOP_DESTROYED, why, sizeof why) !=
                         TVM_ERR_NOTFOUND;
    *result = vm_root_push(p, make_bool(done));
    return TVM_OK;
}
