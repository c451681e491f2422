/*
 * tests/stress/stress_deep_frames.c - signal handlers that copy a
 * process's VM frames (a CPU profile's sample, a running capture) while
 * the process grows its frame array.
 *
 * Processes recurse 300,000 calls deep, so their frame array grows by
 * doubling to 16 MiB, under a 10,000 Hz CPU profile, while a thread takes
 * their backtraces in signal mode.  malloc is told to map every block
 * from 128 KiB up (mallopt: no dynamic threshold), so a grown array's
 * old copy is unmapped when it is freed.  A handler that lands between
 * that free and the store of the new pointer (the signal comes on the
 * return of the munmap or mremap system call, which is where a CPU-time
 * timer's signal lands when the tick fell inside it) read the old array
 * and crashed the program: a segmentation fault within a second of this
 * run, every time, before vm_frames_ensure published the new array first
 * and freed the old one after.  (Under the sanitizers mallopt does
 * nothing and the old arrays stay mapped: there the program checks that
 * nothing races or leaks.)
 * A plain program (exit 0 = pass): every process returns its depth's 0,
 * the profile holds samples of deep/1, every backtrace is taken or says
 * why not.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/tracevm.h"
#include "tests/stress/stress_util.h"

static const char *const stress_name = "stress_deep_frames";

static const char *const src =
    "module sd\n"
    "export deep/1\n"
    "function deep/1 regs 2\n"
    "    jeqi r0, 0, done\n"
    "    addi r1, r0, -1\n"
    "    call r1, r1, deep/1\n"
    "    ret r1\n"
    "done:\n"
    "    ret r0\n"
    "end\n";

enum { PER_ROUND = 2, DEPTH = 300000 };

static tvm_vm *vm;
static _Atomic tvm_pid target;
static atomic_int capturing = 1;

/* Backtraces of the latest process in signal (or context) mode, over and
 * over: a capture's handler copies the frames as the profile's does. */
static void *tracer(void *arg)
{
    (void)arg;
    static char buf[64 * 1024];
    while (atomic_load(&capturing)) {
        tvm_pid pid = atomic_load(&target);
        tvm_error err;
        tvm_status st = pid ? tvm_backtrace(vm, pid, buf, sizeof buf, NULL, &err) : TVM_OK;
        if (st != TVM_OK && st != TVM_ERR_NOTFOUND && st != TVM_ERR_BUSY)
            exit(fail(err.message));
    }
    return NULL;
}

int main(void)
{
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2 };
    vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    tvm_error err;
    if (tvm_load_string(vm, "sd", src, strlen(src), &err) != TVM_OK)
        return fail(err.message);
    tvm_profile_options o = { .size = sizeof o, .kind = TVM_PROFILE_CPU, .hz = 10000 };
    tvm_profile *p;
    if (tvm_profile_start(vm, &o, &p, &err) != TVM_OK)
        return fail(err.message);
    /* 12 rounds; 4 under ThreadSanitizer and emulation (12 took 46 s of
     * the ThreadSanitizer suite): there the old arrays stay mapped (see
     * above) or the signals come at emulated instruction boundaries, and
     * what the rounds look for is a race report or a leak, which every
     * growth of every round can show. */
    const int rounds = stress_scaled(12, 4);
    pthread_t t;
    pthread_create(&t, NULL, tracer, NULL);
    for (int r = 0; r < rounds; r++) {
        tvm_pid pids[PER_ROUND];
        for (int i = 0; i < PER_ROUND; i++) {
            pids[i] = spawn_int(env, "sd", "deep", DEPTH);
            atomic_store(&target, pids[i]);
        }
        for (int i = 0; i < PER_ROUND; i++) {
            tvm_term res;
            int64_t v = -1;
            if (tvm_join(env, pids[i], &res) != TVM_OK || tvm_get_int(env, res, &v) != TVM_OK ||
                v != 0)
                return fail("a deep process did not return 0");
        }
    }
    atomic_store(&capturing, 0);
    pthread_join(t, NULL);
    tvm_profile_stop(p);
    tvm_profile_write_options w = { .size = sizeof w, .format = TVM_PROFILE_FOLDED, .merge = true };
    char *out;
    size_t n;
    if (tvm_profile_render(p, &w, &out, &n, &err) != TVM_OK)
        return fail(err.message);
    bool seen = memmem(out, n, "sd:deep/1", 9) != NULL;
    free(out);
    tvm_profile_free(p);
    tvm_env_free(env);
    tvm_destroy(vm);
    if (!seen)
        return fail("the profile has no sample of sd:deep/1");
    printf("%s: %d processes %d calls deep, profiled and captured\n", stress_name,
           rounds * PER_ROUND, DEPTH);
    return 0;
}
