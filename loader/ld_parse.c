/*
 * loader/ld_parse.c - the .tasm parser.
 *
 * Grammar (statements end at a newline; ';' starts a comment):
 *
 *   file      := { directive }
 *   directive := "module" name NL
 *              | "export" fa { "," fa } NL
 *              | "function" fa "regs" INT NL { line } "end" NL
 *   line      := [ IDENT ":" ] [ instr ] NL
 *   instr     := MNEMONIC [ operand { "," operand } ]
 *   fa        := name "/" INT
 *   name      := IDENT | QATOM
 *   operand   := "r" INT (register) | INT | label | name "/" INT
 *              | name ":" name "/" INT | literal
 *   literal   := INT | name | STRING | "[" [ literal { "," literal } [ "|" literal ] ] "]"
 *              | "{" [ literal { "," literal } ] "}" | "fun" name ":" name "/" INT
 *
 * Which operand kinds an instruction takes comes from vm/opcodes.def.
 * The parser checks the shape of each operand; ld_build.c checks ranges,
 * labels, functions and the per-opcode rules.
 */
#include "loader/ld_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/opcode.h"

typedef struct Parser {
    tvm_vm *vm;
    Lexer *lx;
    Token t;
    PModule *pm;
    int prev_line, prev_end;   /* where the last token next() consumed ends */
} Parser;

static void next(Parser *ps)
{
    /* Tokens never span lines, so the end is on the token's own line. */
    ps->prev_line = ps->t.line;
    ps->prev_end = ps->t.col + (int)ps->t.n;
    ld_token_free(&ps->t);
    ld_lex_next(ps->lx, &ps->t);
}

static Diag *diag(Parser *ps)
{
    return ps->lx->diag;
}

static bool is_punct(const Token *t, char c)
{
    return t->kind == T_PUNCT && t->punct == c;
}

static bool is_word(const Token *t, const char *w)
{
    return t->kind == T_IDENT && t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}

static bool at_eol(const Token *t)
{
    return t->kind == T_NL || t->kind == T_EOF;
}

/* Skips to the start of the next line (error recovery). */
static void skip_line(Parser *ps)
{
    while (!at_eol(&ps->t))
        next(ps);
}

static void error_got(Parser *ps, const char *expected)
{
    char buf[64];
    if (ps->t.kind == T_ERROR)
        return; /* the lexer already reported it */
    ld_error(diag(ps), ps->t.line, ps->t.col, "expected %s, got %s", expected,
             ld_tok_desc(&ps->t, buf, sizeof buf));
}

static bool expect_eol(Parser *ps)
{
    if (at_eol(&ps->t))
        return true;
    error_got(ps, "end of line");
    skip_line(ps);
    return false;
}

/* name := IDENT | QATOM; consumes it. */
static bool parse_name(Parser *ps, Atom *out, const char *what)
{
    const char *s;
    size_t n;
    if (ps->t.kind == T_IDENT) {
        s = ps->t.s;
        n = ps->t.n;
    } else if (ps->t.kind == T_QATOM) {
        s = ps->t.str;
        n = ps->t.slen;
    } else {
        error_got(ps, what);
        return false;
    }
    if (!ld_atom(diag(ps), ps->t.line, ps->t.col, s, n, out))
        return false;
    next(ps);
    return true;
}

static bool parse_arity(Parser *ps, uint32_t *arity)
{
    if (!is_punct(&ps->t, '/')) {
        error_got(ps, "'/' and an arity");
        return false;
    }
    next(ps);
    if (ps->t.kind != T_INT) {
        error_got(ps, "an arity");
        return false;
    }
    if (ps->t.ival < 0 || ps->t.ival > VM_MAX_ARITY) {
        ld_error(diag(ps), ps->t.line, ps->t.col, "arity %lld out of range 0..%d",
                 (long long)ps->t.ival, VM_MAX_ARITY);
        return false;
    }
    *arity = (uint32_t)ps->t.ival;
    next(ps);
    return true;
}

/* ==== literals ==== */

typedef struct LitParser {
    tvm_vm *vm;
    Lexer *lx;
    Token *t;
    LitBlock **lits;
    int depth;
} LitParser;

static void lp_next(LitParser *lp)
{
    ld_token_free(lp->t);
    ld_lex_next(lp->lx, lp->t);
}

static bool lp_error(LitParser *lp, const char *expected)
{
    char buf[64];
    if (lp->t->kind != T_ERROR)
        ld_error(lp->lx->diag, lp->t->line, lp->t->col, "bad literal: expected %s, got %s",
                 expected, ld_tok_desc(lp->t, buf, sizeof buf));
    return false;
}

static bool lp_atom(LitParser *lp, const char *s, size_t n, Term *out)
{
    Atom a;
    if (!ld_atom(lp->lx->diag, lp->t->line, lp->t->col, s, n, &a))
        return false;
    *out = make_atom(a);
    return true;
}

static bool lp_term(LitParser *lp, Term *out);

static bool lp_name(LitParser *lp, Atom *a)
{
    Term t;
    if (lp->t->kind == T_IDENT) {
        if (!lp_atom(lp, lp->t->s, lp->t->n, &t))
            return false;
    } else if (lp->t->kind == T_QATOM) {
        if (!lp_atom(lp, lp->t->str, lp->t->slen, &t))
            return false;
    } else {
        return lp_error(lp, "a name");
    }
    *a = atom_value(t);
    lp_next(lp);
    return true;
}

/* fun mod:name/arity */
static bool lp_fun(LitParser *lp, Term *out)
{
    Atom m, f;
    lp_next(lp);
    if (!lp_name(lp, &m))
        return false;
    if (!(lp->t->kind == T_PUNCT && lp->t->punct == ':'))
        return lp_error(lp, "':' in fun mod:name/arity");
    lp_next(lp);
    if (!lp_name(lp, &f))
        return false;
    if (!(lp->t->kind == T_PUNCT && lp->t->punct == '/'))
        return lp_error(lp, "'/' in fun mod:name/arity");
    lp_next(lp);
    if (lp->t->kind != T_INT || lp->t->ival < 0 || lp->t->ival > VM_MAX_ARITY)
        return lp_error(lp, "an arity 0..255");
    Export *e;
    if (!ld_export(lp->vm, lp->lx->diag, lp->t->line, lp->t->col, m, f, (uint32_t)lp->t->ival,
                   &e))
        return false;
    lp_next(lp);
    Term *o = ld_lit_alloc(lp->lits, 2);
    o[0] = MAKE_HEADER(IMM_HDR_FUN, 1);
    o[1] = (Term)(uintptr_t)e;
    *out = make_boxed(o);
    return true;
}

/* Elements up to the closing bracket; for lists also an optional '|' tail. */
static bool lp_seq(LitParser *lp, char close, Term **elems, size_t *n, Term *tail)
{
    size_t cap = 8;
    *elems = vm_malloc(cap * sizeof(Term));
    *n = 0;
    *tail = TERM_NIL;
    lp_next(lp);
    if (lp->t->kind == T_PUNCT && lp->t->punct == close) {
        lp_next(lp);
        return true;
    }
    for (;;) {
        if (*n == cap) {
            cap *= 2;
            *elems = vm_realloc(*elems, cap * sizeof(Term));
        }
        if (!lp_term(lp, &(*elems)[*n]))
            return false;
        (*n)++;
        if (lp->t->kind == T_PUNCT && lp->t->punct == ',') {
            lp_next(lp);
            continue;
        }
        if (close == ']' && lp->t->kind == T_PUNCT && lp->t->punct == '|') {
            lp_next(lp);
            if (!lp_term(lp, tail))
                return false;
            /* The tail is the last thing in a list: no ',' after it. */
            if (lp->t->kind == T_PUNCT && lp->t->punct == ']') {
                lp_next(lp);
                return true;
            }
            return lp_error(lp, "']' after the tail of the list");
        }
        if (lp->t->kind == T_PUNCT && lp->t->punct == close) {
            lp_next(lp);
            return true;
        }
        return lp_error(lp, close == ']' ? "',' or ']'" : "',' or '}'");
    }
}

static bool lp_term(LitParser *lp, Term *out)
{
    Token *t = lp->t;
    if (++lp->depth > 100) {
        ld_error(lp->lx->diag, t->line, t->col, "literal nested too deeply");
        return false;
    }
    bool ok = true;
    switch (t->kind) {
    case T_INT:
        *out = make_small(t->ival);
        lp_next(lp);
        break;
    case T_IDENT:
        if (t->n == 3 && memcmp(t->s, "fun", 3) == 0) {
            ok = lp_fun(lp, out);
            break;
        }
        ok = lp_atom(lp, t->s, t->n, out);
        if (ok)
            lp_next(lp);
        break;
    case T_QATOM:
        ok = lp_atom(lp, t->str, t->slen, out);
        if (ok)
            lp_next(lp);
        break;
    case T_STRING: {
        size_t words = binary_words(t->slen);
        Term *b = ld_lit_alloc(lp->lits, words);
        b[words - 1] = 0;
        b[0] = MAKE_HEADER(IMM_HDR_BINARY, t->slen);
        memcpy(b + 1, t->str, t->slen);
        *out = make_boxed(b);
        lp_next(lp);
        break;
    }
    case T_PUNCT:
        if (t->punct == '[' || t->punct == '{') {
            char open = t->punct;
            Term *elems, tail;
            size_t n;
            ok = lp_seq(lp, open == '[' ? ']' : '}', &elems, &n, &tail);
            if (ok && open == '{') {
                Term *o = ld_lit_alloc(lp->lits, n + 1);
                o[0] = MAKE_HEADER(IMM_HDR_TUPLE, n);
                memcpy(o + 1, elems, n * sizeof(Term));
                *out = make_boxed(o);
            } else if (ok) {
                Term l = tail;
                for (size_t i = n; i-- > 0;) {
                    Term *c = ld_lit_alloc(lp->lits, 2);
                    c[0] = elems[i];
                    c[1] = l;
                    l = make_cons_ptr(c);
                }
                *out = l;
            }
            free(elems);
            break;
        }
        ok = lp_error(lp, "a literal");
        break;
    default:
        ok = lp_error(lp, "a literal");
        break;
    }
    lp->depth--;
    return ok;
}

bool ld_parse_literal(tvm_vm *vm, Lexer *lx, Token *t, LitBlock **lits, Term *out)
{
    LitParser lp = { vm, lx, t, lits, 0 };
    return lp_term(&lp, out);
}

/* ==== operands ==== */

static const char *kind_desc(char k)
{
    switch (k) {
    case 'R': return "a register (rN)";
    case 'I': return "an integer";
    case 'N': return "a non-negative integer";
    case 'L': return "a label";
    case 'K': return "a literal";
    case 'F': return "a local function (name/arity)";
    case 'E': return "an external function (mod:name/arity)";
    default: return "an operand";
    }
}

static bool parse_register(Parser *ps, Operand *o)
{
    const Token *t = &ps->t;
    if (t->kind != T_IDENT || t->n < 2 || t->s[0] != 'r')
        return false;
    int64_t v = 0;
    bool huge = false;
    for (size_t i = 1; i < t->n; i++) {
        if (t->s[i] < '0' || t->s[i] > '9')
            return false;
        v = v * 10 + (t->s[i] - '0');
        if (v > FIELD_C_MAX) {
            huge = true;
            v = FIELD_C_MAX;
        }
    }
    if (huge) {
        /* Wider than any field, so out of range in any function; reported
         * here with the number as written (the verifier would print the
         * clamped one).  -1 tells the verifier it has been reported. */
        ld_error(diag(ps), t->line, t->col,
                 "register %.*s out of range: a function has at most %d registers",
                 (int)t->n, t->s, VM_MAX_REGS);
        v = -1;
    }
    o->ival = v;
    next(ps);
    return true;
}

static bool parse_operand(Parser *ps, char kind, Operand *o, int pos, const char *mn)
{
    o->kind = kind;
    o->line = ps->t.line;
    o->col = ps->t.col;
    char what[96];
    snprintf(what, sizeof what, "%s as operand %d of '%s'", kind_desc(kind), pos, mn);
    switch (kind) {
    case 'R':
        if (parse_register(ps, o))
            return true;
        error_got(ps, what);
        return false;
    case 'I':
    case 'N':
        if (ps->t.kind != T_INT) {
            error_got(ps, what);
            return false;
        }
        o->ival = ps->t.ival;
        next(ps);
        return true;
    case 'L':
        if (ps->t.kind != T_IDENT) {
            error_got(ps, what);
            return false;
        }
        o->label = vm_strndup(ps->t.s, ps->t.n);
        next(ps);
        return true;
    case 'K':
        return ld_parse_literal(ps->vm, ps->lx, &ps->t, &ps->pm->lits, &o->lit);
    case 'F':
        if (ps->t.kind != T_IDENT && ps->t.kind != T_QATOM) {
            error_got(ps, what);
            return false;
        }
        return parse_name(ps, &o->name, what) && parse_arity(ps, &o->arity);
    case 'E':
        if (ps->t.kind != T_IDENT && ps->t.kind != T_QATOM) {
            error_got(ps, what);
            return false;
        }
        if (!parse_name(ps, &o->mod, what))
            return false;
        if (!is_punct(&ps->t, ':')) {
            error_got(ps, "':' in mod:name/arity");
            return false;
        }
        next(ps);
        return parse_name(ps, &o->name, "a function name") && parse_arity(ps, &o->arity);
    default:
        VM_UNREACHABLE();
    }
}

static PInstr *add_instr(PFunc *f)
{
    if (f->ncode == f->code_cap) {
        f->code_cap = f->code_cap ? f->code_cap * 2 : 16;
        f->code = vm_realloc(f->code, f->code_cap * sizeof(PInstr));
    }
    PInstr *pi = &f->code[f->ncode++];
    memset(pi, 0, sizeof *pi);
    return pi;
}

/* Takes back the instruction add_instr() just made (it did not parse); frees
 * the label name an operand may already hold. */
static void drop_instr(PFunc *f)
{
    PInstr *pi = &f->code[--f->ncode];
    for (int k = 0; k < 4; k++)
        free(pi->ops[k].label);
}

/* Parses an instruction whose mnemonic is the current token.  Returns false
 * (after reporting) if the line is left out of the function's code. */
static bool parse_instr(Parser *ps, PFunc *f)
{
    char buf[64];
    int op = vm_opcode_lookup(ps->t.s, (unsigned)ps->t.n);
    if (op < 0) {
        ld_error(diag(ps), ps->t.line, ps->t.col, "unknown instruction %s",
                 ld_tok_desc(&ps->t, buf, sizeof buf));
        skip_line(ps);
        return false;
    }
    const OpInfo *oi = &vm_opinfo[op];
    if (oi->flags & OPF_INTERNAL) {
        ld_error(diag(ps), ps->t.line, ps->t.col,
                 "'%s' is made by the VM and cannot be written in assembly", oi->name);
        skip_line(ps);
        return false;
    }
    PInstr *pi = add_instr(f);
    pi->op = op;
    pi->line = ps->t.line;
    pi->col = ps->t.col;
    next(ps);
    int nops = 0;
    for (int fld = 0; fld < 4; fld++)
        if (oi->fmt[fld] != '-')
            nops++;
    int pos = 0;
    for (int fld = 0; fld < 4; fld++) {
        char k = oi->fmt[fld];
        if (k == '-')
            continue;
        pos++;
        /* A missing operand is reported just after the last thing written,
         * not at the end of the line, which may be after a comment. */
        if (pos > 1) {
            if (!is_punct(&ps->t, ',')) {
                if (at_eol(&ps->t))
                    ld_error(diag(ps), ps->prev_line, ps->prev_end,
                             "'%s' takes %d operands, got %d", oi->name, nops, pos - 1);
                else
                    error_got(ps, "','");
                drop_instr(f);
                skip_line(ps);
                return false;
            }
            next(ps);
        } else if (at_eol(&ps->t)) {
            ld_error(diag(ps), ps->prev_line, ps->prev_end, "'%s' takes %d operand%s, got 0",
                     oi->name, nops, nops == 1 ? "" : "s");
            drop_instr(f);
            return false;
        }
        if (!parse_operand(ps, k, &pi->ops[fld], pos, oi->name)) {
            drop_instr(f);
            skip_line(ps);
            return false;
        }
    }
    if (!at_eol(&ps->t)) {
        /* With no operands at all, whatever follows is one too many. */
        if (is_punct(&ps->t, ',') || nops == 0)
            ld_error(diag(ps), ps->t.line, ps->t.col, "'%s' takes %d operand%s, got more",
                     oi->name, nops, nops == 1 ? "" : "s");
        else
            error_got(ps, "end of line");
        drop_instr(f);
        skip_line(ps);
        return false;
    }
    return true;
}

static void add_label(Parser *ps, PFunc *f, const Token *name)
{
    if (f->nlabels == f->labels_cap) {
        f->labels_cap = f->labels_cap ? f->labels_cap * 2 : 8;
        f->labels = vm_realloc(f->labels, f->labels_cap * sizeof(PLabel));
    }
    f->labels[f->nlabels++] = (PLabel){ vm_strndup(name->s, name->n), name->line, name->col,
                                        f->ncode };
    (void)ps;
}

static void parse_body(Parser *ps, PFunc *f)
{
    for (;;) {
        while (ps->t.kind == T_NL)
            next(ps);
        if (ps->t.kind == T_EOF) {
            /* After a NUL byte the lexer reports end of file; the NUL was
             * the one error for the file. */
            if (!ps->lx->dead)
                ld_error(diag(ps), ps->t.line, ps->t.col,
                         "unexpected end of file: function starting at line %d is missing 'end'",
                         f->line);
            return;
        }
        if (ps->t.kind != T_IDENT) {
            error_got(ps, "an instruction or a label");
            f->dropped = true;
            skip_line(ps);
            continue;
        }
        /* A label is IDENT ':' at the start of a line.  Looked for before the
         * keywords, so that any identifier (even 'end') can name a label. */
        Token first = ps->t;
        ps->t.str = NULL;
        Lexer save = *ps->lx;
        int save_errors = diag(ps)->errors;
        size_t save_len = diag(ps)->out->len;
        Token second;
        ld_lex_next(ps->lx, &second);
        if (second.kind == T_PUNCT && second.punct == ':') {
            add_label(ps, f, &first);
            ld_token_free(&second);
            next(ps);
            continue;
        }
        /* Not a label: rewind the lexer (and any diagnostic the lookahead
         * made, which the real parse will make again) to after the mnemonic. */
        ld_token_free(&second);
        *ps->lx = save;
        diag(ps)->errors = save_errors;
        diag(ps)->out->len = save_len;
        diag(ps)->out->s[save_len] = '\0';
        ps->t = first;
        if (is_word(&ps->t, "end")) {
            next(ps);
            f->ended = true;
            expect_eol(ps);
            return;
        }
        if (is_word(&ps->t, "function") || is_word(&ps->t, "module") ||
            is_word(&ps->t, "export")) {
            ld_error(diag(ps), ps->t.line, ps->t.col,
                     "function starting at line %d is missing 'end'", f->line);
            return;
        }
        if (!parse_instr(ps, f))
            f->dropped = true;
    }
}

static void pfunc_free(PFunc *f)
{
    for (uint32_t j = 0; j < f->ncode; j++)
        for (int k = 0; k < 4; k++)
            free(f->code[j].ops[k].label);
    for (uint32_t j = 0; j < f->nlabels; j++)
        free(f->labels[j].name);
    free(f->code);
    free(f->labels);
}

static void parse_function(Parser *ps)
{
    PModule *pm = ps->pm;
    int line = ps->t.line, col = ps->t.col;
    next(ps);
    PFunc fn;
    memset(&fn, 0, sizeof fn);
    fn.line = line;
    fn.col = col;
    bool named = parse_name(ps, &fn.name, "a function name") && parse_arity(ps, &fn.arity);
    bool ok = named;
    if (ok) {
        if (!is_word(&ps->t, "regs")) {
            error_got(ps, "'regs'");
            ok = false;
        } else {
            next(ps);
            if (ps->t.kind != T_INT || ps->t.ival < 0) {
                error_got(ps, "a register count");
                ok = false;
            } else if (ps->t.ival > VM_MAX_REGS) {
                /* Checked here, where the number as written is known. */
                ld_error(diag(ps), ps->t.line, ps->t.col,
                         "register count %lld out of range 0..%d",
                         (long long)ps->t.ival, VM_MAX_REGS);
                ok = false;
            } else {
                fn.nregs = (uint32_t)ps->t.ival;
                next(ps);
                ok = expect_eol(ps);
            }
        }
    }
    if (!ok)
        skip_line(ps);
    /* With the register count unknown, verifying the body would only report
     * errors that are not there. */
    fn.bad_header = !ok;
    parse_body(ps, &fn);
    if (!named) {
        /* Nothing can refer to a function without a name and arity, and
         * keeping it (as false/0) would make spurious duplicates. */
        pfunc_free(&fn);
        return;
    }
    if (pm->nfuncs == pm->funcs_cap) {
        pm->funcs_cap = pm->funcs_cap ? pm->funcs_cap * 2 : 16;
        pm->funcs = vm_realloc(pm->funcs, pm->funcs_cap * sizeof(PFunc));
    }
    pm->funcs[pm->nfuncs++] = fn;
}

static void parse_export(Parser *ps)
{
    PModule *pm = ps->pm;
    next(ps);
    for (;;) {
        PExport ex = { 0, 0, ps->t.line, ps->t.col };
        if (!parse_name(ps, &ex.name, "a function name") || !parse_arity(ps, &ex.arity)) {
            skip_line(ps);
            return;
        }
        if (pm->nexports == pm->exports_cap) {
            pm->exports_cap = pm->exports_cap ? pm->exports_cap * 2 : 16;
            pm->exports = vm_realloc(pm->exports, pm->exports_cap * sizeof(PExport));
        }
        pm->exports[pm->nexports++] = ex;
        if (is_punct(&ps->t, ',')) {
            next(ps);
            continue;
        }
        expect_eol(ps);
        return;
    }
}

static void parse_module(Parser *ps)
{
    PModule *pm = ps->pm;
    int line = ps->t.line, col = ps->t.col;
    next(ps);
    if (pm->has_name) {
        ld_error(diag(ps), line, col, "second 'module' directive (the first is at line %d)",
                 pm->name_line);
        skip_line(ps);
        return;
    }
    if (!parse_name(ps, &pm->name, "a module name")) {
        skip_line(ps);
        return;
    }
    pm->has_name = true;
    pm->name_line = line;
    pm->name_col = col;
    expect_eol(ps);
}

void ld_parse(tvm_vm *vm, Lexer *lx, PModule *pm)
{
    Parser ps = { vm, lx, { 0 }, pm, 0, 0 };
    ld_lex_next(lx, &ps.t);
    for (;;) {
        while (ps.t.kind == T_NL)
            next(&ps);
        if (ps.t.kind == T_EOF)
            break;
        if (is_word(&ps.t, "module")) {
            parse_module(&ps);
        } else if (is_word(&ps.t, "export")) {
            parse_export(&ps);
        } else if (is_word(&ps.t, "function")) {
            parse_function(&ps);
        } else {
            error_got(&ps, "'module', 'export' or 'function'");
            /* Resume at the next directive: after a misspelt 'function' each
             * line of its body (and its 'end') would report this again. */
            do {
                skip_line(&ps);
                while (ps.t.kind == T_NL)
                    next(&ps);
            } while (ps.t.kind != T_EOF && !is_word(&ps.t, "module") &&
                     !is_word(&ps.t, "export") && !is_word(&ps.t, "function"));
        }
    }
    ld_token_free(&ps.t);
}

void ld_pmodule_free(PModule *pm)
{
    for (uint32_t i = 0; i < pm->nfuncs; i++)
        pfunc_free(&pm->funcs[i]);
    free(pm->funcs);
    free(pm->exports);
    free(pm->index);
}
