/*
 * trace/tr_vm_internal.h - the VM's running pipeline (TrVm), shared by
 * its life cycle (trace/tr_vm.c) and the emitters (trace/tr_vm.c,
 * trace/tr_vm_proc.c).  Not for other components.
 */
#ifndef TRACE_TR_VM_INTERNAL_H
#define TRACE_TR_VM_INTERNAL_H

#include <pthread.h>
#include <stdio.h>

#include "trace/tr.h"
#include "vm/sched.h"

/*
 * The processes of one scheduler suspended by the lossless policy, waiting
 * for room in its ring (trace/tr_vm_proc.c has the protocol).
 *   lock  protects pids/n/cap and orders gen's changes with registrations.
 *   gen   bumped (under lock, release) by the collector's on_space after
 *         it freed room; loaded (acquire) by a producer before each emit
 *         and compared under lock before it registers.
 *   pids  written under lock by producers (add) and on_space (take all).
 */
typedef struct TrWaitList {
    pthread_mutex_t lock;
    VmAtomic gen;
    uint64_t *pids;
    size_t n, cap;
} TrWaitList;

typedef struct TrVm {
    TrPipeline *tp;
    FILE *file;            /* opened from opts.path or on opts.fd (closed at stop), or NULL */
    struct TrFdOut *fdout; /* opts.fd's state, or NULL */
    /* The format's name, for a failure of the stream's fclose, which
     * tr_vm_free records in the session (immutable). */
    const char *format;
    tvm_vm *vm;
    struct TrSession *sess; /* whose pipeline (immutable) */
    unsigned sid;          /* ... in which incarnation */
    bool lossless;         /* immutable: the policy */
    int nscheds;
    TrWaitList *waits;     /* nscheds lists (lossless only), else NULL */
    /* The next in the VM's list of running pipelines (TrSessions.pipes,
     * under its pipes_lock; trace/tr_delivered.c). */
    struct TrVm *pipe_next;
} TrVm;

/* The ring a process writes into: its scheduler's, or the shared one. */
static inline int tr_vm_ring_of(const Process *p)
{
    return p->sched ? p->sched->id : -1;
}

/* The record flags of the timestamp a process's flags ask for: timestamp
 * wins over strict_monotonic_timestamp, which wins over
 * monotonic_timestamp, as BEAM's (tr_ts_form).  One test when none. */
static inline unsigned tr_vm_record_flags(uintptr_t tf)
{
    if (VM_LIKELY(!(tf & VM_TRACE_ANY_TS)))
        return 0;
    if (tf & VM_TRACE_TIMESTAMP)
        return TR_F_TIMESTAMP;
    return (tf & VM_TRACE_STRICT_TS) ? TR_F_TS_MONO : TR_F_TIMESTAMP | TR_F_TS_MONO;
}

/* An event of p about fn (the MFA) with `n` payload terms.  By value:
 * inlined, the fast path builds no TrEmit in memory. */
static inline TrEmit tr_vm_fn_event(const Process *p, TrKind kind, const FuncInfo *fn,
                                    unsigned flags, const Term *terms, unsigned n)
{
    return (TrEmit){ .kind = kind, .flags = flags, .pid = p->pid, .mod = fn->mod,
                     .fun = fn->name, .arity = fn->arity, .terms = terms, .nterms = n };
}

/*
 * Writes ev for p into t's pipeline by p's ring.  Under the lossless
 * policy a full ring suspends p (a process) or blocks the thread (a call
 * context) until there is room, and then retries, reloading the pipeline
 * (it may have been stopped meanwhile: then nothing is written).  Returns
 * the last tr_emit status (TR_DROPPED when the pipeline went away).
 */
TrStatus tr_vm_emit(Process *p, TrVm *t, const TrEmit *ev);

/* tvm_trace_start / stop: the lossless wait lists and on_space. */
void tr_vm_waits_init(TrVm *t);
void tr_vm_on_space(void *data, int sched);
/* After the pipeline is freed: wakes every process still registered and
 * frees the lists. */
void tr_vm_waits_destroy(TrVm *t);

#endif /* TRACE_TR_VM_INTERNAL_H */
