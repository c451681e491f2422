/*
 * breakpoints/bp_frame.h - trace frames: how a traced call's return and
 * exceptions are reported (return_trace, exception_trace, return_to, the
 * meta tracer's returns, call_time).  breakpoints/bp_frame.c has the
 * design; vm/interp.c calls these at the three places frames end: the
 * RETURN_TRACE instruction, and the exception unwinding.
 *
 * All functions run on the process's own thread, while it is an online
 * reader (between two quiescent states), like the breakpoint hit.
 */
#ifndef BREAKPOINTS_BP_FRAME_H
#define BREAKPOINTS_BP_FRAME_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/hook.h"
#include "vm/process.h"

/* What a trace frame reports (Frame.kind >> BP_TF_SHIFT). */
enum {
    BP_TF_RETURN = 1u << 0,          /* return_from to the trace output */
    BP_TF_EXCEPTION = 1u << 1,       /* exception_from to the trace output */
    BP_TF_RETURN_TO = 1u << 2,       /* return_to: the function returned into */
    BP_TF_META_RETURN = 1u << 3,     /* return_from to the meta tracer */
    BP_TF_META_EXCEPTION = 1u << 4,  /* exception_from to the meta tracer */
    BP_TF_TIME = 1u << 5,            /* call_time: charge the function's time */
};

#define BP_TF_SHIFT 8u
/* The session a trace frame reports to (its sid, vm/traceword.h). */
#define BP_TF_SID_SHIFT 16u

/* Where a trace frame resumes: one RETURN_TRACE instruction. */
extern const Instr bp_return_trace_code[1];

/* A trace frame's BP_TF_* flags, and whether a frame is a trace frame. */
static inline uint32_t bp_frame_tflags(const Frame *f)
{
    return (f->kind >> BP_TF_SHIFT) & 0xffu;
}

static inline bool bp_frame_is_trace(const Frame *f)
{
    return FRAME_KIND(f->kind) == FRAME_TRACE;
}

/* The session a trace frame belongs to: what it reports goes there, with
 * that session's flags for the process. */
static inline unsigned bp_frame_sid(const Frame *f)
{
    return f->kind >> BP_TF_SID_SHIFT;
}

/*
 * Which of `want` a trace frame of session sid for the top activation
 * (function `fn`, just entered) must still carry: all of them, except
 * those a trace frame of the same session in the same tail-call chain
 * already carries for `fn`, and return_to when the chain already reports
 * one to that session (see bp_frame.c: traced tail loops stay bounded).
 * Inline: the breakpoint hit's fast path.
 */
static inline uint32_t bp_frame_needed(const Process *p, const FuncInfo *fn, unsigned sid,
                                       uint32_t want)
{
    /* The chain: trace frames directly below the top activation. */
    for (const Frame *t = &p->frames[p->nframes - 1]; t-- != p->frames && bp_frame_is_trace(t);) {
        if (bp_frame_sid(t) != sid)
            continue;
        if (t->fn == fn)
            want &= ~bp_frame_tflags(t);
        if (bp_frame_tflags(t) & BP_TF_RETURN_TO)
            want &= ~(uint32_t)BP_TF_RETURN_TO;
    }
    return want;
}

/*
 * Pushes a trace frame of session sid carrying `tflags` (non-zero, from
 * bp_frame_needed) and `tdata` below p's top frame.  False when the frame
 * stack is at its limit (the caller raises system_limit); nothing changed
 * then.  Inline: the breakpoint hit's fast path.
 */
static inline bool bp_frame_push(Process *p, uint32_t tflags, unsigned sid, void *tdata)
{
    if (p->nframes == p->frames_cap && !vm_frames_ensure(p, p->nframes + 1))
        return false;
    Frame *a = &p->frames[p->nframes - 1];
    /* The activation moves up (field by field: a call frame's union
     * holds nothing), returning into the trace frame's r0; its pc stays
     * what the hit saved, for a stack listing while the hook runs. */
    a[1].fn = a->fn;
    a[1].base = a->base;
    a[1].ret_reg = 0;
    a[1].hbase = a->hbase;
    a[1].kind = a->kind;
    a[1].pc = a->pc;
    a[1].tdata = NULL;
    a->pc = bp_return_trace_code;
    a->kind = FRAME_TRACE | (tflags << BP_TF_SHIFT) | ((uint32_t)sid << BP_TF_SID_SHIFT);
    a->tdata = tdata;
    p->nframes++;
    p->ntrace++;
    return true;
}

/*
 * The frame of the function the top activation will return to: the
 * nearest call frame below it, trace frames skipped, a native's
 * activation crossed to the native, erlang:apply crossed to its caller
 * (BEAM's apply has no frame).  Its pc is where it resumes, just after
 * the call.  NULL when there is none (the bottom of the process).
 */
const Frame *bp_frame_caller(const Process *p);

/* The frame of the function that f's function will return to, found the
 * same way: walking from bp_frame_caller(p) gives the callers one by one
 * ({current_stacktrace}).  NULL at the bottom. */
const Frame *bp_frame_caller_of(const Process *p, const Frame *f);

/* RETURN_TRACE and the exception unwinding call vm_hook_trace_return and
 * vm_hook_trace_unwind (declared in vm/hook.h, defined in bp_frame.c). */

#endif /* BREAKPOINTS_BP_FRAME_H */
