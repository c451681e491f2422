/*
 * vm/strbuf.h - a growable character buffer (diagnostics, term printing).
 */
#ifndef VM_STRBUF_H
#define VM_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct StrBuf {
    char *s;      /* NUL-terminated */
    size_t len, cap;
} StrBuf;

void sb_init(StrBuf *sb);
void sb_free(StrBuf *sb);
void sb_putc(StrBuf *sb, char c);
void sb_put(StrBuf *sb, const char *s, size_t n);
void sb_puts(StrBuf *sb, const char *s);
void sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap);
/* Copies into buf (NUL-terminated, truncated); returns sb->len. */
size_t sb_copy_out(const StrBuf *sb, char *buf, size_t size);

#endif /* VM_STRBUF_H */
