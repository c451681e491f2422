/*
 * vm/api.c - VM lifetime and native registration (tracevm.h).
 */
#include "include/tracevm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakpoints/bp.h"
#include "trace/tr_vm.h"
#include "vm/atom.h"
#include "vm/bif.h"
#include "vm/module.h"
#include "vm/sched.h"

tvm_status vm_native_install_locked(tvm_vm *vm, Export *e, FuncInfo *fi);

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

tvm_vm *tvm_new(const tvm_config *cfg)
{
    vm_atoms_init();
    size_t stack = cfg && cfg->stack_limit_words ? cfg->stack_limit_words : VM_STACK_LIMIT_WORDS;
    size_t heap = cfg && cfg->heap_min_words ? cfg->heap_min_words : VM_HEAP_MIN_WORDS;
    if (stack < 256 || stack > (1u << 30) || heap < 16 || heap > (1u << 30))
        return NULL;
    if (cfg && (cfg->schedulers < 0 || cfg->schedulers > 1024 ||
                (cfg->fiber_stack_bytes && cfg->fiber_stack_bytes < 16384)))
        return NULL;
    tvm_vm *vm = vm_calloc(1, sizeof(tvm_vm));
    vm->stack_limit = stack;
    vm->heap_min = heap;
    vm->output = cfg ? cfg->output : NULL;
    vm->schedulers = cfg && cfg->schedulers > 0 ? cfg->schedulers : 0;
    vm->fiber_stack = cfg ? cfg->fiber_stack_bytes : 0;
    vm->fiber_slabs = cfg && cfg->fiber_slabs;
    vm->crash_reports = !(cfg && cfg->quiet_crashes);
    vm->crash_stacks = cfg && cfg->crash_stacks;
    vm->stw_tracing = cfg && cfg->stop_the_world_tracing;
    vm_modules_init(vm);
    pthread_mutex_init(&vm->trace_lock, NULL);
    vm_bifs_register(vm);
    bp_engine_init(vm);
    return vm;
}

void tvm_destroy(tvm_vm *vm)
{
    if (!vm)
        return;
    /* A trace pipeline first: stopping it waits for thread progress.
     * Then the progress thread: it wakes processes through the
     * schedulers.  Then the breakpoint engine, once nothing executes. */
    tr_vm_destroy(vm);
    if (vm->progress_stop)
        vm->progress_stop(vm);
    vm_sched_stop(vm);
    bp_engine_destroy(vm);
    vm_modules_destroy(vm);
    pthread_mutex_destroy(&vm->trace_lock);
    free(vm);
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

tvm_status tvm_register_native(tvm_vm *vm, const char *mod, const char *fun,
                               int arity, tvm_native_fn fn, void *data,
                               tvm_error *err)
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
    if (!vm_atom_intern(mod, strlen(mod), &m) || !vm_atom_intern(fun, strlen(fun), &f))
        return fail(err, TVM_ERR_BADARG, "tvm_register_native: %s:%s/%d: name longer than 255 bytes",
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
        fi->code[0] = instr_make(OP_NATIVE, 0, 0, 0);
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
