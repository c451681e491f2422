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

typedef struct BpEngine {
    BpRecord *records;          /* every linked record */
    BpRecord *free_list;        /* unlinked, freed at the next free stage */
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
    BpRecord *dying;
    BpCount *dying_counts;
    struct BpTime *dying_times;
    struct TrMs **dying_ms;
    size_t ndying_ms;
    BpRecord *pool;             /* freed records kept for reuse (via next_free) */
    size_t npool;
    BpRecord **touched;         /* records the running call staged */
    size_t ntouched, touched_cap;
    uint32_t mark;              /* BpRecord.mark of the running call */
    uint32_t nshards;           /* counters: 1 + schedulers */
    bool stw;                   /* this call stopped the world */
    uint64_t waits;             /* thread-progress waits made (statistics) */
    /* The trace sessions' stopper thread (bp_session.c): started and
     * joined by the VM's set-up and end, nobody else. */
    pthread_t stopper;
    bool stopper_started;
} BpEngine;

/* bp_engine.c: records, staging helpers and the sequence. */
BpRecord *bp_local_record(BpEngine *E, FuncInfo *fi, bool create);
BpRecord *bp_global_record(BpEngine *E, FuncInfo *fi, bool create);
void bp_touch(BpEngine *E, BpRecord *r);
/* Session sid's entry in r's generation s (the staging one), created
 * empty if asked (the record is touched then); NULL if none. */
BpSess *bp_entry(BpEngine *E, BpRecord *r, unsigned s, unsigned sid, bool create);
void bp_stage_count(BpEngine *E, BpSess *e, bool fresh);
void bp_stage_time(BpEngine *E, BpSess *e, bool fresh);
void bp_stage_ms(BpEngine *E, struct TrMs **slot, struct TrMs *ms);
/* The same for e's call-trace spec, and its cached call_tf. */
void bp_stage_call_ms(BpEngine *E, BpSess *e, struct TrMs *ms);
/* Drops everything e holds (its flags become 0). */
void bp_entry_clear(BpEngine *E, BpSess *e);
/* Recomputes the summary of r's generation s from its entries, dropping
 * empty ones. */
void bp_gen_summarize(BpEngine *E, BpRecord *r, unsigned s);
void bp_gen_mirror(BpEngine *E, BpRecord *r, unsigned from);
int64_t bp_count_sum(const BpCount *c);
void bp_arm_unpublished(BpRecord *r);
void bp_begin(tvm_vm *vm);
void bp_commit(tvm_vm *vm);
void bp_end(tvm_vm *vm);

/* Frees every call hook ever set (bp_engine_destroy; bp_api.c). */
void bp_hooks_free(tvm_vm *vm);

#endif /* BREAKPOINTS_BP_ENGINE_INTERNAL_H */
