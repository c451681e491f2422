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

/*
 * Each session measures on its own: a function may be call_time-traced
 * in one session and not in another, so each session has its own current
 * function and mark per process.  The default session's are
 * Process.ct_fn and ct_mark (its cost is what it was before sessions);
 * the others' are in Process.ct_sess, allocated at the first call_time
 * hit of another session (this file's layout: CtSess per slot, with the
 * sid it belongs to, so a successor in the slot starts afresh).
 * Process.ct_live has a bit per session that has a current function: the
 * scheduler calls vm_hook_time_out/in while it is non-zero.  All of it is
 * touched only by the thread running the process.
 */
typedef struct CtSess {
    const FuncInfo *fn;
    uint64_t mark;
    unsigned sid;
} CtSess;

/* Where session sid's current function and mark live for p. */
typedef struct CtRef {
    const FuncInfo **fn;
    uint64_t *mark;
} CtRef;

static __attribute__((noinline)) CtRef ct_ref_other(Process *p, unsigned sid)
{
    unsigned slot = vm_sid_slot(sid);
    CtSess *v = p->ct_sess;
    if (!v)
        p->ct_sess = v = vm_calloc(VM_SESSIONS_MAX, sizeof *v);
    CtSess *c = &v[slot];
    if (c->sid != sid) {
        /* An ended incarnation's state: forgotten. */
        *c = (CtSess){ .sid = sid };
        p->ct_live &= ~(1u << slot);
    }
    return (CtRef){ &c->fn, &c->mark };
}

static inline CtRef ct_ref(Process *p, unsigned sid)
{
    if (VM_LIKELY(sid == 0))
        return (CtRef){ &p->ct_fn, &p->ct_mark };
    return ct_ref_other(p, sid);
}

/* fn's call time data in session sid if fn is call_time-traced and
 * accumulating there now.  Looked up afresh each time: the record may
 * have changed or gone since p's last quiescent state. */
static BpTime *active_time(const Process *p, const FuncInfo *fn, unsigned sid)
{
    const BpRecord *r = vm_atomic_load_ptr_relaxed(&fn->bp);
    if (!r)
        return NULL;
    const BpGen *g = &r->gen[vm_atomic_load_relaxed(&p->vm->bp_ix)];
    const BpSess *e = bp_gen_sess(g, vm_sid_slot(sid));
    return e && e->sid == sid && (e->flags & BP_TIME_ACTIVE) ? e->time : NULL;
}

/* Charges the ticks since the mark to session sid's current function. */
static void charge(Process *p, unsigned sid, CtRef c, uint64_t now)
{
    BpTime *t = active_time(p, *c.fn, sid);
    if (t)
        time_add(t, p->bp_slot, p->pid, 0, now - *c.mark);
}

static void set_current(Process *p, unsigned sid, CtRef c, const FuncInfo *fn, uint64_t now)
{
    *c.fn = fn;
    *c.mark = now;
    uint32_t bit = 1u << vm_sid_slot(sid);
    p->ct_live = fn ? p->ct_live | bit : p->ct_live & ~bit;
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
/* A call that changes session sid's current function: out of line, so
 * that a call of the current function itself pays no frame for it. */
static __attribute__((noinline)) void time_switch(Process *p, const FuncInfo *fn, BpTime *time,
                                                  unsigned sid, CtRef c)
{
    uint64_t now = tr_clock_ticks();
    if (*c.fn)
        charge(p, sid, c, now);
    time_add(time, p->bp_slot, p->pid, 1, 0);
    set_current(p, sid, c, fn, now);
}

bool bp_time_call_sess(Process *p, const FuncInfo *fn, BpTime *time, unsigned sid, void **saved)
{
    CtRef c = ct_ref(p, sid);
    *saved = (void *)*c.fn;
    if (*c.fn == fn) {
        time_add(time, p->bp_slot, p->pid, 1, 0);
        return true;
    }
    time_switch(p, fn, time, sid, c);
    return true;
}

bool bp_time_call(Process *p, const FuncInfo *fn, const BpGen *g, void **saved)
{
    const BpSess *e = bp_gen_sess(g, 0);
    return e && e->time && bp_time_call_sess(p, fn, e->time, e->sid, saved);
}

/* A return that changes session sid's current function (out of line, as
 * time_switch). */
static __attribute__((noinline)) void time_back(Process *p, unsigned sid, CtRef c, void *saved)
{
    uint64_t now = tr_clock_ticks();
    if (*c.fn)
        charge(p, sid, c, now);
    set_current(p, sid, c, saved, now);
}

void bp_time_return_slow(Process *p, unsigned sid, void *saved)
{
    CtRef c = ct_ref(p, sid);
    if (saved == *c.fn)
        return;     /* back into the same function: the stretch goes on */
    time_back(p, sid, c, saved);
}

void bp_time_return(Process *p, const FuncInfo *fn, void *saved)
{
    bp_time_return_sess(p, fn, 0, saved);
}

void vm_hook_time_out(Process *p)
{
    uint64_t now = tr_clock_ticks();
    for (uint32_t live = p->ct_live; live; live &= live - 1) {
        unsigned slot = (unsigned)__builtin_ctz(live);
        unsigned sid = slot ? ((CtSess *)p->ct_sess)[slot].sid : 0;
        CtRef c = ct_ref(p, sid);
        charge(p, sid, c, now);
    }
}

void vm_hook_time_in(Process *p)
{
    uint64_t now = tr_clock_ticks();
    for (uint32_t live = p->ct_live; live; live &= live - 1) {
        unsigned slot = (unsigned)__builtin_ctz(live);
        unsigned sid = slot ? ((CtSess *)p->ct_sess)[slot].sid : 0;
        *ct_ref(p, sid).mark = now;
    }
}
