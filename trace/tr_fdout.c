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
 * session's stop before it frees the pipeline) and a whole slice passed
 * in which the reader took nothing: what it could not write then is
 * dropped and counted in bytes.  A reader that keeps reading, however
 * slowly, gets everything (what is left is bounded: the rings and the
 * sink's buffer); before, a second full descriptor after the first wait
 * gave up at once, and a control client's relay, late by a slice on a
 * loaded machine, lost a trace's last record, `trace_stopped`.  A
 * descriptor that fails (EPIPE: the reader closed) drops everything
 * after.  Sockets are written with MSG_NOSIGNAL, so a reader that went
 * away is an error here and not a SIGPIPE for the whole program.  The
 * descriptor is the embedder's: it is never closed here.
 *
 * Threads: the stream is written only by the pipeline's collector (sinks
 * run there); `closing` is set by the thread that stops the pipeline
 * (relaxed store, relaxed load: a late sight of it costs one slice).
 */
#define _GNU_SOURCE   /* fopencookie */

#include "trace/tr_fdout.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vm/atomics.h"
#include "vm/common.h"

#define TR_FDOUT_SLICE_MS 50

struct TrFdOut {
    int fd;
    bool broken;            /* a write failed, or closing gave up: drop from now on
                               (collector only) */
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

static ssize_t fdout_write(void *cookie, const char *buf, size_t n)
{
    TrFdOut *o = cookie;
    size_t done = 0;
    bool last_slice = false;
    while (done < n && !o->broken) {
        ssize_t k = put(o, buf + done, n - done);
        if (k > 0) {
            done += (size_t)k;
            last_slice = false;   /* the reader reads: it gets its slice again */
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            o->broken = true;
            break;
        }
        /* Not writable now: wait a slice; after the pipeline began to
         * close, give up after a whole slice in which the reader took
         * nothing. */
        if (last_slice) {
            /* Given up once while closing: the rest goes at once. */
            o->broken = true;
            break;
        }
        if (vm_atomic_load_relaxed(&o->closing))
            last_slice = true;
        struct pollfd pfd = { .fd = o->fd, .events = POLLOUT };
        if (poll(&pfd, 1, TR_FDOUT_SLICE_MS) < 0 && errno != EINTR) {
            o->broken = true;
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

FILE *tr_fdout_open(int fd, TrFdOut **out)
{
    TrFdOut *o = vm_calloc(1, sizeof *o);
    o->fd = fd;
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
