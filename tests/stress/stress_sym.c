/*
 * tests/stress/stress_sym.c - the symbolizer's cache under concurrent use
 * (stacks/st_sym.c's protocol), for ASan and TSan.
 *
 * For STRESS_SYM_SECONDS (default 2 s, and until there were at least
 * MIN_RESETS resets and MIN_DLOPENS dlopens, at most 60 s):
 *   - four threads look up known addresses (a function of this program,
 *     a static one, libc's getpid), one at a time and in batches, and
 *     check every name and offset exactly;
 *   - one thread drops the cache (st_sym_reset) every ~100 us;
 *   - one thread dlopens and dlcloses a library that is not linked in
 *     (libexpat), looks up one of its functions while it is loaded (exact
 *     name, exact offset) and forces a refresh of the object list, so
 *     snapshots are replaced under the lookers as well as dropped;
 *   - one thread asks for file:line of a function of this program.
 * Then every thread must have done work and no result may be wrong.
 * A crash, a wrong result or a sanitizer report fails (exit status 1).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stacks/st_sym.h"

#define LOOKERS 4
#define MIN_RESETS 100
#define MIN_DLOPENS 100

static const char *const stress_name = "stress_sym";

static int fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", stress_name, what);
    return 1;
}

static atomic_bool stop;
static atomic_long done[LOOKERS + 3], bad;

__attribute__((noinline)) int stress_sym_fn(int n);
__attribute__((noinline)) int stress_sym_fn(int n)
{
    volatile int acc = 0;
    for (int i = 0; i < n; i++)
        acc += i;
    return acc;
}

static __attribute__((noinline)) int stress_sym_static(int n)
{
    volatile int acc = 1;
    for (int i = 0; i < n; i++)
        acc *= 3;
    return acc;
}

static void check(const StSym *s, bool found, const char *name, uintptr_t off)
{
    if (!found || !s->name || strcmp(s->name, name) != 0 || s->offset != off) {
        fprintf(stderr, "%s: want %s+%lu, got %s+%lu\n", stress_name, name,
                (unsigned long)off, s->name ? s->name : "(none)", (unsigned long)s->offset);
        atomic_fetch_add(&bad, 1);
    }
}

static void *looker(void *arg)
{
    long me = (long)arg;
    const uintptr_t a[3] = { (uintptr_t)&stress_sym_fn + 2, (uintptr_t)&stress_sym_static + 6,
                             (uintptr_t)&getpid + 1 };
    const char *names[3] = { "stress_sym_fn", "stress_sym_static", "getpid" };
    const uintptr_t offs[3] = { 2, 6, 1 };
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        if (i % 4 == 3) {
            StSym s[3];
            size_t n = st_sym_lookup_n(a, 3, s);
            for (int k = 0; k < 3; k++)
                check(&s[k], n == 3, names[k], offs[k]);
        } else {
            StSym s;
            bool ok = st_sym_lookup(a[i % 3], &s);
            check(&s, ok, names[i % 3], offs[i % 3]);
        }
        atomic_fetch_add(&done[me], 1);
    }
    return NULL;
}

static void *resetter(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        st_sym_reset();
        atomic_fetch_add(&done[LOOKERS], 1);
        usleep(100);
    }
    return NULL;
}

static void *loader(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        void *h = dlopen("libexpat.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "%s: dlopen: %s\n", stress_name, dlerror());
            atomic_fetch_add(&bad, 1);
            return NULL;
        }
        uintptr_t f = (uintptr_t)dlsym(h, "XML_ErrorString");
        StSym s;
        bool ok = st_sym_lookup(f + 8, &s);
        check(&s, ok, "XML_ErrorString", 8);
        dlclose(h);
        st_sym_refresh();
        atomic_fetch_add(&done[LOOKERS + 1], 1);
    }
    return NULL;
}

static void *liner(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        const char *file = NULL;
        int line = 0;
        if (!st_sym_srcline((uintptr_t)&stress_sym_fn, &file, &line) ||
            !strstr(file, "stress_sym.c") || line <= 0) {
            fprintf(stderr, "%s: no line for stress_sym_fn\n", stress_name);
            atomic_fetch_add(&bad, 1);
        }
        atomic_fetch_add(&done[LOOKERS + 2], 1);
    }
    return NULL;
}

int main(void)
{
    const char *env = getenv("STRESS_SYM_SECONDS");
    double seconds = env ? atof(env) : 2.0;
    pthread_t t[LOOKERS + 3];
    for (long i = 0; i < LOOKERS; i++)
        pthread_create(&t[i], NULL, looker, (void *)i);
    pthread_create(&t[LOOKERS], NULL, resetter, NULL);
    pthread_create(&t[LOOKERS + 1], NULL, loader, NULL);
    pthread_create(&t[LOOKERS + 2], NULL, liner, NULL);
    /* At least `seconds`, MIN_RESETS resets and MIN_DLOPENS dlopens (so a
     * slow sanitizer build still replaces snapshots often); at most 60 s. */
    struct timespec step = { 0, 20000000 };
    for (double waited = 0; waited < 60; waited += 0.02) {
        if (waited >= seconds && atomic_load(&done[LOOKERS]) >= MIN_RESETS &&
            atomic_load(&done[LOOKERS + 1]) >= MIN_DLOPENS)
            break;
        nanosleep(&step, NULL);
    }
    atomic_store(&stop, true);
    for (int i = 0; i < LOOKERS + 3; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < LOOKERS + 3; i++) {
        if (atomic_load(&done[i]) == 0) {
            return fail("a thread did no work");
        }
    }
    printf("lookups %ld %ld %ld %ld, resets %ld, dlopens %ld, lines %ld\n",
           atomic_load(&done[0]), atomic_load(&done[1]), atomic_load(&done[2]),
           atomic_load(&done[3]), atomic_load(&done[4]), atomic_load(&done[5]),
           atomic_load(&done[6]));
    if (atomic_load(&done[LOOKERS]) < MIN_RESETS || atomic_load(&done[LOOKERS + 1]) < MIN_DLOPENS)
        return fail("too few resets or dlopens in 60 s");
    if (atomic_load(&bad) != 0) {
        fprintf(stderr, "%s: %ld wrong results\n", stress_name, atomic_load(&bad));
        return 1;
    }
    return 0;
}
