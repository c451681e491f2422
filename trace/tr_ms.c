/*
 * trace/tr_ms.c - match specifications: the compiler and the runner.
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
#include "trace/tr_ms.h"

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

enum {
    MS_CLAUSE,     /* operand: the next clause's offset (the fail target) */
    MS_END,        /* no clause matched */
    MS_ARITY,      /* call arity == operand, else fail */
    MS_ARITY_GE,   /* call arity >= operand, else fail */
    MS_ARG,        /* cur = args[operand] */
    MS_ARGLIST,    /* cur = the argument list (built in scratch) */
    MS_BIND,       /* vars[operand] = cur */
    MS_EQVAR,      /* cur =:= vars[operand], else fail */
    MS_EQIMM,      /* cur == lits[operand] (an immediate), else fail */
    MS_EQLIT,      /* cur =:= lits[operand] (a compound constant), else fail */
    MS_TUPLE,      /* cur is a tuple of arity operand, else fail; push cur */
    MS_ELEM,       /* cur = element operand (0-based) of the top tuple */
    MS_CONS,       /* cur is a cons, else fail; push cur */
    MS_HEAD,       /* cur = head of the top cons */
    MS_TAILPOP,    /* cur = tail of the top cons; pop */
    MS_POP,        /* pop */
    MS_LIT,        /* push lits[operand] */
    MS_VAR,        /* push vars[operand] */
    MS_ALL,        /* push '$_' (the argument list) */
    MS_VARS,       /* push '$$': operand n, then n slot words in number order */
    MS_MKTUPLE,    /* pop operand values, push a tuple of them */
    MS_MKLIST,     /* pop operand elements and a tail, push the list */
    MS_CALL,       /* operand: function id; next word: number of arguments */
    MS_JNT,        /* pop; unless true, push false and jump to operand */
    MS_JT,         /* pop; if true, push true and jump to operand */
    MS_TEST,       /* pop; unless true, fail (a guard) */
    MS_BODY,       /* from here on a raising function gives 'EXIT' */
    MS_DROP,       /* pop (an action's value) */
    MS_MATCHED,    /* the clause matched */
};

#define OPERAND(w) ((w) >> 8)
#define INSN(op, a) ((uint32_t)(op) | (uint32_t)(a) << 8)

/* The functions of the language.  Actions are allowed in bodies only. */
enum {
    F_IS_ATOM, F_IS_INTEGER, F_IS_NUMBER, F_IS_FLOAT, F_IS_BOOLEAN, F_IS_TUPLE,
    F_IS_LIST, F_IS_BINARY, F_IS_PID, F_IS_FUNCTION, F_IS_FUNCTION2,
    F_EQ, F_NE, F_EXEQ, F_EXNE, F_LT, F_GT, F_LE, F_GE,
    F_NOT, F_AND, F_OR, F_XOR, F_ANDALSO, F_ORELSE,
    F_ADD, F_SUB, F_MUL, F_DIV, F_REM, F_BAND, F_BOR, F_BXOR, F_BSL, F_BSR,
    F_NEG, F_PLUS, F_BNOT, F_ABS,
    F_ELEMENT, F_SIZE, F_TUPLE_SIZE, F_BYTE_SIZE, F_HD, F_TL, F_LENGTH,
    F_MIN, F_MAX, F_SELF,
    /* actions */
    F_MESSAGE, F_RETURN_TRACE, F_EXCEPTION_TRACE, F_CALLER, F_SILENT,
    F_DISPLAY, F_BACKTRACE,
};
#define F_FIRST_ACTION F_MESSAGE

typedef struct MsFun {
    const char *name;
    int arity;            /* -1: any number (one or more) */
    unsigned id;
} MsFun;

static const MsFun ms_funs[] = {
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
    { "backtrace", 0, F_BACKTRACE },
};

struct TrMs {
    VmAtomic refs;            /* see tr_ms.h: engine only; runs never touch it */
    unsigned needs;           /* TR_MS_NEED_* */
    Term source;              /* the spec, pointing into src */
    Term exit_atom;           /* 'EXIT' */
    Term *src;                /* the source copy (its own block) */
    Term *lits;               /* nlits literals, after the code */
    uint32_t ncode, nlits;
    uint32_t code[];
};

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

static bool c_pat_compound(Comp *c, Term p)
{
    if (++c->msp > TR_MS_MAX_DEPTH + 1)
        return cfail(c, "patterns nested deeper than %d levels", TR_MS_MAX_DEPTH);
    if (term_is_tuple(p)) {
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
    emit(c, INSN(MS_CONS, 0));
    emit(c, INSN(MS_HEAD, 0));
    if (!c_pattern(c, cons_head(p)))
        return false;
    emit(c, INSN(MS_TAILPOP, 0));
    c->msp--;
    return c_pattern(c, cons_tail(p));
}

/* Matches the current term against pattern p. */
static bool c_pattern(Comp *c, Term p)
{
    int64_t num = 0;
    int kind = var_kind(p, &num);
    if (kind != V_NONE)
        return c_pat_var(c, p, kind, num);
    if ((term_is_tuple(p) || term_is_cons(p)) && !ground(p))
        return c_pat_compound(c, p);
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
    if (c->arity >= 0 && (open ? (unsigned)c->arity < n : (unsigned)c->arity != n)) {
        /* "clause 1: head has 2 arguments, ..." reads better than "head: has". */
        c->where[strlen(c->where) - strlen(": head")] = 0;
        return cfail(c, "head has %s%u argument%s, the function takes %d",
                     open ? "at least " : "", n, n == 1 ? "" : "s", c->arity);
    }
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
    for (size_t i = 0; i < VM_ARRAY_LEN(ms_funs); i++) {
        if (strlen(ms_funs[i].name) != len || memcmp(ms_funs[i].name, s, len) != 0)
            continue;
        if (ms_funs[i].arity == (int)nargs || (ms_funs[i].arity < 0 && nargs > 0))
            return &ms_funs[i];
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

/* Checks that count against the clause (actions that have a bound). */
static bool c_call_effects(Comp *c, unsigned id)
{
    if (id == F_CALLER) {
        c->needs |= TR_MS_NEED_CALLER;
        return use_heap(c, 4);
    }
    if (id == F_SELF)
        c->needs |= TR_MS_NEED_SELF;
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
    if (!c_call_effects(c, f->id))
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
    if (n == 2 && first == make_atom(vm_atom_cstr("const"))) {
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
    ms->exit_atom = make_atom(vm_atom_cstr("EXIT"));
    ms->src = src;
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

/* Body actions: record the effect in the result; each returns true. */
static bool action(Run *r, unsigned id, Term a, Term *out)
{
    TrMsResult *res = r->res;
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
    default:
        *out = caller_term(r);
        return true;
    }
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
    return action(r, id, n ? a[0] : TERM_NIL, out);
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

bool tr_ms_run(const TrMs *ms, const Term *args, unsigned arity, const TrMsCtx *ctx,
               TrMsScratch *scratch, TrMsResult *res)
{
    memset(res, 0, sizeof *res);
    if (arity > VM_MAX_ARITY)
        return false;
    Run r = { ms, args, arity, ctx, scratch, res, scratch->heap, TR_MS_MAX_STEPS };
    /* A failed clause never wrote *res: only bodies write it, and a
     * clause that reaches its body has matched. */
    return run(&r);
}

static size_t result_words(const TrMsResult *res)
{
    size_t n = res->message == TR_MS_MSG_TERM ? term_size(res->msg) : 0;
    for (unsigned i = 0; i < res->ndisplay; i++)
        n += term_size(res->display[i]);
    return n;
}

bool tr_ms_run_heap(const TrMs *ms, Process *p, const Term *args, unsigned arity,
                    const TrMsCtx *ctx, TrMsScratch *scratch, TrMsResult *res)
{
    if (!tr_ms_run(ms, args, arity, ctx, scratch, res))
        return false;
    size_t words = result_words(res);
    if ((size_t)(p->hend - p->htop) < words) {
        /* The collection moves the arguments (p's roots) and so stales
         * the result's pointers into them: run again on the moved ones. */
        vm_heap_ensure(p, words, NULL, 0);
        tr_ms_run(ms, args, arity, ctx, scratch, res);
        VM_ASSERT(result_words(res) == words, "a run is deterministic");
    }
    if (res->message == TR_MS_MSG_TERM)
        res->msg = vm_copy_term(p, res->msg);
    for (unsigned i = 0; i < res->ndisplay; i++)
        res->display[i] = vm_copy_term(p, res->display[i]);
    return true;
}
