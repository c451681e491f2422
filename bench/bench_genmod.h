/*
 * bench/bench_genmod.h - genmod, the generated module whose functions
 * bench_pausefree and bench_tp switch call trace on and off over (BEAM's
 * genmod in bench/tracing.erl is the same module): f1..fN, fK(X) -> X + K,
 * and work/1, which makes 20 nested local calls f5000(...f500(f250(X)))
 * (for N = 5000; the twentieths of N in general).  Like bench_util.h,
 * which it includes, it needs BENCH_PROG defined first.
 */
#ifndef BENCH_BENCH_GENMOD_H
#define BENCH_BENCH_GENMOD_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_util.h"

typedef struct Buf {
    char *s;
    size_t len, cap;
} Buf;

static void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void buf_printf(Buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            die("vsnprintf failed", NULL);
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = b->cap * 2 + (size_t)n + 1;
        b->s = realloc(b->s, b->cap);
        if (!b->s)
            die("out of memory", NULL);
    }
}

/* genmod: f1..fN, fK(X) -> X + K, and work/1 -> f5000(...f500(f250(X))). */
static char *genmod_text(int nfns, size_t *len)
{
    Buf b = { malloc(1 << 16), 0, 1 << 16 };
    buf_printf(&b, "module genmod\nexport work/1\n");
    for (int i = 1; i <= nfns; i++)
        buf_printf(&b, "export f%d/1\n", i);
    buf_printf(&b, "function work/1 regs 1\n");
    for (int i = 1; i <= 20; i++) {
        int k = i * nfns / 20;
        buf_printf(&b, "    call r0, r0, f%d/1\n", k < 1 ? 1 : k);
    }
    buf_printf(&b, "    ret r0\nend\n");
    for (int i = 1; i <= nfns; i++)
        buf_printf(&b, "function f%d/1 regs 1\n    addi r0, r0, %d\n    ret r0\nend\n", i, i);
    *len = b.len;
    return b.s;
}

#endif /* BENCH_BENCH_GENMOD_H */
