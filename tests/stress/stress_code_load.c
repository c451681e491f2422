/*
 * tests/stress/stress_code_load.c - run-time loading from VM code and
 * from C at once, while processes on both schedulers call into the module
 * being replaced.  Loader processes loop over code:load_binary/3 of
 * module hot (versions 2..VERSIONS) and erlang:purge_module/1, a toggler
 * sets and clears call_count patterns on hot, an embedder thread loads
 * the same module with tvm_load_string, and workers call hot:v/0 remotely.
 * A runner process sits in a receive inside the version it started in
 * while that version is replaced and purged many times over.
 *
 * What is checked, exactly: every hot:v/0 a worker makes returns the
 * number of some version (1..VERSIONS); every load from VM code is
 * {module, hot} or {error, not_purged} (another loader's old code was not
 * purged yet); every tvm_load_string is TVM_OK; the runner, woken at the
 * end, still runs the version it started in (its local call answers the
 * number it reported before the reloads) and its remote call reaches a
 * current version; every trace_pattern call matches hot's two functions.
 * A plain program (exit 0 = pass), run under ThreadSanitizer by
 * `scons mode=tsan test`.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/tracevm.h"

#define VERSIONS 8
#define WORKERS 3
#define LOADERS 2
#define ROUNDS 100         /* loader passes over versions 2..VERSIONS */
#define CALLS 100000       /* hot:v/0 calls per worker */
#define C_LOADS 200        /* tvm_load_string of the embedder thread */

static tvm_vm *vm;

/* times(F, N): drv:F() N times: ok, or the first result that is not ok.
 * probe(): hot:v/0: ok, or {bad, V} when V is not in 1..VERSIONS (a
 * worker runs times(probe, CALLS)).  loader(Texts, Rounds): each text
 * loaded, then hot's old code purged (badarg, when another loader purged
 * it first, is caught), Rounds times: ok or {bad, Result}.  toggle():
 * trace_pattern({hot,'_','_'}, true, [call_count]) and false: ok, or
 * {bad, Matched} (the toggler runs times(toggle, N)).  watcher(Texts,
 * Rounds): spawns hot:runner(self), takes its version K, runs
 * loader(Texts, Rounds), wakes it and returns {K, {Local, Remote}}
 * (Local: the runner's local v/0 after the reloads).  (A call's window
 * starts at its argument register and holds the callee's registers:
 * loader/2's eight sit above what watcher keeps.) */
static const char *const drv_src =
    "module drv\n"
    "export times/2, probe/0, toggle/0, loader/2, watcher/2\n"
    "function bad/1 regs 2\n"
    "    move r1, r0\n"
    "    loadk r0, bad\n"
    "    tuple r0, 2, r0\n"
    "    ret r0\n"
    "end\n"
    "function times/2 regs 12\n"
    "    move r10, r0\n"
    "    move r11, r1\n"
    "loop:\n"
    "    jeqi r11, 0, done\n"
    "    loadk r0, drv\n"
    "    move r1, r10\n"
    "    loadk r2, []\n"
    "    callx r0, r0, erlang:apply/3\n"
    "    loadk r1, ok\n"
    "    jne r0, r1, out\n"
    "    addi r11, r11, -1\n"
    "    jump loop\n"
    "done:\n"
    "    loadk r0, ok\n"
    "out:\n"
    "    ret r0\n"
    "end\n"
    "function probe/0 regs 1\n"
    "    callx r0, r0, hot:v/0\n"
    "    is_int r0, bad\n"
    "    jlti r0, 1, bad\n"
    "    jgei r0, 9, bad\n"
    "    loadk r0, ok\n"
    "    ret r0\n"
    "bad:\n"
    "    tailcall r0, bad/1\n"
    "end\n"
    "function loader/2 regs 8\n"
    "    move r6, r0\n"
    "    move r7, r1\n"
    "round:\n"
    "    jeqi r7, 0, done\n"
    "    move r5, r6\n"
    "next:\n"
    "    is_cons r5, endround\n"
    "    hd r2, r5\n"
    "    tl r5, r5\n"
    "    loadk r0, hot\n"
    "    loadk r1, \"hot.tasm\"\n"
    "    callx r0, r0, code:load_binary/3\n"
    "    loadk r1, {module, hot}\n"
    "    jeq r0, r1, purge\n"
    "    loadk r1, {error, not_purged}\n"
    "    jne r0, r1, bad\n"
    "purge:\n"
    "    try r1, purged\n"
    "    loadk r0, hot\n"
    "    callx r0, r0, erlang:purge_module/1\n"
    "    endtry\n"
    "purged:\n"
    "    jump next\n"
    "endround:\n"
    "    addi r7, r7, -1\n"
    "    jump round\n"
    "bad:\n"
    "    tailcall r0, bad/1\n"
    "done:\n"
    "    loadk r0, ok\n"
    "    ret r0\n"
    "end\n"
    "function toggle/0 regs 3\n"
    "    loadk r0, {hot, '_', '_'}\n"
    "    loadk r1, true\n"
    "    loadk r2, [call_count]\n"
    "    callx r0, r0, erlang:trace_pattern/3\n"
    "    jnei r0, 2, bad\n"
    "    loadk r0, {hot, '_', '_'}\n"
    "    loadk r1, false\n"
    "    loadk r2, [call_count]\n"
    "    callx r0, r0, erlang:trace_pattern/3\n"
    "    jnei r0, 2, bad\n"
    "    loadk r0, ok\n"
    "    ret r0\n"
    "bad:\n"
    "    tailcall r0, bad/1\n"
    "end\n"
    "function watcher/2 regs 17\n"
    "    move r6, r0\n"
    "    move r7, r1\n"
    "    self r2\n"
    "    loadk r3, []\n"
    "    cons r2, r2, r3\n"
    "    loadk r0, hot\n"
    "    loadk r1, runner\n"
    "    callx r0, r0, erlang:spawn/3\n"
    "    move r8, r0\n"
    "    loadk r1, infinity\n"
    "    wait r1, nomsg\n"
    "    recv r5, nomsg\n"
    "    accept\n"
    "    move r9, r6\n"
    "    move r10, r7\n"
    "    call r0, r9, loader/2\n"
    "    loadk r1, ok\n"
    "    jne r0, r1, fail\n"
    "    move r0, r8\n"
    "    loadk r1, go\n"
    "    callx r0, r0, erlang:send/2\n"
    "    loadk r1, infinity\n"
    "    wait r1, nomsg\n"
    "    recv r6, nomsg\n"
    "    accept\n"
    "    move r0, r5\n"
    "    move r1, r6\n"
    "    tuple r0, 2, r0\n"
    "fail:\n"
    "    ret r0\n"
    "nomsg:\n"
    "    loadk r0, no_message\n"
    "    ret r0\n"
    "end\n";

/* Version k of hot: v/0 answers k; runner(Parent) sends Parent k (from a
 * local call), waits for any message, then sends {Local, Remote}: its
 * local v/0 (still this version's) and hot:v/0 (the current one's). */
static char *hot_src(int k)
{
    static const char fmt[] =
        "module hot\nexport v/0, runner/1\n"
        "function v/0 regs 1\n    loadi r0, %d\n    ret r0\nend\n"
        "function runner/1 regs 5\n"
        "    move r4, r0\n"
        "    call r1, r1, v/0\n"
        "    callx r0, r0, erlang:send/2\n"
        "    loadk r1, infinity\n"
        "    wait r1, go\n"
        "go:\n"
        "    accept\n"
        "    call r2, r2, v/0\n"
        "    callx r3, r3, hot:v/0\n"
        "    tuple r2, 2, r2\n"
        "    move r0, r4\n"
        "    move r1, r2\n"
        "    callx r0, r0, erlang:send/2\n"
        "    ret r0\n"
        "end\n";
    char *s = malloc(sizeof fmt + 16);
    snprintf(s, sizeof fmt + 16, fmt, k);
    return s;
}

static char *texts[VERSIONS + 1];
static int status;

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "stress_code_load: %s: %s\n", what, detail);
    status = 1;
}

/* The embedder's loads, concurrent with the loaders' (versions 1..VERSIONS
 * in turn, whatever old code there is: tvm_load_string replaces). */
static void *c_loader(void *arg)
{
    (void)arg;
    for (int i = 0; i < C_LOADS; i++) {
        const char *t = texts[1 + i % VERSIONS];
        tvm_error err;
        if (tvm_load_string(vm, "hot.tasm", t, strlen(t), &err) != TVM_OK)
            fail("tvm_load_string", err.message);
    }
    return NULL;
}

static tvm_pid spawn2(tvm_env *env, const char *fun, tvm_term a, tvm_term b)
{
    tvm_term argv[2] = { a, b };
    tvm_pid pid = 0;
    if (tvm_spawn(env, "drv", fun, 2, argv, &pid) != TVM_OK)
        fail("spawn", fun);
    return pid;
}

int main(void)
{
    tvm_config cfg = { .size = sizeof cfg, .schedulers = 2 };
    vm = tvm_new(&cfg);
    for (int k = 1; k <= VERSIONS; k++)
        texts[k] = hot_src(k);
    tvm_error err;
    if (tvm_load_string(vm, "drv.tasm", drv_src, strlen(drv_src), &err) != TVM_OK ||
        tvm_load_string(vm, "hot.tasm", texts[1], strlen(texts[1]), &err) != TVM_OK) {
        fprintf(stderr, "stress_code_load: load: %s", err.message);
        return 1;
    }
    tvm_env *env = tvm_env_new(vm);
    /* Texts of versions 2..VERSIONS, as a list of binaries. */
    tvm_term bins[VERSIONS], list, rounds, calls, toggles, probe, toggle;
    for (int k = 2; k <= VERSIONS; k++)
        tvm_make_binary(env, texts[k], strlen(texts[k]), &bins[k - 2]);
    tvm_make_list(env, VERSIONS - 1, bins, &list);
    tvm_make_int(env, ROUNDS, &rounds);
    tvm_make_int(env, CALLS, &calls);
    tvm_make_int(env, ROUNDS * VERSIONS, &toggles);
    tvm_make_atom(env, "probe", &probe);
    tvm_make_atom(env, "toggle", &toggle);

    tvm_pid pids[1 + LOADERS + WORKERS + 1];
    int n = 0;
    pids[n++] = spawn2(env, "watcher", list, rounds);
    for (int i = 0; i < LOADERS; i++)
        pids[n++] = spawn2(env, "loader", list, rounds);
    for (int i = 0; i < WORKERS; i++)
        pids[n++] = spawn2(env, "times", probe, calls);
    pids[n++] = spawn2(env, "times", toggle, toggles);
    pthread_t th;
    pthread_create(&th, NULL, c_loader, NULL);
    for (int i = 0; i < n; i++) {
        tvm_term r;
        char out[128] = "";
        if (tvm_join(env, pids[i], &r) != TVM_OK) {
            tvm_term c, reason;
            tvm_get_exception(env, &c, &reason);
            tvm_format_term(env, reason, out, sizeof out);
            fail("the process raised", out);
            continue;
        }
        tvm_format_term(env, r, out, sizeof out);
        if (i == 0) {
            /* {K, {K, Remote}}: the runner's version before and after. */
            int k = 0, local = 0, remote = 0;
            if (sscanf(out, "{%d,{%d,%d}}", &k, &local, &remote) != 3 || k < 1 ||
                k > VERSIONS || local != k || remote < 1 || remote > VERSIONS)
                fail("watcher", out);
        } else if (strcmp(out, "ok") != 0) {
            fail("process", out);
        }
    }
    pthread_join(th, NULL);
    tvm_env_free(env);
    tvm_destroy(vm);
    for (int k = 1; k <= VERSIONS; k++)
        free(texts[k]);
    if (!status)
        printf("stress_code_load: ok\n");
    return status;
}
