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
#include "breakpoints/bp_session.h"
#include "breakpoints/bp_time.h"
#include "trace/tr_ms.h"
#include "trace/tr_session.h"
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

/* trace_pattern for session sid (the caller resolved it); `fn` names the
 * API function in messages. */
static tvm_status pattern_ms(tvm_vm *vm, uint64_t id, const char *fn, const char *pattern,
                             const char *match_spec, tvm_tp_action how, unsigned flags,
                             tvm_pid meta_tracer, int *matched, tvm_error *err)
{
    char why[300];
    BpPattern pat;
    if (!vm)
        return fail(err, TVM_ERR_BADARG, fn, "NULL vm");
    BpRequest req = { how, flags, NULL, meta_tracer };
    if (!bp_pattern_parse(pattern, &pat, why, sizeof why))
        return fail(err, TVM_ERR_BADARG, fn, why);
    tvm_status st = spec_from_text(vm, match_spec, pat.any_arity || pat.on_load ? -1 : pat.arity,
                                   &req.ms, why, sizeof why);
    if (st != TVM_OK)
        return fail(err, st, fn, why);
    unsigned sid;
    st = TVM_ERR_BADARG;
    if (!bp_request_check(&pat, &req, why, sizeof why) ||
        !tr_session_resolve(vm, id, &sid, &st, why, sizeof why)) {
        tr_ms_free(req.ms);
        return fail(err, st, fn, why);
    }
    int n = bp_trace_pattern(vm, sid, &pat, &req);
    tr_ms_free(req.ms);   /* the engine holds its own references */
    if (n < 0 && !tr_session_resolve(vm, id, &sid, &st, why, sizeof why))
        return fail(err, st, fn, why);    /* ended meanwhile: nothing changed */
    if (matched)
        *matched = n < 0 ? 0 : n;
    ok(err);
    return TVM_OK;
}

tvm_status tvm_trace_pattern_ms(tvm_vm *vm, const char *pattern, const char *match_spec,
                                tvm_tp_action how, unsigned flags, tvm_pid meta_tracer,
                                int *matched, tvm_error *err)
{
    return pattern_ms(vm, 0, "tvm_trace_pattern", pattern, match_spec, how, flags, meta_tracer,
                      matched, err);
}

tvm_status tvm_trace_pattern(tvm_vm *vm, const char *pattern, tvm_tp_action how,
                             unsigned flags, int *matched, tvm_error *err)
{
    return tvm_trace_pattern_ms(vm, pattern, NULL, how, flags, 0, matched, err);
}

tvm_status tvm_session_trace_pattern(tvm_vm *vm, tvm_session s, const char *pattern,
                                     const char *match_spec, tvm_tp_action how, unsigned flags,
                                     tvm_pid meta_tracer, int *matched, tvm_error *err)
{
    return pattern_ms(vm, s.id, "tvm_session_trace_pattern", pattern, match_spec, how, flags,
                      meta_tracer, matched, err);
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

/* trace_info for session `id`; `fn` names the API function. */
static tvm_status info_of(tvm_env *env, uint64_t id, const char *fn, const char *mfa,
                          const char *item, tvm_term *out, tvm_error *err)
{
    char why[200];
    BpPattern pat;
    if (!env || !env->p || !out)
        return fail(err, TVM_ERR_BADARG, fn, out ? "NULL env" : "NULL out");
    if (!parse_mfa(mfa, &pat, why, sizeof why, true))
        return fail(err, TVM_ERR_BADARG, fn, why);
    BpInfoItem it;
    if (!item || !bp_info_item(item, &it))
        return fail(err, TVM_ERR_BADARG, fn,
                    "bad item: expected traced, call_count, call_time, match_spec, meta, "
                    "meta_match_spec or all");
    unsigned sid;
    tvm_status st;
    if (!tr_session_resolve(env->p->vm, id, &sid, &st, why, sizeof why))
        return fail(err, st, fn, why);
    *out = vm_root_push(env->p, pat.on_load
                                    ? bp_trace_info_on_load(env->p, sid, it)
                                    : bp_trace_info(env->p, sid, pat.mod, pat.fun, pat.arity, it));
    ok(err);
    return TVM_OK;
}

tvm_status tvm_trace_info(tvm_env *env, const char *mfa, const char *item,
                          tvm_term *out, tvm_error *err)
{
    return info_of(env, 0, "tvm_trace_info", mfa, item, out, err);
}

tvm_status tvm_session_trace_info(tvm_env *env, tvm_session s, const char *mfa,
                                  const char *item, tvm_term *out, tvm_error *err)
{
    return info_of(env, s.id, "tvm_session_trace_info", mfa, item, out, err);
}

/* The session `id`'s sid for the data readers; a status otherwise. */
static tvm_status data_sid(tvm_vm *vm, uint64_t id, unsigned *sid)
{
    char why[200];
    tvm_status st;
    return tr_session_resolve(vm, id, sid, &st, why, sizeof why) ? TVM_OK : st;
}

tvm_status tvm_session_call_count(tvm_vm *vm, tvm_session s, const char *mfa, int64_t *count)
{
    char why[200];
    BpPattern pat;
    unsigned sid;
    if (!vm || !count || !parse_mfa(mfa, &pat, why, sizeof why, false))
        return TVM_ERR_BADARG;
    tvm_status st = data_sid(vm, s.id, &sid);
    if (st != TVM_OK)
        return st;
    return bp_call_count(vm, sid, pat.mod, pat.fun, pat.arity, count) ? TVM_OK
                                                                        : TVM_ERR_NOTFOUND;
}

tvm_status tvm_call_count(tvm_vm *vm, const char *mfa, int64_t *count)
{
    return tvm_session_call_count(vm, TVM_SESSION_DEFAULT, mfa, count);
}

tvm_status tvm_session_call_time(tvm_vm *vm, tvm_session s, const char *mfa,
                                 tvm_call_time_entry *out, size_t max, size_t *n)
{
    char why[200];
    BpPattern pat;
    unsigned sid;
    if (!vm || !n || (max && !out) || !parse_mfa(mfa, &pat, why, sizeof why, false))
        return TVM_ERR_BADARG;
    tvm_status st = data_sid(vm, s.id, &sid);
    if (st != TVM_OK)
        return st;
    BpTimeSample *v;
    size_t len;
    bool found = bp_call_time(vm, sid, pat.mod, pat.fun, pat.arity, &v, &len);
    for (size_t i = 0; i < len && i < max; i++)
        out[i] = (tvm_call_time_entry){ v[i].pid, v[i].count, v[i].ns };
    free(v);
    *n = len;
    return found ? TVM_OK : TVM_ERR_NOTFOUND;
}

tvm_status tvm_call_time(tvm_vm *vm, const char *mfa, tvm_call_time_entry *out, size_t max,
                         size_t *n)
{
    return tvm_session_call_time(vm, TVM_SESSION_DEFAULT, mfa, out, max, n);
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
 * trace_pattern(MFA, How, Flags) for session sid: How is true, false,
 * pause, restart or a match spec (a list: true with that spec; [] is
 * true).  Returns the number of functions matched, or -1 with `why`
 * saying what was wrong (nothing changed).
 */
static int trace_pattern_do(Process *p, unsigned sid, Term mfa, Term how, Term flags, char *why,
                            size_t whylen)
{
    BpPattern pat;
    BpRequest req = { TVM_TP_TRUE, 0, NULL, 0 };
    if (!mfa_term(mfa, &pat)) {
        snprintf(why, whylen, "bad function: expected {Mod, Fun, Arity} with trailing '_' "
                              "wildcards, or on_load");
        return -1;
    }
    if (!term_is_list(how) && !action_term(how, &req.how)) {
        snprintf(why, whylen, "bad action: expected true, false, pause, restart or a match spec");
        return -1;
    }
    if (!flags_term(flags, &req)) {
        snprintf(why, whylen, "bad flags: expected a list of global, local, call_count, "
                              "call_time, meta or {meta, Pid}");
        return -1;
    }
    if (sid != 0) {
        /* A session's tracer is fixed: {meta, Pid} is refused, and meta
         * reports to the session's tracer (OTP 27's trace:function/4). */
        if (req.meta_tracer) {
            snprintf(why, whylen, "a session's meta tracer is its tracer: {meta, Pid} is refused");
            return -1;
        }
        if (req.flags & TVM_TP_META)
            req.meta_tracer = tr_session_tracer(p->vm, sid);
    }
    if (term_is_cons(how)) {
        req.ms = tr_ms_compile(how, pat.any_arity || pat.on_load ? -1 : pat.arity, why, whylen);
        if (!req.ms)
            return -1;
    }
    if (!bp_request_check(&pat, &req, why, whylen)) {
        tr_ms_free(req.ms);
        return -1;
    }
    int n = bp_trace_pattern(p->vm, sid, &pat, &req);
    tr_ms_free(req.ms);
    if (n < 0)
        snprintf(why, whylen, "the session ended");   /* meanwhile: nothing changed */
    return n;
}

/* As BEAM: the count, or plain badarg whatever was wrong
 * (tracevm:trace_pattern/3 below says what). */
static tvm_status trace_pattern_in(Process *p, unsigned sid, Term mfa, Term how, Term flags,
                                   tvm_term *result)
{
    char why[200];
    int n = trace_pattern_do(p, sid, mfa, how, flags, why, sizeof why);
    if (n < 0)
        return badarg(p);
    *result = vm_root_push(p, make_small(n));
    return TVM_OK;
}

static tvm_status nif_trace_pattern(tvm_env *env, int argc, const tvm_term *argv,
                                    tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    return trace_pattern_in(p, 0, vm_root_get(p, argv[0]), vm_root_get(p, argv[1]),
                            vm_root_get(p, argv[2]), result);
}

/*
 * tracevm:trace_pattern(MFA, How, Flags): erlang:trace_pattern/3 that
 * says why instead of raising badarg: the count, or {error, Text} with
 * the C API's message (`match spec clause 1: guard 1: unknown function
 * foo/1`); nothing changes then.
 */
static tvm_status nif_tracevm_trace_pattern(tvm_env *env, int argc, const tvm_term *argv,
                                            tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    char why[200];
    int n = trace_pattern_do(p, 0, vm_root_get(p, argv[0]), vm_root_get(p, argv[1]),
                             vm_root_get(p, argv[2]), why, sizeof why);
    if (n >= 0) {
        *result = vm_root_push(p, make_small(n));
        return TVM_OK;
    }
    tvm_term text = vm_root_push(p, vm_make_binary(p, why, strlen(why)));
    Term e[2] = { make_atom(ATOM_ERROR), vm_root_get(p, text) };
    *result = vm_root_push(p, vm_make_tuple(p, 2, e));
    return TVM_OK;
}

/* erlang:trace_pattern(Session, MFA, How, Flags), trace:function/4. */
static tvm_status nif_trace_pattern4(tvm_env *env, int argc, const tvm_term *argv,
                                     tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    unsigned sid;
    if (!tr_session_term(p->vm, vm_root_get(p, argv[0]), &sid))
        return badarg(p);
    return trace_pattern_in(p, sid, vm_root_get(p, argv[1]), vm_root_get(p, argv[2]),
                            vm_root_get(p, argv[3]), result);
}

/* trace_info of a function (or on_load) for session sid. */
static tvm_status trace_info_fn(Process *p, unsigned sid, Term what, Term item, tvm_term *result)
{
    BpPattern pat;
    BpInfoItem it;
    if (!term_is_atom(item) || !bp_info_item(vm_atom_name(atom_value(item), NULL), &it))
        return badarg(p);
    if (!mfa_term(what, &pat) || pat.any_mod || pat.any_fun || pat.any_arity)
        return badarg(p);
    *result = vm_root_push(p, pat.on_load ? bp_trace_info_on_load(p, sid, it)
                                          : bp_trace_info(p, sid, pat.mod, pat.fun, pat.arity, it));
    return TVM_OK;
}

/* trace_info of a pid or of new processes (the defaults), Item flags:
 * {flags, [Flag]} of session sid ({flags, undefined} for a process that is
 * not alive), with every change for all folded in. */
static tvm_status trace_info_proc(Process *p, unsigned sid, Term what, Term item,
                                  tvm_term *result)
{
    if (!named(item, "flags"))
        return badarg(p);
    Term v;
    if (!term_is_pid(what)) {
        v = tr_flags_term(p, tr_flags_new(p->vm, sid));
    } else {
        Process *t = tr_proc_get(p->vm, pid_value(what));
        unsigned f = t ? tr_pflags(t, tr_pword(t), sid) : 0;
        if (t)
            vm_proc_put(vm_sched_of(p->vm), t);
        v = t ? tr_flags_term(p, f) : make_atom(ATOM_UNDEFINED);
    }
    tvm_term hv = vm_root_push(p, v);
    Term e[2] = { item, vm_root_get(p, hv) };
    *result = vm_root_push(p, vm_make_tuple(p, 2, e));
    return TVM_OK;
}

/* trace_info(PidOrFunc, Item) for session sid. */
static tvm_status trace_info_in(Process *p, unsigned sid, Term what, Term item,
                                tvm_term *result)
{
    if (term_is_pid(what) || named(what, "new") || named(what, "new_processes"))
        return trace_info_proc(p, sid, what, item, result);
    return trace_info_fn(p, sid, what, item, result);
}

/* erlang:trace_info(PidOrFunc, Item): of the default session. */
static tvm_status nif_trace_info(tvm_env *env, int argc, const tvm_term *argv,
                                 tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    return trace_info_in(p, 0, vm_root_get(p, argv[0]), vm_root_get(p, argv[1]), result);
}

/*
 * trace:info(Session, PidOrFunc, Item), erlang:trace_info/3: as
 * trace_info/2 for the session.
 */
static tvm_status nif_trace_info3(tvm_env *env, int argc, const tvm_term *argv,
                                  tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    Process *p = env->p;
    unsigned sid;
    if (!tr_session_term(p->vm, vm_root_get(p, argv[0]), &sid))
        return badarg(p);
    return trace_info_in(p, sid, vm_root_get(p, argv[1]), vm_root_get(p, argv[2]), result);
}

static const VmNativeDef natives[] = {
    { "erlang", "trace_pattern", 3, nif_trace_pattern },
    { "erlang", "trace_pattern", 4, nif_trace_pattern4 },
    { "erlang", "trace_info", 2, nif_trace_info },
    { "erlang", "trace_info", 3, nif_trace_info3 },
    { "trace", "function", 4, nif_trace_pattern4 },
    { "tracevm", "trace_pattern", 3, nif_tracevm_trace_pattern },
    { "trace", "info", 3, nif_trace_info3 },
    { "trace", "session_create", 3, bp_nif_session_create },
    { "trace", "session_destroy", 1, bp_nif_session_destroy },
};

VmNativeTable bp_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
