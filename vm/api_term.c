/*
 * vm/api_term.c - the public term and call API over a process (tracevm.h).
 *
 * A tvm_env is a view of a Process; a tvm_term is an index into the
 * process's root array, which the collector updates.  Natives get the env
 * of the process that called them and their handles are dropped when they
 * return; an env made by tvm_env_new() keeps its handles until it is freed.
 */
#include "include/tracevm.h"

#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/qsbr.h"
#include "vm/print.h"
#include "vm/process.h"

#define ENV_OK(env) ((env) && (env)->p)

static bool handle_ok(const Process *p, tvm_term t)
{
    return t.h < p->nroots;
}

tvm_env *tvm_env_new(tvm_vm *vm)
{
    if (!vm)
        return NULL;
    return &vm_process_new(vm)->env;
}

void tvm_env_free(tvm_env *env)
{
    if (ENV_OK(env))
        vm_process_free(env->p);
}

tvm_vm *tvm_env_vm(tvm_env *env)
{
    return ENV_OK(env) ? env->p->vm : NULL;
}

/* ==== calls ==== */

tvm_status vm_env_resolve(tvm_env *env, const char *mod, const char *fun, int argc,
                          const tvm_term *argv, Term *args, const Export **fn)
{
    if (!ENV_OK(env) || !mod || !fun || argc < 0 || argc > VM_MAX_ARITY || (argc > 0 && !argv))
        return TVM_ERR_BADARG;
    Process *p = env->p;
    Atom m, f;
    size_t lm = strlen(mod), lf = strlen(fun);
    if (lm > VM_ATOM_MAX_LEN || lf > VM_ATOM_MAX_LEN)
        return TVM_ERR_BADARG;
    if (!vm_atom_intern(mod, lm, &m) || !vm_atom_intern(fun, lf, &f))
        return TVM_ERR_LIMIT;   /* the atom table is full */
    for (int i = 0; i < argc; i++) {
        if (!handle_ok(p, argv[i]))
            return TVM_ERR_BADARG;
        args[i] = vm_root_get(p, argv[i]);
    }
    *fn = vm_export_get_bounded(p->vm, m, f, (uint32_t)argc);
    return *fn ? TVM_OK : TVM_ERR_LIMIT;   /* a new name past max_exports */
}

tvm_status tvm_call(tvm_env *env, const char *mod, const char *fun, int argc,
                    const tvm_term *argv, tvm_term *result)
{
    Term args[VM_MAX_ARITY];
    const Export *e;
    if (!result)
        return TVM_ERR_BADARG;
    tvm_status rs = vm_env_resolve(env, mod, fun, argc, argv, args, &e);
    if (rs != TVM_OK)
        return rs;
    Process *p = env->p;
    p->exc_pending = false;
    Term res;
    /* A thread running VM code is a thread-progress reader (vm/qsbr.h),
     * from before it reads the export's target until it is done. */
    vm_qsbr_call_enter();
    tvm_status st = vm_execute(p, vm_export_target(p->vm, e), argc, args, &res);
    vm_qsbr_call_leave();
    if (st == TVM_OK) {
        *result = vm_root_push(p, res);
        return TVM_OK;
    }
    if (p->nframes == 0 && p->exc_class == make_atom(ATOM_THROW)) {
        /* A throw that left the outermost activation uncaught. */
        Term pair[2] = { make_atom(ATOM_NOCATCH), p->exc_reason };
        p->exc_reason = vm_make_tuple(p, 2, pair);
        p->exc_class = make_atom(ATOM_ERROR);
    }
    return st;
}

tvm_status tvm_get_exception(tvm_env *env, tvm_term *cls, tvm_term *reason)
{
    if (!ENV_OK(env) || !cls || !reason)
        return TVM_ERR_BADARG;
    if (!env->p->exc_pending)
        return TVM_ERR_NOTFOUND;
    *cls = vm_root_push(env->p, env->p->exc_class);
    *reason = vm_root_push(env->p, env->p->exc_reason);
    return TVM_OK;
}

tvm_status tvm_get_stacktrace(tvm_env *env, tvm_term *trace)
{
    if (!ENV_OK(env) || !trace)
        return TVM_ERR_BADARG;
    if (!env->p->exc_pending)
        return TVM_ERR_NOTFOUND;
    Term t = vm_exception_trace_term(env->p);
    *trace = vm_root_push(env->p, t);
    return TVM_OK;
}

size_t tvm_format_exception(tvm_env *env, char *buf, size_t size)
{
    if (!buf)
        size = 0;   /* nothing to write into: only the length it needs */
    if (!ENV_OK(env) || !env->p->exc_pending) {
        if (size)
            buf[0] = '\0';
        return 0;
    }
    StrBuf sb;
    sb_init(&sb);
    vm_format_exception(env->p, &sb);
    size_t n = sb_copy_out(&sb, buf, size);
    sb_free(&sb);
    return n;
}

void tvm_clear_exception(tvm_env *env)
{
    if (!ENV_OK(env))
        return;
    env->p->exc_class = env->p->exc_reason = TERM_NIL;
    env->p->exc_pending = false;
    env->p->exc_trace_term = THE_NONE;
    env->p->exc_depth = 0;
}

tvm_status tvm_raise(tvm_env *env, const char *cls, tvm_term reason)
{
    if (!ENV_OK(env))
        return TVM_ERR_BADARG;
    Process *p = env->p;
    Term c = make_atom(ATOM_ERROR), r = make_atom(ATOM_BADARG);
    if (cls && handle_ok(p, reason)) {
        Atom a = strcmp(cls, "error") == 0   ? ATOM_ERROR
                 : strcmp(cls, "throw") == 0 ? ATOM_THROW
                 : strcmp(cls, "exit") == 0  ? ATOM_EXIT
                                             : ATOM__PREDEFINED;
        if (a != ATOM__PREDEFINED) {
            c = make_atom(a);
            r = vm_root_get(p, reason);
        }
    }
    vm_exception_set(p, c, r, NULL);
    return TVM_EXCEPTION;
}

tvm_status tvm_raise_badarg(tvm_env *env)
{
    if (!ENV_OK(env))
        return TVM_ERR_BADARG;
    vm_exception_set(env->p, make_atom(ATOM_ERROR), make_atom(ATOM_BADARG), NULL);
    return TVM_EXCEPTION;
}

/* ==== building ==== */

#define OUT_OR_BADARG(env, out) \
    if (!ENV_OK(env) || !(out)) return TVM_ERR_BADARG

tvm_status tvm_make_int(tvm_env *env, int64_t v, tvm_term *out)
{
    OUT_OR_BADARG(env, out);
    if (!small_fits(v))
        return TVM_ERR_LIMIT;
    *out = vm_root_push(env->p, make_small(v));
    return TVM_OK;
}

tvm_status tvm_make_atom(tvm_env *env, const char *name, tvm_term *out)
{
    OUT_OR_BADARG(env, out);
    Atom a;
    if (!name)
        return TVM_ERR_BADARG;
    if (!vm_atom_intern(name, strlen(name), &a))
        return TVM_ERR_LIMIT;
    *out = vm_root_push(env->p, make_atom(a));
    return TVM_OK;
}

tvm_status tvm_make_binary(tvm_env *env, const void *bytes, size_t len, tvm_term *out)
{
    OUT_OR_BADARG(env, out);
    if (!bytes && len)
        return TVM_ERR_BADARG;
    if (len > ((size_t)1 << 40))
        return TVM_ERR_LIMIT;
    *out = vm_root_push(env->p, vm_make_binary(env->p, bytes, len));
    return TVM_OK;
}

tvm_status tvm_make_string(tvm_env *env, const char *s, tvm_term *out)
{
    if (!s)
        return TVM_ERR_BADARG;
    return tvm_make_binary(env, s, strlen(s), out);
}

/* Reads n handles into a fresh array of terms (caller frees). */
static Term *read_handles(Process *p, int n, const tvm_term *hs)
{
    Term *v = vm_malloc((size_t)(n > 0 ? n : 1) * sizeof(Term));
    for (int i = 0; i < n; i++) {
        if (!handle_ok(p, hs[i])) {
            free(v);
            return NULL;
        }
        v[i] = vm_root_get(p, hs[i]);
    }
    return v;
}

tvm_status tvm_make_tuple(tvm_env *env, int n, const tvm_term *elems, tvm_term *out)
{
    OUT_OR_BADARG(env, out);
    if (n < 0 || (n > 0 && !elems))
        return TVM_ERR_BADARG;
    if (n > 0xffffff)
        return TVM_ERR_LIMIT;
    Term *v = read_handles(env->p, n, elems);
    if (!v)
        return TVM_ERR_BADARG;
    Term t = vm_make_tuple(env->p, (uint32_t)n, v);
    free(v);
    *out = vm_root_push(env->p, t);
    return TVM_OK;
}

tvm_status tvm_make_list(tvm_env *env, int n, const tvm_term *elems, tvm_term *out)
{
    OUT_OR_BADARG(env, out);
    if (n < 0 || (n > 0 && !elems))
        return TVM_ERR_BADARG;
    Process *p = env->p;
    Term *v = read_handles(p, n, elems);
    if (!v)
        return TVM_ERR_BADARG;
    vm_heap_ensure(p, 2 * (size_t)n, v, (size_t)n);
    Term list = TERM_NIL;
    for (int i = n; i-- > 0;) {
        Term *c = vm_heap_alloc(p, 2);
        c[0] = v[i];
        c[1] = list;
        list = make_cons_ptr(c);
    }
    free(v);
    *out = vm_root_push(p, list);
    return TVM_OK;
}

tvm_status tvm_make_cons(tvm_env *env, tvm_term head, tvm_term tail, tvm_term *out)
{
    OUT_OR_BADARG(env, out);
    Process *p = env->p;
    if (!handle_ok(p, head) || !handle_ok(p, tail))
        return TVM_ERR_BADARG;
    vm_heap_ensure(p, 2, NULL, 0);
    Term *c = vm_heap_alloc(p, 2);
    c[0] = vm_root_get(p, head);
    c[1] = vm_root_get(p, tail);
    *out = vm_root_push(p, make_cons_ptr(c));
    return TVM_OK;
}

size_t tvm_handles_mark(tvm_env *env)
{
    return ENV_OK(env) ? env->p->nroots : 0;
}

void tvm_handles_release(tvm_env *env, size_t mark)
{
    if (ENV_OK(env) && mark <= env->p->nroots)
        env->p->nroots = (uint32_t)mark;
}

tvm_term tvm_nil(tvm_env *env)
{
    /* No env: a handle past any env's roots (nroots never reaches it),
     * which every function taking a handle refuses. */
    if (!ENV_OK(env))
        return (tvm_term){ UINT32_MAX };
    return vm_root_push(env->p, TERM_NIL);
}

/* ==== inspecting ==== */

tvm_type tvm_type_of(tvm_env *env, tvm_term t)
{
    if (!ENV_OK(env) || !handle_ok(env->p, t))
        return TVM_T_INVALID;
    Term v = vm_root_get(env->p, t);
    if (term_is_small(v)) return TVM_T_INT;
    if (term_is_atom(v)) return TVM_T_ATOM;
    if (term_is_nil(v)) return TVM_T_NIL;
    if (term_is_cons(v)) return TVM_T_CONS;
    if (term_is_tuple(v)) return TVM_T_TUPLE;
    if (term_is_binary(v)) return TVM_T_BINARY;
    if (term_is_fun(v)) return TVM_T_FUN;
    return TVM_T_PID;
}

#define GET_TERM(env, t, v)                                   \
    if (!ENV_OK(env) || !handle_ok((env)->p, (t)))            \
        return TVM_ERR_BADARG;                                \
    Term v = vm_root_get((env)->p, (t))

tvm_status tvm_get_int(tvm_env *env, tvm_term t, int64_t *out)
{
    GET_TERM(env, t, v);
    if (!out)
        return TVM_ERR_BADARG;
    if (!term_is_small(v))
        return TVM_ERR_TYPE;
    *out = small_value(v);
    return TVM_OK;
}

tvm_status tvm_get_atom(tvm_env *env, tvm_term t, char *buf, size_t size)
{
    GET_TERM(env, t, v);
    if (!buf || !size)
        return TVM_ERR_BADARG;
    if (!term_is_atom(v))
        return TVM_ERR_TYPE;
    size_t n;
    const char *s = vm_atom_name(atom_value(v), &n);
    if (n >= size)
        n = size - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return TVM_OK;
}

bool tvm_is_atom(tvm_env *env, tvm_term t, const char *name)
{
    if (!ENV_OK(env) || !handle_ok(env->p, t) || !name)
        return false;
    Term v = vm_root_get(env->p, t);
    Atom a;
    return term_is_atom(v) && vm_atom_lookup(name, strlen(name), &a) && atom_value(v) == a;
}

tvm_status tvm_get_binary(tvm_env *env, tvm_term t, const void **bytes, size_t *len)
{
    GET_TERM(env, t, v);
    if (!bytes || !len)
        return TVM_ERR_BADARG;
    if (!term_is_binary(v))
        return TVM_ERR_TYPE;
    *bytes = binary_bytes(v);
    *len = binary_size(v);
    return TVM_OK;
}

tvm_status tvm_tuple_size(tvm_env *env, tvm_term t, int *n)
{
    GET_TERM(env, t, v);
    if (!n)
        return TVM_ERR_BADARG;
    if (!term_is_tuple(v))
        return TVM_ERR_TYPE;
    *n = (int)tuple_arity(v);
    return TVM_OK;
}

tvm_status tvm_tuple_get(tvm_env *env, tvm_term t, int i, tvm_term *out)
{
    GET_TERM(env, t, v);
    if (!out)
        return TVM_ERR_BADARG;
    if (!term_is_tuple(v))
        return TVM_ERR_TYPE;
    if (i < 0 || (uint32_t)i >= tuple_arity(v))
        return TVM_ERR_BADARG;
    *out = vm_root_push(env->p, tuple_elems(v)[i]);
    return TVM_OK;
}

tvm_status tvm_list_cell(tvm_env *env, tvm_term t, tvm_term *head, tvm_term *tail)
{
    GET_TERM(env, t, v);
    if (!head || !tail)
        return TVM_ERR_BADARG;
    if (!term_is_cons(v))
        return TVM_ERR_TYPE;
    *head = vm_root_push(env->p, cons_head(v));
    *tail = vm_root_push(env->p, cons_tail(v));
    return TVM_OK;
}

bool tvm_equal(tvm_env *env, tvm_term a, tvm_term b)
{
    if (!ENV_OK(env) || !handle_ok(env->p, a) || !handle_ok(env->p, b))
        return false;
    /* Terms that could not be compared within the VM's steps (much
     * sharing) are not known to be equal. */
    return term_compare_steps(vm_root_get(env->p, a), vm_root_get(env->p, b),
                              env->p->vm->cmp_steps) == 0;
}

size_t tvm_format_term(tvm_env *env, tvm_term t, char *buf, size_t size)
{
    if (!buf)
        size = 0;   /* nothing to write into: only the length it needs */
    if (!ENV_OK(env) || !handle_ok(env->p, t)) {
        if (size)
            buf[0] = '\0';
        return 0;
    }
    StrBuf sb;
    sb_init(&sb);
    vm_print_term(&sb, vm_root_get(env->p, t));
    size_t n = sb_copy_out(&sb, buf, size);
    sb_free(&sb);
    return n;
}
