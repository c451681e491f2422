/*
 * vm/vm.h - struct tvm_vm: the state of one VM, shared by every layer.
 *
 * The VM core owns the struct; the layers above keep their own state
 * behind the pointers named here (the breakpoint engine, the trace
 * pipeline), each saying who writes it and what orders its readers.
 * Created by vm_create() and torn down by vm_release(), which the
 * composition root (api/root.c) calls around the layers' own set-up and
 * tear-down.
 */
#ifndef VM_VM_H
#define VM_VM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "include/tracevm.h"
#include "vm/atomics.h"
#include "vm/codeperm.h"
#include "vm/sysmon.h"
#include "vm/traceword.h"

struct Module;
struct FuncInfo;
struct Export;
struct BpEngine;
struct SchedSystem;
struct VmRegistry;

struct tvm_vm {
    /*
     * The active code index.  Written by the loader with a release store
     * ([CX1]) under code_lock; read with an acquire load by every remote
     * call ([CX1']).
     */
    VmAtomic code_ix;
    /*
     * The code-modification permission (vm/codeperm.h): held by a load, a
     * native registration or a trace_pattern for their whole sequence.
     * code_lock is the short mutex inside it for the module array and the
     * start of services.
     */
    VmCodePerm perm;
    pthread_mutex_t code_lock;   /* the start of the schedulers and services; modules[] */
    struct Module **modules;            /* written under perm and code_lock; read under either */
    uint32_t nmodules, modules_cap;
    /* The bytes every installed version holds (Module.bytes), purged and
     * replaced ones included, since none is freed while the VM lives: a
     * load from VM code that would take it past max_code_bytes is refused
     * (loader/ld_api.c).  Written under perm and code_lock
     * (vm_module_install_locked), read under either. */
    size_t code_bytes;
    /* Every registered native, owned here (natives are never removed):
     * appended under perm and code_lock, read under either (trace_pattern's
     * matching, the loader's check, tvm_destroy). */
    struct FuncInfo **natives;
    uint32_t nnatives, natives_cap;
    pthread_mutex_t export_lock; /* protects the export hash (not addr[]) */
    struct Export **export_buckets;
    uint32_t export_cap, export_count;
    /* Entries vm_export_get_bounded may reach: written by tvm_new before
     * any other thread sees the VM, read-only after. */
    size_t max_exports;
    /* code_bytes' bound for loads from VM code: written by tvm_new before
     * any other thread sees the VM, read-only after. */
    size_t max_code_bytes;
    size_t stack_limit;
    size_t heap_min;
    size_t max_heap;             /* default max_heap_size of processes (0: none) */
    size_t max_procs;            /* processes alive at once */
    size_t max_msg;              /* words one copy between processes may hold */
    size_t cmp_steps;            /* pairs one comparison may visit: 2 * max_msg */
    /* The first pass of a comparison and of a message's count made for a
     * process, past which it lends its queue (vm/lend.h):
     * min(cmp_steps, VM_BIF_LEND_WORK) and min(max_msg, VM_BIF_LEND_WORK).
     * Written by tvm_new before any other thread sees the VM, read-only
     * after. */
    size_t cmp_first, msg_first;
    void *output;                /* FILE * for io: natives */
    int schedulers;              /* scheduler threads to start (0: one per core) */
    size_t fiber_stack;          /* bytes per process fiber stack (0: default) */
    bool fiber_slabs;            /* stacks from slabs, no guard pages (tvm_config) */
    bool crash_reports;          /* print a report when a process crashes */
    bool crash_stacks;           /* ... with the stack at the raise (stacks/st.h) */
    /* The schedulers (struct SchedSystem *), started on first use
     * (vm/sched.c).  [SC1] release store under code_lock when started and
     * when stopped by tvm_destroy; read with vm_sched_of() ([SC1'] acquire)
     * from any thread. */
    VmAtomic sched;
    /* The thread-progress service (struct VmProgress *,
     * vm/progress.c), started on first use; same rule as
     * `sched` ([PR1] / [PR1']). */
    VmAtomic progress;
    /*
     * The active breakpoint generation (0 or 1).  Written by the engine
     * under the permission (relaxed: the thread-progress wait after the
     * flip publishes it); read relaxed by every BREAKPOINT hit.
     */
    VmAtomic bp_ix;
    struct BpEngine *bp;         /* the engine's state (breakpoints/), under perm */
    /* The call hook (struct VmCallHook *, immutable once published):
     * [HK1] release store by tvm_set_call_hook, [HK1'] acquire on a hit. */
    VmAtomic call_hook;
    bool stw_tracing;            /* config: stop-the-world trace_pattern */
    bool control_wanted;         /* config: serve the control endpoint (control/) */
    /* The control endpoint (struct CtlServer *, control/ctl_server.c) while
     * it serves; written by tvm_control_start/stop under their own lock,
     * read by them and by tvm_control_path under it. */
    void *control;
    /* The socket paths this VM's endpoint has served (struct CtlPaths *,
     * control/ctl_server.c), kept until tvm_destroy so that the string
     * tvm_control_path returned stays readable after a stop; under the
     * control layer's lock. */
    void *control_paths;
    /*
     * The trace sessions (struct TrSessions *, trace/tr_session.c): each
     * with its pipeline or tracer process, its limits and its counters.
     * Set once by the trace layer's set-up (api/root.c) before any thread
     * but the creator's can reach the VM, freed by its tear-down.
     */
    struct TrSessions *sessions;
    /* trace_lock serializes tvm_trace_start, tvm_trace_stop (its drain
     * included, which holds no code permission) and the trace layer's
     * tear-down (trace/tr_vm.c, the stop section, says why).  Taken
     * before the code permission, never under it. */
    pthread_mutex_t trace_lock;
    /* Trace words (vm/process.h) for new processes: written by the trace
     * layer under its flags lock (trace/tr_flags.c), trace_new_tab's
     * session words before trace_new; read relaxed by vm_spawn under the
     * process table's lock (the order argument is in trace/tr_flags.c). */
    VmAtomic trace_new;
    VmTraceTab trace_new_tab;
    /* The generation of flags for all existing processes: bumped by each
     * tvm_trace_flags_all with TVM_TRACE_EXISTING, under the trace
     * layer's flags lock, after the change it numbers is recorded there
     * ([TG1] release: trace/tr_flags_all.c has the protocol); read
     * relaxed by a scheduler switching a process in (the thread-progress
     * wait that follows each bump orders it), and by vm_spawn under the
     * process table's lock, which the writer holds too. */
    VmAtomic trace_gen;
    /* The system monitor's setting (vm/sysmon.h: who writes and reads
     * each word); sysmon.on sits by trace_gen, which a switch in loads
     * too. */
    VmSysmon sysmon;
    /* Sequential tracing (vm/seqtrace.c).  seq_tracer: the pid of the
     * system tracer, 0 for none; written by set_system_tracer/1 (a CAS:
     * it returns the one it replaced), read relaxed by every scheduler
     * as it writes an event (a pid on its own: nothing else is published
     * with it, and a tracer set a moment ago may miss an event, as a
     * dead one does).  seq_gen: bumped by reset_trace/0 (fetch-and-add);
     * read relaxed by a process as it uses a token, which it drops when
     * made under an older generation (a reset reaches each token at its
     * next use, never in the middle of one). */
    VmAtomic seq_tracer;
    VmAtomic seq_gen;
    /* Registered process names (vm/registry.c, under its own lock): made
     * by vm_create and freed by vm_release. */
    struct VmRegistry *registry;
    /* Every process's link set (Process.links, links_closed; vm/links.c
     * says why one lock for all). */
    pthread_mutex_t link_lock;
};

typedef struct VmCallHook {
    void (*fn)(tvm_env *env, const tvm_call_event *ev, void *data);
    void *data;
    struct VmCallHook *older;    /* replaced hooks, freed with the VM */
} VmCallHook;

/* [SC1'] acquire: the scheduler system's initialisation before its use. */
static inline struct SchedSystem *vm_sched_of(const tvm_vm *vm)
{
    return (struct SchedSystem *)vm_atomic_load_ptr_acquire(&vm->sched);
}

/*
 * Creates the VM core from `cfg` (NULL: defaults): atoms, the module and
 * export tables, the settings; no thread yet.  NULL when cfg holds a value
 * out of range, with `why` naming the field, its value and its range.
 * tvm_create (api/root.c) then sets up every layer above.
 */
tvm_vm *vm_create(const tvm_config *cfg, char *why, size_t n);

/* Frees the core, once every layer above has let go of it and no thread
 * runs VM code (tvm_destroy, after the schedulers stopped). */
void vm_release(tvm_vm *vm);

#endif /* VM_VM_H */
