/*
 * stacks/st_join.c - joining a capture's native and VM frames, printing
 * the result, and the public API (tvm_backtrace and friends).
 *
 * Joining.  Every vm_execute activation pushes an entry frame that
 * records the native frame address of its interpreter loop
 * (Frame.native_fp, FRAME_ENTRY; vm/interp.c).  The native walk yields
 * (pc, frame address) pairs, innermost first; the entry frames, taken
 * from the innermost, are matched against them by address, never by
 * name (an inlined or cloned interpreter has no reliable name): the
 * native frame whose frame address equals the innermost unmatched entry's
 * native_fp is the interpreter running that activation, and it is
 * replaced by the activation's VM frames, innermost first.  Trace frames
 * (FRAME_TRACE, pushed below a traced function for its return or
 * exception trace) come out as ST_F_TRACE.  Activations left unmatched
 * (a broken walk, or more native frames than a capture keeps) are
 * appended after the native frames and the result is marked truncated:
 * incomplete, never wrongly ordered.  More VM frames than a capture keeps
 * lose the outermost: the capture then holds the entry frame of the
 * activation it cut (st_copy_frames), which is placed like any other,
 * and an ST_F_CUT frame stands where the frames left out would be.
 *
 * Lines.  A VM frame below another resumes at its saved pc, just after
 * the call, so its line is the one of pc - 1; the innermost frame of an
 * activation is looked up at its own saved pc (the interpreter saves it
 * before calling a native and before yielding).
 */
#include "stacks/st.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/api_error.h"
#include "vm/common.h"
#include "vm/print.h"
#include "vm/strbuf.h"

#if __has_include("stacks/st_sym.h")
#include "stacks/st_sym.h"
#define ST_HAVE_SYM 1
#else
#define ST_HAVE_SYM 0
#endif

/* Appends the VM frames of (from, to) in s->vm, innermost first. */
static size_t emit_activation(const StStack *s, uint32_t from, uint32_t to, StFrame *out,
                              size_t n, size_t max)
{
    for (uint32_t i = to; i-- > from && n < max;) {
        const StVm *v = &s->vm[i];
        unsigned kind = FRAME_KIND(v->kind);
        if (!v->fn || kind == FRAME_ENTRY)
            continue;
        if (kind == FRAME_TRACE) {
            out[n++] = (StFrame){ ST_F_TRACE, 0, v->fn, 0 };
            continue;
        }
        const Instr *pc = v->pc;
        if (pc && i + 1 < to)
            pc--;
        uint32_t line = pc && !v->fn->native ? vm_func_line(v->fn, pc) : 0;
        out[n++] = (StFrame){ ST_F_VM, 0, v->fn, line };
    }
    /* The outermost frames kept (the orphans from 0, or the activation
     * whose entry is s->vm[0]) of a capture that left older ones out: the
     * cut is marked where it is. */
    if (from <= 1 && s->vm_dropped > 0 && n < max)
        out[n++] = (StFrame){ ST_F_CUT, 0, NULL, s->vm_dropped };
    return n;
}

size_t st_join(const StStack *s, StFrame *out, size_t max, bool *truncated)
{
    /* Entry frames, outermost first; activation k is (entry[k], end of k). */
    uint32_t entry[ST_MAX_VM + 1], ne = 0;
    for (uint32_t i = 0; i < s->nvm; i++)
        if (FRAME_KIND(s->vm[i].kind) == FRAME_ENTRY)
            entry[ne++] = i;
    uint32_t orphan_end = ne ? entry[0] : s->nvm; /* frames below the first entry kept */
    entry[ne] = s->nvm;
    size_t n = 0;
    int k = (int)ne - 1;
    for (uint32_t j = 0; j < s->nnative && n < max; j++) {
        const StNative *f = &s->native[j];
        if (k >= 0 && f->fp && f->fp == s->vm[entry[k]].native_fp) {
            n = emit_activation(s, entry[k] + 1, entry[k + 1], out, n, max);
            k--;
            continue;
        }
        out[n++] = (StFrame){ ST_F_NATIVE, f->ip, NULL, 0 };
    }
    *truncated = s->walk_broken || s->vm_dropped > 0 || k >= 0 || s->nnative == ST_MAX_NATIVE;
    for (; k >= 0; k--)
        n = emit_activation(s, entry[k] + 1, entry[k + 1], out, n, max);
    if (orphan_end > 0)
        n = emit_activation(s, 0, orphan_end, out, n, max);
    return n;
}

/* "name+0xoff (object)" for a native pc, or the raw address.  A return
 * address is looked up one byte back (it may be just past a call that
 * ends its function). */
static void put_native(StrBuf *sb, uintptr_t ip, bool ret_addr, bool lines)
{
#if ST_HAVE_SYM
    StSym sym;
    uintptr_t adj = ret_addr ? 1 : 0;
    if (st_sym_lookup(ip - adj, &sym) && sym.name) {
        sb_printf(sb, "%s+0x%lx", sym.name, (unsigned long)(sym.offset + adj));
        if (sym.object) {
            const char *base = strrchr(sym.object, '/');
            sb_printf(sb, " (%s)", base ? base + 1 : sym.object);
        }
        const char *file;
        int line;
        if (lines && st_sym_srcline(ip - adj, &file, &line))
            sb_printf(sb, " at %s:%d", file, line);
        return;
    }
#else
    (void)ret_addr, (void)lines;
#endif
    sb_printf(sb, "0x%lx", (unsigned long)ip);
}

static void put_mfa(StrBuf *sb, const FuncInfo *fn)
{
    const FuncInfo *r = vm_func_real(fn);
    vm_print_mfa(sb, r->mod, r->name, r->arity);
}

void st_format_sb(const StStack *s, StrBuf *sb)
{
    st_format_lines(s, sb, false);
}

void st_format_lines(const StStack *s, StrBuf *sb, bool native_lines)
{
    if (s->result != ST_R_OK) {
        sb_printf(sb, "  (no stack: %s)\n", st_result_name(s->result));
        return;
    }
    StFrame fr[ST_MAX_NATIVE + ST_MAX_VM];
    bool truncated;
    size_t n = st_join(s, fr, sizeof fr / sizeof fr[0], &truncated);
    for (size_t i = 0; i < n; i++) {
        const StFrame *f = &fr[i];
        sb_puts(sb, "  ");
        switch (f->type) {
        case ST_F_NATIVE:
            sb_puts(sb, "[c] ");
            put_native(sb, f->ip, i > 0, native_lines);
            break;
        case ST_F_TRACE:
            sb_puts(sb, "<trace> ");
            put_mfa(sb, f->fn);
            break;
        case ST_F_CUT:
            sb_printf(sb, "... %u older VM frames left out", f->line);
            break;
        case ST_F_VM:
            put_mfa(sb, f->fn);
            if (f->fn->native)
                sb_puts(sb, " (native)");
            else if (f->fn->file && f->line)
                sb_printf(sb, " (%s:%u)", f->fn->file, f->line);
            break;
        }
        sb_putc(sb, '\n');
    }
    if (truncated)
        sb_puts(sb, "  ... truncated\n");
}

size_t st_format(const StStack *s, char *buf, size_t size)
{
    StrBuf sb;
    sb_init(&sb);
    st_format_sb(s, &sb);
    size_t n = sb_copy_out(&sb, buf, size);
    sb_free(&sb);
    return n;
}

/* ==== the public API ==== */

/*
 * Copies the text into buf (size bytes with the NUL) in whole lines: all
 * of it when it fits, else the lines that fit, so that a cut stack never
 * ends in half a frame.  Returns the lines copied.
 */
static size_t copy_lines(const StrBuf *sb, char *buf, size_t size)
{
    if (!size)
        return 0;
    size_t n = sb->len;
    if (n >= size) {
        n = size - 1;
        while (n > 0 && sb->s[n - 1] != '\n')
            n--;
    }
    memcpy(buf, sb->s, n);
    buf[n] = '\0';
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += sb->s[i] == '\n';
    return lines;
}

tvm_status tvm_backtrace(tvm_vm *vm, tvm_pid pid, char *buf, size_t size,
                         const tvm_backtrace_opts *opts, tvm_error *err)
{
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    if (!vm)
        return vm_api_fail(err, TVM_ERR_BADARG, "tvm_backtrace: NULL vm");
    if (!buf && size)
        return vm_api_fail(err, TVM_ERR_BADARG, "tvm_backtrace: NULL buf with size %zu", size);
    tvm_backtrace_opts o = { 0 };
    char why[256];
    if (opts && !vm_opts_copy(&o, sizeof o, opts, why, sizeof why))
        return vm_api_fail(err, TVM_ERR_BADARG, "tvm_backtrace: %llu: tvm_backtrace_opts: %s",
                           (unsigned long long)pid, why);
    StStack *s = vm_malloc(sizeof *s);
    StOptions so = { o.timeout_ms, o.unwind };
    StResult r = st_capture_pid(vm, pid, s, &so);
    tvm_status st = TVM_OK;
    if (r == ST_R_OK || r == ST_R_NOSTACK) {
        StrBuf sb;
        sb_init(&sb);
        st_format_lines(s, &sb, o.native_lines);
        size_t lines = copy_lines(&sb, buf, size);
        /* A cut is reported, never silent: the caller learns the size
         * to ask for again (the text may differ by then: it runs on). */
        if (sb.len >= size)
            st = vm_api_fail(err, TVM_ERR_LIMIT,
                             "tvm_backtrace: %llu: the stack needs %zu bytes with its NUL, size is "
                             "%zu: cut to its first %zu lines",
                             (unsigned long long)pid, sb.len + 1, size, lines);
        sb_free(&sb);
    } else if (size) {
        buf[0] = '\0';
    }
    if (r == ST_R_NOPROC || r == ST_R_EXITED)
        st = vm_api_fail(err, TVM_ERR_NOTFOUND, "no process %llu: %s", (unsigned long long)pid,
                         st_result_name(r));
    else if (r != ST_R_OK && r != ST_R_NOSTACK)
        st = vm_api_fail(err, TVM_ERR_BUSY,
                         "process %llu not captured: %s", (unsigned long long)pid,
                         st_result_name(r));
    free(s);
    return st;
}

tvm_status tvm_backtrace_config(int signo, unsigned timeout_ms)
{
    if (signo != 0 && (signo < SIGRTMIN || signo > SIGRTMAX))
        return TVM_ERR_BADARG;
    return st_configure(signo, timeout_ms) ? TVM_OK : TVM_ERR_BADARG;
}

tvm_status tvm_thread_register(tvm_env *ctx, tvm_pid *id)
{
    if (!id)
        return TVM_ERR_BADARG;
    Process *p = ctx ? ctx->p : NULL;
    if (p && p->fiber)
        return TVM_ERR_BADARG;   /* a process is captured by its pid */
    *id = st_thread_register(p);
    return *id ? TVM_OK : TVM_ERR_LIMIT;
}

tvm_status tvm_thread_unregister(tvm_pid id)
{
    return st_thread_unregister(id) ? TVM_OK : TVM_ERR_NOTFOUND;
}
