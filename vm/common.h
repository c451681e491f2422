/*
 * vm/common.h - small helpers shared by every component: assertions,
 * branch hints, fatal errors and checked allocation.
 */
#ifndef VM_COMMON_H
#define VM_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "vm/config.h"

#define VM_LIKELY(x) __builtin_expect(!!(x), 1)
#define VM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define VM_NORETURN __attribute__((noreturn))

/*
 * vm_asan_unpoison(p, n): under AddressSanitizer (VM_ASAN), clears the
 * shadow of [p, p + n), so that ASan takes it for addressable memory
 * again; nothing otherwise.  For stacks whose frames were abandoned (a
 * fiber that switched away for good, a signal handler that never
 * returned), before they are reused or unmapped (vm/fiber.c).
 */
#if defined(VM_ASAN)
#include <sanitizer/asan_interface.h>
#define vm_asan_unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define vm_asan_unpoison(p, n) ((void)(p), (void)(n))
#endif

#define VM_UNUSED __attribute__((unused))
#define VM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * vm_die - report an impossible failure (an OS call that cannot fail in a
 * correct program, an allocation failure) with file, function and line,
 * then abort.  Never returns.
 */
VM_NORETURN void vm_die_at(const char *file, const char *func, int line,
                           const char *what);
#define vm_die(what) vm_die_at(__FILE__, __func__, __LINE__, (what))

#if VM_ASSERTS
#define VM_ASSERT(cond, msg)                                                \
    do {                                                                    \
        if (VM_UNLIKELY(!(cond)))                                           \
            vm_die("assertion failed: " #cond ": " msg);                    \
    } while (0)
#else
#define VM_ASSERT(cond, msg) ((void)0)
#endif
#define VM_UNREACHABLE() vm_die("unreachable")

/* Checked allocation: abort on out-of-memory (vm_die). */
void *vm_malloc(size_t n);
void *vm_calloc(size_t count, size_t n);
/* n zeroed bytes aligned to `align` (a power of two, at least
 * sizeof(void *)); n is rounded up to a multiple of it.  free() frees. */
void *vm_zalloc_aligned(size_t align, size_t n);
void *vm_realloc(void *p, size_t n);
char *vm_strndup(const char *s, size_t n);

/*
 * vm_msg_path - a path as an error message names it: `path` itself when
 * it has at most VM_MSG_PATH_MAX bytes, else its first and last
 * VM_MSG_PATH_MAX / 2 - 2 bytes with "..." between, in buf (which must
 * hold VM_MSG_PATH_MAX + 1 bytes).  A message that names a path and then
 * says why (the OS's reason) keeps the reason: a path near PATH_MAX
 * (4,096) filled the message and cut the reason off its end.
 */
#define VM_MSG_PATH_MAX 1024
const char *vm_msg_path(const char *path, char buf[VM_MSG_PATH_MAX + 1]);

/*
 * vm_opts_copy - reads an option struct of the embedding API
 * (tvm_config, tvm_trace_options, tvm_backtrace_opts, tvm_spawn_opts; each begins with
 * `size_t size`, the sizeof the embedder's header gave it) into `out`,
 * this library's struct of out_size bytes, which the caller zeroed.  An
 * older host's smaller struct is copied and the fields it lacks keep
 * their zero, the default; a newer host's larger one is accepted when
 * the bytes past this library's fields are zero (fields it does not know,
 * at their defaults).  True, or false with the reason in why: a size of
 * 0, one smaller than the size field, one past VM_OPTS_MAX (no version of
 * any of these structs is that large: a size never set), unknown fields
 * set.  include/tracevm.h states the rule for the embedder.
 */
#define VM_OPTS_MAX 4096
bool vm_opts_copy(void *out, size_t out_size, const void *in, char *why, size_t n);

#endif /* VM_COMMON_H */
