/*
 * breakpoints/bp_engine.c - the breakpoint sequence: trace_pattern without
 * stopping any scheduler.
 *
 * Protocol: changing breakpoints while every scheduler runs.
 *
 * Terms.  A *record* (vm/breakpoint.h) hangs off a function (local) or off a
 * trampoline (global) and holds two *generations* of flags and data.  The
 * *active index* vm->bp_ix says which generation readers use; the other
 * is the *staging* generation.  A record is *armed* when calls reach it:
 * a local one once BREAKPOINT is stored over its function's code[0], a
 * global one once the export entry points at its trampoline.  A *wait* is
 * a thread-progress wait (progress.h): when it returns, every scheduler
 * and every foreign thread inside tvm_call has passed a quiescent state
 * (between two processes, or offline) after everything written before it.
 *
 * Who runs what.  Readers are the BREAKPOINT instructions executing on
 * any number of threads at any time; a reader loads the record, the index
 * (relaxed) and the generation's fields and copies out what it needs, and
 * never keeps any of it across a quiescent state.  The writer is whoever
 * holds the code-modification permission (vm/codeperm.h): trace_pattern or
 * a module load, one at a time.  Only the writer writes records, the
 * index, code[0] of armed functions and export entries.  Readers never
 * wait for the writer and the writer never stops a reader.
 *
 * The sequence (each stage below says why it is safe while every
 * scheduler keeps running):
 *   1 stage:       write the staging generation of every record touched;
 *                  create and link new records (both generations empty);
 *                  settle each (its summary, and whether to arm or
 *                  disarm it, noted in the touched list).
 *   2a arm early:  at its settle, store BREAKPOINT / point the export at
 *                  the trampoline of a record that existed before this
 *                  call (an idle one) whose staging generation has flags.
 *   wait
 *   2b arm:        the same for records this call created.
 *   wait           (only if 2b armed any)
 *   3 flip:        active index := staging.
 *   4 disarm:      restore code[0] / the export for records whose (now
 *                  active) flags are all off.
 *   wait
 *   5 consolidate: staging := active for every record touched; a record
 *                  with no flags stays linked as an idle record (up to
 *                  BP_IDLE_MAX), or is unlinked.  A trace_pattern leaves
 *                  this stage to the next engine call (bp_sync_record,
 *                  bp_sync_all), which does it for a record when it
 *                  finds it, before writing its staging generation, and
 *                  for the rest before its first wait.
 *   wait
 *   6 free:        free unlinked records, trampolines and counters.
 * The wait before stage 6 is the first wait of the next trace_pattern,
 * which runs stage 6 for its predecessors right after it.  So a call
 * costs two waits (one before the flip, one after), and a third only
 * when it creates records; a breakpoint set again where one was removed
 * finds its idle record and needs no third.
 *
 * Guarantees.  (a) A reader sees one whole generation: the generation it
 * indexes was written before a wait that preceded the flip it saw, and is
 * not written again until this call's stage 5 or a later call's stage 1
 * (where a deferred stage 5 runs), both after this call's wait following
 * the flip, i.e. after the reader's next quiescent state.  Deferring
 * stage 5 changes no reader's view: until the next flip, readers use
 * only the active generation, which stage 5 never writes, and the next
 * flip comes after the next call's first wait, which follows every
 * deferred stage 5 (bp_sync_all runs before it).  (b) No reader uses a freed record or counter: a record is
 * unlinked only after a wait that follows its disarming (from then on no
 * reader can reach it, and none is still inside its breakpoint), or, if it
 * was never armed, no reader ever reached it; it is freed after yet
 * another wait.  An idle record is disarmed the same way and stays
 * linked.  A counter is freed only after waits that follow the flip of
 * its call, after which no reader uses the generation that held it.
 * (c) When trace_pattern returns, every later call sees the new
 * settings: the flip was followed by a wait, so every thread's next hit
 * loads the new index.
 *
 * Why an existing record may be armed before the first wait: a reader
 * that hits it reads fi->bp and the active generation, both written
 * before the waits of an earlier call (the record was linked then, and
 * its active generation is the one consolidated then), and an idle
 * record's active generation is empty, so the hit runs the saved word
 * (also written before those waits): the call behaves as unarmed.  A
 * record this call created was written without a wait yet, so it is
 * armed after the first one.  Why the disarm needs no wait of its own
 * before it: it follows the flip, so a reader that still hits such a
 * record with the old index reads the old generation, intact until
 * stage 5 (after that wait), and one with the new index an empty one;
 * the one wait after the flip then covers both: after it no reader uses
 * the old index and none is inside a disarmed breakpoint.
 * The Promela model tests/model/bp_protocol.pml checks (a)-(c).
 *
 * Memory ordering, on both machines.  The protocol orders nothing with
 * its own barriers: every edge is a wait.  A wait is a QSBR grace period
 * (vm/progress.c), and liburcu puts a full barrier (cmm_smp_mb: mfence on
 * x86_64, dmb ish on aarch64) in synchronize_rcu before it reads the
 * readers' counters and in every quiescent-state report around the
 * reader's counter store.  So a reader's loads after the quiescent state
 * the grace period saw come after the writer's stores before the wait on
 * either machine, whatever the reader's loads are (relaxed loads of the
 * index, the record and the generation; the code word, a single aligned
 * 64-bit access, which ARMv8 makes single-copy atomic as x86 does).  A
 * reader that sees the flipped index is in a run that began after its
 * quiescent state (the grace period before the flip waited for it), so
 * it sees the generation written before that wait.  The reader's loads
 * within one run need no order among themselves: everything they read was
 * written before the wait that preceded the run.  Nothing here relies on
 * TSO.
 *
 * Stop-the-world baseline (tvm_config.stop_the_world_tracing, for the
 * benchmark only): the same stages run with every other scheduler parked
 * at a barrier and no waits, as BEAM did before R16.  Foreign threads
 * inside tvm_call are not parked in that mode.
 */
#include "breakpoints/bp.h"

#include <stdlib.h>
#include <string.h>

#include "breakpoints/bp_engine_internal.h"
#include "breakpoints/bp_frame.h"
#include "breakpoints/bp_session.h"
#include "vm/progress.h"
#include "vm/breakpoint.h"
#include "breakpoints/bp_time.h"
#include "trace/tr_ms.h"
#include "vm/sched.h"
#include "vm/timer.h"

/* ==== records and counters (writer only) ==== */

static BpCount *count_new(BpEngine *E)
{
    BpCount *c = vm_calloc(1, sizeof(BpCount) + E->nshards * sizeof(BpShard));
    c->nshards = E->nshards;
    return c;
}

static BpCount *count_ref(BpCount *c)
{
    if (c)
        c->refs++;
    return c;
}

/* Drops a generation's reference; the counter is freed in stage 6. */
static void count_unref(BpEngine *E, BpCount *c)
{
    if (c && --c->refs == 0) {
        c->next_free = E->count_free;
        E->count_free = c;
    }
}

static BpTime *time_ref(BpTime *t)
{
    if (t)
        t->refs++;
    return t;
}

/* Drops a generation's reference to call time data (freed in stage 6,
 * like a counter: bp_time.c says why that is safe). */
static void time_unref(BpEngine *E, BpTime *t)
{
    if (t && --t->refs == 0) {
        t->next_free = E->time_free;
        E->time_free = t;
    }
}

int64_t bp_count_sum(const BpCount *c)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < c->nshards; i++)
        sum += vm_atomic_load_relaxed(&c->shard[i].n);
    return (int64_t)sum;
}

/*
 * Records come from a pool of freed ones: toggling a pattern on a large
 * module frees and re-creates thousands of records per call, and malloc
 * and free were a fifth of such a call's CPU time.  A pooled record is one
 * the free stage released (no reader can reach it), so reusing it is as
 * safe as a fresh allocation.  The pool is an array, not a chain through
 * the records: taking one names the next ones, which are read ahead.
 *
 * Fresh records are carved in order from slabs of BP_SLAB records
 * (vm/breakpoint.h), so that the records of a module, created in the
 * order of its functions by the call that first staged them, lie in that
 * order in memory: the next call's pass over the module reads their hot
 * lines in address order, one after the other, which the hardware
 * prefetchers follow.  (One aligned_alloc each, before, scattered them
 * and spent 384 bytes on a 256-byte record.)  A slab is freed only with
 * the engine, so a freed record always goes to the pool: the records
 * alive at once are at most two per function loaded (a local one and a
 * global one), and code itself stays allocated while the VM lives, so
 * the pool never holds more than the code's own size allows.
 * AddressSanitizer builds (slabs of one) free each record at once, so
 * that ASan sees every free and reuse.
 */

void bp_recvec_push(BpRecVec *l, BpRecord *r)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->v = vm_realloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = r;
}

/* A fresh record's memory: the current slab's next one, or a new slab. */
static BpRecord *record_carve(BpEngine *E)
{
    if (E->slab_left == 0) {
        BpRecord *slab = aligned_alloc(BP_SLAB_BYTES, BP_SLAB_BYTES);
        if (!slab)
            vm_die("out of memory");
        if (BP_SLAB == 1)
            return slab;        /* freed alone (record_free) */
        if (E->nslabs == E->slabs_cap) {
            E->slabs_cap = E->slabs_cap ? 2 * E->slabs_cap : 16;
            E->slabs = vm_realloc(E->slabs, E->slabs_cap * sizeof *E->slabs);
        }
        E->slabs[E->nslabs++] = slab;
        E->slab_next = slab;
        E->slab_left = BP_SLAB;
    }
    E->slab_left--;
    return E->slab_next++;
}

static BpRecord *record_new(BpEngine *E)
{
    BpRecVec *p = &E->pool;
    BpRecord *r;
    if (!p->n) {
        r = record_carve(E);
    } else {
        r = p->v[--p->n];
        if (p->n >= BP_AHEAD)
            bp_prefetch(p->v[p->n - BP_AHEAD]);  /* the one a later call takes */
    }
    memset(r, 0, sizeof *r);
    memset(bp_cold(r), 0, sizeof(BpCold));
    return r;
}

static void record_free(BpEngine *E, BpRecord *r)
{
    if (BP_SLAB == 1) {
        free(r);
        return;
    }
    bp_recvec_push(&E->pool, r);
}

static void link_record(BpEngine *E, BpRecord *r)
{
    BpCold *c = bp_cold(r);
    c->next = E->records;
    c->prev = NULL;
    if (E->records)
        bp_cold(E->records)->prev = r;
    E->records = r;
}

static void unlink_record(BpEngine *E, BpRecord *r)
{
    BpCold *c = bp_cold(r);
    if (c->prev)
        bp_cold(c->prev)->next = c->next;
    else
        E->records = c->next;
    if (c->next)
        bp_cold(c->next)->prev = c->prev;
    /* The function (or export) forgets the record now, so the next call
     * creates a fresh one; the record itself is freed after a wait. */
    if (c->target) {
        E->nglobal--;
        if (c->export->bp_tramp == c->fi)
            c->export->bp_tramp = NULL;
    } else {
        vm_atomic_store_ptr_release(&c->fi->bp, NULL);
    }
    bp_recvec_push(&E->unlinked[c->target != NULL], r);
}

/* A new local record for fi, which has none (unarmed, empty). */
BpRecord *bp_local_record_new(BpEngine *E, FuncInfo *fi)
{
    BpRecord *r = record_new(E);
    VM_ASSERT(fi->code[0] == fi->bp_orig, "a function without a record is not armed");
    bp_cold(r)->fi = fi;
    link_record(E, r);
    /* A release store, though relaxed would do: no reader can reach r
     * before it is armed, and arming comes after a wait, which orders the
     * record's initialisation before any reader's load of fi->bp. */
    vm_atomic_store_ptr_release(&fi->bp, r);
    return r;
}

BpRecord *bp_global_record_find(BpEngine *E, FuncInfo *fi, bool create)
{
    Export *e = fi->export;
    if (!e)
        return NULL;
    if (e->bp_tramp) {
        BpRecord *r = vm_atomic_load_ptr_relaxed(&e->bp_tramp->bp);
        if (!r->pend)
            return r;
        bp_sync_record(E, r);   /* its consolidation first (may unlink it) */
        if (e->bp_tramp)
            return r;
    }
    if (!create)
        return NULL;
    FuncInfo *t = vm_func_alloc(1);
    t->module = fi->module;
    t->mod = fi->mod;
    t->name = fi->name;
    t->arity = fi->arity;
    t->nregs = fi->nregs;
    t->file = fi->file;
    t->export = e;
    t->real = fi;
    vm_func_set_entry(t, instr_make(OP_BREAKPOINT_TRAMP, 0, 0, 0));
    BpRecord *r = record_new(E);
    BpCold *c = bp_cold(r);
    c->target = fi;
    c->fi = t;
    c->export = e;
    link_record(E, r);
    E->nglobal++;
    vm_atomic_store_ptr_release(&t->bp, r);
    e->bp_tramp = t;
    return r;
}

/* bp_touch's slow path: room for more touched records. */
void bp_touch_grow(BpEngine *E)
{
    E->touched_cap = E->touched_cap ? E->touched_cap * 2 : 256;
    E->touched = vm_realloc(E->touched, E->touched_cap * sizeof *E->touched);
}

/* Replaces a staging entry's counter (a fresh one, or none). */
void bp_stage_count(BpEngine *E, BpSess *e, bool fresh)
{
    count_unref(E, e->count);
    e->count = fresh ? count_ref(count_new(E)) : NULL;
}

/*
 * Match specs are shared by every generation that uses them (one spec per
 * trace_pattern call, however many functions it matched), one reference
 * per entry slot.  A slot's reference is dropped into ms_dead and
 * released at the next free stage, after a wait, like a counter: a reader
 * may still be running the spec through the generation it was read from
 * until its next quiescent state.
 */
static void ms_drop(BpEngine *E, TrMs *ms)
{
    if (!ms)
        return;
    if (E->nms_dead == E->ms_dead_cap) {
        E->ms_dead_cap = E->ms_dead_cap ? E->ms_dead_cap * 2 : 64;
        E->ms_dead = vm_realloc(E->ms_dead, E->ms_dead_cap * sizeof(TrMs *));
    }
    E->ms_dead[E->nms_dead++] = ms;
}

/* Points a staging entry's spec slot at ms (a new reference). */
void bp_stage_ms(BpEngine *E, TrMs **slot, TrMs *ms)
{
    if (*slot == ms)
        return;
    ms_drop(E, *slot);
    if (ms)
        tr_ms_retain(ms);
    *slot = ms;
}

void bp_stage_call_ms_slow(BpEngine *E, BpSess *e, TrMs *ms)
{
    unsigned f = 0;
    bp_stage_ms(E, &e->match_spec, ms);
    if (!ms)
        e->call_tf = 0;
    else if (!tr_ms_plain(ms, &f))
        e->call_tf = BP_SPEC_RUN;
    else
        e->call_tf = ((f & TR_MS_RETURN_TRACE) ? BP_TF_RETURN : 0) |
                     ((f & TR_MS_EXCEPTION_TRACE) ? BP_TF_RETURN | BP_TF_EXCEPTION : 0);
}

static void ms_release(TrMs **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tr_ms_free(v[i]);
    free(v);
}

/* Replaces a staging entry's call time data (fresh, or none). */
void bp_stage_time(BpEngine *E, BpSess *e, bool fresh)
{
    time_unref(E, e->time);
    e->time = fresh ? time_ref(bp_time_new(E->nshards)) : NULL;
}

void bp_entry_release(BpEngine *E, BpSess *e)
{
    if (e->count)
        count_unref(E, e->count);
    if (e->time)
        time_unref(E, e->time);
    ms_drop(E, e->match_spec);
    ms_drop(E, e->meta_spec);
}

/*
 * bp_entry's general case: several entries, or one of another session.
 * Entries are ordered by slot; a generation with exactly one keeps it in
 * the record (BpRecord.one), two or more in an array of its own.
 */
BpSess *bp_entry_many(BpEngine *E, BpRecord *r, unsigned s, unsigned sid, bool create)
{
    BpGen *g = &r->gen[s];
    BpSess *v = bp_gen_entries_at(r, s);
    unsigned slot = vm_sid_slot(sid);
    uint32_t i = 0;
    for (; i < g->nsess; i++) {
        BpSess *e = &v[i];
        unsigned es = vm_sid_slot(e->sid);
        if (es == slot && e->sid == sid)
            return e;
        if (es == slot) {
            /* An ended incarnation's entry (its destroy removes it, so
             * only a request racing that destroy could meet one). */
            if (!create)
                return NULL;
            bp_entry_clear(E, e);
            e->sid = sid;
            bp_touch(E, r);
            return e;
        }
        if (es > slot)
            break;
    }
    if (!create)
        return NULL;
    /* Safe to reallocate: nobody reads the staging generation. */
    if (g->nsess == 1) {
        v = vm_malloc(2 * sizeof *v);
        v[0] = *bp_one(r, s);
    } else {
        v = vm_realloc(v, (g->nsess + 1) * sizeof *v);
    }
    bp_cold(r)->many[s] = v;
    memmove(&v[i + 1], &v[i], (g->nsess - i) * sizeof *v);
    g->nsess++;
    v[i] = (BpSess){ .sid = sid };
    bp_touch(E, r);
    return &v[i];
}

/* Where a generation of k entries keeps them, its first k entries now
 * being where its nsess were: the record's own slot for one, its array
 * (kept) for more. */
static void sess_settle(BpRecord *r, unsigned s, uint32_t k)
{
    BpGen *g = &r->gen[s];
    if (g->nsess > 1 && k <= 1) {
        if (k == 1)
            *bp_one(r, s) = bp_cold(r)->many[s][0];
        free(bp_cold(r)->many[s]);
        bp_cold(r)->many[s] = NULL;
    }
    g->nsess = (uint16_t)k;
}

/* bp_gen_summarize for two or more entries. */
void bp_gen_summarize_many(BpEngine *E, BpRecord *r, unsigned s)
{
    BpGen *g = &r->gen[s];
    uint32_t k = 0, ncount = 0, ncall = 0, flags = 0;
    bool plain = true;
    BpCount *count = NULL;
    const BpSess *call = NULL;
    BpSess *v = bp_cold(r)->many[s];
    for (uint32_t i = 0; i < g->nsess; i++) {
        BpSess *e = &v[i];
        if (!e->flags) {
            bp_entry_clear(E, e);
            continue;
        }
        v[k++] = *e;
    }
    sess_settle(r, s, k);
    v = bp_gen_entries_at(r, s);
    for (uint32_t i = 0; i < k; i++) {
        const BpSess *e = &v[i];
        flags |= e->flags;
        if (e->flags & BP_COUNT_ACTIVE) {
            ncount++;
            count = e->count;
        }
        if (e->flags & BP_CALL_TRACE) {
            ncall++;
            call = e;
            plain &= !(e->call_tf & BP_SPEC_RUN);
        }
    }
    if (ncall > 1 && plain)
        flags |= BP_CALL_MULTI;
    if (ncount > 1) {
        flags = (flags & ~(uint32_t)BP_COUNT_ACTIVE) | BP_COUNT_MULTI;
        count = NULL;
    }
    g->flags = flags;
    g->count = count;
    g->plain = 0;               /* (one entry left is still the general way's) */
    g->call_tf = ncall > 1 ? BP_SPEC_RUN : call ? call->call_tf : 0;
    g->call_sid = ncall == 1 ? call->sid : 0;
}

/* Drops every entry of r's generation s (references released) and its
 * summary. */
static void gen_release(BpEngine *E, BpRecord *r, unsigned s)
{
    BpGen *g = &r->gen[s];
    BpSess *v = bp_gen_entries_at(r, s);
    for (uint32_t i = 0; i < g->nsess; i++)
        bp_entry_clear(E, &v[i]);
    sess_settle(r, s, 0);
    g->flags = 0;
    g->plain = 0;
    g->count = NULL;
    g->call_tf = 0;
    g->call_sid = 0;
}

/* References for a copy of e (taken before the copy's target drops its
 * own, so a shared object never reaches 0 on the way). */
static inline void entry_retain(const BpSess *e)
{
    count_ref(e->count);
    time_ref(e->time);
    if (e->match_spec)
        tr_ms_retain(e->match_spec);
    if (e->meta_spec)
        tr_ms_retain(e->meta_spec);
}

/* bp_gen_mirror when neither generation has more than one entry: both
 * live in the record (one[]), so the copy is two structures. */
static inline void mirror_one(BpEngine *E, BpRecord *r, unsigned from)
{
    const unsigned t = from ^ 1u;
    BpGen *to = &r->gen[t];
    const BpGen *g = &r->gen[from];
    if (g->nsess)
        entry_retain(bp_one(r, from));
    if (to->nsess)
        bp_entry_clear(E, bp_one(r, t));
    if (g->nsess)
        *bp_one(r, t) = *bp_one(r, from);
    *to = *g;
}

/* gen[from ^ 1] := gen[from], sharing counters, call time data and
 * match specs (references taken before the old ones are dropped, so a
 * shared object never reaches 0 on the way). */
void bp_gen_mirror(BpEngine *E, BpRecord *r, unsigned from)
{
    const unsigned t = from ^ 1u;
    BpGen *to = &r->gen[t], *g = &r->gen[from];
    if (g->nsess <= 1 && to->nsess <= 1) {
        mirror_one(E, r, from);
        return;
    }
    BpSess *src = bp_gen_entries_at(r, from), *old = bp_gen_entries_at(r, t);
    for (uint32_t i = 0; i < g->nsess; i++)
        entry_retain(&src[i]);
    for (uint32_t i = 0; i < to->nsess; i++)
        bp_entry_clear(E, &old[i]);
    /* An array of the right size is kept (a session's change in a record
     * of several rewrites it in place); otherwise to's storage follows g's
     * count. */
    BpSess *keep = to->nsess == g->nsess && g->nsess > 1 ? old : NULL;
    if (!keep)
        sess_settle(r, t, 0);
    BpSess *dst = keep ? keep : g->nsess == 1 ? bp_one(r, t)
                : g->nsess ? vm_malloc(g->nsess * sizeof *dst) : NULL;
    if (g->nsess)
        memcpy(dst, src, g->nsess * sizeof *dst);
    *to = *g;
    if (g->nsess > 1)
        bp_cold(r)->many[t] = dst;
}

/* Drops both generations' entries. */
static void gens_release(BpEngine *E, BpRecord *r)
{
    gen_release(E, r, 0);
    gen_release(E, r, 1);
}

/* ==== arming ==== */

static void arm(tvm_vm *vm, BpRecord *r)
{
    const BpCold *c = bp_cold(r);
    if (c->target) {
        /* Remote calls read addr[active code index]; loads cannot run
         * meanwhile (they need the permission), so that index is stable. */
        unsigned ix = vm_code_ix(vm);
        vm_atomic_store_ptr_release(&c->export->addr[ix], c->fi);
    } else {
        vm_code_patch(&c->fi->code[0], instr_make(OP_BREAKPOINT, 0, 0, 0));
    }
    r->armed = true;
}

void bp_arm_global_early(BpEngine *E, BpRecord *r)
{
    arm(E->vm, r);
    r->armed = false;   /* learnt in stage 5 (BP_SETTLED_EARLY) */
}

/* Arms a record of a module that is not installed yet (vm_hook_module_loading):
 * a global one is armed by the install itself, which points the export
 * entry at e->bp_tramp. */
void bp_arm_unpublished(BpRecord *r)
{
    const BpCold *c = bp_cold(r);
    if (!c->target)
        vm_code_patch(&c->fi->code[0], instr_make(OP_BREAKPOINT, 0, 0, 0));
    r->armed = true;
}

static void disarm(BpRecord *r)
{
    const BpCold *c = bp_cold(r);
    if (c->target) {
        /* Every slot still naming the trampoline: a slot of an older code
         * index is read only by a caller that loaded that index before
         * this call's waits, so none will; this keeps later loads, which
         * copy the active slot, from ever resurrecting the trampoline. */
        for (int k = 0; k < VM_CODE_IX_COUNT; k++)
            if (vm_atomic_load_ptr_relaxed(&c->export->addr[k]) == c->fi)
                vm_atomic_store_ptr_release(&c->export->addr[k], c->target);
    } else {
        vm_code_patch(&c->fi->code[0], c->fi->bp_orig);
    }
    r->armed = false;
}

/* ==== the sequence ==== */

/* Stage 2a, 2b or 4 for the records whose settle asked for `act`: the store
 * to a local record's code word from the touched list alone, a global
 * record through the record.  True if any. */
static bool patch_pass(tvm_vm *vm, int act)
{
    BpEngine *E = vm->bp;
    const BpTouched *touched = E->touched;
    const size_t n = E->ntouched;
    const Instr bp = instr_make(OP_BREAKPOINT, 0, 0, 0);
    bool any = false;
    if (!(E->acts & (1u << act)))
        return false;           /* no settle asked for it */
    for (size_t i = 0; i < n; i++) {
        const BpTouched *t = &touched[i];
        if (i + 2 * BP_AHEAD < n && touched[i + 2 * BP_AHEAD].at)
            bp_prefetch(touched[i + 2 * BP_AHEAD].at);
        if ((int)t->act != act)
            continue;
        any = true;
        if (t->at)
            vm_code_patch(t->at, act == BP_ACT_DISARM ? func_of_code(t->at)->bp_orig : bp);
        else if (act == BP_ACT_DISARM)
            disarm(t->r);
        else
            arm(vm, t->r);
    }
    return any;
}

/* Stage 5 for a record's linking: one that ends with no flags becomes
 * idle (stays linked, for the next call that sets a breakpoint there) if
 * its call keeps idle records (`keep`) and there is room, else it is
 * unlinked; E->nidle follows. */
static void settle_idle(BpEngine *E, BpRecord *r, bool empty, bool was_idle, bool keep)
{
    const bool stays = bp_stays_linked(E, empty, was_idle, keep);
    bp_count_idle(E, empty, was_idle, stays);
    if (!stays)
        unlink_record(E, r);
}

/* Stage 5 for one record r staged by a call whose settle decided
 * r->settled: it learns whether it is armed, staging := active (`from`),
 * and an empty one becomes idle or is unlinked (settle_idle). */
static inline __attribute__((always_inline)) void consolidate_one(BpEngine *E, BpRecord *r,
                                                                  unsigned from, bool keep_idle)
{
    const bool was_idle = bp_was_idle(r);
    bp_learn_armed(r);
    if (r->gen[0].nsess <= 1 && r->gen[1].nsess <= 1)
        mirror_one(E, r, from);
    else
        bp_gen_mirror(E, r, from);
    settle_idle(E, r, r->gen[from ^ 1u].flags == 0, was_idle, keep_idle);
}

/* The active index, as the engine (the permission's holder) reads it. */
static unsigned active_ix(const BpEngine *E)
{
    return (unsigned)vm_atomic_load_relaxed(&E->vm->bp_ix);
}

void bp_sync_record(BpEngine *E, BpRecord *r)
{
    VM_ASSERT(E->pend[r->pend - 1].r == r && r->mark == E->pend_mark,
              "a pending record's entry names it");
    consolidate_one(E, r, active_ix(E), true);
    E->npend_left--;
}

void bp_sync_all(BpEngine *E)
{
    const unsigned from = active_ix(E);
    /* (Done once none is left: a call on the same functions as the last
     * one has found them all.) */
    for (size_t i = 0; i < E->npend && E->npend_left; i++) {
        if (i + BP_AHEAD < E->npend)
            bp_prefetch_record(E->pend[i + BP_AHEAD].r);
        BpRecord *r = E->pend[i].r;
        /* Done by this call already (pend 0), and perhaps staged again
         * (its mark is then this call's).  Not freed yet either way: what
         * this call unlinks is freed after its first wait, which follows. */
        if (!r->pend || r->mark != E->pend_mark)
            continue;
        consolidate_one(E, r, from, true);
        E->npend_left--;
    }
    VM_ASSERT(E->npend_left == 0, "every pending record is in the list");
    E->npend = 0;
}

/* A thread-progress wait, or nothing with the world stopped. */
static void wait_progress(tvm_vm *vm)
{
    if (vm->bp->stw)
        return;
    VmProgress *bp = vm_progress_get(vm);
    const uint64_t t0 = vm_now_ns();
    vm_progress_sync(bp, vm_running_process());
    vm_atomic_fetch_add_relaxed(&vm->bp->wait_ns, vm_now_ns() - t0);
    vm_atomic_fetch_add_relaxed(&vm->bp->waits, 1);
}

/* Frees what stage 5 unlinked and what lost its last reference. */
static void free_dead(BpEngine *E, BpRecVec recs[2], BpCount *counts, BpTime *times)
{
    while (times) {
        BpTime *t = times;
        times = t->next_free;
        bp_time_free(t);
    }
    for (size_t i = 0; i < recs[0].n; i++)
        record_free(E, recs[0].v[i]);
    for (size_t i = 0; i < recs[1].n; i++) {
        BpRecord *r = recs[1].v[i];
        free(bp_cold(r)->fi);    /* the trampoline */
        record_free(E, r);
    }
    recs[0].n = recs[1].n = 0;
    while (counts) {
        BpCount *c = counts;
        counts = c->next_free;
        free(c);
    }
}

/* The running commit's free stage (or the destroy's, if its process
 * never came back from the wait before it). */
static void free_dying(BpEngine *E)
{
    free_dead(E, E->dying, E->dying_counts, E->dying_times);
    ms_release(E->dying_ms, E->ndying_ms);
    E->dying_counts = NULL;
    E->dying_times = NULL;
    E->dying_ms = NULL;
    E->ndying_ms = 0;
}

static void free_unlinked(BpEngine *E)
{
    free_dead(E, E->unlinked, E->count_free, E->time_free);
    E->count_free = NULL;
    E->time_free = NULL;
}

/*
 * Stages 2-6 for the records stage 1 touched (E->touched, staging
 * generation written).  Called with the permission held.
 */
void bp_commit(tvm_vm *vm)
{
    BpEngine *E = vm->bp;
    if (!E->ntouched)
        return;
    const unsigned active = (unsigned)vm_atomic_load_relaxed(&vm->bp_ix);
    const unsigned staging = active ^ 1u;
    /* Stage 5 of the last trace_pattern for the records this call did not
     * stage (those it staged were done when it found them): before this
     * call's first wait, so that the flip finds their generations equal. */
    bp_sync_all(E);
    /* Stage 1's end: each touched generation's summary from its entries
     * (the hit reads the summary; sessions' entries stay out of line). */
    if (E->resettle)
        E->nsettled = 0;
    for (size_t i = E->nsettled; i < E->ntouched; i++) {
        if (i + BP_AHEAD < E->ntouched)
            bp_prefetch_record(E->touched[i + BP_AHEAD].r);
        bp_settle_one(E, &E->touched[i], staging);
    }
    E->nsettled = E->ntouched;
    const BpTouched *touched = E->touched;
    const size_t n = E->ntouched;
    /* What earlier calls unlinked (records, trampolines) and released
     * (counters): their free stage comes after this call's first wait. */
    /* (The lists trade places: both arrays are kept for reuse.) */
    for (int k = 0; k < 2; k++) {
        const BpRecVec dying = E->dying[k];
        E->dying[k] = E->unlinked[k];
        E->unlinked[k] = dying;
    }
    E->dying_counts = E->count_free;
    E->dying_times = E->time_free;
    E->dying_ms = E->ms_dead;
    E->ndying_ms = E->nms_dead;
    E->count_free = NULL;
    E->time_free = NULL;
    E->ms_dead = NULL;
    E->nms_dead = E->ms_dead_cap = 0;

    /* 2a arm early: done by the settles above (bp_settle_one), for the
     * records that existed before this call.  Safe: a reader that hits
     * one reads fi->bp, the record's immutable words and its active
     * generation, all written before an earlier call's waits, and the
     * generation is empty (an idle record: the hit runs the saved word, as
     * unarmed), so arming changes no behaviour yet; the single aligned
     * store means a reader fetches either the old word or BREAKPOINT,
     * never a mix.  A record learns that it is armed in stage 5, and
     * nothing in between but a settle reads that (BpTouched.early tells
     * it): a VM destroyed meanwhile (bp_engine_destroy) disarms every
     * record, armed or not. */

    /* wait: every reader that reaches a record linked or written in stage
     * 1 sees it whole; until the flip they only read the active
     * generation, which stage 1 did not touch. */
    wait_progress(vm);

    /* 6 free (of the calls before).  Safe: an unlinked record was disarmed
     * before a wait of its own call, which was followed by this one, so no
     * reader can reach it and none is still inside its breakpoint (or it
     * was never armed, and no reader ever reached it); a released counter
     * belongs to a generation no reader has used since the wait after its
     * call's flip. */
    free_dying(E);

    /* 2b arm (records this call created).  Safe as 2a, now that the wait
     * has published the new records: their active generation is empty.
     * What to arm was decided at the settle (r->armed changes only in
     * stage 5, so the decision still holds). */
    const bool armed_any = patch_pass(vm, BP_ACT_ARM);
    /* wait: every armed word is seen before any reader sees the new
     * index, so a call that should hit a new breakpoint under the new
     * index does (2a's words were stored before the first wait). */
    if (armed_any)
        wait_progress(vm);

    /* 3 flip.  Safe: readers that loaded the old index keep using the old
     * generation, which stays intact until stage 5 of this call (after a
     * wait); readers loading the new one find it complete (stage 1 was
     * followed by a wait). */
    vm_atomic_store_relaxed(&vm->bp_ix, staging);

    /* 4 disarm, right after the flip.  Safe: the new active generation of
     * these records is empty, so a reader that hits one with the new index
     * just runs the saved word, exactly as after the store; one that
     * loaded the old index reads the old generation, intact until stage 5;
     * the store is one aligned word again. */
    patch_pass(vm, BP_ACT_DISARM);
    /* wait: no reader uses the old index any more, and none is inside a
     * disarmed record's breakpoint; from here on, every call sees the
     * new settings. */
    wait_progress(vm);

    /* 5 consolidate.  Safe: readers use only the active generation, and
     * nothing here writes it; the old one, written here, has had no reader
     * since the wait after the flip.  An empty record (disarmed, or never
     * armed) becomes idle: it stays on its function, for the next call
     * that sets a breakpoint there (a trace_pattern keeps up to
     * BP_IDLE_MAX), or it is unlinked: off the engine's list, and its
     * function's `bp` slot (or its export's trampoline) forgets it.  No
     * BREAKPOINT reaches it since the wait after the disarm, but a
     * call_time charge may still look the function's record up (bp_time.c
     * reads fn->bp when a time frame returns) until its next quiescent
     * state: it finds the active generation empty, as the summary left it
     * (no entry, no flags), which is why the empty record's generations
     * are not released here (the mirror emptied the old one; writing the
     * active one again, even with the same values, would race with that
     * read), and why an unlinked one is freed only after the next call's
     * first wait. */
    if (E->keep_idle) {
        /* A trace_pattern leaves its stage 5 to the next engine call, which
         * does it for each record as it finds it (bp_local_record and
         * bp_global_record_find, when its stage reads the record anyway)
         * and for the rest before its first wait (bp_sync_all): one pass
         * over the records per call instead of two. */
        BpTouched *done = E->pend;
        const size_t cap = E->pend_cap;
        E->pend = E->touched;
        E->pend_cap = E->touched_cap;
        E->npend = E->npend_left = n;
        E->pend_mark = E->mark + 1;     /* every record's, settled */
        E->touched = done;
        E->touched_cap = cap;
    } else {
        for (size_t i = 0; i < n; i++) {
            if (i + BP_AHEAD < n)
                bp_prefetch_record(touched[i + BP_AHEAD].r);
            consolidate_one(E, touched[i].r, staging, false);
        }
    }
    E->ntouched = 0;
    E->nsettled = 0;
    E->resettle = false;
    E->acts = 0;
    bp_next_mark(E);
    /* The wait before the free stage of what this call unlinked is the
     * next call's first wait (above): the records stay unreachable until
     * then, and waiting costs this call nothing.  At most one call's worth
     * of records waits like this. */
}

/* Takes the permission, and in stop-the-world mode parks the schedulers. */
void bp_begin(tvm_vm *vm)
{
    vm_code_perm_acquire(vm);
    vm_sched_start(vm, vm->schedulers);
    if (vm->stw_tracing) {
        vm_stw_begin(vm);
        vm->bp->stw = true;
    }
}

void bp_end(tvm_vm *vm)
{
    if (vm->bp->stw) {
        vm->bp->stw = false;
        vm_stw_end(vm);
    }
    vm_code_perm_release(vm);
}

/* ==== lifetime ==== */

void bp_engine_init(tvm_vm *vm)
{
    BpEngine *E = vm_calloc(1, sizeof *E);
    E->vm = vm;
    E->mark = 1;
    vm->bp = E;
    vm_atomic_store_relaxed(&vm->bp_ix, 0);
    bp_sessions_start(vm);
}

uint64_t bp_waits(tvm_vm *vm)
{
    return vm_atomic_load_relaxed(&vm->bp->waits);
}

uint64_t bp_wait_ns(tvm_vm *vm)
{
    return vm_atomic_load_relaxed(&vm->bp->wait_ns);
}

void bp_engine_destroy(tvm_vm *vm)
{
    BpEngine *E = vm->bp;
    if (!E)
        return;
    /* No reader runs any more: disarm and free everything directly.
     * Every record: one armed in stage 2 learns it only in stage 5, which
     * a commit whose process never resumed did not reach (disarming an
     * unarmed record stores its saved word over itself, or finds no
     * export slot naming its trampoline). */
    while (E->records) {
        BpRecord *r = E->records;
        disarm(r);
        gens_release(E, r);
        unlink_record(E, r);
    }
    free_unlinked(E);
    free_dying(E);
    ms_release(E->ms_dead, E->nms_dead);
    free(E->pool.v);
    for (size_t i = 0; i < E->nslabs; i++)
        free(E->slabs[i]);
    free(E->slabs);
    for (int k = 0; k < 2; k++) {
        free(E->unlinked[k].v);
        free(E->dying[k].v);
    }
    for (unsigned i = 0; i < VM_SESSIONS_MAX; i++)
        tr_ms_free(E->on_load_ms[i]);
    free(E->touched);
    free(E->pend);
    free(E);
    vm->bp = NULL;
    bp_hooks_free(vm);
}
