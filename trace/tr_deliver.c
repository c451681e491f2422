/*
 * trace/tr_deliver.c - a session whose tracer is a process gets every
 * event as a message, in the shape BEAM's tracer gets it
 * (trace:session_create/3 with a pid):
 *
 *   {trace, Pid, call, {M, F, Args}}            {trace, Pid, call, {M, F, Arity}}
 *   {trace, Pid, call, {M, F, Args}, Msg}       (match spec {message, Msg})
 *   {trace, Pid, return_from, {M, F, A}, Value}
 *   {trace, Pid, exception_from, {M, F, A}, {Class, Reason}}
 *   {trace, Pid, return_to, {M, F, A}}
 *   {trace, Pid, spawn, Child, {M, F, Args}}    {trace, Pid, exit, Reason}
 *   {trace, Pid, in | out, {M, F, A} | 0}
 *   {trace, Pid, send, Msg, To}                 {trace, Pid, 'receive', Msg}
 *   trace_ts instead of trace, with the timestamp (CLOCK_MONOTONIC ns)
 *   last, for a process with the timestamp flag
 *   {trace_stopped, Session, Reason, Written, Lost}    (the last one)
 *
 * The shape of each kind is its text form in trace/tr_events.def, the
 * same table the text sink prints from, read here as a term: letters take
 * from the event (M, Z, T, R, C as there), braces make tuples.
 *
 * Where the message is built.  Not on the emitting process's heap: that
 * could collect in the middle of the interpreter's, the scheduler's or a
 * native's work (a spawn, a yield, a receive), moving terms that the
 * caller, and the next session's emit, still hold in C variables.  The
 * message is laid out in a per-thread scratch area instead (its tuples
 * and lists there, its leaves pointing into the process's heap, which
 * nothing moves meanwhile) and vm_send copies it into the tracer's
 * mailbox.  So an emit never collects and never suspends.  Pid is
 * 'undefined' for a call context (pid 0).
 */
#include "trace/tr_deliver.h"

#include <string.h>

#include "trace/tr_clock.h"
#include "trace/tr_session.h"
#include "vm/atom.h"
#include "vm/sched.h"
#include "vm/time.h"

/* Words of scratch: the largest message is a call with VM_MAX_ARITY
 * arguments (two words each), a message, a backtrace and a stamp (a
 * tuple of up to 3). */
#define TR_DELIVER_WORDS (2 * VM_MAX_ARITY + 64)

typedef struct Build {
    Term *hp, *end;
    const TrEmit *ev;
    unsigned next, left;       /* the next payload term, and how many remain */
} Build;

static Term *take(Build *b, size_t n)
{
    if (b->hp + n > b->end)
        return NULL;
    Term *t = b->hp;
    b->hp += n;
    return t;
}

static Term tuple(Build *b, const Term *e, unsigned n)
{
    Term *t = take(b, n + 1u);
    if (!t)
        return THE_NONE;
    t[0] = MAKE_HEADER(IMM_HDR_TUPLE, n);
    memcpy(t + 1, e, n * sizeof(Term));
    return make_boxed(t);
}

/* Each kind's tag, predefined (tr_events.def's atom column): a delivery
 * interns nothing, so a full atom table turns no tag into undefined
 * (docs/safety.md), and takes no lock for it.  test_sessions.c
 * (a_tracer_process_gets_every_kind_on_a_full_atom_table) checks every
 * kind a process can be sent against the text sink's tags. */
static const Atom tag_atoms[TR_K__COUNT] = {
#define TR_EVENT(K, name, tag, atom, text, nfixed, rest, f1, f2, f3) [TR_K_##K] = ATOM_##atom,
#include "trace/tr_events.def"
#undef TR_EVENT
};

static Term next_term(Build *b)
{
    if (!b->left)
        return make_atom(ATOM_UNDEFINED);
    b->left--;
    return b->ev->terms[b->next++];
}

/* A list of the next n payload terms. */
static Term list_of(Build *b, unsigned n)
{
    Term *cells = take(b, 2u * n);
    if (!cells)
        return THE_NONE;
    Term l = TERM_NIL;
    for (unsigned i = n; i-- > 0;) {
        cells[2 * i] = b->ev->terms[b->next + i];
        cells[2 * i + 1] = l;
        l = make_cons_ptr(&cells[2 * i]);
    }
    b->next += n;
    b->left -= n;
    return l;
}

static Term mfa(Build *b, bool zero)
{
    const TrEmit *ev = b->ev;
    if (ev->flags & TR_F_NO_MFA)
        return zero ? make_small(0) : make_atom(ATOM_UNDEFINED);
    Term e[3] = { make_atom(ev->mod), make_atom(ev->fun), make_small(ev->arity) };
    return tuple(b, e, 3);
}

/* {M, F, [the remaining n terms]} */
static Term mfargs(Build *b, unsigned n)
{
    Term e[3] = { make_atom(b->ev->mod), make_atom(b->ev->fun), list_of(b, n) };
    return tuple(b, e, 3);
}

/* Appends the elements one shape letter (or braced group) stands for to
 * out[*n]; returns the shape after it. */
static const char *shape_elems(Build *b, const char *f, Term *out, unsigned *n, unsigned max)
{
    const TrEmit *ev = b->ev;
    switch (*f) {
    case 'M': out[(*n)++] = mfa(b, false); return f + 1;
    case 'Z': out[(*n)++] = mfa(b, true); return f + 1;
    case 'T': out[(*n)++] = next_term(b); return f + 1;
    case 'R': out[(*n)++] = mfargs(b, b->left); return f + 1;
    case 'C': {
        unsigned extra = !!(ev->flags & TR_F_MESSAGE) + !!(ev->flags & TR_F_BACKTRACE);
        unsigned nargs = b->left >= extra ? b->left - extra : 0;
        if (ev->flags & TR_F_ARITY) {
            out[(*n)++] = mfa(b, false);
            b->next += nargs;
            b->left -= nargs;
        } else {
            out[(*n)++] = mfargs(b, nargs);
        }
        if ((ev->flags & TR_F_MESSAGE) && *n < max)
            out[(*n)++] = next_term(b);
        if ((ev->flags & TR_F_BACKTRACE) && *n < max) {
            Term e[2] = { make_atom(ATOM_BACKTRACE), next_term(b) };
            out[(*n)++] = tuple(b, e, 2);
        }
        return f + 1;
    }
    case '{': {
        Term e[8];
        unsigned k = 0;
        f++;
        while (*f && *f != '}') {
            if (*f == ',')
                f++;
            else
                f = shape_elems(b, f, e, &k, 8);
        }
        out[(*n)++] = tuple(b, e, k);
        return *f ? f + 1 : f;
    }
    default:
        return f + 1;
    }
}

static Term pid_term(uint64_t pid)
{
    return pid ? make_pid(pid) : make_atom(ATOM_UNDEFINED);
}

static Term *scratch(void)
{
    static __thread Term buf[TR_DELIVER_WORDS];
    return buf;
}

bool tr_deliver(Process *p, TrSession *s, const TrEmit *ev)
{
    if (tr_deliver_to(p, s->tracer, ev) != VM_SEND_OK)
        return false;
    vm_atomic_fetch_add_relaxed(&s->sent, 1);
    return true;
}

/* The stamp a trace_ts message ends with, read now (the event's time:
 * the traced process delivers as it emits), in BEAM's form `ts`. */
_Static_assert((int)TR_TS_NOW == (int)VM_TS_NOW && (int)TR_TS_MONO == (int)VM_TS_MONO &&
                   (int)TR_TS_STRICT == (int)VM_TS_STRICT,
               "TrTsForm is VmTsForm");

static Term stamp(Build *b, TrTsForm ts)
{
    int64_t v[3];
    Term e[3];
    /* The same enumeration as vm/time.h's VmTsForm, in the same order. */
    unsigned n = vm_time_stamp((VmTsForm)ts, (int64_t)tr_mono_ns(), v);
    if (n == 0)
        return make_small(v[0]);
    for (unsigned i = 0; i < n; i++)
        e[i] = make_small(v[i]);
    return tuple(b, e, n);
}

VmSend tr_deliver_to(Process *p, uint64_t tracer, const TrEmit *ev)
{
    if ((unsigned)ev->kind >= TR_K__COUNT)
        return VM_SEND_TOO_BIG;
    const TrKindInfo *k = &tr_kinds[ev->kind];
    Term *buf = scratch();
    Build b = { buf, buf + TR_DELIVER_WORDS, ev, 0, ev->nterms };
    TrTsForm ts = tr_ts_form(ev->flags);
    Term e[8];
    unsigned n = 0;
    e[n++] = make_atom(ts ? ATOM_TRACE_TS : ATOM_TRACE);
    e[n++] = pid_term(ev->pid);
    e[n++] = make_atom(tag_atoms[ev->kind]);
    for (const char *f = k->text; *f && n < 7;)
        f = *f == ',' ? f + 1 : shape_elems(&b, f, e, &n, 7);
    if (ts)
        e[n++] = stamp(&b, ts);
    for (unsigned i = 0; i < n; i++)
        if (e[i] == THE_NONE)
            return VM_SEND_TOO_BIG;   /* cannot happen: the scratch fits the largest */
    Term msg = tuple(&b, e, n);
    if (msg == THE_NONE)
        return VM_SEND_TOO_BIG;
    return vm_send(p->vm, NULL, tracer, msg);
}

Term tr_session_handle(Term *hp, uint64_t id)
{
    hp[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
    hp[1] = make_atom(ATOM_TRACE_SESSION);
    hp[2] = make_small((int64_t)id);
    return make_boxed(hp);
}

void tr_deliver_stopped(tvm_vm *vm, TrSession *s, Term reason, uint64_t written, uint64_t lost)
{
    Term h[3], t[6];
    t[0] = MAKE_HEADER(IMM_HDR_TUPLE, 5);
    t[1] = make_atom(ATOM_TRACE_STOPPED);
    t[2] = tr_session_handle(h, s->id);
    t[3] = reason;
    t[4] = make_small((int64_t)written);
    t[5] = make_small((int64_t)lost);
    vm_send(vm, NULL, s->tracer, make_boxed(t));
}
