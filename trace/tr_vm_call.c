/*
 * trace/tr_vm_call.c - the call-trace events a process writes into the
 * VM's trace pipeline: call (at a breakpoint hit), return_from and
 * exception_from (at its trace frames, breakpoints/bp_frame.c) and
 * return_to.  Each runs on the traced process's own thread while it is an
 * online reader, so the pipeline it writes into stays alive (the
 * protocol is in trace/tr_vm.c).
 */
#include "trace/tr.h"
#include "trace/tr_vm.h"
#include "trace/tr_vm_fast.h"
#include "trace/tr_vm_internal.h"

#include <string.h>

/* Writes ev for p into the running pipeline, if any (p's thread, online;
 * under the lossless policy a full ring suspends p: trace/tr_vm_proc.c). */
static void emit(Process *p, const TrEmit *ev)
{
    TrVm *t = tr_vm_current(p->vm);
    if (t)
        tr_vm_emit(p, t, ev);
}

/* A call event with its arity, or with its arguments and then `extra`
 * terms (one array), or that the fast path did not take. */
static __attribute__((noinline)) void call_general(Process *p, const FuncInfo *fn,
                                                   uintptr_t tf, const Term *extra,
                                                   unsigned nextra, unsigned xflags)
{
    bool arity = tf & VM_TRACE_ARITY;
    Term terms[VM_MAX_ARITY + 2];
    unsigned n = 0;
    if (!arity) {
        n = fn->arity;
        memcpy(terms, &p->stack[p->frames[p->nframes - 1].base], n * sizeof(Term));
    }
    for (unsigned i = 0; i < nextra && i < 2; i++)
        terms[n++] = extra[i];
    TrEmit ev = tr_vm_fn_event(p, TR_K_CALL, fn,
                               tr_vm_record_flags(tf) | (arity ? TR_F_ARITY : 0) | xflags,
                               terms, n);
    emit(p, &ev);
}

void tr_vm_call(Process *p, const FuncInfo *fn, uintptr_t tf, const Term *extra,
                unsigned nextra, unsigned xflags)
{
    if (VM_LIKELY(!nextra) &&
        tr_vm_call_fast(p, fn, tf, xflags, &p->stack[p->frames[p->nframes - 1].base]))
        return;
    call_general(p, fn, tf, extra, nextra, xflags);
}

/* An event about fn with `n` payload terms, by the general path. */
static __attribute__((noinline)) void fn_general(Process *p, TrKind kind, const FuncInfo *fn,
                                                 uintptr_t tf, const Term *terms, unsigned n)
{
    TrEmit ev = tr_vm_fn_event(p, kind, fn, tr_vm_record_flags(tf), terms, n);
    emit(p, &ev);
}

/* An event about fn with `n` payload terms. */
static inline __attribute__((always_inline)) void emit_fn(Process *p, TrKind kind,
                                                          const FuncInfo *fn, uintptr_t tf,
                                                          const Term *terms, unsigned n)
{
    TrEmit ev = tr_vm_fn_event(p, kind, fn, tr_vm_record_flags(tf), terms, n);
    if (!tr_vm_emit_fast(p, &ev))
        fn_general(p, kind, fn, tf, terms, n);
}

void tr_vm_return_from(Process *p, const FuncInfo *fn, Term value, uintptr_t tf)
{
    emit_fn(p, TR_K_RETURN_FROM, fn, tf, &value, 1);
}

void tr_vm_exception_from(Process *p, const FuncInfo *fn, Term cls, Term reason,
                          uintptr_t tf)
{
    Term cr[2] = { cls, reason };
    emit_fn(p, TR_K_EXCEPTION_FROM, fn, tf, cr, 2);
}

void tr_vm_return_to(Process *p, const FuncInfo *fn, uintptr_t tf)
{
    emit_fn(p, TR_K_RETURN_TO, fn, tf, NULL, 0);
}
