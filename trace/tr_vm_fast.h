/*
 * trace/tr_vm_fast.h - the call and return events' fast path, inlined
 * where they happen (the breakpoint hit, the trace frame) so that the
 * commonest event costs no call at all: a process on a scheduler, a
 * payload of immediates, room in the scheduler's ring of the session
 * (trace/tr_fast.h says what "room" means and why the bytes are the same
 * as tr_emit's).  Anything else returns false and the caller takes the
 * general emitter (trace/tr_vm.h), which starts over: a session with
 * limits or a tracer process has no ring pointer (trace/tr_vm.c), so its
 * events always go through its gate.  Only for the VM's own hot paths: it
 * reaches into the pipeline's private ring structure.
 */
#ifndef TRACE_TR_VM_FAST_H
#define TRACE_TR_VM_FAST_H

#include "trace/tr_fast.h"
#include "trace/tr_vm.h"
#include "trace/tr_vm_internal.h"

/*
 * Writes ev for p into session sid's ring by the fast path when it can.
 * True when ev was written; false when the caller must take the general
 * path (no ring: a call context, a session with a gate or a tracer, no
 * pipeline, or an incarnation that is not the slot's).  p's thread,
 * online (the pipeline stays alive: the protocol is in trace/tr_vm.c).
 * ev's address must not escape, so that the compiler builds no TrEmit.
 */
static inline __attribute__((always_inline)) bool tr_vm_emit_fast_in(Process *p, unsigned sid,
                                                                     const TrEmit *ev,
                                                                     bool live, uint64_t ticks)
{
    /* [TP1'] acquire: pairs with [TP1] in tr_vm_publish; the ring stays
     * alive while this thread is an online reader, as the TrVm does.  A
     * ring names the incarnation it belongs to (its tag), so a trace
     * frame an ended session left behind never writes into its
     * successor's ring; `live` says the caller knows sid is the live
     * incarnation (the hit read it from the active generation, and a
     * slot is reused only after a grace period that follows the removal
     * of its old entries: no check). */
    TrRing *r = VM_LIKELY(p->sched != NULL)
                    ? vm_atomic_load_ptr_acquire(&p->sched->trace_ring[vm_sid_slot(sid)])
                    : NULL;
    if (VM_LIKELY(r != NULL && (live || r->tag == sid)))
        return tr_ring_put_imm_at(r, ev, ticks);
    return false;
}

static inline __attribute__((always_inline)) bool tr_vm_emit_fast(Process *p, unsigned sid,
                                                                  const TrEmit *ev)
{
    return tr_vm_emit_fast_in(p, sid, ev, false, 0);
}

/* tr_vm_call(p, sid, fn, tf, NULL, 0, xflags)'s fast path (no arity
 * flag, no tracer process of p's own) at time `ticks` (0: read at the
 * write); `args` is the top activation's register window; sid the live
 * session whose breakpoint was hit. */
static inline __attribute__((always_inline)) bool tr_vm_call_fast_at(Process *p, unsigned sid,
                                                                     const FuncInfo *fn,
                                                                     uintptr_t tf, unsigned xflags,
                                                                     const Term *args,
                                                                     uint64_t ticks)
{
    if (tf & (VM_TRACE_ARITY | VM_TRACE_TRACER))
        return false;
    TrEmit ev = tr_vm_fn_event(p, TR_K_CALL, fn, tr_vm_record_flags(tf) | xflags,
                               args, fn->arity);
    return tr_vm_emit_fast_in(p, sid, &ev, true, ticks);
}

static inline __attribute__((always_inline)) bool tr_vm_call_fast(Process *p, unsigned sid,
                                                                  const FuncInfo *fn,
                                                                  uintptr_t tf, unsigned xflags,
                                                                  const Term *args)
{
    return tr_vm_call_fast_at(p, sid, fn, tf, xflags, args, 0);
}

/* tr_vm_return_from's fast path, for a caller that checked that p's
 * trace word names sid: such a word exists only while sid is live or
 * before its stop's walk, which comes after its rings were unpublished,
 * and an online reader cannot see a successor's ring (published after a
 * grace period this reader has not passed): no tag check. */
static inline __attribute__((always_inline)) bool tr_vm_return_from_fast(Process *p,
                                                                         unsigned sid,
                                                                         const FuncInfo *fn,
                                                                         Term value,
                                                                         uintptr_t tf)
{
    if (tf & VM_TRACE_TRACER)
        return false;
    TrEmit ev = tr_vm_fn_event(p, TR_K_RETURN_FROM, fn, tr_vm_record_flags(tf),
                               &value, 1);
    return tr_vm_emit_fast_in(p, sid, &ev, true, 0);
}

#endif /* TRACE_TR_VM_FAST_H */
