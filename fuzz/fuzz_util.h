/*
 * fuzz/fuzz_util.h - what the libFuzzer harnesses share: a VM kept across
 * inputs and renewed every so often, the atom table trimmed between VMs,
 * output thrown away, and the finding of a broken invariant.
 *
 * The atom table is global and never shrinks, and fuzzed inputs name new
 * atoms all the time: left alone it fills within minutes and every later
 * input fails the same way.  vm_atoms_trim (VM_FUZZ builds only) forgets
 * the fuzzed ones once no VM is left.
 *
 * The same harnesses are built into every test build as fuzz_replay_NAME
 * (fuzz/replay.c gives them a main), and tests/sh/fuzz_replay.sh runs
 * each over its whole corpus: the seeds and every finding (regress-*),
 * under the sanitizers of that build.
 */
#ifndef FUZZ_FUZZ_UTIL_H
#define FUZZ_FUZZ_UTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz/fuzz.h"
#include "include/tracevm.h"
#include "vm/atom.h"

/* Somewhere to write what programs print. */
static inline FILE *fuzz_devnull(void)
{
    static FILE *f;
    if (!f)
        f = fopen("/dev/null", "w");
    return f;
}

/* Removes the files of a directory the harness made (it has no
 * subdirectories); false if it cannot be opened. */
static inline bool fuzz_dir_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    return true;
}

/* After the last VM is gone: forget the fuzzed atoms when there are many. */
static inline void fuzz_atoms_trim(void)
{
#if VM_FUZZ
    if (vm_atom_count() > ((size_t)1 << 18))
        vm_atoms_trim();
#endif
}

/* A VM kept across inputs and renewed every `uses` inputs (export
 * entries and replaced modules accumulate otherwise), made with `cfg`;
 * *fresh tells the caller that it is new (to set it up). */
static tvm_vm *fuzz_vm_cur;
static unsigned fuzz_vm_uses;

static inline tvm_vm *fuzz_vm_with(unsigned uses, const tvm_config *cfg, bool *fresh)
{
    if (fuzz_vm_cur && fuzz_vm_uses >= uses) {
        tvm_destroy(fuzz_vm_cur);
        fuzz_vm_cur = NULL;
        fuzz_atoms_trim();
    }
    *fresh = !fuzz_vm_cur;
    if (!fuzz_vm_cur) {
        fuzz_vm_cur = tvm_new(cfg);
        fuzz_vm_uses = 0;
    }
    fuzz_vm_uses++;
    return fuzz_vm_cur;
}

/* The same for inputs that leave nothing running: one scheduler. */
static inline tvm_vm *fuzz_vm(unsigned uses)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .quiet_crashes = true, .output = fuzz_devnull() };
    bool fresh;
    return fuzz_vm_with(uses, &cfg, &fresh);
}

/* A NUL-terminated copy of the input (caller frees). */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* A broken invariant: say which and abort, so libFuzzer keeps the input. */
#define FUZZ_CHECK(cond, ...)                                                 \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz invariant: %s: ", #cond);                   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            abort();                                                          \
        }                                                                     \
    } while (0)

#endif /* FUZZ_FUZZ_UTIL_H */
