/*
 * tests/stress/stress_stacks.c - many concurrent captures against
 * processes that switch rapidly on every scheduler, start and exit:
 * 3 tracer threads call tvm_backtrace on random pids of a population of
 * workers (each recursing 6 deep, then spinning through its reductions,
 * so it yields again and again; every worker exits after a while and is
 * replaced).  Every answer must be a well-formed stack of st:deep/2 and
 * st:worker/1 frames (or none, before vm_execute starts or after it
 * ends; marked truncated when the signal lands in code without frame
 * pointers, such as the dynamic loader's), "no such process" or
 * "exited"; nothing may deadlock, crash or,
 * under `scons mode=tsan test`, race.  A plain program (exit 0 = pass).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "include/tracevm.h"
#include "tests/stress/stress_util.h"

static const char *const stress_name = "stress_stacks";

static const char *const src =
    "module st\n"
    "export worker/1, deep/2\n"
    /* deep(D, N): D nested calls, then a loop of N iterations */
    "function deep/2 regs 3\n"
    "    jeqi r0, 0, spin\n"
    "    addi r2, r0, -1\n"
    "    move r0, r2\n"
    "    call r0, r0, deep/2\n"
    "    ret r0\n"
    "spin:\n"
    "    jeqi r1, 0, done\n"
    "    addi r1, r1, -1\n"
    "    jump spin\n"
    "done:\n"
    "    ret r1\n"
    "end\n"
    /* worker(K): K times deep(6, 3000) */
    "function worker/1 regs 4\n"
    "loop:\n"
    "    jeqi r0, 0, out\n"
    "    loadi r2, 6\n"
    "    loadi r3, 3000\n"
    "    call r2, r2, deep/2\n"
    "    addi r0, r0, -1\n"
    "    jump loop\n"
    "out:\n"
    "    ret r0\n"
    "end\n";

enum { NPROCS = 16, NTRACERS = 3 };

static tvm_vm *vm;
static _Atomic tvm_pid pids[NPROCS];
static _Atomic int stop;
static _Atomic long n_ok, n_gone, n_busy, n_bad;

/* Every line a native frame, a frame of ours, or nothing at all. */
static bool well_formed(const char *text)
{
    if (strcmp(text, "  (no stack: not started yet (no stack))\n") == 0)
        return true;
    for (const char *l = text; *l;) {
        const char *nl = strchr(l, '\n');
        if (!nl)
            return false;
        if (strncmp(l, "  [c] ", 6) != 0 && strncmp(l, "  st:deep/2 (st.tasm:", 21) != 0 &&
            strncmp(l, "  st:worker/1 (st.tasm:", 23) != 0 && strncmp(l, "  st:deep/2\n", 12) != 0 &&
            strncmp(l, "  st:worker/1\n", 14) != 0 && strcmp(l, "  ... truncated\n") != 0)
            return false;
        l = nl + 1;
    }
    return true;
}

static void *tracer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    static _Thread_local char text[32768];
    tvm_error err;
    while (!atomic_load(&stop)) {
        tvm_pid pid = atomic_load(&pids[rand_r(&seed) % NPROCS]);
        tvm_status st = tvm_backtrace(vm, pid, text, sizeof text, NULL, &err);
        if (st == TVM_OK) {
            atomic_fetch_add(&n_ok, 1);
            if (!well_formed(text) && atomic_fetch_add(&n_bad, 1) < 5) {
                fprintf(stderr, "stress_stacks: bad stack of %llu:\n%s", (unsigned long long)pid,
                        text);
            }
        } else if (st == TVM_ERR_NOTFOUND) {
            atomic_fetch_add(&n_gone, 1);
        } else if (st == TVM_ERR_BUSY) {
            atomic_fetch_add(&n_busy, 1);
        } else {
            fprintf(stderr, "stress_stacks: %s\n", err.message);
            atomic_fetch_add(&n_bad, 1);
        }
    }
    return NULL;
}

int main(void)
{
    vm = tvm_new(NULL);
    tvm_error err;
    if (tvm_load_string(vm, "st.tasm", src, strlen(src), &err) != TVM_OK)
        return fail(err.message);
    tvm_env *env = tvm_env_new(vm);
    for (int i = 0; i < NPROCS; i++)
        atomic_store(&pids[i], spawn_int(env, "st", "worker", 20 + i));
    pthread_t t[NTRACERS];
    for (int i = 0; i < NTRACERS; i++)
        pthread_create(&t[i], NULL, tracer, (void *)(uintptr_t)(i + 1));
    /* Replace workers as they end, for about 1.5 s. */
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long replaced = 0;
    do {
        for (int i = 0; i < NPROCS; i++) {
            tvm_term res;
            tvm_pid old = atomic_load(&pids[i]);
            if (tvm_join(env, old, &res) != TVM_OK)
                return fail("a worker failed");
            atomic_store(&pids[i], spawn_int(env, "st", "worker", 20 + i));
            replaced++;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 1500);
    atomic_store(&stop, 1);
    for (int i = 0; i < NTRACERS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NPROCS; i++) {
        tvm_term res;
        tvm_join(env, atomic_load(&pids[i]), &res);
    }
    printf("stress_stacks: %ld captures, %ld gone, %ld busy, %ld bad, %ld workers replaced\n",
           atomic_load(&n_ok), atomic_load(&n_gone), atomic_load(&n_busy), atomic_load(&n_bad),
           replaced);
    tvm_env_free(env);
    tvm_destroy(vm);
    if (atomic_load(&n_bad) > 0)
        return fail("malformed stacks or errors");
    if (atomic_load(&n_ok) < 100)
        return fail("fewer than 100 stacks captured");
    return 0;
}
