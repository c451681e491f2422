/*
 * vm/breakpoint.h - breakpoint records: the contract between the engine
 * (the only writer, breakpoints/bp_engine.c) and the interpreter's
 * BREAKPOINT instruction (the readers, vm/interp.c).  The layout is the
 * VM's, because the VM reads it on every hit; everything a hit does beyond
 * counting is the breakpoints layer's (vm_hook_bp_hit, vm/hook.h).
 *
 * A record hangs off a FuncInfo's `bp` slot.  Two kinds share the layout:
 *   - a *local* record sits on a function: arming stores the BREAKPOINT
 *     word over code[0] (the function's `bp_orig` keeps the word it
 *     replaced: ENTER, or NATIVE for a native), so every call, local or
 *     remote, hits it;
 *   - a *global* record sits on a trampoline, a one-word FuncInfo whose
 *     code[0] is BREAKPOINT_TRAMP, and arming points the export entry at the
 *     trampoline; `target` is the real function, so only remote calls
 *     (through the export entry) hit it.
 *
 * Each record has two generations of data.  Readers use only
 * gen[vm->bp_ix] (a relaxed load per hit); the engine writes only the other
 * one, the staging generation, and flips bp_ix.  Why relaxed loads and
 * plain fields are enough: every write is separated from the readers that
 * must see it by a thread-progress wait (a grace period, which orders
 * everything a writer did before it against everything a reader does after
 * its next quiescent state), and no reader keeps a record, a generation or
 * an index across a quiescent state.  See docs/breakpoints.md.
 *
 * Trace sessions.  A generation holds every session's settings: a summary
 * in the generation itself (what the hot path reads) and one entry per
 * session out of line (bp_gen_entries).  Each generation owns its entries:
 * the only one in the record itself (BpCold.one, the common case of a
 * single session, so that staging it allocates nothing), two or more in
 * an array of their own; the engine reallocates and rewrites them only
 * while that generation is the staging one, so the argument above covers
 * the entries too, and a change by one session stages, flips and
 * consolidates the others' entries unchanged (the same sequence, one
 * permission for all: breakpoints/bp_engine.c).
 */
#ifndef VM_BREAKPOINT_H
#define VM_BREAKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/atomics.h"
#include "vm/module.h"

/* Opaque here: a compiled match spec (trace/tr_ms.h) and call time
 * tables (breakpoints/bp_time.h), used only by the hooks. */
struct TrMs;
struct BpTime;

/* Generation flags.  "X" means the data object exists, "X_ACTIVE" that it
 * is accumulating (pause clears only the latter). */
enum {
    BP_LOCAL = 1u << 0,         /* local call trace (hook / trace events) */
    BP_GLOBAL = 1u << 1,        /* global call trace (trampoline records only) */
    BP_META = 1u << 2,          /* meta trace: every process, to meta_tracer */
    BP_COUNT = 1u << 3,         /* a call counter exists */
    BP_COUNT_ACTIVE = 1u << 4,  /* ... and counts */
    BP_TIME = 1u << 5,          /* call time data exists (bp_time.h) */
    BP_TIME_ACTIVE = 1u << 6,   /* ... and accumulates */
    /* In a generation's summary only: more than one session counts, so
     * the summary has no BP_COUNT_ACTIVE and no counter, and the hook
     * counts into each session's (a slow path for every process). */
    BP_COUNT_MULTI = 1u << 7,
    /* In a generation's summary only: more than one entry call-traces and
     * each one's spec is plain (no BP_SPEC_RUN): the hit reports to each
     * without running a spec (breakpoints/bp_hit.c). */
    BP_CALL_MULTI = 1u << 8,
};

/* Flags that make a process-traced call report an event. */
#define BP_CALL_TRACE (BP_LOCAL | BP_GLOBAL)

/*
 * A call counter, sharded so that schedulers never contend: shard 0 is
 * shared by threads that are not schedulers (atomic add); shard 1 + i is
 * written only by scheduler i (a relaxed load and store: one writer).
 * Readers sum relaxed loads.  Shared by both generations after
 * consolidation (refs counts the generations pointing here; engine only).
 */
typedef struct BpShard {
    VmAtomic n;
    char pad[64 - sizeof(VmAtomic)];
} BpShard;

typedef struct BpCount {
    uint32_t refs;              /* engine only, under the permission */
    uint32_t nshards;           /* 1 + number of schedulers */
    struct BpCount *next_free;  /* engine only */
    BpShard shard[];
} BpCount;

/* BpSess.call_tf and BpGen.call_tf: the match spec must run at each hit
 * (it is not plain), or (in the summary) several sessions call-trace. */
#define BP_SPEC_RUN (1u << 31)

/*
 * One trace session's settings on one record in one generation
 * (trace/tr_session.c: a function may carry breakpoints of several
 * sessions).  Written only while its generation is the staging one.
 */
typedef struct BpSess {
    uint32_t flags;             /* BP_* but BP_COUNT_MULTI */
    /* What match_spec asks of every call, cached when it is staged
     * (bp_stage_call_ms): BP_SPEC_RUN if it must run, else the trace
     * frame flags (BP_TF_RETURN, BP_TF_EXCEPTION: breakpoints/bp_frame.h)
     * every call gets; 0 for no spec. */
    uint32_t call_tf;
    uint32_t sid;               /* the session (vm/traceword.h) */
    BpCount *count;             /* BP_COUNT: the counter, else NULL */
    struct TrMs *match_spec;    /* local/global call trace filter; NULL = every call */
    struct TrMs *meta_spec;     /* meta trace filter; NULL = every call */
    uint64_t meta_tracer;       /* BP_META: the tracer's pid */
    struct BpTime *time;        /* BP_TIME: call time tables (bp_time.h), else NULL */
} BpSess;

/*
 * One generation: a summary that the BREAKPOINT instruction and the hit's
 * fast path read; every session's settings are out of line (nsess
 * entries, bp_gen_entries).  The summary is what one session alone would
 * have: so a function armed by one session costs what it cost before
 * sessions existed, and one armed by several costs an untraced process
 * nothing more.  Written only while it is the staging generation (the
 * engine recomputes the summary from the entries: bp_gen_summarize).
 */
typedef struct BpGen {
    /* The union of the entries' flags, except that BP_COUNT_ACTIVE
     * becomes BP_COUNT_MULTI when more than one entry counts. */
    uint32_t flags;
    /* The one call-tracing entry's call_tf, or BP_SPEC_RUN when several
     * entries call-trace (the hit then takes its slow path). */
    uint32_t call_tf;
    BpCount *count;             /* BP_COUNT_ACTIVE: the one active counter */
    uint16_t nsess;             /* entries */
    /* 1: the one entry holds a local call trace without a spec and
     * nothing else (no counter, call time or meta trace): what a
     * trace_pattern's plain step needs to know of a generation, here so
     * that it need not read the entry's line (breakpoints/bp_pattern.c,
     * stage_plain).  Engine only: the hit never reads it. */
    uint16_t plain;
    uint32_t call_sid;          /* the one call-tracing entry's session */
} BpGen;

_Static_assert(sizeof(BpGen) == 24, "a generation is 24 bytes");

/*
 * A record is four cache lines in two parts.  Its hot line (BpRecord)
 * holds both generations and the engine's state of the record: all that
 * a hit reads of a local record besides its function's line, and all
 * that trace_pattern's plain step, which passes over every function of a
 * module, reads and writes.  Its cold part (BpCold, bp_cold) holds the
 * trampoline's function, the engine's links and each generation's one
 * entry, a line each.
 *
 * Records live in slabs of BP_SLAB (a power of two), BP_SLAB * 256 bytes
 * aligned to their size: the hot lines of all of them first, then their
 * cold parts in the same order, so a record's cold part is found from
 * its address alone.  Why: the plain step reads the hot lines of a
 * module's records in order, and the hardware prefetchers fetch lines
 * one after the other much faster than lines four apart (on this kind of
 * machine about 2 ns per line against 5.5).  AddressSanitizer builds use
 * slabs of one record (hot line, then cold part), so that each record is
 * an allocation of its own and ASan sees its free and reuse.
 */
#ifndef BP_SLAB
#ifdef VM_ASAN
#define BP_SLAB 1
#else
#define BP_SLAB 128
#endif
#endif
#define BP_SLAB_BYTES ((size_t)BP_SLAB * 256)

typedef struct BpRecord {
    _Alignas(64) BpGen gen[2];  /* indexed by vm->bp_ix */
    /* Engine only, under the code-modification permission. */
    uint32_t mark;              /* touched by the running trace_pattern */
    /* 1 + its index in the engine's list of records whose consolidation
     * (stage 5) the last trace_pattern left to the next engine call, or
     * 0 (breakpoints/bp_engine.c). */
    uint32_t pend;
    bool armed;
    /* What its last settle decided (the BpTouched act, fresh and early
     * as BP_SETTLED_* bits, breakpoints/bp_engine_internal.h), for its
     * stage 5, which then reads no touched list. */
    uint8_t settled;
} BpRecord;

/* One generation's single entry, alone in its line. */
typedef struct BpSessLine {
    BpSess e;
    char pad[64 - sizeof(BpSess)];
} BpSessLine;

typedef struct BpCold {
    /* Immutable while the record is linked.  (A local record's saved
     * word is its function's: FuncInfo.bp_orig.) */
    const FuncInfo *target;     /* global: the function the trampoline enters */
    /* Engine only, under the code-modification permission. */
    FuncInfo *fi;               /* the function or trampoline it hangs off */
    Export *export;             /* global: the entry pointing at the trampoline */
    BpRecord *next;             /* every linked record */
    BpRecord *prev;
    /* gen[i]'s entries when it has two or more (an array of its own),
     * meaningless otherwise; written like gen[i] (only while it stages),
     * so a hit reads it (bp_gen_entries) under the same grace periods. */
    BpSess *many[2];
    char pad[64 - 7 * sizeof(void *)];
    /* gen[i]'s entry when it has exactly one; written like gen[i]. */
    BpSessLine one[2];
} BpCold;

_Static_assert(sizeof(BpRecord) == 64 && _Alignof(BpRecord) == 64,
               "the hot line: generations and engine state");
_Static_assert(sizeof(BpCold) == 192 && offsetof(BpCold, one) == 64 && sizeof(BpSessLine) == 64,
               "the cold part: the rest, then each entry in a line of its own");
_Static_assert((BP_SLAB & (BP_SLAB - 1)) == 0, "a slab holds a power of two of records");

/* The cold part of record r (see above). */
static inline BpCold *bp_cold(const BpRecord *r)
{
    const uintptr_t a = (uintptr_t)r, slab = a & ~(uintptr_t)(BP_SLAB_BYTES - 1);
    return (BpCold *)(slab + BP_SLAB * sizeof(BpRecord) + (a - slab) / sizeof(BpRecord) * sizeof(BpCold));
}

/* Generation s's single entry. */
static inline BpSess *bp_one(const BpRecord *r, unsigned s)
{
    return &bp_cold(r)->one[s].e;
}

/* The record a generation belongs to, and which of its two it is: a
 * record is 64-byte aligned with gen[] at its start, so a hit that holds
 * only the generation finds the rest from its address. */
static inline const BpRecord *bp_gen_record(const BpGen *g)
{
    return (const BpRecord *)((uintptr_t)g & ~(uintptr_t)63);
}

static inline unsigned bp_gen_index(const BpGen *g)
{
    return g != &bp_gen_record(g)->gen[0];
}

/* Generation i's entries (nsess of them, ordered by slot). */
static inline BpSess *bp_gen_entries_at(BpRecord *r, unsigned i)
{
    return r->gen[i].nsess > 1 ? bp_cold(r)->many[i] : bp_one(r, i);
}

static inline const BpSess *bp_gen_entries(const BpGen *g)
{
    const BpRecord *r = bp_gen_record(g);
    const unsigned i = bp_gen_index(g);
    return g->nsess > 1 ? bp_cold(r)->many[i] : bp_one(r, i);
}

/* Generation flags that take the slow path for a process with the call
 * flag, and for any process. */
#define BP_CALL_TRACED (BP_CALL_TRACE | BP_TIME_ACTIVE)
#define BP_ANY_PROCESS (BP_META | BP_COUNT_MULTI)

/* The entry of session slot `slot` in g, or NULL (entries are few and
 * ordered by slot). */
static inline const BpSess *bp_gen_sess(const BpGen *g, unsigned slot)
{
    const BpSess *e = bp_gen_entries(g);
    for (uint32_t i = 0; i < g->nsess; i++)
        if ((e[i].sid & 0xffu) == slot)
            return &e[i];
    return NULL;
}

#endif /* VM_BREAKPOINT_H */
