/*
 * tests/unit/vm/test_steal.c - a process queued behind a long embedder
 * native on its scheduler's local queue runs on another scheduler while
 * the native runs (vm/sched.c, "Lending the local queue").
 *
 * Each case makes the blocking native wait for a flag that only the
 * queued process sets: if nothing else can run that process, the native
 * gives up after BLOCK_DEADLINE_S and returns `timeout`, which fails the
 * case with a message; it never hangs the suite.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "vm/atomics.h"

/* How long t:block/0 waits for the flag before it answers `timeout`: far
 * beyond any scheduling delay on a loaded machine. */
#define BLOCK_DEADLINE_S 20

static tvm_config two_scheds = { .size = sizeof(tvm_config), .schedulers = 2 };
TVM_FIXTURE(steal, &two_scheds);

/* Set by t:release/0 (release store), waited for by t:block/0 (acquire
 * load); reset by each case before it spawns anything. */
static VmAtomic released;

/* t:block/0: holds its scheduler thread until t:release/0 has run (or the
 * deadline passes): `released` or `timeout`. */
static tvm_status block(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)argv;
    (void)data;
    for (int ms = 0; !vm_atomic_load_acquire(&released) && ms < BLOCK_DEADLINE_S * 1000; ms++)
        usleep(1000);
    return tvm_make_atom(e, vm_atomic_load_acquire(&released) ? "released" : "timeout", result);
}

/* t:release/0: lets t:block/0 return; answers ok. */
static tvm_status release(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)argv;
    (void)data;
    vm_atomic_store_release(&released, 1);
    return tvm_make_atom(e, "ok", result);
}

/* t:spawn_then_block/0: spawns q:release/0 from inside the native (the
 * spawn is made while the native runs), then blocks as t:block/0 does. */
static tvm_status spawn_then_block(tvm_env *e, int argc, const tvm_term *argv,
                                   tvm_term *result, void *data)
{
    tvm_pid pid;
    if (tvm_spawn(e, "q", "release", 0, NULL, &pid) != TVM_OK)
        return tvm_make_atom(e, "spawn_failed", result);
    return block(e, argc, argv, result, data);
}

/* t:recv_then_spawn/0: waits in tvm_receive for a message (the process
 * switches out inside the native), then does what t:spawn_then_block/0
 * does. */
static tvm_status recv_then_spawn(tvm_env *e, int argc, const tvm_term *argv,
                                  tvm_term *result, void *data)
{
    tvm_term msg;
    if (tvm_receive(e, BLOCK_DEADLINE_S * 1000, &msg) != TVM_OK)
        return tvm_make_atom(e, "no_message", result);
    return spawn_then_block(e, argc, argv, result, data);
}



/* t:until_waiting/1: returns once process Pid waits (in a receive), or
 * `timeout` after the deadline. */
static tvm_status until_waiting(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result,
                                void *data)
{
    (void)argc;
    (void)data;
    tvm_pid pid;
    if (tvm_get_pid(e, argv[0], &pid) != TVM_OK)
        return TVM_ERR_BADARG;
    char st[32];
    for (int ms = 0; ms < BLOCK_DEADLINE_S * 1000; ms++) {
        if (!strcmp(proc_state(vm, pid, st, sizeof st), "waiting"))
            return tvm_make_atom(e, "ok", result);
        usleep(1000);
    }
    return tvm_make_atom(e, "timeout", result);
}

/* main/0 spawns release/0 with erlang:spawn/3: a spawn made by a process
 * goes to the local queue of the scheduler running it, behind the
 * spawner, which then enters t:block/0 without switching out. */
static const char *const q_src =
    "module q\n"
    "export main/0, release/0, main_native_spawn/0, main_resumed/0, waker/1\n"
    "function main/0 regs 4\n"
    "    loadk r1, q\n"
    "    loadk r2, release\n"
    "    loadk r3, []\n"
    "    callx r1, r1, erlang:spawn/3\n"
    "    callx r0, r0, t:block/0\n"
    "    ret r0\n"
    "end\n"
    "function release/0 regs 1\n"
    "    callx r0, r0, t:release/0\n"
    "    ret r0\n"
    "end\n"
    "function main_native_spawn/0 regs 1\n"
    "    callx r0, r0, t:spawn_then_block/0\n"
    "    ret r0\n"
    "end\n"
    /* main_resumed/0: spawns waker(Self), then waits inside
     * t:recv_then_spawn/0 for its message, spawns release/0 and blocks. */
    "function main_resumed/0 regs 4\n"
    "    self r3\n"
    "    loadk r2, []\n"
    "    cons r3, r3, r2\n"
    "    loadk r1, q\n"
    "    loadk r2, waker\n"
    "    callx r1, r1, erlang:spawn/3\n"
    "    callx r0, r0, t:recv_then_spawn/0\n"
    "    ret r0\n"
    "end\n"
    /* waker(Main): once Main waits inside the native, sends it go. */
    "function waker/1 regs 3\n"
    "    move r1, r0\n"
    "    callx r1, r1, t:until_waiting/1\n"
    "    move r1, r0\n"
    "    loadk r2, go\n"
    "    callx r1, r1, erlang:send/2\n"
    "    ret r1\n"
    "end\n";

static void load_q(void)
{
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "t", "block", 0, block, NULL, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_register_native(vm, "t", "release", 0, release, NULL, &err), TVM_OK, "%s",
                 err.message);
    cr_assert_eq(tvm_register_native(vm, "t", "spawn_then_block", 0, spawn_then_block, NULL, &err),
                 TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_register_native(vm, "t", "recv_then_spawn", 0, recv_then_spawn, NULL, &err),
                 TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_register_native(vm, "t", "until_waiting", 1, until_waiting, NULL, &err),
                 TVM_OK, "%s", err.message);
    load_ok(vm, "q", q_src);
    vm_atomic_store_release(&released, 0);
}

/* Spawns q:fun/0 from this thread and joins it: the native's answer. */
static void expect_released(const char *fun)
{
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "q", fun, 0, NULL, &pid), TVM_OK);
    tvm_term r;
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    cr_assert(tvm_is_atom(env, r, "released"),
              "the process queued behind t:block/0 did not run in %d s: nobody took it "
              "from the blocked scheduler's local queue",
              BLOCK_DEADLINE_S);
    cr_assert_eq(vm_atomic_load_acquire(&released), 1);
}

/* The process spawned by VM code before the native, on the local queue:
 * the other scheduler takes it from there. */
Test(steal, process_queued_locally_behind_a_blocking_native_runs_elsewhere)
{
    load_q();
    expect_released("main");
}

/* The process spawned by the native itself (tvm_spawn on the scheduler
 * thread while the native runs): it must not be stuck either. */
Test(steal, process_spawned_by_a_blocking_native_runs_elsewhere)
{
    load_q();
    expect_released("main_native_spawn");
}

/* The native waits in tvm_receive (its process switches out, and its
 * scheduler takes the queue back), comes back when waker/1's message
 * arrives, spawns release/0 and blocks: the lend is made again on the
 * scheduler it came back to, so the spawn goes where the other scheduler
 * takes it (before, it went to the local queue behind the blocked
 * native, which was lent only until the switch out: timeout). */
Test(steal, a_native_that_came_back_from_a_wait_lends_again)
{
    load_q();
    expect_released("main_resumed");
}

/* Many rounds: the lend and its taking back at every native's return
 * leave both schedulers working (each round's processes all end). */
Test(steal, lending_round_after_round_loses_nothing)
{
    load_q();
    for (int i = 0; i < 200; i++) {
        vm_atomic_store_release(&released, 0);
        expect_released(i % 2 ? "main" : "main_native_spawn");
    }
}
