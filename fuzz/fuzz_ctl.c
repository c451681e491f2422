/*
 * fuzz/fuzz_ctl.c - the control endpoint (docs/control.md) as a hostile
 * client sees it: the input is everything a client sends after the
 * greeting, bytes as they are (request lines, a load's module text,
 * anything), written to a real connection to the endpoint of a VM that
 * runs two processes (with fuzz_run's limits); then the client shuts its end (which cancels what
 * still waits: count, time, top, trace) and reads every reply to the end.
 * Checks:
 *   - the replies are well formed: each starts with `ok` or `error WHAT`,
 *     a payload line that begins with `.` is dot-stuffed, and a reply
 *     ends with a line `.`, but for the last one, which the hang-up may
 *     cut, and the closing errors of the bounds (`error truncated
 *     request`, `error request longer than ...`), which end the stream;
 *   - the endpoint still answers `info` on a new connection, and the
 *     fuzzed connection's thread ends (that one is the only client).
 *
 * `profile` writes its file wherever its request says, so an input that
 * could name that command (its bytes spell `profile` once `\xHH` escapes
 * are decoded and quotes and backslashes dropped, over-strict for module
 * text, harmlessly) is sent only if every `/` it could put in a word
 * begins or lies within an occurrence of OUT_DIR's path and a slash: a
 * path it names is then a file directly in that directory, which the
 * harness makes (paths_confined).  Such an input's hang-up comes 100 ms
 * after its last byte (LINGER_MS), so that a profile of a shorter duration
 * runs to its end and writes its file there (removed after the input);
 * a longer one is cancelled by the hang-up and writes nothing.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control/control.h"
#include "fuzz/fuzz_util.h"

static const char *const mod_src =
    "module fz\n"
    "export idle/0, tick/0, f/1\n"
    "function f/1 regs 1\n    ret r0\nend\n"
    "function idle/0 regs 2\n"
    "again:\n    recv r0, none\n    accept\n    jump again\n"
    "none:\n    loadk r1, infinity\n    wait r1, wake\n"
    "wake:\n    jump again\nend\n"
    "function tick/0 regs 2\n"
    "again:\n    loadi r0, 1\n    call r1, r0, f/1\n    callx r1, r0, timer:sleep/1\n"
    "    jump again\nend\n";

/* Where a fuzzed profile may write (a fixed path, so that the dictionary
 * can spell it). */
#define OUT_DIR "/tmp/tvm-fuzz-ctl-out"
/* How long such an input's connection stays open after its last byte. */
#define LINGER_MS 100

static tvm_vm *vm;               /* fuzz_vm_with's, set up by vm_setup */
static bool out_made;           /* OUT_DIR exists and is this user's */
static char dir[64];            /* the endpoint's directory, this run's own */

/* At exit: the last VM goes, so that its endpoint joins the client
 * threads that ended since its last accept (TSan reports them leaked),
 * and with it its socket; then the directory. */
static void vm_down(void)
{
    if (fuzz_vm_cur)
        tvm_destroy(fuzz_vm_cur);
    fuzz_vm_cur = NULL;
    rmdir(dir);
}

/* The VM, renewed every 200 inputs (loads accumulate modules); a new one
 * gets the endpoint and module fz's two processes: one waiting in
 * receive, one calling f/1 every millisecond. */
static tvm_vm *vm_get(void)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/tvm-fuzz-ctl.%ld", (long)getpid());
        FUZZ_CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST, "mkdir %s", dir);
        setenv("TRACEVM_CONTROL_DIR", dir, 1);
        atexit(vm_down);
    }
    /* fuzz_run's limits: a loaded module's code may run (a load of fz
     * replaces what the two processes call). */
    tvm_config cfg = { .size = sizeof cfg, .schedulers = 1, .quiet_crashes = true,
                       .output = fuzz_devnull(), .stack_limit_words = 1 << 14,
                       .max_heap_words = 1 << 16, .max_processes = 32,
                       .max_message_words = 1 << 14 };
    bool fresh;
    tvm_vm *v = fuzz_vm_with(200, &cfg, &fresh);
    if (!fresh)
        return v;
    tvm_error err;
    FUZZ_CHECK(tvm_load_string(v, "fz.tasm", mod_src, strlen(mod_src), &err) == TVM_OK, "%s",
               err.message);
    FUZZ_CHECK(tvm_control_start(v, &err) == TVM_OK, "%s", err.message);
    tvm_env *env = tvm_env_new(v);
    tvm_pid pid;
    FUZZ_CHECK(tvm_spawn(env, "fz", "idle", 0, NULL, &pid) == TVM_OK, "spawn idle");
    FUZZ_CHECK(tvm_spawn(env, "fz", "tick", 0, NULL, &pid) == TVM_OK, "spawn tick");
    tvm_env_free(env);
    return v;
}

/* d[*i] as a byte of a word: a `\xHH` escape decoded (moving *i past it),
 * else the byte itself. */
static int decoded(const uint8_t *d, size_t n, size_t *i)
{
    if (d[*i] == '\\' && *i + 3 < n && d[*i + 1] == 'x') {
        char hex[3] = { (char)d[*i + 2], (char)d[*i + 3], 0 };
        char *end;
        long v = strtol(hex, &end, 16);
        if (!*end) {
            *i += 3;
            return (int)v;
        }
    }
    return d[*i];
}

/* Whether the input could name the profile command (see above). */
static bool could_profile(const uint8_t *d, size_t n)
{
    static const char word[] = "profile";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int c = decoded(d, n, &i);
        if (c == '"' || c == '\\')
            continue;
        k = c == word[k] ? k + 1 : c == word[0];
        if (k == sizeof word - 1)
            return true;
    }
    return false;
}

/*
 * Whether every `/` the input could put in a request's word begins or
 * lies within OUT_DIR "/" (see above).  The input is read as the
 * endpoint's words are (control/ctl_proto.c): escapes decoded (`\\`,
 * `\"`, `\xHH`; the endpoint knows no other way to write a slash), quotes
 * dropped, every other byte kept, backslashes too, so a word's bytes
 * appear in this reading in order and contiguous, and a slash that the
 * reading finds no prefix around is one a word may hold.
 */
static bool paths_confined(const uint8_t *d, size_t n)
{
    static const char prefix[] = OUT_DIR "/";
    const size_t plen = sizeof prefix - 1;
    char *r = malloc(n + 1);
    FUZZ_CHECK(r, "out of memory");
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i] == '\\' && i + 1 < n && (d[i + 1] == '\\' || d[i + 1] == '"')) {
            r[len++] = (char)d[++i];
            continue;
        }
        int c = decoded(d, n, &i);
        if (c != '"')
            r[len++] = (char)c;
    }
    bool ok = true;
    for (size_t i = 0; i < len && ok; i++) {
        if (r[i] != '/')
            continue;
        ok = len - i >= plen && !memcmp(r + i, prefix, plen);
        i += plen - 1;
    }
    free(r);
    return ok;
}

/* OUT_DIR, made once: a directory of this user's, not a link another
 * user left in /tmp (the check is made before any profile can run). */
static void out_dir_make(void)
{
    if (out_made)
        return;
    struct stat st;
    FUZZ_CHECK(mkdir(OUT_DIR, 0700) == 0 || errno == EEXIST, "mkdir %s", OUT_DIR);
    FUZZ_CHECK(lstat(OUT_DIR, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid(),
               "%s is not a directory of this user's", OUT_DIR);
    out_made = true;
}

/* What the reply stream's lines must follow. */
typedef struct Replies {
    bool in_reply;            /* a status line came, its `.` not yet */
    bool closed;              /* a closing error came: nothing may follow */
    char line[256];           /* the current line's start */
    size_t len;               /* its length so far (may exceed the buffer) */
} Replies;

static void reply_line(Replies *r)
{
    const char *s = r->line;
    size_t n = r->len < sizeof r->line ? r->len : sizeof r->line;
    FUZZ_CHECK(!r->closed, "a line after a closing error: %.*s", (int)n, s);
    if (!r->in_reply) {
        bool ok = r->len == 2 && !memcmp(s, "ok", 2);
        bool error = r->len > 6 && !memcmp(s, "error ", 6);
        FUZZ_CHECK(ok || error, "a reply starts with '%.*s'", (int)n, s);
        if (error && ((r->len == 23 && !memcmp(s, "error truncated request", 23)) ||
                      (n > 30 && !memcmp(s, "error request longer than ", 26))))
            r->closed = true;
        else
            r->in_reply = true;
        return;
    }
    if (r->len == 1 && s[0] == '.')
        r->in_reply = false;
    else
        FUZZ_CHECK(r->len == 0 || s[0] != '.' || (r->len > 1 && s[1] == '.'),
                   "a payload line not dot-stuffed: '%.*s'", (int)n, s);
}

static void replies_take(Replies *r, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            reply_line(r);
            r->len = 0;
            continue;
        }
        if (r->len < sizeof r->line)
            r->line[r->len] = buf[i];
        r->len++;
    }
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sends the input and reads the replies at the same time (neither side
 * may block the other with a full socket buffer), shuts the sending side
 * `linger_ms` after all is sent, and reads to the end. */
static void exchange(const uint8_t *data, size_t size, int linger_ms)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FUZZ_CHECK(fd >= 0, "socket");
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", tvm_control_path(vm));
    FUZZ_CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect %s", a.sun_path);
    char buf[4096];
    size_t sent = 0;
    bool greeted = false, shut = false;
    int64_t shut_at = -1;       /* when all was sent, plus linger_ms */
    Replies r = { 0 };
    for (;;) {
        if (!shut && sent == size && shut_at < 0)
            shut_at = now_ms() + linger_ms;
        if (!shut && shut_at >= 0 && now_ms() >= shut_at) {
            shutdown(fd, SHUT_WR);
            shut = true;
        }
        const bool sending = !shut && sent < size;
        struct pollfd p = { .fd = fd, .events = (short)(POLLIN | (sending ? POLLOUT : 0)) };
        int wait = -1;          /* sending, or reading to the end */
        if (!shut && !sending) {
            const int64_t left = shut_at - now_ms();
            wait = left > 0 ? (int)left : 0;
        }
        int ready = poll(&p, 1, wait);
        FUZZ_CHECK(ready >= 0 || errno == EINTR, "poll");
        if (ready <= 0)
            continue;
        if (p.revents & POLLOUT) {
            ssize_t w = send(fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                sent += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                sent = size;   /* the server closed (a bound): stop sending */
        }
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t got = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (got < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (got <= 0)
            break;
        size_t from = 0;
        if (!greeted) {
            const char *nl = memchr(buf, '\n', (size_t)got);
            FUZZ_CHECK(nl && !strncmp(buf, "tracevm-control 1 pid=", 22), "the greeting");
            from = (size_t)(nl - buf) + 1;
            greeted = true;
        }
        replies_take(&r, buf + from, (size_t)got - from);
    }
    close(fd);
}

/* info's lines, for still_serves. */
typedef struct Info {
    bool protocol, one_client;
    long processes;
} Info;

static void info_line(const char *line, size_t len, void *data)
{
    Info *in = data;
    char l[64];
    snprintf(l, sizeof l, "%.*s", (int)(len < 63 ? len : 63), line);
    in->protocol |= !strcmp(l, "protocol: 1");
    in->one_client |= !strcmp(l, "clients: 1");
    if (!strncmp(l, "processes: ", 11))
        in->processes = atol(l + 11);
}

/* The endpoint answers on a new connection, and the fuzzed one's thread
 * ends: it may still be finishing when the hang-up arrives (a closing
 * error shuts the socket before the thread lets go of its slot), so info
 * is asked again, for up to two seconds, until it is the only client.
 * The processes: fewer when a load of module fz purged their code, more
 * when the code loaded spawns, within max_processes. */
static void still_serves(void)
{
    tvm_control_client *c;
    tvm_error err;
    FUZZ_CHECK(tvm_control_connect(tvm_control_path(vm), &c, &err) == TVM_OK, "%s", err.message);
    const char *argv[] = { "info" };
    Info in = { .processes = -1 };
    for (int i = 0; i < 2000 && !in.one_client; i++) {
        if (i)
            nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
        in = (Info){ .processes = -1 };
        FUZZ_CHECK(tvm_control_call(c, 1, argv, info_line, &in, &err) == TVM_OK, "info: %s",
                   err.message);
    }
    FUZZ_CHECK(in.protocol && in.one_client && in.processes >= 0 && in.processes <= 32,
               "info after the input: protocol %d, one client %d, %ld processes", in.protocol,
               in.one_client, in.processes);
    tvm_control_close(c);
    /* And info's own thread ends before the input does: libFuzzer looks
     * for leaks between inputs, and once (after some 37,000 inputs)
     * LeakSanitizer reported the memory of that thread, still finishing
     * its reply, as leaked. */
    int left = ctl_client_count(vm);
    for (int i = 0; i < 2000 && left > 0; i++) {
        nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
        left = ctl_client_count(vm);
    }
    FUZZ_CHECK(left == 0, "%d clients still served after the last one closed", left);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const bool profile = could_profile(data, size);
    if (profile && !paths_confined(data, size))
        return 0;
    if (profile)
        out_dir_make();
    vm = vm_get();
    exchange(data, size, profile ? LINGER_MS : 0);
    still_serves();
    /* The files a profile wrote, removed: each input starts empty. */
    if (profile)
        FUZZ_CHECK(fuzz_dir_empty(OUT_DIR), "opendir %s", OUT_DIR);
    return 0;
}
