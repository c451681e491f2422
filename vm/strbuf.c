/*
 * vm/strbuf.c - a growable character buffer.
 */
#include "vm/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/common.h"

void sb_init(StrBuf *sb)
{
    sb->cap = 64;
    sb->len = 0;
    sb->s = vm_malloc(sb->cap);
    sb->s[0] = '\0';
}

void sb_free(StrBuf *sb)
{
    free(sb->s);
    sb->s = NULL;
    sb->len = sb->cap = 0;
}

void sb_grow(StrBuf *sb, size_t more)
{
    if (sb->len + more + 1 <= sb->cap)
        return;
    while (sb->len + more + 1 > sb->cap)
        sb->cap *= 2;
    sb->s = vm_realloc(sb->s, sb->cap);
}

void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        vm_die("vsnprintf");
    sb_grow(sb, (size_t)n);
    vsnprintf(sb->s + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void sb_printf(StrBuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

size_t sb_copy_out(const StrBuf *sb, char *buf, size_t size)
{
    if (size) {
        size_t n = sb->len < size - 1 ? sb->len : size - 1;
        memcpy(buf, sb->s, n);
        buf[n] = '\0';
    }
    return sb->len;
}
