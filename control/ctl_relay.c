/*
 * control/ctl_relay.c - the pipe between a trace session's sink and a
 * client's socket (control/ctl_trace.c).
 *
 * Why not let the sink write to the socket.  A sink that cannot write
 * (the client reads too slowly) gives up on what is left once its
 * session ends, at any byte (trace/tr_fdout.c): the socket could then end
 * in the middle of an event's line, and the reply's end (a line holding
 * `.`) would be glued to it, so the client would never see the reply end.
 * Here the sink writes into a pipe; the client's thread reads it and
 * sends whole lines only, dot-stuffed like every payload line, and drops
 * a last partial line.  What the sink drops costs events, never the
 * framing.
 *
 * Nobody blocks on the client.  The socket is written without waiting
 * (what it does not take stays in `out`), so the client's thread keeps
 * seeing the session stop and the client hang up.  While the session
 * lives, `out` is bounded: past CTL_RELAY_OUT_MAX the pipe is not read,
 * the sink's writer waits for it in slices (trace/tr_fdout.c) and the
 * session's rings drop events, counted, as for any slow sink; no
 * scheduler waits.  While the session is destroyed, the pipe is read
 * without bound, so that the sink never has to give up on its last
 * record (the most a session's rings hold, formatted).
 *
 * Threads: the relay is the client's thread's alone; the session's
 * collector writes only the pipe's write end.
 */
#define _GNU_SOURCE
#include "control/ctl_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes waiting for the client past which the live session's pipe is not
 * read. */
#define CTL_RELAY_OUT_MAX (1u << 20)
/* A line longer than this (no event is) is dropped, not buffered. */
#define CTL_RELAY_LINE_MAX (1u << 20)

bool ctl_relay_open(CtlRelay *rl)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        return false;
    /* Room for a burst (best effort: the default 64 KiB otherwise). */
    (void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    *rl = (CtlRelay){ .rd = p[0], .wr = p[1] };
    sb_init(&rl->pend);
    sb_init(&rl->out);
    return true;
}

void ctl_relay_close(CtlRelay *rl)
{
    close(rl->rd);
    close(rl->wr);
    sb_free(&rl->pend);
    sb_free(&rl->out);
}

/* Moves the whole lines of pend to out, dot-stuffed; keeps the partial
 * one. */
static void take_lines(CtlClient *c, CtlRelay *rl)
{
    size_t start = 0;
    for (size_t i = 0; i < rl->pend.len; i++) {
        if (rl->pend.s[i] != '\n')
            continue;
        if (!c->gone) {
            if (rl->pend.s[start] == '.')
                sb_putc(&rl->out, '.');
            sb_put(&rl->out, rl->pend.s + start, i + 1 - start);
        }
        start = i + 1;
    }
    memmove(rl->pend.s, rl->pend.s + start, rl->pend.len - start);
    rl->pend.len -= start;
    if (rl->pend.len > CTL_RELAY_LINE_MAX)
        rl->pend.len = 0;
}

/* Sends what the socket takes now; a client gone drops the rest. */
static void send_some(CtlClient *c, CtlRelay *rl)
{
    while (!c->gone && rl->sent < rl->out.len) {
        ssize_t k = send(c->fd, rl->out.s + rl->sent, rl->out.len - rl->sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0)
            rl->sent += (size_t)k;
        else if (k < 0 && errno == EINTR)
            continue;
        else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        else
            c->gone = true;
    }
    if (c->gone || rl->sent == rl->out.len)
        rl->out.len = rl->sent = 0;
}

void ctl_relay_pump(CtlClient *c, CtlRelay *rl, int wait_ms, bool unbounded)
{
    bool room = unbounded || rl->out.len - rl->sent < CTL_RELAY_OUT_MAX;
    /* The socket only while something waits for it (a client that hung
     * up would report POLLHUP at once, every time). */
    bool waiting = !c->gone && rl->out.len > rl->sent;
    struct pollfd p[2] = { { .fd = rl->rd, .events = room ? POLLIN : 0 },
                           { .fd = waiting ? c->fd : -1, .events = POLLOUT } };
    if (poll(p, 2, wait_ms) < 0 && errno != EINTR)
        return;
    char buf[65536];
    ssize_t k;
    while (room && (k = read(rl->rd, buf, sizeof buf)) > 0) {
        sb_put(&rl->pend, buf, (size_t)k);
        take_lines(c, rl);
        room = unbounded || rl->out.len - rl->sent < CTL_RELAY_OUT_MAX;
    }
    send_some(c, rl);
}

void ctl_relay_finish(CtlClient *c, CtlRelay *rl)
{
    if (!c->gone && rl->sent < rl->out.len &&
        !ctl_write(c->fd, rl->out.s + rl->sent, rl->out.len - rl->sent))
        c->gone = true;
    rl->out.len = rl->sent = 0;
}
