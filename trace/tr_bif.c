/*
 * trace/tr_bif.c - erlang:trace/3, process trace flags from VM code:
 *
 *   erlang:trace(PidSpec, How, FlagList) -> N
 *     PidSpec   a pid, or all | existing | new (tvm_trace_flags_all's
 *               scopes: every process alive now and/or the default of
 *               the processes spawned later)
 *     How       true sets the flags, false clears them
 *     FlagList  atoms: call, arity, timestamp, procs, return_to, silent
 *   N is the number of processes changed: 1 (0 if the pid is not alive)
 *   or the number the walk changed, as BEAM answers.  Bad arguments
 *   raise badarg.  Nothing stops any scheduler (trace/tr_flags.c).
 */
#include <string.h>

#include "trace/tr_vm.h"
#include "vm/atom.h"
#include "vm/sched.h"

static tvm_status badarg(Process *p)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(ATOM_BADARG), NULL);
    return TVM_EXCEPTION;
}

static bool flag_list(Term l, unsigned *flags)
{
    *flags = 0;
    for (; term_is_cons(l); l = cons_tail(l)) {
        Term h = cons_head(l);
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
    } names[] = { { "all", TVM_TRACE_ALL }, { "existing", TVM_TRACE_EXISTING },
                  { "new", TVM_TRACE_NEW } };
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

static tvm_status nif_trace(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                            void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    Term who = vm_root_get(p, argv[0]), how = vm_root_get(p, argv[1]);
    unsigned flags;
    tvm_trace_scope scope = TVM_TRACE_EXISTING;
    bool on = how == make_atom(ATOM_TRUE);
    if ((!on && how != make_atom(ATOM_FALSE)) || !flag_list(vm_root_get(p, argv[2]), &flags) ||
        (!term_is_pid(who) && !scope_of(who, &scope)))
        return badarg(p);
    int n;
    if (term_is_pid(who)) {
        tvm_status st = tvm_trace_flags(env, pid_value(who), flags, on);
        if (st != TVM_OK && st != TVM_ERR_NOTFOUND)
            return badarg(p);
        n = st == TVM_OK;
    } else {
        n = tr_flags_all(p->vm, scope, flags, on);
    }
    *result = vm_root_push(p, make_small(n));
    return TVM_OK;
}

static const VmNativeDef natives[] = {
    { "erlang", "trace", 3, nif_trace },
};

VmNativeTable tr_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
