/*
 * vm/common.c - fatal errors, checked allocation and reading the
 * embedder's option structs.
 */
#include "vm/common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/tracevm.h"

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

void *vm_zalloc_aligned(size_t align, size_t n)
{
    n = n ? (n + align - 1) & ~(align - 1) : align;
    void *p = aligned_alloc(align, n);
    if (!p)
        vm_die("out of memory");
    memset(p, 0, n);
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

const char *vm_msg_path(const char *path, char buf[VM_MSG_PATH_MAX + 1])
{
    size_t len = strlen(path);
    if (len <= VM_MSG_PATH_MAX)
        return path;
    size_t half = VM_MSG_PATH_MAX / 2 - 2;
    memcpy(buf, path, half);
    memcpy(buf + half, "...", 3);
    memcpy(buf + half + 3, path + len - half, half);
    buf[2 * half + 3] = '\0';
    return buf;
}

bool vm_opts_copy(void *out, size_t out_size, const void *in, char *why, size_t n)
{
    size_t size = *(const size_t *)in;
    if (size == 0)
        snprintf(why, n, "size is 0; set it to the struct's sizeof");
    else if (size < sizeof(size_t))
        snprintf(why, n, "size %zu is smaller than the size field", size);
    else if (size > VM_OPTS_MAX)
        snprintf(why, n, "size %zu is larger than any version of the struct", size);
    else {
        memcpy(out, in, size < out_size ? size : out_size);
        const unsigned char *extra = (const unsigned char *)in;
        for (size_t i = out_size; i < size; i++) {
            if (extra[i]) {
                snprintf(why, n,
                         "size %zu: a field past this library's %zu bytes is set, "
                         "from a newer header than the library's (%s)",
                         size, out_size, TVM_VERSION_STRING);
                return false;
            }
        }
        return true;
    }
    return false;
}
