/*
 * api/root.c - the composition root: tvm_new and tvm_destroy wire every
 * layer of tracevm from one table (after Lua's linit.c).
 *
 * Each layer above the VM core appears once, bottom up, with what it
 * needs done at the VM's creation and end and the natives it offers to VM
 * code.  No layer sets itself up or registers itself: this file is the
 * only one that knows them all, and the only one above every folder but
 * the embedders' (docs/architecture.md).
 *
 * Order of the end (tvm_destroy): every layer's `stop` runs top down while
 * the schedulers still run (a trace pipeline's stop waits for thread
 * progress, which needs them); then the thread-progress service (it wakes
 * processes through the schedulers) and the schedulers themselves stop;
 * then every layer's `free` runs top down, once no thread executes VM code
 * (the breakpoint engine disarms and frees its records directly); the core
 * goes last.
 */
#include "include/tracevm.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "breakpoints/bp.h"
#include "breakpoints/bp_session.h"
#include "control/control.h"
#include "loader/loader.h"
#include "profile/pf.h"
#include "trace/tr.h"
#include "trace/tr_vm.h"
#include "vm/dict.h"
#include "vm/heap.h"
#include "vm/links.h"
#include "vm/monitors.h"
#include "vm/native.h"
#include "vm/procinfo.h"
#include "vm/progress.h"
#include "vm/qsbr.h"
#include "vm/registry.h"
#include "vm/seqtrace.h"
#include "vm/sched.h"
#include "vm/sysmon.h"
#include "vm/vm.h"

typedef struct Layer {
    const char *name;
    void (*init)(tvm_vm *vm);       /* at creation, bottom up */
    void (*stop)(tvm_vm *vm);       /* at the end, schedulers running, top down */
    void (*free)(tvm_vm *vm);       /* at the end, schedulers stopped, top down */
    VmNativeTable (*natives)(void); /* installed after every init */
} Layer;

static const Layer layers[] = {
    { "vm", NULL, NULL, NULL, vm_bif_natives },
    { "vm processes", NULL, NULL, NULL, vm_proc_natives },
    { "vm registered names", NULL, NULL, NULL, vm_registry_natives },
    { "vm links", NULL, NULL, NULL, vm_links_natives },
    { "vm monitors", NULL, NULL, NULL, vm_monitors_natives },
    { "vm process info", NULL, NULL, NULL, vm_procinfo_natives },
    { "vm heap", NULL, NULL, NULL, vm_heap_natives },
    { "vm process dictionary", NULL, NULL, NULL, vm_dict_natives },
    { "vm time", NULL, NULL, NULL, vm_time_natives },
    { "vm system monitor", vm_sysmon_init, NULL, vm_sysmon_free, vm_sysmon_natives },
    { "vm system info", NULL, NULL, NULL, vm_sysinfo_natives },
    { "vm seq_trace", NULL, NULL, NULL, vm_seq_natives },
    { "loader", NULL, NULL, NULL, ld_natives },
    { "trace", tr_vm_init, tr_vm_destroy, tr_vm_release, tr_natives },
    { "breakpoints", bp_engine_init, bp_sessions_stop, bp_engine_destroy, bp_natives },
    { "profile", NULL, pf_layer_stop, NULL, NULL },
    { "control", ctl_layer_init, tvm_control_stop, ctl_layer_free, NULL },
};

enum { NLAYERS = sizeof layers / sizeof layers[0] };

static void fail(tvm_error *err, tvm_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(tvm_error *err, tvm_status st, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    err->status = st;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

tvm_status tvm_create(const tvm_config *cfg, tvm_vm **out, tvm_error *err)
{
    char why[200];
    if (!out) {
        fail(err, TVM_ERR_BADARG, "tvm_create: NULL out");
        return TVM_ERR_BADARG;
    }
    tvm_vm *vm = vm_create(cfg, why, sizeof why);
    if (!vm) {
        *out = NULL;
        fail(err, TVM_ERR_BADARG, "tvm_create: tvm_config: %s", why);
        return TVM_ERR_BADARG;
    }
    for (size_t i = 0; i < NLAYERS; i++)
        if (layers[i].init)
            layers[i].init(vm);
    for (size_t i = 0; i < NLAYERS; i++)
        if (layers[i].natives)
            vm_natives_install(vm, layers[i].natives());
    *out = vm;
    fail(err, TVM_OK, "%s", "");
    return TVM_OK;
}

tvm_vm *tvm_new(const tvm_config *cfg)
{
    tvm_vm *vm;
    return tvm_create(cfg, &vm, NULL) == TVM_OK ? vm : NULL;
}

/* Where tvm_destroy must not run, or NULL.  It stops the schedulers and
 * the collectors and waits for each, and frees what the caller's frames
 * still use: from a process (a native, the call hook), a collector (a
 * trace callback) or a tvm_call on a foreign thread (its natives and
 * hook) it would wait for its own thread, or free the VM under it.  Any
 * VM's context counts: which VM a thread serves is not recorded here. */
static const char *destroy_refused(void)
{
    if (vm_running_process())
        return "called from a process (a native or the call hook)";
    if (tr_in_collector())
        return "called from a trace callback (a collector thread)";
    if (vm_qsbr_in_call())
        return "called from inside tvm_call (a native or the call hook)";
    return NULL;
}

void tvm_destroy(tvm_vm *vm)
{
    if (!vm)
        return;
    const char *refused = destroy_refused();
    if (refused) {
        /* No status to return (void, ABI): the refusal is said where an
         * embedder's misuse is seen, and the VM runs on untouched. */
        fprintf(stderr, "tracevm: tvm_destroy: %s, which it would wait for; nothing was "
                        "destroyed (call it from a thread of the embedder)\n", refused);
        return;
    }
    for (size_t i = NLAYERS; i-- > 0;)
        if (layers[i].stop)
            layers[i].stop(vm);
    vm_progress_stop(vm);
    vm_sched_stop(vm);
    for (size_t i = NLAYERS; i-- > 0;)
        if (layers[i].free)
            layers[i].free(vm);
    vm_release(vm);
}
