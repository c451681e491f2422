/*
 * trace/tr_ms_internal.h - what the match-spec compiler (tr_ms_compile.c)
 * and runner (tr_ms_run.c) share: the instruction set, the function
 * numbers, and the layout of a compiled spec.  See tr_ms_compile.c for
 * the compiled form and tr_ms_run.c for how it runs.
 */
#ifndef TRACE_TR_MS_INTERNAL_H
#define TRACE_TR_MS_INTERNAL_H

#include "trace/tr_ms.h"
#include "vm/atomics.h"

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
    F_DISPLAY, F_BACKTRACE, F_CALLER_LINE, F_STACKTRACE, F_STACKTRACE1,
    /* trace flag changes (these last: tr_ms_compile.c tests id >= F_ENABLE_TRACE) */
    F_ENABLE_TRACE, F_ENABLE_TRACE2, F_DISABLE_TRACE, F_DISABLE_TRACE2, F_TRACE2, F_TRACE3,
};
#define F_FIRST_ACTION F_MESSAGE

typedef struct MsFun {
    const char *name;
    int arity;            /* -1: any number (one or more) */
    unsigned id;
} MsFun;

/* The function table (tr_ms_compile.c), for the compiler's lookup. */
extern const MsFun tr_ms_funs[];
extern const size_t tr_ms_nfuns;

struct TrMs {
    VmAtomic refs;            /* see tr_ms.h: engine only; runs never touch it */
    unsigned needs;           /* TR_MS_NEED_* */
    Term source;              /* the spec, pointing into src */
    Term exit_atom;           /* 'EXIT' */
    Term *src;                /* the source copy (its own block) */
    Term *lits;               /* nlits literals, after the code */
    uint32_t ncode, nlits;
    /* The common trace spec [{'_', [], Actions}] whose actions are only
     * return_trace, exception_trace and message true/false matches every
     * call with the same result: runs skip the program (tr_ms_run). */
    bool constant;
    unsigned const_flags;     /* TR_MS_* of that result */
    TrMsMessage const_message;
    uint32_t code[];
};

#endif /* TRACE_TR_MS_INTERNAL_H */
