/*
 * trace/tr_bif.c - process trace flags from VM code:
 *
 *   erlang:trace(PidSpec, How, FlagList) -> N           the default session
 *   erlang:trace(Session, PidSpec, How, FlagList) -> N  a session
 *   trace:process(Session, PidSpec, How, FlagList) -> N (OTP 27's name)
 *     PidSpec   a pid, or all | existing | new (tvm_trace_flags_all's
 *               scopes: every process alive now and/or the default of
 *               the processes spawned later; OTP 27's processes,
 *               existing_processes and new_processes too)
 *     How       true sets the flags, false clears them
 *     FlagList  atoms: call, arity, timestamp, procs, return_to, silent,
 *               running, send, 'receive'; and {tracer, T} for one pid
 *               in the default session: its own tracer process
 *               (tr_pflags_own_tracer)
 *     Session   {trace_session, Id} from trace:session_create/3
 *   N is the number of processes changed: 1 (0 if the pid is not alive)
 *   or the number of live processes (0 for new alone), as BEAM answers.
 *   Bad arguments (a destroyed or stopped session, a {tracer, _} option in
 *   a session, whose tracer is fixed, or with all/existing/new, a second
 *   live tracer) raise badarg and change nothing.  Nothing stops any
 *   scheduler; for all or existing processes the calling process waits
 *   for thread progress (trace/tr_flags_all.c).
 */
#include <string.h>

#include "trace/tr_delivered.h"
#include "trace/tr_session.h"
#include "trace/tr_vm.h"
#include "vm/atom.h"
#include "vm/sched.h"

static tvm_status badarg(Process *p)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(ATOM_BADARG), NULL);
    return TVM_EXCEPTION;
}

/* The flags named in l; a {tracer, Pid} element gives *tracer (0 when
 * there is none). */
static bool flag_list(Term l, unsigned *flags, uint64_t *tracer)
{
    *flags = 0;
    *tracer = 0;
    for (; term_is_cons(l); l = cons_tail(l)) {
        Term h = cons_head(l);
        uint64_t t = tr_tracer_of(h);
        if (t) {
            *tracer = t;
            continue;
        }
        size_t n;
        const char *name = term_is_atom(h) ? vm_atom_name(atom_value(h), &n) : NULL;
        unsigned bit = name ? tr_flag_bit(name, n) : 0;
        if (!bit)
            return false;
        *flags |= bit;
    }
    return term_is_nil(l);
}

static bool scope_of(Term t, tvm_trace_scope *scope)
{
    static const struct {
        const char *name;
        tvm_trace_scope scope;
    } names[] = { { "all", TVM_TRACE_ALL },           { "existing", TVM_TRACE_EXISTING },
                  { "new", TVM_TRACE_NEW },           { "processes", TVM_TRACE_ALL },
                  { "existing_processes", TVM_TRACE_EXISTING },
                  { "new_processes", TVM_TRACE_NEW } };
    if (!term_is_atom(t))
        return false;
    const char *s = vm_atom_name(atom_value(t), NULL);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) {
            *scope = names[i].scope;
            return true;
        }
    return false;
}

/* {trace_session, Id} of a live session: its sid. */
bool tr_session_term(tvm_vm *vm, Term t, unsigned *sid)
{
    char why[160];
    uint64_t id;
    tvm_status st;
    return tr_session_term_id(t, &id) && tr_session_resolve(vm, id, sid, &st, why, sizeof why);
}

/* trace(PidSpec, How, FlagList) for session sid; badarg, or N. */
static tvm_status trace_flags(tvm_env *env, unsigned sid, Term who, Term how, Term flist,
                              tvm_term *result)
{
    Process *p = env->p;
    unsigned flags;
    uint64_t tracer;
    tvm_trace_scope scope = TVM_TRACE_EXISTING;
    bool on = how == make_atom(ATOM_TRUE);
    if ((!on && how != make_atom(ATOM_FALSE)) || !flag_list(flist, &flags, &tracer) ||
        (!term_is_pid(who) && !scope_of(who, &scope)))
        return badarg(p);
    /* A process's own tracer: the default session's, for one process
     * (a session's tracer is fixed; `all` and `new` take none). */
    if (tracer && (sid != 0 || !term_is_pid(who)))
        return badarg(p);
    int n;
    if (term_is_pid(who)) {
        Process *t = tr_proc_get(p->vm, pid_value(who));
        n = 0;
        if (t) {
            bool ok = sid == 0 && (tracer || !on)
                          ? tr_pflags_own_tracer(t, tracer, flags, on)
                          : tr_pflags_change(t, sid, flags, on, false);
            vm_proc_put(vm_sched_of(p->vm), t);
            if (!ok)
                return badarg(p);
            n = 1;
        }
    } else {
        n = tr_flags_all(p->vm, sid, scope, flags, on, false);
        if (n < 0)
            return badarg(p);
    }
    *result = vm_root_push(p, make_small(n));
    return TVM_OK;
}

static tvm_status nif_trace(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                            void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    return trace_flags(env, 0, vm_root_get(p, argv[0]), vm_root_get(p, argv[1]),
                       vm_root_get(p, argv[2]), result);
}

/* erlang:trace(Session, PidSpec, How, FlagList), trace:process/4. */
static tvm_status nif_trace4(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                             void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    unsigned sid;
    if (!tr_session_term(p->vm, vm_root_get(p, argv[0]), &sid))
        return badarg(p);
    return trace_flags(env, sid, vm_root_get(p, argv[1]), vm_root_get(p, argv[2]),
                       vm_root_get(p, argv[3]), result);
}

static const VmNativeDef natives[] = {
    { "erlang", "trace", 3, nif_trace },
    { "erlang", "trace", 4, nif_trace4 },
    { "trace", "process", 4, nif_trace4 },
    /* trace/tr_delivered.c */
    { "erlang", "trace_delivered", 1, tr_nif_trace_delivered },
};

VmNativeTable tr_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
