/*
 * vm/heap.c - the copying collector and heap builders (see heap.h), and
 * erlang:garbage_collect/0, which runs the collector on demand.
 */
#include "vm/heap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vm/dict.h"
#include "vm/hook.h"
#include "vm/lend.h"
#include "vm/monitors.h"
#include "vm/sched.h"
#include "vm/sysmon.h"
#include "vm/timer.h"

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
    /* The dictionary's keys and values (vm/dict.c: on the heap, the
     * table off it). */
    size_t nd;
    Term *dict = vm_dict_roots(p, &nd);
    for (size_t i = 0; i < nd; i++)
        evacuate(&gc, &dict[i]);
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

static void gc_run(Process *p, size_t need, Term *extra, size_t nextra)
{
    /* The garbage_collection trace's two events, outside the lend: the
     * process is still (or again) an ordinary running one when they are
     * written (trace/tr_vm_proc.c). */
    bool traced = VM_UNLIKELY(vm_atomic_load_relaxed(&p->trace) & VM_TRACE_GC);
    if (traced)
        vm_hook_gc(p, false, need);
    size_t used = (size_t)(p->htop - p->heap);
    size_t cur = vm_heap_size(p);
    /* A collection copies at most the used words, twice when the heap is
     * resized: from VM_BIF_LEND_WORK of them on it lends the queue, as
     * BEAM runs the collection of a large heap on a dirty scheduler
     * (vm/lend.h).  Safe at any allocation: vm_lend_now lends only for
     * the process running on this thread, outside an enclosing lend
     * (an embedder native building terms), and no caller allocates on a
     * process heap while holding a lock (each one that reads under a
     * lock copies out first and builds after it: nif_registered,
     * bp_trace_info, process_info's lists). */
    bool lent = vm_lend_if_long(p, used);
    /* A heap that must grow is collected straight into the size it would
     * grow to if everything were live (live data is at most what is
     * used), so a heap whose data stays live, as when a process builds a
     * big term, is copied once per growth and not twice. */
    size_t size = cur >= used + need ? cur : pow2_at_least(2 * (used + need));
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
    vm_lend_done(p, lent);
    p->gc_recent = live;
    if (traced)
        vm_hook_gc(p, true, used > live ? used - live : 0);
    if (p->max_heap)
        vm_heap_check_max(p);
}

/* A collection timed for the system monitor (vm/sysmon.c). */
static __attribute__((noinline)) void gc_monitored(Process *p, size_t need, Term *extra,
                                                   size_t nextra)
{
    const uint64_t t0 = vm_now_ns();
    gc_run(p, need, extra, nextra);
    vm_sysmon_gc(p, vm_now_ns() - t0);
}

void vm_gc(Process *p, size_t need, Term *extra, size_t nextra)
{
    /* One relaxed load and a predicted branch while no system monitor
     * is set. */
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&p->vm->sysmon.on)))
        gc_monitored(p, need, extra, nextra);
    else
        gc_run(p, need, extra, nextra);
}

/* erlang:garbage_collect(): collects the caller's heap now, as BEAM's
 * (true).  A large one lends the queue as any collection does. */
static tvm_status nif_garbage_collect(tvm_env *env, int argc, const tvm_term *argv,
                                      tvm_term *result, void *data)
{
    (void)argc, (void)argv, (void)data;
    Process *p = env->p;
    vm_gc(p, 0, NULL, 0);
    *result = vm_root_push(p, make_atom(ATOM_TRUE));
    return TVM_OK;
}

static const VmNativeDef natives[] = {
    { "erlang", "garbage_collect", 0, nif_garbage_collect },
};

VmNativeTable vm_heap_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}

/* Marks p to be killed by its max_heap_size, having reached `used`
 * words (its crash report says so, vm/lifecycle.c). */
static void mark_killed(Process *p, size_t used)
{
    p->kill = make_atom(ATOM_KILLED);
    p->kill_heap = used;
    p->kill_monitors = vm_monitors_live(p);
    p->kill_dict = vm_dict_words(p);
    p->reds = 0;
}

/* What counts toward max_heap_size besides the heap block: the messages
 * in p's own queue, its monitors (vm/process.h) and its dictionary's
 * table (vm/dict.c). */
static size_t off_heap_words(const Process *p)
{
    return p->mq_words + vm_monitors_live(p) * VM_MONITOR_WORDS + vm_dict_words(p);
}

size_t vm_heap_total_words(const Process *p)
{
    return vm_heap_size(p) + off_heap_words(p);
}

void vm_heap_check_max(Process *p)
{
    /* The block, not the live data, as BEAM counts a heap's size.  The
     * heap still grows as asked: the caller allocates next, and a process
     * cannot be stopped in the middle of a native or an instruction; it
     * dies as the native that grew it returns, or at its next reduction
     * check (a call or a backward jump: a bounded number of instructions
     * away, as the verifier allows no other loop), and never waits
     * meanwhile (vm/process.h).  Monitors count as vm/process.h says,
     * the dictionary's table as vm/dict.c does. */
    size_t used = vm_heap_size(p) + off_heap_words(p);
    if (used > p->max_heap && !p->kill && vm_monitors_live(p)) {
        /* Entries of monitors whose target has exited cost nothing:
         * dropped before they could kill (vm/process.h). */
        vm_proc_monitors_prune(p);
        used = vm_heap_size(p) + off_heap_words(p);
    }
    if (used > p->max_heap && !p->kill)
        mark_killed(p, used);
}

bool vm_heap_max_refuses(Process *p, size_t words)
{
    /* Exact, not a guess: whatever the collector finds live, the block
     * that holds `words` more words is at least `words` words, so an
     * allocation of more than the limit alone would have the process
     * killed as the native returns (vm_heap_check_max).  Deciding before
     * the allocation changes only that it is never made: a heap of 1,000
     * words no longer grows to gigabytes in one lists:seq/2 first.
     * Smaller amounts go the usual way (they at most double a heap that
     * is within the limit, as the collector's sizing always does). */
    if (!p->max_heap || words <= p->max_heap)
        return false;
    if (!p->kill)
        mark_killed(p, vm_heap_size(p) + words + off_heap_words(p));
    return true;
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

/*
 * A copy is a Cheney scan, as the collector is, so it needs no stack at
 * all whatever the term's depth: the root object is copied shallowly (its
 * words verbatim, so its parts still point at the source), then a scan
 * over the words copied so far replaces each pointer it meets with a
 * shallow copy of what it points at, appended at the end, until the scan
 * catches up with the end.  Headers tell the scan where an object's raw
 * words (a binary's bytes, a fun's export) are, to step over them; a
 * cons cell's words are terms (never headers).  Shared subterms are
 * copied once per reference, as term_size counts them, so a copy takes
 * exactly term_size(t) words.
 */

/* A shallow copy of what t points at, appended at *hp; t if immediate. */
static inline Term shallow(Term **hp, Term t)
{
    if (term_is_cons(t)) {
        const Term *c = cons_ptr(t);
        Term *to = *hp;
        to[0] = c[0];
        to[1] = c[1];
        *hp += 2;
        return make_cons_ptr(to);
    }
    if (term_is_boxed(t)) {
        const Term *o = boxed_ptr(t);
        size_t n = boxed_words_from_header(o[0]);
        Term *to = *hp;
        memcpy(to, o, n * sizeof(Term));
        *hp += n;
        return make_boxed(to);
    }
    return t;
}

Term vm_copy_to(Term **hp, Term t)
{
    Term *scan = *hp;
    Term result = shallow(hp, t);
    while (scan < *hp) {
        Term w = *scan;
        if (term_is_header(w)) {
            /* A tuple's elements follow as terms; other objects' words are raw. */
            scan += IMM_SUB(w) == IMM_HDR_TUPLE ? 1 : boxed_words_from_header(w);
            continue;
        }
        *scan++ = shallow(hp, w);
    }
    return result;
}

Term vm_copy_term(Process *p, Term t)
{
    Term r = vm_copy_to(&p->htop, t);
    VM_ASSERT(p->htop <= p->hend, "heap overflow in copy");
    return r;
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

Term vm_alloc_binary(Process *p, size_t len, Term *extra, size_t nextra, uint8_t **bytes)
{
    size_t words = binary_words(len);
    vm_heap_ensure(p, words, extra, nextra);
    Term *b = vm_heap_alloc(p, words);
    b[words - 1] = 0; /* zero the padding (before the header: words may be 1) */
    b[0] = MAKE_HEADER(IMM_HDR_BINARY, len);
    *bytes = (uint8_t *)(b + 1);
    return make_boxed(b);
}

Term vm_make_binary(Process *p, const void *bytes, size_t len)
{
    uint8_t *dst;
    Term b = vm_alloc_binary(p, len, NULL, 0, &dst);
    memcpy(dst, bytes, len);
    return b;
}
