/*
 * vm/api_error.h - filling the tvm_error of a public API call: one
 * definition for every layer's API functions.
 */
#ifndef VM_API_ERROR_H
#define VM_API_ERROR_H

#include "include/tracevm.h"

/* Sets err (may be NULL) to st and the printf-formatted message, cut to
 * its 4,096 bytes; returns st, for `return vm_api_fail(err, ...)`. */
tvm_status vm_api_fail(tvm_error *err, tvm_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Sets err (may be NULL) to success: TVM_OK and "". */
void vm_api_clear(tvm_error *err);

#endif /* VM_API_ERROR_H */
