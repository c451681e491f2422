/*
 * vm/procinfo.c - a process looking at others: erlang:processes/0 and
 * erlang:process_info/1,2, as BEAM's for the items tracevm keeps.
 *
 * Each item is read the way its writers allow, never from a field that
 * only its owner may touch while it runs: the state and the inbox under the process's
 * lock, the links under the VM's link lock, its monitors' watchers on its
 * own list under its lock, its name under the registry's lock, and the
 * counters (queue taken in, heap, reductions) and trap_exit from their
 * relaxed atomics, initial_call from the entry set at the spawn.
 * So the answer about another process is a moment's picture, as BEAM's
 * (which asks the process and may get an answer that is already old).
 * What only the process itself touches while it runs (its frames, the
 * messages it took in from its inbox, the list of the monitors it set,
 * its dictionary)
 * is read as below; whether each of those monitors still holds is then
 * looked up on its target, under the target's lock (monitor_holds).
 *
 * Running or runnable.  A process that yielded at the end of its time
 * slice stays RUNNING while it waits in a run queue (vm/sched.c, the
 * direct switch), so the state alone cannot tell BEAM's `running` (on
 * a scheduler thread now) from `runnable` (queued).  The capture
 * interlock's word can (vm/interlock.h): whoever switches a process in
 * stores IL_RUNNING there, and the process itself IL_SUSPENDED as it
 * switches out, on every switch already, so the switch path pays
 * nothing more.  status reads it (relaxed, under the process's lock for
 * the state): RUNNING and switched in is `running`, RUNNING and not is
 * `runnable`.  From another thread that is a moment's picture (a switch
 * may be under way); a process queued behind the asker on the asker's
 * own scheduler was switched out by this thread, or handed over to it
 * under a lock or by the lend's acquire, so it reads exactly.
 *
 * Asking a running process.  current_function and current_stacktrace
 * read the frames, messages the process's own queue (then its inbox,
 * under its lock), dictionary its dictionary, which only the process
 * changes, and only
 * while it runs: a process that is not RUNNING is read under its lock (a
 * scheduler takes that lock to make it RUNNING, and its top frame's pc
 * is where it stopped: every place a process suspends stores it).  A
 * RUNNING one that waits in the local queue of the asker's own
 * scheduler is read directly too (vm_sched_holds_queued): only this
 * thread may pop it from there, and it is busy with the asker, so it
 * stays switched out for the whole read.  A RUNNING one anywhere else
 * may be switched in at any moment by another thread, which takes no
 * lock to do it (a switch-out flag read here could be stale by the
 * time the frames are, and only a full fence on every switch would
 * close that window), so it is asked, as BEAM asks a process by a signal: the asker
 * puts a request (VmInfoReq, on its own stack) on the target's
 * info_reqs list under the target's lock and sleeps a millisecond at a
 * time; the target, at its next reduction check (within a time slice,
 * or once a native it is in returns), copies its frames, its messages
 * (each message copied off any heap: vm_messages_copy, which the asker
 * frees) or its dictionary's pairs (vm_dict_copy, off any heap too)
 * into every request on the list and empties it, under its lock.  The asker looks
 * again under that lock each time it wakes: answered, or the target no
 * longer running (then read directly), or gone (undefined); whatever
 * ends the wait, the asker's request is off the list before it returns,
 * so the target never writes to a stack that moved on.  A process
 * never asks itself (it reads its own frames and queue).
 *
 * Lock order: the process table's lock, then a process's (as
 * tvm_processes); every other lock is taken alone.
 */
#include "vm/procinfo.h"

#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/dict.h"
#include "vm/heap.h"
#include "vm/interlock.h"
#include "vm/lend.h"
#include "vm/registry.h"
#include "vm/sched.h"
#include "vm/vm.h"

/* ==== lists of pids ==== */

/* The list of the n pids on p's heap (a long one lends, vm/lend.h). */
static Term pid_list(Process *p, const uint64_t *pids, size_t n)
{
    bool lent = vm_lend_if_long(p, n);
    vm_heap_ensure(p, 2 * n, NULL, 0);
    Term l = TERM_NIL;
    for (size_t i = n; i-- > 0;) {
        Term *c = vm_heap_alloc(p, 2);
        c[0] = make_pid(pids[i]);
        c[1] = l;
        l = make_cons_ptr(c);
    }
    vm_lend_done(p, lent);
    return l;
}

/* A growing array of pids. */
typedef struct Pids {
    uint64_t *v;
    size_t n, cap;
} Pids;

static void pids_add(Pids *a, uint64_t pid)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->v = vm_realloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = pid;
}

/* ==== processes/0 ==== */

static int pid_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static tvm_status nif_processes(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                                void *data)
{
    (void)argc, (void)argv, (void)data;
    Process *p = env->p;
    SchedSystem *sys = vm_sched_of(p->vm);
    Pids a = { 0 };
    if (sys) {
        bool lent = vm_lend_if_long(p, sys->cap);
        pthread_mutex_lock(&sys->lock);
        for (size_t i = 0; i < sys->cap; i++) {
            Process *t = sys->table[i];
            if (!t || t == (Process *)1)
                continue;
            /* As is_process_alive/1: one that is exiting is gone. */
            pthread_mutex_lock(&t->lock);
            bool alive = t->state != PS_EXITED && !t->exiting;
            pthread_mutex_unlock(&t->lock);
            if (alive)
                pids_add(&a, t->pid);
        }
        pthread_mutex_unlock(&sys->lock);
        vm_lend_done(p, lent);
    }
    /* In the order of the pids, as BEAM lists them. */
    if (a.n)
        qsort(a.v, a.n, sizeof *a.v, pid_cmp);
    *result = vm_root_push(p, pid_list(p, a.v, a.n));
    free(a.v);
    return TVM_OK;
}

/* ==== what only the process may read: its frames and its messages ==== */

/* As BEAM's default backtrace_depth. */
#define INFO_DEPTH 8

/* What a request asks for. */
enum { WANT_FRAMES = 1, WANT_MESSAGES = 2, WANT_MONITORS = 4, WANT_DICT = 8, WANT_SIZES = 16 };

/* A request, on the asker's stack.  next and done are under the
 * target's lock (written by the asker as it links or unlinks the
 * request, by the target as it answers); want is written by the asker
 * before it lists the request; n, frames, msgs, mons and nmons are
 * written by the target in the same critical section that sets done, or
 * by the asker itself when it reads a target held still, and read by
 * the asker once it saw done under that lock, as are dict and dict_over.
 * msgs (copies, off any heap), mons (copies of the entries of the
 * monitors the target set that demonitor has not taken off, nmons of
 * them) and dict (a copy of the dictionary's pairs off any heap, or NULL:
 * empty, or with dict_over, over max_message_words) are the asker's to
 * free, whatever ended its wait.  total_words, stack_words and
 * mem_bytes (WANT_SIZES) are written and read as n is. */
typedef struct VmInfoReq {
    struct VmInfoReq *next;
    bool done;
    unsigned want;
    uint32_t n;
    RawFrame frames[INFO_DEPTH];
    Message *msgs;
    MonitorOut *mons;
    size_t nmons;
    Message *dict;
    bool dict_over;
    size_t total_words, stack_words, mem_bytes;
} VmInfoReq;

/* t's frames, top first: t's own thread, or t's lock held while t is
 * not running.  Its top frame's pc is where it is (stored wherever it
 * suspends or yields). */
static uint32_t frames_of(const Process *t, RawFrame *out)
{
    if (!t->nframes)
        return 0;
    return vm_raw_frames(t, t->nframes, t->frames[t->nframes - 1].pc, out, INFO_DEPTH);
}

/* memory, but for its links (under the link lock: item_value): the
 * bytes tracevm allocated for t, its record, heap block, register,
 * frame, handler and root stacks at their capacity, its messages (its
 * own queue's and its inbox's), its dictionary's table and its monitors
 * both ways.  Not its fiber's native stack, mapped once per process
 * (vm/config.h, VM_FIBER_STACK_SIZE) and committed by the OS page by
 * page as it is touched, which no count here could tell.  As read_into
 * (the inbox and the monitors on t are under t's lock). */
static size_t memory_bytes(const Process *t)
{
    size_t monitors_on = 0;
    for (const Monitor *m = t->monitors; m; m = m->next)
        monitors_on++;
    size_t nmsgs = vm_atomic_load_relaxed(&t->mq_len) + t->inbox_len;
    size_t words = vm_heap_size(t) + t->mq_words + t->inbox_words + vm_dict_words(t) +
                   t->stack_size + t->roots_cap;
    return sizeof(Process) + words * sizeof(Term) + nmsgs * sizeof(Message) +
           t->frames_cap * sizeof(Frame) + t->handlers_cap * sizeof(Handler) +
           t->mon_out_cap * sizeof(MonitorOut) + monitors_on * sizeof(Monitor);
}

/* What r wants of t into r: t's lock held, and t's own thread or t
 * held still (not running, or queued on this thread's scheduler). */
static void read_into(const Process *t, VmInfoReq *r)
{
    if (r->want & WANT_FRAMES)
        r->n = frames_of(t, r->frames);
    if (r->want & WANT_MESSAGES)
        r->msgs = vm_messages_copy(t);
    if (r->want & WANT_MONITORS) {
        r->mons = t->mon_out_len ? vm_malloc(t->mon_out_len * sizeof *r->mons) : NULL;
        for (size_t i = 0; i < t->mon_out_len; i++)
            if (t->mon_out[i].target)
                r->mons[r->nmons++] = t->mon_out[i];
    }
    if (r->want & WANT_DICT)
        r->dict = vm_dict_copy(t, t->vm->max_msg, &r->dict_over);
    if (r->want & WANT_SIZES) {
        r->total_words = vm_heap_total_words(t);
        r->stack_words = vm_stack_words(t);
        r->mem_bytes = memory_bytes(t);
    }
}

/* Frees what r holds (any of its ends). */
static void req_free(VmInfoReq *r)
{
    vm_messages_free(r->msgs);
    vm_messages_free(r->dict);
    free(r->mons);
}

void vm_procinfo_serve(Process *p)
{
    pthread_mutex_lock(&p->lock);
    for (VmInfoReq *r = (VmInfoReq *)vm_atomic_load_ptr_relaxed(&p->info_reqs); r; r = r->next) {
        read_into(p, r);
        r->done = true;
    }
    vm_atomic_store_relaxed(&p->info_reqs, 0);
    pthread_mutex_unlock(&p->lock);
}

/* Takes r off t's list if it is there (t's lock held). */
static void req_unlink(Process *t, VmInfoReq *r)
{
    VmInfoReq *head = vm_atomic_load_ptr_relaxed(&t->info_reqs);
    if (head == r) {
        vm_atomic_store_relaxed(&t->info_reqs, (uintptr_t)r->next);
        return;
    }
    for (VmInfoReq *q = head; q; q = q->next) {
        if (q->next == r) {
            q->next = r->next;
            return;
        }
    }
}

/* What r->want of t into r for p: read, or asked of t while it runs (the
 * essay above).  1: r holds them; 0: t is gone; -1: p is being killed
 * (its sleep said so); 2: t runs elsewhere and p is a call context made
 * on a scheduler thread (inside a native), which cannot wait without
 * holding that thread, perhaps the scheduler t is queued on after a
 * yield while the native lends that queue (t queued here otherwise is
 * read directly): not asked.  A call context on an embedder's thread
 * waits by sleeping that thread. */
static int snapshot_for(Process *p, Process *t, unsigned want, VmInfoReq *r)
{
    *r = (VmInfoReq){ .want = want };
    if (t == p) {
        /* Its own frames, the native's (this one) left out: the first
         * is the function that called process_info/2, at the call. */
        RawFrame all[INFO_DEPTH + 1];
        uint32_t n = vm_raw_frames(p, p->nframes, NULL, all, INFO_DEPTH + 1);
        r->n = n ? n - 1 : 0;
        memcpy(r->frames, all + 1, r->n * sizeof(RawFrame));
        if (want & (WANT_MESSAGES | WANT_MONITORS | WANT_DICT | WANT_SIZES)) {
            pthread_mutex_lock(&p->lock);   /* for its inbox */
            r->want &= ~WANT_FRAMES;
            read_into(p, r);
            pthread_mutex_unlock(&p->lock);
        }
        return 1;
    }
    bool listed = false;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        int got = -2;
        if (t->state == PS_EXITED || t->exiting)
            got = 0;
        else if (r->done)
            got = 1;
        else if (t->state != PS_RUNNING || vm_sched_holds_queued(t)) {
            read_into(t, r);
            got = 1;
        } else if (!p->fiber && vm_running_process())
            got = 2;
        if (got != -2) {
            if (listed && !r->done)
                req_unlink(t, r);
            pthread_mutex_unlock(&t->lock);
            return got;
        }
        if (!listed) {
            r->next = (VmInfoReq *)vm_atomic_load_ptr_relaxed(&t->info_reqs);
            vm_atomic_store_relaxed(&t->info_reqs, (uintptr_t)r);
            listed = true;
        }
        pthread_mutex_unlock(&t->lock);
        tvm_status st = tvm_sleep(&p->env, 1);
        pthread_mutex_lock(&t->lock);
        if (st != TVM_OK) {
            if (!r->done)
                req_unlink(t, r);
            pthread_mutex_unlock(&t->lock);
            return -1;
        }
    }
}

/* The list of the terms of msgs, in order, on p's heap (a long copy
 * lends, vm/lend.h). */
static Term messages_term(Process *p, const Message *msgs)
{
    size_t words = 0;
    for (const Message *m = msgs; m; m = m->next)
        words += m->words + 2;
    bool lent = vm_lend_if_long(p, words);
    vm_heap_ensure(p, words, NULL, 0);
    Term l = TERM_NIL, *last = NULL;
    for (const Message *m = msgs; m; m = m->next) {
        Term *c = vm_heap_alloc(p, 2);
        c[0] = vm_copy_term(p, m->term);
        c[1] = TERM_NIL;
        if (last)
            last[1] = make_cons_ptr(c);
        else
            l = make_cons_ptr(c);
        last = c;
    }
    vm_lend_done(p, lent);
    return l;
}

/* The terms of a copy made off any heap (vm_dict_copy's) on p's heap
 * (a long copy lends, vm/lend.h). */
static Term copy_in(Process *p, const Message *m)
{
    bool lent = vm_lend_if_long(p, m->words);
    vm_heap_ensure(p, m->words, NULL, 0);
    Term t = vm_copy_term(p, m->term);
    vm_lend_done(p, lent);
    return t;
}

/* The name a live monitor `ref` of watcher w on the process `target`
 * was set by (TERM_NIL: by pid); false when it no longer holds: its
 * target is exiting or gone (it sent or sends the 'DOWN'), or demonitor
 * took it off meanwhile.  The node is looked for under the target's
 * lock, the lock its writers take, never through a pointer kept from
 * the watcher's list (the node may be freed by then). */
static bool monitor_holds(SchedSystem *sys, uint64_t target, uint64_t ref, uint64_t w,
                          Term *name)
{
    Process *t = vm_proc_get_live(sys, target);
    bool found = false;
    if (!t)
        return false;
    pthread_mutex_lock(&t->lock);
    for (const Monitor *m = t->monitors; m && !t->exiting; m = m->next) {
        if (m->ref == ref && m->watcher == w) {
            *name = m->name;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&t->lock);
    vm_proc_put(sys, t);
    return found;
}

/* [{process, Pid} or {process, {Name, nonode@nohost}}] of the monitors
 * the process w set that still hold, in the order they were set (the
 * entries' order: that of their references). */
static Term monitors_term(Process *p, uint64_t w, const MonitorOut *mons, size_t n)
{
    SchedSystem *sys = vm_sched_of(p->vm);
    size_t base = p->nroots;
    for (size_t i = 0; i < n; i++) {
        Term name;
        if (!monitor_holds(sys, mons[i].target, mons[i].ref, w, &name))
            continue;
        Term what = make_pid(mons[i].target);
        if (name != TERM_NIL) {
            Term e[2] = { name, make_atom(ATOM_NONODE) };
            what = vm_make_tuple(p, 2, e);
        }
        Term e[2] = { make_atom(ATOM_PROCESS), what };
        vm_root_push(p, vm_make_tuple(p, 2, e));
    }
    /* Each pair a root while the next ones allocate; the list's cells
     * allocate too, so the roots go only once it is made. */
    Term l = TERM_NIL;
    for (size_t i = p->nroots; i-- > base;)
        l = vm_make_cons(p, p->roots[i], l);
    p->nroots = (uint32_t)base;
    return l;
}

/* {M, F, A} of t's entry function (its spawn's), or undefined without
 * one.  Set at the spawn, before t was published, and never again. */
static Term entry_term(Process *p, const Process *t)
{
    const Export *x = t->entry;
    if (!x)
        return make_atom(ATOM_UNDEFINED);
    Term e[3] = { make_atom(x->mod), make_atom(x->name), make_small(x->arity) };
    return vm_make_tuple(p, 3, e);
}

/* {M, F, A} of the first frame, or of t's entry function before it has
 * frames (spawned, not yet run); undefined without either. */
static Term function_term(Process *p, const Process *t, const VmInfoReq *r)
{
    if (!r->n)
        return entry_term(p, t);
    const FuncInfo *fn = r->frames[0].fn;
    Term e[3] = { make_atom(fn->mod), make_atom(fn->name), make_small(fn->arity) };
    return vm_make_tuple(p, 3, e);
}

/* The bytes of t's table of links, read under the link lock, which its
 * writers take (vm/links.c). */
static size_t links_bytes(Process *p, const Process *t)
{
    pthread_mutex_lock(&p->vm->link_lock);
    size_t n = t->links_cap;
    pthread_mutex_unlock(&p->vm->link_lock);
    return n * sizeof(uint64_t);
}

/* ==== process_info/2 ==== */

/* One process_info call: p asks about t. */
typedef struct Info {
    Process *p, *t;
    /* t was found exiting meanwhile: the answer is undefined. */
    bool gone;
    /* An item is asked that BEAM has the process answer itself (by a
     * signal it handles while it runs: item_self_answered). */
    bool self_answered;
    /* t's dictionary copies to more than max_message_words words (its
     * terms share parts, which a copy flattens): system_limit. */
    bool over;
} Info;

/* The status of t (its lock held; not exiting), as BEAM names it: a
 * RUNNING process not switched in is queued (the essay above), except
 * when BEAM would have had it answer: it runs to do that, and says so. */
static Atom status_of(const Info *in)
{
    const Process *t = in->t;
    if (t == in->p)
        return ATOM_RUNNING;
    if (t->state == PS_RUNNING)
        return in->self_answered ||
                       IL_STATE_OF(vm_atomic_load_relaxed(&t->il.word)) == IL_RUNNING
                   ? ATOM_RUNNING
                   : ATOM_RUNNABLE;
    return t->state == PS_WAITING ? ATOM_WAITING : ATOM_RUNNABLE;
}

/* The value of one item (item_known) of in->t for in->p; in->gone set
 * when t was found exiting meanwhile. */
static Term item_value(Info *in, Term item)
{
    Process *p = in->p, *t = in->t;
    bool *gone = &in->gone;
    Atom a = atom_value(item);
    Pids w = { 0 };
    Term v;
    switch (a) {
    case ATOM_STATUS:
    case ATOM_MESSAGE_QUEUE_LEN: {
        pthread_mutex_lock(&t->lock);
        *gone = *gone || t->state == PS_EXITED || t->exiting;
        Atom st = status_of(in);
        size_t len = vm_atomic_load_relaxed(&t->mq_len) + t->inbox_len;
        pthread_mutex_unlock(&t->lock);
        return a == ATOM_STATUS ? make_atom(st) : make_small((int64_t)len);
    }
    case ATOM_HEAP_SIZE:
        return make_small(
            (int64_t)(t == p ? vm_heap_size(p) : vm_atomic_load_relaxed(&t->heap_words)));
    case ATOM_REDUCTIONS: {
        uint64_t r = vm_atomic_load_relaxed(&t->reductions);
        if (t == p)
            r += (uint64_t)(p->reds_slice - p->reds);   /* this slice's so far */
        return make_small((int64_t)r);
    }
    case ATOM_TRAP_EXIT:
        return make_bool(vm_atomic_load_relaxed(&t->trap_exit) != 0);
    case ATOM_INITIAL_CALL:
        return entry_term(p, t);
    case ATOM_MESSAGES: {
        VmInfoReq r;
        int got = snapshot_for(p, t, WANT_MESSAGES, &r);
        *gone = *gone || got == 0;
        v = got == 1 ? messages_term(p, r.msgs) : make_atom(ATOM_UNDEFINED);
        req_free(&r);
        return v;
    }
    case ATOM_MONITORS: {
        VmInfoReq r;
        int got = snapshot_for(p, t, WANT_MONITORS, &r);
        *gone = *gone || got == 0;
        v = got == 1 ? monitors_term(p, t->pid, r.mons, r.nmons) : make_atom(ATOM_UNDEFINED);
        req_free(&r);
        return v;
    }
    case ATOM_DICTIONARY: {
        /* The caller's own: its pairs, sharing its terms. */
        if (t == p)
            return vm_dict_pairs(p);
        VmInfoReq r;
        int got = snapshot_for(p, t, WANT_DICT, &r);
        *gone = *gone || got == 0;
        in->over = in->over || (got == 1 && r.dict_over);
        v = got != 1 ? make_atom(ATOM_UNDEFINED) : r.dict ? copy_in(p, r.dict) : TERM_NIL;
        req_free(&r);
        return v;
    }
    case ATOM_CURRENT_FUNCTION:
    case ATOM_CURRENT_STACKTRACE: {
        VmInfoReq r;
        int got = snapshot_for(p, t, WANT_FRAMES, &r);
        /* Killed while it waited (-1): p->kill is set, and p dies as the
         * native returns (vm/interp.c), whatever it answers.  Not asked
         * (2): undefined. */
        if (got != 1) {
            *gone = *gone || got == 0;
            return make_atom(ATOM_UNDEFINED);
        }
        return a == ATOM_CURRENT_FUNCTION ? function_term(p, t, &r)
                                           : vm_stacktrace_term(p, r.frames, r.n);
    }
    case ATOM_TOTAL_HEAP_SIZE:
    case ATOM_STACK_SIZE:
    case ATOM_MEMORY: {
        VmInfoReq r;
        int got = snapshot_for(p, t, WANT_SIZES, &r);
        if (got != 1) {
            *gone = *gone || got == 0;
            return make_atom(ATOM_UNDEFINED);
        }
        size_t n = a == ATOM_TOTAL_HEAP_SIZE ? r.total_words
                   : a == ATOM_STACK_SIZE    ? r.stack_words
                                             : r.mem_bytes + links_bytes(p, t);
        return make_small((int64_t)n);
    }
    case ATOM_PRIORITY:
        return make_atom(ATOM_NORMAL);   /* tracevm has one priority */
    case ATOM_REGISTERED_NAME: {
        Atom name;
        if (!vm_registry_name_of(t, &name))
            return TERM_NIL;   /* BEAM: [] for no name */
        return make_atom(name);
    }
    case ATOM_LINKS:
        pthread_mutex_lock(&p->vm->link_lock);
        for (uint32_t i = 0; i < t->nlinks; i++)
            pids_add(&w, t->links[i]);
        pthread_mutex_unlock(&p->vm->link_lock);
        break;
    default:   /* ATOM_MONITORED_BY */
        pthread_mutex_lock(&t->lock);
        for (const Monitor *m = t->monitors; m; m = m->next)
            pids_add(&w, m->watcher);
        pthread_mutex_unlock(&t->lock);
        break;
    }
    v = pid_list(p, w.v, w.n);
    free(w.v);
    return v;
}

/* Whether Item is one process_info/2 answers (checked before the
 * process is looked at: an unknown item is badarg for a dead one too). */
static bool item_known(Term item)
{
    static const Atom known[] = { ATOM_STATUS, ATOM_MESSAGE_QUEUE_LEN, ATOM_HEAP_SIZE,
                                  ATOM_REDUCTIONS, ATOM_REGISTERED_NAME, ATOM_LINKS,
                                  ATOM_MONITORED_BY, ATOM_TRAP_EXIT, ATOM_CURRENT_FUNCTION,
                                  ATOM_CURRENT_STACKTRACE, ATOM_INITIAL_CALL, ATOM_MESSAGES,
                                  ATOM_MONITORS, ATOM_DICTIONARY, ATOM_TOTAL_HEAP_SIZE,
                                  ATOM_STACK_SIZE, ATOM_MEMORY, ATOM_PRIORITY };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (item == make_atom(known[i]))
            return true;
    return false;
}

/* Whether BEAM (OTP 25) has the process answer item itself, by a
 * signal it handles while running, rather than reading it from outside:
 * with such an item in the same call, a queued process says `running`
 * there.  Observed with erl +S 1 (status asked beside each item of a
 * process queued behind the asker). */
static bool item_self_answered(Term item)
{
    static const Atom self[] = { ATOM_LINKS, ATOM_MONITORED_BY, ATOM_CURRENT_FUNCTION,
                                 ATOM_CURRENT_STACKTRACE, ATOM_MESSAGES, ATOM_MONITORS,
                                 ATOM_DICTIONARY, ATOM_TOTAL_HEAP_SIZE, ATOM_MEMORY };
    for (size_t i = 0; i < sizeof self / sizeof self[0]; i++)
        if (item == make_atom(self[i]))
            return true;
    return false;
}

/* {Item, Value}; asked alone, registered_name without a name is [] (in a
 * list it is {registered_name, []}, as BEAM's). */
static Term item_pair(Info *in, Term item, bool alone)
{
    Term v = item_value(in, item);
    if (alone && v == TERM_NIL && item == make_atom(ATOM_REGISTERED_NAME))
        return TERM_NIL;
    Term e[2] = { item, v };
    return vm_make_tuple(in->p, 2, e);
}

static tvm_status raise_error(Process *p, Atom reason)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(reason), NULL);
    return TVM_EXCEPTION;
}

static tvm_status raise_badarg(Process *p)
{
    return raise_error(p, ATOM_BADARG);
}

/* The result r of answers(), or system_limit for THE_NONE. */
static tvm_status answer(Process *p, Term r, tvm_term *result)
{
    if (r == THE_NONE)
        return raise_error(p, ATOM_SYSTEM_LIMIT);
    *result = vm_root_push(p, r);
    return TVM_OK;
}

/* The items asked for: Item alone, or a proper list of at most
 * MAX_ITEMS atoms; false for badarg. */
#define MAX_ITEMS 64

static bool items_of(Term items, Term *its, size_t *n)
{
    *n = 0;
    if (term_is_atom(items)) {
        its[(*n)++] = items;
        return item_known(items);
    }
    Term l = items;
    for (; term_is_cons(l) && *n < MAX_ITEMS; l = cons_tail(l)) {
        if (!item_known(cons_head(l)))
            return false;
        its[(*n)++] = cons_head(l);
    }
    return l == TERM_NIL;
}

/* The answers to the n items its of the live process t (a reference
 * held): the pair of one item asked alone (`alone`), else the list of
 * pairs; undefined when t was found ending meanwhile; THE_NONE when its
 * dictionary is too big to copy (the caller raises system_limit). */
static Term answers(Process *p, Process *t, const Term *its, size_t n, bool alone)
{
    Info in = { p, t, false, false, false };
    for (size_t i = 0; i < n; i++)
        in.self_answered = in.self_answered || item_self_answered(its[i]);
    /* Each answer a root while the next ones allocate. */
    size_t base = p->nroots;
    for (size_t i = 0; i < n; i++)
        vm_root_push(p, item_pair(&in, its[i], alone));
    if (in.gone)
        return make_atom(ATOM_UNDEFINED);
    if (in.over) {
        p->nroots = (uint32_t)base;
        return THE_NONE;
    }
    if (alone)
        return p->roots[base];
    Term r = TERM_NIL;
    for (size_t i = n; i-- > 0;)
        r = vm_make_cons(p, p->roots[base + i], r);
    return r;
}

/* process_info(Pid, Item) and process_info(Pid, [Item]): undefined for a
 * process that is gone or exiting (also one found ending meanwhile). */
static tvm_status nif_process_info(tvm_env *env, int argc, const tvm_term *argv,
                                   tvm_term *result, void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Term pid = vm_root_get(p, argv[0]), items = vm_root_get(p, argv[1]);
    Term its[MAX_ITEMS];
    size_t n;
    if (!term_is_pid(pid) || !items_of(items, its, &n))
        return raise_badarg(p);
    SchedSystem *sys = vm_sched_of(p->vm);
    Process *t = sys ? vm_proc_get_live(sys, pid_value(pid)) : NULL;
    Term r = make_atom(ATOM_UNDEFINED);
    if (t) {
        r = answers(p, t, its, n, term_is_atom(items));
        vm_proc_put(sys, t);
    }
    return answer(p, r, result);
}

/* process_info(Pid): BEAM's items that tracevm keeps, in BEAM's order
 * (OTP 25), registered_name first and only when it has a name; the
 * others BEAM lists (error_handler, group_leader, garbage_collection,
 * suspending) have no counterpart here.  undefined for a process that
 * is gone. */
static tvm_status nif_process_info1(tvm_env *env, int argc, const tvm_term *argv,
                                    tvm_term *result, void *data)
{
    (void)argc, (void)data;
    static const Atom all[] = { ATOM_REGISTERED_NAME, ATOM_CURRENT_FUNCTION, ATOM_INITIAL_CALL,
                                ATOM_STATUS, ATOM_MESSAGE_QUEUE_LEN, ATOM_LINKS,
                                ATOM_DICTIONARY, ATOM_TRAP_EXIT, ATOM_PRIORITY,
                                ATOM_TOTAL_HEAP_SIZE, ATOM_HEAP_SIZE, ATOM_STACK_SIZE,
                                ATOM_REDUCTIONS };
    Process *p = env->p;
    Term pid = vm_root_get(p, argv[0]);
    if (!term_is_pid(pid))
        return raise_badarg(p);
    SchedSystem *sys = vm_sched_of(p->vm);
    Process *t = sys ? vm_proc_get_live(sys, pid_value(pid)) : NULL;
    Term r = make_atom(ATOM_UNDEFINED);
    if (t) {
        Term its[sizeof all / sizeof all[0]];
        size_t n = 0;
        Atom name;
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i] != ATOM_REGISTERED_NAME || vm_registry_name_of(t, &name))
                its[n++] = make_atom(all[i]);
        r = answers(p, t, its, n, false);
        vm_proc_put(sys, t);
    }
    return answer(p, r, result);
}

static const VmNativeDef natives[] = {
    { "erlang", "processes", 0, nif_processes },
    { "erlang", "process_info", 1, nif_process_info1 },
    { "erlang", "process_info", 2, nif_process_info },
};

VmNativeTable vm_procinfo_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
