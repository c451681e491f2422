/*
 * vm/mailbox.c - messages between processes: sending (a copy into the
 * receiver's inbox under its lock), moving the inbox into the process's
 * own queue, selective receive's waits with their timeouts and wake-ups,
 * and the delivery and flush of monitors' 'DOWN' messages (the monitors
 * themselves are vm/monitors.c's).
 *
 * A process's queue (mq, with the cursor of a selective receive) is
 * touched only by the process itself; other threads append to its inbox
 * under p->lock, and the process moves the inbox behind its queue under
 * the same lock (fetch).  A sender that finds the receiver waiting makes
 * it runnable; one that finds it running sets `signaled`, so a process
 * about to wait looks again instead of sleeping through the message.
 * An exit signal (vm/links.c) travels the same way, as a flagged message
 * that also sets the receiver's sig_pending; the receiver acts on it as
 * it fetches (vm_signals_take), and looks for a pending one at its
 * reduction checks and sleeps (vm_proc_signalled).
 */
#include "vm/sched.h"

#include <stdlib.h>

#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/hook.h"
#include "vm/lend.h"
#include "vm/links.h"
#include "vm/seqtrace.h"
#include "vm/timer.h"

/* ==== messages ==== */

Message *vm_message_alloc(Term t, size_t words, size_t extra)
{
    Message *m = vm_malloc(sizeof(Message) + words * sizeof(Term) + extra);
    Term *hp = m->data;
    m->next = NULL;
    m->words = words;
    m->sig = 0;
    m->seq = NULL;
    m->term = vm_copy_to(&hp, t);
    return m;
}

/* A message of `words` words (term_size(t)) holding a copy of t. */
static inline Message *message_sized(Term t, size_t words)
{
    return vm_message_alloc(t, words, 0);
}

Message *vm_message_new(Process *by, Term t, size_t max_words)
{
    bool lent;
    size_t words = vm_size_lend(by, t, max_words, &lent);
    Message *m = words == SIZE_MAX ? NULL : message_sized(t, words);
    vm_lend_done(by, lent);
    return m;
}

Message *vm_messages_copy(const Process *p)
{
    Message *first = NULL, **tail = &first;
    const Message *const queues[2] = { p->mq, p->inbox };
    for (int k = 0; k < 2; k++) {
        for (const Message *m = queues[k]; m; m = m->next) {
            if (m->sig)
                continue;   /* an exit signal, not a message */
            *tail = message_sized(m->term, m->words);
            tail = &(*tail)->next;
        }
    }
    return first;
}

void vm_messages_free(Message *m)
{
    while (m) {
        Message *next = m->next;
        free(m);
        m = next;
    }
}

/* Makes a waiting process runnable, or flags one that is still running. */
static void wake_locked(Process *p, bool *enqueue)
{
    if (p->state == PS_WAITING) {
        p->state = PS_RUNNABLE;
        *enqueue = true;
        /* Its wait ends here for the off-CPU profile: the time it then
         * spends queued is the schedulers' contention, not its wait. */
        if (vm_pf_wanted(VM_PF_OFF))
            p->pf_woken = vm_now_ns();
    } else {
        p->signaled = true;
    }
}

/* Puts m in t's inbox, behind what was sent before, and wakes t (its
 * lock held); an exit signal (m->sig) also sets t's sig_pending. */
static inline void append_locked(Process *t, Message *m, bool *enqueue)
{
    *t->inbox_tail = m;
    t->inbox_tail = &m->next;
    t->inbox_len++;
    t->inbox_words += m->words;
    if (m->sig)
        vm_atomic_store_relaxed(&t->sig_pending, 1);
    wake_locked(t, enqueue);
}

/* append_locked under t's lock.  False (m freed) when t has exited or is
 * exiting. */
static inline bool deliver(SchedSystem *sys, Process *t, Message *m)
{
    bool enqueue = false, ok = true;
    pthread_mutex_lock(&t->lock);
    if (t->state == PS_EXITED || t->exiting)
        ok = false;
    else
        append_locked(t, m, &enqueue);
    pthread_mutex_unlock(&t->lock);
    if (!ok)
        free(m);
    if (enqueue)
        vm_sched_enqueue(sys, t);
    return ok;
}

/* vm_send_to after the size check: msg is `words` words. */
static VmSend send_counted(tvm_vm *vm, Process *from, uint64_t pid, Term to, Term msg,
                           size_t words)
{
    /* Before the delivery: the receiver's receive event comes after it. */
    if (from)
        vm_hook_send(from, to, msg);
    SchedSystem *sys = vm_sched_of(vm);
    if (!sys)
        return VM_SEND_NOPROC;
    Process *p = vm_proc_get(sys, pid);
    if (!p)
        return VM_SEND_NOPROC;
    /* A sender without a seq_trace token pays the one test of from->seq
     * (vm/seqtrace.c); a message from no process leaves its receiver's
     * token alone, as OTP's messages with no sender do. */
    Message *m;
    if (VM_LIKELY(from != NULL)) {
        m = VM_UNLIKELY(from->seq != NULL) ? vm_seq_message(from, pid, msg, words)
                                           : message_sized(msg, words);
    } else {
        m = message_sized(msg, words);
        m->seq = VM_SEQ_KEEP;
    }
    bool ok = deliver(sys, p, m);
    vm_proc_put(sys, p);
    return ok ? VM_SEND_OK : VM_SEND_NOPROC;
}

VmSend vm_message_send(tvm_vm *vm, uint64_t pid, Message *m)
{
    SchedSystem *sys = vm_sched_of(vm);
    Process *p = sys ? vm_proc_get(sys, pid) : NULL;
    if (!p) {
        free(m);
        return VM_SEND_NOPROC;
    }
    bool ok = deliver(sys, p, m);
    vm_proc_put(sys, p);
    return ok ? VM_SEND_OK : VM_SEND_NOPROC;
}

VmSend vm_send(tvm_vm *vm, Process *from, uint64_t pid, Term msg)
{
    return vm_send_to(vm, from, pid, make_pid(pid), msg);
}

VmSend vm_send_to(tvm_vm *vm, Process *from, uint64_t pid, Term to, Term msg)
{
    /* The count bounded by msg_first first: a short message pays a test
     * of `lent` for the lend of a long one, whose queue is lent from its
     * count to the end of its copy, after the receiver's lock is
     * released. */
    bool lent = false;
    size_t words = term_size_capped(msg, vm->msg_first);
    if (VM_UNLIKELY(words == SIZE_MAX)) {
        if (vm->max_msg <= vm->msg_first)
            return VM_SEND_TOO_BIG;   /* that count went to max_msg */
        lent = vm_lend_now(from);
        words = term_size_capped(msg, vm->max_msg);
        if (words == SIZE_MAX) {
            vm_lend_done(from, lent);
            return VM_SEND_TOO_BIG;
        }
    }
    VmSend r = send_counted(vm, from, pid, to, msg, words);
    vm_lend_done(from, lent);
    return r;
}

/* Moves messages sent so far into the process's own queue (lock held).
 * Returns where the moved messages begin (*result is the first), for the
 * receive events written after the lock is released. */
static Message **fetch_locked(Process *p)
{
    Message **from = p->mq_tail;
    if (p->inbox) {
        *p->mq_tail = p->inbox;
        p->mq_tail = p->inbox_tail;
        p->inbox = NULL;
        p->inbox_tail = &p->inbox;
        /* The process is the only writer of mq_len. */
        vm_atomic_store_relaxed(&p->mq_len, vm_atomic_load_relaxed(&p->mq_len) + p->inbox_len);
        p->inbox_len = 0;
        p->mq_words += p->inbox_words;
        p->inbox_words = 0;
        if (VM_UNLIKELY(vm_atomic_load_relaxed(&p->sig_pending)))
            vm_signals_take(p, from);
    }
    return from;
}

/* After a fetch: the queue counts toward max_heap_size, as messages do in
 * BEAM's on-heap queues (a process flooded with messages it never takes
 * is killed once it looks at its mailbox). */
static void check_queue(Process *p)
{
    if (p->max_heap)
        vm_heap_check_max(p);
}

void vm_proc_fetch(Process *p)
{
    pthread_mutex_lock(&p->lock);
    Message **from = fetch_locked(p);
    pthread_mutex_unlock(&p->lock);
    check_queue(p);
    /* Only this process changes its queue: *from stays the first new one. */
    vm_hook_receive(p, *from);
}

void vm_proc_accept(Process *p)
{
    Message *m = *p->cursor;
    *p->cursor = m->next;
    if (p->mq_tail == &m->next)
        p->mq_tail = p->cursor;
    vm_atomic_store_relaxed(&p->mq_len, vm_atomic_load_relaxed(&p->mq_len) - 1);
    p->mq_words -= m->words;
    /* The receive's seq_trace rules only when the message or p has a
     * token (or m keeps p's): one test of two words in hand. */
    if (VM_UNLIKELY(((uintptr_t)m->seq | (uintptr_t)p->seq) != 0))
        vm_seq_receive(p, m);
    free(m);
    p->cursor = &p->mq;
}

void vm_proc_wake(SchedSystem *sys, uint64_t pid)
{
    Process *p = vm_proc_get(sys, pid);
    if (!p)
        return;
    bool enqueue = false;
    pthread_mutex_lock(&p->lock);
    if (p->state != PS_EXITED)
        wake_locked(p, &enqueue);
    pthread_mutex_unlock(&p->lock);
    if (enqueue)
        vm_sched_enqueue(sys, p);
    vm_proc_put(sys, p);
}

void vm_proc_timeout(SchedSystem *sys, uint64_t pid, uint64_t seq)
{
    Process *p = vm_proc_get(sys, pid);
    if (!p)
        return;
    bool enqueue = false;
    pthread_mutex_lock(&p->lock);
    if (p->timer_seq == seq && p->state != PS_EXITED) {
        p->timed_out = true;
        wake_locked(p, &enqueue);
    }
    pthread_mutex_unlock(&p->lock);
    if (enqueue)
        vm_sched_enqueue(sys, p);
    vm_proc_put(sys, p);
}

bool vm_proc_wait(Process *p, int64_t timeout_ms)
{
    /* Anything sent already counts: look before sleeping.  Whatever is
     * sent after this look (the same lock) sets signaled again, so the
     * scheduler will not make us WAITING. */
    pthread_mutex_lock(&p->lock);
    Message **from = fetch_locked(p);
    bool found = *p->cursor != NULL;
    uint64_t seq = 0;
    if (!found && timeout_ms != 0) {
        seq = ++p->timer_seq;
        p->timed_out = false;
        p->signaled = false;
    }
    pthread_mutex_unlock(&p->lock);
    check_queue(p);
    vm_hook_receive(p, *from);
    /* A process being killed (its heap, or the queue just taken in, over
     * max_heap_size) would otherwise keep what it holds for as long as it
     * waits: the kill is raised by the caller instead (vm/process.h). */
    if (found || timeout_ms == 0 || VM_UNLIKELY(p->kill))
        return found;
    /* Beyond VM_TIMEOUT_MAX_MS (about 31 years) a timeout is infinity; it
     * also keeps the deadline arithmetic from overflowing. */
    if (timeout_ms > 0 && timeout_ms <= VM_TIMEOUT_MAX_MS)
        vm_timer_add(&vm_sched_of(p->vm)->timers, vm_now_ns() + (uint64_t)timeout_ms * 1000000u, p->pid, seq);
    for (;;) {
        p->want_wait = true;
        vm_proc_yield(p);
        pthread_mutex_lock(&p->lock);
        from = fetch_locked(p);
        bool to = p->timed_out;
        pthread_mutex_unlock(&p->lock);
        check_queue(p);
        vm_hook_receive(p, *from);
        if (*p->cursor)
            return true;
        if (to || VM_UNLIKELY(p->kill))   /* killed by an exit signal */
            return false;
    }
}

void vm_signal_deliver(SchedSystem *sys, Process *t, Message *m)
{
    deliver(sys, t, m);
}

void vm_signals_drop_from(Process *p, uint64_t from, int sig)
{
    pthread_mutex_lock(&p->lock);
    for (Message **pp = &p->inbox; *pp;) {
        Message *m = *pp;
        if (m->sig != sig || tuple_elems(m->term)[1] != make_pid(from)) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        if (p->inbox_tail == &m->next)
            p->inbox_tail = pp;
        p->inbox_len--;
        p->inbox_words -= m->words;
        free(m);
    }
    pthread_mutex_unlock(&p->lock);
}

/* Takes ref's entry off w's down_drop list (w's lock held): whether
 * there was one. */
static bool down_drop_take(Process *w, uint64_t ref)
{
    for (DownDrop **at = &w->down_drop; *at; at = &(*at)->next) {
        DownDrop *d = *at;
        if (d->ref == ref) {
            *at = d->next;
            free(d);
            return true;
        }
    }
    return false;
}

void vm_down_send(Process *t, uint64_t watcher, uint64_t ref, Term msg, size_t words)
{
    SchedSystem *sys = vm_sched_of(t->vm);
    Process *w = vm_proc_get(sys, watcher);
    if (!w) {
        /* Gone: no demonitor of it can be looking at mon_firing. */
        vm_atomic_store_relaxed(&t->mon_firing, 0);
        return;
    }
    Message *m = message_sized(msg, words);
    m->seq = VM_SEQ_KEEP;   /* OTP's 'DOWN' leaves the watcher's token alone */
    bool enqueue = false;
    pthread_mutex_lock(&w->lock);
    if (w->state != PS_EXITED && !w->exiting && !down_drop_take(w, ref)) {
        append_locked(w, m, &enqueue);
        m = NULL;
    }
    /* Under w's lock: a demonitor that finds it still set under this
     * lock knows the 'DOWN' is not in its inbox (vm/process.h). */
    vm_atomic_store_relaxed(&t->mon_firing, 0);
    pthread_mutex_unlock(&w->lock);
    free(m);
    if (enqueue)
        vm_sched_enqueue(sys, w);
    vm_proc_put(sys, w);
}

bool vm_down_drop(Process *p, const Process *t, uint64_t ref)
{
    DownDrop *d = vm_malloc(sizeof *d);
    bool dropped = false;
    pthread_mutex_lock(&p->lock);
    if (vm_atomic_load_relaxed(&t->mon_firing) == ref) {
        d->ref = ref;
        d->next = p->down_drop;
        p->down_drop = d;
        dropped = true;
    }
    pthread_mutex_unlock(&p->lock);
    if (!dropped)
        free(d);
    return dropped;
}

/* Whether t is {'DOWN', ref, _, _, _}. */
static bool is_down_of(Term t, uint64_t ref)
{
    return term_is_tuple(t) && tuple_arity(t) == 5 && tuple_elems(t)[0] == make_atom(ATOM_DOWN) &&
           tuple_elems(t)[1] == make_small((int64_t)ref);
}

void vm_proc_flush_down(Process *p, uint64_t ref)
{
    /* What was sent so far first, as a receive would (its events too). */
    vm_proc_fetch(p);
    for (Message **pp = &p->mq; *pp;) {
        Message *m = *pp;
        if (!is_down_of(m->term, ref)) {
            pp = &m->next;
            continue;
        }
        /* A receive's cursor and the tail move back over the gap. */
        *pp = m->next;
        if (p->cursor == &m->next)
            p->cursor = pp;
        if (p->mq_tail == &m->next)
            p->mq_tail = pp;
        vm_atomic_store_relaxed(&p->mq_len, vm_atomic_load_relaxed(&p->mq_len) - 1);
        p->mq_words -= m->words;
        free(m);
    }
}
