/*
 * trace/tr_fast.h - the producers' fast path: an event whose payload is a
 * few immediates, written straight into its scheduler's ring.
 *
 * Why a second writer.  tr_emit() (trace/tr_buffer.c) handles every case:
 * PAD records at the ring's end, LOST markers, compound payloads, the size
 * cap, full rings under both policies, the shared ring's lock.  A traced
 * call of a function with small-integer or atom arguments, and its return
 * with such a value, need none of that, and they are most of the events a
 * busy trace writes.  This writer does the same three steps of the ring
 * protocol (reserve, write, publish with the release store [TB1]) inline,
 * for those events only, and gives up having written nothing (the caller
 * then calls tr_emit(), which starts over) when anything is unusual:
 *   - more payload terms than imm_terms, or a term that is not an
 *     immediate (tr_encode_imm says NULL);
 *   - a LOST marker pending (drop policy; tr_emit writes it first);
 *   - the largest record of this many immediates would not fit before
 *     the array's end (tr_emit skips the rest of the array: a PAD record,
 *     or, for fewer than TR_PAD_MIN bytes, nothing written), or the cached
 *     tail says the ring may be full (tr_emit loads the tail again:
 *     [TB2']);
 *   - it could reach the next boundary of the cut table's granules
 *     (tr_emit notes the cut: tr_buffer.c, "Cuts"), or wake_at (tr_emit
 *     looks at the collector).
 * The last three are one comparison against r->fast_end, which tr_emit
 * keeps (tr_internal.h); this writer never moves head past it, so the
 * bound stays right between two tr_emit calls.  The bytes are the ones
 * tr_emit would write, so the collector cannot tell the two apart (a
 * unit test compares them).  Same contract as tr_emit: only the ring's
 * one producer (its scheduler thread) calls it.
 */
#ifndef TRACE_TR_FAST_H
#define TRACE_TR_FAST_H

#include "trace/tr_clock.h"
#include "trace/tr_encode.h"
#include "trace/tr_internal.h"

/* How far ahead of the write the fast path prefetches (bytes): 256 to
 * 1024 measured the same. */
#define TR_FAST_PREFETCH 512u

/* The same at a given time `ticks` (tr_clock_ticks()), or, for 0 (a
 * constant: the test folds away), read as the record is written: the
 * events one call writes into several sessions' rings share one clock
 * read, a single event reads it as late as it can. */
static inline __attribute__((always_inline)) bool tr_ring_put_imm_at(TrRing *r,
                                                                      const TrEmit *ev,
                                                                      uint64_t ticks)
{
    const unsigned n = ev->nterms;
    const size_t most = sizeof(TrRecord) + (size_t)n * TR_IMM_MAX;
    const uint64_t head = r->head_local;
    if (VM_UNLIKELY(n > r->imm_terms || head + most > r->fast_end))
        return false;
    uint8_t *at = r->data + (head & (r->size - 1));
    /* Ask now for the line a dozen records ahead, for writing: each new
     * line of the ring is a read-for-ownership from the last-level cache
     * (the collector read it last) or memory, and a record every 20 ns
     * or so fills the store buffer behind those misses.  Measured:
     * 24.0 -> 20.8 ns per call event, 50.8 -> 44.3 per pair
     * (docs/benchmarks.md).  A prefetch never faults. */
    __builtin_prefetch(r->data + ((head + TR_FAST_PREFETCH) & (r->size - 1)), 1, 3);
    const uint8_t *end = tr_encode_imm(at + sizeof(TrRecord), ev->terms, n);
    if (VM_UNLIKELY(!end))
        return false;
    size_t paylen = (size_t)(end - (at + sizeof(TrRecord)));
    size_t size = (sizeof(TrRecord) + paylen + TR_RECORD_ALIGN - 1) &
                  ~(size_t)(TR_RECORD_ALIGN - 1);
    /* Size first: in this order gcc -O2 needs one register fewer than
     * with the stores in memory order (callgrind: 3 instructions fewer
     * per event). */
    TrRecord *h = (TrRecord *)(void *)at;
    h->size = (uint16_t)size;
    h->paylen = (uint16_t)paylen;
    h->kind = (uint8_t)ev->kind;
    h->flags = (uint8_t)ev->flags;
    h->arity = (uint8_t)ev->arity;
    h->nterms = (uint8_t)n;
    h->ticks = ticks ? ticks : tr_clock_ticks();
    h->pid = ev->pid;
    h->mod = ev->mod;
    h->fun = ev->fun;
    r->head_local = head + size;
    /* [TB1] release: the record before the new head (tr_buffer.c). */
    vm_atomic_store_release(&r->head, (uintptr_t)r->head_local);
    vm_atomic_store_relaxed(&r->emitted, vm_atomic_load_relaxed(&r->emitted) + 1);
    return true;
}

static inline __attribute__((always_inline)) bool tr_ring_put_imm(TrRing *r,
                                                                   const TrEmit *ev)
{
    return tr_ring_put_imm_at(r, ev, 0);
}

#endif /* TRACE_TR_FAST_H */
