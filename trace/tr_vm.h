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
#include "vm/native.h"
#include "vm/hook.h"
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


/* Spawn and exit events: vm_hook_spawn and vm_hook_exit (vm/hook.h,
 * defined in tr_vm.c). */

/* Process trace flags (trace/tr_flags.c): whether `flags` are all known
 * VM_TRACE_* bits; tvm_trace_flags_all without the checks, returning how
 * many processes the walk changed. */
bool tr_flags_valid(unsigned flags);
/* The TVM_TRACE_* bit named name[0..n), 0 if none. */
unsigned tr_flag_bit(const char *name, size_t n);
int tr_flags_all(tvm_vm *vm, tvm_trace_scope scope, unsigned flags, bool on);

/* The trace layer's natives: erlang:trace/3 (trace/tr_bif.c). */
VmNativeTable tr_natives(void);
/* Running, send and receive events: vm_hook_sched_in/out/start/exit,
 * vm_hook_send and vm_hook_receive (vm/hook.h, defined in tr_vm_proc.c). */

/* tvm_destroy: stops a pipeline still running (before the schedulers stop). */
void tr_vm_destroy(tvm_vm *vm);

#endif /* TRACE_TR_VM_H */
