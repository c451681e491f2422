/*
 * tests/unit/api/test_abi.c - the version the library reports and the
 * header's version macros.
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "include/tracevm.h"

Test(version, library_matches_header)
{
    int major = -1, minor = -1, patch = -1;
    const char *s = tvm_version(&major, &minor, &patch);
    cr_assert_str_eq(s, TVM_VERSION_STRING);
    cr_assert_eq(major, TVM_VERSION_MAJOR);
    cr_assert_eq(minor, TVM_VERSION_MINOR);
    cr_assert_eq(patch, TVM_VERSION_PATCH);
    char buf[64];
    snprintf(buf, sizeof buf, "%d.%d.%d", major, minor, patch);
    cr_assert_str_eq(buf, s);
    cr_assert_str_eq(tvm_version(NULL, NULL, NULL), s);
    cr_assert_eq(TVM_VERSION, TVM_VERSION_AT(major, minor, patch));
    cr_assert(TVM_VERSION_AT(0, 1, 0) < TVM_VERSION_AT(0, 1, 1));
    cr_assert(TVM_VERSION_AT(0, 9, 999) < TVM_VERSION_AT(1, 0, 0));
}
