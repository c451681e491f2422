/*
 * breakpoints/bp_pattern.c - what trace_pattern means: patterns, matching,
 * the rules that turn an action and flags into staged generations, and
 * trace_info.  The sequence that makes staged data take effect is in
 * bp_engine.c.
 *
 * Rules (after BEAM's erl_bif_trace.c, as OTP's call_trace_SUITE,
 * trace_local_SUITE and trace_call_count_SUITE check them):
 *   - global traces remote calls of exported functions; local traces every
 *     call.  Setting one on a function clears the other, and global on
 *     clears meta, call_count and call_time too; `false` clears only the
 *     kind named.  global on a function that is not exported
 *     matches nothing but still clears its local trace.
 *   - call_count: true starts a fresh counter at 0 (also when one exists),
 *     pause stops counting (the value stays readable), restart starts a
 *     fresh counter, false removes it.  A fresh counter replaces the old
 *     one in the staging generation, so calls made after trace_pattern
 *     returns are counted from exactly 0 even if some scheduler was still
 *     counting into the old one during the sequence.
 *   - call_time: the same four actions on per-process call time data
 *     (bp_time.c); a fresh BpTime replaces the old one the same way.
 *   - on_load (the pattern "on_load", atom on_load from VM code): the
 *     flags are kept and applied to every module loaded later, to all its
 *     functions as m:_/_ would; false clears the flags named.  See
 *     vm_hook_module_loading() for why that needs no wait at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakpoints/bp_engine_internal.h"
#include "breakpoints/bp_time.h"
#include "trace/tr_ms.h"
#include "trace/tr_session.h"
#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/sched.h"

/* ==== patterns ==== */

/*
 * The atom named s[0..n-1], looked up, never made: a name no atom has
 * cannot be the module or function of anything loaded, so the pattern
 * matches nothing (*unknown), and a pattern costs no atom (the table is
 * shared by every VM and never shrinks).  False for a bad length.
 */
static bool atom_of(const char *s, size_t n, Atom *out, bool *unknown)
{
    if (n == 0 || n > VM_ATOM_MAX_LEN)
        return false;
    if (!vm_atom_lookup(s, n, out))
        *unknown = true;
    return true;
}

static bool is_wild(const char *s, size_t n)
{
    return n == 1 && s[0] == '_';
}

bool bp_pattern_parse(const char *text, BpPattern *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    if (text && !strcmp(text, "on_load")) {
        out->on_load = true;
        return true;
    }
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
    if ((!out->any_mod && !atom_of(text, nm, &out->mod, &out->unknown)) ||
        (!out->any_fun && !atom_of(fs, nf, &out->fun, &out->unknown))) {
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

bool bp_request_check(const BpPattern *pat, const BpRequest *req, char *why, size_t whylen)
{
    const unsigned known =
        TVM_TP_GLOBAL | TVM_TP_LOCAL | TVM_TP_CALL_COUNT | TVM_TP_META | TVM_TP_CALL_TIME;
    const unsigned data = TVM_TP_CALL_COUNT | TVM_TP_CALL_TIME;
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
    if ((flags & TVM_TP_GLOBAL) && (flags & (TVM_TP_LOCAL | data))) {
        snprintf(why, whylen, "global cannot be combined with local, call_count or call_time");
        return false;
    }
    if (pat->on_load && (flags & TVM_TP_META)) {
        snprintf(why, whylen, "on_load takes no meta trace");
        return false;
    }
    /* on_load keeps no counts to pause or restart: BEAM returns 0 for
     * any flags, and so does bp_trace_pattern, changing nothing. */
    if ((how == TVM_TP_PAUSE || how == TVM_TP_RESTART) && !pat->on_load &&
        (!flags || (flags & ~data))) {
        snprintf(why, whylen, "%s applies only to call_count and call_time",
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
    return !pat->unknown && (pat->any_mod || fi->mod == pat->mod) && (pat->any_fun || fi->name == pat->fun) &&
           (pat->any_arity || fi->arity == pat->arity);
}

/* ==== matching ==== */

typedef struct FnList {
    FuncInfo **v;
    size_t n, cap;
    bool borrowed;              /* v is a module's own array (match_functions) */
} FnList;

static void fnlist_free(FnList *l)
{
    if (!l->borrowed)
        free(l->v);
}

/* (match_functions made room for every candidate first.) */
static void fnlist_add(FnList *l, FuncInfo *fi)
{
    VM_ASSERT(l->n < l->cap, "a function list without room");
    l->v[l->n++] = fi;
}

/*
 * Every function the pattern names: the current version of each loaded
 * module, and the natives (which have no module).  Permission held, so no
 * load changes modules[] or the export targets meanwhile.
 */
static bool module_named(const BpPattern *pat, const Module *m)
{
    return !m->deleted && (pat->any_mod || m->name == pat->mod);
}

/*
 * m:_/_ where no native is of module m (the request that toggles a large
 * module): the module's own array of functions, borrowed (the permission
 * keeps it as it is), instead of a copy.  On 50,000 functions the copy
 * (400 KB, the module's array cold) took 30-40 us of a 0.9 ms call; the
 * stage then reads the module's array instead of the copy.  False if the
 * case does not apply.  (No native is of a module loaded as bytecode:
 * tvm_register_native refuses that and the loader the reverse.  The
 * natives are looked at all the same, so that this step stays right
 * without relying on it.)
 */
static bool borrow_module(tvm_vm *vm, const BpPattern *pat, FnList *out)
{
    if (pat->any_mod || !pat->any_fun || pat->unknown)
        return false;
    Module *only = NULL;
    for (uint32_t i = 0; i < vm->nmodules; i++) {
        if (!module_named(pat, vm->modules[i]))
            continue;
        if (only)
            return false;
        only = vm->modules[i];
    }
    for (uint32_t i = 0; i < vm->nnatives; i++)
        if (pattern_matches(pat, vm->natives[i]))
            return false;
    if (!only)
        return false;
    *out = (FnList){ .v = only->funcs, .n = only->nfuncs, .borrowed = true };
    return true;
}

static void match_functions(tvm_vm *vm, const BpPattern *pat, FnList *out)
{
    if (borrow_module(vm, pat, out))
        return;
    /* Room for every candidate at once: growing the list by doubling
     * copied it a dozen times over in a call on a 5,000-function module
     * (a tenth of the call's instructions). */
    size_t bound = vm->nnatives;
    for (uint32_t i = 0; i < vm->nmodules; i++)
        if (module_named(pat, vm->modules[i]))
            bound += vm->modules[i]->nfuncs;
    if (bound > out->cap) {
        out->cap = bound;
        out->v = vm_realloc(out->v, out->cap * sizeof(FuncInfo *));
    }
    if (pat->unknown)
        return;                 /* a name no atom has: nothing matches */
    for (uint32_t i = 0; i < vm->nmodules; i++) {
        Module *m = vm->modules[i];
        if (!module_named(pat, m))
            continue;
        if (pat->any_fun) {
            /* m:_/_ (or _:_/_): every function of the module, whose
             * FuncInfos all carry its name (ld_build.c), so none is read
             * here (a cache miss each on a large module; the stage reads
             * the function's record slot, ahead). */
            if (m->nfuncs)
                memcpy(out->v + out->n, m->funcs, m->nfuncs * sizeof *m->funcs);
            out->n += m->nfuncs;
            continue;
        }
        for (uint32_t j = 0; j < m->nfuncs; j++) {
            if (j + 2 * BP_AHEAD < m->nfuncs)
                bp_prefetch(m->funcs[j + 2 * BP_AHEAD]);
            if (pattern_matches(pat, m->funcs[j]))
                fnlist_add(out, m->funcs[j]);
        }
    }
    /* The natives from their own list: walking the export table instead
     * reads every export's FuncInfo, a cache miss each (half the CPU time
     * of a trace_pattern over a 5,000-function module). */
    for (uint32_t i = 0; i < vm->nnatives; i++)
        if (pattern_matches(pat, vm->natives[i]))
            fnlist_add(out, vm->natives[i]);
}

/* ==== staging (stage 1 of the sequence) ==== */

/* What one staging step works on: the engine, the staging generation and
 * the session. */
typedef struct Stage {
    BpEngine *E;
    unsigned s;                 /* the staging generation */
    unsigned sid;               /* the session */
    /* A generation's nsess, plain and call_sid as one word when it holds
     * one plain entry of this session (plain_gen). */
    uint64_t plain_key;
} Stage;

_Static_assert(offsetof(BpGen, plain) == offsetof(BpGen, nsess) + sizeof(uint16_t) &&
                   offsetof(BpGen, call_sid) == offsetof(BpGen, plain) + sizeof(uint16_t) &&
                   sizeof(((BpGen *)0)->call_sid) == sizeof(uint32_t) &&
                   offsetof(BpGen, nsess) % sizeof(uint64_t) == 0,
               "a generation's nsess, plain and call_sid make one aligned word");

/* nsess, plain and call_sid of generation x as one word. */
static inline uint64_t gen_word(const BpGen *x)
{
    uint64_t w;
    memcpy(&w, &x->nsess, sizeof w);
    return w;
}

static Stage stage_make(BpEngine *E, unsigned s, unsigned sid)
{
    const BpGen plain = { .nsess = 1, .plain = 1, .call_sid = sid };
    return (Stage){ E, s, sid, gen_word(&plain) };
}

/* Session st->sid's entry in r: flags set, then cleared; created if
 * anything is set.  Returns the entry, NULL if none. */
static inline __attribute__((always_inline)) BpSess *set_flags(const Stage *st, BpRecord *r,
                                                               uint32_t set, uint32_t clear)
{
    BpSess *e = bp_entry(st->E, r, st->s, st->sid, set != 0);
    if (!e)
        return NULL;
    e->flags = (e->flags | set) & ~clear;
    bp_touch(st->E, r);
    return e;
}

/* Local/global call trace; on: with the request's match spec.  Global
 * and local replace each other within the session. */
static inline __attribute__((always_inline)) void stage_call_trace(const Stage *st, FuncInfo *fn,
                                                                   const BpRequest *req)
{
    BpEngine *E = st->E;
    const bool on = req->how == TVM_TP_TRUE;
    BpSess *le = NULL, *ge = NULL;
    if (req->flags & TVM_TP_GLOBAL) {
        if (on)
            le = set_flags(st, bp_local_record(E, fn, false), 0, BP_LOCAL);
        ge = set_flags(st, bp_global_record(E, fn, on), on ? BP_GLOBAL : 0, on ? 0 : BP_GLOBAL);
    }
    if (req->flags & TVM_TP_LOCAL) {
        if (on)
            ge = set_flags(st, bp_global_record(E, fn, false), 0, BP_GLOBAL);
        le = set_flags(st, bp_local_record(E, fn, on), on ? BP_LOCAL : 0, on ? 0 : BP_LOCAL);
    }
    /* The spec belongs to whichever kind is on; a cleared kind drops it. */
    if (le)
        bp_stage_call_ms(E, le, (le->flags & BP_CALL_TRACE) ? req->ms : NULL);
    if (ge)
        bp_stage_call_ms(E, ge, (ge->flags & BP_CALL_TRACE) ? req->ms : NULL);
}

/* Generation g of r holds no entry, or one plain entry of session
 * st->sid: from the summary alone (BpGen.plain), so that the entries'
 * lines stay unread; one compare of a word each (an empty generation
 * has all three fields 0: every step that empties one clears them, and
 * one that did not would only take the general way). */
static inline bool plain_gen(const Stage *st, const BpRecord *r, unsigned g)
{
    const BpGen *x = &r->gen[g];
    VM_ASSERT(!x->plain || (x->nsess == 1 && bp_plain_entry(bp_one(r, g)) &&
                            bp_one(r, g)->flags == BP_LOCAL && x->call_sid == bp_one(r, g)->sid),
              "a plain summary has one plain entry");
    const uint64_t w = gen_word(x);
    return w == 0 || w == st->plain_key;
}

/*
 * bp_touch and bp_settle_act_at for the plain step's record, with what
 * the step knows already: the record existed before this call (not
 * fresh) and was not staged by it (so not armed early either), it is
 * fn's local one, and its staging generation now has flags exactly when
 * `on`.  Switching on arms it here if it is not (stage 2a); switching
 * off leaves a disarm to stage 4 if it is.  Every field ends as the
 * general helpers leave it, in fewer instructions: a call over a large
 * module runs this for every function.
 */
static inline __attribute__((always_inline)) void settle_plain(BpEngine *E, BpRecord *r,
                                                               FuncInfo *fn, bool on)
{
    VM_ASSERT(r->mark != 0, "a record made before this call has had a mark");
    if (E->ntouched == E->touched_cap)
        bp_touch_grow(E);
    BpTouched *t = &E->touched[E->ntouched];
    const bool armed = r->armed;
    const uint8_t act = !on && armed ? BP_ACT_DISARM : BP_ACT_NONE;
    const bool early = on && !armed;
    if (early)
        vm_code_patch(&fn->code[0], instr_make(OP_BREAKPOINT, 0, 0, 0));
    *t = (BpTouched){ .r = r, .at = &fn->code[0],
                      .act = act, .early = early };
    r->mark = E->mark + 1;
    r->pend = (uint32_t)(++E->ntouched);
    r->settled = (uint8_t)(act | (early ? BP_SETTLED_EARLY : 0));
    E->nsettled = E->ntouched;
    E->acts |= 1u << act;
}

/*
 * Local call trace on or off without a spec (what a trace_pattern that
 * toggles a module asks of each function) for a function whose record
 * exists and holds only plain entries of this session in both
 * generations: the staging generation is written whole, as the general
 * way leaves it (stage_call_trace after the last call's stage 5: mirror
 * the active generation, find the entry, set or clear the flag; the
 * settle then summarizes), without those steps.  Both generations plain
 * means that the mirror would neither take nor drop a reference and that
 * the flag alone decides the result.  False, with nothing done, where
 * the case does not apply: the general way then.
 */
static inline __attribute__((always_inline)) bool stage_plain(const Stage *st, FuncInfo *fn,
                                                              bool on)
{
    BpEngine *E = st->E;
    BpRecord *r = vm_atomic_load_ptr_relaxed(&fn->bp);
    const unsigned s = st->s, a = s ^ 1u;
    /* (A record this call staged already is the general way's: no
     * function's record is, but the settle below relies on it.) */
    if (!r || r->mark == E->mark || r->mark == E->mark + 1 || !plain_gen(st, r, a) ||
        !plain_gen(st, r, s))
        return false;
    const bool pending = r->pend != 0;
    if (pending && !bp_sync_plain(E, r, a))
        return false;
    /* gen[a] is what the mirror would copy: the state before this call.
     * The entry's line is written only where it changes: a generation
     * without entries never reads its slot (the general way leaves the
     * session's id there, which nothing looks at), and a plain one of
     * this session holds exactly the entry a call trace needs, as when
     * a module is switched on, off and on again (gen[s] is then still
     * the generation of two calls ago: the last call's stage 5 pends). */
    BpGen *g = &r->gen[s];
    if (on) {
        if (!g->plain)
            *bp_one(r, s) = (BpSess){ .flags = BP_LOCAL, .sid = st->sid };
        *g = (BpGen){ .flags = BP_LOCAL, .nsess = 1, .plain = 1, .call_sid = st->sid };
    } else if (r->gen[a].nsess) {
        *g = (BpGen){ 0 };
    } else {
        /* Nothing to clear: not staged (the general way finds no entry),
         * but consolidated, to the empty active generation. */
        if (pending)
            *g = (BpGen){ 0 };
        return true;
    }
    VM_ASSERT(E->nsettled == E->ntouched, "every record staged before is settled");
    VM_ASSERT(bp_cold(r)->fi == fn && !bp_cold(r)->target, "a function's record is local");
    settle_plain(E, r, fn, on);
    return true;
}

/* Meta trace: on with the request's tracer and spec, or off. */
static void stage_meta(const Stage *st, FuncInfo *fn, const BpRequest *req)
{
    const bool on = req->how == TVM_TP_TRUE;
    BpRecord *r = bp_local_record(st->E, fn, on);
    BpSess *e = bp_entry(st->E, r, st->s, st->sid, on);
    if (!e)
        return;
    set_flags(st, r, on ? BP_META : 0, on ? 0 : BP_META);
    bp_stage_ms(st->E, &e->meta_spec, on ? req->ms : NULL);
    e->meta_tracer = on ? req->meta_tracer : 0;
}

/* call_count and call_time data: the flag pair and the staging helper. */
typedef struct DataKind {
    uint32_t exists, active;
    void (*stage)(BpEngine *E, BpSess *e, bool fresh);
} DataKind;

static const DataKind count_kind = { BP_COUNT, BP_COUNT_ACTIVE, bp_stage_count };
static const DataKind time_kind = { BP_TIME, BP_TIME_ACTIVE, bp_stage_time };

static void stage_data(const Stage *st, FuncInfo *fn, tvm_tp_action how, const DataKind *k)
{
    BpRecord *r = bp_local_record(st->E, fn, how == TVM_TP_TRUE);
    BpSess *e = bp_entry(st->E, r, st->s, st->sid, how == TVM_TP_TRUE);
    if (!e)
        return;
    switch (how) {
    case TVM_TP_TRUE:
        set_flags(st, r, k->exists | k->active, 0);
        k->stage(st->E, e, true);
        break;
    case TVM_TP_FALSE:
        set_flags(st, r, 0, k->exists | k->active);
        k->stage(st->E, e, false);
        break;
    case TVM_TP_PAUSE:
        if (e->flags & k->exists)
            set_flags(st, r, 0, k->active);
        break;
    case TVM_TP_RESTART:
        if (e->flags & k->exists) {
            set_flags(st, r, k->active, 0);
            k->stage(st->E, e, true);
        }
        break;
    }
}

/* Stage 1 for one function: `call` for the call trace (its spec, if any,
 * is the meta trace's when meta is asked for). */
static void stage_function(const Stage *st, FuncInfo *fn, const BpRequest *req,
                           const BpRequest *call)
{
    if (req->flags & (TVM_TP_GLOBAL | TVM_TP_LOCAL))
        stage_call_trace(st, fn, call);
    if ((req->flags & TVM_TP_GLOBAL) && req->how == TVM_TP_TRUE) {
        /* As BEAM: global on clears every other kind of the session. */
        const BpRequest off = { .how = TVM_TP_FALSE };
        stage_meta(st, fn, &off);
        stage_data(st, fn, TVM_TP_FALSE, &count_kind);
        stage_data(st, fn, TVM_TP_FALSE, &time_kind);
    }
    if (req->flags & TVM_TP_META)
        stage_meta(st, fn, req);
    if (req->flags & TVM_TP_CALL_COUNT)
        stage_data(st, fn, req->how, &count_kind);
    if (req->flags & TVM_TP_CALL_TIME)
        stage_data(st, fn, req->how, &time_kind);
}

/* on_load: the flags (and the call trace's spec) kept for modules loaded
 * later, per session; no module changes.  The spec is read only when a
 * module is staged, under the permission, so replacing it needs no wait
 * (the generations that use it hold references of their own). */
static void set_on_load(BpEngine *E, unsigned sid, const BpRequest *req)
{
    const unsigned flags = req->flags, slot = vm_sid_slot(sid);
    if (E->on_load_sid[slot] != sid) {
        /* An ended incarnation's (its destroy clears it; be safe). */
        E->on_load[slot] = 0;
        tr_ms_free(E->on_load_ms[slot]);
        E->on_load_ms[slot] = NULL;
        E->on_load_sid[slot] = sid;
    }
    unsigned *ol = &E->on_load[slot];
    if (req->how == TVM_TP_FALSE) {
        *ol &= ~flags;
    } else {
        if (flags & TVM_TP_GLOBAL)
            *ol &= ~TVM_TP_LOCAL;
        if (flags & TVM_TP_LOCAL)
            *ol &= ~TVM_TP_GLOBAL;
        *ol |= flags;
    }
    if (flags & (TVM_TP_GLOBAL | TVM_TP_LOCAL)) {
        TrMs *ms = req->how == TVM_TP_TRUE ? req->ms : NULL;
        if (ms)
            tr_ms_retain(ms);
        tr_ms_free(E->on_load_ms[slot]);
        E->on_load_ms[slot] = ms;
    }
}

/* Reading ahead in the staging loop: the function two steps ahead (its
 * record slot, in the line of the code word that its settle may arm:
 * stage 2a), and the record of the one a step ahead.  For stage_plain
 * only the record's first two lines: it reads and writes the
 * generations and the engine's state (the first) and, switching off,
 * the word to restore (the second), not the entries of the last two
 * unless a generation was not plain, where it falls back to the general
 * way.  The other two lines cost the pass about a tenth of its time on
 * 50,000 records that are not in the cache (bench_pausefree --fns 50000
 * --runs 1 --modes none, the idle VM's CPU per call 1.35-1.41 ->
 * 1.19-1.28 ms). */
static inline void ahead_function(const FnList *l, size_t i, bool plain)
{
    if (i + 2 * BP_AHEAD < l->n)
        bp_prefetch(&l->v[i + 2 * BP_AHEAD]->bp);  /* and code[0]: the same line */
    if (i + BP_AHEAD < l->n) {
        const BpRecord *r = vm_atomic_load_ptr_relaxed(&l->v[i + BP_AHEAD]->bp);
        if (r && plain)
            bp_prefetch(r);
        else if (r)
            bp_prefetch_record(r);
    }
}

int bp_trace_pattern(tvm_vm *vm, unsigned sid, const BpPattern *pat, const BpRequest *req0)
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
    /* Under the permission, which a session's destroy holds while it
     * removes the session's breakpoints: a session that is not live now
     * gets none (nothing is staged for it after its removal). */
    if (!tr_session_live(vm, sid)) {
        bp_end(vm);
        return -1;
    }
    if (pat->on_load) {
        if (req.how == TVM_TP_TRUE || req.how == TVM_TP_FALSE)
            set_on_load(E, sid, &req);
        bp_end(vm);
        return 0;
    }
    E->nshards = 1 + (uint32_t)vm_sched_of(vm)->n;
    FnList fns = { 0 };
    match_functions(vm, pat, &fns);
    const Stage st = stage_make(E, (unsigned)vm_atomic_load_relaxed(&vm->bp_ix) ^ 1u, sid);
    int matched = 0;
    /* Call trace alone (the common request): its step straight from the
     * loop, without stage_function's tests of the other kinds per
     * function (global on also clears them: stage_function). */
    const bool call_only = !(req.flags & ~(unsigned)(TVM_TP_GLOBAL | TVM_TP_LOCAL)) &&
                           !((req.flags & TVM_TP_GLOBAL) && req.how == TVM_TP_TRUE);
    /* ... and of those, local without a spec: stage_plain where it applies
     * (no global record anywhere: a local request clears a function's
     * global call trace, which stage_plain does not look for). */
    const bool plain = call_only && req.flags == TVM_TP_LOCAL && !call.ms &&
                       (req.how == TVM_TP_TRUE || req.how == TVM_TP_FALSE);
    /* (No step of a local request creates a global record, so nglobal
     * stays 0 through the loop once it is.) */
    const bool plain_now = plain && !E->nglobal, on = req.how == TVM_TP_TRUE;
    const bool global = req.flags & TVM_TP_GLOBAL;
    for (size_t i = 0; i < fns.n; i++) {
        FuncInfo *fn = fns.v[i];
        ahead_function(&fns, i, plain);
        matched += global ? fn->export != NULL : 1;
        if (plain_now && stage_plain(&st, fn, on))
            continue;           /* staged and settled */
        if (call_only)
            stage_call_trace(&st, fn, &call);
        else
            stage_function(&st, fn, &meta, &call);
        bp_stage_settle(E, st.s);   /* fn's records: no other function stages them */
    }
    fnlist_free(&fns);
    /* Records this call empties stay idle on their functions (a reload
     * or a session's removal unlinks what it empties). */
    E->keep_idle = true;
    bp_commit(vm);
    E->keep_idle = false;
    bp_end(vm);
    return matched;
}

/* Every entry of both records of fn in generation s, cleared (a reload:
 * neither the old nor the new code stays traced, in any session). */
static void clear_function(BpEngine *E, FuncInfo *fn, unsigned s)
{
    BpRecord *rs[2] = { bp_local_record(E, fn, false), bp_global_record(E, fn, false) };
    for (int k = 0; k < 2; k++) {
        if (!rs[k])
            continue;
        BpGen *g = &rs[k]->gen[s];
        BpSess *v = bp_gen_entries_at(rs[k], s);
        for (uint32_t i = 0; i < g->nsess; i++)
            bp_entry_clear(E, &v[i]);
        bp_touch(E, rs[k]);
    }
}

void vm_hook_module_replaced(tvm_vm *vm, const Module *old)
{
    BpEngine *E = vm->bp;
    bp_sync_all(E);     /* the last trace_pattern's stage 5, before reading staging */
    const unsigned s = (unsigned)vm_atomic_load_relaxed(&vm->bp_ix) ^ 1u;
    for (uint32_t i = 0; i < old->nfuncs; i++)
        clear_function(E, old->funcs[i], s);
    bp_commit(vm);
}

void bp_remove_session(tvm_vm *vm, unsigned sid)
{
    BpEngine *E = vm->bp;
    bp_sync_all(E);     /* the last trace_pattern's stage 5, before reading staging */
    const unsigned s = (unsigned)vm_atomic_load_relaxed(&vm->bp_ix) ^ 1u;
    const unsigned slot = vm_sid_slot(sid);
    E->on_load[slot] = 0;
    tr_ms_free(E->on_load_ms[slot]);
    E->on_load_ms[slot] = NULL;
    for (BpRecord *r = E->records; r; r = bp_cold(r)->next) {
        BpGen *g = &r->gen[s];
        BpSess *v = bp_gen_entries_at(r, s);
        for (uint32_t i = 0; i < g->nsess; i++)
            if (vm_sid_slot(v[i].sid) == slot) {
                bp_entry_clear(E, &v[i]);
                bp_touch(E, r);
            }
    }
    bp_commit(vm);
}

/*
 * on_load: arms the new module's breakpoints before it is installed.  Why
 * no wait is needed: no thread can run or even find a function of `m`
 * yet.  Its code is reachable only through its export entries, whose
 * addresses the install stages and publishes with a release store of the
 * code index ([CX1] in vm/module.c, acquired by every remote call), and
 * through funs and local calls made by its own code, which runs only
 * after that.  trace_pattern cannot see it either: it walks vm->modules
 * under the permission we hold.  So this writes both generations (equal,
 * as the sequence leaves them after consolidation), stores BREAKPOINT over
 * code[0] and creates the trampolines of exported functions directly: a
 * reader that can reach them acquired the code index after all of it.
 * The install points an export at its trampoline (vm_module_install_locked
 * takes e->bp_tramp when its target is the new function).  Every live
 * session's on_load flags apply, each into its own entries.  Permission
 * held; the module is not installed yet.
 */
void vm_hook_module_loading(tvm_vm *vm, Module *m)
{
    BpEngine *E = vm->bp;
    bool any = false;
    for (unsigned k = 0; k < VM_SESSIONS_MAX; k++)
        any |= E->on_load[k] && tr_session_live(vm, E->on_load_sid[k]);
    if (!any)
        return;
    bp_sync_all(E);     /* the last trace_pattern's stage 5, before staging */
    E->nshards = 1 + (uint32_t)vm_sched_of(vm)->n;
    const unsigned s = (unsigned)vm_atomic_load_relaxed(&vm->bp_ix) ^ 1u;
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        FuncInfo *fn = m->funcs[i];
        for (unsigned k = 0; k < VM_SESSIONS_MAX; k++) {
            if (!E->on_load[k] || !tr_session_live(vm, E->on_load_sid[k]))
                continue;
            BpRequest req = { .how = TVM_TP_TRUE, .flags = E->on_load[k], .ms = E->on_load_ms[k] };
            const Stage st = stage_make(E, s, E->on_load_sid[k]);
            stage_function(&st, fn, &req, &req);
        }
        BpRecord *rs[2] = { bp_local_record(E, fn, false), bp_global_record(E, fn, false) };
        for (int k = 0; k < 2; k++) {
            if (!rs[k])
                continue;
            bp_gen_summarize(E, rs[k], s);
            if (!rs[k]->gen[s].flags)
                continue;
            bp_gen_mirror(E, rs[k], s);
            bp_arm_unpublished(rs[k]);
        }
    }
    /* Nothing is left staged: the records are complete in both generations. */
    E->ntouched = 0;
    E->nsettled = 0;
    E->resettle = false;
    bp_next_mark(E);
}

/* ==== trace_info ==== */

/* The function mod:fun/arity as a call would find it; NULL if none. */
static FuncInfo *find_function(tvm_vm *vm, Atom mod, Atom fun, int arity)
{
    BpPattern pat = { .mod = mod, .fun = fun, .arity = arity };
    FnList l = { 0 };
    match_functions(vm, &pat, &l);
    FuncInfo *fi = l.n ? l.v[0] : NULL;
    fnlist_free(&l);
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
    BpTimeSample *time;        /* BP_TIME: per process (malloc'd) */
    size_t ntime;
    bool on_load;              /* on_load: call_count and call_time are true/false */
} Info;

static Term spec_copy(Process *p, const TrMs *ms)
{
    if (!ms)
        return TERM_NIL;
    Term src = tr_ms_source(ms);
    vm_heap_ensure(p, term_size(src), NULL, 0);
    return vm_copy_term(p, src);
}

static void active_info(Process *p, unsigned sid, FuncInfo *fi, Info *in)
{
    tvm_vm *vm = p->vm;
    unsigned a = (unsigned)vm_atomic_load_relaxed(&vm->bp_ix);
    BpRecord *lr = bp_local_record(vm->bp, fi, false);
    BpRecord *gr = bp_global_record(vm->bp, fi, false);
    const BpSess *lg = bp_entry(vm->bp, lr, a, sid, false);
    const BpSess *gg = bp_entry(vm->bp, gr, a, sid, false);
    in->fl = (lg ? lg->flags : 0) | (gg ? gg->flags : 0);
    in->count = lg && (lg->flags & BP_COUNT) && lg->count ? bp_count_sum(lg->count) : 0;
    in->meta_tracer = lg && (lg->flags & BP_META) ? lg->meta_tracer : 0;
    if (lg && (lg->flags & BP_TIME) && lg->time)
        in->ntime = bp_time_read(lg->time, &in->time);
    const BpSess *traced = gg && (gg->flags & BP_GLOBAL) ? gg : lg;
    in->ms = spec_copy(p, traced ? traced->match_spec : NULL);
    tvm_term h = vm_root_push(p, in->ms);
    in->meta_ms = spec_copy(p, lg ? lg->meta_spec : NULL);
    in->ms = vm_root_get(p, h);
    p->nroots = h.h;
}

/* Builders for trace_info's answer.  The caller reserves heap first
 * (INFO_WORDS, plus TIME_WORDS per process of call time), so none of them
 * collects while others' results are held in C variables. */
#define INFO_WORDS 64
#define TIME_WORDS 7

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

static Term traced_value(uint32_t fl)
{
    if (fl & BP_GLOBAL)
        return make_atom(ATOM_GLOBAL);
    return make_atom((fl & BP_LOCAL) ? ATOM_LOCAL : ATOM_FALSE);
}

static Term count_value(const Info *in)
{
    if (!(in->fl & BP_COUNT))
        return TERM_FALSE;
    return in->on_load ? TERM_TRUE : make_small(in->count);
}

/* [{Pid, Count, S, Us}] as BEAM's trace_info(MFA, call_time), or false. */
static Term time_value(Process *p, const Info *in)
{
    if (!(in->fl & BP_TIME))
        return TERM_FALSE;
    if (in->on_load)
        return TERM_TRUE;
    Term list = TERM_NIL;
    for (size_t i = in->ntime; i-- > 0;) {
        const BpTimeSample *e = &in->time[i];
        Term *t = vm_heap_alloc(p, 5);
        t[0] = MAKE_HEADER(IMM_HDR_TUPLE, 4);
        t[1] = make_pid(e->pid);
        t[2] = make_small((int64_t)e->count);
        t[3] = make_small((int64_t)(e->ns / 1000000000u));
        t[4] = make_small((int64_t)(e->ns % 1000000000u / 1000u));
        list = cons(p, make_boxed(t), list);
    }
    return list;
}

static Term ms_value(const Info *in)
{
    return (in->fl & BP_CALL_TRACE) ? in->ms : TERM_FALSE;
}

/* trace_info(MFA, meta) alone: [] for a function with breakpoints but no
 * meta trace, false for one without any (BEAM; `all` says false). */
static Term meta_value(const Info *in)
{
    if (in->fl & BP_META)
        return make_pid(in->meta_tracer);
    return in->fl && !in->on_load ? TERM_NIL : TERM_FALSE;
}

static Term meta_ms_value(const Info *in)
{
    return (in->fl & BP_META) ? in->meta_ms : TERM_FALSE;
}

/* BEAM's list (OTP 25.2.3): call_time before call_count, and for on_load
 * no call_time at all. */
static Term all_value(Process *p, const Info *in)
{
    if (!in->fl)
        return TERM_FALSE;
    Term items[6] = {
        pair(p, make_atom(ATOM_TRACED), traced_value(in->fl)),
        pair(p, make_atom(ATOM_MATCH_SPEC), ms_value(in)),
        pair(p, make_atom(ATOM_META), in->fl & BP_META ? meta_value(in) : TERM_FALSE),
        pair(p, make_atom(ATOM_META_MATCH_SPEC), meta_ms_value(in)),
        pair(p, make_atom(ATOM_CALL_TIME), time_value(p, in)),
        pair(p, make_atom(ATOM_CALL_COUNT), count_value(in)),
    };
    if (in->on_load)
        items[4] = items[5];
    Term list = TERM_NIL;
    for (int i = in->on_load ? 4 : 5; i >= 0; i--)
        list = cons(p, items[i], list);
    return list;
}

/* The items' atoms, in BpInfoItem order (predefined: interning one could
 * find the table full). */
static const Atom item_atoms[] = { ATOM_TRACED, ATOM_CALL_COUNT, ATOM_ALL, ATOM_MATCH_SPEC,
                                   ATOM_META, ATOM_META_MATCH_SPEC, ATOM_CALL_TIME };

static const char *const item_names[] = { "traced", "call_count", "all", "match_spec",
                                          "meta", "meta_match_spec", "call_time" };

static Term info_value(Process *p, const Info *in, BpInfoItem item)
{
    switch (item) {
    case BP_INFO_TRACED:
        return traced_value(in->fl);
    case BP_INFO_CALL_COUNT:
        return count_value(in);
    case BP_INFO_MATCH_SPEC:
        return ms_value(in);
    case BP_INFO_META:
        return meta_value(in);
    case BP_INFO_META_MATCH_SPEC:
        return meta_ms_value(in);
    case BP_INFO_CALL_TIME:
        return time_value(p, in);
    default:
        return all_value(p, in);
    }
}

bool bp_info_item(const char *name, BpInfoItem *out)
{
    for (size_t i = 0; i < sizeof item_names / sizeof item_names[0]; i++)
        if (!strcmp(name, item_names[i])) {
            *out = (BpInfoItem)i;
            return true;
        }
    return false;
}

Term bp_trace_info(Process *p, unsigned sid, Atom mod, Atom fun, int arity, BpInfoItem item)
{
    tvm_vm *vm = p->vm;
    vm_code_perm_acquire(vm);
    FuncInfo *fi = find_function(vm, mod, fun, arity);
    Info in = { .ms = TERM_NIL, .meta_ms = TERM_NIL };
    if (fi)
        active_info(p, sid, fi, &in);
    vm_code_perm_release(vm);
    /* The spec copies must survive the reservation below. */
    uint32_t rbase = p->nroots;
    tvm_term hm = vm_root_push(p, in.ms), hmm = vm_root_push(p, in.meta_ms);
    vm_heap_ensure(p, INFO_WORDS + TIME_WORDS * in.ntime, NULL, 0);
    in.ms = vm_root_get(p, hm);
    in.meta_ms = vm_root_get(p, hmm);
    p->nroots = rbase;
    Term v = fi ? info_value(p, &in, item) : make_atom(ATOM_UNDEFINED);
    free(in.time);
    return pair(p, make_atom(item_atoms[item]), v);
}

/*
 * trace_info(on_load, Item): the flags as the functions of a module loaded
 * now would get them from session sid; call_count and call_time are true
 * or false (no module has data yet).
 */
Term bp_trace_info_on_load(Process *p, unsigned sid, BpInfoItem item)
{
    tvm_vm *vm = p->vm;
    unsigned slot = vm_sid_slot(sid);
    vm_code_perm_acquire(vm);
    bool mine = vm->bp->on_load_sid[slot] == sid;
    unsigned ol = mine ? vm->bp->on_load[slot] : 0;
    Info in = { .ms = TERM_NIL, .meta_ms = TERM_NIL, .on_load = true };
    /* alive while the permission is held */
    in.ms = spec_copy(p, mine ? vm->bp->on_load_ms[slot] : NULL);
    vm_code_perm_release(vm);
    tvm_term h = vm_root_push(p, in.ms);
    in.fl = ((ol & TVM_TP_GLOBAL) ? BP_GLOBAL : 0) | ((ol & TVM_TP_LOCAL) ? BP_LOCAL : 0) |
            ((ol & TVM_TP_CALL_COUNT) ? BP_COUNT : 0) | ((ol & TVM_TP_CALL_TIME) ? BP_TIME : 0);
    vm_heap_ensure(p, INFO_WORDS, NULL, 0);
    in.ms = vm_root_get(p, h);
    p->nroots = h.h;
    return pair(p, make_atom(item_atoms[item]), info_value(p, &in, item));
}

/* Session sid's entry in fn's local record, active generation, with
 * `flag`; the permission held. */
static const BpSess *active_local(tvm_vm *vm, unsigned sid, Atom mod, Atom fun, int arity,
                                  uint32_t flag)
{
    FuncInfo *fi = find_function(vm, mod, fun, arity);
    BpRecord *lr = fi ? bp_local_record(vm->bp, fi, false) : NULL;
    const BpSess *e = bp_entry(vm->bp, lr, (unsigned)vm_atomic_load_relaxed(&vm->bp_ix), sid,
                               false);
    return e && (e->flags & flag) ? e : NULL;
}

bool bp_call_count(tvm_vm *vm, unsigned sid, Atom mod, Atom fun, int arity, int64_t *count)
{
    vm_code_perm_acquire(vm);
    const BpSess *e = active_local(vm, sid, mod, fun, arity, BP_COUNT);
    bool ok = e && e->count;
    if (ok)
        *count = bp_count_sum(e->count);
    vm_code_perm_release(vm);
    return ok;
}

bool bp_call_time(tvm_vm *vm, unsigned sid, Atom mod, Atom fun, int arity, BpTimeSample **out,
                  size_t *n)
{
    vm_code_perm_acquire(vm);
    const BpSess *e = active_local(vm, sid, mod, fun, arity, BP_TIME);
    bool ok = e && e->time;
    *out = NULL;
    *n = ok ? bp_time_read(e->time, out) : 0;
    vm_code_perm_release(vm);
    return ok;
}
