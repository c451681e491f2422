/*
 * vm/native.h - tables of built-in natives, installed at creation.
 *
 * Each layer that offers natives to VM code (the VM's own erlang:, lists:
 * and io: functions, the breakpoint engine's erlang:trace_pattern/3, the
 * trace layer's erlang:trace/3) exports one table; the composition root
 * (api/root.c) installs them all when it creates a VM, so no layer calls
 * back into the public API to register itself.
 */
#ifndef VM_NATIVE_H
#define VM_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#include "include/tracevm.h"

typedef struct VmNativeDef {
    const char *mod;
    const char *name;
    int arity;
    tvm_native_fn fn;
} VmNativeDef;

typedef struct VmNativeTable {
    const VmNativeDef *defs;
    size_t n;
} VmNativeTable;

#define VM_NATIVE_TABLE(defs) ((VmNativeTable){ (defs), sizeof(defs) / sizeof((defs)[0]) })

/* Installs every native of `t` (tvm_new, before any code runs).  The names
 * are the VM's own, so a clash is an internal error and dies. */
void vm_natives_install(tvm_vm *vm, VmNativeTable t);

/*
 * The shape of a built-in native written against the process internals
 * (vm/dict.c, vm/seqtrace.c): VM_NATIVE_FN(name) declares one,
 * VM_NATIVE_SETUP() names its process p, VM_ARG(i) is argument i's term
 * and VM_RETURN(t) returns t (a new root).  vm/process.h is the user's.
 */
#define VM_NATIVE_FN(name) \
    static tvm_status name(tvm_env *env, int argc, const tvm_term *argv, \
                           tvm_term *result, void *data)
#define VM_NATIVE_SETUP() \
    Process *p = env->p; (void)argc; (void)argv; (void)data
#define VM_ARG(i) vm_root_get(p, argv[i])
#define VM_RETURN(t) do { *result = vm_root_push(p, (t)); return TVM_OK; } while (0)

/* Raises error:Reason (an atom) in the native's process p, for it to
 * return: TVM_EXCEPTION. */
struct Process;
tvm_status vm_native_error(struct Process *p, uint32_t reason);

/* The VM's built-in natives (vm/bif.c). */
VmNativeTable vm_bif_natives(void);

/* spawn, send, self and the other natives about processes (vm/bif_proc.c). */
VmNativeTable vm_proc_natives(void);

/* The time and unique-integer natives (vm/time.c). */
VmNativeTable vm_time_natives(void);

/* erlang:system_info/1 (vm/sysinfo.c). */
VmNativeTable vm_sysinfo_natives(void);

#endif /* VM_NATIVE_H */
