/*
 * trace/tr_encode.c - payload terms: encoding, on the traced process's
 * thread (the producer side).  The format is described in tr_encode.h;
 * trace/tr_decode.c reads it back on the collector's side.
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
