/*
 * vm/vm.c - creating and freeing the VM core (vm/vm.h).  The layers above
 * are set up and torn down around it by the composition root
 * (api/root.c).
 */
#include "vm/vm.h"

#include <stdlib.h>

#include "vm/atom.h"
#include "vm/config.h"
#include "vm/module.h"

tvm_vm *vm_create(const tvm_config *cfg)
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
    vm->max_heap = cfg ? cfg->max_heap_words : 0;
    vm->max_procs = cfg && cfg->max_processes ? cfg->max_processes : VM_MAX_PROCESSES;
    vm->max_msg = cfg && cfg->max_message_words ? cfg->max_message_words : VM_MAX_MESSAGE_WORDS;
    vm->cmp_steps = vm->max_msg > SIZE_MAX / 2 ? SIZE_MAX : 2 * vm->max_msg;
    vm->control_wanted = cfg && cfg->control;
    vm_modules_init(vm);
    pthread_mutex_init(&vm->trace_lock, NULL);
    return vm;
}

void vm_release(tvm_vm *vm)
{
    vm_modules_destroy(vm);
    pthread_mutex_destroy(&vm->trace_lock);
    free(vm);
}
