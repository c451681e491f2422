/*
 * bench/bench_sym.c - the cost of symbolizing native frames
 * (stacks/st_sym.h), per frame, over a real 30-frame stack: the return
 * addresses (minus 1) of a chain of 30 distinct functions of this
 * program, captured by a frame-pointer walk.
 *   symbolize_ns_per_frame_cold   st_sym_reset(), then one st_sym_lookup
 *                                 per frame: reading the object list and
 *                                 the symbol table (libelf, sort) included
 *   symbolize_ns_per_frame_first  the same, the very first time in the
 *                                 process (also copies the string table)
 *   symbolize_ns_per_frame        cached: st_sym_lookup per frame
 *   symbolize_batch_ns_per_frame  cached: one st_sym_lookup_n per stack
 *   srcline_ns_per_frame_cold     st_sym_srcline after st_sym_reset
 *   srcline_ns_per_frame          st_sym_srcline, warm
 *   resolved                      frames with a symbol (of 30)
 *   reset_us, reset_max_us        st_sym_reset while 4 threads look up
 *                                 in a loop (median and max of 200): the
 *                                 writer's wait for the read sections
 * The per-frame figures are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID,
 * so time spent preempted by other jobs does not count; the cold ones
 * include the system time of opening and mapping the ELF files); the
 * reset figures are wall-clock time (waiting is what they measure).
 * Prints key=value lines: medians over --runs timed rounds.
 */
#define BENCH_PROG "bench_sym"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "stacks/st_sym.h"

#define FRAMES 30

static uintptr_t stack[FRAMES];
static int depth;

/* The frame-pointer walk from here: return addresses - 1 (the calls). */
static __attribute__((noinline)) void capture(void)
{
    uintptr_t *fp = __builtin_frame_address(0);
    depth = 0;
    while (fp && depth < FRAMES) {
        uintptr_t ret = fp[1];
        uintptr_t *next = (uintptr_t *)fp[0];
        if (!ret)
            break;
        stack[depth++] = ret - 1;
        if (next <= fp)
            break;
        fp = next;
    }
}

/* A chain of distinct functions, each calling the next (not a tail call:
 * the volatile add after the call). */
static volatile int sink;
#define CHAIN(n, next) \
    static __attribute__((noinline)) void chain_##n(void) { next(); sink += n; }
CHAIN(31, capture) CHAIN(30, chain_31) CHAIN(29, chain_30) CHAIN(28, chain_29)
CHAIN(27, chain_28) CHAIN(26, chain_27) CHAIN(25, chain_26) CHAIN(24, chain_25)
CHAIN(23, chain_24) CHAIN(22, chain_23) CHAIN(21, chain_22) CHAIN(20, chain_21)
CHAIN(19, chain_20) CHAIN(18, chain_19) CHAIN(17, chain_18) CHAIN(16, chain_17)
CHAIN(15, chain_16) CHAIN(14, chain_15) CHAIN(13, chain_14) CHAIN(12, chain_13)
CHAIN(11, chain_12) CHAIN(10, chain_11) CHAIN(9, chain_10) CHAIN(8, chain_9)
CHAIN(7, chain_8) CHAIN(6, chain_7) CHAIN(5, chain_6) CHAIN(4, chain_5)
CHAIN(3, chain_4) CHAIN(2, chain_3) CHAIN(1, chain_2)

/* ns per frame of one pass of st_sym_lookup over the stack. */
static double lookup_pass(int *resolved)
{
    StSym s;
    int n = 0;
    double t0 = thread_cpu_ns();
    for (int i = 0; i < FRAMES; i++)
        n += st_sym_lookup(stack[i], &s);
    double t = (thread_cpu_ns() - t0) / FRAMES;
    *resolved = n;
    return t;
}

static double cached(long passes, bool batch)
{
    StSym s[FRAMES];
    size_t n = 0;
    double t0 = thread_cpu_ns();
    for (long p = 0; p < passes; p++) {
        if (batch) {
            n += st_sym_lookup_n(stack, FRAMES, s);
        } else {
            for (int i = 0; i < FRAMES; i++)
                n += st_sym_lookup(stack[i], &s[i]);
        }
    }
    sink += (int)n;
    return (thread_cpu_ns() - t0) / ((double)passes * FRAMES);
}

static double srcline_pass(void)
{
    const char *file;
    int line, n = 0;
    double t0 = thread_cpu_ns();
    for (int i = 0; i < FRAMES; i++)
        n += st_sym_srcline(stack[i], &file, &line);
    sink += n;
    return (thread_cpu_ns() - t0) / FRAMES;
}

#define LOOKERS 4
#define RESETS 200

static atomic_bool stop;

static void *looker(void *arg)
{
    unsigned x = (unsigned)(uintptr_t)arg;
    StSym s;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        x = x * 1103515245u + 12345u;
        st_sym_lookup(stack[(x >> 16) % FRAMES], &s);
    }
    return NULL;
}

/* st_sym_reset's duration while LOOKERS threads look up: median and max
 * in us. */
static void contended_reset(double *med, double *max)
{
    static double v[RESETS];
    pthread_t t[LOOKERS];
    for (int i = 0; i < LOOKERS; i++)
        pthread_create(&t[i], NULL, looker, (void *)(uintptr_t)(i + 1));
    *max = 0;
    for (int r = 0; r < RESETS; r++) {
        usleep(200);
        double t0 = now_ns();
        st_sym_reset();
        v[r] = (now_ns() - t0) / 1000;
        *max = v[r] > *max ? v[r] : *max;
    }
    atomic_store(&stop, true);
    for (int i = 0; i < LOOKERS; i++)
        pthread_join(t[i], NULL);
    *med = median(v, RESETS);
}

int main(int argc, char **argv)
{
    int runs = 7;
    long passes = 20000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = (int)arg_long("--runs", argv[++i], 1, 64);
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc)
            passes = arg_long("--passes", argv[++i], 1, 100000000);
        else
            die("usage", "bench_sym [--runs N] [--passes N]");
    }
    chain_1();
    if (depth != FRAMES)
        die("capture", "fewer than 30 frames");
    int resolved = 0;
    double first = lookup_pass(&resolved);
    double cold[64], warm[64], batch[64], lcold[64], lwarm[64];
    for (int r = 0; r < runs; r++) {
        st_sym_reset();
        cold[r] = lookup_pass(&resolved);
        warm[r] = cached(passes, false);
        batch[r] = cached(passes, true);
        lcold[r] = srcline_pass();
        lwarm[r] = srcline_pass();
    }
    double reset_med, reset_max;
    contended_reset(&reset_med, &reset_max);
    printf("symbolize_ns_per_frame_cold=%.1f\n", median(cold, runs));
    printf("symbolize_ns_per_frame_first=%.1f\n", first);
    printf("symbolize_ns_per_frame=%.2f\n", median(warm, runs));
    printf("symbolize_batch_ns_per_frame=%.2f\n", median(batch, runs));
    printf("srcline_ns_per_frame_cold=%.1f\n", median(lcold, runs));
    printf("srcline_ns_per_frame=%.1f\n", median(lwarm, runs));
    printf("resolved=%d\n", resolved);
    printf("reset_us=%.1f\nreset_max_us=%.1f\n", reset_med, reset_max);
    return 0;
}
