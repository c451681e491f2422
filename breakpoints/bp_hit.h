/*
 * breakpoints/bp_hit.h - what a breakpoint hit does beyond counting:
 * the process's call trace (match spec, call event, hook), meta trace and
 * the trace frame that reports the return (breakpoints/bp_hit.c).  And
 * the pieces bp_meta.c shares.
 */
#ifndef BREAKPOINTS_BP_HIT_H
#define BREAKPOINTS_BP_HIT_H

#include "vm/breakpoint.h"
#include "trace/tr_ms.h"
#include "trace/tr_vm.h"
#include "vm/process.h"

/* This thread's match-spec working memory (a run never suspends, so one
 * per thread is enough; its results die with the next run). */
TrMsScratch *bp_scratch(void);

/* The context a run of `ms` needs for p's top activation, in session
 * sid where p has `flags`. */
void bp_ms_ctx(const Process *p, const TrMs *ms, unsigned sid, unsigned flags, TrMsCtx *ctx);

/* {M, F, [Args]} of fn with the arguments in p->stack[base ...], on p's heap. */
Term bp_args_tuple(Process *p, const FuncInfo *fn, uint32_t base);

#endif /* BREAKPOINTS_BP_HIT_H */
