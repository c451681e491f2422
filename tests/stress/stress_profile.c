/*
 * tests/stress/stress_profile.c - the sampling profiler against 10,000
 * processes on every scheduler (run under ASan and TSan too, as every
 * stress program is).  Each worker computes, allocates a list, sends
 * itself a message and waits up to 1 ms for another that never comes,
 * for a number of rounds, and exits.  In turn:
 *   - an on-CPU profile at 4,999 Hz over a population of 10,000, with a
 *     thread rendering the profile in every format while it runs;
 *   - 30 on-CPU profiles started and stopped back to back while 1,000
 *     workers run (a session's end against handlers in flight);
 *   - an off-CPU profile and an allocation profile (1 KiB) of a
 *     population of 10,000 each.
 * Every profile must hold samples of the workers' functions and render
 * in every format; nothing may crash, deadlock or, under TSan, race.
 * A plain program (exit 0 = pass).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "include/tracevm.h"
#include "tests/stress/stress_util.h"

static const char *const stress_name = "stress_profile";

static const char *const src =
    "module sp\n"
    "export worker/1\n"
    "function spin/1 regs 1\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    addi r0, r0, -1\n"
    "    jump loop\n"
    "done:\n"
    "    ret r0\n"
    "end\n"
    "function build/1 regs 2\n"
    "    loadk r1, []\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    cons r1, r0, r1\n"
    "    addi r0, r0, -1\n"
    "    jump loop\n"
    "done:\n"
    "    ret r1\n"
    "end\n"
    /* worker(Rounds) */
    "function worker/1 regs 6\n"
    "top:\n"
    "    jeqi r0, 0, done\n"
    "    loadi r1, 300\n"
    "    call r1, r1, spin/1\n"
    "    loadi r1, 40\n"
    "    call r1, r1, build/1\n"
    "    self r2\n"
    "    loadk r3, ping\n"
    "    callx r2, r2, erlang:send/2\n"
    "    recv r2, none\n"
    "    accept\n"
    "none:\n"
    "    loadi r4, 1\n"
    "    wait r4, next\n"
    "next:\n"
    "    addi r0, r0, -1\n"
    "    jump top\n"
    "done:\n"
    "    ret r0\n"
    "end\n";

enum { PROCS = 10000 };

static tvm_vm *vm;
static atomic_int rendering;

static void population(tvm_env *env, int rounds, int procs)
{
    tvm_pid *pids = malloc((size_t)procs * sizeof *pids);
    for (int i = 0; i < procs; i++)
        pids[i] = spawn_int(env, "sp", "worker", rounds);
    for (int i = 0; i < procs; i++) {
        tvm_term r;
        if (tvm_join(env, pids[i], &r) != TVM_OK)
            exit(fail("a worker failed"));
    }
    free(pids);
}

/* Renders p in every format; false if a rendering failed or lacks the
 * workers' functions (when `need` says they must be there). */
static bool render_all(tvm_profile *p, bool need)
{
    for (int f = TVM_PROFILE_FOLDED; f <= TVM_PROFILE_SVG; f++) {
        for (int merge = 0; merge < 2; merge++) {
            tvm_profile_write_options w = { .size = sizeof(tvm_profile_write_options), .format = (tvm_profile_format)f, .merge = merge,
                                            .lines = f == TVM_PROFILE_FOLDED && merge };
            char *out;
            size_t n;
            tvm_error err;
            if (tvm_profile_render(p, &w, &out, &n, &err) != TVM_OK) {
                fprintf(stderr, "%s: render: %s\n", stress_name, err.message);
                return false;
            }
            bool ok = !need || f == TVM_PROFILE_PPROF || memmem(out, n, "sp:", 3) != NULL;
            free(out);
            if (!ok) {
                fprintf(stderr, "%s: format %d has no sp: frame\n", stress_name, f);
                return false;
            }
        }
    }
    return true;
}

static void *renderer(void *arg)
{
    tvm_profile *p = arg;
    while (atomic_load(&rendering)) {
        if (!render_all(p, false))
            exit(fail("rendering while profiling failed"));
        struct timespec ts = { 0, 100 * 1000000L };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static tvm_profile *start(tvm_profile_kind kind, unsigned hz, size_t interval)
{
    tvm_profile_options o = { .size = sizeof(tvm_profile_options), .kind = kind, .hz = hz, .alloc_interval = interval };
    tvm_profile *p;
    tvm_error err;
    if (tvm_profile_start(vm, &o, &p, &err) != TVM_OK) {
        fprintf(stderr, "%s: start: %s\n", stress_name, err.message);
        exit(1);
    }
    return p;
}

static double secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double t0;

static void check(tvm_profile *p, const char *what)
{
    tvm_profile_stats st;
    tvm_profile_get_stats(p, &st);
    printf("%s: %s: %llu samples, %llu lost, %llu stacks (at %.1f s)\n", stress_name, what,
           (unsigned long long)st.samples, (unsigned long long)st.lost,
           (unsigned long long)st.stacks, secs() - t0);
    if (st.samples == 0)
        exit(fail("a profile without samples"));
    if (!render_all(p, true))
        exit(fail("rendering failed"));
}

static void *churn(void *arg)
{
    tvm_env *env = tvm_env_new(vm);
    population(env, *(int *)arg, 1000);
    tvm_env_free(env);
    return NULL;
}

int main(void)
{
    t0 = secs();
    tvm_config cfg = { .size = sizeof(tvm_config), .fiber_slabs = true };
    vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    tvm_error err;
    if (tvm_load_string(vm, "sp", src, strlen(src), &err) != TVM_OK)
        return fail(err.message);

    tvm_profile *p = start(TVM_PROFILE_CPU, 4999, 0);
    atomic_store(&rendering, 1);
    pthread_t r;
    pthread_create(&r, NULL, renderer, p);
    population(env, 2, PROCS);
    atomic_store(&rendering, 0);
    pthread_join(r, NULL);
    tvm_profile_stop(p);
    check(p, "cpu");
    tvm_profile_free(p);

    /* Sessions started and stopped while a population runs. */
    int rounds = 1;
    pthread_t c;
    pthread_create(&c, NULL, churn, &rounds);
    for (int i = 0; i < 30; i++) {
        p = start(TVM_PROFILE_CPU, 4999, 0);
        struct timespec ts = { 0, 2 * 1000000L };
        nanosleep(&ts, NULL);
        tvm_profile_free(p);
    }
    pthread_join(c, NULL);
    printf("%s: 30 sessions under load (at %.1f s)\n", stress_name, secs() - t0);

    p = start(TVM_PROFILE_OFF, 0, 0);
    population(env, 1, PROCS);
    tvm_profile_stop(p);
    check(p, "off");
    tvm_profile_free(p);

    p = start(TVM_PROFILE_ALLOC, 0, 1024);
    population(env, 1, PROCS);
    tvm_profile_stop(p);
    check(p, "alloc");
    tvm_profile_free(p);

    tvm_env_free(env);
    tvm_destroy(vm);
    printf("%s: ok\n", stress_name);
    return 0;
}
