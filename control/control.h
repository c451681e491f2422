/*
 * control/control.h - the control endpoint's layer interface: what the
 * composition root (api/root.c) calls.  The endpoint itself is public API
 * (tvm_control_* in include/tracevm.h); docs/control.md is the protocol.
 */
#ifndef CONTROL_CONTROL_H
#define CONTROL_CONTROL_H

#include <stddef.h>

#include "include/tracevm.h"

/* At tvm_new: starts the endpoint when tvm_config.control or
 * TRACEVM_CONTROL=1 asks for it (a failure is reported on stderr and the
 * VM runs without it). */
void ctl_layer_init(tvm_vm *vm);
/* At tvm_destroy, after the stop: frees the paths tvm_control_path
 * handed out (control/ctl_server.c). */
void ctl_layer_free(tvm_vm *vm);

/* The clients vm's endpoint is serving now, their threads not yet ended
 * (-1: no endpoint).  For tests and the fuzzer, which wait for a
 * client's thread to let go of its memory before they look for leaks. */
int ctl_client_count(tvm_vm *vm);

/* The per-user directory of the sockets (docs/control.md). */
tvm_status ctl_dir(char *out, size_t size, tvm_error *err);
/* Whether dir is a directory of this user that nobody else may enter or
 * write (not a symbolic link): the server serves only from such a
 * directory, and a client trusts only the sockets it finds in one. */
tvm_status ctl_dir_check(const char *dir, tvm_error *err);

#endif /* CONTROL_CONTROL_H */
