/*
 * trace/tr_vm_proc.c - the events of a process's life on its scheduler:
 * running (in/out), send and receive, and the lossless policy's wait.
 *
 * Where each event is written.  Every event is written by the thread the
 * event's process runs on, into that scheduler's ring (trace/tr_vm.c:
 * rings), and on the process's own fiber, so that the lossless policy can
 * suspend the process that writes it:
 *   - out: in vm_proc_yield, before the process switches out (to the
 *     scheduler or, by vm_sched_yield_to_next, straight to the next
 *     process); at exit, `out` with 0 after the exit event.
 *   - in: in vm_proc_yield, after the switch back (whichever path
 *     resumed it), by the flag as it is then: a process that got the
 *     flag while it waited writes `in` with no `out` before it, as BEAM's
 *     scheduler does; and at the start of a new process (proc_main), with
 *     its entry function as BEAM does.
 *   - send: by the sender before the message is delivered (erlang:send,
 *     tvm_send; a call context writes to the shared ring), whether or not
 *     the receiver is alive.  'DOWN' messages are sent by the VM, not by
 *     a process: no send event.
 *   - receive: by the receiver when it takes messages out of its inbox
 *     into its own queue (vm_proc_fetch, vm_proc_wait): one event per
 *     message, in arrival order, the same for messages from processes,
 *     tvm_send and monitors.  BEAM writes it at delivery, on the sender's
 *     thread; here the receiver writes it, so the receive event is always
 *     the receiver's own (its ring, its order, suspendable under
 *     lossless) and comes after the sender's send event.  A message that
 *     is never looked at (the process exits first) has no receive event.
 *   - gc_major_start, gc_major_end: by the process whose heap is
 *     collected, around the collection (vm/heap.c, vm_gc), on its own
 *     thread: a collection is only ever of the running process's heap
 *     (or a call context's, on the embedder's thread).
 * The MFA of in/out is the function of the newest call frame (trace
 * frames name the traced function), or none (printed 0).
 *
 * Protocol: the lossless wait.
 *   A process whose ring is full (tr_emit returned TR_FULL) registers its
 *   pid in its scheduler's wait list and switches out as a waiting process
 *   (want_wait, vm_proc_switch_out: no in/out events for this); the
 *   scheduler runs other processes meanwhile.  The collector calls
 *   on_space (tr_vm_on_space) after it freed room in a ring that returned
 *   TR_FULL; on_space bumps the list's generation and wakes every
 *   registered pid (vm_proc_wake: RUNNABLE and queued, or `signaled` if it
 *   has not switched out yet, so the scheduler does not make it WAITING).
 *   The woken process writes the event again (the ring may be full again:
 *   it waits again).
 *   No lost wake-up: the producer loads `gen` ([TL1'] acquire) before its
 *   emit, and registers only if `gen` is unchanged under the list lock.
 *   on_space bumps it under the same lock ([TL1] release) after the room
 *   was made.  If on_space ran before the registration, the producer sees
 *   a new gen and retries at once; if after, it finds the pid.  A
 *   TR_FULL is always followed by an on_space call once room is made (the
 *   `waiting` handshake of trace/tr_buffer.c).
 *   Stop: the suspended process passed a quiescent state, so a stop can
 *   free the pipeline meanwhile.  tvm_trace_stop wakes every process still
 *   registered after the pipeline is freed (tr_vm_waits_destroy); a woken
 *   process reloads the pipeline pointer before it retries and writes
 *   nothing if it is gone.  Registrations into the old lists all happened
 *   before the grace period ended (a process registers before it switches
 *   out), so none is missed.
 *   Wake-ups that were meant for something else (a message, a timer)
 *   while a process waits for room only make it retry; and a process
 *   suspended here returns to its caller's wait loop as if woken
 *   spuriously (every want_wait loop in the VM checks its condition again).
 *   A call context (no fiber: an embedder's thread) cannot be suspended:
 *   it blocks in tr_wait_space, offline as in any other blocking wait of
 *   a call context (vm_qsbr_block_begin).  Online, every grace period
 *   waited for it, and so for the collector: a trace callback that set a
 *   pattern (a grace period), or that waited for the code permission
 *   while another thread's pattern held it, never returned, and the
 *   collector made no room.  Offline it is a suspended process: it holds
 *   the pipeline (tr_pipeline_hold; a stop frees it only after) but not
 *   t, which it reloads afterwards, writing nothing if it is gone.
 */
#include <stdlib.h>
#include <string.h>

#include "trace/tr_vm.h"
#include "trace/tr_session.h"
#include "trace/tr_vm_internal.h"
#include "vm/heap.h"
#include "vm/qsbr.h"


/* ==== the lossless wait ==== */

void tr_vm_waits_init(TrVm *t)
{
    t->waits = vm_calloc((size_t)t->nscheds, sizeof *t->waits);
    for (int i = 0; i < t->nscheds; i++)
        pthread_mutex_init(&t->waits[i].lock, NULL);
}

/* Takes every registered pid out of w (bumping gen) and wakes them. */
static void wake_list(tvm_vm *vm, TrWaitList *w)
{
    pthread_mutex_lock(&w->lock);
    /* [TL1] release: the room made before; pairs with [TL1'] below. */
    vm_atomic_store_release(&w->gen, vm_atomic_load_relaxed(&w->gen) + 1);
    uint64_t *pids = w->pids;
    size_t n = w->n;
    w->pids = NULL;
    w->n = w->cap = 0;
    pthread_mutex_unlock(&w->lock);
    SchedSystem *sys = vm_sched_of(vm);
    for (size_t i = 0; i < n && sys; i++)
        vm_proc_wake(sys, pids[i]);
    free(pids);
}

void tr_vm_on_space(void *data, int sched)
{
    TrVm *t = data;
    if (sched >= 0 && sched < t->nscheds)
        wake_list(t->vm, &t->waits[sched]);
}

void tr_vm_waits_destroy(TrVm *t)
{
    if (!t->waits)
        return;
    for (int i = 0; i < t->nscheds; i++) {
        wake_list(t->vm, &t->waits[i]);
        pthread_mutex_destroy(&t->waits[i].lock);
    }
    free(t->waits);
    t->waits = NULL;
}

/* p (on its fiber) waits for room in ring `ring` unless the generation
 * moved since `gen` was loaded. */
static void suspend_for_room(Process *p, TrVm *t, int ring, uintptr_t gen)
{
    TrWaitList *w = &t->waits[ring];
    pthread_mutex_lock(&w->lock);
    if (vm_atomic_load_relaxed(&w->gen) != gen) {
        pthread_mutex_unlock(&w->lock);
        return;
    }
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 16;
        w->pids = vm_realloc(w->pids, w->cap * sizeof *w->pids);
    }
    w->pids[w->n++] = p->pid;
    pthread_mutex_unlock(&w->lock);
    p->want_wait = true;
    vm_proc_switch_out(p);
}

/* A thread that cannot be suspended (a call context's) waits for room in
 * ring `ring` offline, holding t's pipeline (the header says why); t
 * itself may be freed by the time it returns. */
static void block_for_room(TrVm *t, int ring)
{
    TrPipeline *tp = t->tp;
    tr_pipeline_hold(tp);
    bool was = vm_qsbr_block_begin();
    tr_wait_space(tp, ring, 0);
    vm_qsbr_block_end(was);
    tr_pipeline_unhold(tp);
}

TrStatus tr_vm_emit(Process *p, TrVm *t, const TrEmit *ev)
{
    for (;;) {
        /* Again after each suspension: p may have been woken onto another
         * scheduler, and a ring has one producer, its scheduler. */
        int ring = tr_vm_ring_of(p);
        bool susp = t->lossless && ring >= 0 && p->fiber;
        /* [TL1'] acquire; pairs with [TL1] in wake_list(). */
        uintptr_t gen = susp ? vm_atomic_load_acquire(&t->waits[ring].gen) : 0;
        TrStatus st = tr_emit(t->tp, ring, ev);
        if (st != TR_FULL)
            return st;
        TrSession *sess = t->sess;
        unsigned sid = t->sid;
        if (susp)
            suspend_for_room(p, t, ring, gen);
        else
            block_for_room(t, ring);
        /* We may have passed a quiescent state: the pipeline may be gone
         * (t is not touched again), its session too. */
        uintptr_t w = vm_atomic_load_acquire(&sess->state);
        t = tr_sess_sid(w) == sid ? vm_atomic_load_ptr_acquire(&sess->out) : NULL;
        if (!t)
            return TR_DROPPED;
    }
}

/* ==== running: in and out ==== */

/* The function p is in: its newest frame with a function, or NULL. */
static const FuncInfo *current_function(const Process *p)
{
    for (uint32_t i = p->nframes; i-- > 0;)
        if (p->frames[i].fn)
            return p->frames[i].fn;
    return NULL;
}

static void sched_event(Process *p, TrKind kind, Atom mod, Atom fun, unsigned arity, bool mfa)
{
    uintptr_t pf = vm_atomic_load_relaxed(&p->trace);
    if (!(pf & VM_TRACE_RUNNING))
        return;
    TrEmit ev = {
        .kind = kind,
        .flags = mfa ? 0 : TR_F_NO_MFA,
        .pid = p->pid,
        .mod = mod,
        .fun = fun,
        .arity = arity,
    };
    tr_emit_flagged(p, pf, VM_TRACE_RUNNING, &ev);
}

static void sched_event_current(Process *p, TrKind kind)
{
    const FuncInfo *fn = current_function(p);
    if (fn)
        sched_event(p, kind, fn->mod, fn->name, fn->arity, true);
    else
        sched_event(p, kind, 0, 0, 0, false);
}

void vm_hook_sched_in(Process *p)
{
    sched_event_current(p, TR_K_IN);
}

void vm_hook_sched_out(Process *p)
{
    sched_event_current(p, TR_K_OUT);
}

void vm_hook_sched_start(Process *p)
{
    const Export *e = p->entry;
    sched_event(p, TR_K_IN, e->mod, e->name, e->arity, true);
}

/*
 * The exiting flag's {trace,Pid,out_exited,0}, the process's last event.
 * Only that: as in BEAM, the running flag writes no `out` for a process
 * that exited (OTP's schedule() traces a freed process's last switch out
 * for F_TRACE_SCHED_EXIT only), and an exit here runs to its end in one
 * go, so BEAM's in_exiting and out_exiting (an exit scheduled out half
 * done) do not occur.
 */
void vm_hook_sched_exit(Process *p)
{
    uintptr_t pf = vm_atomic_load_relaxed(&p->trace);
    if (!(pf & VM_TRACE_EXITING))
        return;
    TrEmit ev = {
        .kind = TR_K_OUT_EXITED,
        .flags = TR_F_NO_MFA,
        .pid = p->pid,
    };
    tr_emit_flagged(p, pf, VM_TRACE_EXITING, &ev);
}

/* ==== messages ==== */

void vm_hook_send(Process *from, Term to, Term msg)
{
    uintptr_t pf = vm_atomic_load_relaxed(&from->trace);
    if (!(pf & VM_TRACE_SEND))
        return;
    Term terms[2] = { msg, to };
    TrEmit ev = {
        .kind = TR_K_SEND,
        .flags = TR_F_NO_MFA,
        .pid = from->pid,
        .terms = terms,
        .nterms = 2,
    };
    /* tvm_send may come from an embedder's thread outside any tvm_call:
     * a reader for the emit (a no-op on a scheduler thread). */
    vm_qsbr_call_enter();
    tr_emit_flagged(from, pf, VM_TRACE_SEND, &ev);
    vm_qsbr_call_leave();
}

void vm_hook_receive(Process *p, const Message *m)
{
    for (; m; m = m->next) {
        /* Again for each message: an emit may suspend p (lossless). */
        uintptr_t pf = vm_atomic_load_relaxed(&p->trace);
        if (!(pf & VM_TRACE_RECEIVE))
            return;
        TrEmit ev = {
            .kind = TR_K_RECEIVE,
            .flags = TR_F_NO_MFA,
            .pid = p->pid,
            .terms = &m->term,
            .nterms = 1,
        };
        tr_emit_flagged(p, pf, VM_TRACE_RECEIVE, &ev);
    }
}

/* The garbage_collection flag's Info, BEAM's keys in BEAM's order (OTP
 * 25's gc_minor_start and gc_major_start lists, less the binary heap's
 * four: binaries here live on the process heap and count in heap_size).
 * Every collection copies the whole heap, so the events are the major
 * ones and the old heap is always empty; there are no heap fragments
 * (messages wait in blocks of their own, mq_words), so mbuf_size is 0.
 * stack_size is vm_stack_words's. */
enum { GC_KEYS = 8 };

typedef struct GcInfo {
    Term pairs[GC_KEYS][3];
    Term cells[GC_KEYS][2];
} GcInfo;

/* The Info list laid out in *g (terms may live anywhere; the encoder and
 * a tracer's delivery copy them), for the collection's start or end. */
static Term gc_info(GcInfo *g, const Process *p, size_t words)
{
    const struct {
        Atom key;
        size_t value;
    } kv[GC_KEYS] = {
        { ATOM_WORDSIZE, words },
        { ATOM_OLD_HEAP_BLOCK_SIZE, 0 },
        { ATOM_HEAP_BLOCK_SIZE, vm_heap_size(p) },
        { ATOM_MBUF_SIZE, 0 },
        { ATOM_RECENT_SIZE, p->gc_recent },
        { ATOM_STACK_SIZE, vm_stack_words(p) },
        { ATOM_OLD_HEAP_SIZE, 0 },
        { ATOM_HEAP_SIZE, (size_t)(p->htop - p->heap) },
    };
    Term list = TERM_NIL;
    for (int k = GC_KEYS - 1; k >= 0; k--) {
        g->pairs[k][0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
        g->pairs[k][1] = make_atom(kv[k].key);
        g->pairs[k][2] = make_small((int64_t)kv[k].value);
        g->cells[k][0] = make_boxed(g->pairs[k]);
        g->cells[k][1] = list;
        list = make_cons_ptr(g->cells[k]);
    }
    return list;
}

void vm_hook_gc(Process *p, bool end, size_t words)
{
    uintptr_t pf = vm_atomic_load_relaxed(&p->trace);
    if (!(pf & VM_TRACE_GC))
        return;
    GcInfo g;
    Term info = gc_info(&g, p, words);
    TrEmit ev = {
        .kind = end ? TR_K_GC_MAJOR_END : TR_K_GC_MAJOR_START,
        .flags = TR_F_NO_MFA,
        .pid = p->pid,
        .terms = &info,
        .nterms = 1,
    };
    /* A call context collects on an embedder's thread: a reader for the
     * emit there (a no-op on a scheduler thread). */
    vm_qsbr_call_enter();
    tr_emit_flagged(p, pf, VM_TRACE_GC, &ev);
    vm_qsbr_call_leave();
}
