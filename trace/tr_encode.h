/*
 * trace/tr_encode.h - the compact, self-contained encoding of trace
 * payload terms, and its printers.
 *
 * A payload is a sequence of terms copied out of a process heap when the
 * event happens, so the collector can print them later without touching
 * the process.  Each term is a tag byte followed by its data; integers are
 * LEB128 varints (unsigned), small integers zigzag-mapped first:
 *
 *   0x01 SMALL  zigzag varint            0x02 ATOM   varint atom index
 *   0x03 NIL                             0x04 PID    varint pid number
 *   0x05 TUPLE  elements... END          0x06 LIST   elements... [TAIL t] END
 *   0x07 TAIL   (inside a LIST: the improper tail follows)
 *   0x08 BIN    varint size, varint kept, kept bytes (kept < size: cut)
 *   0x09 FUN    varint mod, varint fun, varint arity (an export fun)
 *   0x0a TRUNC  the size cap was reached: everything from here to the
 *               end of the payload was left out (containers still close)
 *   0x0b NONE   a non-term (THE_NONE), printed #none
 *   0x0c DEEP   one subterm nested too deeply, left out; siblings follow
 *   0x0f END    closes a TUPLE or LIST
 *
 * Atoms are stored by index: the atom table is global and never shrinks,
 * so the index stays valid for the collector.  Containers are closed by
 * END rather than prefixed with a count so that the encoder can stop at
 * any point and still leave a well-formed encoding: it keeps one byte in
 * reserve per open container plus one for a TRUNC, so a cut always ends
 * as `... TRUNC END END`.  Printing follows io_lib's ~P: a cut tuple is
 * {a,...}, a cut list [1,2|...], a cut binary <<"ab"...>>, a subterm
 * below the depth bound "...".
 *
 * Encoding takes no lock, does not allocate and does not recurse (an
 * explicit stack of TR_ENCODE_DEPTH entries): deeper subterms become
 * DEEP and the walk goes on with their siblings.
 */
#ifndef TRACE_TR_ENCODE_H
#define TRACE_TR_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/strbuf.h"
#include "vm/term.h"

enum {
    TR_T_SMALL = 0x01,
    TR_T_ATOM = 0x02,
    TR_T_NIL = 0x03,
    TR_T_PID = 0x04,
    TR_T_TUPLE = 0x05,
    TR_T_LIST = 0x06,
    TR_T_TAIL = 0x07,
    TR_T_BIN = 0x08,
    TR_T_FUN = 0x09,
    TR_T_TRUNC = 0x0a,
    TR_T_NONE = 0x0b,
    TR_T_DEEP = 0x0c,
    TR_T_END = 0x0f,
};

/* Containers nested deeper than this are cut (TRUNC in their place). */
#define TR_ENCODE_DEPTH 16
/* The smallest cap that can hold anything (a TRUNC). */
#define TR_ENCODE_MIN_CAP 1

/* The most bytes one immediate takes: a tag and a 64-bit varint. */
#define TR_IMM_MAX 11u
/* The most payload terms the immediates' path takes. */
#define TR_IMM_TERMS 8u

/* Writes v as an unsigned LEB128 varint; returns its length. */
static inline size_t tr_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

/*
 * The common payload, a few small integers, atoms, pids or [] (a call's
 * arguments, a return value), written straight, without the general
 * encoder's state: the same bytes tr_encode() writes for them.  Returns
 * the end of what it wrote, or NULL when some term is not an immediate
 * (the caller takes the general path, which starts over).  The caller
 * made sure n * TR_IMM_MAX bytes fit.  Inline: it is the producers' hot
 * path (trace/tr_fast.h).
 */
static inline uint8_t *tr_encode_imm(uint8_t *q, const Term *terms, unsigned n)
{
    /* Indexed, not `terms + n`: an event without terms may pass NULL and
     * 0, and NULL + 0 is undefined (a finding of fuzz/fuzz_run.c under
     * clang's UBSan). */
    for (unsigned i = 0; i < n; i++) {
        const Term *t = &terms[i];
        uint64_t v;
        if (term_is_small(*t)) {
            int64_t x = small_value(*t);
            *q = TR_T_SMALL;
            v = ((uint64_t)x << 1) ^ (uint64_t)(x >> 63);
        } else if (term_is_atom(*t)) {
            *q = TR_T_ATOM;
            v = atom_value(*t);
        } else if (term_is_pid(*t)) {
            *q = TR_T_PID;
            v = pid_value(*t);
        } else if (term_is_nil(*t)) {
            *q++ = TR_T_NIL;
            continue;
        } else {
            return NULL;
        }
        if (v < 0x80) {
            /* The usual one-byte varint, without the loop. */
            q[1] = (uint8_t)v;
            q += 2;
        } else {
            q += 1 + tr_varint(q + 1, v);
        }
    }
    return q;
}

/*
 * Encodes terms[0..n-1] into buf (at most `cap` bytes).  Returns the bytes
 * written; *nterms gets the number of top-level items written (a TRUNC
 * standing for the terms left out counts as one) and *truncated whether
 * anything was cut.  The terms must not change meanwhile (call on the
 * thread that owns the process heap).  No locks, no allocation.
 */
size_t tr_encode(uint8_t *buf, size_t cap, const Term *terms, unsigned n,
                 unsigned *nterms, bool *truncated);

/*
 * Appends the term at *p (not beyond end) in Erlang syntax, advancing *p
 * past it.  Returns false (and appends "#bad") on a malformed encoding.
 */
bool tr_print_term(StrBuf *sb, const uint8_t **p, const uint8_t *end);

/* Steps *p over one term; false on a malformed encoding. */
bool tr_skip_term(const uint8_t **p, const uint8_t *end);

/*
 * Appends the terms at *p as a comma-separated sequence of `n` items,
 * printing a top-level TRUNC as "|..." if `list_tail` (an argument list)
 * or "..." otherwise.  Returns false on a malformed encoding.
 */
bool tr_print_seq(StrBuf *sb, const uint8_t **p, const uint8_t *end, unsigned n,
                  bool list_tail);

/*
 * Appends the next of the `*left` top-level terms at *p, or "..." if the
 * size cap left it out (then *left becomes 0 and *p end).  For printers
 * that give each payload term its own place.  false on a malformed
 * encoding.
 */
bool tr_print_next(StrBuf *sb, const uint8_t **p, const uint8_t *end, unsigned *left);

/* Append integers in decimal (the sinks' hot path: no format parsing). */
void tr_put_u64(StrBuf *sb, uint64_t v);
void tr_put_i64(StrBuf *sb, int64_t v);

/* Appends s[0..n-1] as the inside of a JSON string (escaped). */
void tr_json_escape(StrBuf *sb, const char *s, size_t n);

#endif /* TRACE_TR_ENCODE_H */
