/*
 * breakpoints/bp_hit.c - the slow part of a breakpoint hit: meta trace,
 * the process's call trace (match spec, call event, the embedder's hook)
 * and the trace frames that will report the return, for every trace
 * session with settings on the function.
 *
 * Order, and why.  A hit may use its generation (match specs, the meta
 * tracer, every session's entry) only while the thread stays an online
 * reader: a suspended process lets its scheduler pass quiescent states,
 * after which the engine may free what the generation pointed at.
 * Everything that reads the generation therefore runs first, for every
 * session, and nothing before it is done may suspend: (1) meta trace (its
 * spec runs and its message is sent; sending never suspends), (1b)
 * call_time (charges the caller, counts the call; never suspends), (2)
 * the process's match spec; then, per session, (3) the call event (which
 * may suspend the process under the lossless policy) and (4) the trace
 * frame; last (5) the hook (which may suspend).  What (2) computes for
 * (3) (the spec's message, the backtrace) is kept in handles across the
 * suspensions.
 *
 * Sessions.  Each session's entry has its own flags, specs, counter and
 * call time data, and the process has its own flags in each session
 * (trace/tr_flags.c): a session reports a call when its entry call-traces
 * the function and the process is call-traced in it, with its own spec,
 * into its own sink, and pushes its own trace frame, which reports the
 * return to it (bp_frame.c).  The embedder's call hook belongs to the
 * default session (it runs when that session reports the call).  The
 * common case, one session call-tracing with a plain spec and the process
 * traced by that session alone, is vm_hook_bp_hit's fast path, as it was
 * before sessions existed.
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

/* A caller's function and the line of the call it made (natives have
 * none: the call is just before the pc it resumes at). */
static void frame_info(const Frame *f, TrMsFrame *out)
{
    const FuncInfo *c = f->fn;
    *out = (TrMsFrame){ .mod = c->mod, .fun = c->name, .arity = c->arity };
    if (!c->native && f->pc) {
        out->file = c->file;
        out->line = vm_func_line(c, f->pc - 1);
    }
}

/* {current_stacktrace}'s frames: this thread's, read by the run that
 * follows on it (as bp_scratch). */
static void stack_ctx(const Process *p, TrMsCtx *ctx)
{
    static __thread TrMsFrame frames[TR_MS_STACK_DEPTH];
    unsigned n = 0;
    for (const Frame *f = bp_frame_caller(p); f && n < TR_MS_STACK_DEPTH;
         f = bp_frame_caller_of(p, f))
        frame_info(f, &frames[n++]);
    ctx->stack = frames;
    ctx->nstack = n;
}

void bp_ms_ctx(const Process *p, const TrMs *ms, unsigned sid, unsigned flags, TrMsCtx *ctx)
{
    unsigned needs = tr_ms_needs(ms);
    *ctx = (TrMsCtx){ .flags = flags, .tracer_ok = sid == 0 };
    if (needs & TR_MS_NEED_FLAGS) {
        ctx->alive = tr_ms_alive;
        ctx->alive_data = p->vm;
    }
    if (needs & TR_MS_NEED_SELF)
        ctx->self = p->pid ? make_pid(p->pid) : 0;
    if (needs & TR_MS_NEED_CALLER) {
        const Frame *f = bp_frame_caller(p);
        if (f) {
            TrMsFrame c;
            frame_info(f, &c);
            ctx->caller_known = true;
            ctx->caller_mod = c.mod;
            ctx->caller_fun = c.fun;
            ctx->caller_arity = c.arity;
            ctx->caller_file = c.file;
            ctx->caller_line = c.line;
        }
    }
    if (needs & TR_MS_NEED_STACK)
        stack_ctx(p, ctx);
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
static uint32_t frame_flags(const TrMsResult *res, uint32_t fl, unsigned sf)
{
    uint32_t tf = 0;
    if (res->flags & TR_MS_RETURN_TRACE)
        tf |= BP_TF_RETURN;
    if (res->flags & TR_MS_EXCEPTION_TRACE)
        tf |= BP_TF_RETURN | BP_TF_EXCEPTION;
    /* return_to: local trace only (a global hit knows only remote calls). */
    if ((fl & BP_LOCAL) && (sf & VM_TRACE_RETURN_TO))
        tf |= BP_TF_RETURN_TO;
    return tf;
}

/* One session's part of a hit with several sessions, from phase (1)-(2)
 * to (3)-(4). */
typedef struct SessHit {
    unsigned sid;
    unsigned sf;                /* the process's flags in the session */
    bool report;                /* write the call event */
    bool matched;               /* the call trace matched (the hook may run) */
    uint32_t want;              /* trace frame flags */
    void *tdata;                /* call_time: the function that was current */
    unsigned xflags;            /* TR_F_MESSAGE, TR_F_BACKTRACE, TR_F_RETURNS */
    unsigned nextra;
    tvm_term extra[2];          /* the spec's message, the backtrace (handles) */
} SessHit;

/*
 * The process's call trace in one session, phase (2): runs the spec,
 * applies {silent, _} and {display, _}, decides the event and the frame.
 * Results that live on the heap are rooted in h->extra.
 */
static __attribute__((noinline)) void call_prep(Process *p, const FuncInfo *fn,
                                                const BpSess *e, SessHit *h)
{
    uint32_t base = p->frames[p->nframes - 1].base;
    const TrMs *ms = e->match_spec;
    TrMsResult res;
    tr_ms_result_clear(&res);
    TrMsCtx ctx;
    if (ms) {
        bp_ms_ctx(p, ms, e->sid, h->sf, &ctx);
        if (!tr_ms_run(ms, &p->stack[base], fn->arity, &ctx, bp_scratch(), &res))
            return;
        if (res.flags & (TR_MS_SILENT_ON | TR_MS_SILENT_OFF)) {
            bool on = res.flags & TR_MS_SILENT_ON;
            if (!(h->sf & VM_TRACE_SILENT) != !on)
                tr_pflags_change(p, h->sid, VM_TRACE_SILENT, on, false);
        }
        if (res.ndisplay)
            display(&res);
    }
    h->matched = true;
    h->sf = tr_pflags_of(p, vm_atomic_load_relaxed(&p->trace), h->sid);
    h->want |= frame_flags(&res, e->flags, h->sf);
    /* The spec's changes of trace flags: this call's event keeps the
     * flags it found (h->sf), as BEAM reports the call that disabled
     * its own call trace. */
    if (res.flags & TR_MS_TRACE)
        tr_flags_from_ms(p, h->sid, &res);
    if ((h->sf & VM_TRACE_SILENT) || res.message == TR_MS_MSG_OFF)
        return;
    h->report = true;
    if (res.flags & TR_MS_BACKTRACE) {
        /* The stack term is built on the heap, so the results must live
         * there too (same arguments, same context: the same results). */
        tr_ms_run_heap(ms, p, &p->stack[base], fn->arity, &ctx, bp_scratch(), &res);
        tvm_term msg = vm_root_push(p, res.message == TR_MS_MSG_TERM ? res.msg : TERM_NIL);
        Term bt = st_backtrace_term(p, BP_BACKTRACE_MAX);
        if (res.message == TR_MS_MSG_TERM)
            h->extra[h->nextra++] = msg;
        h->extra[h->nextra++] = vm_root_push(p, bt);
        h->xflags |= TR_F_BACKTRACE;
    } else if (res.message == TR_MS_MSG_TERM) {
        h->extra[h->nextra++] = vm_root_push(p, res.msg);
    }
    if (res.message == TR_MS_MSG_TERM)
        h->xflags |= TR_F_MESSAGE;
}

/* A counter's increment, as the BREAKPOINT instruction makes it. */
static void count_call(const Process *p, BpCount *c)
{
    VmAtomic *n = &c->shard[p->bp_slot].n;
    if (VM_LIKELY(p->bp_slot != 0))
        vm_atomic_store_relaxed(n, vm_atomic_load_relaxed(n) + 1);   /* one writer */
    else
        vm_atomic_fetch_add_relaxed(n, 1);
}

/*
 * The process's call trace in the one session of a hit with one entry:
 * runs the spec, applies {silent, _} and {display, _}, writes the call
 * event.  Returns the frame flags wanted (*want) and whether the call
 * matched (the hook runs only then).  (hit_multi does the same in two
 * phases for several sessions; one session needs no handles.)
 */
static __attribute__((noinline)) bool process_call(Process *p, const FuncInfo *fn,
                                                   const BpSess *e, unsigned sf, uint32_t *want)
{
    const unsigned sid = e->sid;
    uint32_t base = p->frames[p->nframes - 1].base;
    const TrMs *ms = e->match_spec;
    TrMsResult res;
    tr_ms_result_clear(&res);
    TrMsCtx ctx;
    if (ms) {
        bp_ms_ctx(p, ms, sid, sf, &ctx);
        if (!tr_ms_run(ms, &p->stack[base], fn->arity, &ctx, bp_scratch(), &res))
            return false;
        if (res.flags & (TR_MS_SILENT_ON | TR_MS_SILENT_OFF)) {
            bool on = res.flags & TR_MS_SILENT_ON;
            if (!(sf & VM_TRACE_SILENT) != !on)
                tr_pflags_change(p, sid, VM_TRACE_SILENT, on, false);
            sf = tr_pflags_of(p, vm_atomic_load_relaxed(&p->trace), sid);
        }
        if (res.ndisplay)
            display(&res);
        /* The spec's changes of trace flags: this call's event keeps the
         * flags it found (sf), as BEAM reports the call that disabled its
         * own call trace. */
        if (res.flags & TR_MS_TRACE)
            tr_flags_from_ms(p, sid, &res);
    }
    uint32_t need = bp_frame_needed(p, fn, sid, frame_flags(&res, e->flags, sf));
    *want = need;
    if ((sf & VM_TRACE_SILENT) || res.message == TR_MS_MSG_OFF)
        return true;
    uint32_t rbase = p->nroots;
    Term extra[2];
    unsigned nextra = 0, xflags = 0;
    if (res.flags & TR_MS_BACKTRACE) {
        /* The stack term is built on the heap, so the results must live
         * there too (same arguments, same context: the same results). */
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
    tr_vm_call(p, sid, fn, sf, extra, nextra, xflags);
    p->nroots = rbase;
    return true;
}

/* A hit on a generation with one session's entry: everything but the
 * plain call trace (vm_hook_bp_hit's fast path), in the order the file
 * comment gives. */
static __attribute__((noinline)) bool hit_one(Process *p, const BpSess *e, bool global,
                                              const FuncInfo *fn, uintptr_t pf)
{
    const unsigned sid = e->sid;
    uint32_t want = 0, meta = 0;
    void *tdata = NULL;
    /* (1) meta trace: never suspends. */
    if (e->flags & BP_META)
        meta = bp_meta_call(p, fn, e->sid, e->meta_spec, e->meta_tracer);
    unsigned sf = tr_pflags_of(p, pf, sid);
    /* (1b) call_time, for processes with the call flag (as BEAM: the
     * call-traced processes are the ones measured); the frame's tdata is
     * the function that was current (a tail call in a chain that already
     * has a time frame for fn pushes none: bp_time_return charges the
     * current one). */
    uint32_t timed = 0;
    if ((e->flags & BP_TIME_ACTIVE) && (sf & VM_TRACE_CALL) &&
        bp_time_call_sess(p, fn, e->time, sid, &tdata))
        timed = BP_TF_TIME;
    /* (2)-(3) the process's call trace: the spec reads e before the event
     * (which may suspend); nothing reads e after it. */
    bool matched = false;
    if ((sf & VM_TRACE_CALL) && (e->flags & BP_CALL_TRACE))
        matched = process_call(p, fn, e, sf, &want);
    /* (4) one trace frame for what the call and the meta trace want. */
    want |= bp_frame_needed(p, fn, sid, meta | timed);
    if (want && !bp_frame_push(p, want, sid, tdata)) {
        if (timed)
            bp_time_return_sess(p, fn, sid, tdata);   /* no frame will: back to the caller */
        return false;
    }
    /* (5) the hook, last: it may suspend. */
    if (matched && sid == 0)
        run_call_hook(p, fn, global);
    return true;
}

/* A hit on a generation with several sessions' entries (vm_hook_bp_hit
 * below): phase (1)-(2) for all of them, then (3)-(4) for each. */
static __attribute__((noinline)) bool hit_multi(Process *p, const BpGen *g, uint32_t fl,
                                                bool global, const FuncInfo *fn)
{
    SessHit hits[VM_SESSIONS_MAX];
    unsigned nh = 0;
    uint32_t rbase = p->nroots;
    const BpSess *v = bp_gen_entries(g);
    /* (1)-(2) for every session, before anything may suspend. */
    for (uint32_t i = 0; i < g->nsess; i++) {
        const BpSess *e = &v[i];
        SessHit *h = &hits[nh];
        *h = (SessHit){ .sid = e->sid };
        /* Several sessions count: each counts into its own counter. */
        if ((fl & BP_COUNT_MULTI) && (e->flags & BP_COUNT_ACTIVE))
            count_call(p, e->count);
        /* (1) meta trace: never suspends. */
        if (e->flags & BP_META)
            h->want |= bp_meta_call(p, fn, e->sid, e->meta_spec, e->meta_tracer);
        h->sf = tr_pflags_of(p, vm_atomic_load_relaxed(&p->trace), e->sid);
        /* (1b) call_time, for processes with the call flag (as BEAM: the
         * call-traced processes are the ones measured); the frame's tdata
         * is the function that was current (a tail call in a chain that
         * already has a time frame for fn pushes none: bp_time_return
         * charges the current one). */
        if ((e->flags & BP_TIME_ACTIVE) && (h->sf & VM_TRACE_CALL) &&
            bp_time_call_sess(p, fn, e->time, e->sid, &h->tdata))
            h->want |= BP_TF_TIME;
        /* (2) the process's call trace: the spec reads e before any event. */
        if ((h->sf & VM_TRACE_CALL) && (e->flags & BP_CALL_TRACE))
            call_prep(p, fn, e, h);
        if (h->want || h->matched)
            nh++;
    }
    /* (3)-(4) per session: nothing reads g from here on. */
    bool hook = false;
    for (unsigned k = 0; k < nh; k++) {
        SessHit *h = &hits[k];
        uint32_t want = bp_frame_needed(p, fn, h->sid, h->want);
        if (h->report) {
            Term extra[2];
            for (unsigned j = 0; j < h->nextra; j++)
                extra[j] = vm_root_get(p, h->extra[j]);
            unsigned xf = h->xflags | ((want & BP_TF_RETURN) ? TR_F_RETURNS : 0);
            tr_vm_call(p, h->sid, fn, h->sf, extra, h->nextra, xf);
        }
        if (want && !bp_frame_push(p, want, h->sid, h->tdata)) {
            /* No frame will charge the call: back to the caller, for
             * this session and the ones not reached yet. */
            for (unsigned j = k; j < nh; j++)
                if (hits[j].want & BP_TF_TIME)
                    bp_time_return_sess(p, fn, hits[j].sid, hits[j].tdata);
            p->nroots = rbase;
            return false;
        }
        hook |= h->matched && h->sid == 0;
    }
    p->nroots = rbase;
    /* (5) the hook, last: it may suspend.  [HK1'] acquire, as above. */
    if (hook && vm_atomic_load_ptr_acquire(&p->vm->call_hook))
        run_call_hook(p, fn, global);
    return true;
}

/* Session sid's flags for p from its trace word pf, or from its table
 * tab when the word says several sessions (tab loaded by the caller). */
static inline unsigned sess_flags(uintptr_t pf, const VmTraceTab *tab, unsigned sid)
{
    uintptr_t w = tab ? vm_atomic_load_relaxed(&tab->w[vm_sid_slot(sid)]) : pf;
    return vm_trace_sid(w) == sid ? VM_TRACE_FLAGS(w) : 0;
}

/* One session's call event and trace frame of hit_multi_plain, by the
 * general emitter, which may suspend p; `more` holds what the sessions
 * after it need (copied from g before). */
typedef struct PlainHit {
    unsigned sid, sf;
    uint32_t tf;
} PlainHit;

static bool plain_report(Process *p, const FuncInfo *fn, const PlainHit *h, const Term *args,
                         bool fast)
{
    uint32_t want = h->tf;
    if (want)
        want = bp_frame_needed(p, fn, h->sid, want);
    unsigned xf = (want & BP_TF_RETURN) ? TR_F_RETURNS : 0;
    /* args: the register window, which neither a suspension nor a frame
     * push moves. */
    if (!fast || !tr_vm_call_fast(p, h->sid, fn, h->sf, xf, args))
        tr_vm_call(p, h->sid, fn, h->sf, NULL, 0, xf);
    return !want || bp_frame_push(p, want, h->sid, NULL);
}

/* hit_multi_plain's end once an event needs the general emitter: the
 * sessions from entry i on, copied from g before anything may suspend. */
static __attribute__((noinline)) bool plain_rest(Process *p, const BpGen *g, uint32_t i,
                                                 PlainHit first, const FuncInfo *fn,
                                                 uintptr_t pf, const VmTraceTab *tab,
                                                 const Term *args, bool *hook)
{
    PlainHit v[VM_SESSIONS_MAX];
    unsigned n = 0;
    v[n++] = first;
    const BpSess *entries = bp_gen_entries(g);
    for (; i < g->nsess; i++) {
        const BpSess *e = &entries[i];
        unsigned sf = (e->flags & BP_CALL_TRACE) ? sess_flags(pf, tab, e->sid) : 0;
        if (sf & VM_TRACE_CALL)
            v[n++] = (PlainHit){ e->sid, sf, e->call_tf };
    }
    for (unsigned k = 0; k < n; k++) {
        if (!plain_report(p, fn, &v[k], args, k > 0))
            return false;
        *hook |= v[k].sid == 0;
    }
    return true;
}

/*
 * Several sessions call-trace fn, each with a plain spec (BP_CALL_MULTI),
 * and nothing else is on it: each session whose flags for p ask for the
 * call gets its event and, if its spec asks, its trace frame, as
 * vm_hook_bp_hit's fast path does for one.  Events by the fast path never
 * suspend, so entries are read as it goes; the first that needs the
 * general emitter (which may suspend p) hands the rest to plain_rest,
 * which copies what they need from g first.  A process with return_to or
 * silent in any session goes to hit_multi (nothing done yet then).
 */
static __attribute__((noinline)) bool hit_multi_plain(Process *p, const BpGen *g, uint32_t fl,
                                                      const FuncInfo *fn, uintptr_t pf,
                                                      const Term *args)
{
    if (pf & (VM_TRACE_RETURN_TO | VM_TRACE_SILENT))
        return hit_multi(p, g, fl, (fl & BP_GLOBAL) != 0, fn);
    /* [TF1'] acquire: pairs with [TF1] (the table before the word). */
    const VmTraceTab *tab =
        vm_trace_sid(pf) == VM_SID_MULTI ? vm_atomic_load_ptr_acquire(&p->trace_tab) : NULL;
    bool hook = false;
    /* One clock read for every session's event: the same call, and a
     * read is a good part of an event's cost (a second session's event
     * costs less than the first). */
    const uint64_t now = tr_clock_ticks();
    /* The entries' bounds in locals: the emits store to memory, and the
     * compiler would reload them from g after each. */
    const BpSess *const first = bp_gen_entries(g), *const end = first + g->nsess;
    const BpSess *e = first;
    for (; e != end; e++) {
        if (!(e->flags & BP_CALL_TRACE))
            continue;
        PlainHit h = { e->sid, sess_flags(pf, tab, e->sid), e->call_tf };
        if (!(h.sf & VM_TRACE_CALL))
            continue;
        uint32_t want = h.tf;
        if (want)
            want = bp_frame_needed(p, fn, h.sid, want);
        unsigned xf = (want & BP_TF_RETURN) ? TR_F_RETURNS : 0;
        hook |= h.sid == 0;
        if (!tr_vm_call_fast_at(p, h.sid, fn, h.sf, xf, args, now)) {
            h.tf = want;
            if (!plain_rest(p, g, (uint32_t)(e - first) + 1, h, fn, pf, tab, args, &hook))
                return false;
            break;
        }
        if (want && !bp_frame_push(p, want, h.sid, NULL))
            return false;
    }
    /* [HK1'] acquire (also in run_call_hook); pairs with [HK1]. */
    if (hook && vm_atomic_load_ptr_acquire(&p->vm->call_hook))
        run_call_hook(p, fn, (fl & BP_GLOBAL) != 0);
    return true;
}

bool vm_hook_bp_hit(Process *p, const BpGen *g, uint32_t fl, const FuncInfo *fn, uintptr_t pf,
            const Term *args)
{
    /* The common case first: one session's plain call trace (no spec, or
     * a constant one that only asks for return_trace or exception_trace;
     * no meta, no call time, no return_to, not silent) for a process
     * traced by that session alone: an event, maybe a trace frame, and
     * the hook: what hit_slow would do, without running the spec (its
     * result is g->call_tf). */
    const unsigned sid = g->call_sid;
    if (VM_LIKELY(!(g->call_tf & BP_SPEC_RUN) && !(fl & (BP_ANY_PROCESS | BP_TIME_ACTIVE)) &&
                  (fl & BP_CALL_TRACE) &&
                  (pf & (VM_TRACE_CALL | VM_TRACE_RETURN_TO | VM_TRACE_SILENT)) ==
                      VM_TRACE_CALL &&
                  vm_trace_sid(pf) == sid)) {
        uint32_t want = g->call_tf;
        if (want)
            want = bp_frame_needed(p, fn, sid, want);
        unsigned xf = (want & BP_TF_RETURN) ? TR_F_RETURNS : 0;
        if (!tr_vm_call_fast(p, sid, fn, pf, xf, args))
            tr_vm_call(p, sid, fn, pf, NULL, 0, xf);
        /* The event may have suspended p (lossless): g is not read after it. */
        if (want && !bp_frame_push(p, want, sid, NULL))
            return false;
        /* [HK1'] acquire (also in run_call_hook); pairs with [HK1]. */
        if (vm_atomic_load_ptr_acquire(&p->vm->call_hook) && sid == 0)
            run_call_hook(p, fn, (fl & BP_GLOBAL) != 0);
        return true;
    }
    if ((fl & BP_CALL_MULTI) && !(fl & (BP_ANY_PROCESS | BP_TIME_ACTIVE)))
        return hit_multi_plain(p, g, fl, fn, pf, args);
    if (g->nsess == 1)
        return hit_one(p, bp_gen_entries(g), (fl & BP_GLOBAL) != 0, fn, pf);
    return hit_multi(p, g, fl, (fl & BP_GLOBAL) != 0, fn);
}
