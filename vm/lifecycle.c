/*
 * vm/lifecycle.c - process lifecycle: the process table, spawn, exit,
 * reaping and joining.  Messages and waits are vm/mailbox.c; the
 * scheduler side is vm/sched.c.
 *
 * Lifetime: a process is referenced by the table (one reference, dropped
 * when it is reaped), by whoever looked it up (vm_proc_get / vm_proc_put)
 * and, if joinable, by the joiner.  It is freed when the last reference
 * goes, except that a process whose last reference is dropped by its reap
 * (on its scheduler's thread) is kept in that scheduler's cache, with its
 * fiber and buffers, and reused by a later spawn there under a new pid;
 * pids are never reused, so a stale pid finds nothing.
 */
#include "vm/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/dict.h"
#include "vm/heap.h"
#include "vm/hook.h"
#include "vm/interlock_switch.h"
#include "vm/interp.h"
#include "vm/lend.h"
#include "vm/links.h"
#include "vm/monitors.h"
#include "vm/print.h"
#include "vm/registry.h"
#include "vm/sysmon.h"
#include "vm/seqtrace.h"

#define TOMBSTONE ((Process *)1)

/* ==== the table (sys->lock held) ==== */

static size_t slot_of(const SchedSystem *sys, uint64_t pid)
{
    return (size_t)(pid * 0x9E3779B97F4A7C15ull >> 17) & (sys->cap - 1);
}

static void table_grow(SchedSystem *sys)
{
    size_t old = sys->cap;
    Process **ot = sys->table;
    sys->cap = sys->live * 4 > old ? old * 2 : old;
    sys->table = vm_calloc(sys->cap, sizeof(Process *));
    sys->used = 0;
    for (size_t i = 0; i < old; i++) {
        Process *p = ot[i];
        if (p && p != TOMBSTONE) {
            size_t j = slot_of(sys, p->pid);
            while (sys->table[j])
                j = (j + 1) & (sys->cap - 1);
            sys->table[j] = p;
            sys->used++;
        }
    }
    free(ot);
}

static void table_insert(SchedSystem *sys, Process *p)
{
    if ((sys->used + 1) * 2 > sys->cap)
        table_grow(sys);
    size_t j = slot_of(sys, p->pid);
    while (sys->table[j] && sys->table[j] != TOMBSTONE)
        j = (j + 1) & (sys->cap - 1);
    if (!sys->table[j])
        sys->used++;
    sys->table[j] = p;
}

static Process **table_find(SchedSystem *sys, uint64_t pid)
{
    size_t j = slot_of(sys, pid);
    while (sys->table[j]) {
        if (sys->table[j] != TOMBSTONE && sys->table[j]->pid == pid)
            return &sys->table[j];
        j = (j + 1) & (sys->cap - 1);
    }
    return NULL;
}

void vm_proc_each(SchedSystem *sys, void (*fn)(Process *p, void *data), void *data)
{
    pthread_mutex_lock(&sys->lock);
    for (size_t i = 0; i < sys->cap; i++) {
        Process *p = sys->table[i];
        if (p && p != TOMBSTONE)
            fn(p, data);
    }
    pthread_mutex_unlock(&sys->lock);
}

Process *vm_proc_get(SchedSystem *sys, uint64_t pid)
{
    pthread_mutex_lock(&sys->lock);
    Process **slot = table_find(sys, pid);
    Process *p = slot ? *slot : NULL;
    /* Relaxed: the table's own reference keeps refs above 0 while we hold
     * the lock, so this cannot race with the last drop. */
    if (p)
        vm_atomic_fetch_add_relaxed(&p->refs, 1);
    pthread_mutex_unlock(&sys->lock);
    return p;
}

Process *vm_proc_get_live(SchedSystem *sys, uint64_t pid)
{
    Process *p = vm_proc_get(sys, pid);
    if (!p)
        return NULL;
    pthread_mutex_lock(&p->lock);
    bool gone = p->exiting || p->state == PS_EXITED;
    pthread_mutex_unlock(&p->lock);
    if (gone) {
        vm_proc_put(sys, p);
        return NULL;
    }
    return p;
}

/* Frees what an ended process still holds besides its buffers. */
static void proc_release(Process *p)
{
    vm_messages_free(p->inbox);
    vm_messages_free(p->mq);
    vm_messages_free(p->exit_value);
    vm_messages_free(p->entry_args);
    p->inbox = p->mq = p->exit_value = p->entry_args = NULL;
    for (Monitor *m = p->monitors; m;) {
        Monitor *n = m->next;
        free(m);
        m = n;
    }
    p->monitors = NULL;
    while (p->down_drop) {
        DownDrop *d = p->down_drop;
        p->down_drop = d->next;
        free(d);
    }
    vm_links_release(p);
    free(p->mon_out);   /* emptied by its exit already (vm_proc_monitors_drop) */
    p->mon_out = NULL;
    p->mon_out_len = p->mon_out_cap = p->mon_out_prune = 0;
}

static void proc_destroy(Process *p)
{
    proc_release(p);
    vm_process_free(p);
}

/* Frees a process kept in a scheduler's cache, and its fiber. */
void vm_proc_discard(SchedSystem *sys, Process *p)
{
    vm_fiber_free(&sys->pool, p->fiber);
    vm_process_free(p);
}

/* Drops one reference; true if it was the last.  [RF1] full: everything
 * each holder did with p happens before the free by whoever drops last;
 * pairs with itself in every other drop. */
static bool proc_unref(Process *p)
{
    return vm_atomic_fetch_add_full(&p->refs, (uintptr_t)-1) == 1;
}

void vm_proc_put(SchedSystem *sys, Process *p)
{
    (void)sys;
    if (proc_unref(p))
        proc_destroy(p);
}

/* ==== spawning and the process body ==== */

static void proc_exit(Process *p, Term cls, Term value);

static void proc_main(void *arg)
{
    Process *p = arg;
    /* The arguments were copied into a message at spawn; bring them onto
     * this process's heap. */
    Term list = TERM_NIL;
    if (p->entry_args) {
        /* A long copy lends this scheduler's queue (vm/lend.h). */
        bool lent = vm_lend_if_long(p, p->entry_args->words);
        vm_heap_ensure(p, p->entry_args->words, NULL, 0);
        list = vm_copy_term(p, p->entry_args->term);
        vm_messages_free(p->entry_args);
        p->entry_args = NULL;
        vm_lend_done(p, lent);
    }
    Term args[VM_MAX_ARITY];
    int argc = 0;
    for (; term_is_cons(list) && argc < VM_MAX_ARITY; list = cons_tail(list))
        args[argc++] = cons_head(list);
    vm_hook_sched_start(p);
    Term res;
    tvm_status st = vm_execute(p, vm_export_target(p->vm, p->entry), argc, args, &res);
    if (VM_UNLIKELY(p->kill) && !(st != TVM_OK && p->exc_reason == p->kill)) {
        /* Marked to be killed after its last reduction check (its heap
         * outgrew max_heap_size on the way out): it dies all the same. */
        vm_exception_set(p, make_atom(ATOM_EXIT), p->kill, NULL);
        st = TVM_EXCEPTION;
    }
    if (st == TVM_OK) {
        proc_exit(p, make_atom(ATOM_NORMAL), res);
    } else {
        Term reason = p->exc_reason;
        if (p->exc_class == make_atom(ATOM_THROW)) {
            Term e[2] = { make_atom(ATOM_NOCATCH), reason };
            reason = vm_make_tuple(p, 2, e);
            p->exc_reason = reason;
            p->exc_class = make_atom(ATOM_ERROR);
        }
        proc_exit(p, p->exc_class, p->exc_reason);
    }
    VM_UNREACHABLE();
}

/* Takes back a place vm_spawn reserved in the count of live processes
 * for a process that will not be made after all. */
static void unreserve(SchedSystem *sys)
{
    pthread_mutex_lock(&sys->lock);
    sys->live--;
    if (sys->exit_waiters && sys->live == 0)
        pthread_cond_broadcast(&sys->exited);
    pthread_mutex_unlock(&sys->lock);
}

/*
 * Several sessions trace new processes (vm/process.h): p gets a copy of
 * the VM's table of defaults and a word computed from that copy, so the
 * union always matches the table it came with (a writer may be changing
 * the defaults meanwhile: p then gets one state or the other per session,
 * and a change for all existing processes reaches p through its
 * generation: trace/tr_flags_all.c).  Under the table lock, before p is
 * visible.
 */
static uintptr_t inherit_trace_tab(tvm_vm *vm, Process *p)
{
    VmTraceTab *t = vm_calloc(1, sizeof *t);
    unsigned flags = 0, n = 0;
    uintptr_t one = 0;
    for (int i = 0; i < VM_SESSIONS_MAX; i++) {
        uintptr_t w = vm_atomic_load_relaxed(&vm->trace_new_tab.w[i]);
        vm_atomic_store_relaxed(&t->w[i], w);
        if (VM_TRACE_FLAGS(w)) {
            flags |= VM_TRACE_FLAGS(w);
            one = w;
            n++;
        }
    }
    /* [TF1] release: the table before the word that names it (p is not
     * visible yet; the release only keeps the rule uniform). */
    vm_atomic_store_ptr_release(&p->trace_tab, t);
    return n > 1 ? vm_trace_word(VM_SID_MULTI, flags) : one;
}

uint64_t vm_spawn(Process *parent, const Export *entry, int argc, const Term *args,
                  bool joinable, bool link, size_t max_heap)
{
    tvm_vm *vm = parent->vm;
    SchedSystem *sys = vm_sched_start(vm, vm->schedulers);
    /* Arguments travel as one message: a list copied off the caller's
     * heap, within the copy limit. */
    Term tmp[VM_MAX_ARITY * 2 + 2];
    Term list = TERM_NIL;
    for (int i = argc; i-- > 0;) {
        tmp[2 * i] = args[i];
        tmp[2 * i + 1] = list;
        list = make_cons_ptr(&tmp[2 * i]);
    }
    Message *margs = NULL;
    if (argc > 0 && !(margs = vm_message_new(parent, list, vm->max_msg)))
        return 0;
    /* A place among the live processes first (the max_processes limit),
     * counted from here on so that concurrent spawns cannot overshoot. */
    pthread_mutex_lock(&sys->lock);
    bool room = sys->live < vm->max_procs;
    if (room)
        sys->live++;
    pthread_mutex_unlock(&sys->lock);
    if (!room) {
        vm_messages_free(margs);
        return 0;
    }
    Process *p = vm_sched_cache_get(sys);
    if (p) {
        Fiber *fiber = p->fiber;
        vm_process_recycle(p);
        p->fiber = fiber;
    } else {
        Fiber *fiber = vm_fiber_alloc(&sys->pool);
        if (!fiber) {
            vm_messages_free(margs);
            unreserve(sys);
            return 0;
        }
        p = vm_process_new(vm);
        p->fiber = fiber;
    }
    p->entry = entry;
    p->entry_args = margs;
    p->max_heap = max_heap;
    /* The one test a parent without a seq_trace token pays. */
    if (VM_UNLIKELY(parent->seq != NULL))
        vm_seq_spawn(parent, p);
    pthread_mutex_lock(&sys->lock);
    p->pid = sys->next_pid++;
    /* The generation of flags for all and the default trace flags, read
     * in one critical section of the table lock, which a change for all
     * holds too (trace/tr_flags_all.c): p gets both from before the
     * change, and the scheduler folds the change in before p first runs,
     * or both from after it. */
    vm_atomic_store_relaxed(&p->trace_gen, vm_atomic_load_relaxed(&vm->trace_gen));
    uintptr_t tw = vm_atomic_load_relaxed(&vm->trace_new);
    if (VM_UNLIKELY(vm_trace_sid(tw) == VM_SID_MULTI))
        tw = inherit_trace_tab(vm, p);
    vm_atomic_store_relaxed(&p->trace, tw);
    vm_atomic_store_relaxed(&p->refs, joinable ? 2 : 1);
    p->joinable = joinable;
    if (joinable) {
        p->join_next = sys->joinables;
        sys->joinables = p;
    }
    /* Everything a reader of the table may look at is set before the
     * table publishes p (tvm_processes reads the state, a capture the
     * interlock's generation and word): this lock orders it for them, and
     * a process not yet scheduled has taken no other lock since. */
    vm_fiber_init(p->fiber, proc_main, p);
    vm_il_spawned(p);
    p->state = PS_RUNNABLE;
    table_insert(sys, p);
    pthread_mutex_unlock(&sys->lock);
    uint64_t pid = p->pid;
    if (link)
        vm_links_spawned(parent, p);
    /* Before the child can run, so its own events come after these. */
    vm_hook_spawn(parent, p, entry, argc, args, link);
    vm_sched_enqueue(sys, p);
    return pid;
}

/* ==== exit ==== */

/* What a max_heap_size kill counted: the heap and the queue, and the
 * monitors and the dictionary's table when it had any. */
static void kill_report(const Process *p, StrBuf *sb)
{
    sb_printf(sb, "  max_heap_size %zu words, reached %zu (heap%smessage queue", p->max_heap,
              p->kill_heap, p->kill_monitors || p->kill_dict ? ", " : " and ");
    if (p->kill_monitors)
        sb_printf(sb, "%s%zu monitors of %zu words", p->kill_dict ? ", " : " and ",
                  p->kill_monitors, (size_t)VM_MONITOR_WORDS);
    if (p->kill_dict)
        sb_printf(sb, " and a dictionary table of %zu words", p->kill_dict);
    sb_puts(sb, ")\n");
}

static void crash_report(Process *p)
{
    StrBuf sb;
    sb_init(&sb);
    sb_printf(&sb, "=CRASH REPORT==== process <0.%llu.0> crashed: ", (unsigned long long)p->pid);
    vm_format_exception(p, &sb);
    if (p->kill_heap)
        kill_report(p, &sb);
    if (p->exc_stack) {
        sb_puts(&sb, "  stack at the raise:\n");
        vm_hook_format_raise(p, &sb);
    }
    FILE *o = stderr;
    fwrite(sb.s, 1, sb.len, o);
    fflush(o);
    sb_free(&sb);
}

static void proc_exit(Process *p, Term cls, Term value)
{
    SchedSystem *sys = vm_sched_of(p->vm);
    bool normal = cls == make_atom(ATOM_NORMAL);
    bool crashed = !normal && !(cls == make_atom(ATOM_EXIT) && value == make_atom(ATOM_NORMAL));
    /* Terms live in handles from here on: every allocation may collect. */
    tvm_term hv = vm_root_push(p, value);
    /* The exit reason: normal return: normal; exit(R): R; an error or a
     * throw: {Reason, Stacktrace}. */
    tvm_term hr = hv;
    if (normal) {
        hr = vm_root_push(p, make_atom(ATOM_NORMAL));
    } else if (cls != make_atom(ATOM_EXIT)) {
        Term trace = vm_exception_trace_term(p);
        Term e[2] = { vm_root_get(p, hv), trace };
        hr = vm_root_push(p, vm_make_tuple(p, 2, e));
    }
    /* What leaves the process is copied: a value or reason too big for a
     * copy (over max_message_words, with room for the 'DOWN' tuple and a
     * name's {Name, Node} around a reason, VM_DOWN_WORDS) becomes
     * system_limit, so that every watcher still gets its 'DOWN' and a
     * joiner an answer. */
    /* A long reason or value lends this scheduler's queue from its count
     * to the last copy (vm/lend.h), as do many monitors set or 'DOWN'
     * messages. */
    size_t max = p->vm->max_msg > VM_DOWN_WORDS ? p->vm->max_msg - VM_DOWN_WORDS : 0;
    /* A joiner's value keeps the bound it always had (the 'DOWN' tuple's
     * words under the limit), though no tuple is built around it. */
    size_t max_v = p->vm->max_msg > VM_DOWN_TUPLE_WORDS ? p->vm->max_msg - VM_DOWN_TUPLE_WORDS : 0;
    bool lent, lent_v = false;
    size_t rw = vm_size_lend(p, vm_root_get(p, hr), max, &lent);
    if (rw == SIZE_MAX) {
        p->roots[hr.h] = make_atom(ATOM_SYSTEM_LIMIT);
        rw = 0;
    }
    if (p->joinable && vm_size_lend(p, vm_root_get(p, hv), max_v, &lent_v) == SIZE_MAX) {
        p->roots[hv.h] = make_atom(ATOM_SYSTEM_LIMIT);
        if (normal)
            cls = make_atom(ATOM_ERROR);
    }
    lent = lent || lent_v;   /* at most one of them lent (vm_lend_now) */
    vm_hook_exit(p, vm_root_get(p, hr));
    /* Its name goes before anyone hears of the exit: a watcher's whereis
     * after its 'DOWN' finds nothing (BEAM unregisters first as well). */
    vm_registry_exit(p);
    /* Its links' signals go with the 'DOWN's, after its exit event. */
    vm_links_exit(p, vm_root_get(p, hr));
    p->ct_fn = NULL;     /* the call_time clock forgets its functions */
    p->ct_live = 0;
    vm_hook_sched_exit(p);
    pthread_mutex_lock(&p->lock);
    /* From here on the process counts as gone: a monitor set up now gets
     * an immediate noproc 'DOWN' (vm_proc_monitor), never nothing. */
    p->exiting = true;
    bool joinable = p->joinable;
    pthread_mutex_unlock(&p->lock);
    /* The system monitor ends with its process, as BEAM's (after
     * `exiting`, which its setter reads: vm/sysmon.c, set()). */
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&p->vm->sysmon.pid) == p->pid))
        vm_sysmon_exited(p);
    /* Its dictionary goes at its exit (its keys and values are garbage
     * from here on): process_info/2 answers undefined for an exiting
     * process, and reads the dictionary only under p->lock after seeing
     * it was not exiting (vm/procinfo.c). */
    vm_dict_free(p);
    /* The monitors p set go with it: a target that lives on keeps no node
     * for a watcher that is gone (vm/process.h).  Many of them (a sort
     * and a walk of each target's list) lend, as a long reason does. */
    lent = lent || vm_lend_if_long(p, p->mon_out_len);
    vm_proc_monitors_drop(p);
    /* Killed by another's signal (a link, exit/2) is no crash of its own:
     * no report, as BEAM's. */
    if (crashed && sys->crash_reports && !joinable && !p->kill_signal)
        crash_report(p);
    /* {'DOWN', Ref, process, Pid, Reason} to every watcher. */
    vm_proc_monitors_fire(p, hr, rw, &lent);
    /* The exit value is the result, or the raw reason (the joiner gets the
     * class and the stack trace separately); only a joiner reads it. */
    Message *val = joinable ? vm_message_new(p, vm_root_get(p, hv), p->vm->max_msg) : NULL;
    vm_lend_done(p, lent);
    pthread_mutex_lock(&p->lock);
    p->exit_class = cls;
    p->exit_value = val;
    p->state = PS_EXITED;
    pthread_mutex_unlock(&p->lock);
    /* Back to the scheduler for good; it reaps us on its own stack. */
    vm_il_switch_out(p);
    vm_fiber_tsan_switch(p->sched->tsan);
    vm_fiber_switch(&p->fiber->sp, p->sched->sp);
}

/* ==== a native stack overflow (vm/overflow.c) ==== */

/* The body of a fiber restarted after its process overflowed its native
 * stack: the process exits with what vm_proc_overflowed recorded. */
static void overflow_main(void *arg)
{
    Process *p = arg;
    proc_exit(p, p->exc_class, p->exc_reason);
}

void vm_proc_overflowed(Process *p, uintptr_t pc, uintptr_t fp)
{
    /* {system_limit, native_stack} outside every heap (the collector
     * leaves such terms alone, as module literals): nothing is allocated
     * for it while the process's own state cannot be trusted. */
    static const Term reason[3] = { MAKE_HEADER(IMM_HDR_TUPLE, 2),
                                    MAKE_IMM(IMM_ATOM, ATOM_SYSTEM_LIMIT),
                                    MAKE_IMM(IMM_ATOM, ATOM_NATIVE_STACK) };
    /* The stack trace from the VM frames, which live off the fiber; then
     * the fault's mixed stack (over what crash_stacks may have taken of
     * this alternate stack). */
    vm_exception_set(p, make_atom(ATOM_ERROR), make_boxed(reason), NULL);
    if (p->vm->crash_reports)
        vm_hook_note_fault(p, pc, fp);
    /* The fault may have stopped anything halfway (a collection, a
     * native's handles, a frame being pushed): nothing of the frames,
     * handlers, roots, registers or heap is used again.  A fresh heap
     * holds what the exit builds. */
    p->nframes = p->ntrace = p->nhandlers = p->nroots = p->nesting = p->entry_top = 0;
    p->ct_fn = NULL;
    p->kill = 0;
    p->kill_signal = false;
    p->exc_trace_term = THE_NONE;
    for (uint32_t i = 0; i < p->stack_size; i++)
        p->stack[i] = TERM_NIL;
    vm_dict_free(p);   /* its keys and values were on the heap */
    free(p->heap);
    p->heap = p->htop = vm_malloc(p->heap_min * sizeof(Term));
    p->hend = p->heap + p->heap_min;
    /* The fiber from its top, on its own stack again (the exit may suspend,
     * under the lossless trace policy, and resume on another thread). */
    vm_fiber_init(p->fiber, overflow_main, p);
    p->fiber->tsan = vm_fiber_tsan_new();
    void *abandoned;
    vm_fiber_tsan_switch(p->fiber->tsan);
    vm_fiber_switch(&abandoned, p->fiber->sp);
    VM_UNREACHABLE();
}

/* Takes an exited process out of the table; true if that dropped the
 * last reference. */
static bool table_drop(SchedSystem *sys, Process *p)
{
    pthread_mutex_lock(&sys->lock);
    Process **slot = table_find(sys, p->pid);
    if (slot)
        *slot = TOMBSTONE;
    sys->live--;
    /* Read before the reference goes: another holder (a lookup, a walk of
     * the table, a stack capture) may drop the last one and free p right
     * after. */
    bool joinable = p->joinable;
    bool last = proc_unref(p);
    /* Waiters want a joinable process's exit (vm_proc_join) or no process
     * left (tvm_wait_idle); other exits wake nobody. */
    if (sys->exit_waiters && (joinable || sys->live == 0))
        pthread_cond_broadcast(&sys->exited);
    pthread_mutex_unlock(&sys->lock);
    return last;
}

/* Called by the scheduler after an exited process switched out.  The
 * fiber is detached first: once the table reference is dropped, another
 * holder may free p at any time. */
void vm_proc_reap(SchedSystem *sys, Process *p)
{
    /* No capture reads the stack from here on (vm/interlock_switch.h). */
    vm_il_exited(p);
    Fiber *fiber = p->fiber;
    p->fiber = NULL;
    bool last = table_drop(sys, p);
    if (last && vm_process_recyclable(p)) {
        /* Nobody else can reach p: keep it, with its fiber, for a spawn
         * on this scheduler. */
        proc_release(p);
        p->fiber = fiber;
        if (vm_sched_cache_put(sys, p))
            return;
        p->fiber = NULL;
    }
    vm_fiber_free(&sys->pool, fiber);
    if (last)
        proc_destroy(p);
}

Process *vm_proc_join(SchedSystem *sys, uint64_t pid)
{
    /* Joinable processes stay on sys->joinables (holding the joiner's
     * reference) until joined, so this finds them even after the reap. */
    pthread_mutex_lock(&sys->lock);
    Process **link = &sys->joinables;
    while (*link && (*link)->pid != pid)
        link = &(*link)->join_next;
    Process *p = *link;
    if (p)
        *link = p->join_next;
    pthread_mutex_unlock(&sys->lock);
    if (!p)
        return NULL;
    pthread_mutex_lock(&sys->lock);
    for (;;) {
        pthread_mutex_lock(&p->lock);
        bool done = p->state == PS_EXITED;
        pthread_mutex_unlock(&p->lock);
        if (done)
            break;
        sys->exit_waiters++;
        pthread_cond_wait(&sys->exited, &sys->lock);
        sys->exit_waiters--;
    }
    pthread_mutex_unlock(&sys->lock);
    return p;
}

void vm_proc_free_all(SchedSystem *sys)
{
    /* Joined-never processes that already exited hold only the joiner's
     * reference. */
    for (Process *p = sys->joinables; p;) {
        Process *n = p->join_next;
        if (p->state == PS_EXITED)
            proc_destroy(p);
        else
            proc_unref(p);
        p = n;
    }
    for (size_t i = 0; i < sys->cap; i++) {
        Process *p = sys->table[i];
        if (p && p != TOMBSTONE) {
            if (p->fiber)
                vm_fiber_free(&sys->pool, p->fiber);
            proc_destroy(p);
        }
    }
}
