/*
 * profile/pf_agg.c - aggregation: the profiler's thread drains the
 * schedulers' rings, joins each record's native and VM frames, names
 * them and adds the stack to the profile.
 *
 * All of it runs on the aggregator's thread (or on the thread that stops
 * the session, after the aggregator ended), never on a scheduler: joining
 * is stacks/'s st_join, names come from stacks/'s symbol cache
 * (st_sym_lookup: not for a signal handler, fine here), and the profile's
 * tables grow with malloc.  S->lock is held while records are added, so a
 * writer (tvm_profile_write) sees whole samples.
 *
 * Frames are interned: a frame is (VM function, line), (C function: the
 * start address of its symbol), a process's root (pid) or a scheduler's
 * root (its id); each gets an id and a name once.  Native return
 * addresses are cached (ip -> frame id), so a symbol is looked up once per
 * distinct address, not per sample.  A stack is the list of frame ids,
 * root first, and is added to a table keyed by that list.
 *
 * VM frames are copied by the handler as raw pointers; one copied in the
 * instant its frame was being pushed may hold anything.  So a function
 * pointer is named only if it is one the VM has: a function of a module
 * (every version is kept while the VM lives, vm/module.h) or a native.
 * The set of them is rebuilt (under the VM's code_lock) when a pointer is
 * not in it, at most once per drain; a pointer still not in it becomes an
 * "[unknown]" frame.
 */
#define _GNU_SOURCE
#include "profile/pf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stacks/st_sym.h"
#include "vm/common.h"
#include "vm/print.h"
#include "vm/strbuf.h"
#include "vm/vm.h"

/* How often the aggregator drains the rings: CPU samples come at most at
 * the kernel's tick rate (a ring holds 100 ms of them at the rate asked
 * for), waits and allocations can come much faster.  Each wake-up costs
 * the machine tens of microseconds (measured: 350 us of CPU a second at
 * 10 ms), and the profiled program a little of its caches. */
#define PF_DRAIN_CPU_MS 50
#define PF_DRAIN_MS 10

/* ==== hashing ==== */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* ==== the set of functions the VM has ==== */

static bool fns_has(const PfData *d, const FuncInfo *fn)
{
    if (!d->fns_cap)
        return false;
    size_t mask = d->fns_cap - 1;
    for (size_t i = mix((uintptr_t)fn) & mask;; i = (i + 1) & mask) {
        if (d->fns[i] == fn)
            return true;
        if (!d->fns[i])
            return false;
    }
}

static void fns_add(PfData *d, const FuncInfo *fn)
{
    if ((d->fns_used + 1) * 2 > d->fns_cap) {
        size_t cap = d->fns_cap ? d->fns_cap * 2 : 1024;
        const FuncInfo **old = d->fns;
        size_t ocap = d->fns_cap;
        d->fns = vm_calloc(cap, sizeof *d->fns);
        d->fns_cap = cap;
        d->fns_used = 0;
        for (size_t i = 0; i < ocap; i++)
            if (old[i])
                fns_add(d, old[i]);
        free(old);
    }
    size_t mask = d->fns_cap - 1;
    for (size_t i = mix((uintptr_t)fn) & mask;; i = (i + 1) & mask) {
        if (d->fns[i] == fn)
            return;
        if (!d->fns[i]) {
            d->fns[i] = fn;
            d->fns_used++;
            return;
        }
    }
}

static void fns_rebuild(PfData *d, tvm_vm *vm)
{
    pthread_mutex_lock(&vm->code_lock);
    for (uint32_t i = 0; i < vm->nmodules; i++)
        for (const Module *m = vm->modules[i]; m; m = m->older)
            for (uint32_t k = 0; k < m->nfuncs; k++)
                fns_add(d, m->funcs[k]);
    for (uint32_t i = 0; i < vm->nnatives; i++)
        fns_add(d, vm->natives[i]);
    pthread_mutex_unlock(&vm->code_lock);
}

/* ==== frames ==== */

static uint64_t frame_hash(PfFrameType type, uint64_t a, uint32_t line)
{
    return mix(a * 31 + (uint64_t)type * 0x9E3779B97F4A7C15ull + line);
}

static uint64_t frame_a(const PfFrame *f)
{
    return f->type == PF_F_VM ? (uintptr_t)f->fn : f->key;
}

static void index_grow(PfIndex *ix, size_t n, uint64_t (*hash)(const PfData *, uint32_t),
                       const PfData *d)
{
    if ((ix->used + 1) * 2 <= ix->cap)
        return;
    size_t cap = ix->cap ? ix->cap * 2 : 1024;
    free(ix->slots);
    ix->slots = vm_calloc(cap, sizeof *ix->slots);
    ix->cap = cap;
    for (uint32_t id = 0; id < n; id++) {
        size_t mask = cap - 1;
        size_t i = hash(d, id) & mask;
        while (ix->slots[i])
            i = (i + 1) & mask;
        ix->slots[i] = id + 1;
    }
    ix->used = n;
}

static uint64_t frame_hash_of(const PfData *d, uint32_t id)
{
    const PfFrame *f = &d->frames[id];
    return frame_hash(f->type, frame_a(f), f->line);
}

/* The id of a frame, interned with `name` (taken) if new. */
static uint32_t intern(PfData *d, PfFrame proto)
{
    uint64_t a = frame_a(&proto);
    uint64_t h = frame_hash(proto.type, a, proto.line);
    if (d->frame_ix.cap) {
        size_t mask = d->frame_ix.cap - 1;
        for (size_t i = h & mask; d->frame_ix.slots[i]; i = (i + 1) & mask) {
            const PfFrame *f = &d->frames[d->frame_ix.slots[i] - 1];
            if (f->type == proto.type && frame_a(f) == a && f->line == proto.line) {
                free(proto.name);
                free(proto.file);
                return d->frame_ix.slots[i] - 1;
            }
        }
    }
    index_grow(&d->frame_ix, d->nframes, frame_hash_of, d);
    if (d->nframes == d->frames_cap) {
        d->frames_cap = d->frames_cap ? d->frames_cap * 2 : 256;
        d->frames = vm_realloc(d->frames, d->frames_cap * sizeof *d->frames);
    }
    uint32_t id = (uint32_t)d->nframes++;
    proto.func = id;
    d->frames[id] = proto;
    size_t mask = d->frame_ix.cap - 1;
    size_t i = h & mask;
    while (d->frame_ix.slots[i])
        i = (i + 1) & mask;
    d->frame_ix.slots[i] = id + 1;
    d->frame_ix.used++;
    return id;
}

static char *mfa_name(const FuncInfo *fn)
{
    StrBuf sb;
    sb_init(&sb);
    vm_print_mfa(&sb, fn->mod, fn->name, fn->arity);
    return sb.s;
}

/* A VM frame: fn (a function the VM has) at `line`. */
static uint32_t vm_frame(PfData *d, const FuncInfo *fn, uint32_t line)
{
    fn = vm_func_real(fn);
    PfFrame f = { .type = PF_F_VM, .fn = fn, .line = line,
                  .file = fn->file ? vm_strndup(fn->file, strlen(fn->file)) : NULL,
                  .def_line = fn->nlines ? fn->lines[0].line : 0,
                  .is_native_fn = fn->native != NULL };
    uint32_t func = line ? vm_frame(d, fn, 0) : UINT32_MAX;
    f.name = mfa_name(fn);
    uint32_t id = intern(d, f);
    if (func != UINT32_MAX)
        d->frames[id].func = func;
    return id;
}

static uint32_t named_frame(PfData *d, PfFrameType type, uint64_t key, const char *fmt,
                            unsigned long long v)
{
    char buf[64];
    snprintf(buf, sizeof buf, fmt, v);
    return intern(d, (PfFrame){ .type = type, .key = key, .name = vm_strndup(buf, strlen(buf)) });
}

/* The object holding tracevm's code: its frames carry no object name. */
static const char *main_object(void)
{
    static const char *obj;
    static bool done;
    if (!done) {
        StSym sym;
        if (st_sym_lookup((uintptr_t)&main_object, &sym))
            obj = sym.object;
        done = true;
    }
    return obj;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* A native frame at ip (a return address unless it is the innermost). */
static uint32_t native_frame(PfData *d, uintptr_t ip, bool ret_addr)
{
    uintptr_t a = ip - (ret_addr ? 1 : 0);
    if (d->ip_cap) {
        size_t mask = d->ip_cap - 1;
        for (size_t i = mix(a) & mask; d->ip_keys[i]; i = (i + 1) & mask)
            if (d->ip_keys[i] == a)
                return d->ip_ids[i];
    }
    StSym sym;
    uint32_t id;
    if (st_sym_lookup(a, &sym) && sym.name) {
        StrBuf sb;
        sb_init(&sb);
        sb_puts(&sb, sym.name);
        if (sym.object && sym.object != main_object() &&
            strcmp(base_name(sym.object), base_name(main_object() ? main_object() : "")) != 0)
            sb_printf(&sb, " (%s)", base_name(sym.object));
        id = intern(d, (PfFrame){ .type = PF_F_NATIVE, .key = a - sym.offset, .name = sb.s,
                                  .file = sym.object ? vm_strndup(sym.object, strlen(sym.object))
                                                     : NULL });
    } else if (sym.object) {
        /* No symbol: one frame per object, named after it. */
        StrBuf sb;
        sb_init(&sb);
        sb_printf(&sb, "[%s]", base_name(sym.object));
        id = intern(d, (PfFrame){ .type = PF_F_NATIVE, .key = (uintptr_t)sym.object | 1,
                                  .name = sb.s,
                                  .file = vm_strndup(sym.object, strlen(sym.object)) });
    } else {
        id = named_frame(d, PF_F_UNKNOWN, 0, "[unknown]", 0);
    }
    if ((d->ip_used + 1) * 2 > d->ip_cap) {
        size_t ocap = d->ip_cap, cap = ocap ? ocap * 2 : 1024;
        uint64_t *ok = d->ip_keys;
        uint32_t *oi = d->ip_ids;
        d->ip_keys = vm_calloc(cap, sizeof *d->ip_keys);
        d->ip_ids = vm_calloc(cap, sizeof *d->ip_ids);
        d->ip_cap = cap;
        for (size_t j = 0; j < ocap; j++) {
            if (!ok[j])
                continue;
            size_t i = mix(ok[j]) & (cap - 1);
            while (d->ip_keys[i])
                i = (i + 1) & (cap - 1);
            d->ip_keys[i] = ok[j];
            d->ip_ids[i] = oi[j];
        }
        free(ok);
        free(oi);
    }
    size_t mask = d->ip_cap - 1;
    size_t i = mix(a) & mask;
    while (d->ip_keys[i])
        i = (i + 1) & mask;
    d->ip_keys[i] = a;
    d->ip_ids[i] = id;
    d->ip_used++;
    return id;
}

void pf_frame_label(const PfFrame *f, bool lines, StrBuf *sb)
{
    sb_puts(sb, f->name);
    if (f->type != PF_F_VM)
        return;
    if (f->is_native_fn) {
        sb_puts(sb, " (native)");
        return;
    }
    uint32_t line = lines && f->line ? f->line : f->def_line;
    if (f->file && line)
        sb_printf(sb, " (%s:%u)", f->file, line);
    else if (f->file)
        sb_printf(sb, " (%s)", f->file);
}

/* ==== stacks ==== */

static uint64_t ids_hash(const uint32_t *ids, uint32_t n)
{
    uint64_t h = 0x84222325cbf29ce4ull ^ n;
    for (uint32_t i = 0; i < n; i++)
        h = mix(h ^ ids[i]);
    return h;
}

static uint64_t stack_hash_of(const PfData *d, uint32_t id)
{
    return d->stacks[id]->hash;
}

static void add_stack(PfData *d, const uint32_t *ids, uint32_t n, uint64_t weight)
{
    uint32_t h = (uint32_t)ids_hash(ids, n);
    if (d->stack_ix.cap) {
        size_t mask = d->stack_ix.cap - 1;
        for (size_t i = h & mask; d->stack_ix.slots[i]; i = (i + 1) & mask) {
            PfStack *s = d->stacks[d->stack_ix.slots[i] - 1];
            if (s->hash == h && s->n == n && !memcmp(s->ids, ids, n * sizeof *ids)) {
                s->weight += weight;
                s->count++;
                return;
            }
        }
    }
    index_grow(&d->stack_ix, d->nstacks, stack_hash_of, d);
    if (d->nstacks == d->stacks_cap) {
        d->stacks_cap = d->stacks_cap ? d->stacks_cap * 2 : 256;
        d->stacks = vm_realloc(d->stacks, d->stacks_cap * sizeof *d->stacks);
    }
    PfStack *s = vm_malloc(sizeof *s + n * sizeof *ids);
    s->weight = weight;
    s->count = 1;
    s->n = n;
    s->hash = h;
    memcpy(s->ids, ids, n * sizeof *ids);
    uint32_t id = (uint32_t)d->nstacks++;
    d->stacks[id] = s;
    size_t mask = d->stack_ix.cap - 1;
    size_t i = h & mask;
    while (d->stack_ix.slots[i])
        i = (i + 1) & mask;
    d->stack_ix.slots[i] = id + 1;
    d->stack_ix.used++;
}

/* The aggregator's scratch: one record as a StStack, its join, its ids. */
typedef struct Scratch {
    StStack st;
    StFrame fr[ST_MAX_NATIVE + ST_MAX_VM];
    uint32_t ids[ST_MAX_NATIVE + ST_MAX_VM + 1];
    bool rebuilt;              /* the function set was rebuilt in this drain */
} Scratch;

/* A frame stands for no function of the VM: it is named [unknown]. */
static const FuncInfo unknown_fn;

static void add_record(tvm_profile *S, const PfRec *rec, Scratch *x)
{
    PfData *d = &S->data;
    StStack *st = &x->st;
    st->nnative = rec->nnative > ST_MAX_NATIVE ? ST_MAX_NATIVE : rec->nnative;
    st->nvm = rec->nvm > ST_MAX_VM ? ST_MAX_VM : rec->nvm;
    st->walk_broken = rec->broken;
    st->vm_dropped = rec->cut;
    st->result = ST_R_OK;
    memcpy(st->native, rec + 1, st->nnative * sizeof(StNative));
    memcpy(st->vm, (const char *)(rec + 1) + rec->nnative * sizeof(StNative),
           st->nvm * sizeof(StVm));
    for (uint32_t i = 0; i < st->nvm; i++) {
        StVm *v = &st->vm[i];
        if (!v->fn || FRAME_KIND(v->kind) == FRAME_ENTRY)
            continue;
        if (!fns_has(d, v->fn) && !x->rebuilt) {
            fns_rebuild(d, S->vm);
            x->rebuilt = true;
        }
        if (!fns_has(d, v->fn))
            v->fn = &unknown_fn;
    }
    bool truncated;
    size_t n = st_join(st, x->fr, ST_MAX_NATIVE + ST_MAX_VM, &truncated);
    uint32_t k = 0;
    x->ids[k++] = rec->what == PF_WHAT_PROCESS
                      ? named_frame(d, PF_F_PROCESS, rec->pid, "<0.%llu.0>", rec->pid)
                      : named_frame(d, PF_F_SCHED, rec->sched, "[scheduler %llu]", rec->sched);
    for (size_t i = n; i-- > 0;) {
        const StFrame *f = &x->fr[i];
        if (f->type == ST_F_TRACE)
            continue;          /* the breakpoints' bookkeeping, not a call */
        if (f->type == ST_F_CUT)
            /* a stack deeper than a sample keeps: its oldest VM frames
             * were left out here (the count differs from sample to
             * sample, so it is not in the name) */
            x->ids[k++] = named_frame(d, PF_F_UNKNOWN, 1, "[truncated]", 0);
        else if (f->type == ST_F_NATIVE)
            x->ids[k++] = native_frame(d, f->ip, i > 0);
        else if (f->fn == &unknown_fn)
            x->ids[k++] = named_frame(d, PF_F_UNKNOWN, 0, "[unknown]", 0);
        else
            x->ids[k++] = vm_frame(d, f->fn, f->line);
    }
    add_stack(d, x->ids, k, rec->weight);
    d->samples++;
    d->weight += rec->weight;
}

/* Adds every published record of r; returns how many. */
static size_t drain_ring(tvm_profile *S, PfRing *r, Scratch *x)
{
    if (!r->buf)
        return 0;
    size_t n = 0;
    uint64_t tail = vm_atomic_load_relaxed(&r->tail);
    /* [PR1'] acquire: the records' bytes before the head that shows them. */
    uint64_t head = vm_atomic_load_acquire(&r->head);
    while (tail < head) {
        size_t off = (size_t)(tail % r->cap);
        const PfRec *rec = (const PfRec *)(r->buf + off);
        if (rec->size == 0) {
            tail += r->cap - off;
            continue;
        }
        add_record(S, rec, x);
        tail += rec->size;
        n++;
    }
    /* [PR2] release: done reading; the producer may reuse the space. */
    vm_atomic_store_release(&r->tail, tail);
    return n;
}

void pf_drain(tvm_profile *S)
{
    Scratch *x = vm_malloc(sizeof *x);
    x->rebuilt = false;
    pthread_mutex_lock(&S->lock);
    for (int i = 0; i < S->n; i++) {
        drain_ring(S, &S->sched[i].sig, x);
        drain_ring(S, &S->sched[i].thr, x);
    }
    pthread_mutex_unlock(&S->lock);
    free(x);
}

void *pf_agg_main(void *arg)
{
    tvm_profile *S = arg;
    for (;;) {
        /* Acquire: pf_stop's release after every producer finished. */
        bool last = vm_atomic_load_acquire(&S->stopping);
        pf_drain(S);
        if (last)
            break;
        long ms = S->kind == TVM_PROFILE_CPU ? PF_DRAIN_CPU_MS : PF_DRAIN_MS;
        struct timespec ts = { 0, ms * 1000000L };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

void pf_data_free(PfData *d)
{
    for (size_t i = 0; i < d->nframes; i++) {
        free(d->frames[i].name);
        free(d->frames[i].file);
    }
    free(d->frames);
    free(d->frame_ix.slots);
    for (size_t i = 0; i < d->nstacks; i++)
        free(d->stacks[i]);
    free(d->stacks);
    free(d->stack_ix.slots);
    free(d->ip_keys);
    free(d->ip_ids);
    free(d->fns);
    memset(d, 0, sizeof *d);
}
