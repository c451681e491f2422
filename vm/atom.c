/*
 * vm/atom.c - the global atom table (see atom.h for the concurrency rules).
 */
#include "vm/atom.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vm/atomics.h"

#define CHUNK_BITS 12
#define CHUNK_SIZE (1u << CHUNK_BITS)
#define NCHUNKS (VM_ATOM_MAX_COUNT / CHUNK_SIZE)

typedef struct AtomEntry {
    const char *name; /* NUL-terminated copy, never freed */
    uint32_t len;
    uint32_t hash;
} AtomEntry;

static AtomEntry *chunks[NCHUNKS];   /* written under atom_lock before [AT1] */
static VmAtomic count;               /* [AT1] release by interners; acquire by readers */
static pthread_mutex_t atom_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *index_slots;        /* open addressing: atom index + 1, 0 = empty; under atom_lock */
static size_t index_cap;
static pthread_once_t atoms_once = PTHREAD_ONCE_INIT;

static uint32_t hash_name(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    return h;
}

static AtomEntry *entry(Atom a)
{
    return &chunks[a >> CHUNK_BITS][a & (CHUNK_SIZE - 1)];
}

/* Called with atom_lock held. */
static void index_insert(uint32_t h, Atom a)
{
    size_t mask = index_cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        if (index_slots[i] == 0) {
            index_slots[i] = a + 1;
            return;
        }
    }
}

/* Called with atom_lock held. */
static void index_grow(void)
{
    size_t n = (size_t)vm_atomic_load_relaxed(&count);
    if (index_cap && n * 2 < index_cap)
        return;
    index_cap = index_cap ? index_cap * 2 : 1024;
    free(index_slots);
    index_slots = vm_calloc(index_cap, sizeof(uint32_t));
    for (size_t a = 0; a < n; a++)
        index_insert(entry((Atom)a)->hash, (Atom)a);
}

/* Called with atom_lock held. */
static bool find_locked(const char *name, size_t len, uint32_t h, Atom *out)
{
    if (!index_cap)
        return false;
    size_t mask = index_cap - 1;
    for (size_t i = h & mask; index_slots[i]; i = (i + 1) & mask) {
        AtomEntry *e = entry(index_slots[i] - 1);
        if (e->hash == h && e->len == len && memcmp(e->name, name, len) == 0) {
            *out = index_slots[i] - 1;
            return true;
        }
    }
    return false;
}

static bool intern_locked(const char *name, size_t len, Atom *out)
{
    uint32_t h = hash_name(name, len);
    if (find_locked(name, len, h, out))
        return true;
    size_t n = (size_t)vm_atomic_load_relaxed(&count);
    if (n >= VM_ATOM_MAX_COUNT)
        return false;
    if (!chunks[n >> CHUNK_BITS])
        chunks[n >> CHUNK_BITS] = vm_calloc(CHUNK_SIZE, sizeof(AtomEntry));
    AtomEntry *e = &chunks[n >> CHUNK_BITS][n & (CHUNK_SIZE - 1)];
    e->name = vm_strndup(name, len);
    e->len = (uint32_t)len;
    e->hash = h;
    /* [AT1] release: the entry before the count that makes it readable;
     * pairs with the acquire in vm_atom_count(). */
    vm_atomic_store_release(&count, n + 1);
    index_grow();
    index_insert(h, (Atom)n);
    *out = (Atom)n;
    return true;
}

static void init_once(void)
{
    static const char *const names[] = {
#define X(c, s) s,
#include "vm/atoms.def"
#undef X
    };
    pthread_mutex_lock(&atom_lock);
    for (size_t i = 0; i < VM_ARRAY_LEN(names); i++) {
        Atom a;
        if (!intern_locked(names[i], strlen(names[i]), &a) || a != i)
            vm_die("predefined atoms out of order");
    }
    pthread_mutex_unlock(&atom_lock);
}

void vm_atoms_init(void)
{
    pthread_once(&atoms_once, init_once);
}

bool vm_atom_intern(const char *name, size_t len, Atom *out)
{
    if (len > VM_ATOM_MAX_LEN)
        return false;
    vm_atoms_init();
    pthread_mutex_lock(&atom_lock);
    bool ok = intern_locked(name, len, out);
    pthread_mutex_unlock(&atom_lock);
    return ok;
}

bool vm_atom_lookup(const char *name, size_t len, Atom *out)
{
    vm_atoms_init();
    pthread_mutex_lock(&atom_lock);
    bool ok = find_locked(name, len, hash_name(name, len), out);
    pthread_mutex_unlock(&atom_lock);
    return ok;
}

const char *vm_atom_name(Atom a, size_t *len)
{
    AtomEntry *e = entry(a);
    if (len)
        *len = e->len;
    return e->name;
}

Atom vm_atom_cstr(const char *name)
{
    Atom a;
    if (!vm_atom_intern(name, strlen(name), &a))
        vm_die("cannot intern atom");
    return a;
}

size_t vm_atom_count(void)
{
    return (size_t)vm_atomic_load_acquire(&count);
}

#if VM_FUZZ
void vm_atoms_trim(void)
{
    vm_atoms_init();
    pthread_mutex_lock(&atom_lock);
    size_t n = (size_t)vm_atomic_load_relaxed(&count);
    for (size_t a = ATOM__PREDEFINED; a < n; a++)
        free((char *)entry((Atom)a)->name);
    vm_atomic_store_release(&count, ATOM__PREDEFINED);
    memset(index_slots, 0, index_cap * sizeof(uint32_t));
    for (size_t a = 0; a < ATOM__PREDEFINED; a++)
        index_insert(entry((Atom)a)->hash, (Atom)a);
    pthread_mutex_unlock(&atom_lock);
}
#endif
