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
 * lock to run processes.  Between chunks the walk gives way (a calling
 * process yields its scheduler, another thread its CPU): the walk is
 * background work and a scheduler waiting for the walker's CPU should not
 * wait for the whole walk.  bench/run events measures it
 * (docs/benchmarks.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/tr_vm.h"
#include "vm/strbuf.h"
#include "vm/sched.h"

/* The flags by name, for the CLI, erlang:trace/3 and error messages. */
static const struct {
    const char *name;
    unsigned bit;
} flag_names[] = {
    { "call", TVM_TRACE_CALL },           { "arity", TVM_TRACE_ARITY },
    { "timestamp", TVM_TRACE_TIMESTAMP }, { "procs", TVM_TRACE_PROCS },
    { "return_to", TVM_TRACE_RETURN_TO }, { "silent", TVM_TRACE_SILENT },
    { "running", TVM_TRACE_RUNNING },     { "send", TVM_TRACE_SEND },
    { "receive", TVM_TRACE_RECEIVE },
};

#define NFLAG_NAMES (sizeof flag_names / sizeof flag_names[0])

unsigned tr_flag_bit(const char *name, size_t n)
{
    for (size_t k = 0; k < NFLAG_NAMES; k++)
        if (strlen(flag_names[k].name) == n && !strncmp(name, flag_names[k].name, n))
            return flag_names[k].bit;
    return 0;
}

tvm_status tvm_trace_flags_parse(const char *list, unsigned *flags, tvm_error *err)
{
    *flags = 0;
    for (const char *p = list ? list : "";; p++) {
        size_t n = strcspn(p, ",");
        unsigned bit = tr_flag_bit(p, n);
        if (!bit) {
            if (err) {
                StrBuf sb;
                sb_init(&sb);
                for (size_t k = 0; k < NFLAG_NAMES; k++)
                    sb_printf(&sb, "%s%s", k ? ", " : "", flag_names[k].name);
                err->status = TVM_ERR_BADARG;
                snprintf(err->message, sizeof err->message,
                         "unknown flag '%.*s' (expected a comma-separated list of %s)", (int)n,
                         p, sb.s);
                sb_free(&sb);
            }
            return TVM_ERR_BADARG;
        }
        *flags |= bit;
        p += n;
        if (!*p)
            break;
    }
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    return TVM_OK;
}

bool tr_flags_valid(unsigned flags)
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
    if (!env || !env->p || !tr_flags_valid(flags))
        return TVM_ERR_BADARG;
    Process *p = target(env, pid, &held);
    if (!p)
        return TVM_ERR_NOTFOUND;
    vm_atomic_update_bits(&p->trace, flags, on);
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
    int count;
} FlagsChange;

static void change_one(Process *p, void *data)
{
    FlagsChange *c = data;
    vm_atomic_update_bits(&p->trace, c->flags, c->on);
    c->count++;
}

int tr_flags_all(tvm_vm *vm, tvm_trace_scope scope, unsigned flags, bool on)
{
    /* The default first, then the walk (the order argument above). */
    if (scope & TVM_TRACE_NEW)
        vm_atomic_update_bits(&vm->trace_new, flags, on);
    SchedSystem *sys = vm_sched_of(vm);
    FlagsChange c = { flags, on, 0 };
    if ((scope & TVM_TRACE_EXISTING) && sys)
        vm_proc_each_chunked(sys, change_one, &c);
    return c.count;
}

tvm_status tvm_trace_flags_all(tvm_vm *vm, tvm_trace_scope scope, unsigned flags, bool on)
{
    if (!vm || !tr_flags_valid(flags) || (scope & ~(unsigned)TVM_TRACE_ALL) || !scope)
        return TVM_ERR_BADARG;
    tr_flags_all(vm, scope, flags, on);
    return TVM_OK;
}

unsigned tvm_trace_flags_new(tvm_vm *vm)
{
    return vm ? (unsigned)vm_atomic_load_relaxed(&vm->trace_new) : 0;
}
