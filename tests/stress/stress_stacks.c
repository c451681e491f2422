/*
 * tests/stress/stress_stacks.c - many concurrent captures against
 * processes that switch rapidly on every scheduler, start and exit:
 * 3 tracer threads call tvm_backtrace on random pids of a population of
 * workers (each recursing 6 deep, then spinning through its reductions,
 * so it yields again and again; every worker exits after a while and is
 * replaced).  Every answer is classified, and must be one of:
 *   - a whole stack: native frames, then up to 7 st:deep/2 frames, then
 *     exactly one st:worker/1 (the innermost VM frame at any line of its
 *     function, or none yet; every outer one at its call of the next),
 *     then native frames down to vm_fiber_entry, or "... truncated" when
 *     the walk hit code without frame pointers (the VM frames are listed
 *     all the same);
 *   - before vm_execute or after it (starting, exiting): native frames
 *     only, down to vm_fiber_entry or cut (a signal that lands in libc);
 *   - "not started yet", "no such process", or busy.
 * An empty capture, or one of nothing but "... truncated", is an error,
 * so is a stack with frames of anything else; the run goes on until
 * 1,000 whole stacks were captured; every worker returns 0.  Nothing may deadlock,
 * crash or, under `scons mode=tsan test`, race.  A plain program (exit 0
 * = pass).
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

enum { NPROCS = 16, NTRACERS = 3, MIN_WHOLE = 1000 };

static tvm_vm *vm;
static _Atomic tvm_pid pids[NPROCS];
static _Atomic int stop;
static _Atomic long n_whole, n_truncated, n_native_only, n_not_started, n_gone, n_busy, n_bad;

enum { WHOLE, TRUNCATED, NATIVE_ONLY, NOT_STARTED, BAD };

static bool starts(const char *line, const char *prefix)
{
    return strncmp(line, prefix, strlen(prefix)) == 0;
}

/* A VM frame line: "  st:FUN (st.tasm:LINE)" or "  st:FUN" (no line yet).
 * The innermost VM frame may stand at any line of its body (first..last);
 * every outer one stands at its call of the next (call_line). */
static bool vm_frame_ok(const char *line, const char *fun, bool innermost, int first, int last,
                        int call_line)
{
    char want[64];
    int n = snprintf(want, sizeof want, "  st:%s", fun);
    if (strncmp(line, want, (size_t)n) != 0)
        return false;
    if (innermost && line[n] == '\0')
        return true;
    int at = 0;
    char end = 0;
    if (sscanf(line + n, " (st.tasm:%d%c", &at, &end) != 2 || end != ')' ||
        line[strlen(line) - 1] != ')')
        return false;
    return innermost ? at >= first && at <= last : at == call_line;
}

/* What kind of answer `text` is (see the header). */
static int classify(const char *text)
{
    if (strcmp(text, "  (no stack: not started yet (no stack))\n") == 0)
        return NOT_STARTED;
    char line[512];
    int deep = 0, worker = 0, natives = 0;
    bool bottom = false, truncated = false;
    for (const char *l = text; *l;) {
        const char *nl = strchr(l, '\n');
        if (!nl || bottom || truncated || nl - l >= (long)sizeof line)
            return BAD;         /* unterminated, or anything after the end */
        snprintf(line, sizeof line, "%.*s", (int)(nl - l), l);
        l = nl + 1;
        bool innermost = deep + worker == 0;
        if (starts(line, "  [c] ")) {
            if (deep && !worker)
                return BAD;     /* a native between deep and worker frames */
            bottom = starts(line, "  [c] vm_fiber_entry+0x");
            natives++;
        } else if (strcmp(line, "  ... truncated") == 0) {
            truncated = true;
        } else if (starts(line, "  st:deep/2")) {
            /* deep/2 is lines 3-15 of st.tasm, its call of itself line 7 */
            if (worker || !vm_frame_ok(line, "deep/2", innermost, 4, 14, 7))
                return BAD;
            deep++;
        } else if (starts(line, "  st:worker/1")) {
            /* worker/1 is lines 16-26, its call of deep/2 line 21 */
            if (worker || !vm_frame_ok(line, "worker/1", innermost, 17, 25, 21))
                return BAD;
            worker++;
        } else {
            return BAD;
        }
    }
    if (!bottom && !truncated)
        return BAD;             /* neither the fiber's bottom nor a marked cut */
    if (worker == 0 && deep == 0)
        return natives ? NATIVE_ONLY : BAD;
    if (worker != 1 || deep > 7)
        return BAD;
    return truncated ? TRUNCATED : WHOLE;
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
            switch (classify(text)) {
            case WHOLE: atomic_fetch_add(&n_whole, 1); break;
            case TRUNCATED: atomic_fetch_add(&n_truncated, 1); break;
            case NATIVE_ONLY: atomic_fetch_add(&n_native_only, 1); break;
            case NOT_STARTED: atomic_fetch_add(&n_not_started, 1); break;
            default:
                if (atomic_fetch_add(&n_bad, 1) < 5)
                    fprintf(stderr, "stress_stacks: bad stack of %llu:\n%s---\n",
                            (unsigned long long)pid, text);
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

/* Joins a worker: it must return 0. */
static bool join_worker(tvm_env *env, tvm_pid pid)
{
    tvm_term res;
    int64_t v = -1;
    return tvm_join(env, pid, &res) == TVM_OK && tvm_get_int(env, res, &v) == TVM_OK && v == 0;
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
    /* Replace workers as they end, for about 1.5 s and until MIN_WHOLE
     * whole stacks were captured (a minute without them fails). */
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long replaced = 0, ms;
    do {
        for (int i = 0; i < NPROCS; i++) {
            if (!join_worker(env, atomic_load(&pids[i])))
                return fail("a worker failed or returned something else than 0");
            atomic_store(&pids[i], spawn_int(env, "st", "worker", 20 + i));
            replaced++;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    } while ((ms < 1500 || atomic_load(&n_whole) < MIN_WHOLE) && ms < 60000);
    atomic_store(&stop, 1);
    for (int i = 0; i < NTRACERS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NPROCS; i++)
        if (!join_worker(env, atomic_load(&pids[i])))
            return fail("a last worker failed or returned something else than 0");
    long whole = atomic_load(&n_whole), cut = atomic_load(&n_truncated);
    long native = atomic_load(&n_native_only), early = atomic_load(&n_not_started);
    printf("stress_stacks: %ld whole stacks, %ld truncated, %ld natives only, %ld not started, "
           "%ld gone, %ld busy, %ld bad, %ld workers replaced\n",
           whole, cut, native, early, atomic_load(&n_gone), atomic_load(&n_busy),
           atomic_load(&n_bad), replaced);
    tvm_env_free(env);
    tvm_destroy(vm);
    if (atomic_load(&n_bad) > 0)
        return fail("malformed stacks or errors");
    if (whole < MIN_WHOLE)
        return fail("fewer whole stacks than MIN_WHOLE in a minute");
    return 0;
}
