/*
 * vm/fiber.c - fiber stacks (mmap + guard page, pooled) and the initial
 * frame of a new fiber.
 */
#include "vm/fiber.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vm/common.h"

/*
 * Under AddressSanitizer: a fiber that ends by switching away leaves the
 * redzones of its last frames poisoned on its stack; a reused stack must
 * be unpoisoned before new frames are built on it.
 */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define UNPOISON_STACK(f) \
    ASAN_UNPOISON_MEMORY_REGION((f)->stack_lo, (size_t)((f)->stack_hi - (f)->stack_lo))
#else
#define UNPOISON_STACK(f) ((void)(f))
#endif

static size_t page_size(void)
{
    static size_t ps;
    if (!ps)
        ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

void vm_fiber_pool_init(FiberPool *pool, size_t stack_size, size_t max_free)
{
    size_t ps = page_size();
    if (!stack_size)
        stack_size = VM_FIBER_STACK_SIZE;
    pool->stack_size = (stack_size + ps - 1) / ps * ps;
    pool->max_free = max_free;
    pool->free = NULL;
    pool->nfree = 0;
    pool->live = 0;
}

static void unmap(Fiber *f)
{
#if defined(__SANITIZE_THREAD__)
    __tsan_destroy_fiber(f->tsan);
#endif
    size_t ps = page_size();
    if (munmap(f->stack_lo - ps, (size_t)(f->stack_hi - f->stack_lo) + ps) != 0)
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
}

Fiber *vm_fiber_alloc(FiberPool *pool)
{
    pool->live++;
    if (pool->free) {
        Fiber *f = pool->free;
        pool->free = f->next_free;
        pool->nfree--;
        f->next_free = NULL;
        return f;
    }
    /* [guard page][stack ...]; the Fiber itself is a small malloc'd
     * struct, so an idle fiber's resident memory is the stack pages it
     * touched and nothing else. */
    size_t ps = page_size();
    size_t len = ps + pool->stack_size;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    /* Out of address space or of mappings (vm.max_map_count): the caller
     * gets NULL and reports system_limit. */
    if (base == MAP_FAILED) {
        pool->live--;
        return NULL;
    }
    if (mprotect(base, ps, PROT_NONE) != 0) {
        munmap(base, len);
        pool->live--;
        return NULL;
    }
    Fiber *f = vm_calloc(1, sizeof(Fiber));
    f->stack_lo = base + ps;
    f->stack_hi = base + len;
#if defined(__SANITIZE_THREAD__)
    f->tsan = __tsan_create_fiber(0);
#endif
    return f;
}

void vm_fiber_free(FiberPool *pool, Fiber *f)
{
    pool->live--;
    if (pool->nfree >= pool->max_free) {
        unmap(f);
        return;
    }
    /* Keep the mapping but give its touched pages back to the OS. */
    madvise(f->stack_lo, (size_t)(f->stack_hi - f->stack_lo), MADV_DONTNEED);
    f->next_free = pool->free;
    pool->free = f;
    pool->nfree++;
}

void vm_fiber_init(Fiber *f, FiberFn fn, void *arg)
{
    /*
     * The first switch into the fiber pops the six saved registers and
     * "returns" into vm_fiber_entry with rsp = top, 16-byte aligned, so
     * that vm_fiber_entry's call enters the body with rsp + 8 aligned, as
     * the ABI requires at every function entry.
     */
    UNPOISON_STACK(f);
    uintptr_t top = (uintptr_t)f->stack_hi & ~(uintptr_t)15;
    uintptr_t *sp = (uintptr_t *)(top - FIBER_SAVED_WORDS * 8);
    memset(sp, 0, FIBER_SAVED_WORDS * 8);
    sp[3] = (uintptr_t)fn;   /* r12 */
    sp[2] = (uintptr_t)arg;  /* r13 */
    sp[FIBER_SAVED_RBP] = 0;
    sp[FIBER_SAVED_RIP] = (uintptr_t)&vm_fiber_entry;
    f->sp = sp;
}
