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

/* The VM's built-in natives (vm/bif.c). */
VmNativeTable vm_bif_natives(void);

/* spawn, send, self and the other natives about processes (vm/bif_proc.c). */
VmNativeTable vm_proc_natives(void);

/* The time and unique-integer natives (vm/time.c). */
VmNativeTable vm_time_natives(void);

/* erlang:system_info/1 (vm/sysinfo.c). */
VmNativeTable vm_sysinfo_natives(void);

#endif /* VM_NATIVE_H */
