/*
 * trace/tr_vm.h - the VM side of tracing: the events processes write into
 * their sessions' sinks (a session's pipeline, or messages to its tracer
 * process), and the pipelines' life cycle.  trace/tr_vm.c has the
 * publish/retire protocol, trace/tr_vm_sess.c says which sessions an
 * event goes to.
 *
 * Each emitter checks the process's flags itself (callers may check the
 * trace word first to stay cheap) and writes nothing for a session
 * without a sink.
 */
#ifndef TRACE_TR_VM_H
#define TRACE_TR_VM_H

#include <stddef.h>
#include <stdint.h>

#include "trace/tr.h"
#include "vm/module.h"
#include "vm/native.h"
#include "vm/hook.h"
#include "vm/process.h"

struct TrSession;
struct TrVm;
struct TrLimits;

/*
 * A call of `fn` by p, whose arguments are the first registers of p's top
 * frame (the breakpoint hit), for session `sid`; `tf` is p's trace flags
 * in that session.  `extra` terms follow the arguments in the payload:
 * the match spec's message (xflags TR_F_MESSAGE) and then the backtrace
 * (TR_F_BACKTRACE); TR_F_RETURNS says a return_from will follow.  On p's
 * own thread (trace/tr_vm_call.c, like the three below).
 */
void tr_vm_call(Process *p, unsigned sid, const FuncInfo *fn, uintptr_t tf, const Term *extra,
                unsigned nextra, unsigned xflags);

/* fn returned `value` to its caller (a return_trace frame of session sid). */
void tr_vm_return_from(Process *p, unsigned sid, const FuncInfo *fn, Term value, uintptr_t tf);

/* An exception {cls, reason} passed fn's exception_trace frame. */
void tr_vm_exception_from(Process *p, unsigned sid, const FuncInfo *fn, Term cls, Term reason,
                          uintptr_t tf);

/* Execution returned into fn (a return_to frame, or a catch in fn);
 * fn NULL: to the bottom of the process ({M,F,A} is undefined). */
void tr_vm_return_to(Process *p, unsigned sid, const FuncInfo *fn, uintptr_t tf);

/*
 * Writes ev for p into session sid's sink: its gate (limits) first, then
 * its pipeline (by p's ring; the lossless policy may suspend p) or a
 * message to its tracer.  Nothing when sid is not the live incarnation
 * of its slot.  p's thread, online (trace/tr_vm_sess.c).
 */
TrStatus tr_sess_emit(Process *p, unsigned sid, const TrEmit *ev);

/*
 * Writes ev for p into every session whose flags for p include one of
 * `want` (pf: p's trace word as the caller loaded it); ev->flags gets
 * each session's timestamp flag.  The same thread rules.
 */
void tr_emit_flagged(Process *p, uintptr_t pf, unsigned want, TrEmit *ev);

/* Spawn and exit events: vm_hook_spawn and vm_hook_exit (vm/hook.h,
 * defined in tr_vm_sess.c); running, send and receive:
 * vm_hook_sched_in/out/start/exit, vm_hook_send and vm_hook_receive
 * (tr_vm_proc.c). */

/* ---- process trace flags per session (trace/tr_flags.c) ---- */

/* Whether `flags` are all known VM_TRACE_* bits. */
bool tr_flags_valid(unsigned flags);
/* The TVM_TRACE_* bit named name[0..n) (every bit for "all"), 0 if
 * none. */
unsigned tr_flag_bit(const char *name, size_t n);
/* The pid of a {tracer, Pid} term (erlang:trace/3's and a match spec's
 * trace lists), 0 for anything else. */
uint64_t tr_tracer_of(Term t);

/* Session sid's flags for p, given p's trace word pf (its table when
 * several sessions trace p).  Any thread. */
unsigned tr_pflags(const Process *p, uintptr_t pf, unsigned sid);

/* The same, inline for the common case: the word names the session. */
static inline unsigned tr_pflags_of(const Process *p, uintptr_t pf, unsigned sid)
{
    return VM_LIKELY(vm_trace_sid(pf) == sid) ? VM_TRACE_FLAGS(pf) : tr_pflags(p, pf, sid);
}

/*
 * Sets (on) or clears `flags` of session sid on p: false when sid is not
 * live (nothing changes), unless `force` (a stop clearing what its
 * session left).  Any thread.
 */
bool tr_pflags_change(Process *p, unsigned sid, unsigned flags, bool on, bool force);

/*
 * parent, whose flags include VM_TRACE_SOS or VM_TRACE_SOS1 in some
 * session, or VM_TRACE_SOL or VM_TRACE_SOL1 and `link`, spawned child
 * (vm_hook_spawn: child is in the process table and runs only after
 * this returns; `link`: by spawn_link).  In each such session, child
 * gets parent's flags on top of the defaults it got at spawn (with
 * parent's own tracer in the default session); with SOS1, without SOS1
 * and SOS, which parent loses; then, for a link, with SOL or SOL1 parent's
 * flags as they are now once more, and with SOL1 both lose SOL1 and SOL.
 * Parent's flags are read and cleared in one critical section of its
 * lock, and child's flags change as any change does (tr_pflags_change):
 * another thread's change of either comes wholly before or after.  On
 * parent's thread.
 */
void tr_flags_inherit(Process *parent, uint64_t child, bool link);

/*
 * The trace flag changes a match spec's body asked for ({enable_trace,
 * F}, {trace, Pid, Disable, Enable}, ...: res->trace, TR_MS_TRACE), made
 * in session sid for p (the caller, whose call ran the spec) and the
 * other processes it names, each as tr_pflags_change makes a change (a
 * process that has exited is skipped).  On p's thread, once the call's
 * own event has the flags the call found.
 */
struct TrMsResult;
void tr_flags_from_ms(Process *p, unsigned sid, const struct TrMsResult *res);

/* Whether pid is a live process of the VM (a snapshot: it may exit
 * before the caller acts); a match spec run's look at another process
 * (TrMsCtx.alive, data the tvm_vm).  Any thread. */
bool tr_ms_alive(void *vm, uint64_t pid);

/*
 * erlang:trace(Pid, How, [... {tracer, T}]) in the default session: on
 * sets `flags` with T as p's own tracer (its events go to T as messages:
 * VM_TRACE_TRACER); false when p has another tracer that is alive (one
 * tracer per process, as BEAM).  Off clears `flags`, and the tracer with
 * the last of them.  Any thread.
 */
bool tr_pflags_own_tracer(Process *p, uint64_t tracer, unsigned flags, bool on);

/*
 * tvm_trace_flags_all for session sid (trace/tr_flags_all.c): the default
 * of new processes and a new generation of flags for all existing
 * processes, then (for existing processes) a thread-progress wait, after
 * which every process runs and is seen with the change.  Returns the
 * number of live processes (0 for TVM_TRACE_NEW alone), or -1 when sid is
 * not live (unless `force`: a stop clearing what its session left).  Any
 * thread; a calling process is suspended during the wait.
 */
int tr_flags_all(tvm_vm *vm, unsigned sid, tvm_trace_scope scope, unsigned flags, bool on,
                 bool force);

/* The same without the wait, for a caller that waits for thread progress
 * itself before it relies on the change (a session's stop). */
int tr_flags_all_publish(tvm_vm *vm, unsigned sid, tvm_trace_scope scope, unsigned flags,
                         bool on, bool force);

/* p's trace word with every change for all folded in: for a thread that
 * looks at another process's flags (trace_info).  Any thread. */
uintptr_t tr_pword(Process *p);

/* [Flag] atoms of `flags`, in the order tvm_trace_flags_parse names
 * them, on p's heap. */
Term tr_flags_term(Process *p, unsigned flags);

/* Session sid's flags for new processes. */
unsigned tr_flags_new(tvm_vm *vm, unsigned sid);

/* The process pid (a reference: vm_proc_put it), or NULL if there is
 * none or it is exiting or exited (a snapshot: it may exit right after). */
Process *tr_proc_get(tvm_vm *vm, uint64_t pid);

/* The trace layer's natives: erlang:trace/3 and erlang:trace/4,
 * trace:process/4 (trace/tr_bif.c). */
VmNativeTable tr_natives(void);

/* ---- pipelines (trace/tr_vm.c) ---- */

/* Checks the options that do not depend on the VM; false with a reason. */
bool tr_options_check(const tvm_trace_options *o, char *why, size_t n);
/* The limits in o. */
void tr_limits_of(const tvm_trace_options *o, struct TrLimits *lim);

/* Starts session s's pipeline as o says and publishes it ([TP1],
 * tr_vm_publish); the permission held (or s not published yet).  A status
 * and a reason on failure (TVM_ERR_LIMIT: the OS refused the collector
 * thread), with nothing left: no thread, no open output, no memory. */
tvm_status tr_vm_start(tvm_vm *vm, struct TrSession *s, const tvm_trace_options *o, char *why,
                       size_t n);
/* Step (1) of a stop: s's ring pointers only (the fast path ends), or
 * the ring pointers and `out` (returns the pipeline, NULL if none).
 * Then a grace period, then tr_vm_free. */
void tr_vm_unpublish_rings(tvm_vm *vm, struct TrSession *s);
struct TrVm *tr_vm_unpublish(tvm_vm *vm, struct TrSession *s);
/* Step (3): drains, finishes the output, adds its counts to its session.
 * False when the session's output failed (a full disk, a pipe without a
 * reader; its record says why: TrSession.fail, trace/tr_outfail.h): what
 * the sink wrote from then on may be lost. */
bool tr_vm_free(tvm_vm *vm, struct TrVm *t);
/* A flush of s's pipeline in two steps: tr_vm_flush_begin, under the
 * code permission (which keeps s's pipeline from being freed), holds it
 * and returns it (NULL: none runs); tr_vm_flush_end, after the
 * permission is released (a trace callback the collector runs meanwhile
 * may take it: a flush that held it deadlocked), waits until every event
 * written so far reached the sink and lets it go.  Not from a scheduler
 * thread. */
struct TrPipeline *tr_vm_flush_begin(tvm_vm *vm, struct TrSession *s);
void tr_vm_flush_end(struct TrPipeline *tp);

/* The trace layer's set-up and end (api/root.c): the sessions' table;
 * tvm_destroy stops every pipeline still running (before the schedulers
 * stop), then frees the table. */
void tr_vm_init(tvm_vm *vm);
void tr_vm_destroy(tvm_vm *vm);
void tr_vm_release(tvm_vm *vm);

#endif /* TRACE_TR_VM_H */
