/*
 * fuzz/fuzz_asm.c - the assembler and the verifier: any bytes as a .tasm
 * file.  ld_build lexes, parses and verifies it (and reports errors,
 * at most LD_MAX_ERRORS of them); a module it accepts is disassembled.
 * Nothing is installed, so nothing runs: fuzz_run.c runs what passes.
 * Findings: a crash, a sanitizer report, a leak, a hang, or a diagnostic
 * that is not of the form "fuzz.tasm:LINE:COL: error: ...".
 */
#include "fuzz/fuzz_util.h"
#include "loader/loader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tvm_vm *vm = fuzz_vm(20000);
    StrBuf diag;
    sb_init(&diag);
    Module *m = ld_build(vm, "fuzz.tasm", (const char *)data, size, &diag);
    if (m) {
        FUZZ_CHECK(diag.len == 0, "accepted with diagnostics: %s", diag.s);
        StrBuf dis;
        sb_init(&dis);
        ld_disassemble(m, &dis);
        sb_free(&dis);
        ld_module_free(m);
    } else {
        FUZZ_CHECK(diag.len > 0, "rejected without a diagnostic");
        for (const char *l = diag.s; *l; l = strchr(l, '\n') + 1) {
            int line, col, n = 0;
            FUZZ_CHECK(sscanf(l, "fuzz.tasm:%d:%d: error: %n", &line, &col, &n) == 2 && n > 0 &&
                           line >= 1 && col >= 1 && strchr(l, '\n'),
                       "bad diagnostic line: %.200s", l);
        }
    }
    sb_free(&diag);
    return 0;
}
