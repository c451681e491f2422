/*
 * tests/unit/vm/test_fiber.c - the context switch and fiber stacks:
 * switching back and forth, ABI alignment, stack reuse, unwinding a
 * switched-out fiber to its bottom frame with a frame-pointer walk and
 * with libunwind, and (under AddressSanitizer) no poison left behind
 * where a stack was unmapped.
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <criterion/criterion.h>
#include <libunwind.h>
#include <string.h>
#include <ucontext.h>

#include "vm/fiber.h"

#if defined(VM_ASAN)
#include <sanitizer/asan_interface.h>
#endif

static void *main_sp;
static void *main_tsan;
static Fiber *fib;
static int counter;

/* Switches with the ThreadSanitizer annotations (no-ops elsewhere). */
static void to_fiber(void)
{
    main_tsan = vm_fiber_tsan_current();
    vm_fiber_tsan_switch(fib->tsan);
    vm_fiber_switch(&main_sp, fib->sp);
}

static void to_main(void)
{
    vm_fiber_tsan_switch(main_tsan);
    vm_fiber_switch(&fib->sp, main_sp);
}

static void ping_body(void *arg)
{
    int n = (int)(intptr_t)arg;
    for (int i = 0; i < n; i++) {
        counter++;
        to_main();
    }
    counter = -1;
    to_main();
    cr_assert_fail("a finished fiber was resumed");
}

Test(fiber, switches_back_and_forth)
{
    FiberPool pool;
    vm_fiber_pool_init(&pool, 0, 4);
    fib = vm_fiber_alloc(&pool);
    vm_fiber_init(fib, ping_body, (void *)(intptr_t)1000);
    counter = 0;
    for (int i = 1; i <= 1000; i++) {
        to_fiber();
        cr_assert_eq(counter, i);
    }
    to_fiber();
    cr_assert_eq(counter, -1);
    vm_fiber_free(&pool, fib);
    cr_assert_eq(pool.live, 0);
    cr_assert_eq(pool.nfree, 1);
    vm_fiber_pool_destroy(&pool);
}

static uintptr_t seen_alignment;

static void align_body(void *arg)
{
    (void)arg;
    /* The ABI: rsp + 8 is 16-aligned at function entry, so after the
     * prologue's push of rbp the frame address is 16-aligned. */
    seen_alignment = (uintptr_t)__builtin_frame_address(0) & 15;
    double d = 1.5; /* SSE code would fault on a misaligned stack */
    counter = (int)(d * 2);
    to_main();
}

Test(fiber, body_runs_with_abi_alignment_and_reused_stacks_are_clean)
{
    FiberPool pool;
    vm_fiber_pool_init(&pool, 64 * 1024, 8);
    for (int round = 0; round < 3; round++) {
        fib = vm_fiber_alloc(&pool);
        cr_assert_eq((size_t)(fib->stack_hi - fib->stack_lo), 64 * 1024);
        vm_fiber_init(fib, align_body, NULL);
        seen_alignment = 99;
        to_fiber();
        cr_assert_eq(seen_alignment, 0);
        cr_assert_eq(counter, 3);
        vm_fiber_free(&pool, fib);
    }
    cr_assert_eq(pool.nfree, 1, "one stack was reused three times");
    vm_fiber_pool_destroy(&pool);
}

/* A frame with an array whose address escapes (so ASan puts redzones
 * around it) that switches out of the fiber for good. */
__attribute__((noinline)) static void abandon_body(void *arg)
{
    char buf[64];
    buf[0] = (char)(intptr_t)arg;
    __asm__ volatile("" : : "r"(buf) : "memory");
    to_main();
    cr_assert_fail("an abandoned fiber was resumed");
}

/* Whether ASan's shadow says any byte of fib's stack is poisoned. */
static bool stack_poisoned(char *lo, char *hi)
{
#if defined(VM_ASAN)
    return __asan_region_is_poisoned(lo, (size_t)(hi - lo)) != NULL;
#else
    (void)lo;
    (void)hi;
    return false;
#endif
}

/*
 * A fiber that ends by switching away leaves its last frames' redzones
 * poisoned; a stack unmapped with them would hand the poison to the next
 * mapping placed there, and ASan would report its reads (fuzz/fuzz_ctl.c
 * found one: libelf copying out of a file it had mapped there).  Both
 * ways a stack is unmapped: on its own (a pool that keeps none), and with
 * its slab when the pool goes.  Only under AddressSanitizer.
 */
Test(fiber, an_unmapped_stack_leaves_no_poison_behind)
{
#if !defined(VM_ASAN)
    cr_skip_test("ASan's shadow exists only under VM_ASAN");
#endif
    for (int slabs = 0; slabs < 2; slabs++) {
        FiberPool pool;
        vm_fiber_pool_init(&pool, 64 * 1024, 0);   /* none kept: a free unmaps */
        if (slabs)
            vm_fiber_pool_use_slabs(&pool);
        fib = vm_fiber_alloc(&pool);
        char *lo = fib->stack_lo, *hi = fib->stack_hi;
        vm_fiber_init(fib, abandon_body, (void *)(intptr_t)7);
        to_fiber();
        cr_assert(stack_poisoned(lo, hi), "the abandoned frame left no redzone (slabs %d)", slabs);
        vm_fiber_free(&pool, fib);
        vm_fiber_pool_destroy(&pool);
        cr_assert(!stack_poisoned(lo, hi), "poison left where a stack was unmapped (slabs %d)",
                  slabs);
    }
}

/* A few nested frames that end in a switch out of the fiber. */
__attribute__((noinline)) static void depth3(void)
{
    /* Switch here, not through to_main(): the walk counts these frames. */
    vm_fiber_tsan_switch(main_tsan);
    vm_fiber_switch(&fib->sp, main_sp);
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void depth2(void)
{
    depth3();
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void depth1(void *arg)
{
    (void)arg;
    depth2();
    __asm__ volatile("" ::: "memory");
    to_main();
}

/* True if ip lies in the first 256 bytes of fn (our functions are small). */
static bool in_function(uintptr_t ip, void (*fn)(void))
{
    return ip > (uintptr_t)fn && ip < (uintptr_t)fn + 256;
}

Test(fiber, frame_pointer_walk_of_a_switched_out_fiber_reaches_the_bottom)
{
    FiberPool pool;
    vm_fiber_pool_init(&pool, 0, 4);
    fib = vm_fiber_alloc(&pool);
    vm_fiber_init(fib, depth1, NULL);
    to_fiber();
    /* Saved context: the pc (in depth3) and the frame pointer. */
    uintptr_t *sp = fib->sp;
    uintptr_t ips[16];
    int n = 0;
    ips[n++] = sp[FIBER_SAVED_PC];
    uintptr_t fp = sp[FIBER_SAVED_FP];
    while (fp && n < 16) {
        cr_assert(fp >= (uintptr_t)fib->stack_lo && fp + 16 <= (uintptr_t)fib->stack_hi,
                  "frame pointer %#lx outside the fiber's stack", (unsigned long)fp);
        ips[n++] = ((uintptr_t *)fp)[1];
        fp = ((uintptr_t *)fp)[0];
    }
    /* depth3, depth2, depth1, vm_fiber_entry; then fp = 0 ends the walk. */
    cr_assert_eq(n, 4, "walked %d frames", n);
    cr_assert(in_function(ips[0], (void (*)(void))depth3));
    cr_assert(in_function(ips[1], (void (*)(void))depth2));
    cr_assert(in_function(ips[2], (void (*)(void))depth1));
    cr_assert(in_function(ips[3], vm_fiber_entry));
    to_fiber();
    vm_fiber_free(&pool, fib);
    vm_fiber_pool_destroy(&pool);
}

Test(fiber, libunwind_unwinds_a_switched_out_fiber_to_its_bottom_frame)
{
    FiberPool pool;
    vm_fiber_pool_init(&pool, 0, 4);
    fib = vm_fiber_alloc(&pool);
    vm_fiber_init(fib, depth1, NULL);
    to_fiber();
    /* Build a register context from the saved words (see
     * fiber_<arch>.S): the stack pointer just past them, the pc the
     * resume address; only the CFI tells libunwind where the rest is. */
    uintptr_t *sp = fib->sp;
    unw_context_t uc;
    memset(&uc, 0, sizeof uc);
#if defined(__x86_64__)
    uc.uc_mcontext.gregs[REG_R15] = (greg_t)sp[0];
    uc.uc_mcontext.gregs[REG_R14] = (greg_t)sp[1];
    uc.uc_mcontext.gregs[REG_R13] = (greg_t)sp[2];
    uc.uc_mcontext.gregs[REG_R12] = (greg_t)sp[3];
    uc.uc_mcontext.gregs[REG_RBX] = (greg_t)sp[4];
    uc.uc_mcontext.gregs[REG_RBP] = (greg_t)sp[5];
    uc.uc_mcontext.gregs[REG_RIP] = (greg_t)sp[6];
    uc.uc_mcontext.gregs[REG_RSP] = (greg_t)(uintptr_t)(sp + FIBER_SAVED_WORDS);
#else
    for (int r = 19; r <= 28; r++)
        uc.uc_mcontext.regs[r] = sp[2 + r - 19];
    uc.uc_mcontext.regs[29] = sp[0];
    uc.uc_mcontext.regs[30] = sp[1];
    uc.uc_mcontext.pc = sp[1];
    uc.uc_mcontext.sp = (uintptr_t)(sp + FIBER_SAVED_WORDS);
#endif
    unw_cursor_t cur;
    cr_assert_eq(unw_init_local(&cur, &uc), 0);
    char names[8][64];
    int n = 0;
    do {
        unw_word_t off;
        if (unw_get_proc_name(&cur, names[n], sizeof names[n], &off) != 0)
            strcpy(names[n], "?");
        n++;
    } while (n < 8 && unw_step(&cur) > 0);
    cr_assert_eq(n, 4, "libunwind saw %d frames", n);
    cr_assert_str_eq(names[0], "depth3");
    cr_assert_str_eq(names[1], "depth2");
    cr_assert_str_eq(names[2], "depth1");
    cr_assert_str_eq(names[3], "vm_fiber_entry");
    to_fiber();
    vm_fiber_free(&pool, fib);
    vm_fiber_pool_destroy(&pool);
}
