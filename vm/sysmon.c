/*
 * vm/sysmon.c - BEAM's system monitor (vm/sysmon.h), with OTP 25's
 * interface and messages: erlang:system_monitor/0,1,2 set, read and clear
 * one monitor process per VM, which is sent
 *   {monitor, Pid, long_schedule, [{timeout, Ms}, {in, Loc}, {out, Loc}]}
 *   {monitor, Pid, long_gc, [{timeout, Ms} | Sizes]}
 *   {monitor, Pid, large_heap, Sizes}
 * as ordinary messages (Loc an {M, F, A} or undefined; Sizes BEAM's six
 * heap sizes in words, docs/tracing.md "System monitor").
 *
 * What BEAM does, and so this: a threshold of 0 is taken as the least
 * one (1 ms for long_gc and long_schedule, 16,384 words for large_heap)
 * and read back so; a time counts when it is over its threshold in
 * whole milliseconds (a run or a collection of 2 ms is reported for a
 * threshold of 1, one of 1.9 ms is not); a heap counts from its size on;
 * Pid undefined or an empty option list clears the setting, whatever
 * the other argument; busy_port and busy_dist_port are accepted and
 * listed, and never sent (there are no ports); the monitor process is
 * never reported on itself; and its end clears the setting.
 *
 * The cost while no monitor is set: one relaxed load of vm->sysmon.on
 * (next to vm->trace_gen, which the switch in loads too) and a predicted
 * branch at each switch in and each collection, and a test of the
 * scheduler's own sysmon_in.ns at each switch out (vm/sched.c,
 * vm/heap.c; measured in CHANGELOG.md).  While one is set, a switch in
 * reads the clock and the process's top frame, a switch out the clock,
 * and a collection the clock twice; the messages are built off any heap
 * and sent from the thread that saw the event, the scheduler's (a switch
 * out, after the process's context is saved) or the process's own (a
 * collection), with no lock held, as a send of the VM's own ('DOWN')
 * is.
 *
 * Lock order: vm->sysmon.lock is taken alone (set() takes the monitor
 * process's lock before it and after it, never inside it).
 */
#include "vm/sysmon.h"

#include "vm/atom.h"
#include "vm/bif_internal.h"
#include "vm/heap.h"
#include "vm/sched.h"
#include "vm/timer.h"
#include "vm/vm.h"

/* BEAM's least thresholds (erl_bif_info.c's system_monitor/2). */
#define LEAST_MS 1
#define LEAST_HEAP 16384

void vm_sysmon_init(tvm_vm *vm)
{
    pthread_mutex_init(&vm->sysmon.lock, NULL);
}

void vm_sysmon_free(tvm_vm *vm)
{
    pthread_mutex_destroy(&vm->sysmon.lock);
}

/* ==== the setting ==== */

/* One setting, as the natives read and write it. */
typedef struct Setting {
    uint64_t pid;   /* 0: none (then nothing else is set) */
    uint64_t long_gc, long_schedule, large_heap;
    uintptr_t busy;
} Setting;

/* vm->sysmon.lock held. */
static Setting read_locked(VmSysmon *m)
{
    return (Setting){
        vm_atomic_load_relaxed(&m->pid),
        vm_atomic_load_relaxed(&m->long_gc),
        vm_atomic_load_relaxed(&m->long_schedule),
        vm_atomic_load_relaxed(&m->large_heap),
        vm_atomic_load_relaxed(&m->busy),
    };
}

/* vm->sysmon.lock held.  A new setting's values before its `on`
 * (release: a reader that sees `on` set sees them); a clearing's `on`
 * before its values. */
static void write_locked(VmSysmon *m, const Setting *s)
{
    const bool on = s->long_gc || s->long_schedule || s->large_heap;
    if (!on)
        vm_atomic_store_relaxed(&m->on, 0);
    vm_atomic_store_relaxed(&m->pid, s->pid);
    vm_atomic_store_relaxed(&m->long_gc, s->long_gc);
    vm_atomic_store_relaxed(&m->long_schedule, s->long_schedule);
    vm_atomic_store_relaxed(&m->large_heap, s->large_heap);
    vm_atomic_store_relaxed(&m->busy, s->busy);
    if (on)
        vm_atomic_store_release(&m->on, 1);
}

/* Replaces the setting with *s; the one before. */
static Setting swap(tvm_vm *vm, const Setting *s)
{
    pthread_mutex_lock(&vm->sysmon.lock);
    Setting old = read_locked(&vm->sysmon);
    write_locked(&vm->sysmon, s);
    pthread_mutex_unlock(&vm->sysmon.lock);
    return old;
}

/* Clears the setting if it still names `pid` (a monitor that ended). */
static void clear_of(tvm_vm *vm, uint64_t pid)
{
    static const Setting none;
    pthread_mutex_lock(&vm->sysmon.lock);
    if (pid && vm_atomic_load_relaxed(&vm->sysmon.pid) == pid)
        write_locked(&vm->sysmon, &none);
    pthread_mutex_unlock(&vm->sysmon.lock);
}

void vm_sysmon_exited(Process *p)
{
    clear_of(p->vm, p->pid);
}

/* ==== the natives ==== */

/* Words of the largest {Pid, Options} (five options, two of them atoms). */
#define SETTING_WORDS (3 + 5 * 2 + 3 * 3)

/* undefined, or {Pid, Options} in BEAM's order, on p's heap. */
static Term setting_term(Process *p, const Setting *s)
{
    if (!s->pid)
        return make_atom(ATOM_UNDEFINED);
    vm_heap_ensure(p, SETTING_WORDS, NULL, 0);
    Term list = TERM_NIL;
    const struct {
        Atom key;
        uint64_t value;
    } kv[] = {
        { ATOM_LONG_GC, s->long_gc },
        { ATOM_LONG_SCHEDULE, s->long_schedule },
        { ATOM_LARGE_HEAP, s->large_heap },
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        if (!kv[i].value)
            continue;
        Term *t = vm_heap_alloc(p, 3);
        t[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
        t[1] = make_atom(kv[i].key);
        t[2] = make_small((int64_t)kv[i].value);
        Term *c = vm_heap_alloc(p, 2);
        c[0] = make_boxed(t);
        c[1] = list;
        list = make_cons_ptr(c);
    }
    const Atom busy[] = { ATOM_BUSY_PORT, ATOM_BUSY_DIST_PORT };
    for (int i = 0; i < 2; i++) {
        if (!(s->busy & (1u << i)))
            continue;
        Term *c = vm_heap_alloc(p, 2);
        c[0] = make_atom(busy[i]);
        c[1] = list;
        list = make_cons_ptr(c);
    }
    Term *t = vm_heap_alloc(p, 3);
    t[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
    t[1] = make_pid(s->pid);
    t[2] = list;
    return make_boxed(t);
}

/* A threshold's value: a non-negative integer, at least `least`. */
static bool threshold(Term v, uint64_t least, uint64_t *out)
{
    if (!term_is_small(v) || small_value(v) < 0)
        return false;
    *out = (uint64_t)small_value(v) < least ? least : (uint64_t)small_value(v);
    return true;
}

/* One option into *s; false for one BEAM's system_monitor/2 rejects. */
static bool option(Term o, Setting *s)
{
    if (term_is_atom(o) && atom_value(o) == ATOM_BUSY_PORT) {
        s->busy |= VM_SYSMON_BUSY_PORT;
        return true;
    }
    if (term_is_atom(o) && atom_value(o) == ATOM_BUSY_DIST_PORT) {
        s->busy |= VM_SYSMON_BUSY_DIST_PORT;
        return true;
    }
    if (!term_is_tuple(o) || tuple_arity(o) != 2 || !term_is_atom(tuple_elems(o)[0]))
        return false;
    Term v = tuple_elems(o)[1];
    switch (atom_value(tuple_elems(o)[0])) {
    case ATOM_LONG_GC:
        return threshold(v, LEAST_MS, &s->long_gc);
    case ATOM_LONG_SCHEDULE:
        return threshold(v, LEAST_MS, &s->long_schedule);
    case ATOM_LARGE_HEAP:
        return threshold(v, LEAST_HEAP, &s->large_heap);
    default:
        return false;
    }
}

/* The options of a proper list into *s (a later one of a kind wins);
 * false for a bad one or an improper list.  Bounded by the list. */
static bool options(Term l, Setting *s)
{
    for (; term_is_cons(l); l = cons_tail(l))
        if (!option(cons_head(l), s))
            return false;
    return term_is_nil(l);
}

/*
 * Sets `s` (its options parsed) with its pid checked: a live process,
 * else false and nothing changed.  The monitor may exit as it is set:
 * its exit sets `exiting` under its lock and then reads the setting's
 * pid (vm_sysmon_exited, by lifecycle.c's load); this stores the pid and
 * then reads `exiting` under the same lock.  Whichever lock section comes
 * second sees the other's write, so a monitor that is gone is never left
 * set: either its exit clears the setting or this does.
 */
static bool set(tvm_vm *vm, const Setting *s, Setting *old)
{
    SchedSystem *sys = vm_sched_of(vm);
    Process *m = sys ? vm_proc_get_live(sys, s->pid) : NULL;
    if (!m)
        return false;
    *old = swap(vm, s);
    pthread_mutex_lock(&m->lock);
    const bool gone = m->exiting || m->state == PS_EXITED;
    pthread_mutex_unlock(&m->lock);
    if (gone)
        clear_of(vm, s->pid);
    vm_proc_put(sys, m);
    return true;
}

/* system_monitor(MonitorPid, Options) of p: the setting before, or
 * THE_NONE for badarg. */
static Term monitor2(Process *p, Term pid, Term opts)
{
    Setting s = { 0 }, old;
    if ((term_is_atom(pid) && atom_value(pid) == ATOM_UNDEFINED) || term_is_nil(opts)) {
        old = swap(p->vm, &s);
        return setting_term(p, &old);
    }
    if (!term_is_pid(pid) || !options(opts, &s))
        return THE_NONE;
    s.pid = pid_value(pid);
    if (!set(p->vm, &s, &old))
        return THE_NONE;
    return setting_term(p, &old);
}

static tvm_status answer(tvm_env *env, Term t, tvm_term *result)
{
    if (t == THE_NONE)
        return tvm_raise_badarg(env);
    *result = vm_root_push(env->p, t);
    return TVM_OK;
}

/* system_monitor(): undefined or {MonitorPid, Options}. */
NATIVE_FN(sm_get)
{
    (void)argc, (void)argv, (void)data;
    pthread_mutex_lock(&env->p->vm->sysmon.lock);
    Setting s = read_locked(&env->p->vm->sysmon);
    pthread_mutex_unlock(&env->p->vm->sysmon.lock);
    return answer(env, setting_term(env->p, &s), result);
}

/* system_monitor(undefined | {MonitorPid, Options}): as /2. */
NATIVE_FN(sm_set1)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Term a = vm_root_get(p, argv[0]);
    if (term_is_atom(a) && atom_value(a) == ATOM_UNDEFINED)
        return answer(env, monitor2(p, a, TERM_NIL), result);
    if (!term_is_tuple(a) || tuple_arity(a) != 2)
        return tvm_raise_badarg(env);
    return answer(env, monitor2(p, tuple_elems(a)[0], tuple_elems(a)[1]), result);
}

/* system_monitor(MonitorPid, Options). */
NATIVE_FN(sm_set2)
{
    (void)argc, (void)data;
    Process *p = env->p;
    return answer(env, monitor2(p, vm_root_get(p, argv[0]), vm_root_get(p, argv[1])), result);
}

static const VmNativeDef natives[] = {
    { "erlang", "system_monitor", 0, sm_get },
    { "erlang", "system_monitor", 1, sm_set1 },
    { "erlang", "system_monitor", 2, sm_set2 },
};

VmNativeTable vm_sysmon_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}

/* ==== the messages ==== */

/* The monitor to tell about p, or 0: none, or p itself (BEAM does not
 * report the monitor process on itself), or a call context. */
static uint64_t monitor_for(const Process *p)
{
    uint64_t m = vm_atomic_load_relaxed(&p->vm->sysmon.pid);
    return m == p->pid || !p->pid ? 0 : m;
}

/* A list's cells and pairs off any heap: at most 7 {Key, Value}. */
enum { MAX_PAIRS = 7 };

typedef struct Msg {
    Term pairs[MAX_PAIRS][3];
    Term cells[MAX_PAIRS][2];
    Term mfa[2][4];
    Term top[5];
    unsigned n;      /* pairs so far, in the list's order */
} Msg;

static void pair(Msg *b, Atom key, Term value)
{
    Term *t = b->pairs[b->n];
    t[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
    t[1] = make_atom(key);
    t[2] = value;
    b->n++;
}

static void pair_words(Msg *b, Atom key, uint64_t words)
{
    pair(b, key, make_small((int64_t)words));
}

/* {monitor, Pid, What, [the pairs]} to monitor m. */
static void send(const Process *p, uint64_t m, Msg *b, Atom what)
{
    Term list = TERM_NIL;
    for (unsigned i = b->n; i-- > 0;) {
        b->cells[i][0] = make_boxed(b->pairs[i]);
        b->cells[i][1] = list;
        list = make_cons_ptr(b->cells[i]);
    }
    b->top[0] = MAKE_HEADER(IMM_HDR_TUPLE, 4);
    b->top[1] = make_atom(ATOM_MONITOR);
    b->top[2] = make_pid(p->pid);
    b->top[3] = make_atom(what);
    b->top[4] = list;
    /* A monitor that has ended meanwhile: nothing sent (its exit clears
     * the setting). */
    (void)vm_send(p->vm, NULL, m, make_boxed(b->top));
}

/* BEAM's six sizes after a collection, in its order: the old heap and
 * heap fragments are always empty here (vm/heap.c copies the whole heap;
 * messages wait off it), stack_size as the garbage_collection trace
 * counts it (vm_stack_words). */
static void sizes(Msg *b, const Process *p)
{
    pair_words(b, ATOM_OLD_HEAP_BLOCK_SIZE, 0);
    pair_words(b, ATOM_HEAP_BLOCK_SIZE, vm_heap_size(p));
    pair_words(b, ATOM_MBUF_SIZE, 0);
    pair_words(b, ATOM_STACK_SIZE, vm_stack_words(p));
    pair_words(b, ATOM_OLD_HEAP_SIZE, 0);
    pair_words(b, ATOM_HEAP_SIZE, (size_t)(p->htop - p->heap));
}

void vm_sysmon_gc(Process *p, uint64_t ns)
{
    const uint64_t m = monitor_for(p);
    if (!m)
        return;
    const uint64_t ms = ns / 1000000u;
    const uint64_t long_gc = vm_atomic_load_relaxed(&p->vm->sysmon.long_gc);
    if (long_gc && ms > long_gc) {
        Msg b = { .n = 0 };
        pair_words(&b, ATOM_TIMEOUT, ms);
        sizes(&b, p);
        send(p, m, &b, ATOM_LONG_GC);
    }
    const uint64_t large = vm_atomic_load_relaxed(&p->vm->sysmon.large_heap);
    if (large && vm_heap_size(p) >= large) {
        Msg b = { .n = 0 };
        sizes(&b, p);
        send(p, m, &b, ATOM_LARGE_HEAP);
    }
}

/* How far down from the top a switch looks for p's function. */
#define TOP_FRAMES 16

/* The function p is in (switched out): its top call frame's (a native
 * has one too), or NULL. */
static const FuncInfo *top_function(const Process *p)
{
    for (uint32_t i = p->nframes, k = 0; i-- > 0 && k < TOP_FRAMES; k++)
        if (FRAME_KIND(p->frames[i].kind) == FRAME_CALL && p->frames[i].fn)
            return p->frames[i].fn;
    return NULL;
}

void vm_sysmon_in(Scheduler *s, Process *p)
{
    VmSysmonIn *in = &s->sysmon_in;
    in->known = false;
    if (!vm_atomic_load_relaxed(&p->vm->sysmon.long_schedule))
        return;
    /* A process that has not run yet is in its spawn's function. */
    const FuncInfo *fn = top_function(p);
    if (fn) {
        *in = (VmSysmonIn){ 0, true, fn->mod, fn->name, fn->arity };
    } else if (!p->nframes && p->entry) {
        *in = (VmSysmonIn){ 0, true, p->entry->mod, p->entry->name, (uint32_t)p->entry->arity };
    }
    in->ns = vm_now_ns() | 1;   /* never 0: 0 is "not timed" */
}

/* {M, F, A} in t, or undefined. */
static Term location(Term *t, bool known, Atom mod, Atom name, uint32_t arity)
{
    if (!known)
        return make_atom(ATOM_UNDEFINED);
    t[0] = MAKE_HEADER(IMM_HDR_TUPLE, 3);
    t[1] = make_atom(mod);
    t[2] = make_atom(name);
    t[3] = make_small(arity);
    return make_boxed(t);
}

void vm_sysmon_out(Scheduler *s, Process *p)
{
    const VmSysmonIn in = s->sysmon_in;
    s->sysmon_in.ns = 0;
    const uint64_t limit = vm_atomic_load_relaxed(&p->vm->sysmon.long_schedule);
    const uint64_t m = monitor_for(p);
    const uint64_t ms = (vm_now_ns() - in.ns) / 1000000u;
    if (!limit || !m || ms <= limit)
        return;
    Msg b = { .n = 0 };
    pair_words(&b, ATOM_TIMEOUT, ms);
    pair(&b, ATOM_IN, location(b.mfa[0], in.known, in.mod, in.name, in.arity));
    /* Where it stopped: its top call frame; an exited process has none. */
    const FuncInfo *fn = p->state == PS_EXITED ? NULL : top_function(p);
    pair(&b, ATOM_OUT, location(b.mfa[1], fn != NULL, fn ? fn->mod : 0, fn ? fn->name : 0,
                                fn ? fn->arity : 0));
    send(p, m, &b, ATOM_LONG_SCHEDULE);
}
