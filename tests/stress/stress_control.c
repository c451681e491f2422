/*
 * tests/stress/stress_control.c - the control endpoint under several
 * clients at once while the VM works (docs/control.md).
 *
 * Two worker processes call sc:f/1 in a loop on two schedulers and a
 * third waits in receive.  For SECONDS (3 s; STRESS_CONTROL_SECONDS
 * changes it) CLIENTS client threads, each on a connection of its own,
 * make requests in turn, each checked exactly where its reply is fixed:
 *   - info (processes: 3), procs --sort pid (a header and three rows),
 *     stacks --group, trace_info sc:f/1 (the default session's line);
 *   - trace sc:f/1 --local --max-events 20: the events, then the last
 *     record {trace_stopped,max_events,W,L}, with W + L = 20 and exactly
 *     W call lines of sc:f/1;
 *   - count sc:f/1 --duration 0.02: one row for sc:f/1, then the totals;
 *   - load of module sx (replaced each time; nothing runs it): no lines;
 *   - and, on a connection of its own, a count of an hour that the
 *     client hangs up on (cancelled within 50 ms: ctl_nap).
 * Then the endpoint must be back to one client (the checker) and the
 * default session alone, and tvm_control_stop must return while a client
 * is in the middle of a count of an hour (the count ends early, and
 * its client gets the table of what it counted).  A wrong reply, a request that fails, a crash or a
 * sanitizer report (TSan: a race; ASan: a leak) fails.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "include/tracevm.h"
#include "tests/stress/stress_util.h"
#include "trace/tr_session.h"

static const char *const stress_name = "stress_control";

#define CLIENTS 3
#define SECONDS 3.0

static const char *const sc_src =
    "module sc\n"
    "export f/1, work/1, idle/0\n"
    "function f/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function work/1 regs 2\n"
    "again:\n    call r1, r0, f/1\n    jump again\nend\n"
    "function idle/0 regs 2\n"
    "top:\n    recv r0, none\n    accept\n    jump top\n"
    "none:\n    loadk r1, infinity\n    wait r1, wake\n"
    "wake:\n    jump top\nend\n";

static const char *const sx_src =
    "module sx\nexport g/0\nfunction g/0 regs 1\n    loadi r0, 7\n    ret r0\nend\n";

static tvm_vm *vm;
static atomic_int failures;
static atomic_bool stop;

static void bad(int client, const char *request, const char *why)
{
    fprintf(stderr, "stress_control: client %d, %s: %s\n", client, request, why);
    atomic_fetch_add(&failures, 1);
}

/* A reply's lines, joined by LF. */
typedef struct Reply {
    char text[16384];
    size_t len;
    int lines;
} Reply;

static void on_line(const char *line, size_t len, void *data)
{
    Reply *r = data;
    int n = snprintf(r->text + r->len, sizeof r->text - r->len, "%.*s\n", (int)len, line);
    if (n > 0 && (size_t)n < sizeof r->text - r->len)
        r->len += (size_t)n;
    r->lines++;
}

/* The n-th line of r (0-based) into out; false if there is none. */
static bool line_at(const Reply *r, int n, char *out, size_t size)
{
    const char *p = r->text;
    for (int i = 0; i < n; i++) {
        p = strchr(p, '\n');
        if (!p)
            return false;
        p++;
    }
    const char *nl = strchr(p, '\n');
    if (!nl)
        return false;
    snprintf(out, size, "%.*s", (int)(nl - p), p);
    return true;
}

static bool call(tvm_control_client *c, int client, int argc, const char *const *argv, Reply *r)
{
    tvm_error err;
    *r = (Reply){ 0 };
    if (tvm_control_call(c, argc, argv, on_line, r, &err) != TVM_OK) {
        bad(client, argv[0], err.message);
        return false;
    }
    return true;
}

static void check_info(tvm_control_client *c, int id)
{
    const char *argv[] = { "info" };
    Reply r;
    if (call(c, id, 1, argv, &r) && !strstr(r.text, "\nprocesses: 3\n"))
        bad(id, "info", r.text);
}

static void check_procs(tvm_control_client *c, int id)
{
    const char *argv[] = { "procs", "--sort", "pid" };
    Reply r;
    char l[256];
    if (call(c, id, 3, argv, &r) &&
        (r.lines != 4 || !line_at(&r, 0, l, sizeof l) || strncmp(l, "PID ", 4)))
        bad(id, "procs", r.text);
}

static void check_stacks(tvm_control_client *c, int id)
{
    const char *argv[] = { "stacks", "--group" };
    Reply r;
    if (call(c, id, 2, argv, &r) && !strstr(r.text, "sc:idle/0"))
        bad(id, "stacks --group", r.text);
}

static void check_trace_info(tvm_control_client *c, int id)
{
    const char *argv[] = { "trace_info", "sc:f/1" };
    Reply r;
    if (call(c, id, 2, argv, &r) && strncmp(r.text, "session 0 default: ", 19))
        bad(id, "trace_info", r.text);
}

static void check_trace(tvm_control_client *c, int id)
{
    const char *argv[] = { "trace", "sc:f/1", "--local", "--max-events", "20" };
    Reply r;
    if (!call(c, id, 5, argv, &r))
        return;
    char last[256];
    unsigned long written = 0, lost = 0;
    int calls = 0;
    for (const char *p = r.text; (p = strstr(p, ",call,{sc,f,[")); p++)
        calls++;
    if (!line_at(&r, r.lines - 1, last, sizeof last) ||
        sscanf(last, "{trace_stopped,max_events,%lu,%lu}", &written, &lost) != 2 ||
        written + lost != 20 || (unsigned long)calls != written || r.lines != calls + 1)
        bad(id, "trace", r.text);
}

static void check_count(tvm_control_client *c, int id)
{
    const char *argv[] = { "count", "sc:f/1", "--duration", "0.02" };
    Reply r;
    char row[256], total[256];
    if (call(c, id, 4, argv, &r) &&
        (r.lines != 3 || !line_at(&r, 1, row, sizeof row) || !strstr(row, "sc:f/1") ||
         !line_at(&r, 2, total, sizeof total) || strncmp(total, "1 functions, ", 13)))
        bad(id, "count", r.text);
}

static void check_load(tvm_control_client *c, int id)
{
    Reply r = { 0 };
    tvm_error err;
    if (tvm_control_load(c, "sx.tasm", sx_src, strlen(sx_src), on_line, &r, &err) != TVM_OK)
        bad(id, "load", err.message);
    else if (r.lines)
        bad(id, "load", r.text);
}

/* A count of an hour on a connection of its own, hung up on at once. */
static void hang_up(int id)
{
    static const char request[] = "count sc:f/1 --duration 3600\n";
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", tvm_control_path(vm));
    char ch;
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        bad(id, "hang-up", "cannot connect");
    } else {
        while (read(fd, &ch, 1) == 1 && ch != '\n')
            ;
        if (write(fd, request, sizeof request - 1) != (ssize_t)(sizeof request - 1))
            bad(id, "hang-up", "cannot send");
    }
    if (fd >= 0)
        close(fd);
    /* Room for the cancellation: the sessions are a table of 16. */
    nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
}

static void *client_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    tvm_control_client *c;
    tvm_error err;
    if (tvm_control_connect(tvm_control_path(vm), &c, &err) != TVM_OK) {
        bad(id, "connect", err.message);
        return NULL;
    }
    static void (*const steps[])(tvm_control_client *, int) = {
        check_info, check_procs, check_trace, check_stacks, check_count, check_trace_info,
        check_load,
    };
    const int nsteps = (int)(sizeof steps / sizeof steps[0]);
    for (int k = id; !atomic_load(&stop); k++) {
        if (k % (nsteps + 1) == nsteps)
            hang_up(id);
        else
            steps[k % (nsteps + 1)](c, id);
    }
    tvm_control_close(c);
    return NULL;
}

/* info's value of key, or -1. */
static long info_value(tvm_control_client *c, const char *key)
{
    const char *argv[] = { "info" };
    Reply r;
    if (!call(c, -1, 1, argv, &r))
        return -1;
    char want[64];
    snprintf(want, sizeof want, "\n%s: ", key);
    const char *p = strstr(r.text, want);
    return p ? atol(p + strlen(want)) : -1;
}

/* A count of an hour when the endpoint stops: the count ends early and
 * its client still gets the whole table (tvm_control_stop lets a request
 * in progress finish its reply): sc:f/1's row and the totals. */
static void *long_count(void *arg)
{
    (void)arg;
    tvm_control_client *c;
    tvm_error err;
    if (tvm_control_connect(tvm_control_path(vm), &c, &err) != TVM_OK) {
        bad(-2, "connect", err.message);
        return NULL;
    }
    const char *argv[] = { "count", "sc:f/1", "--duration", "3600" };
    Reply r;
    char row[256], total[256];
    if (call(c, -2, 4, argv, &r) &&
        (r.lines != 3 || !line_at(&r, 1, row, sizeof row) || !strstr(row, "sc:f/1") ||
         !line_at(&r, 2, total, sizeof total) || strncmp(total, "1 functions, ", 13)))
        bad(-2, "count during the stop", r.text);
    tvm_control_close(c);
    return NULL;
}

int main(void)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tvm-stress-ctl.%ld", (long)getpid());
    if (mkdir(dir, 0700) != 0)
        return fail("mkdir");
    setenv("TRACEVM_CONTROL_DIR", dir, 1);
    double seconds = getenv("STRESS_CONTROL_SECONDS") ? atof(getenv("STRESS_CONTROL_SECONDS"))
                                                      : SECONDS;
    vm = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2 });
    tvm_error err;
    if (tvm_load_string(vm, "sc.tasm", sc_src, strlen(sc_src), &err) != TVM_OK ||
        tvm_control_start(vm, &err) != TVM_OK)
        return fail(err.message);
    tvm_env *env = tvm_env_new(vm);
    tvm_pid idle;
    spawn_int(env, "sc", "work", 1);
    spawn_int(env, "sc", "work", 2);
    if (tvm_spawn(env, "sc", "idle", 0, NULL, &idle) != TVM_OK)
        return fail("spawn idle");

    pthread_t t[CLIENTS];
    for (int i = 0; i < CLIENTS; i++)
        pthread_create(&t[i], NULL, client_main, (void *)(intptr_t)i);
    nanosleep(&(struct timespec){ (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) },
              NULL);
    atomic_store(&stop, true);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(t[i], NULL);

    /* Back to one client, the checker, and the default session alone
     * (the hung-up counts end within 50 ms; 10 s is a bound, not a
     * timing). */
    tvm_control_client *c;
    if (tvm_control_connect(tvm_control_path(vm), &c, &err) != TVM_OK)
        return fail(err.message);
    long clients = -1, sessions = -1;
    for (int i = 0; i < 1000 && (clients != 1 || sessions != 1); i++) {
        if (i)
            nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
        clients = info_value(c, "clients");
        sessions = info_value(c, "sessions");
    }
    if (clients != 1 || sessions != 1) {
        fprintf(stderr, "stress_control: after the clients: %ld clients, %ld sessions\n",
                clients, sessions);
        atomic_fetch_add(&failures, 1);
    }

    /* A stop while a count of an hour runs: it returns, the count ended
     * early (its session is gone with it: the VM has the default one). */
    pthread_t lc;
    pthread_create(&lc, NULL, long_count, NULL);
    for (int i = 0; i < 1000 && info_value(c, "sessions") != 2; i++)
        nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
    tvm_control_stop(vm);
    pthread_join(lc, NULL);
    tvm_control_close(c);
    if (tr_sessions_live(vm) != 1) {
        fprintf(stderr, "stress_control: %u sessions after the stop\n", tr_sessions_live(vm));
        atomic_fetch_add(&failures, 1);
    }

    tvm_env_free(env);
    tvm_destroy(vm);
    rmdir(dir);
    int n = atomic_load(&failures);
    if (n)
        return fail("wrong replies (above)");
    printf("stress_control: ok\n");
    return 0;
}
