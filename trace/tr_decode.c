/*
 * trace/tr_decode.c - payload terms: decoding and printing them in Erlang
 * syntax, and the JSON string escape the sinks share; on the collector's
 * side.  The format is described in tr_encode.h; a payload is trusted to
 * be one tr_encode() wrote, and every read is still bounded by its end.
 */
#include "trace/tr_encode.h"

#include <string.h>

#include "vm/atom.h"
#include "vm/print.h"

static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* "00" to "99": two digits per division, which halves the chain of
 * dependent divisions a 19-digit timestamp costs (the number sinks print
 * most). */
static const char two_digits[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

void tr_put_u64(StrBuf *sb, uint64_t v)
{
    char tmp[20];
    size_t n = sizeof tmp;
    while (v >= 100) {
        const unsigned r = (unsigned)(v % 100);
        v /= 100;
        n -= 2;
        memcpy(tmp + n, two_digits + 2 * r, 2);
    }
    if (v >= 10) {
        n -= 2;
        memcpy(tmp + n, two_digits + 2 * v, 2);
    } else {
        tmp[--n] = (char)('0' + v);
    }
    sb_put(sb, tmp + n, sizeof tmp - n);
}

void tr_put_i64(StrBuf *sb, int64_t v)
{
    if (v < 0) {
        sb_putc(sb, '-');
        tr_put_u64(sb, 0 - (uint64_t)v);
    } else {
        tr_put_u64(sb, (uint64_t)v);
    }
}

/* Printing recursion is bounded: the encoder never nests deeper. */
#define PRINT_DEPTH (TR_ENCODE_DEPTH + 1)

static bool print_at(StrBuf *sb, const uint8_t **p, const uint8_t *end, unsigned depth);

/* Prints container elements up to END; `list` selects [a,b|T] syntax. */
static bool print_elems(StrBuf *sb, const uint8_t **p, const uint8_t *end,
                        unsigned depth, bool list)
{
    for (bool first = true;; first = false) {
        if (*p >= end)
            return false;
        uint8_t tag = **p;
        if (tag == TR_T_END) {
            (*p)++;
            return true;
        }
        if (tag == TR_T_TRUNC && list) {
            (*p)++;
            sb_puts(sb, first ? "..." : "|...");
            continue;
        }
        if (tag == TR_T_TAIL && list) {
            (*p)++;
            sb_putc(sb, '|');
            if (!print_at(sb, p, end, depth + 1))
                return false;
            continue;
        }
        if (!first)
            sb_putc(sb, ',');
        if (!print_at(sb, p, end, depth + 1))
            return false;
    }
}

static bool print_at(StrBuf *sb, const uint8_t **p, const uint8_t *end, unsigned depth)
{
    uint64_t a, b, c;
    if (*p >= end || depth > PRINT_DEPTH)
        goto bad;
    switch (*(*p)++) {
    case TR_T_SMALL:
        if (!get_varint(p, end, &a))
            goto bad;
        tr_put_i64(sb, (int64_t)((a >> 1) ^ (0 - (a & 1))));
        return true;
    case TR_T_ATOM:
        if (!get_varint(p, end, &a) || a >= vm_atom_count())
            goto bad;
        vm_print_atom(sb, (Atom)a);
        return true;
    case TR_T_NIL:
        sb_puts(sb, "[]");
        return true;
    case TR_T_PID:
        if (!get_varint(p, end, &a))
            goto bad;
        sb_puts(sb, "<0.");
        tr_put_u64(sb, a);
        sb_puts(sb, ".0>");
        return true;
    case TR_T_TUPLE:
        sb_putc(sb, '{');
        if (!print_elems(sb, p, end, depth, false))
            goto bad;
        sb_putc(sb, '}');
        return true;
    case TR_T_LIST:
        sb_putc(sb, '[');
        if (!print_elems(sb, p, end, depth, true))
            goto bad;
        sb_putc(sb, ']');
        return true;
    case TR_T_BIN:
        if (!get_varint(p, end, &a) || !get_varint(p, end, &b) || b > a ||
            b > (uint64_t)(end - *p))
            goto bad;
        vm_print_bytes(sb, *p, (size_t)b, b < a);
        *p += b;
        return true;
    case TR_T_FUN:
        if (!get_varint(p, end, &a) || !get_varint(p, end, &b) ||
            !get_varint(p, end, &c) || a >= vm_atom_count() || b >= vm_atom_count())
            goto bad;
        sb_puts(sb, "fun ");
        vm_print_mfa(sb, (Atom)a, (Atom)b, (unsigned)c);
        return true;
    case TR_T_TRUNC:
    case TR_T_DEEP:
        sb_puts(sb, "...");
        return true;
    case TR_T_NONE:
        sb_puts(sb, "#none");
        return true;
    default:
        break;
    }
bad:
    sb_puts(sb, "#bad");
    return false;
}

bool tr_print_term(StrBuf *sb, const uint8_t **p, const uint8_t *end)
{
    return print_at(sb, p, end, 0);
}

bool tr_skip_term(const uint8_t **p, const uint8_t *end)
{
    /* Containers are flat in the byte stream: count opens against ENDs. */
    unsigned open = 0;
    uint64_t a, b;
    do {
        if (*p >= end)
            return false;
        switch (*(*p)++) {
        case TR_T_SMALL: case TR_T_ATOM: case TR_T_PID:
            if (!get_varint(p, end, &a))
                return false;
            break;
        case TR_T_TUPLE: case TR_T_LIST:
            open++;
            break;
        case TR_T_END:
            if (!open)
                return false;
            open--;
            break;
        case TR_T_BIN:
            if (!get_varint(p, end, &a) || !get_varint(p, end, &b) ||
                b > (uint64_t)(end - *p))
                return false;
            *p += b;
            break;
        case TR_T_FUN:
            for (int i = 0; i < 3; i++)
                if (!get_varint(p, end, &a))
                    return false;
            break;
        case TR_T_NIL: case TR_T_TAIL: case TR_T_TRUNC: case TR_T_DEEP: case TR_T_NONE:
            break;
        default:
            return false;
        }
    } while (open);
    return true;
}

bool tr_print_seq(StrBuf *sb, const uint8_t **p, const uint8_t *end, unsigned n,
                  bool list_tail)
{
    for (unsigned i = 0; i < n; i++) {
        if (*p < end && **p == TR_T_TRUNC) {
            (*p)++;
            sb_puts(sb, i == 0 ? "..." : list_tail ? "|..." : ",...");
            continue;
        }
        if (i)
            sb_putc(sb, ',');
        if (!tr_print_term(sb, p, end))
            return false;
    }
    return true;
}

bool tr_print_next(StrBuf *sb, const uint8_t **p, const uint8_t *end, unsigned *left)
{
    if (!*left || *p >= end || **p == TR_T_TRUNC) {
        /* The size cap left this term out (and everything after it). */
        *left = 0;
        *p = end;
        sb_puts(sb, "...");
        return true;
    }
    (*left)--;
    return tr_print_term(sb, p, end);
}

/* Length of the valid UTF-8 sequence at s[0..n) (0 if not valid). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

void tr_json_escape(StrBuf *sb, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = u[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f) {
            size_t k = c < 0x80 ? 1 : utf8_len(u + i, n - i);
            if (k) {
                /* Printable ASCII or a whole UTF-8 sequence: as is. */
                i += k - 1;
                continue;
            }
        }
        sb_put(sb, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"': sb_puts(sb, "\\\""); break;
        case '\\': sb_puts(sb, "\\\\"); break;
        case '\n': sb_puts(sb, "\\n"); break;
        case '\t': sb_puts(sb, "\\t"); break;
        default:
            /* Control bytes, and bytes that are not UTF-8 (binaries print
             * escaped, so only odd atom names get here): as Latin-1, so
             * the JSON stays valid. */
            sb_printf(sb, "\\u%04x", c);
            break;
        }
    }
    sb_put(sb, s + run, n - run);
}
