/*
 * tests/stress/stress_export_slots.c - while a module is reloaded, no
 * code-index slot of an export that every version defines ever names its
 * undefined stub.  A caller preempted between its load of the code index
 * and its load of the slot reads the slot of an index two commits old,
 * which the next load restages (vm/module.c); a reload that stubbed the
 * old version's exports before storing the new version's made that
 * caller raise undef for a function that never stopped being defined.  A
 * thread watches the three slots of big:f0/0 (the first function of 3,000)
 * while the main thread reloads the module 40 times.  A plain program
 * (exit 0 = pass), run under ThreadSanitizer by `scons mode=tsan test`.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/tracevm.h"
#include "vm/atom.h"
#include "vm/atomics.h"
#include "vm/module.h"
#include "vm/vm.h"

#define FUNCS 3000
#define LOADS 40

static Export *watched;
/* Set by main when the loads are done (release), read by the watcher
 * (acquire). */
static VmAtomic done = VM_ATOMIC_INIT(0);

static void *watcher(void *arg)
{
    size_t *stubs = arg;
    while (!vm_atomic_load_acquire(&done))
        for (int k = 0; k < VM_CODE_IX_COUNT; k++)
            if (vm_atomic_load_ptr_acquire(&watched->addr[k]) == watched->stub)
                (*stubs)++;
    return NULL;
}

int main(void)
{
    char *src = malloc(FUNCS * 64 + 64);
    size_t n = (size_t)sprintf(src, "module big\n");
    for (int i = 0; i < FUNCS; i++)
        n += (size_t)sprintf(src + n, "export f%d/0\nfunction f%d/0 regs 1\n    ret r0\nend\n",
                             i, i);
    tvm_vm *vm = tvm_new(NULL);
    tvm_error err;
    /* One load per code index first: until then a slot never staged
     * still holds the stub every new entry starts with, rightly (an index
     * from before the first load is one where big was not loaded). */
    for (int i = 0; i < VM_CODE_IX_COUNT; i++)
        if (tvm_load_string(vm, "big.tasm", src, n, &err) != TVM_OK) {
            fprintf(stderr, "stress_export_slots: load: %s", err.message);
            return 1;
        }
    Atom big, f0;
    vm_atom_intern("big", 3, &big);
    vm_atom_intern("f0", 2, &f0);
    watched = vm_export_find(vm, big, f0, 0);
    size_t stubs = 0;
    pthread_t th;
    pthread_create(&th, NULL, watcher, &stubs);
    int status = 0;
    for (int i = 0; i < LOADS && !status; i++)
        if (tvm_load_string(vm, "big.tasm", src, n, &err) != TVM_OK) {
            fprintf(stderr, "stress_export_slots: reload: %s", err.message);
            status = 1;
        }
    vm_atomic_store_release(&done, 1);
    pthread_join(th, NULL);
    if (stubs) {
        fprintf(stderr, "stress_export_slots: big:f0/0's slots named its stub %zu times\n",
                stubs);
        status = 1;
    }
    tvm_destroy(vm);
    free(src);
    return status;
}
