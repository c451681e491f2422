/*
 * vm/monitors.c - monitors: erlang:monitor/2, demonitor/1,2 and the
 * 'DOWN' messages an exiting process sends, as BEAM's.
 *
 * A monitor is two records.  Its node (Monitor) is on the target's list,
 * under the target's lock, so the target finds its watchers when it
 * exits; its entry (MonitorOut) is in the watcher's own array, touched by
 * the watcher alone, so it can take the monitor off (demonitor/1) and
 * take its nodes off its targets when it exits first.  Entries are in the
 * order of their references (a process's references only grow), which
 * demonitor finds by binary search; an entry it removes stays as a
 * tombstone until the array is compacted, so removal is O(1) and the
 * order holds.  The node is removed in O(1) through its `pprev`; the
 * entry's pointer to it may be followed while the target is neither
 * exiting nor exited, because until then only the watcher removes it.
 *
 * The guarantee demonitor gives, as BEAM's: once it returns, no 'DOWN'
 * of that monitor arrives (one already in the queue stays unless
 * `flush`).  The race is with the target's exit.  The exiting target
 * takes its nodes off one at a time, each under its lock in the same
 * critical section that sets its mon_firing to the node's reference, and
 * clears mon_firing under the watcher's lock in the critical section that
 * puts the 'DOWN' in the watcher's inbox (vm_down_send).  So a watcher
 * that does not find its node on the list, under the target's lock, knows
 * which of three it is: mon_firing is another reference (or 0): its
 * 'DOWN' is in its inbox already; mon_firing is its reference: the
 * delivery is on its way, and under its own lock (vm_down_drop) either
 * mon_firing is still set, and a DownDrop entry added under that lock is
 * what the delivery finds and drops the 'DOWN' for, or it was cleared,
 * and the 'DOWN' is in its inbox.  No lock is taken under another:
 * target, then watcher, each alone.
 *
 * Costs: a monitor is VM_MONITOR_WORDS words off the heap, counted toward
 * its watcher's max_heap_size (vm/process.h); monitor/2 and demonitor/1
 * of a live target take its lock once; an exit takes and gives its own
 * lock once per watcher, and a watcher's exit takes each target's lock
 * once with one pass over an exiting target's list.
 */
#include "vm/monitors.h"

#include <stdlib.h>

#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/lend.h"
#include "vm/registry.h"
#include "vm/sched.h"
#include "vm/vm.h"

/* ==== the target's list ==== */

/* Both under the target's lock. */
static void node_push(Process *t, Monitor *m)
{
    m->next = t->monitors;
    m->pprev = &t->monitors;
    if (t->monitors)
        t->monitors->pprev = &m->next;
    t->monitors = m;
}

static void node_unlink(Monitor *m)
{
    *m->pprev = m->next;
    if (m->next)
        m->next->pprev = m->pprev;
}

/* What became of a monitor's node, seen under its target's lock. */
typedef enum { NODE_TAKEN, NODE_FIRING, NODE_FIRED } NodeFate;

/* Takes entry e's node off t (t's lock held): TAKEN when it was still
 * there; otherwise t took it to send the 'DOWN', which is on its way
 * (FIRING) or delivered (FIRED). */
static NodeFate node_take(Process *t, const MonitorOut *e)
{
    if (t->state == PS_EXITED)
        return NODE_FIRED;
    if (!t->exiting) {
        node_unlink(e->node);
        free(e->node);
        return NODE_TAKEN;
    }
    /* Exiting: the node may be gone, so it is looked for by reference. */
    for (Monitor *m = t->monitors; m; m = m->next) {
        if (m->ref == e->ref) {
            node_unlink(m);
            free(m);
            return NODE_TAKEN;
        }
    }
    return vm_atomic_load_relaxed(&t->mon_firing) == e->ref ? NODE_FIRING : NODE_FIRED;
}

/* ==== the watcher's entries ==== */

/* Pruning is due again when the list has doubled (and at 64 at the
 * least): each pruning's cost is paid for by the entries added since. */
#define MON_PRUNE_MIN 64

/* Whether every 'DOWN' of process `pid` has been sent (it is gone, or
 * exited): an entry for it costs nothing any more. */
static bool target_done(SchedSystem *sys, uint64_t pid)
{
    Process *t = vm_proc_get(sys, pid);
    if (!t)
        return true;
    pthread_mutex_lock(&t->lock);
    bool done = t->state == PS_EXITED;
    pthread_mutex_unlock(&t->lock);
    vm_proc_put(sys, t);
    return done;
}

/* Drops the tombstones, and with check_targets the entries whose target
 * is done, keeping the order. */
static void entries_filter(Process *p, bool check_targets)
{
    SchedSystem *sys = vm_sched_of(p->vm);
    size_t kept = 0;
    for (size_t i = 0; i < p->mon_out_len; i++) {
        MonitorOut *e = &p->mon_out[i];
        if (e->target && !(check_targets && target_done(sys, e->target)))
            p->mon_out[kept++] = *e;
    }
    p->mon_out_len = kept;
    p->mon_out_dead = 0;
}

void vm_proc_monitors_prune(Process *p)
{
    /* An entry of an exiting target stays until its 'DOWN' is sent:
     * demonitor needs it to stop that 'DOWN'. */
    entries_filter(p, true);
    p->mon_out_prune = 2 * p->mon_out_len > MON_PRUNE_MIN ? 2 * p->mon_out_len : MON_PRUNE_MIN;
}

/* The entry of monitor `ref` (a live one), or NULL. */
static MonitorOut *entry_find(Process *p, uint64_t ref)
{
    size_t lo = 0, hi = p->mon_out_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->mon_out[mid].ref < ref)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == p->mon_out_len || p->mon_out[lo].ref != ref || !p->mon_out[lo].target)
        return NULL;
    return &p->mon_out[lo];
}

static void entry_add(Process *p, uint64_t target, uint64_t ref, Monitor *node)
{
    if (p->mon_out_len == p->mon_out_prune) {
        /* A walk of every entry: a long one lends (vm/lend.h). */
        bool lent = vm_lend_if_long(p, p->mon_out_len);
        vm_proc_monitors_prune(p);
        vm_lend_done(p, lent);
    }
    if (p->mon_out_len == p->mon_out_cap) {
        p->mon_out_cap = p->mon_out_cap ? 2 * p->mon_out_cap : 16;
        p->mon_out = vm_realloc(p->mon_out, p->mon_out_cap * sizeof *p->mon_out);
    }
    p->mon_out[p->mon_out_len++] = (MonitorOut){ target, ref, node };
}

/* ==== monitor/2, demonitor/1 ==== */

/* {Name, nonode@nohost} for a monitor by name, else the pid. */
static Term down_item(Process *p, uint64_t pid, Term name)
{
    if (name == TERM_NIL)
        return make_pid(pid);
    Term e[2] = { name, make_atom(ATOM_NONODE) };
    return vm_make_tuple(p, 2, e);
}

uint64_t vm_proc_monitor(Process *p, uint64_t target, Term name)
{
    SchedSystem *sys = vm_sched_of(p->vm);
    uint64_t ref = vm_atomic_fetch_add_relaxed(&sys->next_ref, 1) + 1;
    if (target == p->pid)
        return ref;   /* as BEAM: nothing would come of it */
    Process *t = vm_proc_get(sys, target);
    Monitor *m = NULL;
    if (t) {
        m = vm_malloc(sizeof *m);
        m->watcher = p->pid;
        m->ref = ref;
        m->name = name;
        pthread_mutex_lock(&t->lock);
        if (t->state != PS_EXITED && !t->exiting)
            node_push(t, m);
        else
            free(m), m = NULL;
        pthread_mutex_unlock(&t->lock);
        vm_proc_put(sys, t);
    }
    if (m) {
        entry_add(p, target, ref, m);
        /* Killed as monitor/2 returns when this one takes p over. */
        if (p->max_heap)
            vm_heap_check_max(p);
        return ref;
    }
    /* Monitoring a process that is gone: an immediate DOWN, noproc. */
    Term e[5] = { make_atom(ATOM_DOWN), make_small((int64_t)ref), make_atom(ATOM_PROCESS),
                  down_item(p, target, name), make_atom(ATOM_NOPROC) };
    vm_send(p->vm, NULL, p->pid, vm_make_tuple(p, 5, e));
    return ref;
}

/* Compacts the tombstones away once they are half the entries: each
 * pass is paid for by the demonitors that made them. */
static void entries_compact(Process *p)
{
    if (p->mon_out_len >= MON_PRUNE_MIN && 2 * p->mon_out_dead > p->mon_out_len)
        entries_filter(p, false);
}

bool vm_proc_demonitor(Process *p, uint64_t ref)
{
    MonitorOut *e = entry_find(p, ref);
    if (!e)
        return false;
    MonitorOut out = *e;
    e->target = 0;
    p->mon_out_dead++;
    entries_compact(p);
    SchedSystem *sys = vm_sched_of(p->vm);
    Process *t = vm_proc_get(sys, out.target);
    if (!t)
        return false;   /* gone: its 'DOWN' was sent */
    pthread_mutex_lock(&t->lock);
    NodeFate fate = node_take(t, &out);
    pthread_mutex_unlock(&t->lock);
    bool off = fate == NODE_TAKEN || (fate == NODE_FIRING && vm_down_drop(p, t, ref));
    vm_proc_put(sys, t);
    return off;
}

/* ==== exits ==== */

static int by_target(const void *a, const void *b)
{
    uint64_t x = ((const MonitorOut *)a)->target, y = ((const MonitorOut *)b)->target;
    return (x > y) - (x < y);
}

/* Takes p's nodes off the exiting t in one pass (t's lock held). */
static void drop_from_exiting(Process *t, uint64_t watcher)
{
    for (Monitor *m = t->monitors, *n; m; m = n) {
        n = m->next;
        if (m->watcher == watcher) {
            node_unlink(m);
            free(m);
        }
    }
}

void vm_proc_monitors_drop(Process *p)
{
    SchedSystem *sys = vm_sched_of(p->vm);
    entries_filter(p, false);
    /* Each target's lock once, and one pass over the list of one that is
     * exiting, whatever number of monitors p set on it. */
    if (p->mon_out_len)   /* qsort's base may not be NULL, even for no element */
        qsort(p->mon_out, p->mon_out_len, sizeof *p->mon_out, by_target);
    for (size_t i = 0, j; i < p->mon_out_len; i = j) {
        uint64_t target = p->mon_out[i].target;
        for (j = i + 1; j < p->mon_out_len && p->mon_out[j].target == target; j++)
            ;
        Process *t = vm_proc_get(sys, target);
        if (!t)
            continue;
        pthread_mutex_lock(&t->lock);
        if (t->state == PS_EXITED)
            ;   /* every node sent its 'DOWN' */
        else if (t->exiting)
            drop_from_exiting(t, p->pid);
        else
            for (size_t k = i; k < j; k++)
                node_take(t, &p->mon_out[k]);
        pthread_mutex_unlock(&t->lock);
        vm_proc_put(sys, t);
    }
    free(p->mon_out);
    p->mon_out = NULL;
    p->mon_out_len = p->mon_out_cap = p->mon_out_prune = p->mon_out_dead = 0;
}

void vm_proc_monitors_fire(Process *p, tvm_term reason, size_t rw, bool *lent)
{
    size_t work = 0;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        Monitor *m = p->monitors;
        if (m) {
            node_unlink(m);
            vm_atomic_store_relaxed(&p->mon_firing, m->ref);
        }
        pthread_mutex_unlock(&p->lock);
        if (!m)
            return;
        /* Each a copy of the reason in its tuple (and a name's {Name,
         * Node}), counted toward a lend. */
        size_t words = rw + VM_DOWN_TUPLE_WORDS + (m->name == TERM_NIL ? 0 : VM_DOWN_NAME_WORDS);
        work += words;
        *lent = *lent || vm_lend_if_long(p, work);
        Term e[5] = { make_atom(ATOM_DOWN), make_small((int64_t)m->ref), make_atom(ATOM_PROCESS),
                      down_item(p, p->pid, m->name), TERM_NIL };
        e[4] = vm_root_get(p, reason);   /* after down_item's allocation */
        vm_down_send(p, m->watcher, m->ref, vm_make_tuple(p, 5, e), words);
        free(m);
    }
}

/* ==== natives ==== */

static tvm_status raise_badarg(Process *p)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(ATOM_BADARG), NULL);
    return TVM_EXCEPTION;
}

/* The target of monitor(process, What): a pid, a registered name, or
 * {Name, nonode@nohost}.  False for badarg; *pid 0 for a free name. */
static bool monitor_target(tvm_vm *vm, Term what, uint64_t *pid, Term *name)
{
    *name = TERM_NIL;
    if (term_is_pid(what)) {
        *pid = pid_value(what);
        return true;
    }
    if (term_is_tuple(what) && tuple_arity(what) == 2 &&
        tuple_elems(what)[1] == make_atom(ATOM_NONODE))
        what = tuple_elems(what)[0];
    if (!term_is_atom(what))
        return false;
    *name = what;
    if (!vm_registry_whereis(vm, atom_value(what), pid))
        *pid = 0;
    return true;
}

/* monitor(process, What): a call context has no mailbox for the 'DOWN'. */
static tvm_status nif_monitor(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                              void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    uint64_t pid;
    Term name;
    if (vm_root_get(p, argv[0]) != make_atom(ATOM_PROCESS) || !p->fiber ||
        !monitor_target(p->vm, vm_root_get(p, argv[1]), &pid, &name))
        return raise_badarg(p);
    *result = vm_root_push(p, make_small((int64_t)vm_proc_monitor(p, pid, name)));
    return TVM_OK;
}

/* demonitor's options: a proper list of `flush` and `info`. */
static bool demonitor_opts(Term l, bool *flush, bool *info)
{
    /* At most the two atoms as often as anyone writes them: a bound on
     * the walk (a longer list is badarg). */
    for (int n = 0; term_is_cons(l); l = cons_tail(l), n++) {
        Term o = cons_head(l);
        if (n == 16)
            return false;
        if (o == make_atom(ATOM_FLUSH))
            *flush = true;
        else if (o == make_atom(ATOM_INFO))
            *info = true;
        else
            return false;
    }
    return l == TERM_NIL;
}

static tvm_status demonitor(Process *p, tvm_term ref, Term opts, tvm_term *result)
{
    Term r = vm_root_get(p, ref);
    bool flush = false, info = false;
    if (!term_is_small(r) || small_value(r) <= 0 || !p->fiber || !demonitor_opts(opts, &flush, &info))
        return raise_badarg(p);
    uint64_t v = (uint64_t)small_value(r);
    bool off = vm_proc_demonitor(p, v);
    if (flush)
        vm_proc_flush_down(p, v);
    /* [info]: whether it was on; with flush, whether a 'DOWN' was not
     * in the queue either (BEAM's answers). */
    *result = vm_root_push(p, make_bool(info ? off : true));
    return TVM_OK;
}

static tvm_status nif_demonitor1(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                                 void *data)
{
    (void)argc, (void)data;
    return demonitor(env->p, argv[0], TERM_NIL, result);
}

static tvm_status nif_demonitor2(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                                 void *data)
{
    (void)argc, (void)data;
    return demonitor(env->p, argv[0], vm_root_get(env->p, argv[1]), result);
}

static const VmNativeDef natives[] = {
    { "erlang", "monitor", 2, nif_monitor },
    { "erlang", "demonitor", 1, nif_demonitor1 },
    { "erlang", "demonitor", 2, nif_demonitor2 },
};

VmNativeTable vm_monitors_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
