/*
 * trace/tr_flags.c - process trace flags: tvm_trace_flags for one process,
 * tvm_trace_flags_all for every process and for new ones, and
 * tvm_trace_calls on top of them.
 *
 * Ordering.  A flags word (Process.trace, vm->trace_new) changes by a CAS
 * loop with full barriers, so two threads changing different bits at once
 * both take effect.  Its readers load it relaxed: a process reads its own
 * word at each breakpoint hit, spawn and exit, and a change applies from
 * its next read.  Nothing is stopped and nothing is waited for, so a
 * process running on another scheduler may still emit (or not) one event
 * under the old flags while the change becomes visible.
 *
 * All processes without stopping the world.  tvm_trace_flags_all changes
 * the default for new processes (vm->trace_new) first, then walks the
 * process table (vm_proc_each_chunked) and changes each process's word.
 * vm_spawn reads the default under the table lock (sys->lock), in the
 * critical section that inserts the new process into the table.  So a
 * spawn racing with the walk either reads the new default (its critical
 * section comes after the default changed) or inserted the process before
 * the walk took the lock for the first time, and then the walk visits it
 * (every process in the table from the walk's start to its end is
 * visited): no process misses the change.  The walk holds the table lock
 * only while it takes references to a chunk of VM_PROC_WALK_CHUNK
 * processes and changes their words without it, so spawns, sends and
 * lookups wait at most for one chunk; schedulers never take the table
 * lock to run processes.  bench/run events measures it (docs/benchmarks.md).
 */
#include <stdlib.h>

#include "vm/sched.h"

/* Sets or clears `flags` in a flags word (full CAS loop). */
static void flags_update(VmAtomic *w, unsigned flags, bool on)
{
    for (;;) {
        uintptr_t old = vm_atomic_load_relaxed(w);
        uintptr_t nw = on ? (old | flags) : (old & ~(uintptr_t)flags);
        if (old == nw || vm_atomic_cas_full(w, old, nw))
            return;
    }
}

static bool flags_valid(unsigned flags)
{
    return (flags & ~(unsigned)VM_TRACE_ALL) == 0;
}

/* The process of pid (a reference to drop with vm_proc_put), env's own
 * for pid 0 (*held false). */
static Process *target(tvm_env *env, tvm_pid pid, bool *held)
{
    *held = false;
    if (!pid)
        return env->p;
    SchedSystem *sys = vm_sched_of(env->p->vm);
    Process *p = sys ? vm_proc_get(sys, pid) : NULL;
    *held = p != NULL;
    return p;
}

tvm_status tvm_trace_flags(tvm_env *env, tvm_pid pid, unsigned flags, bool on)
{
    bool held;
    if (!env || !env->p || !flags_valid(flags))
        return TVM_ERR_BADARG;
    Process *p = target(env, pid, &held);
    if (!p)
        return TVM_ERR_NOTFOUND;
    flags_update(&p->trace, flags, on);
    if (held)
        vm_proc_put(vm_sched_of(env->p->vm), p);
    return TVM_OK;
}

tvm_status tvm_trace_flags_get(tvm_env *env, tvm_pid pid, unsigned *flags)
{
    bool held;
    if (!env || !env->p || !flags)
        return TVM_ERR_BADARG;
    Process *p = target(env, pid, &held);
    if (!p)
        return TVM_ERR_NOTFOUND;
    *flags = (unsigned)vm_atomic_load_relaxed(&p->trace);
    if (held)
        vm_proc_put(vm_sched_of(env->p->vm), p);
    return TVM_OK;
}

tvm_status tvm_trace_calls(tvm_env *env, tvm_pid pid, bool on)
{
    return tvm_trace_flags(env, pid, VM_TRACE_CALL, on);
}

typedef struct FlagsChange {
    unsigned flags;
    bool on;
} FlagsChange;

static void change_one(Process *p, void *data)
{
    const FlagsChange *c = data;
    flags_update(&p->trace, c->flags, c->on);
}

tvm_status tvm_trace_flags_all(tvm_vm *vm, tvm_trace_scope scope, unsigned flags, bool on)
{
    if (!vm || !flags_valid(flags) || (scope & ~(unsigned)TVM_TRACE_ALL) || !scope)
        return TVM_ERR_BADARG;
    /* The default first, then the walk (the order argument above). */
    if (scope & TVM_TRACE_NEW)
        flags_update(&vm->trace_new, flags, on);
    SchedSystem *sys = vm_sched_of(vm);
    FlagsChange c = { flags, on };
    if ((scope & TVM_TRACE_EXISTING) && sys)
        vm_proc_each_chunked(sys, change_one, &c);
    return TVM_OK;
}

unsigned tvm_trace_flags_new(tvm_vm *vm)
{
    return vm ? (unsigned)vm_atomic_load_relaxed(&vm->trace_new) : 0;
}
