/*
 * stacks/st_elf.c - one object's function symbols, read from its ELF file
 * with libelf into a sorted table; and the never-freed string pool the
 * names live in.
 *
 * Which symbols.  .symtab when the object has one (it also holds the
 * static functions, which .dynsym never does), else .dynsym (Debian's
 * shared libraries are stripped to it).  Kept: STT_FUNC and STT_GNU_IFUNC
 * symbols, and STT_NOTYPE ones in executable sections (labels of
 * hand-written assembly), defined in a real section, with a name.
 *
 * Aliases.  Several names often share a start (libc's __getpid and
 * getpid); the table keeps one per start address, the preferred one: a
 * function over a label, then the fewest leading underscores (the public
 * name), then global over weak over local, then the shorter name, then
 * the smaller in strcmp order (so the choice never depends on qsort).
 *
 * Sizes.  A sized symbol covers [start, start + size).  A zero-sized one
 * (an assembly label without .size) covers up to the next symbol's start
 * or the end of its section, whichever comes first, so that an address
 * after it is attributed to it only as far as nothing else claims it.
 *
 * The string pool.  Names point into a copy of the object's string table,
 * kept for the life of the process and shared by every later table of
 * the same file (same path, device, inode, size and modification time),
 * so pointers handed out by st_sym_lookup survive st_sym_reset and
 * dlclose, and repeated resets do not grow memory.  Other strings (object
 * paths, source file names) are interned in a hash set in the same pool.
 * The pool's lock covers both; it is never held while calling libelf.
 */
#include "stacks/st_sym_internal.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vm/common.h"

const StTable st_empty_table = { 0, NULL, "" };

/* ---- the string pool ---------------------------------------------------- */

/* A copy of one file's string table; identified by the file's identity. */
typedef struct Blob {
    struct Blob *next;
    const char *path;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    size_t len;
    char *data;
} Blob;

/* An interned string. */
typedef struct Interned {
    struct Interned *next;
    size_t len;
    char s[];
} Interned;

#define INTERN_BUCKETS 1024

/* pool_lock protects blobs and interned; the strings themselves are
 * immutable once published and readable by any thread that got their
 * address through the lock or through a table built after it. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static Blob *blobs;
static Interned *interned[INTERN_BUCKETS];

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;  /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

const char *st_intern(const char *s, size_t n)
{
    uint32_t b = hash_bytes(s, n) % INTERN_BUCKETS;
    pthread_mutex_lock(&pool_lock);
    Interned *it = interned[b];
    while (it && (it->len != n || memcmp(it->s, s, n) != 0))
        it = it->next;
    if (!it) {
        it = vm_malloc(sizeof *it + n + 1);
        it->len = n;
        memcpy(it->s, s, n);
        it->s[n] = '\0';
        it->next = interned[b];
        interned[b] = it;
    }
    pthread_mutex_unlock(&pool_lock);
    return it->s;
}

static bool same_file(const Blob *b, const Blob *key)
{
    return b->path == key->path && b->dev == key->dev && b->ino == key->ino &&
           b->size == key->size && b->mtime.tv_sec == key->mtime.tv_sec &&
           b->mtime.tv_nsec == key->mtime.tv_nsec && b->len == key->len;
}

/* The pooled copy of a string table of the file described by key. */
static const char *pool_strtab(const Blob *key, const char *data)
{
    pthread_mutex_lock(&pool_lock);
    Blob *b = blobs;
    while (b && !same_file(b, key))
        b = b->next;
    if (!b) {
        b = vm_malloc(sizeof *b);
        *b = *key;
        b->data = vm_malloc(key->len + 1);
        memcpy(b->data, data, key->len);
        b->data[key->len] = '\0';  /* a malformed last name still ends */
        b->next = blobs;
        blobs = b;
    }
    pthread_mutex_unlock(&pool_lock);
    return b->data;
}

/* ---- reading symbols ---------------------------------------------------- */

/* What the table build needs of a section. */
typedef struct Sect {
    uintptr_t addr, end;
    bool exec;
} Sect;

/* A kept symbol before sorting and collapsing. */
typedef struct Cand {
    uintptr_t start;
    uintptr_t size;
    uintptr_t limit;       /* end of its section */
    uint32_t name;
    uint32_t rank;         /* preference among aliases: higher wins */
} Cand;

/* The sort order: start ascending, then preferred first.  cand_strs is
 * the string table cand_cmp reads names from: set by make_table, under
 * the caller's build lock (qsort has no context argument in C11). */
static const char *cand_strs;

static int cand_cmp(const void *a, const void *b)
{
    const Cand *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank > y->rank ? -1 : 1;
    const char *p = cand_strs + x->name, *q = cand_strs + y->name;
    size_t lp = strlen(p), lq = strlen(q);
    if (lp != lq)
        return lp < lq ? -1 : 1;
    return strcmp(p, q);
}

static uint32_t rank_of(const GElf_Sym *s, const char *name)
{
    unsigned underscores = 0;
    while (name[underscores] == '_' && underscores < 3)
        underscores++;
    unsigned bind = GELF_ST_BIND(s->st_info);
    unsigned b = bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0;
    unsigned func = GELF_ST_TYPE(s->st_info) != STT_NOTYPE;
    return func << 8 | (3 - underscores) << 4 | b;
}

/* The sections' addresses and flags, indexed by section number. */
static Sect *read_sects(Elf *elf, size_t *count)
{
    size_t n = 0;
    if (elf_getshdrnum(elf, &n) != 0 || n == 0)
        return NULL;
    Sect *v = vm_calloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        GElf_Shdr sh;
        Elf_Scn *scn = elf_getscn(elf, i);
        if (scn && gelf_getshdr(scn, &sh)) {
            v[i].addr = (uintptr_t)sh.sh_addr;
            v[i].end = (uintptr_t)(sh.sh_addr + sh.sh_size);
            v[i].exec = (sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) ==
                        (SHF_ALLOC | SHF_EXECINSTR);
        }
    }
    *count = n;
    return v;
}

/* The symbol section to read: .symtab if any, else .dynsym. */
static Elf_Scn *symbol_section(Elf *elf, GElf_Shdr *out)
{
    Elf_Scn *scn = NULL, *dyn = NULL;
    GElf_Shdr dynsh;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        if (sh.sh_type == SHT_SYMTAB) {
            *out = sh;
            return scn;
        }
        if (sh.sh_type == SHT_DYNSYM && !dyn) {
            dyn = scn;
            dynsh = sh;
        }
    }
    if (dyn)
        *out = dynsh;
    return dyn;
}

/* Appends the kept symbols of data to *v; returns their number. */
static size_t collect(Elf_Data *data, size_t nsyms, const Sect *sects, size_t nsects,
                      const char *strs, size_t strlen_, Cand **v)
{
    size_t n = 0;
    *v = vm_malloc((nsyms ? nsyms : 1) * sizeof **v);
    for (size_t i = 0; i < nsyms; i++) {
        GElf_Sym s;
        if (!gelf_getsym(data, (int)i, &s) || s.st_name == 0 || s.st_name >= strlen_)
            continue;
        unsigned type = GELF_ST_TYPE(s.st_info);
        if (s.st_shndx == SHN_UNDEF || s.st_shndx >= nsects || !sects[s.st_shndx].exec)
            continue;
        if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
            continue;
        const char *name = strs + s.st_name;
        if (name[0] == '\0' || (type == STT_NOTYPE && name[0] == '$'))
            continue;
        (*v)[n++] = (Cand){ .start = (uintptr_t)s.st_value, .size = (uintptr_t)s.st_size,
                            .limit = sects[s.st_shndx].end, .name = (uint32_t)s.st_name,
                            .rank = rank_of(&s, name) };
    }
    return n;
}

/* Sorts, collapses aliases and computes every entry's extent. */
static StTable *make_table(Cand *c, size_t n, const char *strs)
{
    cand_strs = strs;
    qsort(c, n, sizeof *c, cand_cmp);
    StTable *t = vm_malloc(sizeof *t);
    t->ents = vm_malloc((n ? n : 1) * sizeof *t->ents);
    t->strs = strs;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        uintptr_t size = c[i].size;
        for (; j < n && c[j].start == c[i].start; j++)
            if (size == 0)
                size = c[j].size;   /* a sized alias tells the extent */
        if (size == 0) {
            uintptr_t end = j < n && c[j].start < c[i].limit ? c[j].start : c[i].limit;
            size = end > c[i].start ? end - c[i].start : 0;
        }
        if (size > 0) {
            t->ents[m++] = (StSymEnt){ .start = c[i].start,
                                       .len = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size,
                                       .name = c[i].name };
        }
        i = j;
    }
    t->n = m;
    return t;
}

/* The table of an open ELF image; key identifies its file for the pool. */
static const StTable *read_table(Elf *elf, Blob *key)
{
    GElf_Shdr symsh, strsh;
    Elf_Scn *symscn = symbol_section(elf, &symsh);
    Elf_Scn *strscn = symscn ? elf_getscn(elf, symsh.sh_link) : NULL;
    Elf_Data *symdata = symscn ? elf_getdata(symscn, NULL) : NULL;
    Elf_Data *strdata = strscn ? elf_getdata(strscn, NULL) : NULL;
    if (!symdata || !strdata || !gelf_getshdr(strscn, &strsh) || strdata->d_size == 0 ||
        symsh.sh_entsize == 0)
        return &st_empty_table;
    size_t nsects = 0;
    Sect *sects = read_sects(elf, &nsects);
    if (!sects)
        return &st_empty_table;
    key->len = strdata->d_size;
    const char *strs = pool_strtab(key, strdata->d_buf);
    Cand *c;
    size_t n = collect(symdata, symsh.sh_size / symsh.sh_entsize, sects, nsects, strs,
                       strdata->d_size, &c);
    StTable *t = make_table(c, n, strs);
    free(c);
    free(sects);
    return t;
}

/* A copy of the vdso's ELF image (libelf reads it like a file). */
static char *vdso_image(size_t *size)
{
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)getauxval(AT_SYSINFO_EHDR);
    if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
        return NULL;
    size_t end = (size_t)eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
    for (unsigned i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_offset + ph[i].p_filesz > end)
            end = (size_t)(ph[i].p_offset + ph[i].p_filesz);
    char *img = vm_malloc(end);
    memcpy(img, eh, end);
    *size = end;
    return img;
}

const StTable *st_elf_table(const StObjSrc *src)
{
    if (elf_version(EV_CURRENT) == EV_NONE)
        return &st_empty_table;
    Blob key = { .path = src->path };
    int fd = -1;
    char *img = NULL;
    Elf *elf = NULL;
    if (src->vdso) {
        size_t size = 0;
        img = vdso_image(&size);
        elf = img ? elf_memory(img, size) : NULL;
    } else {
        struct stat st;
        fd = open(src->path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && fstat(fd, &st) == 0) {
            key.dev = st.st_dev;
            key.ino = st.st_ino;
            key.size = st.st_size;
            key.mtime = st.st_mtim;
            elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        }
    }
    const StTable *t = elf && elf_kind(elf) == ELF_K_ELF ? read_table(elf, &key)
                                                         : &st_empty_table;
    if (elf)
        elf_end(elf);
    if (fd >= 0)
        close(fd);
    free(img);
    return t;
}

void st_elf_table_free(const StTable *t)
{
    if (t && t != &st_empty_table) {
        free(t->ents);
        free((StTable *)t);
    }
}
