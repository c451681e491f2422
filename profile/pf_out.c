/*
 * profile/pf_out.c - the profile as files: the call tree the writers
 * share, folded stacks, speedscope's JSON, and pprof's profile.proto
 * (its protobuf encoding written here, gzipped with zlib).
 *
 * The tree is built from the aggregated stacks after the writer's two
 * choices: merged (the process roots left out, so identical stacks of
 * different processes add up) or not, and VM frames by line or by
 * function.  Children are sorted by label, so a profile's text does not
 * depend on the order samples came in.
 */
#include "profile/pf_internal.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "vm/common.h"
#include "vm/strbuf.h"

/* ==== the tree ==== */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

uint32_t pf_view_frame(const PfData *d, uint32_t id, bool lines)
{
    const PfFrame *f = &d->frames[id];
    return !lines && f->type == PF_F_VM ? f->func : id;
}

static uint64_t node_key(uint32_t parent, uint32_t frame)
{
    return mix((uint64_t)parent << 32 | frame);
}

static uint32_t node_new(PfTree *t, uint32_t parent, uint32_t frame)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 256;
        t->nodes = vm_realloc(t->nodes, t->cap * sizeof *t->nodes);
    }
    uint32_t id = (uint32_t)t->n++;
    PfNode *nd = &t->nodes[id];
    memset(nd, 0, sizeof *nd);
    nd->frame = frame;
    nd->parent = parent;
    if (frame != UINT32_MAX) {
        PfNode *p = &t->nodes[parent];
        nd->depth = p->depth + 1;
        if (nd->depth > t->max_depth)
            t->max_depth = nd->depth;
        if (p->nkids == p->kids_cap) {
            p->kids_cap = p->kids_cap ? p->kids_cap * 2 : 4;
            p->kids = vm_realloc(p->kids, p->kids_cap * sizeof *p->kids);
        }
        p->kids[p->nkids++] = id;
    }
    return id;
}

/* The child of parent for frame, made if new. */
static uint32_t child(PfTree *t, uint32_t parent, uint32_t frame)
{
    PfIndex *ix = &t->ix;
    uint64_t h = node_key(parent, frame);
    if (ix->cap) {
        size_t mask = ix->cap - 1;
        for (size_t i = h & mask; ix->slots[i]; i = (i + 1) & mask) {
            const PfNode *nd = &t->nodes[ix->slots[i] - 1];
            if (nd->parent == parent && nd->frame == frame)
                return ix->slots[i] - 1;
        }
    }
    if ((ix->used + 1) * 2 > ix->cap) {
        size_t cap = ix->cap ? ix->cap * 2 : 1024;
        free(ix->slots);
        ix->slots = vm_calloc(cap, sizeof *ix->slots);
        ix->cap = cap;
        for (uint32_t id = 1; id < t->n; id++) {
            size_t i = node_key(t->nodes[id].parent, t->nodes[id].frame) & (cap - 1);
            while (ix->slots[i])
                i = (i + 1) & (cap - 1);
            ix->slots[i] = id + 1;
        }
    }
    uint32_t id = node_new(t, parent, frame);
    size_t mask = ix->cap - 1;
    size_t i = h & mask;
    while (ix->slots[i])
        i = (i + 1) & mask;
    ix->slots[i] = id + 1;
    ix->used = t->n - 1;
    return id;
}

const char *pf_tree_label(PfTree *t, uint32_t frame)
{
    if (!t->labels[frame]) {
        StrBuf sb;
        sb_init(&sb);
        pf_frame_label(&t->d->frames[frame], t->lines, &sb);
        for (char *c = sb.s; *c; c++)
            if (*c == ';')
                *c = ',';
            else if (*c == '\n' || *c == '\r')
                *c = ' ';
        t->labels[frame] = sb.s;
    }
    return t->labels[frame];
}

static PfTree *sort_tree;      /* qsort's context (pf_tree_build holds S->lock) */

static int by_label(const void *a, const void *b)
{
    const PfNode *x = &sort_tree->nodes[*(const uint32_t *)a];
    const PfNode *y = &sort_tree->nodes[*(const uint32_t *)b];
    return strcmp(pf_tree_label(sort_tree, x->frame), pf_tree_label(sort_tree, y->frame));
}

static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;

void pf_tree_build(PfTree *t, const PfData *d, bool lines, bool merge)
{
    memset(t, 0, sizeof *t);
    t->d = d;
    t->lines = lines;
    t->merge = merge;
    t->labels = vm_calloc(d->nframes ? d->nframes : 1, sizeof *t->labels);
    node_new(t, 0, UINT32_MAX);
    for (size_t i = 0; i < d->nstacks; i++) {
        const PfStack *s = d->stacks[i];
        uint32_t k = 0, at = 0;
        if (merge && s->n > 0 && d->frames[s->ids[0]].type == PF_F_PROCESS)
            k = 1;
        t->nodes[0].total += s->weight;
        for (; k < s->n; k++) {
            at = child(t, at, pf_view_frame(d, s->ids[k], lines));
            t->nodes[at].total += s->weight;
        }
        t->nodes[at].self += s->weight;
    }
    pthread_mutex_lock(&sort_lock);
    sort_tree = t;
    for (size_t i = 0; i < t->n; i++)
        if (t->nodes[i].nkids > 1)
            qsort(t->nodes[i].kids, t->nodes[i].nkids, sizeof(uint32_t), by_label);
    sort_tree = NULL;
    pthread_mutex_unlock(&sort_lock);
}

void pf_tree_free(PfTree *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->nodes[i].kids);
    free(t->nodes);
    free(t->ix.slots);
    for (size_t i = 0; t->labels && i < t->d->nframes; i++)
        free(t->labels[i]);
    free(t->labels);
    memset(t, 0, sizeof *t);
}

const char *pf_unit(const tvm_profile *S)
{
    return S->kind == TVM_PROFILE_CPU ? "samples" : S->kind == TVM_PROFILE_OFF ? "ns" : "bytes";
}

/* ==== folded stacks ==== */

static void folded_node(PfTree *t, uint32_t id, StrBuf *path, StrBuf *out)
{
    const PfNode *nd = &t->nodes[id];
    size_t mark = path->len;
    if (nd->frame != UINT32_MAX) {
        if (path->len)
            sb_putc(path, ';');
        sb_puts(path, pf_tree_label(t, nd->frame));
        if (nd->self) {
            sb_put(out, path->s, path->len);
            sb_printf(out, " %llu\n", (unsigned long long)nd->self);
        }
    }
    for (uint32_t i = 0; i < nd->nkids; i++)
        folded_node(t, nd->kids[i], path, out);
    path->len = mark;
    if (path->s)
        path->s[mark] = '\0';
}

void pf_write_folded(PfTree *t, StrBuf *out)
{
    StrBuf path;
    sb_init(&path);
    folded_node(t, 0, &path, out);
    sb_free(&path);
}

/* ==== speedscope ==== */

static void json_str(StrBuf *sb, const char *s)
{
    sb_putc(sb, '"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            sb_printf(sb, "\\%c", *c);
        else if (*c < 0x20)
            sb_printf(sb, "\\u%04x", *c);
        else
            sb_putc(sb, (char)*c);
    }
    sb_putc(sb, '"');
}

static void speedscope_node(PfTree *t, uint32_t id, uint32_t *path, uint32_t depth,
                            const uint32_t *index, double scale, StrBuf *samples,
                            StrBuf *weights, bool *first)
{
    const PfNode *nd = &t->nodes[id];
    if (nd->frame != UINT32_MAX) {
        path[depth++] = index[nd->frame];
        if (nd->self) {
            sb_puts(samples, *first ? "[" : ",[");
            for (uint32_t i = 0; i < depth; i++)
                sb_printf(samples, i ? ",%u" : "%u", path[i]);
            sb_putc(samples, ']');
            sb_printf(weights, *first ? "%.0f" : ",%.0f", (double)nd->self * scale);
            *first = false;
        }
    }
    for (uint32_t i = 0; i < nd->nkids; i++)
        speedscope_node(t, nd->kids[i], path, depth, index, scale, samples, weights, first);
}

void pf_write_speedscope(tvm_profile *S, PfTree *t, StrBuf *out)
{
    const PfData *d = t->d;
    /* Frames in the order of first use, each once. */
    uint32_t *index = vm_malloc((d->nframes ? d->nframes : 1) * sizeof *index);
    for (size_t i = 0; i < d->nframes; i++)
        index[i] = UINT32_MAX;
    sb_puts(out, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
                 "\"exporter\":\"tracevm\",\"shared\":{\"frames\":[");
    uint32_t nf = 0;
    for (size_t i = 1; i < t->n; i++) {
        uint32_t f = t->nodes[i].frame;
        if (index[f] != UINT32_MAX)
            continue;
        index[f] = nf;
        const PfFrame *fr = &d->frames[f];
        sb_puts(out, nf++ ? ",{\"name\":" : "{\"name\":");
        if (fr->type == PF_F_VM && fr->is_native_fn) {
            StrBuf nm;
            sb_init(&nm);
            sb_printf(&nm, "%s (native)", fr->name);
            json_str(out, nm.s);
            sb_free(&nm);
        } else {
            json_str(out, fr->name);
        }
        if (fr->file) {
            sb_puts(out, ",\"file\":");
            json_str(out, fr->file);
        }
        uint32_t line = fr->type == PF_F_VM ? (t->lines && fr->line ? fr->line : fr->def_line) : 0;
        if (line)
            sb_printf(out, ",\"line\":%u", line);
        sb_putc(out, '}');
    }
    /* CPU samples are shown as time: each stands for a period of CPU. */
    double scale = S->kind == TVM_PROFILE_CPU ? 1e9 / (double)S->hz : 1.0;
    const char *unit = S->kind == TVM_PROFILE_ALLOC ? "bytes" : "nanoseconds";
    const char *what = S->kind == TVM_PROFILE_CPU   ? "on-CPU"
                       : S->kind == TVM_PROFILE_OFF ? "off-CPU"
                                                    : "allocation";
    sb_printf(out, "]},\"profiles\":[{\"type\":\"sampled\",\"name\":\"tracevm %s\","
                   "\"unit\":\"%s\",\"startValue\":0,\"endValue\":%.0f,\"samples\":[",
              what, unit, (double)t->nodes[0].total * scale);
    StrBuf weights;
    sb_init(&weights);
    uint32_t *path = vm_malloc((t->max_depth + 1) * sizeof *path);
    bool first = true;
    speedscope_node(t, 0, path, 0, index, scale, out, &weights, &first);
    sb_puts(out, "],\"weights\":[");
    if (weights.len)
        sb_put(out, weights.s, weights.len);
    sb_printf(out, "]}],\"name\":\"tracevm %s profile\",\"activeProfileIndex\":0}\n", what);
    sb_free(&weights);
    free(path);
    free(index);
}

/* ==== pprof: profile.proto ==== */

/* Protobuf's wire format: varints, and length-delimited fields written
 * into a buffer of their own and then copied with their length. */
static void pb_varint(StrBuf *b, uint64_t v)
{
    while (v >= 0x80) {
        sb_putc(b, (char)(v | 0x80));
        v >>= 7;
    }
    sb_putc(b, (char)v);
}

static void pb_key(StrBuf *b, unsigned field, unsigned wire)
{
    pb_varint(b, (uint64_t)field << 3 | wire);
}

static void pb_int(StrBuf *b, unsigned field, uint64_t v)
{
    if (v == 0)
        return;                /* proto3: a zero is not written */
    pb_key(b, field, 0);
    pb_varint(b, v);
}

static void pb_bytes(StrBuf *b, unsigned field, const char *s, size_t n)
{
    pb_key(b, field, 2);
    pb_varint(b, n);
    sb_put(b, s, n);
}

static void pb_msg(StrBuf *b, unsigned field, StrBuf *m)
{
    pb_bytes(b, field, m->s ? m->s : "", m->len);
    m->len = 0;
}

/* The string table: strings and their indices (0 is ""). */
typedef struct PbStrings {
    StrBuf table;              /* the encoded field 6 entries */
    char **s;
    size_t n, cap;
    PfIndex ix;
} PbStrings;

static uint64_t str_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return mix(h);
}

static uint64_t pb_str(PbStrings *st, const char *s)
{
    if (!s)
        s = "";
    uint64_t h = str_hash(s);
    if (st->ix.cap) {
        for (size_t i = h & (st->ix.cap - 1); st->ix.slots[i]; i = (i + 1) & (st->ix.cap - 1))
            if (!strcmp(st->s[st->ix.slots[i] - 1], s))
                return st->ix.slots[i] - 1;
    }
    if ((st->ix.used + 1) * 2 > st->ix.cap) {
        size_t cap = st->ix.cap ? st->ix.cap * 2 : 256;
        free(st->ix.slots);
        st->ix.slots = vm_calloc(cap, sizeof *st->ix.slots);
        st->ix.cap = cap;
        for (size_t k = 0; k < st->n; k++) {
            size_t i = str_hash(st->s[k]) & (cap - 1);
            while (st->ix.slots[i])
                i = (i + 1) & (cap - 1);
            st->ix.slots[i] = (uint32_t)k + 1;
        }
    }
    if (st->n == st->cap) {
        st->cap = st->cap ? st->cap * 2 : 256;
        st->s = vm_realloc(st->s, st->cap * sizeof *st->s);
    }
    st->s[st->n] = vm_strndup(s, strlen(s));
    size_t i = h & (st->ix.cap - 1);
    while (st->ix.slots[i])
        i = (i + 1) & (st->ix.cap - 1);
    st->ix.slots[i] = (uint32_t)st->n + 1;
    st->ix.used++;
    pb_bytes(&st->table, 6, s, strlen(s));
    return st->n++;
}

static void value_type(StrBuf *out, unsigned field, PbStrings *st, const char *type,
                       const char *unit)
{
    StrBuf m;
    sb_init(&m);
    pb_int(&m, 1, pb_str(st, type));
    pb_int(&m, 2, pb_str(st, unit));
    pb_msg(out, field, &m);
    sb_free(&m);
}

/* Gzips [in, in + n) into out (a gzip member: zlib's deflate with the
 * gzip wrapper, windowBits 15 + 16). */
static bool gzip(const char *in, size_t n, StrBuf *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        return false;
    size_t bound = deflateBound(&z, (uLong)n) + 64;
    sb_grow(out, bound);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)out->s + out->len;
    z.avail_out = (uInt)bound;
    int rc = deflate(&z, Z_FINISH);
    out->len += bound - z.avail_out;
    deflateEnd(&z);
    return rc == Z_STREAM_END;
}

bool pf_write_pprof(tvm_profile *S, bool lines, bool merge, StrBuf *out)
{
    const PfData *d = &S->data;
    StrBuf pb, m, sub;
    sb_init(&pb);
    sb_init(&m);
    sb_init(&sub);
    PbStrings st;
    memset(&st, 0, sizeof st);
    sb_init(&st.table);
    pb_str(&st, "");

    /* Sample types, and the period for CPU. */
    bool cpu = S->kind == TVM_PROFILE_CPU;
    uint64_t period = cpu ? 1000000000ull / S->hz : 0;
    value_type(&pb, 1, &st, "samples", "count");
    if (cpu)
        value_type(&pb, 1, &st, "cpu", "nanoseconds");
    else if (S->kind == TVM_PROFILE_OFF)
        value_type(&pb, 1, &st, "off_cpu", "nanoseconds");
    else
        value_type(&pb, 1, &st, "alloc_space", "bytes");

    /* Samples: locations leaf first, values, and the pid as a label. */
    bool *used = vm_calloc(d->nframes ? d->nframes : 1, sizeof *used);
    uint64_t pid_key = pb_str(&st, "pid");
    for (size_t i = 0; i < d->nstacks; i++) {
        const PfStack *s = d->stacks[i];
        uint32_t first = merge && s->n && d->frames[s->ids[0]].type == PF_F_PROCESS ? 1 : 0;
        for (uint32_t k = s->n; k-- > first;) {
            uint32_t f = pf_view_frame(d, s->ids[k], lines);
            pb_varint(&sub, f + 1);
            used[f] = true;
        }
        pb_msg(&m, 1, &sub);
        pb_varint(&sub, s->count);
        pb_varint(&sub, cpu ? s->weight * period : s->weight);
        pb_msg(&m, 2, &sub);
        if (s->n && d->frames[s->ids[0]].type == PF_F_PROCESS) {
            pb_int(&sub, 1, pid_key);
            pb_int(&sub, 3, d->frames[s->ids[0]].key);
            pb_msg(&m, 3, &sub);
        }
        pb_msg(&pb, 2, &m);
    }

    /* Locations (a frame: one line of one function), then functions. */
    bool *fused = vm_calloc(d->nframes ? d->nframes : 1, sizeof *fused);
    for (uint32_t f = 0; f < d->nframes; f++) {
        if (!used[f])
            continue;
        const PfFrame *fr = &d->frames[f];
        uint32_t func = fr->type == PF_F_VM ? fr->func : f;
        fused[func] = true;
        pb_int(&m, 1, f + 1);
        pb_int(&sub, 1, func + 1);
        uint32_t line = fr->type == PF_F_VM ? (fr->line ? fr->line : fr->def_line) : 0;
        pb_int(&sub, 2, line);
        pb_msg(&m, 4, &sub);
        pb_msg(&pb, 4, &m);
    }
    for (uint32_t f = 0; f < d->nframes; f++) {
        if (!fused[f])
            continue;
        const PfFrame *fr = &d->frames[f];
        StrBuf name;
        sb_init(&name);
        /* pprof shortens names by dropping what is in angle brackets
         * (C++ templates): a process is "process 0.N.0" there. */
        if (fr->type == PF_F_PROCESS)
            sb_printf(&name, "process 0.%llu.0", (unsigned long long)fr->key);
        else
            sb_puts(&name, fr->name);
        if (fr->type == PF_F_VM && fr->is_native_fn)
            sb_puts(&name, " (native)");
        pb_int(&m, 1, f + 1);
        pb_int(&m, 2, pb_str(&st, name.s));
        pb_int(&m, 3, pb_str(&st, name.s));
        pb_int(&m, 4, pb_str(&st, fr->file));
        pb_int(&m, 5, fr->type == PF_F_VM ? fr->def_line : 0);
        pb_msg(&pb, 5, &m);
        sb_free(&name);
    }
    free(used);
    free(fused);

    uint64_t stop = S->t_stop ? S->t_stop : vm_now_ns();
    pb_int(&pb, 9, (uint64_t)S->wall_start_ns);
    pb_int(&pb, 10, stop - S->t_start);
    if (cpu) {
        value_type(&pb, 11, &st, "cpu", "nanoseconds");
        pb_int(&pb, 12, period);
    }
    pb_int(&pb, 14, pb_str(&st, cpu ? "cpu" : S->kind == TVM_PROFILE_OFF ? "off_cpu"
                                                                          : "alloc_space"));
    /* The string table last: every string is in it by now. */
    sb_put(&pb, st.table.s, st.table.len);

    bool ok = gzip(pb.s, pb.len, out);
    for (size_t i = 0; i < st.n; i++)
        free(st.s[i]);
    free(st.s);
    free(st.ix.slots);
    sb_free(&st.table);
    sb_free(&pb);
    sb_free(&m);
    sb_free(&sub);
    return ok;
}
