/*
 * vm/term.c - term order, equality, size and printing.
 */
#include "vm/term.h"

#include <stdio.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/module.h"
#include "vm/print.h"

/* ==== order ==== */

/* Rank of a term's type in Erlang's term order. */
static int type_rank(Term t)
{
    switch (term_tag(t)) {
    case TAG_SMALL: return 0;
    case TAG_LIST: return 6;
    case TAG_IMM:
        switch (IMM_SUB(t)) {
        case IMM_ATOM: return 1;
        case IMM_PID: return 3;
        case IMM_NIL: return 5;
        default: return 8;
        }
    default:
        switch (boxed_sub(t)) {
        case IMM_HDR_FUN: return 2;
        case IMM_HDR_TUPLE: return 4;
        case IMM_HDR_BINARY: return 7;
        default: return 8;
        }
    }
}

static int cmp_atoms(Atom a, Atom b)
{
    if (a == b)
        return 0;
    size_t la, lb;
    const char *na = vm_atom_name(a, &la), *nb = vm_atom_name(b, &lb);
    int c = memcmp(na, nb, la < lb ? la : lb);
    if (c)
        return c;
    return la < lb ? -1 : la > lb;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
    return a < b ? -1 : a > b;
}

int term_compare(Term a, Term b)
{
    for (;;) {
        if (a == b)
            return 0;
        int ra = type_rank(a), rb = type_rank(b);
        if (ra != rb)
            return ra < rb ? -1 : 1;
        switch (ra) {
        case 0: {
            int64_t x = small_value(a), y = small_value(b);
            return x < y ? -1 : x > y;
        }
        case 1: return cmp_atoms(atom_value(a), atom_value(b));
        case 2: {
            const struct Export *ea = fun_export(a), *eb = fun_export(b);
            int c = cmp_atoms(ea->mod, eb->mod);
            if (!c)
                c = cmp_atoms(ea->name, eb->name);
            return c ? c : cmp_u64(ea->arity, eb->arity);
        }
        case 3: return cmp_u64(pid_value(a), pid_value(b));
        case 4: {
            uint32_t na = tuple_arity(a), nb = tuple_arity(b);
            if (na != nb)
                return na < nb ? -1 : 1;
            if (na == 0)
                return 0;
            for (uint32_t i = 0; i + 1 < na; i++) {
                int c = term_compare(tuple_elems(a)[i], tuple_elems(b)[i]);
                if (c)
                    return c;
            }
            a = tuple_elems(a)[na - 1];
            b = tuple_elems(b)[na - 1];
            continue;
        }
        case 6: {
            int c = term_compare(cons_head(a), cons_head(b));
            if (c)
                return c;
            a = cons_tail(a);
            b = cons_tail(b);
            continue;
        }
        case 7: {
            size_t la = binary_size(a), lb = binary_size(b);
            int c = memcmp(binary_bytes(a), binary_bytes(b), la < lb ? la : lb);
            if (c)
                return c < 0 ? -1 : 1;
            return cmp_u64(la, lb);
        }
        default:
            return 0;
        }
    }
}

bool term_equal(Term a, Term b)
{
    return term_compare(a, b) == 0;
}

size_t term_size(Term t)
{
    size_t n = 0;
    for (;;) {
        switch (term_tag(t)) {
        case TAG_LIST:
            n += 2 + term_size(cons_head(t));
            t = cons_tail(t);
            continue;
        case TAG_BOXED: {
            Term hdr = boxed_ptr(t)[0];
            size_t words = boxed_words_from_header(hdr);
            n += words;
            if (IMM_SUB(hdr) != IMM_HDR_TUPLE || words == 1)
                return n;
            for (size_t i = 1; i + 1 < words; i++)
                n += term_size(boxed_ptr(t)[i]);
            t = boxed_ptr(t)[words - 1];
            continue;
        }
        default:
            return n;
        }
    }
}

/* ==== printing ==== */

static bool atom_needs_quotes(const char *s, size_t n)
{
    if (n == 0 || !(s[0] >= 'a' && s[0] <= 'z'))
        return true;
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '@'))
            return true;
    }
    return false;
}

static void put_escaped(StrBuf *sb, const char *s, size_t n, char quote)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '\n': sb_puts(sb, "\\n"); break;
        case '\t': sb_puts(sb, "\\t"); break;
        case '\r': sb_puts(sb, "\\r"); break;
        case '\\': sb_puts(sb, "\\\\"); break;
        default:
            if (c == (unsigned char)quote) {
                sb_putc(sb, '\\');
                sb_putc(sb, (char)c);
            } else if (c < 32 || c == 127) {
                sb_printf(sb, "\\x%02x", c);
            } else {
                sb_putc(sb, (char)c);
            }
        }
    }
}

void vm_print_atom(StrBuf *sb, Atom a)
{
    size_t n;
    const char *s = vm_atom_name(a, &n);
    if (!atom_needs_quotes(s, n)) {
        sb_put(sb, s, n);
        return;
    }
    sb_putc(sb, '\'');
    put_escaped(sb, s, n, '\'');
    sb_putc(sb, '\'');
}

static bool printable(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((b[i] < 32 && b[i] != '\n' && b[i] != '\t' && b[i] != '\r') || b[i] >= 127)
            return false;
    return true;
}

void vm_print_bytes(StrBuf *sb, const uint8_t *b, size_t n, bool more)
{
    sb_puts(sb, "<<");
    if (n && printable(b, n)) {
        sb_putc(sb, '"');
        put_escaped(sb, (const char *)b, n, '"');
        sb_putc(sb, '"');
    } else {
        for (size_t i = 0; i < n; i++)
            sb_printf(sb, i ? ",%u" : "%u", b[i]);
    }
    if (more)
        sb_puts(sb, "...");
    sb_puts(sb, ">>");
}

void vm_print_term(StrBuf *sb, Term t)
{
    switch (term_tag(t)) {
    case TAG_SMALL:
        sb_printf(sb, "%lld", (long long)small_value(t));
        return;
    case TAG_IMM:
        switch (IMM_SUB(t)) {
        case IMM_ATOM: vm_print_atom(sb, atom_value(t)); return;
        case IMM_NIL: sb_puts(sb, "[]"); return;
        case IMM_PID: sb_printf(sb, "<0.%llu.0>", (unsigned long long)pid_value(t)); return;
        default: sb_puts(sb, "#none"); return;
        }
    case TAG_LIST:
        sb_putc(sb, '[');
        for (;;) {
            vm_print_term(sb, cons_head(t));
            t = cons_tail(t);
            if (term_is_nil(t))
                break;
            if (!term_is_cons(t)) {
                sb_putc(sb, '|');
                vm_print_term(sb, t);
                break;
            }
            sb_putc(sb, ',');
        }
        sb_putc(sb, ']');
        return;
    default:
        switch (boxed_sub(t)) {
        case IMM_HDR_TUPLE: {
            uint32_t n = tuple_arity(t);
            sb_putc(sb, '{');
            for (uint32_t i = 0; i < n; i++) {
                if (i)
                    sb_putc(sb, ',');
                vm_print_term(sb, tuple_elems(t)[i]);
            }
            sb_putc(sb, '}');
            return;
        }
        case IMM_HDR_BINARY:
            vm_print_bytes(sb, binary_bytes(t), binary_size(t), false);
            return;
        case IMM_HDR_FUN: {
            const Export *e = fun_export(t);
            sb_puts(sb, "fun ");
            vm_print_atom(sb, e->mod);
            sb_putc(sb, ':');
            vm_print_atom(sb, e->name);
            sb_printf(sb, "/%u", e->arity);
            return;
        }
        default:
            sb_puts(sb, "#bad");
            return;
        }
    }
}

void vm_print_mfa(StrBuf *sb, Atom mod, Atom name, unsigned arity)
{
    vm_print_atom(sb, mod);
    sb_putc(sb, ':');
    vm_print_atom(sb, name);
    sb_printf(sb, "/%u", arity);
}
