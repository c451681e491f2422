/*
 * bench/bench_util.h - helpers shared by the benchmark programs.  A program
 * defines BENCH_PROG (its name, for messages) before including it.
 */
#ifndef BENCH_BENCH_UTIL_H
#define BENCH_BENCH_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "include/tracevm.h"

#ifndef BENCH_PROG
#error "define BENCH_PROG before including bench/bench_util.h"
#endif

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n-1] (sorts v). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* CLOCK_MONOTONIC in ns. */
static inline double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The calling thread's CPU time in ns: a preempted thread does not count,
 * which on a shared machine keeps other jobs out of the figure. */
static inline double thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Prints "PROG: what: detail" and exits with status 1. */
static inline void die(const char *what, const char *detail)
{
    fprintf(stderr, BENCH_PROG ": %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* The integer value of option `opt`, which must be in lo..hi (else exit 2). */
static inline long arg_long(const char *opt, const char *val, long lo, long hi)
{
    char *end;
    long v = val ? strtol(val, &end, 10) : 0;
    if (!val || *end || v < lo || v > hi) {
        fprintf(stderr, BENCH_PROG ": %s wants an integer in %ld..%ld\n", opt, lo, hi);
        exit(2);
    }
    return v;
}

/* A thread's time on a CPU and time runnable but waiting for one, ns
 * (fields 1 and 2 of /proc/self/task/TID/schedstat), added to *run_ns
 * and *wait_ns. */
static inline void schedstat(long tid, double *run_ns, double *wait_ns)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
    FILE *f = fopen(path, "r");
    unsigned long long run = 0, wait = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &run, &wait) != 2)
            run = wait = 0;
        fclose(f);
    }
    *run_ns += (double)run;
    *wait_ns += (double)wait;
}

/* A worker's tick native (the worker-gap method of bench_pausefree.c,
 * bench_events.c, bench_attach.c): its index, argv[0], an integer in
 * 0..max-1; false if it is not one (the native raises badarg). */
static inline bool bench_tick_index(tvm_env *env, const tvm_term *argv, int max, int64_t *idx)
{
    return tvm_get_int(env, argv[0], idx) == TVM_OK && *idx >= 0 && *idx < max;
}

#endif /* BENCH_BENCH_UTIL_H */
