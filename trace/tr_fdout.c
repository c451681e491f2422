/*
 * trace/tr_fdout.c - a sink's output to a file descriptor the embedder
 * already opened (tvm_trace_options.fd: a pipe, a socket to a client),
 * as a FILE * every sink can write to.
 *
 * Why not fdopen.  The reader at the other end may be slow or gone.  A
 * plain stream would block the collector in write(2) for as long as the
 * reader does not read; the rings would fill, and under the drop policy
 * that only costs events (counted, as it should), but a session's destroy
 * waits for its collector, and a collector blocked in write(2) for ever
 * would hold the destroy for ever.  So the stream's write function waits
 * for the descriptor with poll(2) in slices of TR_FDOUT_SLICE_MS, and
 * gives up once the pipeline is closing (tr_fdout_closing, set by the
 * session's stop before it frees the pipeline) and TR_FDOUT_GIVE_UP_MS
 * passed in which the reader took nothing: what it could not write then
 * is dropped and counted in bytes.  A reader that keeps reading, however
 * slowly, gets everything (what is left is bounded: the rings and the
 * sink's buffer).  Why a second and not a slice: the reader that matters
 * is a control client's relay, a thread that reads without bound while
 * the session closes, and on a loaded machine it went a slice without
 * running (ThreadSanitizer's suite, two schedulers spinning, the other
 * test of the pair running): the client lost the trace's last record,
 * `trace_stopped`.  Before that, a second full descriptor after the first
 * wait gave up at once, and lost it for a relay late by one slice.  A
 * reader that stopped for good holds a destroy for that second.  A
 * descriptor that fails (EPIPE: the reader closed) drops everything
 * after, and is the session's output failure (trace/tr_outfail.h: EPIPE,
 * "Broken pipe", when the reader closed), which the API reports; giving
 * up on a slow reader is not: it is what this writer is for.  Sockets
 * are written with MSG_NOSIGNAL, so a reader that went away is an error
 * here and not a SIGPIPE for the whole program; a pipe is written with
 * write(2), whose SIGPIPE the threads that write here block
 * (tr_sigpipe_block, tr_sigpipe_hold).  The descriptor is the
 * embedder's: it is never closed here.
 *
 * Threads: the stream is written by the pipeline's collector (sinks run
 * there) and, at the start and the end, by the thread that starts or
 * frees the pipeline (a sink's open and close), never at the same time;
 * `closing` is set by the thread that stops the pipeline (relaxed store,
 * relaxed load: a late sight of it costs one slice).
 */
#define _GNU_SOURCE   /* fopencookie */

#include "trace/tr_fdout.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "trace/tr_outfail.h"
#include "vm/atomics.h"
#include "vm/common.h"

#define TR_FDOUT_SLICE_MS 50
/* While closing: how long the reader may take nothing before the rest is
 * dropped. */
#define TR_FDOUT_GIVE_UP_MS 1000

struct TrFdOut {
    int fd;
    TrOutFail *fail;        /* where a failed write is recorded, or NULL (immutable) */
    const char *format;     /* the sink's format name, for the record (immutable) */
    bool broken;            /* a write failed, or closing gave up: drop from now on
                               (the writing thread) */
    bool not_socket;        /* send(2) said ENOTSOCK: use write(2) (collector only) */
    VmAtomic closing;
    VmAtomic dropped;       /* bytes not written (relaxed; read after the collector stopped) */
};

/* One write of up to n bytes; the count written, or -1 with errno. */
static ssize_t put(TrFdOut *o, const char *buf, size_t n)
{
    if (!o->not_socket) {
        ssize_t k = send(o->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k >= 0 || errno != ENOTSOCK)
            return k;
        o->not_socket = true;
    }
    /* A pipe or a file: write only when poll says there is room, and at
     * most PIPE_BUF bytes, which a pipe with room takes without blocking
     * (the descriptor's own flags are the embedder's: not changed). */
    struct pollfd pfd = { .fd = o->fd, .events = POLLOUT };
    int r = poll(&pfd, 1, 0);
    if (r <= 0) {
        if (r == 0)
            errno = EAGAIN;
        return -1;
    }
    return write(o->fd, buf, n > PIPE_BUF ? PIPE_BUF : n);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The descriptor failed with errnum: nothing more is written to it. */
static void broken(TrFdOut *o, int errnum)
{
    o->broken = true;
    if (o->fail)
        tr_outfail_set(o->fail, errnum, NULL, o->format);
}

static ssize_t fdout_write(void *cookie, const char *buf, size_t n)
{
    TrFdOut *o = cookie;
    size_t done = 0;
    bool stalled = false;         /* closing, and nothing taken since stalled_since (ms) */
    uint64_t stalled_since = 0;
    while (done < n && !o->broken) {
        ssize_t k = put(o, buf + done, n - done);
        if (k > 0) {
            done += (size_t)k;
            stalled = false;   /* the reader reads: its time starts again */
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            broken(o, errno);
            break;
        }
        /* Not writable now: wait a slice; after the pipeline began to
         * close, give up once the reader took nothing for
         * TR_FDOUT_GIVE_UP_MS (given up, the rest goes at once). */
        if (vm_atomic_load_relaxed(&o->closing)) {
            uint64_t t = now_ms();
            if (!stalled) {
                stalled = true;
                stalled_since = t;
            } else if (t - stalled_since >= TR_FDOUT_GIVE_UP_MS) {
                o->broken = true;
                break;
            }
        }
        struct pollfd pfd = { .fd = o->fd, .events = POLLOUT };
        if (poll(&pfd, 1, TR_FDOUT_SLICE_MS) < 0 && errno != EINTR) {
            broken(o, errno);
            break;
        }
    }
    if (done < n)
        vm_atomic_fetch_add_relaxed(&o->dropped, n - done);
    /* Report everything as taken: stdio must not retry what we dropped. */
    return (ssize_t)n;
}

static int fdout_close(void *cookie)
{
    (void)cookie;   /* the descriptor is the embedder's; tr_fdout_free frees o */
    return 0;
}

FILE *tr_fdout_open(int fd, TrOutFail *fail, const char *format, TrFdOut **out)
{
    /* Checked here, at the start, where it is an error the caller sees:
     * later every write would fail and the session's events would vanish
     * while it reports them written. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) {
        errno = EBADF;
        return NULL;
    }
    TrFdOut *o = vm_calloc(1, sizeof *o);
    o->fd = fd;
    o->fail = fail;
    o->format = format;
    cookie_io_functions_t io = { .write = fdout_write, .close = fdout_close };
    FILE *f = fopencookie(o, "w", io);
    if (!f) {
        free(o);
        return NULL;
    }
    *out = o;
    return f;
}

void tr_fdout_closing(TrFdOut *o)
{
    vm_atomic_store_relaxed(&o->closing, 1);
}

uint64_t tr_fdout_dropped(const TrFdOut *o)
{
    return vm_atomic_load_relaxed(&o->dropped);
}

void tr_fdout_free(TrFdOut *o)
{
    free(o);
}
