/*
 * loader/loader.h - the .tasm assembly format, for other components.
 *
 * Loading is two-phase: ld_build() parses and verifies a whole file and
 * builds a Module without touching the VM's tables; only a module that
 * built without a single error is installed (ld_install).  So a file with
 * an error loads nothing and the VM keeps what it had.
 */
#ifndef LOADER_LOADER_H
#define LOADER_LOADER_H

#include <stddef.h>

#include "vm/module.h"
#include "vm/native.h"
#include "vm/strbuf.h"

/*
 * Parses and verifies `text` (named `file` in diagnostics).  On success
 * returns the built module (not installed).  On failure returns NULL and
 * appends one "file:line:col: error: message" line per error to diag.
 * Export entries the code refers to are created in `vm` (harmless: they
 * start undefined).  Any thread.
 */
Module *ld_build(tvm_vm *vm, const char *file, const char *text, size_t len,
                 StrBuf *diag);
/*
 * The longest module text the loader takes, in bytes: 256 MiB.  Its
 * diagnostics count lines and columns in ints, which a text past 2 GiB
 * could overflow, and a file is read whole before it is parsed, so
 * tvm_load_file of /dev/zero or of a file that grows as it is read would
 * take memory without end.  The largest module of the tests and
 * benchmarks (50,000 functions) is a few MiB of text.  A longer text
 * is refused (TVM_ERR_LIMIT) with "NAME:1:1: error: ...".
 */
#define LD_TEXT_MAX ((size_t)256 << 20)

/* ld_build, and why it failed: TVM_ERR_LIMIT when the atom table was full
 * or, with exports_bounded (a load from VM code), the entries the text
 * names would take the export table past max_exports (the file may be
 * fine) or the text is longer than LD_TEXT_MAX, TVM_ERR_LOAD for errors
 * in the file. */
Module *ld_build_status(tvm_vm *vm, const char *file, const char *text, size_t len,
                        bool exports_bounded, StrBuf *diag, tvm_status *st);

/* Frees a module that was built but not installed. */
void ld_module_free(Module *m);

/*
 * Builds module text and installs it (tvm_load_string and code:load_binary
 * share it): under the code-modification permission, the breakpoints of
 * the version it replaces go first, the on_load patterns are armed in the
 * new one, and one code-index commit publishes it.  `expect`, when not 0,
 * is the module the text must define (TVM_ERR_LOAD otherwise, with a
 * diagnostic); `beam_rules` (code:load_binary) refuses, with
 * TVM_ERR_EXISTS, a module whose old code was not purged (not_purged),
 * and, with TVM_ERR_LIMIT, one whose names need export entries past
 * max_exports (make_fun/3's bound) or whose code would take the memory
 * that loaded code holds (vm->code_bytes) past max_code_bytes.
 * Diagnostics go to diag.  Any thread; a calling process is suspended
 * while it waits.
 */
tvm_status ld_load(tvm_vm *vm, const char *name, const char *text, size_t len, Atom expect,
                   bool beam_rules, StrBuf *diag);

/* The loader's natives: code:load_binary/3, erlang:delete_module/1,
 * erlang:purge_module/1, erlang:check_old_code/1, erlang:module_loaded/1
 * (loader/ld_natives.c; installed by api/root.c). */
VmNativeTable ld_natives(void);

/* Appends a disassembly of `m` to out. */
void ld_disassemble(const Module *m, StrBuf *out);

#endif /* LOADER_LOADER_H */
