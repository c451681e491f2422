/*
 * vm/codeperm.h - the code-modification permission.
 *
 * One holder at a time may change code: load a module, register a native,
 * or run trace_pattern's sequence.  Holders wait for thread progress while
 * holding it, so waiting for it must not block a scheduler: a VM process
 * that waits is suspended (its scheduler runs others) and resumed when the
 * permission is handed to it; a foreign thread blocks (offline for thread
 * progress while it does).  Waiters are served in arrival order.
 */
#ifndef VM_CODEPERM_H
#define VM_CODEPERM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct tvm_vm;

typedef struct VmPermWaiter {
    struct VmPermWaiter *next;
    uint64_t pid;           /* a suspended process, or 0 for a blocked thread */
    bool granted;           /* under the permission's lock */
} VmPermWaiter;

typedef struct VmCodePerm {
    pthread_mutex_t lock;   /* protects everything below */
    pthread_cond_t cond;    /* blocked threads wait here */
    bool held;
    VmPermWaiter *head, *tail;
} VmCodePerm;

void vm_code_perm_init(VmCodePerm *cp);
void vm_code_perm_destroy(VmCodePerm *cp);

/* Takes the permission, suspending the calling process or blocking the
 * calling thread until it is free.  Not re-entrant. */
void vm_code_perm_acquire(struct tvm_vm *vm);
void vm_code_perm_release(struct tvm_vm *vm);

#endif /* VM_CODEPERM_H */
