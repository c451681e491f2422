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
 * the waiter acquires it after synchronize_rcu() (progress.c).  Outside
 * tsan builds these are the bare liburcu calls.
 */
#ifndef VM_QSBR_H
#define VM_QSBR_H

#include <stdbool.h>
#include <urcu-qsbr.h>

extern char vm_qsbr_clock;
extern char vm_qsbr_pub;

/*
 * Two clocks, one per direction of a grace period:
 *   vm_qsbr_clock: readers release it before each quiescent report; the
 *     waiter acquires it after synchronize_rcu() (reader work before the
 *     grace period happens before the waiter's next step, e.g. a free);
 *   vm_qsbr_pub: the waiter releases it before synchronize_rcu(); readers
 *     acquire it after each quiescent report and on coming online (writes
 *     made before a grace period are seen by readers after it, e.g. a
 *     staged breakpoint generation).
 * Readers never release vm_qsbr_pub, so no reader gains a false
 * happens-before edge from another reader.
 */
#if defined(VM_TSAN)
#include <sanitizer/tsan_interface.h>
#define VM_QSBR_RELEASE() __tsan_release(&vm_qsbr_clock)
#define VM_QSBR_ACQUIRE() __tsan_acquire(&vm_qsbr_clock)
#define VM_QSBR_PUBLISH() __tsan_release(&vm_qsbr_pub)
#define VM_QSBR_SEE() __tsan_acquire(&vm_qsbr_pub)
#else
#define VM_QSBR_RELEASE() ((void)0)
#define VM_QSBR_ACQUIRE() ((void)0)
#define VM_QSBR_PUBLISH() ((void)0)
#define VM_QSBR_SEE() ((void)0)
#endif

/* A quiescent state: the thread holds no reference to RCU-protected data. */
static inline void vm_qsbr_quiescent(void)
{
    VM_QSBR_RELEASE();
    rcu_quiescent_state();
    VM_QSBR_SEE();
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
    VM_QSBR_SEE();
}

/*
 * Readers other than schedulers.  A foreign (embedder) thread running VM
 * code through tvm_call reads code and breakpoint records too, so it is a
 * reader while it does: registered on its first call (and unregistered
 * when the thread exits), online for the outermost tvm_call, offline
 * otherwise.  Calls made on a scheduler thread (a native calling back)
 * change nothing: the scheduler is a reader already.
 */
void vm_qsbr_sched_register(void);     /* a scheduler thread, at its start */
void vm_qsbr_sched_unregister(void);
void vm_qsbr_call_enter(void);
void vm_qsbr_call_leave(void);
/* Whether this thread is a foreign one inside tvm_call (a native or the
 * call hook of a call context runs there): what it runs holds VM state. */
bool vm_qsbr_in_call(void);
/* Around a block of a foreign thread that may be online (inside tvm_call):
 * offline while blocked, so grace periods do not wait for it. */
bool vm_qsbr_block_begin(void);
void vm_qsbr_block_end(bool was_online);

#endif /* VM_QSBR_H */
