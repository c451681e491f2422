/*
 * tests/unit/trace/tr_fixture.h - term builders without a process heap
 * and the fixed synthetic event sequence the sink tests (and
 * tests/progs/trace_gen.c) write.
 */
#ifndef TESTS_UNIT_TRACE_TR_FIXTURE_H
#define TESTS_UNIT_TRACE_TR_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "trace/tr.h"
#include "trace/tr_encode.h"
#include "vm/atom.h"
#include "vm/module.h"

/* A bump arena for boxed terms (8-byte aligned words). */
typedef struct Arena {
    Term words[1 << 16];
    size_t used;
} Arena;

static inline Term *arena_alloc(Arena *a, size_t n)
{
    Term *p = a->words + a->used;
    a->used += n;
    if (a->used > sizeof a->words / sizeof a->words[0])
        abort();
    return p;
}

static inline Term A(const char *name)
{
    return make_atom(vm_atom_cstr(name));
}

static inline Term I(int64_t v)
{
    return make_small(v);
}

static inline Term tuple_of(Arena *a, unsigned n, const Term *elems)
{
    Term *p = arena_alloc(a, 1 + n);
    p[0] = MAKE_HEADER(IMM_HDR_TUPLE, n);
    if (n)
        memcpy(p + 1, elems, n * sizeof(Term));
    return make_boxed(p);
}

static inline Term T2(Arena *a, Term x, Term y)
{
    Term e[2] = { x, y };
    return tuple_of(a, 2, e);
}

static inline Term cons(Arena *a, Term h, Term t)
{
    Term *p = arena_alloc(a, 2);
    p[0] = h;
    p[1] = t;
    return make_cons_ptr(p);
}

static inline Term list_of(Arena *a, unsigned n, const Term *elems)
{
    Term l = TERM_NIL;
    for (unsigned i = n; i-- > 0;)
        l = cons(a, elems[i], l);
    return l;
}

static inline Term bin_of(Arena *a, const void *bytes, size_t len)
{
    Term *p = arena_alloc(a, binary_words(len));
    p[0] = MAKE_HEADER(IMM_HDR_BINARY, len);
    memcpy(p + 1, bytes, len);
    return make_boxed(p);
}

/* A fun term needs an Export; the test keeps it alive. */
static inline Term fun_of(Arena *a, Export *x, const char *mod, const char *name,
                          unsigned arity)
{
    memset(x, 0, sizeof *x);
    x->mod = vm_atom_cstr(mod);
    x->name = vm_atom_cstr(name);
    x->arity = arity;
    Term *p = arena_alloc(a, 2);
    p[0] = MAKE_HEADER(IMM_HDR_FUN, 1);
    p[1] = (Term)(uintptr_t)x;
    return make_boxed(p);
}

/* A decoded event with its payload encoded into `buf` (cap bytes). */
static inline TrEvent fx_event(uint8_t *buf, size_t cap, uint64_t ts, int sched,
                               TrKind kind, unsigned flags, uint64_t pid,
                               const char *mod, const char *fun, unsigned arity,
                               const Term *terms, unsigned n)
{
    unsigned items = 0;
    bool cut = false;
    size_t len = n ? tr_encode(buf, cap, terms, n, &items, &cut) : 0;
    TrEvent ev = {
        .ts = ts, .sched = sched, .kind = kind,
        .flags = flags | (cut ? TR_F_TRUNCATED : 0u), .pid = pid,
        .mod = mod ? vm_atom_cstr(mod) : 0, .fun = fun ? vm_atom_cstr(fun) : 0,
        .arity = arity, .nterms = items, .payload = buf, .paylen = len,
    };
    return ev;
}

/*
 * The fixed sequence: fib:fib(10) on scheduler 0 calling fib(9), a loss
 * of 3 events on scheduler 0, an exception in m:f/1 on scheduler 1,
 * scheduling, messages, a spawn, an exit, and a call whose arguments are
 * cut at the cap; ts in ns from 1000.  Calls `sink` for each.
 */
#define FX_COUNT 16
static inline void fx_sequence(TrSink *sink)
{
    static Arena arena;
    static uint8_t bufs[FX_COUNT][256];
    Arena *a = &arena;
    a->used = 0;
    Term ten = I(10), nine = I(9), v34 = I(34), v55 = I(55);
    Term exc[2] = { A("error"), A("badarg") };
    Term spawn[2] = { make_pid(43), I(1) };
    Term send[2] = { T2(a, A("hello"), bin_of(a, "hi", 2)), make_pid(43) };
    Term recv = send[0];
    Term normal = A("normal");
    Term big[3] = { bin_of(a, "0123456789abcdefghijklmnopqrstuvwxyz", 36), I(2), I(3) };
    TrEvent ev[FX_COUNT];
    int k = 0;
    ev[k] = fx_event(bufs[k], 256, 1000, 0, TR_K_CALL, TR_F_RETURNS, 42, "fib", "fib", 1, &ten, 1), k++;
    ev[k] = fx_event(bufs[k], 256, 1100, 0, TR_K_CALL, TR_F_RETURNS, 42, "fib", "fib", 1, &nine, 1), k++;
    ev[k] = fx_event(bufs[k], 256, 1200, 1, TR_K_IN, 0, 7, "m", "loop", 0, NULL, 0), k++;
    ev[k] = fx_event(bufs[k], 256, 1300, 1, TR_K_CALL, TR_F_RETURNS, 7, "m", "f", 1, &exc[1], 1), k++;
    ev[k] = fx_event(bufs[k], 256, 1400, 0, TR_K_RETURN_FROM, 0, 42, "fib", "fib", 1, &v34, 1), k++;
    ev[k] = (TrEvent){ .ts = 1450, .sched = 0, .kind = TR_K_LOST, .lost = 3 }, k++;
    ev[k] = fx_event(bufs[k], 256, 1500, 1, TR_K_EXCEPTION_FROM, 0, 7, "m", "f", 1, exc, 2), k++;
    ev[k] = fx_event(bufs[k], 256, 1600, 1, TR_K_RETURN_TO, 0, 7, "m", "loop", 0, NULL, 0), k++;
    ev[k] = fx_event(bufs[k], 256, 1700, 0, TR_K_RETURN_FROM, 0, 42, "fib", "fib", 1, &v55, 1), k++;
    ev[k] = fx_event(bufs[k], 256, 1800, -1, TR_K_SPAWN, 0, 42, "m", "start", 1, spawn, 2), k++;
    ev[k] = fx_event(bufs[k], 256, 1900, 0, TR_K_SEND, 0, 42, NULL, NULL, 0, send, 2), k++;
    ev[k - 1].flags |= TR_F_NO_MFA;
    ev[k] = fx_event(bufs[k], 256, 2000, 1, TR_K_RECEIVE, 0, 43, NULL, NULL, 0, &recv, 1), k++;
    ev[k - 1].flags |= TR_F_NO_MFA;
    ev[k] = fx_event(bufs[k], 256, 2100, 1, TR_K_OUT, 0, 7, "m", "loop", 0, NULL, 0), k++;
    ev[k] = fx_event(bufs[k], 24, 2200, 0, TR_K_CALL, 0, 42, "lists", "seq", 3, big, 3), k++;
    ev[k] = fx_event(bufs[k], 256, 2300, 0, TR_K_CALL, TR_F_ARITY | TR_F_RETURNS, 42, "io",
                     "format", 2, NULL, 0), k++;
    ev[k] = fx_event(bufs[k], 256, 2400, 1, TR_K_EXIT, 0, 7, NULL, NULL, 0, &normal, 1), k++;
    ev[k - 1].flags |= TR_F_NO_MFA;
    for (int i = 0; i < k; i++)
        sink->ops->event(sink, &ev[i]);
}

#endif /* TESTS_UNIT_TRACE_TR_FIXTURE_H */
