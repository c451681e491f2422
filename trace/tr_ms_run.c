/*
 * trace/tr_ms_run.c - match specifications: the runner (the compiler and
 * the compiled form are in tr_ms_compile.c).
 *
 * Runs write only the caller's TrMsScratch and TrMsResult, so one spec
 * can be run by any number of threads at once without synchronisation;
 * the memory ordering of its publication is the engine's (the release
 * that publishes a breakpoint generation).  Every jump of the program goes
 * forward, so a run's time is bounded by the program size plus the step
 * budget of term comparisons.
 */
#include "trace/tr_ms_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/tr_vm.h"
#include "vm/atom.h"
#include "vm/atomics.h"
#include "vm/heap.h"
#include "vm/module.h"
#include "vm/vm.h"

/* ================================================================== */
/* The runner                                                         */

typedef struct Run {
    const TrMs *ms;
    const Term *args;
    unsigned arity;
    const TrMsCtx *ctx;
    TrMsScratch *s;
    TrMsResult *res;
    Term *hp;             /* next free word of s->heap */
    uint32_t steps;       /* what is left of TR_MS_MAX_STEPS */
} Run;

/* Rank in Erlang's term order (as vm/term.c orders them). */
static int rank(Term t)
{
    switch (term_tag(t)) {
    case TAG_SMALL: return 0;
    case TAG_LIST: return 6;
    case TAG_IMM:
        return IMM_SUB(t) == IMM_ATOM ? 1 : IMM_SUB(t) == IMM_PID ? 3 : 5;
    default:
        switch (boxed_sub(t)) {
        case IMM_HDR_FUN: return 2;
        case IMM_HDR_TUPLE: return 4;
        default: return 7;
        }
    }
}

/*
 * Compares a and b in term order into *out (<0, 0, >0) without recursion:
 * an explicit stack of element sequences; the last element of a sequence
 * (a list's tail, a tuple's last element) replaces its frame, so long
 * lists cost no depth.  False when the step budget or TR_MS_CMP_DEPTH
 * runs out (the caller raises).
 */
static bool ms_compare(Run *r, Term a, Term b, int *out)
{
    TrMsCmpFrame *st = r->s->cmp;
    unsigned sp = 0;
    for (;;) {
        if (a != b) {
            if (r->steps == 0)
                return false;
            r->steps--;
            int ra = rank(a), rb = rank(b);
            if (ra != rb) {
                *out = ra < rb ? -1 : 1;
                return true;
            }
            if (ra == 4 && tuple_arity(a) != tuple_arity(b)) {
                *out = tuple_arity(a) < tuple_arity(b) ? -1 : 1;
                return true;
            }
            if (ra == 4 || ra == 6) {
                if (sp == TR_MS_CMP_DEPTH)
                    return false;
                bool tup = ra == 4;
                st[sp++] = (TrMsCmpFrame){ tup ? tuple_elems(a) : cons_ptr(a),
                                           tup ? tuple_elems(b) : cons_ptr(b), 0,
                                           tup ? tuple_arity(a) : 2 };
                if (st[sp - 1].n == 0)
                    sp--;
            } else {
                /* Leaves: term_compare does not recurse on these. */
                int c = term_compare(a, b);
                if (c) {
                    *out = c;
                    return true;
                }
            }
        }
        if (sp == 0) {
            *out = 0;
            return true;
        }
        TrMsCmpFrame *f = &st[sp - 1];
        a = f->a[f->i];
        b = f->b[f->i];
        if (++f->i == f->n)
            sp--;
    }
}

static Term *halloc(Run *r, size_t words)
{
    Term *p = r->hp;
    r->hp += words;
    VM_ASSERT(r->hp <= r->s->heap + TR_MS_SCRATCH_WORDS, "scratch bounded at compile time");
    return p;
}

static Term build_list(Run *r, const Term *elems, unsigned n, Term tail)
{
    Term *cells = halloc(r, 2 * (size_t)n);
    for (unsigned i = n; i-- > 0;) {
        cells[2 * i] = elems[i];
        cells[2 * i + 1] = tail;
        tail = make_cons_ptr(&cells[2 * i]);
    }
    return tail;
}

static Term build_tuple(Run *r, const Term *elems, unsigned n)
{
    Term *t = halloc(r, 1 + (size_t)n);
    t[0] = MAKE_HEADER(IMM_HDR_TUPLE, n);
    memcpy(t + 1, elems, n * sizeof(Term));
    return make_boxed(t);
}

/* ---- guard functions: each returns false to raise ---- */

static bool ints(Term a, Term b, int64_t *x, int64_t *y)
{
    if (!term_is_small(a) || !term_is_small(b))
        return false;
    *x = small_value(a);
    *y = small_value(b);
    return true;
}

static bool int_result(int64_t v, Term *out)
{
    if (!small_fits(v))
        return false;
    *out = make_small(v);
    return true;
}

static bool shift_left(int64_t x, int64_t n, Term *out)
{
    if (n < 0) {
        *out = make_small(n <= -63 ? (x < 0 ? -1 : 0) : x >> -n);
        return true;
    }
    if (x == 0) {
        *out = make_small(0);
        return true;
    }
    if (n >= 62)
        return false;
    int64_t v = (int64_t)((uint64_t)x << n);
    return (v >> n) == x && int_result(v, out);
}

static bool arith(unsigned id, Term a, Term b, Term *out)
{
    int64_t x, y, v;
    if (!ints(a, b, &x, &y))
        return false;
    switch (id) {
    case F_ADD: return int_result(x + y, out);
    case F_SUB: return int_result(x - y, out);
    case F_MUL: return !__builtin_mul_overflow(x, y, &v) && int_result(v, out);
    case F_DIV: return y != 0 && int_result(x / y, out);
    case F_REM: return y != 0 && int_result(x % y, out);
    case F_BAND: return int_result(x & y, out);
    case F_BOR: return int_result(x | y, out);
    case F_BXOR: return int_result(x ^ y, out);
    case F_BSL: return shift_left(x, y, out);
    case F_BSR: return y == INT64_MIN ? false : shift_left(x, -y, out);
    default: VM_UNREACHABLE();
    }
}

static bool compare_fn(Run *r, unsigned id, Term a, Term b, Term *out)
{
    int c;
    if (term_is_small(a) && term_is_small(b))
        c = (small_value(a) > small_value(b)) - (small_value(a) < small_value(b));
    else if (!ms_compare(r, a, b, &c))
        return false;
    bool v;
    switch (id) {
    case F_EQ: case F_EXEQ: v = c == 0; break;
    case F_NE: case F_EXNE: v = c != 0; break;
    case F_LT: v = c < 0; break;
    case F_GT: v = c > 0; break;
    case F_LE: v = c <= 0; break;
    case F_GE: v = c >= 0; break;
    case F_MIN: *out = c <= 0 ? a : b; return true;
    default: *out = c >= 0 ? a : b; return true;
    }
    *out = make_bool(v);
    return true;
}

static bool type_test(unsigned id, Term a, Term *out)
{
    bool v;
    switch (id) {
    case F_IS_ATOM: v = term_is_atom(a); break;
    case F_IS_INTEGER: case F_IS_NUMBER: v = term_is_small(a); break;
    case F_IS_FLOAT: v = false; break;   /* the VM has no floats */
    case F_IS_BOOLEAN: v = a == TERM_TRUE || a == TERM_FALSE; break;
    case F_IS_TUPLE: v = term_is_tuple(a); break;
    case F_IS_LIST: v = term_is_list(a); break;
    case F_IS_BINARY: v = term_is_binary(a); break;
    case F_IS_PID: v = term_is_pid(a); break;
    default: v = term_is_fun(a); break;
    }
    *out = make_bool(v);
    return true;
}

static bool list_length(Run *r, Term l, Term *out)
{
    int64_t n = 0;
    for (; term_is_cons(l); l = cons_tail(l), n++) {
        if (r->steps == 0)
            return false;
        r->steps--;
    }
    if (!term_is_nil(l))
        return false;
    *out = make_small(n);
    return true;
}

static bool bool_fn(unsigned id, const Term *a, unsigned n, Term *out)
{
    unsigned ntrue = 0;
    for (unsigned i = 0; i < n; i++)
        ntrue += a[i] == TERM_TRUE;
    switch (id) {
    case F_NOT: *out = make_bool(a[0] == TERM_FALSE); break;
    case F_AND: *out = make_bool(ntrue == n); break;
    case F_OR: *out = make_bool(ntrue > 0); break;
    default:   /* xor: one true and the other false */
        *out = make_bool(ntrue == 1 && (a[0] == TERM_FALSE || a[1] == TERM_FALSE));
        break;
    }
    return true;
}

static bool data_fn(Run *r, unsigned id, const Term *a, Term *out)
{
    Term t = a[0];
    switch (id) {
    case F_ELEMENT:
        if (!term_is_small(t) || !term_is_tuple(a[1]) || small_value(t) < 1 ||
            small_value(t) > (int64_t)tuple_arity(a[1]))
            return false;
        *out = tuple_elems(a[1])[small_value(t) - 1];
        return true;
    case F_SIZE:
    case F_TUPLE_SIZE:
        if (id == F_SIZE && term_is_binary(t)) {
            *out = make_small((int64_t)binary_size(t));
            return true;
        }
        if (!term_is_tuple(t))
            return false;
        *out = make_small(tuple_arity(t));
        return true;
    case F_BYTE_SIZE:
        if (!term_is_binary(t))
            return false;
        *out = make_small((int64_t)binary_size(t));
        return true;
    case F_HD:
    case F_TL:
        if (!term_is_cons(t))
            return false;
        *out = id == F_HD ? cons_head(t) : cons_tail(t);
        return true;
    default:
        return list_length(r, t, out);
    }
}

static bool unary_int(unsigned id, Term a, Term *out)
{
    if (!term_is_small(a))
        return false;
    int64_t x = small_value(a);
    switch (id) {
    case F_NEG: return int_result(-x, out);
    case F_PLUS: *out = a; return true;
    case F_BNOT: return int_result(~x, out);
    default: return int_result(x < 0 ? -x : x, out);
    }
}

static Term caller_term(Run *r)
{
    const TrMsCtx *ctx = r->ctx;
    r->res->flags |= TR_MS_CALLER;
    if (!ctx || !ctx->caller_known)
        return make_atom(ATOM_UNDEFINED);
    Term e[3] = { make_atom(ctx->caller_mod), make_atom(ctx->caller_fun),
                  make_small(ctx->caller_arity) };
    return build_tuple(r, e, 3);
}

/* A source file's name as a binary of at most TR_MS_FILE_MAX bytes. */
static Term file_binary(Run *r, const char *file)
{
    size_t n = strlen(file);
    if (n > TR_MS_FILE_MAX)
        n = TR_MS_FILE_MAX;
    size_t words = binary_words(n);
    Term *b = halloc(r, words);
    b[words - 1] = 0;   /* the padding of the last word */
    b[0] = MAKE_HEADER(IMM_HDR_BINARY, n);
    memcpy(b + 1, file, n);
    return make_boxed(b);
}

/* {M, F, A, {File, Line}} of the caller, as OTP 26's {caller_line} (File
 * a binary, as this VM's stack traces have it); {M, F, A, undefined}
 * when the caller has no line (a native); undefined without a caller. */
static Term caller_line_term(Run *r)
{
    const TrMsCtx *ctx = r->ctx;
    r->res->flags |= TR_MS_CALLER;
    if (!ctx || !ctx->caller_known)
        return make_atom(ATOM_UNDEFINED);
    Term loc = make_atom(ATOM_UNDEFINED);
    if (ctx->caller_file && ctx->caller_line) {
        Term fl[2] = { file_binary(r, ctx->caller_file), make_small(ctx->caller_line) };
        loc = build_tuple(r, fl, 2);
    }
    Term e[4] = { make_atom(ctx->caller_mod), make_atom(ctx->caller_fun),
                  make_small(ctx->caller_arity), loc };
    return build_tuple(r, e, 4);
}

/* OTP 26's {current_stacktrace} and {current_stacktrace, Depth}: the
 * callers, innermost first, at most `depth` of them and never more than
 * TR_MS_STACK_DEPTH (the compiler made depth a non-negative integer and
 * bounded the words by the smaller of the two), each
 * {M, F, A, [{file, File}, {line, Line}]} as this VM's stack traces have
 * them (File a binary; either item left out when unknown). */
static Term stacktrace_term(Run *r, int64_t depth)
{
    const TrMsCtx *ctx = r->ctx;
    unsigned n = ctx ? ctx->nstack : 0;
    if (depth > TR_MS_STACK_DEPTH)
        depth = TR_MS_STACK_DEPTH;   /* what the compiler counted */
    if ((int64_t)n > depth)
        n = (unsigned)depth;
    Term list = TERM_NIL;
    for (unsigned i = n; i-- > 0;) {
        const TrMsFrame *f = &ctx->stack[i];
        Term loc = TERM_NIL;
        if (f->line) {
            Term e[2] = { make_atom(ATOM_LINE), make_small(f->line) };
            Term t = build_tuple(r, e, 2);
            loc = build_list(r, &t, 1, loc);
        }
        if (f->file) {
            Term e[2] = { make_atom(ATOM_FILE), file_binary(r, f->file) };
            Term t = build_tuple(r, e, 2);
            loc = build_list(r, &t, 1, loc);
        }
        Term e[4] = { make_atom(f->mod), make_atom(f->fun), make_small(f->arity), loc };
        Term t = build_tuple(r, e, 4);
        list = build_list(r, &t, 1, list);
    }
    return list;
}

static bool trace_action(Run *r, unsigned id, const Term *a, Term *out);

/* Body actions: record the effect in the result; each returns true but
 * a trace flag change's (trace_action). */
static bool action(Run *r, unsigned id, const Term *args, unsigned n, Term *out)
{
    TrMsResult *res = r->res;
    Term a = n ? args[0] : TERM_NIL;
    *out = TERM_TRUE;
    switch (id) {
    case F_MESSAGE:
        res->message = a == TERM_TRUE ? TR_MS_MSG_DEFAULT
                       : a == TERM_FALSE ? TR_MS_MSG_OFF : TR_MS_MSG_TERM;
        res->msg = res->message == TR_MS_MSG_TERM ? a : 0;
        return true;
    case F_RETURN_TRACE: res->flags |= TR_MS_RETURN_TRACE; return true;
    case F_EXCEPTION_TRACE: res->flags |= TR_MS_EXCEPTION_TRACE; return true;
    case F_BACKTRACE: res->flags |= TR_MS_BACKTRACE; return true;
    case F_SILENT:
        if (a == TERM_TRUE || a == TERM_FALSE) {
            res->flags &= ~(unsigned)(TR_MS_SILENT_ON | TR_MS_SILENT_OFF);
            res->flags |= a == TERM_TRUE ? TR_MS_SILENT_ON : TR_MS_SILENT_OFF;
        }
        return true;
    case F_DISPLAY:
        res->flags |= TR_MS_DISPLAY;
        res->display[res->ndisplay++] = a;
        return true;
    case F_CALLER_LINE:
        *out = caller_line_term(r);
        return true;
    case F_STACKTRACE:
        *out = stacktrace_term(r, TR_MS_STACK_DEPTH);
        return true;
    case F_STACKTRACE1:
        *out = stacktrace_term(r, small_value(a));
        return true;
    case F_ENABLE_TRACE: case F_ENABLE_TRACE2: case F_DISABLE_TRACE: case F_DISABLE_TRACE2:
    case F_TRACE2: case F_TRACE3:
        return trace_action(r, id, args, out);
    default:
        *out = caller_term(r);
        return true;
    }
}

/* ==== trace flag changes ==== */

/* The flag the atom a names (erlang:trace/3's names), or 0. */
static unsigned flag_of(Term a)
{
    size_t n;
    const char *name = term_is_atom(a) ? vm_atom_name(atom_value(a), &n) : NULL;
    return name ? tr_flag_bit(name, n) : 0;
}

/* The flags a proper list of flag names names, and a {tracer, Pid} in
 * it (*tracer, left as it is where there is none: BEAM takes it from
 * either list, the last one named winning) where the run's context
 * allows one; false for anything else (a list longer than there are
 * names would repeat one: bounded by the run's steps like every other
 * walk). */
static bool flag_list(Run *r, Term l, unsigned *flags, uint64_t *tracer)
{
    *flags = 0;
    for (; term_is_cons(l); l = cons_tail(l)) {
        if (r->steps == 0)
            return false;
        r->steps--;
        unsigned f = flag_of(cons_head(l));
        if (f) {
            *flags |= f;
            continue;
        }
        uint64_t t = tr_tracer_of(cons_head(l));
        if (!t || !r->ctx || !r->ctx->tracer_ok)
            return false;
        *tracer = t;
    }
    return term_is_nil(l);
}

/* res->trace's entry for pid (0: the caller), added if it is not there;
 * NULL when TR_MS_MAX_TRACE processes are taken or the context says pid
 * is not a live process. */
static TrMsTrace *trace_entry(Run *r, uint64_t pid)
{
    TrMsResult *res = r->res;
    const TrMsCtx *ctx = r->ctx;
    for (unsigned i = 0; i < res->ntrace; i++)
        if (res->trace[i].pid == pid)
            return &res->trace[i];
    if (res->ntrace == TR_MS_MAX_TRACE)
        return NULL;
    if (pid && ctx && ctx->alive && !ctx->alive(ctx->alive_data, pid))
        return NULL;
    TrMsTrace *t = &res->trace[res->ntrace++];
    *t = (TrMsTrace){ .pid = pid, .flags = pid || !ctx ? 0 : ctx->flags };
    return t;
}

/*
 * {enable_trace, [Pid,] F}, {disable_trace, [Pid,] F} and {trace, [Pid,]
 * Disable, Enable}, as erlang:trace(Pid, true | false, Flags) in the
 * session whose spec runs, Pid the caller when not given: recorded in
 * res->trace (made by the caller once the call's event has the flags
 * the call found: tr_flags_from_ms).  The first
 * two answer true; trace answers whether the caller's flags changed (or
 * a tracer was named), as BEAM's, and for another process whether it
 * named any flag or a tracer (OTP 25 answered true for another process
 * even where its flags stayed as they were).  Not a pid, not a flag
 * name, not a proper list, a fifth process, or a process that the
 * context says is not live: a failure ('EXIT' in a body).
 * Reached through action()'s switch, and out of line: a test of its own
 * ahead of the other functions in call_fn cost every run 18 instructions
 * (callgrind, bench_ms: 314 -> 332 per run of its four specs), in specs
 * without any of these actions.
 */
static __attribute__((noinline)) bool trace_action(Run *r, unsigned id, const Term *a,
                                                   Term *out)
{
    uint64_t pid = 0;
    if (id == F_ENABLE_TRACE2 || id == F_DISABLE_TRACE2 || id == F_TRACE3) {
        if (!term_is_pid(a[0]))
            return false;
        pid = pid_value(a[0]);
        if (r->ctx && r->ctx->self && pid == pid_value(r->ctx->self))
            pid = 0;
        a++;
    }
    unsigned on = 0, off = 0;
    uint64_t tracer = 0;
    if (id == F_ENABLE_TRACE || id == F_ENABLE_TRACE2)
        on = flag_of(a[0]);
    else if (id == F_DISABLE_TRACE || id == F_DISABLE_TRACE2)
        off = flag_of(a[0]);
    else if (!flag_list(r, a[0], &off, &tracer) || !flag_list(r, a[1], &on, &tracer))
        return false;
    if (id < F_TRACE2 && !(on | off))
        return false;
    TrMsTrace *t = trace_entry(r, pid);
    if (!t)
        return false;
    /* Disable, then enable (erlang:trace/3 order within {trace, D, E}). */
    t->off = (t->off | off) & ~on;
    t->on = (t->on & ~off) | on;
    unsigned before = t->flags;
    t->flags = (t->flags & ~off) | on;
    if (tracer)
        t->tracer = tracer;
    r->res->flags |= TR_MS_TRACE;
    if (id == F_TRACE2 || id == F_TRACE3)
        *out = make_bool(pid ? (on | off) != 0 || tracer : t->flags != before || tracer);
    else
        *out = TERM_TRUE;
    return true;
}

static bool call_fn(Run *r, unsigned id, const Term *a, unsigned n, Term *out)
{
    if (id <= F_IS_FUNCTION)
        return type_test(id, a[0], out);
    if (id == F_IS_FUNCTION2) {
        if (!term_is_small(a[1]) || small_value(a[1]) < 0)
            return false;
        *out = make_bool(term_is_fun(a[0]) &&
                         fun_export(a[0])->arity == (uint64_t)small_value(a[1]));
        return true;
    }
    if ((id >= F_EQ && id <= F_GE) || id == F_MIN || id == F_MAX)
        return compare_fn(r, id, a[0], a[1], out);
    if (id >= F_NOT && id <= F_XOR)
        return bool_fn(id, a, n, out);
    if (id >= F_ADD && id <= F_BSR)
        return arith(id, a[0], a[1], out);
    if (id >= F_NEG && id <= F_ABS)
        return unary_int(id, a[0], out);
    if (id >= F_ELEMENT && id <= F_LENGTH)
        return data_fn(r, id, a, out);
    if (id == F_SELF) {
        *out = r->ctx && r->ctx->self ? r->ctx->self : make_atom(ATOM_UNDEFINED);
        return true;
    }
    return action(r, id, a, n, out);
}

static Term arg_list(Run *r)
{
    return build_list(r, r->args, r->arity, TERM_NIL);
}

/*
 * Dispatch: a `switch`, or with VM_COMPUTED_GOTO (vm/config.h) a jump
 * through a label table at the end of each instruction, so that the
 * branch predictor learns per instruction (the same knob as the
 * interpreter: debug builds test the switch, asan builds the table).
 */
#if VM_COMPUTED_GOTO
#define CASE(op) case op: L_##op
#define NEXT()                                                              \
    do {                                                                    \
        w = code[pc++];                                                     \
        a = OPERAND(w);                                                     \
        goto *labels[w & 0xff];                                             \
    } while (0)
#else
#define CASE(op) case op
#define NEXT() continue
#endif

/*
 * The dispatch loop.  `cur` is the term the head is looking at, mst[]
 * the compound terms it is inside, st[] the expression values; all
 * bounded at compile time (see tr_ms.h).
 */
static bool run(Run *r)
{
#if VM_COMPUTED_GOTO
    static const void *const labels[] = {
        [MS_CLAUSE] = &&L_MS_CLAUSE, [MS_END] = &&L_MS_END, [MS_ARITY] = &&L_MS_ARITY,
        [MS_ARITY_GE] = &&L_MS_ARITY_GE, [MS_ARG] = &&L_MS_ARG, [MS_ARGLIST] = &&L_MS_ARGLIST,
        [MS_BIND] = &&L_MS_BIND, [MS_EQVAR] = &&L_MS_EQVAR, [MS_EQIMM] = &&L_MS_EQIMM,
        [MS_EQLIT] = &&L_MS_EQLIT, [MS_TUPLE] = &&L_MS_TUPLE, [MS_ELEM] = &&L_MS_ELEM,
        [MS_CONS] = &&L_MS_CONS, [MS_HEAD] = &&L_MS_HEAD, [MS_TAILPOP] = &&L_MS_TAILPOP,
        [MS_POP] = &&L_MS_POP, [MS_LIT] = &&L_MS_LIT, [MS_VAR] = &&L_MS_VAR,
        [MS_ALL] = &&L_MS_ALL, [MS_VARS] = &&L_MS_VARS, [MS_MKTUPLE] = &&L_MS_MKTUPLE,
        [MS_MKLIST] = &&L_MS_MKLIST, [MS_CALL] = &&L_MS_CALL, [MS_JNT] = &&L_MS_JNT,
        [MS_JT] = &&L_MS_JT, [MS_TEST] = &&L_MS_TEST, [MS_BODY] = &&L_MS_BODY,
        [MS_DROP] = &&L_MS_DROP, [MS_MATCHED] = &&L_MS_MATCHED,
    };
#endif
    const TrMs *ms = r->ms;
    const uint32_t *code = ms->code;
    const Term *lits = ms->lits;
    Term *vars = r->s->vars, *st = r->s->stack, *mst = r->s->mstack;
    uint32_t pc = 0, fail = 0, w, a;
    unsigned sp = 0, msp = 0;
    bool body = false;
    Term cur = TERM_NIL;
    int c;
    for (;;) {
        w = code[pc++];
        a = OPERAND(w);
        switch (w & 0xff) {
        CASE(MS_CLAUSE):
            fail = a;
            r->hp = r->s->heap;
            sp = msp = 0;
            body = false;
            NEXT();
        CASE(MS_END):
            return false;
        CASE(MS_ARITY):
            if (r->arity != a)
                goto fail;
            NEXT();
        CASE(MS_ARITY_GE):
            if (r->arity < a)
                goto fail;
            NEXT();
        CASE(MS_ARG):
            cur = r->args[a];
            NEXT();
        CASE(MS_ARGLIST):
            cur = arg_list(r);
            NEXT();
        CASE(MS_BIND):
            vars[a] = cur;
            NEXT();
        CASE(MS_EQVAR):
            if (!ms_compare(r, cur, vars[a], &c) || c != 0)
                goto fail;
            NEXT();
        CASE(MS_EQIMM):
            if (cur != lits[a])
                goto fail;
            NEXT();
        CASE(MS_EQLIT):
            if (!ms_compare(r, cur, lits[a], &c) || c != 0)
                goto fail;
            NEXT();
        CASE(MS_TUPLE):
            if (!term_is_tuple(cur) || tuple_arity(cur) != a)
                goto fail;
            mst[msp++] = cur;
            NEXT();
        CASE(MS_ELEM):
            cur = tuple_elems(mst[msp - 1])[a];
            NEXT();
        CASE(MS_CONS):
            if (!term_is_cons(cur))
                goto fail;
            mst[msp++] = cur;
            NEXT();
        CASE(MS_HEAD):
            cur = cons_head(mst[msp - 1]);
            NEXT();
        CASE(MS_TAILPOP):
            cur = cons_tail(mst[--msp]);
            NEXT();
        CASE(MS_POP):
            msp--;
            NEXT();
        CASE(MS_LIT):
            st[sp++] = lits[a];
            NEXT();
        CASE(MS_VAR):
            st[sp++] = vars[a];
            NEXT();
        CASE(MS_ALL):
            st[sp++] = arg_list(r);
            NEXT();
        CASE(MS_VARS): {
            Term v[TR_MS_MAX_VARS];
            for (uint32_t i = 0; i < a; i++)
                v[i] = vars[code[pc + i]];
            pc += a;
            st[sp++] = build_list(r, v, a, TERM_NIL);
            NEXT();
        }
        CASE(MS_MKTUPLE):
            sp -= a;
            st[sp] = build_tuple(r, st + sp, a);
            sp++;
            NEXT();
        CASE(MS_MKLIST):
            sp -= a + 1;
            st[sp] = build_list(r, st + sp, a, st[sp + a]);
            sp++;
            NEXT();
        CASE(MS_CALL): {
            uint32_t n = code[pc++];
            Term v;
            sp -= n;
            if (!call_fn(r, a, st + sp, n, &v)) {
                if (!body)
                    goto fail;
                v = ms->exit_atom;
            }
            st[sp++] = v;
            NEXT();
        }
        CASE(MS_JNT):
            if (st[--sp] != TERM_TRUE) {
                st[sp++] = TERM_FALSE;
                pc = a;
            }
            NEXT();
        CASE(MS_JT):
            if (st[--sp] == TERM_TRUE) {
                st[sp++] = TERM_TRUE;
                pc = a;
            }
            NEXT();
        CASE(MS_TEST):
            if (st[--sp] != TERM_TRUE)
                goto fail;
            NEXT();
        CASE(MS_BODY):
            body = true;
            NEXT();
        CASE(MS_DROP):
            sp--;
            NEXT();
        CASE(MS_MATCHED):
            return true;
        default:
            VM_UNREACHABLE();
        }
    fail:
        pc = fail;
    }
}
#undef CASE
#undef NEXT

bool tr_ms_plain(const TrMs *ms, unsigned *flags)
{
    *flags = ms->constant ? ms->const_flags : 0;
    return ms->constant && ms->const_message == TR_MS_MSG_DEFAULT &&
           !(ms->const_flags & ~(unsigned)(TR_MS_RETURN_TRACE | TR_MS_EXCEPTION_TRACE));
}

bool tr_ms_run(const TrMs *ms, const Term *args, unsigned arity, const TrMsCtx *ctx,
               TrMsScratch *scratch, TrMsResult *res)
{
    tr_ms_result_clear(res);
    if (arity > VM_MAX_ARITY)
        return false;
    if (ms->constant) {
        res->flags = ms->const_flags;
        res->message = ms->const_message;
        return true;
    }
    Run r = { ms, args, arity, ctx, scratch, res, scratch->heap, TR_MS_MAX_STEPS };
    /* A failed clause never wrote *res: only bodies write it, and a
     * clause that reaches its body has matched. */
    return run(&r);
}

/* The heap words a copy of *t takes; a term over `max` words (an argument
 * with much sharing: copies count it flat) is replaced by '...', the
 * marker of what a trace leaves out, and takes none. */
static size_t fit(Term *t, size_t max)
{
    size_t w = term_size_capped(*t, max);
    if (w != SIZE_MAX)
        return w;
    *t = make_atom(ATOM_DOTS);
    return 0;
}

/* The words the result's terms take, after fit() replaced the oversized. */
static size_t result_words(TrMsResult *res, size_t max)
{
    size_t n = res->message == TR_MS_MSG_TERM ? fit(&res->msg, max) : 0;
    for (unsigned i = 0; i < res->ndisplay; i++)
        n += fit(&res->display[i], max);
    return n;
}

bool tr_ms_run_heap(const TrMs *ms, Process *p, const Term *args, unsigned arity,
                    const TrMsCtx *ctx, TrMsScratch *scratch, TrMsResult *res)
{
    if (!tr_ms_run(ms, args, arity, ctx, scratch, res))
        return false;
    size_t max = p->vm->max_msg;
    size_t words = result_words(res, max);
    if ((size_t)(p->hend - p->htop) < words) {
        /* The collection moves the arguments (p's roots) and so stales
         * the result's pointers into them: run again on the moved ones. */
        vm_heap_ensure(p, words, NULL, 0);
        tr_ms_run(ms, args, arity, ctx, scratch, res);
        size_t again = result_words(res, max);
        VM_ASSERT(again == words, "a run is deterministic");
        (void)again;
    }
    if (res->message == TR_MS_MSG_TERM)
        res->msg = vm_copy_term(p, res->msg);
    for (unsigned i = 0; i < res->ndisplay; i++)
        res->display[i] = vm_copy_term(p, res->display[i]);
    return true;
}
