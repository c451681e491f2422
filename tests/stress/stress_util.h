/*
 * tests/stress/stress_util.h - helpers shared by the stress programs
 * (plain programs: a failure prints a line and the exit status is 1).
 */
#ifndef TESTS_STRESS_STRESS_UTIL_H
#define TESTS_STRESS_STRESS_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/tracevm.h"

/* The program's name, for messages; each stress program defines it. */
static const char *const stress_name;

static int fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", stress_name, what);
    return 1;
}

/* Spawns mod:fun(n) as a joinable process; exits the program on failure. */
static tvm_pid spawn_int(tvm_env *env, const char *mod, const char *fun, int64_t n)
{
    tvm_term a;
    tvm_pid pid = 0;
    if (tvm_make_int(env, n, &a) != TVM_OK || tvm_spawn(env, mod, fun, 1, &a, &pid) != TVM_OK)
        exit(fail("spawn failed"));
    return pid;
}

/* `full` where a program's rounds are cheap, `small` where each costs
 * many times more: under ThreadSanitizer (every synchronisation joins
 * vector clocks) and under user-mode emulation (tests/runner.py names the
 * emulator in TRACEVM_RUN).  A program that scales its rounds says why
 * the smaller count still looks for what it looks for; the full count
 * runs in the native debug, release and ASan builds. */
static inline int stress_scaled(int full, int small)
{
#ifdef VM_TSAN
    (void)full;
    return small;
#else
    return getenv("TRACEVM_RUN") ? small : full;
#endif
}

#endif /* TESTS_STRESS_STRESS_UTIL_H */
