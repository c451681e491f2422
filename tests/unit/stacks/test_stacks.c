/*
 * tests/unit/stacks/test_stacks.c - capturing a process's whole stack:
 * the mixed VM -> native -> VM -> native stack in context, signal and
 * self mode, the interlock holding a switch back, a process exiting
 * while it is captured, a signal that times out, corrupt frame chains,
 * registered threads and the tvm_backtrace text.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "include/tracevm.h"
#include "stacks/st.h"
#include "vm/interlock_switch.h"
#include "stacks/st_sym.h"
#include "vm/sched.h"
#include "tests/unit/helpers.h"

/* Lines matter: the expected stacks name them. */
static const char *mix_src =
    "module mix\n"                          /* 1 */
    "export main/0, cb/0, spin/0, wait_count/1, deep/1\n" /* 2 */
    "function main/0 regs 2\n"              /* 3 */
    "    loadi r1, 0\n"                     /* 4 */
    "    callx r0, r0, host:outer/0\n"      /* 5 */
    "    ret r0\n"                          /* 6 */
    "end\n"                                 /* 7 */
    "function cb/0 regs 2\n"                /* 8 */
    "    loadi r1, 0\n"                     /* 9 */
    "    callx r0, r0, host:inner/0\n"      /* 10 */
    "    ret r0\n"                          /* 11 */
    "end\n"                                 /* 12 */
    "function spin/0 regs 1\n"              /* 13 */
    "    loadi r0, 0\n"                     /* 14 */
    "top:\n"                                /* 15 */
    "    jump top\n"                        /* 16 */
    "end\n"                                 /* 17 */
    /* Counts r0 down once a message came: a process that is certainly
     * alive, parked in its receive, until the test sends it one. */
    "function wait_count/1 regs 3\n"        /* 18 */
    "    loadk r1, infinity\n"               /* 19 */
    "look:\n"                               /* 20 */
    "    recv r2, none\n"                    /* 21 */
    "    accept\n"                           /* 22 */
    "loop:\n"                               /* 23 */
    "    jeqi r0, 0, out\n"                  /* 24 */
    "    addi r0, r0, -1\n"                  /* 25 */
    "    jump loop\n"                        /* 26 */
    "out:\n"                                /* 27 */
    "    ret r0\n"                           /* 28 */
    "none:\n"                               /* 29 */
    "    wait r1, never\n"                   /* 30 */
    "    jump look\n"                        /* 31 */
    "never:\n"                              /* 32 */
    "    ret r0\n"                           /* 33 */
    "end\n"                                 /* 34 */
    /* N + 1 frames of itself, then main/0's call of host:outer/0. */
    "function deep/1 regs 2\n"              /* 35 */
    "    jeqi r0, 0, bottom\n"              /* 36 */
    "    addi r0, r0, -1\n"                 /* 37 */
    "    call r0, r0, deep/1\n"             /* 38 */
    "    ret r0\n"                          /* 39 */
    "bottom:\n"                             /* 40 */
    "    callx r0, r0, host:outer/0\n"      /* 41 */
    "    ret r0\n"                          /* 42 */
    "end\n";                                /* 43 */

/* What host:inner/0 does once it is reached. */
enum { IN_RECEIVE, IN_SPIN, IN_SELF, IN_CORRUPT_OUT, IN_CORRUPT_LOOP, IN_CORRUPT_ODD };
static _Atomic int inner_mode, reached, release_spin;
static char self_text[8192];

tvm_status nat_outer(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res, void *d);
tvm_status nat_inner(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res, void *d);

/* host:outer/0: calls back into VM code (mix:cb/0). */
__attribute__((noinline)) tvm_status nat_outer(tvm_env *env, int argc, const tvm_term *argv,
                                               tvm_term *res, void *d)
{
    (void)argc, (void)argv, (void)d;
    tvm_status st = tvm_call(env, "mix", "cb", 0, NULL, res);
    __asm__ volatile("" ::: "memory");   /* no tail call: this frame stays */
    return st;
}

/* Names the frames of the calling native's caller chain as our join does. */
static void self_capture(tvm_env *env)
{
    StStack *s = malloc(sizeof *s);
    st_capture_self(vm_running_process(), s);
    (void)env;
    st_format(s, self_text, sizeof self_text);
    free(s);
}

/* host:inner/0: holds still in the way inner_mode says. */
__attribute__((noinline)) tvm_status nat_inner(tvm_env *env, int argc, const tvm_term *argv,
                                               tvm_term *res, void *d)
{
    (void)argc, (void)argv, (void)d;
    /* volatile: every store to the saved frame pointer stays where it is */
    volatile uintptr_t *fp = __builtin_frame_address(0);
    uintptr_t saved = fp[0];
    int mode = atomic_load(&inner_mode);
    if (mode == IN_CORRUPT_OUT)
        fp[0] = 0xdead0000;                     /* far outside the stack */
    else if (mode == IN_CORRUPT_LOOP)
        fp[0] = (uintptr_t)fp;                  /* points at itself */
    else if (mode == IN_CORRUPT_ODD)
        fp[0] = (uintptr_t)fp + 12;             /* misaligned */
    if (mode == IN_SELF)
        self_capture(env);
    atomic_store(&reached, 1);
    tvm_status st;
    if (mode == IN_SPIN) {
        while (!atomic_load(&release_spin))
            ;
        st = tvm_make_atom(env, "spun", res);
    } else {
        st = mode == IN_SELF ? tvm_make_atom(env, "self", res) : tvm_receive(env, -1, res);
    }
    fp[0] = saved;
    return st;
}

static tvm_vm *vm;
static tvm_env *env;

static void setup(void)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2 };
    vm = tvm_new(&cfg);
    env = tvm_env_new(vm);
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "host", "outer", 0, nat_outer, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_register_native(vm, "host", "inner", 0, nat_inner, NULL, &err), TVM_OK);
    load_ok(vm, "mix.tasm", mix_src);
    atomic_store(&reached, 0);
    atomic_store(&release_spin, 0);
}

static void teardown(void)
{
    tvm_env_free(env);
    tvm_destroy(vm);
}

TestSuite(stacks, .init = setup, .fini = teardown);

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static tvm_pid start(int mode)
{
    atomic_store(&inner_mode, mode);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "mix", "main", 0, NULL, &pid), TVM_OK);
    while (!atomic_load(&reached))
        sleep_ms(1);
    return pid;
}

/* Waits until pid shows `state` in tvm_processes. */
static void wait_state(tvm_pid pid, const char *state)
{
    wait_proc_state(vm, pid, state);
}

static void finish(tvm_pid pid, const char *expect)
{
    tvm_term msg, res;
    atomic_store(&release_spin, 1);
    tvm_make_atom(env, "go", &msg);
    tvm_send(env, pid, msg);
    cr_assert_eq(tvm_join(env, pid, &res), TVM_OK);
    char buf[64];
    tvm_format_term(env, res, buf, sizeof buf);
    cr_assert_str_eq(buf, expect);
}

/*
 * The formatted stack reduced to what is the same in every build mode:
 * the VM frames, and the native frames of this file's natives (other C
 * frames differ with inlining), named by st_format through
 * stacks/st_sym.h.  Also returns
 * the name of the outermost native frame in *bottom.
 */
static void reduce(const char *text, char *out, size_t size, char *bottom, size_t bsize)
{
    out[0] = '\0';
    bottom[0] = '\0';
    const char *line = text;
    while (*line) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char one[512];
        snprintf(one, sizeof one, "%.*s", (int)len, line);
        if (strncmp(one, "  [c] ", 6) == 0) {
            /* "  [c] name+0xoff (object)", or a bare address */
            char name[256];
            snprintf(name, sizeof name, "%s", one + 6);
            char *plus = strstr(name, "+0x");
            if (plus)
                *plus = '\0';
            snprintf(bottom, bsize, "%s", name);
            if (strncmp(name, "nat_", 4) == 0) {
                strncat(out, "[c] ", size - strlen(out) - 1);
                strncat(out, name, size - strlen(out) - 1);
                strncat(out, "\n", size - strlen(out) - 1);
            }
        } else {
            strncat(out, one + 2, size - strlen(out) - 1);
            strncat(out, "\n", size - strlen(out) - 1);
        }
        line = nl ? nl + 1 : line + len;
    }
}

static const char *mixed_expect =
    "[c] nat_inner\n"
    "host:inner/0 (native)\n"
    "mix:cb/0 (mix.tasm:10)\n"
    "[c] nat_outer\n"
    "host:outer/0 (native)\n"
    "mix:main/0 (mix.tasm:5)\n";

/* Captures pid from this thread until the capture used `mode`. */
static void capture_text(tvm_pid pid, StMode mode, char *text, size_t size)
{
    SchedSystem *sys = vm_sched_of(vm);
    Process *p = vm_proc_get(sys, pid);
    cr_assert_not_null(p);
    StStack *s = malloc(sizeof *s);
    StOptions o = { 5000, false };
    cr_assert_eq(st_capture(p, s, &o), ST_R_OK);
    cr_assert_eq(s->mode, mode, "mode %d", s->mode);
    cr_assert(!s->walk_broken);
    st_format(s, text, size);
    free(s);
    vm_proc_put(sys, p);
}

/* ThreadSanitizer defers an asynchronous signal to its next interceptor
 * call and then runs the handler with the registers saved at arrival, on a
 * stack that has moved on (or never, in a loop that calls none): a signal
 * capture can neither find nor walk the interrupted frames there. */
#define NO_SIGNALS_UNDER_TSAN() SKIP_UNDER_TSAN("it delays signals (signal-mode capture)")

Test(stacks, mixed_context_mode)
{
    tvm_pid pid = start(IN_RECEIVE);
    wait_state(pid, "waiting");
    char text[8192], red[2048], bottom[128];
    capture_text(pid, ST_MODE_CONTEXT, text, sizeof text);
    reduce(text, red, sizeof red, bottom, sizeof bottom);
    cr_assert_str_eq(red, mixed_expect, "%s", text);
    cr_assert_str_eq(bottom, "vm_fiber_entry", "%s", text);
    cr_assert_null(strstr(text, "truncated"));
    finish(pid, "go");
}

/* The last occurrence of needle in text. */
static const char *last_of(const char *text, const char *needle)
{
    const char *last = NULL;
    for (const char *at = text; (at = strstr(at, needle)); at++)
        last = at;
    return last;
}

/*
 * A stack deeper than a capture keeps (ST_MAX_VM VM frames): mix:deep(200)
 * under the mixed stack is 206 VM frames, and the outer activation's entry
 * frame is among the 78 left out.  The capture takes the entry frame of
 * the activation it cuts in place of the oldest kept frame, so the kept
 * 122 + 1 deep/1 frames stand where that activation runs, above the
 * fiber's first native frames, with a line that says how many were left
 * out, and the stack ends truncated.  (Without the entry they followed
 * every native frame, vm_fiber_entry's included.)
 */
Test(stacks, a_stack_deeper_than_a_capture_keeps_stays_in_order)
{
    atomic_store(&inner_mode, IN_RECEIVE);
    tvm_term n;
    tvm_make_int(env, 200, &n);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "mix", "deep", 1, &n, &pid), TVM_OK);
    while (!atomic_load(&reached))
        sleep_ms(1);
    wait_state(pid, "waiting");
    char text[32768], red[8192], bottom[128], expect[8192];
    capture_text(pid, ST_MODE_CONTEXT, text, sizeof text);
    reduce(text, red, sizeof red, bottom, sizeof bottom);
    snprintf(expect, sizeof expect, "%s",
             "[c] nat_inner\n"
             "host:inner/0 (native)\n"
             "mix:cb/0 (mix.tasm:10)\n"
             "[c] nat_outer\n"
             "host:outer/0 (native)\n"
             "mix:deep/1 (mix.tasm:41)\n");
    for (int i = 0; i < 122; i++)
        strcat(expect, "mix:deep/1 (mix.tasm:38)\n");
    strcat(expect, "... 78 older VM frames left out\n... truncated\n");
    cr_assert_str_eq(red, expect, "%s", text);
    cr_assert_str_eq(bottom, "vm_fiber_entry", "%s", text);
    cr_assert(last_of(text, "mix:deep/1") < last_of(text, "[c] vm_fiber_entry"), "%s", text);
    finish(pid, "go");
}

Test(stacks, mixed_signal_mode)
{
    NO_SIGNALS_UNDER_TSAN();
    tvm_pid pid = start(IN_SPIN);
    char text[8192], red[2048], bottom[128];
    capture_text(pid, ST_MODE_SIGNAL, text, sizeof text);
    reduce(text, red, sizeof red, bottom, sizeof bottom);
    cr_assert_str_eq(red, mixed_expect, "%s", text);
    cr_assert_str_eq(bottom, "vm_fiber_entry", "%s", text);
    /* Interrupted in nat_inner itself: it is the innermost frame. */
    cr_assert(strncmp(red, "[c] nat_inner\n", 14) == 0);
    finish(pid, "spun");
}

Test(stacks, mixed_self_mode)
{
    tvm_pid pid = start(IN_SELF);
    char red[2048], bottom[128];
    finish(pid, "self");
    reduce(self_text, red, sizeof red, bottom, sizeof bottom);
    cr_assert_str_eq(red, mixed_expect, "%s", self_text);
    cr_assert_str_eq(bottom, "vm_fiber_entry", "%s", self_text);
}

Test(stacks, running_vm_code_signal_mode)
{
    NO_SIGNALS_UNDER_TSAN();
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "mix", "spin", 0, NULL, &pid), TVM_OK);
    char text[8192], red[2048], bottom[128];
    /* It yields at every reduction budget: captured either way. */
    SchedSystem *sys = vm_sched_of(vm);
    Process *p = vm_proc_get(sys, pid);
    StStack *s = malloc(sizeof *s);
    int modes[4] = { 0 };
    StOptions o = { 5000, false };
    while (st_capture(p, s, &o) == ST_R_NOSTACK)
        sleep_ms(1);
    for (int i = 0; i < 200; i++) {
        StResult r = st_capture(p, s, &o);
        cr_assert_eq(r, ST_R_OK, "%s", st_result_name(r));
        modes[s->mode]++;
        st_format(s, text, sizeof text);
        reduce(text, red, sizeof red, bottom, sizeof bottom);
        /* The line is the last one saved (at a yield), or none before. */
        if (strcmp(red, "mix:spin/0\n") != 0)
            cr_assert_str_eq(red, "mix:spin/0 (mix.tasm:16)\n", "%s", text);
        cr_assert_str_eq(bottom, "vm_fiber_entry", "%s", text);
    }
    cr_assert_eq(modes[ST_MODE_CONTEXT] + modes[ST_MODE_SIGNAL], 200);
    free(s);
    vm_proc_put(sys, p);
}

Test(stacks, backtrace_api_text)
{
    tvm_pid pid = start(IN_RECEIVE);
    wait_state(pid, "waiting");
    char text[8192];
    tvm_error err;
    cr_assert_eq(tvm_backtrace(vm, pid, text, sizeof text, NULL, &err), TVM_OK, "%s", err.message);
    cr_assert_str_eq(err.message, "");
    const char *a = strstr(text, "  host:inner/0 (native)\n  mix:cb/0 (mix.tasm:10)\n  [c] ");
    const char *b = strstr(text, "  host:outer/0 (native)\n  mix:main/0 (mix.tasm:5)\n  [c] ");
    cr_assert(a && b && a < b, "%s", text);
    /* On request, native frames with their file:line (DWARF). */
    tvm_backtrace_opts o = { .size = sizeof(tvm_backtrace_opts), .native_lines = true };
    cr_assert_eq(tvm_backtrace(vm, pid, text, sizeof text, &o, &err), TVM_OK, "%s", err.message);
    const char *n = strstr(text, "  [c] nat_inner+0x");
    cr_assert(n, "%s", text);
    char want_at[600] = "";
    const char *file;
    int line;
    /* What st_sym_srcline says of nat_inner's call of tvm_receive (a clang
     * build's DWARF gives it nothing: then no " at " either). */
    uintptr_t off = (uintptr_t)strtoull(n + strlen("  [c] nat_inner+"), NULL, 16);
    if (st_sym_srcline((uintptr_t)&nat_inner + off - 1, &file, &line))
        snprintf(want_at, sizeof want_at, " at %s:%d\n", file, line);
    const char *eol = strchr(n, '\n');
    if (want_at[0]) {
        cr_assert(strstr(file, "test_stacks.c"), "%s", file);
        cr_assert(strncmp(eol - strlen(want_at) + 1, want_at, strlen(want_at)) == 0, "%s", text);
    } else {
        cr_assert(!memmem(n, (size_t)(eol - n), " at ", 4), "%s", text);
    }
    finish(pid, "go");
    cr_assert_eq(tvm_backtrace(vm, pid, text, sizeof text, NULL, &err), TVM_ERR_NOTFOUND);
    char want[128];
    snprintf(want, sizeof want, "no process %llu: no such process", (unsigned long long)pid);
    cr_assert_str_eq(err.message, want);
    cr_assert_str_eq(text, "");
    cr_assert_eq(tvm_backtrace(NULL, pid, text, sizeof text, NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_backtrace: NULL vm");
    cr_assert_eq(tvm_backtrace_config(SIGURG, 0), TVM_ERR_BADARG);
}

/* The message of a cut: the bytes the whole stack needs, the size given
 * and the lines kept. */
static void assert_cut(tvm_pid pid, const tvm_error *err, size_t need, size_t size, size_t lines)
{
    char want[256];
    snprintf(want, sizeof want,
             "tvm_backtrace: %llu: the stack needs %zu bytes with its NUL, size is %zu: "
             "cut to its first %zu lines",
             (unsigned long long)pid, need, size, lines);
    cr_assert_eq(err->status, TVM_ERR_LIMIT);
    cr_assert_str_eq(err->message, want);
}

/* A buffer too small is reported, never cut silently: TVM_ERR_LIMIT, the
 * lines that fit (whole), and the size needed; a NULL argument is named.
 * Before, a cut stack came back TVM_OK, ending in half a frame, and both
 * NULLs read "tvm_backtrace: PID: bad argument". */
Test(stacks, backtrace_api_small_buffer_and_null_arguments)
{
    tvm_pid pid = start(IN_RECEIVE);
    wait_state(pid, "waiting");
    char whole[8192], text[8192];
    tvm_error err;
    /* A waiting process is read from its saved context: the same text
     * every time. */
    cr_assert_eq(tvm_backtrace(vm, pid, whole, sizeof whole, NULL, &err), TVM_OK, "%s",
                 err.message);
    size_t len = strlen(whole), nl = 0;
    for (size_t i = 0; i < len; i++)
        nl += whole[i] == '\n';
    cr_assert(nl >= 4 && whole[len - 1] == '\n', "%s", whole);
    size_t first = (size_t)(strchr(whole, '\n') - whole) + 1;   /* line 1 with its \n */
    size_t cut = len - 1;                                         /* the last line's \n */
    while (cut > 0 && whole[cut - 1] != '\n')
        cut--;                                                    /* where that line starts */

    /* Exactly enough: the whole text. */
    memset(text, 'x', sizeof text);
    cr_assert_eq(tvm_backtrace(vm, pid, text, len + 1, NULL, &err), TVM_OK, "%s", err.message);
    cr_assert_str_eq(text, whole);
    cr_assert_str_eq(err.message, "");

    /* One byte short: every line but the last. */
    memset(text, 'x', sizeof text);
    cr_assert_eq(tvm_backtrace(vm, pid, text, len, NULL, &err), TVM_ERR_LIMIT);
    assert_cut(pid, &err, len + 1, len, nl - 1);
    cr_assert_eq(strlen(text), cut);
    cr_assert(strncmp(text, whole, cut) == 0, "%s", text);

    /* Room for the first line and its NUL, then one byte less. */
    cr_assert_eq(tvm_backtrace(vm, pid, text, first + 1, NULL, &err), TVM_ERR_LIMIT);
    assert_cut(pid, &err, len + 1, first + 1, 1);
    cr_assert_eq(strlen(text), first);
    cr_assert(strncmp(text, whole, first) == 0, "%s", text);
    cr_assert_eq(tvm_backtrace(vm, pid, text, first, NULL, &err), TVM_ERR_LIMIT);
    assert_cut(pid, &err, len + 1, first, 0);
    cr_assert_str_eq(text, "");

    /* NULL with size 0 asks for the size alone. */
    cr_assert_eq(tvm_backtrace(vm, pid, NULL, 0, NULL, &err), TVM_ERR_LIMIT);
    assert_cut(pid, &err, len + 1, 0, 0);

    /* NULL arguments, named. */
    cr_assert_eq(tvm_backtrace(vm, pid, NULL, 16, NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_backtrace: NULL buf with size 16");
    cr_assert_eq(tvm_backtrace(NULL, pid, NULL, 0, NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_backtrace: NULL vm");
    finish(pid, "go");
}

/* A capture in progress holds the process at its switch: set the
 * interlock by hand on a waiting process, wake it, and it must not run
 * until the flag is cleared. */
Test(stacks, interlock_holds_the_switch)
{
    tvm_pid pid = start(IN_RECEIVE);
    wait_state(pid, "waiting");
    SchedSystem *sys = vm_sched_of(vm);
    Process *p = vm_proc_get(sys, pid);
    uintptr_t w0 = vm_atomic_load_acquire(&p->il.word);
    cr_assert_eq(IL_STATE_OF(w0), IL_SUSPENDED);
    vm_atomic_fetch_add_full(&p->il.traced, 1);
    tvm_term msg;
    tvm_make_atom(env, "go", &msg);
    tvm_send(env, pid, msg);
    sleep_ms(50);
    /* Not switched in: the word (state and switch count) is unchanged. */
    cr_assert_eq(vm_atomic_load_acquire(&p->il.word), w0);
    vm_atomic_store_release(&p->il.traced, 0);
    tvm_term res;
    cr_assert_eq(tvm_join(env, pid, &res), TVM_OK);
    cr_assert_eq(IL_STATE_OF(vm_atomic_load_acquire(&p->il.word)), IL_EXITED);
    StStack *s = malloc(sizeof *s);
    cr_assert_eq(st_capture(p, s, NULL), ST_R_EXITED);
    cr_assert_eq(s->nnative, 0);
    free(s);
    vm_proc_put(sys, p);
}

/* Processes that exit while they are being captured: every answer is a
 * stack or "gone" (never a crash or a stack of something else), and the
 * last one is "gone".  Each process is first captured parked in its
 * receive (a stack, whatever the machine's load: with only the exit to
 * race, a loaded machine could let all twenty finish before any capture
 * landed), then sent the message that lets it count down and exit.  Under ThreadSanitizer the handler of a capture's
 * signal runs at TSan's next interceptor, which for a process spinning
 * in VM code is in the switch of its next yield, where the capture is
 * refused as "switching": there that is an answer too. */
#if defined(VM_TSAN)
/* ...or, when the process spins in VM code that reaches none of TSan's
 * interceptors or atomics for the whole timeout, the signal's handler has
 * not run yet: a timeout (the signal-mode cases skip under TSan for the
 * same reason). */
#define SWITCHING_UNDER_TSAN(r) ((r) == ST_R_SWITCHING || (r) == ST_R_TIMEOUT)
#else
#define SWITCHING_UNDER_TSAN(r) false
#endif
Test(stacks, capture_while_exiting)
{
    SchedSystem *sys = vm_sched_start(vm, 2);
    StStack *s = malloc(sizeof *s);
    char text[8192];
    for (int round = 0; round < 20; round++) {
        tvm_pid pid;
        tvm_term n;
        tvm_make_int(env, 300000, &n);
        cr_assert_eq(tvm_spawn(env, "mix", "wait_count", 1, &n, &pid), TVM_OK);
        Process *p = vm_proc_get(sys, pid);
        cr_assert(p, "round %d: the process is gone before its message", round);
        StResult r;
        /* A generous timeout: on a loaded machine a signal can take more
         * than the default 50 ms (the timeout itself has its own test). */
        StOptions o = { 5000, false };
        /* Until it has run: not yet started, or (under TSan) caught in a
         * switch. */
        while ((r = st_capture(p, s, &o)) != ST_R_OK)
            cr_assert(r == ST_R_NOSTACK || SWITCHING_UNDER_TSAN(r), "round %d: result %d",
                      round, r);
        tvm_term go;
        tvm_make_int(env, 1, &go);
        cr_assert_eq(tvm_send(env, pid, go), TVM_OK);
        do {
            r = st_capture(p, s, &o);
            cr_assert(r == ST_R_OK || r == ST_R_NOSTACK || r == ST_R_EXITED ||
                          SWITCHING_UNDER_TSAN(r), "result %d", r);
            if (r == ST_R_OK) {
                st_format(s, text, sizeof text);
                /* Its line is the one it last saved: its wait (30) if
                 * the message has not woken it yet, else its loop's
                 * backward jump (26, where it yields), if any;
                 * before and after vm_execute (starting, exiting) it has
                 * no VM frame at all, and between wait_count's return and the
                 * activation's end (RET popped the frame, STOP has not
                 * run) only the entry frame, which prints nothing. */
                bool called = false;
                for (uint32_t i = 0; i < s->nvm; i++)
                    called |= FRAME_KIND(s->vm[i].kind) == FRAME_CALL;
                cr_assert(!called || strstr(text, "  mix:wait_count/1 (mix.tasm:26)\n") ||
                              strstr(text, "  mix:wait_count/1 (mix.tasm:30)\n") ||
                              strstr(text, "  mix:wait_count/1\n"), "%s", text);
            }
        } while (r != ST_R_EXITED);
        cr_assert_eq(s->nnative + s->nvm, 0);
        vm_proc_put(sys, p);
    }
    free(s);
}

/* ---- a signal that is never answered ---- */

static _Atomic int th_state;   /* 1 registered, 2 unblock the signal, 3 stop */
static _Atomic uint64_t th_id;

/* Spins with its frame set up: a volatile local lives on the stack, so
 * -O2 cannot shrink-wrap the prologue off the loop (a frameless loop
 * would hide thread_main from a frame-pointer walk). */
void thread_spin(void);
__attribute__((noinline)) void thread_spin(void)
{
    volatile unsigned spins = 0;
    while (atomic_load(&th_state) != 3) {
        spins = spins + 1;
        if (atomic_load(&th_state) == 2) {
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, st_signal_number());
            pthread_sigmask(SIG_UNBLOCK, &set, NULL);
            atomic_store(&th_state, 1);
        }
    }
}

static void *thread_main(void *arg)
{
    bool block = arg != NULL;
    if (block) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, st_signal_number());
        pthread_sigmask(SIG_BLOCK, &set, NULL);
    }
    tvm_pid id;
    cr_assert_eq(tvm_thread_register(NULL, &id), TVM_OK);
    atomic_store(&th_id, id);
    atomic_store(&th_state, 1);
    thread_spin();
    cr_assert_eq(tvm_thread_unregister(id), TVM_OK);
    return NULL;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

Test(stacks, signal_timeout_then_late_signal_is_harmless)
{
    NO_SIGNALS_UNDER_TSAN();
    atomic_store(&th_state, 0);
    pthread_t t;
    pthread_create(&t, NULL, thread_main, (void *)1);
    while (atomic_load(&th_state) != 1)
        sleep_ms(1);
    uint64_t id = atomic_load(&th_id);
    StStack *s = malloc(sizeof *s);
    uint64_t t0 = now_ns();
    cr_assert_eq(st_capture_thread(id, s, 30), ST_R_TIMEOUT);
    /* Not before its deadline, which the wait reads off CLOCK_MONOTONIC
     * too: this holds on any machine, however loaded (how long after the
     * deadline the wait ends is the scheduler's business, not checked). */
    uint64_t waited = now_ns() - t0;
    cr_assert_geq(waited, 30 * 1000000u, "gave up after %lu ns", (unsigned long)waited);
    cr_assert_eq(s->nnative, 0);
    char text[256];
    tvm_error err;
    tvm_backtrace_opts o = { .size = sizeof(tvm_backtrace_opts), .timeout_ms = 20 };
    cr_assert_eq(tvm_backtrace(vm, id, text, sizeof text, &o, &err), TVM_ERR_BUSY);
    char want[128];
    snprintf(want, sizeof want, "process %llu not captured: signal timed out",
             (unsigned long long)id);
    cr_assert_str_eq(err.message, want);
    /* Let the two pending signals in: their slots were taken back, so the
     * handler does nothing with them; the next capture works. */
    atomic_store(&th_state, 2);
    while (atomic_load(&th_state) != 1)
        sleep_ms(1);
    cr_assert_eq(st_capture_thread(id, s, 5000), ST_R_OK);
    cr_assert_eq(s->mode, ST_MODE_SIGNAL);
    st_format(s, text, sizeof text);
    StSym sym;
    cr_assert(st_sym_lookup(s->native[0].ip, &sym));
    cr_assert_str_eq(sym.name, "thread_spin");
    atomic_store(&th_state, 3);
    pthread_join(t, NULL);
    cr_assert_eq(st_capture_thread(id, s, 100), ST_R_NOPROC);
    cr_assert_eq(tvm_thread_unregister(id), TVM_ERR_NOTFOUND);
    free(s);
}

/* A registered thread spinning in thread_spin; its id. */
static uint64_t spinning_thread(pthread_t *t)
{
    atomic_store(&th_state, 0);
    pthread_create(t, NULL, thread_main, NULL);
    while (atomic_load(&th_state) != 1)
        sleep_ms(1);
    return atomic_load(&th_id);
}

Test(stacks, registered_thread_signal_mode)
{
    NO_SIGNALS_UNDER_TSAN();
    pthread_t t;
    uint64_t id = spinning_thread(&t);
    cr_assert(id & ST_THREAD_ID_BIT);
    StStack *s = malloc(sizeof *s);
    cr_assert_eq(st_capture_thread(id, s, 5000), ST_R_OK);
    StSym sym;
    cr_assert(s->nnative >= 2);
    cr_assert(st_sym_lookup(s->native[0].ip, &sym));
    cr_assert_str_eq(sym.name, "thread_spin");
    cr_assert(st_sym_lookup(s->native[1].ip - 1, &sym));
    cr_assert_str_eq(sym.name, "thread_main");
    cr_assert_eq(s->nvm, 0);
    atomic_store(&th_state, 3);
    pthread_join(t, NULL);
    free(s);
}

/* The capture signal changed after captures were taken: the next
 * capture installs the handler on the new signal (before, the signal
 * met its default action and ended the whole program).  A signal that
 * has someone else's handler is refused. */
static void capture_thread_ok(uint64_t id)
{
    char text[4096];
    tvm_error err;
    tvm_backtrace_opts o = { .size = sizeof(tvm_backtrace_opts), .timeout_ms = 5000 };
    cr_assert_eq(tvm_backtrace(vm, id, text, sizeof text, &o, &err), TVM_OK, "%s", err.message);
    cr_assert(strstr(text, "[c] thread_spin+") == text + 2, "%s", text);
}

static void other_handler(int sig)
{
    (void)sig;
}

Test(stacks, signal_changed_after_a_capture)
{
    NO_SIGNALS_UNDER_TSAN();
    pthread_t t;
    uint64_t id = spinning_thread(&t);
    int first = st_signal_number();
    capture_thread_ok(id);
    cr_assert_eq(tvm_backtrace_config(SIGRTMIN + 7, 0), TVM_OK);
    capture_thread_ok(id);
    cr_assert_eq(st_signal_number(), SIGRTMIN + 7);
    cr_assert_eq(tvm_backtrace_config(first, 0), TVM_OK);
    capture_thread_ok(id);
    /* A signal the embedder (or the profiler) handles is not taken. */
    signal(SIGRTMIN + 8, other_handler);
    cr_assert_eq(tvm_backtrace_config(SIGRTMIN + 8, 0), TVM_ERR_BADARG);
    cr_assert_eq(st_signal_number(), first);
    capture_thread_ok(id);
    signal(SIGRTMIN + 8, SIG_DFL);
    atomic_store(&th_state, 3);
    pthread_join(t, NULL);
}

/* ---- corrupt frame chains: the walk ends, nothing crashes ---- */

static void corrupt_case(int mode)
{
    tvm_pid pid = start(mode);
    wait_state(pid, "waiting");
    SchedSystem *sys = vm_sched_of(vm);
    Process *p = vm_proc_get(sys, pid);
    StStack *s = malloc(sizeof *s);
    StOptions o = { 5000, false };
    cr_assert_eq(st_capture(p, s, &o), ST_R_OK);
    cr_assert(s->walk_broken);
    /* The walk reached nat_inner's frame and its return address (into the
     * interpreter), and stopped there. */
    StSym sym;
    uint32_t k = s->nnative;
    cr_assert(k >= 2);
    cr_assert(st_sym_lookup(s->native[k - 2].ip - 1, &sym));
    cr_assert_str_eq(sym.name, "nat_inner");
    char text[8192];
    st_format(s, text, sizeof text);
    /* Both activations unmatched: their VM frames follow, marked. */
    const char *tail = "  host:inner/0 (native)\n  mix:cb/0 (mix.tasm:10)\n"
                       "  host:outer/0 (native)\n  mix:main/0 (mix.tasm:5)\n  ... truncated\n";
    size_t tl = strlen(tail), len = strlen(text);
    cr_assert(len > tl && strcmp(text + len - tl, tail) == 0, "%s", text);
    free(s);
    vm_proc_put(sys, p);
    finish(pid, "go");
}

Test(stacks, corrupt_chain_out_of_bounds) { corrupt_case(IN_CORRUPT_OUT); }
Test(stacks, corrupt_chain_loop) { corrupt_case(IN_CORRUPT_LOOP); }
Test(stacks, corrupt_chain_misaligned) { corrupt_case(IN_CORRUPT_ODD); }

/* The libunwind fallback (DWARF CFI) and the frame-pointer walk agree on a
 * suspended fiber, frame for frame, down to vm_fiber_entry. */
Test(stacks, unwind_fallback_agrees_with_fp_walk)
{
    tvm_pid pid = start(IN_RECEIVE);
    wait_state(pid, "waiting");
    SchedSystem *sys = vm_sched_of(vm);
    Process *p = vm_proc_get(sys, pid);
    vm_atomic_fetch_add_full(&p->il.traced, 1);   /* hold it still */
    cr_assert_eq(IL_STATE_OF(vm_atomic_load_rmw_full(&p->il.word)), IL_SUSPENDED);
    const uintptr_t *saved = p->fiber->sp;
    cr_assert_not_null(saved);
    uintptr_t lo = (uintptr_t)p->fiber->stack_lo, hi = (uintptr_t)p->fiber->stack_hi;
    StNative a[ST_MAX_NATIVE], b[ST_MAX_NATIVE];
    bool broken;
    uint32_t na = st_walk_fp(saved[FIBER_SAVED_PC], saved[FIBER_SAVED_FP], lo, hi, a,
                             ST_MAX_NATIVE, &broken);
    uint32_t nb = st_walk_unwind(saved, lo, hi, b, ST_MAX_NATIVE);
    cr_assert(!broken);
    cr_assert_eq(na, nb, "fp walk %u frames, libunwind %u", na, nb);
    for (uint32_t i = 0; i < na; i++) {
        cr_assert_eq(a[i].ip, b[i].ip, "frame %u", i);
        cr_assert_eq(a[i].fp, b[i].fp, "frame %u", i);
    }
    StSym sym;
    cr_assert(st_sym_lookup(b[nb - 1].ip, &sym));
    cr_assert_str_eq(sym.name, "vm_fiber_entry");
    vm_atomic_store_release(&p->il.traced, 0);
    vm_proc_put(sys, p);
    finish(pid, "go");
}

/* ---- a signal that lands in code using the frame pointer register as a
 * plain register ---- */

static _Atomic int clobber_state;   /* 1 spinning, 2 stop */

/* Spins with rbp (x29 on aarch64) holding no frame pointer, as a C
 * library routine built without frame pointers may (the signal-mode walk
 * cannot start from it; it scans the stack above sp for the first frame
 * record).  The asm saves and restores the register around the spin, so
 * the compiler's own use of it is untouched. */
__attribute__((noinline)) static void rbp_clobber_spin(void)
{
    atomic_store(&clobber_state, 1);
#if defined(__x86_64__)
    __asm__ volatile("push %%rbp\n\t"
                     "mov $0x1233, %%rbp\n"
                     "1:\n\t"
                     "pause\n\t"
                     "cmpl $1, %0\n\t"
                     "je 1b\n\t"
                     "pop %%rbp"
                     :
                     : "m"(clobber_state)
                     : "memory", "cc");
#else
    __asm__ volatile("str x29, [sp, #-16]!\n\t"
                     "mov x29, #0x1233\n"
                     "1:\n\t"
                     "yield\n\t"
                     "ldr w9, %0\n\t"
                     "cmp w9, #1\n\t"
                     "b.eq 1b\n\t"
                     "ldr x29, [sp], #16"
                     :
                     : "m"(clobber_state)
                     : "memory", "cc", "x9");
#endif
}

__attribute__((noinline)) static void *clobber_main(void *arg)
{
    (void)arg;
    tvm_pid id;
    cr_assert_eq(tvm_thread_register(NULL, &id), TVM_OK);
    atomic_store(&th_id, id);
    rbp_clobber_spin();
    cr_assert_eq(tvm_thread_unregister(id), TVM_OK);
    return NULL;
}

Test(stacks, signal_mode_recovers_the_chain_above_code_without_frame_pointers)
{
    /* The spin calls no interceptor: TSan never runs the handler. */
    NO_SIGNALS_UNDER_TSAN();
    atomic_store(&clobber_state, 0);
    pthread_t t;
    pthread_create(&t, NULL, clobber_main, NULL);
    while (atomic_load(&clobber_state) != 1)
        sleep_ms(1);
    StStack *s = malloc(sizeof *s);
    cr_assert_eq(st_capture_thread(atomic_load(&th_id), s, 5000), ST_R_OK);
    StSym sym;
    cr_assert_geq(s->nnative, 2);
    cr_assert(st_sym_lookup(s->native[0].ip, &sym));
    cr_assert_str_eq(sym.name, "rbp_clobber_spin");
    cr_assert(st_sym_lookup(s->native[1].ip - 1, &sym));
    cr_assert_str_eq(sym.name, "clobber_main");
    atomic_store(&clobber_state, 2);
    pthread_join(t, NULL);
    free(s);
}
