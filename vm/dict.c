/*
 * vm/dict.c - the process dictionary (vm/dict.h), with BEAM's semantics:
 * keys and values are any terms, keys are told apart by exact equality
 * (=:=, term order's 0), put/2 and erase/1 return the old value or
 * undefined, get/1 undefined for a key that is absent.
 *
 * Where the terms live.  The keys and values stay where they are: on
 * the process's heap (or in a module's literal area, which neither moves
 * nor goes while the VM lives), as the registers hold them.  So put/2
 * copies nothing and allocates nothing on the heap; the table that
 * refers to them is off the heap, and the collector takes its slots as
 * roots (vm_dict_roots, vm/heap.c's collect_into) and updates them as it
 * moves what they point at.  BEAM keeps its dictionary the same way (an
 * array off the heap of {Key, Value} tuples on it); here a pair costs no
 * tuple: the array holds the key and the value side by side.  The
 * table's words count toward max_heap_size (vm_dict_words): a put/2 of
 * immediates grows nothing else, and the process is checked as the
 * table grows.
 *
 * The table: the entries in a dense array (kv: key, value; hash: the
 * key's hash), and an index of 2 * cap slots, open addressing with
 * linear probing, each slot 0 (empty) or 1 + its entry.  A look-up
 * hashes the key and compares (vm_compare_lend) only entries of the same
 * hash: O(1) expected whatever the size (BEAM's is a hash table too).
 * The collector walks the entries, one run of terms (so each collection
 * costs a dictionary's size, as BEAM's does), and the index needs
 * nothing when terms move: a hash is of a term's contents, never of an
 * address.  erase/1 moves the last entry into the erased one's
 * place and takes the slot out of the index by shifting the ones after
 * it back (no tombstones), so get/0 and get_keys/0 list the keys in the
 * order they were first put, except that an erase/1 moves the newest key
 * into the erased key's place (BEAM leaves the order unspecified).  The
 * table doubles when full and halves when a quarter full (never below
 * VM_DICT_MIN entries); it is freed when it empties.
 *
 * The hash: a function of a term's contents that equal terms share: the
 * word of an immediate (an atom's index is its name's alone), a tuple's
 * arity and elements, a list's cells, a binary's size and bytes, a
 * fun's module, name and arity.  It visits at most VM_DICT_HASH_NODES
 * words, with a fixed stack of HASH_STACK runs (a run that would not fit
 * is left out: that depends on the term's shape alone, so equal terms
 * still hash alike), so it is bounded in time and C stack whatever the
 * key.  Keys that agree on all it visited share a chain and are told
 * apart by comparison, which is bounded as every comparison of VM code
 * is (vm->cmp_steps: system_limit past it).
 */
#include "vm/dict.h"

#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/bif_internal.h"
#include "vm/heap.h"
#include "vm/lend.h"

/* Entries at most: the index's 2 * cap slots, and 1 + an entry, fit a
 * uint32_t.  A put past it raises system_limit. */
#define DICT_MAX ((uint32_t)1 << 30)

struct VmDict {
    Term *kv;          /* entry e: key kv[2e], value kv[2e + 1]; e < n in use */
    uint32_t *hash;    /* entry e's key's hash */
    uint32_t *index;   /* 2 * cap slots: 0, or 1 + an entry */
    uint32_t n, cap;
};

/* ==== the hash ==== */

#define HASH_STACK 16

typedef struct HashRun {
    const Term *p;
    size_t n;
} HashRun;

static inline uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* A binary's size was mixed in with its header; its bytes, a word at a
 * time (the last one's padding left out), while *budget lasts. */
static uint64_t mix_bytes(uint64_t h, const uint8_t *b, size_t len, size_t *budget)
{
    for (size_t at = 0; at < len && *budget > 0; at += 8, (*budget)--) {
        uint64_t w = 0;
        memcpy(&w, b + at, len - at < 8 ? len - at : 8);
        h = mix(h, w);
    }
    return h;
}

static uint32_t hash_term(Term t)
{
    HashRun st[HASH_STACK];
    size_t sp = 0, budget = VM_DICT_HASH_NODES;
    uint64_t h = 0x243F6A8885A308D3ull;
    for (;;) {
        const Term *e = NULL;
        size_t k = 0;
        budget--;
        if (term_is_cons(t)) {
            h = mix(h, TAG_LIST);
            e = cons_ptr(t);
            k = 2;
        } else if (term_is_boxed(t)) {
            Term hdr = boxed_ptr(t)[0];
            h = mix(h, hdr);
            if (IMM_SUB(hdr) == IMM_HDR_TUPLE) {
                e = tuple_elems(t);
                k = tuple_arity(t);
            } else if (IMM_SUB(hdr) == IMM_HDR_BINARY) {
                h = mix_bytes(h, binary_bytes(t), binary_size(t), &budget);
            } else {
                const Export *x = fun_export(t);
                h = mix(mix(mix(h, make_atom(x->mod)), make_atom(x->name)), x->arity);
            }
        } else {
            h = mix(h, t);
        }
        if (budget == 0)
            break;
        if (k > 0) {
            if (k > 1 && sp < HASH_STACK)
                st[sp++] = (HashRun){ e + 1, k - 1 };
            t = e[0];
            continue;
        }
        if (sp == 0)
            break;
        HashRun *r = &st[sp - 1];
        t = *r->p++;
        if (--r->n == 0)
            sp--;
    }
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return (uint32_t)h;
}

/* ==== the table ==== */

static inline uint32_t mask_of(const VmDict *d)
{
    return 2 * d->cap - 1;
}

/* The empty slot where an entry of hash h goes. */
static uint32_t free_slot(const VmDict *d, uint32_t h)
{
    uint32_t m = mask_of(d), i = h & m;
    while (d->index[i])
        i = (i + 1) & m;
    return i;
}

/* The slot that holds entry e. */
static uint32_t slot_of(const VmDict *d, uint32_t e)
{
    uint32_t m = mask_of(d), i = d->hash[e] & m;
    while (d->index[i] != e + 1)
        i = (i + 1) & m;
    return i;
}

/* Gives d room for cap entries (at least its n) and builds its index
 * again from the hashes kept (no key is hashed again). */
static void resize(VmDict *d, uint32_t cap)
{
    d->kv = vm_realloc(d->kv, 2 * (size_t)cap * sizeof(Term));
    d->hash = vm_realloc(d->hash, (size_t)cap * sizeof(uint32_t));
    free(d->index);
    d->index = vm_calloc(2 * (size_t)cap, sizeof(uint32_t));
    d->cap = cap;
    for (uint32_t e = 0; e < d->n; e++)
        d->index[free_slot(d, d->hash[e])] = e + 1;
}

/* Resizes p's table, lending p's queue for a long rebuild (vm/lend.h). */
static void resize_for(Process *p, uint32_t cap)
{
    bool lent = vm_lend_if_long(p, p->dict->n);
    resize(p->dict, cap);
    vm_lend_done(p, lent);
}

/* Entry of `key` (hash h) in d: its number, with *slot the index slot
 * holding it; -1 when absent; -2 when a comparison ran out of steps
 * (the caller raises system_limit). */
static long find(Process *p, const VmDict *d, Term key, uint32_t h, uint32_t *slot)
{
    uint32_t m = mask_of(d);
    for (uint32_t i = h & m;; i = (i + 1) & m) {
        uint32_t e = d->index[i];
        if (!e)
            return -1;
        e--;
        if (d->hash[e] != h)
            continue;
        int c = vm_compare_lend(p, d->kv[2 * (size_t)e], key);
        if (c == TERM_CMP_LIMIT)
            return -2;
        if (c == 0) {
            *slot = i;
            return e;
        }
    }
}

/* Takes slot i out of the index: each entry after it in its probe run
 * whose home is not cyclically in (i, j] moves back into the hole, so a
 * look-up never meets an empty slot before its entry. */
static void index_delete(VmDict *d, uint32_t i)
{
    uint32_t m = mask_of(d);
    for (uint32_t j = (i + 1) & m; d->index[j]; j = (j + 1) & m) {
        uint32_t home = d->hash[d->index[j] - 1] & m;
        bool stays = i <= j ? home > i && home <= j : home > i || home <= j;
        if (!stays) {
            d->index[i] = d->index[j];
            i = j;
        }
    }
    d->index[i] = 0;
}

/* Removes entry e (in slot `slot`): the last entry takes its place. */
static void entry_delete(VmDict *d, uint32_t e, uint32_t slot)
{
    index_delete(d, slot);
    uint32_t last = d->n - 1;
    if (e != last) {
        d->index[slot_of(d, last)] = e + 1;
        d->kv[2 * (size_t)e] = d->kv[2 * (size_t)last];
        d->kv[2 * (size_t)e + 1] = d->kv[2 * (size_t)last + 1];
        d->hash[e] = d->hash[last];
    }
    d->n--;
}

Term *vm_dict_roots(Process *p, size_t *n)
{
    *n = p->dict ? 2 * (size_t)p->dict->n : 0;
    return p->dict ? p->dict->kv : NULL;
}

size_t vm_dict_words(const Process *p)
{
    const VmDict *d = p->dict;
    if (!d)
        return 0;
    size_t bytes = sizeof *d + d->cap * (2 * sizeof(Term) + sizeof(uint32_t)) +
                   2 * (size_t)d->cap * sizeof(uint32_t);
    return (bytes + sizeof(Term) - 1) / sizeof(Term);
}

void vm_dict_free(Process *p)
{
    VmDict *d = p->dict;
    if (!d)
        return;
    free(d->kv);
    free(d->hash);
    free(d->index);
    free(d);
    p->dict = NULL;
}

/* ==== lists of the entries ==== */

/* The list of d's entries e0 (or, with sel, of sel[0..n-1]) on p's
 * heap, each as what `tuple` says: {Key, Value} or the key alone; room
 * for it ensured by the caller after any collection. */
static Term entries_list(Process *p, const uint32_t *sel, size_t n, bool tuple)
{
    const Term *kv = p->dict->kv;
    Term l = TERM_NIL;
    for (size_t i = n; i-- > 0;) {
        size_t e = sel ? sel[i] : i;
        Term x = kv[2 * e];
        if (tuple) {
            Term *t = vm_heap_alloc(p, 3);
            t[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
            t[1] = kv[2 * e];
            t[2] = kv[2 * e + 1];
            x = make_boxed(t);
        }
        Term *c = vm_heap_alloc(p, 2);
        c[0] = x;
        c[1] = l;
        l = make_cons_ptr(c);
    }
    return l;
}

/* The list of entries (sel, n as entries_list; sel NULL: all of them),
 * `per` words each, on p's heap: a long one lends (vm/lend.h); the
 * collection that makes room updates the table's terms first. */
static Term build(Process *p, const uint32_t *sel, size_t n, size_t per)
{
    if (!n)
        return TERM_NIL;
    bool lent = vm_lend_if_long(p, n);
    vm_heap_ensure(p, per * n, NULL, 0);
    Term l = entries_list(p, sel, n, per == 5);
    vm_lend_done(p, lent);
    return l;
}

Term vm_dict_pairs(Process *p)
{
    return build(p, NULL, p->dict ? p->dict->n : 0, 5);
}

Message *vm_dict_copy(const Process *t, size_t max_words, bool *over)
{
    const VmDict *d = t->dict;
    *over = false;
    if (!d || !d->n)
        return NULL;
    /* A cell and a pair's tuple each, then the keys and values flat. */
    size_t words = 5 * (size_t)d->n;
    for (size_t i = 0; i < 2 * (size_t)d->n && words <= max_words; i++) {
        size_t w = term_size_capped(d->kv[i], max_words - words);
        words = w == SIZE_MAX ? SIZE_MAX : words + w;
    }
    if (words > max_words) {
        *over = true;
        return NULL;
    }
    Message *m = vm_malloc(sizeof(Message) + words * sizeof(Term));
    m->next = NULL;
    m->words = words;
    m->sig = 0;
    Term *hp = m->data, *last = NULL;
    m->term = TERM_NIL;
    for (size_t e = 0; e < d->n; e++) {
        Term *tp = hp;
        hp += 3;
        tp[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
        tp[1] = vm_copy_to(&hp, d->kv[2 * e]);
        tp[2] = vm_copy_to(&hp, d->kv[2 * e + 1]);
        Term *c = hp;
        hp += 2;
        c[0] = make_boxed(tp);
        c[1] = TERM_NIL;
        if (last)
            last[1] = make_cons_ptr(c);
        else
            m->term = make_cons_ptr(c);
        last = c;
    }
    return m;
}

/* ==== the natives ==== */

/* Before a list of `words` words: past p's max_heap_size it is killed
 * before anything is built (vm_heap_max_refuses). */
#define ROOM(words) do { if (vm_heap_max_refuses(p, (words))) return TVM_EXCEPTION; } while (0)

/* put(Key, Value): the old value, or undefined. */
NATIVE_FN(dict_put)
{
    SETUP();
    Term k = ARG(0), v = ARG(1);
    uint32_t h = hash_term(k), slot;
    if (!p->dict) {
        p->dict = vm_calloc(1, sizeof(VmDict));
        resize(p->dict, VM_DICT_MIN);
    }
    VmDict *d = p->dict;
    long e = find(p, d, k, h, &slot);
    if (e == -2)
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    if (e >= 0) {
        Term old = d->kv[2 * e + 1];
        d->kv[2 * e + 1] = v;
        RETURN(old);
    }
    if (d->n == d->cap) {
        if (d->cap == DICT_MAX)
            return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
        resize_for(p, 2 * d->cap);
        /* The table counts toward max_heap_size: past it the process
         * dies as this native returns (vm/interp.c). */
        if (p->max_heap)
            vm_heap_check_max(p);
    }
    uint32_t n = d->n++;
    d->kv[2 * (size_t)n] = k;
    d->kv[2 * (size_t)n + 1] = v;
    d->hash[n] = h;
    d->index[free_slot(d, h)] = n + 1;
    RETURN(make_atom(ATOM_UNDEFINED));
}

/* get(Key): its value, or undefined. */
NATIVE_FN(dict_get1)
{
    SETUP();
    Term k = ARG(0);
    uint32_t slot;
    long e = p->dict ? find(p, p->dict, k, hash_term(k), &slot) : -1;
    if (e == -2)
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    RETURN(e >= 0 ? p->dict->kv[2 * e + 1] : make_atom(ATOM_UNDEFINED));
}

/* erase(Key): its old value, or undefined; the key is gone after. */
NATIVE_FN(dict_erase1)
{
    SETUP();
    Term k = ARG(0);
    uint32_t slot;
    VmDict *d = p->dict;
    long e = d ? find(p, d, k, hash_term(k), &slot) : -1;
    if (e == -2)
        return vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    if (e < 0)
        RETURN(make_atom(ATOM_UNDEFINED));
    Term old = d->kv[2 * e + 1];
    entry_delete(d, (uint32_t)e, slot);
    if (d->n == 0)
        vm_dict_free(p);
    else if (d->cap > VM_DICT_MIN && d->n <= d->cap / 4)
        resize_for(p, d->cap / 2);
    RETURN(old);
}

/* get(): [{Key, Value}], in the table's order (the essay above). */
NATIVE_FN(dict_get0)
{
    SETUP();
    ROOM(5 * (size_t)(p->dict ? p->dict->n : 0));
    RETURN(vm_dict_pairs(p));
}

/* erase(): get()'s list; the dictionary is empty after. */
NATIVE_FN(dict_erase0)
{
    SETUP();
    ROOM(5 * (size_t)(p->dict ? p->dict->n : 0));
    Term l = vm_dict_pairs(p);
    vm_dict_free(p);
    RETURN(l);
}

/* get_keys(): the keys, in get()'s order. */
NATIVE_FN(dict_get_keys0)
{
    SETUP();
    size_t n = p->dict ? p->dict->n : 0;
    ROOM(2 * n);
    RETURN(build(p, NULL, n, 2));
}

/* get_keys(Value): the keys whose value is exactly Value (=:=), in
 * get()'s order.  The entries are chosen first, with no allocation
 * between the comparisons, then listed. */
NATIVE_FN(dict_get_keys1)
{
    SETUP();
    Term v = ARG(0);
    size_t n = p->dict ? p->dict->n : 0, m = 0;
    if (!n)
        RETURN(TERM_NIL);
    uint32_t *sel = vm_malloc(n * sizeof *sel);
    bool lent = vm_lend_if_long(p, n);
    int c = 0;
    for (uint32_t e = 0; e < n && c != TERM_CMP_LIMIT; e++) {
        c = vm_compare_lend(p, p->dict->kv[2 * (size_t)e + 1], v);
        if (c == 0)
            sel[m++] = e;
    }
    vm_lend_done(p, lent);
    tvm_status st = TVM_OK;
    if (c == TERM_CMP_LIMIT)
        st = vm_bif_error(p, make_atom(ATOM_SYSTEM_LIMIT));
    else if (vm_heap_max_refuses(p, 2 * m))
        st = TVM_EXCEPTION;
    else
        *result = vm_root_push(p, build(p, sel, m, 2));
    free(sel);
    return st;
}

static const VmNativeDef natives[] = {
    { "erlang", "put", 2, dict_put },
    { "erlang", "get", 1, dict_get1 },
    { "erlang", "get", 0, dict_get0 },
    { "erlang", "get_keys", 0, dict_get_keys0 },
    { "erlang", "get_keys", 1, dict_get_keys1 },
    { "erlang", "erase", 1, dict_erase1 },
    { "erlang", "erase", 0, dict_erase0 },
};

VmNativeTable vm_dict_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
