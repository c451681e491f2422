/*
 * trace/tr_flags_all.c - trace flags for all processes and for new ones
 * (tvm_trace_flags_all, erlang:trace(all | existing | new, ...), the
 * session variants), in a time that does not depend on how many
 * processes there are: no walk of the process table.
 *
 * Protocol: a generation of flags for all, folded in by each process.
 *
 * Terms.  vm->trace_gen numbers the changes for all existing processes
 * (0: none yet).  S->all[slot] (TrFlagsAll, trace/tr_session.h) keeps,
 * for each flag of the session in that slot, the generation of its last
 * such change and the value it got.  A process's trace_gen is the
 * generation its trace word has taken in.  *Folding* p in: every flag
 * whose last change is newer than p->trace_gen takes that change's value
 * in p's word (its session's part of it), and p->trace_gen becomes the
 * current generation.  Because each change sets or clears whole flags,
 * "the last value of each flag changed since g" is the same as applying
 * every change since g in order: nothing needs to be kept per process or
 * per change.
 *
 * Writer (tr_flags_all, any thread).  Under the process table's lock
 * (sys->lock) and inside it flags_lock: checks the session is live,
 * changes the defaults for new processes (scope NEW), records the change
 * in S->all[slot] with generation G + 1, and then stores vm->trace_gen =
 * G + 1 ([TG1] release: the record before the generation).  Outside the
 * locks: one thread-progress wait (vm_progress_sync: a calling process
 * is suspended, a foreign thread blocks), then the caller, if it is a
 * process, folds itself in.  The cost is two locks, one wait and no loop
 * over processes; the wait takes as long as the longest time slice
 * running at the call.
 *
 * Folders (vm_hook_trace_fold, tr_fold_locked).  Whoever folds p in holds
 * p->lock and, inside it, flags_lock (flags_lock is taken last of all
 * locks: after p->lock here, after sys->lock by the writer), so a fold sees
 * the record and the generation together, and never interleaves with a
 * change of p's own flags (tr_pflags_change, under p->lock, folds first
 * and then changes: a change of one process made after a change for all
 * overrides it, and the next change for all overrides that in turn).  The
 * word is written as any change writes it (trace/tr_flags.c: table, then
 * word).  Three kinds of folder:
 *   - the scheduler, right before it switches into p (vm/sched.c,
 *     trace_catch_up: two relaxed loads and a compare per switch, the
 *     hook only when they differ);
 *   - a thread that looks at p's flags (tr_pword: trace_info,
 *     tvm_trace_flags_get), and any change of p's flags;
 *   - the caller of tr_flags_all, for itself, after the wait.
 *
 * Readers of the word (the breakpoint hit, the scheduling, spawn, exit,
 * send and receive events) are all p itself on its own fiber, and load
 * it relaxed as before: they see what the scheduler folded in before p
 * started to run.  When another thread folded p in (a looker, under
 * p->lock) and the scheduler finds p's generation current and skips the
 * fold, the folder's release store of p->trace_gen ([TG2]) and the
 * scheduler's acquire load of it ([TG2']) order the word before p's
 * reads; a looker that skips the fold reads the word the same way.
 *
 * The guarantee (BEAM's: once erlang:trace(all, ...) returns, every later
 * event of every process follows the new flags, and trace_info of any
 * process reports them).  A process that runs after the call returned
 * was switched in after the wait ended.  The wait ends only after every
 * scheduler passed a quiescent state after [TG1] (vm/progress.c), and a
 * scheduler's quiescent states lie between two processes (vm/sched.c):
 * so the process that was running at [TG1] has been switched out, and
 * every switch-in that follows that quiescent state loads the new
 * generation (QSBR orders the writer's stores before the wait with the
 * reader's loads after its quiescent state, as it orders the flip of
 * vm->bp_ix with a breakpoint hit: docs/breakpoints.md) and folds.  A
 * process that is not running (waiting, queued) folds when it next runs,
 * before its first event.  trace_info folds the process it looks at.  A
 * process spawned during the call reads vm->trace_gen and the defaults
 * in one critical section of sys->lock (vm_spawn), which the writer
 * holds too: it gets both from before the change, and then the scheduler
 * folds the change in before it first runs, or both from after it;
 * either way it is covered.  Call contexts (pid 0) are not processes of the table: flags
 * for all never reached them and still do not.
 *
 * Why nothing stops while this runs.  The writer holds flags_lock for a
 * few hundred instructions; schedulers never wait for it except to fold
 * one process, which takes the lock once per process per change.  The
 * wait stalls only the caller.  A scheduler that is switching into a
 * process while the generation moves either sees the old generation (the
 * process then runs its slice under the old flags, which the wait allows
 * for: the wait ends only after that slice) or the new one and folds.
 *
 * A session's end.  Its flags change only while it is live: a change for
 * all tests that under flags_lock, where the stop records its clearing
 * after the session stopped being live; a change of one process tests it
 * under p->lock after folding p in (tr_pflags_change), so a stop the test
 * does not see records its clearing after that fold, and p folds it in
 * later.  The stop (breakpoints/bp_session.c) clears its flags the same
 * way (tr_flags_all_publish, then its own wait): a process that has not
 * folded yet may hold the ended session's flags in its word, but no event
 * reaches an ended session (its state is checked first,
 * trace/tr_vm_sess.c), and the next fold clears them.  A successor in the
 * same slot starts from the stop's record, in which every flag was
 * cleared after anything the ended session set.
 */
#include "trace/tr_flags_internal.h"
#include "trace/tr_session.h"
#include "trace/tr_vm.h"
#include "vm/hook.h"
#include "vm/progress.h"
#include "vm/sched.h"

/* ==== folding ==== */

/* The flags of slot record `a` changed after generation g. */
static unsigned changed_since(const TrFlagsAll *a, uint64_t g)
{
    unsigned mask = 0;
    for (unsigned b = 0; b < 32; b++)
        if (a->gen[b] > g)
            mask |= 1u << b;
    return mask;
}

void tr_fold_locked(Process *p)
{
    tvm_vm *vm = p->vm;
    TrSessions *S = vm->sessions;
    uint64_t g = vm_atomic_load_relaxed(&p->trace_gen);
    /* A call context is no process of the table; and a fold may have
     * happened since the caller looked. */
    if (!p->pid || g == vm_atomic_load_relaxed(&vm->trace_gen))
        return;
    uintptr_t w[VM_SESSIONS_MAX];
    tr_state_words(&p->trace, vm_atomic_load_ptr_relaxed(&p->trace_tab), w);
    bool changed = false;
    pthread_mutex_lock(&S->flags_lock);
    uint64_t now = vm_atomic_load_relaxed(&vm->trace_gen);
    for (unsigned slot = 0; slot < VM_SESSIONS_MAX; slot++) {
        const TrFlagsAll *a = &S->all[slot];
        if (a->last <= g)
            continue;
        unsigned mask = changed_since(a, g);
        /* Flags of an earlier incarnation of the slot are gone: its stop
         * cleared every flag after anything it set. */
        unsigned cur = vm_trace_sid(w[slot]) == a->sid ? VM_TRACE_FLAGS(w[slot]) : 0;
        unsigned nw = (cur & ~mask) | (a->on & mask);
        uintptr_t word = nw ? vm_trace_word(a->sid, nw) : 0;
        changed |= word != w[slot];
        w[slot] = word;
    }
    pthread_mutex_unlock(&S->flags_lock);
    if (changed)
        tr_state_store(&p->trace, &p->trace_tab, NULL, w);
    /* [TG2] release: the word before the generation that says it is
     * folded.  A thread that sees this generation and skips the fold (the
     * scheduler switching p in, a looker) loads it acquire ([TG2']) and
     * so reads the word stored here, not an older one.  On x86 both are
     * plain moves (stores are not reordered with stores, nor loads with
     * loads); on a weakly ordered machine (aarch64: stlr / ldar) without
     * them a scheduler could see the new generation, skip the fold, and
     * run p on the word from before the change. */
    vm_atomic_store_release(&p->trace_gen, now);
}

void vm_hook_trace_fold(Process *p)
{
    pthread_mutex_lock(&p->lock);
    tr_fold_locked(p);
    pthread_mutex_unlock(&p->lock);
}

/* Folds p in if its word is behind. */
static void catch_up(Process *p)
{
    /* [TG2'] acquire: see [TG2] in tr_fold_locked. */
    if (p->pid &&
        vm_atomic_load_acquire(&p->trace_gen) != vm_atomic_load_relaxed(&p->vm->trace_gen))
        vm_hook_trace_fold(p);
}

uintptr_t tr_pword(Process *p)
{
    catch_up(p);
    return vm_atomic_load_relaxed(&p->trace);
}

/* ==== changing ==== */

/* Records session sid's change of `flags` for all existing processes as
 * generation `gen`; flags_lock held. */
static void record(TrFlagsAll *a, unsigned sid, unsigned flags, bool on, uint64_t gen)
{
    if (a->sid != sid) {
        /* A new incarnation of the slot: what the last one set was
         * cleared by its stop (newer than anything it set). */
        a->sid = sid;
        a->on = 0;
    }
    for (unsigned b = 0; b < 32; b++)
        if (flags & (1u << b))
            a->gen[b] = gen;
    a->on = on ? a->on | flags : a->on & ~flags;
    a->last = gen;
}

int tr_flags_all_publish(tvm_vm *vm, unsigned sid, tvm_trace_scope scope, unsigned flags,
                         bool on, bool force)
{
    TrSessions *S = vm->sessions;
    /* The table lock around it all: a spawn reads the generation and the
     * defaults in one critical section of it (vm_spawn). */
    SchedSystem *sys = vm_sched_of(vm);
    if (sys)
        pthread_mutex_lock(&sys->lock);
    pthread_mutex_lock(&S->flags_lock);
    bool ok = force || tr_session_live(vm, sid);
    if (ok && (scope & TVM_TRACE_NEW))
        tr_state_change(&vm->trace_new, NULL, &vm->trace_new_tab, sid, flags, on);
    if (ok && (scope & TVM_TRACE_EXISTING)) {
        uint64_t gen = vm_atomic_load_relaxed(&vm->trace_gen) + 1;
        record(&S->all[vm_sid_slot(sid)], sid, flags, on, gen);
        /* [TG1] release: the record before the generation that sends
         * folders to it. */
        vm_atomic_store_release(&vm->trace_gen, gen);
    }
    pthread_mutex_unlock(&S->flags_lock);
    size_t n = sys && (scope & TVM_TRACE_EXISTING) ? sys->live : 0;
    if (sys)
        pthread_mutex_unlock(&sys->lock);
    if (!ok)
        return -1;
    return n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
}

int tr_flags_all(tvm_vm *vm, unsigned sid, tvm_trace_scope scope, unsigned flags, bool on,
                 bool force)
{
    int n = tr_flags_all_publish(vm, sid, scope, flags, on, force);
    if (n < 0 || !(scope & TVM_TRACE_EXISTING) || !vm_sched_of(vm))
        return n;
    /* Every process that was running has switched out, so every process
     * runs from now on with the change folded in (the guarantee above);
     * the caller, which may not have switched, folds itself. */
    Process *self = vm_running_process();
    vm_progress_sync(vm_progress_get(vm), self);
    if (self)
        catch_up(self);
    return n;
}

tvm_status tvm_trace_flags_all(tvm_vm *vm, tvm_trace_scope scope, unsigned flags, bool on)
{
    if (!vm || !tr_flags_valid(flags) || (scope & ~(unsigned)TVM_TRACE_ALL) || !scope)
        return TVM_ERR_BADARG;
    return tr_flags_all(vm, 0, scope, flags, on, false) < 0 ? TVM_ERR_BADARG : TVM_OK;
}

/* ==== the defaults for new processes ==== */

unsigned tr_flags_new(tvm_vm *vm, unsigned sid)
{
    TrSessions *S = vm->sessions;
    pthread_mutex_lock(&S->flags_lock);
    uintptr_t w[VM_SESSIONS_MAX];
    tr_state_words(&vm->trace_new, &vm->trace_new_tab, w);
    pthread_mutex_unlock(&S->flags_lock);
    uintptr_t mine = w[vm_sid_slot(sid)];
    return vm_trace_sid(mine) == sid ? VM_TRACE_FLAGS(mine) : 0;
}

unsigned tvm_trace_flags_new(tvm_vm *vm)
{
    return vm ? tr_flags_new(vm, 0) : 0;
}
