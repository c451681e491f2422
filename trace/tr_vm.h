/*
 * trace/tr_vm.h - the VM side of tracing: the events processes write into
 * the VM's trace pipeline (tvm_trace_start in include/tracevm.h), and the
 * pipeline's end with the VM.  trace/tr_vm.c has the protocol.
 *
 * Each emitter checks the process's flag itself (callers may check it
 * first to stay cheap) and writes nothing while no pipeline runs.
 */
#ifndef TRACE_TR_VM_H
#define TRACE_TR_VM_H

#include <stddef.h>
#include <stdint.h>

#include "vm/module.h"
#include "vm/process.h"

/*
 * A call of `fn` by p, whose arguments are the first registers of p's top
 * frame (the breakpoint hit); `tf` is p's trace flags as the caller read
 * them.  `extra` terms follow the arguments in the payload: the match
 * spec's message (xflags TR_F_MESSAGE) and then the backtrace
 * (TR_F_BACKTRACE); TR_F_RETURNS says a return_from will follow.  On p's
 * own thread (trace/tr_vm_call.c, like the three below).
 */
void tr_vm_call(Process *p, const FuncInfo *fn, uintptr_t tf, const Term *extra,
                unsigned nextra, unsigned xflags);

/* fn returned `value` to its caller (a return_trace frame). */
void tr_vm_return_from(Process *p, const FuncInfo *fn, Term value, uintptr_t tf);

/* An exception {cls, reason} passed fn's exception_trace frame. */
void tr_vm_exception_from(Process *p, const FuncInfo *fn, Term cls, Term reason,
                          uintptr_t tf);

/* Execution returned into fn (a return_to frame, or a catch in fn). */
void tr_vm_return_to(Process *p, const FuncInfo *fn, uintptr_t tf);


/*
 * `parent` spawned process `child` running entry(args) (vm_spawn, after
 * the child got its pid, before it can run).  On the parent's thread: a
 * scheduler's, or a foreign thread with a call context.
 */
void tr_vm_spawn(Process *parent, uint64_t child, const Export *entry, int argc,
                 const Term *args);

/* p is exiting with `reason` (vm/proc.c, on p's own fiber). */
void tr_vm_exit(Process *p, Term reason);

/* Process trace flags (trace/tr_flags.c): whether `flags` are all known
 * VM_TRACE_* bits; tvm_trace_flags_all without the checks, returning how
 * many processes the walk changed. */
bool tr_flags_valid(unsigned flags);
/* The TVM_TRACE_* bit named name[0..n), 0 if none. */
unsigned tr_flag_bit(const char *name, size_t n);
int tr_flags_all(tvm_vm *vm, tvm_trace_scope scope, unsigned flags, bool on);

/* Registers erlang:trace/3 (trace/tr_bif.c). */
void tr_natives_register(tvm_vm *vm);
/*
 * Running, send and receive events (trace/tr_vm_proc.c); each checks p's
 * flag.  On p's own fiber unless said otherwise; under the lossless
 * policy each may suspend p until its ring has room.
 *   sched_in/out     p is scheduled in / about to be scheduled out
 *   sched_start      p starts running (in, with its entry function)
 *   sched_exit       p is exiting (out, with 0)
 *   send             `from` sends msg to pid `to` (also a call context
 *                    through tvm_send, on an embedder's thread)
 *   receive          p took the messages m, m->next, ... into its queue
 */
void tr_vm_sched_in(Process *p);
void tr_vm_sched_out(Process *p);
void tr_vm_sched_start(Process *p);
void tr_vm_sched_exit(Process *p);
void tr_vm_send(Process *from, uint64_t to, Term msg);
void tr_vm_receive(Process *p, const Message *m);

/* tvm_destroy: stops a pipeline still running (before the schedulers stop). */
void tr_vm_destroy(tvm_vm *vm);

#endif /* TRACE_TR_VM_H */
