/*
 * tests/unit/tsan_criterion.c - lets Criterion 2.4 start under
 * ThreadSanitizer.  Linked into the unit programs of `mode=tsan` only.
 *
 * Criterion's runner keeps its shared state in an "inheritable arena"
 * that BoxFort maps at a random base 0x200000000000 + (rand_r() &
 * 0x3fffff) * 16 MiB, after mincore() says the pages are free, and that
 * every worker maps again at the same address.  ThreadSanitizer reserves
 * almost all of that window for its shadow and meta memory (PROT_NONE or
 * NORESERVE mappings); the only application memory in it is
 * 0x550000000000-0x568000000000, where PIE executables load.  BoxFort's
 * ten tries find that 2% almost never, and the runner aborts with "Could
 * not initialize inheritable arena: Resource temporarily unavailable"
 * (Criterion issue #274, open upstream).
 *
 * So rand_r, when libcriterion calls it, returns a random value whose base
 * falls in that application window; everyone else gets the real rand_r.
 * BoxFort still checks with mincore that the pages are free and retries,
 * so a clash with the executable's own mapping costs a try, not a crash.
 * Workers are fork+exec'd, so each starts its own ThreadSanitizer and the
 * threads a test starts are fully checked.  If a later Criterion changes
 * the arena's placement, the abort comes back loudly: nothing here can
 * make a test pass.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* r such that 0x200000000000 + r * 2^24 lies in [0x550000000000,
 * 0x567000000000): the window less room for the arena's first pages. */
#define ARENA_R_FIRST 0x350000u
#define ARENA_R_COUNT 0x17000u

static int called_by_criterion(const void *ret)
{
    Dl_info info;
    return dladdr(ret, &info) && info.dli_fname && strstr(info.dli_fname, "libcriterion");
}

int rand_r(unsigned *seed)
{
    static int (*real)(unsigned *);
    if (!real)
        real = (int (*)(unsigned *))dlsym(RTLD_NEXT, "rand_r");
    int v = real(seed);
    if (!called_by_criterion(__builtin_return_address(0)))
        return v;
    return (int)(ARENA_R_FIRST + (unsigned)v % ARENA_R_COUNT);
}
