/*
 * vm/codeperm.c - the code-modification permission (see codeperm.h).
 *
 * Hand-off: release() never frees the permission while someone waits; it
 * marks the oldest waiter granted, under the lock, and wakes it.  So a
 * woken waiter owns the permission already and nobody can overtake it,
 * and a process woken spuriously (a message) sees `granted` still clear
 * and suspends again.  A process waiter is woken with vm_proc_wake(),
 * which finds it either WAITING (made runnable) or still RUNNING on its
 * way to suspend (the wake is remembered), so no wake-up is lost.
 */
#include "vm/codeperm.h"

#include "vm/common.h"
#include "vm/qsbr.h"
#include "vm/sched.h"


void vm_code_perm_init(VmCodePerm *cp)
{
    pthread_mutex_init(&cp->lock, NULL);
    pthread_cond_init(&cp->cond, NULL);
    cp->held = false;
    cp->head = cp->tail = NULL;
}

void vm_code_perm_destroy(VmCodePerm *cp)
{
    pthread_mutex_destroy(&cp->lock);
    pthread_cond_destroy(&cp->cond);
}

static bool granted(VmCodePerm *cp, VmPermWaiter *w)
{
    pthread_mutex_lock(&cp->lock);
    bool g = w->granted;
    pthread_mutex_unlock(&cp->lock);
    return g;
}

void vm_code_perm_acquire(tvm_vm *vm)
{
    VmCodePerm *cp = &vm->perm;
    Process *self = vm_running_process();
    pthread_mutex_lock(&cp->lock);
    if (!cp->held) {
        cp->held = true;
        pthread_mutex_unlock(&cp->lock);
        return;
    }
    VmPermWaiter w = { NULL, self ? self->pid : 0, false };
    if (cp->tail)
        cp->tail->next = &w;
    else
        cp->head = &w;
    cp->tail = &w;
    if (!self) {
        bool was = vm_qsbr_block_begin();
        while (!w.granted)
            pthread_cond_wait(&cp->cond, &cp->lock);
        pthread_mutex_unlock(&cp->lock);
        vm_qsbr_block_end(was);
        return;
    }
    pthread_mutex_unlock(&cp->lock);
    while (!granted(cp, &w)) {
        self->want_wait = true;
        vm_proc_yield(self);
    }
}

void vm_code_perm_release(tvm_vm *vm)
{
    VmCodePerm *cp = &vm->perm;
    pthread_mutex_lock(&cp->lock);
    VmPermWaiter *w = cp->head;
    if (!w) {
        cp->held = false;
        pthread_mutex_unlock(&cp->lock);
        return;
    }
    cp->head = w->next;
    if (!cp->head)
        cp->tail = NULL;
    w->granted = true;
    uint64_t pid = w->pid;  /* w lives on the waiter's stack: read it now */
    if (!pid)
        pthread_cond_broadcast(&cp->cond);
    pthread_mutex_unlock(&cp->lock);
    if (pid)
        vm_proc_wake(vm_sched_of(vm), pid);
}
