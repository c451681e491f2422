/*
 * tests/stress/stress_procs.c - processes on all schedulers:
 *   1. synchronize_rcu() from a foreign thread completes while every
 *      scheduler is busy (spinning processes yield at reductions and their
 *      schedulers report quiescent states) and while all are idle (asleep,
 *      offline);
 *   2. a message storm: 8 senders x 2,000 messages to one collector, all
 *      counted exactly;
 *   3. 100,000 processes (20,000 under ThreadSanitizer) spawned by 20
 *      spawners: every one ran (each sends one message, and a collector
 *      counts exactly that many), took exactly one pid (the pids around
 *      them are that many plus 21 apart), and exited (none is left);
 *      then, by the runtime's own accounting, every fiber stack is back
 *      in the pool (none handed out) and the pages of every one went back
 *      to the OS once the VM was idle (none dirty).  What a process costs
 *      in resident memory is measured by bench/bench_procs.
 * A plain program (exit 0 = pass); `scons mode=tsan test` runs it under
 * ThreadSanitizer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <urcu-qsbr.h>

#include "include/tracevm.h"
#include "tests/stress/stress_util.h"
#include "vm/atomics.h"
#include "vm/common.h"
#include "vm/sched.h"

static const char *const stress_name = "stress_procs";

/* Processes per spawner in step 3: 5,000 (100,000 in all), and 1,000
 * (20,000) under ThreadSanitizer.  There every synchronisation joins
 * vector clocks as long as the number of fibers TSan has seen (thousands
 * here), which made this one program 120-130 s of the TSan suite; the
 * races it looks for are between the spawners, the collector and the
 * schedulers, which 20,000 processes exercise as well, and the 100,000
 * are counted in every other build. */
#ifdef VM_TSAN
#define STRESS_PROCS_EACH 1000
#else
#define STRESS_PROCS_EACH 5000
#endif

static const char *const src =
    "module st\n"
    "export spin/1, noop/1, spawner/2, sender/3, collector/2\n"
    /* spin(N): a busy loop of N iterations (a reduction each) */
    "function spin/1 regs 1\n"
    "loop:\n    jeqi r0, 0, done\n    addi r0, r0, -1\n    jump loop\n"
    "done:\n    ret r0\nend\n"
    /* noop(To): sends {n, 1} to To */
    "function noop/1 regs 4\n"
    "    loadk r2, n\n    loadi r3, 1\n    tuple r1, 2, r2\n"
    "    callx r0, r0, erlang:send/2\n    ret r0\nend\n"
    /* spawner(N, To): spawns N noop(To) processes */
    "function spawner/2 regs 6\n"
    "loop:\n    jeqi r0, 0, done\n"
    "    loadk r5, []\n    cons r5, r1, r5\n    loadk r3, st\n    loadk r4, noop\n"
    "    callx r3, r3, erlang:spawn/3\n    addi r0, r0, -1\n    jump loop\n"
    "done:\n    ret r0\nend\n"
    /* sender(To, Tag, N): sends {Tag, I} for I = N..1 */
    "function sender/3 regs 7\n"
    "loop:\n    jeqi r2, 0, done\n"
    "    move r3, r1\n    move r4, r2\n    tuple r6, 2, r3\n"
    "    move r4, r0\n    move r5, r6\n    callx r4, r4, erlang:send/2\n"
    "    addi r2, r2, -1\n    jump loop\n"
    "done:\n    ret r0\nend\n"
    /* collector(N, Sum): receives N messages {Tag, I}, returns the sum of I */
    "function collector/2 regs 5\n"
    "loop:\n    jeqi r0, 0, done\n"
    "    recv r2, none\n    accept\n    getel r3, r2, 2\n    add r1, r1, r3\n"
    "    addi r0, r0, -1\n    jump loop\n"
    "none:\n    loadk r4, infinity\n    wait r4, done\n    jump loop\n"
    "done:\n    ret r1\nend\n";

/* Polls for a state the VM must reach; a minute without it is a failure
 * (a hang guard: nothing here measures how long it took). */
#define WAIT_FOR(cond, what)                                        \
    do {                                                            \
        int tries_ = 0;                                             \
        while (!(cond)) {                                           \
            if (++tries_ > 60000)                                   \
                return fail(what);                                  \
            usleep(1000);                                           \
        }                                                           \
    } while (0)

/* Every scheduler asleep (offline, for thread progress). */
static bool all_asleep(SchedSystem *sys)
{
    for (int i = 0; i < sys->n; i++)
        if (vm_atomic_load_relaxed(&sys->scheds[i].sleeping) != 1)
            return false;
    return true;
}

/* The VM's fiber pool at rest after going idle: no stack handed out
 * (ended processes cached by schedulers keep theirs, so none is cached
 * either) and the pages of every free stack given back. */
static bool pool_at_rest(SchedSystem *sys)
{
    pthread_mutex_lock(&sys->pool.lock);
    bool rest = sys->pool.live == 0 && sys->pool.ndirty == 0 && sys->pool.nfree > 0;
    pthread_mutex_unlock(&sys->pool.lock);
    return rest;
}

static tvm_pid spawn1(tvm_env *env, const char *fun, int64_t n)
{
    return spawn_int(env, "st", fun, n);
}

/* t:await/0 - a native that waits for a message through the API (its
 * process is suspended with this C frame on its fiber). */
static tvm_status await_native(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                               void *data)
{
    (void)argc;
    (void)argv;
    (void)data;
    return tvm_receive(env, -1, result) == TVM_OK ? TVM_OK : tvm_raise_badarg(env);
}

/* t:nap/1 - a native that sleeps through the API. */
static tvm_status nap_native(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                             void *data)
{
    (void)argc;
    (void)data;
    int64_t ms;
    if (tvm_get_int(env, argv[0], &ms) != TVM_OK || tvm_sleep(env, ms) != TVM_OK)
        return tvm_raise_badarg(env);
    return tvm_make_atom(env, "rested", result);
}

static const char *const suspend_src =
    "module su\n"
    "export awaiter/0, napper/0, poke/1\n"
    "function awaiter/0 regs 1\n    callx r0, r0, t:await/0\n    ret r0\nend\n"
    "function napper/0 regs 1\n    loadi r0, 30\n    callx r0, r0, t:nap/1\n    ret r0\nend\n"
    /* poke(Pid): sends {poked, Self} to Pid */
    "function poke/1 regs 4\n    loadk r2, poked\n    self r3\n    tuple r2, 2, r2\n"
    "    move r1, r0\n    callx r1, r1, erlang:send/2\n    ret r1\nend\n";

/* With ONE scheduler: a process suspended inside a native must let the
 * scheduler run the process that wakes it. */
static int natives_that_suspend(void)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (tvm_register_native(vm, "t", "await", 0, await_native, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "t", "nap", 1, nap_native, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "su.tasm", suspend_src, strlen(suspend_src), &err) != TVM_OK) {
        fputs(err.message, stderr);
        return 1;
    }
    tvm_env *env = tvm_env_new(vm);
    tvm_pid a, n, k;
    tvm_term r, pa;
    if (tvm_spawn(env, "su", "awaiter", 0, NULL, &a) != TVM_OK ||
        tvm_spawn(env, "su", "napper", 0, NULL, &n) != TVM_OK)
        return fail("spawn");
    /* Wait until the awaiter is suspended in its native. */
    tvm_process_info info[8];
    for (int tries = 0;; tries++) {
        size_t cnt = tvm_processes(vm, info, 8);
        bool found = false;
        for (size_t i = 0; i < cnt && i < 8; i++)
            if (info[i].pid == a && strcmp(info[i].state, "waiting") == 0 &&
                strcmp(info[i].function, "t:await/0") == 0)
                found = true;
        if (found)
            break;
        if (tries > 60000)      /* a hang guard (a minute), not a measurement */
            return fail("the awaiter never showed as waiting in t:await/0");
        usleep(1000);
    }
    tvm_make_pid(env, a, &pa);
    if (tvm_spawn(env, "su", "poke", 1, &pa, &k) != TVM_OK || tvm_join(env, k, &r) != TVM_OK)
        return fail("poke");
    if (tvm_join(env, a, &r) != TVM_OK)
        return fail("awaiter raised");
    char buf[128];
    tvm_format_term(env, r, buf, sizeof buf);
    if (strncmp(buf, "{poked,<0.", 10) != 0)
        return fail("awaiter got the wrong message");
    if (tvm_join(env, n, &r) != TVM_OK || !tvm_is_atom(env, r, "rested"))
        return fail("napper");
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}

int main(void)
{
    if (natives_that_suspend() != 0)
        return 1;

    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (tvm_load_string(vm, "st.tasm", src, strlen(src), &err) != TVM_OK) {
        fputs(err.message, stderr);
        return 1;
    }
    tvm_env *env = tvm_env_new(vm);
    tvm_term r;

    /* 1. Thread progress while busy, then while idle. */
    tvm_pid spinners[4];
    for (int i = 0; i < 4; i++)
        spinners[i] = spawn1(env, "spin", 3000000);
    for (int i = 0; i < 20; i++)
        synchronize_rcu();
    for (int i = 0; i < 4; i++)
        if (tvm_join(env, spinners[i], &r) != TVM_OK)
            return fail("a spinner failed");
    tvm_wait_idle(vm);
    SchedSystem *sys = vm_sched_of(vm);
    WAIT_FOR(all_asleep(sys), "the schedulers never all went to sleep");
    for (int i = 0; i < 20; i++)
        synchronize_rcu();

    /* 2. Message storm. */
    tvm_term args[3];
    tvm_make_int(env, 8 * 2000, &args[0]);
    tvm_make_int(env, 0, &args[1]);
    tvm_pid coll;
    if (tvm_spawn(env, "st", "collector", 2, args, &coll) != TVM_OK)
        return fail("spawn collector");
    /* All eight senders run at once, on both schedulers. */
    tvm_pid senders[8];
    for (int s = 0; s < 8; s++) {
        tvm_make_pid(env, coll, &args[0]);
        tvm_make_atom(env, "m", &args[1]);
        tvm_make_int(env, 2000, &args[2]);
        if (tvm_spawn(env, "st", "sender", 3, args, &senders[s]) != TVM_OK)
            return fail("sender");
    }
    for (int s = 0; s < 8; s++)
        if (tvm_join(env, senders[s], &r) != TVM_OK)
            return fail("sender raised");
    if (tvm_join(env, coll, &r) != TVM_OK)
        return fail("collector raised");
    int64_t sum;
    if (tvm_get_int(env, r, &sum) != TVM_OK || sum != 8 * (2000 * 2001 / 2))
        return fail("message storm: wrong sum");

    /* 3. N processes, every one accounted for. */
    enum { SPAWNERS = 20, EACH = STRESS_PROCS_EACH, N = SPAWNERS * EACH };
    tvm_make_int(env, N, &args[0]);
    tvm_make_int(env, 0, &args[1]);
    if (tvm_spawn(env, "st", "collector", 2, args, &coll) != TVM_OK)
        return fail("spawn collector");
    /* One spawner at a time: 5,000 live processes at most (each stack is
     * two kernel mappings of the 65,530 a process may have). */
    tvm_pid first = spawn1(env, "spin", 0), w;
    for (int i = 0; i < SPAWNERS; i++) {
        tvm_make_int(env, EACH, &args[0]);
        tvm_make_pid(env, coll, &args[1]);
        if (tvm_spawn(env, "st", "spawner", 2, args, &w) != TVM_OK)
            return fail("spawn spawner");
        if (tvm_join(env, w, &r) != TVM_OK)
            return fail("spawner raised");
    }
    tvm_pid last = spawn1(env, "spin", 0);
    if (tvm_join(env, coll, &r) != TVM_OK || tvm_get_int(env, r, &sum) != TVM_OK)
        return fail("the collector of step 3 raised");
    if (tvm_join(env, first, &r) != TVM_OK || tvm_join(env, last, &r) != TVM_OK)
        return fail("a pid marker raised");
    tvm_wait_idle(vm);
    size_t left = tvm_processes(vm, NULL, 0);
    fprintf(stderr, "%s: %lld of %d processes ran, %llu pids between the markers, %zu left\n",
            stress_name, (long long)sum, N, (unsigned long long)(last - first - 1), left);
    if (sum != N)
        return fail("not every process ran and sent its message");
    if (last - first - 1 != N + SPAWNERS)
        return fail("the pids between the markers are not the spawners' and their processes'");
    if (left != 0)
        return fail("processes left after all exited");
    WAIT_FOR(pool_at_rest(sys), "fiber stacks still handed out, or pages not given back");
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}
