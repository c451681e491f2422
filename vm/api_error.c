/*
 * vm/api_error.c - filling the tvm_error of a public API call.
 */
#include "vm/api_error.h"

#include <stdarg.h>
#include <stdio.h>

tvm_status vm_api_fail(tvm_error *err, tvm_status st, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->status = st;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return st;
}

void vm_api_clear(tvm_error *err)
{
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
}
