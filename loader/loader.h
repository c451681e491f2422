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
/* ld_build, and why it failed: TVM_ERR_LIMIT when the atom table was full
 * (the file may be fine), TVM_ERR_LOAD for errors in the file. */
Module *ld_build_status(tvm_vm *vm, const char *file, const char *text, size_t len,
                        StrBuf *diag, tvm_status *st);

/* Frees a module that was built but not installed. */
void ld_module_free(Module *m);

/* Appends a disassembly of `m` to out. */
void ld_disassemble(const Module *m, StrBuf *out);

#endif /* LOADER_LOADER_H */
