/*
 * vm/arch.h - what differs between the machines tracevm runs on (x86_64
 * and aarch64), besides the fiber switch itself (vm/fiber_<arch>.S), the
 * trace clock (trace/tr_clock.h) and the registers of an interrupted
 * context (vm/arch_ucontext.h): the spin-wait hint.
 */
#ifndef VM_ARCH_H
#define VM_ARCH_H

/* A spin-wait's pause between two loads of the word it waits on. */
static inline void vm_cpu_relax(void)
{
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#else
#error "no port to this architecture (vm/arch.h)"
#endif
}

#endif /* VM_ARCH_H */
