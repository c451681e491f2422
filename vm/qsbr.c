/*
 * vm/qsbr.c - QSBR reader registration for scheduler and foreign threads
 * (see vm/qsbr.h).
 *
 * Thread-local state only: each field below is touched by its own thread.
 */
#include "vm/qsbr.h"

#include <pthread.h>

#include "vm/common.h"

/* The clocks that tell ThreadSanitizer about grace periods (qsbr.h). */
char vm_qsbr_clock;
char vm_qsbr_pub;

enum { ROLE_NONE, ROLE_SCHED, ROLE_FOREIGN };

static _Thread_local int tls_role;
static _Thread_local unsigned tls_depth;   /* nested tvm_call on a foreign thread */

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* A foreign reader leaving: liburcu must forget it before its TLS goes. */
static void foreign_exit(void *unused)
{
    (void)unused;
    if (tls_role == ROLE_FOREIGN) {
        rcu_unregister_thread();
        tls_role = ROLE_NONE;
    }
}

static void make_key(void)
{
    if (pthread_key_create(&exit_key, foreign_exit) != 0)
        vm_die("pthread_key_create failed");
}

void vm_qsbr_sched_register(void)
{
    rcu_register_thread();
    VM_QSBR_SEE();
    tls_role = ROLE_SCHED;
}

void vm_qsbr_sched_unregister(void)
{
    rcu_unregister_thread();
    tls_role = ROLE_NONE;
}

void vm_qsbr_call_enter(void)
{
    if (tls_role == ROLE_SCHED)
        return;
    if (tls_role == ROLE_NONE) {
        pthread_once(&exit_once, make_key);
        rcu_register_thread();             /* registers online */
        VM_QSBR_SEE();
        pthread_setspecific(exit_key, (void *)1);
        tls_role = ROLE_FOREIGN;
        tls_depth = 1;
        return;
    }
    if (tls_depth++ == 0)
        vm_qsbr_online();
}

void vm_qsbr_call_leave(void)
{
    if (tls_role == ROLE_FOREIGN && --tls_depth == 0)
        vm_qsbr_offline();
}

bool vm_qsbr_in_call(void)
{
    return tls_role == ROLE_FOREIGN && tls_depth > 0;
}

bool vm_qsbr_block_begin(void)
{
    if (tls_role != ROLE_FOREIGN || tls_depth == 0)
        return false;
    vm_qsbr_offline();
    return true;
}

void vm_qsbr_block_end(bool was_online)
{
    if (was_online)
        vm_qsbr_online();
}
