/*
 * vm/heap.c - the copying collector and heap builders (see heap.h).
 */
#include "vm/heap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vm/hook.h"

/* The allocation profiler's switch and mean interval in words (vm/hook.h). */
VmAtomic vm_pf_alloc_mean;

/* ==== the collector ==== */

typedef struct Gc {
    Term *lo, *hi;   /* from-space */
    Term *top;       /* to-space allocation pointer */
} Gc;

static inline bool in_from(const Gc *gc, const Term *p)
{
    return p >= gc->lo && p < gc->hi;
}

/* Moves the object a root or field refers to and updates the slot. */
static void evacuate(Gc *gc, Term *slot)
{
    Term t = *slot;
    switch (term_tag(t)) {
    case TAG_BOXED: {
        Term *obj = boxed_ptr(t);
        if (!in_from(gc, obj))
            return;
        Term hdr = obj[0];
        if (term_tag(hdr) == TAG_BOXED) { /* forwarding pointer */
            *slot = hdr;
            return;
        }
        size_t n = boxed_words_from_header(hdr);
        Term *to = gc->top;
        memcpy(to, obj, n * sizeof(Term));
        gc->top += n;
        obj[0] = make_boxed(to);
        *slot = make_boxed(to);
        return;
    }
    case TAG_LIST: {
        Term *cell = cons_ptr(t);
        if (!in_from(gc, cell))
            return;
        if (cell[0] == GC_FWD_MARK) {
            *slot = cell[1];
            return;
        }
        Term *to = gc->top;
        to[0] = cell[0];
        to[1] = cell[1];
        gc->top += 2;
        cell[0] = GC_FWD_MARK;
        cell[1] = make_cons_ptr(to);
        *slot = cell[1];
        return;
    }
    default:
        return;
    }
}

/* Cheney scan of the to-space from `scan` to the allocation pointer. */
static void scan_to_space(Gc *gc, Term *scan)
{
    while (scan < gc->top) {
        Term w = *scan;
        if (term_is_header(w)) {
            unsigned sub = IMM_SUB(w);
            if (sub == IMM_HDR_TUPLE) {
                scan++; /* elements follow and are scanned as terms */
                continue;
            }
            scan += boxed_words_from_header(w); /* binary / fun: raw payload */
            continue;
        }
        evacuate(gc, scan);
        scan++;
    }
}

/*
 * Allocation sampling.  A process allocates by bumping htop after
 * vm_heap_ensure made room; ensure compares the room against p->hlim,
 * which is hend while allocation is not profiled, so the fast path is the
 * same compare as without a profiler.  While it is, hlim is the lower of
 * hend and the next sample point, and reaching it takes the slow path
 * (heap_slow), which counts the words allocated since the last time,
 * reports every sample point the allocation about to be made passes
 * (vm_hook_pf_alloc, with the allocating stack still in place), draws the
 * next interval and sets the limit again.  Intervals are exponential with
 * mean vm_pf_alloc_mean words (a Poisson process over the words
 * allocated, as Go's and tcmalloc's heap samplers): a fixed interval
 * would alias with a loop whose allocations repeat with a period that
 * divides it, and charge one site with everything.  Words are counted
 * ahead (an ensure's request before it is allocated); what a caller then
 * leaves unallocated is taken back at the next slow path, since the count
 * is the distance htop moved from where it was expected (pf_base).
 */
static void set_limit(Process *p)
{
    p->hlim = p->hend;
    if (p->pf_left) {
        uintptr_t mark = (uintptr_t)p->pf_base + (uint64_t)p->pf_left * sizeof(Term);
        if (mark < (uintptr_t)p->hend)
            p->hlim = (Term *)mark;
    }
}

/* An exponential interval of mean `mean` words, at least 1. */
static int64_t next_interval(Process *p, uintptr_t mean)
{
    /* xorshift64*: the state is the process's own. */
    uint64_t x = p->pf_rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    p->pf_rng = x;
    double u = (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0; /* [0, 1) */
    double v = -log(1.0 - u) * (double)mean;
    return v < 1.0 ? 1 : v > 1e15 ? (int64_t)1e15 : (int64_t)v;
}

static void alloc_sample(Process *p, size_t words)
{
    uintptr_t mean = vm_atomic_load_relaxed(&vm_pf_alloc_mean);
    if (!vm_pf_wanted(VM_PF_ALLOC) || mean == 0) {
        p->pf_left = 0;
        return;
    }
    if (p->pf_left == 0) {
        if (!p->pf_rng)
            p->pf_rng = 0x9E3779B97F4A7C15ull ^ (p->pid * 0xBF58476D1CE4E5B9ull) ^ (uintptr_t)p;
        p->pf_left = next_interval(p, mean);
        p->pf_base = p->htop;
    }
    int64_t used = (int64_t)(p->htop - p->pf_base) + (int64_t)words;
    uint64_t k = 0;
    while (used >= p->pf_left) {
        used -= p->pf_left;
        p->pf_left = next_interval(p, mean);
        k++;
    }
    p->pf_left -= used;
    p->pf_base = p->htop + words;
    if (k)
        vm_hook_pf_alloc(p, k);
}

static void collect_into(Process *p, size_t size, Term *extra, size_t nextra)
{
    Term *to = vm_malloc(size * sizeof(Term));
    Gc gc = { p->heap, p->htop, to };
    for (uint32_t i = 0; i < p->stack_size; i++)
        evacuate(&gc, &p->stack[i]);
    for (uint32_t i = 0; i < p->nroots; i++)
        evacuate(&gc, &p->roots[i]);
    for (size_t i = 0; i < nextra; i++)
        evacuate(&gc, &extra[i]);
    evacuate(&gc, &p->exc_class);
    evacuate(&gc, &p->exc_reason);
    evacuate(&gc, &p->exc_trace_term);
    scan_to_space(&gc, to);
    /* The sample point counts from pf_base, which is relative to htop:
     * it moves with the live data. */
    ptrdiff_t ahead = p->pf_left ? p->pf_base - p->htop : 0;
    free(p->heap);
    p->heap = to;
    p->htop = gc.top;
    p->hend = to + size;
    p->pf_base = p->htop + ahead;
    set_limit(p);
    vm_atomic_store_relaxed(&p->heap_words, size);
    p->gc_count++;
}

static size_t pow2_at_least(size_t n)
{
    size_t s = 1;
    while (s < n)
        s <<= 1;
    return s;
}

void vm_gc(Process *p, size_t need, Term *extra, size_t nextra)
{
    size_t used = (size_t)(p->htop - p->heap);
    size_t cur = vm_heap_size(p);
    size_t size = cur > used + need ? cur : used + need;
    collect_into(p, size, extra, nextra);
    /*
     * Resize: live data plus the request should fill at most half of the
     * block.  Growing (or shrinking a heap that is under a quarter used)
     * costs one more copy of the live data, only at size transitions.
     */
    size_t live = (size_t)(p->htop - p->heap);
    size_t target = pow2_at_least(2 * (live + need));
    if (target < p->heap_min)
        target = p->heap_min;
    if (target > size || (target * 4 <= size && size > p->heap_min))
        collect_into(p, target, extra, nextra);
}

/* No room below the limit: a sample point, a collection, or both. */
static void heap_slow(Process *p, size_t words, Term *extra, size_t nextra)
{
    if (p->pf_left || vm_pf_wanted(VM_PF_ALLOC))
        alloc_sample(p, words);
    if (VM_STRESS_GC || (size_t)(p->hend - p->htop) < words)
        vm_gc(p, words, extra, nextra);
    else
        set_limit(p);
}

void vm_heap_ensure(Process *p, size_t words, Term *extra, size_t nextra)
{
    /* Signed: code that allocated without an ensure may be past hlim. */
    if (VM_STRESS_GC || p->hlim - p->htop < (ptrdiff_t)words)
        heap_slow(p, words, extra, nextra);
}

/* ==== copying terms ==== */

/* Copies t to *hp (bumping it); the caller has room for term_size(t). */
static Term copy_rec(Term **hp, Term t)
{
    Term result, *dst = &result;
    for (;;) {
        switch (term_tag(t)) {
        case TAG_LIST: {
            Term *cell = *hp;
            *hp += 2;
            cell[0] = copy_rec(hp, cons_head(t));
            *dst = make_cons_ptr(cell);
            dst = &cell[1];
            t = cons_tail(t);
            continue;
        }
        case TAG_BOXED: {
            Term *obj = boxed_ptr(t);
            Term hdr = obj[0];
            size_t n = boxed_words_from_header(hdr);
            Term *to = *hp;
            *hp += n;
            *dst = make_boxed(to);
            if (IMM_SUB(hdr) != IMM_HDR_TUPLE || n == 1) {
                memcpy(to, obj, n * sizeof(Term));
                return result;
            }
            to[0] = hdr;
            for (size_t i = 1; i + 1 < n; i++)
                to[i] = copy_rec(hp, obj[i]);
            dst = &to[n - 1];
            t = obj[n - 1];
            continue;
        }
        default:
            *dst = t;
            return result;
        }
    }
}

Term vm_copy_term(Process *p, Term t)
{
    Term r = copy_rec(&p->htop, t);
    VM_ASSERT(p->htop <= p->hend, "heap overflow in copy");
    return r;
}

Term vm_copy_to(Term **hp, Term t)
{
    return copy_rec(hp, t);
}

Term vm_make_tuple(Process *p, uint32_t n, Term *elems)
{
    /* elems are extra roots: the collector updates them in place. */
    vm_heap_ensure(p, 1 + (size_t)n, elems, n);
    Term *t = vm_heap_alloc(p, 1 + (size_t)n);
    t[0] = MAKE_HEADER(IMM_HDR_TUPLE, n);
    memcpy(t + 1, elems, n * sizeof(Term));
    return make_boxed(t);
}

Term vm_make_cons(Process *p, Term head, Term tail)
{
    /* head and tail are extra roots: a collection updates the copies. */
    Term ht[2] = { head, tail };
    vm_heap_ensure(p, 2, ht, 2);
    Term *c = vm_heap_alloc(p, 2);
    c[0] = ht[0];
    c[1] = ht[1];
    return make_cons_ptr(c);
}

Term vm_make_binary(Process *p, const void *bytes, size_t len)
{
    size_t words = binary_words(len);
    vm_heap_ensure(p, words, NULL, 0);
    Term *b = vm_heap_alloc(p, words);
    b[words - 1] = 0; /* zero the padding (before the header: words may be 1) */
    b[0] = MAKE_HEADER(IMM_HDR_BINARY, len);
    memcpy(b + 1, bytes, len);
    return make_boxed(b);
}
