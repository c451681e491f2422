/*
 * vm/native.c - natives: registration by an embedder (tvm_register_native)
 * and of the built-in tables at creation, and status names.
 */
#include "include/tracevm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/module.h"
#include "vm/native.h"

const char *tvm_status_name(tvm_status s)
{
    switch (s) {
    case TVM_OK: return "TVM_OK";
    case TVM_EXCEPTION: return "TVM_EXCEPTION";
    case TVM_ERR_LOAD: return "TVM_ERR_LOAD";
    case TVM_ERR_IO: return "TVM_ERR_IO";
    case TVM_ERR_BADARG: return "TVM_ERR_BADARG";
    case TVM_ERR_TYPE: return "TVM_ERR_TYPE";
    case TVM_ERR_NOTFOUND: return "TVM_ERR_NOTFOUND";
    case TVM_ERR_EXISTS: return "TVM_ERR_EXISTS";
    case TVM_ERR_LIMIT: return "TVM_ERR_LIMIT";
    case TVM_ERR_BUSY: return "TVM_ERR_BUSY";
    }
    return "TVM_?";
}

static tvm_status fail(tvm_error *err, tvm_status st, const char *fmt, const char *a,
                       const char *b, int arity)
{
    if (err) {
        err->status = st;
        snprintf(err->message, sizeof err->message, fmt, a, b, arity);
    }
    return st;
}

/* Registers a native; `lends`: an embedder's (FuncInfo.lends). */
static tvm_status register_native(tvm_vm *vm, const char *mod, const char *fun, int arity,
                                  tvm_native_fn fn, void *data, bool lends, tvm_error *err)
{
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    if (!vm || !mod || !fun || !fn)
        return fail(err, TVM_ERR_BADARG, "tvm_register_native: NULL argument%s%s", "", "", 0);
    if (arity < 0 || arity > VM_MAX_ARITY)
        return fail(err, TVM_ERR_BADARG, "tvm_register_native: %s:%s/%d: arity out of range 0..255",
                    mod, fun, arity);
    Atom m, f;
    if (strlen(mod) > VM_ATOM_MAX_LEN || strlen(fun) > VM_ATOM_MAX_LEN)
        return fail(err, TVM_ERR_BADARG, "tvm_register_native: %s:%s/%d: name longer than 255 bytes",
                    mod, fun, arity);
    if (!vm_atom_intern(mod, strlen(mod), &m) || !vm_atom_intern(fun, strlen(fun), &f))
        return fail(err, TVM_ERR_LIMIT, "tvm_register_native: %s:%s/%d: atom table full",
                    mod, fun, arity);
    vm_code_perm_acquire(vm);
    pthread_mutex_lock(&vm->code_lock);
    tvm_status st;
    if (vm_module_find_locked(vm, m)) {
        st = fail(err, TVM_ERR_EXISTS,
                  "tvm_register_native: %s:%s/%d: module is loaded as bytecode", mod, fun, arity);
    } else {
        FuncInfo *fi = vm_func_alloc(1);
        fi->mod = m;
        fi->name = f;
        fi->arity = (uint16_t)arity;
        fi->nregs = (uint16_t)arity;
        fi->native = fn;
        fi->native_data = data;
        fi->lends = lends;
        vm_func_set_entry(fi, instr_make(OP_NATIVE, 0, 0, 0));
        st = vm_native_install_locked(vm, vm_export_get(vm, m, f, (uint32_t)arity), fi);
        if (st != TVM_OK) {
            free(fi);
            fail(err, st, "tvm_register_native: %s:%s/%d: already defined", mod, fun, arity);
        }
    }
    pthread_mutex_unlock(&vm->code_lock);
    vm_code_perm_release(vm);
    return st;
}

tvm_status tvm_register_native(tvm_vm *vm, const char *mod, const char *fun,
                               int arity, tvm_native_fn fn, void *data,
                               tvm_error *err)
{
    return register_native(vm, mod, fun, arity, fn, data, true, err);
}

/* The VM's own natives lend nothing at their call: the few whose work
 * their arguments choose lend by themselves when it is long (vm/bif.c,
 * lend_if_long); the others are short or switch out to wait. */
void vm_natives_install(tvm_vm *vm, VmNativeTable t)
{
    for (size_t i = 0; i < t.n; i++) {
        const VmNativeDef *d = &t.defs[i];
        tvm_error err;
        if (register_native(vm, d->mod, d->name, d->arity, d->fn, NULL, false, &err) != TVM_OK)
            vm_die(err.message);
    }
}
