/*
 * vm/arch_ucontext.h - the registers of an interrupted context (a signal
 * handler's ucontext_t) on the machines tracevm runs on (x86_64 and
 * aarch64).  The registers a stack walk starts from are the same three on
 * both: the pc, the stack pointer and the frame pointer (rbp on x86_64,
 * x29 on aarch64, each the head of a chain of {saved fp, return address}
 * frame records: docs/stacks.md).  Include it with _GNU_SOURCE defined
 * (glibc names x86_64's registers, REG_RIP ..., only then).
 */
#ifndef VM_ARCH_UCONTEXT_H
#define VM_ARCH_UCONTEXT_H

#if !defined(_GNU_SOURCE)
#error "vm/arch_ucontext.h needs _GNU_SOURCE (defined before the first #include)"
#endif

#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "no port to this architecture (vm/arch_ucontext.h)"
#endif

/* The pc, stack pointer and frame pointer of an interrupted context. */
static inline uintptr_t vm_uc_pc(const ucontext_t *uc)
{
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#else
    return (uintptr_t)uc->uc_mcontext.pc;
#endif
}

static inline uintptr_t vm_uc_sp(const ucontext_t *uc)
{
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#else
    return (uintptr_t)uc->uc_mcontext.sp;
#endif
}

static inline uintptr_t vm_uc_fp(const ucontext_t *uc)
{
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
#else
    return (uintptr_t)uc->uc_mcontext.regs[29];
#endif
}

/*
 * Makes the signal handler's return resume in fn(a0, a1, a2) instead of
 * the interrupted code, with the stack pointer at top (16-byte aligned)
 * and no frame below it: the frame pointer is 0, and on aarch64 the link
 * register too, so every walk ends at fn's frame.  On x86_64 fn is
 * entered as by a call (rsp + 8 aligned, a return address slot below
 * top); fn must never return.
 */
static inline void vm_uc_resume_in(ucontext_t *uc, void (*fn)(void), uintptr_t top,
                                   uintptr_t a0, uintptr_t a1, uintptr_t a2)
{
#if defined(__x86_64__)
    greg_t *g = uc->uc_mcontext.gregs;
    g[REG_RDI] = (greg_t)a0;
    g[REG_RSI] = (greg_t)a1;
    g[REG_RDX] = (greg_t)a2;
    g[REG_RSP] = (greg_t)(top - 8);
    g[REG_RBP] = 0;
    g[REG_RIP] = (greg_t)(uintptr_t)fn;
#else
    uc->uc_mcontext.regs[0] = a0;
    uc->uc_mcontext.regs[1] = a1;
    uc->uc_mcontext.regs[2] = a2;
    uc->uc_mcontext.regs[29] = 0;
    uc->uc_mcontext.regs[30] = 0;
    uc->uc_mcontext.sp = top;
    uc->uc_mcontext.pc = (uintptr_t)fn;
#endif
}

#endif /* VM_ARCH_UCONTEXT_H */
