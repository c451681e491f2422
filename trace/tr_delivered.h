/*
 * trace/tr_delivered.h - erlang:trace_delivered/1: a reply once the trace
 * events written so far have reached their destinations
 * (trace/tr_delivered.c has the guarantee and how it is kept).
 */
#ifndef TRACE_TR_DELIVERED_H
#define TRACE_TR_DELIVERED_H

#include <stdint.h>

#include "include/tracevm.h"

struct TrVm;

/* t's collectors run: trace_delivered calls made from now on wait for
 * it (trace/tr_vm.c, once the pipeline started).  Any thread. */
void tr_delivered_add(tvm_vm *vm, struct TrVm *t);

/* t's last drain is done (tr_pipeline_finish answered its marks): calls
 * made from now on do not wait for it.  Before t is freed. */
void tr_delivered_remove(tvm_vm *vm, struct TrVm *t);

/* erlang:trace_delivered(Tracee), a native of the trace layer (tr_bif.c's
 * table). */
tvm_status tr_nif_trace_delivered(tvm_env *env, int argc, const tvm_term *argv,
                                  tvm_term *result, void *data);

/* Requests made and not answered yet, in this OS process (for tests:
 * none may be left once every VM is destroyed).  Any thread. */
uint64_t tr_delivered_open(void);

#endif /* TRACE_TR_DELIVERED_H */
