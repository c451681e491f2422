/*
 * loader/ld_build.c - the verifier and the code emitter.
 *
 * Every check is driven by the opcode table (vm/opcodes.def): the operand
 * kinds and field widths come from its format string, the extra register
 * rules from its RULE column, fall-through from OPF_TERM.  A module is
 * built only if the whole file verified without an error.
 */
#include "loader/ld_internal.h"

#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/opcode.h"
#include "vm/print.h"

/* "name/arity" of a function, for messages. */
static const char *fa_str(Atom name, uint32_t arity, char *buf, size_t size)
{
    StrBuf sb;
    sb_init(&sb);
    vm_print_atom(&sb, name);
    sb_printf(&sb, "/%u", arity);
    sb_copy_out(&sb, buf, size);
    sb_free(&sb);
    return buf;
}

/*
 * The functions by name and arity.  The duplicate check, the exports,
 * every local call and its emission each look a function up, and a
 * linear search made that quadratic: a module of 50,000 functions took
 * seconds to verify.  Open addressing over twice as many slots as
 * functions, the first of duplicates kept (the duplicate check reports
 * the later ones against it).
 */
static uint32_t func_slot(Atom name, uint32_t arity, uint32_t mask)
{
    uint64_t h = ((uint64_t)name << 8 | (arity & 0xff)) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 32) & mask;
}

/* An empty open-addressing table for `count` keys: twice as many slots,
 * a power of two (*mask: their number - 1). */
static uint32_t *index_new(uint32_t count, uint32_t *mask)
{
    uint32_t n = 2;
    while (n < 2 * (uint64_t)count)
        n *= 2;
    *mask = n - 1;
    return vm_calloc(n, sizeof(uint32_t));
}

static void index_funcs(PModule *pm)
{
    pm->index = index_new(pm->nfuncs, &pm->index_mask);
    for (uint32_t i = 0; i < pm->nfuncs; i++) {
        const PFunc *f = &pm->funcs[i];
        uint32_t s = func_slot(f->name, f->arity, pm->index_mask);
        for (;; s = (s + 1) & pm->index_mask) {
            uint32_t at = pm->index[s];
            if (at == 0) {
                pm->index[s] = i + 1;
                break;
            }
            if (pm->funcs[at - 1].name == f->name && pm->funcs[at - 1].arity == f->arity)
                break;   /* a duplicate: the first stays */
        }
    }
}

static PFunc *find_func(PModule *pm, Atom name, uint32_t arity)
{
    for (uint32_t s = func_slot(name, arity, pm->index_mask);; s = (s + 1) & pm->index_mask) {
        uint32_t at = pm->index[s];
        if (at == 0)
            return NULL;
        if (pm->funcs[at - 1].name == name && pm->funcs[at - 1].arity == arity)
            return &pm->funcs[at - 1];
    }
}

/* Only for the message of a call to a missing function: linear. */
static PFunc *find_func_any_arity(PModule *pm, Atom name)
{
    for (uint32_t i = 0; i < pm->nfuncs; i++)
        if (pm->funcs[i].name == name)
            return &pm->funcs[i];
    return NULL;
}

static void check_module(PModule *pm, Diag *d)
{
    char b1[300];
    if (!pm->has_name && d->errors == 0)
        ld_error(d, 1, 1, "missing 'module' directive");
    for (uint32_t i = 0; i < pm->nfuncs; i++) {
        PFunc *f = &pm->funcs[i];
        PFunc *first = find_func(pm, f->name, f->arity);
        if (first != f)
            ld_error(d, f->line, f->col, "duplicate function %s (first defined at line %d)",
                     fa_str(f->name, f->arity, b1, sizeof b1), first->line);
    }
    for (uint32_t i = 0; i < pm->nexports; i++) {
        PExport *e = &pm->exports[i];
        PFunc *f = find_func(pm, e->name, e->arity);
        if (f)
            f->exported = true;
        else
            ld_error(d, e->line, e->col, "export of undefined function %s",
                     fa_str(e->name, e->arity, b1, sizeof b1));
    }
}

/* ==== per-function checks ==== */

typedef struct FnCheck {
    PModule *pm;
    PFunc *f;
    Diag *d;
    char fa[300];
    uint32_t *labels;     /* the labels by name: index + 1, 0 = empty */
    uint32_t label_mask;
} FnCheck;

static void reg_range_error(FnCheck *c, const PInstr *pi, const char *what,
                            uint64_t lo, uint64_t hi)
{
    ld_error(c->d, pi->line, pi->col,
             "'%s' %s r%llu..r%llu but %s has %u registers",
             vm_opinfo[pi->op].name, what, (unsigned long long)lo, (unsigned long long)hi,
             c->fa, c->f->nregs);
}

static int64_t field_min(int fld, char kind)
{
    if (kind == 'I')
        return fld == 1 ? FIELD_BS_MIN : FIELD_CS_MIN;
    return 0;
}

static int64_t field_max(int fld, char kind)
{
    if (kind == 'I')
        return fld == 1 ? FIELD_BS_MAX : FIELD_CS_MAX;
    return fld == 2 ? FIELD_C_MAX : FIELD_A_MAX;
}

/*
 * The labels of the function by name, as the functions are (index_funcs):
 * the duplicate check and every label operand look one up, and a linear
 * search made verification quadratic in the labels of a function (40,000
 * took 13 s in the debug build; code:load_binary/3 runs the verifier in a
 * native, so VM code held its scheduler that long).  The first of
 * duplicates is kept, which the duplicate check reports the later ones
 * against.
 */
static uint32_t label_slot(const char *name, uint32_t mask)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *c = name; *c; c++) {
        h ^= (uint8_t)*c;
        h *= 16777619u;
    }
    return h & mask;
}

static void index_labels(FnCheck *c)
{
    const PFunc *f = c->f;
    c->labels = index_new(f->nlabels, &c->label_mask);
    for (uint32_t i = 0; i < f->nlabels; i++) {
        for (uint32_t s = label_slot(f->labels[i].name, c->label_mask);;
             s = (s + 1) & c->label_mask) {
            uint32_t at = c->labels[s];
            if (at == 0)
                c->labels[s] = i + 1;
            if (at == 0 || strcmp(f->labels[at - 1].name, f->labels[i].name) == 0)
                break;
        }
    }
}

static const PLabel *find_label(const FnCheck *c, const char *name)
{
    for (uint32_t s = label_slot(name, c->label_mask);; s = (s + 1) & c->label_mask) {
        uint32_t at = c->labels[s];
        if (at == 0)
            return NULL;
        if (strcmp(c->f->labels[at - 1].name, name) == 0)
            return &c->f->labels[at - 1];
    }
}

static void check_operand(FnCheck *c, PInstr *pi, int fld)
{
    Operand *o = &pi->ops[fld];
    const char *mn = vm_opinfo[pi->op].name;
    char b1[300];
    switch (o->kind) {
    case 'R':
        /* -1 (a number too big to keep, which the parser reported) passes. */
        if (o->ival >= c->f->nregs)
            ld_error(c->d, o->line, o->col,
                     "register r%lld out of range: %s has %u registers", (long long)o->ival,
                     c->fa, c->f->nregs);
        break;
    case 'I':
    case 'N': {
        /* Named by position, as the parser's messages do ("operand 2 of"),
         * and the value after it, so neither is taken for the other. */
        int pos = 0;
        for (int k = 0; k <= fld; k++)
            if (vm_opinfo[pi->op].fmt[k] != '-')
                pos++;
        if (o->ival < field_min(fld, o->kind) || o->ival > field_max(fld, o->kind))
            ld_error(c->d, o->line, o->col, "operand %d of '%s' is %lld, out of range %lld..%lld",
                     pos, mn, (long long)o->ival, (long long)field_min(fld, o->kind),
                     (long long)field_max(fld, o->kind));
        break;
    }
    case 'L': {
        const PLabel *l = find_label(c, o->label);
        if (!l) {
            ld_error(c->d, o->line, o->col, "undefined label '%s'", o->label);
            break;
        }
        if (l->index >= c->f->ncode)
            break; /* reported once, at the label */
        uint32_t target = c->f->code[l->index].offset;
        if (pi->op == OP_TRY && target <= pi->offset)
            ld_error(c->d, o->line, o->col,
                     "handler '%s' of 'try' must come after the 'try'", o->label);
        else if (pi->op != OP_JUMP && target <= pi->offset)
            ld_error(c->d, o->line, o->col,
                     "conditional branch to '%s' goes backward; close loops with 'jump'",
                     o->label);
        o->ival = (int64_t)target - (int64_t)pi->offset;
        break;
    }
    case 'F':
        if (!find_func(c->pm, o->name, o->arity)) {
            PFunc *other = find_func_any_arity(c->pm, o->name);
            char b2[300];
            if (other)
                ld_error(c->d, o->line, o->col, "undefined function %s (arity mismatch: %s exists)",
                         fa_str(o->name, o->arity, b1, sizeof b1),
                         fa_str(other->name, other->arity, b2, sizeof b2));
            else
                ld_error(c->d, o->line, o->col, "undefined function %s",
                         fa_str(o->name, o->arity, b1, sizeof b1));
        }
        break;
    default:
        break;
    }
}

static void check_rule(FnCheck *c, PInstr *pi)
{
    const OpInfo *oi = &vm_opinfo[pi->op];
    uint64_t a = (uint64_t)pi->ops[0].ival, b = (uint64_t)pi->ops[1].ival;
    uint64_t cc = (uint64_t)pi->ops[2].ival, n = c->f->nregs;
    /* Each rule checks a span from a base register; a base that is itself
     * out of range was reported by check_operand, once is enough.  (A base
     * of -1, already reported by the parser, is huge here.) */
    switch (oi->rule) {
    case R_SPAN_CB:
        if (b > 0 && cc < n && cc + b > n)
            reg_range_error(c, pi, "reads registers", cc, cc + b - 1);
        break;
    case R_TRY:
        if (a < n && a + 3 > n)
            reg_range_error(c, pi, "writes registers", a, a + 2);
        break;
    case R_ARGS_B:
        if (pi->ops[3].arity > 0 && b < n && b + pi->ops[3].arity > n)
            reg_range_error(c, pi, "passes arguments in", b, b + pi->ops[3].arity - 1);
        break;
    case R_ARGS_A:
        if (pi->ops[3].arity > 0 && a < n && a + pi->ops[3].arity > n)
            reg_range_error(c, pi, "passes arguments in", a, a + pi->ops[3].arity - 1);
        break;
    case R_CALLF:
        if (b < n && b + cc + 1 > n)
            reg_range_error(c, pi, "reads the fun and its arguments from", b, b + cc);
        break;
    default:
        break;
    }
}

/* The labels, then every instruction's operands and rules. */
static void check_body(FnCheck *c)
{
    PFunc *f = c->f;
    index_labels(c);
    for (uint32_t i = 0; i < f->nlabels; i++) {
        PLabel *l = &f->labels[i];
        const PLabel *first = find_label(c, l->name);
        if (first != l)
            ld_error(c->d, l->line, l->col, "duplicate label '%s' (first at line %d)", l->name,
                     first->line);
        else if (l->index >= f->ncode && !f->dropped)
            ld_error(c->d, l->line, l->col, "label '%s' is not followed by an instruction",
                     l->name);
    }
    for (uint32_t i = 0; i < f->ncode; i++) {
        PInstr *pi = &f->code[i];
        for (int fld = 0; fld < 4; fld++)
            if (pi->ops[fld].kind)
                check_operand(c, pi, fld);
        check_rule(c, pi);
    }
    free(c->labels);
    c->labels = NULL;
}

static void check_function(PModule *pm, PFunc *f, Diag *d)
{
    FnCheck c = { pm, f, d, { 0 }, NULL, 0 };
    fa_str(f->name, f->arity, c.fa, sizeof c.fa);
    if (f->bad_header)
        return; /* no register count (the parser reported why, and checks
                   a count above VM_MAX_REGS) */
    if (f->arity > f->nregs) {
        ld_error(d, f->line, f->col, "function %s declares %u registers but takes %u arguments",
                 c.fa, f->nregs, f->arity);
        return;
    }
    if (!f->ended)
        return; /* truncated: already reported */
    if (f->ncode == 0) {
        if (!f->dropped)
            ld_error(d, f->line, f->col, "function %s has no instructions", c.fa);
        return;
    }
    uint64_t off = 1; /* instruction 0 is ENTER */
    for (uint32_t i = 0; i < f->ncode; i++) {
        f->code[i].offset = (uint32_t)off;
        off += vm_opinfo[f->code[i].op].words;
    }
    if (off > FIELD_CS_MAX) {
        ld_error(d, f->line, f->col, "function %s is too long (%llu words)", c.fa,
                 (unsigned long long)off);
        return;
    }
    check_body(&c);
    /* If a line was left out (it may have been the final 'ret'), the last
     * instruction that parsed says nothing about falling off the end. */
    const PInstr *last = &f->code[f->ncode - 1];
    if (!(vm_opinfo[last->op].flags & OPF_TERM) && !f->dropped)
        ld_error(d, last->line, last->col,
                 "%s can fall off its end: the last instruction '%s' is not a ret, jump, "
                 "tailcall or raise", c.fa, vm_opinfo[last->op].name);
}

/* ==== emission ==== */

static uint32_t func_words(const PFunc *f)
{
    const PInstr *last = &f->code[f->ncode - 1];
    return last->offset + vm_opinfo[last->op].words;
}

static void emit_function(Module *m, PModule *pm, PFunc *f, FuncInfo *fi)
{
    LineEntry *lines = vm_malloc((f->ncode + 1) * sizeof(LineEntry));
    uint32_t nlines = 0;
    lines[nlines++] = (LineEntry){ 0, (uint32_t)f->line };
    vm_func_set_entry(fi, instr_make(OP_ENTER, f->nregs, 0, 0));
    for (uint32_t i = 0; i < f->ncode; i++) {
        PInstr *pi = &f->code[i];
        const OpInfo *oi = &vm_opinfo[pi->op];
        unsigned fl[3] = { 0, 0, 0 };
        for (int k = 0; k < 3; k++)
            if (oi->fmt[k] != '-')
                fl[k] = (unsigned)pi->ops[k].ival;
        Instr *w = &fi->code[pi->offset];
        w[0] = instr_make((unsigned)pi->op, fl[0], fl[1], fl[2]);
        const Operand *x = &pi->ops[3];
        if (oi->fmt[3] == 'F') {
            /* verified: the callee exists */
            w[1] = (Instr)(uintptr_t)m->funcs[find_func(pm, x->name, x->arity) - pm->funcs];
        } else if (oi->fmt[3] == 'E') {
            w[1] = (Instr)(uintptr_t)x->exp;   /* resolve_exports */
        } else if (oi->fmt[3] == 'K') {
            w[1] = (Instr)x->lit;
        }
        if (lines[nlines - 1].line != (uint32_t)pi->line)
            lines[nlines++] = (LineEntry){ pi->offset, (uint32_t)pi->line };
    }
    fi->lines = lines;
    fi->nlines = nlines;
    m->bytes += (f->ncode + 1) * sizeof(LineEntry);
}

static Module *emit_module(const char *file, PModule *pm)
{
    Module *m = vm_calloc(1, sizeof(Module));
    m->name = pm->name;
    m->file = vm_strndup(file, strlen(file));
    m->nfuncs = pm->nfuncs;
    m->funcs = vm_calloc(pm->nfuncs ? pm->nfuncs : 1, sizeof(FuncInfo *));
    m->lits = pm->lits;
    pm->lits = NULL;
    uint32_t *words = vm_malloc((pm->nfuncs ? pm->nfuncs : 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < pm->nfuncs; i++)
        words[i] = func_words(&pm->funcs[i]);
    m->func_block = vm_func_block(pm->nfuncs, words, m->funcs);
    /* What the version holds (Module.bytes; emit_function adds each line
     * table): the sizes asked of malloc, without its own overhead. */
    m->bytes = sizeof(Module) + strlen(file) + 1 +
               (pm->nfuncs ? pm->nfuncs : 1) * sizeof(FuncInfo *);
    for (uint32_t i = 0; i < pm->nfuncs; i++)
        m->bytes += vm_func_size(words[i]);
    for (const LitBlock *b = m->lits; b; b = b->next)
        m->bytes += sizeof(LitBlock) + b->cap * sizeof(Term);
    free(words);
    for (uint32_t i = 0; i < pm->nfuncs; i++) {
        PFunc *f = &pm->funcs[i];
        FuncInfo *fi = m->funcs[i];
        fi->module = m;
        fi->mod = pm->name;
        fi->name = f->name;
        fi->arity = (uint16_t)f->arity;
        fi->nregs = (uint16_t)f->nregs;
        fi->file = m->file;
        fi->export = f->export;   /* resolve_exports: NULL unless exported */
        m->funcs[i] = fi;
    }
    for (uint32_t i = 0; i < pm->nfuncs; i++)
        emit_function(m, pm, &pm->funcs[i], m->funcs[i]);
    return m;
}

/* The export entries the module's remote calls and exports name, found
 * (or made) before anything is built: the one step of a verified load
 * that can fail (a load from VM code past max_exports). */
static void resolve_exports(tvm_vm *vm, PModule *pm, Diag *d)
{
    for (uint32_t i = 0; i < pm->nfuncs; i++) {
        PFunc *f = &pm->funcs[i];
        if (f->exported &&
            !ld_export(vm, d, f->line, f->col, pm->name, f->name, f->arity, &f->export))
            return;
        for (uint32_t k = 0; k < f->ncode; k++) {
            Operand *x = &f->code[k].ops[3];
            if (vm_opinfo[f->code[k].op].fmt[3] == 'E' &&
                !ld_export(vm, d, x->line, x->col, x->mod, x->name, x->arity, &x->exp))
                return;
        }
    }
}

Module *ld_build_status(tvm_vm *vm, const char *file, const char *text, size_t len,
                        bool exports_bounded, StrBuf *diag, tvm_status *st)
{
    Diag d = { .file = file, .out = diag, .exports_bounded = exports_bounded };
    if (len > LD_TEXT_MAX) {
        ld_error(&d, 1, 1, "text longer than %zu bytes, the most a module's text may be",
                 LD_TEXT_MAX);
        if (st)
            *st = TVM_ERR_LIMIT;
        return NULL;
    }
    Lexer lx;
    ld_lex_init(&lx, text, len, &d);
    PModule pm;
    memset(&pm, 0, sizeof pm);
    ld_parse(vm, &lx, &pm);
    index_funcs(&pm);
    check_module(&pm, &d);
    for (uint32_t i = 0; i < pm.nfuncs && !lx.dead; i++)
        check_function(&pm, &pm.funcs[i], &d);
    Module *m = NULL;
    if (d.errors == 0)
        resolve_exports(vm, &pm, &d);
    if (d.errors == 0)
        m = emit_module(file, &pm);
    while (pm.lits) {
        LitBlock *next = pm.lits->next;
        free(pm.lits);
        pm.lits = next;
    }
    ld_pmodule_free(&pm);
    if (st)
        *st = m ? TVM_OK : d.limit ? TVM_ERR_LIMIT : TVM_ERR_LOAD;
    return m;
}

Module *ld_build(tvm_vm *vm, const char *file, const char *text, size_t len,
                 StrBuf *diag)
{
    return ld_build_status(vm, file, text, len, false, diag, NULL);
}

void ld_module_free(Module *m)
{
    vm_module_free(m);
}
