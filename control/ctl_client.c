/*
 * control/ctl_client.c - the client half of the control protocol
 * (docs/control.md): finding this user's VMs, connecting, sending a
 * request as words and reading its reply line by line.  `tracevm attach`
 * is built on these alone.
 *
 * A server is trusted no more than a client is: its lines are read with
 * the same bounded reader, and a reply that breaks the grammar ends the
 * call with TVM_ERR_IO.
 */
#define _GNU_SOURCE
#include "control/control.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/ctl_internal.h"
#include "vm/api_error.h"
#include "vm/common.h"

struct tvm_control_client {
    int fd;
    CtlReader in;
};

int ctl_client_margin_ms = CTL_CLIENT_MARGIN_MS;

/* How long a client waits for a line of a reply: the longest a request
 * may stay silent (CTL_REQUEST_MAX_MS: a count, a time or a profile of
 * an hour says nothing until its end, a trace of an hour may see no
 * event) and a margin (a stack dump of 300,000 processes takes a while),
 * so that a stuck server does not hang the client for ever.  The wait
 * was the margin alone: every count, time and profile longer than 10
 * minutes failed as "timed out", and the server, seeing its client gone,
 * cancelled it. */
static int reply_wait_ms(void)
{
    return CTL_REQUEST_MAX_MS + ctl_client_margin_ms;
}

/* Why a read of the server's line failed, for an error message. */
static const char *read_failure(CtlRead r)
{
    switch (r) {
    case CTL_READ_EOF: return "closed";
    case CTL_READ_TRUNCATED: return "closed in the middle of a line";
    case CTL_READ_TOO_LONG: return "a line longer than 65536 bytes";
    case CTL_READ_IDLE: return "timed out";
    default: return "broken";
    }
}

/* How long tvm_control_list waits for a VM to take its connection. */
#define LIST_DIAL_MS 1000

/* Connects to a socket path, waiting at most timeout_ms for the server to
 * take the connection; -1 with errno set (EAGAIN: it took none in time).
 * Why a bound: a Unix socket's connect waits for room in the listener's
 * backlog without end, and a VM that is stopped (SIGSTOP, a debugger) or
 * whose accept loop is stuck leaves its backlog full after a few
 * connections, so tracevm attach, and its --list, hung for good.  The
 * bound is the socket's send timeout (SO_SNDTIMEO), which the kernel
 * applies to connect; it stays on for the requests' sends, so that a
 * server that stops reading cannot hang a send for ever either. */
static int dial(const char *path, int timeout_ms)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* The socket of pid's first VM in dir ("PID.N.sock" with the lowest N). */
static bool socket_of(const char *dir, long pid, char *out, size_t size)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    long best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        long p, n;
        char tail[8];
        if (sscanf(e->d_name, "%ld.%ld.sock%7s", &p, &n, tail) == 2 && p == pid &&
            (best < 0 || n < best))
            best = n;
    }
    closedir(d);
    if (best < 0)
        return false;
    snprintf(out, size, "%s/%ld.%ld.sock", dir, pid, best);
    return true;
}

tvm_status tvm_control_connect(const char *target, tvm_control_client **out, tvm_error *err)
{
    vm_api_clear(err);
    if (!out)
        return vm_api_fail(err, TVM_ERR_BADARG, "tvm_control_connect: NULL out");
    *out = NULL;
    if (!target || !*target)
        return vm_api_fail(err, TVM_ERR_BADARG, "tvm_control_connect: no target");
    /* A pid's socket is found in this buffer; a path is used as given
     * (a copy cut to the buffer named another file in the message). */
    char found[300];
    const char *path = target;
    char *end;
    errno = 0;
    long pid = strtol(target, &end, 10);
    /* Digits only: strtol also takes leading blanks and a sign, and
     * clamps a number past LONG_MAX to it (a pid nobody has). */
    const bool by_pid = isdigit((unsigned char)target[0]) && !*end && pid > 0 && errno != ERANGE;
    if (by_pid) {
        char dir[200];
        tvm_status st = ctl_dir(dir, sizeof dir, err);
        if (st != TVM_OK || (st = ctl_dir_check(dir, err)) != TVM_OK)
            return st;
        if (!socket_of(dir, pid, found, sizeof found))
            return vm_api_fail(err, TVM_ERR_NOTFOUND,
                               "no VM of process %ld serves a control socket in %s", pid, dir);
        path = found;
    } else if (!strchr(target, '/')) {
        return vm_api_fail(err, TVM_ERR_BADARG,
                           "target '%s' is neither a pid nor a socket path", target);
    }
    int fd = dial(path, ctl_client_margin_ms);
    int e = errno;
    char pb[VM_MSG_PATH_MAX + 1];
    if (fd < 0 && e == EAGAIN)
        return vm_api_fail(err, TVM_ERR_IO, "cannot connect to %s: its server took no connection "
                                     "within %g s (is the VM stopped?)", vm_msg_path(path, pb),
                    ctl_client_margin_ms / 1000.0);
    if (fd < 0)
        return vm_api_fail(err, e == ENOENT || e == ECONNREFUSED ? TVM_ERR_NOTFOUND : TVM_ERR_IO,
                           "cannot connect to %s: %s", vm_msg_path(path, pb), strerror(e));
    /* The server must be this user's, as the server demands of us: else
     * a socket someone else placed would get our requests (a `load`'s
     * module text) and could forge any reply.  Root may name another
     * user's socket by its path (the server admits root); a pid is found
     * only in a directory that passed ctl_dir_check. */
    unsigned peer, me = (unsigned)geteuid();
    if (!ctl_peer_uid(fd, &peer)) {
        close(fd);
        return vm_api_fail(err, TVM_ERR_IO, "%s: cannot tell who serves it", path);
    }
    if (peer != me && !(me == 0 && !by_pid)) {
        close(fd);
        return vm_api_fail(err, TVM_ERR_IO,
                           "%s is served by uid %u, not by this user (%u)", path, peer, me);
    }
    tvm_control_client *c = vm_calloc(1, sizeof *c);
    c->fd = fd;
    ctl_reader_init(&c->in, fd);
    char *line;
    size_t len;
    int version;
    /* ctl_read_line sets line and len only for a whole line: a peer that
     * closes, resets or says nothing before its greeting (a VM whose
     * endpoint is stopping, a stopped VM, another program's socket) is
     * told by what the read says, never by those two. */
    CtlRead r = ctl_read_line(&c->in, &line, &len, ctl_client_margin_ms);
    if (r != CTL_READ_LINE) {
        tvm_control_close(c);
        return vm_api_fail(err, TVM_ERR_IO, "%s: connection lost before the greeting (%s)", path,
                           read_failure(r));
    }
    if (sscanf(line, "tracevm-control %d", &version) != 1) {
        char what[160];
        snprintf(what, sizeof what, "%s", strncmp(line, "error ", 6) == 0 ? line + 6 : "");
        tvm_control_close(c);
        return vm_api_fail(err, TVM_ERR_IO,
                           "%s: %s", path, *what ? what : "not a tracevm control socket");
    }
    if (version != CTL_VERSION) {
        tvm_control_close(c);
        return vm_api_fail(err, TVM_ERR_IO, "%s speaks control protocol %d, this client %d", path,
                           version, CTL_VERSION);
    }
    *out = c;
    return TVM_OK;
}

void tvm_control_close(tvm_control_client *c)
{
    if (!c)
        return;
    close(c->fd);
    ctl_reader_free(&c->in);
    free(c);
}

/* Reads a reply: its status line, then payload lines to on_line until ".". */
static tvm_status reply(tvm_control_client *c, tvm_control_line_fn on_line, void *data,
                        tvm_error *err)
{
    char *line;
    size_t len;
    CtlRead r = ctl_read_line(&c->in, &line, &len, reply_wait_ms());
    if (r != CTL_READ_LINE)
        return vm_api_fail(err, TVM_ERR_IO, "connection lost (%s)", read_failure(r));
    tvm_status st;
    if (len == 2 && !memcmp(line, "ok", 2)) {
        st = TVM_OK;
    } else if (len > 6 && !memcmp(line, "error ", 6)) {
        st = vm_api_fail(err, TVM_ERR_BADARG, "%s", line + 6);
    } else {
        return vm_api_fail(err, TVM_ERR_IO, "malformed reply line '%.80s'", line);
    }
    for (;;) {
        r = ctl_read_line(&c->in, &line, &len, reply_wait_ms());
        if (r != CTL_READ_LINE) {
            /* A server that ends the connection after an error line
             * (a request it could not read) sends no "." */
            return st != TVM_OK ? st : vm_api_fail(err, TVM_ERR_IO, "connection lost in a reply");
        }
        if (len == 1 && line[0] == '.')
            return st;
        if (line[0] == '.') {
            line++;
            len--;
        }
        if (on_line)
            on_line(line, len, data);
    }
}

tvm_status tvm_control_call(tvm_control_client *c, int argc, const char *const *argv,
                            tvm_control_line_fn on_line, void *data, tvm_error *err)
{
    vm_api_clear(err);
    if (!c || argc < 1 || !argv)
        return vm_api_fail(err, TVM_ERR_BADARG, "tvm_control_call: no request");
    StrBuf sb;
    sb_init(&sb);
    for (int i = 0; i < argc; i++) {
        if (!argv[i]) {
            sb_free(&sb);
            return vm_api_fail(err, TVM_ERR_BADARG, "tvm_control_call: NULL word %d", i);
        }
        if (i)
            sb_putc(&sb, ' ');
        ctl_quote(&sb, argv[i]);
    }
    sb_putc(&sb, '\n');
    if (sb.len > CTL_LINE_MAX) {
        sb_free(&sb);
        return vm_api_fail(err, TVM_ERR_BADARG, "request longer than %u bytes", CTL_LINE_MAX);
    }
    bool sent = ctl_write(c->fd, sb.s, sb.len);
    sb_free(&sb);
    if (!sent)
        return vm_api_fail(err, TVM_ERR_IO, "connection lost (cannot send)");
    return reply(c, on_line, data, err);
}

tvm_status tvm_control_load(tvm_control_client *c, const char *name, const char *text,
                            size_t len, tvm_control_line_fn on_line, void *data, tvm_error *err)
{
    vm_api_clear(err);
    if (!c || !name || (!text && len))
        return vm_api_fail(err, TVM_ERR_BADARG, "tvm_control_load: NULL argument");
    if (len > CTL_LOAD_MAX)
        return vm_api_fail(err, TVM_ERR_LIMIT,
                           "module text of %zu bytes; at most %u", len, CTL_LOAD_MAX);
    StrBuf sb;
    sb_init(&sb);
    sb_puts(&sb, "load ");
    ctl_quote(&sb, name);
    sb_printf(&sb, " %zu\n", len);
    bool sent = ctl_write(c->fd, sb.s, sb.len) && ctl_write(c->fd, text, len);
    sb_free(&sb);
    if (!sent)
        return vm_api_fail(err, TVM_ERR_IO, "connection lost (cannot send)");
    tvm_status st = reply(c, on_line, data, err);
    if (st == TVM_ERR_BADARG && err && !strcmp(err->message, "load failed"))
        st = TVM_ERR_LOAD;
    return st;
}

/* ==== listing ==== */

static void command_of(long pid, char *out, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, size - 1, f) : 0;
    if (f)
        fclose(f);
    for (size_t i = 0; i < n; i++)
        if (out[i] == '\0')
            out[i] = ' ';
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
}

size_t tvm_control_list(tvm_control_peer *out, size_t max)
{
    char dir[200];
    if (ctl_dir(dir, sizeof dir, NULL) != TVM_OK || ctl_dir_check(dir, NULL) != TVM_OK)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid, k;
        char tail[8];
        if (sscanf(e->d_name, "%ld.%ld.sock%7s", &pid, &k, tail) != 2)
            continue;
        char path[sizeof out->path];
        if ((size_t)snprintf(path, sizeof path, "%.199s/%.40s", dir, e->d_name) >= sizeof path)
            continue;
        int fd = dial(path, LIST_DIAL_MS);
        if (fd < 0 && errno != EAGAIN) {
            /* A socket nobody serves: its process is gone (a live one
             * whose endpoint is starting or stopping is left alone). */
            if (errno == ECONNREFUSED && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
                unlink(path);
            continue;
        }
        /* One that takes no connection in time is listed: a VM is there,
         * stopped or busy. */
        if (fd >= 0)
            close(fd);
        if (out && n < max) {
            out[n].pid = pid;
            memcpy(out[n].path, path, sizeof path);
            command_of(pid, out[n].command, sizeof out[n].command);
        }
        n++;
    }
    closedir(d);
    return n;
}
