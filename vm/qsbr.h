/*
 * vm/qsbr.h - the scheduler side of thread progress: liburcu QSBR calls,
 * annotated for ThreadSanitizer.
 *
 * liburcu's grace periods are built from plain loads and futexes that
 * ThreadSanitizer cannot see as synchronization.  What a grace period
 * guarantees is: everything a reader thread did before it reported a
 * quiescent state (or went offline) happens before whatever the waiter
 * does after synchronize_rcu() returns.  We tell TSan exactly that: each
 * report is preceded by a release on one shared clock (vm_qsbr_clock), and
 * the waiter acquires it after synchronize_rcu() (bp_progress.c).  Outside
 * tsan builds these are the bare liburcu calls.
 */
#ifndef VM_QSBR_H
#define VM_QSBR_H

#include <urcu-qsbr.h>

extern char vm_qsbr_clock;

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define VM_QSBR_RELEASE() __tsan_release(&vm_qsbr_clock)
#define VM_QSBR_ACQUIRE() __tsan_acquire(&vm_qsbr_clock)
#else
#define VM_QSBR_RELEASE() ((void)0)
#define VM_QSBR_ACQUIRE() ((void)0)
#endif

/* A quiescent state: the thread holds no reference to RCU-protected data. */
static inline void vm_qsbr_quiescent(void)
{
    VM_QSBR_RELEASE();
    rcu_quiescent_state();
}

/* An extended quiescent state (before sleeping or blocking). */
static inline void vm_qsbr_offline(void)
{
    VM_QSBR_RELEASE();
    rcu_thread_offline();
}

static inline void vm_qsbr_online(void)
{
    rcu_thread_online();
}

#endif /* VM_QSBR_H */
