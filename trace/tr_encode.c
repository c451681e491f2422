/*
 * trace/tr_encode.c - payload terms: encoding (producer side, on the
 * traced process's thread) and printing (collector side).  The format is
 * described in tr_encode.h.
 *
 * The encoder's one invariant: with `open` containers still to close
 * (counting the top-level sequence as one, see tr_encode()), at least
 * open + 1 bytes stay free, so a cut can always write TRUNC and close
 * everything.  Every write of new content checks room() first; END and the
 * TRUNC of a cut use the reserve.
 */
#include "trace/tr_encode.h"

#include "vm/atom.h"
#include "vm/module.h"
#include "vm/print.h"

/* ==== encoding ==== */

typedef struct EncFrame {
    Term t;            /* tuple: the tuple; list: the rest of the list */
    uint32_t i, n;     /* tuple: next element and arity */
    uint8_t kind;      /* TR_T_TUPLE or TR_T_LIST */
} EncFrame;

typedef struct Enc {
    uint8_t *buf;
    size_t pos, cap;
    unsigned open;     /* containers to close, the top-level sequence included */
    bool cut;          /* out of room: the walk stopped */
    bool truncated;    /* something was left out (cut, depth, a binary's tail) */
    EncFrame stack[TR_ENCODE_DEPTH];
    unsigned depth;
} Enc;

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* k more bytes fit, keeping the reserve for `open_after` ENDs and a TRUNC. */
static bool room(const Enc *e, size_t k, unsigned open_after)
{
    return e->pos + k + open_after + 1 <= e->cap;
}

/* Ends the walk: TRUNC here, then END for every open container. */
static void cut(Enc *e)
{
    e->buf[e->pos++] = TR_T_TRUNC;
    while (e->depth) {
        e->buf[e->pos++] = TR_T_END;
        e->depth--;
        e->open--;
    }
    e->cut = e->truncated = true;
}

/* Writes tag + varint if it fits (else cuts); false once cut.  Written
 * in place: a copy through a temporary costs a library memcpy per term. */
static bool put_tagged(Enc *e, uint8_t tag, uint64_t v)
{
    if (!room(e, 1 + varint_len(v), e->open)) {
        cut(e);
        return false;
    }
    e->buf[e->pos++] = tag;
    e->pos += tr_varint(e->buf + e->pos, v);
    return true;
}

static bool put_byte(Enc *e, uint8_t b)
{
    if (!room(e, 1, e->open)) {
        cut(e);
        return false;
    }
    e->buf[e->pos++] = b;
    return true;
}

static bool put_binary(Enc *e, Term t)
{
    size_t size = binary_size(t);
    size_t head = 1 + varint_len(size);
    if (!room(e, head + 1, e->open)) {
        cut(e);
        return false;
    }
    /* Room for the bytes once the header (with kept's varint sized for the
     * largest value kept can take) is written. */
    size_t avail = e->cap - e->pos - e->open - 1 - head;
    size_t kept = size < avail ? size : avail;
    size_t klen = varint_len(kept);
    kept = avail > klen ? (size < avail - klen ? size : avail - klen) : 0;
    e->buf[e->pos++] = TR_T_BIN;
    e->pos += tr_varint(e->buf + e->pos, size);
    e->pos += tr_varint(e->buf + e->pos, kept);
    memcpy(e->buf + e->pos, binary_bytes(t), kept);
    e->pos += kept;
    if (kept < size)
        e->truncated = true;
    return true;
}

/* Opens a container (or writes TRUNC if too deep); false once cut. */
static bool open_container(Enc *e, uint8_t kind, Term t, uint32_t n)
{
    if (e->depth == TR_ENCODE_DEPTH) {
        e->truncated = true;
        return put_byte(e, TR_T_DEEP);
    }
    if (!room(e, 1, e->open + 1)) {
        cut(e);
        return false;
    }
    e->buf[e->pos++] = kind;
    e->open++;
    e->stack[e->depth++] = (EncFrame){ .t = t, .i = 0, .n = n, .kind = kind };
    return true;
}

/* Writes one item: a scalar, or the opener of a container.  false once cut. */
static bool put_item(Enc *e, Term t)
{
    switch (term_tag(t)) {
    case TAG_SMALL: {
        int64_t v = small_value(t);
        return put_tagged(e, TR_T_SMALL, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
    }
    case TAG_LIST:
        return open_container(e, TR_T_LIST, t, 0);
    case TAG_IMM:
        switch (IMM_SUB(t)) {
        case IMM_ATOM: return put_tagged(e, TR_T_ATOM, atom_value(t));
        case IMM_NIL: return put_byte(e, TR_T_NIL);
        case IMM_PID: return put_tagged(e, TR_T_PID, pid_value(t));
        default: return put_byte(e, TR_T_NONE);
        }
    default:
        switch (boxed_sub(t)) {
        case IMM_HDR_TUPLE:
            return open_container(e, TR_T_TUPLE, t, tuple_arity(t));
        case IMM_HDR_BINARY:
            return put_binary(e, t);
        case IMM_HDR_FUN: {
            const Export *x = fun_export(t);
            uint8_t tmp[1 + 3 * 10];
            size_t k = 0;
            tmp[k++] = TR_T_FUN;
            k += tr_varint(tmp + k, x->mod);
            k += tr_varint(tmp + k, x->name);
            k += tr_varint(tmp + k, x->arity);
            if (!room(e, k, e->open)) {
                cut(e);
                return false;
            }
            memcpy(e->buf + e->pos, tmp, k);
            e->pos += k;
            return true;
        }
        default:
            return put_byte(e, TR_T_NONE);
        }
    }
}

/*
 * The next term to write inside the innermost open container, closing
 * containers that are done; false when the walk of this root is over.
 */
static bool next_in_container(Enc *e, Term *out)
{
    while (e->depth) {
        EncFrame *f = &e->stack[e->depth - 1];
        if (f->kind == TR_T_TUPLE) {
            if (f->i < f->n) {
                *out = tuple_elems(f->t)[f->i++];
                return true;
            }
        } else if (term_is_cons(f->t)) {
            *out = cons_head(f->t);
            f->t = cons_tail(f->t);
            return true;
        } else if (!term_is_nil(f->t) && f->t != THE_NONE) {
            /* An improper tail: TAIL, then the tail term as the last item. */
            if (!put_byte(e, TR_T_TAIL))
                return false;
            *out = f->t;
            f->t = THE_NONE;
            return true;
        }
        e->buf[e->pos++] = TR_T_END;   /* from the reserve */
        e->depth--;
        e->open--;
    }
    return false;
}

/* Writes one top-level term; its containers are walked without recursion. */
static void encode_root(Enc *e, Term t)
{
    for (;;) {
        if (!put_item(e, t))
            return;
        if (!next_in_container(e, &t))
            return;
    }
}

/* The general encoder (compound terms, the cap, truncation); out of line
 * so that the immediates' path does not pay its frame. */
static __attribute__((noinline)) size_t encode_general(uint8_t *buf, size_t cap,
                                                       const Term *terms, unsigned n,
                                                       unsigned *nterms, bool *truncated);

size_t tr_encode(uint8_t *buf, size_t cap, const Term *terms, unsigned n,
                 unsigned *nterms, bool *truncated)
{
    if (n && n <= TR_IMM_TERMS && cap >= (size_t)n * TR_IMM_MAX + 1) {
        const uint8_t *end = tr_encode_imm(buf, terms, n);
        if (end) {
            size_t len = (size_t)(end - buf);
            *nterms = n;
            *truncated = false;
            return len;
        }
    }
    return encode_general(buf, cap, terms, n, nterms, truncated);
}

static size_t encode_general(uint8_t *buf, size_t cap, const Term *terms, unsigned n,
                             unsigned *nterms, bool *truncated)
{
    /* open starts at 1: the top-level sequence keeps a byte for a TRUNC
     * that stands for the roots left out after a cut inside a root.  The
     * fields are set one by one: an initializer would also zero the
     * stack, a few hundred bytes per event on the hot path. */
    Enc e;
    e.buf = buf;
    e.pos = 0;
    e.cap = cap;
    e.open = 1;
    e.cut = e.truncated = false;
    e.depth = 0;
    unsigned items = 0, i = 0;
    if (cap < TR_ENCODE_MIN_CAP) {
        *nterms = 0;
        *truncated = n > 0;
        return 0;
    }
    for (; i < n && !e.cut; i++) {
        if (items == UINT8_MAX - 1 && n - i > 1) {
            /* nterms is a byte in the record header. */
            buf[e.pos++] = TR_T_TRUNC;
            items++;
            e.truncated = true;
            break;
        }
        size_t before = e.pos;
        encode_root(&e, terms[i]);
        items++;
        if (e.cut && e.pos - before > 1 && i + 1 < n) {
            /* Cut inside this root: say that more roots were left out. */
            buf[e.pos++] = TR_T_TRUNC;
            items++;
        }
    }
    *nterms = items;
    *truncated = e.truncated;
    return e.pos;
}

/* ==== decoding ==== */

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

void tr_put_u64(StrBuf *sb, uint64_t v)
{
    char tmp[20];
    size_t n = sizeof tmp;
    do {
        tmp[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
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
