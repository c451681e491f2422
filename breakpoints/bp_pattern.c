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
#include "trace/tr_ms.h"
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

bool bp_request_check(const BpRequest *req, char *why, size_t whylen)
{
    const unsigned known = TVM_TP_GLOBAL | TVM_TP_LOCAL | TVM_TP_CALL_COUNT | TVM_TP_META;
    const tvm_tp_action how = req->how;
    const unsigned flags = req->flags;
    if (how < TVM_TP_TRUE || how > TVM_TP_RESTART) {
        snprintf(why, whylen, "bad action %d: expected true, false, pause or restart", (int)how);
        return false;
    }
    if (flags & ~known) {
        snprintf(why, whylen, "unknown flags 0x%x", flags & ~known);
        return false;
    }
    if ((flags & TVM_TP_GLOBAL) && (flags & (TVM_TP_LOCAL | TVM_TP_CALL_COUNT))) {
        snprintf(why, whylen, "global cannot be combined with local or call_count");
        return false;
    }
    if ((how == TVM_TP_PAUSE || how == TVM_TP_RESTART) && flags != TVM_TP_CALL_COUNT) {
        snprintf(why, whylen, "%s applies only to call_count",
                 how == TVM_TP_PAUSE ? "pause" : "restart");
        return false;
    }
    if ((flags & TVM_TP_META) && how == TVM_TP_TRUE && !req->meta_tracer) {
        snprintf(why, whylen, "meta needs a tracer process");
        return false;
    }
    if (req->ms && how != TVM_TP_TRUE) {
        snprintf(why, whylen, "a match spec goes only with true");
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

/* Local/global call trace; on: with the request's match spec. */
static void stage_call_trace(BpEngine *E, FuncInfo *fn, const BpRequest *req, unsigned s)
{
    const bool on = req->how == TVM_TP_TRUE;
    BpRecord *lr = NULL, *gr = NULL;
    if (req->flags & TVM_TP_GLOBAL) {
        if (on)
            set_flags(E, lr = bp_local_record(E, fn, false), s, 0, BP_LOCAL);
        gr = bp_global_record(E, fn, on);
        set_flags(E, gr, s, on ? BP_GLOBAL : 0, on ? 0 : BP_GLOBAL);
    }
    if (req->flags & TVM_TP_LOCAL) {
        if (on)
            set_flags(E, gr = bp_global_record(E, fn, false), s, 0, BP_GLOBAL);
        lr = bp_local_record(E, fn, on);
        set_flags(E, lr, s, on ? BP_LOCAL : 0, on ? 0 : BP_LOCAL);
    }
    /* The spec belongs to whichever kind is on; a cleared kind drops it. */
    BpRecord *rs[2] = { lr, gr };
    for (int k = 0; k < 2; k++) {
        if (!rs[k])
            continue;
        BpGen *g = &rs[k]->gen[s];
        bp_stage_ms(E, &g->match_spec, (g->flags & BP_CALL_TRACE) ? req->ms : NULL);
    }
}

/* Meta trace: on with the request's tracer and spec, or off. */
static void stage_meta(BpEngine *E, FuncInfo *fn, const BpRequest *req, unsigned s)
{
    const bool on = req->how == TVM_TP_TRUE;
    BpRecord *r = bp_local_record(E, fn, on);
    if (!r)
        return;
    set_flags(E, r, s, on ? BP_META : 0, on ? 0 : BP_META);
    bp_stage_ms(E, &r->gen[s].meta_spec, on ? req->ms : NULL);
    r->gen[s].meta_tracer = on ? req->meta_tracer : 0;
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

int bp_trace_pattern(tvm_vm *vm, const BpPattern *pat, const BpRequest *req0)
{
    BpRequest req = *req0;
    if (!req.flags)
        req.flags = TVM_TP_GLOBAL;
    /* The match spec applies to the meta trace when meta is asked for. */
    BpRequest call = req, meta = req;
    if (req.flags & TVM_TP_META)
        call.ms = NULL;
    bp_begin(vm);
    BpEngine *E = vm->bp;
    E->nshards = 1 + (uint32_t)vm_sched_of(vm)->n;
    FnList fns = { 0 };
    match_functions(vm, pat, &fns);
    const unsigned s = (unsigned)vm_atomic_load_relaxed(&vm->bp_ix) ^ 1u;
    int matched = 0;
    for (size_t i = 0; i < fns.n; i++) {
        FuncInfo *fn = fns.v[i];
        if (!(req.flags & TVM_TP_GLOBAL) || fn->export)
            matched++;
        if (req.flags & (TVM_TP_GLOBAL | TVM_TP_LOCAL))
            stage_call_trace(E, fn, &call, s);
        if (req.flags & TVM_TP_META)
            stage_meta(E, fn, &meta, s);
        if (req.flags & TVM_TP_CALL_COUNT)
            stage_call_count(E, fn, req.how, s);
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
            bp_stage_ms(E, &rs[k]->gen[s].match_spec, NULL);
            bp_stage_ms(E, &rs[k]->gen[s].meta_spec, NULL);
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

/* What trace_info reports of a function, read under the permission (which
 * keeps records, counters and specs alive).  Spec sources are copied onto
 * the asking process's heap there and then. */
typedef struct Info {
    uint32_t fl;               /* active flags of both records */
    int64_t count;
    Term ms, meta_ms;          /* spec sources on the heap, or [] (none) */
    uint64_t meta_tracer;
} Info;

static Term spec_copy(Process *p, const TrMs *ms)
{
    if (!ms)
        return TERM_NIL;
    Term src = tr_ms_source(ms);
    vm_heap_ensure(p, term_size(src), NULL, 0);
    return vm_copy_term(p, src);
}

static void active_info(Process *p, FuncInfo *fi, Info *in)
{
    tvm_vm *vm = p->vm;
    unsigned a = (unsigned)vm_atomic_load_relaxed(&vm->bp_ix);
    BpRecord *lr = bp_local_record(vm->bp, fi, false);
    BpRecord *gr = bp_global_record(vm->bp, fi, false);
    const BpGen *lg = lr ? &lr->gen[a] : NULL, *gg = gr ? &gr->gen[a] : NULL;
    in->fl = (lg ? lg->flags : 0) | (gg ? gg->flags : 0);
    in->count = lg && (lg->flags & BP_COUNT) && lg->count ? bp_count_sum(lg->count) : 0;
    in->meta_tracer = lg && (lg->flags & BP_META) ? lg->meta_tracer : 0;
    const BpGen *traced = gg && (gg->flags & BP_GLOBAL) ? gg : lg;
    in->ms = spec_copy(p, traced ? traced->match_spec : NULL);
    tvm_term h = vm_root_push(p, in->ms);
    in->meta_ms = spec_copy(p, lg ? lg->meta_spec : NULL);
    in->ms = vm_root_get(p, h);
    p->nroots = h.h;
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

static Term count_value(const Info *in)
{
    return (in->fl & BP_COUNT) ? make_small(in->count) : atom_term("false");
}

static Term ms_value(const Info *in)
{
    return (in->fl & BP_CALL_TRACE) ? in->ms : atom_term("false");
}

static Term meta_value(const Info *in)
{
    return (in->fl & BP_META) ? make_pid(in->meta_tracer) : atom_term("false");
}

static Term meta_ms_value(const Info *in)
{
    return (in->fl & BP_META) ? in->meta_ms : atom_term("false");
}

static Term all_value(Process *p, const Info *in)
{
    if (!in->fl)
        return atom_term("false");
    Term items[6] = {
        pair(p, atom_term("traced"), traced_value(in->fl)),
        pair(p, atom_term("match_spec"), ms_value(in)),
        pair(p, atom_term("meta"), meta_value(in)),
        pair(p, atom_term("meta_match_spec"), meta_ms_value(in)),
        pair(p, atom_term("call_count"), count_value(in)),
        pair(p, atom_term("call_time"), atom_term("false")),
    };
    Term list = TERM_NIL;
    for (int i = 5; i >= 0; i--)
        list = cons(p, items[i], list);
    return list;
}

static const char *const item_names[] = { "traced", "call_count", "all", "match_spec",
                                          "meta", "meta_match_spec" };

bool bp_info_item(const char *name, BpInfoItem *out)
{
    for (size_t i = 0; i < sizeof item_names / sizeof item_names[0]; i++)
        if (!strcmp(name, item_names[i])) {
            *out = (BpInfoItem)i;
            return true;
        }
    return false;
}

Term bp_trace_info(Process *p, Atom mod, Atom fun, int arity, BpInfoItem item)
{
    tvm_vm *vm = p->vm;
    vm_code_perm_acquire(vm);
    FuncInfo *fi = find_function(vm, mod, fun, arity);
    Info in = { 0, 0, TERM_NIL, TERM_NIL, 0 };
    if (fi)
        active_info(p, fi, &in);
    vm_code_perm_release(vm);
    /* The spec copies must survive the reservation below. */
    uint32_t rbase = p->nroots;
    tvm_term hm = vm_root_push(p, in.ms), hmm = vm_root_push(p, in.meta_ms);
    vm_heap_ensure(p, INFO_WORDS, NULL, 0);
    in.ms = vm_root_get(p, hm);
    in.meta_ms = vm_root_get(p, hmm);
    p->nroots = rbase;
    Term v;
    if (!fi)
        v = atom_term("undefined");
    else if (item == BP_INFO_TRACED)
        v = traced_value(in.fl);
    else if (item == BP_INFO_CALL_COUNT)
        v = count_value(&in);
    else if (item == BP_INFO_MATCH_SPEC)
        v = ms_value(&in);
    else if (item == BP_INFO_META)
        v = meta_value(&in);
    else if (item == BP_INFO_META_MATCH_SPEC)
        v = meta_ms_value(&in);
    else
        v = all_value(p, &in);
    return pair(p, atom_term(item_names[item]), v);
}

bool bp_call_count(tvm_vm *vm, Atom mod, Atom fun, int arity, int64_t *count)
{
    vm_code_perm_acquire(vm);
    FuncInfo *fi = find_function(vm, mod, fun, arity);
    BpRecord *lr = fi ? bp_local_record(vm->bp, fi, false) : NULL;
    const BpGen *g = lr ? &lr->gen[vm_atomic_load_relaxed(&vm->bp_ix)] : NULL;
    bool ok = g && (g->flags & BP_COUNT) && g->count;
    if (ok)
        *count = bp_count_sum(g->count);
    vm_code_perm_release(vm);
    return ok;
}
