/*
 * profile/pf_internal.h - what the profiler's files share: the session,
 * the per-scheduler sample rings, the record format, and the aggregated
 * profile (frames and stacks) that the writers read.
 *
 * The protocols (the handler, the rings, the hand-off to the aggregator)
 * are described at the top of profile/pf_sample.c; aggregation at the top
 * of profile/pf_agg.c; docs/profiling.md is the user's view.
 */
#ifndef PROFILE_PF_INTERNAL_H
#define PROFILE_PF_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "include/tracevm.h"
#include "stacks/st.h"
#include "vm/atomics.h"
#include "vm/sched.h"

/* ==== sample records and rings (pf_sample.c) ==== */

/* What a record was taken of (PfRec.what). */
enum { PF_WHAT_PROCESS = 1, PF_WHAT_SCHED = 2 };

/*
 * One sample, written in place into a ring: the header, then nnative
 * StNative (innermost first), then nvm StVm (outermost first), as StStack
 * holds them.  size is a multiple of 8; a size of 0 marks the rest of the
 * ring as unused (the next record starts at the ring's beginning).
 */
typedef struct PfRec {
    uint32_t size;
    uint16_t nnative, nvm;
    uint16_t what;             /* PF_WHAT_* */
    uint8_t broken;            /* the native walk broke */
    uint8_t cut;               /* older VM frames were left out (more than ST_MAX_VM) */
    uint32_t sched;            /* the scheduler that took it */
    uint64_t pid;              /* PF_WHAT_PROCESS */
    uint64_t weight;           /* samples, ns or bytes (the session's kind) */
} PfRec;

#define PF_REC_MAX \
    (sizeof(PfRec) + ST_MAX_NATIVE * sizeof(StNative) + ST_MAX_VM * sizeof(StVm))

/*
 * A single-producer, single-consumer ring of records.  head and tail
 * count bytes from the start and only grow (the offset is head % cap).
 *   head  written by the producer only (release, after the record's
 *         bytes: [PR1]); read by the consumer (acquire, [PR1']).
 *   tail  written by the consumer only (release, after it read the
 *         record's bytes: [PR2]); read by the producer (acquire, [PR2']),
 *         so a record is not overwritten while it is read.
 *   lost  records the producer could not write (the ring was full);
 *         written by the producer (relaxed load + store: it is the only
 *         writer), read relaxed by whoever reports it.
 */
typedef struct PfRing {
    char *buf;
    size_t cap;                /* bytes, a multiple of 8, at least 2 * PF_REC_MAX */
    VmAtomic head, tail, lost;
} PfRing;

/* A scheduler's share of a session. */
typedef struct PfSched {
    /* CPU samples: produced by the signal handler on the scheduler's
     * thread. */
    PfRing sig;
    /* Off-CPU and allocation samples: produced by process code on the
     * scheduler's thread (never by a handler, so the two never meet). */
    PfRing thr;
    /* The scheduler thread's own stack, for samples of the scheduler
     * itself (set before the timer is armed; read by the handler). */
    uintptr_t stack_lo, stack_hi;
    timer_t timer;
    bool has_timer;
    /* Written by the handler (relaxed load + store: one writer, the
     * scheduler's thread), read relaxed for the statistics. */
    VmAtomic handler_ns, overruns;
} PfSched;

/* ==== the aggregated profile (pf_agg.c) ==== */

typedef enum PfFrameType {
    PF_F_VM,                   /* a VM function (or VM-level native) at a line */
    PF_F_NATIVE,               /* a C function */
    PF_F_PROCESS,              /* the root of a process's stacks */
    PF_F_SCHED,                /* the root of a scheduler's own stacks */
    PF_F_UNKNOWN,              /* a frame that could not be named */
} PfFrameType;

typedef struct PfFrame {
    PfFrameType type;
    const FuncInfo *fn;        /* PF_F_VM (the real function) */
    uint32_t line;             /* PF_F_VM: the line (0: the function's frame) */
    uint64_t key;              /* PF_F_NATIVE: symbol start (or object), PROCESS: pid,
                                * SCHED: scheduler id */
    char *name;                /* "mod:fun/arity", "symbol", "<0.N.0>", ... */
    char *file;                /* VM: its source file; native: its object; or NULL */
    uint32_t def_line;         /* VM: the line the function starts at */
    uint32_t func;             /* the id of the function-level frame (line 0) */
    bool is_native_fn;         /* VM: a VM-level native function */
} PfFrame;

/* An aggregated stack: frame ids, root first (the root is the process's or
 * the scheduler's frame). */
typedef struct PfStack {
    uint64_t weight, count;
    uint32_t n;
    uint32_t hash;
    uint32_t ids[];
} PfStack;

/* An open-addressing table of ids (index + 1; 0 is empty). */
typedef struct PfIndex {
    uint32_t *slots;
    size_t cap, used;
} PfIndex;

typedef struct PfData {
    PfFrame *frames;
    size_t nframes, frames_cap;
    PfIndex frame_ix;          /* by (type, fn or key, line) */
    PfStack **stacks;
    size_t nstacks, stacks_cap;
    PfIndex stack_ix;          /* by (ids) */
    /* Native return addresses already named: ip -> frame id. */
    uint64_t *ip_keys;
    uint32_t *ip_ids;
    size_t ip_cap, ip_used;
    /* The FuncInfo pointers of the VM (every module's functions, older
     * versions too, and the natives): a frame copied from a process is
     * named only if its function is one of them. */
    const FuncInfo **fns;
    size_t fns_cap, fns_used;
    uint64_t samples, weight;
} PfData;

/* ==== the session ==== */

struct tvm_profile {
    tvm_vm *vm;
    SchedSystem *sys;
    int n;                     /* schedulers */
    PfSched *sched;            /* n of them */
    tvm_profile_kind kind;
    unsigned hz;
    uint64_t alloc_mean_words;
    int signo;
    /* CLOCK_MONOTONIC ns.  t_start: written by pf_start before the
     * session is handed out.  t_stop: 0 while running; written by
     * pf_stop (the stopping thread) under lock, and read under lock by
     * tvm_profile_get_stats and the writers, on any thread. */
    uint64_t t_start, t_stop;
    uint64_t wall_start_ns;    /* CLOCK_REALTIME at the start (pprof's time_nanos) */
    bool running;              /* between start and stop (the API's caller only) */
    /* The aggregator: a thread that drains the rings every few ms.
     * stopping: written by tvm_profile_stop (release), read by it
     * (acquire) to do its last drain and end. */
    pthread_t agg;
    VmAtomic stopping;
    /* lock protects data (the aggregator adds, writers read). */
    pthread_mutex_t lock;
    PfData data;
};

/* pf_sample.c: the sampling side. */
tvm_status pf_start(tvm_profile *S, tvm_error *err);
void pf_stop(tvm_profile *S);
void pf_rings_free(tvm_profile *S);
/* The running session sampling vm, or NULL. */
tvm_profile *pf_running(tvm_vm *vm);
uint64_t pf_lost(const tvm_profile *S);

/* pf_agg.c: draining rings into S->data (under S->lock), the thread that
 * does it, the frame names, and freeing it all. */
void pf_drain(tvm_profile *S);
void *pf_agg_main(void *arg);
void pf_data_free(PfData *d);
/* Appends frame f's label as the text formats show it (folded, SVG):
 * with its line (lines) or its function's start line. */
struct StrBuf;
void pf_frame_label(const PfFrame *f, bool lines, struct StrBuf *sb);

/* pf_out.c: the writers' view of the data, a tree of calls. */

/* A frame as a writer shows it: the frame id after the choice of lines
 * (function-level frames unless lines), with its label. */
typedef struct PfNode {
    uint32_t frame;            /* a frame id (UINT32_MAX: the tree's root) */
    uint32_t parent, depth;
    uint32_t *kids;            /* sorted by label (pf_tree_build) */
    uint32_t nkids, kids_cap;
    uint64_t total, self;      /* weight of the node and below; of the node alone */
} PfNode;

typedef struct PfTree {
    const PfData *d;
    bool lines, merge;
    PfNode *nodes;             /* nodes[0] is the root */
    size_t n, cap;
    PfIndex ix;                /* by (parent, frame) */
    char **labels;             /* per frame id, made on demand */
    unsigned max_depth;
} PfTree;

/* Builds the tree of S's data (the caller holds S->lock). */
void pf_tree_build(PfTree *t, const PfData *d, bool lines, bool merge);
void pf_tree_free(PfTree *t);
/* The label of frame id (pf_frame_label, ';' and newlines replaced). */
const char *pf_tree_label(PfTree *t, uint32_t frame);
/* The frame id a writer shows for frame id (lines: itself; else its
 * function's). */
uint32_t pf_view_frame(const PfData *d, uint32_t id, bool lines);

/* The writers (pf_out.c, pf_svg.c), holding S->lock. */
void pf_write_folded(PfTree *t, struct StrBuf *out);
void pf_write_speedscope(tvm_profile *S, PfTree *t, struct StrBuf *out);
bool pf_write_pprof(tvm_profile *S, bool lines, bool merge, struct StrBuf *out);
void pf_write_svg(tvm_profile *S, PfTree *t, const char *title, struct StrBuf *out);
/* The weight's unit: "samples", "ns", "bytes". */
const char *pf_unit(const tvm_profile *S);

#endif /* PROFILE_PF_INTERNAL_H */
