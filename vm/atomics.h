/*
 * vm/atomics.h - the project's one wrapper over libatomic_ops.
 *
 * Every shared word that more than one thread touches without a lock is a
 * VmAtomic and is read and written only through these functions, each of
 * which names its memory order.  With gcc, libatomic_ops maps every
 * operation to a gcc __atomic builtin, so ThreadSanitizer sees them as the
 * atomics they are.  On x86_64 (TSO) acquire loads and release stores
 * compile to plain moves; on aarch64 (weakly ordered) to ldar and stlr,
 * relaxed accesses to plain ldr/str, which the CPU may reorder with any
 * other access to another address, and the full operations to
 * acquire-release exclusives (or LSE atomics), which ARMv8 keeps in order
 * with each other (its acquire and release are sequentially consistent
 * among themselves: a release store is not passed by a later acquire
 * load).  So every ordering a protocol needs must be named here: what x86
 * gives every access for free, ARM gives only these.  Keeping the wrapper
 * this thin means it could be swapped for <stdatomic.h> in one file.
 *
 * Conventions at the call sites: every release/acquire names what it
 * orders and its pair, e.g. "[CX1] release: module code before the index
 * flip; pairs with [CX1'] in vm_export_target()".
 */
#ifndef VM_ATOMICS_H
#define VM_ATOMICS_H

#include <atomic_ops.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct VmAtomic {
    volatile AO_t v;
} VmAtomic;

#define VM_ATOMIC_INIT(x) { (AO_t)(x) }

static inline uintptr_t vm_atomic_load_relaxed(const VmAtomic *a)
{
    return (uintptr_t)AO_load((const volatile AO_t *)&a->v);
}

static inline uintptr_t vm_atomic_load_acquire(const VmAtomic *a)
{
    return (uintptr_t)AO_load_acquire((const volatile AO_t *)&a->v);
}

static inline void vm_atomic_store_relaxed(VmAtomic *a, uintptr_t x)
{
    AO_store(&a->v, (AO_t)x);
}

static inline void vm_atomic_store_release(VmAtomic *a, uintptr_t x)
{
    AO_store_release(&a->v, (AO_t)x);
}

static inline void vm_atomic_store_full(VmAtomic *a, uintptr_t x)
{
    AO_store_full(&a->v, (AO_t)x);
}

/* Returns the value before the addition; no ordering. */
static inline uintptr_t vm_atomic_fetch_add_relaxed(VmAtomic *a, uintptr_t d)
{
    return (uintptr_t)AO_fetch_and_add(&a->v, (AO_t)d);
}

/* Returns the value before the addition; full barrier. */
static inline uintptr_t vm_atomic_fetch_add_full(VmAtomic *a, uintptr_t d)
{
    return (uintptr_t)AO_fetch_and_add_full(&a->v, (AO_t)d);
}

/*
 * A sequentially consistent read: a read-modify-write that adds 0.  For
 * store-then-load handshakes (Dekker style) where neither side's load may
 * pass its own preceding store: do the store as a _full RMW and the load
 * with this.  A fence (vm_atomic_fence_full) would do on the hardware, but
 * ThreadSanitizer does not support fences, and RMWs it understands.
 */
static inline uintptr_t vm_atomic_load_rmw_full(VmAtomic *a)
{
    return (uintptr_t)AO_fetch_and_add_full(&a->v, 0);
}

/* Compare-and-swap with a full barrier; non-zero on success. */
static inline int vm_atomic_cas_full(VmAtomic *a, uintptr_t old, uintptr_t nw)
{
    return AO_compare_and_swap_full(&a->v, (AO_t)old, (AO_t)nw);
}

/* Sets (on) or clears `bits` in a word that other threads change too:
 * a CAS loop, so concurrent changes of different bits compose. */
static inline void vm_atomic_update_bits(VmAtomic *a, uintptr_t bits, bool on)
{
    for (;;) {
        uintptr_t old = vm_atomic_load_relaxed(a);
        uintptr_t nw = on ? (old | bits) : (old & ~bits);
        if (old == nw || vm_atomic_cas_full(a, old, nw))
            return;
    }
}

/* A full memory fence. */
static inline void vm_atomic_fence_full(void)
{
    AO_nop_full();
}

/* Loads before it complete before loads after it (the reader of a
 * seqlock, between the data it read and the sequence word it checks).
 * A compiler barrier on x86_64, where loads stay in order; dmb ishld on
 * aarch64. */
static inline void vm_atomic_fence_acquire(void)
{
#if defined(VM_TSAN)
    /* ThreadSanitizer does not model fences, and gcc refuses them under
     * -fsanitize=thread (-Wtsan, an error with -Werror).  The TSan build
     * is x86_64's, where this fence is a compiler barrier anyway. */
    AO_compiler_barrier();
#else
    AO_nop_read();
#endif
}

/* Stores before it become visible before stores after it (the writer of
 * a seqlock, between the sequence word and the data).  A compiler barrier
 * on x86_64, where stores stay in order; dmb ishst on aarch64. */
static inline void vm_atomic_fence_store(void)
{
#if defined(VM_TSAN)
    AO_compiler_barrier(); /* as in vm_atomic_fence_acquire */
#else
    AO_nop_write();
#endif
}

/* Accesses before it are not moved after it by the compiler, nor the
 * other way: the order a signal handler that interrupts this very thread
 * sees (it runs on the same CPU, so the hardware keeps program order for
 * it; only the compiler has to be told).  No instruction is emitted. */
static inline void vm_atomic_fence_signal(void)
{
    AO_compiler_barrier();
}

/* An acquire load of a word that is not a VmAtomic (a pointer a protocol
 * reads outside ThreadSanitizer's view; the call site says what it pairs
 * with). */
static inline uintptr_t vm_atomic_peek_acquire(const uintptr_t *at)
{
    return (uintptr_t)AO_load_acquire((const volatile AO_t *)at);
}

/*
 * A relaxed atomic load of a word that is not a VmAtomic (a stack word,
 * say): for a read that races by design with a writer the protocol does
 * not stop, whose value is validated afterwards and thrown away if the
 * writer moved (stacks/st_capture.c: a capture reading the saved context
 * of a process switched in meanwhile).  One aligned load, never torn or
 * repeated by the compiler; the call site says what validates it.
 */
static inline uintptr_t vm_atomic_peek_relaxed(const uintptr_t *at)
{
    return (uintptr_t)AO_load((const volatile AO_t *)at);
}

/* A relaxed atomic store to a word that is not a VmAtomic: the writer's
 * side of a word some other thread reads with vm_atomic_peek_* (the call
 * site says who reads it and what orders the two). */
static inline void vm_atomic_poke_relaxed(uintptr_t *at, uintptr_t x)
{
    AO_store((volatile AO_t *)at, (AO_t)x);
}

/* Pointer-typed conveniences over the same operations. */
#define vm_atomic_load_ptr_acquire(a) ((void *)vm_atomic_load_acquire(a))
#define vm_atomic_load_ptr_relaxed(a) ((void *)vm_atomic_load_relaxed(a))
#define vm_atomic_store_ptr_release(a, p) \
    vm_atomic_store_release((a), (uintptr_t)(p))

/*
 * Code words.  A function's first word is patched while other threads
 * execute it (breakpoint arming), so the instruction fetch and the patch
 * are single aligned 64-bit accesses: relaxed atomics, which compile to
 * the plain moves an interpreter uses anyway.  Ordering comes from the
 * thread-progress waits around a patch, not from these accesses.
 */
_Static_assert(sizeof(AO_t) == sizeof(uint64_t), "code words are AO_t-sized");

static inline uint64_t vm_code_fetch(const uint64_t *at)
{
    return (uint64_t)AO_load((const volatile AO_t *)at);
}

static inline void vm_code_patch(uint64_t *at, uint64_t word)
{
    AO_store((volatile AO_t *)at, (AO_t)word);
}

#endif /* VM_ATOMICS_H */
