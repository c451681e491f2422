/*
 * loader/ld_natives.c - code loading from VM code, shaped like BEAM's:
 *
 *   code:load_binary(Mod, File, Text) -> {module, Mod} | {error, badfile}
 *                                        | {error, not_purged}
 *                                        | {error, system_limit}
 *   erlang:delete_module(Mod)         -> true | undefined
 *   erlang:purge_module(Mod)          -> true            (badarg: no old code)
 *   erlang:check_old_code(Mod)        -> boolean()
 *   erlang:module_loaded(Mod)         -> boolean()
 *   erlang:function_exported(Mod, Fun, Arity) -> boolean()
 *
 * Text is the module's .tasm text (a binary); File names it in the
 * loader's diagnostics, which VM code does not get (BEAM's badfile says
 * no more; an embedder has them from tvm_load_string, an operator from
 * `tracevm attach load`).
 *
 * Current and old code, as BEAM has them: loading a module makes its
 * current version old; delete_module makes the current version old and
 * leaves no current one (remote calls raise undef); a process running
 * old code goes on in it (its local calls stay there) until it makes a
 * remote call, which goes to the current version.  Loading while the old
 * code is not purged gives {error, not_purged}, as BEAM; delete_module
 * then raises badarg.  purge_module removes the old code from that
 * accounting.  Unlike BEAM, nothing is freed and no process is killed:
 * tracevm keeps every version allocated while the VM lives, so a process
 * still running purged code, or a frame returning into it, keeps working
 * (docs/asm.md).  So that a loop of loads and purges cannot grow the OS
 * process without end, a load whose code would take what all versions
 * hold past max_code_bytes is {error, system_limit}.  The C API
 * (tvm_load_string) replaces the current version whatever old code there
 * is.
 *
 * Each runs under the code-modification permission; a calling process is
 * suspended while it waits for it or for thread progress, and its
 * scheduler runs others: loading from VM code stops nothing.
 */
#include "loader/loader.h"

#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/hook.h"
#include "vm/lend.h"
#include "vm/print.h"
#include "vm/process.h"

static tvm_status badarg(Process *p)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(ATOM_BADARG), NULL);
    return TVM_EXCEPTION;
}

static tvm_status give(Process *p, Term t, tvm_term *result)
{
    *result = vm_root_push(p, t);
    return TVM_OK;
}

/* The module argument: an atom, else false. */
static bool module_arg(Process *p, tvm_term h, Atom *out)
{
    Term t = vm_root_get(p, h);
    if (!term_is_atom(t))
        return false;
    *out = atom_value(t);
    return true;
}

/* A file name for diagnostics: an atom, a binary or a string (list of
 * bytes), at most 255 bytes; false otherwise. */
static bool file_arg(Term t, char *out, size_t size)
{
    size_t n = 0;
    if (term_is_atom(t)) {
        const char *s = vm_atom_name(atom_value(t), &n);
        if (n >= size)
            return false;
        memcpy(out, s, n);
    } else if (term_is_binary(t)) {
        n = binary_size(t);
        if (n >= size)
            return false;
        memcpy(out, binary_bytes(t), n);
    } else {
        for (; term_is_cons(t); t = cons_tail(t)) {
            Term c = cons_head(t);
            if (!term_is_small(c) || small_value(c) < 1 || small_value(c) > 255 || n + 1 >= size)
                return false;
            out[n++] = (char)small_value(c);
        }
        if (t != TERM_NIL)
            return false;
    }
    out[n] = '\0';
    return memchr(out, '\0', n) == NULL;
}

static tvm_status nif_load_binary(tvm_env *env, int argc, const tvm_term *argv,
                                  tvm_term *result, void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Atom mod;
    char file[256];
    Term text = vm_root_get(p, argv[2]);
    if (!module_arg(p, argv[0], &mod) || !file_arg(vm_root_get(p, argv[1]), file, sizeof file) ||
        !term_is_binary(text))
        return badarg(p);
    /* A private copy: loading may suspend the process, and a collection
     * then moves the binary.  A long text (a byte, a unit) lends p's queue
     * while it is copied and assembled (vm/lend.h; a suspension in the
     * load takes the queue back, and the switch in lends again). */
    size_t len = binary_size(text);
    bool lent = vm_lend_if_long(p, len);
    char *copy = vm_malloc(len + 1);
    memcpy(copy, binary_bytes(text), len);
    StrBuf diag;
    sb_init(&diag);
    tvm_status st = ld_load(p->vm, file, copy, len, mod, true, &diag);
    sb_free(&diag);
    free(copy);
    vm_lend_done(p, lent);
    Term e[2];
    if (st == TVM_OK) {
        e[0] = make_atom(ATOM_MODULE);
        e[1] = make_atom(mod);
    } else {
        e[0] = make_atom(ATOM_ERROR);
        e[1] = make_atom(st == TVM_ERR_EXISTS  ? ATOM_NOT_PURGED
                         : st == TVM_ERR_LIMIT ? ATOM_SYSTEM_LIMIT
                                               : ATOM_BADFILE);
    }
    return give(p, vm_make_tuple(p, 2, e), result);
}

static tvm_status nif_delete_module(tvm_env *env, int argc, const tvm_term *argv,
                                    tvm_term *result, void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    tvm_vm *vm = p->vm;
    Atom mod;
    if (!module_arg(p, argv[0], &mod))
        return badarg(p);
    vm_code_perm_acquire(vm);
    pthread_mutex_lock(&vm->code_lock);
    /* Old code is asked of the chain's head, current or not: a deleted
     * version is itself old code, so deleting twice without a purge
     * between is badarg (as BEAM), not undefined. */
    Module *head = vm_module_find_locked(vm, mod);
    Module *m = head && !head->deleted ? head : NULL;
    bool old = head && vm_module_old(head);
    pthread_mutex_unlock(&vm->code_lock);
    if (m && !old) {
        /* Its breakpoints go first, by the full non-blocking sequence:
         * the deleted code is untraced from here on, as a replaced one. */
        vm_hook_module_replaced(vm, m);
        pthread_mutex_lock(&vm->code_lock);
        vm_module_delete_locked(vm, m);
        pthread_mutex_unlock(&vm->code_lock);
    }
    vm_code_perm_release(vm);
    if (old)
        return badarg(p);   /* BEAM: there already is an old version */
    return give(p, make_atom(m ? ATOM_TRUE : ATOM_UNDEFINED), result);
}

static tvm_status nif_purge_module(tvm_env *env, int argc, const tvm_term *argv,
                                   tvm_term *result, void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    tvm_vm *vm = p->vm;
    Atom mod;
    if (!module_arg(p, argv[0], &mod))
        return badarg(p);
    vm_code_perm_acquire(vm);
    pthread_mutex_lock(&vm->code_lock);
    Module *m = vm_module_find_locked(vm, mod);
    Module *old = m ? vm_module_old(m) : NULL;
    for (Module *v = old; v; v = v->older)
        v->purged = true;
    pthread_mutex_unlock(&vm->code_lock);
    vm_code_perm_release(vm);
    if (!old)
        return badarg(p);   /* BEAM: no old code to purge */
    return give(p, make_atom(ATOM_TRUE), result);
}

/* check_old_code (which = 0) and module_loaded (which = 1). */
static tvm_status code_query(tvm_env *env, const tvm_term *argv, tvm_term *result, int which)
{
    Process *p = env->p;
    tvm_vm *vm = p->vm;
    Atom mod;
    if (!module_arg(p, argv[0], &mod))
        return badarg(p);
    pthread_mutex_lock(&vm->code_lock);
    Module *m = vm_module_find_locked(vm, mod);
    bool yes = which == 0 ? m && vm_module_old(m) : m && !m->deleted;
    pthread_mutex_unlock(&vm->code_lock);
    return give(p, make_atom(yes ? ATOM_TRUE : ATOM_FALSE), result);
}

static tvm_status nif_check_old_code(tvm_env *env, int argc, const tvm_term *argv,
                                     tvm_term *result, void *data)
{
    (void)argc, (void)data;
    return code_query(env, argv, result, 0);
}

static tvm_status nif_module_loaded(tvm_env *env, int argc, const tvm_term *argv,
                                    tvm_term *result, void *data)
{
    (void)argc, (void)data;
    return code_query(env, argv, result, 1);
}

/*
 * function_exported(Mod, Fun, Arity): whether a remote call to
 * Mod:Fun/Arity would reach a function now, as BEAM's, which is true for
 * its BIFs too: an export entry whose target is not its undef stub (a
 * function of current code, a native of the VM's or an embedder's, or
 * the breakpoint trampoline of a traced one).  No entry is made for a
 * name asked about (vm_export_find), so asking cannot fill the export
 * table.
 */
static tvm_status nif_function_exported(tvm_env *env, int argc, const tvm_term *argv,
                                        tvm_term *result, void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Term f = vm_root_get(p, argv[1]), a = vm_root_get(p, argv[2]);
    Atom mod;
    if (!module_arg(p, argv[0], &mod) || !term_is_atom(f) || !term_is_small(a) ||
        small_value(a) < 0 || small_value(a) > 255)
        return badarg(p);
    Export *e = vm_export_find(p->vm, mod, atom_value(f), (uint32_t)small_value(a));
    bool yes = e && vm_export_target(p->vm, e) != e->stub;
    return give(p, make_atom(yes ? ATOM_TRUE : ATOM_FALSE), result);
}

static const VmNativeDef natives[] = {
    { "code", "load_binary", 3, nif_load_binary },
    { "erlang", "delete_module", 1, nif_delete_module },
    { "erlang", "purge_module", 1, nif_purge_module },
    { "erlang", "check_old_code", 1, nif_check_old_code },
    { "erlang", "module_loaded", 1, nif_module_loaded },
    { "erlang", "function_exported", 3, nif_function_exported },
};

VmNativeTable ld_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
