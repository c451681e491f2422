/*
 * tests/stress/stress_trace_vm.c - the VM's trace pipeline started and
 * stopped, and trace flags changed for every process, while events are
 * being written: two processes on two schedulers call traced functions
 * and spawn short-lived children (call, spawn and exit events on the
 * scheduler rings), and a foreign thread calls through its own call
 * context and spawns from it (the shared ring, and spawns outside any
 * tvm_call).  Each of the 200 cycles starts a pipeline into a file, lets
 * it run a little, changes flags of every existing process and stops it;
 * every file must hold whole, well-formed event lines and the last one
 * some events.  Every other cycle uses the lossless policy with a ring
 * small enough to fill, so processes are suspended for room and stops
 * come while some are (they must be woken, and must not touch the old
 * pipeline).  Processes also have the running flag (in/out events at
 * every yield, from both switch paths).  Under TSan (`scons mode=tsan test`) this checks the
 * retirement protocol of trace/tr_vm.c (unpublish, thread progress,
 * free); under ASan that nothing is used after it is freed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/tracevm.h"
#include "tests/stress/stress_util.h"
#include "vm/atomics.h"

static const char *const stress_name = "stress_trace_vm";

static VmAtomic stop;

static tvm_status nat_stop(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res,
                           void *data)
{
    (void)argc, (void)argv, (void)data;
    return tvm_make_int(env, (int64_t)vm_atomic_load_relaxed(&stop), res);
}

static const char sv_text[] =
    "module sv\n"
    "export loop/1, f/1, child/0\n"
    "function f/1 regs 1\n    call r0, r0, g/1\n    ret r0\nend\n"
    "function g/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function child/0 regs 1\n    loadi r0, 7\n    callx r0, r0, sv:f/1\n    ret r0\nend\n"
    /* loop(X): f(X) locally and remotely, spawn child(), until st:stop() */
    "function loop/1 regs 4\n"
    "top:\n"
    "    call r0, r0, f/1\n"
    "    callx r0, r0, sv:f/1\n"
    "    loadk r1, sv\n    loadk r2, child\n    loadk r3, []\n"
    "    callx r1, r1, erlang:spawn/3\n"
    "    callx r1, r1, st:stop/0\n"
    "    jnei r1, 0, done\n"
    "    jump top\n"
    "done:\n"
    "    ret r0\n"
    "end\n";

/* The foreign thread: calls and spawns through its own traced call context. */
static void *foreign_main(void *arg)
{
    tvm_env *env = tvm_env_new(arg);
    tvm_trace_flags(env, 0, TVM_TRACE_CALL | TVM_TRACE_PROCS, true);
    tvm_term a, r;
    tvm_make_int(env, 1, &a);
    for (unsigned i = 0; !vm_atomic_load_relaxed(&stop); i++) {
        size_t mark = tvm_handles_mark(env);
        if (tvm_call(env, "sv", "f", 1, &a, &r) != TVM_OK)
            exit(fail("sv:f failed on the foreign thread"));
        tvm_pid pid;
        if (i % 8 == 0 && (tvm_spawn(env, "sv", "child", 0, NULL, &pid) != TVM_OK ||
                           tvm_join(env, pid, &r) != TVM_OK))
            exit(fail("sv:child failed on the foreign thread"));
        tvm_handles_release(env, mark);
    }
    tvm_env_free(env);
    return NULL;
}

/* Every line of the file is one whole event; returns how many. */
static long check_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        exit(fail("cannot read a trace file"));
    char line[512];
    long n = 0;
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        bool whole = len > 2 && line[len - 1] == '\n' && line[len - 2] == '}';
        if (!whole || (strncmp(line, "{trace,<0.", 10) && strncmp(line, "{trace_ts,<0.", 13) &&
                       strncmp(line, "{trace_lost,", 12)))
            exit(fail(line));
        n++;
    }
    fclose(f);
    return n;
}

/* One cycle: start into path, run, change flags of all, stop. */
static long cycle(tvm_vm *vm, const char *path, int k)
{
    tvm_error err;
    bool lossless = k % 2 == 1;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options),
                            .format = TVM_TRACE_TEXT, .path = path,
                            .ring_bytes = lossless ? 1 << 12 : 1 << 14,
                            .policy = lossless ? TVM_TRACE_LOSSLESS : TVM_TRACE_DROP };
    if (tvm_trace_start(vm, &o, &err) != TVM_OK)
        exit(fail(err.message));
    usleep((useconds_t)(rand() % 2000));
    unsigned f = (k % 3 == 0) ? TVM_TRACE_ARITY : TVM_TRACE_TIMESTAMP;
    if (tvm_trace_flags_all(vm, TVM_TRACE_ALL, f, k % 2 == 0) != TVM_OK)
        exit(fail("tvm_trace_flags_all"));
    usleep((useconds_t)(rand() % 2000));
    if (tvm_trace_stop(vm) != TVM_OK)
        exit(fail("tvm_trace_stop"));
    return check_file(path);
}

int main(void)
{
    alarm(120);
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (!vm || tvm_register_native(vm, "st", "stop", 0, nat_stop, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "sv.tasm", sv_text, sizeof sv_text - 1, &err) != TVM_OK ||
        tvm_trace_pattern(vm, "sv:_/_", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err) != TVM_OK)
        return fail(err.message);
    tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL | TVM_TRACE_PROCS | TVM_TRACE_RUNNING,
                        true);
    tvm_env *env = tvm_env_new(vm);
    tvm_pid loops[2] = { spawn_int(env, "sv", "loop", 1), spawn_int(env, "sv", "loop", 2) };
    pthread_t foreign;
    pthread_create(&foreign, NULL, foreign_main, vm);
    char path[] = "/tmp/stress_trace_vm.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return fail("mkstemp");
    close(fd);
    srand(1);
    long last = 0;
    for (int k = 0; k < 200; k++)
        last = cycle(vm, path, k);
    vm_atomic_store_relaxed(&stop, 1);
    pthread_join(foreign, NULL);
    tvm_term r;
    for (int i = 0; i < 2; i++)
        if (tvm_join(env, loops[i], &r) != TVM_OK)
            return fail("a loop failed");
    unlink(path);
    tvm_env_free(env);
    tvm_destroy(vm);
    if (last == 0)
        return fail("the last cycle wrote no event");
    printf("%s: ok (last cycle: %ld events)\n", stress_name, last);
    return 0;
}
