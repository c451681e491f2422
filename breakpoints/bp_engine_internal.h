/*
 * breakpoints/bp_engine_internal.h - state shared by the engine's files.
 * Everything here belongs to the holder of the code-modification
 * permission (vm/codeperm.h) and is touched by nobody else.
 */
#ifndef BREAKPOINTS_BP_ENGINE_INTERNAL_H
#define BREAKPOINTS_BP_ENGINE_INTERNAL_H

#include "breakpoints/bp.h"
#include "vm/breakpoint.h"

#include <pthread.h>

/* A list of records as an array: walking it names the next records
 * ahead of time (prefetch), where a chain through the records would
 * wait for each one's cache miss in turn. */
typedef struct BpRecVec {
    BpRecord **v;
    size_t n, cap;
} BpRecVec;

void bp_recvec_push(BpRecVec *l, BpRecord *r);

/* Reading ahead in a loop over records: how far (in records).  With a
 * module's functions and records in order in memory (vm_func_block,
 * record_carve), twice the 16 it was: the staging pass over 50,000
 * functions (which reads the functions' lines twice as far ahead) went
 * from 0.66-0.70 to 0.60-0.63 ms, and the disarm pass (twice as far
 * again) from 0.19-0.23 to 0.12-0.16 (bench_pausefree --fns 50000,
 * instrumented, a worker on each vCPU). */
#define BP_AHEAD 32

/* A hint to fetch the line at p for writing; nothing where the compiler
 * has no such builtin (gcc and clang have it). */
static inline void bp_prefetch(const void *p)
{
#if defined(__GNUC__)
    __builtin_prefetch(p, 1, 3);
#else
    (void)p;
#endif
}

/* Every cache line of a record, hot and cold (a pass over records
 * touches most). */
static inline void bp_prefetch_record(const BpRecord *r)
{
    const char *c = (const char *)bp_cold(r);
    bp_prefetch(r);
    for (size_t k = 0; k < sizeof(BpCold); k += 64)
        bp_prefetch(c + k);
}

/* Idle records kept linked (emptied and disarmed: BpEngine.nidle),
 * 16 MiB at most, as the pool. */
#ifndef BP_IDLE_MAX
#define BP_IDLE_MAX 65536
#endif

/* What the settle of a staged record left to the arm and disarm stages
 * (a record that existed before the call is armed by the settle itself,
 * stage 2a): arm after the first wait (a record the call created),
 * disarm after the flip. */
enum { BP_ACT_NONE, BP_ACT_ARM, BP_ACT_DISARM };

/* BpRecord.settled: the settle's act, and whether the record was fresh
 * and armed early. */
enum { BP_SETTLED_ACT = 3u, BP_SETTLED_FRESH = 4u, BP_SETTLED_EARLY = 8u };

/*
 * A record the running call staged, with what its settle decided, so
 * that the arm and disarm stages store to the code word without reading
 * the record again (a cache miss each on a large module).
 */
typedef struct BpTouched {
    BpRecord *r;
    Instr *at;                  /* local: the function's code[0]; global: NULL */
    uint8_t act;                /* BP_ACT_* */
    bool fresh;                 /* created by the running call */
    bool early;                 /* armed at its settle (stage 2a) */
} BpTouched;

typedef struct BpEngine {
    tvm_vm *vm;                 /* the VM it belongs to (set at init) */
    BpRecord *records;          /* every linked record */
    size_t nglobal;             /* linked global records (trampolines) */
    /* Unlinked, freed at the next free stage: [0] local records, [1]
     * global ones (with their trampolines), so that freeing the former
     * reads none of them. */
    BpRecVec unlinked[2];
    BpCount *count_free;        /* counters that lost their last reference */
    struct BpTime *time_free;   /* call time data that lost its last reference */
    /* Per session slot: the TVM_TP_* flags applied to every module
     * loaded later, for session on_load_sid[slot], with this call-trace
     * spec (a reference; read only here, under the permission), or NULL. */
    unsigned on_load[VM_SESSIONS_MAX];
    unsigned on_load_sid[VM_SESSIONS_MAX];
    struct TrMs *on_load_ms[VM_SESSIONS_MAX];
    struct TrMs **ms_dead;      /* match-spec references dropped, released */
    size_t nms_dead, ms_dead_cap; /* at the next free stage */
    /* What the running commit frees after its first wait (the lists
     * above, taken over at its start).  Kept here rather than in the
     * commit's locals: a commit whose process never resumes (the VM
     * destroyed while it waits, vm/progress.c) would leak them;
     * bp_engine_destroy frees them instead.  Under the permission. */
    BpRecVec dying[2];
    BpCount *dying_counts;
    struct BpTime *dying_times;
    struct TrMs **dying_ms;
    size_t ndying_ms;
    BpRecVec pool;              /* freed records kept for reuse */
    /* Fresh records' memory (bp_engine.c, record_carve): every slab,
     * freed with the engine, and the current one's next record. */
    BpRecord **slabs;
    size_t nslabs, slabs_cap;
    BpRecord *slab_next;
    size_t slab_left;
    /* Idle records: linked, disarmed, both generations empty, kept on
     * their function for the next call that sets a breakpoint there (it
     * then arms them before its first wait: no allocation, no wait of
     * its own).  At most BP_IDLE_MAX; only a trace_pattern keeps them
     * (keep_idle, set around its commit, which then also leaves its
     * stage 5 to the next engine call: see pend): a reload or a
     * session's removal unlinks the records it empties, at once. */
    size_t nidle;
    bool keep_idle;
    BpTouched *touched;         /* records the running call staged */
    size_t ntouched, touched_cap;
    /* The records the last trace_pattern staged, whose stage 5 it left
     * to the next engine call (bp_sync_record, bp_sync_all): a pending
     * record's BpRecord.pend is 1 + its index and its mark is pend_mark
     * (its stage 5 sets pend to 0; staging it again, the mark).  The two
     * arrays trade places at each such commit. */
    BpTouched *pend;
    size_t npend, pend_cap;
    size_t npend_left;          /* pend's records still pending */
    uint32_t pend_mark;
    size_t nsettled;            /* touched[0..nsettled) are settled */
    /* Bit 1 << BP_ACT_*: some settle since the last commit asked for it
     * (a superset: a record settled again may have changed its mind), so
     * that a stage with nothing to store skips its pass over the touched
     * list (every call's arm stage, and a call that switches on). */
    unsigned acts;
    bool resettle;              /* one of them was staged again since */
    /* BpRecord.mark of the running call: odd, + 2 per call; a record's
     * mark is this while it is staged, this + 1 once it is settled. */
    uint32_t mark;
    uint32_t nshards;           /* counters: 1 + schedulers */
    bool stw;                   /* this call stopped the world */
    /* Thread-progress waits made, and the ns spent in them (statistics):
     * added to by the waiting call, under the permission; read relaxed
     * by bp_waits / bp_wait_ns on any thread, nothing ordered with them. */
    VmAtomic waits;
    VmAtomic wait_ns;
    /* The trace sessions' stopper thread (bp_session.c): started and
     * joined by the VM's set-up and end, nobody else. */
    pthread_t stopper;
    bool stopper_started;
} BpEngine;

/* bp_engine.c: records, staging helpers and the sequence. */
/* Stage 5 for a record the last trace_pattern left pending (r->pend):
 * staging := active, and an empty one idle or unlinked; bp_sync_all for
 * every one left. */
void bp_sync_record(BpEngine *E, BpRecord *r);
void bp_sync_all(BpEngine *E);
/* The records a function has, created (unarmed, empty) if asked; NULL
 * if none.  The common cases inline: staging a call on a large module
 * runs them for every function. */
BpRecord *bp_local_record_new(BpEngine *E, FuncInfo *fi);
BpRecord *bp_global_record_find(BpEngine *E, FuncInfo *fi, bool create);

static inline BpRecord *bp_local_record(BpEngine *E, FuncInfo *fi, bool create)
{
    BpRecord *r = vm_atomic_load_ptr_relaxed(&fi->bp);
    if (r && r->pend) {
        /* Its consolidation first (which may unlink it). */
        bp_sync_record(E, r);
        r = vm_atomic_load_ptr_relaxed(&fi->bp);
    }
    return r || !create ? r : bp_local_record_new(E, fi);
}

static inline BpRecord *bp_global_record(BpEngine *E, FuncInfo *fi, bool create)
{
    /* None linked: no export need be read (a cache miss per function in
     * a call on a large module that only ever traces locally). */
    if (!E->nglobal && !create)
        return NULL;
    return bp_global_record_find(E, fi, create);
}
void bp_touch_grow(BpEngine *E);

/* The next call's mark: odd, and neither it nor it + 1 ever 0, the mark
 * of a record just made (not even when the count wraps). */
static inline void bp_next_mark(BpEngine *E)
{
    E->mark += 2;
    if (E->mark == UINT32_MAX)
        E->mark = 1;
}

/* Adds r to the records the running call staged (once).  A record
 * already settled (bp_stage_settle: mark + 1) that is staged again is
 * settled again by the commit. */
static inline void bp_touch(BpEngine *E, BpRecord *r)
{
    if (!r || r->mark == E->mark)
        return;
    if (r->mark == E->mark + 1) {
        r->mark = E->mark;
        E->resettle = true;
        return;
    }
    /* A record made by this call has mark 0 (no call's mark is 0). */
    const bool fresh = r->mark == 0;
    r->mark = E->mark;
    if (E->ntouched == E->touched_cap)
        bp_touch_grow(E);
    E->touched[E->ntouched++] = (BpTouched){ .r = r, .fresh = fresh };
}

/* Session sid's entry in r's generation s (the staging one), created
 * empty if asked (the record is touched then); NULL if none. */
BpSess *bp_entry_many(BpEngine *E, BpRecord *r, unsigned s, unsigned sid, bool create);

/* The common cases inline, without a loop: no entry yet, or the record's
 * one entry is sid's (every call of a single session); bp_entry_many
 * for the rest (entries ordered by slot; one lives in the record,
 * BpRecord.one, two or more in an array of their own). */
static inline BpSess *bp_entry(BpEngine *E, BpRecord *r, unsigned s, unsigned sid, bool create)
{
    if (!r)
        return NULL;
    BpGen *g = &r->gen[s];
    if (g->nsess == 1 && bp_one(r, s)->sid == sid)
        return bp_one(r, s);
    if (g->nsess != 0)
        return bp_entry_many(E, r, s, sid, create);
    if (!create)
        return NULL;
    *bp_one(r, s) = (BpSess){ .sid = sid };
    g->nsess = 1;
    bp_touch(E, r);
    return bp_one(r, s);
}

void bp_stage_count(BpEngine *E, BpSess *e, bool fresh);
void bp_stage_time(BpEngine *E, BpSess *e, bool fresh);
void bp_stage_ms(BpEngine *E, struct TrMs **slot, struct TrMs *ms);
/* The same for e's call-trace spec, and its cached call_tf. */
void bp_stage_call_ms_slow(BpEngine *E, BpSess *e, struct TrMs *ms);

static inline void bp_stage_call_ms(BpEngine *E, BpSess *e, struct TrMs *ms)
{
    if (ms || e->match_spec)
        bp_stage_call_ms_slow(E, e, ms);
    else
        e->call_tf = 0;         /* no spec before or after: a plain call trace */
}

/* Drops e's references (counter, call time data, specs: into the lists
 * the free stage releases); bp_entry_clear also empties it. */
void bp_entry_release(BpEngine *E, BpSess *e);

/* Drops everything e holds (its flags become 0, its session stays).
 * Inline, and the release only if there is something to drop: a plain
 * call trace holds nothing, and this runs for every function a call
 * switches off. */
static inline void bp_entry_clear(BpEngine *E, BpSess *e)
{
    if (e->count || e->time || e->match_spec || e->meta_spec)
        bp_entry_release(E, e);
    *e = (BpSess){ .sid = e->sid };
}

/* An entry that holds a local call trace without a spec or nothing at
 * all: no reference to take or drop, nothing to keep. */
static inline bool bp_plain_entry(const BpSess *e)
{
    /* One test of every field OR-ed: the usual entry passes them all. */
    return ((e->flags & ~(uint32_t)BP_LOCAL) | e->call_tf | e->meta_tracer | (uintptr_t)e->count |
            (uintptr_t)e->match_spec | (uintptr_t)e->meta_spec | (uintptr_t)e->time) == 0;
}

/* Recomputes the summary of r's generation s from its entries, dropping
 * empty ones.  One entry or none (a single session: the common case)
 * inline: the summary is the entry's own settings. */
void bp_gen_summarize_many(BpEngine *E, BpRecord *r, unsigned s);

static inline void bp_gen_summarize(BpEngine *E, BpRecord *r, unsigned s)
{
    BpGen *g = &r->gen[s];
    if (g->nsess > 1) {
        bp_gen_summarize_many(E, r, s);
        return;
    }
    BpSess *e = g->nsess ? bp_one(r, s) : NULL;
    if (e && !e->flags) {
        bp_entry_clear(E, e);
        e = NULL;
        g->nsess = 0;
    }
    const uint32_t fl = e ? e->flags : 0;
    const bool call = fl & BP_CALL_TRACE;
    g->flags = fl;
    g->count = (fl & BP_COUNT_ACTIVE) ? e->count : NULL;
    g->call_tf = call ? e->call_tf : 0;
    g->call_sid = call ? e->sid : 0;
    /* (A kept entry has flags: plain means exactly BP_LOCAL.) */
    g->plain = e && bp_plain_entry(e);
}

void bp_gen_mirror(BpEngine *E, BpRecord *r, unsigned from);
int64_t bp_count_sum(const BpCount *c);
void bp_arm_unpublished(BpRecord *r);
void bp_begin(tvm_vm *vm);
/* Stage 2a's store for an existing record: BREAKPOINT over a local one's
 * code[0], or the export entry at a global one's trampoline (r->armed
 * changes only in stage 5). */
void bp_arm_global_early(BpEngine *E, BpRecord *r);

static inline void bp_arm_early(BpEngine *E, BpTouched *t)
{
    if (t->at)
        vm_code_patch(t->at, instr_make(OP_BREAKPOINT, 0, 0, 0));
    else
        bp_arm_global_early(E, t->r);
    t->early = true;
}

/* The end of stage 1 for one staged record: its generation s's summary
 * from its entries (bp_settle_one; bp_settle_act when the summary is
 * written already), and whether stage 2 arms it or stage 4 disarms it.
 * A record that existed before this call is armed right here (stage 2a:
 * the record is in cache, and the store needs no wait before it); one
 * this call created is left to stage 2b.  r->armed changes only in stage
 * 5, so with `early` it says what the code word is until then (a record
 * settled again, after it was staged again, sees its own early arm).
 * `at` is the local record's code word (NULL for a global one); the
 * saved word is read only for a disarm, so that a record being armed
 * has only its first line read (the plain step passes `at` too). */
static inline void bp_settle_act_at(BpEngine *E, BpTouched *t, unsigned s, Instr *at)
{
    BpRecord *r = t->r;
    r->mark = E->mark + 1;
    r->pend = (uint32_t)(t - E->touched) + 1;  /* if stage 5 is left to the next call */
    const bool on = r->gen[s].flags != 0;
    const bool armed = r->armed || t->early;
    t->at = at;
    t->act = on && !armed && t->fresh ? BP_ACT_ARM : !on && armed ? BP_ACT_DISARM : BP_ACT_NONE;
    E->acts |= 1u << t->act;
    if (on && !armed && !t->fresh)
        bp_arm_early(E, t);
    r->settled = (uint8_t)(t->act | (t->fresh ? BP_SETTLED_FRESH : 0) |
                           (t->early ? BP_SETTLED_EARLY : 0));
}

static inline void bp_settle_act(BpEngine *E, BpTouched *t, unsigned s)
{
    const BpRecord *r = t->r;
    bp_settle_act_at(E, t, s, bp_cold(r)->target ? NULL : &bp_cold(r)->fi->code[0]);
}

static inline void bp_settle_one(BpEngine *E, BpTouched *t, unsigned s)
{
    bp_gen_summarize(E, t->r, s);
    bp_settle_act(E, t, s);
}

/* Settles the records touched since the last settle.  bp_trace_pattern
 * settles a function's records right after staging it (still in cache);
 * bp_commit settles the rest. */
static inline void bp_stage_settle(BpEngine *E, unsigned s)
{
    /* (Locals: the settle's stores through records could alias E.) */
    BpTouched *const touched = E->touched;
    const size_t n = E->ntouched;
    for (size_t i = E->nsettled; i < n; i++)
        bp_settle_one(E, &touched[i], s);
    E->nsettled = n;
}

/* Stage 5's steps for one record, shared by bp_engine.c's
 * consolidate_one and bp_sync_plain.  Whether r was idle before the call
 * that settled it (linked before it, and not armed). */
static inline bool bp_was_idle(const BpRecord *r)
{
    return !(r->settled & BP_SETTLED_FRESH) && !r->armed;
}

/* r learns whether it is armed from what its settle decided, and is no
 * longer pending. */
static inline void bp_learn_armed(BpRecord *r)
{
    const unsigned d = r->settled, act = d & BP_SETTLED_ACT;
    if (act != BP_ACT_NONE)
        r->armed = act != BP_ACT_DISARM;
    else if (d & BP_SETTLED_EARLY)
        r->armed = true;
    r->pend = 0;
}

/* Whether a record stays linked after stage 5: one with flags does; an
 * empty one stays idle if its call keeps idle records (`keep`) and it is
 * idle already or there is room, else it is unlinked. */
static inline bool bp_stays_linked(const BpEngine *E, bool empty, bool was_idle, bool keep)
{
    return !empty || (keep && (was_idle || E->nidle < BP_IDLE_MAX));
}

/* E->nidle after that decision: idle from now on if it stays empty, no
 * longer idle otherwise (unlinked, or with flags). */
static inline void bp_count_idle(BpEngine *E, bool empty, bool was_idle, bool stays)
{
    E->nidle = empty && stays ? E->nidle + !was_idle : E->nidle - was_idle;
}

/*
 * bp_sync_record without the mirror, for a pending record whose two
 * generations hold at most one plain entry each (nothing referenced) and
 * whose staging generation the caller then writes whole (bp_pattern.c,
 * stage_plain: staging := active and the change it stages, in one step);
 * `active` is the active index.  Stage 5's bookkeeping for the case that
 * keeps the record: false, and nothing done, if it would be unlinked
 * (empty, and no room among the idle ones); the caller then takes the
 * general way.
 */
static inline bool bp_sync_plain(BpEngine *E, BpRecord *r, unsigned active)
{
    VM_ASSERT(E->pend[r->pend - 1].r == r && r->mark == E->pend_mark,
              "a pending record's entry names it");
    const bool was_idle = bp_was_idle(r);
    const bool empty = r->gen[active].flags == 0;
    if (!bp_stays_linked(E, empty, was_idle, true))
        return false;
    bp_count_idle(E, empty, was_idle, true);
    E->npend_left--;
    bp_learn_armed(r);
    return true;
}

void bp_commit(tvm_vm *vm);
void bp_end(tvm_vm *vm);

/* Frees every call hook ever set (bp_engine_destroy; bp_api.c). */
void bp_hooks_free(tvm_vm *vm);

#endif /* BREAKPOINTS_BP_ENGINE_INTERNAL_H */
