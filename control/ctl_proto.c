/*
 * control/ctl_proto.c - the control protocol's text layer, shared by the
 * server and the client: a bounded line reader, the request grammar (words
 * and their quoting), and writes that survive a vanished peer.
 *
 * Everything a peer sends is hostile until checked: the reader never
 * holds more than CTL_LINE_MAX bytes of one line, whatever arrives; the
 * splitter accepts only the documented grammar and says where it broke;
 * writes use MSG_NOSIGNAL so a client that goes away mid-reply costs the
 * server an error code, not a SIGPIPE; and both ends learn who is at the
 * other end from the kernel (ctl_peer_uid).
 */
#define _GNU_SOURCE   /* struct ucred */
#include "control/ctl_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vm/common.h"
#include "vm/timer.h"

void ctl_reader_init(CtlReader *r, int fd)
{
    r->fd = fd;
    r->buf = vm_malloc(CTL_LINE_MAX + 1);
    r->start = r->end = 0;
}

void ctl_reader_free(CtlReader *r)
{
    free(r->buf);
    r->buf = NULL;
}

/* The vm_now_ns at which a call of timeout_ms ends (0: never). */
static uint64_t deadline_of(int timeout_ms)
{
    return timeout_ms < 0 ? 0 : vm_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

/* Waits until fd is readable; false once `deadline` has passed (0: no
 * deadline) or on error.  A deadline, not a wait per poll: a peer that
 * sends a byte now and then must not stretch a read without end. */
static bool readable(int fd, uint64_t deadline, bool *timed_out)
{
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    for (;;) {
        int ms = -1;
        if (deadline) {
            uint64_t now = vm_now_ns();
            if (now >= deadline) {
                *timed_out = true;
                return false;
            }
            ms = (int)((deadline - now + 999999u) / 1000000u);
        }
        int n = poll(&pf, 1, ms);
        if (n > 0)
            return true;
        if (n < 0 && errno != EINTR)
            return false;
    }
}

/* Reads more bytes after buf[end]; 0 at EOF, -1 on error or timeout. */
static ssize_t fill(CtlReader *r, uint64_t deadline, bool *timed_out)
{
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    if (!readable(r->fd, deadline, timed_out))
        return -1;
    for (;;) {
        ssize_t n = recv(r->fd, r->buf + r->end, CTL_LINE_MAX - r->end, 0);
        if (n >= 0 || errno != EINTR)
            return n;
    }
}

CtlRead ctl_read_line(CtlReader *r, char **line, size_t *len, int timeout_ms)
{
    const uint64_t deadline = deadline_of(timeout_ms);
    size_t scanned = r->start;
    for (;;) {
        char *nl = memchr(r->buf + scanned, '\n', r->end - scanned);
        if (nl) {
            *nl = '\0';
            *line = r->buf + r->start;
            *len = (size_t)(nl - *line);
            r->start = (size_t)(nl - r->buf) + 1;
            return CTL_READ_LINE;
        }
        if (r->end - r->start >= CTL_LINE_MAX)
            return CTL_READ_TOO_LONG;
        scanned = r->end - r->start;   /* fill() moves the unread part to 0 */
        bool timed_out = false;
        ssize_t n = fill(r, deadline, &timed_out);
        if (n == 0)
            return r->end > r->start ? CTL_READ_TRUNCATED : CTL_READ_EOF;
        if (n < 0)
            return timed_out ? CTL_READ_IDLE : CTL_READ_FAILED;
        r->end += (size_t)n;
    }
}

bool ctl_reader_partial(const CtlReader *r)
{
    return r->end > r->start;
}

bool ctl_read_bytes(CtlReader *r, char *out, size_t n, int timeout_ms)
{
    const uint64_t deadline = deadline_of(timeout_ms);
    size_t have = r->end - r->start < n ? r->end - r->start : n;
    memcpy(out, r->buf + r->start, have);
    r->start += have;
    while (have < n) {
        bool timed_out = false;
        if (!readable(r->fd, deadline, &timed_out))
            return false;
        ssize_t k = recv(r->fd, out + have, n - have, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        have += (size_t)k;
    }
    return true;
}

bool ctl_peer_uid(int fd, unsigned *uid)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof cr)
        return false;
    *uid = (unsigned)cr.uid;
    return true;
}

bool ctl_write(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        s += k;
        n -= (size_t)k;
    }
    return true;
}

/* ==== the request grammar ==== */

bool ctl_utf8_ok(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p++;
        unsigned more;
        uint32_t cp;
        if (c == 0)
            return false;
        if (c < 0x80)
            continue;
        if ((c & 0xe0) == 0xc0) {
            more = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            more = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            more = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if ((size_t)(end - p) < more)
            return false;
        for (unsigned i = 0; i < more; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        /* Overlong forms, surrogates and values past U+10FFFF. */
        if ((more == 1 && cp < 0x80) || (more == 2 && cp < 0x800) ||
            (more == 3 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
            return false;
        p += more;
    }
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One quoted word from s[*i] (the opening quote) into sb; false with why. */
static bool quoted(const char *s, size_t len, size_t *i, StrBuf *sb, char *why, size_t whylen)
{
    size_t at = *i;
    for (size_t j = at + 1; j < len; j++) {
        char c = s[j];
        if (c == '"') {
            *i = j + 1;
            return true;
        }
        if ((unsigned char)c < 0x20) {
            snprintf(why, whylen, "control character in a string at column %zu", j + 1);
            return false;
        }
        if (c != '\\') {
            sb_putc(sb, c);
            continue;
        }
        if (++j >= len)
            break;
        switch (s[j]) {
        case '"': sb_putc(sb, '"'); break;
        case '\\': sb_putc(sb, '\\'); break;
        case 'n': sb_putc(sb, '\n'); break;
        case 't': sb_putc(sb, '\t'); break;
        case 'x': {
            int hi = j + 2 < len ? hexval(s[j + 1]) : -1, lo = hi >= 0 ? hexval(s[j + 2]) : -1;
            if (lo < 0 || (hi == 0 && lo == 0)) {
                snprintf(why, whylen, "bad \\x escape at column %zu", j);
                return false;
            }
            sb_putc(sb, (char)(hi << 4 | lo));
            j += 2;
            break;
        }
        default:
            snprintf(why, whylen, "unknown escape \\%c at column %zu", s[j], j);
            return false;
        }
    }
    snprintf(why, whylen, "unterminated string from column %zu", at + 1);
    return false;
}

int ctl_split(const char *line, size_t len, char ***argv, char *why, size_t whylen)
{
    *argv = NULL;
    if (!ctl_utf8_ok(line, len)) {
        snprintf(why, whylen, "request is not UTF-8 text");
        return -1;
    }
    char **words = vm_calloc(CTL_MAX_ARGS, sizeof *words);
    int argc = 0;
    size_t i = 0;
    StrBuf sb;
    sb_init(&sb);
    while (i < len) {
        if (argc == CTL_MAX_ARGS) {
            snprintf(why, whylen, "more than %d words", CTL_MAX_ARGS);
            goto bad;
        }
        sb.len = 0;
        sb.s[0] = '\0';
        if (line[i] == '"') {
            if (!quoted(line, len, &i, &sb, why, whylen))
                goto bad;
            if (i < len && line[i] != ' ') {
                snprintf(why, whylen, "no space after the string ending at column %zu", i);
                goto bad;
            }
        } else {
            size_t j = i;
            while (j < len && line[j] != ' ') {
                if ((unsigned char)line[j] < 0x20 || line[j] == '"' || line[j] == '\\') {
                    snprintf(why, whylen, "'%c' outside a string at column %zu",
                             (unsigned char)line[j] < 0x20 ? '?' : line[j], j + 1);
                    goto bad;
                }
                j++;
            }
            if (j == i) {
                snprintf(why, whylen, "empty word at column %zu", i + 1);
                goto bad;
            }
            sb_put(&sb, line + i, j - i);
            i = j;
        }
        words[argc++] = vm_strndup(sb.s, sb.len);
        if (i < len) {
            i++;   /* the separating space */
            if (i == len) {
                snprintf(why, whylen, "trailing space");
                goto bad;
            }
        }
    }
    sb_free(&sb);
    if (argc == 0) {
        snprintf(why, whylen, "empty request");
        ctl_words_free(0, words);
        return -1;
    }
    *argv = words;
    return argc;
bad:
    sb_free(&sb);
    ctl_words_free(argc, words);
    return -1;
}

void ctl_words_free(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    free(argv);
}

void ctl_quote(StrBuf *sb, const char *s)
{
    bool plain = *s != '\0';
    for (const char *p = s; *p && plain; p++)
        plain = (unsigned char)*p >= 0x20 && *p != ' ' && *p != '"' && *p != '\\';
    if (plain) {
        sb_puts(sb, s);
        return;
    }
    sb_putc(sb, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': sb_puts(sb, "\\\""); break;
        case '\\': sb_puts(sb, "\\\\"); break;
        case '\n': sb_puts(sb, "\\n"); break;
        case '\t': sb_puts(sb, "\\t"); break;
        default:
            if (*p < 0x20)
                sb_printf(sb, "\\x%02x", *p);
            else
                sb_putc(sb, (char)*p);
        }
    }
    sb_putc(sb, '"');
}
