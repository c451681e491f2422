/*
 * vm/bif.c - built-in natives: the erlang, lists and io functions real
 * programs need.  They are ordinary natives (registered through the same
 * path as an embedder's), written against the process internals for speed.
 */
#include "vm/native.h"
#include "vm/bif_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/hook.h"
#include "vm/lend.h"
#include "vm/print.h"
#include "vm/process.h"
#include "vm/registry.h"
#include "vm/sched.h"

/* Length of a proper list of at most max elements, or -1: the walk stops
 * past max (an argument list, at most VM_MAX_ARITY, of any length). */
long vm_bif_list_length_max(Term l, long max)
{
    long n = 0;
    for (; term_is_cons(l) && n <= max; l = cons_tail(l))
        n++;
    return n <= max && term_is_nil(l) ? n : -1;
}

/* Builds a list of v[0..n-1] ending in tail.  v has n + 1 slots: v[n]
 * holds the tail, so that v and tail, extra roots, survive the collection
 * the allocation may run without a second array. */
static Term build_list(Process *p, Term *v, size_t n, Term tail)
{
    v[n] = tail;
    vm_heap_ensure(p, 2 * n, v, n + 1);
    Term l = v[n];
    for (size_t i = n; i-- > 0;) {
        Term *c = vm_heap_alloc(p, 2);
        c[0] = v[i];
        c[1] = l;
        l = make_cons_ptr(c);
    }
    return l;
}

/*
 * Lending for the natives whose work their arguments choose (a sort, a
 * list or binary built, an iolist flattened, a term printed): when that
 * work, counted before it starts, reaches VM_BIF_LEND_WORK, the call
 * lends its scheduler's local queue (vm/lend.h: vm_lend_if_long returns
 * whether this call lent; the native passes that to vm_lend_done once
 * its work is over).
 */

/*
 * The length of a list for the natives that go on to work on every
 * element (and length/1, apply/2, spawn_opt/4's options): one that walks
 * past VM_BIF_LEND_WORK cells lends p's queue from there on (*lent, for
 * vm_lend_done), so that neither the walk of a long list nor the work
 * after it holds the processes queued behind it.  -1, with nothing left
 * lent, for an improper list.
 */
long vm_bif_list_length_lend(Process *p, Term l, bool *lent)
{
    long n = 0;
    *lent = false;
    for (; term_is_cons(l); l = cons_tail(l))
        if (VM_UNLIKELY(++n == (long)VM_BIF_LEND_WORK))
            *lent = vm_lend_if_long(p, VM_BIF_LEND_WORK);
    if (term_is_nil(l))
        return n;
    vm_lend_done(p, *lent);
    *lent = false;
    return -1;
}

/*
 * Before a native builds `words` words in one call, an amount its
 * arguments chose rather than the size of a term it was given (a list
 * of a range, the bytes of a binary as a list: 16 words for each word of
 * the binary, an iolist flattened): TVM_OK to go ahead, or the status to
 * return.  Past the process's max_heap_size the process is killed before
 * anything is allocated (vm_heap_max_refuses); past max_message_words,
 * the largest term the VM copies in one go (room_for; room_check's
 * over_cap, for a caller that counts another way), it is a system_limit,
 * so that a process without a heap limit cannot take gigabytes in one
 * call either.
 */
static tvm_status room_check(Process *p, size_t words, bool over_cap)
{
    if (vm_heap_max_refuses(p, words))
        return TVM_EXCEPTION;   /* killed as it returns (vm/interp.c) */
    if (over_cap)
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    return TVM_OK;
}

static tvm_status room_for(Process *p, size_t words)
{
    return room_check(p, words, words > p->vm->max_msg);
}

/* Copies a proper list's elements into a new array of n + 1 slots (the
 * last one build_list's; caller frees). */
Term *vm_bif_list_to_array(Term l, long n)
{
    Term *v = vm_malloc((size_t)(n + 1) * sizeof(Term));
    for (long i = 0; i < n; i++, l = cons_tail(l))
        v[i] = cons_head(l);
    return v;
}

/* ==== erlang: tuples, lists, numbers ==== */

NATIVE_FN(bif_element)
{
    SETUP();
    Term i = ARG(0), t = ARG(1);
    if (!term_is_small(i) || !term_is_tuple(t) || small_value(i) < 1 ||
        small_value(i) > tuple_arity(t))
        BADARG();
    RETURN(tuple_elems(t)[small_value(i) - 1]);
}

NATIVE_FN(bif_setelement)
{
    SETUP();
    Term i = ARG(0), t = ARG(1);
    if (!term_is_small(i) || !term_is_tuple(t) || small_value(i) < 1 ||
        small_value(i) > tuple_arity(t))
        BADARG();
    /* A copy of the whole tuple (list_to_tuple/1 makes one of any size). */
    uint32_t n = tuple_arity(t);
    bool lent = vm_lend_if_long(p, n);
    Term *v = vm_malloc(n * sizeof(Term));
    memcpy(v, tuple_elems(t), n * sizeof(Term));
    v[small_value(i) - 1] = ARG(2);
    Term r = vm_make_tuple(p, n, v);
    free(v);
    vm_lend_done(p, lent);
    RETURN(r);
}

NATIVE_FN(bif_tuple_size)
{
    SETUP();
    if (!term_is_tuple(ARG(0)))
        BADARG();
    RETURN(make_small(tuple_arity(ARG(0))));
}

NATIVE_FN(bif_length)
{
    SETUP();
    bool lent;
    long n = vm_bif_list_length_lend(p, ARG(0), &lent);
    vm_lend_done(p, lent);
    if (n < 0)
        BADARG();
    RETURN(make_small(n));
}

NATIVE_FN(bif_hd)
{
    SETUP();
    if (!term_is_cons(ARG(0)))
        BADARG();
    RETURN(cons_head(ARG(0)));
}

NATIVE_FN(bif_tl)
{
    SETUP();
    if (!term_is_cons(ARG(0)))
        BADARG();
    RETURN(cons_tail(ARG(0)));
}

NATIVE_FN(bif_abs)
{
    SETUP();
    if (!term_is_small(ARG(0)))
        return vm_bif_error(p, make_atom(ATOM_BADARITH));
    int64_t v = small_value(ARG(0));
    if (!small_fits(v < 0 ? -v : v))
        return vm_bif_error(p, make_atom(ATOM_BADARITH));
    RETURN(make_small(v < 0 ? -v : v));
}

/* term_compare for natives: false (system_limit raised) when it ran out
 * of steps.  A long one lends p's queue (vm_compare_lend). */
static bool compare(Process *p, Term a, Term b, int *c, tvm_status *st)
{
    *c = vm_compare_lend(p, a, b);
    if (*c != TERM_CMP_LIMIT)
        return true;
    *st = vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    return false;
}

NATIVE_FN(bif_min)
{
    SETUP();
    int c;
    tvm_status st;
    if (!compare(p, ARG(0), ARG(1), &c, &st))
        return st;
    RETURN(c <= 0 ? ARG(0) : ARG(1));
}

NATIVE_FN(bif_max)
{
    SETUP();
    int c;
    tvm_status st;
    if (!compare(p, ARG(0), ARG(1), &c, &st))
        return st;
    RETURN(c >= 0 ? ARG(0) : ARG(1));
}

#define CMP_FN(name, expr)                                      \
    NATIVE_FN(name)                                             \
    {                                                           \
        SETUP();                                                \
        int c;                                                  \
        tvm_status st;                                          \
        if (!compare(p, ARG(0), ARG(1), &c, &st))               \
            return st;                                          \
        RETURN(make_bool(expr));                                \
    }
CMP_FN(bif_lt, c < 0)
CMP_FN(bif_le, c <= 0)
CMP_FN(bif_gt, c > 0)
CMP_FN(bif_ge, c >= 0)
CMP_FN(bif_eq, c == 0)
CMP_FN(bif_ne, c != 0)

NATIVE_FN(bif_tuple_to_list)
{
    SETUP();
    Term t = ARG(0);
    if (!term_is_tuple(t))
        BADARG();
    uint32_t n = tuple_arity(t);
    bool lent = vm_lend_if_long(p, n);
    Term *v = vm_malloc((n + 1) * sizeof(Term));
    memcpy(v, tuple_elems(t), n * sizeof(Term));
    Term r = build_list(p, v, n, TERM_NIL);
    free(v);
    vm_lend_done(p, lent);
    RETURN(r);
}

NATIVE_FN(bif_list_to_tuple)
{
    SETUP();
    bool lent;
    long n = vm_bif_list_length_lend(p, ARG(0), &lent);
    if (n < 0 || n > 0xffffff) {
        vm_lend_done(p, lent);
        BADARG();
    }
    Term *v = vm_bif_list_to_array(ARG(0), n);
    Term r = vm_make_tuple(p, (uint32_t)n, v);
    free(v);
    vm_lend_done(p, lent);
    RETURN(r);
}

NATIVE_FN(bif_append)
{
    SETUP();
    bool lent;
    long n = vm_bif_list_length_lend(p, ARG(0), &lent);
    if (n < 0)
        BADARG();
    Term *v = vm_bif_list_to_array(ARG(0), n);
    Term r = build_list(p, v, (size_t)n, ARG(1));
    free(v);
    vm_lend_done(p, lent);
    RETURN(r);
}

/* ==== erlang: conversions ==== */

NATIVE_FN(bif_atom_to_binary)
{
    SETUP();
    if (!term_is_atom(ARG(0)))
        BADARG();
    size_t n;
    const char *s = vm_atom_name(atom_value(ARG(0)), &n);
    RETURN(vm_make_binary(p, s, n));
}

/* As BEAM: a name longer than 255 bytes, or the atom table full (it is
 * shared by every VM of the OS process and never shrinks), is a
 * system_limit of the calling process, never of the VM. */
NATIVE_FN(bif_binary_to_atom)
{
    SETUP();
    Atom a;
    if (!term_is_binary(ARG(0)))
        BADARG();
    if (!vm_atom_intern((const char *)binary_bytes(ARG(0)), binary_size(ARG(0)), &a))
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    RETURN(make_atom(a));
}

NATIVE_FN(bif_integer_to_binary)
{
    SETUP();
    if (!term_is_small(ARG(0)))
        BADARG();
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%lld", (long long)small_value(ARG(0)));
    RETURN(vm_make_binary(p, buf, (size_t)n));
}

NATIVE_FN(bif_binary_to_integer)
{
    SETUP();
    Term b = ARG(0);
    if (!term_is_binary(b) || binary_size(b) == 0 || binary_size(b) > 30)
        BADARG();
    char buf[32];
    memcpy(buf, binary_bytes(b), binary_size(b));
    buf[binary_size(b)] = '\0';
    /* Only an optional '-' and digits: strtoll alone would skip spaces and '+'. */
    if (!((buf[0] >= '0' && buf[0] <= '9') || (buf[0] == '-' && buf[1] >= '0' && buf[1] <= '9')))
        BADARG();
    /* strtoll stops at a NUL byte, which a binary may hold: every byte
     * must be read. */
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (end != buf + binary_size(b) || !small_fits(v))
        BADARG();
    RETURN(make_small(v));
}

NATIVE_FN(bif_byte_size)
{
    SETUP();
    if (!term_is_binary(ARG(0)))
        BADARG();
    RETURN(make_small((int64_t)binary_size(ARG(0))));
}

/* What iolist_walk found wrong. */
enum { IO_OK, IO_BADARG, IO_LIMIT, IO_OVER };

/*
 * An iolist walk in progress: the bytes so far (len; copied to dst when
 * it is set, only counted when it is NULL), the most there may be, and
 * the list cells it may still visit.  Both caps are needed: an iolist
 * that shares its parts (L = [L, L] sixty times) is a few words long and
 * 2^60 bytes flat, and one whose shared parts are empty ([] or <<>> at
 * the leaves) is as many cells flat while it adds no byte at all, so only
 * the count of cells ends its walk.  The cells allowed are the steps of
 * one comparison (vm->cmp_steps, twice max_message_words): a walk as long
 * as the longest comparison, and a list of bytes that long is a heap of
 * four times max_message_words words.
 * A flattening counts first (iolist_measure: nothing allocated), is
 * refused or allowed by its size (room_check), and only then copies, in
 * a second walk, straight into the binary or the output it makes
 * (iolist_fill): no buffer of the flat size besides the result.  The
 * counting walk lends p's queue once it has visited VM_BIF_LEND_WORK
 * cells (cells at lend_at; a long walk of empty parts), the flattening
 * once it knows its size; `lent` is then set for the caller's vm_lend_done.
 */
typedef struct IoFlat {
    Process *p;
    uint8_t *dst;
    size_t len, max;
    size_t cells, lend_at;
    bool lent;
} IoFlat;

static void io_flat_init(IoFlat *io, Process *p)
{
    /* The bytes of a binary of max_message_words (at most SIZE_MAX / 2,
     * so that the count stopped one past it cannot wrap). */
    size_t max = p->vm->max_msg > SIZE_MAX / 16 ? SIZE_MAX / 2 : p->vm->max_msg * 8;
    size_t cells = p->vm->cmp_steps;
    size_t lend_at = cells > VM_BIF_LEND_WORK ? cells - VM_BIF_LEND_WORK : 0;
    *io = (IoFlat){ p, NULL, 0, max, cells, lend_at, false };
}

/*
 * Walks an iolist (binaries, bytes 0..255, nested lists; at most 100
 * levels of nested lists, so the recursion is bounded), adding its bytes
 * to io->len and copying them to io->dst + io->len when dst is set.
 * IO_OVER when the bytes would pass io->max (io->len is then max + 1: the
 * walk stops there), IO_LIMIT when it would visit more than io->cells
 * list cells.
 */
static int iolist_walk(IoFlat *io, Term t, int depth)
{
    if (depth > 100)
        return IO_BADARG;
    while (term_is_cons(t)) {
        if (VM_UNLIKELY(io->cells <= io->lend_at)) {
            if (io->cells == 0)
                return IO_LIMIT;
            io->lend_at = 0;
            io->lent = io->lent || vm_lend_if_long(io->p, VM_BIF_LEND_WORK);
        }
        io->cells--;
        Term h = cons_head(t);
        if (term_is_small(h)) {
            if (small_value(h) < 0 || small_value(h) > 255)
                return IO_BADARG;
            if (io->len >= io->max) {
                io->len = io->max + 1;
                return IO_OVER;
            }
            if (io->dst)
                io->dst[io->len] = (uint8_t)small_value(h);
            io->len++;
        } else {
            int r = iolist_walk(io, h, depth + 1);
            if (r != IO_OK)
                return r;
        }
        t = cons_tail(t);
    }
    if (term_is_binary(t)) {
        size_t n = binary_size(t);
        if (n > io->max - io->len) {
            io->len = io->max + 1;
            return IO_OVER;
        }
        if (io->dst)
            memcpy(io->dst + io->len, binary_bytes(t), n);
        io->len += n;
        return IO_OK;
    }
    return term_is_nil(t) ? IO_OK : IO_BADARG;
}

/*
 * Counts iolist t's bytes onto io->len (what is already there counts
 * too: the output of an io:format so far) without allocating anything:
 * TVM_OK when a buffer of io->len bytes may be made, else the status to
 * return (badarg; system_limit past the cells or, without a heap limit,
 * past max_message_words of bytes; killed past the process's
 * max_heap_size, as room_for).  Lends p's queue if the copy is long.
 */
static tvm_status iolist_measure(IoFlat *io, Term t)
{
    Process *p = io->p;
    int r = iolist_walk(io, t, 0);
    if (r == IO_BADARG || r == IO_LIMIT)
        return vm_bif_error(p, make_atom(r == IO_LIMIT ? ATOM_SYSTEM_LIMIT : ATOM_BADARG));
    tvm_status st = room_check(p, binary_words(io->len), r == IO_OVER);
    if (st == TVM_OK && !io->lent)
        io->lent = vm_lend_if_long(p, io->len / 8);
    return st;
}

/* Copies iolist t, measured by iolist_measure, to dst + at. */
static void iolist_fill(Process *p, uint8_t *dst, size_t at, Term t)
{
    IoFlat fill = { p, dst, at, SIZE_MAX / 2, SIZE_MAX, 0, false };
    int r = iolist_walk(&fill, t, 0);
    VM_ASSERT(r == IO_OK, "an iolist measured whole copies whole");
    (void)r;
}

NATIVE_FN(bif_iolist_to_binary)
{
    SETUP();
    IoFlat io;
    io_flat_init(&io, p);
    Term t = ARG(0);
    tvm_status st = iolist_measure(&io, t);
    if (st == TVM_OK) {
        uint8_t *bytes;
        /* t is a root of the collection the binary's room may take. */
        Term bin = vm_alloc_binary(p, io.len, &t, 1, &bytes);
        iolist_fill(p, bytes, 0, t);
        *result = vm_root_push(p, bin);
    }
    vm_lend_done(p, io.lent);
    return st;
}

NATIVE_FN(bif_binary_to_list)
{
    SETUP();
    Term b = ARG(0);
    if (!term_is_binary(b))
        BADARG();
    size_t n = binary_size(b);
    tvm_status st = room_for(p, 2 * n);
    if (st != TVM_OK)
        return st;
    bool lent = vm_lend_if_long(p, n);
    /* Built from the last byte straight on the heap: no array of the
     * result's size (it was 8 bytes for each byte of the binary).  The
     * binary is a root of the collection the room may take. */
    vm_heap_ensure(p, 2 * n, &b, 1);
    const uint8_t *bytes = binary_bytes(b);
    Term l = TERM_NIL;
    for (size_t i = n; i-- > 0;) {
        Term *c = vm_heap_alloc(p, 2);
        c[0] = make_small(bytes[i]);
        c[1] = l;
        l = make_cons_ptr(c);
    }
    vm_lend_done(p, lent);
    RETURN(l);
}

NATIVE_FN(bif_make_fun)
{
    SETUP();
    Term m = ARG(0), f = ARG(1), a = ARG(2);
    if (!term_is_atom(m) || !term_is_atom(f) || !term_is_small(a) ||
        small_value(a) < 0 || small_value(a) > VM_MAX_ARITY)
        BADARG();
    Export *e =
        vm_export_get_bounded(p->vm, atom_value(m), atom_value(f), (uint32_t)small_value(a));
    if (!e)
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));   /* max_exports */
    vm_heap_ensure(p, 2, NULL, 0);
    Term *o = vm_heap_alloc(p, 2);
    o[0] = MAKE_HEADER(IMM_HDR_FUN, 1);
    o[1] = (Term)(uintptr_t)e;
    RETURN(make_boxed(o));
}

/* ==== erlang: exceptions ==== */

static tvm_status raise_class(Process *p, Atom cls, Term reason)
{
    vm_exception_set(p, make_atom(cls), reason, NULL);
    return TVM_EXCEPTION;
}

NATIVE_FN(bif_error) { SETUP(); return raise_class(p, ATOM_ERROR, ARG(0)); }
NATIVE_FN(bif_throw) { SETUP(); return raise_class(p, ATOM_THROW, ARG(0)); }
NATIVE_FN(bif_exit) { SETUP(); return raise_class(p, ATOM_EXIT, ARG(0)); }

/* erlang:apply(Fun, Args) and erlang:apply(M, F, Args): a nested activation. */
static tvm_status apply_export(Process *p, Export *e, Term args, tvm_term *result)
{
    long n = vm_bif_list_length_max(args, VM_MAX_ARITY);
    if (n < 0 || (uint32_t)n != e->arity)
        return vm_bif_error(p, make_atom(ATOM_BADARG));
    Term v[VM_MAX_ARITY];
    for (long i = 0; i < n; i++, args = cons_tail(args))
        v[i] = cons_head(args);
    Term res;
    tvm_status st = vm_execute(p, vm_export_target(p->vm, e), (int)n, v, &res);
    if (st != TVM_OK)
        return st;
    *result = vm_root_push(p, res);
    return TVM_OK;
}

NATIVE_FN(bif_apply3)
{
    SETUP();
    Term m = ARG(0), f = ARG(1), args = ARG(2);
    long n = vm_bif_list_length_max(args, VM_MAX_ARITY);
    if (!term_is_atom(m) || !term_is_atom(f) || n < 0)
        BADARG();
    Export *e = vm_export_get_bounded(p->vm, atom_value(m), atom_value(f), (uint32_t)n);
    if (!e)
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));   /* max_exports */
    return apply_export(p, e, args, result);
}

NATIVE_FN(bif_apply2)
{
    SETUP();
    Term fun = ARG(0);
    /* The whole list, to tell badarg from badarity (a long walk lends). */
    bool lent;
    long n = vm_bif_list_length_lend(p, ARG(1), &lent);
    vm_lend_done(p, lent);
    if (n < 0)
        BADARG();
    if (!term_is_fun(fun)) {
        Term e[2] = { make_atom(ATOM_BADFUN), fun };
        return vm_bif_error(p, vm_make_tuple(p, 2, e));
    }
    if ((uint32_t)n != fun_export(fun)->arity) {
        Term e[2] = { make_atom(ATOM_BADARITY), fun };
        return vm_bif_error(p, vm_make_tuple(p, 2, e));
    }
    return apply_export(p, fun_export(fun), ARG(1), result);
}

/* ==== lists ==== */

NATIVE_FN(bif_reverse2)
{
    SETUP();
    bool lent;
    long n = vm_bif_list_length_lend(p, ARG(0), &lent);
    if (n < 0)
        BADARG();
    Term *v = vm_bif_list_to_array(ARG(0), n);
    for (long i = 0; i < n / 2; i++) {
        Term t = v[i];
        v[i] = v[n - 1 - i];
        v[n - 1 - i] = t;
    }
    Term r = build_list(p, v, (size_t)n, argc > 1 ? ARG(1) : TERM_NIL);
    free(v);
    vm_lend_done(p, lent);
    RETURN(r);
}

/* Stable merge sort by term order (recursion depth log2 n).  *limit is
 * set when a comparison ran out of steps; the order is then unspecified.
 * A long comparison lends p's queue (a few deep elements: the sort's own
 * count of comparisons is short). */
static void merge_sort(Process *p, Term *v, Term *tmp, size_t n, bool *limit)
{
    if (n < 2 || *limit)
        return;
    size_t h = n / 2;
    merge_sort(p, v, tmp, h, limit);
    merge_sort(p, v + h, tmp, n - h, limit);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int c = vm_compare_lend(p, v[j], v[i]);
        if (c == TERM_CMP_LIMIT)
            *limit = true;
        tmp[k++] = c < 0 ? v[j++] : v[i++];
    }
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof(Term));
}

/* The comparisons of a merge sort of n elements, n * ceil(log2 n): the
 * work vm_lend_if_long weighs. */
static size_t sort_work(size_t n)
{
    size_t lg = 0;
    while (lg < 63 && ((size_t)1 << lg) < n)
        lg++;
    return n * lg;
}

NATIVE_FN(bif_sort)
{
    SETUP();
    bool lent;
    long n = vm_bif_list_length_lend(p, ARG(0), &lent);
    if (n < 0)
        BADARG();
    lent = lent || vm_lend_if_long(p, sort_work((size_t)n));
    Term *v = vm_bif_list_to_array(ARG(0), n);
    Term *tmp = vm_malloc((size_t)(n > 0 ? n : 1) * sizeof(Term));
    bool limit = false;
    merge_sort(p, v, tmp, (size_t)n, &limit);
    free(tmp);
    Term r = limit ? TERM_NIL : build_list(p, v, (size_t)n, TERM_NIL);
    free(v);
    vm_lend_done(p, lent);
    if (limit)
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    RETURN(r);
}

NATIVE_FN(bif_seq)
{
    SETUP();
    Term a = ARG(0), b = ARG(1);
    if (!term_is_small(a) || !term_is_small(b) || small_value(b) < small_value(a) - 1)
        BADARG();
    int64_t lo = small_value(a), hi = small_value(b);
    /* Smalls have 62 bits: the difference fits an int64_t, twice the
     * count a size_t. */
    size_t n = (size_t)(hi - lo + 1);
    tvm_status st = room_for(p, 2 * n);
    if (st != TVM_OK)
        return st;
    bool lent = vm_lend_if_long(p, n);
    vm_heap_ensure(p, 2 * n, NULL, 0);
    Term l = TERM_NIL;
    for (int64_t i = hi; i >= lo; i--) {
        Term *c = vm_heap_alloc(p, 2);
        c[0] = make_small(i);
        c[1] = l;
        l = make_cons_ptr(c);
    }
    vm_lend_done(p, lent);
    RETURN(l);
}

/* ==== io ==== */

static FILE *out(Process *p)
{
    return p->vm->output ? (FILE *)p->vm->output : stdout;
}

/* The work of printing t (its words, counted up to VM_BIF_LEND_WORK):
 * what vm_lend_if_long weighs before ~p, ~w or erlang:display/1. */
static size_t print_work(Term t)
{
    return term_is_immediate(t) ? 0 : term_size_capped(t, VM_BIF_LEND_WORK);
}

/* ~s of an iolist: measured, refused or allowed (iolist_measure, with
 * the output so far counted), then copied straight into the output. */
static tvm_status format_iolist(IoFlat *io, StrBuf *sb, Term a)
{
    io->len = sb->len;
    tvm_status st = iolist_measure(io, a);
    if (st != TVM_OK)
        return st;
    if (io->len + 1 > sb->cap)
        sb_grow(sb, io->len - sb->len);
    iolist_fill(io->p, (uint8_t *)sb->s, sb->len, a);
    sb->len = io->len;
    sb->s[sb->len] = '\0';
    return TVM_OK;
}

/*
 * Formats io:format directives into sb: TVM_OK, or the status to return
 * (badarg on a bad format or argument; ~s iolists as iolist_measure
 * says, one budget of cells for all of them).  The output is cut with
 * "..." once it passes VM_PRINT_MAX_BYTES, as one printed term is (~p of
 * terms with much sharing, many times over, could otherwise take any
 * memory).  A large ~p, ~w or ~s lends p's queue (io->lent).
 */
static tvm_status format(IoFlat *io, StrBuf *sb, Term fmt, Term args)
{
    Process *p = io->p;
    if (!term_is_binary(fmt))
        BADARG();
    const char *s = (const char *)binary_bytes(fmt);
    size_t n = binary_size(fmt);
    for (size_t i = 0; i < n; i++) {
        if (VM_UNLIKELY(sb->len > VM_PRINT_MAX_BYTES)) {
            sb_puts(sb, "...");
            return TVM_OK;
        }
        if (s[i] != '~') {
            sb_putc(sb, s[i]);
            continue;
        }
        if (++i == n)
            BADARG();
        switch (s[i]) {
        case 'n': sb_putc(sb, '\n'); continue;
        case '~': sb_putc(sb, '~'); continue;
        case 'p':
        case 'w':
        case 's':
            break;
        default:
            BADARG();
        }
        if (!term_is_cons(args))
            BADARG();
        Term a = cons_head(args);
        args = cons_tail(args);
        if (s[i] != 's') {
            io->lent = io->lent || vm_lend_if_long(p, print_work(a));
            vm_print_term(sb, a);
        } else if (term_is_atom(a)) {
            size_t len;
            const char *name = vm_atom_name(atom_value(a), &len);
            sb_put(sb, name, len);
        } else {
            tvm_status st = format_iolist(io, sb, a);
            if (st != TVM_OK)
                return st;
        }
    }
    if (!term_is_nil(args))
        BADARG();
    return TVM_OK;
}

static tvm_status do_format(Process *p, Term fmt, Term args, tvm_term *result)
{
    StrBuf sb;
    IoFlat io;
    sb_init(&sb);
    io_flat_init(&io, p);
    tvm_status st = format(&io, &sb, fmt, args);
    if (st == TVM_OK) {
        FILE *o = out(p);
        fwrite(sb.s, 1, sb.len, o);
        fflush(o);
        *result = vm_root_push(p, TERM_OK);
    }
    sb_free(&sb);
    vm_lend_done(p, io.lent);
    return st;
}

NATIVE_FN(bif_format1) { SETUP(); return do_format(p, ARG(0), TERM_NIL, result); }
NATIVE_FN(bif_format2) { SETUP(); return do_format(p, ARG(0), ARG(1), result); }

NATIVE_FN(bif_display)
{
    SETUP();
    bool lent = vm_lend_if_long(p, print_work(ARG(0)));
    StrBuf sb;
    sb_init(&sb);
    vm_print_term(&sb, ARG(0));
    sb_putc(&sb, '\n');
    FILE *o = out(p);
    fwrite(sb.s, 1, sb.len, o);
    fflush(o);
    sb_free(&sb);
    vm_lend_done(p, lent);
    RETURN(TERM_TRUE);
}

/* ==== registration ==== */

static const VmNativeDef bifs[] = {
    { "erlang", "element", 2, bif_element },
    { "erlang", "setelement", 3, bif_setelement },
    { "erlang", "tuple_size", 1, bif_tuple_size },
    { "erlang", "length", 1, bif_length },
    { "erlang", "hd", 1, bif_hd },
    { "erlang", "tl", 1, bif_tl },
    { "erlang", "abs", 1, bif_abs },
    { "erlang", "min", 2, bif_min },
    { "erlang", "max", 2, bif_max },
    { "erlang", "<", 2, bif_lt },
    { "erlang", "=<", 2, bif_le },
    { "erlang", ">", 2, bif_gt },
    { "erlang", ">=", 2, bif_ge },
    { "erlang", "=:=", 2, bif_eq },
    { "erlang", "=/=", 2, bif_ne },
    { "erlang", "tuple_to_list", 1, bif_tuple_to_list },
    { "erlang", "list_to_tuple", 1, bif_list_to_tuple },
    { "erlang", "++", 2, bif_append },
    { "erlang", "atom_to_binary", 1, bif_atom_to_binary },
    { "erlang", "binary_to_atom", 1, bif_binary_to_atom },
    { "erlang", "integer_to_binary", 1, bif_integer_to_binary },
    { "erlang", "binary_to_integer", 1, bif_binary_to_integer },
    { "erlang", "byte_size", 1, bif_byte_size },
    { "erlang", "iolist_to_binary", 1, bif_iolist_to_binary },
    { "erlang", "binary_to_list", 1, bif_binary_to_list },
    { "erlang", "make_fun", 3, bif_make_fun },
    { "erlang", "error", 1, bif_error },
    { "erlang", "throw", 1, bif_throw },
    { "erlang", "exit", 1, bif_exit },
    { "erlang", "apply", 2, bif_apply2 },
    { "erlang", "apply", 3, bif_apply3 },
    { "erlang", "display", 1, bif_display },
    { "lists", "reverse", 1, bif_reverse2 },
    { "lists", "reverse", 2, bif_reverse2 },
    { "lists", "sort", 1, bif_sort },
    { "lists", "seq", 2, bif_seq },
    { "io", "format", 1, bif_format1 },
    { "io", "format", 2, bif_format2 },
};

VmNativeTable vm_bif_natives(void)
{
    return VM_NATIVE_TABLE(bifs);
}
