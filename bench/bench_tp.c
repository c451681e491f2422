/*
 * bench/bench_tp.c - trace_pattern's own cost per function, for
 * callgrind: no worker, one scheduler, genmod (bench/bench_genmod.h) with
 * --fns functions, --warm untimed calls (the first creates the
 * records), then --toggles calls of tvm_trace_pattern("genmod:_/_",
 * TVM_TP_TRUE / TVM_TP_FALSE, TVM_TP_LOCAL), alternating, the only code
 * callgrind collects when run with --collect-atstart=no (callgrind's
 * client request; a no-op outside valgrind).  Prints the calls' CPU
 * time per function and call (median).  Per function and call:
 *   valgrind --tool=callgrind --collect-atstart=no bench_tp --fns N
 * and (Ir of N functions - Ir of 20) / ((N - 20) * toggles).
 *
 * usage: bench_tp [--fns N] [--toggles K] [--warm W]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_TOGGLE_COLLECT
#endif

#define BENCH_PROG "bench_tp"
#include "bench/bench_genmod.h"
#include "bench/bench_util.h"
#include "include/tracevm.h"

#define MAX_TOGGLES 1000

static void toggle(tvm_vm *vm, int k)
{
    tvm_error err;
    if (tvm_trace_pattern(vm, "genmod:_/_", k % 2 == 0 ? TVM_TP_TRUE : TVM_TP_FALSE,
                          TVM_TP_LOCAL, NULL, &err) != TVM_OK)
        die("tvm_trace_pattern", err.message);
}

int main(int argc, char **argv)
{
    int nfns = 20000, toggles = 10, warm = 2;
    for (int i = 1; i < argc; i++) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--fns"))
            nfns = (int)arg_long(argv[i], val, 1, 100000), i++;
        else if (!strcmp(argv[i], "--toggles"))
            toggles = (int)arg_long(argv[i], val, 1, MAX_TOGGLES), i++;
        else if (!strcmp(argv[i], "--warm"))
            warm = (int)arg_long(argv[i], val, 0, MAX_TOGGLES), i++;
        else {
            fprintf(stderr, "usage: bench_tp [--fns N] [--toggles K] [--warm W]\n");
            return 2;
        }
    }
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    if (!vm)
        die("tvm_new failed", NULL);
    size_t len;
    char *text = genmod_text(nfns, &len);
    tvm_error err;
    if (tvm_load_string(vm, "genmod.tasm", text, len, &err) != TVM_OK)
        die("loading", err.message);
    free(text);
    /* Even, so that the measured calls start with TVM_TP_TRUE. */
    warm += warm % 2;
    for (int k = 0; k < warm; k++)
        toggle(vm, k);
    static double cpu[MAX_TOGGLES];
    for (int k = 0; k < toggles; k++) {
        const double c = thread_cpu_ns();
        CALLGRIND_TOGGLE_COLLECT;
        toggle(vm, k);
        CALLGRIND_TOGGLE_COLLECT;
        cpu[k] = thread_cpu_ns() - c;
    }
    printf("fns=%d\ntoggles=%d\ncpu_ns_per_fn_median=%.1f\n", nfns, toggles,
           median(cpu, toggles) / nfns);
    tvm_destroy(vm);
    return 0;
}
