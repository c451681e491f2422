/*
 * tests/stress/stress_steal.c - lending the local queue while an
 * embedder native runs (vm/sched.c, "Lending the local queue"), on 2, 3
 * and 4 schedulers: workers each spawn K children from VM code (they go
 * to the worker's scheduler's local queue, behind the worker), then block
 * briefly in t:nap/1, an embedder native, so that idle schedulers take
 * the children from the lent queue while other natives lend and take
 * theirs back; each child naps too, loops (its backward jumps cost
 * reductions, so some are preempted and yield) and sends {done, Id} to
 * its worker, which counts K of them.  Checked exactly: every worker's
 * count is K (every message delivered once, every child ran to its end),
 * t:nap/1 ran once per process, and no two naps of the same process
 * overlapped (a process run by two schedulers at once, e.g. left in the
 * lent queue and in a thief's, would nap twice at the same time).  A
 * process of odd id also yields inside its nap (vm_yield_point, as
 * bench_procs's procs_nat:yield/0 does): the direct switch takes the
 * lent queue back there, and the process lends again when it is back.
 * A plain program (exit 0 = pass), run under TSan by `scons mode=tsan test`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "include/tracevm.h"
#include "tests/stress/stress_util.h"
#include "vm/atomics.h"
#include "vm/interp.h"   /* vm_yield_point, for a yield inside t:nap/1 */
#include "vm/process.h"  /* struct tvm_env: the env of a native is its process */

static const char *const stress_name = "stress_steal";

#define WORKERS 8
#define MAX_CHILDREN 100
#define IDS (WORKERS * (MAX_CHILDREN + 1))

/* By process id (a worker's base, or base + i for its child i): how many
 * naps are inside t:nap/1 now, and how many ran.  Relaxed fetch-adds by
 * the processes; read by main after joining them all. */
static VmAtomic inside[IDS], naps[IDS];
static VmAtomic overlaps;

/* t:nap(Id): a native that holds its scheduler for about 200 us (an odd
 * Id yields first, inside it). */
static tvm_status nap(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    int64_t id;
    if (tvm_get_int(env, argv[0], &id) != TVM_OK || id < 0 || id >= IDS)
        return tvm_make_atom(env, "bad_id", result);
    if (vm_atomic_fetch_add_full(&inside[id], 1) != 0)
        vm_atomic_fetch_add_relaxed(&overlaps, 1);
    bool killed = id % 2 == 1 && vm_yield_point(env->p);
    if (!killed)
        usleep(200);
    vm_atomic_fetch_add_full(&inside[id], (uintptr_t)-1);
    vm_atomic_fetch_add_relaxed(&naps[id], 1);
    return tvm_make_atom(env, killed ? "killed" : "ok", result);
}

/* Children per worker in this run (set by main before any VM starts). */
static int children;

/* t:k(): the number of children each worker spawns. */
static tvm_status k_of(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)argv;
    (void)data;
    return tvm_make_int(env, children, result);
}

static const char *const st_src =
    "module st\n"
    "export worker/1, child/2\n"
    /* worker(Base): K := t:k(), spawns child(Self, Base + i) for i = K..1,
     * naps, then counts K {done, _} messages and returns the count. */
    "function worker/1 regs 9\n"
    "    move r7, r0\n"             /* Base */
    "    callx r1, r1, t:k/0\n"
    "    move r5, r1\n"             /* K */
    "    move r6, r1\n"             /* i */
    "spawn:\n"
    "    jeqi r6, 0, naptime\n"
    "    self r2\n"
    "    add r3, r7, r6\n"
    "    loadk r4, []\n"
    "    cons r3, r3, r4\n"
    "    cons r3, r2, r3\n"         /* [Self, Base + i] */
    "    loadk r1, st\n"
    "    loadk r2, child\n"
    "    callx r1, r1, erlang:spawn/3\n"
    "    addi r6, r6, -1\n"
    "    jump spawn\n"
    "naptime:\n"
    "    move r1, r7\n"
    "    callx r1, r1, t:nap/1\n"
    "    loadi r8, 0\n"
    "count:\n"
    "    recv r2, sleep\n"
    "    accept\n"
    "    addi r8, r8, 1\n"
    "    jump count\n"
    "sleep:\n"
    "    jeq r8, r5, done\n"
    "    loadk r3, infinity\n"
    "    wait r3, done\n"
    "    jump count\n"
    "done:\n"
    "    ret r8\n"
    "end\n"
    /* child(Parent, Id): naps, loops 500 times, sends {done, Id}. */
    "function child/2 regs 6\n"
    "    move r4, r0\n"
    "    move r5, r1\n"
    "    move r0, r1\n"
    "    callx r0, r0, t:nap/1\n"
    "    loadi r3, 500\n"
    "spin:\n"
    "    jeqi r3, 0, send\n"
    "    addi r3, r3, -1\n"
    "    jump spin\n"
    "send:\n"
    "    loadk r0, done\n"
    "    move r1, r5\n"
    "    tuple r1, 2, r0\n"
    "    move r0, r4\n"
    "    callx r0, r0, erlang:send/2\n"
    "    ret r0\n"
    "end\n";

static int round_of(int scheds, int k)
{
    tvm_vm *vm = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = scheds });
    tvm_env *env = tvm_env_new(vm);
    tvm_error err;
    if (tvm_register_native(vm, "t", "nap", 1, nap, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "t", "k", 0, k_of, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "st", st_src, strlen(st_src), &err) != TVM_OK) {
        fprintf(stderr, "%s: %s\n", stress_name, err.message);
        return 1;
    }
    for (int i = 0; i < IDS; i++) {
        vm_atomic_store_relaxed(&inside[i], 0);
        vm_atomic_store_relaxed(&naps[i], 0);
    }
    vm_atomic_store_relaxed(&overlaps, 0);
    tvm_pid w[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        w[i] = spawn_int(env, "st", "worker", (int64_t)i * (MAX_CHILDREN + 1));
    for (int i = 0; i < WORKERS; i++) {
        tvm_term r;
        int64_t got;
        if (tvm_join(env, w[i], &r) != TVM_OK || tvm_get_int(env, r, &got) != TVM_OK) {
            fprintf(stderr, "%s: %d schedulers: worker %d ended without its count\n", stress_name,
                    scheds, i);
            return 1;
        }
        if (got != k) {
            fprintf(stderr, "%s: %d schedulers: worker %d counted %lld messages, not %d\n", stress_name,
                    scheds, i, (long long)got, k);
            return 1;
        }
    }
    /* Each child's nap came before its message, which its worker counted. */
    for (int i = 0; i < WORKERS; i++)
        for (int c = 0; c <= k; c++) {
            uintptr_t n = vm_atomic_load_relaxed(&naps[i * (MAX_CHILDREN + 1) + c]);
            if (n != 1) {
                fprintf(stderr, "%s: %d schedulers: process %d of worker %d napped %lu times\n",
                        stress_name, scheds, c, i, (unsigned long)n);
                return 1;
            }
        }
    if (vm_atomic_load_relaxed(&overlaps) != 0)
        return fail("two naps of one process overlapped: it ran on two schedulers at once");
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}

int main(void)
{
    /* Under TSan and emulation fewer children and rounds: each round
     * still lends every worker's queue with children in it while the
     * other schedulers look for work. */
    children = stress_scaled(MAX_CHILDREN, 20);
    int rounds = stress_scaled(10, 2);
    for (int r = 0; r < rounds; r++)
        for (int scheds = 2; scheds <= 4; scheds++)
            if (round_of(scheds, children))
                return 1;
    printf("%s: ok\n", stress_name);
    return 0;
}
