/*
 * tests/unit/vm/test_lend_alone.c - what an embedder native's call does
 * to its scheduler's `lend` word (vm/sched.c, "Lending the local queue"),
 * seen from inside the native: on a VM of one scheduler it lends nothing
 * (nobody could take the queue; the call pays no atomic operation), with
 * or without processes queued behind it, and a yield inside the native
 * leaves the word owned; on two it lends, EMPTY without a backlog.
 */
#include <criterion/criterion.h>

#include "tests/unit/helpers.h"
#include "vm/interp.h"   /* vm_yield_point, for t:yield_state/0 */
#include "vm/sched.h"

static tvm_config one_sched = { .size = sizeof(tvm_config), .schedulers = 1 };
TVM_FIXTURE(lend_alone, &one_sched);

/* The state of this scheduler's `lend` word as an atom (the owner's own
 * thread reads it: only its own writes or a thief's can be there). */
static tvm_status lend_atom(tvm_env *e, tvm_term *result)
{
    static const char *const names[] = { "owned", "work", "empty", "taking" };
    Scheduler *s = vm_current_scheduler();
    if (!s)
        return tvm_make_atom(e, "no_scheduler", result);
    uintptr_t st = vm_atomic_load_relaxed(&s->lend);
    return tvm_make_atom(e, st < 4 ? names[st] : "bad_state", result);
}

/* t:state/0: the `lend` word while this native runs. */
static tvm_status state(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc, (void)argv, (void)data;
    return lend_atom(e, result);
}

/* t:yield_state/0: yields inside the native (to the process queued
 * behind it, if any), then answers the `lend` word as it is after. */
static tvm_status yield_state(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result,
                              void *data)
{
    (void)argc, (void)argv, (void)data;
    if (vm_yield_point(e->p))
        return tvm_make_atom(e, "killed", result);
    return lend_atom(e, result);
}

/* alone/0 calls the native with nothing queued; behind/0 first spawns
 * idle/0 (erlang:spawn/3 from a process: the local queue, behind it);
 * yield_behind/0 does the same with t:yield_state/0. */
static const char *const l_src =
    "module l\n"
    "export alone/0, behind/0, yield_behind/0, idle/0\n"
    "function alone/0 regs 1\n"
    "    callx r0, r0, t:state/0\n"
    "    ret r0\n"
    "end\n"
    "function behind/0 regs 4\n"
    "    loadk r1, l\n"
    "    loadk r2, idle\n"
    "    loadk r3, []\n"
    "    callx r1, r1, erlang:spawn/3\n"
    "    callx r0, r0, t:state/0\n"
    "    ret r0\n"
    "end\n"
    "function yield_behind/0 regs 4\n"
    "    loadk r1, l\n"
    "    loadk r2, idle\n"
    "    loadk r3, []\n"
    "    callx r1, r1, erlang:spawn/3\n"
    "    callx r0, r0, t:yield_state/0\n"
    "    ret r0\n"
    "end\n"
    "function idle/0 regs 1\n"
    "    loadk r0, ok\n"
    "    ret r0\n"
    "end\n";

static void load_l(tvm_vm *v)
{
    tvm_error err;
    cr_assert_eq(tvm_register_native(v, "t", "state", 0, state, NULL, &err), TVM_OK, "%s",
                 err.message);
    cr_assert_eq(tvm_register_native(v, "t", "yield_state", 0, yield_state, NULL, &err), TVM_OK,
                 "%s", err.message);
    load_ok(v, "l", l_src);
}

/* Runs l:fun/0 as a process of e's VM and checks its answer. */
static void expect_state(tvm_env *e, const char *fun, const char *want)
{
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(e, "l", fun, 0, NULL, &pid), TVM_OK);
    tvm_term r;
    cr_assert_eq(tvm_join(e, pid, &r), TVM_OK);
    char got[64];
    tvm_format_term(e, r, got, sizeof got);
    cr_assert_str_eq(got, want, "l:%s/0 saw the lend word %s, not %s", fun, got, want);
}

Test(lend_alone, one_scheduler_lends_nothing_with_an_empty_queue)
{
    load_l(vm);
    expect_state(env, "alone", "owned");
}

Test(lend_alone, one_scheduler_lends_nothing_with_a_process_queued)
{
    load_l(vm);
    expect_state(env, "behind", "owned");
}

Test(lend_alone, one_scheduler_yield_inside_the_native_leaves_the_queue_owned)
{
    load_l(vm);
    expect_state(env, "yield_behind", "owned");
}
