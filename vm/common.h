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
void *vm_realloc(void *p, size_t n);
char *vm_strndup(const char *s, size_t n);

#endif /* VM_COMMON_H */
