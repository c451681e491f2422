/*
 * vm/overflow.c - a process's native stack overflow ends that process,
 * not the VM.
 *
 * Every fiber stack has a guard region below it (vm/fiber.c).  A process
 * whose native stack runs into it (a native recursing deeply, or using
 * big frames) faults there with SIGSEGV on its scheduler's thread.  The
 * handler runs on the thread's alternate signal stack (the overflowing
 * stack has no room left), installed for every scheduler thread here,
 * and recognises the fault: the thread is a scheduler, it is running a
 * process, and the address is in that process's guard.  Anything else is
 * not ours: the handler that was there before gets it (or the default
 * action, which ends the OS process as it would have without us).
 *
 * Ours: the handler changes the interrupted context so that, when it
 * returns, the thread resumes in overflowed() with its stack pointer at
 * the top of the alternate stack, outside any signal handler (the signal
 * mask restored, so the next fault is caught too).  overflowed() records
 * the mixed stack of the fault for the crash report (vm_hook_note_fault,
 * from the saved program counter and frame pointer) and hands the process
 * to vm_proc_overflowed (vm/lifecycle.c), which restarts its fiber at the
 * top and exits it with error:{system_limit, native_stack}.  The frames
 * below the fault are abandoned: what they held (memory a native
 * malloc'd, a lock a native took) stays held.  Natives are trusted C
 * (docs/safety.md); the VM's own code takes no lock for longer than a
 * bounded, shallow stretch.
 *
 * The alternate stack is the same one stacks/st_signal.c's capture signal
 * runs on (SA_ONSTACK): a capture that lands while overflowed() runs finds
 * the stack pointer outside the process's fiber and answers "switching".
 */
#define _GNU_SOURCE
#include "vm/overflow.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "vm/arch_ucontext.h"
#include "vm/common.h"
#include "vm/fiber.h"
#include "vm/sched.h"

/* The alternate signal stack of a scheduler thread: room for the handler
 * and for overflowed(), which walks the fiber's frames and builds a crash
 * report's stack (sanitizer builds need several times the stack). */
#define ALT_STACK_BYTES (256 * 1024)

static struct sigaction previous;   /* written once, before any scheduler starts */
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

/* Not a guard fault of a process: what would have happened without us. */
static void chain(int sig, siginfo_t *si, void *uc)
{
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, si, uc);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* The default action: returning re-executes the faulting access,
     * which now kills the OS process (with a core, as it would have). */
    signal(sig, SIG_DFL);
}

/*
 * Resumed here, on the alternate stack, by the handler's return, with the
 * process and the fault's program counter and frame pointer.  Under
 * AddressSanitizer the stack's shadow is cleared first: the frames the
 * handler and earlier signals left there never returned through the code
 * that unpoisons them (this one replaced their return).
 */
#if defined(VM_ASAN)
__attribute__((no_sanitize_address))
#endif
static VM_NORETURN void overflowed(Process *p, uintptr_t pc, uintptr_t fp)
{
    vm_asan_unpoison(vm_current_scheduler()->alt_stack, ALT_STACK_BYTES);
    vm_proc_overflowed(p, pc, fp);
}

static void handler(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = ucv;
    Scheduler *s = vm_current_scheduler();
    Process *p = s ? s->current : NULL;
    if (!p || !p->fiber || !vm_fiber_in_guard(p->fiber, (uintptr_t)si->si_addr) ||
        s->alt_stack == NULL) {
        chain(sig, si, ucv);
        return;
    }
    /* Resume in overflowed(p, pc, fp) (the ABI's argument registers) at
     * the top of the alternate stack, aligned as at a function's entry,
     * with no frame below it (a frame pointer of 0 ends every walk). */
    uintptr_t top = ((uintptr_t)s->alt_stack + ALT_STACK_BYTES) & ~(uintptr_t)15;
    vm_uc_resume_in(uc, (void (*)(void))overflowed, top, (uintptr_t)p, vm_uc_pc(uc),
                    vm_uc_fp(uc));
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &previous) != 0)
        vm_die("sigaction for SIGSEGV");
}

void vm_overflow_thread_start(Scheduler *s)
{
    pthread_once(&install_once, install);
    void *m = mmap(NULL, ALT_STACK_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return;   /* no alternate stack: an overflow ends the OS process, as before */
    stack_t ss = { .ss_sp = m, .ss_size = ALT_STACK_BYTES, .ss_flags = 0 };
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(m, ALT_STACK_BYTES);
        return;
    }
    s->alt_stack = m;
}

void vm_overflow_thread_stop(Scheduler *s)
{
    if (!s->alt_stack)
        return;
    stack_t ss = { .ss_flags = SS_DISABLE };
    sigaltstack(&ss, NULL);
    /* (Its shadow cleared first, as a fiber stack's: vm/fiber.c.) */
    vm_asan_unpoison(s->alt_stack, ALT_STACK_BYTES);
    munmap(s->alt_stack, ALT_STACK_BYTES);
    s->alt_stack = NULL;
}
