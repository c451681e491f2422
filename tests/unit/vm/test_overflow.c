/*
 * tests/unit/vm/test_overflow.c - a native stack overflow ends the
 * process that overflowed and nothing else (vm/overflow.c).  Slab stacks
 * lie side by side, so an overflow runs toward the top of the neighbour
 * below, where its oldest frames are: every stack has a guard region
 * (vm/fiber.c), the fault is caught on the scheduler's alternate signal
 * stack, and the process exits with error:{system_limit, native_stack}.
 * Neighbours parked in the middle of a native call (their frames, and a
 * pattern the native keeps on its stack, right above the guard) resume
 * and return their right results; so does the VM, for later processes.
 */
#include <criterion/criterion.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "vm/config.h"
#include "vm/fiber.h"

static volatile int stop_recursion;

/* Recurses until the stack runs out (stop_recursion is never set): 512
 * bytes a level, kept live so no level can be folded away. */
static __attribute__((noinline)) int recurse(volatile char *prev, int depth)
{
    volatile char buf[512];
    buf[0] = (char)depth;
    buf[511] = prev ? prev[0] : 0;
    if (stop_recursion)
        return buf[0];
    return recurse(buf, depth + 1) + buf[511];
}

/* ovn:deep(_): never returns (the process dies in it). */
static tvm_status nat_deep(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc;
    (void)argv;
    (void)data;
    return tvm_make_int(env, recurse(NULL, 0), result);
}

#define PATTERN 1024

/* ovn:hold(N): keeps 8 KiB of a pattern of N on its stack, calls
 * ov:park() (a nested activation that waits for a message M), then
 * checks the pattern: N + M if it is intact, -1 if anything wrote on it. */
static tvm_status nat_hold(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc;
    (void)data;
    int64_t n, m;
    if (tvm_get_int(env, argv[0], &n) != TVM_OK)
        return tvm_raise_badarg(env);
    volatile uint64_t pattern[PATTERN];
    for (int i = 0; i < PATTERN; i++)
        pattern[i] = (uint64_t)n * 1000003u + (uint64_t)i;
    tvm_term r;
    tvm_status st = tvm_call(env, "ov", "park", 0, NULL, &r);
    if (st != TVM_OK)
        return st;
    if (tvm_get_int(env, r, &m) != TVM_OK)
        return tvm_raise_badarg(env);
    int bad = 0;
    for (int i = 0; i < PATTERN; i++)
        bad += pattern[i] != (uint64_t)n * 1000003u + (uint64_t)i;
    return tvm_make_int(env, bad ? -1 : n + m, result);
}

static const char *const ov_src =
    "module ov\n"
    "export victim/1, attacker/0, park/0, fine/1\n"
    "function victim/1 regs 1\n"
    "    callx r0, r0, ovn:hold/1\n"
    "    ret r0\n"
    "end\n"
    "function attacker/0 regs 1\n"
    "    loadi r0, 0\n"
    "    callx r0, r0, ovn:deep/1\n"
    "    ret r0\n"
    "end\n"
    /* park(): the first message */
    "function park/0 regs 2\n"
    "top:\n"
    "    recv r0, none\n"
    "    accept\n"
    "    ret r0\n"
    "none:\n"
    "    loadk r1, infinity\n"
    "    wait r1, next\n"
    "next:\n"
    "    jump top\n"
    "end\n"
    "function fine/1 regs 2\n"
    "    addi r0, r0, 1\n"
    "    ret r0\n"
    "end\n";

static tvm_vm *setup_vm(bool slabs)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .fiber_slabs = slabs, .fiber_stack_bytes = 128 * 1024 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "ovn", "deep", 1, nat_deep, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_register_native(vm, "ovn", "hold", 1, nat_hold, NULL, &err), TVM_OK);
    load_ok(vm, "ov", ov_src);
    return vm;
}

static tvm_pid spawn_int(tvm_env *env, const char *fun, int argc, int64_t v)
{
    tvm_term a;
    cr_assert_eq(tvm_make_int(env, v, &a), TVM_OK);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "ov", fun, argc, &a, &pid), TVM_OK);
    return pid;
}

/* Waits until `n` processes are waiting (parked in park/0). */
static void await_waiting(tvm_vm *vm, size_t n)
{
    for (;;) {
        tvm_process_info info[8];
        size_t k = tvm_processes(vm, info, 8), w = 0;
        for (size_t i = 0; i < k && i < 8; i++)
            w += strcmp(info[i].state, "waiting") == 0;
        if (w == n)
            return;
        usleep(1000);
    }
}

static void send_int(tvm_env *env, tvm_pid pid, int64_t v)
{
    tvm_term m;
    cr_assert_eq(tvm_make_int(env, v, &m), TVM_OK);
    cr_assert_eq(tvm_send(env, pid, m), TVM_OK);
}

static void overflow_between_parked_neighbours(bool slabs)
{
    tvm_vm *vm = setup_vm(slabs);
    tvm_env *env = tvm_env_new(vm);
    /* Two victims first: in a slab, the attacker's stack comes right
     * above the second one's (and a third victim above the attacker). */
    tvm_pid v1 = spawn_int(env, "victim", 1, 10);
    tvm_pid v2 = spawn_int(env, "victim", 1, 20);
    await_waiting(vm, 2);
    tvm_pid a = spawn_int(env, "attacker", 0, 0);
    tvm_term r, cls, reason, trace;
    cr_assert_eq(tvm_join(env, a, &r), TVM_EXCEPTION);
    cr_assert_eq(tvm_get_exception(env, &cls, &reason), TVM_OK);
    char out[300];
    tvm_format_term(env, reason, out, sizeof out);
    cr_assert(tvm_is_atom(env, cls, "error"));
    cr_assert_str_eq(out, "{system_limit,native_stack}");
    cr_assert_eq(tvm_get_stacktrace(env, &trace), TVM_OK);
    tvm_format_term(env, trace, out, sizeof out);
    cr_assert_str_eq(out, "[{ovn,deep,1,[]},{ov,attacker,0,[{file,<<\"ov\">>},{line,9}]}]");
    tvm_pid v3 = spawn_int(env, "victim", 1, 30);
    await_waiting(vm, 3);
    /* Every neighbour resumes, finds its stack as it left it, returns. */
    send_int(env, v1, 1);
    send_int(env, v2, 2);
    send_int(env, v3, 3);
    int64_t got;
    cr_assert_eq(tvm_join(env, v1, &r), TVM_OK);
    cr_assert_eq(tvm_get_int(env, r, &got), TVM_OK);
    cr_assert_eq(got, 11);
    cr_assert_eq(tvm_join(env, v2, &r), TVM_OK);
    cr_assert_eq(tvm_get_int(env, r, &got), TVM_OK);
    cr_assert_eq(got, 22);
    cr_assert_eq(tvm_join(env, v3, &r), TVM_OK);
    cr_assert_eq(tvm_get_int(env, r, &got), TVM_OK);
    cr_assert_eq(got, 33);
    /* The scheduler goes on: a second overflow, then an ordinary process
     * (the attacker's stack is reused). */
    a = spawn_int(env, "attacker", 0, 0);
    cr_assert_eq(tvm_join(env, a, &r), TVM_EXCEPTION);
    tvm_pid f = spawn_int(env, "fine", 1, 41);
    cr_assert_eq(tvm_join(env, f, &r), TVM_OK);
    cr_assert_eq(tvm_get_int(env, r, &got), TVM_OK);
    cr_assert_eq(got, 42);
    tvm_env_free(env);
    tvm_destroy(vm);
}

Test(overflow, in_a_slab_ends_only_that_process, .timeout = 60)
{
    overflow_between_parked_neighbours(true);
}

Test(overflow, on_a_guarded_stack_ends_only_that_process, .timeout = 60)
{
    overflow_between_parked_neighbours(false);
}

static sigjmp_buf faulted;

static void on_fault(int sig)
{
    (void)sig;
    siglongjmp(faulted, 1);
}

/* Whether writing at addr faults (a handler of our own catches it). */
static bool faults(volatile char *addr)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sigaction(SIGSEGV, &sa, &old);
    bool hit = true;
    if (!sigsetjmp(faulted, 1)) {
        *addr = 1;
        hit = false;
    }
    sigaction(SIGSEGV, &old, NULL);
    return hit;
}

/* The guard itself: every byte below a slab stack, down to the stack
 * under it, faults; the stacks do not. */
Test(overflow, every_slab_stack_has_a_guard_below_it)
{
    FiberPool pool;
    vm_fiber_pool_init(&pool, 64 * 1024, 0);
    vm_fiber_pool_use_slabs(&pool);
    Fiber *f0 = vm_fiber_alloc(&pool), *f1 = vm_fiber_alloc(&pool);
    cr_assert_eq(f1->stack_lo, f0->stack_hi + VM_FIBER_GUARD_BYTES, "the guard between them");
    cr_assert(vm_fiber_in_guard(f1, (uintptr_t)f1->stack_lo - 1));
    cr_assert(vm_fiber_in_guard(f1, (uintptr_t)f0->stack_hi));
    cr_assert(!vm_fiber_in_guard(f1, (uintptr_t)f1->stack_lo));
    cr_assert(!vm_fiber_in_guard(f1, (uintptr_t)f0->stack_hi - 1));
    cr_assert(faults(f1->stack_lo - 1));
    cr_assert(faults(f0->stack_hi));
    cr_assert(!faults(f1->stack_lo));
    cr_assert(!faults(f0->stack_hi - 1));
    vm_fiber_free(&pool, f0);
    vm_fiber_free(&pool, f1);
    vm_fiber_pool_destroy(&pool);
}
