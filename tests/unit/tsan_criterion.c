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
 *
 * And mmap64 and munmap, when libcriterion maps an ELF file to read it,
 * go past ThreadSanitizer.  Criterion finds its tests by mapping the file
 * of every loaded object (the program, libtsan's 8 MB, libc ...) and
 * reading its sections.  ThreadSanitizer's mmap and munmap reset the
 * shadow and meta memory of each mapping, page by page (perf: under
 * dl_iterate_phdr's callback, munmap's UnmapShadow and
 * MetaMap::FreeRange, and their page faults): about 0.5 s of CPU a
 * program (test_term 2.4 s, now 1.85; test_interp 3.9, now 3.45), 20 s
 * a suite of 39 programs.  Only read-only private file mappings that
 * libcriterion itself makes pass by (their addresses are kept for
 * munmap): no instrumented code touches them, and every other mapping,
 * the arena's too, is ThreadSanitizer's as before.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* The mappings mmap64 made past ThreadSanitizer, by address (0: a free
 * slot), so that munmap undoes them the same way.  Criterion unmaps each
 * file before it maps the next; the table only needs a few slots, and a
 * mapping that finds it full goes through ThreadSanitizer as usual.
 * Written and read under `bypassed_lock`. */
#define BYPASSED_MAX 16
static uintptr_t bypassed[BYPASSED_MAX];
static pthread_mutex_t bypassed_lock = PTHREAD_MUTEX_INITIALIZER;

/* Records addr in a free slot; false when none is free. */
static int bypass_record(uintptr_t addr)
{
    int ok = 0;
    pthread_mutex_lock(&bypassed_lock);
    for (int i = 0; i < BYPASSED_MAX && !ok; i++)
        if (!bypassed[i]) {
            bypassed[i] = addr;
            ok = 1;
        }
    pthread_mutex_unlock(&bypassed_lock);
    return ok;
}

/* Forgets addr; false when mmap64 did not map it past ThreadSanitizer. */
static int bypass_forget(uintptr_t addr)
{
    int found = 0;
    pthread_mutex_lock(&bypassed_lock);
    for (int i = 0; i < BYPASSED_MAX && !found; i++)
        if (bypassed[i] == addr) {
            bypassed[i] = 0;
            found = 1;
        }
    pthread_mutex_unlock(&bypassed_lock);
    return found;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static void *(*real)(void *, size_t, int, int, int, off_t);
    if (!real)
        real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap64");
    if (addr || prot != PROT_READ || flags != MAP_PRIVATE || fd < 0 ||
        !called_by_criterion(__builtin_return_address(0)))
        return real(addr, len, prot, flags, fd, off);
    void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (p == MAP_FAILED || bypass_record((uintptr_t)p))
        return p;
    /* No slot: unmapped as it came, and mapped again the usual way. */
    syscall(SYS_munmap, p, len);
    return real(addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len)
{
    static int (*real)(void *, size_t);
    if (!real)
        real = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
    if (!bypass_forget((uintptr_t)addr))
        return real(addr, len);
    return (int)syscall(SYS_munmap, addr, len);
}
