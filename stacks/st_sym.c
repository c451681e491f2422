/*
 * stacks/st_sym.c - the symbolizer's face (stacks/st_sym.h): the
 * process-wide cache of which objects are loaded where and each one's
 * symbol table (built on first use by st_elf.c), the protocol that lets
 * any thread look up while another replaces or drops the cache, the
 * lookups and their formatting, and file:line through libdw.
 *
 * Protocol: reading a cache that may be replaced.
 *
 * State.  `cur` points at the current snapshot (or NULL: not built yet, or
 * dropped): an immutable, sorted list of the loaded objects, each with an
 * address range, a load bias, a path and a slot for its symbol table.
 * The table slot is the one thing that changes in a published snapshot:
 * NULL until the first lookup inside that object builds the table under
 * `build_lock` and publishes it ([SY2] release, [SY2'] acquire); a table
 * never changes afterwards.  An object shared by two snapshots (one
 * rebuilt after a dlopen keeps the objects that did not move) is
 * reference-counted by the snapshots, under `snap_lock`.
 *
 * Readers (st_sym_lookup*, any thread, never blocking on a writer) enter a
 * read section: read `phase` (a counter, never wrapping in practice),
 * increment `readers[phase & 1]` (a full read-modify-write), re-read
 * `phase` and retry if it moved; then load `cur` ([SY1'] acquire), search
 * it, and leave by decrementing the same counter (a full RMW, so a
 * release).
 * Writers (building the first snapshot, a refresh after dlopen/dlclose,
 * st_sym_reset; serialised by snap_lock): publish the new `cur` ([SY1]
 * release), advance `phase` (full RMW), then wait until
 * readers[old phase & 1] is zero (each check a full RMW) and only then
 * free the old snapshot (and the objects no snapshot holds any more).
 *
 * Why the old snapshot is unreachable when it is freed.  A reader that
 * can hold it confirmed the old phase after incrementing
 * readers[old & 1].  Both the increment and the writer's check are RMWs
 * of the same word, so one precedes the other: if the check came first,
 * the increment read its value, so the writer's phase advance (and the
 * store of `cur` before it) happened before the reader's re-read of
 * `phase`, which then saw the new phase and the reader retried; if the
 * increment came first, the check sees it and the writer waits for the
 * matching decrement.  A reader that confirmed the new phase loads `cur`
 * after that, so it sees the new snapshot.  Readers of older phases were
 * drained by earlier writers (serialised by snap_lock).  A stale reader
 * may bump a counter for an instant before retrying: that delays a
 * writer, it never lets one through early.
 *
 * Deadlock freedom.  A reader never takes snap_lock while in a read
 * section (it leaves it first when it needs a snapshot built or a
 * refresh); inside a section it takes only build_lock, which nobody
 * holds while waiting for readers.  The libelf work for a table happens
 * under build_lock, so at most one table is built at a time.
 *
 * Cost.  A lookup is two RMWs on the counter word, two binary searches
 * (objects, then the object's symbols) and a few loads; st_sym_lookup_n
 * pays the RMWs once per batch.  Measured in docs/stacks.md.
 *
 * ThreadSanitizer sees the orders above directly: they are acquire,
 * release and RMW operations of vm/atomics.h, no fences.
 */
#define _GNU_SOURCE   /* dl_iterate_phdr */
#include "stacks/st_sym.h"

#include <elfutils/libdwfl.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "stacks/st_sym_internal.h"
#include "vm/atomics.h"
#include "vm/common.h"

/* How far back a lookup searches for a sized symbol that encloses the
 * address when the last symbol starting before it does not (a nested
 * symbol, rare). */
#define NEST_SCAN 4

typedef struct StObj {
    StObjSrc src;
    uintptr_t lo, hi;          /* the runtime range of its PT_LOAD segments */
    VmAtomic table;            /* const StTable *: [SY2] release by the builder, [SY2'] acquire */
    unsigned refs;             /* snapshots holding it; under snap_lock */
} StObj;

typedef struct StSnap {
    size_t n;
    StObj **objs;              /* sorted by lo; ranges do not overlap */
    unsigned long long adds, subs;  /* dl_iterate_phdr's counters when it was read */
} StSnap;

static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;   /* writers */
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;  /* table builds */
static VmAtomic cur;          /* StSnap *: [SY1] release by writers, [SY1'] acquire by readers */
static VmAtomic phase;        /* advanced by writers (RMW), read by readers */
static VmAtomic readers[2];   /* read sections in progress per phase parity (RMWs) */

/* ---- read sections ------------------------------------------------------- */

/* Enters a read section; returns the phase it confirmed. */
static uintptr_t read_enter(void)
{
    for (;;) {
        uintptr_t ph = vm_atomic_load_acquire(&phase);
        vm_atomic_fetch_add_full(&readers[ph & 1], 1);
        if (vm_atomic_load_acquire(&phase) == ph)
            return ph;
        vm_atomic_fetch_add_full(&readers[ph & 1], (uintptr_t)-1);
    }
}

static void read_leave(uintptr_t ph)
{
    vm_atomic_fetch_add_full(&readers[ph & 1], (uintptr_t)-1);
}

/* ---- snapshots (writers, under snap_lock) -------------------------------- */

typedef struct Loaded {
    StSnap *snap;      /* objects collected so far */
    size_t cap;
    size_t seen;       /* dl_iterate_phdr entries seen; the first is the executable */
} Loaded;

/* The path of the running executable, interned. */
static const char *exe_path(void)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf);
    return n > 0 && (size_t)n < sizeof buf ? st_intern(buf, (size_t)n) : NULL;
}

static int collect_obj(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    Loaded *l = arg;
    StSnap *s = l->snap;
    if (l->seen++ == 0) {
        s->adds = info->dlpi_adds;
        s->subs = info->dlpi_subs;
    }
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
    }
    const char *name = info->dlpi_name;
    const char *path = name && *name ? st_intern(name, strlen(name))
                       : l->seen == 1 ? exe_path() : NULL;
    if (lo >= hi || !path)
        return 0;
    if (s->n == l->cap) {
        l->cap *= 2;
        s->objs = vm_realloc(s->objs, l->cap * sizeof *s->objs);
    }
    uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    StObj *o = vm_calloc(1, sizeof *o);
    o->src = (StObjSrc){ .path = path, .bias = info->dlpi_addr,
                         .vdso = vdso && vdso >= lo && vdso < hi };
    o->lo = lo;
    o->hi = hi;
    s->objs[s->n++] = o;
    return 0;
}

static int obj_cmp(const void *a, const void *b)
{
    const StObj *x = *(StObj *const *)a, *y = *(StObj *const *)b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* old's object that is o (same file at the same place), or NULL. */
static StObj *same_obj(const StSnap *old, const StObj *o)
{
    for (size_t i = 0; old && i < old->n; i++) {
        StObj *p = old->objs[i];
        if (p->src.path == o->src.path && p->src.bias == o->src.bias && p->lo == o->lo &&
            p->hi == o->hi)
            return p;
    }
    return NULL;
}

/* The loaded objects now, sharing old's objects that did not change. */
static StSnap *read_snapshot(const StSnap *old)
{
    StSnap *s = vm_calloc(1, sizeof *s);
    Loaded l = { .snap = s, .cap = 32 };
    s->objs = vm_malloc(l.cap * sizeof *s->objs);
    dl_iterate_phdr(collect_obj, &l);
    qsort(s->objs, s->n, sizeof *s->objs, obj_cmp);
    for (size_t i = 0; i < s->n; i++) {
        StObj *same = same_obj(old, s->objs[i]);
        if (same) {
            free(s->objs[i]);
            s->objs[i] = same;
        }
        s->objs[i]->refs++;
    }
    return s;
}

static void snap_free(StSnap *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        StObj *o = s->objs[i];
        if (--o->refs == 0) {
            st_elf_table_free(vm_atomic_load_ptr_acquire(&o->table));
            free(o);
        }
    }
    free(s->objs);
    free(s);
}

/* Makes s the current snapshot and frees the previous one once no read
 * section can hold it (the protocol above).  Caller holds snap_lock. */
static void publish(StSnap *s)
{
    StSnap *old = vm_atomic_load_ptr_relaxed(&cur);   /* only writers store it, under the lock */
    vm_atomic_store_ptr_release(&cur, s);             /* [SY1] */
    uintptr_t ph = vm_atomic_fetch_add_full(&phase, 1);
    while (vm_atomic_load_rmw_full(&readers[ph & 1]) != 0)
        sched_yield();   /* a read section is short unless its thread was preempted */
    snap_free(old);
}

static void ensure_snapshot(void)
{
    pthread_mutex_lock(&snap_lock);
    if (!vm_atomic_load_ptr_relaxed(&cur))
        publish(read_snapshot(NULL));
    pthread_mutex_unlock(&snap_lock);
}

static int read_counters(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    unsigned long long *c = arg;
    c[0] = info->dlpi_adds;
    c[1] = info->dlpi_subs;
    return 1;   /* the first entry carries them; stop */
}

/* Re-reads the object list if objects were added or removed (a lookup
 * that must know whether a snapshot changed compares `phase`). */
void st_sym_refresh(void)
{
    unsigned long long c[2] = { 0, 0 };
    pthread_mutex_lock(&snap_lock);
    StSnap *s = vm_atomic_load_ptr_relaxed(&cur);
    dl_iterate_phdr(read_counters, c);
    if (!s || s->adds != c[0] || s->subs != c[1])
        publish(read_snapshot(s));
    pthread_mutex_unlock(&snap_lock);
}


/* ---- lookups (readers) --------------------------------------------------- */

/* o's symbol table, built on first use. */
static const StTable *obj_table(StObj *o)
{
    const StTable *t = vm_atomic_load_ptr_acquire(&o->table);   /* [SY2'] */
    if (VM_LIKELY(t != NULL))
        return t;
    pthread_mutex_lock(&build_lock);
    t = vm_atomic_load_ptr_relaxed(&o->table);   /* stored only under build_lock */
    if (!t) {
        t = st_elf_table(&o->src);
        vm_atomic_store_ptr_release(&o->table, t);   /* [SY2] */
    }
    pthread_mutex_unlock(&build_lock);
    return t;
}

static StObj *find_obj(const StSnap *s, uintptr_t addr)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->objs[mid]->lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && addr < s->objs[lo - 1]->hi ? s->objs[lo - 1] : NULL;
}

/* The symbol enclosing rel (an address of the object's own), or NULL. */
static const StSymEnt *find_sym(const StTable *t, uintptr_t rel)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->ents[mid].start <= rel)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* lo symbols start at or before rel; the last one usually encloses it. */
    for (size_t k = 0; lo > 0 && k < NEST_SCAN; k++) {
        const StSymEnt *e = &t->ents[--lo];
        if (rel - e->start < e->len)
            return e;
    }
    return NULL;
}

/* 1: found; 0: inside an object, no symbol; -1: outside every object. */
static int lookup_one(const StSnap *s, uintptr_t addr, StSym *out)
{
    *out = (StSym){ 0 };
    StObj *o = find_obj(s, addr);
    if (!o)
        return -1;
    out->object = o->src.path;
    out->obj_offset = addr - o->src.bias;
    const StTable *t = obj_table(o);
    const StSymEnt *e = find_sym(t, out->obj_offset);
    if (!e)
        return 0;
    out->name = st_ent_name(t, e);
    out->offset = out->obj_offset - e->start;
    return 1;
}

/* One search of the current snapshot; *ph gets the phase it was read
 * under (a later publish advances it). */
static size_t lookup_pass(const uintptr_t *addrs, size_t n, StSym *out, bool *outside,
                          uintptr_t *ph)
{
    uintptr_t idx;
    const StSnap *s;
    for (;;) {
        idx = read_enter();
        s = vm_atomic_load_ptr_acquire(&cur);   /* [SY1'] */
        if (VM_LIKELY(s != NULL))
            break;
        read_leave(idx);
        ensure_snapshot();
    }
    *ph = idx;
    size_t found = 0;
    *outside = false;
    for (size_t i = 0; i < n; i++) {
        int r = lookup_one(s, addrs[i], &out[i]);
        found += r > 0;
        *outside |= r < 0;
    }
    read_leave(idx);
    return found;
}

size_t st_sym_lookup_n(const uintptr_t *addrs, size_t n, StSym *out)
{
    bool outside;
    uintptr_t ph;
    size_t found = lookup_pass(addrs, n, out, &outside, &ph);
    /* An address outside every object: the snapshot searched may predate
     * a dlopen.  Refresh it if the loader's counters moved, and search
     * again if any snapshot was published since that search: by this
     * refresh, or by another thread (after a reset, a rebuild that
     * already has the new object; the refresh then finds the current
     * snapshot up to date and publishes nothing).  The phase only grows,
     * so unlike the snapshot's address it cannot come back. */
    if (VM_UNLIKELY(outside)) {
        st_sym_refresh();
        if (vm_atomic_load_acquire(&phase) != ph)
            found = lookup_pass(addrs, n, out, &outside, &ph);
    }
    return found;
}

bool st_sym_lookup(uintptr_t addr, StSym *out)
{
    return st_sym_lookup_n(&addr, 1, out) == 1;
}

size_t st_sym_format(uintptr_t addr, char *buf, size_t size)
{
    StSym s;
    int n;
    if (st_sym_lookup(addr, &s))
        n = snprintf(buf, size, "%s+0x%" PRIxPTR " (%s)", s.name, s.offset, s.object);
    else if (s.object)
        n = snprintf(buf, size, "0x%" PRIxPTR " (%s)", addr, s.object);
    else
        n = snprintf(buf, size, "0x%" PRIxPTR, addr);
    return n < 0 ? 0 : (size_t)n;
}

/* ---- file:line (libdw) ----------------------------------------------------
 *
 * On request only (a crash report, tracevm printing a backtrace with
 * lines): the first call reports every object of the process to dwfl
 * (dwfl_linux_proc_report reads /proc/self/maps; the ELF files and their
 * debug info, in the file or under /usr/lib/debug by build-id, are opened
 * lazily per module), which costs milliseconds; later calls are a module
 * search and a line-table search.  dwfl is not thread-safe, so dwfl_lock
 * serialises every call; the module list is re-read when an address falls
 * outside every reported module (a dlopen since), at most once per call.
 * The file names dwfl returns live as long as the Dwfl; they are interned
 * so that callers may keep them across st_sym_reset, which ends the Dwfl.
 */

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
};

static pthread_mutex_t dwfl_lock = PTHREAD_MUTEX_INITIALIZER;
static Dwfl *dwfl;     /* under dwfl_lock; NULL until the first call or after a reset */

/* (Re-)reports the process's modules to dwfl; false when it cannot. */
static bool report(void)
{
    if (!dwfl && !(dwfl = dwfl_begin(&callbacks)))
        return false;
    dwfl_report_begin(dwfl);
    int err = dwfl_linux_proc_report(dwfl, getpid());
    return dwfl_report_end(dwfl, NULL, NULL) == 0 && err == 0;
}

/* The source file and line of addr in mod by a walk over its compile
 * units.  dwfl_module_getsrc finds the unit through .debug_aranges, which
 * clang does not emit unless asked (-gdwarf-aranges) and this libdw does
 * not rebuild from the units' own ranges; so without it, ask each unit
 * whether it covers addr.  Linear in the units, on request only. */
static const char *srcline_by_units(Dwfl_Module *mod, Dwarf_Addr addr, int *lineno)
{
    Dwarf_Addr bias = 0;
    for (Dwarf_Die *cu = NULL; (cu = dwfl_module_nextcu(mod, cu, &bias)) != NULL;) {
        if (dwarf_haspc(cu, addr - bias) != 1)
            continue;
        Dwarf_Line *l = dwarf_getsrc_die(cu, addr - bias);
        return l && dwarf_lineno(l, lineno) == 0 ? dwarf_linesrc(l, NULL, NULL) : NULL;
    }
    return NULL;
}

bool st_sym_srcline(uintptr_t addr, const char **file, int *line)
{
    bool ok = false;
    pthread_mutex_lock(&dwfl_lock);
    Dwfl_Module *mod = NULL;
    if (dwfl || report())
        mod = dwfl_addrmodule(dwfl, (Dwarf_Addr)addr);
    if (!mod && report())
        mod = dwfl_addrmodule(dwfl, (Dwarf_Addr)addr);
    Dwfl_Line *l = mod ? dwfl_module_getsrc(mod, (Dwarf_Addr)addr) : NULL;
    int lineno = 0;
    const char *f = l ? dwfl_lineinfo(l, NULL, &lineno, NULL, NULL, NULL) : NULL;
    if (!f && mod)
        f = srcline_by_units(mod, (Dwarf_Addr)addr, &lineno);
    if (f && lineno > 0) {
        *file = st_intern(f, strlen(f));
        *line = lineno;
        ok = true;
    }
    pthread_mutex_unlock(&dwfl_lock);
    return ok;
}

static void srcline_reset(void)
{
    pthread_mutex_lock(&dwfl_lock);
    if (dwfl)
        dwfl_end(dwfl);
    dwfl = NULL;
    pthread_mutex_unlock(&dwfl_lock);
}

/* ---- dropping the cache -------------------------------------------------- */

void st_sym_reset(void)
{
    pthread_mutex_lock(&snap_lock);
    publish(NULL);
    pthread_mutex_unlock(&snap_lock);
    srcline_reset();
}
