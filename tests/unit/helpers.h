/*
 * tests/unit/helpers.h - shared helpers for the unit tests.
 */
#ifndef TESTS_UNIT_HELPERS_H
#define TESTS_UNIT_HELPERS_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "include/tracevm.h"

/* A path as the library's error messages name it (vm_msg_path in
 * vm/common.h, written again here so that the tests check it): up to
 * 1,024 bytes as it is, else its first and last 510 bytes with "..."
 * between.  out: at least 1,025 bytes. */
static inline const char *msg_path(const char *path, char *out)
{
    size_t len = strlen(path);
    if (len <= 1024)
        return path;
    snprintf(out, 1025, "%.510s...%s", path, path + len - 510);
    return out;
}

/* Makes a chain of real directories of 200-byte names under base (which
 * exists) into dir (4,096 bytes) while the chain stays shorter than
 * `most` bytes; returns its length.  long_chain_remove takes it away. */
static inline size_t long_chain_make(const char *base, char *dir, size_t most)
{
    size_t len = (size_t)snprintf(dir, 4096, "%s", base);
    while (len + 201 < most) {
        dir[len++] = '/';
        memset(dir + len, 'd', 200);
        len += 200;
        dir[len] = '\0';
        cr_assert_eq(mkdir(dir, 0700), 0, "%zu", len);
    }
    return len;
}

/* Removes the chain long_chain_make made (innermost first), and base. */
static inline void long_chain_remove(const char *base, char *dir)
{
    for (char *slash; strlen(dir) > strlen(base); *slash = '\0') {
        cr_assert_eq(rmdir(dir), 0, "%s", dir);
        slash = strrchr(dir, '/');
    }
    cr_assert_eq(rmdir(base), 0);
}

/* Everything written to f so far (a tmpfile a text sink writes into), as
 * a string the caller frees; f is left at its start. */
static inline char *file_text(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    char *s = calloc(1, (size_t)n + 1);
    rewind(f);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    return s;
}

/* A case that cannot run under ThreadSanitizer skips itself there, saying
 * why: the runner lists it by name and counts it as skipped. */
#if defined(VM_TSAN)
#define SKIP_UNDER_TSAN(why) cr_skip_test("not under ThreadSanitizer: %s", why)
#else
#define SKIP_UNDER_TSAN(why) ((void)0)
#endif

/* A case whose work is one long walk on the test's own thread (the VM's
 * schedulers idle meanwhile) gives ThreadSanitizer nothing to check: no
 * second thread touches what it walks.  There it only costs time, ten
 * to twenty times the debug build's (15 s of CPU for a 256 MiB text
 * refused by the loader, 16 s to print up to the print cap), so it skips
 * itself there, by name; every other build, ASan's among them, runs it. */
#define SKIP_SINGLE_THREADED_UNDER_TSAN(what)                                  \
    SKIP_UNDER_TSAN("a single-threaded walk (" what "), run by every other build")

/* A case that cannot work when the program runs under user-mode
 * emulation (a cross build's suite: tests/runner.py names the emulator in
 * TRACEVM_RUN) skips itself there, saying why, as above. */
#define SKIP_UNDER_EMULATION(why)                                              \
    do {                                                                       \
        if (getenv("TRACEVM_RUN"))                                             \
            cr_skip_test("not under user-mode emulation (%s): %s",             \
                         getenv("TRACEVM_RUN"), why);                          \
    } while (0)

/* Whether this is the build the largest loads run in: the optimised
 * native one (release), which users run.  The other builds (debug, the
 * sanitizers', clang's) and user-mode emulation run smaller ones, each
 * test saying why its smaller load still proves its claim.  The runner
 * names the build in TRACEVM_MODE and the emulator in TRACEVM_RUN
 * (tests/runner.py); tests/sh/lib.sh has the same test (full_scale). */
static inline bool test_full_scale(void)
{
    const char *mode = getenv("TRACEVM_MODE");
    return !getenv("TRACEVM_RUN") && mode && strcmp(mode, "release") == 0;
}

/* The usual fixture: a fresh VM (made with config *cfgp, or defaults for
 * NULL) and one env for every test of the suite. */
#define TVM_FIXTURE(suite, cfgp)                \
    static tvm_vm *vm;                          \
    static tvm_env *env;                        \
    static void setup(void)                     \
    {                                           \
        vm = tvm_new(cfgp);                     \
        env = tvm_env_new(vm);                  \
    }                                           \
    static void teardown(void)                  \
    {                                           \
        tvm_env_free(env);                      \
        tvm_destroy(vm);                        \
    }                                           \
    TestSuite(suite, .init = setup, .fini = teardown)

/* waiter/0 in .tasm, for a module's text: returns the first message it
 * receives (it waits in receive until then). */
#define TASM_WAITER                                                            \
    "function waiter/0 regs 2\n"                                              \
    "top:\n"                                                                  \
    "    recv r0, none\n    accept\n    ret r0\n"                             \
    "none:\n"                                                                 \
    "    loadk r1, infinity\n    wait r1, never\n    jump top\n"               \
    "never:\n    ret r1\n"                                                    \
    "end\n"

/* dag/1 and list/1 in .tasm, for a module's text: dag(N) is T = {T, T}
 * N levels deep (3N words on the heap, 3(2^N - 1) flat); list(N) is
 * [1..N] (2N words), consed in a loop (lists:seq/2 refuses a list over
 * max_message_words, and the tests make lists just over it). */
#define TASM_DAG_LIST                                                          \
    "function dag/1 regs 4\n"                                                 \
    "    loadk r1, []\n"                                                      \
    "loop:\n"                                                                 \
    "    jeqi r0, 0, done\n"                                                  \
    "    addi r0, r0, -1\n"                                                   \
    "    move r2, r1\n    move r3, r1\n"                                       \
    "    tuple r1, 2, r2\n"                                                   \
    "    jump loop\n"                                                         \
    "done:\n    ret r1\n"                                                     \
    "end\n"                                                                   \
    "function list/1 regs 2\n"                                                \
    "    loadk r1, []\n"                                                      \
    "again:\n"                                                                \
    "    jeqi r0, 0, done\n"                                                  \
    "    cons r1, r0, r1\n"                                                   \
    "    addi r0, r0, -1\n"                                                   \
    "    jump again\n"                                                        \
    "done:\n    ret r1\n"                                                     \
    "end\n"

/* Loads `src` as module text; fails the test on error. */
static inline void load_ok(tvm_vm *vm, const char *name, const char *src)
{
    tvm_error err;
    tvm_status st = tvm_load_string(vm, name, src, strlen(src), &err);
    cr_assert_eq(st, TVM_OK, "load failed: %s", err.message);
}

/* pid's state in tvm_processes ("running", "waiting", ...; "" when it
 * is not there) into buf. */
static inline const char *proc_state(tvm_vm *vm, tvm_pid pid, char *buf, size_t size)
{
    size_t n = tvm_processes(vm, NULL, 0) + 16;
    tvm_process_info *info = calloc(n, sizeof *info);
    size_t got = tvm_processes(vm, info, n);
    buf[0] = '\0';
    for (size_t i = 0; i < got && i < n; i++)
        if (info[i].pid == pid)
            snprintf(buf, size, "%s", info[i].state);
    free(info);
    return buf;
}

/* Waits until pid shows `state` in tvm_processes; a minute without it
 * fails the test (a hang guard, not a measurement). */
static inline void wait_proc_state(tvm_vm *vm, tvm_pid pid, const char *state)
{
    char buf[32];
    for (int i = 0; i < 60000; i++) {
        if (strcmp(proc_state(vm, pid, buf, sizeof buf), state) == 0)
            return;
        usleep(1000);
    }
    cr_assert_fail("process %llu never became %s (it is \"%s\")", (unsigned long long)pid,
                   state, buf);
}

/* The pending exception of env as "class:reason" into out (fails the
 * test when there is none). */
static inline void exception_fmt(tvm_env *env, char *out, size_t size)
{
    tvm_term c, reason;
    cr_assert_eq(tvm_get_exception(env, &c, &reason), TVM_OK);
    char cb[64], rb[512];
    tvm_format_term(env, c, cb, sizeof cb);
    tvm_format_term(env, reason, rb, sizeof rb);
    snprintf(out, size, "%s:%s", cb, rb);
}

/* Calls mod:fun with integer args; returns the status and formats the
 * result (or the exception) into out. */
/* Spawns mod:fun(n), an integer argument; its pid. */
static inline tvm_pid spawn_with_int(tvm_env *env, const char *mod, const char *fun, int64_t n)
{
    tvm_term a;
    tvm_pid pid;
    cr_assert_eq(tvm_make_int(env, n, &a), TVM_OK);
    cr_assert_eq(tvm_spawn(env, mod, fun, 1, &a, &pid), TVM_OK);
    return pid;
}

/* Spawns mod:fun(argv...), joins it and formats its result into out. */
static inline void spawn_fmt(tvm_env *env, const char *mod, const char *fun, int argc,
                             const tvm_term *argv, char *out, size_t size)
{
    tvm_pid pid;
    tvm_term r;
    cr_assert_eq(tvm_spawn(env, mod, fun, argc, argv, &pid), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    tvm_format_term(env, r, out, size);
}

static inline tvm_status call_fmt(tvm_env *env, const char *mod, const char *fun,
                                  int argc, const int64_t *args, char *out, size_t size)
{
    tvm_term a[8] = { { 0 } }, r = { 0 };
    for (int i = 0; i < argc; i++)
        cr_assert_eq(tvm_make_int(env, args[i], &a[i]), TVM_OK);
    tvm_status st = tvm_call(env, mod, fun, argc, a, &r);
    if (st == TVM_OK) {
        tvm_format_term(env, r, out, size);
    } else if (st == TVM_EXCEPTION) {
        exception_fmt(env, out, size);
    }
    return st;
}

#endif /* TESTS_UNIT_HELPERS_H */
