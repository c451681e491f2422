/*
 * trace/tr_delivered.c - erlang:trace_delivered(Tracee): returns a
 * reference Ref at once, and the caller later gets the message
 * {trace_delivered, Tracee, Ref} once every trace event written before
 * the call has reached its destination (BEAM's guarantee; Tracee a pid,
 * alive or not, or `all`).
 *
 * Where events go, and when they have arrived.
 *   - A process with its own tracer ({tracer, T}) and a session whose
 *     tracer is a process: the emitter sends the message itself
 *     (trace/tr_deliver.c), so an event written is already in the
 *     tracer's mailbox.  Nothing to wait for.
 *   - A session's pipeline: the emitter writes a record into its ring,
 *     and the collector later hands it to the sink.  The call makes a
 *     mark in every pipeline that runs (tr_pipeline_mark: each ring's
 *     head, acquired), and the collector answers the mark once its
 *     delivery has passed every one of those positions and the sink's
 *     output has been flushed (written to the file or descriptor; a
 *     callback returned).  A pipeline that stops meanwhile answers in its
 *     last drain (tr_pipeline_finish), once everything is in the sink.
 *
 * "Before the call" with several schedulers: an event counts when its
 * record was published ([TB1], the producer's release of the head) before
 * the call's acquire load of that ring's head, or, for a tracer process,
 * when its message was sent before the call.  So every event whose write
 * happens before the call counts: the caller's own, and those of a
 * process that then told the caller so (a message received before the
 * call, a 'DOWN' of its exit).  An event written on another scheduler at
 * the moment of the call may count or not.  The reply does not wait for
 * a process suspended by the lossless policy: its event is not written
 * yet.
 *
 * The request.  `left` counts the pipelines whose mark is still open, plus
 * one that the call holds while it makes them; whoever takes it to 0 (the
 * call itself when no pipeline runs, else the collector thread that
 * answers the last mark, or the thread finishing that pipeline) sends the
 * reply and frees the request.  The list of running pipelines
 * (TrSessions.pipes) holds a pipeline from its start to the end of its
 * last drain, under pipes_lock, so a call never misses one that still has
 * events to deliver: one unpublished by a stop but still draining is on
 * it, and one taken off has delivered everything.  A caller that exited
 * gets nothing (the send finds no process); a VM destroyed with requests
 * open finishes every pipeline (tr_vm_destroy), which answers and frees
 * them.  Each open request costs its 40 bytes and a mark (32 bytes and a
 * word per ring) per pipeline, until the collector passes it: a process
 * calling it in a loop is bounded by its own mailbox, which the replies
 * fill, as in BEAM.
 */
#include "trace/tr_delivered.h"

#include <stdlib.h>

#include "trace/tr_session.h"
#include "trace/tr_vm_internal.h"
#include "vm/atom.h"
#include "vm/sched.h"

typedef struct TrDelivReq {
    tvm_vm *vm;
    uint64_t caller;           /* immutable: the calling process */
    Term tracee;               /* immutable: a pid or 'all' (immediates) */
    uint64_t ref;              /* immutable */
    /* Open marks plus the call's own hold: full RMWs, so the thread that
     * takes it to 0 frees after every other thread's use. */
    VmAtomic left;
} TrDelivReq;

/* Requests not answered yet (relaxed counts; tests read them). */
static VmAtomic open_reqs;

uint64_t tr_delivered_open(void)
{
    return vm_atomic_load_relaxed(&open_reqs);
}

/* One mark of q answered (or the call's hold dropped): the last one sends
 * the reply and frees q.  Any thread; no lock held. */
static void request_done(void *data)
{
    TrDelivReq *q = data;
    if (vm_atomic_fetch_add_full(&q->left, (uintptr_t)-1) != 1)
        return;
    Term t[4] = { MAKE_HEADER(IMM_HDR_TUPLE, 3), make_atom(ATOM_TRACE_DELIVERED), q->tracee,
                  make_small((int64_t)q->ref) };
    /* Counted answered before the send: whoever learns of the reply
     * (through the caller) sees the count without it. */
    vm_atomic_fetch_add_relaxed(&open_reqs, (uintptr_t)-1);
    /* NOPROC: the caller exited; the reply goes with it. */
    vm_send(q->vm, NULL, q->caller, make_boxed(t));
    free(q);
}

void tr_delivered_add(tvm_vm *vm, TrVm *t)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->pipes_lock);
    t->pipe_next = S->pipes;
    S->pipes = t;
    pthread_mutex_unlock(&S->pipes_lock);
}

void tr_delivered_remove(tvm_vm *vm, TrVm *t)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->pipes_lock);
    for (TrVm **pt = &S->pipes; *pt; pt = &(*pt)->pipe_next)
        if (*pt == t) {
            *pt = t->pipe_next;
            break;
        }
    pthread_mutex_unlock(&S->pipes_lock);
}

/* A mark for q in every running pipeline.  A pipeline finishing meanwhile
 * refuses it (its last drain is done) and is not waited for. */
static void mark_pipelines(tvm_vm *vm, TrDelivReq *q)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->pipes_lock);
    for (TrVm *t = S->pipes; t; t = t->pipe_next) {
        vm_atomic_fetch_add_full(&q->left, 1);
        if (!tr_pipeline_mark(t->tp, request_done, q))
            vm_atomic_fetch_add_full(&q->left, (uintptr_t)-1);
    }
    pthread_mutex_unlock(&S->pipes_lock);
}

tvm_status tr_nif_trace_delivered(tvm_env *env, int argc, const tvm_term *argv,
                                  tvm_term *result, void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Term who = vm_root_get(p, argv[0]);
    /* A call context has no mailbox for the reply. */
    if ((!term_is_pid(who) && who != make_atom(ATOM_ALL)) || !p->fiber) {
        vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(ATOM_BADARG), NULL);
        return TVM_EXCEPTION;
    }
    TrDelivReq *q = vm_malloc(sizeof *q);
    q->vm = p->vm;
    q->caller = p->pid;
    q->tracee = who;
    q->ref = vm_atomic_fetch_add_relaxed(&vm_sched_of(p->vm)->next_ref, 1) + 1;
    vm_atomic_store_relaxed(&q->left, 1);
    vm_atomic_fetch_add_relaxed(&open_reqs, 1);
    uint64_t ref = q->ref;
    mark_pipelines(p->vm, q);
    request_done(q);   /* the call's hold: may answer now, and free q */
    *result = vm_root_push(p, make_small((int64_t)ref));
    return TVM_OK;
}
