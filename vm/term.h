/*
 * vm/term.h - tagged 64-bit terms.
 *
 * Layout of a Term (low bits are the tag):
 *
 *   ................................................vvvvvvvvvvvvvv 11  small integer (62-bit, signed)
 *   pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp 00  boxed: pointer to a header word
 *   pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp 01  list: pointer to a cons cell, | 1
 *   vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv ssss 10  immediate with a 4-bit sub-tag:
 *        atom (value = atom index), nil, pid (value = pid number),
 *        and the header words that start boxed objects (value = size).
 *
 * Boxed objects (8-byte aligned, on a process heap or in a module's
 * literal area):
 *   tuple:  [HDR_TUPLE | arity] elements...
 *   binary: [HDR_BINARY | byte size] bytes, padded to a word
 *   fun:    [HDR_FUN | 1] Export * (a raw pointer, not a term)
 * A cons cell is two words, [head, tail], with no header.
 *
 * Header words carry the immediate tag, so a Cheney scan over a heap can
 * tell a header from an element; no term other than a header ever has a
 * header sub-tag.
 */
#ifndef VM_TERM_H
#define VM_TERM_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>

#include "vm/common.h"

typedef uint64_t Term;

enum {
    TAG_BOXED = 0,
    TAG_LIST = 1,
    TAG_IMM = 2,
    TAG_SMALL = 3,
};
#define TAG_MASK 3u

enum {
    IMM_ATOM = 0,
    IMM_NIL = 1,
    IMM_PID = 2,
    IMM_HDR_TUPLE = 3,
    IMM_HDR_BINARY = 4,
    IMM_HDR_FUN = 5,
    IMM_NONE = 6,     /* THE_NONE: "no value"; never a user-visible term */
    IMM_FWD = 7,      /* GC only: marks a forwarded cons cell's head */
};
#define IMM_SHIFT 6
#define IMM_SUB(t) (((t) >> 2) & 0xf)
#define MAKE_IMM(sub, v) (((Term)(v) << IMM_SHIFT) | ((Term)(sub) << 2) | TAG_IMM)
#define IMM_VALUE(t) ((t) >> IMM_SHIFT)

#define TERM_NIL MAKE_IMM(IMM_NIL, 0)
#define THE_NONE MAKE_IMM(IMM_NONE, 0)
#define GC_FWD_MARK MAKE_IMM(IMM_FWD, 0)

#define term_tag(t) ((unsigned)((t) & TAG_MASK))

/* ---- small integers ---- */
#define SMALL_BITS 62
#define SMALL_MAX ((int64_t)(((uint64_t)1 << (SMALL_BITS - 1)) - 1))
#define SMALL_MIN (-SMALL_MAX - 1)

static inline bool term_is_small(Term t) { return term_tag(t) == TAG_SMALL; }
static inline Term make_small(int64_t v) { return ((uint64_t)v << 2) | TAG_SMALL; }
static inline int64_t small_value(Term t) { return (int64_t)t >> 2; }
static inline bool small_fits(int64_t v) { return v >= SMALL_MIN && v <= SMALL_MAX; }

/* ---- atoms ---- */
typedef uint32_t Atom;
enum {
#define X(c, s) ATOM_##c,
#include "vm/atoms.def"
#undef X
    ATOM__PREDEFINED
};
static inline bool term_is_atom(Term t) { return (t & 0x3f) == MAKE_IMM(IMM_ATOM, 0); }
static inline Term make_atom(Atom a) { return MAKE_IMM(IMM_ATOM, a); }
static inline Atom atom_value(Term t) { return (Atom)IMM_VALUE(t); }
#define TERM_TRUE make_atom(ATOM_TRUE)
#define TERM_FALSE make_atom(ATOM_FALSE)
#define TERM_OK make_atom(ATOM_OK)
static inline Term make_bool(bool b) { return b ? TERM_TRUE : TERM_FALSE; }

/* ---- nil and pids ---- */
static inline bool term_is_nil(Term t) { return t == TERM_NIL; }
static inline bool term_is_pid(Term t) { return (t & 0x3f) == MAKE_IMM(IMM_PID, 0); }
static inline Term make_pid(uint64_t n) { return MAKE_IMM(IMM_PID, n); }
static inline uint64_t pid_value(Term t) { return IMM_VALUE(t); }

/* ---- lists ---- */
static inline bool term_is_cons(Term t) { return term_tag(t) == TAG_LIST; }
static inline bool term_is_list(Term t) { return term_is_cons(t) || term_is_nil(t); }
static inline Term *cons_ptr(Term t) { return (Term *)(uintptr_t)(t - TAG_LIST); }
static inline Term make_cons_ptr(const Term *cell) { return (Term)(uintptr_t)cell | TAG_LIST; }
static inline Term cons_head(Term t) { return cons_ptr(t)[0]; }
static inline Term cons_tail(Term t) { return cons_ptr(t)[1]; }

/* ---- boxed objects ---- */
static inline bool term_is_boxed(Term t) { return term_tag(t) == TAG_BOXED; }
static inline Term *boxed_ptr(Term t) { return (Term *)(uintptr_t)t; }
static inline Term make_boxed(const Term *p) { return (Term)(uintptr_t)p; }
#define MAKE_HEADER(sub, n) MAKE_IMM(sub, n)
static inline bool term_is_header(Term t)
{
    return term_tag(t) == TAG_IMM && IMM_SUB(t) >= IMM_HDR_TUPLE &&
           IMM_SUB(t) <= IMM_HDR_FUN;
}
static inline unsigned boxed_sub(Term t) { return IMM_SUB(boxed_ptr(t)[0]); }
static inline uint64_t header_value(Term h) { return IMM_VALUE(h); }

static inline bool term_is_tuple(Term t)
{
    return term_is_boxed(t) && boxed_sub(t) == IMM_HDR_TUPLE;
}
static inline uint32_t tuple_arity(Term t) { return (uint32_t)header_value(boxed_ptr(t)[0]); }
static inline Term *tuple_elems(Term t) { return boxed_ptr(t) + 1; }

static inline bool term_is_binary(Term t)
{
    return term_is_boxed(t) && boxed_sub(t) == IMM_HDR_BINARY;
}
static inline size_t binary_size(Term t) { return (size_t)header_value(boxed_ptr(t)[0]); }
static inline const uint8_t *binary_bytes(Term t) { return (const uint8_t *)(boxed_ptr(t) + 1); }
static inline size_t binary_words(size_t bytes) { return 1 + (bytes + 7) / 8; }

static inline bool term_is_fun(Term t)
{
    return term_is_boxed(t) && boxed_sub(t) == IMM_HDR_FUN;
}
struct Export;
static inline struct Export *fun_export(Term t)
{
    return (struct Export *)(uintptr_t)boxed_ptr(t)[1];
}

/* Words a boxed object occupies, header included. */
static inline size_t boxed_words_from_header(Term hdr)
{
    switch (IMM_SUB(hdr)) {
    case IMM_HDR_TUPLE: return 1 + (size_t)header_value(hdr);
    case IMM_HDR_BINARY: return binary_words((size_t)header_value(hdr));
    case IMM_HDR_FUN: return 2;
    default: VM_UNREACHABLE();
    }
}

/*
 * Term order (Erlang's): number < atom < fun < pid < tuple < nil < list <
 * binary.  Returns <0, 0, >0.  Atoms compare by name.
 *
 * The walks over compound terms (term_compare, term_size, vm_print_term,
 * vm_copy_to) use no C recursion: what is left to visit is kept in an
 * explicit stack that starts in a small array on the C stack and moves to
 * the heap when a term nests deeper, so their C stack use is constant
 * whatever a term's depth, and the heap they use is bounded by the term's
 * size (a list's tail and a tuple's last element cost no entry).
 */
int term_compare_steps(Term a, Term b, size_t steps);

/*
 * What term_compare_steps returns instead of -1, 0 or 1 when it visited
 * `steps` pairs of subterms without an answer (terms with much sharing
 * compare as if flat, so two of a few words each may need 2^60 steps): the
 * caller raises system_limit.  The VM's comparisons of terms from VM code
 * allow 2 * max_message_words steps (vm->cmp_steps).
 */
#define TERM_CMP_LIMIT 2

/* Without a bound on the steps: for terms whose size the caller bounds
 * (literals, trusted C, tests). */
static inline int term_compare(Term a, Term b)
{
    return term_compare_steps(a, b, SIZE_MAX);
}

/* Words needed to copy `t` (boxed and cons parts only), counted flat: a
 * subterm shared by several references counts once per reference. */
size_t term_size(Term t);

/*
 * term_size(t) if it is at most `cap`, else SIZE_MAX.  The count stops as
 * soon as it passes the cap, so its time is bounded by the cap even for a
 * term whose sharing makes its flat size astronomical ({T, T} nested 60
 * times is 2^60 words flat).
 */
size_t term_size_capped(Term t, size_t cap);

/* An immediate (a small integer, an atom, [], a pid): no walk needed. */
static inline bool term_is_immediate(Term t) { return (t & 2) != 0; }

#endif /* VM_TERM_H */
