/*
 * vm/registry.h - registered process names (erlang:register/2 and the
 * rest, as BEAM's register.c): one table per VM from an atom to the live
 * process that holds it, one name per process at most.
 */
#ifndef VM_REGISTRY_H
#define VM_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/native.h"
#include "vm/process.h"

typedef struct VmRegistry VmRegistry;

/* The table (vm->registry), made with the VM and freed with it. */
void vm_registry_init(tvm_vm *vm);
void vm_registry_free(tvm_vm *vm);

/* The pid registered as `name`; false when no process holds it now.  A
 * snapshot: the holder may exit, or the name move, right after. */
bool vm_registry_whereis(tvm_vm *vm, Atom name, uint64_t *pid);

/* The name p holds, in *name; false when it holds none (it never had
 * one, it was taken away, or p has exited).  p is referenced by the
 * caller (vm_proc_get); the fields are read under the lock, so the
 * answer is p's state at one moment between register/2, unregister/1
 * and p's exit, and may change right after. */
bool vm_registry_name_of(Process *p, Atom *name);

/*
 * p is exiting (on its own fiber, after its exit event): its name, if it
 * has one, goes, with an unregister event where p is traced for procs
 * (BEAM's order: exit, then unregister), and no name can be given to p
 * from here on.  Every process that ran on a fiber passes here once.
 */
void vm_registry_exit(Process *p);

/* erlang:register/2, unregister/1, whereis/1 and registered/0. */
VmNativeTable vm_registry_natives(void);

#endif /* VM_REGISTRY_H */
