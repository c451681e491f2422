/*
 * api/version.c - tvm_version: the library's version, from the header it
 * was built with (include/tracevm.h holds the one copy of the numbers;
 * SConstruct reads the SONAME and the pkg-config version from there).
 */
#include "include/tracevm.h"

#include <stddef.h>

const char *tvm_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = TVM_VERSION_MAJOR;
    if (minor)
        *minor = TVM_VERSION_MINOR;
    if (patch)
        *patch = TVM_VERSION_PATCH;
    return TVM_VERSION_STRING;
}
