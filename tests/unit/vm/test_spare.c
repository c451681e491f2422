/*
 * tests/unit/vm/test_spare.c - processes that end on one scheduler are
 * reused by spawns on another through the spare list (vm/sched_cache.c),
 * instead of each scheduler freeing what it ended when it goes idle
 * while the other allocates anew.
 *
 * One scheduler is held inside an embedder native (t:block/0) for the
 * whole case, so the other runs everything else and the VM never stays
 * idle as a whole (that would free the spare list with the pool's trim).
 * Each wait for a state has a deadline far beyond any scheduling delay
 * on a loaded machine and fails the case with a message when it passes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <semaphore.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "vm/atomics.h"
#include "vm/sched.h"

#define DEADLINE_S 20

static tvm_config two_scheds = { .size = sizeof(tvm_config), .schedulers = 2 };
TVM_FIXTURE(spare, &two_scheds);

/* Posted by the case once it is done, waited for by t:block/0. */
static sem_t done;

/* t:block/0: holds its scheduler thread until the case posts `done` (or
 * three deadlines pass, longer than the case's waits together):
 * `released` or `timeout`. */
static tvm_status block(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)argv;
    (void)data;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 3 * DEADLINE_S;
    int r;
    while ((r = sem_timedwait(&done, &until)) != 0 && errno == EINTR)
        ;
    return tvm_make_atom(e, r == 0 ? "released" : "timeout", result);
}

/* blocker/0 holds a scheduler; spawner(N) spawns N noop/0, which end at
 * once. */
static const char *const s_src =
    "module s\n"
    "export blocker/0, spawner/1, noop/0\n"
    "function blocker/0 regs 1\n"
    "    callx r0, r0, t:block/0\n"
    "    ret r0\n"
    "end\n"
    "function spawner/1 regs 5\n"
    "again:\n"
    "    jlti r0, 1, out\n"
    "    loadk r1, s\n"
    "    loadk r2, noop\n"
    "    loadk r3, []\n"
    "    callx r1, r1, erlang:spawn/3\n"
    "    addi r0, r0, -1\n"
    "    jump again\n"
    "out:\n"
    "    ret r1\n"
    "end\n"
    "function noop/0 regs 1\n"
    "    loadk r0, ok\n"
    "    ret r0\n"
    "end\n";

/* Runs s:spawner(n) from this thread and joins it. */
static void spawn_and_join(long n)
{
    tvm_term arg, r;
    cr_assert_eq(tvm_make_int(env, n, &arg), TVM_OK);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "s", "spawner", 1, &arg, &pid), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
}

/* Waits until the spare list holds exactly n processes; false at the
 * deadline. */
static bool until_spare(SchedSystem *sys, uintptr_t n)
{
    for (int ms = 0; ms < DEADLINE_S * 1000; ms++) {
        if (vm_atomic_load_relaxed(&sys->nspare) == n)
            return true;
        usleep(1000);
    }
    return false;
}

static size_t pool_live(SchedSystem *sys)
{
    pthread_mutex_lock(&sys->pool.lock);
    size_t n = sys->pool.live;
    pthread_mutex_unlock(&sys->pool.lock);
    return n;
}

/* Eight processes end on the free scheduler, which then goes idle: they
 * wait in the spare list (before, the scheduler freed them).  A spawn
 * there then takes them back: the noop it spawns reuses one (no stack
 * handed out or returned: the pool's count of stacks in use stays as it
 * was), and the eight are in the spare list again once that scheduler is
 * idle again. */
Test(spare, processes_ended_on_an_idle_scheduler_are_spawned_again, .timeout = 120)
{
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "t", "block", 0, block, NULL, &err), TVM_OK, "%s",
                 err.message);
    load_ok(vm, "s", s_src);
    cr_assert_eq(sem_init(&done, 0, 0), 0);
    tvm_pid blocker;
    cr_assert_eq(tvm_spawn(env, "s", "blocker", 0, NULL, &blocker), TVM_OK);
    /* Held before anything ends: a process that ended on that scheduler
     * would stay in its cache (it never goes idle) and the spare list
     * would not hold what the other scheduler ended alone. */
    wait_proc_state(vm, blocker, "running");
    SchedSystem *sys = vm_sched_of(vm);

    spawn_and_join(8);
    cr_assert(until_spare(sys, 8), "8 processes in the spare list within %d s (it holds %lu)",
              DEADLINE_S, (unsigned long)vm_atomic_load_relaxed(&sys->nspare));
    size_t live = pool_live(sys);

    spawn_and_join(1);
    cr_assert(until_spare(sys, 8), "8 processes in the spare list again within %d s (%lu)",
              DEADLINE_S, (unsigned long)vm_atomic_load_relaxed(&sys->nspare));
    cr_assert_eq(pool_live(sys), live, "stacks in use: %zu, before the spawn %zu",
                 pool_live(sys), live);

    cr_assert_eq(sem_post(&done), 0);
    tvm_term r;
    cr_assert_eq(tvm_join(env, blocker, &r), TVM_OK);
    char buf[32];
    tvm_format_term(env, r, buf, sizeof buf);
    cr_assert_str_eq(buf, "released");
    sem_destroy(&done);
}
