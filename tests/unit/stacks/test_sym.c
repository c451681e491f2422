/*
 * tests/unit/stacks/test_sym.c - native symbolization (stacks/st_sym.h):
 * exact names and offsets for functions of this program (static and
 * not), of libc and of a library dlopen'ed after the cache was built;
 * the vdso; addresses with no symbol; file:line from DWARF; the
 * formatted form;
 * lookups from four threads while a fifth drops the cache.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "stacks/st_sym.h"

/* Known functions.  noinline and an escaping address keep their names
 * (no clones); each is longer than the offsets the tests use. */
__attribute__((noinline)) int sym_global_fn(int n);
__attribute__((noinline)) int sym_global_fn(int n)
{
    volatile int acc = 0;
    for (int i = 0; i < n; i++)
        acc += i * 3;
    return acc;
}

static __attribute__((noinline)) int sym_static_fn(int n)
{
    volatile int acc = 1;
    for (int i = 0; i < n; i++)
        acc *= i + 2;
    return acc;
}

/* The whole function on one line, so every instruction has this line. */
__attribute__((noinline)) int sym_marker_fn(int x); __attribute__((noinline)) int sym_marker_fn(int x) { volatile int y = x; return y * 7; } enum { MARKER_LINE = __LINE__ };

static char exe[4096];

static void setup(void)
{
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert(n > 0);
    exe[n] = '\0';
    st_sym_reset();   /* each test starts cold */
}

TestSuite(sym, .init = setup);

static void expect_sym(uintptr_t addr, const char *name, uintptr_t offset, const char *object)
{
    StSym s;
    cr_assert(st_sym_lookup(addr, &s), "no symbol at %#lx (want %s)", (unsigned long)addr, name);
    cr_assert_str_eq(s.name, name);
    cr_assert_eq(s.offset, offset, "offset %#lx, want %#lx", (unsigned long)s.offset,
                 (unsigned long)offset);
    cr_assert_str_eq(s.object, object);
}

/* The load base of the object holding addr (dladdr's view, to check ours). */
static uintptr_t base_of(uintptr_t addr, const char **path)
{
    Dl_info info;
    cr_assert(dladdr((void *)addr, &info) != 0);
    *path = info.dli_fname;
    struct link_map *map = NULL;
    cr_assert(dladdr1((void *)addr, &info, (void **)&map, RTLD_DL_LINKMAP) != 0);
    return (uintptr_t)map->l_addr;
}

Test(sym, global_function_of_the_executable)
{
    uintptr_t f = (uintptr_t)&sym_global_fn;
    expect_sym(f, "sym_global_fn", 0, exe);
    expect_sym(f + 5, "sym_global_fn", 5, exe);
    StSym s;
    cr_assert(st_sym_lookup(f + 5, &s));
    const char *path;
    cr_assert_eq(s.obj_offset, f + 5 - base_of(f, &path));
}

Test(sym, static_function_only_in_symtab)
{
    uintptr_t f = (uintptr_t)&sym_static_fn;
    expect_sym(f, "sym_static_fn", 0, exe);
    expect_sym(f + 7, "sym_static_fn", 7, exe);
    Dl_info info;   /* dladdr (dynsym only) cannot name it: the point of reading .symtab */
    cr_assert(dladdr((void *)f, &info) != 0);
    cr_assert(info.dli_sname == NULL || strcmp(info.dli_sname, "sym_static_fn") != 0);
}

Test(sym, libc_function_by_its_public_name)
{
    /* libc's .dynsym has __getpid (global) and getpid (weak) at one
     * address, 8 bytes long: the public name wins. */
    uintptr_t f = (uintptr_t)&getpid;
    const char *path;
    base_of(f, &path);
    cr_assert(strstr(path, "libc.so.6") != NULL, "%s", path);
    expect_sym(f, "getpid", 0, path);
    expect_sym(f + 3, "getpid", 3, path);
}

Test(sym, unmapped_address)
{
    StSym s;
    cr_assert_not(st_sym_lookup(0x10, &s));
    cr_assert_null(s.name);
    cr_assert_null(s.object);
    cr_assert_eq(s.offset, 0);
    cr_assert_eq(s.obj_offset, 0);
    void *anon = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(anon != MAP_FAILED);
    cr_assert_not(st_sym_lookup((uintptr_t)anon + 100, &s));
    cr_assert_null(s.object);
    munmap(anon, 4096);
}

Test(sym, inside_an_object_but_no_symbol)
{
    /* The executable's ELF header is mapped (first PT_LOAD) but no
     * function covers it. */
    const char *path;
    uintptr_t base = base_of((uintptr_t)&sym_global_fn, &path);
    StSym s;
    cr_assert_not(st_sym_lookup(base, &s));
    cr_assert_null(s.name);
    cr_assert_str_eq(s.object, exe);
    cr_assert_eq(s.obj_offset, 0);
}

Test(sym, format)
{
    char buf[4200], want[4200];
    uintptr_t f = (uintptr_t)&sym_global_fn;
    snprintf(want, sizeof want, "sym_global_fn+0x5 (%s)", exe);
    size_t n = st_sym_format(f + 5, buf, sizeof buf);
    cr_assert_str_eq(buf, want);
    cr_assert_eq(n, strlen(want));
    cr_assert_eq(st_sym_format(f + 5, NULL, 0), strlen(want));   /* the length needed */
    cr_assert_eq(st_sym_format(f + 5, buf, 6), strlen(want));
    cr_assert_str_eq(buf, "sym_g");
    st_sym_format(0x10, buf, sizeof buf);
    cr_assert_str_eq(buf, "0x10");
    const char *path;
    uintptr_t base = base_of(f, &path);
    snprintf(want, sizeof want, "0x%lx (%s)", (unsigned long)base, exe);
    st_sym_format(base, buf, sizeof buf);
    cr_assert_str_eq(buf, want);
}

Test(sym, batch_lookup)
{
    uintptr_t a[4] = { (uintptr_t)&sym_global_fn + 1, 0x10, (uintptr_t)&sym_static_fn + 2,
                       (uintptr_t)&getpid };
    StSym s[4];
    cr_assert_eq(st_sym_lookup_n(a, 4, s), 3);
    cr_assert_str_eq(s[0].name, "sym_global_fn");
    cr_assert_eq(s[0].offset, 1);
    cr_assert_null(s[1].name);
    cr_assert_null(s[1].object);
    cr_assert_str_eq(s[2].name, "sym_static_fn");
    cr_assert_eq(s[2].offset, 2);
    cr_assert_str_eq(s[3].name, "getpid");
}

Test(sym, source_line_from_dwarf)
{
    const char *file = NULL;
    int line = 0;
    cr_assert(st_sym_srcline((uintptr_t)&sym_marker_fn + 4, &file, &line));
    cr_assert_eq(line, MARKER_LINE);
    const char *want = "tests/unit/stacks/test_sym.c";
    size_t lf = strlen(file), lw = strlen(want);
    cr_assert(lf >= lw && strcmp(file + lf - lw, want) == 0 &&
              (lf == lw || file[lf - lw - 1] == '/'), "file %s", file);
    cr_assert_eq(sym_marker_fn(1), 7);
    /* The same after a reset (a new dwfl); no line for unmapped code. */
    st_sym_reset();
    line = 0;
    cr_assert(st_sym_srcline((uintptr_t)&sym_marker_fn, &file, &line));
    cr_assert_eq(line, MARKER_LINE);
    cr_assert_not(st_sym_srcline(0x10, &file, &line));
}

Test(sym, strings_survive_reset)
{
    StSym s;
    cr_assert(st_sym_lookup((uintptr_t)&sym_static_fn, &s));
    const char *name = s.name, *object = s.object;
    st_sym_reset();
    StSym t;
    cr_assert(st_sym_lookup((uintptr_t)&sym_static_fn, &t));
    cr_assert_str_eq(name, "sym_static_fn");   /* still readable (ASan checks) */
    cr_assert_eq(t.name, name, "the pooled copy is reused");
    cr_assert_eq(t.object, object);
}

Test(sym, library_dlopened_after_the_first_lookup)
{
    StSym s;
    cr_assert(st_sym_lookup((uintptr_t)&sym_global_fn, &s));   /* the cache exists */
    /* libexpat (python3's dependency) is not linked into this program. */
    cr_assert_null(dlopen("libexpat.so.1", RTLD_NOW | RTLD_NOLOAD));
    void *h = dlopen("libexpat.so.1", RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "%s", dlerror());
    uintptr_t f = (uintptr_t)dlsym(h, "XML_ErrorString");
    cr_assert(f != 0);
    const char *path;
    base_of(f, &path);
    cr_assert(strstr(path, "libexpat.so.1") != NULL, "%s", path);
    expect_sym(f + 16, "XML_ErrorString", 16, path);
    /* Unloaded: after a refresh (dlpi_subs moved) the address is no
     * longer in any object the cache knows. */
    cr_assert_eq(dlclose(h), 0);
    cr_assert_null(dlopen("libexpat.so.1", RTLD_NOW | RTLD_NOLOAD), "still loaded");
    st_sym_refresh();
    StSym gone;
    cr_assert_not(st_sym_lookup(f + 16, &gone));
    cr_assert(gone.object == NULL || strstr(gone.object, "libexpat") == NULL);
}

Test(sym, vdso_read_from_memory)
{
    /* The vdso has no file; its image is read where the kernel mapped it.
     * __vdso_clock_gettime (global) and clock_gettime (weak) share an
     * address: the public name wins. */
    if (!getauxval(AT_SYSINFO_EHDR))
        cr_skip_test("no vdso mapped (qemu-user before 8.1 maps none for its guests)");
    void *h = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
    cr_assert_not_null(h);
    uintptr_t f = (uintptr_t)dlsym(h, "__vdso_clock_gettime");
    cr_assert(f != 0);
    expect_sym(f + 4, "clock_gettime", 4, "linux-vdso.so.1");
}

/* ---- concurrent lookups while another thread drops the cache ----------- */

#define LOOKERS 4

static atomic_bool stop;
static atomic_long lookups, bad;

static void *looker(void *arg)
{
    (void)arg;
    const uintptr_t addrs[3] = { (uintptr_t)&sym_global_fn + 3, (uintptr_t)&sym_static_fn + 4,
                                 (uintptr_t)&getpid + 1 };
    const char *names[3] = { "sym_global_fn", "sym_static_fn", "getpid" };
    const uintptr_t offs[3] = { 3, 4, 1 };
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        StSym s;
        unsigned k = i % 3;
        if (!st_sym_lookup(addrs[k], &s) || strcmp(s.name, names[k]) != 0 || s.offset != offs[k])
            atomic_fetch_add(&bad, 1);
        atomic_fetch_add(&lookups, 1);
    }
    return NULL;
}

Test(sym, concurrent_lookups_and_resets)
{
    pthread_t t[LOOKERS];
    for (int i = 0; i < LOOKERS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, looker, NULL), 0);
    /* At least 100 resets and 0.2 s of lookups (the cap only bounds a
     * hopelessly loaded machine). */
    long resets = 0, elapsed;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        st_sym_reset();
        resets++;
        usleep(200);
        clock_gettime(CLOCK_MONOTONIC, &now);
        elapsed = (now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec);
    } while ((resets < 100 || elapsed < 200000000L) && elapsed < 30000000000L);
    atomic_store(&stop, true);
    for (int i = 0; i < LOOKERS; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(atomic_load(&bad), 0);
    cr_assert_geq(resets, 100);
    cr_assert_gt(atomic_load(&lookups), resets);
}
