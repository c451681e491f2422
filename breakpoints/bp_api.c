/*
 * breakpoints/bp_api.c - the breakpoint engine's faces: the C API in
 * tracevm.h (tvm_trace_pattern, tvm_trace_info, tvm_call_count,
 * tvm_call_time, tvm_set_call_hook), the natives erlang:trace_pattern/3 and
 * erlang:trace_info/2, and the call-trace action: a call event into the
 * trace pipeline (trace/tr_vm.c), then the embedder's hook.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakpoints/bp_engine_internal.h"
#include "breakpoints/bp_time.h"
#include "trace/tr_ms.h"
#include "trace/tr_vm.h"
#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/sched.h"

static tvm_status fail(tvm_error *err, tvm_status st, const char *fn, const char *why)
{
    if (err) {
        err->status = st;
        snprintf(err->message, sizeof err->message, "%s: %s", fn, why);
    }
    return st;
}

static void ok(tvm_error *err)
{
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
}

/* ==== C API ==== */

/*
 * Compiles a match spec given as text (NULL: none) for functions of
 * `arity` (-1: any).  On error the message names the spec's clause and
 * place (tr_ms_compile) or the syntax error.
 */
static tvm_status spec_from_text(tvm_vm *vm, const char *text, int arity, TrMs **out, char *why,
                                 size_t n)
{
    *out = NULL;
    if (!text)
        return TVM_OK;
    tvm_env *env = tvm_env_new(vm);
    tvm_term t;
    tvm_error perr;
    tvm_status st = tvm_parse_term(env, text, &t, &perr);
    if (st != TVM_OK) {
        /* TVM_ERR_LIMIT: an atom of the spec is new and the table is full. */
        size_t len = strcspn(perr.message, "\n");
        snprintf(why, n, "bad match spec: %.*s", (int)len, perr.message);
    } else {
        char e[200];
        *out = tr_ms_compile(vm_root_get(env->p, t), arity, e, sizeof e);
        if (!*out) {
            snprintf(why, n, "%s", e);
            st = TVM_ERR_BADARG;
        }
    }
    tvm_env_free(env);
    return st;
}

tvm_status tvm_trace_pattern_ms(tvm_vm *vm, const char *pattern, const char *match_spec,
                                tvm_tp_action how, unsigned flags, tvm_pid meta_tracer,
                                int *matched, tvm_error *err)
{
    char why[300];
    BpPattern pat;
    if (!vm)
        return fail(err, TVM_ERR_BADARG, "tvm_trace_pattern", "NULL vm");
    BpRequest req = { how, flags, NULL, meta_tracer };
    if (!bp_pattern_parse(pattern, &pat, why, sizeof why))
        return fail(err, TVM_ERR_BADARG, "tvm_trace_pattern", why);
    tvm_status st = spec_from_text(vm, match_spec, pat.any_arity || pat.on_load ? -1 : pat.arity,
                                   &req.ms, why, sizeof why);
    if (st != TVM_OK)
        return fail(err, st, "tvm_trace_pattern", why);
    if (!bp_request_check(&req, why, sizeof why) ||
        !bp_on_load_check(&pat, &req, why, sizeof why)) {
        tr_ms_free(req.ms);
        return fail(err, TVM_ERR_BADARG, "tvm_trace_pattern", why);
    }
    int n = bp_trace_pattern(vm, &pat, &req);
    tr_ms_free(req.ms);   /* the engine holds its own references */
    if (matched)
        *matched = n;
    ok(err);
    return TVM_OK;
}

tvm_status tvm_trace_pattern(tvm_vm *vm, const char *pattern, tvm_tp_action how,
                             unsigned flags, int *matched, tvm_error *err)
{
    return tvm_trace_pattern_ms(vm, pattern, NULL, how, flags, 0, matched, err);
}

/* An exact mod:fun/arity (no wildcards); on_load if `on_load_ok`. */
static bool parse_mfa(const char *text, BpPattern *pat, char *why, size_t n, bool on_load_ok)
{
    if (!bp_pattern_parse(text, pat, why, n))
        return false;
    if (pat->on_load && !on_load_ok) {
        snprintf(why, n, "bad function \"on_load\": expected mod:fun/arity");
        return false;
    }
    if (pat->any_mod || pat->any_fun || pat->any_arity) {
        snprintf(why, n, "bad function \"%s\": wildcards are not allowed here", text);
        return false;
    }
    return true;
}

tvm_status tvm_trace_info(tvm_env *env, const char *mfa, const char *item,
                          tvm_term *out, tvm_error *err)
{
    char why[200];
    BpPattern pat;
    if (!env || !env->p || !out)
        return fail(err, TVM_ERR_BADARG, "tvm_trace_info", "NULL argument");
    if (!parse_mfa(mfa, &pat, why, sizeof why, true))
        return fail(err, TVM_ERR_BADARG, "tvm_trace_info", why);
    BpInfoItem it;
    if (!item || !bp_info_item(item, &it))
        return fail(err, TVM_ERR_BADARG, "tvm_trace_info",
                    "bad item: expected traced, call_count, call_time, match_spec, meta, "
                    "meta_match_spec or all");
    *out = vm_root_push(env->p, pat.on_load ? bp_trace_info_on_load(env->p, it)
                                            : bp_trace_info(env->p, pat.mod, pat.fun, pat.arity, it));
    ok(err);
    return TVM_OK;
}

tvm_status tvm_call_count(tvm_vm *vm, const char *mfa, int64_t *count)
{
    char why[200];
    BpPattern pat;
    if (!vm || !count || !parse_mfa(mfa, &pat, why, sizeof why, false))
        return TVM_ERR_BADARG;
    return bp_call_count(vm, pat.mod, pat.fun, pat.arity, count) ? TVM_OK : TVM_ERR_NOTFOUND;
}

tvm_status tvm_call_time(tvm_vm *vm, const char *mfa, tvm_call_time_entry *out, size_t max,
                         size_t *n)
{
    char why[200];
    BpPattern pat;
    if (!vm || !n || (max && !out) || !parse_mfa(mfa, &pat, why, sizeof why, false))
        return TVM_ERR_BADARG;
    BpTimeSample *v;
    size_t len;
    bool ok = bp_call_time(vm, pat.mod, pat.fun, pat.arity, &v, &len);
    for (size_t i = 0; i < len && i < max; i++)
        out[i] = (tvm_call_time_entry){ v[i].pid, v[i].count, v[i].ns };
    free(v);
    *n = len;
    return ok ? TVM_OK : TVM_ERR_NOTFOUND;
}

void tvm_set_call_hook(tvm_vm *vm, tvm_call_hook hook, void *data)
{
    if (!vm)
        return;
    /* Hooks are immutable once published and freed only with the VM, so
     * a call still running the previous one is never left dangling. */
    VmCallHook *h = vm_calloc(1, sizeof *h);
    h->fn = hook;
    h->data = data;
    vm_code_perm_acquire(vm);
    h->older = vm_atomic_load_ptr_relaxed(&vm->call_hook);
    /* [HK1] release: the hook's fields before its pointer; pairs with
     * [HK1'] in breakpoints/bp_hit.c (run_call_hook and its caller). */
    vm_atomic_store_ptr_release(&vm->call_hook, h);
    vm_code_perm_release(vm);
}

void bp_hooks_free(tvm_vm *vm)
{
    VmCallHook *h = vm_atomic_load_ptr_relaxed(&vm->call_hook);
    while (h) {
        VmCallHook *older = h->older;
        free(h);
        h = older;
    }
    vm_atomic_store_ptr_release(&vm->call_hook, NULL);
}

/* ==== natives: erlang:trace_pattern/3, erlang:trace_info/2 ==== */

static tvm_status badarg(Process *p)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(ATOM_BADARG), NULL);
    return TVM_EXCEPTION;
}

static bool named(Term t, const char *name)
{
    return term_is_atom(t) && !strcmp(vm_atom_name(atom_value(t), NULL), name);
}

/* {M, F, A} with '_' wildcards into a pattern; trailing wildcards only;
 * or the atom on_load. */
static bool mfa_term(Term t, BpPattern *pat)
{
    memset(pat, 0, sizeof *pat);
    if (named(t, "on_load")) {
        pat->on_load = true;
        return true;
    }
    if (!term_is_tuple(t) || tuple_arity(t) != 3)
        return false;
    const Term *e = tuple_elems(t);
    pat->any_mod = named(e[0], "_");
    pat->any_fun = named(e[1], "_");
    pat->any_arity = named(e[2], "_");
    if ((pat->any_mod && !pat->any_fun) || (pat->any_fun && !pat->any_arity))
        return false;
    if ((!pat->any_mod && !term_is_atom(e[0])) || (!pat->any_fun && !term_is_atom(e[1])))
        return false;
    if (!pat->any_arity &&
        (!term_is_small(e[2]) || small_value(e[2]) < 0 || small_value(e[2]) > VM_MAX_ARITY))
        return false;
    pat->mod = pat->any_mod ? 0 : atom_value(e[0]);
    pat->fun = pat->any_fun ? 0 : atom_value(e[1]);
    pat->arity = pat->any_arity ? 0 : (int)small_value(e[2]);
    return true;
}

static bool action_term(Term t, tvm_tp_action *how)
{
    static const char *const names[] = { "true", "false", "pause", "restart" };
    for (int i = 0; i < 4; i++)
        if (named(t, names[i])) {
            *how = (tvm_tp_action)i;
            return true;
        }
    return false;
}

/* The flag list: global, local, call_count, meta | {meta, Pid}. */
static bool flags_term(Term l, BpRequest *req)
{
    req->flags = 0;
    for (; term_is_cons(l); l = cons_tail(l)) {
        Term h = cons_head(l);
        if (named(h, "global"))
            req->flags |= TVM_TP_GLOBAL;
        else if (named(h, "local"))
            req->flags |= TVM_TP_LOCAL;
        else if (named(h, "call_count"))
            req->flags |= TVM_TP_CALL_COUNT;
        else if (named(h, "call_time"))
            req->flags |= TVM_TP_CALL_TIME;
        else if (named(h, "meta"))
            req->flags |= TVM_TP_META;   /* off; on needs the tracer */
        else if (term_is_tuple(h) && tuple_arity(h) == 2 && named(tuple_elems(h)[0], "meta") &&
                 term_is_pid(tuple_elems(h)[1])) {
            req->flags |= TVM_TP_META;
            req->meta_tracer = pid_value(tuple_elems(h)[1]);
        } else {
            return false;
        }
    }
    return term_is_nil(l);
}

/*
 * erlang:trace_pattern(MFA, How, Flags): How is true, false, pause,
 * restart or a match spec (a list: true with that spec; [] is true).  A
 * bad argument raises badarg; a bad spec raises
 * {badarg, <<"match spec clause N: ...">>} so that the program sees why.
 */
static tvm_status nif_trace_pattern(tvm_env *env, int argc, const tvm_term *argv,
                                    tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    BpPattern pat;
    BpRequest req = { TVM_TP_TRUE, 0, NULL, 0 };
    char why[200];
    Term how = vm_root_get(p, argv[1]);
    if (!mfa_term(vm_root_get(p, argv[0]), &pat) ||
        (!term_is_list(how) && !action_term(how, &req.how)) ||
        !flags_term(vm_root_get(p, argv[2]), &req))
        return badarg(p);
    if (term_is_cons(how)) {
        req.ms = tr_ms_compile(how, pat.any_arity || pat.on_load ? -1 : pat.arity, why, sizeof why);
        if (!req.ms) {
            Term e[2] = { make_atom(ATOM_BADARG), vm_make_binary(p, why, strlen(why)) };
            vm_exception_set(p, make_atom(ATOM_ERROR), vm_make_tuple(p, 2, e), NULL);
            return TVM_EXCEPTION;
        }
    }
    if (!bp_request_check(&req, why, sizeof why) ||
        !bp_on_load_check(&pat, &req, why, sizeof why)) {
        tr_ms_free(req.ms);
        return badarg(p);
    }
    int n = bp_trace_pattern(p->vm, &pat, &req);
    tr_ms_free(req.ms);
    *result = vm_root_push(p, make_small(n));
    return TVM_OK;
}

static tvm_status nif_trace_info(tvm_env *env, int argc, const tvm_term *argv,
                                 tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    BpPattern pat;
    Term item = vm_root_get(p, argv[1]);
    BpInfoItem it;
    if (!term_is_atom(item) || !bp_info_item(vm_atom_name(atom_value(item), NULL), &it))
        return badarg(p);
    if (!mfa_term(vm_root_get(p, argv[0]), &pat) || pat.any_mod || pat.any_fun || pat.any_arity)
        return badarg(p);
    *result = vm_root_push(p, pat.on_load ? bp_trace_info_on_load(p, it)
                                          : bp_trace_info(p, pat.mod, pat.fun, pat.arity, it));
    return TVM_OK;
}

static const VmNativeDef natives[] = {
    { "erlang", "trace_pattern", 3, nif_trace_pattern },
    { "erlang", "trace_info", 2, nif_trace_info },
};

VmNativeTable bp_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
