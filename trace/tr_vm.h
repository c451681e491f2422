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

#include <stdint.h>

#include "vm/module.h"
#include "vm/process.h"

/*
 * A call of `fn` by p, whose arguments are the first registers of p's top
 * frame (the breakpoint hit, breakpoints/bp_api.c); `tf` is p's trace
 * flags as the caller read them (VM_TRACE_CALL set).  On p's own thread.
 */
void tr_vm_call(Process *p, const FuncInfo *fn, uintptr_t tf);

/*
 * `parent` spawned process `child` running entry(args) (vm_spawn, after
 * the child got its pid, before it can run).  On the parent's thread: a
 * scheduler's, or a foreign thread with a call context.
 */
void tr_vm_spawn(Process *parent, uint64_t child, const Export *entry, int argc,
                 const Term *args);

/* p is exiting with `reason` (vm/proc.c, on p's own fiber). */
void tr_vm_exit(Process *p, Term reason);

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
