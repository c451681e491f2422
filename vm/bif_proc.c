/*
 * vm/bif_proc.c - the built-in natives about processes themselves:
 * self/0, spawn/3, spawn_link/3, spawn_opt/4, send/2 (and '!'), node/0,
 * is_process_alive/1 and timer:sleep/1.  Links, monitors, names,
 * process_info and the dictionary have files of their own (links.c,
 * monitors.c, registry.c, procinfo.c, dict.c); what they all share is in
 * vm/bif_internal.h.
 */
#include "vm/native.h"
#include "vm/bif_internal.h"

#include <stdlib.h>

#include "vm/lend.h"
#include "vm/registry.h"
#include "vm/sched.h"

NATIVE_FN(bif_self)
{
    SETUP();
    RETURN(p->pid ? make_pid(p->pid) : make_atom(ATOM_UNDEFINED));
}

/* spawn(M, F, Args) with a max_heap_size of max_heap words (0: none),
 * linked to p (spawn_link/3: p must be a process, not a call context). */
static tvm_status spawn(Process *p, Term m, Term f, Term args, bool link, size_t max_heap,
                        tvm_term *result)
{
    long n = vm_bif_list_length_max(args, VM_MAX_ARITY);
    if (!term_is_atom(m) || !term_is_atom(f) || n < 0 || (link && !p->fiber))
        return vm_bif_error(p, make_atom(ATOM_BADARG));
    Export *e = vm_export_get_bounded(p->vm, atom_value(m), atom_value(f), (uint32_t)n);
    if (!e)
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));   /* max_exports */
    Term *v = vm_bif_list_to_array(args, n);
    uint64_t pid = vm_spawn(p, e, (int)n, v, false, link, max_heap);
    free(v);
    if (!pid)
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    *result = vm_root_push(p, make_pid(pid));
    return TVM_OK;
}

NATIVE_FN(bif_spawn3)
{
    SETUP();
    return spawn(p, ARG(0), ARG(1), ARG(2), false, p->vm->max_heap, result);
}

NATIVE_FN(bif_spawn_link3)
{
    SETUP();
    return spawn(p, ARG(0), ARG(1), ARG(2), true, p->vm->max_heap, result);
}

/* spawn_opt's options, a proper list (of any length: the caller counted
 * it): the last {max_heap_size, Words} sets *max_heap, `link` *link;
 * false for any other element. */
static bool spawn_opts(Term o, size_t *max_heap, bool *link)
{
    for (; term_is_cons(o); o = cons_tail(o)) {
        Term h = cons_head(o);
        if (h == make_atom(ATOM_LINK)) {
            *link = true;
            continue;
        }
        if (!term_is_tuple(h) || tuple_arity(h) != 2 ||
            tuple_elems(h)[0] != make_atom(ATOM_MAX_HEAP_SIZE) ||
            !term_is_small(tuple_elems(h)[1]) || small_value(tuple_elems(h)[1]) < 0)
            return false;
        *max_heap = (size_t)small_value(tuple_elems(h)[1]);
    }
    return true;
}

/* spawn_opt(M, F, Args, Opts): Opts a list of {max_heap_size, Words}
 * (0: no limit; as BEAM's integer form; the VM's default otherwise) and
 * `link` (as spawn_link/3). */
NATIVE_FN(bif_spawn_opt4)
{
    SETUP();
    size_t max_heap = p->vm->max_heap;
    bool lent, link = false;
    bool ok = vm_bif_list_length_lend(p, ARG(3), &lent) >= 0 && spawn_opts(ARG(3), &max_heap, &link);
    vm_lend_done(p, lent);
    if (!ok)
        BADARG();
    return spawn(p, ARG(0), ARG(1), ARG(2), link, max_heap, result);
}

NATIVE_FN(bif_send)
{
    SETUP();
    Term to = ARG(0);
    uint64_t pid;
    if (term_is_pid(to))
        pid = pid_value(to);
    else if (!term_is_atom(to) || !vm_registry_whereis(p->vm, atom_value(to), &pid))
        BADARG();   /* as BEAM: a name nobody holds is badarg */
    /* Sending to a process that has exited is not an error (as in Erlang);
     * a message over max_message_words is a system_limit. */
    if (vm_send_to(p->vm, p, pid, to, ARG(1)) == VM_SEND_TOO_BIG)
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    RETURN(ARG(1));
}

/* node(): the node name of a VM that is not distributed, as BEAM's. */
NATIVE_FN(bif_node)
{
    SETUP();
    RETURN(make_atom(ATOM_NONODE));
}

NATIVE_FN(bif_is_process_alive)
{
    SETUP();
    if (!term_is_pid(ARG(0)))
        BADARG();
    SchedSystem *sys = vm_sched_of(p->vm);
    Process *t = sys ? vm_proc_get_live(sys, pid_value(ARG(0))) : NULL;
    if (t)
        vm_proc_put(sys, t);
    RETURN(make_bool(t != NULL));
}

/* timer:sleep(Ms): suspends the process (its native frames stay on its
 * fiber) through the same API an embedder's native would use. */
NATIVE_FN(bif_sleep)
{
    SETUP();
    int64_t ms;
    if (tvm_get_int(env, argv[0], &ms) != TVM_OK || ms < 0)
        BADARG();
    tvm_status st = tvm_sleep(env, ms);
    if (st == TVM_EXCEPTION)
        return st;   /* being killed (max_heap_size) */
    if (st != TVM_OK)
        BADARG();
    RETURN(TERM_OK);
}

static const VmNativeDef proc_bifs[] = {
    { "erlang", "self", 0, bif_self },
    { "erlang", "spawn", 3, bif_spawn3 },
    { "erlang", "spawn_opt", 4, bif_spawn_opt4 },
    { "erlang", "spawn_link", 3, bif_spawn_link3 },
    { "erlang", "send", 2, bif_send },
    { "erlang", "!", 2, bif_send },
    { "erlang", "node", 0, bif_node },
    { "erlang", "is_process_alive", 1, bif_is_process_alive },
    { "timer", "sleep", 1, bif_sleep },
};

VmNativeTable vm_proc_natives(void)
{
    return VM_NATIVE_TABLE(proc_bifs);
}
