/*
 * vm/fiber.c - fiber stacks (mmap + guard region, pooled; or carved from
 * slabs, each with a guard region too) and the initial frame of a new
 * fiber.
 *
 * Every stack has VM_FIBER_GUARD_BYTES of guard below it, so a native that
 * overflows its stack faults at once, and vm/overflow.c turns the fault
 * into the end of that one process.  A guard is made with
 * MADV_GUARD_INSTALL (Linux 6.13): the pages fault like PROT_NONE ones but
 * are markers in the page tables, not a kernel mapping (VMA) of their own,
 * so they neither split a mapping nor count against vm.max_map_count
 * (65530 by default per OS process).  On older kernels the guard is
 * mprotect(PROT_NONE) instead, which splits the mapping: a stack then
 * costs one VMA more.
 *
 * Guarded stacks (the default): each stack is its own mapping, [guard |
 * stack]: one VMA per live process (two with mprotect guards: about
 * 32,700 live processes).
 *
 * Slab stacks (tvm_config.fiber_slabs): stacks are carved from slabs of
 * VM_FIBER_SLAB_STACKS slots [guard | stack], one anonymous read-write
 * mapping each.  Neighbouring slabs have the same protection and flags,
 * so the kernel merges them into one VMA; with guard regions, 300,000
 * processes then need a handful of mappings instead of 300,000.  A slab
 * stack is never unmapped on its own (that would split the VMA again): a
 * freed one stays in the pool for reuse whatever max_free says, trimming
 * gives its pages back (madvise DONTNEED, which leaves guard regions in
 * place; neighbouring free stacks in one call), and the slabs are
 * unmapped with the pool.  Address space is reserved, not committed
 * (MAP_NORESERVE): 300,000 slots of 320 KiB are 92 GiB of it, of the 128
 * TiB a process has.
 */
#define _GNU_SOURCE
#include "vm/fiber.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vm/common.h"

/* Linux 6.13's guard regions (not in older kernel headers). */
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

/*
 * Under AddressSanitizer: a fiber that ends by switching away leaves the
 * redzones of its last frames poisoned on its stack.  A reused stack must
 * be unpoisoned before new frames are built on it, and an unmapped one
 * before it goes: the next mapping placed there would inherit the poison,
 * and ASan would report every read of it (found by fuzz/fuzz_ctl.c:
 * libelf copying out of a file it had mapped where a fiber stack had
 * been reported a stack-buffer-underflow).
 */
#define UNPOISON_STACK(f) vm_asan_unpoison((f)->stack_lo, (size_t)((f)->stack_hi - (f)->stack_lo))

static size_t page_size(void)
{
    static size_t ps;
    if (!ps)
        ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

/* The guard below a stack, whole pages. */
static size_t guard_size(void)
{
    size_t ps = page_size();
    return (VM_FIBER_GUARD_BYTES + ps - 1) / ps * ps;
}

/*
 * Whether MADV_GUARD_INSTALL makes guards that fault.  The advice is a
 * hint to madvise's interface, and an emulator may accept it and do
 * nothing: qemu-user 7.2 (the aarch64 suite's, README) answers 0 to
 * advice it does not know, which left every stack without a guard (an
 * overflow ran into the next stack).  Probed once per OS process on a
 * scratch page: the kernel's copy out of a guarded page fails with
 * EFAULT, where it reads an unguarded one.
 */
static bool guards_fault;
static pthread_once_t guard_probe_once = PTHREAD_ONCE_INIT;

static void guard_probe(void)
{
    size_t ps = page_size();
    char *p = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int fds[2];
    if (p == MAP_FAILED)
        return;
    if (madvise(p, ps, MADV_GUARD_INSTALL) == 0 && pipe2(fds, O_CLOEXEC) == 0) {
        guards_fault = write(fds[1], p, 1) < 0 && errno == EFAULT;
        close(fds[0]);
        close(fds[1]);
    }
    munmap(p, ps);
}

/* Makes [lo, lo + len) fault on any access: a guard region when the
 * kernel has them, PROT_NONE otherwise; false if neither works. */
static bool make_guard(char *lo, size_t len)
{
    pthread_once(&guard_probe_once, guard_probe);
    return (guards_fault && madvise(lo, len, MADV_GUARD_INSTALL) == 0) ||
           mprotect(lo, len, PROT_NONE) == 0;
}

void vm_fiber_pool_init(FiberPool *pool, size_t stack_size, size_t max_free)
{
    size_t ps = page_size();
    if (!stack_size)
        stack_size = VM_FIBER_STACK_SIZE;
    pool->stack_size = (stack_size + ps - 1) / ps * ps;
    pool->max_free = max_free;
    pthread_mutex_init(&pool->lock, NULL);
    pool->free = NULL;
    pool->nfree = 0;
    pool->ndirty = 0;
    pool->release_calls = 0;
    pool->live = 0;
    pool->slabs = false;
    pool->slab_next = pool->slab_end = NULL;
    pool->slab_list = NULL;
    pool->nslabs = pool->slab_cap = 0;
}

void vm_fiber_pool_use_slabs(FiberPool *pool)
{
    pool->slabs = true;
}

static void unmap(Fiber *f)
{
#if defined(VM_TSAN)
    __tsan_destroy_fiber(f->tsan);
#endif
    if (f->in_slab) {
        free(f);    /* the slab goes with the pool */
        return;
    }
    size_t g = guard_size();
    UNPOISON_STACK(f);
    if (munmap(f->stack_lo - g, (size_t)(f->stack_hi - f->stack_lo) + g) != 0)
        vm_die("munmap of a fiber stack");
    free(f);
}

void vm_fiber_pool_destroy(FiberPool *pool)
{
    while (pool->free) {
        Fiber *f = pool->free;
        pool->free = f->next_free;
        unmap(f);
    }
    pool->nfree = 0;
    size_t slab_len = VM_FIBER_SLAB_STACKS * (guard_size() + pool->stack_size);
    for (size_t i = 0; i < pool->nslabs; i++) {
        vm_asan_unpoison(pool->slab_list[i], slab_len);  /* as UNPOISON_STACK, above */
        if (munmap(pool->slab_list[i], slab_len) != 0)
            vm_die("munmap of a fiber slab");
    }
    free(pool->slab_list);
    pool->slab_list = NULL;
    pool->nslabs = 0;
    pthread_mutex_destroy(&pool->lock);
}

/* The next stack of the current slab, mapping a new slab when it is used
 * up; NULL when no slab can be mapped or no guard made. */
static Fiber *carve(FiberPool *pool)
{
    size_t g = guard_size(), slot = g + pool->stack_size;
    size_t slab_len = VM_FIBER_SLAB_STACKS * slot;
    pthread_mutex_lock(&pool->lock);
    if (pool->slab_next == pool->slab_end) {
        char *slab = mmap(NULL, slab_len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (slab == MAP_FAILED) {
            pthread_mutex_unlock(&pool->lock);
            return NULL;
        }
        if (pool->nslabs == pool->slab_cap) {
            pool->slab_cap = pool->slab_cap ? pool->slab_cap * 2 : 64;
            pool->slab_list = vm_realloc(pool->slab_list, pool->slab_cap * sizeof(void *));
        }
        pool->slab_list[pool->nslabs++] = slab;
        pool->slab_next = slab;
        pool->slab_end = slab + slab_len;
    }
    char *lo = pool->slab_next + g;
    pool->slab_next += slot;
    pthread_mutex_unlock(&pool->lock);
    /* The guard once, when the slot is first used: slab stacks are reused,
     * never unmapped alone.  A slot whose guard fails stays unused. */
    if (!make_guard(lo - g, g))
        return NULL;
    Fiber *f = vm_calloc(1, sizeof(Fiber));
    f->stack_lo = lo;
    f->stack_hi = lo + pool->stack_size;
    f->in_slab = true;
    return f;
}

/* A stack of its own with a guard; NULL when it cannot be mapped. */
static Fiber *map_guarded(FiberPool *pool)
{
    /* [guard][stack ...]; the Fiber itself is a small malloc'd struct, so
     * an idle fiber's resident memory is the stack pages it touched and
     * nothing else. */
    size_t g = guard_size();
    size_t len = g + pool->stack_size;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    if (base == MAP_FAILED || !make_guard(base, g)) {
        if (base != MAP_FAILED)
            munmap(base, len);
        return NULL;
    }
    Fiber *f = vm_calloc(1, sizeof(Fiber));
    f->stack_lo = base + g;
    f->stack_hi = base + len;
    return f;
}

bool vm_fiber_in_guard(const Fiber *f, uintptr_t addr)
{
    uintptr_t lo = (uintptr_t)f->stack_lo;
    return addr < lo && addr >= lo - guard_size();
}

Fiber *vm_fiber_alloc(FiberPool *pool)
{
    pthread_mutex_lock(&pool->lock);
    pool->live++;
    Fiber *reuse = pool->free;
    if (reuse) {
        pool->free = reuse->next_free;
        pool->nfree--;
        if (reuse->dirty)
            pool->ndirty--;
        reuse->dirty = false;
        reuse->next_free = NULL;
    }
    pthread_mutex_unlock(&pool->lock);
    if (reuse)
        return reuse;
    Fiber *f = pool->slabs ? carve(pool) : map_guarded(pool);
    /* Out of address space or of mappings (vm.max_map_count): the caller
     * gets NULL and reports system_limit. */
    if (!f) {
        pthread_mutex_lock(&pool->lock);
        pool->live--;
        pthread_mutex_unlock(&pool->lock);
        return NULL;
    }
#if defined(VM_TSAN)
    f->tsan = __tsan_create_fiber(0);
#endif
    return f;
}

void vm_fiber_free(FiberPool *pool, Fiber *f)
{
    pthread_mutex_lock(&pool->lock);
    pool->live--;
    bool keep = pool->nfree < pool->max_free || f->in_slab;
    pthread_mutex_unlock(&pool->lock);
    if (!keep) {
        unmap(f);
        return;
    }
    /* Keep the mapping and its pages; vm_fiber_pool_trim() gives them
     * back later.  (A concurrent free may overfill the pool by a few.) */
    pthread_mutex_lock(&pool->lock);
    f->dirty = true;
    f->next_free = pool->free;
    pool->free = f;
    pool->nfree++;
    pool->ndirty++;
    pthread_mutex_unlock(&pool->lock);
}

/* Gives back the pages of [lo, hi); one madvise, one TLB flush. */
static void release_range(char *lo, char *hi)
{
    madvise(lo, (size_t)(hi - lo), MADV_DONTNEED);
}

void vm_fiber_pool_trim(FiberPool *pool)
{
    /* Take the whole free list, madvise outside the lock (a spawn meanwhile
     * maps a fresh stack), then put the stacks back. */
    pthread_mutex_lock(&pool->lock);
    if (pool->ndirty == 0) {
        pthread_mutex_unlock(&pool->lock);
        return;
    }
    Fiber *list = pool->free;
    size_t n = pool->nfree;
    pool->free = NULL;
    pool->nfree = 0;
    pool->ndirty = 0;
    pthread_mutex_unlock(&pool->lock);
    /* Dirty stacks that are neighbours in memory, [guard | stack][guard |
     * stack], go back in one call over the run, guards included: every
     * madvise that drops pages ends with a TLB flush on each CPU that ran
     * the OS process (an interprocessor interrupt), and a burst of ended
     * processes frees slab stacks side by side.  MADV_DONTNEED leaves a
     * guard region's markers in place (they are page-table markers that
     * zapping keeps), and a PROT_NONE guard has no pages to drop.  The
     * free list holds them in the order they were freed, newest first: a
     * run grows at either end. */
    const size_t g = guard_size();
    char *run_lo = NULL, *run_hi = NULL;
    size_t calls = 0;
    Fiber *last = NULL;
    for (Fiber *f = list; f; f = f->next_free) {
        last = f;
        if (!f->dirty)
            continue;
        f->dirty = false;
        if (run_lo && f->stack_lo == run_hi + g) {
            run_hi = f->stack_hi;
            continue;
        }
        if (run_lo && f->stack_hi + g == run_lo) {
            run_lo = f->stack_lo;
            continue;
        }
        if (run_lo) {
            release_range(run_lo, run_hi);
            calls++;
        }
        run_lo = f->stack_lo;
        run_hi = f->stack_hi;
    }
    if (run_lo) {
        release_range(run_lo, run_hi);
        calls++;
    }
    pthread_mutex_lock(&pool->lock);
    if (last) {
        last->next_free = pool->free;
        pool->free = list;
        pool->nfree += n;
    }
    pool->release_calls += calls;
    pthread_mutex_unlock(&pool->lock);
}

void vm_fiber_init(Fiber *f, FiberFn fn, void *arg)
{
    /*
     * The first switch into the fiber restores the saved registers and
     * "returns" into vm_fiber_entry with the stack pointer at top, 16-byte
     * aligned: on x86_64 vm_fiber_entry's call then enters the body with
     * rsp + 8 aligned, on aarch64 its blr with sp aligned, as each ABI
     * requires at every function entry.
     */
    UNPOISON_STACK(f);
    uintptr_t top = (uintptr_t)f->stack_hi & ~(uintptr_t)15;
    uintptr_t *sp = (uintptr_t *)(top - FIBER_SAVED_WORDS * 8);
    memset(sp, 0, FIBER_SAVED_WORDS * 8);
    sp[FIBER_SAVED_FN] = (uintptr_t)fn;
    sp[FIBER_SAVED_ARG] = (uintptr_t)arg;
    sp[FIBER_SAVED_FP] = 0;
    sp[FIBER_SAVED_PC] = (uintptr_t)&vm_fiber_entry;
    f->sp = sp;
}
