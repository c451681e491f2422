/*
 * breakpoints/bp_time.h - call_time: per function, per process call
 * counts and exclusive time, in per-scheduler tables that readers walk
 * while schedulers insert.  The protocol essay is at the top of
 * breakpoints/bp_time.c; docs/breakpoints.md ("Call time") is the long
 * version.
 */
#ifndef BREAKPOINTS_BP_TIME_H
#define BREAKPOINTS_BP_TIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/breakpoint.h"
#include "vm/common.h"
#include "vm/hook.h"
#include "vm/process.h"

/*
 * One process's line in one shard.  `key` is pid + 1 (0: an empty slot;
 * call contexts have pid 0).  Written only by the shard's writer: count
 * and ticks first, then key with release; after that count and ticks are
 * updated in place (relaxed load and store: one writer).  Readers load
 * key with acquire, then count and ticks relaxed.
 */
typedef struct BpTimeEntry {
    VmAtomic key;
    VmAtomic count;
    VmAtomic ticks;             /* tr_clock ticks (trace/tr_clock.h) */
} BpTimeEntry;

/* Open addressing, linear probing, at most half full.  `used` and
 * `retired` belong to the shard's writer (and to the free stage). */
typedef struct BpTimeTab {
    uint32_t cap;               /* a power of two */
    uint32_t used;
    struct BpTimeTab *retired;  /* the table this one replaced, kept until bp_time_free */
    BpTimeEntry e[];
} BpTimeTab;

/* A shard's current table: published with release by its writer (NULL
 * until the first insert), loaded with acquire by readers. */
typedef struct BpTimeShard {
    VmAtomic tab;
    char pad[64 - sizeof(VmAtomic)];
} BpTimeShard;

/* The call time data of one function in one generation (or two: shared
 * after consolidation, like BpCount).  Shard 0 is written by threads that
 * are not schedulers, under `lock`; shard 1 + i only by scheduler i. */
typedef struct BpTime {
    uint32_t refs;              /* engine only, under the permission */
    uint32_t nshards;
    struct BpTime *next_free;   /* engine only */
    pthread_mutex_t lock;       /* shard 0's writers */
    BpTimeShard shard[];
} BpTime;

/* One process's totals, as a reader sums them over the shards. */
typedef struct BpTimeSample {
    uint64_t pid;
    uint64_t count;
    uint64_t ns;
} BpTimeSample;

/* Engine side (under the code-modification permission). */
BpTime *bp_time_new(uint32_t nshards);
/* Frees t and every table it ever had; no reader or writer may reach it
 * (after the free stage's wait). */
void bp_time_free(BpTime *t);

/* Adds count calls and ticks to pid's line of shard `slot`: the writer
 * side, on the shard's owner thread (slot 0: any thread, locked). */
void bp_time_add(BpTime *t, uint32_t slot, uint64_t pid, uint64_t count, uint64_t ticks);

/*
 * Sums t over the shards per process, ordered by pid, into a malloc'd
 * array (*out, NULL when empty); returns its length.  Lock-free against
 * the writers: any thread, while schedulers insert.  The caller keeps t
 * alive (holds the code-modification permission).
 */
size_t bp_time_read(const BpTime *t, BpTimeSample **out);

/*
 * The hit side (vm/interp.c, breakpoints/bp_frame.c), on p's own thread
 * while online.  No record pointer is kept across calls: every function
 * is looked up again through its `bp` slot.
 *
 * bp_time_call: at a hit whose active generation g has BP_TIME_ACTIVE
 * in the default session's entry.
 * Charges the time since p's mark to the function p is in (if that one
 * is still call_time-traced), counts the call of fn, makes fn current and
 * returns true: the caller pushes a time frame whose tdata is *saved (the
 * previous current function).
 *
 * bp_time_return: fn's activation returned or an exception passes its
 * time frame.  Charges the current function (fn itself, or the traced
 * function a tail call from fn made current, so a tail call that pushes
 * no frame of its own is still charged right) and makes saved current.
 */
bool bp_time_call(Process *p, const FuncInfo *fn, const BpGen *g, void **saved);
void bp_time_return(Process *p, const FuncInfo *fn, void *saved);

/* The same for session sid, whose entry's call time data is `time`
 * (bp_time_call and bp_time_return are the default session's). */
bool bp_time_call_sess(Process *p, const FuncInfo *fn, BpTime *time, unsigned sid, void **saved);
void bp_time_return_slow(Process *p, unsigned sid, void *saved);

static inline void bp_time_return_sess(Process *p, const FuncInfo *fn, unsigned sid, void *saved)
{
    (void)fn;   /* the current function is charged (above) */
    /* Back into the default session's current function (a recursion's
     * return): the stretch goes on, nothing to do; inline, as this is
     * most returns of a recursive traced function. */
    if (VM_LIKELY(sid == 0) && saved == (void *)p->ct_fn)
        return;
    bp_time_return_slow(p, sid, saved);
}

/* The process's clock: vm_hook_time_out and vm_hook_time_in (vm/hook.h,
 * defined in bp_time.c) stop it when it is scheduled out (charging the
 * current function) and restart it when it is scheduled in; the VM calls
 * them only while p->ct_live is set (some session has a current
 * function), and exit clears it. */

#endif /* BREAKPOINTS_BP_TIME_H */
