/*
 * vm/common.c - fatal errors and checked allocation.
 */
#include "vm/common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vm_die_at(const char *file, const char *func, int line, const char *what)
{
    int err = errno;
    fprintf(stderr, "tracevm: fatal: %s:%s@%d: %s", file, func, line, what);
    if (err)
        fprintf(stderr, " (errno %d: %s)", err, strerror(err));
    fputc('\n', stderr);
    abort();
}

void *vm_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        vm_die("out of memory");
    return p;
}

void *vm_calloc(size_t count, size_t n)
{
    void *p = calloc(count ? count : 1, n ? n : 1);
    if (!p)
        vm_die("out of memory");
    return p;
}

void *vm_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        vm_die("out of memory");
    return q;
}

char *vm_strndup(const char *s, size_t n)
{
    char *d = vm_malloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}
