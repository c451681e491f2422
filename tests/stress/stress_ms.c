/*
 * tests/stress/stress_ms.c - one compiled match spec (trace/tr_ms_compile.c, trace/tr_ms_run.c) run
 * by several threads at once, each on its own arguments and scratch, with
 * every result checked; each thread also holds a reference of its own
 * and the main thread drops the compiler's reference while they run, so
 * the last tr_ms_free happens on whichever thread ends last.  Run under
 * ThreadSanitizer by `scons mode=tsan test`: a run must write nothing
 * shared.  A plain program (exit 0 = pass).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "include/tracevm.h"
#include "trace/tr_ms.h"
#include "vm/atom.h"

static const char *const stress_name = "stress_ms";

static int fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", stress_name, what);
    return 1;
}

/* The atom x (interned by main before the threads start). */
static Term atom_x;

#define NTHREADS 8
#define RUNS 50000

static const char *const spec_text =
    "[{[{'$1', ok, '_'}, '$2'], [{'>', '$2', 2}, {is_integer, '$1'}],"
    "  [{message, {{'$1', {'+', '$1', '$2'}, '$$'}}}, {return_trace}]},"
    " {[{'$1', error, [x | '$3']}, '_'], [{'==', {length, '$3'}, 2}], [{message, false}]}]";

typedef struct Worker {
    TrMs *ms;
    int id;
    long bad;
} Worker;

/* Checks one run on ({X, Tag, [x, y, z]}, N). */
static bool check(const TrMs *ms, TrMsScratch *s, int64_t x, int i)
{
    Term list[6], tup[4];
    for (int k = 0; k < 3; k++) {
        list[2 * k] = make_atom(ATOM_OK);
        list[2 * k + 1] = k < 2 ? make_cons_ptr(&list[2 * k + 2]) : TERM_NIL;
    }
    list[0] = atom_x;
    tup[0] = MAKE_HEADER(IMM_HDR_TUPLE, 3);
    tup[1] = make_small(x);
    tup[2] = make_atom(i % 3 ? ATOM_OK : ATOM_ERROR);
    tup[3] = make_cons_ptr(list);
    Term args[2] = { make_boxed(tup), make_small(i % 7) };
    TrMsResult res;
    bool m = tr_ms_run(ms, args, 2, NULL, s, &res);
    if (i % 3 == 0)
        return m && res.message == TR_MS_MSG_OFF && res.flags == 0;
    if (i % 7 <= 2)
        return !m;
    Term msg = res.msg;
    return m && res.message == TR_MS_MSG_TERM && res.flags == TR_MS_RETURN_TRACE &&
           term_is_tuple(msg) && tuple_arity(msg) == 3 &&
           tuple_elems(msg)[0] == make_small(x) &&
           tuple_elems(msg)[1] == make_small(x + i % 7) &&
           term_is_cons(tuple_elems(msg)[2]);
}

static void *worker(void *arg)
{
    Worker *w = arg;
    TrMsScratch *s = malloc(sizeof *s);
    for (int i = 0; i < RUNS; i++)
        if (!check(w->ms, s, (int64_t)w->id * 1000000 + i, i))
            w->bad++;
    free(s);
    tr_ms_free(w->ms);
    return NULL;
}

int main(void)
{
    tvm_vm *vm = tvm_new(NULL);
    tvm_env *env = tvm_env_new(vm);
    tvm_term h;
    tvm_error err;
    if (tvm_parse_term(env, spec_text, &h, &err) != TVM_OK)
        return fail(err.message);
    char msg[256];
    TrMs *ms = tr_ms_compile(vm_root_get(env->p, h), 2, msg, sizeof msg);
    if (!ms)
        return fail(msg);
    atom_x = make_atom(vm_atom_cstr("x"));
    pthread_t th[NTHREADS];
    Worker w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (Worker){ ms, i, 0 };
        tr_ms_retain(ms);
        pthread_create(&th[i], NULL, worker, &w[i]);
    }
    tr_ms_free(ms);
    long bad = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        bad += w[i].bad;
    }
    tvm_env_free(env);
    tvm_destroy(vm);
    if (bad) {
        fprintf(stderr, "%s: %ld wrong results\n", stress_name, bad);
        return 1;
    }
    printf("%s: %d threads x %d runs of one spec, all results right\n", stress_name,
           NTHREADS, RUNS);
    return 0;
}
