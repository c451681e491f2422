/*
 * trace/tr_buffer.c - the per-scheduler event rings: the producer side
 * (tr_emit) and the primitives the collector reads them with.
 *
 * Protocol: one ring, one producer, one consumer.
 *
 *   Terms.  A ring is `size` bytes (a power of two) holding variable-size
 *   records (trace/tr_event.h), each 4-byte aligned.  `head` counts the
 *   bytes the producer has published, `tail` the bytes the collector has
 *   finished with; both only grow.  The producer owns [head, tail + size),
 *   the collector [tail, head).
 *
 *   Writing (producer, the scheduler thread that owns the ring, or any
 *   thread holding shared_lock for the shared ring):
 *     1. Reserve: the record needs `n` contiguous bytes.  If fewer than n
 *        are left before the end of the array, the record starts at
 *        offset 0 (so records never wrap and the collector reads them in
 *        place) and the `pad` bytes left before the end are skipped: a PAD
 *        record covers them, or, if they are fewer than TR_PAD_MIN (4, 8
 *        or 12 bytes: too few for a PAD's kind and size,
 *        trace/tr_event.h), nothing is written there.  The space is free if
 *        head + pad + n - tail <= size, tested first against the cached
 *        tail and, only if that fails, against a fresh load of `tail`
 *        ([TB2'] acquire: the collector's reads of the old bytes happen
 *        before we overwrite them).
 *     2. Write the record (header, payload) with plain stores.
 *     3. Publish: `head` += pad + n with a release store ([TB1]: the
 *        record bytes before the new head).
 *   Reading (collector: the one collector thread that drains this ring,
 *   tr_collector.c):
 *     1. Load `head` ([TB1'] acquire: pairs with [TB1]; every byte below
 *        it is written).
 *     2. Read records in [tail, head), skipping PAD records and, where
 *        fewer than TR_PAD_MIN bytes are left before the end of the
 *        array, those bytes (no record starts there: tr_ring_skip).
 *     3. Release: advance `tail` ([TB2], a seq_cst add, so a release: the
 *        reads above happen before the producer may reuse the space;
 *        pairs with [TB2']; seq_cst for the lossless handshake below).
 *   No other field is shared except the statistics mirrors (relaxed, see
 *   tr_internal.h) and `waiting` (below).
 *
 *   Full ring, drop policy: the event is not written; the producer counts
 *   it in pending_lost and in `lost`.  The next event that fits is
 *   preceded by a LOST marker record carrying pending_lost, so sinks see
 *   the loss where it happened.  Whatever is still pending at shutdown is
 *   reported by the collector from `lost` minus what it delivered.
 *
 *   Full ring, lossless policy: nothing is written and tr_emit returns
 *   TR_FULL.  Before that the producer adds 1 to `waiting` and re-reads
 *   `tail` ([TB3]); the collector, after it hands space back by adding to
 *   `tail`, reads `waiting` ([TB3']).  All four accesses are sequentially
 *   consistent read-modify-writes, so they fall in one total order: either
 *   the producer's re-read comes after the collector's update (it finds
 *   the room itself) or the collector's read comes after the producer's
 *   request (it subtracts what it saw, calls on_space and wakes
 *   tr_wait_space()).  No wake-up is lost and no producer spins.  (Plain
 *   stores with full fences would do the same, but ThreadSanitizer does
 *   not support fences; it does understand RMWs.)
 *
 *   On both machines.  Every ordering above is named by an acquire, a
 *   release or a sequentially consistent RMW, none is left to the CPU:
 *   on x86_64 (TSO) [TB1]/[TB1'] and [TB2'] are plain moves and the RMWs
 *   locked instructions; on aarch64 they are stlr/ldar and
 *   acquire-release exclusives (or LSE ldaddal).  [TB1] is the
 *   message-passing pattern, which stlr/ldar order on ARM as TSO does on
 *   x86 (the record's plain stores before the head, the collector's reads
 *   after it).  [TB2]/[TB2'] keep the producer's overwrite after the
 *   collector's reads of the same bytes (load-to-store ordering, which
 *   ARM, unlike x86, would otherwise allow to be reordered: the release
 *   half of the add is what forbids it).  The [TB3] handshake is a
 *   store-then-load on each side, the one pattern TSO does not order
 *   either: both sides use two SC RMWs, whose store half (a release) and
 *   the next one's load half (an acquire) ARMv8 keeps in order, as a
 *   locked instruction does on x86.
 *
 *   Waking the collector.  An idle collector sleeps poll_ns (1 ms by
 *   default), and a busy scheduler fills a 1 MiB ring (the smallest
 *   default, tr_ring_default) faster than that (fully traced fib: about
 *   0.8 ms; 8 MiB in about 5).  So the producer looks at its ring
 *   when its head passes `wake_at`: it loads `tail` ([TB2'], as reserve
 *   does), and if the ring is at least half full it wakes the collector
 *   threads that sleep (tr_collector_kick: a mutex and a broadcast, only
 *   when `sleeping` says one does) and looks again TR_WAKE_STEPS times
 *   per further half ring; otherwise it looks again when the ring could
 *   next be half full (tail + size / 2).  wake_at caps fast_end, so the
 *   fast path needs no test of its own; the cost is one load of a
 *   collector-written line per look.  Under the drop policy a
 *   scheduler's producer also calls sched_yield() at each such look:
 *   when the schedulers keep every CPU busy, a woken collector waits for
 *   a CPU longer than half a ring takes to fill, and the yield lets the
 *   collector queued on this CPU run now instead (a fully traced fib(27)
 *   on 2 schedulers and 2 vCPUs lost a median of 73,000 to 156,000 of
 *   2.5 M events per run without it, 0 to a few thousand with it;
 *   docs/tracing.md).  A yield is not a wait: with nothing else runnable
 *   it returns at once, and it happens at most TR_WAKE_STEPS times per
 *   half ring that the collector leaves unread.  Under the lossless
 *   policy a full ring suspends the process anyway, which lets the
 *   collector run.
 *
 *   Cuts.  A raw sink (the raw CTF format) writes a range of records
 *   straight from the ring, and needs only where the range ends, its
 *   first and last record's ticks, its last record's pad and the counts
 *   of the LOST markers in it.  Walking the headers to find them read
 *   every record before the kernel copied it (about 2 ns per event of
 *   the collector's 11, bench_events raw_null_mev_s); the cut table
 *   (tr_internal.h) gives them in O(1) per range instead.  The ring is
 *   cut into granules of 2^cut_shift bytes (size / TR_CUTS, at least
 *   the largest record, so that a record reaches at most one boundary).
 *   The producer, for each record it writes, tests whether it begins
 *   before a boundary B and ends at or after it; if so it stores the
 *   record's start and its count of marked drops (n_marked) in B's slot,
 *   before the [TB1] release that publishes the record; at a lap's end
 *   closed by a PAD or by unwritten bytes (step 1) it stores UINT64_MAX
 *   there, as no record reaches it.  The collector, for a range from
 *   tail_local of up to `limit` bytes below head_seen and the lap's
 *   end, takes the last boundary B in it (or the one before, for a lap's
 *   end without a record): after its [TB1'] acquire of a head at or
 *   past B it sees the slot's store, and the record there ends at or
 *   below head_seen (a head is never inside a record).  The range ends
 *   with that record; the drops its markers carry are the slot's count
 *   less the count at the range's start (marked_seen).  A slot holds an
 *   older lap's start only where no record of this lap reached B (B
 *   inside a PAD), and that start is below tail_local, which the check
 *   rejects, as UINT64_MAX is; then, and for the bytes after the last
 *   boundary (less than a granule), the collector walks the headers as
 *   before.  A slot is rewritten only for B plus TR_CUTS granules, at
 *   least a ring's size on, which the producer reaches only after the
 *   collector handed back the space below B ([TB2]/[TB2']): never while
 *   the collector reads it.  The fast path (trace/tr_fast.h) writes no
 *   slot: fast_end stops it short of the next boundary, so the record
 *   that reaches one is always tr_emit's, once per granule.
 *
 *   Memory is bounded by size per ring; a producer never allocates, never
 *   blocks (a scheduler ring takes no lock at all) and never waits for
 *   the collector.
 *
 * Concurrency table (X: must not run concurrently; -: may):
 *                      emit(ring)  collector(ring)  stats
 *   emit(same ring)        X             -            -
 *   collector              -             X            -
 */
#include "trace/tr_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "trace/tr_clock.h"
#include "trace/tr_encode.h"

/* How many times per half ring the producer looks again while the
 * collector leaves its ring at least half full ("Waking the collector"). */
#define TR_WAKE_STEPS 4

static inline size_t align_record(size_t n)
{
    return (n + TR_RECORD_ALIGN - 1) & ~(size_t)(TR_RECORD_ALIGN - 1);
}

/* Producer: recomputes fast_end (tr_internal.h) from head, tail_cache,
 * wake_at and pending_lost. */
static void fast_end_update(TrRing *r)
{
    uint64_t lap_end = (r->head_local & ~(uint64_t)(r->size - 1)) + r->size;
    uint64_t room_end = r->tail_cache + r->size;
    uint64_t end = lap_end < room_end ? lap_end : room_end;
    end = r->wake_at < end ? r->wake_at : end;
    /* Below the next granule boundary: the fast path's records never
     * reach one, so it has no cut to note ("Cuts" above). */
    uint64_t cut = ((r->head_local >> r->cut_shift) + 1) << r->cut_shift;
    end = cut - 1 < end ? cut - 1 : end;
    r->fast_end = r->pending_lost ? 0 : end;
}

/* Producer, within a record of wake_at (where the fast path gives up):
 * wakes a sleeping collector if the ring is at least half full, under the
 * drop policy offers the CPU to it (a scheduler's ring only: the shared
 * ring's producer holds shared_lock), and sets the next wake_at.  The
 * protocol is "Waking the collector" above. */
static void wake_check(TrPipeline *tp, TrRing *r, bool may_yield)
{
    /* [TB2'] as in reserve(): a fresher tail is only ever more room. */
    r->tail_cache = vm_atomic_load_acquire(&r->tail);
    uint64_t half = r->size / 2;
    if (r->head_local - r->tail_cache < half) {
        r->wake_at = r->tail_cache + half;
        return;
    }
    tr_collector_kick(tp);
    if (may_yield && tp->opts.policy == TR_POLICY_DROP) {
        sched_yield();
        vm_atomic_store_relaxed(&r->yields, (uintptr_t)++r->n_yields);
    }
    r->wake_at = r->head_local + half / TR_WAKE_STEPS;
}

/*
 * A ring's memory.  Rings of TR_HUGE_PAGE bytes or more (a power of two,
 * so a multiple of it) get a mapping of their own, aligned to it and
 * advised to use transparent huge pages (Debian's default THP mode is
 * "madvise": only advised ranges get them).  Why: a large ring is
 * written and read a lap at a time, and its first lap touches every page
 * for the first time, in the producer's stores and in the kernel's copy
 * into the stream file.  On the development VM that first touch of 4 KiB
 * pages costs more than the events: a fresh 32 MiB buffer took 110 ms to
 * fill and its first write into tmpfs 86 ms (19.6 ms the second time);
 * with huge pages 73 and 17.5 ms.  The raw CTF stream rate of
 * bench_events (a 128 MiB ring) went from 8.8-10.0 to 88-102 M
 * events/s.  The advice is only a hint: without THP the ring simply has
 * 4 KiB pages.  Smaller rings come from the heap, which reuses its
 * memory across sessions.
 */
#define TR_HUGE_PAGE ((size_t)2 << 20)

/* NULL when the memory is not there (the caller reports it). */
static uint8_t *ring_alloc(size_t size)
{
    if (size < TR_HUGE_PAGE)
        return calloc(1, size);
    size_t span = size + TR_HUGE_PAGE;
    uint8_t *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* Keep the aligned `size` bytes of the span, unmap the rest (mmap
     * gives zeroed pages, as calloc would). */
    uintptr_t at = ((uintptr_t)p + TR_HUGE_PAGE - 1) & ~(uintptr_t)(TR_HUGE_PAGE - 1);
    size_t before = at - (uintptr_t)p, after = span - before - size;
    if (before)
        munmap(p, before);
    if (after)
        munmap((uint8_t *)at + size, after);
    (void)madvise((void *)at, size, MADV_HUGEPAGE);
    return (uint8_t *)at;
}

static void ring_free(uint8_t *data, size_t size)
{
    if (size < TR_HUGE_PAGE)
        free(data);
    else if (data)
        munmap(data, size);
}

bool tr_ring_init(TrRing *r, size_t size, int sched, size_t cap)
{
    memset(r, 0, sizeof *r);
    r->data = ring_alloc(size);
    if (!r->data)
        return false;
    r->size = size;
    r->sched = sched;
    size_t imm = cap / TR_IMM_MAX;
    r->imm_terms = (unsigned)(imm < TR_IMM_TERMS ? imm : TR_IMM_TERMS);
    /* The granule: size / TR_CUTS, but no smaller than the largest
     * record, so that a record reaches at most one boundary (and at most
     * the ring's size: then every boundary is a lap's end). */
    size_t granule = size / TR_CUTS, largest = align_record(sizeof(TrRecord) + cap);
    while (granule < largest && granule < size)
        granule *= 2;
    r->cut_shift = (unsigned)__builtin_ctzll(granule);
    for (int i = 0; i < TR_CUTS; i++)
        vm_atomic_store_relaxed(&r->cut_start[i], UINT64_MAX);
    r->wake_at = size / 2;
    fast_end_update(r);
    return true;
}

void tr_ring_destroy(TrRing *r)
{
    ring_free(r->data, r->size);
    r->data = NULL;
}

/* ==== producer side ==== */

/* The cut table's slot for the granule boundary that the record
 * [start, end) reaches (start UINT64_MAX: no record reaches it). */
static void ring_cut(TrRing *r, uint64_t start, uint64_t end)
{
    size_t slot = (size_t)(end >> r->cut_shift) & (TR_CUTS - 1);
    /* Relaxed: the caller's [TB1] release publishes them with the
     * record. */
    vm_atomic_store_relaxed(&r->cut_start[slot], (uintptr_t)start);
    vm_atomic_store_relaxed(&r->cut_marked[slot], (uintptr_t)r->n_marked);
}

/*
 * Step 1 of writing: returns where `n` bytes may be written (after a PAD
 * if the end of the array is too close), or NULL if the ring lacks room.
 * *adv gets the bytes the PAD took.  Nothing is visible to the collector
 * until reserve_commit().
 */
static uint8_t *reserve(TrRing *r, size_t n, size_t *adv)
{
    uint64_t head = r->head_local;
    size_t off = (size_t)(head & (r->size - 1));
    size_t contig = r->size - off;
    size_t pad = contig < n ? contig : 0;
    if (head + pad + n - r->tail_cache > r->size) {
        /* [TB2'] acquire: pairs with [TB2] in tr_ring_release(); the
         * collector is done reading what we are about to overwrite. */
        r->tail_cache = vm_atomic_load_acquire(&r->tail);
        if (head + pad + n - r->tail_cache > r->size)
            return NULL;
    }
    if (pad) {
        /* The lap ends with no record reaching its end: no cut there. */
        ring_cut(r, UINT64_MAX, head + pad);
        /* Fewer than TR_PAD_MIN bytes: no room for a PAD, and none
         * needed (tr_ring_skip). */
        if (pad >= TR_PAD_MIN) {
            TrRecord *p = (TrRecord *)(void *)(r->data + off);
            p->size = (uint16_t)pad;   /* pad < n <= TR_RECORD_MAX */
            p->kind = TR_K_PAD;
        }
        off = 0;
    }
    *adv = pad;
    return r->data + off;
}

/* Step 3: publish pad + n bytes. */
static void reserve_commit(TrRing *r, size_t adv)
{
    r->head_local += adv;
    /* [TB1] release: the record (and any PAD) before the new head; pairs
     * with [TB1'] in tr_ring_snapshot(). */
    vm_atomic_store_release(&r->head, (uintptr_t)r->head_local);
}

static void put_header(uint8_t *at, const TrEmit *ev, uint64_t ticks, size_t size,
                       size_t paylen, unsigned items, bool truncated)
{
    TrRecord *h = (TrRecord *)(void *)at;
    h->size = (uint16_t)size;
    h->paylen = (uint16_t)paylen;
    h->kind = (uint8_t)ev->kind;
    h->flags = (uint8_t)(ev->flags | (truncated ? TR_F_TRUNCATED : 0));
    h->arity = (uint8_t)ev->arity;
    h->nterms = (uint8_t)items;
    h->ticks = ticks;
    h->pid = ev->pid;
    h->mod = ev->mod;
    h->fun = ev->fun;
}

static void put_lost_marker(TrRing *r, uint8_t *at, uint64_t ticks)
{
    TrRecord *h = (TrRecord *)(void *)at;
    memset(h, 0, sizeof *h);
    h->size = sizeof(TrRecord);
    h->kind = TR_K_LOST;
    h->ticks = ticks;
    h->pid = r->pending_lost;
    r->n_marked += r->pending_lost;
    r->pending_lost = 0;
}

/* A record [start, end) that begins before a granule boundary and ends
 * at or after it goes into the cut table (no record is larger than the
 * granule, so it reaches at most one boundary). */
static inline void note_record(TrRing *r, uint64_t start, uint64_t end)
{
    if (((start ^ end) >> r->cut_shift) != 0)
        ring_cut(r, start, end);
}

/* The cut table's entries for the records just written at `at`: a LOST
 * marker of `marker` bytes (0: none), then a record of `size` bytes. */
static void note_records(TrRing *r, uint64_t at, size_t marker, size_t size)
{
    if (marker)
        note_record(r, at, at + marker);
    note_record(r, at + marker, at + marker + size);
}

/*
 * The slow path: encode into a stack buffer first so that only the exact
 * size is reserved (the fast path needs room for the largest record):
 * where the largest does not fit, in a full ring or near the end of the
 * array.  Kept out of line so the fast path's frame stays small.
 */
static __attribute__((noinline)) bool write_exact(TrPipeline *tp, TrRing *r,
                                                  const TrEmit *ev, uint64_t ticks,
                                                  size_t marker)
{
    uint8_t scratch[TR_PAYLOAD_MAX];
    unsigned items;
    bool truncated;
    size_t paylen = tr_encode(scratch, tp->cap, ev->terms, ev->nterms, &items, &truncated);
    size_t size = align_record(sizeof(TrRecord) + paylen), adv;
    uint8_t *at = reserve(r, marker + size, &adv);
    if (!at)
        return false;
    if (marker)
        put_lost_marker(r, at, ticks);
    put_header(at + marker, ev, ticks, size, paylen, items, truncated);
    memcpy(at + marker + sizeof(TrRecord), scratch, paylen);
    note_records(r, r->head_local + adv, marker, size);
    reserve_commit(r, adv + marker + size);
    return true;
}

/* Writes one event (and a LOST marker before it, if drops are pending). */
static bool ring_write(TrPipeline *tp, TrRing *r, const TrEmit *ev, uint64_t ticks)
{
    size_t marker = r->pending_lost ? sizeof(TrRecord) : 0, adv;
    /* Near the end of the array, where the largest record would not fit
     * but this one may: its exact size decides whether the lap ends here
     * (write_exact).  Reserving the largest would end the lap early when
     * the collector had made room at the start, so where a lap ends
     * would depend on the collector's progress, and a lap's last bytes
     * would go to a PAD that a record could have used (test_ring's wrap
     * sequences, which expect the end the records alone decide, failed
     * now and then). */
    if (r->size - (size_t)(r->head_local & (r->size - 1)) < marker + tp->max_record)
        return write_exact(tp, r, ev, ticks, marker);
    /* Fast path: room for the largest record; encode in place. */
    uint8_t *at = reserve(r, marker + tp->max_record, &adv);
    if (!at)
        return write_exact(tp, r, ev, ticks, marker);
    unsigned items;
    bool truncated;
    size_t paylen = tr_encode(at + marker + sizeof(TrRecord), tp->cap, ev->terms,
                              ev->nterms, &items, &truncated);
    size_t size = align_record(sizeof(TrRecord) + paylen);
    if (marker)
        put_lost_marker(r, at, ticks);
    put_header(at + marker, ev, ticks, size, paylen, items, truncated);
    note_records(r, r->head_local + adv, marker, size);
    reserve_commit(r, adv + marker + size);
    return true;
}

static TrStatus ring_full(TrPipeline *tp, TrRing *r, const TrEmit *ev, uint64_t ticks)
{
    if (tp->opts.policy == TR_POLICY_DROP) {
        r->pending_lost++;
        vm_atomic_store_relaxed(&r->lost, (uintptr_t)++r->n_lost);
        tr_collector_kick(tp);
        return TR_DROPPED;
    }
    /* [TB3] seq_cst RMWs: the request, then a fresh tail for reserve();
     * pairs with [TB3'] in tr_ring_release(). */
    vm_atomic_fetch_add_full(&r->waiting, 1);
    r->tail_cache = vm_atomic_load_rmw_full(&r->tail);
    if (ring_write(tp, r, ev, ticks))
        return TR_OK;
    vm_atomic_store_relaxed(&r->full, (uintptr_t)++r->n_full);
    tr_collector_kick(tp);
    return TR_FULL;
}

TrStatus tr_emit(TrPipeline *tp, int sched, const TrEmit *ev)
{
    VM_ASSERT(sched >= -1 && sched < tp->opts.nscheds, "bad scheduler id");
    VM_ASSERT(ev->kind < TR_K_LOST, "producers emit real events only");
    VM_ASSERT(ev->arity <= UINT8_MAX, "arity fits the record");
    TrStatus st;
    if (VM_LIKELY(sched >= 0)) {
        TrRing *r = &tp->rings[sched];
        uint64_t ticks = tr_clock_ticks();
        st = ring_write(tp, r, ev, ticks) ? TR_OK : ring_full(tp, r, ev, ticks);
        if (st == TR_OK)
            vm_atomic_store_relaxed(&r->emitted, vm_atomic_load_relaxed(&r->emitted) + 1);
        if (r->head_local + tp->max_record > r->wake_at)
            wake_check(tp, r, true);
        fast_end_update(r);
        return st;
    }
    TrRing *r = &tp->rings[tp->nrings - 1];
    pthread_mutex_lock(&tp->shared_lock);
    /* Stamped under the lock: the shared ring's records stay in time order. */
    uint64_t ticks = tr_clock_ticks();
    st = ring_write(tp, r, ev, ticks) ? TR_OK : ring_full(tp, r, ev, ticks);
    if (st == TR_OK)
        vm_atomic_store_relaxed(&r->emitted, vm_atomic_load_relaxed(&r->emitted) + 1);
    if (r->head_local + tp->max_record > r->wake_at)
        wake_check(tp, r, false);
    fast_end_update(r);
    pthread_mutex_unlock(&tp->shared_lock);
    return st;
}

bool tr_ring_has_room(const TrPipeline *tp, TrRing *r)
{
    /* Worst case: a PAD of almost a record, a marker, then the record. */
    size_t need = 2 * tp->max_record + sizeof(TrRecord);
    /* [TB3] (after the caller's request): seq_cst, and so also [TB2']. */
    uint64_t tail = vm_atomic_load_rmw_full(&r->tail);
    return vm_atomic_load_relaxed(&r->head) + need - tail <= r->size;
}

bool tr_wait_space(TrPipeline *tp, int sched, uint64_t timeout_ns)
{
    TrRing *r = &tp->rings[sched >= 0 ? sched : tp->nrings - 1];
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)(timeout_ns / 1000000000u);
    deadline.tv_nsec += (long)(timeout_ns % 1000000000u);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    bool ok = true;
    pthread_mutex_lock(&tp->lock);
    for (;;) {
        /* [TB3] again: a request, then the check.  The collector
         * broadcasts `space` under tp->lock after it saw a request, so the
         * check-then-wait below under the same lock cannot miss it. */
        vm_atomic_fetch_add_full(&r->waiting, 1);
        if (tr_ring_has_room(tp, r) || tp->stop)
            break;
        pthread_cond_broadcast(&tp->kick);
        int rc = timeout_ns ? pthread_cond_timedwait(&tp->space, &tp->lock, &deadline)
                            : pthread_cond_wait(&tp->space, &tp->lock);
        if (rc != 0 && !tr_ring_has_room(tp, r)) {
            ok = false;
            break;
        }
    }
    pthread_mutex_unlock(&tp->lock);
    return ok;
}

/* ==== consumer side (collector thread only) ==== */

bool tr_ring_snapshot(TrRing *r)
{
    /* [TB1'] acquire: pairs with [TB1] in reserve_commit(); the records
     * below head are fully written. */
    r->head_seen = vm_atomic_load_acquire(&r->head);
    return r->head_seen != r->tail_local;
}

const TrRecord *tr_ring_peek(TrRing *r)
{
    while (r->tail_local != r->head_seen) {
        size_t skip = tr_ring_skip(r, r->tail_local);
        if (!skip)
            return (const TrRecord *)(const void *)(r->data +
                                                    (r->tail_local & (r->size - 1)));
        r->tail_local += skip;
    }
    return NULL;
}

/* The range's summary from its first record and its last, at `last`
 * bytes into it. */
static void range_ends(const uint8_t *base, size_t last, TrRange *rg)
{
    const TrRecord *first = (const TrRecord *)(const void *)base;
    const TrRecord *h = (const TrRecord *)(const void *)(base + last);
    rg->first_ticks = first->ticks;
    rg->last_ticks = h->ticks;
    rg->last_pad = h->size - sizeof(TrRecord) - h->paylen;
}

/*
 * The range from the cut table: up to the record that reaches the last
 * granule boundary B within `limit` bytes, or the one before B if no
 * record reaches B (a lap's end).  0 where neither has a cut.  A slot
 * whose start is not in [tail_local, B) is not this lap's: an older
 * lap's start is below tail_local (head_seen - size <= tail_local, and
 * the older boundary is at least size below B), and UINT64_MAX is above.
 */
static size_t cut_range(TrRing *r, size_t off, size_t limit, TrRange *rg)
{
    uint64_t tail = r->tail_local, granule = (uint64_t)1 << r->cut_shift;
    uint64_t b = (tail + limit) & ~(granule - 1);
    for (int k = 0; k < 2 && b > tail; k++, b -= granule) {
        size_t slot = (size_t)(b >> r->cut_shift) & (TR_CUTS - 1);
        uint64_t start = vm_atomic_load_relaxed(&r->cut_start[slot]);
        if (start < tail || start >= b)
            continue;
        /* Published: it reaches b <= head_seen, and a head is never
         * inside a record. */
        const TrRecord *h = (const TrRecord *)(const void *)(r->data + (start & (r->size - 1)));
        size_t last = (size_t)(start - tail), len = last + h->size;
        uint64_t marked = vm_atomic_load_relaxed(&r->cut_marked[slot]);
        *rg = (TrRange){ .sched = r->sched, .data = r->data + off, .len = len,
                         .lost = marked - r->marked_seen };
        range_ends(rg->data, last, rg);
        r->marked_seen = marked;
        r->n_cut_ranges++;
        return len;
    }
    return 0;
}

size_t tr_ring_range(TrRing *r, size_t limit, TrRange *rg)
{
    size_t off = (size_t)(r->tail_local & (r->size - 1));
    size_t to_end = r->size - off;
    size_t avail = (size_t)(r->head_seen - r->tail_local);
    if (avail > to_end)
        avail = to_end;   /* records never wrap: the rest starts at 0 */
    if (limit > avail)
        limit = avail;
    size_t cut = cut_range(r, off, limit, rg);
    if (cut)
        return cut;
    /* Records start only where at least TR_PAD_MIN bytes are left before
     * the end of the array (tr_ring_skip): below `starts`, which is 0
     * where fewer are left (4 to 12 bytes: nothing to read there). */
    size_t starts = to_end >= TR_PAD_MIN ? to_end - TR_PAD_MIN + TR_RECORD_ALIGN : 0;
    const uint8_t *base = r->data + off;
    /* Per record only its size and kind (and a LOST marker's count); the
     * ticks and the pad of the first and last record after the loop.  In
     * locals: rg's words could alias the ring's (both uint64_t), so the
     * compiler would store them on every record. */
    size_t pos = 0, last = 0, bound = limit < starts ? limit : starts;
    uint64_t lost = 0;
    while (pos < bound) {
        const TrRecord *h = (const TrRecord *)(const void *)(base + pos);
        if (h->kind == TR_K_PAD)
            break;
        if (h->kind == TR_K_LOST)
            lost += h->pid;
        last = pos;
        pos += h->size;
    }
    *rg = (TrRange){ .sched = r->sched, .data = base, .len = pos, .lost = lost };
    if (pos)
        range_ends(base, last, rg);
    r->marked_seen += lost;
    /* Short of limit: skipped bytes (a PAD, or too few for one), which
     * run to the end of the array; the caller steps over them too. */
    return pos < limit ? to_end : pos;
}

void tr_ring_release(TrPipeline *tp, TrRing *r)
{
    /* Only the collector writes tail: a relaxed read of our own value. */
    uintptr_t old = vm_atomic_load_relaxed(&r->tail);
    if (old == r->tail_local)
        return;   /* nothing freed: a waiting producer waits for a later release */
    /* [TB2] (a seq_cst RMW, so also release): our reads of the consumed
     * records before the space is handed back; pairs with [TB2'] in
     * reserve().  It is also the first half of [TB3']. */
    vm_atomic_fetch_add_full(&r->tail, (uintptr_t)r->tail_local - old);
    /* [TB3'] seq_cst read of the requests; pairs with [TB3] in ring_full()
     * and tr_wait_space(). */
    uintptr_t w = vm_atomic_load_rmw_full(&r->waiting);
    if (!w)
        return;
    vm_atomic_fetch_add_full(&r->waiting, (uintptr_t)0 - w);
    if (tp->opts.on_space)
        tp->opts.on_space(tp->opts.on_space_data, r->sched);
    pthread_mutex_lock(&tp->lock);
    pthread_cond_broadcast(&tp->space);
    pthread_mutex_unlock(&tp->lock);
}
