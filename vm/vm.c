/*
 * vm/vm.c - creating and freeing the VM core (vm/vm.h).  The layers above
 * are set up and torn down around it by the composition root
 * (api/root.c).
 */
#include "vm/vm.h"

#include <stdio.h>
#include <stdlib.h>

#include "vm/atom.h"
#include "vm/config.h"
#include "vm/module.h"
#include "vm/progress.h"
#include "vm/registry.h"

/* Whether cfg's values are in range; false with the first one that is
 * not named in why (tvm_create's message, docs/embedding.md). */
static bool config_ok(const tvm_config *cfg, char *why, size_t n)
{
    if (cfg->stack_limit_words && (cfg->stack_limit_words < 256 ||
                                   cfg->stack_limit_words > (1u << 30)))
        snprintf(why, n, "stack_limit_words %zu is outside 256..2^30 (0: the default)",
                 cfg->stack_limit_words);
    else if (cfg->heap_min_words && (cfg->heap_min_words < 16 ||
                                     cfg->heap_min_words > (1u << 30)))
        snprintf(why, n, "heap_min_words %zu is outside 16..2^30 (0: the default)",
                 cfg->heap_min_words);
    else if (cfg->schedulers < 0 || cfg->schedulers > 1024)
        snprintf(why, n, "schedulers %d is outside 0..1024 (0: one per core)", cfg->schedulers);
    else if (cfg->fiber_stack_bytes && (cfg->fiber_stack_bytes < 16384 ||
                                        cfg->fiber_stack_bytes > VM_FIBER_STACK_MAX))
        snprintf(why, n, "fiber_stack_bytes %zu is outside 16384..2^50 (0: the default)",
                 cfg->fiber_stack_bytes);
    else
        return true;
    return false;
}

tvm_vm *vm_create(const tvm_config *cfgp, char *why, size_t n)
{
    /* The embedder's config as this library's struct: fields an older
     * header lacks are zero, their defaults (vm_opts_copy). */
    tvm_config cfg = { 0 };
    if (cfgp && !vm_opts_copy(&cfg, sizeof cfg, cfgp, why, n))
        return NULL;
    if (!config_ok(&cfg, why, n))
        return NULL;
    vm_atoms_init();
    size_t stack = cfg.stack_limit_words ? cfg.stack_limit_words : VM_STACK_LIMIT_WORDS;
    size_t heap = cfg.heap_min_words ? cfg.heap_min_words : VM_HEAP_MIN_WORDS;
    tvm_vm *vm = vm_calloc(1, sizeof(tvm_vm));
    vm->stack_limit = stack;
    vm->heap_min = heap;
    vm->output = cfg.output;
    vm->schedulers = cfg.schedulers > 0 ? cfg.schedulers : 0;
    vm->fiber_stack = cfg.fiber_stack_bytes;
    vm->fiber_slabs = cfg.fiber_slabs;
    vm->crash_reports = !cfg.quiet_crashes;
    vm->crash_stacks = cfg.crash_stacks;
    vm->stw_tracing = cfg.stop_the_world_tracing;
    vm->max_heap = cfg.max_heap_words;
    vm->max_procs = cfg.max_processes ? cfg.max_processes : VM_MAX_PROCESSES;
    vm->max_exports = cfg.max_exports ? cfg.max_exports : VM_MAX_EXPORTS;
    vm->max_code_bytes = cfg.max_code_bytes ? cfg.max_code_bytes : VM_MAX_CODE_BYTES;
    vm->max_msg = cfg.max_message_words ? cfg.max_message_words : VM_MAX_MESSAGE_WORDS;
    vm->cmp_steps = vm->max_msg > SIZE_MAX / 2 ? SIZE_MAX : 2 * vm->max_msg;
    vm->cmp_first = vm->cmp_steps < VM_BIF_LEND_WORK ? vm->cmp_steps : VM_BIF_LEND_WORK;
    vm->msg_first = vm->max_msg < VM_BIF_LEND_WORK ? vm->max_msg : VM_BIF_LEND_WORK;
    vm->control_wanted = cfg.control;
    vm_modules_init(vm);
    vm_registry_init(vm);
    pthread_mutex_init(&vm->link_lock, NULL);
    pthread_mutex_init(&vm->trace_lock, NULL);
    return vm;
}

void vm_release(tvm_vm *vm)
{
    vm_progress_free(vm);
    vm_modules_destroy(vm);
    vm_registry_free(vm);
    pthread_mutex_destroy(&vm->link_lock);
    pthread_mutex_destroy(&vm->trace_lock);
    free(vm);
}
