/*
 * vm/sched_cache.c - ended processes kept for reuse: each scheduler's
 * cache, and the spare list between the schedulers.
 *
 * A process that ends keeps its Process and its fiber (a mapped stack)
 * in the cache of the scheduler it ended on (owner only, no lock), and
 * the next spawn on that scheduler takes it back (vm/lifecycle.c): no
 * malloc, no mmap, no first touch of fresh stack pages.
 *
 * The spare list: ended processes handed between schedulers.  A process
 * spawned on one scheduler often ends on another (a busy scheduler hands
 * its backlog to an idle one), so with two schedulers a spawner's cache
 * drained while the other's filled: the spawner mapped and faulted in
 * fresh stacks and malloc'd new processes, and the other discarded its
 * cache when full or idle (unmapping stacks beyond the pool's bound, with
 * a TLB flush on every CPU).  Now a full cache, or the cache of a
 * scheduler going idle, goes to sys->spare (up to VM_PROC_CACHE_MAX
 * processes), and a scheduler whose cache is empty takes the whole spare
 * list before it allocates: one lock per batch.  The spare list is freed
 * with the pool's trim, once the whole VM has stayed idle
 * (VM_POOL_TRIM_DELAY_MS), and at stop.
 */
#include "vm/sched_internal.h"

/* This thread's scheduler, if it is one of sys's. */
static Scheduler *self_in(SchedSystem *sys)
{
    Scheduler *self = vm_current_scheduler();
    return self && self->sys == sys ? self : NULL;
}

bool vm_sched_spare_give(Scheduler *s)
{
    SchedSystem *sys = s->sys;
    if (!s->cache)
        return true;
    Process *last = s->cache;
    while (last->rq_next)
        last = last->rq_next;
    pthread_mutex_lock(&sys->spare_lock);
    size_t n = vm_atomic_load_relaxed(&sys->nspare);
    bool room = n + s->ncache <= VM_PROC_CACHE_MAX;
    if (room) {
        last->rq_next = sys->spare;
        sys->spare = s->cache;
        vm_atomic_store_relaxed(&sys->nspare, n + s->ncache);
    }
    pthread_mutex_unlock(&sys->spare_lock);
    if (room) {
        s->cache = NULL;
        s->ncache = 0;
    }
    return room;
}

/* Takes the whole spare list as s's cache, which is empty (owner only). */
static void spare_take(Scheduler *s)
{
    SchedSystem *sys = s->sys;
    pthread_mutex_lock(&sys->spare_lock);
    s->cache = sys->spare;
    s->ncache = vm_atomic_load_relaxed(&sys->nspare);
    sys->spare = NULL;
    vm_atomic_store_relaxed(&sys->nspare, 0);
    pthread_mutex_unlock(&sys->spare_lock);
}

void vm_sched_spare_flush(SchedSystem *sys)
{
    pthread_mutex_lock(&sys->spare_lock);
    Process *p = sys->spare;
    sys->spare = NULL;
    vm_atomic_store_relaxed(&sys->nspare, 0);
    pthread_mutex_unlock(&sys->spare_lock);
    while (p) {
        Process *next = p->rq_next;
        vm_proc_discard(sys, p);
        p = next;
    }
}

/* An ended process kept by this thread's scheduler or, its cache empty,
 * by the spare list; NULL if none. */
Process *vm_sched_cache_get(SchedSystem *sys)
{
    Scheduler *s = self_in(sys);
    if (!s)
        return NULL;
    /* Relaxed: a hint; spare_take reads the list under its lock. */
    if (!s->cache && vm_atomic_load_relaxed(&sys->nspare) > 0)
        spare_take(s);
    Process *p = s->cache;
    if (p) {
        s->cache = p->rq_next;
        s->ncache--;
    }
    return p;
}

/* Keeps an ended process nobody else can reach; a full cache goes to the
 * spare list first.  False if this thread is not one of sys's schedulers,
 * or its cache is full and the spare list too. */
bool vm_sched_cache_put(SchedSystem *sys, Process *p)
{
    Scheduler *s = self_in(sys);
    if (!s || (s->ncache >= VM_PROC_CACHE_MAX && !vm_sched_spare_give(s)))
        return false;
    p->rq_next = s->cache;
    s->cache = p;
    s->ncache++;
    return true;
}

void vm_sched_cache_flush(Scheduler *s)
{
    while (s->cache) {
        Process *p = s->cache;
        s->cache = p->rq_next;
        vm_proc_discard(s->sys, p);
    }
    s->ncache = 0;
}
