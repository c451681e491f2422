/*
 * tests/stress/stress_trace_vm.c - the VM's trace pipeline started and
 * stopped, and trace flags changed for every process, while events are
 * being written: two processes on two schedulers call traced functions
 * and spawn short-lived children (call, spawn and exit events on the
 * scheduler rings), and a foreign thread calls through its own call
 * context and spawns from it (the shared ring, and spawns outside any
 * tvm_call).  Each of the 200 cycles starts a pipeline into a file, lets
 * it run a little, changes flags of every existing process and stops it;
 * every file must hold whole, well-formed event lines, and a last start
 * after them all must deliver events.  Every other cycle uses the lossless policy with a ring
 * small enough to fill, so processes are suspended for room and stops
 * come while some are (they must be woken, and must not touch the old
 * pipeline).  Processes also have the running flag (in/out events at
 * every yield, from both switch paths).  Under TSan (`scons mode=tsan test`) this checks the
 * retirement protocol of trace/tr_vm.c (unpublish, thread progress,
 * free); under ASan that nothing is used after it is freed.
 *
 * What the files must hold, line by line: only the events this program
 * makes (calls of sv's functions, spawns of sv:child and their spawned
 * events, normal exits, in and out), and each process's calls in program order: f(X) is followed
 * by g(X) (f calls g), a loop's g(X) by f(X + 1) (loop calls f with g's
 * result), a child's child() by f(7), and nothing after its g(7).  A
 * lossless file may not report a loss nor break that order anywhere; a
 * drop file may break it only if it reports a loss (anywhere: a ring's
 * report comes where its next event fits, while a process that moved to
 * another scheduler may have gone on).  The run must have
 * checked some thousands of such steps in lossless files.
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

/* Per process: its last call seen in the current file (the calls of a
 * lossless file must follow the program order exactly). */
typedef struct Last {
    int file;       /* the cycle this entry belongs to */
    char fun;       /* 'f', 'g', 'c' (child), 'l' (loop), 0: none yet */
    long arg;       /* its argument, -1 when the event showed the arity only */
} Last;

static Last *last;
static size_t nlast;
static tvm_pid loops[2];    /* the two sv:loop processes */
static long steps_checked;

static Last *last_of(uint64_t pid, int file)
{
    if (pid >= nlast) {
        size_t n = nlast ? nlast : 1024;
        while (n <= pid)
            n *= 2;
        last = realloc(last, n * sizeof *last);
        memset(last + nlast, 0, (n - nlast) * sizeof *last);
        nlast = n;
    }
    if (last[pid].file != file)
        last[pid] = (Last){ .file = file };
    return &last[pid];
}

/* Is `cur` (with argument arg) a possible next call of pid after l?
 * *compared: whether there was anything to compare. */
static bool in_order(uint64_t pid, const Last *l, char cur, long arg, bool *compared)
{
    *compared = l->fun && l->arg >= 0 && arg >= 0;
    if (!*compared)
        return true;    /* nothing to compare (first call, or arity only) */
    bool loop = pid == loops[0] || pid == loops[1];
    switch (l->fun) {
    case 'f': return cur == 'g' && arg == l->arg;
    case 'g': return cur == 'f' && (loop ? arg == l->arg + 1 : pid == 0 && arg == 1);
    case 'c': return cur == 'f' && arg == 7;
    default: return true;
    }
}

/* The line's event without its `{trace(_ts),<0.P.0>,` and, for
 * trace_ts, the `,TS` stamp: in *body (NUL-terminated, no closing }). */
static bool split(char *line, uint64_t *pid, char **body)
{
    bool ts = strncmp(line, "{trace_ts,<0.", 13) == 0;
    if (!ts && strncmp(line, "{trace,<0.", 10) != 0)
        return false;
    char *p = line + (ts ? 13 : 10), *end;
    *pid = strtoull(p, &end, 10);
    if (end == p || strncmp(end, ".0>,", 4) != 0)
        return false;
    size_t len = strlen(end + 4);
    if (len < 2 || end[4 + len - 1] != '}')
        return false;
    end[4 + len - 1] = '\0';
    if (ts) {
        char *comma = strrchr(end + 4, ',');
        if (!comma || !comma[1] || strspn(comma + 1, "0123456789") != strlen(comma + 1))
            return false;
        *comma = '\0';
    }
    *body = end + 4;
    return true;
}

static bool known_mfa(const char *s)
{
    static const char *const mfas[] = { "0", "{sv,child,0}", "{sv,loop,1}", "{sv,f,1}",
                                        "{sv,g,1}" };
    for (size_t i = 0; i < sizeof mfas / sizeof mfas[0]; i++)
        if (!strcmp(s, mfas[i]))
            return true;
    return false;
}

/* Checks one file (see the header); returns its number of events. */
static long check_file(const char *path, int file, bool lossless)
{
    FILE *f = fopen(path, "r");
    if (!f)
        exit(fail("cannot read a trace file"));
    char line[512], copy[512];
    long n = 0;
    bool lost = false;
    char first_break[640] = "";
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (len < 2 || line[len - 1] != '\n')
            exit(fail("a partial line"));
        line[len - 1] = '\0';
        snprintf(copy, sizeof copy, "%s", line);
        n++;
        unsigned long sched, count;
        char tail;
        if ((sscanf(line, "{trace_lost,{sched,%lu},%lu%c", &sched, &count, &tail) == 3 ||
             sscanf(line, "{trace_lost,shared,%lu%c", &count, &tail) == 2) &&
            tail == '}') {
            if (lossless) {
                fprintf(stderr, "%s: a loss under the lossless policy: %s\n", stress_name, copy);
                exit(1);
            }
            lost = true;
            continue;
        }
        uint64_t pid;
        char *body, fun[16];
        if (!split(line, &pid, &body))
            exit(fail(copy));
        Last *l = last_of(pid, file);
        long arg = -1;
        int used = 0;
        bool ok;
        if (sscanf(body, "call,{sv,%15[a-z],%n", fun, &used) == 1 && used) {
            char *a = body + used;
            char c = !strcmp(fun, "child") ? 'c' : !strcmp(fun, "loop") ? 'l' : fun[0];
            ok = strchr("fgcl", c) && (c != 'f' || !strcmp(fun, "f")) &&
                 (c != 'g' || !strcmp(fun, "g"));
            if (a[0] == '[') {
                char *end;
                arg = strtol(a + 1, &end, 10);
                ok = ok && (c == 'c' ? !strcmp(a, "[]}") : end > a + 1 && !strcmp(end, "]}"));
                if (c == 'c')
                    arg = 0;
            } else {
                ok = ok && !strcmp(a, c == 'c' ? "0}" : "1}");
            }
            bool compared;
            bool good = in_order(pid, l, c, arg, &compared);
            steps_checked += lossless && compared;
            if (ok && !good && lossless) {
                fprintf(stderr, "%s: process %llu: %s after %c(%ld) (lossless file)\n",
                        stress_name, (unsigned long long)pid, copy, l->fun, l->arg);
                exit(1);
            }
            if (ok && !good && !first_break[0])
                snprintf(first_break, sizeof first_break, "process %llu: %s after %c(%ld)",
                         (unsigned long long)pid, copy, l->fun, l->arg);
            l->fun = c;
            l->arg = arg;
        } else if (!strncmp(body, "spawn,<0.", 9) || !strncmp(body, "spawned,<0.", 11)) {
            /* spawn names the child, spawned (the child's) its parent */
            char *end;
            strtoull(body + (body[5] == 'e' ? 11 : 9), &end, 10);
            ok = !strcmp(end, ".0>,{sv,child,[]}");
        } else if (!strncmp(body, "in,", 3) || !strncmp(body, "out,", 4)) {
            ok = known_mfa(body + (body[0] == 'i' ? 3 : 4));
        } else {
            ok = !strcmp(body, "exit,normal");
        }
        if (!ok)
            exit(fail(copy));
    }
    fclose(f);
    /* A loss is reported in its ring's stream where the next event fits
     * (or at the stop), which may come after a process that moved to
     * another scheduler went on: anywhere in the file, then. */
    if (first_break[0] && !lost) {
        fprintf(stderr, "%s: %s (drop file without a loss report)\n", stress_name, first_break);
        exit(1);
    }
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
    unsigned f = (k % 3 == 0) ? TVM_TRACE_ARITY : TVM_TRACE_MONOTONIC_TIMESTAMP;
    if (tvm_trace_flags_all(vm, TVM_TRACE_ALL, f, k % 2 == 0) != TVM_OK)
        exit(fail("tvm_trace_flags_all"));
    usleep((useconds_t)(rand() % 2000));
    if (tvm_trace_stop(vm) != TVM_OK)
        exit(fail("tvm_trace_stop"));
    return check_file(path, k + 1, lossless);
}

/* After all the cycles, the pipeline still works: a last start into a
 * callback that counts, stopped once 100 events arrived (a minute without
 * them fails: a hang guard, not a measurement). */
static VmAtomic counted;

static void count_event(const tvm_trace_event *ev, void *data)
{
    (void)ev, (void)data;
    vm_atomic_fetch_add_relaxed(&counted, 1);
}

static int last_start(tvm_vm *vm)
{
    tvm_error err;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK, .callback = count_event };
    if (tvm_trace_start(vm, &o, &err) != TVM_OK)
        return fail(err.message);
    for (int i = 0; vm_atomic_load_relaxed(&counted) < 100; i++) {
        if (i > 60000)
            return fail("no events after the last start");
        usleep(1000);
    }
    if (tvm_trace_stop(vm) != TVM_OK)
        return fail("tvm_trace_stop");
    return 0;
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
    loops[0] = spawn_int(env, "sv", "loop", 1);
    loops[1] = spawn_int(env, "sv", "loop", 2);
    pthread_t foreign;
    pthread_create(&foreign, NULL, foreign_main, vm);
    char path[] = "/tmp/stress_trace_vm.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return fail("mkstemp");
    close(fd);
    srand(1);
    /* 200 cycles, and on until the lossless files let 1,000 steps of
     * program order be checked (some thousands in practice). */
    long events = 0;
    int k = 0;
    for (; k < 200 || (steps_checked < 1000 && k < 2000); k++)
        events += cycle(vm, path, k);
    if (last_start(vm) != 0)
        return 1;
    vm_atomic_store_relaxed(&stop, 1);
    pthread_join(foreign, NULL);
    tvm_term r;
    for (int i = 0; i < 2; i++)
        if (tvm_join(env, loops[i], &r) != TVM_OK)
            return fail("a loop failed");
    unlink(path);
    tvm_env_free(env);
    tvm_destroy(vm);
    if (steps_checked < 1000)
        return fail("fewer than 1,000 call steps checked in 2,000 cycles");
    printf("%s: ok (%d cycles, %ld events; %ld call steps in order in lossless files)\n",
           stress_name, k, events, steps_checked);
    free(last);
    return 0;
}
