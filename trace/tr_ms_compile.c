/*
 * trace/tr_ms_compile.c - match specifications: the compiler (the runner is
 * tr_ms_run.c).
 *
 * The compiled form (one TrMs, immutable after tr_ms_compile returns):
 *   code[]    32-bit words; an instruction is op | operand << 8, some
 *             followed by operand words.  Clauses follow each other, each
 *             starting with CLAUSE <offset of the next clause>; the
 *             program ends with END.  Every jump goes forward, so each
 *             instruction runs at most once per clause: a run's time is
 *             bounded by the program size (plus the step budget of term
 *             comparisons), and the scratch words a clause builds are a
 *             compile-time sum.
 *   lits[]    the literals the code names: immediates and pointers into
 *   src[]     the copy of the source term (patterns and {const, T} point
 *             into it, so literals cost no second copy).
 *
 * A clause's code: head (match ops over the arguments, binding variables
 * into slots numbered by first appearance), guards (expression ops on a
 * value stack, each guard ending in TEST), BODY, actions (each ending in
 * DROP), MATCHED.  A failure in the head or the guards (no match, a false
 * guard, a raising guard function) jumps to the next clause; in the body a
 * raising function gives 'EXIT' and evaluation goes on (BEAM's rule).
 *
 * Runs write only the caller's TrMsScratch and TrMsResult, so one spec
 * can be run by any number of threads at once without synchronisation;
 * the memory ordering of its publication is the engine's (the release
 * that publishes a breakpoint generation).
 */
#include "trace/tr_ms_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/atomics.h"
#include "vm/heap.h"
#include "vm/module.h"
#include "vm/print.h"
#include "vm/strbuf.h"

const MsFun tr_ms_funs[] = {
    { "is_atom", 1, F_IS_ATOM }, { "is_integer", 1, F_IS_INTEGER },
    { "is_number", 1, F_IS_NUMBER }, { "is_float", 1, F_IS_FLOAT },
    { "is_boolean", 1, F_IS_BOOLEAN }, { "is_tuple", 1, F_IS_TUPLE },
    { "is_list", 1, F_IS_LIST }, { "is_binary", 1, F_IS_BINARY },
    { "is_pid", 1, F_IS_PID }, { "is_function", 1, F_IS_FUNCTION },
    { "is_function", 2, F_IS_FUNCTION2 },
    { "==", 2, F_EQ }, { "/=", 2, F_NE }, { "=:=", 2, F_EXEQ }, { "=/=", 2, F_EXNE },
    { "<", 2, F_LT }, { ">", 2, F_GT }, { "=<", 2, F_LE }, { ">=", 2, F_GE },
    { "not", 1, F_NOT }, { "and", -1, F_AND }, { "or", -1, F_OR }, { "xor", 2, F_XOR },
    { "andalso", -1, F_ANDALSO }, { "orelse", -1, F_ORELSE },
    { "+", 2, F_ADD }, { "-", 2, F_SUB }, { "*", 2, F_MUL }, { "div", 2, F_DIV },
    { "rem", 2, F_REM }, { "band", 2, F_BAND }, { "bor", 2, F_BOR },
    { "bxor", 2, F_BXOR }, { "bsl", 2, F_BSL }, { "bsr", 2, F_BSR },
    { "-", 1, F_NEG }, { "+", 1, F_PLUS }, { "bnot", 1, F_BNOT }, { "abs", 1, F_ABS },
    { "element", 2, F_ELEMENT }, { "size", 1, F_SIZE }, { "tuple_size", 1, F_TUPLE_SIZE },
    { "byte_size", 1, F_BYTE_SIZE }, { "hd", 1, F_HD }, { "tl", 1, F_TL },
    { "length", 1, F_LENGTH }, { "min", 2, F_MIN }, { "max", 2, F_MAX },
    { "self", 0, F_SELF },
    { "message", 1, F_MESSAGE }, { "return_trace", 0, F_RETURN_TRACE },
    { "exception_trace", 0, F_EXCEPTION_TRACE }, { "caller", 0, F_CALLER },
    { "silent", 1, F_SILENT }, { "display", 1, F_DISPLAY },
    { "backtrace", 0, F_BACKTRACE }, { "caller_line", 0, F_CALLER_LINE },
    { "current_stacktrace", 0, F_STACKTRACE }, { "current_stacktrace", 1, F_STACKTRACE1 },
    { "enable_trace", 1, F_ENABLE_TRACE }, { "enable_trace", 2, F_ENABLE_TRACE2 },
    { "disable_trace", 1, F_DISABLE_TRACE }, { "disable_trace", 2, F_DISABLE_TRACE2 },
    { "trace", 2, F_TRACE2 }, { "trace", 3, F_TRACE3 },
};
const size_t tr_ms_nfuns = sizeof tr_ms_funs / sizeof tr_ms_funs[0];

/* ================================================================== */
/* The compiler                                                       */

typedef struct Comp {
    uint32_t *code;
    size_t ncode, capcode;
    Term *lits;
    size_t nlits, caplits;
    int arity;
    unsigned needs;
    /* The clause being compiled. */
    int64_t varnum[TR_MS_MAX_VARS];   /* slot -> variable number */
    unsigned nvars;
    unsigned sp, msp;                 /* value and match stack depths */
    size_t heapw;                     /* scratch words the clause builds */
    unsigned ndisplay;
    /* Diagnostics. */
    char where[64];
    char *err;
    size_t errsize;
} Comp;

static bool cfail(Comp *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records "<where>: <message>" and returns false (every error path). */
static bool cfail(Comp *c, const char *fmt, ...)
{
    if (!c->errsize)
        return false;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errsize, "%s: %s", c->where, msg);
    return false;
}

/* A term printed for a message, cut at about 60 characters. */
static const char *show(Term t, char *buf, size_t size)
{
    StrBuf sb;
    sb_init(&sb);
    vm_print_term(&sb, t);
    if (sb.len > 60 && size > 64)
        snprintf(buf, size, "%.57s...", sb.s);
    else
        sb_copy_out(&sb, buf, size);
    sb_free(&sb);
    return buf;
}

static void emit(Comp *c, uint32_t w)
{
    if (c->ncode == c->capcode) {
        c->capcode = c->capcode ? 2 * c->capcode : 256;
        c->code = vm_realloc(c->code, c->capcode * sizeof *c->code);
    }
    c->code[c->ncode++] = w;
}

static uint32_t add_lit(Comp *c, Term t)
{
    for (size_t i = 0; i < c->nlits; i++)
        if (c->lits[i] == t)
            return (uint32_t)i;
    if (c->nlits == c->caplits) {
        c->caplits = c->caplits ? 2 * c->caplits : 32;
        c->lits = vm_realloc(c->lits, c->caplits * sizeof *c->lits);
    }
    c->lits[c->nlits] = t;
    return (uint32_t)c->nlits++;
}

/* What an atom means as a variable. */
enum { V_NONE, V_NUM, V_ALL, V_BOUND, V_BAD, V_ANY };

static int var_kind(Term t, int64_t *num)
{
    if (!term_is_atom(t))
        return V_NONE;
    if (atom_value(t) == ATOM_UNDERSCORE)
        return V_ANY;
    size_t n;
    const char *s = vm_atom_name(atom_value(t), &n);
    if (n == 0 || s[0] != '$')
        return V_NONE;
    if (n == 2 && s[1] == '_')
        return V_ALL;
    if (n == 2 && s[1] == '$')
        return V_BOUND;
    if (n < 2 || n > 10)
        return V_BAD;
    int64_t v = 0;
    for (size_t i = 1; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return V_BAD;
        v = v * 10 + (s[i] - '0');
    }
    if (v > TR_MS_MAX_VAR_NUMBER)
        return V_BAD;
    *num = v;
    return V_NUM;
}

static int find_var(const Comp *c, int64_t num)
{
    for (unsigned i = 0; i < c->nvars; i++)
        if (c->varnum[i] == num)
            return (int)i;
    return -1;
}

static bool bad_var(Comp *c, Term t)
{
    char b[80];
    return cfail(c, "variable %s is not a valid variable", show(t, b, sizeof b));
}

/* Scratch words a clause builds; the sum is bounded by the scratch. */
static bool use_heap(Comp *c, size_t words)
{
    c->heapw += words;
    if (c->heapw > TR_MS_SCRATCH_WORDS)
        return cfail(c, "builds more than %d words of terms", TR_MS_SCRATCH_WORDS);
    return true;
}

static bool push(Comp *c)
{
    if (++c->sp > TR_MS_MAX_STACK)
        return cfail(c, "holds more than %d values at once", TR_MS_MAX_STACK);
    return true;
}

static size_t max_arity(const Comp *c)
{
    return c->arity >= 0 ? (size_t)c->arity : VM_MAX_ARITY;
}

/* ---- the source copy ---- */

/* Heap words of t, checking nesting (heads and tuple elements add a
 * level, list tails do not); false when too deep or too big. */
static bool src_check(Comp *c, Term t, unsigned depth, size_t *words)
{
    if (depth > TR_MS_MAX_DEPTH)
        return cfail(c, "the term is nested deeper than %d levels", TR_MS_MAX_DEPTH);
    for (;;) {
        if (*words > TR_MS_MAX_SOURCE_WORDS)
            return cfail(c, "the term is larger than %d words", TR_MS_MAX_SOURCE_WORDS);
        if (term_is_cons(t)) {
            *words += 2;
            if (!src_check(c, cons_head(t), depth + 1, words))
                return false;
            t = cons_tail(t);
            continue;
        }
        if (!term_is_boxed(t))
            return true;
        *words += boxed_words_from_header(boxed_ptr(t)[0]);
        if (!term_is_tuple(t))
            return true;
        for (uint32_t i = 0; i < tuple_arity(t); i++)
            if (!src_check(c, tuple_elems(t)[i], depth + 1, words))
                return false;
        return true;
    }
}

/* ---- head patterns ---- */

/* True when p has no variable or '_' (so it is compared as one literal).
 * Any '$' atom counts as a variable, so that a bad one is reported. */
static bool ground(Term p)
{
    for (;;) {
        int64_t n;
        if (term_is_atom(p))
            return var_kind(p, &n) == V_NONE;
        if (term_is_cons(p)) {
            if (!ground(cons_head(p)))
                return false;
            p = cons_tail(p);
            continue;
        }
        if (term_is_tuple(p)) {
            for (uint32_t i = 0; i < tuple_arity(p); i++)
                if (!ground(tuple_elems(p)[i]))
                    return false;
        }
        return true;
    }
}

static bool c_pattern(Comp *c, Term p);

static bool c_pat_var(Comp *c, Term p, int kind, int64_t num)
{
    switch (kind) {
    case V_ANY:
        return true;
    case V_ALL:
    case V_BOUND:
        return cfail(c, "'%s' is allowed only in guards and the body",
                     kind == V_ALL ? "$_" : "$$");
    case V_BAD:
        return bad_var(c, p);
    default:
        break;
    }
    int slot = find_var(c, num);
    if (slot >= 0) {
        emit(c, INSN(MS_EQVAR, slot));
        return true;
    }
    if (c->nvars == TR_MS_MAX_VARS)
        return cfail(c, "more than %d variables", TR_MS_MAX_VARS);
    c->varnum[c->nvars] = num;
    emit(c, INSN(MS_BIND, c->nvars++));
    return true;
}

static bool c_pat_tuple(Comp *c, Term p)
{
    if (++c->msp > TR_MS_MAX_DEPTH + 1)
        return cfail(c, "patterns nested deeper than %d levels", TR_MS_MAX_DEPTH);
    emit(c, INSN(MS_TUPLE, tuple_arity(p)));
    for (uint32_t i = 0; i < tuple_arity(p); i++) {
        emit(c, INSN(MS_ELEM, i));
        if (!c_pattern(c, tuple_elems(p)[i]))
            return false;
    }
    emit(c, INSN(MS_POP, 0));
    c->msp--;
    return true;
}

/*
 * A list pattern that is not ground: its cells one by one up to the last
 * one with a variable in its head, then what follows (a variable, or a
 * ground rest compared as one literal).  A loop over the cells, not a
 * recursion on the tail (list tails cost no depth in src_check, so a
 * recursion would take native stack linear in the list's length), and
 * one pass to find that last cell (testing the rest for variables at
 * every cell took time quadratic in the length).
 */
static bool c_pat_list(Comp *c, Term p)
{
    size_t n = 0, cells = 0;
    Term t = p;
    for (; term_is_cons(t); t = cons_tail(t)) {
        n++;
        if (!ground(cons_head(t)))
            cells = n;
    }
    if (!ground(t))
        cells = n;
    for (size_t i = 0; i < cells; i++, p = cons_tail(p)) {
        if (++c->msp > TR_MS_MAX_DEPTH + 1)
            return cfail(c, "patterns nested deeper than %d levels", TR_MS_MAX_DEPTH);
        emit(c, INSN(MS_CONS, 0));
        emit(c, INSN(MS_HEAD, 0));
        if (!c_pattern(c, cons_head(p)))
            return false;
        emit(c, INSN(MS_TAILPOP, 0));
        c->msp--;
    }
    return c_pattern(c, p);
}

/* Matches the current term against pattern p. */
static bool c_pattern(Comp *c, Term p)
{
    int64_t num = 0;
    int kind = var_kind(p, &num);
    if (kind != V_NONE)
        return c_pat_var(c, p, kind, num);
    if (term_is_tuple(p) && !ground(p))
        return c_pat_tuple(c, p);
    if (term_is_cons(p) && !ground(p))
        return c_pat_list(c, p);
    emit(c, INSN(term_is_boxed(p) || term_is_cons(p) ? MS_EQLIT : MS_EQIMM, add_lit(c, p)));
    return true;
}

static bool c_head(Comp *c, Term head)
{
    int64_t num = 0;
    int kind = var_kind(head, &num);
    if (kind == V_ANY)
        return true;
    if (kind == V_NUM) {
        if (!use_heap(c, 2 * max_arity(c)))
            return false;
        emit(c, INSN(MS_ARGLIST, 0));
        return c_pat_var(c, head, kind, num);
    }
    if (kind != V_NONE)
        return c_pat_var(c, head, kind, num);
    if (!term_is_list(head))
        return cfail(c, "not a list of argument patterns, '_' or a variable");
    unsigned n = 0;
    Term t = head;
    for (; term_is_cons(t); t = cons_tail(t))
        n++;
    bool open = var_kind(t, &num) == V_ANY;
    if (!open && !term_is_nil(t))
        return cfail(c, "not a proper list");
    /* A head of another length than a known arity is accepted, as BEAM
     * accepts it (erlang:trace_pattern/3 returns the count and the
     * function is traced): MS_ARITY fails the clause at every run. */
    if (n > VM_MAX_ARITY)
        return cfail(c, "more than %d arguments", VM_MAX_ARITY);
    emit(c, INSN(open ? MS_ARITY_GE : MS_ARITY, n));
    unsigned i = 0;
    for (t = head; term_is_cons(t); t = cons_tail(t)) {
        emit(c, INSN(MS_ARG, i++));
        if (!c_pattern(c, cons_head(t)))
            return false;
    }
    return true;
}

/* ---- expressions ---- */

static bool c_expr(Comp *c, Term e, bool body);

/* The function name/nargs; NULL when there is none (a known name with
 * another number of arguments is another, unknown, function). */
static const MsFun *lookup_fun(Term name, unsigned nargs)
{
    size_t len;
    const char *s = vm_atom_name(atom_value(name), &len);
    for (size_t i = 0; i < tr_ms_nfuns; i++) {
        if (strlen(tr_ms_funs[i].name) != len || memcmp(tr_ms_funs[i].name, s, len) != 0)
            continue;
        if (tr_ms_funs[i].arity == (int)nargs || (tr_ms_funs[i].arity < 0 && nargs > 0))
            return &tr_ms_funs[i];
    }
    return NULL;
}

static const char *fun_name(Term name, char *buf, size_t size)
{
    StrBuf sb;
    sb_init(&sb);
    vm_print_atom(&sb, atom_value(name));
    sb_copy_out(&sb, buf, size);
    sb_free(&sb);
    return buf;
}

/* andalso/orelse: each argument, then a conditional jump to the end. */
static bool c_shortcut(Comp *c, const Term *args, unsigned n, bool is_and, bool body)
{
    size_t patch[TR_MS_MAX_STACK];
    unsigned np = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!c_expr(c, args[i], body))
            return false;
        c->sp--;
        if (np == VM_ARRAY_LEN(patch))
            return cfail(c, "more than %d arguments", (int)VM_ARRAY_LEN(patch));
        patch[np++] = c->ncode;
        emit(c, INSN(is_and ? MS_JNT : MS_JT, 0));
    }
    emit(c, INSN(MS_LIT, add_lit(c, make_bool(is_and))));
    for (unsigned i = 0; i < np; i++)
        c->code[patch[i]] = INSN(is_and ? MS_JNT : MS_JT, c->ncode);
    return push(c);
}

/* The scratch words of {current_stacktrace} of `depth` frames: per
 * frame {M, F, A, Loc} and its list cell, Loc's two cells and tuples,
 * and the file's binary. */
static size_t stack_words(size_t depth)
{
    return depth * (5 + 2 + 2 * (2 + 3) + binary_words(TR_MS_FILE_MAX));
}

/* Checks that count against the clause (actions that have a bound);
 * args are the call's arguments as written. */
static bool c_call_effects(Comp *c, unsigned id, const Term *args)
{
    if (id == F_STACKTRACE || id == F_STACKTRACE1) {
        /* The depth is a literal, as BEAM's compiler requires: a
         * negative or non-integer one is an error (badarg there). */
        int64_t depth = TR_MS_STACK_DEPTH;
        if (id == F_STACKTRACE1) {
            char b[80];
            if (!term_is_small(args[0]) || small_value(args[0]) < 0)
                return cfail(c, "current_stacktrace/1: the depth must be a non-negative "
                             "integer, not %s", show(args[0], b, sizeof b));
            if (small_value(args[0]) < depth)
                depth = small_value(args[0]);
        }
        c->needs |= TR_MS_NEED_STACK;
        return use_heap(c, stack_words((size_t)depth));
    }
    if (id == F_CALLER) {
        c->needs |= TR_MS_NEED_CALLER;
        return use_heap(c, 4);
    }
    if (id == F_CALLER_LINE) {
        /* {M, F, A, {File, Line}}, File a binary of at most
         * TR_MS_FILE_MAX bytes */
        c->needs |= TR_MS_NEED_CALLER;
        return use_heap(c, 5 + 3 + binary_words(TR_MS_FILE_MAX));
    }
    if (id == F_SELF)
        c->needs |= TR_MS_NEED_SELF;
    /* trace/2 answers whether the caller's flags changed: it needs them
     * (and {self} as a target is the caller itself) */
    if (id >= F_ENABLE_TRACE)
        c->needs |= TR_MS_NEED_SELF | TR_MS_NEED_FLAGS;
    if (id == F_DISPLAY && ++c->ndisplay > TR_MS_MAX_DISPLAY)
        return cfail(c, "more than %d display actions in a clause", TR_MS_MAX_DISPLAY);
    return true;
}

static bool c_call(Comp *c, Term e, bool body)
{
    const Term *el = tuple_elems(e);
    unsigned nargs = tuple_arity(e) - 1;
    const MsFun *f = lookup_fun(el[0], nargs);
    char b[80];
    if (!f)
        return cfail(c, "unknown function %s/%u", fun_name(el[0], b, sizeof b), nargs);
    if (f->id >= F_FIRST_ACTION && !body)
        return cfail(c, "%s/%u is allowed only in the body", f->name, nargs);
    if (f->id == F_ANDALSO || f->id == F_ORELSE)
        return c_shortcut(c, el + 1, nargs, f->id == F_ANDALSO, body);
    if (!c_call_effects(c, f->id, el + 1))
        return false;
    for (unsigned i = 0; i < nargs; i++)
        if (!c_expr(c, el[1 + i], body))
            return false;
    emit(c, INSN(MS_CALL, f->id));
    emit(c, nargs);
    c->sp -= nargs;
    return push(c);
}

static bool c_var_expr(Comp *c, Term e, int kind, int64_t num)
{
    if (kind == V_BAD)
        return bad_var(c, e);
    if (kind == V_ALL) {
        if (!use_heap(c, 2 * max_arity(c)))
            return false;
        emit(c, INSN(MS_ALL, 0));
        return push(c);
    }
    if (kind == V_BOUND) {
        /* '$$': the bound variables in variable-number order. */
        if (!use_heap(c, 2 * (size_t)c->nvars))
            return false;
        unsigned order[TR_MS_MAX_VARS];
        for (unsigned i = 0; i < c->nvars; i++) {
            unsigned j = i;
            for (; j > 0 && c->varnum[order[j - 1]] > c->varnum[i]; j--)
                order[j] = order[j - 1];
            order[j] = i;
        }
        emit(c, INSN(MS_VARS, c->nvars));
        for (unsigned i = 0; i < c->nvars; i++)
            emit(c, order[i]);
        return push(c);
    }
    int slot = find_var(c, num);
    if (slot < 0) {
        char b[80];
        return cfail(c, "variable %s is not bound in the head", show(e, b, sizeof b));
    }
    emit(c, INSN(MS_VAR, slot));
    return push(c);
}

static bool c_list_expr(Comp *c, Term e, bool body)
{
    unsigned n = 0;
    for (; term_is_cons(e); e = cons_tail(e), n++)
        if (!c_expr(c, cons_head(e), body))
            return false;
    if (!c_expr(c, e, body) || !use_heap(c, 2 * (size_t)n))
        return false;
    emit(c, INSN(MS_MKLIST, n));
    c->sp -= n;
    return true;
}

static bool c_tuple_expr(Comp *c, Term e, bool body)
{
    char b[80];
    uint32_t n = tuple_arity(e);
    if (n == 0)
        return cfail(c, "{} is not an expression (build an empty tuple with {{}})");
    Term first = tuple_elems(e)[0];
    if (n == 1 && term_is_tuple(first)) {
        uint32_t m = tuple_arity(first);
        for (uint32_t i = 0; i < m; i++)
            if (!c_expr(c, tuple_elems(first)[i], body))
                return false;
        if (!use_heap(c, 1 + (size_t)m))
            return false;
        emit(c, INSN(MS_MKTUPLE, m));
        c->sp -= m;
        return push(c);
    }
    if (n == 2 && first == make_atom(ATOM_CONST)) {
        emit(c, INSN(MS_LIT, add_lit(c, tuple_elems(e)[1])));
        return push(c);
    }
    if (!term_is_atom(first))
        return cfail(c, "%s is not an expression: a call is {Function, Args...}, "
                     "a tuple {{...}} or {const, T}", show(e, b, sizeof b));
    return c_call(c, e, body);
}

/* Compiles e to push its value. */
static bool c_expr(Comp *c, Term e, bool body)
{
    int64_t num = 0;
    int kind = var_kind(e, &num);
    if (kind != V_NONE && kind != V_ANY)
        return c_var_expr(c, e, kind, num);
    if (term_is_cons(e))
        return c_list_expr(c, e, body);
    if (term_is_tuple(e))
        return c_tuple_expr(c, e, body);
    emit(c, INSN(MS_LIT, add_lit(c, e)));
    return push(c);
}

/* ---- clauses ---- */

static bool c_exprs(Comp *c, Term list, bool body, const char *prefix)
{
    size_t base = strlen(c->where);
    unsigned k = 1;
    for (Term t = list; term_is_cons(t); t = cons_tail(t), k++) {
        snprintf(c->where + base, sizeof c->where - base, ": %s %u", prefix, k);
        c->sp = 0;
        if (!c_expr(c, cons_head(t), body))
            return false;
        emit(c, INSN(body ? MS_DROP : MS_TEST, 0));
    }
    c->where[base] = 0;
    return true;
}

static bool proper_list(Term t)
{
    while (term_is_cons(t))
        t = cons_tail(t);
    return term_is_nil(t);
}

static bool c_clause(Comp *c, Term cl, unsigned k)
{
    snprintf(c->where, sizeof c->where, "match spec clause %u", k);
    if (!term_is_tuple(cl) || tuple_arity(cl) != 3)
        return cfail(c, "not a tuple {Head, Guards, Body}");
    const Term *el = tuple_elems(cl);
    c->nvars = 0;
    c->heapw = 0;
    c->ndisplay = 0;
    c->msp = 0;
    size_t start = c->ncode;
    emit(c, INSN(MS_CLAUSE, 0));
    snprintf(c->where, sizeof c->where, "match spec clause %u: head", k);
    if (!c_head(c, el[0]))
        return false;
    snprintf(c->where, sizeof c->where, "match spec clause %u", k);
    if (!proper_list(el[1]))
        return cfail(c, "guards are not a list");
    if (!proper_list(el[2]))
        return cfail(c, "body is not a list");
    if (!c_exprs(c, el[1], false, "guard"))
        return false;
    emit(c, INSN(MS_BODY, 0));
    if (!c_exprs(c, el[2], true, "action"))
        return false;
    emit(c, INSN(MS_MATCHED, 0));
    c->code[start] = INSN(MS_CLAUSE, c->ncode);
    return true;
}

static bool c_spec(Comp *c, Term spec)
{
    snprintf(c->where, sizeof c->where, "match spec");
    if (!term_is_list(spec))
        return cfail(c, "not a list");
    if (!proper_list(spec))
        return cfail(c, "not a proper list");
    unsigned k = 1;
    for (Term t = spec; term_is_cons(t); t = cons_tail(t), k++) {
        if (k > TR_MS_MAX_CLAUSES) {
            snprintf(c->where, sizeof c->where, "match spec");
            return cfail(c, "more than %d clauses", TR_MS_MAX_CLAUSES);
        }
        if (!c_clause(c, cons_head(t), k))
            return false;
        if (c->ncode > TR_MS_MAX_CODE) {
            snprintf(c->where, sizeof c->where, "match spec");
            return cfail(c, "the program is larger than %d words", TR_MS_MAX_CODE);
        }
    }
    emit(c, INSN(MS_END, 0));
    return true;
}

/* True when the atom t is `name`. */
static bool atom_is(Term t, const char *name)
{
    return term_is_atom(t) && !strcmp(vm_atom_name(atom_value(t), NULL), name);
}

/*
 * Whether a (compiled, so well-formed) spec always gives the same result:
 * one clause, head '_', no guards, and a body of {return_trace},
 * {exception_trace}, {message, true} and {message, false} only.  Then
 * *flags and *msg are that result (the last message action wins, as in
 * a run).
 */
static bool constant_result(Term spec, unsigned *flags, TrMsMessage *msg)
{
    *flags = 0;
    *msg = TR_MS_MSG_DEFAULT;
    if (!term_is_cons(spec) || !term_is_nil(cons_tail(spec)))
        return false;
    Term cl = cons_head(spec);
    const Term *e = tuple_elems(cl);
    if (!atom_is(e[0], "_") || !term_is_nil(e[1]))
        return false;
    for (Term b = e[2]; term_is_cons(b); b = cons_tail(b)) {
        Term a = cons_head(b);
        if (!term_is_tuple(a))
            return false;
        const Term *ae = tuple_elems(a);
        unsigned n = tuple_arity(a);
        if (n == 1 && atom_is(ae[0], "return_trace"))
            *flags |= TR_MS_RETURN_TRACE;
        else if (n == 1 && atom_is(ae[0], "exception_trace"))
            *flags |= TR_MS_EXCEPTION_TRACE;
        else if (n == 2 && atom_is(ae[0], "message") && atom_is(ae[1], "true"))
            *msg = TR_MS_MSG_DEFAULT;
        else if (n == 2 && atom_is(ae[0], "message") && atom_is(ae[1], "false"))
            *msg = TR_MS_MSG_OFF;
        else
            return false;
    }
    return true;
}

TrMs *tr_ms_compile(Term spec, int arity, char *err, size_t errsize)
{
    Comp c = { .arity = arity, .err = err, .errsize = errsize };
    if (errsize)
        err[0] = 0;
    snprintf(c.where, sizeof c.where, "match spec");
    size_t words = 0;
    if (arity > VM_MAX_ARITY || arity < -1) {
        cfail(&c, "arity %d is out of range", arity);
        return NULL;
    }
    if (!src_check(&c, spec, 0, &words))
        return NULL;
    Term *src = vm_malloc((words ? words : 1) * sizeof(Term));
    Term *hp = src;
    Term source = vm_copy_to(&hp, spec);
    VM_ASSERT((size_t)(hp - src) == words, "source size");
    if (!c_spec(&c, source)) {
        free(c.code);
        free(c.lits);
        free(src);
        return NULL;
    }
    TrMs *ms = vm_malloc(sizeof *ms + c.ncode * sizeof(uint32_t) + sizeof(Term) +
                         c.nlits * sizeof(Term));
    vm_atomic_store_relaxed(&ms->refs, 1);
    ms->needs = c.needs;
    ms->source = source;
    ms->exit_atom = make_atom(ATOM_UEXIT);
    ms->src = src;
    ms->constant = constant_result(source, &ms->const_flags, &ms->const_message);
    ms->ncode = (uint32_t)c.ncode;
    ms->nlits = (uint32_t)c.nlits;
    memcpy(ms->code, c.code, c.ncode * sizeof(uint32_t));
    /* Literals start at the first Term-aligned address after the code. */
    uintptr_t at = (uintptr_t)(ms->code + c.ncode);
    ms->lits = (Term *)((at + sizeof(Term) - 1) & ~(uintptr_t)(sizeof(Term) - 1));
    if (c.nlits)
        memcpy(ms->lits, c.lits, c.nlits * sizeof(Term));
    free(c.code);
    free(c.lits);
    return ms;
}

void tr_ms_retain(TrMs *ms)
{
    vm_atomic_fetch_add_relaxed(&ms->refs, 1);
}

void tr_ms_free(TrMs *ms)
{
    if (!ms)
        return;
    /* Full barrier: every use of the spec by the dropping thread happens
     * before the free by whichever thread drops the last reference. */
    if (vm_atomic_fetch_add_full(&ms->refs, (uintptr_t)-1) != 1)
        return;
    free(ms->src);
    free(ms);
}

unsigned tr_ms_needs(const TrMs *ms)
{
    return ms->needs;
}

Term tr_ms_source(const TrMs *ms)
{
    return ms->source;
}

size_t tr_ms_format(const TrMs *ms, char *buf, size_t size)
{
    StrBuf sb;
    sb_init(&sb);
    vm_print_term(&sb, ms->source);
    size_t n = sb_copy_out(&sb, buf, size);
    sb_free(&sb);
    return n;
}

