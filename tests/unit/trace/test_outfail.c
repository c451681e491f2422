/*
 * tests/unit/trace/test_outfail.c - a trace output that fails says why:
 * the session's first failure with what was being written, the format and
 * the OS's reason, from tvm_session_error while it runs and after the
 * stop, and from tvm_session_destroy.  A full disk (/dev/full) as a path
 * in every stream format, as the caller's FILE and as stderr; a pipe whose reader
 * closed, as a descriptor and as the caller's FILE (EPIPE, and no
 * SIGPIPE: the default action would end the test); a CTF and a raw CTF
 * stream file, and raw CTF's metadata, that land on /dev/full (a symlink
 * put in the directory after the start: the tests may run as root, whom
 * permission bits do not stop); and an output that never failed.  The
 * default session's failure after tvm_trace_stop: test_trace_api.
 */
#define _GNU_SOURCE   /* pipe2 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/helpers.h"

static const char *const of_src =
    "module of\n"
    "export f/1\n"
    "function f/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n";

static tvm_config one_sched = { .size = sizeof(tvm_config), .schedulers = 1 };
TVM_FIXTURE(outfail, &one_sched);

#define TAIL "; events from then on are missing"

/* A session with opts tracing of:f/1 in every process; loaded first. */
static tvm_session traced_session(tvm_trace_options *o)
{
    load_ok(vm, "of", of_src);
    tvm_session s;
    tvm_error err;
    cr_assert_eq(tvm_session_create(vm, "of", o, &s, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_trace_pattern(vm, s, "of:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL, 0,
                                           NULL, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_trace_flags_all(vm, s, TVM_TRACE_NEW, TVM_TRACE_CALL, true, &err),
                 TVM_OK, "%s", err.message);
    return s;
}

/* Runs of:f(0) in n processes, one after the other (n traced calls). */
static void run_f(int n)
{
    for (int i = 0; i < n; i++) {
        tvm_term a, r;
        tvm_pid pid;
        cr_assert_eq(tvm_make_int(env, i, &a), TVM_OK);
        cr_assert_eq(tvm_spawn(env, "of", "f", 1, &a, &pid), TVM_OK);
        cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    }
}

/* s's events so far flushed, then its failure as tvm_session_error
 * gives it (err.message; the status returned). */
static tvm_status error_now(tvm_session s, tvm_error *err)
{
    cr_assert_eq(tvm_session_flush(vm, s), TVM_OK);
    return tvm_session_error(vm, s, err);
}

/* Destroys s, which must report `want` (the message after "fn: "). */
static void destroy_expect(tvm_session s, const char *want)
{
    tvm_error err;
    char msg[4200];
    cr_expect_eq(tvm_session_destroy(vm, s, &err), TVM_ERR_IO, "%s", err.message);
    snprintf(msg, sizeof msg, "tvm_session_destroy: %s", want);
    cr_expect_str_eq(err.message, msg);
    cr_expect_eq(err.status, TVM_ERR_IO);
}

/* A full disk as the path of each stream format: seen while the session
 * runs and reported by its destroy.  Both said nothing of it before
 * (the destroy returned TVM_OK). */
Test(outfail, a_full_disk_in_each_stream_format)
{
    static const struct { tvm_trace_format f; const char *name; } fmts[] = {
        { TVM_TRACE_TEXT, "text" }, { TVM_TRACE_JSONL, "jsonl" }, { TVM_TRACE_CHROME, "chrome" },
    };
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        tvm_trace_options o = { .size = sizeof o, .format = fmts[i].f, .path = "/dev/full" };
        tvm_session s = traced_session(&o);
        run_f(3);
        char want[256];
        snprintf(want, sizeof want,
                 "writing the trace to /dev/full (%s) failed: No space left on device" TAIL,
                 fmts[i].name);
        tvm_error err;
        cr_expect_eq(error_now(s, &err), TVM_ERR_IO, "%s", fmts[i].name);
        char msg[300];
        snprintf(msg, sizeof msg, "tvm_session_error: %s", want);
        cr_expect_str_eq(err.message, msg);
        run_f(3);   /* it goes on; the first failure stays the one reported */
        destroy_expect(s, want);
    }
}

/* The caller's FILE on /dev/full. */
Test(outfail, a_full_disk_as_the_callers_file)
{
    FILE *full = fopen("/dev/full", "w");
    cr_assert(full);
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_JSONL, .file = full };
    tvm_session s = traced_session(&o);
    run_f(2);
    destroy_expect(s, "writing the trace to the caller's FILE * (jsonl) failed: No space left "
                      "on device" TAIL);
    fclose(full);
}

/* The default output, stderr (options NULL: text), on a full disk. */
Test(outfail, a_full_disk_as_stderr)
{
    int saved = dup(2), full = open("/dev/full", O_WRONLY | O_CLOEXEC);
    cr_assert(saved >= 0 && full >= 0);
    cr_assert_eq(dup2(full, 2), 2);
    tvm_session s = traced_session(NULL);
    run_f(2);
    tvm_error err;
    tvm_status st = tvm_session_destroy(vm, s, &err);
    dup2(saved, 2);
    close(saved);
    close(full);
    cr_expect_eq(st, TVM_ERR_IO);
    cr_expect_str_eq(err.message, "tvm_session_destroy: writing the trace to stderr (text) "
                                  "failed: No space left on device" TAIL);
}

/* A pipe whose read end is closed: its write end (O_CLOEXEC). */
static int readerless_pipe(void)
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    close(p[0]);
    return p[1];
}

/* A descriptor whose reader went away: EPIPE, named by the descriptor,
 * and the program goes on (SIGPIPE's default action, restored here,
 * ended the test before: the collector wrote with write(2)). */
Test(outfail, a_pipe_whose_reader_closed_as_a_descriptor)
{
    signal(SIGPIPE, SIG_DFL);
    int fd = readerless_pipe();
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_TEXT, .use_fd = true,
                            .fd = fd };
    tvm_session s = traced_session(&o);
    run_f(2);
    char want[128];
    snprintf(want, sizeof want, "writing the trace to fd %d (text) failed: Broken pipe" TAIL, fd);
    destroy_expect(s, want);
    close(fd);
}

/* The same pipe as the caller's FILE: stdio's write(2), on the collector
 * thread and (the chrome document's end) on the destroying thread. */
Test(outfail, a_pipe_whose_reader_closed_as_the_callers_file)
{
    signal(SIGPIPE, SIG_DFL);
    FILE *f = fdopen(readerless_pipe(), "w");
    cr_assert(f);
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CHROME, .file = f };
    tvm_session s = traced_session(&o);
    run_f(2);
    destroy_expect(s, "writing the trace to the caller's FILE * (chrome) failed: Broken pipe" TAIL);
    /* Nothing traced: the document's start and end alone, at the destroy. */
    s = traced_session(&o);
    destroy_expect(s, "writing the trace to the caller's FILE * (chrome) failed: Broken pipe" TAIL);
    fclose(f);
}

/* A CTF directory whose stream file sched_0 lands on /dev/full (a symlink
 * made after the start, before the first packet: streams are opened with
 * their first packet).  The sinks printed "trace: CTF write failed in
 * DIR: ..." on stderr and the destroy returned TVM_OK. */
static void ctf_stream_full(tvm_trace_format f, const char *name)
{
    char dir[] = "/tmp/tvm_outfail_XXXXXX", path[64], link[80], want[256];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t", dir);
    tvm_trace_options o = { .size = sizeof o, .format = f, .path = path };
    tvm_session s = traced_session(&o);
    snprintf(link, sizeof link, "%s/sched_0", path);
    cr_assert_eq(symlink("/dev/full", link), 0);
    run_f(3);
    snprintf(want, sizeof want,
             "writing the trace to %s (%s) failed: No space left on device" TAIL, link, name);
    destroy_expect(s, want);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(outfail, a_ctf_stream_on_a_full_disk)
{
    ctf_stream_full(TVM_TRACE_CTF, "ctf");
}

Test(outfail, a_raw_ctf_stream_on_a_full_disk)
{
    ctf_stream_full(TVM_TRACE_CTF_RAW, "ctf-raw");
}

/* Raw CTF writes its metadata again at the end (with the atoms): a
 * metadata file that lands on /dev/full then is the failure. */
Test(outfail, raw_ctf_metadata_on_a_full_disk)
{
    char dir[] = "/tmp/tvm_outfail_XXXXXX", meta[80], want[256];
    cr_assert(mkdtemp(dir));
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CTF_RAW, .path = dir };
    tvm_session s = traced_session(&o);
    run_f(1);
    snprintf(meta, sizeof meta, "%s/metadata", dir);
    cr_assert_eq(unlink(meta), 0);
    cr_assert_eq(symlink("/dev/full", meta), 0);
    tvm_error err;
    cr_expect_eq(error_now(s, &err), TVM_OK, "%s", err.message);
    snprintf(want, sizeof want,
             "writing the trace to %s (ctf-raw) failed: No space left on device" TAIL, meta);
    destroy_expect(s, want);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* An output that never failed: TVM_OK with no message, while it runs and
 * at the destroy; a destroyed session is not found. */
Test(outfail, an_output_that_never_failed)
{
    FILE *f = tmpfile();
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_TEXT, .file = f };
    tvm_session s = traced_session(&o);
    run_f(2);
    tvm_error err;
    cr_expect_eq(error_now(s, &err), TVM_OK);
    cr_expect_str_eq(err.message, "");
    cr_expect_eq(tvm_session_destroy(vm, s, &err), TVM_OK, "%s", err.message);
    char want[128];
    snprintf(want, sizeof want,
             "tvm_session_error: no session %llu (destroyed, or never created)",
             (unsigned long long)s.id);
    cr_expect_eq(tvm_session_error(vm, s, &err), TVM_ERR_NOTFOUND);
    cr_expect_str_eq(err.message, want);
    cr_expect_eq(tvm_session_error(NULL, s, &err), TVM_ERR_BADARG);
    cr_expect_str_eq(err.message, "tvm_session_error: NULL vm");
    fclose(f);
}
