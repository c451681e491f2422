/*
 * vm/registry.c - registered process names.
 *
 * A name is an atom other than `undefined`; a live process holds at most
 * one, and a name names at most one process.  The natives are BEAM's
 * (erts register.c and its BIFs): register(Name, Pid) -> true, badarg
 * when Name is not an atom or is undefined, when Pid is not a live local
 * process, when Name is taken or Pid already has a name; unregister(Name)
 * -> true, badarg when no process holds Name; whereis(Name) -> Pid or
 * undefined; registered() -> [Name].  erlang:send/2 (vm/bif.c) sends to a
 * name through vm_registry_whereis, and embedders read the table through
 * it and vm_registry_name_of (tvm_whereis, tvm_process_name in
 * vm/api_names.c).  A process's name goes when it exits.
 *
 * Concurrency.  The table is under `lock`, a reader-writer lock: sends
 * to a name, whereis/1 and the embedders' lookups read, the rest write.  Process.reg_name,
 * reg_named and reg_closed are under the same lock (the write side).
 * Exiting (vm_registry_exit) takes the lock, removes p's name and sets
 * reg_closed; register/2 checks reg_closed under it, so a name given
 * after p's exit removed its own cannot be left behind: whichever of the
 * two takes the lock first, the table never names a process that has
 * passed vm_registry_exit.  An entry's `proc` is therefore valid while
 * the lock is held (p is freed only after it exited), and a reference
 * taken then (vm_proc_get) keeps it valid after.  The lock is taken
 * before the process table's lock, never under it, and nothing that may
 * wait (a trace event under the lossless policy) runs under it.
 *
 * The table is open addressing with linear probing, a power of two of
 * slots at most half full, removal by backward shift (no tombstones).
 * Its size is bounded by the live processes (max_processes).
 */
#include "vm/registry.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/hook.h"
#include "vm/sched.h"
#include "vm/vm.h"

typedef struct RegEntry {
    Process *proc;     /* NULL: a free slot */
    uint64_t pid;
    Atom name;
} RegEntry;

struct VmRegistry {
    pthread_rwlock_t lock;
    RegEntry *slots;   /* cap slots, under lock */
    uint32_t cap, count;
};

enum { REG_MIN_CAP = 16 };

void vm_registry_init(tvm_vm *vm)
{
    VmRegistry *r = vm_calloc(1, sizeof *r);
    if (pthread_rwlock_init(&r->lock, NULL) != 0)
        vm_die("pthread_rwlock_init");
    r->cap = REG_MIN_CAP;
    r->slots = vm_calloc(r->cap, sizeof(RegEntry));
    vm->registry = r;
}

void vm_registry_free(tvm_vm *vm)
{
    VmRegistry *r = vm->registry;
    if (!r)
        return;
    pthread_rwlock_destroy(&r->lock);
    free(r->slots);
    free(r);
    vm->registry = NULL;
}

/* ==== the table (lock held) ==== */

static uint32_t home(const VmRegistry *r, Atom name)
{
    return (uint32_t)(name * 2654435761u) & (r->cap - 1);
}

/* The slot of `name`, or the free slot where it would go. */
static uint32_t slot_of(const VmRegistry *r, Atom name)
{
    uint32_t i = home(r, name);
    while (r->slots[i].proc && r->slots[i].name != name)
        i = (i + 1) & (r->cap - 1);
    return i;
}

static void put(VmRegistry *r, Atom name, Process *p)
{
    uint32_t i = slot_of(r, name);
    r->slots[i] = (RegEntry){ p, p->pid, name };
    r->count++;
}

static void grow_if_full(VmRegistry *r)
{
    if ((r->count + 1) * 2 <= r->cap)
        return;
    RegEntry *old = r->slots;
    uint32_t n = r->cap;
    r->cap *= 2;
    r->slots = vm_calloc(r->cap, sizeof(RegEntry));
    r->count = 0;
    for (uint32_t i = 0; i < n; i++)
        if (old[i].proc)
            put(r, old[i].name, old[i].proc);
    free(old);
}

/* Empties slot i and moves later entries of its probe run back, so that
 * every entry stays reachable from its home slot without tombstones. */
static void remove_at(VmRegistry *r, uint32_t i)
{
    uint32_t mask = r->cap - 1;
    r->slots[i].proc = NULL;
    r->count--;
    for (uint32_t j = (i + 1) & mask; r->slots[j].proc; j = (j + 1) & mask) {
        uint32_t h = home(r, r->slots[j].name);
        /* j's entry may move to i when its home is not in (i, j]. */
        bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stays)
            continue;
        r->slots[i] = r->slots[j];
        r->slots[j].proc = NULL;
        i = j;
    }
}

/* ==== the VM's side ==== */

bool vm_registry_whereis(tvm_vm *vm, Atom name, uint64_t *pid)
{
    VmRegistry *r = vm->registry;
    pthread_rwlock_rdlock(&r->lock);
    uint32_t i = slot_of(r, name);
    bool found = r->slots[i].proc != NULL;
    if (found)
        *pid = r->slots[i].pid;
    pthread_rwlock_unlock(&r->lock);
    return found;
}

bool vm_registry_name_of(Process *p, Atom *name)
{
    VmRegistry *r = p->vm->registry;
    pthread_rwlock_rdlock(&r->lock);
    bool named = p->reg_named;
    if (named)
        *name = p->reg_name;
    pthread_rwlock_unlock(&r->lock);
    return named;
}

void vm_registry_exit(Process *p)
{
    VmRegistry *r = p->vm->registry;
    pthread_rwlock_wrlock(&r->lock);
    bool named = p->reg_named;
    Atom name = p->reg_name;
    if (named)
        remove_at(r, slot_of(r, name));
    p->reg_named = false;
    p->reg_closed = true;
    pthread_rwlock_unlock(&r->lock);
    if (named)
        vm_hook_procs(p, p, VM_PEV_UNREGISTER, make_atom(name));
}

/* ==== natives ==== */

static tvm_status badarg(Process *p)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(ATOM_BADARG), NULL);
    return TVM_EXCEPTION;
}

static tvm_status give(Process *p, Term t, tvm_term *result)
{
    *result = vm_root_push(p, t);
    return TVM_OK;
}

/* A name register/2 may give: an atom other than undefined. */
static bool name_ok(Term t)
{
    return term_is_atom(t) && t != make_atom(ATOM_UNDEFINED);
}

/* Gives `name` to t under the lock: false (nothing changed) when the
 * name is taken, t has a name, or t has passed vm_registry_exit. */
static bool give_name(VmRegistry *r, Atom name, Process *t)
{
    pthread_rwlock_wrlock(&r->lock);
    bool ok = !t->reg_named && !t->reg_closed && !r->slots[slot_of(r, name)].proc;
    if (ok) {
        grow_if_full(r);
        put(r, name, t);
        t->reg_named = true;
        t->reg_name = name;
    }
    pthread_rwlock_unlock(&r->lock);
    return ok;
}

static tvm_status nif_register(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                               void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Term name = vm_root_get(p, argv[0]), pid = vm_root_get(p, argv[1]);
    SchedSystem *sys = vm_sched_of(p->vm);
    if (!name_ok(name) || !term_is_pid(pid) || !sys)
        return badarg(p);
    /* The reference keeps t valid for the event after the lock. */
    Process *t = vm_proc_get_live(sys, pid_value(pid));
    if (!t)
        return badarg(p);
    bool ok = t->fiber && give_name(p->vm->registry, atom_value(name), t);
    if (ok)
        vm_hook_procs(p, t, VM_PEV_REGISTER, name);
    vm_proc_put(sys, t);
    return ok ? give(p, make_atom(ATOM_TRUE), result) : badarg(p);
}

static tvm_status nif_unregister(tvm_env *env, int argc, const tvm_term *argv,
                                 tvm_term *result, void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Term name = vm_root_get(p, argv[0]);
    SchedSystem *sys = vm_sched_of(p->vm);
    if (!term_is_atom(name) || !sys)
        return badarg(p);
    VmRegistry *r = p->vm->registry;
    pthread_rwlock_wrlock(&r->lock);
    uint32_t i = slot_of(r, atom_value(name));
    Process *holder = r->slots[i].proc, *t = NULL;
    if (holder) {
        /* Valid under the lock (see the top), and still in the process
         * table: referenced for the event. */
        t = vm_proc_get(sys, r->slots[i].pid);
        holder->reg_named = false;
        remove_at(r, i);
    }
    pthread_rwlock_unlock(&r->lock);
    if (!holder)
        return badarg(p);
    if (t) {
        vm_hook_procs(p, t, VM_PEV_UNREGISTER, name);
        vm_proc_put(sys, t);
    }
    return give(p, make_atom(ATOM_TRUE), result);
}

static tvm_status nif_whereis(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                              void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Term name = vm_root_get(p, argv[0]);
    uint64_t pid;
    if (!term_is_atom(name))
        return badarg(p);
    if (!vm_registry_whereis(p->vm, atom_value(name), &pid))
        return give(p, make_atom(ATOM_UNDEFINED), result);
    return give(p, make_pid(pid), result);
}

/* registered(): the names are copied out under the lock and the list
 * built after it (building may collect, which must not hold the lock). */
static tvm_status nif_registered(tvm_env *env, int argc, const tvm_term *argv,
                                 tvm_term *result, void *data)
{
    (void)argc, (void)argv, (void)data;
    Process *p = env->p;
    VmRegistry *r = p->vm->registry;
    pthread_rwlock_rdlock(&r->lock);
    uint32_t n = r->count;
    Atom *names = vm_malloc((n ? n : 1) * sizeof(Atom));
    for (uint32_t i = 0, k = 0; i < r->cap; i++)
        if (r->slots[i].proc)
            names[k++] = r->slots[i].name;
    pthread_rwlock_unlock(&r->lock);
    vm_heap_ensure(p, 2 * (size_t)n, NULL, 0);
    Term l = TERM_NIL;
    for (uint32_t i = n; i-- > 0;) {
        Term *c = vm_heap_alloc(p, 2);
        c[0] = make_atom(names[i]);
        c[1] = l;
        l = make_cons_ptr(c);
    }
    free(names);
    return give(p, l, result);
}

static const VmNativeDef natives[] = {
    { "erlang", "register", 2, nif_register },
    { "erlang", "unregister", 1, nif_unregister },
    { "erlang", "whereis", 1, nif_whereis },
    { "erlang", "registered", 0, nif_registered },
};

VmNativeTable vm_registry_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
