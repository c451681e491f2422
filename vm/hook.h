/*
 * vm/hook.h - the VM's hook interface: every place where the interpreter,
 * the schedulers, process code or the loader hand control to a layer
 * above vm/ (docs/architecture.md).
 *
 * The VM owns the interface: it declares each hook here, says when it is
 * called and on which thread, and the layer named in each section defines
 * it.  The VM includes nothing of those layers; what it must read of
 * their data on a hot path (the breakpoint record, the interlock word) is
 * laid out by the VM too (vm/breakpoint.h, vm/interlock.h).
 *
 * Binding is at link time, as Linux binds its arch_* hooks: a hook is an
 * ordinary function with one definition, so a call costs what a direct
 * call costs and the armed paths carry no indirect call.  Each hook is
 * defined exactly once, in the folder its section names
 * (tests/check_layers.py checks it).  Hooks that report events check the
 * process's flags themselves; callers may test a flag first to stay cheap
 * where the call is frequent.
 */
#ifndef VM_HOOK_H
#define VM_HOOK_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/atomics.h"
#include "vm/breakpoint.h"
#include "vm/common.h"
#include "vm/module.h"
#include "vm/process.h"

struct StrBuf;

/* ==== breakpoints/: the breakpoint hit, trace frames, call time, loading ==== */

/*
 * The slow part of a hit (BREAKPOINT, vm/interp.c), for a generation with
 * call trace that the process's flags ask for, meta trace, call time, or
 * several sessions' counters (g's summary and its sessions' entries):
 * p's top activation has just entered its function.  Reads what it needs
 * of `g` before anything that may suspend the process, and never after.
 * May collect garbage, push a trace frame (so the frame stack may move)
 * and suspend the process.  False when a trace frame was needed but the
 * frame stack is at its limit: the caller raises system_limit.  `fn` is
 * the top activation's function, `pf` the process's trace flags as the
 * caller loaded them and `args` its register window (the arguments):
 * passed, not reloaded, for the hit's fast path.  The hit is global when
 * fl has BP_GLOBAL (a trampoline's record).  On p's own thread, an online
 * reader (between two quiescent states).
 */
bool vm_hook_bp_hit(Process *p, const BpGen *g, uint32_t fl, const FuncInfo *fn,
                    uintptr_t pf, const Term *args);

/*
 * RETURN_TRACE: p's top frame is a trace frame (FRAME_TRACE) and r0 of
 * its window holds the value the traced activation returned.  Reports the
 * return; the interpreter then pops the frame as an ordinary return.  May
 * collect garbage (registers are updated in place: read r0 after the
 * call) and may suspend the process, but moves neither the frames nor
 * the register stack (it pushes no frame and runs no process code).
 * Returns the trace frame's register window, computed early so that the
 * interpreter's return need not wait for that load.  (The interpreter
 * takes its frame and register pointers back after the call rather than
 * keeping them across it: live across the call, they make the compiler
 * allocate the whole loop's registers differently, +1 or +2 instructions
 * per untraced call by callgrind.)
 */
Term *vm_hook_trace_return(Process *p);

/*
 * An exception (p->exc_*) is about to discard frames [lo, p->nframes).
 * Reports every trace frame among them, innermost first (exception_from
 * whether or not the exception is caught, call_time charges), and
 * return_to for `catcher` (the frame of the handler, or -1 when the
 * exception leaves this activation).  `bottom` says the activation is the
 * process's outermost, so an uncaught throw is reported as error
 * {nocatch, Value} (what the process exits with).  Only when p->ntrace.
 */
void vm_hook_trace_unwind(Process *p, uint32_t lo, int catcher, bool bottom);

/*
 * The process's call_time clock: stops when it is scheduled out (charging
 * each session's current function), restarts when it is scheduled in.
 * Called only when p->ct_live is set (p is inside a function some
 * session call_time-traces), on p's own fiber before and after its
 * switch.
 */
void vm_hook_time_out(Process *p);
void vm_hook_time_in(Process *p);

/*
 * Loading a new version of module `old->name`, or deleting its current
 * code (loader/): removes every breakpoint of that version (its functions
 * and the trampolines of its exports) with the full sequence, so neither
 * old nor new code is traced afterwards.  Called with the
 * code-modification permission held.
 */
void vm_hook_module_replaced(tvm_vm *vm, const Module *old);

/*
 * Loading module m (not installed yet): applies the on_load patterns to
 * all its functions, armed before the install publishes them (no wait).
 * Called with the permission and code_lock held, right before
 * vm_module_install_locked().
 */
void vm_hook_module_loading(tvm_vm *vm, Module *m);

/* ==== trace/: process events (spawn, exit, scheduling, messages) ==== */

/*
 * `parent` spawned process `child` running entry(args) (vm_spawn, after
 * the child got its pid and its flags for new processes and entered the
 * process table, before it can run: it is in no run queue yet, so it
 * cannot exit and `child` stays valid throughout), with a link between
 * the two already made when `link` (spawn_link: the hook writes both
 * ends' link events too).  On the parent's thread: a scheduler's, or a
 * foreign thread with a call context.
 */
void vm_hook_spawn(Process *parent, Process *child, const Export *entry, int argc,
                   const Term *args, bool link);

/* p is exiting with `reason` (on p's own fiber); trace sessions p owns
 * are asked to end. */
void vm_hook_exit(Process *p, Term reason);

/* The procs flag's events beside spawn and exit (BEAM's), each with one
 * term: a registered name, or the pid at the other end of a link. */
typedef enum VmProcsEvent {
    VM_PEV_REGISTER,          /* subject got the name arg */
    VM_PEV_UNREGISTER,        /* subject lost the name arg */
    VM_PEV_LINK,              /* subject linked to arg (link/1, spawn_link/3) */
    VM_PEV_UNLINK,            /* subject unlinked from arg (unlink/1) */
    VM_PEV_GETTING_LINKED,    /* arg linked to subject */
    VM_PEV_GETTING_UNLINKED,  /* arg unlinked from subject, or exited */
} VmProcsEvent;

/*
 * An event of process `subject`, written where it has the procs flag,
 * made by `runner`: subject itself, or another process (register/2 and
 * unregister/1 of any process, either end of a link, a linked process's
 * exit), on runner's thread (a scheduler's, or a foreign one with a call
 * context).  The caller holds a reference to subject and no lock.
 */
void vm_hook_procs(Process *runner, Process *subject, VmProcsEvent ev, Term arg);

/*
 * Running, exiting, send and receive events.  On p's own fiber unless said
 * otherwise; under the lossless policy each may suspend p until its ring
 * has room.
 *   sched_in/out     p is scheduled in / about to be scheduled out
 *   sched_start      p starts running (in, with its entry function)
 *   sched_exit       p has exited: its exit event, name and links are
 *                    done (out_exited, for the exiting flag)
 *   send             `from` sends msg to `to`, a pid or the registered
 *                    name it was sent to (also a call context through
 *                    tvm_send, on an embedder's thread)
 *   receive          p took the messages m, m->next, ... into its queue
 */
void vm_hook_sched_in(Process *p);
void vm_hook_sched_out(Process *p);
void vm_hook_sched_start(Process *p);
void vm_hook_sched_exit(Process *p);
void vm_hook_send(Process *from, Term to, Term msg);
void vm_hook_receive(Process *p, const Message *m);

/*
 * A collection of p's heap (vm/heap.c, vm_gc), where p has the
 * garbage_collection flag: before it (end false; words = the words the
 * allocation asked for) and after it (end true; words = the used words
 * it reclaimed).  Called on p's own thread, with no lock held and
 * nothing moved yet (before) or everything moved (after); the events may
 * suspend p under the lossless policy as any event of a native may.
 */
void vm_hook_gc(Process *p, bool end, size_t words);

/*
 * p's trace word has not taken in every change of flags for all
 * processes yet (Process.trace_gen differs from tvm_vm.trace_gen): folds
 * them in (trace/tr_flags_all.c has the protocol).  Called by the
 * scheduler right before it switches into p, after its quiescent state;
 * takes p->lock.
 */
void vm_hook_trace_fold(Process *p);

/* ==== stacks/: the stack of a raise, for crash reports ==== */

/*
 * Records where p's exception is being raised (vm_exception_set, with
 * tvm_config.crash_stacks): the caller's own mixed stack into
 * p->exc_stack (allocated once), the top VM frame at top_pc.
 */
void vm_hook_note_raise(Process *p, const Instr *top_pc);

/*
 * p overflowed its native stack (vm/overflow.c): records the mixed stack
 * of the fault, from its program counter and frame pointer, into
 * p->exc_stack for the crash report.  On p's scheduler thread, off p's
 * fiber, before anything reuses that fiber's stack.
 */
void vm_hook_note_fault(Process *p, uintptr_t pc, uintptr_t fp);

/* Appends p->exc_stack (non-NULL), formatted, to a crash report. */
void vm_hook_format_raise(const Process *p, struct StrBuf *sb);

/* ==== profile/: off-CPU and allocation samples ==== */

/*
 * What the sampling profiler (profile/) wants from the VM, as bits of
 * vm_pf_want: VM_PF_OFF, the time a process waits (a switch out with
 * want_wait set: receive, sleep, the code permission, thread progress, a
 * lossless trace wait, a native that suspended); VM_PF_ALLOC, a sample
 * of its heap allocation every vm_pf_alloc_mean words on average.
 * Written by profile/ (relaxed: a process sees a change at its next
 * wait or collection, which is all a sampler needs); read relaxed by the
 * VM at those points only, so nothing is paid while profiling is off but
 * one predicted branch per wait (never per plain yield) and none per
 * allocation (vm/heap.c keeps the sample point in the limit it compares
 * against anyway).  Defined in vm/sched.c and vm/heap.c.
 */
enum { VM_PF_OFF = 1, VM_PF_ALLOC = 2 };
extern VmAtomic vm_pf_want;
extern VmAtomic vm_pf_alloc_mean;

static inline bool vm_pf_wanted(uintptr_t what)
{
    return VM_UNLIKELY(vm_atomic_load_relaxed(&vm_pf_want) & what);
}

/*
 * p, on its own fiber, is about to switch out to wait (wait_begin) and
 * has just been switched in again after it (wait_end, which follows
 * every wait_begin).  Called only when VM_PF_OFF was wanted as the wait
 * began (vm_proc_switch_out), so a wait that began before profiling did
 * is not counted.  The wait ends at Process.pf_woken when a waker noted
 * it (vm/mailbox.c), else at wait_end.
 */
void vm_hook_pf_wait_begin(Process *p);
void vm_hook_pf_wait_end(Process *p);

/*
 * p, on its own fiber, is about to allocate past a sample point of its
 * allocation profile: `samples` sample points (each standing for
 * vm_pf_alloc_mean words on average) fell in the allocation being made.
 */
void vm_hook_pf_alloc(Process *p, uint64_t samples);

#endif /* VM_HOOK_H */
