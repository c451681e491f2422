/*
 * trace/tr_vm_call.c - the call-trace events a process writes into a
 * session's sink: call (at a breakpoint hit), return_from and
 * exception_from (at its trace frames, breakpoints/bp_frame.c) and
 * return_to.  Each runs on the traced process's own thread while it is an
 * online reader, so the pipeline it writes into stays alive (the
 * protocol is in trace/tr_vm.c); the session is the one whose breakpoint
 * or trace frame it is, `tf` that session's flags for the process.
 */
#include "trace/tr.h"
#include "trace/tr_vm.h"
#include "trace/tr_vm_fast.h"
#include "trace/tr_vm_internal.h"

#include <string.h>

/* A call event with its arity, or with its arguments and then `extra`
 * terms (one array), or that the fast path did not take. */
static __attribute__((noinline)) void call_general(Process *p, unsigned sid,
                                                   const FuncInfo *fn, uintptr_t tf,
                                                   const Term *extra, unsigned nextra,
                                                   unsigned xflags)
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
    tr_sess_emit(p, sid, &ev);
}

void tr_vm_call(Process *p, unsigned sid, const FuncInfo *fn, uintptr_t tf, const Term *extra,
                unsigned nextra, unsigned xflags)
{
    if (VM_LIKELY(!nextra) &&
        tr_vm_call_fast(p, sid, fn, tf, xflags, &p->stack[p->frames[p->nframes - 1].base]))
        return;
    call_general(p, sid, fn, tf, extra, nextra, xflags);
}

/* An event about fn with `n` payload terms, by the general path. */
static __attribute__((noinline)) void fn_general(Process *p, unsigned sid, TrKind kind,
                                                 const FuncInfo *fn, uintptr_t tf,
                                                 const Term *terms, unsigned n)
{
    TrEmit ev = tr_vm_fn_event(p, kind, fn, tr_vm_record_flags(tf), terms, n);
    tr_sess_emit(p, sid, &ev);
}

/* An event about fn with `n` payload terms. */
static inline __attribute__((always_inline)) void emit_fn(Process *p, unsigned sid, TrKind kind,
                                                          const FuncInfo *fn, uintptr_t tf,
                                                          const Term *terms, unsigned n)
{
    TrEmit ev = tr_vm_fn_event(p, kind, fn, tr_vm_record_flags(tf), terms, n);
    if ((tf & VM_TRACE_TRACER) || !tr_vm_emit_fast(p, sid, &ev))
        fn_general(p, sid, kind, fn, tf, terms, n);
}

void tr_vm_return_from(Process *p, unsigned sid, const FuncInfo *fn, Term value, uintptr_t tf)
{
    emit_fn(p, sid, TR_K_RETURN_FROM, fn, tf, &value, 1);
}

void tr_vm_exception_from(Process *p, unsigned sid, const FuncInfo *fn, Term cls, Term reason,
                          uintptr_t tf)
{
    Term cr[2] = { cls, reason };
    emit_fn(p, sid, TR_K_EXCEPTION_FROM, fn, tf, cr, 2);
}

void tr_vm_return_to(Process *p, unsigned sid, const FuncInfo *fn, uintptr_t tf)
{
    if (fn) {
        emit_fn(p, sid, TR_K_RETURN_TO, fn, tf, NULL, 0);
        return;
    }
    /* Nothing to return into (the bottom of the process): undefined. */
    TrEmit ev = { .kind = TR_K_RETURN_TO, .flags = tr_vm_record_flags(tf) | TR_F_NO_MFA,
                  .pid = p->pid };
    tr_sess_emit(p, sid, &ev);
}
