/*
 * vm/term.c - term order, equality, size and printing.
 */
#include "vm/term.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/module.h"
#include "vm/print.h"

/* ==== work stacks ==== */

/*
 * The walks below keep what is left to visit in an explicit LIFO stack:
 * entries in `small` (on the walker's C stack) first, then a heap array
 * that doubles as needed.  Each entry is a run of terms still to visit;
 * taking the last term of a run drops the entry before that term is
 * visited, so a list's tail and a tuple's last element cost nothing and
 * only terms nested in a head or a non-last element deepen the stack.
 */
#define WALK_SMALL 32

/* Grows a work stack of `elem`-byte entries from v (== small: the inline
 * array, not freed) to twice *cap entries. */
static void *walk_grow(void *v, void *small, size_t *cap, size_t elem)
{
    void *nv;
    if (v == small) {
        nv = vm_malloc(*cap * 2 * elem);
        memcpy(nv, v, *cap * elem);
    } else {
        nv = vm_realloc(v, *cap * 2 * elem);
    }
    *cap *= 2;
    return nv;
}

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
    /* memcmp's sign only: glibc returns the difference of the first
     * bytes that differ, and 2 is TERM_CMP_LIMIT ('m' - 'k': min(me,
     * kid) raised system_limit). */
    if (c)
        return c < 0 ? -1 : 1;
    return la < lb ? -1 : la > lb;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
    return a < b ? -1 : a > b;
}

/* Two runs of terms compared pairwise, in order. */
typedef struct CmpRun {
    const Term *a, *b;
    size_t n;
} CmpRun;

/* Compares two terms of the same rank that are not compound (or whose
 * compound parts the caller handles). */
static int cmp_leaves(int rank, Term a, Term b)
{
    switch (rank) {
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

int term_compare_steps(Term a, Term b, size_t steps)
{
    CmpRun small[WALK_SMALL], *st = small;
    size_t sp = 0, cap = WALK_SMALL;
    int c = 0;
    for (;;) {
        if (a != b) {
            if (VM_UNLIKELY(--steps == 0)) {
                c = TERM_CMP_LIMIT;
                break;
            }
            int ra = type_rank(a), rb = type_rank(b);
            if (ra != rb) {
                c = ra < rb ? -1 : 1;
                break;
            }
            if (ra == 4 || ra == 6) {
                /* A tuple: its arity, then its elements; a cons: its head,
                 * then its tail (lists compare element by element). */
                const Term *ea, *eb;
                size_t n;
                if (ra == 4) {
                    uint32_t na = tuple_arity(a), nb = tuple_arity(b);
                    if (na != nb) {
                        c = na < nb ? -1 : 1;
                        break;
                    }
                    ea = tuple_elems(a);
                    eb = tuple_elems(b);
                    n = na;
                } else {
                    ea = cons_ptr(a);
                    eb = cons_ptr(b);
                    n = 2;
                }
                if (n > 0) {
                    if (n > 1) {
                        if (sp == cap)
                            st = walk_grow(st, small, &cap, sizeof *st);
                        st[sp++] = (CmpRun){ ea + 1, eb + 1, n - 1 };
                    }
                    a = ea[0];
                    b = eb[0];
                    continue;
                }
            } else if ((c = cmp_leaves(ra, a, b)) != 0) {
                break;
            }
        }
        if (sp == 0)
            break;
        CmpRun *r = &st[sp - 1];
        a = *r->a++;
        b = *r->b++;
        if (--r->n == 0)
            sp--;
    }
    if (st != small)
        free(st);
    return c;
}

/* ==== size ==== */

/* A run of terms still to count. */
typedef struct SizeRun {
    const Term *p;
    size_t n;
} SizeRun;

size_t term_size_capped(Term t, size_t cap)
{
    SizeRun small[WALK_SMALL], *st = small;
    size_t sp = 0, scap = WALK_SMALL, n = 0;
    for (;;) {
        const Term *e = NULL;
        size_t k = 0;
        if (term_is_cons(t)) {
            n += 2;
            e = cons_ptr(t);
            k = 2;
        } else if (term_is_boxed(t)) {
            Term hdr = boxed_ptr(t)[0];
            size_t w = boxed_words_from_header(hdr);
            n += w;
            if (IMM_SUB(hdr) == IMM_HDR_TUPLE) {
                e = boxed_ptr(t) + 1;
                k = w - 1;
            }
        }
        if (n > cap) {
            n = SIZE_MAX;
            break;
        }
        /* Immediates at the end of the run need no visit. */
        while (k > 0 && term_is_immediate(e[k - 1]))
            k--;
        if (k > 0) {
            if (k > 1) {
                if (sp == scap)
                    st = walk_grow(st, small, &scap, sizeof *st);
                st[sp++] = (SizeRun){ e + 1, k - 1 };
            }
            t = e[0];
            continue;
        }
        if (sp == 0)
            break;
        SizeRun *r = &st[sp - 1];
        t = *r->p++;
        if (--r->n == 0)
            sp--;
    }
    if (st != small)
        free(st);
    return n;
}

size_t term_size(Term t)
{
    return term_size_capped(t, SIZE_MAX - 1);
}

/* ==== printing ==== */

/* Erlang's reserved words, which BEAM prints quoted ('receive'). */
static bool reserved_word(const char *s, size_t n)
{
    static const char *const words[] = {
        "after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl", "bsr",
        "bxor", "case", "catch", "cond", "div", "end", "fun", "if", "let", "not",
        "of", "or", "orelse", "receive", "rem", "try", "when", "xor",
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strlen(words[i]) == n && memcmp(s, words[i], n) == 0)
            return true;
    return false;
}

static bool atom_needs_quotes(const char *s, size_t n)
{
    if (n == 0 || !(s[0] >= 'a' && s[0] <= 'z'))
        return true;
    /* `fun` starts a fun literal in the literal syntax (loader/ld_parse.c):
     * the atom prints as 'fun', so that printed terms parse back (a
     * finding of fuzz/fuzz_term.c); BEAM quotes it as a reserved word. */
    if (reserved_word(s, n))
        return true;
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '@'))
            return true;
    }
    return false;
}

/* Whether c prints as itself inside `quote`s. */
static bool plain_char(unsigned char c, char quote)
{
    return c >= 32 && c != 127 && c != '\\' && c != (unsigned char)quote;
}

static void put_escaped(StrBuf *sb, const char *s, size_t n, char quote)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        /* A run of characters that print as themselves goes in at once:
         * a binary may print 64 MiB (the cut), a byte at a time 0.7 s. */
        if (plain_char(c, quote)) {
            size_t j = i + 1;
            while (j < n && plain_char((unsigned char)s[j], quote))
                j++;
            sb_put(sb, s + i, j - i);
            i = j - 1;
            continue;
        }
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
    vm_print_atom_text(sb, s, n);
}

void vm_print_atom_text(StrBuf *sb, const char *s, size_t n)
{
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

/* The characters byte c takes: as text (an escape is two), or as the
 * i-th number of a list of them. */
static size_t byte_cost(uint8_t c, bool text, size_t i)
{
    if (text)
        return c == '\n' || c == '\t' || c == '\r' || c == '\\' || c == '"' ? 2 : 1;
    return (i ? 1 : 0) + (c >= 100 ? 3 : c >= 10 ? 2 : 1);
}

/* How many of b[0..n-1] to print so that they pass `room` characters by
 * the last one (all n when they fit): a binary is one leaf of a printed
 * term, and one of 1 GiB printed whole took 4 GiB before the term's cut
 * at VM_PRINT_MAX_BYTES was looked at. */
static size_t bytes_shown(const uint8_t *b, size_t n, bool text, size_t room)
{
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        used += byte_cost(b[i], text, i);
        if (used > room)
            return i + 1;
    }
    return n;
}

/* vm_print_bytes, the bytes cut (then "...") once they pass `room`. */
static void print_bytes_room(StrBuf *sb, const uint8_t *b, size_t n, bool more, size_t room)
{
    bool text = n && printable(b, n);
    size_t k = bytes_shown(b, n, text, room);
    vm_print_bytes(sb, b, k, more || k < n);
}

void vm_print_bytes(StrBuf *sb, const uint8_t *b, size_t n, bool more)
{
    sb_puts(sb, "<<");
    if (n && printable(b, n)) {
        sb_putc(sb, '"');
        put_escaped(sb, (const char *)b, n, '"');
        sb_putc(sb, '"');
    } else {
        /* Digits by hand, a few bytes at a time: a binary may print 64 MiB
         * (the cut), and one sb_printf per byte made that 2 s. */
        for (size_t i = 0; i < n; i++) {
            char tmp[4];
            size_t k = 0;
            unsigned c = b[i];
            if (i)
                tmp[k++] = ',';
            if (c >= 100)
                tmp[k++] = (char)('0' + c / 100);
            if (c >= 10)
                tmp[k++] = (char)('0' + c / 10 % 10);
            tmp[k++] = (char)('0' + c % 10);
            sb_put(sb, tmp, k);
        }
    }
    if (more)
        sb_puts(sb, "...");
    sb_puts(sb, ">>");
}

/* Appends a term that has no parts to visit (anything but a tuple with
 * elements or a cons). */
/* A small integer in decimal (no format parsing: deep terms print many). */
static void print_small(StrBuf *sb, int64_t v)
{
    char tmp[24];
    size_t n = sizeof tmp;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--n] = '-';
    sb_put(sb, tmp + n, sizeof tmp - n);
}

/* `room`: the characters left before the printed term's cut. */
static void print_leaf(StrBuf *sb, Term t, size_t room)
{
    switch (term_tag(t)) {
    case TAG_SMALL:
        print_small(sb, small_value(t));
        return;
    case TAG_IMM:
        switch (IMM_SUB(t)) {
        case IMM_ATOM: vm_print_atom(sb, atom_value(t)); return;
        case IMM_NIL: sb_puts(sb, "[]"); return;
        case IMM_PID: sb_printf(sb, "<0.%llu.0>", (unsigned long long)pid_value(t)); return;
        default: sb_puts(sb, "#none"); return;
        }
    case TAG_LIST:
        return;   /* not a leaf: vm_print_term walks it */
    default:
        switch (boxed_sub(t)) {
        case IMM_HDR_TUPLE:
            sb_puts(sb, "{}");
            return;
        case IMM_HDR_BINARY:
            print_bytes_room(sb, binary_bytes(t), binary_size(t), false, room);
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

/*
 * What the printer still has to do, innermost last:
 *   PR_TUPLE  the elements after p[-1] of a tuple: n more (each after a
 *             ','), then '}'
 *   PR_LIST   the rest of a list after an element: `rest` (the tail)
 *   PR_CLOSE  n copies of the closing character c: a tuple or list whose
 *             last part is being printed (consecutive closers of the same
 *             kind share one entry, so a term nested N deep in last
 *             positions, {{{...}}} or [[[...]]], costs one entry)
 */
enum { PR_TUPLE, PR_LIST, PR_CLOSE };
typedef struct PrintItem {
    int kind;
    char c;
    const Term *p;
    size_t n;
    Term rest;
} PrintItem;

void vm_print_term(StrBuf *sb, Term t)
{
    PrintItem small[WALK_SMALL], *st = small;
    size_t sp = 0, cap = WALK_SMALL, start = sb->len;
#define PUSH(...)                                                 \
    do {                                                          \
        if (sp == cap)                                            \
            st = walk_grow(st, small, &cap, sizeof *st);          \
        st[sp++] = (PrintItem){ __VA_ARGS__ };                    \
    } while (0)
/* One more closer c: merged into the top entry when it is a run of c. */
#define CLOSE_LATER(ch)                                                    \
    do {                                                                   \
        if (sp && st[sp - 1].kind == PR_CLOSE && st[sp - 1].c == (ch))     \
            st[sp - 1].n++;                                                \
        else                                                               \
            PUSH(.kind = PR_CLOSE, .c = (ch), .n = 1);                     \
    } while (0)
    for (;;) {
        /* Open t: print it whole, or its opener and go into its first part. */
        if (term_is_cons(t)) {
            sb_putc(sb, '[');
            Term tail = cons_tail(t);
            if (term_is_nil(tail))
                CLOSE_LATER(']');
            else
                PUSH(.kind = PR_LIST, .rest = tail);
            t = cons_head(t);
            continue;
        }
        if (term_is_tuple(t) && tuple_arity(t) > 0) {
            uint32_t n = tuple_arity(t);
            sb_putc(sb, '{');
            if (n == 1)
                CLOSE_LATER('}');
            else
                PUSH(.kind = PR_TUPLE, .p = tuple_elems(t) + 1, .n = n - 1);
            t = tuple_elems(t)[0];
            continue;
        }
        /* Brackets and commas since the last leaf may have passed the cut. */
        size_t used = sb->len - start;
        print_leaf(sb, t, used < VM_PRINT_MAX_BYTES ? VM_PRINT_MAX_BYTES - used : 0);
        if (VM_UNLIKELY(sb->len - start > VM_PRINT_MAX_BYTES)) {
            sb_puts(sb, "...");
            break;
        }
        /* Then whatever comes next: close what is done, find the next part. */
        for (;;) {
            if (sp == 0)
                goto done;
            PrintItem *it = &st[sp - 1];
            if (it->kind == PR_CLOSE) {
                for (size_t i = 0; i < it->n; i++)
                    sb_putc(sb, it->c);
                sp--;
                continue;
            }
            if (it->kind == PR_TUPLE) {
                sb_putc(sb, ',');
                t = *it->p++;
                if (--it->n == 0) {
                    it->kind = PR_CLOSE;
                    it->c = '}';
                    it->n = 1;
                    /* merge with a run of '}' below it */
                    if (sp > 1 && st[sp - 2].kind == PR_CLOSE && st[sp - 2].c == '}') {
                        st[sp - 2].n++;
                        sp--;
                    }
                }
                break;
            }
            /* PR_LIST: the rest after an element. */
            Term rest = it->rest;
            if (term_is_cons(rest)) {
                sb_putc(sb, ',');
                t = cons_head(rest);
                Term tail = cons_tail(rest);
                if (term_is_nil(tail)) {
                    sp--;
                    CLOSE_LATER(']');
                } else {
                    it->rest = tail;
                }
                break;
            }
            /* An improper tail: '|', the tail, then ']'. */
            sb_putc(sb, '|');
            t = rest;
            sp--;
            CLOSE_LATER(']');
            break;
        }
    }
done:
    if (st != small)
        free(st);
#undef PUSH
#undef CLOSE_LATER
}

void vm_print_mfa(StrBuf *sb, Atom mod, Atom name, unsigned arity)
{
    vm_print_atom(sb, mod);
    sb_putc(sb, ':');
    vm_print_atom(sb, name);
    sb_printf(sb, "/%u", arity);
}
