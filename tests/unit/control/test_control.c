/*
 * tests/unit/control/test_control.c - the control endpoint through the
 * public API alone, in one OS process: tvm_control_start/stop/path, the
 * peer list, a client's calls (an "ok" reply's exact lines, an "error"
 * reply's exact message), a load with errors and a good one, and the
 * status codes of bad targets, a client that hangs up in the middle
 * of a long request, and requests in progress when the endpoint stops.  tests/sh/control.sh drives the same
 * endpoint from another OS process with tracevm attach.
 */
#define _GNU_SOURCE   /* pthread_timedjoin_np */
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control/ctl_internal.h"
#include "tests/unit/helpers.h"

static tvm_vm *vm;
static char dir[64];

/* Each test serves from a directory of its own, so that peers of other
 * test programs running at the same time are not listed. */
static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/tvm-ctl-test.%ld", (long)getpid());
    cr_assert_eq(mkdir(dir, 0700), 0, "mkdir %s", dir);
    setenv("TRACEVM_CONTROL_DIR", dir, 1);
    vm = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 1 });
}

static void teardown(void)
{
    tvm_destroy(vm);
    rmdir(dir);
}

TestSuite(control, .init = setup, .fini = teardown);

/* Collects a reply's lines, one per row, joined by LF. */
typedef struct Lines {
    char text[4096];
    size_t len;
    int count;
} Lines;

static void on_line(const char *line, size_t len, void *data)
{
    Lines *l = data;
    int n = snprintf(l->text + l->len, sizeof l->text - l->len, "%.*s\n", (int)len, line);
    if (n > 0 && (size_t)n < sizeof l->text - l->len)
        l->len += (size_t)n;
    l->count++;
}

/* The value of "key: value" in lines, or "" */
static const char *field(const Lines *l, const char *key, char *buf, size_t size)
{
    size_t k = strlen(key);
    buf[0] = '\0';
    for (const char *p = l->text; *p;) {
        const char *nl = strchr(p, '\n');
        if (!strncmp(p, key, k) && p[k] == ':' && p[k + 1] == ' ')
            snprintf(buf, size, "%.*s", (int)(nl - p - k - 2), p + k + 2);
        p = nl + 1;
    }
    return buf;
}

static tvm_control_client *connect_ok(void)
{
    tvm_control_client *c = NULL;
    tvm_error err;
    cr_assert_eq(tvm_control_connect(tvm_control_path(vm), &c, &err), TVM_OK, "connect: %s",
                 err.message);
    return c;
}

Test(control, start_serves_a_socket_and_stop_removes_it)
{
    tvm_error err;
    cr_assert_null(tvm_control_path(vm));
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    const char *path = tvm_control_path(vm);
    cr_assert_not_null(path);
    char want[128];
    snprintf(want, sizeof want, "%s/%ld.", dir, (long)getpid());
    cr_assert_eq(strncmp(path, want, strlen(want)), 0, "path %s", path);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);

    cr_assert_eq(tvm_control_start(vm, &err), TVM_ERR_EXISTS);

    char copy[256];
    snprintf(copy, sizeof copy, "%s", path);
    tvm_control_stop(vm);
    cr_assert_null(tvm_control_path(vm));
    cr_assert_neq(stat(copy, &st), 0, "the socket is still there");
    tvm_control_stop(vm); /* nothing when not serving */
}

/* The path tvm_control_path gave stays readable after a stop (it pointed
 * into the freed server before the fix: AddressSanitizer's
 * heap-use-after-free), and a restart serves the same path. */
Test(control, the_path_outlives_a_stop_and_a_restart_serves_it_again)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    const char *path = tvm_control_path(vm);
    char copy[256];
    snprintf(copy, sizeof copy, "%s", path);
    tvm_control_stop(vm);
    cr_assert_null(tvm_control_path(vm));
    cr_assert_str_eq(path, copy);
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    cr_assert_str_eq(tvm_control_path(vm), copy);
    cr_assert_eq(tvm_control_path(vm), path, "the same kept string");
    struct stat st;
    cr_assert_eq(stat(copy, &st), 0, "served again");
    tvm_control_stop(vm);
}

/* tvm_control_path on one thread while another starts and stops the
 * endpoint: each answer is NULL or the VM's path, readable whole. */
static void *path_reader(void *arg)
{
    const char *want = arg;
    for (int i = 0; i < 200000; i++) {
        const char *p = tvm_control_path(vm);
        if (p && strcmp(p, want) != 0)
            return (void *)p;
    }
    return NULL;
}

Test(control, the_path_read_while_another_thread_stops_the_endpoint)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    char want[256];
    snprintf(want, sizeof want, "%s", tvm_control_path(vm));
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, path_reader, want), 0);
    for (int i = 0; i < 50; i++) {
        tvm_control_stop(vm);
        cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    }
    void *bad;
    pthread_join(t, &bad);
    cr_assert_null(bad, "read %s", (const char *)bad);
    tvm_control_stop(vm);
}

Test(control, the_peer_list_names_this_process)
{
    tvm_error err;
    tvm_control_peer peers[4];
    cr_assert_eq(tvm_control_list(peers, 4), 0);
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_control_list(peers, 4), 1);
    cr_assert_eq(peers[0].pid, (long)getpid());
    cr_assert_str_eq(peers[0].path, tvm_control_path(vm));
    cr_assert_eq(tvm_control_list(NULL, 0), 1);
}

Test(control, info_replies_with_exact_fields)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    load_ok(vm, "m.tasm", "module m\nexport f/0\nfunction f/0 regs 1\n    loadi r0, 1\n"
                          "    ret r0\nend\n");
    tvm_control_client *c = connect_ok();
    Lines l = { 0 };
    const char *argv[] = { "info" };
    cr_assert_eq(tvm_control_call(c, 1, argv, on_line, &l, &err), TVM_OK, "%s", err.message);
    char buf[64], pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    cr_assert_str_eq(field(&l, "pid", buf, sizeof buf), pid);
    /* Scheduler threads start with the first process; none has run. */
    cr_assert_str_eq(field(&l, "schedulers", buf, sizeof buf), "0");
    cr_assert_str_eq(field(&l, "modules", buf, sizeof buf), "1");
    cr_assert_str_eq(field(&l, "clients", buf, sizeof buf), "1");
    cr_assert_str_eq(field(&l, "processes", buf, sizeof buf), "0");
    cr_assert_str_eq(field(&l, "protocol", buf, sizeof buf), "1");
    cr_assert_str_eq(field(&l, "sessions", buf, sizeof buf), "1");   /* the default one */
    cr_assert_eq(l.count, 9, "lines:\n%s", l.text);
    tvm_control_close(c);
}

Test(control, an_error_reply_carries_the_servers_message)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    tvm_control_client *c = connect_ok();
    const char *bad[] = { "frobnicate", "x" };
    cr_assert_eq(tvm_control_call(c, 2, bad, NULL, NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "unknown command 'frobnicate'");
    const char *extra[] = { "info", "now" };
    cr_assert_eq(tvm_control_call(c, 2, extra, NULL, NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "info: unexpected argument 'now'");
    /* The connection serves on after errors. */
    Lines l = { 0 };
    const char *info[] = { "info" };
    cr_assert_eq(tvm_control_call(c, 1, info, on_line, &l, &err), TVM_OK, "%s", err.message);
    tvm_control_close(c);
}

Test(control, a_bad_load_changes_nothing_and_a_good_one_loads)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    tvm_control_client *c = connect_ok();
    const char *bad = "module extra\nexport f/0\nfunction f/0 regs 1\n    bogus r0\n"
                      "    ret r9\nend\n";
    Lines l = { 0 };
    cr_assert_eq(tvm_control_load(c, "bad.tasm", bad, strlen(bad), on_line, &l, &err),
                 TVM_ERR_LOAD);
    cr_assert_str_eq(l.text, "bad.tasm:4:5: error: unknown instruction 'bogus'\n"
                             "bad.tasm:5:9: error: register r9 out of range: f/0 has 1 "
                             "registers\n");
    cr_assert_eq(tvm_modules(vm, NULL, 0), 0);

    const char *good = "module extra\nexport f/0\nfunction f/0 regs 1\n    loadi r0, 7\n"
                       "    ret r0\nend\n";
    Lines g = { 0 };
    cr_assert_eq(tvm_control_load(c, "good.tasm", good, strlen(good), on_line, &g, &err),
                 TVM_OK, "%s", err.message);
    cr_assert_eq(g.count, 0, "%s", g.text);
    cr_assert_eq(tvm_modules(vm, NULL, 0), 1);
    tvm_control_close(c);
}

Test(control, bad_targets_have_their_status)
{
    tvm_control_client *c = NULL;
    tvm_error err;
    cr_assert_eq(tvm_control_connect("", &c, &err), TVM_ERR_BADARG);
    cr_assert_null(c);
    /* No VM of this user serves in the test's empty directory. */
    cr_assert_eq(tvm_control_connect("1", &c, &err), TVM_ERR_NOTFOUND);
    char path[128];
    snprintf(path, sizeof path, "%s/none.sock", dir);
    cr_assert_eq(tvm_control_connect(path, &c, &err), TVM_ERR_NOTFOUND);
    /* A path no socket address holds: named by its start and end, with
     * the reason (a 4,090-byte one filled the message before). */
    static char lng[4091], want[sizeof err.message];
    char pb[1025];
    lng[0] = '/';
    memset(lng + 1, 'x', sizeof lng - 2);
    cr_assert_eq(tvm_control_connect(lng, &c, &err), TVM_ERR_IO);
    snprintf(want, sizeof want, "cannot connect to %s: File name too long", msg_path(lng, pb));
    cr_assert_str_eq(err.message, want);
    cr_assert_null(c);
}

/* A target that is not all digits is no pid (strtol would take blanks,
 * a sign, and a number past LONG_MAX clamped); a NULL out is named. */
Test(control, a_malformed_target_and_a_null_out_are_named)
{
    tvm_control_client *c = NULL;
    tvm_error err;
    static const char *const bad[] = { "99999999999999999999", " 5", "+5", "5 ", "-1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(tvm_control_connect(bad[i], &c, &err), TVM_ERR_BADARG, "'%s'", bad[i]);
        char want[128];
        snprintf(want, sizeof want, "target '%s' is neither a pid nor a socket path", bad[i]);
        cr_assert_str_eq(err.message, want);
        cr_assert_null(c);
    }
    cr_assert_eq(tvm_control_connect("1", NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_control_connect: NULL out");
    cr_assert_eq(tvm_control_connect(NULL, &c, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_control_connect: no target");
}

/* A socket connected to the endpoint without the client API, its
 * receive buffer `rcvbuf` bytes (0: the default), the greeting unread. */
static int dial_raw(int rcvbuf)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    if (rcvbuf)
        cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", tvm_control_path(vm));
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Connects without the client API and sends `request` (one line) once
 * the greeting is read; the socket stays open. */
static int send_raw(const char *request)
{
    int fd = dial_raw(0);
    char ch;
    while (read(fd, &ch, 1) == 1 && ch != '\n')
        ;
    cr_assert_eq(write(fd, request, strlen(request)), (ssize_t)strlen(request));
    return fd;
}

/* Sends `request` as send_raw does and hangs up at once, as tracevm
 * attach does when ^C stops it. */
static void hang_up_during(const char *request)
{
    close(send_raw(request));
}

/* info's clients and sessions once the endpoint serves only `c` and the
 * VM holds only its default session, or as they are after 30 s (a bound
 * on a stuck request, not a timing: a cancelled one ends within 50 ms). */
static void wait_alone(tvm_control_client *c, char *clients, char *sessions)
{
    for (int i = 0; i < 600; i++) {
        Lines l = { 0 };
        tvm_error err;
        const char *argv[] = { "info" };
        cr_assert_eq(tvm_control_call(c, 1, argv, on_line, &l, &err), TVM_OK, "%s",
                     err.message);
        field(&l, "clients", clients, 16);
        field(&l, "sessions", sessions, 16);
        if (!strcmp(clients, "1") && !strcmp(sessions, "1"))
            return;
        nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
    }
}

/* A client that hangs up in the middle of a count, a time, a profile or
 * a top of an hour cancels it: the request's thread ends and frees its
 * slot (one of 16), the count's session and its breakpoints go, and the
 * profile writes no file.  Each request is first made whole, short, to
 * show that it is one the server runs. */
Test(control, a_client_that_hangs_up_cancels_its_request)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    load_ok(vm, "m.tasm", "module m\nexport f/0\nfunction f/0 regs 1\n    loadi r0, 1\n"
                          "    ret r0\nend\n");
    char out[128], line[192];
    snprintf(out, sizeof out, "%s/cancelled.folded", dir);
    const char *whole[][6] = {
        { "count", "m:_/_", "--duration", "0.05" },
        { "time", "m:_/_", "--duration", "0.05" },
        { "profile", "--duration", "0.05", "--out", out },
        { "top", "--interval", "10", "--count", "1" },
    };
    const int nwords[] = { 4, 4, 5, 5 };
    const char *cut[] = { "count m:_/_ --duration 3600", "time m:_/_ --duration 3600",
                          "profile --duration 3600 --out ", "top --interval 3600000" };
    tvm_control_client *c = connect_ok();
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
        Lines l = { 0 };
        cr_assert_eq(tvm_control_call(c, nwords[i], whole[i], on_line, &l, &err), TVM_OK,
                     "%s: %s", whole[i][0], err.message);
        unlink(out);
        snprintf(line, sizeof line, "%s%s\n", cut[i], i == 2 ? out : "");
        hang_up_during(line);
        char clients[16], sessions[16];
        wait_alone(c, clients, sessions);
        cr_assert_str_eq(clients, "1", "after '%s': %s clients", cut[i], clients);
        cr_assert_str_eq(sessions, "1", "after '%s': %s sessions", cut[i], sessions);
    }
    struct stat st;
    cr_assert_neq(stat(out, &st), 0, "the cancelled profile wrote %s", out);
    tvm_control_close(c);
}

/* The clients hold at most 8 trace sessions (half of the 16): the ninth
 * count is refused with the reason, and the program can still create
 * sessions of its own.  Before, 15 clients took every session there was. */
Test(control, the_clients_leave_the_program_half_of_the_sessions)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    load_ok(vm, "m.tasm", "module m\nexport f/0\nfunction f/0 regs 1\n    loadi r0, 1\n"
                          "    ret r0\nend\n");
    int fds[CTL_MAX_SESSIONS];
    for (int i = 0; i < CTL_MAX_SESSIONS; i++)
        fds[i] = send_raw("count m:_/_ --duration 60\n");
    tvm_control_client *c = connect_ok();
    char sessions[16] = "";
    for (int i = 0; i < 600 && strcmp(sessions, "9"); i++) {
        Lines l = { 0 };
        const char *argv[] = { "info" };
        cr_assert_eq(tvm_control_call(c, 1, argv, on_line, &l, &err), TVM_OK, "%s", err.message);
        field(&l, "sessions", sessions, sizeof sessions);
        nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
    }
    cr_assert_str_eq(sessions, "9", "the counts' sessions");
    Lines l = { 0 };
    const char *count[] = { "count", "m:_/_", "--duration", "0.05" };
    cr_assert_eq(tvm_control_call(c, 4, count, on_line, &l, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "count: the control clients hold 8 trace sessions, the most "
                                  "they may (the others are the program's)");
    tvm_session mine[7];
    for (int i = 0; i < 7; i++) {
        char name[16];
        snprintf(name, sizeof name, "mine-%d", i);
        cr_assert_eq(tvm_session_create(vm, name, &(tvm_trace_options){ .size = sizeof(
                                                      tvm_trace_options), .format = TVM_TRACE_TEXT,
                                                      .path = "/dev/null" }, &mine[i], &err),
                     TVM_OK, "session %d: %s", i, err.message);
    }
    for (int i = 0; i < 7; i++)
        tvm_session_destroy(vm, mine[i], &err);
    for (int i = 0; i < CTL_MAX_SESSIONS; i++)
        close(fds[i]);
    char clients[16];
    wait_alone(c, clients, sessions);
    cr_assert_str_eq(sessions, "1");
    l = (Lines){ 0 };
    cr_assert_eq(tvm_control_call(c, 4, count, on_line, &l, &err), TVM_OK, "%s", err.message);
    tvm_control_close(c);
}

/* A directory whose name leaves no room for the socket's in a socket
 * address (107 bytes) is refused before anything is created (it was
 * created, then the socket's path was found too long). */
Test(control, a_directory_name_too_long_is_refused_before_it_is_made)
{
    char longdir[128];
    snprintf(longdir, sizeof longdir, "%s/%s", dir,
             "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd");
    cr_assert_gt(strlen(longdir), 83);
    setenv("TRACEVM_CONTROL_DIR", longdir, 1);
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_ERR_BADARG);
    char want[128];
    snprintf(want, sizeof want, "tvm_control: directory name too long (%zu bytes; at most 83)",
             strlen(longdir));
    cr_assert_str_eq(err.message, want);
    struct stat st;
    cr_assert_neq(stat(longdir, &st), 0, "%s was created", longdir);
    setenv("TRACEVM_CONTROL_DIR", dir, 1);
}

/* A client that sends requests and never reads their replies: once the
 * socket is full, the server's send waits ctl_send_ms (here 200 ms, 60 s
 * outside tests) and gives the connection up, so its slot is free again
 * (before, the send blocked for as long as the client lived). */
Test(control, a_client_that_never_reads_its_replies_is_let_go)
{
    ctl_send_ms = 200;
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    int fd = dial_raw(4096);
    /* Requests until the socket takes none for a second (the server,
     * blocked on its replies, stopped reading) or refuses them (the
     * server let the connection go): a few hundred replies fill both
     * sockets' buffers. */
    int sent = 0;
    struct pollfd pf = { .fd = fd, .events = POLLOUT };
    while (sent < 20000 && poll(&pf, 1, 1000) == 1 && (pf.revents & POLLOUT) &&
           send(fd, "info\n", 5, MSG_DONTWAIT | MSG_NOSIGNAL) == 5)
        sent++;
    cr_assert_gt(sent, 100, "only %d requests went out", sent);
    tvm_control_client *c = connect_ok();
    char clients[16], sessions[16];
    wait_alone(c, clients, sessions);
    cr_assert_str_eq(clients, "1", "%s clients: the silent one still holds its slot", clients);
    tvm_control_close(c);
    close(fd);
}

/* trace_info while a session has stopped at its limit (as another
 * client's trace at its --max-events) and is not destroyed yet: that
 * session is not live and has no line; its own answer would be an
 * error, which the command once replied with instead of the table. */
Test(control, trace_info_skips_a_stopped_session)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    load_ok(vm, "m.tasm", "module m\nexport f/0, main/0\nfunction f/0 regs 1\n    loadi r0, 1\n"
                          "    ret r0\nend\nfunction main/0 regs 1\n    call r0, r0, f/0\n"
                          "    call r0, r0, f/0\n    ret r0\nend\n");
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_TEXT, .path = "/dev/null",
                            .max_events = 1 };
    tvm_session s;
    cr_assert_eq(tvm_session_create(vm, "limited", &o, &s, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_trace_pattern(vm, s, "m:f/0", NULL, TVM_TP_TRUE, TVM_TP_LOCAL, 0,
                                           NULL, &err),
                 TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_trace_flags_all(vm, s, TVM_TRACE_ALL, TVM_TRACE_CALL, true, &err),
                 TVM_OK, "%s", err.message);
    tvm_env *env = tvm_env_new(vm);
    tvm_pid pid;
    tvm_term r;
    cr_assert_eq(tvm_spawn(env, "m", "main", 0, NULL, &pid), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    tvm_session_info in = { .live = true };
    for (int i = 0; i < 1000 && in.live; i++) {
        if (i)
            nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
        cr_assert_eq(tvm_session_info_get(vm, s, &in), TVM_OK);
    }
    cr_assert(!in.live && in.stopped && !strcmp(in.stopped, "max_events"), "the session: %s",
              in.stopped ? in.stopped : "running");

    tvm_control_client *c = connect_ok();
    Lines l = { 0 };
    const char *argv[] = { "trace_info", "m:f/0", "traced" };
    cr_assert_eq(tvm_control_call(c, 3, argv, on_line, &l, &err), TVM_OK, "%s", err.message);
    cr_assert_str_eq(l.text, "session 0 default: {traced,false}\n");
    tvm_control_close(c);
    cr_assert_eq(tvm_session_destroy(vm, s, &err), TVM_OK, "%s", err.message);
    tvm_env_free(env);
}

/* A request made on a connection of its own, on a thread of its own. */
typedef struct Pending {
    tvm_control_client *c;
    const char *const *argv;
    int argc;
    tvm_status st;
    Lines l;
    pthread_t th;
} Pending;

static void *pending_main(void *arg)
{
    Pending *p = arg;
    tvm_error err;
    p->st = tvm_control_call(p->c, p->argc, p->argv, on_line, &p->l, &err);
    return NULL;
}

/* The endpoint stops while a trace and a count of an hour are running:
 * each ends its reply as at its own end, the trace with its last record
 * (the session destroyed, nothing written: m:f/0 is never called), the
 * count with its table of the time it counted, and both calls succeed; a client that was
 * between requests is ended, and the socket file is gone. */
Test(control, requests_in_progress_end_their_replies_when_the_endpoint_stops)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    load_ok(vm, "m.tasm", "module m\nexport f/0\nfunction f/0 regs 1\n    loadi r0, 1\n"
                          "    ret r0\nend\n");
    static const char *const trace[] = { "trace", "m:f/0", "--duration", "3600" };
    static const char *const count[] = { "count", "m:_/_", "--duration", "3600" };
    Pending p[2] = { { .c = connect_ok(), .argv = trace, .argc = 4 },
                     { .c = connect_ok(), .argv = count, .argc = 4 } };
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&p[i].th, NULL, pending_main, &p[i]), 0);
    /* Both running: three clients, and a session each besides the
     * default (a bound of 30 s on a stuck start, not a timing). */
    tvm_control_client *idle = connect_ok();
    char clients[16] = "", sessions[16] = "";
    for (int i = 0; i < 600 && (strcmp(clients, "3") || strcmp(sessions, "3")); i++) {
        Lines l = { 0 };
        const char *argv[] = { "info" };
        cr_assert_eq(tvm_control_call(idle, 1, argv, on_line, &l, &err), TVM_OK, "%s",
                     err.message);
        field(&l, "clients", clients, sizeof clients);
        field(&l, "sessions", sessions, sizeof sessions);
        if (strcmp(clients, "3") || strcmp(sessions, "3"))
            nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
    }
    cr_assert_str_eq(clients, "3");
    cr_assert_str_eq(sessions, "3");
    char path[256];
    snprintf(path, sizeof path, "%s", tvm_control_path(vm));
    tvm_control_stop(vm);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(pthread_join(p[i].th, NULL), 0);
        cr_assert_eq(p[i].st, TVM_OK, "%s: %s (%s)", p[i].argv[0], tvm_status_name(p[i].st),
                     p[i].l.text);
        tvm_control_close(p[i].c);
    }
    cr_assert_str_eq(p[0].l.text, "{trace_stopped,destroyed,0,0}\n");
    /* The count's table: no function called, in the time it counted
     * (cut short: less than the hour asked for). */
    double secs = 0;
    char tail[8] = "";
    cr_assert_eq(sscanf(p[1].l.text,
                        "FUNCTION                                        CALLS\n"
                        "  0 functions, 0 calls in %lf %7s",
                        &secs, tail),
                 2, "%s", p[1].l.text);
    cr_assert_str_eq(tail, "s");
    cr_assert(secs > 0 && secs < 3600, "%s", p[1].l.text);
    /* The idle connection was ended: a request on it fails. */
    Lines l = { 0 };
    const char *argv[] = { "info" };
    cr_assert_neq(tvm_control_call(idle, 1, argv, on_line, &l, &err), TVM_OK);
    tvm_control_close(idle);
    struct stat st;
    cr_assert_neq(stat(path, &st), 0, "%s is still there", path);
}

/* A server that is not a tracevm VM, or one that goes before its
 * greeting: it accepts one connection on `path`, writes `says` (or
 * nothing) and closes. */
typedef struct FakeServer {
    int lfd;
    const char *says;
    pthread_t th;
} FakeServer;

static void *fake_main(void *arg)
{
    FakeServer *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd >= 0) {
        if (f->says)
            cr_assert_eq(write(fd, f->says, strlen(f->says)), (ssize_t)strlen(f->says));
        close(fd);
    }
    return NULL;
}

static void fake_start(FakeServer *f, const char *path, const char *says)
{
    f->says = says;
    f->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(f->lfd, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    unlink(path);
    cr_assert_eq(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(f->lfd, 1), 0);
    cr_assert_eq(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(FakeServer *f, const char *path)
{
    cr_assert_eq(pthread_join(f->th, NULL), 0);
    close(f->lfd);
    unlink(path);
}

/* Leaves bytes that are not zero where the next call's locals will be, so
 * that a read of one that was never set shows. */
static __attribute__((noinline)) void dirty_stack(void)
{
    volatile unsigned char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = 0xa5;
}

/* A server that closes before its greeting, or in the middle of it, gets
 * an error that says so.  The greeting's line and length were read even
 * when no line had come, left as they were (uninitialised): the message
 * quoted whatever they held, or the client crashed on them. */
Test(control, a_server_that_goes_before_its_greeting_is_an_error)
{
    char path[128];
    snprintf(path, sizeof path, "%s/fake.sock", dir);
    static const struct {
        const char *says, *want;
    } cases[] = {
        { NULL, "connection lost before the greeting (closed)" },
        { "tracevm-control 1", "connection lost before the greeting (closed in the middle of "
                               "a line)" },
        { "hello\n", "not a tracevm control socket" },
        { "error too many clients\n", "too many clients" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        FakeServer f;
        fake_start(&f, path, cases[i].says);
        tvm_control_client *c = NULL;
        tvm_error err;
        dirty_stack();
        cr_assert_eq(tvm_control_connect(path, &c, &err), TVM_ERR_IO, "case %zu", i);
        cr_assert_null(c);
        char want[256];
        snprintf(want, sizeof want, "%s: %s", path, cases[i].want);
        cr_assert_str_eq(err.message, want, "case %zu", i);
        fake_stop(&f, path);
    }
}

/* One line from fd (the greeting or an error), or "" when none comes
 * within 10 s (a bound on a lost reply, not a timing). */
static void first_line(int fd, char *out, size_t size)
{
    size_t n = 0;
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    while (n + 1 < size && poll(&pf, 1, 10000) == 1) {
        char ch;
        if (read(fd, &ch, 1) != 1 || ch == '\n')
            break;
        out[n++] = ch;
    }
    out[n] = '\0';
}

/* A connection that arrives while the VM's process has no file
 * descriptor left gets an error line, and the endpoint serves the next
 * one once descriptors are free again.  Before, accept failed with
 * EMFILE and left the connection in the backlog, the listening socket
 * stayed readable, and the accept loop went round at full speed (a core
 * at 100%) for as long as the process had no descriptor, while the
 * client waited for a greeting that never came. */
Test(control, a_connection_past_the_descriptor_limit_is_told_so)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", tvm_control_path(vm));
    /* The soft limit at the lowest descriptor free: no new one opens. */
    struct rlimit old;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    int lowest = dup(0);
    cr_assert_geq(lowest, 0);
    close(lowest);
    struct rlimit tight = { .rlim_cur = (rlim_t)lowest, .rlim_max = old.rlim_max };
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &tight), 0);
    int probe = dup(0);
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    char line[128];
    first_line(fd, line, sizeof line);
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    cr_assert_eq(probe, -1, "a descriptor opened past the limit");
    cr_assert_eq(rc, 0);
    cr_assert_str_eq(line, "error the VM's process is out of file descriptors");
    close(fd);
    tvm_control_client *c = connect_ok();
    Lines l = { 0 };
    const char *argv[] = { "info" };
    cr_assert_eq(tvm_control_call(c, 1, argv, on_line, &l, &err), TVM_OK, "%s", err.message);
    tvm_control_close(c);
}

/* A start that finds one descriptor free (the socket takes it, its
 * thread's pipe finds none) is an error that leaves nothing behind, and
 * a later start serves.  It ended the whole program (vm_die). */
Test(control, a_start_short_of_descriptors_is_an_error)
{
    struct rlimit old;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    int lowest = dup(0);
    cr_assert_geq(lowest, 0);
    close(lowest);
    struct rlimit tight = { .rlim_cur = (rlim_t)lowest + 1, .rlim_max = old.rlim_max };
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &tight), 0);
    tvm_error err;
    tvm_status st = tvm_control_start(vm, &err);
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    cr_assert_eq(st, TVM_ERR_IO, "%s", tvm_status_name(st));
    cr_assert_str_eq(err.message,
                     "tvm_control: no pipe for the endpoint's thread: Too many open files");
    cr_assert_null(tvm_control_path(vm));
    tvm_control_peer peers[2];
    cr_assert_eq(tvm_control_list(peers, 2), 0, "a socket was left behind");
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_control_list(peers, 2), 1);
}

/* Sends `start`, then a byte of `drip` every 50 ms until the server
 * answers, and returns the first line it answers with; "" when it does
 * not answer within 30 s of trickling (a bound, not a timing). */
static void trickle(const char *start, char drip, char *line, size_t size)
{
    int fd = send_raw(start);
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    int i = 0;
    while (i < 600 && poll(&pf, 1, 50) == 0 && send(fd, &drip, 1, MSG_NOSIGNAL) == 1)
        i++;
    if (i < 600)
        first_line(fd, line, size);
    else
        line[0] = '\0';
    close(fd);
}

/* A request line, or a load's text, that trickles in (a byte every
 * 50 ms) is cut off when the idle limit (here 0.3 s, 60 s outside tests)
 * has passed since the server began to wait for it, with the reason,
 * and its slot is free again.  The limit was for each byte: such a
 * client kept its thread and its slot for as long as it went on, and 16
 * of them shut every other client out. */
Test(control, a_request_that_trickles_in_is_cut_off)
{
    ctl_idle_ms = 300;
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    char line[128];
    trickle("info", 'o', line, sizeof line);
    cr_assert_str_eq(line, "error request not complete within 0.3 s");
    trickle("load m.tasm 1000000\n", ' ', line, sizeof line);
    cr_assert_str_eq(line, "error load: the 1000000 bytes of text did not come within 0.3 s");
    /* Nothing sent at all is cut off as before. */
    int fd = send_raw("");
    first_line(fd, line, sizeof line);
    close(fd);
    cr_assert_str_eq(line, "error idle for 0.3 s");
    tvm_control_client *c = connect_ok();
    char clients[16], sessions[16];
    wait_alone(c, clients, sessions);
    cr_assert_str_eq(clients, "1", "%s clients", clients);
    tvm_control_close(c);
}

/* A reply that says nothing for longer than the client's margin (600 s
 * outside tests, here 300 ms) but no longer than a request may run (an
 * hour) is waited for: the client waited for the margin alone, so every
 * count, time or profile of more than 10 minutes failed as "connection
 * lost (timed out)", and the server, seeing its client gone, cancelled
 * it (a profile wrote no file). */
Test(control, a_reply_silent_past_the_margin_is_waited_for)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    load_ok(vm, "m.tasm", "module m\nexport f/0\nfunction f/0 regs 1\n    loadi r0, 1\n"
                          "    ret r0\nend\n");
    tvm_control_client *c = connect_ok();
    ctl_client_margin_ms = 300;
    Lines l = { 0 };
    const char *count[] = { "count", "m:_/_", "--duration", "1" };
    cr_assert_eq(tvm_control_call(c, 4, count, on_line, &l, &err), TVM_OK, "%s", err.message);
    cr_assert_str_eq(l.text, "FUNCTION                                        CALLS\n"
                             "0 functions, 0 calls in 1.00 s\n");
    tvm_control_close(c);
}

/* tvm_control_connect or tvm_control_list on a thread of its own. */
typedef struct Dialer {
    const char *path;          /* connect to it; NULL: list */
    tvm_status st;
    size_t listed;
    tvm_error err;
    pthread_t th;
} Dialer;

static void *dialer_main(void *arg)
{
    Dialer *d = arg;
    tvm_control_client *c = NULL;
    if (d->path) {
        d->st = tvm_control_connect(d->path, &c, &d->err);
        tvm_control_close(c);
    } else {
        d->listed = tvm_control_list(NULL, 0);
    }
    return NULL;
}

/* Whether d's call returned within 10 s (a bound on a hang, not a
 * timing). */
static bool dialer_done(Dialer *d)
{
    cr_assert_eq(pthread_create(&d->th, NULL, dialer_main, d), 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    return pthread_timedjoin_np(d->th, NULL, &until) == 0;
}

/* A VM that takes no connection (stopped, or its accept loop stuck) with
 * its backlog full: a connect gives up after the client's margin (here
 * 300 ms, 600 s outside tests) with the reason, and the peer list lists
 * it after a second instead of hanging.  Both waited for room in the
 * backlog for ever (a Unix socket's connect has no timeout of its own). */
Test(control, a_server_that_takes_no_connection_does_not_hang_the_client)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%ld.99.sock", dir, (long)getpid());
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(lfd, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(lfd, 0), 0);
    /* Connections nobody accepts, until the backlog takes no more. */
    int queued[8], nq = 0;
    for (; nq < 8; nq++) {
        queued[nq] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (connect(queued[nq], (struct sockaddr *)&a, sizeof a) != 0)
            break;
    }
    cr_assert_lt(nq, 8, "the backlog never filled");
    ctl_client_margin_ms = 300;
    Dialer conn = { .path = path }, list = { 0 };
    cr_assert(dialer_done(&conn), "tvm_control_connect hangs");
    cr_assert_eq(conn.st, TVM_ERR_IO, "%s", tvm_status_name(conn.st));
    char want[256];
    snprintf(want, sizeof want, "cannot connect to %s: its server took no connection within "
                                "0.3 s (is the VM stopped?)", path);
    cr_assert_str_eq(conn.err.message, want);
    cr_assert(dialer_done(&list), "tvm_control_list hangs");
    cr_assert_eq(list.listed, 1);
    for (int i = 0; i <= nq; i++)
        close(queued[i]);
    close(lfd);
    unlink(path);
}

/* top over many processes: each one's reductions during the interval are
 * its count minus its count in the earlier snapshot, found by pid.  20,000
 * processes wait in a receive (each did some work first, so a process not
 * matched with its earlier row would show its whole count): every row
 * shows 0 reductions, in pid order with --sort pid, with its exact state,
 * queue and function (the heap's size is left out).  2,000 under
 * ThreadSanitizer, where every process is a fiber of its own (the case
 * failed there with 20,000), and under user-mode emulation; the pairing
 * is the same code at any count. */
#define TOP_PROCS_MAX 20000

static size_t top_procs(void)
{
#if defined(VM_TSAN)
    return 2000;
#else
    return getenv("TRACEVM_RUN") ? 2000 : TOP_PROCS_MAX;
#endif
}

typedef struct TopRows {
    const tvm_pid *pids;        /* sorted */
    size_t n;                   /* how many */
    size_t next;                /* rows seen in all */
    size_t row;                 /* rows seen in the current table */
    int headers, blanks, bad;
    char first_bad[256];
} TopRows;

static void on_top_line(const char *line, size_t len, void *data)
{
    TopRows *t = data;
    char row[512], want[160], got[160];
    snprintf(row, sizeof row, "%.*s", (int)len, line);
    if (!strncmp(row, "PID ", 4)) {
        t->headers++;
        t->row = 0;
        return;
    }
    if (!row[0]) {
        t->blanks++;
        return;
    }
    char pid[32], name[32], state[16], fn[64];
    unsigned long long reds;
    size_t mq, heap;
    int n = sscanf(row, "%31s %31s %15s %llu %zu %zu %63s", pid, name, state, &reds, &mq, &heap,
                   fn);
    snprintf(got, sizeof got, "%s %s %s %llu %zu %s", pid, name, state, reds, mq, fn);
    snprintf(want, sizeof want, "<0.%llu.0> - waiting 0 0 tw:w/0",
             t->row < t->n ? (unsigned long long)t->pids[t->row] : 0ull);
    if (n != 7 || t->row >= t->n || strcmp(got, want)) {
        if (!t->bad++)
            snprintf(t->first_bad, sizeof t->first_bad, "row %zu of table %d: '%s', want '%s'",
                     t->row, t->headers, row, want);
    }
    t->row++;
    t->next++;
}

static int by_pid_value(const void *a, const void *b)
{
    tvm_pid x = *(const tvm_pid *)a, y = *(const tvm_pid *)b;
    return x < y ? -1 : x > y;
}

Test(control, top_over_many_processes_matches_each_by_pid, .timeout = 300)
{
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    load_ok(vm, "tw", "module tw\nexport w/0\nfunction w/0 regs 2\ntop:\n"
                      "    recv r0, none\n    accept\n    ret r0\nnone:\n"
                      "    loadk r1, infinity\n    wait r1, never\n    jump top\n"
                      "never:\n    ret r1\nend\n");
    tvm_env *e = tvm_env_new(vm);
    const size_t np = top_procs();
    static tvm_pid pids[TOP_PROCS_MAX];
    for (size_t i = 0; i < np; i++)
        cr_assert_eq(tvm_spawn(e, "tw", "w", 0, NULL, &pids[i]), TVM_OK, "spawn %zu", i);
    qsort(pids, np, sizeof *pids, by_pid_value);
    /* Until every one waits, with some reductions done (a bounded wait). */
    static tvm_process_info pi[TOP_PROCS_MAX + 64];
    size_t waiting = 0;
    for (int tries = 0; tries < 6000 && waiting < np; tries++) {
        size_t n = tvm_processes(vm, pi, TOP_PROCS_MAX + 64);
        waiting = 0;
        for (size_t i = 0; i < n && i < TOP_PROCS_MAX + 64; i++)
            waiting += !strcmp(pi[i].state, "waiting") && pi[i].reductions > 0;
        if (waiting < np)
            usleep(10000);
    }
    cr_assert_eq(waiting, np, "%zu processes waiting after a minute", waiting);
    tvm_control_client *c = connect_ok();
    TopRows t = { .pids = pids, .n = np };
    const char *argv[] = { "top", "--sort", "pid", "--interval", "10", "--count", "2" };
    cr_assert_eq(tvm_control_call(c, 7, argv, on_top_line, &t, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(t.bad, 0, "%d bad rows, the first %s", t.bad, t.first_bad);
    cr_assert_eq(t.headers, 2);
    cr_assert_eq(t.blanks, 2);
    cr_assert_eq(t.next, 2 * np);
    tvm_control_close(c);
    tvm_env_free(e);
}
