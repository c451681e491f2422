/*
 * breakpoints/bp_pattern.c - what trace_pattern means: patterns, matching,
 * the rules that turn an action and flags into staged generations, and
 * trace_info.  The sequence that makes staged data take effect is in
 * bp_engine.c.
 *
 * Rules (after BEAM, reference/beam.md Part 2 items 1-10, 32-33):
 *   - global traces remote calls of exported functions; local traces every
 *     call.  Setting one on a function clears the other; `false` clears
 *     only the kind named.  global on a function that is not exported
 *     matches nothing but still clears its local trace.
 *   - call_count: true starts a fresh counter at 0 (also when one exists),
 *     pause stops counting (the value stays readable), restart starts a
 *     fresh counter, false removes it.  A fresh counter replaces the old
 *     one in the staging generation, so calls made after trace_pattern
 *     returns are counted from exactly 0 even if some scheduler was still
 *     counting into the old one during the sequence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakpoints/bp_engine_internal.h"
#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/sched.h"

/* ==== patterns ==== */

static bool atom_of(const char *s, size_t n, Atom *out)
{
    return n > 0 && vm_atom_intern(s, n, out);
}

static bool is_wild(const char *s, size_t n)
{
    return n == 1 && s[0] == '_';
}

bool bp_pattern_parse(const char *text, BpPattern *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    const char *colon = text ? strchr(text, ':') : NULL;
    const char *slash = text ? strrchr(text, '/') : NULL;
    if (!colon || !slash || slash < colon) {
        snprintf(why, whylen, "bad pattern \"%s\": expected mod:fun/arity", text ? text : "(null)");
        return false;
    }
    size_t nm = (size_t)(colon - text), nf = (size_t)(slash - colon - 1);
    const char *fs = colon + 1, *as = slash + 1;
    out->any_mod = is_wild(text, nm);
    out->any_fun = is_wild(fs, nf);
    out->any_arity = strcmp(as, "_") == 0;
    if ((out->any_mod && !out->any_fun) || (out->any_fun && !out->any_arity)) {
        snprintf(why, whylen, "bad pattern \"%s\": only trailing wildcards are allowed", text);
        return false;
    }
    if ((!out->any_mod && !atom_of(text, nm, &out->mod)) ||
        (!out->any_fun && !atom_of(fs, nf, &out->fun))) {
        snprintf(why, whylen, "bad pattern \"%s\": module and function must be 1..255 bytes", text);
        return false;
    }
    if (!out->any_arity) {
        char *end;
        long a = strtol(as, &end, 10);
        if (!*as || *end || a < 0 || a > VM_MAX_ARITY || (as[0] == '0' && as[1])) {
            snprintf(why, whylen, "bad pattern \"%s\": arity must be 0..%d or _", text, VM_MAX_ARITY);
            return false;
        }
        out->arity = (int)a;
    }
    return true;
}

bool bp_request_check(tvm_tp_action how, unsigned flags, char *why, size_t whylen)
{
    const unsigned known = TVM_TP_GLOBAL | TVM_TP_LOCAL | TVM_TP_CALL_COUNT;
    if (how < TVM_TP_TRUE || how > TVM_TP_RESTART) {
        snprintf(why, whylen, "bad action %d: expected true, false, pause or restart", (int)how);
        return false;
    }
    if (flags & ~known) {
        snprintf(why, whylen, "unknown flags 0x%x", flags & ~known);
        return false;
    }
    if ((flags & TVM_TP_GLOBAL) && (flags & ~TVM_TP_GLOBAL)) {
        snprintf(why, whylen, "global cannot be combined with local or call_count");
        return false;
    }
    if ((how == TVM_TP_PAUSE || how == TVM_TP_RESTART) && flags != TVM_TP_CALL_COUNT) {
        snprintf(why, whylen, "%s applies only to call_count",
                 how == TVM_TP_PAUSE ? "pause" : "restart");
        return false;
    }
    return true;
}

static bool pattern_matches(const BpPattern *pat, const FuncInfo *fi)
{
    return (pat->any_mod || fi->mod == pat->mod) && (pat->any_fun || fi->name == pat->fun) &&
           (pat->any_arity || fi->arity == pat->arity);
}

/* ==== matching ==== */

typedef struct FnList {
    FuncInfo **v;
    size_t n, cap;
} FnList;

static void fnlist_add(FnList *l, FuncInfo *fi)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = vm_realloc(l->v, l->cap * sizeof(FuncInfo *));
    }
    l->v[l->n++] = fi;
}

/*
 * Every function the pattern names: the current version of each loaded
 * module, and the natives (which have no module).  Permission held, so no
 * load changes modules[] or the export targets meanwhile.
 */
static void match_functions(tvm_vm *vm, const BpPattern *pat, FnList *out)
{
    for (uint32_t i = 0; i < vm->nmodules; i++) {
        Module *m = vm->modules[i];
        if (!pat->any_mod && m->name != pat->mod)
            continue;
        for (uint32_t j = 0; j < m->nfuncs; j++)
            if (pattern_matches(pat, m->funcs[j]))
                fnlist_add(out, m->funcs[j]);
    }
    /* The natives from their own list: walking the export table instead
     * reads every export's FuncInfo, a cache miss each (half the CPU time
     * of a trace_pattern over a 5,000-function module). */
    for (uint32_t i = 0; i < vm->nnatives; i++)
        if (pattern_matches(pat, vm->natives[i]))
            fnlist_add(out, vm->natives[i]);
}

/* ==== staging (stage 1 of the sequence) ==== */

static void set_flags(BpEngine *E, BpRecord *r, unsigned s, uint32_t set, uint32_t clear)
{
    if (!r)
        return;
    r->gen[s].flags = (r->gen[s].flags | set) & ~clear;
    bp_touch(E, r);
}

static void stage_call_trace(BpEngine *E, FuncInfo *fn, bool on, unsigned flags, unsigned s)
{
    if (flags & TVM_TP_GLOBAL) {
        if (on)
            set_flags(E, bp_local_record(E, fn, false), s, 0, BP_LOCAL);
        set_flags(E, bp_global_record(E, fn, on), s, on ? BP_GLOBAL : 0, on ? 0 : BP_GLOBAL);
    }
    if (flags & TVM_TP_LOCAL) {
        if (on)
            set_flags(E, bp_global_record(E, fn, false), s, 0, BP_GLOBAL);
        set_flags(E, bp_local_record(E, fn, on), s, on ? BP_LOCAL : 0, on ? 0 : BP_LOCAL);
    }
}

static void stage_call_count(BpEngine *E, FuncInfo *fn, tvm_tp_action how, unsigned s)
{
    BpRecord *r = bp_local_record(E, fn, how == TVM_TP_TRUE);
    if (!r)
        return;
    BpGen *g = &r->gen[s];
    switch (how) {
    case TVM_TP_TRUE:
        set_flags(E, r, s, BP_COUNT | BP_COUNT_ACTIVE, 0);
        bp_stage_count(E, g, true);
        break;
    case TVM_TP_FALSE:
        set_flags(E, r, s, 0, BP_COUNT | BP_COUNT_ACTIVE);
        bp_stage_count(E, g, false);
        break;
    case TVM_TP_PAUSE:
        if (g->flags & BP_COUNT)
            set_flags(E, r, s, 0, BP_COUNT_ACTIVE);
        break;
    case TVM_TP_RESTART:
        if (g->flags & BP_COUNT) {
            set_flags(E, r, s, BP_COUNT_ACTIVE, 0);
            bp_stage_count(E, g, true);
        }
        break;
    }
}

int bp_trace_pattern(tvm_vm *vm, const BpPattern *pat, tvm_tp_action how, unsigned flags)
{
    if (!flags)
        flags = TVM_TP_GLOBAL;
    bp_begin(vm);
    BpEngine *E = vm->bp;
    E->nshards = 1 + (uint32_t)vm_sched_of(vm)->n;
    FnList fns = { 0 };
    match_functions(vm, pat, &fns);
    const unsigned s = (unsigned)vm_atomic_load_relaxed(&vm->bp_ix) ^ 1u;
    int matched = 0;
    for (size_t i = 0; i < fns.n; i++) {
        FuncInfo *fn = fns.v[i];
        if (!(flags & TVM_TP_GLOBAL) || fn->export)
            matched++;
        stage_call_trace(E, fn, how == TVM_TP_TRUE, flags, s);
        if (flags & TVM_TP_CALL_COUNT)
            stage_call_count(E, fn, how, s);
    }
    free(fns.v);
    bp_commit(vm);
    bp_end(vm);
    return matched;
}

void bp_module_replaced(tvm_vm *vm, const Module *old)
{
    BpEngine *E = vm->bp;
    const unsigned s = (unsigned)vm_atomic_load_relaxed(&vm->bp_ix) ^ 1u;
    for (uint32_t i = 0; i < old->nfuncs; i++) {
        FuncInfo *fn = old->funcs[i];
        BpRecord *rs[2] = { bp_local_record(E, fn, false), bp_global_record(E, fn, false) };
        for (int k = 0; k < 2; k++) {
            if (!rs[k])
                continue;
            set_flags(E, rs[k], s, 0, ~0u);
            bp_stage_count(E, &rs[k]->gen[s], false);
        }
    }
    bp_commit(vm);
}

/* ==== trace_info ==== */

/* The function mod:fun/arity as a call would find it; NULL if none. */
static FuncInfo *find_function(tvm_vm *vm, Atom mod, Atom fun, int arity)
{
    BpPattern pat = { mod, fun, arity, false, false, false };
    FnList l = { 0 };
    match_functions(vm, &pat, &l);
    FuncInfo *fi = l.n ? l.v[0] : NULL;
    free(l.v);
    return fi;
}

/* Active flags of a function's records, and its counter. */
static uint32_t active_flags(tvm_vm *vm, FuncInfo *fi, const BpCount **count)
{
    unsigned a = (unsigned)vm_atomic_load_relaxed(&vm->bp_ix);
    BpRecord *lr = bp_local_record(vm->bp, fi, false);
    BpRecord *gr = bp_global_record(vm->bp, fi, false);
    *count = lr ? lr->gen[a].count : NULL;
    return (lr ? lr->gen[a].flags : 0) | (gr ? gr->gen[a].flags : 0);
}

/* Builders for trace_info's answer.  The caller reserves heap first
 * (INFO_WORDS), so none of them collects while others' results are held
 * in C variables. */
#define INFO_WORDS 64

static Term pair(Process *p, Term a, Term b)
{
    Term *t = vm_heap_alloc(p, 3);
    t[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
    t[1] = a;
    t[2] = b;
    return make_boxed(t);
}

static Term cons(Process *p, Term h, Term tl)
{
    Term *c = vm_heap_alloc(p, 2);
    c[0] = h;
    c[1] = tl;
    return make_cons_ptr(c);
}

static Term atom_term(const char *name)
{
    Atom a;
    if (!vm_atom_intern(name, strlen(name), &a))
        vm_die("trace_info: atom");
    return make_atom(a);
}

static Term traced_value(uint32_t fl)
{
    if (fl & BP_GLOBAL)
        return atom_term("global");
    return atom_term((fl & BP_LOCAL) ? "local" : "false");
}

static Term count_value(uint32_t fl, int64_t n)
{
    return (fl & BP_COUNT) ? make_small(n) : atom_term("false");
}

static Term all_value(Process *p, uint32_t fl, int64_t n)
{
    if (!fl)
        return atom_term("false");
    Term items[6] = {
        pair(p, atom_term("traced"), traced_value(fl)),
        pair(p, atom_term("match_spec"), (fl & BP_CALL_TRACE) ? TERM_NIL : atom_term("false")),
        pair(p, atom_term("meta"), atom_term("false")),
        pair(p, atom_term("meta_match_spec"), atom_term("false")),
        pair(p, atom_term("call_count"), count_value(fl, n)),
        pair(p, atom_term("call_time"), atom_term("false")),
    };
    Term list = TERM_NIL;
    for (int i = 5; i >= 0; i--)
        list = cons(p, items[i], list);
    return list;
}

static const char *const item_names[] = { "traced", "call_count", "all" };

Term bp_trace_info(Process *p, Atom mod, Atom fun, int arity, BpInfoItem item)
{
    tvm_vm *vm = p->vm;
    vm_code_perm_acquire(vm);
    FuncInfo *fi = find_function(vm, mod, fun, arity);
    uint32_t fl = 0;
    const BpCount *c = NULL;
    if (fi)
        fl = active_flags(vm, fi, &c);
    /* Read everything while the permission keeps the records alive. */
    int64_t n = (fl & BP_COUNT) && c ? bp_count_sum(c) : 0;
    vm_code_perm_release(vm);
    vm_heap_ensure(p, INFO_WORDS, NULL, 0);
    Term v;
    if (!fi)
        v = atom_term("undefined");
    else if (item == BP_INFO_TRACED)
        v = traced_value(fl);
    else if (item == BP_INFO_CALL_COUNT)
        v = count_value(fl, n);
    else
        v = all_value(p, fl, n);
    return pair(p, atom_term(item_names[item]), v);
}

bool bp_call_count(tvm_vm *vm, Atom mod, Atom fun, int arity, int64_t *count)
{
    vm_code_perm_acquire(vm);
    FuncInfo *fi = find_function(vm, mod, fun, arity);
    const BpCount *c = NULL;
    uint32_t fl = fi ? active_flags(vm, fi, &c) : 0;
    bool ok = (fl & BP_COUNT) && c;
    if (ok)
        *count = bp_count_sum(c);
    vm_code_perm_release(vm);
    return ok;
}
