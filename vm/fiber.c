/*
 * vm/fiber.c - fiber stacks (mmap + guard page, pooled) and the initial
 * frame of a new fiber.
 */
#include "vm/fiber.h"

#include <stdbool.h>
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
    pthread_mutex_init(&pool->lock, NULL);
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
    pthread_mutex_destroy(&pool->lock);
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
    /* [guard page][stack ...]; the Fiber itself is a small malloc'd
     * struct, so an idle fiber's resident memory is the stack pages it
     * touched and nothing else. */
    size_t ps = page_size();
    size_t len = ps + pool->stack_size;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    /* Out of address space or of mappings (vm.max_map_count): the caller
     * gets NULL and reports system_limit. */
    if (base == MAP_FAILED || mprotect(base, ps, PROT_NONE) != 0) {
        if (base != MAP_FAILED)
            munmap(base, len);
        pthread_mutex_lock(&pool->lock);
        pool->live--;
        pthread_mutex_unlock(&pool->lock);
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
    pthread_mutex_lock(&pool->lock);
    pool->live--;
    bool keep = pool->nfree < pool->max_free;
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
    Fiber *last = NULL;
    for (Fiber *f = list; f; f = f->next_free) {
        if (f->dirty) {
            madvise(f->stack_lo, (size_t)(f->stack_hi - f->stack_lo), MADV_DONTNEED);
            f->dirty = false;
        }
        last = f;
    }
    pthread_mutex_lock(&pool->lock);
    if (last) {
        last->next_free = pool->free;
        pool->free = list;
        pool->nfree += n;
    }
    pthread_mutex_unlock(&pool->lock);
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
