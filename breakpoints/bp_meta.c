/*
 * breakpoints/bp_meta.c - meta trace messages (see bp_meta.h).  The
 * messages are built on the calling process's heap and sent with
 * vm_send, which copies them into the tracer's queue; nothing here keeps a
 * breakpoint record across anything that may suspend (nothing does).
 */
#include "breakpoints/bp_meta.h"

#include "breakpoints/bp_frame.h"
#include "breakpoints/bp_hit.h"
#include "vm/breakpoint.h"
#include "trace/tr_clock.h"
#include "trace/tr_vm.h"
#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/lend.h"
#include "vm/sched.h"

static Term pid_term(const Process *p)
{
    return p->pid ? make_pid(p->pid) : make_atom(ATOM_UNDEFINED);
}

/* {trace_ts, Pid, Kind, What, [X,] Ts} from rooted parts; sends it. */
static void send_event(Process *p, uint64_t tracer, Atom kind, Term *parts, unsigned nparts)
{
    Term e[6] = { make_atom(ATOM_TRACE_TS), pid_term(p), make_atom(kind) };
    unsigned n = 3;
    for (unsigned i = 0; i < nparts; i++)
        e[n++] = parts[i];
    e[n++] = make_small((int64_t)tr_mono_ns());
    /* A message over max_message_words (an argument with much sharing)
     * is not sent: the VM's own messages raise nothing in the sender.  A
     * long one (a call's long argument) lends p's queue while it is
     * copied (vm/lend.h). */
    Term msg = vm_make_tuple(p, n, e);
    bool lent = vm_lend_if_big(p, msg);
    vm_send(p->vm, NULL, tracer, msg);
    vm_lend_done(p, lent);
}

static Term mfa_tuple(Process *p, const FuncInfo *fn)
{
    Term e[3] = { make_atom(fn->mod), make_atom(fn->name), make_small(fn->arity) };
    return vm_make_tuple(p, 3, e);
}

uint32_t bp_meta_call(Process *p, const FuncInfo *fn, unsigned sid, const TrMs *ms,
                      uint64_t tracer)
{
    uint32_t base = p->frames[p->nframes - 1].base;
    uint32_t rbase = p->nroots;
    TrMsResult res;
    tr_ms_result_clear(&res);
    if (ms) {
        TrMsCtx ctx;
        bp_ms_ctx(p, ms, sid, tr_pflags_of(p, vm_atomic_load_relaxed(&p->trace), sid), &ctx);
        if (!tr_ms_run_heap(ms, p, &p->stack[base], fn->arity, &ctx, bp_scratch(), &res))
            return 0;
        /* A meta spec's changes of trace flags are the process's flags in
         * the meta pattern's session. */
        if (res.flags & TR_MS_TRACE)
            tr_flags_from_ms(p, sid, &res);
    }
    uint32_t tf = 0;
    if (res.flags & TR_MS_RETURN_TRACE)
        tf |= BP_TF_META_RETURN;
    if (res.flags & TR_MS_EXCEPTION_TRACE)
        tf |= BP_TF_META_RETURN | BP_TF_META_EXCEPTION;
    if (res.message == TR_MS_MSG_OFF)
        return tf;
    tvm_term msg = vm_root_push(p, res.message == TR_MS_MSG_TERM ? res.msg : TERM_NIL);
    Term parts[2];
    parts[0] = bp_args_tuple(p, fn, base);
    unsigned n = 1;
    if (res.message == TR_MS_MSG_TERM)
        parts[n++] = vm_root_get(p, msg);
    send_event(p, tracer, ATOM_CALL, parts, n);
    p->nroots = rbase;
    return tf;
}

/* fn's meta tracer in session sid now, or 0 (read through its local
 * record's active generation: online, nothing kept). */
static uint64_t current_tracer(const Process *p, const FuncInfo *fn, unsigned sid)
{
    const BpRecord *r = vm_atomic_load_ptr_relaxed(&fn->bp);
    if (!r)
        return 0;
    const BpGen *g = &r->gen[vm_atomic_load_relaxed(&p->vm->bp_ix)];
    const BpSess *e = bp_gen_sess(g, vm_sid_slot(sid));
    return e && e->sid == sid && (e->flags & BP_META) ? e->meta_tracer : 0;
}

void bp_meta_return(Process *p, const FuncInfo *fn, unsigned sid, uint32_t base)
{
    uint64_t tracer = current_tracer(p, fn, sid);
    if (!tracer)
        return;
    uint32_t rbase = p->nroots;
    tvm_term v = vm_root_push(p, p->stack[base]);
    Term parts[2];
    parts[0] = mfa_tuple(p, fn);   /* may collect: the value is read after */
    parts[1] = vm_root_get(p, v);
    send_event(p, tracer, ATOM_RETURN_FROM, parts, 2);
    p->nroots = rbase;
}

void bp_meta_exception(Process *p, const FuncInfo *fn, unsigned sid, Term cls, Term reason)
{
    uint64_t tracer = current_tracer(p, fn, sid);
    if (!tracer)
        return;
    Term cr[2] = { cls, reason };
    Term parts[2];
    parts[1] = vm_make_tuple(p, 2, cr);
    tvm_term h = vm_root_push(p, parts[1]);
    parts[0] = mfa_tuple(p, fn);
    parts[1] = vm_root_get(p, h);
    send_event(p, tracer, ATOM_EXCEPTION_FROM, parts, 2);
    p->nroots = h.h;
}
