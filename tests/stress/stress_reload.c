/*
 * tests/stress/stress_reload.c - one VM used from several threads: each
 * thread has its own env and calls VM code while the main thread reloads a
 * module for as long as they run (at least 58 times) and the callers intern
 * atoms.  Reloading without pause recycles each code index every third
 * load, so a caller preempted between loading the index and loading the
 * export slot lands on a version whose commit it has not seen: the case
 * the slot's own acquire/release pair covers (vm/module.c [CX2]).  A plain program (exit 0 =
 * pass) rather than a Criterion test, because Criterion's forked runner
 * does not mix with test threads; run under ThreadSanitizer by
 * `scons mode=tsan test`.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/tracevm.h"
#include "vm/atom.h"
#include "vm/atomics.h"

#define THREADS 4
#define ROUNDS 1500
#define MIN_VERSION 59

static tvm_vm *vm;
static pthread_barrier_t start;
/* Callers still running: written by each caller once at its end (release),
 * read by main's reload loop (acquire). */
static VmAtomic running = VM_ATOMIC_INIT(THREADS);

static const char *const fibsrc =
    "module fibc\nexport fib/1\n"
    "function fib/1 regs 3\n"
    "    jlti r0, 2, small\n    addi r1, r0, -1\n    call r1, r1, fib/1\n"
    "    addi r2, r0, -2\n    call r2, r2, fib/1\n    add r0, r1, r2\n"
    "small:\n    ret r0\nend\n";

static const char *version_src(int v)
{
    static char buf[2][256];
    snprintf(buf[v & 1], sizeof buf[0],
             "module ver\nexport get/0\nfunction get/0 regs 2\n"
             "    loadi r0, %d\n    loadi r1, 10\n    callx r1, r1, fibc:fib/1\n    ret r0\nend\n", v);
    return buf[v & 1];
}

/* Each caller records its first failure here; main reports them. */
static char failure[THREADS][256];

/* Calls mod:fun(args) and formats the result, like call_fmt() without
 * asserting. */
static tvm_status call_quiet(tvm_env *env, const char *mod, const char *fun, int argc,
                             int64_t arg, char *out, size_t size)
{
    tvm_term a, r;
    if (argc && tvm_make_int(env, arg, &a) != TVM_OK)
        return TVM_ERR_BADARG;
    tvm_status st = tvm_call(env, mod, fun, argc, &a, &r);
    if (st == TVM_OK)
        tvm_format_term(env, r, out, size);
    return st;
}

static void *caller(void *arg)
{
    int id = (int)(intptr_t)arg;
    tvm_env *env = tvm_env_new(vm);
    pthread_barrier_wait(&start);
    int64_t last = 0;
    for (int i = 0; i < ROUNDS && !failure[id][0]; i++) {
        char out[64] = "";
        if (call_quiet(env, "fibc", "fib", 1, 12, out, sizeof out) != TVM_OK ||
            strcmp(out, "144") != 0)
            snprintf(failure[id], sizeof failure[id], "fib(12) gave '%s'", out);
        if (call_quiet(env, "ver", "get", 0, 0, out, sizeof out) != TVM_OK)
            snprintf(failure[id], sizeof failure[id], "ver:get/0 raised");
        int64_t v = atoll(out);
        /* Versions only move forward: a call never runs older code than a
         * call made before it on the same thread. */
        if (v < last)
            snprintf(failure[id], sizeof failure[id], "version went back from %lld to %lld",
                     (long long)last, (long long)v);
        last = v;
        char name[32];
        snprintf(name, sizeof name, "atom_%d", i % 50);
        Atom a;
        if (!vm_atom_intern(name, strlen(name), &a))
            snprintf(failure[id], sizeof failure[id], "cannot intern %s", name);
    }
    tvm_env_free(env);
    vm_atomic_fetch_add_full(&running, (uintptr_t)-1);
    return NULL;
}

static void load_or_die(const char *name, const char *text)
{
    tvm_error err;
    if (tvm_load_string(vm, name, text, strlen(text), &err) != TVM_OK) {
        fprintf(stderr, "load %s failed: %s", name, err.message);
        exit(1);
    }
}

int main(void)
{
    vm = tvm_new(NULL);
    load_or_die("fibc.tasm", fibsrc);
    load_or_die("ver.tasm", version_src(1));
    pthread_barrier_init(&start, NULL, THREADS + 1);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, caller, (void *)(intptr_t)i);
    pthread_barrier_wait(&start);
    int v = 1;
    while (v < MIN_VERSION || vm_atomic_load_acquire(&running) != 0)
        load_or_die("ver.tasm", version_src(++v));
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    int status = 0;
    for (int i = 0; i < THREADS; i++)
        if (failure[i][0]) {
            fprintf(stderr, "thread %d: %s\n", i, failure[i]);
            status = 1;
        }
    tvm_env *env = tvm_env_new(vm);
    char out[64] = "";
    char want[16];
    snprintf(want, sizeof want, "%d", v);
    if (call_quiet(env, "ver", "get", 0, 0, out, sizeof out) != TVM_OK || strcmp(out, want) != 0) {
        fprintf(stderr, "final version: '%s', expected %s\n", out, want);
        status = 1;
    }
    tvm_env_free(env);
    tvm_destroy(vm);
    return status;
}
