/*
 * trace/tr_vm_sess.c - which sessions an event goes to, and how it gets
 * into each one's sink; the spawn and exit hooks.
 *
 * An event of a process goes to every session whose flags for that
 * process ask for it (trace/tr_flags.c keeps them: one session's flags in
 * the process's trace word, several sessions' in its table).  A call
 * event goes to the session whose breakpoint was hit, and a return to
 * the session whose trace frame it passes (breakpoints/), each with that
 * session's flags for the process.  For each session: the session must
 * be the live incarnation of its slot (its sid), its gate must admit the
 * event (limits: trace/tr_session.c), and then the event goes to its
 * pipeline (trace/tr_vm.c's rule: `out` loaded with acquire and used only
 * while the emitter is online; tr_vm_emit, whose lossless wait may
 * suspend the process that writes the event: the process itself, or the
 * parent for a child's spawned event, which the parent writes into its
 * own ring before the child first runs) or, for a session with a
 * tracer process, to that process as a message (trace/tr_deliver.c:
 * built off the heap, so no collection happens here and the event's
 * terms stay valid for the next session).
 */
#include <string.h>

#include "trace/tr_deliver.h"
#include "trace/tr_session.h"
#include "trace/tr_vm.h"
#include "trace/tr_vm_internal.h"
#include "vm/qsbr.h"

/*
 * An event of a process with its own tracer (VM_TRACE_TRACER in the
 * default session): a message to the tracer instead of the session's
 * sink.  A tracer that is gone ends the process's tracing in the session
 * (as BEAM: a dead tracer's tracees are no longer traced), from this
 * event on.
 */
static TrStatus to_own_tracer(Process *p, unsigned sid, const TrEmit *ev)
{
    uint64_t t = vm_atomic_load_relaxed(&p->tracer);
    if (!t) {
        /* The flag was seen before the tracer it goes with: both are
         * written under p->lock, which orders them for us. */
        pthread_mutex_lock(&p->lock);
        t = vm_atomic_load_relaxed(&p->tracer);
        pthread_mutex_unlock(&p->lock);
    }
    VmSend r = t ? tr_deliver_to(p, t, ev) : VM_SEND_NOPROC;
    if (r == VM_SEND_NOPROC)
        tr_pflags_change(p, sid, VM_TRACE_ALL | VM_TRACE_TRACER, false, true);
    return r == VM_SEND_OK ? TR_OK : TR_DROPPED;
}

/* ev, an event of p, into session sid, written by `runner`: the process
 * whose thread this is, whose ring takes the record and which the
 * lossless policy suspends.  It is p itself but for the child's spawned
 * event, which its parent writes before the child first runs. */
static inline TrStatus sess_emit(Process *p, Process *runner, unsigned sid, const TrEmit *ev)
{
    if (sid == 0 &&
        (tr_pflags_of(p, vm_atomic_load_relaxed(&p->trace), 0) & VM_TRACE_TRACER))
        return to_own_tracer(p, sid, ev);
    TrSession *s = tr_session_at(p->vm, vm_sid_slot(sid));
    /* [SS1'] acquire: the session's fields before we read them. */
    uintptr_t w = vm_atomic_load_acquire(&s->state);
    if (tr_sess_st(w) != TR_SESS_LIVE || tr_sess_sid(w) != sid)
        return TR_DROPPED;
    /* [SS2'] acquire: the limits before the gate reads them. */
    if (vm_atomic_load_acquire(&s->gated) && !tr_session_admit(p->vm, s))
        return TR_DROPPED;
    if (s->tracer)
        return tr_deliver(p, s, ev) ? TR_OK : TR_DROPPED;
    /* [TP1'] acquire; pairs with [TP1] in tr_vm_publish(). */
    TrVm *t = vm_atomic_load_ptr_acquire(&s->out);
    return t ? tr_vm_emit(runner, t, ev) : TR_DROPPED;
}

TrStatus tr_sess_emit(Process *p, unsigned sid, const TrEmit *ev)
{
    return sess_emit(p, p, sid, ev);
}

/* tr_emit_flagged, written by runner (sess_emit). */
static void emit_flagged(Process *p, Process *runner, uintptr_t pf, unsigned want, TrEmit *ev)
{
    const unsigned base = ev->flags;
    unsigned sid = vm_trace_sid(pf);
    if (VM_LIKELY(sid != VM_SID_MULTI)) {
        ev->flags = base | tr_vm_record_flags(VM_TRACE_FLAGS(pf));
        sess_emit(p, runner, sid, ev);
        return;
    }
    /* [TF1'] acquire: pairs with [TF1] (the table before the word). */
    const VmTraceTab *tab = vm_atomic_load_ptr_acquire(&p->trace_tab);
    for (unsigned i = 0; tab && i < VM_SESSIONS_MAX; i++) {
        uintptr_t w = vm_atomic_load_relaxed(&tab->w[i]);
        if (!(VM_TRACE_FLAGS(w) & want))
            continue;
        ev->flags = base | tr_vm_record_flags(VM_TRACE_FLAGS(w));
        sess_emit(p, runner, vm_trace_sid(w), ev);
    }
}

void tr_emit_flagged(Process *p, uintptr_t pf, unsigned want, TrEmit *ev)
{
    emit_flagged(p, p, pf, want, ev);
}

/* ==== spawn and exit ==== */

/* One procs event of `subject` (one term, no MFA) written by runner,
 * given subject's trace word sf: what vm_hook_procs writes, and the two
 * link events of a spawn_link.  Inside the caller's qsbr call section. */
static void procs_event(Process *subject, Process *runner, uintptr_t sf, TrKind kind, Term arg)
{
    TrEmit ev = {
        .kind = kind,
        .flags = TR_F_NO_MFA,
        .pid = subject->pid,
        .terms = &arg,
        .nterms = 1,
    };
    emit_flagged(subject, runner, sf, VM_TRACE_PROCS, &ev);
}

/*
 * BEAM's process events of a spawn, in its order (OTP 25's erl_create_process
 * reports them so, after the inheritance): the parent's spawn
 * ({trace,Parent,spawn,Child,{M,F,Args}}) and, for a spawn_link, its
 * link ({trace,Parent,link,Child}) where the parent has the procs flag,
 * then the child's spawned ({trace,Child,spawned,Parent,{M,F,Args}}) and
 * getting_linked where the child has it: from the defaults for new
 * processes or handed on by set_on_spawn or set_on_link just before.
 * All are written by the parent into its own ring, before the child can
 * run, so they precede every event of the child.  The child's word is
 * read through tr_pword: a change of flags for all since the child took
 * its defaults is folded in (the scheduler would fold it only when the
 * child first runs).
 */
void vm_hook_spawn(Process *parent, Process *child, const Export *entry, int argc,
                   const Term *args, bool link)
{
    const uintptr_t inherit = VM_TRACE_SOS | VM_TRACE_SOS1 |
                              (link ? VM_TRACE_SOL | VM_TRACE_SOL1 : 0);
    uintptr_t pf = vm_atomic_load_relaxed(&parent->trace);
    if (VM_LIKELY(!(pf & (VM_TRACE_PROCS | inherit)) && !(tr_pword(child) & VM_TRACE_PROCS)))
        return;
    /* The child's flags before anything it does (it has not run yet). */
    if (pf & inherit)
        tr_flags_inherit(parent, child->pid, link);
    Term terms[VM_MAX_ARITY + 1];
    memcpy(terms + 1, args, (size_t)argc * sizeof(Term));
    TrEmit ev = {
        .mod = entry->mod,
        .fun = entry->name,
        .arity = (unsigned)argc,
        .terms = terms,
        .nterms = (unsigned)argc + 1,
    };
    vm_qsbr_call_enter();
    if (pf & VM_TRACE_PROCS) {
        ev.kind = TR_K_SPAWN;
        ev.pid = parent->pid;
        terms[0] = make_pid(child->pid);
        tr_emit_flagged(parent, pf, VM_TRACE_PROCS, &ev);
        if (link)
            procs_event(parent, parent, pf, TR_K_LINK, make_pid(child->pid));
    }
    uintptr_t cf = tr_pword(child);
    if (cf & VM_TRACE_PROCS) {
        ev.kind = TR_K_SPAWNED;
        ev.flags = 0;
        ev.pid = child->pid;
        terms[0] = make_pid(parent->pid);
        emit_flagged(child, parent, cf, VM_TRACE_PROCS, &ev);
        if (link)
            procs_event(child, parent, cf, TR_K_GETTING_LINKED, make_pid(parent->pid));
    }
    vm_qsbr_call_leave();
}

void vm_hook_exit(Process *p, Term reason)
{
    /* Sessions this process owns end with it (their stopper does the
     * work; the test is one relaxed load while no session has an owner). */
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&p->vm->sessions->owned)))
        tr_sessions_owner_exit(p->vm, p->pid);
    uintptr_t pf = vm_atomic_load_relaxed(&p->trace);
    if (!(pf & VM_TRACE_PROCS))
        return;
    TrEmit ev = {
        .kind = TR_K_EXIT,
        .flags = TR_F_NO_MFA,
        .pid = p->pid,
        .terms = &reason,
        .nterms = 1,
    };
    tr_emit_flagged(p, pf, VM_TRACE_PROCS, &ev);
}

/*
 * The procs events beside spawn and exit: {trace,Pid,register,Name},
 * unregister, and {trace,Pid,link,Pid2}, unlink, getting_linked and
 * getting_unlinked.  Each is an event of the process it names, written
 * where that process has the procs flag whichever process made the
 * change (as BEAM's, register.c and the link signals), into the ring of
 * the thread that made it, as a spawned event is.
 */
void vm_hook_procs(Process *runner, Process *subject, VmProcsEvent what, Term arg)
{
    static const uint8_t kinds[] = {
        [VM_PEV_REGISTER] = TR_K_REGISTER,
        [VM_PEV_UNREGISTER] = TR_K_UNREGISTER,
        [VM_PEV_LINK] = TR_K_LINK,
        [VM_PEV_UNLINK] = TR_K_UNLINK,
        [VM_PEV_GETTING_LINKED] = TR_K_GETTING_LINKED,
        [VM_PEV_GETTING_UNLINKED] = TR_K_GETTING_UNLINKED,
    };
    uintptr_t sf = tr_pword(subject);
    if (VM_LIKELY(!(sf & VM_TRACE_PROCS)))
        return;
    /* A call context may run this on an embedder's thread. */
    vm_qsbr_call_enter();
    procs_event(subject, runner, sf, (TrKind)kinds[what], arg);
    vm_qsbr_call_leave();
}
