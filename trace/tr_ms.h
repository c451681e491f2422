/*
 * trace/tr_ms.h - match specifications (BEAM's shape): compile once, run
 * many times concurrently against a call's arguments.
 *
 * A spec is a term, a proper list of clauses {Head, Guards, Body}; the
 * first clause whose head matches the arguments and whose guards are all
 * `true` wins, and its body says what to do (docs/tracing.md, "Match
 * specs", has the language).  trace_pattern compiles one per call and
 * the breakpoint engine holds it in BpGen.match_spec / meta_spec; the hit
 * runs it (breakpoints/bp_hit.c, bp_meta.c).
 *
 * Life cycle and threads:
 *   - tr_ms_compile runs under the code-modification permission (or any
 *     single thread); it allocates.  On error it returns NULL, fills `err`
 *     with "match spec clause N: <where>: <what>" and allocates nothing.
 *   - The compiled TrMs is immutable: any number of threads may run it at
 *     once (tr_ms_run) with no lock, no allocation and no write to it.
 *     Runs read only the program, the argument terms, the context and the
 *     caller's scratch.
 *   - It carries a reference count for sharing between the two breakpoint
 *     generations: tr_ms_compile returns one reference, tr_ms_retain adds
 *     one, tr_ms_free drops one and frees the spec with the last.  Runs
 *     never touch the count; the engine drops the last reference only
 *     after a thread-progress wait that follows the unpublishing of the
 *     pointer, so no run can still be reading it.
 *
 * Limits (checked at compile time; a spec that exceeds one is rejected,
 * so a run cannot overflow its scratch or stacks):
 *   TR_MS_MAX_CLAUSES       clauses in a spec
 *   TR_MS_MAX_CODE          program words in a spec
 *   TR_MS_MAX_SOURCE_WORDS  heap words of the spec term (its copy)
 *   TR_MS_MAX_DEPTH         nesting of the spec term (and of patterns and
 *                           expressions, which are parts of it)
 *   TR_MS_MAX_VARS          distinct '$N' variables in a clause
 *   TR_MS_MAX_STACK         values an expression holds at once
 *   TR_MS_SCRATCH_WORDS     words a clause builds (tuples, lists, '$_',
 *                           '$$', {caller}, {caller_line},
 *                           {current_stacktrace}); '$_' counts 2 words per
 *                           argument, VM_MAX_ARITY arguments when the
 *                           arity is not known at compile time
 *   TR_MS_MAX_DISPLAY       {display, X} actions in a clause
 * and at run time:
 *   TR_MS_MAX_STEPS         term cells one run may visit comparing terms,
 *                           computing length/1 and building '$_'; past it
 *                           the operation raises (a guard is false, a
 *                           body expression gives 'EXIT', a repeated head
 *                           variable does not match)
 *   TR_MS_CMP_DEPTH         tuple/list-head nesting a comparison follows
 *                           (list tails cost no depth); deeper raises
 * So a run takes time linear in program size plus TR_MS_MAX_STEPS, and
 * fixed stack (no recursion).
 */
#ifndef TRACE_TR_MS_H
#define TRACE_TR_MS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/process.h"
#include "vm/term.h"

#define TR_MS_MAX_CLAUSES 256
#define TR_MS_MAX_CODE (64 * 1024)
#define TR_MS_MAX_SOURCE_WORDS (64 * 1024)
#define TR_MS_MAX_DEPTH 64
#define TR_MS_MAX_VARS 64
#define TR_MS_MAX_STACK 128
#define TR_MS_SCRATCH_WORDS 1024
#define TR_MS_MAX_DISPLAY 4
#define TR_MS_MAX_STEPS (1u << 20)
#define TR_MS_CMP_DEPTH 128

/* The largest variable number, as in BEAM ('$0' .. '$100000000'). */
#define TR_MS_MAX_VAR_NUMBER 100000000

typedef struct TrMs TrMs;

/* Result flags: which actions the matching clause's body performed. */
enum {
    TR_MS_RETURN_TRACE = 1u << 0,    /* {return_trace} */
    TR_MS_EXCEPTION_TRACE = 1u << 1, /* {exception_trace} */
    TR_MS_CALLER = 1u << 2,          /* {caller} was evaluated */
    TR_MS_SILENT_ON = 1u << 3,       /* {silent, true} (the last silent/1 wins) */
    TR_MS_SILENT_OFF = 1u << 4,      /* {silent, false} */
    TR_MS_DISPLAY = 1u << 5,         /* {display, X}: see display[] */
    TR_MS_BACKTRACE = 1u << 6,       /* {backtrace} */
    TR_MS_TRACE = 1u << 7,           /* enable_trace, disable_trace or trace: see trace[] */
};

/*
 * One process's trace flag changes asked for by a run's body
 * ({enable_trace, F}, {disable_trace, Pid, F}, {trace, Disable, Enable},
 * ...), in the session whose spec ran: `off` cleared, then `on` set
 * (disjoint: a later action on the same flag takes it out of the other
 * mask, so the two are what the actions in order leave).  Recorded, not
 * applied: the caller applies them (tr_flags_from_ms) once the call's
 * own event has the flags the call found, as BEAM reports the call that
 * disabled its own call trace.
 */
#define TR_MS_MAX_TRACE 4
typedef struct TrMsTrace {
    uint64_t pid;            /* the process; 0: the calling process */
    unsigned on, off;        /* VM_TRACE_* bits */
    unsigned flags;          /* the caller's: its flags as the actions so far leave
                                them (another process's are not known: unused) */
    uint64_t tracer;         /* {tracer, Pid} in trace's lists: the process's own
                                tracer from now on (0: none named) */
} TrMsTrace;

/* What the call event should carry (the last {message, X} wins). */
typedef enum TrMsMessage {
    TR_MS_MSG_DEFAULT = 0,  /* no message action, or {message, true} */
    TR_MS_MSG_OFF,          /* {message, false}: no call event */
    TR_MS_MSG_TERM,         /* {message, X}: X appended to the event */
} TrMsMessage;

typedef struct TrMsResult {
    unsigned flags;          /* TR_MS_* above */
    TrMsMessage message;
    Term msg;                /* TR_MS_MSG_TERM: the term X */
    unsigned ndisplay;       /* {display, X} terms, in evaluation order */
    Term display[TR_MS_MAX_DISPLAY];
    unsigned ntrace;         /* TR_MS_TRACE: the processes whose flags change */
    TrMsTrace trace[TR_MS_MAX_TRACE];
} TrMsResult;

/*
 * An empty result: no flags, the default message, no display and no
 * trace changes.  The arrays are read only up to their counts, so they
 * are left as they are: a run sets five fields instead of zeroing the
 * whole result (about 170 bytes since the trace changes came in).
 */
static inline void tr_ms_result_clear(TrMsResult *res)
{
    res->flags = 0;
    res->message = TR_MS_MSG_DEFAULT;
    res->msg = 0;
    res->ndisplay = 0;
    res->ntrace = 0;
}

/*
 * What a run may need to know about the call besides its arguments.
 * Fill only what tr_ms_needs() asks for; the rest may stay zero.
 */
/*
 * {current_stacktrace} gives at most TR_MS_STACK_DEPTH frames: BEAM's
 * default backtrace_depth (its system flag raises it there; tracevm has
 * no such flag).  One frame of the calling process's stack, callers
 * only (the traced function itself is not one: BEAM's stack starts at
 * the function that made the call), as its run reads it.
 */
#define TR_MS_STACK_DEPTH 8

typedef struct TrMsFrame {
    Atom mod, fun;
    unsigned arity;
    const char *file;        /* NULL: none (a native) */
    uint32_t line;           /* of the call made there; 0: unknown */
} TrMsFrame;

typedef struct TrMsCtx {
    Term self;               /* {self}: the calling process's pid term; 0 = undefined */
    bool caller_known;       /* {caller}: {mod, fun, arity} of the function returned to */
    Atom caller_mod, caller_fun;
    unsigned caller_arity;
    /* {caller_line}: the caller's source file (NULL: unknown) and the
     * line of the call in it (0: unknown). */
    const char *caller_file;
    uint32_t caller_line;
    /* {current_stacktrace}: the callers, innermost first (TR_MS_NEED_STACK;
     * nstack 0 without a process).  Read during the run only. */
    const TrMsFrame *stack;
    unsigned nstack;
    /* TR_MS_NEED_FLAGS: the calling process's trace flags in the session
     * whose spec runs (VM_TRACE_* bits), for {trace, D, E}'s answer. */
    unsigned flags;
    /* Whether {trace, D, E} may name {tracer, Pid}: in the default
     * session only, as erlang:trace/3 (a session's tracer is fixed). */
    bool tracer_ok;
    /* Whether another process named by {enable_trace, Pid, F} and the
     * others with a pid is live: when not, the action is a failure, as in
     * BEAM.  NULL: no process is looked up (a run without a VM). */
    bool (*alive)(void *data, uint64_t pid);
    void *alive_data;
} TrMsCtx;

/* {caller_line} gives at most this many bytes of the file name. */
#define TR_MS_FILE_MAX 255

enum {
    TR_MS_NEED_CALLER = 1u << 0,   /* the spec uses {caller} or {caller_line} */
    TR_MS_NEED_SELF = 1u << 1,     /* the spec uses {self} */
    TR_MS_NEED_FLAGS = 1u << 2,    /* the spec changes trace flags: TrMsCtx.flags */
    TR_MS_NEED_STACK = 1u << 3,    /* the spec uses {current_stacktrace}: TrMsCtx.stack */
};

/*
 * A run's working memory: the terms it builds, its variables and stacks.
 * Fields are private.  About 13 KiB: a scheduler keeps one per thread (a
 * caller with room may use its own stack).  The terms of a TrMsResult
 * point into `heap` (and into the spec and the arguments) until the next
 * run with the same scratch.
 */
typedef struct TrMsCmpFrame {
    const Term *a, *b;
    uint32_t i, n;
} TrMsCmpFrame;

typedef struct TrMsScratch {
    Term heap[TR_MS_SCRATCH_WORDS];
    Term vars[TR_MS_MAX_VARS];
    Term stack[TR_MS_MAX_STACK];
    Term mstack[TR_MS_MAX_DEPTH + 1];
    TrMsCmpFrame cmp[TR_MS_CMP_DEPTH];
} TrMsScratch;

/*
 * Compiles `spec` for a function of `arity` arguments (-1 when not known:
 * heads are then checked against each call's arity at run time).  The
 * spec term is copied (tr_ms_source gives it back); `spec` may be freed
 * or collected afterwards.  Returns NULL on error with a message in err
 * (always NUL-terminated when errsize > 0).  Allocates; any one thread.
 */
TrMs *tr_ms_compile(Term spec, int arity, char *err, size_t errsize);

/* Adds a reference (engine only, e.g. under the permission). */
void tr_ms_retain(TrMs *ms);

/* Drops a reference; the last one frees the spec.  NULL is ignored.
 * The caller guarantees no run still reads it (see above). */
void tr_ms_free(TrMs *ms);

/* TR_MS_NEED_* bits: which TrMsCtx fields the runs read. */
unsigned tr_ms_needs(const TrMs *ms);

/*
 * Whether every run of ms matches with no effect but {return_trace} and
 * {exception_trace} (a constant spec such as [{'_',[],[{return_trace}]}],
 * with no message, silent, display or backtrace action): then *flags gets
 * the TR_MS_RETURN_TRACE / TR_MS_EXCEPTION_TRACE bits of every run, and a
 * caller may skip the run (breakpoints cache this per generation).
 */
bool tr_ms_plain(const TrMs *ms, unsigned *flags);

/*
 * Runs the spec against the call's `arity` arguments.  Returns true when a
 * clause matched, with what its body did in *res; false (and *res cleared)
 * when none did.  A call whose arity differs from a head's does not match
 * that clause.  No allocation, no lock, no write outside *scratch and
 * *res; any number of threads at once on one spec (each with its own
 * scratch).  Result terms: see TrMsScratch.
 */
bool tr_ms_run(const TrMs *ms, const Term *args, unsigned arity, const TrMsCtx *ctx,
               TrMsScratch *scratch, TrMsResult *res);

/*
 * tr_ms_run, then copies the result's terms onto p's heap so that they
 * outlive the scratch.  `args` must be p's roots or be updated by a
 * collection of p (e.g. registers of p's stack): the copy may collect,
 * and then the spec is run again on the moved arguments (a run is
 * deterministic).  A result term over the VM's max_message_words (an
 * argument with much sharing, counted flat) is replaced by the atom '...'.
 * On p's own thread.
 */
bool tr_ms_run_heap(const TrMs *ms, Process *p, const Term *args, unsigned arity,
                    const TrMsCtx *ctx, TrMsScratch *scratch, TrMsResult *res);

/* The spec's source term (its own copy, alive as long as the spec); for
 * trace_info(MFA, match_spec), copy it to a heap with vm_copy_term. */
Term tr_ms_source(const TrMs *ms);

/* The source term printed in Erlang syntax into buf (NUL-terminated,
 * truncated); returns the length it needed. */
size_t tr_ms_format(const TrMs *ms, char *buf, size_t size);

#endif /* TRACE_TR_MS_H */
