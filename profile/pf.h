/*
 * profile/pf.h - what the profiler offers the layers above it: the
 * composition root stops a profile of a VM being destroyed.  Everything
 * else is the public API (include/tracevm.h, tvm_profile_*), which the
 * control endpoint uses like any embedder.
 */
#ifndef PROFILE_PF_H
#define PROFILE_PF_H

#include "include/tracevm.h"

/* Stops the running profile if it samples vm (api/root.c, while the
 * schedulers still run); the profile itself is its owner's to free. */
void pf_layer_stop(tvm_vm *vm);

#endif /* PROFILE_PF_H */
