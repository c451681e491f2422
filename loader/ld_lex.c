/*
 * loader/ld_lex.c - diagnostics and the .tasm lexer.
 *
 * Tokens: identifiers ([A-Za-z_][A-Za-z0-9_@]*), quoted atoms ('...'),
 * integers (decimal, optional leading '-'), strings ("..."), punctuation
 * (, : / { } [ ] |) and newlines, which end statements.  ';' starts a
 * comment to the end of the line.  Escapes in quoted atoms and strings:
 * \n \t \r \\ \' \" \xHH.
 *
 * Binary junk: a NUL byte stops the lexer with one error (the file is not
 * text); any other control character, or a byte >= 0x80 outside a string,
 * quoted atom or comment, is an error at its position.
 */
#include "loader/ld_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/module.h"
#include "vm/print.h"
#include "vm/vm.h"

void ld_error(Diag *d, int line, int col, const char *fmt, ...)
{
    d->errors++;
    if (d->errors > LD_MAX_ERRORS)
        return;
    sb_printf(d->out, "%s:%d:%d: error: ", d->file, line, col);
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(d->out, fmt, ap);
    va_end(ap);
    sb_putc(d->out, '\n');
    if (d->errors == LD_MAX_ERRORS)
        sb_printf(d->out, "%s:%d:%d: error: too many errors, stopping\n", d->file, line, col);
}

bool ld_atom(Diag *d, int line, int col, const char *s, size_t n, Atom *out)
{
    if (vm_atom_intern(s, n, out))
        return true;
    if (n > VM_ATOM_MAX_LEN) {
        ld_error(d, line, col, "atom longer than %d bytes", VM_ATOM_MAX_LEN);
    } else {
        /* The table is shared by every VM and never shrinks: the load
         * fails as a whole, with TVM_ERR_LIMIT, and nothing is lost. */
        ld_error(d, line, col, "atom table full (%u atoms)", VM_ATOM_MAX_COUNT);
        d->limit = true;
    }
    return false;
}

bool ld_export(tvm_vm *vm, Diag *d, int line, int col, Atom mod, Atom name, uint32_t arity,
               Export **out)
{
    *out = d->exports_bounded ? vm_export_get_bounded(vm, mod, name, arity)
                              : vm_export_get(vm, mod, name, arity);
    if (*out)
        return true;
    /* Entries are never freed, so a load from VM code that names new
     * functions without end would grow the table without end (each
     * load, delete and purge leaving its names behind): the load fails
     * as a whole, with TVM_ERR_LIMIT; the entries it made before stay,
     * within the bound. */
    StrBuf mfa;
    sb_init(&mfa);
    vm_print_atom(&mfa, mod);
    sb_putc(&mfa, ':');
    vm_print_atom(&mfa, name);
    ld_error(d, line, col, "export table full (%zu entries): %s/%u", vm->max_exports, mfa.s,
             arity);
    sb_free(&mfa);
    d->limit = true;
    return false;
}

void ld_lex_init(Lexer *lx, const char *text, size_t len, Diag *diag)
{
    lx->text = text;
    lx->len = len;
    lx->pos = 0;
    lx->line = 1;
    lx->col = 1;
    lx->diag = diag;
    lx->dead = false;
}

static int peek(const Lexer *lx, size_t ahead)
{
    return lx->pos + ahead < lx->len ? (unsigned char)lx->text[lx->pos + ahead] : -1;
}

static void advance(Lexer *lx)
{
    if (lx->text[lx->pos] == '\n') {
        lx->line++;
        lx->col = 1;
    } else {
        lx->col++;
    }
    lx->pos++;
}

static bool is_ident_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident(int c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9') || c == '@';
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/*
 * After a bad escape: skips the rest of the quoted text, up to and including
 * the closing quote (or up to the end of the line), so that its remainder is
 * not lexed as tokens and its closing quote not taken for an opening one.
 */
static void skip_quoted(Lexer *lx, char quote)
{
    for (;;) {
        int c = peek(lx, 0);
        if (c <= 0 || c == '\n')
            return;
        advance(lx);
        if (c == quote)
            return;
        if (c == '\\' && peek(lx, 0) > 0 && peek(lx, 0) != '\n')
            advance(lx);
    }
}

/* Lexes a quoted atom or string; the opening quote is at lx->pos. */
static void lex_quoted(Lexer *lx, Token *t, char quote)
{
    StrBuf sb;
    sb_init(&sb);
    advance(lx);
    for (;;) {
        int c = peek(lx, 0);
        if (c < 0 || c == '\n') {
            ld_error(lx->diag, t->line, t->col, "unterminated %s",
                     quote == '"' ? "string" : "quoted atom");
            t->kind = T_ERROR;
            sb_free(&sb);
            return;
        }
        if (c == quote) {
            advance(lx);
            break;
        }
        if (c == 0) {
            lx->dead = true;
            ld_error(lx->diag, lx->line, lx->col, "file contains a NUL byte (binary data?)");
            t->kind = T_ERROR;
            sb_free(&sb);
            return;
        }
        if (c == '\\') {
            int line = lx->line, col = lx->col;
            advance(lx);
            int e = peek(lx, 0);
            /* A backslash that ends the line (or meets NUL): the loop reports
             * the string as unterminated (or the NUL), not a bad escape. */
            if (e <= 0 || e == '\n')
                continue;
            char out;
            switch (e) {
            case 'n': out = '\n'; break;
            case 't': out = '\t'; break;
            case 'r': out = '\r'; break;
            case '\\': out = '\\'; break;
            case '\'': out = '\''; break;
            case '"': out = '"'; break;
            case 'x': {
                int h1 = hexval(peek(lx, 1)), h2 = hexval(peek(lx, 2));
                if (h1 < 0 || h2 < 0) {
                    ld_error(lx->diag, line, col, "bad escape: \\x needs two hex digits");
                    skip_quoted(lx, quote);
                    t->kind = T_ERROR;
                    sb_free(&sb);
                    return;
                }
                advance(lx);
                advance(lx);
                out = (char)(h1 * 16 + h2);
                break;
            }
            default:
                ld_error(lx->diag, line, col, "unknown escape sequence '\\%c'",
                         e >= 32 && e < 127 ? e : '?');
                skip_quoted(lx, quote);
                t->kind = T_ERROR;
                sb_free(&sb);
                return;
            }
            advance(lx);
            sb_putc(&sb, out);
            continue;
        }
        sb_putc(&sb, (char)c);
        advance(lx);
    }
    t->kind = quote == '"' ? T_STRING : T_QATOM;
    t->str = sb.s;
    t->slen = sb.len;
}

static void lex_int(Lexer *lx, Token *t)
{
    bool neg = false;
    if (peek(lx, 0) == '-') {
        neg = true;
        advance(lx);
    }
    uint64_t v = 0;
    bool overflow = false;
    while (peek(lx, 0) >= '0' && peek(lx, 0) <= '9') {
        v = v * 10 + (uint64_t)(peek(lx, 0) - '0');
        if (v > (uint64_t)SMALL_MAX + 1)
            overflow = true;
        advance(lx);
    }
    if (is_ident(peek(lx, 0))) {
        ld_error(lx->diag, t->line, t->col, "malformed number");
        while (is_ident(peek(lx, 0)))
            advance(lx);
        t->kind = T_ERROR;
        return;
    }
    if (overflow || (!neg && v > (uint64_t)SMALL_MAX)) {
        ld_error(lx->diag, t->line, t->col,
                 "integer literal out of range (integers are 62-bit: %lld..%lld)",
                 (long long)SMALL_MIN, (long long)SMALL_MAX);
        t->kind = T_ERROR;
        return;
    }
    t->kind = T_INT;
    t->ival = neg ? -(int64_t)v : (int64_t)v;
}

void ld_lex_next(Lexer *lx, Token *t)
{
    memset(t, 0, sizeof *t);
    for (;;) {
        int c = peek(lx, 0);
        t->line = lx->line;
        t->col = lx->col;
        t->s = lx->text + lx->pos;
        if (c < 0 || lx->dead) {
            t->kind = T_EOF;
            return;
        }
        if (c == ' ' || c == '\t' || c == '\r') {
            advance(lx);
            continue;
        }
        if (c == ';') {
            while (peek(lx, 0) >= 0 && peek(lx, 0) != '\n') {
                if (peek(lx, 0) == 0)
                    break;
                advance(lx);
            }
            continue;
        }
        if (c == '\n') {
            advance(lx);
            t->kind = T_NL;
            return;
        }
        if (c == 0) {
            lx->dead = true;
            ld_error(lx->diag, lx->line, lx->col, "file contains a NUL byte (binary data?)");
            t->kind = T_EOF;
            return;
        }
        if (is_ident_start(c)) {
            while (is_ident(peek(lx, 0)))
                advance(lx);
            t->kind = T_IDENT;
            t->n = (size_t)(lx->text + lx->pos - t->s);
            return;
        }
        if ((c >= '0' && c <= '9') || (c == '-' && peek(lx, 1) >= '0' && peek(lx, 1) <= '9')) {
            lex_int(lx, t);
            t->n = (size_t)(lx->text + lx->pos - t->s);
            return;
        }
        if (c == '\'' || c == '"') {
            lex_quoted(lx, t, (char)c);
            t->n = (size_t)(lx->text + lx->pos - t->s);
            return;
        }
        if (strchr(",:/{}[]|", c)) {
            advance(lx);
            t->kind = T_PUNCT;
            t->punct = (char)c;
            t->n = 1;
            return;
        }
        if (c < 32 || c == 127)
            ld_error(lx->diag, lx->line, lx->col, "unexpected control character 0x%02x", c);
        else if (c >= 128) {
            ld_error(lx->diag, lx->line, lx->col,
                     "unexpected byte 0x%02x (non-ASCII text belongs in strings or comments)", c);
            /* One error for a run of such bytes: a single UTF-8 character
             * (or a byte order mark) is several of them. */
            while (peek(lx, 1) >= 128)
                advance(lx);
        } else
            ld_error(lx->diag, lx->line, lx->col, "unexpected character '%c'", c);
        advance(lx);
        t->kind = T_ERROR;
        t->n = 1;
        return;
    }
}

void ld_token_free(Token *t)
{
    free(t->str);
    t->str = NULL;
}

const char *ld_tok_desc(const Token *t, char *buf, size_t size)
{
    switch (t->kind) {
    case T_EOF: snprintf(buf, size, "end of file"); break;
    case T_NL: snprintf(buf, size, "end of line"); break;
    case T_STRING: snprintf(buf, size, "a string"); break;
    case T_QATOM: {
        /* The source text already has its quotes. */
        int n = t->n > 40 ? 40 : (int)t->n;
        snprintf(buf, size, "%.*s", n, t->s);
        break;
    }
    default: {
        int n = t->n > 40 ? 40 : (int)t->n;
        snprintf(buf, size, "'%.*s'", n, t->s);
        break;
    }
    }
    return buf;
}

Term *ld_lit_alloc(LitBlock **blocks, size_t words)
{
    LitBlock *b = *blocks;
    if (!b || b->used + words > b->cap) {
        size_t cap = words > 4096 ? words : 4096;
        b = vm_malloc(sizeof(LitBlock) + cap * sizeof(Term));
        b->next = *blocks;
        b->used = 0;
        b->cap = cap;
        *blocks = b;
    }
    Term *r = b->words + b->used;
    b->used += words;
    return r;
}
