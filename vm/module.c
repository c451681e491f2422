/*
 * vm/module.c - modules, the export table and code-index commits.
 *
 * Protocol: code loading (after BEAM's code_ix).
 *
 * Terms.  The *active* code index (vm->code_ix) selects which slot of every
 * export entry's addr[] remote calls use.  The *staging* index is the next
 * one, (active + 1) mod VM_CODE_IX_COUNT.
 *
 * Writer (a load or a native registration; serialized by the permission):
 *   1. copy addr[active] into addr[staging] for every export entry;
 *   2. store the new targets into addr[staging], and then the stub into
 *      the slots of the old version's exports the new one lacks (never
 *      the stub first: a stale reader may read this slot, below);
 *   3. [CX1] release-store staging into vm->code_ix.
 * Readers (any thread executing a remote call): acquire-load the index
 * ([CX1']), then acquire-load addr[ix] ([CX2']).
 * Every store into addr[] is a release ([CX2]), in steps 1 and 2 and in the
 * breakpoint engine's arming.
 *
 * Guarantees.  A reader that sees the new index sees every addr[] write
 * and the whole new module (its code, literals and headers were written
 * before [CX1]).  A reader still using an older index reads a slot that is
 * either untouched or, if it is three commits old, holds some target the
 * writer stored; every value ever stored in addr[] is a FuncInfo that is
 * never freed while the VM lives, so such a reader calls a valid (older or
 * newer) version, as it could have by running a little earlier or later.
 * That stale reader has no [CX1] edge to the version it lands on, which may
 * belong to a load whose commit it has not seen (or not happened yet): the
 * [CX2]/[CX2'] pair is its edge, since the version was built before the
 * release store that put it in the slot.  Both are plain moves on x86-64
 * and stlr/ldar on aarch64, where a relaxed pair would let a reader see
 * the new addr[] value before the module's code behind it (on x86 only
 * the compiler could); ThreadSanitizer caught the race a relaxed pair left
 * here (stress_reload).
 * Loads, native registrations and trace_pattern are serialized by the
 * code-modification permission (vm/codeperm.h); code_lock is held only
 * around the module array and the commit.  A caller that loaded the old
 * index just before a commit may still make one call into the old
 * version (no thread-progress wait follows a commit).
 */
#include "vm/module.h"

#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"

/* ==== functions ==== */

FuncInfo *vm_func_alloc(uint32_t ncode)
{
    FuncInfo *fi = vm_zalloc_aligned(_Alignof(FuncInfo), vm_func_size(ncode));
    fi->ncode = ncode;
    return fi;
}

void *vm_func_block(uint32_t n, const uint32_t *ncode, FuncInfo **funcs)
{
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += vm_func_size(ncode[i]);
    char *block = vm_zalloc_aligned(64, total), *at = block;
    for (uint32_t i = 0; i < n; i++) {
        funcs[i] = (FuncInfo *)at;
        funcs[i]->ncode = ncode[i];
        at += vm_func_size(ncode[i]);
    }
    return block;
}

uint32_t vm_func_line(const FuncInfo *fi, const Instr *pc)
{
    if (!fi->nlines || pc < fi->code || pc >= fi->code + fi->ncode)
        return 0;
    uint32_t off = (uint32_t)(pc - fi->code), lo = 0, hi = fi->nlines;
    /* Last entry whose pc <= off. */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (fi->lines[mid].pc <= off)
            lo = mid;
        else
            hi = mid;
    }
    return fi->lines[lo].pc <= off ? fi->lines[lo].line : 0;
}

/* ==== export table ==== */

static uint32_t export_hash(Atom mod, Atom name, uint32_t arity)
{
    uint64_t h = ((uint64_t)mod * 0x9E3779B97F4A7C15ull) ^
                 ((uint64_t)name * 0xC2B2AE3D27D4EB4Full) ^ arity;
    return (uint32_t)(h ^ (h >> 29));
}

static Export *find_locked(tvm_vm *vm, Atom mod, Atom name, uint32_t arity)
{
    uint32_t b = export_hash(mod, name, arity) & (vm->export_cap - 1);
    for (Export *e = vm->export_buckets[b]; e; e = e->next)
        if (e->mod == mod && e->name == name && e->arity == arity)
            return e;
    return NULL;
}

static void grow_exports_locked(tvm_vm *vm)
{
    uint32_t cap = vm->export_cap * 2;
    Export **nb = vm_calloc(cap, sizeof(Export *));
    for (uint32_t i = 0; i < vm->export_cap; i++) {
        Export *e = vm->export_buckets[i];
        while (e) {
            Export *next = e->next;
            uint32_t b = export_hash(e->mod, e->name, e->arity) & (cap - 1);
            e->next = nb[b];
            nb[b] = e;
            e = next;
        }
    }
    free(vm->export_buckets);
    vm->export_buckets = nb;
    vm->export_cap = cap;
}

static Export *export_new(Atom mod, Atom name, uint32_t arity)
{
    Export *e = vm_calloc(1, sizeof(Export));
    e->mod = mod;
    e->name = name;
    e->arity = arity;
    FuncInfo *stub = vm_func_alloc(1);
    stub->mod = mod;
    stub->name = name;
    stub->arity = (uint16_t)arity;
    stub->nregs = (uint16_t)arity;
    stub->export = e;
    vm_func_set_entry(stub, instr_make(OP_UNDEF, 0, 0, 0));
    e->stub = stub;
    for (int i = 0; i < VM_CODE_IX_COUNT; i++)
        vm_atomic_store_release(&e->addr[i], (uintptr_t)stub);
    return e;
}

Export *vm_export_find(tvm_vm *vm, Atom mod, Atom name, uint32_t arity)
{
    pthread_mutex_lock(&vm->export_lock);
    Export *e = find_locked(vm, mod, name, arity);
    pthread_mutex_unlock(&vm->export_lock);
    return e;
}

/* vm_export_get's body: a new entry only while the table holds fewer
 * than `most` entries (NULL otherwise). */
static Export *export_get_upto(tvm_vm *vm, Atom mod, Atom name, uint32_t arity, size_t most)
{
    pthread_mutex_lock(&vm->export_lock);
    Export *e = find_locked(vm, mod, name, arity);
    if (!e && vm->export_count < most) {
        /*
         * A new entry starts undefined in every code index, which is
         * exactly what every index should say: nothing defines it yet.
         * It becomes reachable by readers only through code published
         * by a later commit, or through this lock.
         */
        e = export_new(mod, name, arity);
        if (vm->export_count * 2 >= vm->export_cap)
            grow_exports_locked(vm);
        uint32_t b = export_hash(mod, name, arity) & (vm->export_cap - 1);
        e->next = vm->export_buckets[b];
        vm->export_buckets[b] = e;
        vm->export_count++;
    }
    pthread_mutex_unlock(&vm->export_lock);
    return e;
}

/* The hash's capacity doubles as a uint32_t, so it holds fewer than
 * 2^31 entries; loaded code, at hundreds of bytes an entry, runs out of
 * memory long before. */
#define EXPORT_HARD_MAX ((size_t)1 << 31)

Export *vm_export_get(tvm_vm *vm, Atom mod, Atom name, uint32_t arity)
{
    Export *e = export_get_upto(vm, mod, name, arity, EXPORT_HARD_MAX);
    if (!e)
        vm_die("export table: 2^31 entries");
    return e;
}

Export *vm_export_get_bounded(tvm_vm *vm, Atom mod, Atom name, uint32_t arity)
{
    size_t most = vm->max_exports < EXPORT_HARD_MAX ? vm->max_exports : EXPORT_HARD_MAX;
    return export_get_upto(vm, mod, name, arity, most);
}

/* ==== staging and commit ==== */

/* Step 1 of the protocol: returns the staging index. code_lock held. */
static unsigned stage_begin(tvm_vm *vm)
{
    unsigned active = (unsigned)vm_atomic_load_relaxed(&vm->code_ix);
    unsigned staging = (active + 1) % VM_CODE_IX_COUNT;
    pthread_mutex_lock(&vm->export_lock);
    for (uint32_t i = 0; i < vm->export_cap; i++)
        for (Export *e = vm->export_buckets[i]; e; e = e->next)
            vm_atomic_store_release(&e->addr[staging],
                                    vm_atomic_load_relaxed(&e->addr[active]));
    pthread_mutex_unlock(&vm->export_lock);
    return staging;
}

/* Step 3 of the protocol. code_lock held. */
static void stage_commit(tvm_vm *vm, unsigned staging)
{
    /* [CX1] release: the new module and every addr[staging] write before
     * the index that selects them; pairs with [CX1'] in vm_code_ix(). */
    vm_atomic_store_release(&vm->code_ix, staging);
}

/* ==== modules ==== */

Module *vm_module_find_locked(tvm_vm *vm, Atom name)
{
    for (uint32_t i = 0; i < vm->nmodules; i++)
        if (vm->modules[i]->name == name)
            return vm->modules[i];
    return NULL;
}

Module *vm_module_current_locked(tvm_vm *vm, Atom name)
{
    Module *m = vm_module_find_locked(vm, name);
    return m && !m->deleted ? m : NULL;
}

Module *vm_module_old(Module *m)
{
    Module *old = m->deleted ? m : m->older;
    return old && !old->purged ? old : NULL;
}

void vm_module_delete_locked(tvm_vm *vm, Module *m)
{
    unsigned staging = stage_begin(vm);
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        Export *e = m->funcs[i]->export;
        if (e)
            vm_atomic_store_release(&e->addr[staging], (uintptr_t)e->stub);
    }
    stage_commit(vm, staging);
    m->deleted = true;
}

bool vm_module_has_natives_locked(tvm_vm *vm, Atom mod)
{
    for (uint32_t i = 0; i < vm->nnatives; i++)
        if (vm->natives[i]->mod == mod)
            return true;
    return false;
}

void vm_module_install_locked(tvm_vm *vm, Module *m)
{
    Module *old = vm_module_find_locked(vm, m->name);
    unsigned staging = stage_begin(vm);
    /* The new version's exports first, then the old one's that it lacks:
     * each slot gets its final value in one store.  The staging slot is
     * the one a caller still holding the index of two commits ago reads
     * (the head comment), so the stub stored there even for a moment
     * over an export both versions define made such a caller raise undef
     * for a function that never stopped being defined. */
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        Export *e = m->funcs[i]->export;
        /* An on_load global breakpoint already has its trampoline
         * (vm_hook_module_loading): the export enters through it. */
        FuncInfo *t = e ? e->bp_tramp : NULL;
        if (e)
            vm_atomic_store_release(&e->addr[staging],
                                    (uintptr_t)(t && t->real == m->funcs[i] ? t : m->funcs[i]));
    }
    if (old && !old->deleted) {
        /* Exports of the old version that the new one lacks become undefined
         * (a deleted version's are already). */
        for (uint32_t i = 0; i < old->nfuncs; i++) {
            Export *e = old->funcs[i]->export;
            if (e && vm_func_real(vm_atomic_load_ptr_relaxed(&e->addr[staging]))->module != m)
                vm_atomic_store_release(&e->addr[staging], (uintptr_t)e->stub);
        }
    }
    stage_commit(vm, staging);
    if (old) {
        for (uint32_t i = 0; i < vm->nmodules; i++)
            if (vm->modules[i] == old)
                vm->modules[i] = m;
        m->older = old;
    } else {
        if (vm->nmodules == vm->modules_cap) {
            vm->modules_cap = vm->modules_cap ? vm->modules_cap * 2 : 16;
            vm->modules = vm_realloc(vm->modules, vm->modules_cap * sizeof(Module *));
        }
        vm->modules[vm->nmodules++] = m;
    }
    vm->code_bytes += m->bytes;
}

tvm_status vm_native_install_locked(tvm_vm *vm, Export *e, FuncInfo *fi)
{
    unsigned ix = (unsigned)vm_atomic_load_relaxed(&vm->code_ix);
    if (vm_atomic_load_ptr_relaxed(&e->addr[ix]) != e->stub)
        return TVM_ERR_EXISTS;
    unsigned staging = stage_begin(vm);
    fi->export = e;
    vm_atomic_store_release(&e->addr[staging], (uintptr_t)fi);
    stage_commit(vm, staging);
    if (vm->nnatives == vm->natives_cap) {
        vm->natives_cap = vm->natives_cap ? 2 * vm->natives_cap : 64;
        vm->natives = vm_realloc(vm->natives, vm->natives_cap * sizeof *vm->natives);
    }
    vm->natives[vm->nnatives++] = fi;
    return TVM_OK;
}

void vm_modules_init(tvm_vm *vm)
{
    vm_code_perm_init(&vm->perm);
    pthread_mutex_init(&vm->code_lock, NULL);
    pthread_mutex_init(&vm->export_lock, NULL);
    vm->export_cap = 256;
    vm->export_buckets = vm_calloc(vm->export_cap, sizeof(Export *));
    vm_atomic_store_relaxed(&vm->code_ix, 0);
}

void vm_module_free(Module *m)
{
    while (m) {
        Module *older = m->older;
        for (uint32_t i = 0; i < m->nfuncs; i++)
            free((void *)m->funcs[i]->lines);
        free(m->func_block);
        free(m->funcs);
        while (m->lits) {
            LitBlock *next = m->lits->next;
            free(m->lits);
            m->lits = next;
        }
        free(m->file);
        free(m);
        m = older;
    }
}

void vm_modules_destroy(tvm_vm *vm)
{
    for (uint32_t i = 0; i < vm->export_cap; i++) {
        Export *e = vm->export_buckets[i];
        while (e) {
            Export *next = e->next;
            free(e->stub);
            free(e);
            e = next;
        }
    }
    /* Natives are owned by the VM (vm->natives); module functions by
     * their modules. */
    for (uint32_t i = 0; i < vm->nnatives; i++)
        free(vm->natives[i]);
    free(vm->export_buckets);
    free(vm->natives);
    for (uint32_t i = 0; i < vm->nmodules; i++)
        vm_module_free(vm->modules[i]);
    free(vm->modules);
    pthread_mutex_destroy(&vm->code_lock);
    vm_code_perm_destroy(&vm->perm);
    pthread_mutex_destroy(&vm->export_lock);
}
