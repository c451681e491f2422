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
#include "vm/vm.h"

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
    /* Trampolines of global breakpoints: the function entered; else NULL. */
    const struct FuncInfo *real;
    struct Export *export;      /* the export entry if exported, else NULL */
    tvm_native_fn native;       /* natives only */
    void *native_data;
    /* An embedder's native (tvm_register_native), not one of the VM's
     * own tables: its call lends the scheduler's local queue, as it may
     * block or compute for long (vm/sched.c, "Lending the local queue").
     * Written before the function is reachable. */
    bool lends;
    /*
     * The breakpoint line: bp_orig, bp and code[0], 24 bytes that start
     * 32-byte aligned (FuncInfo is 32-byte aligned), so one cache line,
     * which the BREAKPOINT instruction and trace_pattern's step each read
     * once.
     *
     * bp_orig: code[0] as the function was made (vm_func_set_entry),
     * the word a local breakpoint replaces: a hit runs it, a disarm
     * stores it back.  Written before the function is reachable, never
     * again, so read plainly by any thread.
     *
     * bp: the breakpoint record (vm/breakpoint.h), or NULL.  Written by
     * the engine under the code-modification permission; read (relaxed) by
     * the BREAKPOINT instruction, which runs only after a thread-progress
     * wait separated the record's publication from the arming store.
     */
    _Alignas(32) Instr bp_orig;
    VmAtomic bp;
    Instr code[];               /* code[0] is ENTER (or NATIVE / UNDEF) */
} FuncInfo;

_Static_assert(offsetof(FuncInfo, bp) - offsetof(FuncInfo, bp_orig) == sizeof(Instr) &&
                   offsetof(FuncInfo, code) - offsetof(FuncInfo, bp) == sizeof(VmAtomic) &&
                   offsetof(FuncInfo, bp_orig) % 32 == 0 && _Alignof(FuncInfo) == 32 &&
                   2 * sizeof(Instr) + sizeof(VmAtomic) <= 32,
               "bp_orig, bp and code[0] share 32 aligned bytes, so one cache line");

/* Sets a function's first code word and bp_orig, its saved copy, before
 * the function is reachable. */
static inline void vm_func_set_entry(FuncInfo *fi, Instr w)
{
    fi->code[0] = w;
    fi->bp_orig = w;
}

/* A FuncInfo's bytes with room for ncode code words, rounded up to its
 * alignment (so that the next one in a block is aligned too). */
static inline size_t vm_func_size(uint32_t ncode)
{
    return (offsetof(FuncInfo, code) + (size_t)ncode * sizeof(Instr) + _Alignof(FuncInfo) - 1) &
           ~(size_t)(_Alignof(FuncInfo) - 1);
}

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
    void *func_block;           /* the memory of every funcs[i] (vm_func_block) */
    LitBlock *lits;             /* boxed literals the code refers to */
    struct Module *older;       /* replaced versions, kept while the VM lives */
    /* The memory this version holds (its functions, line tables, literal
     * blocks, name and arrays), counted by the builder (ld_build.c) before
     * the module is published and constant after: what installing it adds
     * to vm->code_bytes. */
    size_t bytes;
    /* Under perm and code_lock (read under either):
     *   deleted  this version was the current code until delete_module
     *            made it old: the module has no current code;
     *   purged   this version (old code) was purged: it counts as gone
     *            for check_old_code and loading, but stays allocated, as
     *            all code does while the VM lives (a process still running
     *            it, or a frame returning into it, keeps working). */
    bool deleted, purged;
} Module;

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

/* Finds or creates the export entry for mod:name/arity.  Any thread.
 * For entries that code loaded from C or a native being registered needs:
 * never refused (they count towards vm->max_exports all the same). */
Export *vm_export_get(tvm_vm *vm, Atom mod, Atom name, uint32_t arity);

/* The same for a name that VM code or the C API gives at run time
 * (make_fun/3, apply/3, spawn/3, code:load_binary/3's text, tvm_call,
 * tvm_spawn): NULL when the entry
 * is new and the table already holds vm->max_exports entries (the caller
 * raises system_limit or returns TVM_ERR_LIMIT).  Any thread. */
Export *vm_export_get_bounded(tvm_vm *vm, Atom mod, Atom name, uint32_t arity);

/* Finds an existing entry; NULL if none.  Any thread. */
Export *vm_export_find(tvm_vm *vm, Atom mod, Atom name, uint32_t arity);

/* Allocates a FuncInfo with room for `ncode` code words. */
FuncInfo *vm_func_alloc(uint32_t ncode);

/*
 * A module's n functions in one zeroed block, in order: funcs[i] gets
 * room for ncode[i] code words (and its ncode set), each aligned as
 * vm_func_alloc's are.  Returns the block, which the module owns
 * (Module.func_block).  Why one block: a pass over a module's functions
 * in order (trace_pattern's staging step reads each one's breakpoint
 * line) then reads memory in address order, which the hardware
 * prefetchers follow; one allocation each left them scattered between
 * the export entries and stubs allocated meanwhile and the holes of
 * memory freed earlier.
 */
void *vm_func_block(uint32_t n, const uint32_t *ncode, FuncInfo **funcs);

/* Finds a loaded module by name; call with code_lock held. */
Module *vm_module_find_locked(tvm_vm *vm, Atom name);

/*
 * Installs a verified module, replacing an older version: stages the new
 * export addresses, clears exports the new version no longer has, and
 * commits by flipping the code index; m->bytes is added to vm->code_bytes
 * (nothing ever subtracts it: every version stays allocated while the VM
 * lives).  Call with the permission and code_lock held.
 */
void vm_module_install_locked(tvm_vm *vm, Module *m);

/*
 * Registers native fi as the staged target of export entry e and commits
 * it; TVM_ERR_EXISTS when e already has a target.  Call with the
 * permission and code_lock held.
 */
tvm_status vm_native_install_locked(tvm_vm *vm, Export *e, FuncInfo *fi);

/* True if some native belongs to module `mod` (perm or code_lock held). */
bool vm_module_has_natives_locked(tvm_vm *vm, Atom mod);

/* The current version of module `name`: NULL when none is loaded or it
 * was deleted.  code_lock held. */
Module *vm_module_current_locked(tvm_vm *vm, Atom name);

/* The version that is old code of the module whose chain head is m (m
 * itself when deleted, else m->older), or NULL when there is none or it
 * was purged. */
Module *vm_module_old(Module *m);

/*
 * Deletes the current code of m (erlang:delete_module): every export of
 * it becomes undefined (remote calls raise undef) in one code-index
 * commit, and m becomes old code.  Processes running it go on; their
 * local calls stay in it.  Call with the permission and code_lock held,
 * after vm_hook_module_replaced removed its breakpoints.
 */
void vm_module_delete_locked(tvm_vm *vm, Module *m);

/* Frees a module and every older version chained to it. */
void vm_module_free(Module *m);

void vm_modules_init(tvm_vm *vm);
void vm_modules_destroy(tvm_vm *vm);

#endif /* VM_MODULE_H */
