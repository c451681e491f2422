/*
 * breakpoints/bp_frame.c - trace frames: reporting a traced call's return.
 *
 * A call is reported at its breakpoint, before the function runs; its
 * return cannot be, because the function has not returned yet.  As in
 * BEAM (beam_bp.c and beam_emu's return_trace instructions), the hit pushes a *trace frame* that the
 * traced activation returns into, and that frame reports the return.
 *
 * Layout.  When the hit runs, the top frame is the traced activation A
 * (function fn, register window at base b, result register r in its
 * caller C).  The hit moves A up one slot and puts the trace frame T in
 * its place:
 *
 *     before:  ... C | A(fn, base b, ret_reg r)
 *     after:   ... C | T(fn, base b, ret_reg r, pc = RETURN_TRACE) | A(fn, base b, ret_reg 0)
 *
 * T shares A's register window.  A's return writes its value into r0 of
 * that window and resumes T at the RETURN_TRACE instruction, which reports
 * (vm_hook_trace_return) and then returns the value to C's register r exactly
 * as A would have.  A tail call inside A replaces A's function but leaves
 * T in place, so T reports the return of the function that was traced,
 * with the value the tail-called code finally returns (BEAM's semantics).
 * T's kind word carries what to report (BP_TF_*), its tdata what call_time
 * needs.  Frames below A are not touched, so handler indices (which name
 * frames below the running one) stay valid.
 *
 * Exceptions.  The interpreter's unwinding discards the frames above the
 * handler's frame (or the whole activation); when the process has trace
 * frames (p->ntrace, a counter so that exceptions cost nothing otherwise)
 * it calls vm_hook_trace_unwind first, which reports exception_from for each
 * exception_trace frame it crosses, innermost first, caught or not, and
 * return_to for the catching function if a return_to frame was crossed.
 * Stack traces and {caller} skip trace frames.
 *
 * Traced tail loops stay bounded.  BEAM pushes a trace frame at every
 * traced call, tail calls included, so a tail-recursive loop traced with
 * return_trace grows the stack by a frame per iteration (and reports one
 * return_from per iteration when it ends).  Here a call entered by a tail
 * call (its activation sits directly on trace frames: the chain of
 * activations that tail-called each other) gets a trace frame only for
 * what no frame of that chain already reports for the same function:
 * a loop of N iterations of f reports N calls and ONE return_from f; a
 * chain f -> g -> f -> g ... keeps one frame for f and one for g.  So the
 * trace frames of one chain are bounded by (functions in the loop) x
 * (kinds of report), whatever the iteration count.  return_to is reported
 * once per chain (as in BEAM, which keeps that one bounded too).
 */
#include "breakpoints/bp_frame.h"

#include "breakpoints/bp_meta.h"
#include "breakpoints/bp_time.h"
#include "trace/tr_vm.h"
#include "trace/tr_vm_fast.h"
#include "vm/atom.h"
#include "vm/heap.h"

const Instr bp_return_trace_code[1] = { (Instr)OP_RETURN_TRACE };

/* erlang:apply/2 and apply/3, which call their function in an
 * activation of their own: BEAM has no frame for them (its apply
 * instructions call the function directly), so they are not a caller. */
static bool is_apply(const FuncInfo *fn)
{
    return fn->mod == ATOM_ERLANG && fn->name == ATOM_APPLY && !fn->module;
}

/* The nearest call frame below frame `i` (trace frames skipped, an
 * activation's entry frame crossed to the native that started it,
 * apply crossed to its caller). */
static const Frame *caller_frame_below(const Process *p, uint32_t i)
{
    while (i-- > 0) {
        const Frame *f = &p->frames[i];
        if (FRAME_KIND(f->kind) == FRAME_CALL && f->fn && !is_apply(f->fn))
            return f;
    }
    return NULL;
}

static const FuncInfo *caller_below(const Process *p, uint32_t i)
{
    const Frame *f = caller_frame_below(p, i);
    return f ? f->fn : NULL;
}

const Frame *bp_frame_caller(const Process *p)
{
    return caller_frame_below(p, p->nframes - 1);
}

const Frame *bp_frame_caller_of(const Process *p, const Frame *f)
{
    return caller_frame_below(p, (uint32_t)(f - p->frames));
}

/* Events for a session's output: only while the process is call traced
 * in it and not silent (a change applies from its next event). */
static bool reporting(unsigned sf)
{
    return (sf & VM_TRACE_CALL) && !(sf & VM_TRACE_SILENT);
}

/* Everything but a plain return_from (vm_hook_trace_return below). */
static __attribute__((noinline)) void frame_return_slow(Process *p)
{
    uint32_t ti = p->nframes - 1;
    const Frame *t = &p->frames[ti];
    const uint32_t tf = bp_frame_tflags(t);
    const unsigned sid = bp_frame_sid(t);
    const FuncInfo *fn = t->fn;
    unsigned sf = tr_pflags_of(p, vm_atomic_load_relaxed(&p->trace), sid);
    p->ntrace--;
    /* call_time first: reporting may suspend, which must not be charged
     * to fn (the clock stops while p is switched out anyway). */
    if (tf & BP_TF_TIME)
        bp_time_return_sess(p, fn, sid, t->tdata);
    if ((tf & (BP_TF_RETURN | BP_TF_EXCEPTION)) && reporting(sf))
        tr_vm_return_from(p, sid, fn, p->stack[t->base], sf);
    if (tf & (BP_TF_META_RETURN | BP_TF_META_EXCEPTION))
        bp_meta_return(p, fn, sid, t->base);
    /* No caller below: the bottom of the process, return_to undefined
     * (as BEAM). */
    if ((tf & BP_TF_RETURN_TO) && reporting(sf) && (sf & VM_TRACE_RETURN_TO))
        tr_vm_return_to(p, sid, caller_below(p, ti), sf);
}

Term *vm_hook_trace_return(Process *p)
{
    const Frame *t = &p->frames[p->nframes - 1];
    Term *window = p->stack + t->base;
    uintptr_t pf = vm_atomic_load_relaxed(&p->trace);
    const unsigned sid = bp_frame_sid(t);
    /* The common frame: return_trace or exception_trace only, of the one
     * session tracing the process, which is reporting: one return_from,
     * called last (a tail call). */
    if (VM_LIKELY(!(bp_frame_tflags(t) & ~(uint32_t)(BP_TF_RETURN | BP_TF_EXCEPTION)) &&
                  vm_trace_sid(pf) == sid && reporting(VM_TRACE_FLAGS(pf)))) {
        p->ntrace--;
        if (!tr_vm_return_from_fast(p, sid, t->fn, window[0], pf))
            tr_vm_return_from(p, sid, t->fn, window[0], pf);
        return window;
    }
    frame_return_slow(p);
    return window;
}

/*
 * The frame whose handler will catch an exception that leaves the
 * activation whose entry frame is `lo`, when only erlang:apply natives
 * are between (they pass the exception on, and BEAM's apply has no frame,
 * so its return_to names the catching function); -1 otherwise.
 */
static int catcher_beyond(const Process *p, uint32_t lo)
{
    if (!p->nhandlers)
        return -1;
    uint32_t hf = p->handlers[p->nhandlers - 1].frame;
    for (uint32_t i = lo; i > hf; i--) {
        const Frame *below = &p->frames[i - 1];
        if (FRAME_KIND(p->frames[i].kind) == FRAME_ENTRY &&
            (FRAME_KIND(below->kind) != FRAME_CALL || !below->fn || !is_apply(below->fn)))
            return -1;
    }
    return (int)hf;
}

void vm_hook_trace_unwind(Process *p, uint32_t lo, int catcher, bool bottom)
{
    if (catcher < 0 && !bottom)
        catcher = catcher_beyond(p, lo);
    uint32_t rbase = p->nroots;
    /* What the process will exit with, if the exception is not caught:
     * an uncaught throw ends it as error {nocatch, Value}. */
    tvm_term cls = vm_root_push(p, p->exc_class), reason = vm_root_push(p, p->exc_reason);
    if (catcher < 0 && bottom && p->exc_class == make_atom(ATOM_THROW)) {
        Term e[2] = { make_atom(ATOM_NOCATCH), p->exc_reason };
        Term nocatch = vm_make_tuple(p, 2, e);
        p->roots[cls.h] = make_atom(ATOM_ERROR);
        p->roots[reason.h] = nocatch;
    }
    /* The sessions (by slot) whose return_to frames the exception
     * crossed, with their sids. */
    uint32_t return_to = 0;
    unsigned rt_sid[VM_SESSIONS_MAX];
    for (uint32_t i = p->nframes; i-- > lo;) {
        const Frame *t = &p->frames[i];
        if (!bp_frame_is_trace(t))
            continue;
        const uint32_t tf = bp_frame_tflags(t);
        const unsigned sid = bp_frame_sid(t);
        unsigned sf = tr_pflags_of(p, vm_atomic_load_relaxed(&p->trace), sid);
        p->ntrace--;
        if (tf & BP_TF_TIME)
            bp_time_return_sess(p, t->fn, sid, t->tdata);
        if ((tf & BP_TF_EXCEPTION) && reporting(sf))
            tr_vm_exception_from(p, sid, t->fn, p->roots[cls.h], p->roots[reason.h], sf);
        if (tf & BP_TF_META_EXCEPTION)
            bp_meta_exception(p, t->fn, sid, p->roots[cls.h], p->roots[reason.h]);
        if (tf & BP_TF_RETURN_TO) {
            return_to |= 1u << vm_sid_slot(sid);
            rt_sid[vm_sid_slot(sid)] = sid;
        }
    }
    for (unsigned k = 0; return_to && k < VM_SESSIONS_MAX; k++) {
        if (!(return_to & (1u << k)))
            continue;
        unsigned sf = tr_pflags_of(p, vm_atomic_load_relaxed(&p->trace), rt_sid[k]);
        if (catcher >= 0 && reporting(sf) && (sf & VM_TRACE_RETURN_TO) && p->frames[catcher].fn)
            tr_vm_return_to(p, rt_sid[k], p->frames[catcher].fn, sf);
    }
    p->nroots = rbase;
}
