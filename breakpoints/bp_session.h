/*
 * breakpoints/bp_session.h - trace sessions' ends and the stopper thread:
 * what removes everything a session set (breakpoints here, process flags
 * in trace/), writes its last record and frees its sink, whether a limit,
 * its owner or its creator ended it (breakpoints/bp_session.c).
 */
#ifndef BREAKPOINTS_BP_SESSION_H
#define BREAKPOINTS_BP_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "trace/tr_session.h"
#include "vm/native.h"

/*
 * The live session s names: its sid, or false with a status and a reason
 * (TVM_ERR_NOTFOUND: destroyed or never created; TVM_ERR_BADARG: a limit
 * or its owner stopped it).  Any thread.
 */
bool bp_session_sid(tvm_vm *vm, tvm_session s, unsigned *sid, tvm_status *st, char *why,
                    size_t whylen);

/*
 * Destroys session `id` (explicitly: reason destroyed; or its owner
 * exited): its settings, its last record, its sink.  Returns when all of
 * it is done: TVM_OK; TVM_ERR_IO when its output failed (destroyed all
 * the same), with the failure's message in whybuf (tr_outfail_get:
 * "writing the trace to ... failed: <the OS's reason>; ..."); or
 * TVM_ERR_NOTFOUND with a reason when there is no such session.  From a
 * thread that is not a scheduler, or from a process if the session has
 * no pipeline (a tracer process: nothing to join then).
 */
tvm_status bp_session_destroy(tvm_vm *vm, uint64_t id, TrStopReason why, char *whybuf,
                              size_t whylen);

/* The stopper thread's life (api/root.c: started with the engine, quit
 * before the trace layer stops the pipelines). */
void bp_sessions_start(tvm_vm *vm);
void bp_sessions_stop(tvm_vm *vm);

/* trace:session_create/3 and trace:session_destroy/1, in the layer's
 * table of natives (bp_api.c's bp_natives). */
tvm_status bp_nif_session_create(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                                 void *data);
tvm_status bp_nif_session_destroy(tvm_env *env, int argc, const tvm_term *argv,
                                  tvm_term *result, void *data);

#endif /* BREAKPOINTS_BP_SESSION_H */
