/*
 * breakpoints/bp_meta.h - meta trace: a tracer per pattern.  A function
 * traced with TVM_TP_META reports every call, by every process whatever
 * its trace flags, as a message to the pattern's tracer process (BEAM's
 * {meta, Tracer}), always with a timestamp:
 *   {trace_ts, Pid, call, {M, F, Args}, Ts}            ({..., Msg, Ts} with {message, Msg})
 *   {trace_ts, Pid, return_from, {M, F, A}, Value, Ts} ({return_trace} in the meta spec)
 *   {trace_ts, Pid, exception_from, {M, F, A}, {Class, Reason}, Ts}
 * Pid is 'undefined' for a call context; Ts is CLOCK_MONOTONIC ns.  A
 * message to a tracer that has exited is dropped, like any message.  All
 * on the calling process's thread, online (breakpoints/bp_frame.c).
 */
#ifndef BREAKPOINTS_BP_META_H
#define BREAKPOINTS_BP_META_H

#include <stdint.h>

#include "trace/tr_ms.h"
#include "vm/process.h"

/*
 * The top activation of p (function fn, just entered) hit a meta
 * breakpoint of session sid with spec `ms` (NULL: every call) and tracer
 * pid `tracer`.  Sends the call message if the spec matches (and makes
 * the spec's changes of trace flags in sid); returns the BP_TF_META_*
 * flags its return_trace / exception_trace actions ask for.  May collect.
 */
uint32_t bp_meta_call(Process *p, const FuncInfo *fn, unsigned sid, const TrMs *ms,
                      uint64_t tracer);

/* fn's meta trace frame of session sid (window at `base`, value in r0)
 * is returned through: return_from to fn's current meta tracer in that
 * session, if it still has one. */
void bp_meta_return(Process *p, const FuncInfo *fn, unsigned sid, uint32_t base);

/* An exception passed fn's meta exception_trace frame of session sid. */
void bp_meta_exception(Process *p, const FuncInfo *fn, unsigned sid, Term cls, Term reason);

#endif /* BREAKPOINTS_BP_META_H */
