/*
 * vm/seqtrace.c - sequential tracing, BEAM's seq_trace (vm/seqtrace.h),
 * with OTP 25's rules:
 *
 * The token.  A process has a token or none ([]).  set_token/2 of any
 * component makes one if there is none: flags 0, label 0, Serial 0, From
 * the process, LastCnt the process's prev_cnt.  get_token/0 shows it as
 * OTP does, {Flags, Label, Serial, From, LastCnt}, Flags OTP's bits.
 *
 * The counters.  Each process keeps curr_cnt (seq_clock) and prev_cnt
 * (seq_lastcnt), apart from its token (they outlive set_token([])).  A
 * send, or a print that prints, by a process with a token moves them on
 * first: curr_cnt + 1 is the token's Serial, prev_cnt its LastCnt, the
 * process its From; the events show {LastCnt, Serial}.  Taking a message
 * out of its queue (not its arrival), the receiver takes the message's
 * token as its own (none: its token is cleared), and with a token sets
 * prev_cnt to the token's Serial and curr_cnt to the larger of the two.
 * set_token(serial, {P, C}) sets LastCnt and prev_cnt to P, Serial and
 * curr_cnt to C (OTP reads them unsigned; here they are signed, which
 * differs only for the negative values OTP also accepts).
 *
 * What carries a token.  Every send of a process (erlang:send/2, and
 * tvm_send, a send of its env's process or call context), and the 'EXIT' signal
 * its exit sends each linked process (a send event, as OTP's): the
 * process's token.  exit/2's signal carries none, so a trapped one
 * clears its receiver's token, as OTP's does.  'DOWN' messages, a link's
 * immediate noproc 'EXIT' and the VM's own messages (vm_send with no
 * sender: trace messages, trace_delivered's reply) carry VM_SEQ_KEEP: their receiver's token stays as it is, as
 * OTP's messages from no process (its timers' too) leave it.  spawn:
 * OTP 25's spawn is a spawn_request message the child receives and a
 * spawn_reply it sends back, both traced; tracevm spawns directly, so
 * the parent's counters move on as for a send and the child starts with
 * the token as if it had received that request, and neither writes an
 * event (docs/beam.md).
 *
 * Events.  Plain messages to the system tracer (tvm_vm.seq_tracer), made
 * whole here off any heap and delivered without a token: {seq_trace,
 * Label, Info} or, with a timestamp flag, {seq_trace, Label, Info, Ts}
 * (timestamp wins over strict_monotonic_timestamp, which wins over
 * monotonic_timestamp, vm_time_stamp's forms).  No tracer, or a dead
 * one: the event is dropped and nothing else changes.
 *
 * reset_trace/0 bumps tvm_vm.seq_gen: every token made before (a
 * process's or one in a message) is dropped at its next use, and a
 * process's counters start again from 0 at theirs (seq_cgen); OTP walks
 * every process instead.
 *
 * Cost.  A process without a token pays one test of Process.seq on a
 * send (vm/mailbox.c, send_counted) and one of Process.seq | Message.seq
 * on a receive (vm_proc_accept); everything here runs only past them.
 */
#include "vm/seqtrace.h"

#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/bif_internal.h"
#include "vm/heap.h"
#include "vm/lend.h"
#include "vm/sched.h"
#include "vm/time.h"
#include "vm/vm.h"

const VmSeqToken vm_seq_keep;

/* OTP's small integers are 60 bits: a serial's counters outside them are
 * badarg there, so here too (tracevm's smalls are wider). */
#define OTP_SMALL_MAX (((int64_t)1 << 59) - 1)
#define OTP_SMALL_MIN (-((int64_t)1 << 59))

/* ==== tokens ==== */

static uint64_t current_gen(const Process *p)
{
    return vm_atomic_load_relaxed(&p->vm->seq_gen);
}

/* The bytes of t with its label (what a message's extra space holds). */
static size_t token_bytes(const VmSeqToken *t)
{
    return sizeof(VmSeqToken) + t->words * sizeof(Term);
}

/* Copies t (its label into the copy's own data) to `at`, which has
 * token_bytes(t) bytes. */
static VmSeqToken *token_copy_to(void *at, const VmSeqToken *t)
{
    VmSeqToken *c = at;
    *c = *t;
    Term *hp = c->data;
    c->label = vm_copy_to(&hp, t->label);
    return c;
}

/* A token of its own allocation: t's fields with `label` (copied, `words`
 * words: term_size(label)). */
static VmSeqToken *token_with_label(const VmSeqToken *t, Term label, size_t words)
{
    VmSeqToken *c = vm_malloc(sizeof(VmSeqToken) + words * sizeof(Term));
    *c = *t;
    c->words = words;
    Term *hp = c->data;
    c->label = vm_copy_to(&hp, label);
    return c;
}

void vm_seq_free(Process *p)
{
    free(p->seq);
    p->seq = NULL;
}

/* p's counters, started again from 0 when reset_trace came since they
 * were last used. */
static void counters(Process *p)
{
    uint64_t gen = current_gen(p);
    if (p->seq_cgen != gen) {
        p->seq_clock = p->seq_lastcnt = 0;
        p->seq_cgen = gen;
    }
}

/* p's token, dropped first when reset_trace came after it was made. */
static VmSeqToken *live(Process *p)
{
    if (p->seq && p->seq->gen != current_gen(p))
        vm_seq_free(p);
    return p->seq;
}

/* p's token, made as OTP makes one when there is none. */
static VmSeqToken *ensure(Process *p)
{
    if (live(p))
        return p->seq;
    counters(p);
    VmSeqToken t = { .gen = current_gen(p), .serial = 0, .lastcnt = p->seq_lastcnt,
                     .from = p->pid, .flags = 0, .words = 0, .label = make_small(0) };
    p->seq = vm_malloc(sizeof t);
    *p->seq = t;
    return p->seq;
}

/* A send (or a print) moves p's counters on into its token. */
static void update_serial(Process *p)
{
    counters(p);
    VmSeqToken *t = p->seq;
    t->from = p->pid;
    t->serial = ++p->seq_clock;
    t->lastcnt = p->seq_lastcnt;
}

/* ==== events ==== */

static VmTsForm ts_form(uint32_t flags)
{
    if (flags & VM_SEQ_TIMESTAMP)
        return VM_TS_NOW;
    if (flags & VM_SEQ_STRICT_TS)
        return VM_TS_STRICT;
    return (flags & VM_SEQ_MONO_TS) ? VM_TS_MONO : VM_TS_NONE;
}

static Term tuple_at(Term **hp, const Term *e, unsigned n)
{
    Term *t = *hp;
    t[0] = MAKE_HEADER(IMM_HDR_TUPLE, n);
    memcpy(t + 1, e, n * sizeof(Term));
    *hp += n + 1;
    return make_boxed(t);
}

/*
 * {seq_trace, Label, {Tag, {LastCnt, Serial}, From, To, Last}[, Ts]}
 * of token t to the system tracer, if there is one: made whole off any
 * heap, delivered with VM_SEQ_KEEP (it carries no token).  `mw`: Last's
 * words, term_size(Last), counted (and bounded) by the caller.
 */
static void emit(tvm_vm *vm, const VmSeqToken *t, Atom tag, Term from, Term to, Term last,
                 size_t mw)
{
    uint64_t tracer = vm_atomic_load_relaxed(&vm->seq_tracer);
    if (!tracer)
        return;
    VmTsForm form = ts_form(t->flags);
    int64_t ts[3];
    unsigned nts = form == VM_TS_NONE ? 0 : vm_time_stamp(form, vm_time_mono_ns(), ts);
    size_t lw = t->words;
    size_t words = 5 + 6 + 3 + (nts ? nts + 1 : 0) + lw + mw;
    Term outer[4] = { make_atom(ATOM_SEQ_TRACE) };
    Message *m = vm_message_alloc(make_atom(ATOM_OK), words, 0);
    Term *hp = m->data;
    outer[1] = vm_copy_to(&hp, t->label);
    Term serial[2] = { make_small(t->lastcnt), make_small(t->serial) };
    Term info[5] = { make_atom(tag), tuple_at(&hp, serial, 2), from, to, vm_copy_to(&hp, last) };
    outer[2] = tuple_at(&hp, info, 5);
    unsigned n = 3;
    if (form != VM_TS_NONE) {
        Term e[3];
        for (unsigned i = 0; i < (nts ? nts : 1); i++)
            e[i] = make_small(ts[i]);
        outer[n++] = nts ? tuple_at(&hp, e, nts) : e[0];
    }
    m->term = tuple_at(&hp, outer, n);
    m->words = (size_t)(hp - m->data);
    m->seq = VM_SEQ_KEEP;
    vm_message_send(vm, tracer, m);
}

/* ==== sends, receives, spawns ==== */

Message *vm_seq_message(Process *p, uint64_t to, Term msg, size_t words)
{
    const VmSeqToken *t = live(p);
    if (!t)
        return vm_message_alloc(msg, words, 0);
    update_serial(p);
    if (t->flags & VM_SEQ_SEND)
        emit(p->vm, t, ATOM_SEND, make_pid(p->pid), make_pid(to), msg, words);
    Message *m = vm_message_alloc(msg, words, token_bytes(t));
    m->seq = token_copy_to(m->data + words, t);
    return m;
}

void vm_seq_receive(Process *p, const Message *m)
{
    const VmSeqToken *t = m->seq;
    if (t == VM_SEQ_KEEP)
        return;
    vm_seq_free(p);
    if (!t || t->gen != current_gen(p))
        return;   /* sent without a token, or one reset_trace dropped */
    p->seq = token_with_label(t, t->label, t->words);
    counters(p);
    p->seq_lastcnt = t->serial;
    if (t->serial > p->seq_clock)
        p->seq_clock = t->serial;
    if (t->flags & VM_SEQ_RECEIVE)
        emit(p->vm, t, ATOM_RECEIVE, make_pid(t->from), make_pid(p->pid), m->term, m->words);
}

void vm_seq_spawn(Process *parent, Process *child)
{
    const VmSeqToken *t = live(parent);
    if (!t)
        return;
    update_serial(parent);
    child->seq = token_with_label(t, t->label, t->words);
    child->seq_cgen = t->gen;
    child->seq_lastcnt = child->seq_clock = t->serial;
}

/* ==== the natives ==== */

/* The flag a component names (0: none of the six). */
static uint32_t flag_of(Term c)
{
    static const struct {
        Atom name;
        uint32_t flag;
    } flags[] = {
        { ATOM_SEND, VM_SEQ_SEND },
        { ATOM_RECEIVE, VM_SEQ_RECEIVE },
        { ATOM_PRINT, VM_SEQ_PRINT },
        { ATOM_TIMESTAMP, VM_SEQ_TIMESTAMP },
        { ATOM_STRICT_MONOTONIC_TIMESTAMP, VM_SEQ_STRICT_TS },
        { ATOM_MONOTONIC_TIMESTAMP, VM_SEQ_MONO_TS },
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (c == make_atom(flags[i].name))
            return flags[i].flag;
    return 0;
}

/* Room for `words` on p's heap (extra[] kept across a collection); NULL
 * when p's max_heap_size refuses (p is being killed). */
static Term *room(Process *p, size_t words, Term *extra, size_t nextra)
{
    if (vm_heap_max_refuses(p, words))
        return NULL;
    vm_heap_ensure(p, words, extra, nextra);
    return vm_heap_alloc(p, words);
}

/* Words of token_term(t). */
static size_t token_words(const VmSeqToken *t)
{
    return t ? 6 + t->words : 0;
}

/* t as get_token/0 shows it, at *hp ([] for none). */
static Term token_term(Term **hp, const VmSeqToken *t)
{
    if (!t)
        return TERM_NIL;
    Term e[5] = { make_small(t->flags), vm_copy_to(hp, t->label), make_small(t->serial),
                  make_pid(t->from), make_small(t->lastcnt) };
    return tuple_at(hp, e, 5);
}

/* {Prev, Curr} of OTP's small integers: the two in *prev, *curr. */
static bool serial_arg(Term v, int64_t *prev, int64_t *curr)
{
    if (!term_is_tuple(v) || tuple_arity(v) != 2)
        return false;
    const Term *e = tuple_elems(v);
    for (int i = 0; i < 2; i++)
        if (!term_is_small(e[i]) || small_value(e[i]) < OTP_SMALL_MIN ||
            small_value(e[i]) > OTP_SMALL_MAX)
            return false;
    *prev = small_value(e[0]);
    *curr = small_value(e[1]);
    return true;
}

/*
 * erlang:seq_trace(Component, Value) as OTP's: sets one component and
 * gives the old value in *old (on p's heap).  The value is checked before
 * a token is made, so a badarg leaves p's token as it was.  *val is a
 * root kept across a collection.
 */
static tvm_status set_component(Process *p, Term comp, Term *val, Term *old)
{
    if (comp == make_atom(ATOM_SEQUENTIAL_TRACE_TOKEN)) {
        if (*val != TERM_NIL)
            return vm_bif_error(p, make_atom(ATOM_BADARG));
        const VmSeqToken *t = live(p);
        Term *hp = room(p, token_words(t), NULL, 0);
        if (t && !hp)
            return TVM_EXCEPTION;
        *old = token_term(&hp, t);
        vm_seq_free(p);
        return TVM_OK;
    }
    if (comp == make_atom(ATOM_LABEL)) {
        size_t lw = p->seq ? p->seq->words : 0;
        Term *hp = lw ? room(p, lw, val, 1) : NULL;
        if (lw && !hp)
            return TVM_EXCEPTION;
        /* The label goes with every message the token does: a copy
         * between processes, bounded as a message is (a term with shared
         * parts copies flat; OTP has no bound). */
        bool lent;
        size_t words = vm_size_lend(p, *val, p->vm->max_msg, &lent);
        if (words == SIZE_MAX) {
            vm_lend_done(p, lent);
            return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
        }
        VmSeqToken *t = ensure(p);
        *old = vm_copy_to(&hp, t->label);
        p->seq = token_with_label(t, *val, words);
        vm_lend_done(p, lent);
        free(t);
        return TVM_OK;
    }
    if (comp == make_atom(ATOM_SERIAL)) {
        int64_t prev, curr;
        if (!serial_arg(*val, &prev, &curr))
            return vm_bif_error(p, make_atom(ATOM_BADARG));
        Term *hp = room(p, 3, NULL, 0);
        if (!hp)
            return TVM_EXCEPTION;
        VmSeqToken *t = ensure(p);
        Term e[2] = { make_small(t->lastcnt), make_small(t->serial) };
        *old = tuple_at(&hp, e, 2);
        t->lastcnt = p->seq_lastcnt = prev;
        t->serial = p->seq_clock = curr;
        p->seq_cgen = t->gen;
        return TVM_OK;
    }
    uint32_t f = flag_of(comp);
    if (!f || (*val != TERM_TRUE && *val != TERM_FALSE))
        return vm_bif_error(p, make_atom(ATOM_BADARG));
    VmSeqToken *t = ensure(p);
    *old = (t->flags & f) ? TERM_TRUE : TERM_FALSE;
    t->flags = *val == TERM_TRUE ? t->flags | f : t->flags & ~f;
    return TVM_OK;
}

/* set_token(Component, Value): the old value. */
NATIVE_FN(seq_set_token2)
{
    SETUP();
    Term val = ARG(1), old;
    tvm_status st = set_component(p, ARG(0), &val, &old);
    if (st != TVM_OK)
        return st;
    RETURN(old);
}

/*
 * set_token([]): the old token.  set_token({Flags, Label, Serial, _From,
 * LastCnt}): ok, as seq_trace.erl does it: the label, then the serial
 * {LastCnt, Serial}, then each flag, one erlang:seq_trace/2 at a time
 * (a bad serial raises badarg with the label already set; a Flags that
 * is no integer raises badarith first, from its `band`); anything else
 * is function_clause.
 */
NATIVE_FN(seq_set_token1)
{
    SETUP();
    Term tok = ARG(0), old;
    if (tok == TERM_NIL) {
        Term v = TERM_NIL;
        tvm_status st = set_component(p, make_atom(ATOM_SEQUENTIAL_TRACE_TOKEN), &v, &old);
        if (st != TVM_OK)
            return st;
        RETURN(old);
    }
    if (!term_is_tuple(tok) || tuple_arity(tok) != 5)
        return vm_bif_error(p, make_atom(ATOM_FUNCTION_CLAUSE));
    if (!term_is_small(tuple_elems(tok)[0]))
        return vm_bif_error(p, make_atom(ATOM_BADARITH));
    int64_t flags = small_value(tuple_elems(tok)[0]);
    Term v = tuple_elems(tok)[1];
    tvm_status st = set_component(p, make_atom(ATOM_LABEL), &v, &old);
    if (st != TVM_OK)
        return st;
    tok = ARG(0);   /* the label's copy may have collected */
    Term serial[3] = { MAKE_HEADER(IMM_HDR_TUPLE, 2), tuple_elems(tok)[4], tuple_elems(tok)[2] };
    v = make_boxed(serial);
    if ((st = set_component(p, make_atom(ATOM_SERIAL), &v, &old)) != TVM_OK)
        return st;
    static const Atom order[] = { ATOM_PRINT, ATOM_SEND, ATOM_RECEIVE, ATOM_TIMESTAMP,
                                  ATOM_STRICT_MONOTONIC_TIMESTAMP, ATOM_MONOTONIC_TIMESTAMP };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        v = (flags & flag_of(make_atom(order[i]))) ? TERM_TRUE : TERM_FALSE;
        if ((st = set_component(p, make_atom(order[i]), &v, &old)) != TVM_OK)
            return st;
    }
    RETURN(make_atom(ATOM_OK));
}

/* get_token(): [] or {Flags, Label, Serial, From, LastCnt}. */
NATIVE_FN(seq_get_token0)
{
    SETUP();
    const VmSeqToken *t = live(p);
    Term *hp = room(p, token_words(t), NULL, 0);
    if (t && !hp)
        return TVM_EXCEPTION;
    RETURN(token_term(&hp, t));
}

/* get_token(Component): {Component, Value}; [] for the label and the
 * serial when there is no token, {Flag, false} for a flag. */
NATIVE_FN(seq_get_token1)
{
    SETUP();
    Term c = ARG(0);
    const VmSeqToken *t = live(p);
    uint32_t f = flag_of(c);
    if (f)
        RETURN(vm_make_tuple(p, 2, (Term[]){ c, (t && (t->flags & f)) ? TERM_TRUE : TERM_FALSE }));
    if (c != make_atom(ATOM_LABEL) && c != make_atom(ATOM_SERIAL))
        return vm_bif_error(p, make_atom(ATOM_BADARG));
    if (!t)
        RETURN(TERM_NIL);
    Term *hp = room(p, 3 + (c == make_atom(ATOM_LABEL) ? t->words : 3), NULL, 0);
    if (!hp)
        return TVM_EXCEPTION;
    Term e[2] = { c, 0 };
    if (c == make_atom(ATOM_LABEL)) {
        e[1] = vm_copy_to(&hp, t->label);
    } else {
        Term s[2] = { make_small(t->lastcnt), make_small(t->serial) };
        e[1] = tuple_at(&hp, s, 2);
    }
    RETURN(tuple_at(&hp, e, 2));
}

/* A print: the serial moves on, and the event goes when asked for.
 * Info is copied into it as a message is, within max_message_words
 * (counted flat): system_limit past it, before anything moves. */
static tvm_status print(Process *p, Term info)
{
    size_t words = 0;
    if (p->seq->flags & VM_SEQ_PRINT) {
        bool lent;
        words = vm_size_lend(p, info, p->vm->max_msg, &lent);
        vm_lend_done(p, lent);
        if (words == SIZE_MAX)
            return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    }
    update_serial(p);
    const VmSeqToken *t = p->seq;
    if (t->flags & VM_SEQ_PRINT)
        emit(p->vm, t, ATOM_PRINT, make_pid(p->pid), TERM_NIL, info, words);
    return TVM_OK;
}

/* print(Info): ok (with a token only: a print). */
NATIVE_FN(seq_print1)
{
    SETUP();
    if (live(p) && print(p, ARG(0)) != TVM_OK)
        return TVM_EXCEPTION;
    RETURN(make_atom(ATOM_OK));
}

/* print(Label, Info): ok; a print only when the token's label is
 * exactly Label; an atom Label is badarg (seq_trace.erl's guard). */
NATIVE_FN(seq_print2)
{
    SETUP();
    Term label = ARG(0);
    if (term_is_atom(label))
        return vm_bif_error(p, make_atom(ATOM_BADARG));
    const VmSeqToken *t = live(p);
    if (t) {
        int c = vm_compare_lend(p, label, t->label);
        if (c == TERM_CMP_LIMIT)
            return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
        if (c == 0 && print(p, ARG(1)) != TVM_OK)
            return TVM_EXCEPTION;
    }
    RETURN(make_atom(ATOM_OK));
}

/* reset_trace(): true; every token made so far is dropped at its next
 * use, and every process's counters start from 0 again. */
NATIVE_FN(seq_reset_trace)
{
    SETUP();
    vm_atomic_fetch_add_full(&p->vm->seq_gen, 1);
    RETURN(TERM_TRUE);
}

static bool alive(tvm_vm *vm, uint64_t pid)
{
    SchedSystem *sys = vm_sched_of(vm);
    Process *t = sys ? vm_proc_get_live(sys, pid) : NULL;
    if (t)
        vm_proc_put(sys, t);
    return t != NULL;
}

/* The system tracer as get_system_tracer/0 shows it: false once it is
 * no longer alive, as OTP's (the setting stays; events to it drop). */
static Term tracer_term(tvm_vm *vm, uintptr_t pid)
{
    return pid && alive(vm, pid) ? make_pid(pid) : TERM_FALSE;
}

/* set_system_tracer(Pid | false): the old one, or false.  A pid that is
 * not alive is badarg, as OTP's; so are OTP's ports and {Module, State}
 * tracers, which tracevm does not have. */
NATIVE_FN(seq_set_system_tracer)
{
    SETUP();
    Term t = ARG(0);
    if (t != TERM_FALSE && (!term_is_pid(t) || !alive(p->vm, pid_value(t))))
        return vm_bif_error(p, make_atom(ATOM_BADARG));
    uintptr_t nw = t == TERM_FALSE ? 0 : (uintptr_t)pid_value(t), old;
    do
        old = vm_atomic_load_relaxed(&p->vm->seq_tracer);
    while (!vm_atomic_cas_full(&p->vm->seq_tracer, old, nw));
    RETURN(tracer_term(p->vm, old));
}

/* get_system_tracer(): the pid, or false. */
NATIVE_FN(seq_get_system_tracer)
{
    SETUP();
    RETURN(tracer_term(p->vm, vm_atomic_load_relaxed(&p->vm->seq_tracer)));
}

static const VmNativeDef natives[] = {
    { "seq_trace", "set_token", 1, seq_set_token1 },
    { "seq_trace", "set_token", 2, seq_set_token2 },
    { "seq_trace", "get_token", 0, seq_get_token0 },
    { "seq_trace", "get_token", 1, seq_get_token1 },
    { "seq_trace", "print", 1, seq_print1 },
    { "seq_trace", "print", 2, seq_print2 },
    { "seq_trace", "reset_trace", 0, seq_reset_trace },
    { "seq_trace", "set_system_tracer", 1, seq_set_system_tracer },
    { "seq_trace", "get_system_tracer", 0, seq_get_system_tracer },
};

VmNativeTable vm_seq_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
