/*
 * breakpoints/bp_hit.c - the slow part of a breakpoint hit: meta trace,
 * the process's call trace (match spec, call event, the embedder's hook)
 * and the trace frame that will report the return.
 *
 * Order, and why.  A hit may use its generation (match specs, the meta
 * tracer) only while the thread stays an online reader: a suspended
 * process lets its scheduler pass quiescent states, after which the
 * engine may free what the generation pointed at.  Everything that reads
 * the generation therefore runs first, and nothing after it may suspend
 * until it is done: (1) meta trace (its spec runs and its message is
 * sent; sending never suspends), (1b) call_time (charges the caller,
 * counts the call; never suspends), (2) the process's match spec, (3) the
 * call event (which may suspend the process under the lossless policy),
 * (4) the trace frame, (5) the hook (which may suspend).
 *
 * Match specs run on a per-thread scratch (no allocation, no lock); their
 * results are used before anything can collect, except for the backtrace
 * action, whose stack term is built on the heap: then the spec runs again
 * with its results copied onto the heap first (a run is deterministic).
 */
#include "breakpoints/bp_hit.h"

#include <stdio.h>

#include "breakpoints/bp_frame.h"
#include "breakpoints/bp_meta.h"
#include "stacks/st.h"
#include "breakpoints/bp_time.h"
#include "trace/tr_event.h"
#include "trace/tr_vm.h"
#include "trace/tr_vm_fast.h"
#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/print.h"
#include "vm/sched.h"
#include "vm/strbuf.h"

/* How many frames the backtrace action attaches. */
#define BP_BACKTRACE_MAX 32

TrMsScratch *bp_scratch(void)
{
    static __thread TrMsScratch scratch;
    return &scratch;
}

void bp_ms_ctx(const Process *p, const TrMs *ms, TrMsCtx *ctx)
{
    unsigned needs = tr_ms_needs(ms);
    *ctx = (TrMsCtx){ 0 };
    if (needs & TR_MS_NEED_SELF)
        ctx->self = p->pid ? make_pid(p->pid) : 0;
    if (needs & TR_MS_NEED_CALLER) {
        const FuncInfo *c = bp_frame_caller(p);
        if (c) {
            ctx->caller_known = true;
            ctx->caller_mod = c->mod;
            ctx->caller_fun = c->name;
            ctx->caller_arity = c->arity;
        }
    }
}

Term bp_args_tuple(Process *p, const FuncInfo *fn, uint32_t base)
{
    /* The list from its end; the register stack never moves (a
     * collection updates it in place), so arguments are re-read after
     * each allocation. */
    Term list = TERM_NIL;
    for (uint32_t i = fn->arity; i-- > 0;)
        list = vm_make_cons(p, p->stack[base + i], list);
    Term e[3] = { make_atom(fn->mod), make_atom(fn->name), list };
    return vm_make_tuple(p, 3, e);
}

/* {display, X}: X on stdout, one line (as BEAM's erts_display). */
static void display(const TrMsResult *res)
{
    StrBuf sb;
    sb_init(&sb);
    for (unsigned i = 0; i < res->ndisplay; i++) {
        sb.len = 0;
        vm_print_term(&sb, res->display[i]);
        sb_putc(&sb, '\n');
        fwrite(sb.s, 1, sb.len, stdout);
    }
    fflush(stdout);
    sb_free(&sb);
}

/* The embedder's call hook, if one is set. */
static void run_call_hook(Process *p, const FuncInfo *fn, bool global)
{
    /* [HK1'] acquire; pairs with [HK1] in tvm_set_call_hook(). */
    const VmCallHook *h = vm_atomic_load_ptr_acquire(&p->vm->call_hook);
    if (!h || !h->fn)
        return;
    const Frame *f = &p->frames[p->nframes - 1];
    uint32_t rbase = p->nroots;
    tvm_term argv[VM_MAX_ARITY];
    for (uint32_t i = 0; i < fn->arity; i++)
        argv[i] = vm_root_push(p, p->stack[f->base + i]);
    tvm_call_event ev = {
        .pid = p->pid,
        .module = vm_atom_name(fn->mod, NULL),
        .function = vm_atom_name(fn->name, NULL),
        .arity = fn->arity,
        .argv = argv,
        .global = global,
    };
    h->fn(&p->env, &ev, h->data);
    p->nroots = rbase;
}

/* The trace frame flags a matching clause's body asks for. */
static uint32_t frame_flags(const TrMsResult *res, uint32_t fl, uintptr_t pf)
{
    uint32_t tf = 0;
    if (res->flags & TR_MS_RETURN_TRACE)
        tf |= BP_TF_RETURN;
    if (res->flags & TR_MS_EXCEPTION_TRACE)
        tf |= BP_TF_RETURN | BP_TF_EXCEPTION;
    /* return_to: local trace only (a global hit knows only remote calls). */
    if ((fl & BP_LOCAL) && (pf & VM_TRACE_RETURN_TO))
        tf |= BP_TF_RETURN_TO;
    return tf;
}

/*
 * The process's call trace: runs the spec, applies {silent, _} and
 * {display, _}, writes the call event.  Returns the frame flags wanted
 * (*want) and whether the call matched (the hook runs only then).
 */
static __attribute__((noinline)) bool process_call(Process *p, const FuncInfo *fn,
                                                   const TrMs *ms, uint32_t fl, uint32_t *want)
{
    uint32_t base = p->frames[p->nframes - 1].base;
    TrMsResult res = { 0 };
    if (ms) {
        TrMsCtx ctx;
        bp_ms_ctx(p, ms, &ctx);
        if (!tr_ms_run(ms, &p->stack[base], fn->arity, &ctx, bp_scratch(), &res))
            return false;
        if (res.flags & (TR_MS_SILENT_ON | TR_MS_SILENT_OFF))
            vm_atomic_update_bits(&p->trace, VM_TRACE_SILENT, res.flags & TR_MS_SILENT_ON);
        if (res.ndisplay)
            display(&res);
    }
    uintptr_t pf = vm_atomic_load_relaxed(&p->trace);
    uint32_t need = bp_frame_needed(p, fn, frame_flags(&res, fl, pf));
    *want = need;
    if ((pf & VM_TRACE_SILENT) || res.message == TR_MS_MSG_OFF)
        return true;
    uint32_t rbase = p->nroots;
    Term extra[2];
    unsigned nextra = 0, xflags = 0;
    if (res.flags & TR_MS_BACKTRACE) {
        /* The stack term is built on the heap, so the results must live
         * there too (same arguments, same context: the same results). */
        TrMsCtx ctx;
        bp_ms_ctx(p, ms, &ctx);
        tr_ms_run_heap(ms, p, &p->stack[base], fn->arity, &ctx, bp_scratch(), &res);
        tvm_term msg = vm_root_push(p, res.message == TR_MS_MSG_TERM ? res.msg : TERM_NIL);
        Term bt = st_backtrace_term(p, BP_BACKTRACE_MAX);
        res.msg = vm_root_get(p, msg);
        if (res.message == TR_MS_MSG_TERM)
            extra[nextra++] = res.msg;
        extra[nextra++] = bt;
        xflags |= TR_F_BACKTRACE;
    } else if (res.message == TR_MS_MSG_TERM) {
        extra[nextra++] = res.msg;
    }
    if (res.message == TR_MS_MSG_TERM)
        xflags |= TR_F_MESSAGE;
    if (need & BP_TF_RETURN)
        xflags |= TR_F_RETURNS;
    tr_vm_call(p, fn, pf, extra, nextra, xflags);
    p->nroots = rbase;
    return true;
}

/* Everything but the plain call trace (vm_hook_bp_hit below): kept out of line so
 * that the plain case does not pay this function's frame. */
static __attribute__((noinline)) bool hit_slow(Process *p, const BpGen *g, uint32_t fl,
                                               bool global, const FuncInfo *fn, uintptr_t pf)
{
    uint32_t want = 0, meta = 0;
    void *tdata = NULL;
    /* (1) meta trace: never suspends. */
    if (fl & BP_META)
        meta = bp_meta_call(p, fn, g->meta_spec, g->meta_tracer);
    /* (1b) call_time, for processes with the call flag (as BEAM: the
     * call-traced processes are the ones measured); the frame's tdata is
     * the function that was current (a tail call in a chain that already
     * has a time frame for fn pushes none: bp_time_return charges the
     * current one). */
    uint32_t timed = 0;
    if ((fl & BP_TIME_ACTIVE) && (pf & VM_TRACE_CALL) && bp_time_call(p, fn, g, &tdata))
        timed = BP_TF_TIME;
    /* (2)-(3) the process's call trace: the spec reads g before the event
     * (which may suspend); nothing reads g after it. */
    bool matched = false;
    if ((pf & VM_TRACE_CALL) && (fl & BP_CALL_TRACE))
        matched = process_call(p, fn, g->match_spec, fl, &want);
    /* (4) one trace frame for what the call and the meta trace want. */
    want |= bp_frame_needed(p, fn, meta | timed);
    if (want && !bp_frame_push(p, want, tdata)) {
        if (timed)
            bp_time_return(p, fn, tdata);   /* no frame will: back to the caller */
        return false;
    }
    /* (5) the hook, last: it may suspend. */
    if (matched)
        run_call_hook(p, fn, global);
    return true;
}

bool vm_hook_bp_hit(Process *p, const BpGen *g, uint32_t fl, const FuncInfo *fn, uintptr_t pf,
            const Term *args)
{
    /* The common case first: a plain call trace (no spec, or a constant
     * one that only asks for return_trace or exception_trace; no meta, no
     * call time, no return_to, not silent) is an event, maybe a trace
     * frame, and the hook: what hit_slow would do, without running the
     * spec (its result is g->call_tf). */
    if (VM_LIKELY(!(g->call_tf & BP_SPEC_RUN) && !(fl & (BP_ANY_PROCESS | BP_TIME_ACTIVE)) &&
                  (fl & BP_CALL_TRACE) &&
                  (pf & (VM_TRACE_CALL | VM_TRACE_RETURN_TO | VM_TRACE_SILENT)) ==
                      VM_TRACE_CALL)) {
        uint32_t want = g->call_tf;
        if (want)
            want = bp_frame_needed(p, fn, want);
        unsigned xf = (want & BP_TF_RETURN) ? TR_F_RETURNS : 0;
        if (!tr_vm_call_fast(p, fn, pf, xf, args))
            tr_vm_call(p, fn, pf, NULL, 0, xf);
        /* The event may have suspended p (lossless): g is not read after it. */
        if (want && !bp_frame_push(p, want, NULL))
            return false;
        /* [HK1'] acquire (also in run_call_hook); pairs with [HK1]. */
        if (vm_atomic_load_ptr_acquire(&p->vm->call_hook))
            run_call_hook(p, fn, (fl & BP_GLOBAL) != 0);
        return true;
    }
    return hit_slow(p, g, fl, (fl & BP_GLOBAL) != 0, fn, pf);
}
