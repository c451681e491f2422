/*
 * vm/module.h - functions, modules, the export table and code indices.
 *
 * A FuncInfo is the header in front of a function's code: module, name,
 * arity, registers, line table, and the slot for a breakpoint record.  The
 * code follows it directly, so a code pointer finds its header by
 * subtraction and the header finds its code without a load.
 *
 * The export table maps mod:fun/arity to an Export whose `addr[ix]` holds
 * the FuncInfo to call in code generation `ix`.  Remote calls read
 * addr[active code index]; a load stages new addresses in the staging
 * index and then flips the active index with one release store (see
 * module.c for the protocol).  Export entries are never freed while the VM
 * lives, so code may embed Export pointers.
 */
#ifndef VM_MODULE_H
#define VM_MODULE_H

#include <pthread.h>

#include "include/tracevm.h"
#include "vm/atomics.h"
#include "vm/codeperm.h"
#include "vm/opcode.h"
#include "vm/term.h"

typedef struct LineEntry {
    uint32_t pc;    /* instruction offset in the function */
    uint32_t line;  /* source line */
} LineEntry;

struct Module;
struct Export;

typedef struct FuncInfo {
    struct Module *module;      /* owning module; NULL for natives and stubs */
    Atom mod, name;
    uint16_t arity, nregs;
    uint32_t ncode;             /* code words */
    const char *file;           /* source file for stack traces, or NULL */
    const LineEntry *lines;     /* sorted by pc */
    uint32_t nlines;
    /*
     * The breakpoint record (breakpoints/bp_record.h), or NULL.  Written by
     * the engine under the code-modification permission; read (relaxed) by
     * the BREAKPOINT instruction, which runs only after a thread-progress
     * wait separated the record's publication from the arming store.
     */
    VmAtomic bp;
    /* Trampolines of global breakpoints: the function entered; else NULL. */
    const struct FuncInfo *real;
    struct Export *export;      /* the export entry if exported, else NULL */
    tvm_native_fn native;       /* natives only */
    void *native_data;
    Instr code[];               /* code[0] is ENTER (or NATIVE / UNDEF) */
} FuncInfo;

/* The function a FuncInfo stands for (itself, unless a trampoline). */
static inline const FuncInfo *vm_func_real(const FuncInfo *fi)
{
    return fi->real ? fi->real : fi;
}

static inline const FuncInfo *func_of_code(const Instr *code)
{
    return (const FuncInfo *)((const char *)code - offsetof(FuncInfo, code));
}

/* Finds the source line of an instruction; 0 if unknown. */
uint32_t vm_func_line(const FuncInfo *fi, const Instr *pc);

typedef struct Export {
    Atom mod, name;
    uint32_t arity;
    /*
     * addr[ix]: FuncInfo * to call in code index ix.  Written by the
     * loader (under vm->code_lock) only in the staging index, and by the
     * breakpoint engine under the permission, always with release stores
     * ([CX2]); read by remote calls in the active index with an acquire
     * load ([CX2']) after an acquire load of the index ([CX1']).  Points at
     * `stub` while the function is not defined.
     */
    VmAtomic addr[VM_CODE_IX_COUNT];
    FuncInfo *stub;             /* body [UNDEF]: raises undef */
    /* The global breakpoint's trampoline while it has one (engine only,
     * under the code-modification permission). */
    FuncInfo *bp_tramp;
    struct Export *next;        /* hash chain, under export_lock */
} Export;

/* Storage of a module's boxed literals: blocks that never move. */
typedef struct LitBlock {
    struct LitBlock *next;
    size_t used, cap;
    Term words[];
} LitBlock;

typedef struct Module {
    Atom name;
    char *file;
    FuncInfo **funcs;
    uint32_t nfuncs;
    LitBlock *lits;             /* boxed literals the code refers to */
    struct Module *older;       /* replaced versions, kept while the VM lives */
} Module;

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
    Module **modules;            /* written under perm and code_lock; read under either */
    uint32_t nmodules, modules_cap;
    /* Every registered native, owned here (natives are never removed):
     * appended under perm and code_lock, read under either (trace_pattern's
     * matching, the loader's check, tvm_destroy). */
    FuncInfo **natives;
    uint32_t nnatives, natives_cap;
    pthread_mutex_t export_lock; /* protects the export hash (not addr[]) */
    Export **export_buckets;
    uint32_t export_cap, export_count;
    size_t stack_limit;
    size_t heap_min;
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
    /* The thread-progress service (struct BpProgress *,
     * breakpoints/bp_progress.c), started on first use; same rule as
     * `sched` ([PR1] / [PR1']). */
    VmAtomic progress;
    void (*progress_stop)(struct tvm_vm *vm);  /* written under code_lock with `progress` */
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
    /*
     * The trace pipeline (struct TrVm *, trace/tr_vm.c) while one runs.
     * [TP1] release store by tvm_trace_start (and a relaxed NULL store by
     * tvm_trace_stop, which then waits for thread progress before freeing
     * it); [TP1'] acquire load by emitters, which are always QSBR readers
     * online while they use it (trace/tr_vm.c explains why that is enough).
     */
    VmAtomic trace_out;
    /* trace_lock serializes tvm_trace_start and tvm_trace_stop. */
    pthread_mutex_t trace_lock;
    /* Trace flags (VM_TRACE_*) for new processes: full CAS by
     * tvm_trace_flags_all; read relaxed by vm_spawn under the process
     * table's lock (the order argument is in trace/tr_flags.c). */
    VmAtomic trace_new;
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

static inline unsigned vm_code_ix(const tvm_vm *vm)
{
    /* [CX1'] acquire: the code and addr[] staged before the flip; pairs
     * with [CX1] in vm_code_commit(). */
    return (unsigned)vm_atomic_load_acquire(&vm->code_ix);
}

static inline const FuncInfo *vm_export_target(const tvm_vm *vm, const Export *e)
{
    /* [CX2'] acquire: the FuncInfo the slot names was written before the
     * release that stored it, even when the slot was re-staged by a load
     * committed after this caller's index load (vm/module.c). */
    return (const FuncInfo *)vm_atomic_load_ptr_acquire(&e->addr[vm_code_ix(vm)]);
}

/* Finds or creates the export entry for mod:name/arity.  Any thread. */
Export *vm_export_get(tvm_vm *vm, Atom mod, Atom name, uint32_t arity);

/* Finds an existing entry; NULL if none.  Any thread. */
Export *vm_export_find(tvm_vm *vm, Atom mod, Atom name, uint32_t arity);

/* Allocates a FuncInfo with room for `ncode` code words. */
FuncInfo *vm_func_alloc(uint32_t ncode);

/* Finds a loaded module by name; call with code_lock held. */
Module *vm_module_find_locked(tvm_vm *vm, Atom name);

/*
 * Installs a verified module, replacing an older version: stages the new
 * export addresses, clears exports the new version no longer has, and
 * commits by flipping the code index.  Call with code_lock held.
 */
void vm_module_install_locked(tvm_vm *vm, Module *m);

/* True if some native belongs to module `mod` (perm or code_lock held). */
bool vm_module_has_natives_locked(tvm_vm *vm, Atom mod);

/* Frees a module and every older version chained to it. */
void vm_module_free(Module *m);

void vm_modules_init(tvm_vm *vm);
void vm_modules_destroy(tvm_vm *vm);

#endif /* VM_MODULE_H */
