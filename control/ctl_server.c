/*
 * control/ctl_server.c - the control endpoint: a Unix-domain socket in a
 * per-user directory, an accept loop on a thread of its own, and a thread
 * per client (docs/control.md).
 *
 * Nothing here runs on a scheduler, and nothing a client sends reaches one
 * except through the public API's own entry points, which never stop a
 * scheduler (a load or a trace change waits for thread progress on the
 * client's thread).  So a client that is slow, stuck or hostile costs the
 * VM at most one thread of its own.
 *
 * Who may connect.  The directory is the user's and closed to everyone
 * else (0700, checked when it already exists: another user could have
 * made it first in /tmp); the socket is 0600; and every connection is
 * checked with SO_PEERCRED before a byte is read from it.
 *
 * Threads and lifetime.  The accept loop polls the listening socket and a
 * wake-up pipe; a process out of descriptors costs it one spare
 * descriptor and a 100 ms wait, never a loop at full speed
 * (no_descriptor).  Each client runs on a joinable thread recorded in a slot
 * (at most CTL_MAX_CLIENTS; the loop reaps finished ones).  Stopping:
 * `stopping` is set (release), the pipe wakes the loop, which ends, and
 * the socket file is removed; every client socket's read side is shut
 * down, which ends an idle thread's read with EOF, while a thread in the
 * middle of a command sees `stopping` and ends its reply as the command
 * does at its own end (ctl_client_here still counts the client as there:
 * the end of its read side is the endpoint's own doing); after two
 * seconds the sockets of the threads still running are shut down whole,
 * and the threads are joined.
 */
#define _GNU_SOURCE
#include "control/control.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control/ctl_internal.h"
#include "vm/common.h"
#include "vm/timer.h"
#include "vm/vm.h"

/* Serialises tvm_control_start, tvm_control_stop and tvm_control_path,
 * which read and write vm->control and vm->control_paths; the endpoint's
 * own threads never touch them. */
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
/* VMs of this OS process that served an endpoint: the N of PID.N.sock. */
static VmAtomic ctl_seq;

/*
 * Every socket path a VM has served, kept until tvm_destroy: the string
 * tvm_control_path returns is one of these, so an embedder's thread may
 * read it while another stops the endpoint (it pointed into the server,
 * which the stop frees).  A VM keeps its N across restarts, so a restart
 * into the same directory serves the same path and adds nothing: the
 * list holds one entry per directory served (TRACEVM_CONTROL_DIR
 * changed between starts), not one per start.
 */
typedef struct CtlPath {
    struct CtlPath *next;
    char path[];
} CtlPath;

typedef struct CtlPaths {
    unsigned seq;              /* this VM's N */
    CtlPath *list;
} CtlPaths;

/* vm's paths (made at its first start); under ctl_lock. */
static CtlPaths *paths_of(tvm_vm *vm)
{
    if (!vm->control_paths) {
        CtlPaths *ps = vm_calloc(1, sizeof *ps);
        ps->seq = (unsigned)vm_atomic_fetch_add_relaxed(&ctl_seq, 1);
        vm->control_paths = ps;
    }
    return vm->control_paths;
}

/* The kept copy of `path` (made if new); under ctl_lock. */
static const char *path_keep(tvm_vm *vm, const char *path)
{
    CtlPaths *ps = paths_of(vm);
    for (CtlPath *k = ps->list; k; k = k->next)
        if (!strcmp(k->path, path))
            return k->path;
    size_t n = strlen(path) + 1;
    CtlPath *k = vm_malloc(sizeof *k + n);
    memcpy(k->path, path, n);
    k->next = ps->list;
    ps->list = k;
    return k->path;
}

void ctl_layer_free(tvm_vm *vm)
{
    CtlPaths *ps = vm->control_paths;
    if (!ps)
        return;
    while (ps->list) {
        CtlPath *k = ps->list;
        ps->list = k->next;
        free(k);
    }
    free(ps);
    vm->control_paths = NULL;
}

static tvm_status fail(tvm_error *err, tvm_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tvm_status fail(tvm_error *err, tvm_status st, const char *fmt, ...)
{
    if (err) {
        err->status = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* ==== the directory ==== */

tvm_status ctl_dir(char *out, size_t size, tvm_error *err)
{
    const char *env = getenv("TRACEVM_CONTROL_DIR");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    if (env && *env)
        n = snprintf(out, size, "%s", env);
    else if (xdg && *xdg)
        n = snprintf(out, size, "%s/tracevm", xdg);
    else
        n = snprintf(out, size, "/tmp/tracevm-%u", (unsigned)geteuid());
    /* Room for "/PID.N.sock" (24 bytes at most) in the buffer and in a
     * socket address, checked before anything is created. */
    size_t room = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
    if (n < 0 || (size_t)n >= size - 24 || (size_t)n + 24 > room)
        return fail(err, TVM_ERR_BADARG, "tvm_control: directory name too long (%d bytes; "
                                         "at most %zu)", n, room - 24);
    return TVM_OK;
}

/* Creates the directory (0700) or checks the one there. */
static tvm_status own_dir(const char *dir, tvm_error *err)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return fail(err, TVM_ERR_IO, "tvm_control: cannot create %s: %s", dir, strerror(errno));
    return ctl_dir_check(dir, err);
}

tvm_status ctl_dir_check(const char *dir, tvm_error *err)
{
    struct stat st;
    if (lstat(dir, &st) != 0)
        return fail(err, TVM_ERR_IO, "tvm_control: %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return fail(err, TVM_ERR_IO, "tvm_control: %s is not a directory", dir);
    if (st.st_uid != geteuid())
        return fail(err, TVM_ERR_IO, "tvm_control: %s belongs to uid %u, not to this user (%u)",
                    dir, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & 077)
        return fail(err, TVM_ERR_IO, "tvm_control: %s is open to other users (mode %03o)", dir,
                    (unsigned)(st.st_mode & 0777));
    return TVM_OK;
}

/* ==== clients ==== */

/* Whether the peer is this user (or root), by its credentials. */
static bool same_user(int fd)
{
    unsigned uid;
    return ctl_peer_uid(fd, &uid) && (uid == (unsigned)geteuid() || uid == 0);
}

static void say(int fd, const char *line)
{
    ctl_write(fd, line, strlen(line));
}

int ctl_idle_ms = CTL_IDLE_MS;

/* The reason a request line could not be read, sent before closing (into
 * buf); NULL when nothing is to be said. */
static const char *read_error(CtlRead r, const CtlReader *in, char *buf, size_t size)
{
    switch (r) {
    case CTL_READ_TOO_LONG: return "error request longer than 65536 bytes\n";
    case CTL_READ_TRUNCATED: return "error truncated request\n";
    case CTL_READ_IDLE:
        /* The limit is for the whole line: a line begun and not ended in
         * time is cut off as nothing at all is, so a client that sends a
         * byte now and then cannot keep its slot without end. */
        snprintf(buf, size, ctl_reader_partial(in) ? "error request not complete within %g s\n"
                                                   : "error idle for %g s\n",
                 ctl_idle_ms / 1000.0);
        return buf;
    default: return NULL;
    }
}

/* The second is for the whole wait, not between two reads: a peer
 * sending a byte now and then would otherwise keep the thread and its
 * slot for a megabyte of seconds. */
void ctl_linger(int fd)
{
    shutdown(fd, SHUT_WR);
    char sink[4096];
    size_t total = 0;
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    const uint64_t until = vm_now_ns() + 1000000000u;
    uint64_t now;
    while (total < (1u << 20) && (now = vm_now_ns()) < until &&
           poll(&pf, 1, (int)((until - now) / 1000000u) + 1) > 0) {
        ssize_t n = recv(fd, sink, sizeof sink, 0);
        if (n <= 0)
            break;
        total += (size_t)n;
    }
}

static void serve(CtlClient *c)
{
    char hello[96];
    snprintf(hello, sizeof hello, "tracevm-control %d pid=%ld\n", CTL_VERSION, (long)getpid());
    if (!ctl_write(c->fd, hello, strlen(hello)))
        return;
    while (!c->gone && !vm_atomic_load_acquire(&c->srv->stopping)) {
        char *line;
        size_t len;
        CtlRead r = ctl_read_line(&c->in, &line, &len, ctl_idle_ms);
        if (r != CTL_READ_LINE) {
            char buf[96];
            const char *why = read_error(r, &c->in, buf, sizeof buf);
            if (why && !vm_atomic_load_acquire(&c->srv->stopping)) {
                say(c->fd, why);
                ctl_linger(c->fd);
            }
            return;
        }
        char why[160];
        char **argv;
        int argc = ctl_split(line, len, &argv, why, sizeof why);
        if (argc < 0) {
            ctl_error(c, "%s", why);
            continue;
        }
        ctl_dispatch(c, argc, argv);
        ctl_words_free(argc, argv);
    }
}

typedef struct ClientArg {
    CtlServer *srv;
    int slot;
} ClientArg;

static void *client_main(void *arg)
{
    ClientArg a = *(ClientArg *)arg;
    free(arg);
    CtlServer *srv = a.srv;
    CtlClient c = { .srv = srv, .fd = srv->slots[a.slot].fd };
    ctl_reader_init(&c.in, c.fd);
    sb_init(&c.out);
    serve(&c);
    sb_free(&c.out);
    ctl_reader_free(&c.in);
    pthread_mutex_lock(&srv->lock);
    shutdown(c.fd, SHUT_RDWR);
    close(c.fd);
    srv->slots[a.slot].fd = -1;
    srv->slots[a.slot].done = true;
    pthread_mutex_unlock(&srv->lock);
    return NULL;
}

/* Joins client threads that finished (accept loop, lock held). */
static void reap_locked(CtlServer *srv)
{
    for (int i = 0; i < CTL_MAX_CLIENTS; i++) {
        struct CtlSlot *s = &srv->slots[i];
        if (s->used && s->done) {
            pthread_join(s->thread, NULL);
            s->used = s->done = false;
        }
    }
}

int ctl_clients(CtlServer *srv)
{
    int n = 0;
    pthread_mutex_lock(&srv->lock);
    for (int i = 0; i < CTL_MAX_CLIENTS; i++)
        n += srv->slots[i].used && !srv->slots[i].done;
    pthread_mutex_unlock(&srv->lock);
    return n;
}

int ctl_send_ms = CTL_SEND_MS;

static void admit(CtlServer *srv, int fd)
{
    if (!same_user(fd)) {
        say(fd, "error permission denied\n");
        close(fd);
        return;
    }
    /* A send that finds the socket full waits at most ctl_send_ms, then
     * fails, and the connection ends like one the client closed (c->gone).
     * Why: the idle limit covers reading only, so a client that sent
     * requests and never read the replies held its thread and its slot
     * in a blocked send for as long as it lived, and 16 such clients shut
     * everyone else out until the endpoint stopped. */
    struct timeval tv = { .tv_sec = ctl_send_ms / 1000, .tv_usec = (ctl_send_ms % 1000) * 1000 };
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    pthread_mutex_lock(&srv->lock);
    reap_locked(srv);
    int slot = -1;
    for (int i = 0; i < CTL_MAX_CLIENTS && slot < 0; i++)
        if (!srv->slots[i].used)
            slot = i;
    if (slot < 0) {
        pthread_mutex_unlock(&srv->lock);
        say(fd, "error too many clients\n");
        close(fd);
        return;
    }
    ClientArg *a = vm_malloc(sizeof *a);
    *a = (ClientArg){ srv, slot };
    struct CtlSlot *s = &srv->slots[slot];
    s->used = true;
    s->done = false;
    s->fd = fd;
    if (pthread_create(&s->thread, NULL, client_main, a) != 0) {
        s->used = false;
        free(a);
        pthread_mutex_unlock(&srv->lock);
        say(fd, "error cannot start a thread\n");
        close(fd);
        return;
    }
    pthread_mutex_unlock(&srv->lock);
}

/* The spare descriptor, opened again after it was spent (-1 when even
 * that fails: the next shortage waits instead). */
static void spare_open(CtlServer *srv)
{
    srv->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/*
 * accept failed for want of a descriptor (EMFILE, ENFILE) or of memory:
 * the connection stays in the backlog, so the listening socket stays
 * readable, and polling it again at once would go round at full speed
 * (a core at 100%) for as long as the shortage lasts, while the client
 * waited for a greeting that never came.  The spare descriptor is given
 * up so that the connection can be accepted and told why it is refused;
 * when even that finds nothing (another thread took the descriptor, or
 * the system is out of them), the loop waits 100 ms, or for the stop,
 * before it tries again.
 */
static void no_descriptor(CtlServer *srv)
{
    int fd = -1;
    if (srv->spare >= 0) {
        close(srv->spare);
        srv->spare = -1;
        fd = accept4(srv->lfd, NULL, NULL, SOCK_CLOEXEC);
    }
    if (fd >= 0) {
        say(fd, same_user(fd) ? "error the VM's process is out of file descriptors\n"
                              : "error permission denied\n");
        close(fd);
    } else {
        struct pollfd wake = { .fd = srv->wake[0], .events = POLLIN };
        (void)poll(&wake, 1, 100);
    }
    spare_open(srv);
}

static void *accept_main(void *arg)
{
    CtlServer *srv = arg;
    struct pollfd pf[2] = { { .fd = srv->lfd, .events = POLLIN },
                            { .fd = srv->wake[0], .events = POLLIN } };
    while (!vm_atomic_load_acquire(&srv->stopping)) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents)
            break;
        if (pf[0].revents & POLLIN) {
            int fd = accept4(srv->lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                admit(srv, fd);
            else if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
                no_descriptor(srv);
        }
    }
    return NULL;
}

/* ==== start and stop ==== */

static tvm_status listen_at(CtlServer *srv, const char *dir, tvm_error *err)
{
    unsigned n = paths_of(srv->vm)->seq;
    snprintf(srv->path, sizeof srv->path, "%s/%ld.%u.sock", dir, (long)getpid(), n);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(srv->path) >= sizeof sa.sun_path)
        return fail(err, TVM_ERR_BADARG, "tvm_control: socket path too long: %s", srv->path);
    strcpy(sa.sun_path, srv->path);
    unlink(srv->path);   /* a socket a dead VM of the same pid left behind */
    srv->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (srv->lfd < 0)
        return fail(err, TVM_ERR_IO, "tvm_control: socket: %s", strerror(errno));
    /* 0600 from the start: the umask covers the window before chmod. */
    mode_t old = umask(0177);
    int rc = bind(srv->lfd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc != 0 || chmod(srv->path, 0600) != 0 || listen(srv->lfd, 16) != 0) {
        int e = errno;
        close(srv->lfd);
        unlink(srv->path);
        return fail(err, TVM_ERR_IO, "tvm_control: cannot listen on %s: %s", srv->path,
                    strerror(e));
    }
    return TVM_OK;
}

tvm_status tvm_control_start(tvm_vm *vm, tvm_error *err)
{
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    if (!vm)
        return fail(err, TVM_ERR_BADARG, "tvm_control_start: NULL vm");
    pthread_mutex_lock(&ctl_lock);
    tvm_status st = TVM_OK;
    char dir[200];
    if (vm->control) {
        st = fail(err, TVM_ERR_EXISTS, "tvm_control_start: already serving %s",
                  ((CtlServer *)vm->control)->path);
    } else if ((st = ctl_dir(dir, sizeof dir, err)) == TVM_OK &&
               (st = own_dir(dir, err)) == TVM_OK) {
        CtlServer *srv = vm_calloc(1, sizeof *srv);
        srv->vm = vm;
        srv->started_ns = vm_now_ns();
        pthread_mutex_init(&srv->lock, NULL);
        /* A process out of descriptors (or threads) gets an error, as
         * at the socket: this ended the whole program (vm_die) when the
         * socket took the last descriptor and the pipe found none. */
        if ((st = listen_at(srv, dir, err)) == TVM_OK && pipe2(srv->wake, O_CLOEXEC) != 0) {
            st = fail(err, TVM_ERR_IO, "tvm_control: no pipe for the endpoint's thread: %s",
                      strerror(errno));
            close(srv->lfd);
            unlink(srv->path);
        } else if (st == TVM_OK) {
            spare_open(srv);
            int e = pthread_create(&srv->thread, NULL, accept_main, srv);
            if (e != 0) {
                st = fail(err, TVM_ERR_LIMIT, "tvm_control: cannot start the endpoint's "
                                              "thread: %s", strerror(e));
                close(srv->wake[0]);
                close(srv->wake[1]);
                if (srv->spare >= 0)
                    close(srv->spare);
                close(srv->lfd);
                unlink(srv->path);
            }
        }
        if (st == TVM_OK) {
            srv->kept_path = path_keep(vm, srv->path);
            vm->control = srv;
        } else {
            pthread_mutex_destroy(&srv->lock);
            free(srv);
        }
    }
    pthread_mutex_unlock(&ctl_lock);
    return st;
}

/* How long tvm_control_stop lets the requests in progress finish. */
#define CTL_STOP_GRACE_MS 2000

/* shutdown(how) on every client connection still served. */
static void shut_clients(CtlServer *srv, int how)
{
    pthread_mutex_lock(&srv->lock);
    for (int i = 0; i < CTL_MAX_CLIENTS; i++)
        if (srv->slots[i].used && !srv->slots[i].done)
            shutdown(srv->slots[i].fd, how);
    pthread_mutex_unlock(&srv->lock);
}

/* Waits until every client thread is done, for ms at most. */
static void wait_clients(CtlServer *srv, long ms)
{
    for (; ms > 0; ms -= 10) {
        bool busy = false;
        pthread_mutex_lock(&srv->lock);
        for (int i = 0; i < CTL_MAX_CLIENTS; i++)
            busy = busy || (srv->slots[i].used && !srv->slots[i].done);
        pthread_mutex_unlock(&srv->lock);
        if (!busy)
            return;
        nanosleep(&(struct timespec){ 0, 10 * 1000000L }, NULL);
    }
}

void tvm_control_stop(tvm_vm *vm)
{
    if (!vm)
        return;
    pthread_mutex_lock(&ctl_lock);
    CtlServer *srv = vm->control;
    vm->control = NULL;
    pthread_mutex_unlock(&ctl_lock);
    if (!srv)
        return;
    vm_atomic_store_release(&srv->stopping, 1);
    /* A pipe, not a socket: write(2), not ctl_write's send(2). */
    while (write(srv->wake[1], "x", 1) < 0 && errno == EINTR)
        ;
    pthread_join(srv->thread, NULL);
    close(srv->lfd);
    unlink(srv->path);
    /* The clients' read sides first: a client between requests ends at
     * once (its read sees the end), while one in the middle of a request
     * notices `stopping` within a nap (50 ms) and finishes its reply: a
     * trace its last record, a count, a time, a top or a profile what it
     * has.  Then whatever is still running after CTL_STOP_GRACE_MS is cut
     * (a peer that does not read holds its thread in a send). */
    shut_clients(srv, SHUT_RD);
    wait_clients(srv, CTL_STOP_GRACE_MS);
    shut_clients(srv, SHUT_RDWR);
    for (int i = 0; i < CTL_MAX_CLIENTS; i++)
        if (srv->slots[i].used)
            pthread_join(srv->slots[i].thread, NULL);
    close(srv->wake[0]);
    close(srv->wake[1]);
    if (srv->spare >= 0)
        close(srv->spare);
    pthread_mutex_destroy(&srv->lock);
    free(srv);
}

int ctl_client_count(tvm_vm *vm)
{
    CtlServer *srv = vm ? vm->control : NULL;
    return srv ? ctl_clients(srv) : -1;
}

const char *tvm_control_path(tvm_vm *vm)
{
    if (!vm)
        return NULL;
    pthread_mutex_lock(&ctl_lock);
    CtlServer *srv = vm->control;
    const char *path = srv ? srv->kept_path : NULL;
    pthread_mutex_unlock(&ctl_lock);
    return path;
}

void ctl_layer_init(tvm_vm *vm)
{
    const char *env = getenv("TRACEVM_CONTROL");
    bool on = vm->control_wanted || (env && strcmp(env, "1") == 0);
    if (!on)
        return;
    tvm_error err;
    if (tvm_control_start(vm, &err) != TVM_OK)
        fprintf(stderr, "tracevm: control endpoint not started: %s\n", err.message);
}
