/*
 * loader/ld_api.c - the public loading entry points (tracevm.h) and the
 * term parser for embedders.
 */
#include "include/tracevm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/ld_internal.h"
#include "vm/heap.h"
#include "vm/hook.h"
#include "vm/print.h"
#include "vm/process.h"

static void set_error(tvm_error *err, tvm_status st, const char *msg)
{
    if (!err)
        return;
    err->status = st;
    size_t n = strlen(msg);
    if (n >= sizeof err->message) {
        n = sizeof err->message - 1;
        memcpy(err->message, msg, n - 4);
        memcpy(err->message + n - 4, "...\n", 4);
    } else {
        memcpy(err->message, msg, n);
    }
    err->message[n] = '\0';
}

tvm_status ld_load(tvm_vm *vm, const char *name, const char *text, size_t len, Atom expect,
                   bool beam_rules, StrBuf *diag)
{
    tvm_status built;
    Module *m = ld_build_status(vm, name, text ? text : "", len, beam_rules, diag, &built);
    if (!m)
        return built;
    if (expect && m->name != expect) {
        StrBuf want, got;
        sb_init(&want);
        sb_init(&got);
        vm_print_atom(&want, expect);
        vm_print_atom(&got, m->name);
        sb_printf(diag, "%s:1:1: error: the text defines module %s, not %s\n", name, got.s,
                  want.s);
        sb_free(&want);
        sb_free(&got);
        ld_module_free(m);
        return TVM_ERR_LOAD;
    }
    /* The permission first: a load excludes trace_pattern, and a new
     * version starts untraced (the old one's breakpoints go first). */
    vm_code_perm_acquire(vm);
    pthread_mutex_lock(&vm->code_lock);
    Module *old = vm_module_find_locked(vm, m->name);
    bool not_purged = beam_rules && old && vm_module_old(old);
    /* Code is never freed (vm/module.c), so a load from VM code must fit
     * in what max_code_bytes leaves: a loop of load_binary and
     * purge_module would otherwise grow the OS process without end.  Read
     * under the permission, which every install holds: no load can come
     * between this check and ours. */
    size_t held = vm->code_bytes;
    bool full = beam_rules && !not_purged &&
                (m->bytes > vm->max_code_bytes || held > vm->max_code_bytes - m->bytes);
    pthread_mutex_unlock(&vm->code_lock);
    tvm_status st = TVM_OK;
    if (not_purged || full) {
        if (not_purged)
            sb_printf(diag, "%s:1:1: error: the module's old code is not purged\n", name);
        else
            sb_printf(diag, "%s:1:1: error: code memory full (%zu bytes held, at most %zu): "
                      "the module needs %zu more\n", name, held, vm->max_code_bytes, m->bytes);
        ld_module_free(m);
        vm_code_perm_release(vm);
        return not_purged ? TVM_ERR_EXISTS : TVM_ERR_LIMIT;
    }
    if (old)
        vm_hook_module_replaced(vm, old);
    pthread_mutex_lock(&vm->code_lock);
    if (vm_module_has_natives_locked(vm, m->name)) {
        StrBuf sb;
        sb_init(&sb);
        vm_print_atom(&sb, m->name);
        sb_printf(diag, "%s:1:1: error: module %s is provided by natives and cannot be "
                  "loaded from assembly\n", name, sb.s);
        sb_free(&sb);
        ld_module_free(m);
        st = TVM_ERR_LOAD;
    } else {
        /* on_load patterns: armed before the install publishes m. */
        vm_hook_module_loading(vm, m);
        vm_module_install_locked(vm, m);
    }
    pthread_mutex_unlock(&vm->code_lock);
    vm_code_perm_release(vm);
    return st;
}

tvm_status tvm_load_string(tvm_vm *vm, const char *name, const char *text,
                           size_t len, tvm_error *err)
{
    set_error(err, TVM_OK, "");
    if (!vm || !name || (!text && len)) {
        set_error(err, TVM_ERR_BADARG, "tvm_load_string: NULL argument");
        return TVM_ERR_BADARG;
    }
    StrBuf diag;
    sb_init(&diag);
    tvm_status st = ld_load(vm, name, text, len, 0, false, &diag);
    set_error(err, st, diag.s);
    sb_free(&diag);
    return st;
}

/* Reads a whole file into text; TVM_ERR_IO with the line saying why in
 * `why` when it cannot. */
static tvm_status read_file(const char *path, StrBuf *text, StrBuf *why)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        int e = errno;
        char pb[VM_MSG_PATH_MAX + 1];
        sb_printf(why, "%s: error: cannot open: %s\n", vm_msg_path(path, pb), strerror(e));
        return TVM_ERR_IO;
    }
    char buf[65536];
    size_t n;
    errno = 0;
    /* Past LD_TEXT_MAX the text is refused by its length (ld_build), so
     * reading stops at the first 64 KiB read that passes it: /dev/zero
     * ends here. */
    while (text->len <= LD_TEXT_MAX && (n = fread(buf, 1, sizeof buf, fp)) > 0)
        sb_put(text, buf, n);
    /* fread sets errno from the read that failed (a directory opens but
     * reads EISDIR); the reason, taken before fclose can change it. */
    int bad = ferror(fp) ? (errno ? errno : EIO) : 0;
    fclose(fp);
    if (bad) {
        char pb[VM_MSG_PATH_MAX + 1];
        sb_printf(why, "%s: error: cannot read: %s\n", vm_msg_path(path, pb), strerror(bad));
        return TVM_ERR_IO;
    }
    return TVM_OK;
}

tvm_status tvm_load_file(tvm_vm *vm, const char *path, tvm_error *err)
{
    if (!vm || !path) {
        set_error(err, TVM_ERR_BADARG, "tvm_load_file: NULL argument");
        return TVM_ERR_BADARG;
    }
    StrBuf text, why;
    sb_init(&text);
    sb_init(&why);
    tvm_status st = read_file(path, &text, &why);
    if (st == TVM_OK)
        st = tvm_load_string(vm, path, text.s, text.len, err);
    else
        set_error(err, st, why.s);
    sb_free(&text);
    sb_free(&why);
    return st;
}

/* Hands a StrBuf's text to the caller (a malloc'ed string) or frees it. */
static void give(StrBuf *sb, char **out)
{
    if (out)
        *out = sb->s;
    else
        sb_free(sb);
}

tvm_status tvm_check_string(tvm_vm *vm, const char *name, const char *text, size_t len,
                            char **diagnostics, char **disassembly)
{
    StrBuf diag;
    sb_init(&diag);
    if (disassembly)
        *disassembly = NULL;
    tvm_status st = TVM_OK;
    if (!vm || !name || (!text && len)) {
        sb_puts(&diag, "tvm_check_string: NULL argument\n");
        st = TVM_ERR_BADARG;
    } else {
        Module *m = ld_build(vm, name, text ? text : "", len, &diag);
        if (!m) {
            st = TVM_ERR_LOAD;
        } else {
            if (disassembly) {
                StrBuf out;
                sb_init(&out);
                ld_disassemble(m, &out);
                *disassembly = out.s;
            }
            ld_module_free(m);
        }
    }
    give(&diag, diagnostics);
    return st;
}

tvm_status tvm_check_file(tvm_vm *vm, const char *path, char **diagnostics, char **disassembly)
{
    StrBuf text, why;
    sb_init(&text);
    sb_init(&why);
    tvm_status st;
    if (!vm || !path) {
        sb_puts(&why, "tvm_check_file: NULL argument\n");
        st = TVM_ERR_BADARG;
    } else {
        st = read_file(path, &text, &why);
    }
    if (st == TVM_OK) {
        st = tvm_check_string(vm, path, text.s, text.len, diagnostics, disassembly);
        sb_free(&why);
    } else {
        if (disassembly)
            *disassembly = NULL;
        give(&why, diagnostics);
    }
    sb_free(&text);
    return st;
}

tvm_status tvm_parse_term(tvm_env *env, const char *text, tvm_term *out, tvm_error *err)
{
    set_error(err, TVM_OK, "");
    if (!env || !env->p || !text || !out) {
        set_error(err, TVM_ERR_BADARG, "tvm_parse_term: NULL argument");
        return TVM_ERR_BADARG;
    }
    Process *p = env->p;
    StrBuf diag;
    sb_init(&diag);
    Diag d = { .file = "term", .out = &diag };
    Lexer lx;
    ld_lex_init(&lx, text, strlen(text), &d);
    Token t;
    ld_lex_next(&lx, &t);
    LitBlock *lits = NULL;
    Term v;
    bool ok = ld_parse_literal(p->vm, &lx, &t, &lits, &v);
    if (ok && t.kind != T_EOF && t.kind != T_NL) {
        char b[64];
        ld_error(&d, t.line, t.col, "unexpected %s after the term", ld_tok_desc(&t, b, sizeof b));
        ok = false;
    }
    ld_token_free(&t);
    tvm_status st = TVM_OK;
    if (ok && d.errors == 0) {
        /* Copy out of the temporary literal blocks onto the env's heap. */
        vm_heap_ensure(p, term_size(v), NULL, 0);
        *out = vm_root_push(p, vm_copy_term(p, v));
    } else {
        st = d.limit ? TVM_ERR_LIMIT : TVM_ERR_BADARG;
        set_error(err, st, diag.s);
    }
    while (lits) {
        LitBlock *next = lits->next;
        free(lits);
        lits = next;
    }
    sb_free(&diag);
    return st;
}
