/*
 * tests/unit/trace/test_trace_lossless.c - the full-ring policies through
 * the VM, with a deliberately slow sink: the text sink writes into a pipe
 * that nobody reads for a while, so the collector blocks and the rings
 * fill up.
 *   lossless: the traced process is suspended (its progress counter stands
 *   still) while an untraced process on the same, only, scheduler keeps
 *   running (its counter advances); once the pipe is read again every one
 *   of the N call events arrives, in order, and nothing is reported lost.
 *   drop: the traced process runs to its end; events + lost == N exactly,
 *   losses are reported (more than none), and memory stays bounded.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "vm/atomics.h"

static const char *const lt_src =
    "module lt\n"
    "export traced/1, spin/0, f/1\n"
    "function f/1 regs 1\n    ret r0\nend\n"
    /* traced(N): f(N), f(N-1), ..., f(1), ticking counter 0 after each */
    "function traced/1 regs 4\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    move r1, r0\n"
    "    call r1, r1, f/1\n"
    "    loadi r2, 0\n"
    "    callx r2, r2, lt_host:tick/1\n"
    "    addi r0, r0, -1\n"
    "    jump loop\n"
    "done:\n    loadk r0, ok\n    ret r0\n"
    "end\n"
    /* spin(): ticks counter 1 until tick says stop (1) */
    "function spin/0 regs 2\n"
    "loop:\n"
    "    loadi r0, 1\n"
    "    callx r0, r0, lt_host:tick/1\n"
    "    jeqi r0, 1, done\n"
    "    jump loop\n"
    "done:\n    ret r0\n"
    "end\n";

static tvm_config one_sched = { .size = sizeof(tvm_config), .schedulers = 1 };
TVM_FIXTURE(trace_lossless, &one_sched);

/* Written by the processes (tick), read by the test thread. */
static VmAtomic ticks[2], stop_spin;

static tvm_status tick(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    int64_t k = 0;
    cr_assert_eq(tvm_get_int(e, argv[0], &k), TVM_OK);
    vm_atomic_fetch_add_relaxed(&ticks[k], 1);
    return tvm_make_int(e, (int64_t)vm_atomic_load_relaxed(&stop_spin), result);
}

/* The pipe's reader: everything read, once `go` is set. */
typedef struct Reader {
    int fd;
    VmAtomic go;
    char *text;
    size_t len, cap;
} Reader;

static void *reader_main(void *arg)
{
    Reader *r = arg;
    while (!vm_atomic_load_acquire(&r->go))
        usleep(1000);
    for (;;) {
        if (r->cap - r->len < 65536) {
            r->cap = r->cap ? r->cap * 2 : 1 << 20;
            r->text = realloc(r->text, r->cap);
        }
        ssize_t n = read(r->fd, r->text + r->len, r->cap - r->len - 1);
        if (n <= 0)
            break;
        r->len += (size_t)n;
    }
    r->text[r->len] = '\0';
    return NULL;
}

static Reader reader;
static pthread_t reader_thread;
static FILE *out;

/* Loads the program, starts the pipeline (4 KiB rings, text into the pipe)
 * and the spinner (untraced); the traced process gets the call flag. */
static tvm_pid start(tvm_trace_policy policy, int64_t n, tvm_pid *spinner)
{
    tvm_error err;
    vm_atomic_store_relaxed(&ticks[0], 0);
    vm_atomic_store_relaxed(&ticks[1], 0);
    vm_atomic_store_relaxed(&stop_spin, 0);
    load_ok(vm, "lt", lt_src);
    cr_assert_eq(tvm_register_native(vm, "lt_host", "tick", 1, tick, NULL, &err), TVM_OK);
    int n_matched = 0;
    cr_assert_eq(tvm_trace_pattern(vm, "lt:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, &n_matched, &err),
                 TVM_OK);
    cr_assert_eq(n_matched, 1);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    reader = (Reader){ .fd = fds[0] };
    out = fdopen(fds[1], "w");
    cr_assert(out);
    pthread_create(&reader_thread, NULL, reader_main, &reader);
    tvm_trace_options o = { .size = sizeof(tvm_trace_options),
                            .format = TVM_TRACE_TEXT, .file = out, .ring_bytes = 4096,
                            .policy = policy };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_spawn(env, "lt", "spin", 0, NULL, spinner), TVM_OK);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    tvm_term a;
    tvm_pid pid;
    cr_assert_eq(tvm_make_int(env, n, &a), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "lt", "traced", 1, &a, &pid), TVM_OK);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, false), TVM_OK);
    return pid;
}

/* Joins both processes, stops the pipeline and the reader. */
static void finish(tvm_pid traced, tvm_pid spinner)
{
    tvm_term r;
    vm_atomic_store_release(&reader.go, 1);
    cr_assert_eq(tvm_join(env, traced, &r), TVM_OK);
    vm_atomic_store_relaxed(&stop_spin, 1);
    cr_assert_eq(tvm_join(env, spinner, &r), TVM_OK);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    fclose(out);
    pthread_join(reader_thread, NULL);
    close(reader.fd);
}

/* Resident set size in KiB. */
static long rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert(f);
    cr_assert_eq(fscanf(f, "%ld %ld", &pages, &rss), 2);
    fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

#define N_CALLS 20000

Test(trace_lossless, suspends_the_traced_process_only)
{
    tvm_pid spinner;
    tvm_pid pid = start(TVM_TRACE_LOSSLESS, N_CALLS, &spinner);
    /* Nobody reads: the pipe, the sink's buffer and the ring fill up. */
    usleep(150 * 1000);
    uintptr_t t1 = vm_atomic_load_relaxed(&ticks[0]), s1 = vm_atomic_load_relaxed(&ticks[1]);
    usleep(150 * 1000);
    uintptr_t t2 = vm_atomic_load_relaxed(&ticks[0]), s2 = vm_atomic_load_relaxed(&ticks[1]);
    cr_assert_lt(t1, N_CALLS, "the traced process finished without being held up");
    cr_expect_eq(t2, t1, "the traced process ran on while its ring was full (%lu -> %lu)",
                 (unsigned long)t1, (unsigned long)t2);
    cr_expect_gt(s2, s1, "the untraced process on the same scheduler stood still");
    finish(pid, spinner);
    cr_assert_eq(vm_atomic_load_relaxed(&ticks[0]), N_CALLS);
    /* Every event, in order, nothing lost. */
    char want[96];
    const char *p = reader.text;
    for (int i = N_CALLS; i > 0; i--) {
        int len = snprintf(want, sizeof want, "{trace,<0.%lu.0>,call,{lt,f,[%d]}}\n",
                           (unsigned long)pid, i);
        cr_assert(!strncmp(p, want, (size_t)len), "event for f(%d): got %.60s", i, p);
        p += len;
    }
    cr_assert_str_eq(p, "", "more than the calls: %.80s", p);
    free(reader.text);
}

Test(trace_lossless, drop_counts_every_lost_event)
{
    long rss0 = rss_kib();
    tvm_pid spinner;
    tvm_pid pid = start(TVM_TRACE_DROP, 10 * N_CALLS, &spinner);
    /* Nobody reads until the traced process is done: it is never held up. */
    while (vm_atomic_load_relaxed(&ticks[0]) < 10 * N_CALLS)
        usleep(1000);
    long grown = rss_kib() - rss0;
    finish(pid, spinner);
    uint64_t events = 0, lost = 0, sched = 9, n = 0;
    int next = 10 * N_CALLS;
    for (char *line = strtok(reader.text, "\n"); line; line = strtok(NULL, "\n")) {
        int arg;
        if (sscanf(line, "{trace_lost,{sched,%lu},%lu}", &sched, &n) == 2) {
            cr_assert_eq(sched, 0);
            lost += n;
            next -= (int)n;       /* the lost calls are the next ones */
            continue;
        }
        cr_assert_eq(sscanf(line, "{trace,<0.%*u.0>,call,{lt,f,[%d]}}", &arg), 1, "%s", line);
        cr_assert_eq(arg, next, "%s", line);
        next--;
        events++;
    }
    cr_expect_gt(lost, 0, "nothing was dropped: the sink was not slow enough");
    cr_expect_eq(events + lost, 10 * N_CALLS, "%lu events + %lu lost",
                 (unsigned long)events, (unsigned long)lost);
    cr_expect_eq(next, 0);
    /* 200,000 events (about 7 MB of text) went by a 4 KiB ring: memory
     * for them was never allocated. */
    cr_expect_lt(grown, 4096, "RSS grew by %ld KiB while the sink was stalled", grown);
    free(reader.text);
}
