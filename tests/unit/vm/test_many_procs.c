/*
 * tests/unit/vm/test_many_procs.c - slab fiber stacks (tvm_config
 * fiber_slabs): a pool carves stacks, each above its guard region, out of
 * one mapping and keeps freed ones, whose pages a trim gives back with
 * one system call for neighbours, guards kept; and 300,000 processes
 * (100,000 outside the release build: n_procs) alive at once, each waiting
 * in receive, in a few mappings (the guards are guard regions, not
 * mappings: Linux 6.13), where one mapping per process against
 * vm.max_map_count's 65530 would stop far short.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "vm/config.h"
#include "vm/fiber.h"

/* Lines of /proc/self/maps: the OS process's mappings. */
static long mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert(f);
    long n = 0;
    for (int c; (c = fgetc(f)) != EOF;)
        n += c == '\n';
    fclose(f);
    return n;
}

/* A slab pool of 64 KiB stacks that keeps no free stack beyond the slabs'. */
static void slab_pool(FiberPool *pool)
{
    vm_fiber_pool_init(pool, 64 * 1024, 0);
    vm_fiber_pool_use_slabs(pool);
}

Test(fiber_slabs, stacks_are_carved_side_by_side_and_kept_when_freed)
{
    FiberPool pool;
    slab_pool(&pool);
    Fiber *f[3];
    for (int i = 0; i < 3; i++)
        f[i] = vm_fiber_alloc(&pool);
    /* One slab, consecutive stacks, each above its guard region (which
     * faults: tests/unit/vm/test_overflow.c). */
    cr_assert_eq(pool.nslabs, 1, "%zu slabs", pool.nslabs);
    cr_assert_eq(f[1]->stack_lo, f[0]->stack_hi + VM_FIBER_GUARD_BYTES, "not adjacent");
    cr_assert_eq(f[2]->stack_lo, f[1]->stack_hi + VM_FIBER_GUARD_BYTES, "not adjacent");
    cr_assert_eq(f[0]->stack_hi - f[0]->stack_lo, 64 * 1024, "stack size");
    /* Each written end to end. */
    for (int i = 0; i < 3; i++)
        memset(f[i]->stack_lo, 0xab, 64 * 1024);
    /* max_free is 0, yet a freed slab stack is kept (never unmapped alone). */
    vm_fiber_free(&pool, f[1]);
    cr_assert_eq(pool.nfree, 1, "a freed slab stack was not kept");
    cr_assert_eq(vm_fiber_alloc(&pool), f[1], "the kept stack was not reused");
    vm_fiber_pool_trim(&pool);
    for (int i = 0; i < 3; i++)
        vm_fiber_free(&pool, f[i]);
    /* A second slab after VM_FIBER_SLAB_STACKS stacks. */
    Fiber *more[VM_FIBER_SLAB_STACKS + 1];
    for (int i = 0; i <= VM_FIBER_SLAB_STACKS; i++)
        more[i] = vm_fiber_alloc(&pool);
    cr_assert_eq(pool.nslabs, 2, "%zu slabs", pool.nslabs);
    for (int i = 0; i <= VM_FIBER_SLAB_STACKS; i++)
        vm_fiber_free(&pool, more[i]);
    vm_fiber_pool_destroy(&pool);
}

/* Resident pages of [lo, hi) (mincore). */
static size_t resident(const char *lo, const char *hi)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), n = (size_t)(hi - lo) / ps, r = 0;
    unsigned char vec[256];
    cr_assert_leq(n, sizeof vec);
    cr_assert_eq(mincore((void *)lo, (size_t)(hi - lo), vec), 0, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < n; i++)
        r += vec[i] & 1;
    return r;
}

/* Whether the byte below f's stack (its guard) faults: the kernel's copy
 * out of it fails with EFAULT instead of a signal. */
static bool guard_faults(const Fiber *f)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    bool faults = write(fds[1], f->stack_lo - 1, 1) < 0 && errno == EFAULT;
    close(fds[0]);
    close(fds[1]);
    return faults;
}

Test(fiber_slabs, freed_neighbours_go_back_in_one_call_and_keep_their_guards)
{
    FiberPool pool;
    slab_pool(&pool);
    Fiber *f[4];
    for (int i = 0; i < 4; i++) {
        f[i] = vm_fiber_alloc(&pool);
        memset(f[i]->stack_lo, 0xab, 64 * 1024);
    }
    for (int round = 0; round < 2; round++) {
        /* Freed in address order, then in the reverse: the free list
         * holds the three lowest newest first, so the run grows down,
         * then up. */
        for (int k = 0; k < 3; k++)
            vm_fiber_free(&pool, f[round == 0 ? k : 2 - k]);
        cr_assert_eq(pool.ndirty, 3);
        size_t calls = pool.release_calls;
        vm_fiber_pool_trim(&pool);
        cr_assert_eq(pool.release_calls - calls, 1, "round %d: %zu madvise calls for 3 neighbours",
                     round, pool.release_calls - calls);
        cr_assert_eq(pool.ndirty, 0);
        for (int i = 0; i < 3; i++)
            cr_assert_eq(resident(f[i]->stack_lo, f[i]->stack_hi), 0,
                         "round %d: stack %d kept pages", round, i);
        /* The live neighbour above the run keeps its pages and contents. */
        cr_assert_eq(resident(f[3]->stack_lo, f[3]->stack_hi),
                     64 * 1024 / (size_t)sysconf(_SC_PAGESIZE));
        cr_assert_eq((unsigned char)f[3]->stack_lo[0], 0xab);
        cr_assert_eq((unsigned char)f[3]->stack_hi[-1], 0xab);
        for (int i = 0; i < 4; i++)
            cr_assert(guard_faults(f[i]), "round %d: the guard below stack %d is gone", round, i);
        /* Nothing dirty: no call. */
        vm_fiber_pool_trim(&pool);
        cr_assert_eq(pool.release_calls - calls, 1);
        /* Taken again (newest first) and written end to end. */
        for (int k = 0; k < 3; k++) {
            Fiber *g = vm_fiber_alloc(&pool);
            memset(g->stack_lo, 0xab, 64 * 1024);
        }
        cr_assert_eq(pool.nfree, 0);
    }
    for (int i = 0; i < 4; i++)
        vm_fiber_free(&pool, f[i]);
    vm_fiber_pool_destroy(&pool);
}

static const char *const mp_src =
    "module mp\n"
    "export waiter/0\n"
    /* waiter(): returns the first message it receives */
    "function waiter/0 regs 2\n"
    "top:\n"
    "    recv r0, none\n    accept\n    ret r0\n"
    "none:\n"
    "    loadk r1, infinity\n    wait r1, never\n    jump top\n"
    "never:\n    ret r1\n"
    "end\n";

/* 300,000 processes in the optimised build (release), the one users
 * run, and 100,000 in the debug, AddressSanitizer and clang builds, where
 * the 300,000 took 30, 115-134 and 29 s of a CI suite: 100,000 are still
 * past what a mapping or two per stack allows against vm.max_map_count's
 * 65,530 (test_full_scale, tests/unit/helpers.h). */
static long n_procs(void)
{
    return test_full_scale() ? 300000 : 100000;
}

Test(fiber_slabs, processes_past_the_mapping_limit_alive_at_once, .timeout = 600)
{
    /* Every fiber is a ThreadSanitizer fiber, which it counts as a thread. */
    SKIP_UNDER_TSAN("it tracks at most 8,128 threads and fibers");
    SKIP_UNDER_EMULATION("qemu-user 7.2 has no guard regions (MADV_GUARD_INSTALL); the "
                         "mprotect guards instead need a mapping per stack, past "
                         "vm.max_map_count");
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2, .fiber_slabs = true, .fiber_stack_bytes = 64 * 1024 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "mp", mp_src);
    long maps0 = mappings();
    const long n = n_procs();
    tvm_pid *pids = malloc((size_t)n * sizeof *pids);
    for (long i = 0; i < n; i++)
        cr_assert_eq(tvm_spawn(env, "mp", "waiter", 0, NULL, &pids[i]), TVM_OK,
                     "spawn %ld failed", i);
    /* All alive (none has had a message): each takes the next message. */
    long grown = mappings() - maps0;
    cr_expect_lt(grown, 1000, "%ld mappings for %ld stacks", grown, n);
    /* Every one gets its message while all are alive (a send to a
     * process that is gone fails), then each is joined, newest first
     * (tvm_join finds the newest joinable process first).  Sending all
     * first keeps the schedulers busy instead of waking one per join. */
    for (long i = n; i-- > 0;) {
        size_t mark = tvm_handles_mark(env);
        tvm_term msg;
        cr_assert_eq(tvm_make_int(env, i, &msg), TVM_OK);
        cr_assert_eq(tvm_send(env, pids[i], msg), TVM_OK, "process %ld is gone", i);
        tvm_handles_release(env, mark);
    }
    for (long i = n; i-- > 0;) {
        size_t mark = tvm_handles_mark(env);
        tvm_term r;
        cr_assert_eq(tvm_join(env, pids[i], &r), TVM_OK);
        int64_t v = -1;
        cr_assert_eq(tvm_get_int(env, r, &v), TVM_OK);
        cr_assert_eq(v, i);
        tvm_handles_release(env, mark);
    }
    free(pids);
    tvm_env_free(env);
    tvm_destroy(vm);
}
