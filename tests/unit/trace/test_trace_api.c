/*
 * tests/unit/trace/test_trace_api.c - tracing through the embedding API:
 * process trace flags for one process, for every existing process and for
 * new ones (tvm_trace_flags, tvm_trace_flags_all), the pipeline's life
 * cycle (tvm_trace_start / tvm_trace_stop, twice, bad options, a refused
 * collector thread, a failed start's limits, refused from a native, ended
 * by tvm_destroy), and the exact text of call, spawn
 * and exit events, including those of a call context on this (foreign)
 * thread.
 */
#define _GNU_SOURCE   /* pthread_setattr_default_np */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/helpers.h"

static const char *const ta_src =
    "module ta\n"
    "export waiter/0, f/1, g/1\n" TASM_WAITER
    "function f/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    /* g(X): f(X) by a remote call */
    "function g/1 regs 1\n    callx r0, r0, ta:f/1\n    ret r0\nend\n";

static tvm_config one_sched = { .size = sizeof(tvm_config), .schedulers = 1 };
TVM_FIXTURE(trace_api, &one_sched);

static tvm_pid spawn_waiter(void)
{
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "ta", "waiter", 0, NULL, &pid), TVM_OK);
    return pid;
}

static void end_waiter(tvm_pid pid)
{
    tvm_term msg, r;
    cr_assert_eq(tvm_make_atom(env, "stop", &msg), TVM_OK);
    cr_assert_eq(tvm_send(env, pid, msg), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
}

static unsigned flags_of(tvm_pid pid)
{
    unsigned f = 0xdead;
    cr_assert_eq(tvm_trace_flags_get(env, pid, &f), TVM_OK);
    return f;
}

/* Runs ta:g(n) as a joined process and returns its pid. */
static tvm_pid run_g(int64_t n)
{
    tvm_term a, r;
    tvm_pid pid;
    cr_assert_eq(tvm_make_int(env, n, &a), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "ta", "g", 1, &a, &pid), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    return pid;
}

static void start_text(FILE *f)
{
    tvm_error err;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options),
                            .format = TVM_TRACE_TEXT, .file = f };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
}

Test(trace_api, flags_of_one_process)
{
    load_ok(vm, "ta", ta_src);
    tvm_pid w = spawn_waiter();
    cr_assert_eq(flags_of(w), 0);
    cr_assert_eq(tvm_trace_flags(env, w, TVM_TRACE_CALL | TVM_TRACE_PROCS, true), TVM_OK);
    cr_assert_eq(flags_of(w), TVM_TRACE_CALL | TVM_TRACE_PROCS);
    cr_assert_eq(tvm_trace_flags(env, w, TVM_TRACE_ARITY, true), TVM_OK);
    cr_assert_eq(tvm_trace_flags(env, w, TVM_TRACE_CALL, false), TVM_OK);
    cr_assert_eq(flags_of(w), TVM_TRACE_ARITY | TVM_TRACE_PROCS);
    /* tvm_trace_calls changes the call flag only. */
    cr_assert_eq(tvm_trace_calls(env, w, true), TVM_OK);
    cr_assert_eq(flags_of(w), TVM_TRACE_CALL | TVM_TRACE_ARITY | TVM_TRACE_PROCS);
    /* pid 0: the env itself; other processes untouched. */
    cr_assert_eq(tvm_trace_flags(env, 0, TVM_TRACE_TIMESTAMP, true), TVM_OK);
    cr_assert_eq(flags_of(0), TVM_TRACE_TIMESTAMP);
    cr_assert_eq(flags_of(w), TVM_TRACE_CALL | TVM_TRACE_ARITY | TVM_TRACE_PROCS);
    cr_assert_eq(tvm_trace_flags(env, w, 1u << 17, true), TVM_ERR_BADARG);
    cr_assert_eq(tvm_trace_flags(NULL, w, TVM_TRACE_CALL, true), TVM_ERR_BADARG);
    cr_assert_eq(tvm_trace_flags(env, w + 1000, TVM_TRACE_CALL, true), TVM_ERR_NOTFOUND);
    unsigned f;
    cr_assert_eq(tvm_trace_flags_get(env, w + 1000, &f), TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_trace_flags_get(env, w, NULL), TVM_ERR_BADARG);
    end_waiter(w);
}

Test(trace_api, flags_of_all_existing_and_new)
{
    load_ok(vm, "ta", ta_src);
    tvm_pid a = spawn_waiter(), b = spawn_waiter();
    /* New processes only: a and b keep theirs. */
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_PROCS, true), TVM_OK);
    cr_assert_eq(tvm_trace_flags_new(vm), TVM_TRACE_PROCS);
    cr_assert_eq(flags_of(a), 0);
    tvm_pid c = spawn_waiter();
    cr_assert_eq(flags_of(c), TVM_TRACE_PROCS);
    /* Existing ones only: the default stays. */
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_EXISTING, TVM_TRACE_CALL, true), TVM_OK);
    cr_assert_eq(flags_of(a), TVM_TRACE_CALL);
    cr_assert_eq(flags_of(b), TVM_TRACE_CALL);
    cr_assert_eq(flags_of(c), TVM_TRACE_CALL | TVM_TRACE_PROCS);
    cr_assert_eq(tvm_trace_flags_new(vm), TVM_TRACE_PROCS);
    /* Both; call contexts are not processes here. */
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_ALL, TVM_TRACE_PROCS, false), TVM_OK);
    cr_assert_eq(flags_of(c), TVM_TRACE_CALL);
    cr_assert_eq(tvm_trace_flags_new(vm), 0);
    cr_assert_eq(flags_of(0), 0);
    cr_assert_eq(tvm_trace_flags_all(vm, (tvm_trace_scope)0, TVM_TRACE_CALL, true), TVM_ERR_BADARG);
    cr_assert_eq(tvm_trace_flags_all(vm, (tvm_trace_scope)4, TVM_TRACE_CALL, true), TVM_ERR_BADARG);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_ALL, 1u << 17, true), TVM_ERR_BADARG);
    cr_assert_eq(tvm_trace_flags_all(NULL, TVM_TRACE_ALL, TVM_TRACE_CALL, true), TVM_ERR_BADARG);
    end_waiter(a);
    end_waiter(b);
    end_waiter(c);
}

Test(trace_api, events_and_start_stop_twice)
{
    load_ok(vm, "ta", ta_src);
    cr_assert_eq(tvm_trace_pattern(vm, "ta:_/_", TVM_TP_TRUE, TVM_TP_GLOBAL, NULL, NULL), TVM_OK);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL | TVM_TRACE_PROCS, true),
                 TVM_OK);
    FILE *f1 = tmpfile();
    start_text(f1);
    tvm_error err;
    cr_assert_eq(tvm_trace_start(vm, NULL, &err), TVM_ERR_EXISTS);
    cr_assert_str_eq(err.message, "tvm_trace_start: a trace pipeline is already running");
    tvm_pid p1 = run_g(1);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    cr_assert_eq(tvm_trace_stop(vm), TVM_ERR_NOTFOUND);
    run_g(2);                                      /* no pipeline: nothing written */
    /* Again, now with arity and timestamps. */
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_ARITY, true), TVM_OK);
    FILE *f2 = tmpfile();
    start_text(f2);
    tvm_pid p3 = run_g(3);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    char want[512], *got = file_text(f1);
    /* Each process's first event: spawned by the call context (<0.0.0>),
     * and its arguments whatever the arity flag (which is for calls). */
    snprintf(want, sizeof want,
             "{trace,<0.%1$llu.0>,spawned,<0.0.0>,{ta,g,[1]}}\n"
             "{trace,<0.%1$llu.0>,call,{ta,g,[1]}}\n{trace,<0.%1$llu.0>,call,{ta,f,[1]}}\n"
             "{trace,<0.%1$llu.0>,exit,normal}\n",
             (unsigned long long)p1);
    cr_assert_str_eq(got, want);
    free(got);
    got = file_text(f2);
    snprintf(want, sizeof want,
             "{trace,<0.%1$llu.0>,spawned,<0.0.0>,{ta,g,[3]}}\n"
             "{trace,<0.%1$llu.0>,call,{ta,g,1}}\n{trace,<0.%1$llu.0>,call,{ta,f,1}}\n"
             "{trace,<0.%1$llu.0>,exit,normal}\n",
             (unsigned long long)p3);
    cr_assert_str_eq(got, want);
    free(got);
    fclose(f1);
    fclose(f2);
}

/* Copies text, each line's trailing ",<digits>}" (a trace_ts stamp)
 * replaced by ",TS}". */
static void strip_stamps(const char *text, char *out)
{
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n'), *comma = nl;
        while (comma > line && *comma != ',')
            comma--;
        size_t digits = strspn(comma + 1, "0123456789");
        bool stamp = *comma == ',' && digits && comma + 1 + digits == nl - 1;
        size_t keep = (size_t)((stamp ? comma : nl + 1) - line);
        memcpy(out, line, keep);
        out += keep;
        if (stamp)
            out += sprintf(out, ",TS}\n");
        line = nl + 1;
    }
    *out = '\0';
}

/*
 * An output that fails (a full disk: /dev/full, as a path and as the
 * caller's FILE) is reported by the stop; the trace was silently empty.
 * Why (the output, the format, the OS's reason) is kept for
 * tvm_session_error until the next start, which clears it (the status
 * alone before).  A stream whose error flag the caller left set is not
 * the pipeline's to report.
 */
static void expect_failure(const char *want)
{
    tvm_error err;
    char msg[512];
    snprintf(msg, sizeof msg, "tvm_session_error: writing the trace to %s failed: No space "
                              "left on device; events from then on are missing", want);
    cr_expect_eq(tvm_session_error(vm, TVM_SESSION_DEFAULT, &err), TVM_ERR_IO);
    cr_expect_str_eq(err.message, msg);
}

Test(trace_api, a_failing_output_is_reported_by_the_stop)
{
    load_ok(vm, "ta", ta_src);
    cr_assert_eq(tvm_trace_pattern(vm, "ta:_/_", TVM_TP_TRUE, TVM_TP_GLOBAL, NULL, NULL), TVM_OK);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    tvm_error err;
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_JSONL, .path = "/dev/full" };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    run_g(1);
    cr_assert_eq(tvm_trace_stop(vm), TVM_ERR_IO);
    expect_failure("/dev/full (jsonl)");
    FILE *full = fopen("/dev/full", "w");
    cr_assert(full);
    o = (tvm_trace_options){ .size = sizeof o, .format = TVM_TRACE_TEXT, .file = full };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    run_g(2);
    cr_assert_eq(tvm_trace_stop(vm), TVM_ERR_IO);
    expect_failure("the caller's FILE * (text)");
    /* full's error flag is set now: the next pipeline on it has nothing
     * of its own to report, and a good output none either. */
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    cr_expect_eq(tvm_session_error(vm, TVM_SESSION_DEFAULT, &err), TVM_OK);
    cr_expect_str_eq(err.message, "");
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    fclose(full);
    FILE *f = tmpfile();
    start_text(f);
    run_g(3);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    fclose(f);
}

/* A call context on this thread: its calls (inside tvm_call) and its
 * spawns (outside any tvm_call) go to the shared ring, as pid 0. */
Test(trace_api, call_context_events)
{
    load_ok(vm, "ta", ta_src);
    cr_assert_eq(tvm_trace_pattern(vm, "ta:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, NULL), TVM_OK);
    cr_assert_eq(tvm_trace_flags(env, 0,
                                 TVM_TRACE_CALL | TVM_TRACE_PROCS | TVM_TRACE_MONOTONIC_TIMESTAMP,
                                 true), TVM_OK);
    FILE *f = tmpfile();
    start_text(f);
    char out[64];
    cr_assert_eq(call_fmt(env, "ta", "f", 1, (int64_t[]){ 41 }, out, sizeof out), TVM_OK);
    tvm_pid w = spawn_waiter();
    end_waiter(w);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    char *got = file_text(f), want[256];
    snprintf(want, sizeof want, "{trace_ts,<0.0.0>,call,{ta,f,[41]},TS}\n"
                                "{trace_ts,<0.0.0>,spawn,<0.%llu.0>,{ta,waiter,[]},TS}\n",
             (unsigned long long)w);
    char norm[256];
    strip_stamps(got, norm);
    cr_assert_str_eq(norm, want);
    free(got);
    fclose(f);
}

static tvm_status start_with(tvm_trace_options o, tvm_error *err)
{
    o.size = sizeof o;
    return tvm_trace_start(vm, &o, err);
}

Test(trace_api, bad_options)
{
    tvm_error err;
    cr_assert_eq(start_with((tvm_trace_options){ .policy = (tvm_trace_policy)7 }, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_start: bad policy 7 (expected drop or lossless)");
    cr_assert_eq(start_with((tvm_trace_options){ .format = (tvm_trace_format)9 }, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message,
                     "tvm_trace_start: bad format 9 (expected text, jsonl, chrome, ctf, callback or ctf-raw)");
    cr_assert_eq(start_with((tvm_trace_options){ .format = TVM_TRACE_CALLBACK }, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_start: the callback format needs a callback");
    cr_assert_eq(start_with((tvm_trace_options){ .format = TVM_TRACE_CTF }, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_start: the ctf format needs a path (a directory)");
    cr_assert_eq(start_with((tvm_trace_options){ .format = TVM_TRACE_CHROME }, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_start: the chrome format needs a path or a file");
    cr_assert_eq(start_with((tvm_trace_options){ .ring_bytes = 1000 }, &err), TVM_ERR_BADARG);
    cr_assert(strstr(err.message, "ring size 1000 must be a power of two"), "%s", err.message);
    /* 1 TiB per ring: an error, where the allocation's failure used to
     * abort the program. */
    cr_assert_eq(start_with((tvm_trace_options){ .ring_bytes = (size_t)1 << 40 }, &err),
                 TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_start: trace: ring size 1099511627776 is above the "
                                  "maximum 1073741824");
    cr_assert_eq(start_with((tvm_trace_options){ .path = "/nonexistent/dir/t.txt" }, &err),
                 TVM_ERR_IO);
    cr_assert_str_eq(err.message, "tvm_trace_start: cannot open /nonexistent/dir/t.txt: "
                                  "No such file or directory");
    cr_assert_eq(tvm_trace_start(NULL, NULL, &err), TVM_ERR_BADARG);
    cr_assert_eq(tvm_trace_stop(vm), TVM_ERR_NOTFOUND);
    /* Nothing was left running: a good start still works. */
    cr_assert_eq(tvm_trace_start(vm, NULL, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
}

/* From now on the OS refuses every new thread: a default thread stack
 * of 1 PiB makes pthread_create fail (the schedulers and the
 * thread-progress thread must be running already).  *saved: what
 * threads_allowed puts back. */
static void threads_refused(pthread_attr_t *saved)
{
    pthread_attr_t huge;
    cr_assert_eq(pthread_getattr_default_np(saved), 0);
    pthread_attr_init(&huge);
    cr_assert_eq(pthread_attr_setstacksize(&huge, (size_t)1 << 50), 0);
    cr_assert_eq(pthread_setattr_default_np(&huge), 0);
    pthread_attr_destroy(&huge);
}

static void threads_allowed(pthread_attr_t *saved)
{
    cr_assert_eq(pthread_setattr_default_np(saved), 0);
    pthread_attr_destroy(saved);
}

/* The OS refusing the collector thread (a default thread stack of 1 PiB
 * makes pthread_create fail) is TVM_ERR_LIMIT with a message, for the
 * default session and a session alike, whatever the output; nothing is
 * left running (a good start works after) and nothing leaks (the
 * descriptor's writer did: LeakSanitizer, mode=asan). */
Test(trace_api, a_collector_the_os_refuses_is_an_error)
{
    tvm_error err;
    /* The schedulers and the thread-progress thread are threads too:
     * started first, by a pipeline's start and stop. */
    cr_assert_eq(tvm_trace_start(vm, NULL, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    tvm_trace_options outs[] = {
        { .size = sizeof(tvm_trace_options), .use_fd = true, .fd = fds[1] },
        { .size = sizeof(tvm_trace_options), .path = "/dev/null" },
        { .size = sizeof(tvm_trace_options), .file = stderr },
        { .size = sizeof(tvm_trace_options), .use_fd = true, .fd = fds[1],
          .policy = TVM_TRACE_LOSSLESS },
    };
    pthread_attr_t saved;
    threads_refused(&saved);
    tvm_status st[4], sst[4];
    char msg[4][256], smsg[4][256];
    for (int i = 0; i < 4; i++) {
        st[i] = tvm_trace_start(vm, &outs[i], &err);
        snprintf(msg[i], sizeof msg[i], "%s", err.message);
        tvm_session s;
        sst[i] = tvm_session_create(vm, "refused", &outs[i], &s, &err);
        snprintf(smsg[i], sizeof smsg[i], "%s", err.message);
    }
    threads_allowed(&saved);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(st[i], TVM_ERR_LIMIT, "%d: %d: %s", i, st[i], msg[i]);
        cr_assert_str_eq(msg[i], "tvm_trace_start: cannot start the collector thread");
        cr_assert_eq(sst[i], TVM_ERR_LIMIT, "%d: %d: %s", i, sst[i], smsg[i]);
        cr_assert_str_eq(smsg[i], "tvm_session_create: cannot start the collector thread");
    }
    cr_assert_eq(tvm_trace_stop(vm), TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_trace_start(vm, &outs[0], &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    close(fds[0]);
    close(fds[1]);
}

/* Every name in dir, sorted, joined by spaces ("" when empty; "-" when
 * dir is not there). */
static void dir_names(const char *dir, char *out, size_t n)
{
    struct dirent **e;
    int k = scandir(dir, &e, NULL, alphasort);
    size_t len = 0;
    out[0] = '\0';
    if (k < 0) {
        snprintf(out, n, "-");
        return;
    }
    for (int i = 0; i < k; i++) {
        if (strcmp(e[i]->d_name, ".") && strcmp(e[i]->d_name, ".."))
            len += (size_t)snprintf(out + len, n - len, "%s%s", len ? " " : "", e[i]->d_name);
        free(e[i]);
    }
    free(e);
}

/* A start the OS refuses a collector thread leaves no file and no
 * directory it made: the CTF sinks' directory and metadata (3,544 bytes
 * of it, and the directory, were left before the fix), a text file it
 * created; a directory that was there before, empty, stays, empty; a
 * start into the same place works after. */
Test(trace_api, a_refused_start_leaves_nothing_it_made)
{
    tvm_error err;
    cr_assert_eq(tvm_trace_start(vm, NULL, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    char base[] = "/tmp/tr_refused_XXXXXX", made[64], there[64], file[64], names[256];
    cr_assert(mkdtemp(base));
    snprintf(made, sizeof made, "%s/new", base);
    snprintf(there, sizeof there, "%s/there", base);
    snprintf(file, sizeof file, "%s/t.txt", base);
    cr_assert_eq(mkdir(there, 0777), 0);
    tvm_trace_options outs[] = {
        { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CTF, .path = made },
        { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CTF_RAW, .path = made },
        { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CTF, .path = there },
        { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CTF_RAW, .path = there,
          .policy = TVM_TRACE_LOSSLESS },
        { .size = sizeof(tvm_trace_options), .path = file },
        { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CHROME, .path = file },
    };
    enum { N = sizeof outs / sizeof outs[0] };
    for (int i = 0; i < N; i++) {
        for (int session = 0; session < 2; session++) {
            pthread_attr_t saved;
            threads_refused(&saved);
            tvm_session s;
            tvm_status st = session ? tvm_session_create(vm, "refused", &outs[i], &s, &err)
                                    : tvm_trace_start(vm, &outs[i], &err);
            threads_allowed(&saved);
            cr_assert_eq(st, TVM_ERR_LIMIT, "%d/%d: %d: %s", i, session, st, err.message);
            cr_assert_str_eq(err.message, session ? "tvm_session_create: cannot start the "
                                                    "collector thread"
                                                  : "tvm_trace_start: cannot start the "
                                                    "collector thread");
            dir_names(base, names, sizeof names);
            cr_assert_str_eq(names, "there", "%d/%d: left in %s: %s", i, session, base, names);
            dir_names(there, names, sizeof names);
            cr_assert_str_eq(names, "", "%d/%d: left in %s: %s", i, session, there, names);
        }
        /* The same place takes a start that works. */
        cr_assert_eq(tvm_trace_start(vm, &outs[i], &err), TVM_OK, "%d: %s", i, err.message);
        cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
        dir_names(outs[i].path, names, sizeof names);
        if (outs[i].format == TVM_TRACE_CTF || outs[i].format == TVM_TRACE_CTF_RAW) {
            cr_assert_str_eq(names, "metadata", "%d: %s", i, names);
            char meta[128];
            snprintf(meta, sizeof meta, "%s/metadata", outs[i].path);
            cr_assert_eq(unlink(meta), 0);
            if (outs[i].path == made)
                cr_assert_eq(rmdir(made), 0);
        } else {
            cr_assert_eq(unlink(file), 0);
        }
    }
    cr_assert_eq(rmdir(there), 0);
    cr_assert_eq(rmdir(base), 0);
}

/* A start that fails after its options were accepted (the output cannot
 * be opened) leaves the default session as it was: its duration limit
 * was set before the output was opened, and when it ran out the session
 * was stopped, taking the patterns set for the next start with it. */
Test(trace_api, a_failed_start_leaves_no_limit_behind)
{
    load_ok(vm, "ta", ta_src);
    int matched = 0;
    cr_assert_eq(tvm_trace_pattern(vm, "ta:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, &matched, NULL), TVM_OK);
    cr_assert_eq(matched, 1);
    tvm_error err;
    tvm_trace_options o = { .size = sizeof o, .path = "/nonexistent/dir/t.txt", .duration_ms = 1 };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_ERR_IO);
    cr_assert_str_eq(err.message, "tvm_trace_start: cannot open /nonexistent/dir/t.txt: "
                                  "No such file or directory");
    /* Well past the duration (a stop, had one been asked, is done in a
     * few ms): the pattern is still set and the session still live. */
    struct timespec ts = { 0, 300 * 1000000L };
    nanosleep(&ts, NULL);
    tvm_term t;
    char got[128];
    cr_assert_eq(tvm_trace_info(env, "ta:f/1", "traced", &t, &err), TVM_OK, "%s", err.message);
    tvm_format_term(env, t, got, sizeof got);
    cr_assert_str_eq(got, "{traced,local}");
    tvm_session_info in;
    cr_assert_eq(tvm_session_info_get(vm, TVM_SESSION_DEFAULT, &in), TVM_OK);
    cr_assert(in.live && !in.stopped, "the default session was stopped: %s", in.stopped);
}

/* tvm_destroy stops a pipeline still running (ASan checks nothing leaks). */
Test(trace_api, destroy_stops_the_pipeline)
{
    load_ok(vm, "ta", ta_src);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_PROCS, true), TVM_OK);
    FILE *f = tmpfile();
    start_text(f);
    tvm_pid w = spawn_waiter();
    end_waiter(w);
    tvm_env_free(env);
    tvm_destroy(vm);
    vm = tvm_new(NULL);
    env = tvm_env_new(vm);
    char *got = file_text(f), want[128];
    snprintf(want, sizeof want,
             "{trace,<0.%1$llu.0>,spawned,<0.0.0>,{ta,waiter,[]}}\n"
             "{trace,<0.%1$llu.0>,exit,normal}\n", (unsigned long long)w);
    cr_assert_str_eq(got, want);
    free(got);
    fclose(f);
}

/* ta_nat:start_stop/0: tvm_trace_start and tvm_trace_stop from a native
 * running on a process; returns {StartStatus, StopStatus}. */
static tvm_status nat_start_stop(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res,
                                 void *data)
{
    (void)argc, (void)argv, (void)data;
    tvm_error err;
    tvm_term st[2];
    tvm_make_int(e, tvm_trace_start(tvm_env_vm(e), NULL, &err), &st[0]);
    tvm_make_int(e, tvm_trace_stop(tvm_env_vm(e)), &st[1]);
    return tvm_make_tuple(e, 2, st, res);
}

Test(trace_api, not_from_a_native)
{
    cr_assert_eq(tvm_register_native(vm, "ta_nat", "start_stop", 0, nat_start_stop, NULL, NULL),
                 TVM_OK);
    tvm_pid pid;
    tvm_term r;
    char out[64];
    cr_assert_eq(tvm_spawn(env, "ta_nat", "start_stop", 0, NULL, &pid), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    char want[64];
    snprintf(want, sizeof want, "{%d,%d}", (int)TVM_ERR_BADARG, (int)TVM_ERR_BADARG);
    cr_assert_str_eq(out, want);
}

/* The callback format: every event with its fields and text, here a call
 * traced with return_trace through a match spec given as text. */
typedef struct Seen {
    char text[1024];
    int n, lost;
} Seen;

static void on_event(const tvm_trace_event *ev, void *data)
{
    Seen *s = data;
    char line[256];
    snprintf(line, sizeof line, "%s %s:%s/%d %s\n", ev->kind, ev->module ? ev->module : "-",
             ev->function ? ev->function : "-", ev->arity, ev->text);
    strncat(s->text, line, sizeof s->text - strlen(s->text) - 1);
    s->n++;
}

Test(trace_api, callback_format)
{
    load_ok(vm, "ta", ta_src);
    tvm_error err;
    cr_assert_eq(tvm_trace_pattern_ms(vm, "ta:_/_", "[{'_',[],[{return_trace}]}]", TVM_TP_TRUE,
                                      TVM_TP_LOCAL, 0, NULL, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL | TVM_TRACE_PROCS, true),
                 TVM_OK);
    Seen seen = { .n = 0 };
    tvm_trace_options o = { .size = sizeof(tvm_trace_options),
                            .format = TVM_TRACE_CALLBACK, .callback = on_event,
                            .callback_data = &seen };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    tvm_pid p = run_g(4);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    char want[1024];
    snprintf(want, sizeof want,
             "spawned ta:g/1 {trace,<0.%1$llu.0>,spawned,<0.0.0>,{ta,g,[4]}}\n"
             "call ta:g/1 {trace,<0.%1$llu.0>,call,{ta,g,[4]}}\n"
             "call ta:f/1 {trace,<0.%1$llu.0>,call,{ta,f,[4]}}\n"
             "return_from ta:f/1 {trace,<0.%1$llu.0>,return_from,{ta,f,1},5}\n"
             "return_from ta:g/1 {trace,<0.%1$llu.0>,return_from,{ta,g,1},5}\n"
             "exit -:-/0 {trace,<0.%1$llu.0>,exit,normal}\n",
             (unsigned long long)p);
    cr_assert_str_eq(seen.text, want);
    cr_assert_eq(seen.n, 6);
}

/* Calls into the trace pipeline from a sink's callback, a collector
 * thread.  Each one that would wait for a collector (its own or another
 * session's) is refused with TVM_ERR_BADARG instead of waiting, perhaps
 * for itself.  The callback makes its calls once, on its first event, and
 * reports their statuses; the test waits for them up to a generous
 * deadline, so a call that hangs fails the test rather than hanging it
 * (the teardown would then hang on the stuck collector: .timeout).
 * Before the refusal the stop from the pipeline's own callback did not
 * hang but joined its own thread (EDEADLK) and freed the pipeline under
 * it, returning TVM_OK; the teardown crashed. */
typedef struct Reenter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    tvm_session other;          /* a session the callback tries to destroy */
    tvm_status stop, start, flush, flush_other, destroy;
    char start_msg[256], destroy_msg[256];
} Reenter;

static void reenter(const tvm_trace_event *ev, void *data)
{
    (void)ev;
    Reenter *r = data;
    pthread_mutex_lock(&r->lock);
    bool first = !r->done;
    pthread_mutex_unlock(&r->lock);
    if (!first)
        return;
    tvm_error err;
    tvm_vm *v = vm;
    tvm_status stop = tvm_trace_stop(v);
    tvm_status start = tvm_trace_start(v, NULL, &err);
    char start_msg[256];
    snprintf(start_msg, sizeof start_msg, "%s", err.message);
    tvm_status flush = tvm_session_flush(v, TVM_SESSION_DEFAULT);
    tvm_status flush_other = tvm_session_flush(v, r->other);
    tvm_status destroy = tvm_session_destroy(v, r->other, &err);
    pthread_mutex_lock(&r->lock);
    r->stop = stop, r->start = start, r->flush = flush, r->flush_other = flush_other;
    r->destroy = destroy;
    snprintf(r->start_msg, sizeof r->start_msg, "%s", start_msg);
    snprintf(r->destroy_msg, sizeof r->destroy_msg, "%s", err.message);
    r->done = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

/* Waits up to 30 s for the callback's report; false if none came. */
static bool reenter_wait(Reenter *r)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 30;
    pthread_mutex_lock(&r->lock);
    while (!r->done && pthread_cond_timedwait(&r->cond, &r->lock, &dl) == 0)
        ;
    bool done = r->done;
    pthread_mutex_unlock(&r->lock);
    return done;
}

static void reenter_check(Reenter *r)
{
    cr_assert(reenter_wait(r), "a pipeline call from a trace callback hangs");
    cr_assert_eq(r->stop, TVM_ERR_BADARG, "stop: %d", (int)r->stop);
    cr_assert_eq(r->start, TVM_ERR_BADARG, "start: %d", (int)r->start);
    cr_assert_str_eq(r->start_msg, "tvm_trace_start: called from a sink (a trace callback): a "
                                   "start waits for a stopping pipeline's sink");
    cr_assert_eq(r->flush, TVM_ERR_BADARG, "flush: %d", (int)r->flush);
    cr_assert_eq(r->flush_other, TVM_ERR_BADARG, "flush_other: %d", (int)r->flush_other);
    cr_assert_eq(r->destroy, TVM_ERR_BADARG, "destroy: %d", (int)r->destroy);
    cr_assert_str_eq(r->destroy_msg, "tvm_session_destroy: called from a sink (a trace "
                                     "callback): a destroy waits for the session's sink");
}

static tvm_session text_session(const char *name, FILE *f)
{
    tvm_error err;
    tvm_session s;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_TEXT,
                            .file = f };
    cr_assert_eq(tvm_session_create(vm, name, &o, &s, &err), TVM_OK, "%s", err.message);
    return s;
}

/* The default pipeline's own callback: the stop and the flush would wait
 * for this very thread. */
Test(trace_api, no_pipeline_call_from_its_own_callback, .timeout = 120)
{
    load_ok(vm, "ta", ta_src);
    FILE *f = tmpfile();
    static Reenter r = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    r.other = text_session("other", f);
    tvm_error err;
    cr_assert_eq(tvm_trace_pattern(vm, "ta:f/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err),
                 TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK,
                            .callback = reenter, .callback_data = &r };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    run_g(1);
    reenter_check(&r);
    /* Nothing changed: the pipeline and the other session run on. */
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    cr_assert_eq(tvm_session_destroy(vm, r.other, &err), TVM_OK, "%s", err.message);
    fclose(f);
}

/* Another session's callback: the default pipeline's stop and flush wait
 * for the default collector, a destroy for the other session's; two
 * callbacks making such calls on each other's pipelines would wait for
 * each other. */
Test(trace_api, no_pipeline_call_from_another_sessions_callback, .timeout = 120)
{
    load_ok(vm, "ta", ta_src);
    FILE *f = tmpfile(), *g = tmpfile();
    static Reenter r = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    start_text(f);
    r.other = text_session("other", g);
    tvm_error err;
    tvm_session s;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CALLBACK,
                            .callback = reenter, .callback_data = &r };
    cr_assert_eq(tvm_session_create(vm, "reenter", &o, &s, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_trace_pattern(vm, s, "ta:f/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL, 0,
                                           NULL, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_trace_flags_all(vm, s, TVM_TRACE_NEW, TVM_TRACE_CALL, true, &err),
                 TVM_OK, "%s", err.message);
    run_g(1);
    reenter_check(&r);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    cr_assert_eq(tvm_session_destroy(vm, r.other, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_destroy(vm, s, &err), TVM_OK, "%s", err.message);
    fclose(f);
    fclose(g);
}

/* A CTF directory where `metadata` cannot be created fails the start with
 * TVM_ERR_IO and the reason (a tvm_trace_start or tvm_session_create
 * returned TVM_OK before, the sink dropped at its open with a line on
 * stderr: a pipeline that wrote nothing).  Nothing runs after it, and
 * nothing is left that was not there: an existing directory stays, empty;
 * one the start made goes again. */
static void ctf_refused(const char *dir, const char *reason, bool session)
{
    static const tvm_trace_format formats[] = { TVM_TRACE_CTF, TVM_TRACE_CTF_RAW };
    for (size_t i = 0; i < 2; i++) {
        tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = formats[i],
                                .path = dir };
        tvm_error err;
        tvm_session s;
        const char *fn = session ? "tvm_session_create" : "tvm_trace_start";
        tvm_status st = session ? tvm_session_create(vm, "ctf", &o, &s, &err)
                                : tvm_trace_start(vm, &o, &err);
        cr_assert_eq(st, TVM_ERR_IO, "%s format %d: %d", fn, (int)formats[i], (int)st);
        char want[sizeof err.message], pb[1025];
        snprintf(want, sizeof want, "%s: trace: cannot create CTF metadata %s/metadata: %s", fn,
                 msg_path(dir, pb), reason);
        /* A path of 4 KiB is named by its start and its end, so that the
         * reason stays (it was cut off before). */
        cr_assert_str_eq(err.message, want);
        cr_assert_eq(tvm_trace_stop(vm), TVM_ERR_NOTFOUND);
        tvm_session_info info;
        cr_assert_eq(tvm_session_info_get(vm, (tvm_session){ 1 }, &info), TVM_ERR_NOTFOUND);
    }
}

Test(trace_api, a_ctf_directory_without_room_for_its_metadata_is_an_error)
{
    char base[] = "/tmp/tr_ctf_ro_XXXXXX", ro[64];
    cr_assert(mkdtemp(base));
    snprintf(ro, sizeof ro, "%s/ro", base);
    cr_assert_eq(mkdir(ro, 0555), 0);
    /* Root writes anywhere: the rest of this test runs as nobody, the
     * owner of both directories (so it can clean them up). */
    if (geteuid() == 0) {
        cr_assert_eq(chown(base, 65534, 65534), 0);
        cr_assert_eq(chown(ro, 65534, 65534), 0);
        cr_assert_eq(setresgid(65534, 65534, 65534), 0);
        cr_assert_eq(setresuid(65534, 65534, 65534), 0);
    }
    ctf_refused(ro, "Permission denied", false);
    ctf_refused(ro, "Permission denied", true);
    struct stat st;
    cr_assert_eq(stat(ro, &st), 0, "the existing directory is kept");
    char meta[96];
    snprintf(meta, sizeof meta, "%s/metadata", ro);
    cr_assert_neq(stat(meta, &st), 0, "no metadata was made");
    /* A directory where it fits works as before. */
    cr_assert_eq(chmod(ro, 0755), 0);
    tvm_error err;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .format = TVM_TRACE_CTF,
                            .path = ro };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    cr_assert_eq(stat(meta, &st), 0, "the metadata is written");
    cr_assert_eq(unlink(meta), 0);
    cr_assert_eq(rmdir(ro), 0);
    cr_assert_eq(rmdir(base), 0);
}

/* A directory whose path leaves no room for "/metadata" (4096 bytes with
 * the NUL): the start made it, and removes it again.  Before, the
 * metadata's path was cut to fit and a file of another name written. */
Test(trace_api, a_ctf_directory_too_long_for_its_metadata_is_removed_again)
{
    char base[] = "/tmp/tr_ctf_long_XXXXXX";
    cr_assert(mkdtemp(base));
    static char dir[4096];
    /* Components of 200 bytes up to 4090 bytes in all, then the last. */
    size_t len = long_chain_make(base, dir, 4090);
    dir[len++] = '/';
    memset(dir + len, 'e', 4090 - len);
    len = 4090;
    dir[len] = '\0';
    char parent[4096];
    snprintf(parent, sizeof parent, "%.*s", (int)(strrchr(dir, '/') - dir), dir);
    ctf_refused(dir, "File name too long", false);
    struct stat st;
    cr_assert_neq(stat(dir, &st), 0, "the directory the start made is removed");
    /* Nothing else in its parent (no metadata under a cut name). */
    DIR *d = opendir(parent);
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    cr_assert_eq(n, 0, "%d entries left in the parent", n);
    /* A file that cannot be opened under that long path: its name is
     * shortened in the middle and the OS's reason kept. */
    static char file[4200], want[sizeof(tvm_error){ 0 }.message];
    char pb[1025];
    snprintf(file, sizeof file, "%s/nope/t.txt", parent);
    tvm_error err;
    tvm_trace_options o = { .size = sizeof(tvm_trace_options), .path = file };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_ERR_IO);
    snprintf(want, sizeof want, "tvm_trace_start: cannot open %s: No such file or directory",
             msg_path(file, pb));
    cr_assert_str_eq(err.message, want);
    tvm_session s;
    cr_assert_eq(tvm_session_create(vm, "long", &o, &s, &err), TVM_ERR_IO);
    snprintf(want, sizeof want, "tvm_session_create: cannot open %s: No such file or directory",
             msg_path(file, pb));
    cr_assert_str_eq(err.message, want);
    long_chain_remove(base, parent);
}
