/*
 * tests/stress/stress_util.h - helpers shared by the stress programs
 * (plain programs: a failure prints a line and the exit status is 1).
 */
#ifndef TESTS_STRESS_STRESS_UTIL_H
#define TESTS_STRESS_STRESS_UTIL_H

#include <stdio.h>
#include <stdlib.h>

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

#endif /* TESTS_STRESS_STRESS_UTIL_H */
