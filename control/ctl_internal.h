/*
 * control/ctl_internal.h - what the control endpoint's files share: the
 * bounded line reader both ends use, the request grammar (words, quoting),
 * replies, and the server's per-client state.  docs/control.md is the
 * protocol.
 */
#ifndef CONTROL_CTL_INTERNAL_H
#define CONTROL_CTL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "include/tracevm.h"
#include "vm/atomics.h"
#include "vm/strbuf.h"

/* Protocol limits (docs/control.md). */
#define CTL_VERSION 1
#define CTL_LINE_MAX 65536u            /* a request line, its LF included */
#define CTL_LOAD_MAX (16u << 20)       /* a load's module text */
#define CTL_MAX_CLIENTS 16
#define CTL_IDLE_MS 60000              /* for a whole request line, or a load's text */
#define CTL_SEND_MS 60000              /* a reply waiting for a client that reads nothing */
#define CTL_MAX_ARGS 256
/* The longest a request may run, and so stay silent: an hour (the
 * --duration of profile, trace, count and time; top's count times its
 * interval).  The client waits this long and more for a reply's line. */
#define CTL_REQUEST_MAX_MS 3600000
/* The trace sessions the clients hold at once: half of TVM_SESSIONS_MAX,
 * the default session and 7 more stay the program's. */
#define CTL_MAX_SESSIONS (TVM_SESSIONS_MAX / 2)

/* The send timeout of every client's socket (SO_SNDTIMEO), CTL_SEND_MS.
 * Written only by tests, before tvm_control_start; read by the accept
 * thread when it admits a client, which that start's pthread_create
 * orders after the write. */
extern int ctl_send_ms;
/* How long a request line, or a load's text, may take to arrive whole
 * (from when the server begins to wait for it), CTL_IDLE_MS.  Written
 * only by tests, before tvm_control_start, as ctl_send_ms. */
extern int ctl_idle_ms;
/* How long a client waits, past CTL_REQUEST_MAX_MS, for a line of a
 * reply (CTL_CLIENT_MARGIN_MS), and for the greeting.  Written only by
 * tests, on the thread that makes the calls, between them. */
#define CTL_CLIENT_MARGIN_MS 600000
extern int ctl_client_margin_ms;
/* Ends a connection after an error line: no more from us, and what the
 * peer still sends is read and dropped for a second in all (a megabyte
 * at most), so that the close does not reset the connection under the
 * error line before the peer has read it. */
void ctl_linger(int fd);

/* The uid of the process at the other end of the socket fd
 * (SO_PEERCRED); false if the kernel does not say.  The server admits
 * only its own user (and root); the client trusts only its own user's
 * server. */
bool ctl_peer_uid(int fd, unsigned *uid);

/* A buffered reader over a socket, bounded: it never holds more than
 * CTL_LINE_MAX bytes of a line. */
typedef struct CtlReader {
    int fd;
    char *buf;                 /* CTL_LINE_MAX + 1 bytes */
    size_t start, end;         /* unread bytes: buf[start, end) */
} CtlReader;

typedef enum CtlRead {
    CTL_READ_LINE,             /* a whole line (its LF replaced by NUL) */
    CTL_READ_EOF,              /* the peer closed between lines */
    CTL_READ_TRUNCATED,        /* the peer closed in the middle of a line */
    CTL_READ_TOO_LONG,         /* no LF within CTL_LINE_MAX bytes */
    CTL_READ_IDLE,             /* nothing arrived within the timeout */
    CTL_READ_FAILED,           /* a socket error (or the endpoint stopping) */
} CtlRead;

void ctl_reader_init(CtlReader *r, int fd);
void ctl_reader_free(CtlReader *r);
/* The next line, its length without the LF in *len (both set only for
 * CTL_READ_LINE); valid until the next call.  timeout_ms is for the whole
 * line, however its bytes trickle in; < 0: no timeout.  CTL_READ_IDLE
 * with part of a line read leaves ctl_reader_partial true. */
CtlRead ctl_read_line(CtlReader *r, char **line, size_t *len, int timeout_ms);
/* Whether the reader holds part of a line (after CTL_READ_IDLE: the line
 * had begun). */
bool ctl_reader_partial(const CtlReader *r);
/* Exactly n bytes into out (after the line they follow), all of them
 * within timeout_ms; false on EOF, error or timeout. */
bool ctl_read_bytes(CtlReader *r, char *out, size_t n, int timeout_ms);

/*
 * Splits a request line into words (docs/control.md: separated by single
 * spaces; a word may be double-quoted with \" \\ \n \t \xHH escapes).
 * Returns the number of words, the words themselves malloc'ed in *argv
 * (free with ctl_words_free), or -1 with the reason in `why` (a bad
 * string, a NUL byte, invalid UTF-8, too many words).
 */
int ctl_split(const char *line, size_t len, char ***argv, char *why, size_t whylen);
void ctl_words_free(int argc, char **argv);
/* Appends s as one word of a request (quoted when it must be). */
void ctl_quote(StrBuf *sb, const char *s);
/* Whether [s, s+n) is valid UTF-8 with no NUL. */
bool ctl_utf8_ok(const char *s, size_t n);

/* Writes all of [s, s+n); false when the peer is gone (no SIGPIPE). */
bool ctl_write(int fd, const char *s, size_t n);

/* ==== the server ==== */

typedef struct CtlClient {
    struct CtlServer *srv;
    int fd;
    CtlReader in;
    StrBuf out;                /* the reply being written */
    bool gone;                 /* a write failed: the peer is gone */
} CtlClient;

typedef struct CtlServer {
    tvm_vm *vm;
    int lfd;                   /* the listening socket */
    int wake[2];               /* a pipe: written to stop the accept loop */
    /* /dev/null, held for the moment the process has no descriptor
     * left: given up to accept a connection and tell it so (-1 while
     * spent).  The accept loop's alone once it runs. */
    int spare;
    char path[256];            /* the socket's path */
    /* The same, kept until tvm_destroy (ctl_server.c, CtlPaths): set by
     * tvm_control_start before it publishes vm->control, read by
     * tvm_control_path; both under ctl_lock. */
    const char *kept_path;
    pthread_t thread;          /* the accept loop */
    uint64_t started_ns;       /* CLOCK_MONOTONIC at start (info: uptime) */
    /* lock protects slots: the clients being served. */
    pthread_mutex_t lock;
    struct CtlSlot {
        bool used;
        bool done;             /* its thread has finished (to be joined) */
        int fd;
        pthread_t thread;
    } slots[CTL_MAX_CLIENTS];
    /* 1 once the endpoint stops: client threads end at their next read.
     * Release store by tvm_control_stop, acquire loads by the threads. */
    VmAtomic stopping;
    /* The trace sessions the clients' commands hold, at most
     * CTL_MAX_SESSIONS: a relaxed add by a client thread before its
     * command creates one, a relaxed add of -1 after the command destroyed it
     * (ctl_dispatch).  Only a count: no data is published through it. */
    VmAtomic sessions;
} CtlServer;

/* Reply helpers of a command (control/ctl_cmd.c); each line is
 * dot-stuffed.  A command ends with ctl_end (after ctl_ok) or ctl_error. */
void ctl_ok(CtlClient *c);
void ctl_line(CtlClient *c, const char *s, size_t n);
void ctl_linef(CtlClient *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ctl_end(CtlClient *c);
void ctl_error(CtlClient *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sends what the reply holds so far (streams: top). */
bool ctl_flush(CtlClient *c);

/* Runs one request of a client (its words); the reply is written to c. */
void ctl_dispatch(CtlClient *c, int argc, char **argv);

/* An API error's message without the "tvm_name: " in front. */
const char *ctl_api_why(const tvm_error *err);
/* A whole number in [lo, hi] (false if s is not one). */
bool ctl_number(const char *s, long lo, long hi, long *out);
/* A process id as N or <0.N.0> (false if s is neither). */
bool ctl_pid(const char *s, uint64_t *out);
/* Whether the client is still connected: it has not shut its end
 * (POLLRDHUP; a client may still have requests queued).  While the
 * endpoint stops, a read side that ended counts as there: the stop ends
 * it itself, and the client still reads the end of its reply. */
bool ctl_client_here(CtlClient *c);
/* Sleeps ms in steps of 50; false as soon as the endpoint stops or the
 * client hangs up (c->gone is then set: the command is cancelled and
 * nothing more is written to it). */
bool ctl_nap(CtlClient *c, long ms);
/* The trace command (ctl_trace.c). */
void ctl_cmd_trace(CtlClient *c, int argc, char **argv);
/* The count and time commands (ctl_calls.c; argv[0] says which). */
void ctl_cmd_calls(CtlClient *c, int argc, char **argv);

/* The pipe from a trace session's sink to the client (ctl_relay.c): the
 * sink writes wr; the client's thread reads rd and sends whole lines. */
typedef struct CtlRelay {
    int rd, wr;
    StrBuf pend;               /* read, not yet a whole line */
    StrBuf out;                /* whole lines for the client, out.s[sent..] not sent yet */
    size_t sent;
} CtlRelay;

/* False when the OS gives no pipe. */
bool ctl_relay_open(CtlRelay *rl);
void ctl_relay_close(CtlRelay *rl);
/* Waits up to wait_ms for the sink's bytes or room at the client, takes
 * the whole lines there are (all of them when unbounded, else up to a
 * bound of bytes waiting for the client) and sends what the client takes
 * without waiting (drops it all once the client is gone). */
void ctl_relay_pump(CtlClient *c, CtlRelay *rl, int wait_ms, bool unbounded);
/* Sends what is still waiting, waiting for the client (the reply's end
 * follows). */
void ctl_relay_finish(CtlClient *c, CtlRelay *rl);

/* The trace_info command (ctl_trace_info.c). */
void ctl_cmd_trace_info(CtlClient *c, int argc, char **argv);

/* Clients being served now (info). */
int ctl_clients(CtlServer *srv);

#endif /* CONTROL_CTL_INTERNAL_H */
