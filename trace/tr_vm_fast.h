/*
 * trace/tr_vm_fast.h - the call and return events' fast path, inlined
 * where they happen (the breakpoint hit, the trace frame) so that the
 * commonest event costs no call at all: a process on a scheduler, a
 * payload of immediates, room in the scheduler's ring (trace/tr_fast.h
 * says what "room" means and why the bytes are the same as tr_emit's).
 * Anything else returns false and the caller takes the general emitter
 * (trace/tr_vm.h), which starts over.  Only for the VM's own hot paths:
 * it reaches into the pipeline's private ring structure.
 */
#ifndef TRACE_TR_VM_FAST_H
#define TRACE_TR_VM_FAST_H

#include "trace/tr_fast.h"
#include "trace/tr_vm.h"
#include "trace/tr_vm_internal.h"

/*
 * Writes ev for p by the fast path when it can.  True when ev was written,
 * or there is no pipeline (nothing to do); false when the caller must take
 * the general path.  p's thread, online (the pipeline stays alive: the
 * protocol is in trace/tr_vm.c).  ev's address must not escape, so that
 * the compiler builds no TrEmit.
 */
static inline __attribute__((always_inline)) bool tr_vm_emit_fast(Process *p, const TrEmit *ev)
{
    /* [TP1'] acquire: pairs with [TP1] in tvm_trace_start; the ring stays
     * alive while this thread is an online reader, as the TrVm does. */
    TrRing *r = VM_LIKELY(p->sched != NULL)
                    ? vm_atomic_load_ptr_acquire(&p->sched->trace_ring) : NULL;
    if (VM_LIKELY(r != NULL))
        return tr_ring_put_imm(r, ev);
    /* No ring: nothing to do without a pipeline; else the general path
     * (a call context on a foreign thread: the shared ring). */
    return !tr_vm_current(p->vm);
}

/* tr_vm_call(p, fn, tf, NULL, 0, xflags)'s fast path (no arity flag);
 * `args` is the top activation's register window. */
static inline __attribute__((always_inline)) bool tr_vm_call_fast(Process *p, const FuncInfo *fn,
                                                                  uintptr_t tf, unsigned xflags,
                                                                  const Term *args)
{
    if (tf & VM_TRACE_ARITY)
        return false;
    TrEmit ev = tr_vm_fn_event(p, TR_K_CALL, fn, tr_vm_record_flags(tf) | xflags,
                               args, fn->arity);
    return tr_vm_emit_fast(p, &ev);
}

/* tr_vm_return_from's fast path. */
static inline __attribute__((always_inline)) bool tr_vm_return_from_fast(Process *p,
                                                                         const FuncInfo *fn,
                                                                         Term value,
                                                                         uintptr_t tf)
{
    TrEmit ev = tr_vm_fn_event(p, TR_K_RETURN_FROM, fn, tr_vm_record_flags(tf),
                               &value, 1);
    return tr_vm_emit_fast(p, &ev);
}

#endif /* TRACE_TR_VM_FAST_H */
