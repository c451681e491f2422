/*
 * loader/ld_internal.h - lexer, parser and builder internals.
 */
#ifndef LOADER_LD_INTERNAL_H
#define LOADER_LD_INTERNAL_H

#include <stdint.h>

#include "loader/loader.h"
#include "vm/term.h"

#define LD_MAX_ERRORS 20

/* ==== diagnostics ==== */

typedef struct Diag {
    const char *file;
    StrBuf *out;
    int errors;
    bool limit;        /* an error was a shared table being full (TVM_ERR_LIMIT) */
    /* The load comes from VM code (code:load_binary/3): the export
     * entries its names make count against max_exports, as make_fun/3's
     * do; a load from the C API is never refused one.  Set by the
     * caller, read by ld_export. */
    bool exports_bounded;
} Diag;

/* Interns the atom a name or literal at line:col names; false after
 * reporting "atom longer than 255 bytes" or "atom table full". */
bool ld_atom(Diag *d, int line, int col, const char *s, size_t n, Atom *out);

/* The export entry of mod:name/arity, which the text names at line:col;
 * false after reporting "export table full" (d->exports_bounded only). */
bool ld_export(tvm_vm *vm, Diag *d, int line, int col, Atom mod, Atom name, uint32_t arity,
               struct Export **out);

void ld_error(Diag *d, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ==== tokens ==== */

typedef enum TokKind {
    T_EOF, T_NL, T_IDENT, T_QATOM, T_INT, T_STRING, T_PUNCT, T_ERROR
} TokKind;

typedef struct Token {
    TokKind kind;
    int line, col;
    const char *s;     /* source text of the token */
    size_t n;
    int64_t ival;      /* T_INT */
    char *str;         /* T_QATOM / T_STRING: decoded bytes (malloc'd) */
    size_t slen;
    char punct;        /* T_PUNCT */
} Token;

typedef struct Lexer {
    const char *text;
    size_t len, pos;
    int line, col;
    Diag *diag;
    bool dead;         /* a fatal lexical error (binary data) stopped it */
} Lexer;

void ld_lex_init(Lexer *lx, const char *text, size_t len, Diag *diag);
/* Next token; the previous token's decoded string is the caller's to free. */
void ld_lex_next(Lexer *lx, Token *t);
/* A short printable description of a token, e.g. "'foo'" or "end of line". */
const char *ld_tok_desc(const Token *t, char *buf, size_t size);

/* ==== literal arena: boxed literals that never move ==== */

Term *ld_lit_alloc(LitBlock **blocks, size_t words);

/* ==== parsed form ==== */

typedef struct Operand {
    char kind;          /* the format letter it satisfies */
    int line, col;
    int64_t ival;       /* R, I, N */
    char *label;        /* L */
    Atom mod, name;     /* F (name), E (mod, name) */
    uint32_t arity;     /* F, E */
    struct Export *exp; /* E: its entry, found before the module is built */
    Term lit;           /* K */
} Operand;

typedef struct PInstr {
    int op;
    int line, col;
    Operand ops[4];     /* by field: A, B, C, X */
    uint32_t offset;    /* word offset in the function */
} PInstr;

typedef struct PLabel {
    char *name;
    int line, col;
    uint32_t index;     /* instruction index it precedes */
} PLabel;

typedef struct PFunc {
    Atom name;
    uint32_t arity, nregs;
    int line, col;
    PInstr *code;
    uint32_t ncode, code_cap;
    PLabel *labels;
    uint32_t nlabels, labels_cap;
    bool exported;
    struct Export *export; /* exported: its entry, found before the build */
    bool ended;
    bool bad_header;    /* 'regs N' missing or invalid: the body is not verified */
    bool dropped;       /* a body line failed to parse and was left out, so
                           checks of the code as a whole would be spurious */
} PFunc;

typedef struct PExport {
    Atom name;
    uint32_t arity;
    int line, col;
} PExport;

typedef struct PModule {
    Atom name;
    bool has_name;
    int name_line, name_col;
    PFunc *funcs;
    uint32_t nfuncs, funcs_cap;
    PExport *exports;
    uint32_t nexports, exports_cap;
    LitBlock *lits;
    /* funcs by name and arity (ld_build.c's index: 1 + the index of the
     * first function with that name and arity, 0 for an empty slot;
     * index_mask + 1 slots, a power of two), built after the parse */
    uint32_t *index;
    uint32_t index_mask;
} PModule;

/* Parses a whole file; diagnostics go to diag. */
void ld_parse(tvm_vm *vm, Lexer *lx, PModule *pm);
void ld_pmodule_free(PModule *pm);

/*
 * Parses one literal term starting at token *t (which it consumes, leaving
 * the next token in *t).  Boxed parts are allocated in *lits.  Returns
 * false after reporting an error.
 */
bool ld_parse_literal(tvm_vm *vm, Lexer *lx, Token *t, LitBlock **lits, Term *out);

void ld_token_free(Token *t);

#endif /* LOADER_LD_INTERNAL_H */
