/*
 * trace/tr_session.c - the table of trace sessions: creating and ending
 * them, their limits on the emitter's side, and the requests that the
 * stopper thread (breakpoints/bp_session.c) acts on.
 *
 * Protocol: sessions that come and go while every scheduler runs.
 *
 * Terms.  A *session* is one tracer's view of the VM: its breakpoints
 * (one entry per session on a breakpoint record, vm/breakpoint.h), its
 * process flags (one word per session in a process's trace word or
 * table, vm/traceword.h), its sink (a pipeline with its own rings and
 * collector, trace/tr_vm.c, or a tracer process that gets every event as
 * a message, trace/tr_deliver.c), its limits and counters.  Sessions live
 * in VM_SESSIONS_MAX fixed slots (vm/config.h); slot 0 is the *default*
 * session, which the legacy API (tvm_trace_pattern, tvm_trace_start,
 * erlang:trace/3, ...) acts on and which is never destroyed.  A slot's
 * *sid* is slot | generation << 8: every reuse of a slot bumps the
 * generation, and everything a session leaves in hot data (breakpoint
 * entries, trace words, trace frames) carries its sid, so a successor in
 * the same slot never takes an ended session's leftovers for its own.
 * An *emitter* is a thread writing an event for a process (the process's
 * scheduler thread, or a foreign thread in tvm_call): an online QSBR
 * reader between two quiescent states (trace/tr_vm.c).
 *
 * States (TrSession.state, with the sid in the same word):
 *   FREE -> CREATING     tr_session_reserve, under the lock: identity,
 *                        name, limits written, counters zeroed;
 *   CREATING -> LIVE     tr_session_publish: [SS1] release store, after
 *                        the sink (pipeline) was started and published;
 *   LIVE -> STOPPING     a limit was reached or its owner exited
 *                        (tr_session_request_stop, any thread; once);
 *   STOPPING -> STOPPED  the stopper removed its settings and wrote its
 *                        final record (bp_session.c);
 *   any of the three -> DESTROYING   tr_session_begin_destroy;
 *   DESTROYING -> FREE   tr_session_release, after the settings, a grace
 *                        period, the final record and the sink are gone.
 * The lock orders the transitions; emitters read the word with acquire
 * ([SS1']) and use the identity fields only after seeing a state past
 * CREATING with the sid they expect.
 *
 * Why the fields may be read without the lock.  A create writes them
 * before [SS1], so an emitter that acquired LIVE sees them whole.  They
 * change again only when the slot is reused, after a destroy that (a)
 * moved the state away from LIVE, so that no emitter starts using the
 * session afterwards, (b) waited for a grace period (thread progress),
 * so that every emitter that started before is done, and (c) only then
 * released the slot.  So no emitter reads a field while a create writes
 * it.  API calls from other threads read them under the lock.
 *
 * Limits (the gate: tr_session_admit, run by every emitter of a session
 * that has max_events or a rate; other sessions never reach it, so they
 * pay nothing: their events take the fast path through
 * Scheduler.trace_ring, which a gated session never publishes).
 *   max_events: one fetch-and-add on `admitted`; the event passes if the
 *     value before was below the limit, so exactly max_events pass
 *     however many threads emit at once; the one that takes the last
 *     place requests the stop.
 *   rate (recon_trace's {Max, Time}): a CAS word holds the current
 *     window's index ((now - start) / window: windows count from the
 *     session's start) and its count; the first event of a new window
 *     resets the count.  An event that makes the count exceed
 *     the rate is dropped and counted (rate_drop), or stops the session.
 *   duration: the stopper waits for the earliest deadline itself.
 * A stop is a request (LIVE -> STOPPING and a signal to the stopper), so
 * the traced call's path never removes breakpoints or waits: the gate
 * refuses every event from the request on, and the stopper, a thread of
 * its own, does the rest (breakpoints/bp_session.c).
 */
#include "trace/tr_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/tr_clock.h"
#include "trace/tr_deliver.h"
#include "trace/tr_vm_internal.h"
#include "vm/atom.h"
#include "vm/progress.h"
#include "vm/timer.h"

static const char *const reason_names[] = {
    [TR_STOP_NONE] = "none",
    [TR_STOP_MAX_EVENTS] = "max_events",
    [TR_STOP_RATE] = "rate",
    [TR_STOP_DURATION] = "duration",
    [TR_STOP_OWNER] = "owner_exit",
    [TR_STOP_DESTROYED] = "destroyed",
};

/* The same as atoms, predefined (vm/atoms.def): a last record must not
 * depend on room in the atom table.  TR_STOP_NONE is never a last
 * record's reason. */
static const Atom reason_atoms[] = {
    [TR_STOP_NONE] = ATOM_UNDEFINED,
    [TR_STOP_MAX_EVENTS] = ATOM_MAX_EVENTS,
    [TR_STOP_RATE] = ATOM_RATE,
    [TR_STOP_DURATION] = ATOM_DURATION,
    [TR_STOP_OWNER] = ATOM_OWNER_EXIT,
    [TR_STOP_DESTROYED] = ATOM_DESTROYED,
};

const char *tr_stop_reason_name(TrStopReason r)
{
    return (unsigned)r < sizeof reason_names / sizeof reason_names[0] ? reason_names[r] : "?";
}

/* The state word of s now (under the lock: relaxed). */
static uintptr_t state_word(TrSessState st, unsigned sid)
{
    return (uintptr_t)st | (uintptr_t)sid << 8;
}

static void set_state(TrSession *s, TrSessState st)
{
    /* [SS1] release: the identity fields (and whatever the caller wrote
     * before) before the state that lets readers use them. */
    vm_atomic_store_release(&s->state, state_word(st, s->sid));
}

void tr_sessions_init(tvm_vm *vm)
{
    TrSessions *S = vm_calloc(1, sizeof *S);
    pthread_mutex_init(&S->lock, NULL);
    pthread_mutex_init(&S->flags_lock, NULL);
    pthread_mutex_init(&S->pipes_lock, NULL);
    vm_cond_init_monotonic(&S->cond);
    for (unsigned i = 0; i < VM_SESSIONS_MAX; i++) {
        TrSession *s = &S->s[i];
        s->slot = i;
        s->sid = i;
        vm_atomic_store_relaxed(&s->state, state_word(TR_SESS_FREE, s->sid));
        tr_outfail_init(&s->fail);
    }
    TrSession *d = &S->s[0];
    snprintf(d->name, sizeof d->name, "default");
    vm_atomic_store_relaxed(&d->state, state_word(TR_SESS_LIVE, d->sid));
    vm->sessions = S;
}

void tr_sessions_free(tvm_vm *vm)
{
    TrSessions *S = vm->sessions;
    if (!S)
        return;
    for (unsigned i = 0; i < VM_SESSIONS_MAX; i++)
        tr_outfail_destroy(&S->s[i].fail);
    pthread_mutex_destroy(&S->lock);
    pthread_mutex_destroy(&S->flags_lock);
    pthread_mutex_destroy(&S->pipes_lock);
    pthread_cond_destroy(&S->cond);
    free(S);
    vm->sessions = NULL;
}

bool tr_session_live(tvm_vm *vm, unsigned sid)
{
    uintptr_t w = vm_atomic_load_acquire(&tr_session_at(vm, vm_sid_slot(sid))->state);
    return tr_sess_st(w) == TR_SESS_LIVE && tr_sess_sid(w) == sid;
}

TrSession *tr_session_find(tvm_vm *vm, uint64_t id, char *why, size_t whylen)
{
    unsigned slot = (unsigned)(id & 0xffu);
    TrSession *s = slot < VM_SESSIONS_MAX ? tr_session_at(vm, slot) : NULL;
    if (s) {
        pthread_mutex_lock(&vm->sessions->lock);
        TrSessState st = tr_sess_st(vm_atomic_load_relaxed(&s->state));
        if (s->id != id || st == TR_SESS_FREE || st == TR_SESS_CREATING)
            s = NULL;
        pthread_mutex_unlock(&vm->sessions->lock);
    }
    if (!s)
        snprintf(why, whylen, "no session %llu (destroyed, or never created)",
                 (unsigned long long)id);
    return s;
}

bool tr_session_resolve(tvm_vm *vm, uint64_t id, unsigned *sid, tvm_status *st, char *why,
                        size_t whylen)
{
    unsigned slot = (unsigned)(id & 0xffu);
    TrSession *s = slot < VM_SESSIONS_MAX ? tr_session_at(vm, slot) : NULL;
    bool ok = false;
    *st = TVM_ERR_NOTFOUND;
    if (s) {
        pthread_mutex_lock(&vm->sessions->lock);
        uintptr_t w = vm_atomic_load_relaxed(&s->state);
        TrSessState state = tr_sess_st(w);
        if (s->id != id || state == TR_SESS_FREE || state == TR_SESS_CREATING ||
            state == TR_SESS_DESTROYING) {
            snprintf(why, whylen, "no session %llu (destroyed, or never created)",
                     (unsigned long long)id);
        } else if (state != TR_SESS_LIVE) {
            *st = TVM_ERR_BADARG;
            snprintf(why, whylen, "session %s (%llu) stopped: %s", s->name,
                     (unsigned long long)id,
                     tr_stop_reason_name((TrStopReason)vm_atomic_load_relaxed(&s->reason)));
        } else {
            *sid = tr_sess_sid(w);
            ok = true;
        }
        pthread_mutex_unlock(&vm->sessions->lock);
    } else {
        snprintf(why, whylen, "no session %llu (destroyed, or never created)",
                 (unsigned long long)id);
    }
    return ok;
}

uint64_t tr_session_id(tvm_vm *vm, TrSession *s)
{
    pthread_mutex_lock(&vm->sessions->lock);
    TrSessState st = tr_sess_st(vm_atomic_load_relaxed(&s->state));
    uint64_t id = st == TR_SESS_FREE || st == TR_SESS_CREATING ? 0 : s->id;
    pthread_mutex_unlock(&vm->sessions->lock);
    return id;
}

bool tr_session_info(tvm_vm *vm, TrSession *s, uint64_t id, char *name, size_t namelen,
                     bool *live, const char **stopped)
{
    pthread_mutex_lock(&vm->sessions->lock);
    TrSessState st = tr_sess_st(vm_atomic_load_relaxed(&s->state));
    bool ok = s->id == id && st != TR_SESS_FREE && st != TR_SESS_CREATING;
    if (ok) {
        snprintf(name, namelen, "%s", s->name);
        /* Live until its stop is done (its settings removed, its last
         * record written): a caller that sees it stopped sees all that. */
        *live = st == TR_SESS_LIVE || st == TR_SESS_STOPPING;
        TrStopReason r = (TrStopReason)vm_atomic_load_relaxed(&s->reason);
        /* Why, from the moment a limit or the owner's exit asked (its gate
         * admits nothing from then on), while the stop may still run. */
        *stopped = r == TR_STOP_NONE ? NULL : tr_stop_reason_name(r);
    }
    pthread_mutex_unlock(&vm->sessions->lock);
    return ok;
}

uint64_t tr_session_tracer(tvm_vm *vm, unsigned sid)
{
    TrSession *s = tr_session_at(vm, vm_sid_slot(sid));
    pthread_mutex_lock(&vm->sessions->lock);
    uint64_t t = s->sid == sid ? s->tracer : 0;
    pthread_mutex_unlock(&vm->sessions->lock);
    return t;
}

bool tr_session_has_tracer(tvm_vm *vm, uint64_t id)
{
    unsigned slot = (unsigned)(id & 0xffu);
    if (slot >= VM_SESSIONS_MAX)
        return false;
    TrSession *s = tr_session_at(vm, slot);
    pthread_mutex_lock(&vm->sessions->lock);
    TrSessState st = tr_sess_st(vm_atomic_load_relaxed(&s->state));
    bool t = s->id == id && st != TR_SESS_FREE && st != TR_SESS_CREATING && s->tracer;
    pthread_mutex_unlock(&vm->sessions->lock);
    return t;
}

bool tr_session_term_id(Term t, uint64_t *id)
{
    if (!term_is_tuple(t) || tuple_arity(t) != 2 ||
        tuple_elems(t)[0] != make_atom(ATOM_TRACE_SESSION) || !term_is_small(tuple_elems(t)[1]) ||
        small_value(tuple_elems(t)[1]) < 0)
        return false;
    *id = (uint64_t)small_value(tuple_elems(t)[1]);
    return true;
}

bool tr_limits_check(const TrLimits *lim, char *why, size_t whylen)
{
    if (lim->rate && lim->window_ns && lim->window_ns < 1000000u) {
        snprintf(why, whylen, "a rate window is at least 1 ms (got %llu ns)",
                 (unsigned long long)lim->window_ns);
        return false;
    }
    if (lim->rate > 0xfffffffeu) {
        snprintf(why, whylen, "a rate is at most %u events per window", 0xfffffffeu);
        return false;
    }
    return true;
}

uint64_t tr_ms_to_ns(uint64_t ms)
{
    return ms > UINT64_MAX / 1000000u ? UINT64_MAX : ms * 1000000u;
}

/* When a duration that starts at `start` ends (saturating, as above);
 * 0: no duration. */
static uint64_t deadline_of(uint64_t start, uint64_t duration_ns)
{
    if (!duration_ns)
        return 0;
    return duration_ns > UINT64_MAX - start ? UINT64_MAX : start + duration_ns;
}

/* Sets s's limits and counters afresh; s->gated must be 0 and no emitter
 * may be in s's gate (a session not live yet, or the default after
 * restart_default's grace period).  Returns whether s is gated now (the
 * caller publishes it with [SS2]). */
static bool limits_set(TrSession *s, const TrLimits *lim)
{
    s->lim = lim ? *lim : (TrLimits){ 0 };
    if (s->lim.rate && !s->lim.window_ns)
        s->lim.window_ns = 1000000000u;
    s->deadline = 0;
    vm_atomic_store_relaxed(&s->admitted, 0);
    vm_atomic_store_relaxed(&s->rate_win, 0);
    vm_atomic_store_relaxed(&s->rate_dropped, 0);
    vm_atomic_store_relaxed(&s->sent, 0);
    vm_atomic_store_relaxed(&s->reason, TR_STOP_NONE);
    s->written_done = s->lost_done = 0;
    s->settings_removed = s->final_written = s->final_in_pipe = false;
    return s->lim.max_events || s->lim.rate;
}

TrSession *tr_session_reserve(tvm_vm *vm, const char *name, uint64_t tracer, uint64_t owner,
                              const TrLimits *lim, char *why, size_t whylen)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    TrSession *s = NULL;
    for (unsigned i = 1; i < VM_SESSIONS_MAX && !s; i++)
        if (tr_sess_st(vm_atomic_load_relaxed(&S->s[i].state)) == TR_SESS_FREE)
            s = &S->s[i];
    if (!s) {
        pthread_mutex_unlock(&S->lock);
        snprintf(why, whylen,
                 "%d sessions are live, the most there can be (the default one included); "
                 "destroy one first", VM_SESSIONS_MAX);
        return NULL;
    }
    /* A new incarnation: the generation moves on (never 0 for slots
     * other than the default's, whose sid stays 0). */
    unsigned gen = ((s->sid >> 8) + 1) & 0xffu;
    s->sid = s->slot | gen << 8;
    s->id = (++S->serial << 8) | s->slot;
    snprintf(s->name, sizeof s->name, "%s", name);
    tr_outfail_reset(&s->fail, s->id, "");
    s->tracer = tracer;
    s->owner = owner;
    /* Nobody reads a session's gate before it is live ([SS1]). */
    vm_atomic_store_relaxed(&s->gated, limits_set(s, lim));
    vm_atomic_store_relaxed(&s->out, 0);
    vm_atomic_store_relaxed(&s->state, state_word(TR_SESS_CREATING, s->sid));
    pthread_mutex_unlock(&S->lock);
    return s;
}

void tr_session_publish(tvm_vm *vm, TrSession *s)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    s->start = tr_mono_ns();
    s->deadline = deadline_of(s->start, s->lim.duration_ns);
    if (s->owner)
        vm_atomic_fetch_add_relaxed(&S->owned, 1);
    set_state(s, TR_SESS_LIVE);
    if (s->deadline)
        pthread_cond_broadcast(&S->cond);    /* the stopper's next deadline */
    pthread_mutex_unlock(&S->lock);
}

void tr_session_release(tvm_vm *vm, TrSession *s)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    if (s->owner && tr_sess_st(vm_atomic_load_relaxed(&s->state)) != TR_SESS_CREATING)
        vm_atomic_fetch_add_relaxed(&S->owned, (uintptr_t)-1);
    S->pending &= ~(1u << s->slot);
    S->pending_destroy &= ~(1u << s->slot);
    S->retry &= ~(1u << s->slot);
    set_state(s, TR_SESS_FREE);
    pthread_mutex_unlock(&S->lock);
}

void tr_session_restart_default(tvm_vm *vm, const TrLimits *lim)
{
    TrSessions *S = vm->sessions;
    TrSession *d = &S->s[0];
    /* The default session is live throughout (its patterns and flags
     * are never refused): its old limits are unpublished and, after a
     * grace period, no emitter is in its gate any more ([SS2]). */
    if (vm_atomic_load_relaxed(&d->gated)) {
        vm_atomic_store_relaxed(&d->gated, 0);
        vm_progress_sync(vm_progress_get(vm), NULL);
    }
    pthread_mutex_lock(&S->lock);
    bool gated = limits_set(d, lim);
    d->start = tr_mono_ns();
    d->deadline = deadline_of(d->start, d->lim.duration_ns);
    S->pending &= ~1u;
    S->retry &= ~1u;
    /* [SS2] release: the limits before the flag that sends emitters to them. */
    vm_atomic_store_release(&d->gated, gated);
    set_state(d, TR_SESS_LIVE);
    if (d->deadline)
        pthread_cond_broadcast(&S->cond);
    pthread_mutex_unlock(&S->lock);
}

/* ==== the gate ==== */

/* Counts the event in the current rate window; false when it is above
 * the rate. */
static bool rate_ok(TrSession *s)
{
    uint64_t win = ((tr_mono_ns() - s->start) / s->lim.window_ns) & 0xffffffffu;
    uintptr_t w, nw;
    do {
        w = vm_atomic_load_relaxed(&s->rate_win);
        if ((w >> 32) != win)
            nw = (uintptr_t)win << 32 | 1u;
        else if ((w & 0xffffffffu) == 0xffffffffu)
            nw = w;     /* saturated: above any rate */
        else
            nw = w + 1;
    } while (nw != w && !vm_atomic_cas_full(&s->rate_win, w, nw));
    return (nw & 0xffffffffu) <= s->lim.rate;
}

bool tr_session_admit(tvm_vm *vm, TrSession *s)
{
    if (tr_sess_st(vm_atomic_load_acquire(&s->state)) != TR_SESS_LIVE)
        return false;
    if (s->lim.rate && !rate_ok(s)) {
        if (s->lim.rate_drop) {
            vm_atomic_fetch_add_relaxed(&s->rate_dropped, 1);
            return false;
        }
        tr_session_request_stop(vm, s, TR_STOP_RATE, false);
        return false;
    }
    if (s->lim.max_events) {
        uintptr_t n = vm_atomic_fetch_add_relaxed(&s->admitted, 1);
        if (n >= s->lim.max_events)
            return false;
        if (n + 1 == s->lim.max_events)
            tr_session_request_stop(vm, s, TR_STOP_MAX_EVENTS, false);
        return true;
    }
    vm_atomic_fetch_add_relaxed(&s->admitted, 1);
    return true;
}

/* ==== stop requests and the stopper's wait ==== */

/* tr_session_request_stop with S->lock held. */
static void request_stop_locked(TrSessions *S, TrSession *s, TrStopReason why, bool destroy)
{
    uint32_t bit = 1u << s->slot;
    TrSessState st = tr_sess_st(vm_atomic_load_relaxed(&s->state));
    bool wake = false;
    if (st == TR_SESS_LIVE) {
        vm_atomic_store_relaxed(&s->reason, why);
        set_state(s, TR_SESS_STOPPING);
        S->pending |= bit;
        wake = true;
    }
    if (destroy && s->slot != 0 &&
        (st == TR_SESS_LIVE || st == TR_SESS_STOPPING || st == TR_SESS_STOPPED)) {
        S->pending |= bit;
        S->pending_destroy |= bit;
        wake = true;
    }
    if (wake)
        pthread_cond_broadcast(&S->cond);
}

void tr_session_request_stop(tvm_vm *vm, TrSession *s, TrStopReason why, bool destroy)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    request_stop_locked(S, s, why, destroy);
    pthread_mutex_unlock(&S->lock);
}

/* Stops to try again (tr_session_retry_stop) become pending once due;
 * returns when the rest are due (0: none). */
static uint64_t retry_due(TrSessions *S, uint64_t now)
{
    if (S->retry && S->retry_at <= now) {
        S->pending |= S->retry;
        S->retry = 0;
    }
    return S->retry ? S->retry_at : 0;
}

void tr_session_retry_stop(tvm_vm *vm, TrSession *s)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    if (!S->retry)
        S->retry_at = tr_mono_ns() + TR_FINAL_RETRY_NS;
    S->retry |= 1u << s->slot;
    pthread_mutex_unlock(&S->lock);
}

/* Waits on the condition until `deadline` (0: no deadline). */
static void wait_until(TrSessions *S, uint64_t deadline)
{
    if (!deadline) {
        pthread_cond_wait(&S->cond, &S->lock);
        return;
    }
    struct timespec ts = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
    pthread_cond_timedwait(&S->cond, &S->lock, &ts);
}

bool tr_sessions_wait(tvm_vm *vm, unsigned *slot, uint64_t *id, bool *destroy)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    for (;;) {
        if (S->quit)
            break;
        if (S->pending) {
            unsigned i = (unsigned)__builtin_ctz(S->pending);
            *slot = i;
            /* The session that asked: a destroy or a release since
             * would have cleared its bit (begin_destroy, release). */
            *id = S->s[i].id;
            *destroy = (S->pending_destroy >> i) & 1u;
            S->pending &= ~(1u << i);
            S->pending_destroy &= ~(1u << i);
            pthread_mutex_unlock(&S->lock);
            return true;
        }
        /* The earliest duration of a live session; one that ran out
         * stops now.  Stops whose last record waits for room too. */
        uint64_t now = tr_mono_ns(), next = retry_due(S, now);
        for (unsigned i = 0; i < VM_SESSIONS_MAX; i++) {
            TrSession *s = &S->s[i];
            if (!s->deadline || tr_sess_st(vm_atomic_load_relaxed(&s->state)) != TR_SESS_LIVE)
                continue;
            if (s->deadline <= now) {
                vm_atomic_store_relaxed(&s->reason, TR_STOP_DURATION);
                set_state(s, TR_SESS_STOPPING);
                S->pending |= 1u << i;
            } else if (!next || s->deadline < next) {
                next = s->deadline;
            }
        }
        if (!S->pending)
            wait_until(S, next);
    }
    pthread_mutex_unlock(&S->lock);
    return false;
}

void tr_sessions_quit(tvm_vm *vm)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    S->quit = true;
    pthread_cond_broadcast(&S->cond);
    pthread_mutex_unlock(&S->lock);
}

bool tr_session_begin_destroy(tvm_vm *vm, TrSession *s, uint64_t id, TrStopReason why,
                              char *whybuf, size_t whylen)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    TrSessState st = tr_sess_st(vm_atomic_load_relaxed(&s->state));
    bool ok = false;
    if (s->id != id || st == TR_SESS_FREE || st == TR_SESS_CREATING)
        snprintf(whybuf, whylen, "no session %llu (destroyed, or never created)",
                 (unsigned long long)id);
    else if (st == TR_SESS_DESTROYING)
        snprintf(whybuf, whylen, "session %llu is being destroyed", (unsigned long long)id);
    else
        ok = true;
    if (ok) {
        if (vm_atomic_load_relaxed(&s->reason) == TR_STOP_NONE)
            vm_atomic_store_relaxed(&s->reason, why);
        S->pending &= ~(1u << s->slot);
        S->pending_destroy &= ~(1u << s->slot);
        S->retry &= ~(1u << s->slot);
        set_state(s, TR_SESS_DESTROYING);
    }
    pthread_mutex_unlock(&S->lock);
    return ok;
}

void tr_session_stopped(tvm_vm *vm, TrSession *s)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    if (tr_sess_st(vm_atomic_load_relaxed(&s->state)) == TR_SESS_STOPPING)
        set_state(s, TR_SESS_STOPPED);
    pthread_mutex_unlock(&S->lock);
}

void tr_sessions_owner_exit(tvm_vm *vm, uint64_t pid)
{
    TrSessions *S = vm->sessions;
    for (unsigned i = 1; i < VM_SESSIONS_MAX; i++) {
        TrSession *s = &S->s[i];
        /* The test and the request under one hold of the lock: between
         * the two the session could be destroyed and its slot taken by
         * a new session, which the request would then end. */
        pthread_mutex_lock(&S->lock);
        TrSessState st = tr_sess_st(vm_atomic_load_relaxed(&s->state));
        if (st != TR_SESS_FREE && st != TR_SESS_CREATING && s->owner == pid)
            request_stop_locked(S, s, TR_STOP_OWNER, true);
        pthread_mutex_unlock(&S->lock);
    }
}

unsigned tr_sessions_live(tvm_vm *vm)
{
    TrSessions *S = vm->sessions;
    unsigned n = 0;
    pthread_mutex_lock(&S->lock);
    for (int i = 0; i < VM_SESSIONS_MAX; i++) {
        TrSessState st = tr_sess_st(vm_atomic_load_relaxed(&S->s[i].state));
        n += st == TR_SESS_LIVE || st == TR_SESS_STOPPING;
    }
    pthread_mutex_unlock(&S->lock);
    return n;
}

/* ==== counts and the final record ==== */

void tr_session_add_counts(tvm_vm *vm, TrSession *s, TrVm *t, uint64_t written, uint64_t lost)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    s->written_done += written;
    s->lost_done += lost;
    /* In the same critical section: a count sees the pipeline's events
     * either in it or in the totals, never in both or neither. */
    if (s->draining == t)
        s->draining = NULL;
    pthread_mutex_unlock(&S->lock);
}

void tr_session_draining(tvm_vm *vm, TrSession *s, TrVm *t)
{
    pthread_mutex_lock(&vm->sessions->lock);
    s->draining = t;
    pthread_mutex_unlock(&vm->sessions->lock);
}

/* What the pipeline's rings wrote and lost. */
static void add_pipeline(TrVm *t, uint64_t *w, uint64_t *l)
{
    TrStats *st = tr_pipeline_stats(t->tp);
    for (int i = 0; i < st->nrings; i++) {
        *w += st->ring[i].emitted;
        *l += st->ring[i].lost;
    }
    free(st);
}

/* The counts with t, the session's pipeline (NULL: none, or one
 * already unpublished that the caller passes instead). */
static void counts_with(tvm_vm *vm, TrSession *s, TrVm *t, uint64_t *written, uint64_t *lost)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->lock);
    uint64_t w = s->written_done + vm_atomic_load_relaxed(&s->sent);
    uint64_t l = s->lost_done + vm_atomic_load_relaxed(&s->rate_dropped);
    bool in_pipe = s->final_in_pipe;
    /* A pipeline that a tvm_trace_stop drains: alive while it is set,
     * which its stop clears under this lock before it frees it. */
    if (!t && s->draining)
        add_pipeline(s->draining, &w, &l);
    pthread_mutex_unlock(&S->lock);
    /* The pipeline's rings (tr_vm.c keeps it alive: the caller holds the
     * permission, as every pipeline stop does before it unpublishes, or
     * is the stop that has it). */
    if (t)
        add_pipeline(t, &w, &l);
    /* The last record went into a pipeline: it is no event. */
    if (in_pipe && w)
        w--;
    *written = w;
    *lost = l;
}

void tr_session_counts(tvm_vm *vm, TrSession *s, uint64_t *written, uint64_t *lost)
{
    counts_with(vm, s, vm_atomic_load_ptr_acquire(&s->out), written, lost);
}

bool tr_session_final_record(tvm_vm *vm, TrSession *s)
{
    return tr_session_final_record_in(vm, s, vm_atomic_load_ptr_acquire(&s->out), false);
}

/* s's last record with t's counts (every reason's atom is predefined). */
static void final_rec_of(tvm_vm *vm, TrSession *s, TrVm *t, TrFinalRec *r)
{
    counts_with(vm, s, t, &r->written, &r->lost);
    TrStopReason why = (TrStopReason)vm_atomic_load_relaxed(&s->reason);
    r->reason = (unsigned)why < VM_ARRAY_LEN(reason_atoms) ? reason_atoms[why] : ATOM_UNDEFINED;
}

/* Writes r into t's shared ring (from a thread that is no scheduler's);
 * false when it is full and `wait` is false. */
static bool final_emit(tvm_vm *vm, TrSession *s, TrVm *t, const TrFinalRec *r, bool wait)
{
    Term terms[3] = { make_atom(r->reason), make_small((int64_t)r->written),
                      make_small((int64_t)r->lost) };
    TrEmit ev = { .kind = TR_K_STOPPED, .flags = TR_F_NO_MFA, .terms = terms, .nterms = 3 };
    while (tr_emit(t->tp, -1, &ev) == TR_FULL) {
        if (!wait)
            return false;
        tr_wait_space(t->tp, -1, 0);
    }
    /* Under the lock: a destroy or a tvm_trace_stop writes it without
     * the permission, while tvm_session_info_get may count (counts_with). */
    pthread_mutex_lock(&vm->sessions->lock);
    s->final_in_pipe = true;
    pthread_mutex_unlock(&vm->sessions->lock);
    /* Not flushed here: a sink whose reader does not read would hold the
     * stopper (and every other session's stop) for as long; the collector
     * delivers it within its poll interval, tvm_session_flush waits for
     * it, and a destroy drains everything. */
    return true;
}

/*
 * Why the last record does not wait for room under the permission: the
 * stopper and a destroy write it holding the code-modification
 * permission, and under the lossless policy a full shared ring has room
 * only once the session's sink takes events.  A sink that stalls (a
 * callback that blocks, a pipe nobody reads) would then hold every
 * trace_pattern, every load and every other session's start and stop,
 * VM-wide.  Dropping the record would break lossless (and the record is
 * the one that counts the losses), so a full ring leaves it unwritten:
 * the stopper tries again later (tr_session_retry_stop), a session's
 * destroy writes it once it alone has the unpublished pipeline, after
 * releasing the permission, and tvm_trace_stop claims it under the
 * permission and writes it after (tr_session_final_record_claim).  Only
 * the VM's tear-down (tr_vm_destroy) waits for room under the
 * permission: the stopper has quit, and nothing but the dying VM's own
 * processes can want the permission then.  Either way the record still
 * comes after every event of the session (the grace period came first,
 * and the session writes nothing more).
 */
bool tr_session_final_record_in(tvm_vm *vm, TrSession *s, TrVm *t, bool wait)
{
    if (s->final_written)
        return true;
    TrFinalRec r;
    final_rec_of(vm, s, t, &r);
    if (s->tracer || !t) {
        s->final_written = true;
        if (s->tracer)
            tr_deliver_stopped(vm, s, make_atom(r.reason), r.written, r.lost);
        return true;
    }
    if (!final_emit(vm, s, t, &r, wait))
        return false;
    s->final_written = true;
    return true;
}

bool tr_session_final_record_claim(tvm_vm *vm, TrSession *s, TrVm *t, TrFinalRec *owed)
{
    if (tr_session_final_record_in(vm, s, t, false))
        return false;
    /* Full: it goes into t (the call above returned early for a
     * session with a tracer or without a pipeline). */
    final_rec_of(vm, s, t, owed);
    s->final_written = true;
    return true;
}

void tr_session_final_record_put(tvm_vm *vm, TrSession *s, TrVm *t, const TrFinalRec *owed)
{
    final_emit(vm, s, t, owed, true);
}
