/*
 * tests/stress/stress_flags_all.c - flags for all processes changed
 * while processes run, spawn and exit on two schedulers, and while
 * another thread looks at their flags (trace/tr_flags_all.c: the
 * generation, the folds by the scheduler and by lookers, the wait).
 *
 * Four workers loop for ever; a spawner process spawns children that run
 * once and exit.  Each of them, for each call of the traced sf:f/1, first
 * takes a ticket J from sf_nat:pre/0 (which notes how many changes had
 * returned: done), then calls f(J), then calls sf_nat:post/1 (which notes
 * whether a change had started since).  The host thread makes 400
 * changes tvm_trace_flags_all(TVM_TRACE_ALL, call, on / off in turn),
 * counting `started` before and `done` after each.  A call whose ticket
 * saw done = k and whose post saw started = k ran wholly after change k
 * returned and before change k + 1 began: it must have been traced
 * exactly when change k turned the call flag on (BEAM's guarantee; a
 * child spawned meanwhile included).  A looker thread reads the workers'
 * flags with tvm_trace_flags_get (folding them in, against the
 * schedulers' folds): a read with no change running around it must give
 * the flags of the last change.  The callers are paced (nat_pre): at
 * most some hundreds of calls per change and per window between two, so
 * that every window gets its calls however the OS shares the CPUs.  The
 * run must have checked thousands of calls both ways, and every check
 * must hold; run under TSan and ASan.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/tracevm.h"
#include "tests/stress/stress_util.h"

static const char *const stress_name = "stress_flags_all";

enum { WORKERS = 4, CHANGES = 400, MAX_TICKETS = 4000000 };

/* Changes begun and returned (the host is their only writer). */
static atomic_long started, done;
static atomic_long tickets;
/* Calls whose post found no change begun since their pre's done: the
 * calls the check can use (the host waits for some in each window). */
static atomic_long usable;
/* `usable` when the current window began (the host writes it right after
 * `done`). */
static atomic_long window_base;
/* `tickets` when the current change began (the host writes it before
 * `started`). */
static atomic_long change_base;
/* Usable calls a window may take, and tickets a change may see, before
 * the callers pause (nat_pre). */
enum { WINDOW_CALLS = 200, CHANGE_CALLS = 500 };
static atomic_int stop;
/* By ticket: done when it was taken (-1: none), and whether the call ran
 * between two changes (1) or not (2). */
static int *seen_done;
static unsigned char *between;
/* By ticket: call events seen (the collector is the only writer). */
static unsigned char *traced;

static tvm_status nat_pre(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res,
                          void *data)
{
    (void)argc, (void)argv, (void)data;
    /* Pace the callers: once the window between two changes holds
     * WINDOW_CALLS usable calls, or a running change has seen
     * CHANGE_CALLS tickets taken, they sleep in the VM (-2: once/0 waits
     * 1 ms and asks again), so that the tickets last all the changes even
     * when the host thread is kept off the CPU (they did not: a fast
     * machine spent 2.9 M of the 4 M tickets before the 20th change, most
     * of them while a change ran).  Calls still run during every change,
     * against its folds.  A sleep in the VM, not here: a change's
     * thread-progress wait needs the scheduler back from the native. */
    bool changing = atomic_load(&started) != atomic_load(&done);
    if (!atomic_load(&stop) &&
        (changing ? atomic_load(&tickets) - atomic_load(&change_base) >= CHANGE_CALLS
                  : atomic_load(&usable) - atomic_load(&window_base) >= WINDOW_CALLS))
        return tvm_make_int(env, -2, res);
    long d = atomic_load(&done);
    long j = atomic_fetch_add(&tickets, 1);
    if (j >= MAX_TICKETS)
        return tvm_make_int(env, -1, res);
    seen_done[j] = (int)d;
    return tvm_make_int(env, j, res);
}

/* post(J): 1 when the run must stop. */
static tvm_status nat_post(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res,
                           void *data)
{
    (void)argc, (void)data;
    int64_t j;
    if (tvm_get_int(env, argv[0], &j) != TVM_OK)
        return tvm_raise_badarg(env);
    if (j >= 0) {
        between[j] = atomic_load(&started) == seen_done[j] ? 1 : 2;
        if (between[j] == 1)
            atomic_fetch_add(&usable, 1);
    }
    return tvm_make_int(env, atomic_load(&stop) || j < 0, res);
}

static const char sf_text[] =
    "module sf\n"
    "export f/1, worker/1, child/0, spawner/0\n"
    "function f/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    /* once(): pre, f(J), post(J): post's answer */
    "function once/0 regs 2\n"
    "again:\n"
    "    callx r0, r0, sf_nat:pre/0\n"
    "    jeqi r0, -2, pause\n"
    "    move r1, r0\n"
    "    callx r1, r1, sf:f/1\n"
    "    callx r0, r0, sf_nat:post/1\n"
    "    ret r0\n"
    /* pre said the window has its calls: sleep 1 ms in the VM (no
     * message comes), which leaves the scheduler free, and ask again */
    "pause:\n"
    "    loadi r1, 1\n"
    "    wait r1, slept\n"
    "slept:\n"
    "    jump again\n"
    "end\n"
    /* worker(K): once() until it says stop (K names it in a crash) */
    "function worker/1 regs 1\n"
    "top:\n"
    "    call r0, r0, once/0\n"
    "    jeqi r0, 1, done\n"
    "    jump top\n"
    "done:\n    ret r0\n"
    "end\n"
    "function child/0 regs 1\n    call r0, r0, once/0\n    ret r0\nend\n"
    /* spawner(): children, one at a time apart from what runs, until
     * its own once() says stop */
    "function spawner/0 regs 3\n"
    "top:\n"
    "    loadk r0, sf\n    loadk r1, child\n    loadk r2, []\n"
    "    callx r0, r0, erlang:spawn/3\n"
    "    call r0, r0, once/0\n"
    "    jeqi r0, 1, done\n"
    "    jump top\n"
    "done:\n    ret r0\n"
    "end\n";

static void on_event(const tvm_trace_event *ev, void *data)
{
    (void)data;
    const char *a = strstr(ev->text, "{sf,f,[");
    long j = a ? strtol(a + 7, NULL, 10) : -1;
    if (j >= 0 && j < MAX_TICKETS && traced[j] < 255)
        traced[j]++;
}

/* The looker: flags of the workers, with no change around the read. */
typedef struct Looker {
    tvm_vm *vm;
    tvm_pid pids[WORKERS];
    long checked, wrong, unreadable;
} Looker;

static void *looker_main(void *arg)
{
    Looker *l = arg;
    tvm_env *env = tvm_env_new(l->vm);
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        long d = atomic_load(&done);
        unsigned f = 0;
        if (tvm_trace_flags_get(env, l->pids[i % WORKERS], &f) != TVM_OK) {
            /* A worker exits once told to stop, or once the tickets ran
             * out (its pre took one past MAX_TICKETS before it exited,
             * so the count read here shows it): a machine that keeps the
             * host thread off the CPU while the workers run gets there
             * before the last change.  Any other failure is a worker
             * gone while it should run. */
            l->unreadable += !atomic_load(&stop) && atomic_load(&tickets) < MAX_TICKETS;
            continue;
        }
        if (atomic_load(&started) != d)
            continue;
        l->checked++;
        if (f != (d % 2 ? (unsigned)TVM_TRACE_CALL : 0u))
            l->wrong++;
    }
    tvm_env_free(env);
    return NULL;
}

static int check(void)
{
    long n = atomic_load(&tickets), on = 0, off = 0;
    n = n > MAX_TICKETS ? MAX_TICKETS : n;
    for (long j = 0; j < n; j++) {
        if (between[j] != 1)
            continue;
        bool want = seen_done[j] % 2 == 1;
        if (traced[j] != (want ? 1 : 0)) {
            fprintf(stderr, "%s: f(%ld), called after change %d returned and before the next, "
                            "has %d call events, expected %d\n",
                    stress_name, j, seen_done[j], traced[j], want);
            return 1;
        }
        *(want ? &on : &off) += 1;
    }
    printf("%s: %ld calls, %ld checked traced and %ld untraced across %d changes\n",
           stress_name, n, on, off, CHANGES);
    if (on < 1000 || off < 1000)
        return fail("too few calls checked");
    return 0;
}

int main(void)
{
    seen_done = calloc(MAX_TICKETS, sizeof *seen_done);
    between = calloc(MAX_TICKETS, 1);
    traced = calloc(MAX_TICKETS, 1);
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (tvm_register_native(vm, "sf_nat", "pre", 0, nat_pre, NULL, &err) != TVM_OK ||
        tvm_register_native(vm, "sf_nat", "post", 1, nat_post, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "sf.tasm", sf_text, sizeof sf_text - 1, &err) != TVM_OK ||
        tvm_trace_pattern(vm, "sf:f/1", TVM_TP_TRUE, TVM_TP_GLOBAL, NULL, &err) != TVM_OK)
        return fail(err.message);
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK,
                            .callback = on_event, .policy = TVM_TRACE_LOSSLESS };
    if (tvm_trace_start(vm, &o, &err) != TVM_OK)
        return fail(err.message);
    tvm_env *env = tvm_env_new(vm);
    Looker l = { .vm = vm };
    for (int i = 0; i < WORKERS; i++)
        l.pids[i] = spawn_int(env, "sf", "worker", i);
    tvm_pid sp;
    if (tvm_spawn(env, "sf", "spawner", 0, NULL, &sp) != TVM_OK)
        return fail("spawning the spawner");
    pthread_t looker;
    pthread_create(&looker, NULL, looker_main, &l);
    for (long k = 1; k <= CHANGES; k++) {
        /* Each window holds calls that ran wholly inside it: traced calls
         * under the lossless policy are far slower than untraced ones (a
         * sanitizer's callback sink keeps them waiting for room), and a
         * wait for tickets alone let a fast machine spend them all in the
         * untraced windows (0-64 traced calls checked).  A few calls of
         * the last window may still count here, so ask for 20. */
        long u0 = atomic_load(&window_base);
        while (atomic_load(&usable) < u0 + 20 && atomic_load(&tickets) < MAX_TICKETS)
            usleep(50);
        atomic_store(&change_base, atomic_load(&tickets));
        atomic_store(&started, k);
        if (tvm_trace_flags_all(vm, TVM_TRACE_ALL, TVM_TRACE_CALL, k % 2 == 1) != TVM_OK)
            return fail("tvm_trace_flags_all");
        atomic_store(&done, k);
        atomic_store(&window_base, atomic_load(&usable));
    }
    long t0 = atomic_load(&tickets);
    while (atomic_load(&tickets) < t0 + 20 && atomic_load(&tickets) < MAX_TICKETS)
        usleep(50);
    atomic_store(&stop, 1);
    pthread_join(looker, NULL);
    tvm_term r;
    for (int i = 0; i < WORKERS; i++)
        if (tvm_join(env, l.pids[i], &r) != TVM_OK)
            return fail("a worker raised");
    if (tvm_join(env, sp, &r) != TVM_OK)
        return fail("the spawner raised");
    tvm_wait_idle(vm);
    tvm_trace_stop(vm);
    printf("%s: the looker checked %ld reads\n", stress_name, l.checked);
    if (l.unreadable)
        return fail("the looker could not read a live worker's flags");
    if (l.wrong)
        return fail("the looker read flags that no change had set");
    int rc = check();
    tvm_env_free(env);
    tvm_destroy(vm);
    free(seen_done);
    free(between);
    free(traced);
    return rc;
}
