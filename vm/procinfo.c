/*
 * vm/procinfo.c - a process looking at others: erlang:processes/0 and
 * erlang:process_info/2, as BEAM's for the items tracevm keeps.
 *
 * Each item is read the way its writers allow, never from a field that
 * only its owner may touch: the state and the inbox under the process's
 * lock, the links under the VM's link lock, its monitors' watchers on its
 * own list under its lock, its name under the registry's lock, and the
 * counters (queue taken in, heap, reductions) and trap_exit from their
 * relaxed atomics.
 * So the answer about another process is a moment's picture, as BEAM's
 * (which asks the process and may get an answer that is already old).
 * Items that live in what only the process itself may read (the
 * monitors it set, its messages, its frames) are not offered:
 * process_info/2 is badarg for them, as for any unknown item.
 *
 * Lock order: the process table's lock, then a process's (as
 * tvm_processes); every other lock is taken alone.
 */
#include "vm/procinfo.h"

#include <stdlib.h>

#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/lend.h"
#include "vm/registry.h"
#include "vm/sched.h"
#include "vm/vm.h"

/* ==== lists of pids ==== */

/* The list of the n pids on p's heap (a long one lends, vm/lend.h). */
static Term pid_list(Process *p, const uint64_t *pids, size_t n)
{
    bool lent = vm_lend_if_long(p, n);
    vm_heap_ensure(p, 2 * n, NULL, 0);
    Term l = TERM_NIL;
    for (size_t i = n; i-- > 0;) {
        Term *c = vm_heap_alloc(p, 2);
        c[0] = make_pid(pids[i]);
        c[1] = l;
        l = make_cons_ptr(c);
    }
    vm_lend_done(p, lent);
    return l;
}

/* A growing array of pids. */
typedef struct Pids {
    uint64_t *v;
    size_t n, cap;
} Pids;

static void pids_add(Pids *a, uint64_t pid)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->v = vm_realloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = pid;
}

/* ==== processes/0 ==== */

static int pid_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static tvm_status nif_processes(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                                void *data)
{
    (void)argc, (void)argv, (void)data;
    Process *p = env->p;
    SchedSystem *sys = vm_sched_of(p->vm);
    Pids a = { 0 };
    if (sys) {
        bool lent = vm_lend_if_long(p, sys->cap);
        pthread_mutex_lock(&sys->lock);
        for (size_t i = 0; i < sys->cap; i++) {
            Process *t = sys->table[i];
            if (!t || t == (Process *)1)
                continue;
            /* As is_process_alive/1: one that is exiting is gone. */
            pthread_mutex_lock(&t->lock);
            bool alive = t->state != PS_EXITED && !t->exiting;
            pthread_mutex_unlock(&t->lock);
            if (alive)
                pids_add(&a, t->pid);
        }
        pthread_mutex_unlock(&sys->lock);
        vm_lend_done(p, lent);
    }
    /* In the order of the pids, as BEAM lists them. */
    if (a.n)
        qsort(a.v, a.n, sizeof *a.v, pid_cmp);
    *result = vm_root_push(p, pid_list(p, a.v, a.n));
    free(a.v);
    return TVM_OK;
}

/* ==== process_info/2 ==== */

/* The status of t (its lock held; not exiting), as BEAM names it. */
static Atom status_of(const Process *t, bool self)
{
    if (self || t->state == PS_RUNNING)
        return ATOM_RUNNING;
    return t->state == PS_WAITING ? ATOM_WAITING : ATOM_RUNNABLE;
}

/* The value of one item (item_known) of t for p; *gone when t was found
 * exiting meanwhile. */
static Term item_value(Process *p, Process *t, Term item, bool *gone)
{
    Atom a = atom_value(item);
    Pids w = { 0 };
    Term v;
    switch (a) {
    case ATOM_STATUS:
    case ATOM_MESSAGE_QUEUE_LEN: {
        pthread_mutex_lock(&t->lock);
        *gone = *gone || t->state == PS_EXITED || t->exiting;
        Atom st = status_of(t, t == p);
        size_t len = vm_atomic_load_relaxed(&t->mq_len) + t->inbox_len;
        pthread_mutex_unlock(&t->lock);
        return a == ATOM_STATUS ? make_atom(st) : make_small((int64_t)len);
    }
    case ATOM_HEAP_SIZE:
        return make_small(
            (int64_t)(t == p ? vm_heap_size(p) : vm_atomic_load_relaxed(&t->heap_words)));
    case ATOM_REDUCTIONS: {
        uint64_t r = vm_atomic_load_relaxed(&t->reductions);
        if (t == p)
            r += (uint64_t)(p->reds_slice - p->reds);   /* this slice's so far */
        return make_small((int64_t)r);
    }
    case ATOM_TRAP_EXIT:
        return make_bool(vm_atomic_load_relaxed(&t->trap_exit) != 0);
    case ATOM_REGISTERED_NAME: {
        Atom name;
        if (!vm_registry_name_of(t, &name))
            return TERM_NIL;   /* BEAM: [] for no name */
        return make_atom(name);
    }
    case ATOM_LINKS:
        pthread_mutex_lock(&p->vm->link_lock);
        for (uint32_t i = 0; i < t->nlinks; i++)
            pids_add(&w, t->links[i]);
        pthread_mutex_unlock(&p->vm->link_lock);
        break;
    default:   /* ATOM_MONITORED_BY */
        pthread_mutex_lock(&t->lock);
        for (const Monitor *m = t->monitors; m; m = m->next)
            pids_add(&w, m->watcher);
        pthread_mutex_unlock(&t->lock);
        break;
    }
    v = pid_list(p, w.v, w.n);
    free(w.v);
    return v;
}

/* Whether Item is one process_info/2 answers (checked before the
 * process is looked at: an unknown item is badarg for a dead one too). */
static bool item_known(Term item)
{
    static const Atom known[] = { ATOM_STATUS, ATOM_MESSAGE_QUEUE_LEN, ATOM_HEAP_SIZE,
                                  ATOM_REDUCTIONS, ATOM_REGISTERED_NAME, ATOM_LINKS,
                                  ATOM_MONITORED_BY, ATOM_TRAP_EXIT };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (item == make_atom(known[i]))
            return true;
    return false;
}

/* {Item, Value}; asked alone, registered_name without a name is [] (in a
 * list it is {registered_name, []}, as BEAM's). */
static Term item_pair(Process *p, Process *t, Term item, bool alone, bool *gone)
{
    Term v = item_value(p, t, item, gone);
    if (alone && v == TERM_NIL && item == make_atom(ATOM_REGISTERED_NAME))
        return TERM_NIL;
    Term e[2] = { item, v };
    return vm_make_tuple(p, 2, e);
}

static tvm_status raise_badarg(Process *p)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(ATOM_BADARG), NULL);
    return TVM_EXCEPTION;
}

/* The items asked for: Item alone, or a proper list of at most
 * MAX_ITEMS atoms; false for badarg. */
#define MAX_ITEMS 64

static bool items_of(Term items, Term *its, size_t *n)
{
    *n = 0;
    if (term_is_atom(items)) {
        its[(*n)++] = items;
        return item_known(items);
    }
    Term l = items;
    for (; term_is_cons(l) && *n < MAX_ITEMS; l = cons_tail(l)) {
        if (!item_known(cons_head(l)))
            return false;
        its[(*n)++] = cons_head(l);
    }
    return l == TERM_NIL;
}

/* process_info(Pid, Item) and process_info(Pid, [Item]): undefined for a
 * process that is gone or exiting (also one found ending meanwhile). */
static tvm_status nif_process_info(tvm_env *env, int argc, const tvm_term *argv,
                                   tvm_term *result, void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Term pid = vm_root_get(p, argv[0]), items = vm_root_get(p, argv[1]);
    Term its[MAX_ITEMS];
    size_t n;
    if (!term_is_pid(pid) || !items_of(items, its, &n))
        return raise_badarg(p);
    SchedSystem *sys = vm_sched_of(p->vm);
    Process *t = sys ? vm_proc_get_live(sys, pid_value(pid)) : NULL;
    bool gone = !t;
    /* Each answer a root while the next ones allocate. */
    size_t base = p->nroots;
    for (size_t i = 0; i < n && t; i++)
        vm_root_push(p, item_pair(p, t, its[i], term_is_atom(items), &gone));
    if (t)
        vm_proc_put(sys, t);
    Term r = make_atom(ATOM_UNDEFINED);
    if (!gone && term_is_atom(items)) {
        r = p->roots[base];
    } else if (!gone) {
        r = TERM_NIL;
        for (size_t i = n; i-- > 0;)
            r = vm_make_cons(p, p->roots[base + i], r);
    }
    *result = vm_root_push(p, r);
    return TVM_OK;
}

static const VmNativeDef natives[] = {
    { "erlang", "processes", 0, nif_processes },
    { "erlang", "process_info", 2, nif_process_info },
};

VmNativeTable vm_procinfo_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
