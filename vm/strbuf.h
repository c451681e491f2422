/*
 * vm/strbuf.h - a growable character buffer (diagnostics, term printing).
 */
#ifndef VM_STRBUF_H
#define VM_STRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

typedef struct StrBuf {
    char *s;      /* NUL-terminated */
    size_t len, cap;
} StrBuf;

void sb_init(StrBuf *sb);
void sb_free(StrBuf *sb);
/* Makes room for `more` bytes and the NUL (the appends' slow path). */
void sb_grow(StrBuf *sb, size_t more);

/* The appends are inline: the trace sinks make a dozen per event, and
 * inlined, sb_puts of a literal needs no strlen and a fitting append no
 * call (chrome, text and JSON lines sinks: docs/benchmarks.md). */
static inline void sb_put(StrBuf *sb, const char *s, size_t n)
{
    if (sb->len + n + 1 > sb->cap)
        sb_grow(sb, n);
    memcpy(sb->s + sb->len, s, n);
    sb->len += n;
    sb->s[sb->len] = '\0';
}

static inline void sb_putc(StrBuf *sb, char c)
{
    sb_put(sb, &c, 1);
}

static inline void sb_puts(StrBuf *sb, const char *s)
{
    sb_put(sb, s, strlen(s));
}

void sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap);
/* Copies into buf (NUL-terminated, truncated); returns sb->len. */
size_t sb_copy_out(const StrBuf *sb, char *buf, size_t size);

#endif /* VM_STRBUF_H */
