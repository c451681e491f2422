/*
 * breakpoints/bp_time.c - call_time: exclusive time and call counts per
 * function and process, kept without a lock on the hot path, read and
 * reset without stopping anything.
 *
 * Protocol: per-scheduler tables read while they are written.
 *
 * What is measured (BEAM's call_time).  A process has at most one
 * *current* function (Process.ct_fn) and a *mark* (Process.ct_mark, a
 * tr_clock tick).  Whenever something happens to the process's time (a
 * call of a call_time-traced function, the return of one, an exception
 * passing one, being scheduled out), the ticks since the mark are charged
 * to the current function and the mark moves to now.  A traced call makes
 * the callee current and the caller's function is saved in a time frame
 * below the callee's activation; its return (or an exception crossing the
 * frame) makes the saved one current again.  So a function is charged
 * only while it is current: its *exclusive* time, without its traced
 * callees (an untraced callee's time is its caller's, as in BEAM).  While
 * the process is scheduled out there is no mark: sched_out charges up to
 * now, sched_in starts a new stretch, and the time in between is nobody's.
 * An event that does not change the current function (recursion, or a
 * return into the same function) charges nothing and reads no clock: the
 * stretch simply goes on, since it is that function's either way.
 *
 * Where it is kept.  A BpTime hangs off a generation (BpGen.time) of the
 * function's local record, like a call counter, and has one shard per
 * writer: shard 1 + i belongs to scheduler i, shard 0 to every thread that
 * is not a scheduler (embedder threads inside tvm_call).  A shard is an
 * open-addressing table keyed by pid.
 *
 * Who writes.  Only scheduler i writes shard 1 + i (a process's bp_slot
 * names its scheduler's shard, and a process runs on one thread at a
 * time); shard 0's writers take BpTime.lock.  A writer that finds its
 * pid's entry adds to it with a relaxed load and store (single writer, no
 * locked instruction); a new entry gets count and ticks first, then its
 * key with a release store ([TM1]).  A table at half load is replaced:
 * the writer copies its entries into one twice as large and publishes it
 * with a release store of the shard's pointer ([TM2]); the old table is
 * *retired*, chained to the new one, never written again.
 *
 * Who reads, and what orders it.  A reader (trace_info, tvm_call_time;
 * any thread, holding the code-modification permission so that the BpTime
 * is not freed under it) loads each shard's table with acquire (pairs
 * with [TM2]: it sees every entry copied into it), and each key with
 * acquire (pairs with [TM1]: it sees the entry's first values).  It may
 * walk a table that has just been retired: that one stays allocated and
 * complete up to the moment of its retirement, so the reader sees a
 * slightly older value, which it could have seen anyway.  Counts and
 * ticks are separate words: a reader racing a writer may see a call
 * counted before its time is added.  Readers never write and never wait
 * for a writer.
 *
 * Reset and free.  true and restart put a *fresh* BpTime into the staging
 * generation (bp_pattern.c), as for call_count: after the engine's flip
 * and wait, every hit writes the fresh one, so counts restart from exactly
 * 0 although schedulers kept writing the old one during the sequence.  The
 * old one loses its generation's reference at consolidation and is freed
 * at the free stage, after a thread-progress wait that follows the wait
 * after the flip: no writer holds it any more (writers keep no pointer
 * across a quiescent state: every charge looks its function up again
 * through fn->bp), and no reader does (readers hold the permission, which
 * the free stage holds too).  Retired tables are freed with their BpTime,
 * so growth needs no grace period of its own and costs at most the size
 * of the current table again.
 *
 * Time charged to a function whose call_time was switched off (or paused)
 * meanwhile is dropped; time accrued before a restart is charged to the
 * fresh data at the next event, as BEAM does.
 */
#include "breakpoints/bp_time.h"

#include <stdlib.h>
#include <string.h>

#include "trace/tr_clock.h"
#include "vm/common.h"

#define TAB_CAP0 8

/* ==== tables (the shard's writer) ==== */

static BpTimeTab *tab_new(uint32_t cap)
{
    BpTimeTab *t = vm_calloc(1, sizeof *t + cap * sizeof(BpTimeEntry));
    t->cap = cap;
    return t;
}

/* The slot of key: its entry, or the empty slot where it goes.  Keys are
 * pids + 1, handed out in sequence, so the identity spreads them evenly
 * (and probes of one process's successive tables stay short). */
static inline BpTimeEntry *tab_probe(BpTimeTab *t, uint64_t key)
{
    uint32_t mask = t->cap - 1;
    uint32_t i = (uint32_t)key & mask;
    for (;;) {
        uintptr_t k = vm_atomic_load_relaxed(&t->e[i].key);
        if (VM_LIKELY(k == key) || k == 0)
            return &t->e[i];
        i = (i + 1) & mask;
    }
}

static void entry_fill(BpTimeEntry *e, uint64_t key, uint64_t count, uint64_t ticks)
{
    vm_atomic_store_relaxed(&e->count, count);
    vm_atomic_store_relaxed(&e->ticks, ticks);
    /* [TM1] release: the values before the key that makes them visible;
     * pairs with [TM1'] in shard_collect(). */
    vm_atomic_store_release(&e->key, key);
}

/* Replaces a half-full table by one twice its size. */
static BpTimeTab *tab_grow(BpTimeShard *s, BpTimeTab *old)
{
    BpTimeTab *t = tab_new(old->cap * 2);
    for (uint32_t i = 0; i < old->cap; i++) {
        uintptr_t k = vm_atomic_load_relaxed(&old->e[i].key);
        if (k)
            entry_fill(tab_probe(t, k), k, vm_atomic_load_relaxed(&old->e[i].count),
                       vm_atomic_load_relaxed(&old->e[i].ticks));
    }
    t->used = old->used;
    t->retired = old;
    /* [TM2] release: the copied entries before the table; pairs with
     * [TM2'] in shard_collect(). */
    vm_atomic_store_ptr_release(&s->tab, t);
    return t;
}

/* A process's first line in this shard (the table may be created or
 * replaced first). */
static void shard_insert(BpTimeShard *s, uint64_t key, uint64_t count, uint64_t ticks)
{
    BpTimeTab *t = vm_atomic_load_ptr_relaxed(&s->tab);  /* our own store */
    if (!t) {
        t = tab_new(TAB_CAP0);
        vm_atomic_store_ptr_release(&s->tab, t);
    } else if (2 * (t->used + 1) > t->cap) {
        t = tab_grow(s, t);
    }
    t->used++;
    entry_fill(tab_probe(t, key), key, count, ticks);
}

/* The hot path: the process's line exists (after its first call). */
static inline void shard_add(BpTimeShard *s, uint64_t key, uint64_t count, uint64_t ticks)
{
    BpTimeTab *t = vm_atomic_load_ptr_relaxed(&s->tab);  /* our own store */
    BpTimeEntry *e = t ? tab_probe(t, key) : NULL;
    if (VM_LIKELY(e && vm_atomic_load_relaxed(&e->key) == key)) {
        /* One writer: a plain read-modify-write of atomic words. */
        vm_atomic_store_relaxed(&e->count, vm_atomic_load_relaxed(&e->count) + count);
        vm_atomic_store_relaxed(&e->ticks, vm_atomic_load_relaxed(&e->ticks) + ticks);
        return;
    }
    shard_insert(s, key, count, ticks);
}

static inline void time_add(BpTime *t, uint32_t slot, uint64_t pid, uint64_t count,
                            uint64_t ticks)
{
    if (VM_LIKELY(slot != 0)) {
        shard_add(&t->shard[slot], pid + 1, count, ticks);
        return;
    }
    pthread_mutex_lock(&t->lock);
    shard_add(&t->shard[0], pid + 1, count, ticks);
    pthread_mutex_unlock(&t->lock);
}

void bp_time_add(BpTime *t, uint32_t slot, uint64_t pid, uint64_t count, uint64_t ticks)
{
    time_add(t, slot, pid, count, ticks);
}

/* ==== lifetime (the engine) ==== */

BpTime *bp_time_new(uint32_t nshards)
{
    tr_clock_init();
    BpTime *t = vm_calloc(1, sizeof *t + nshards * sizeof(BpTimeShard));
    t->nshards = nshards;
    if (pthread_mutex_init(&t->lock, NULL))
        vm_die("pthread_mutex_init");
    return t;
}

void bp_time_free(BpTime *t)
{
    for (uint32_t i = 0; i < t->nshards; i++) {
        BpTimeTab *tab = vm_atomic_load_ptr_relaxed(&t->shard[i].tab);
        while (tab) {
            BpTimeTab *older = tab->retired;
            free(tab);
            tab = older;
        }
    }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* ==== readers ==== */

typedef struct SampleList {
    BpTimeSample *v;
    size_t n, cap;
} SampleList;

static void shard_collect(const BpTimeShard *s, SampleList *l)
{
    /* [TM2'] acquire; pairs with [TM2] in tab_grow(). */
    const BpTimeTab *t = vm_atomic_load_ptr_acquire(&s->tab);
    if (!t)
        return;
    for (uint32_t i = 0; i < t->cap; i++) {
        /* [TM1'] acquire; pairs with [TM1] in entry_fill(). */
        uintptr_t k = vm_atomic_load_acquire(&t->e[i].key);
        if (!k)
            continue;
        if (l->n == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 16;
            l->v = vm_realloc(l->v, l->cap * sizeof *l->v);
        }
        l->v[l->n++] = (BpTimeSample){ k - 1, vm_atomic_load_relaxed(&t->e[i].count),
                                       vm_atomic_load_relaxed(&t->e[i].ticks) };
    }
}

static int by_pid(const void *a, const void *b)
{
    uint64_t x = ((const BpTimeSample *)a)->pid, y = ((const BpTimeSample *)b)->pid;
    return (x > y) - (x < y);
}

/* Ticks to nanoseconds (a duration: no offset). */
static uint64_t ticks_ns(uint64_t ticks)
{
    if (!tr_clock.tsc)
        return ticks;
    return (uint64_t)(((unsigned __int128)ticks * tr_clock.mult) >> 32);
}

size_t bp_time_read(const BpTime *t, BpTimeSample **out)
{
    SampleList l = { 0 };
    for (uint32_t i = 0; i < t->nshards; i++)
        shard_collect(&t->shard[i], &l);
    if (l.n)
        qsort(l.v, l.n, sizeof *l.v, by_pid);
    /* One line per process: a process that ran on several schedulers has
     * a line in each of their shards. */
    size_t n = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (n && l.v[n - 1].pid == l.v[i].pid) {
            l.v[n - 1].count += l.v[i].count;
            l.v[n - 1].ns += l.v[i].ns;
        } else {
            l.v[n++] = l.v[i];
        }
    }
    for (size_t i = 0; i < n; i++)
        l.v[i].ns = ticks_ns(l.v[i].ns);
    *out = l.v;
    return n;
}

/* ==== the hit side (p's own thread, online) ==== */

/* fn's call time data if fn is call_time-traced and accumulating now.
 * Looked up afresh each time: the record may have changed or gone since
 * p's last quiescent state. */
static BpTime *active_time(const Process *p, const FuncInfo *fn)
{
    const BpRecord *r = vm_atomic_load_ptr_relaxed(&fn->bp);
    if (!r)
        return NULL;
    const BpGen *g = &r->gen[vm_atomic_load_relaxed(&p->vm->bp_ix)];
    return (g->flags & BP_TIME_ACTIVE) ? g->time : NULL;
}

/* Charges the ticks since the mark to p's current function. */
static void charge(Process *p, uint64_t now)
{
    BpTime *t = active_time(p, p->ct_fn);
    if (t)
        time_add(t, p->bp_slot, p->pid, 0, now - p->ct_mark);
}

/*
 * The clock is read only when the current function changes.  A call of
 * the current function itself (recursion), or a return into the same
 * function, leaves the current stretch running: whatever the clock says
 * at that moment, both sides of it would be charged to the same function
 * of the same process, so the charge can wait until the function changes
 * or the process is scheduled out.  A recursive traced function thus
 * costs no clock read per call (the clock is two thirds of the cost of a
 * call that switches functions: docs/benchmarks.md).
 */
bool bp_time_call(Process *p, const FuncInfo *fn, const BpGen *g, void **saved)
{
    *saved = (void *)p->ct_fn;
    if (p->ct_fn == fn) {
        time_add(g->time, p->bp_slot, p->pid, 1, 0);
        return true;
    }
    uint64_t now = tr_clock_ticks();
    if (p->ct_fn)
        charge(p, now);
    time_add(g->time, p->bp_slot, p->pid, 1, 0);
    p->ct_fn = fn;
    p->ct_mark = now;
    return true;
}

void bp_time_return(Process *p, const FuncInfo *fn, void *saved)
{
    (void)fn;   /* the current function is charged: see bp_time.h */
    if (saved == p->ct_fn)
        return;     /* back into the same function: the stretch goes on */
    uint64_t now = tr_clock_ticks();
    if (p->ct_fn)
        charge(p, now);
    p->ct_fn = saved;
    p->ct_mark = now;
}

void vm_hook_time_out(Process *p)
{
    charge(p, tr_clock_ticks());
}

void vm_hook_time_in(Process *p)
{
    p->ct_mark = tr_clock_ticks();
}
