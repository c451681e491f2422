/*
 * tests/unit/api/test_abi.c - versions and the option structs' size rule
 * (include/tracevm.h; docs/embedding.md, "Versions and compatibility").
 *
 * An option struct (tvm_config, tvm_trace_options, tvm_backtrace_opts)
 * begins with its size as the host's header had it.  An older host's
 * smaller struct is read up to that size and every later field takes its
 * default, whatever bytes follow it in memory; a newer host's larger one
 * is accepted while the fields this library does not know are zero; a
 * size of 0 is refused.  Each struct is tried through the API, with
 * defaults that show (a stack limit, a ring size, a timeout), and
 * vm_opts_copy, which all three use, byte for byte.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/helpers.h"
#include "vm/common.h"

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

/* ---- vm_opts_copy ---- */

typedef struct Small {
    size_t size;
    int a;
} Small;

/* Small with two fields added by a later version.  They start past
 * sizeof(Small), not in its tail padding (which an older host need not
 * have zeroed): the rule for adding fields. */
typedef struct Big {
    size_t size;
    int a;
    size_t c;
    int b;
} Big;

Test(opts_copy, older_struct_is_copied_and_the_rest_stays_zero)
{
    /* An older host's struct, its tail padding not zeroed, followed by
     * bytes that are not its own. */
    unsigned char mem[sizeof(Big)];
    memset(mem, 0xab, sizeof mem);
    size_t size = sizeof(Small);
    int a = 7;
    memcpy(mem, &size, sizeof size);
    memcpy(mem + offsetof(Small, a), &a, sizeof a);
    Big out = { 0 };
    char why[128] = "";
    cr_assert(vm_opts_copy(&out, sizeof out, mem, why, sizeof why));
    cr_assert_eq(out.a, 7);
    cr_assert_eq(out.b, 0);
    cr_assert_eq(out.c, 0);
    cr_assert_str_eq(why, "");
}

Test(opts_copy, newer_struct_with_unknown_fields_zero_is_accepted)
{
    Big newer = { .size = sizeof(Big), .a = 3 };
    Small out = { 0 };
    char why[128] = "";
    cr_assert(vm_opts_copy(&out, sizeof out, &newer, why, sizeof why));
    cr_assert_eq(out.a, 3);
    cr_assert_eq(out.size, sizeof(Big));
}

Test(opts_copy, refusals)
{
    Small out;
    char why[160];
    Big newer = { .size = sizeof(Big), .a = 3, .c = 1 };
    cr_assert_not(vm_opts_copy(&out, sizeof out, &newer, why, sizeof why));
    char want[160];
    snprintf(want, sizeof want, "size %zu: a field past this library's %zu bytes is set, "
             "from a newer header than the library's (%s)", sizeof(Big), sizeof(Small),
             TVM_VERSION_STRING);
    cr_assert_str_eq(why, want);

    Small zero = { 0 };
    cr_assert_not(vm_opts_copy(&out, sizeof out, &zero, why, sizeof why));
    cr_assert_str_eq(why, "size is 0; set it to the struct's sizeof");
    Small tiny = { .size = 4 };
    cr_assert_not(vm_opts_copy(&out, sizeof out, &tiny, why, sizeof why));
    cr_assert_str_eq(why, "size 4 is smaller than the size field");
    Small huge = { .size = VM_OPTS_MAX + 1 };
    cr_assert_not(vm_opts_copy(&out, sizeof out, &huge, why, sizeof why));
    cr_assert_str_eq(why, "size 4097 is larger than any version of the struct");
}

/* ---- tvm_config ---- */

static const char *const rec =
    "module rec\n"
    "export deep/1\n"
    "function deep/1 regs 2\n"
    "    jeqi r0, 0, done\n"
    "    addi r1, r0, -1\n"
    "    call r1, r1, deep/1\n"
    "    addi r0, r1, 1\n"
    "done:\n"
    "    ret r0\n"
    "end\n";

/* deep(2000) on a VM made from config bytes `mem`: "2000", or
 * "error:system_limit" under a stack limit of 4096 words (1024 frames). */
static void deep_2000(const void *mem, const char *want)
{
    tvm_vm *v = tvm_new(mem);
    cr_assert_not_null(v);
    load_ok(v, "rec.tasm", rec);
    tvm_env *e = tvm_env_new(v);
    char out[128];
    int64_t n = 2000;
    call_fmt(e, "rec", "deep", 1, &n, out, sizeof out);
    cr_assert_str_eq(out, want);
    tvm_env_free(e);
    tvm_destroy(v);
}

Test(config, older_struct_takes_defaults_for_what_it_lacks)
{
    /* Bytes that are all invalid as a config (a stack limit, a heap size
     * and a scheduler count out of range) past the host's size. */
    unsigned char mem[sizeof(tvm_config) + 16];
    memset(mem, 0xff, sizeof mem);
    size_t size = sizeof(size_t);          /* a header with the size field only */
    memcpy(mem, &size, sizeof size);
    deep_2000(mem, "2000");                /* the default stack limit, 4 Mi words */

    /* A header whose struct ended after stack_limit_words. */
    size = offsetof(tvm_config, heap_min_words);
    size_t limit = 4096;
    memcpy(mem, &size, sizeof size);
    memcpy(mem + offsetof(tvm_config, stack_limit_words), &limit, sizeof limit);
    deep_2000(mem, "error:system_limit");

    /* The same bytes with the size covering them: invalid. */
    size = sizeof(tvm_config);
    memcpy(mem, &size, sizeof size);
    cr_assert_null(tvm_new((const tvm_config *)mem));
}

Test(config, newer_struct_and_refusals)
{
    struct {
        tvm_config c;
        uint64_t later;  /* a field of a newer header */
    } newer = { .c = { .size = sizeof newer, .stack_limit_words = 4096 } };
    deep_2000(&newer, "error:system_limit");
    newer.later = 1;
    cr_assert_null(tvm_new(&newer.c));
    cr_assert_null(tvm_new(&(tvm_config){ .schedulers = 2 }));   /* size 0 */
    cr_assert_null(tvm_new(&(tvm_config){ .size = 3 }));
    deep_2000(NULL, "2000");
}

/* ---- tvm_trace_options ---- */

Test(trace_options, older_struct_newer_struct_and_refusals)
{
    tvm_vm *v = tvm_new(NULL);
    tvm_error err;
    /* An older header's struct ending before ring_bytes; an invalid ring
     * size (not a power of two) and a bad policy follow in memory. */
    unsigned char mem[sizeof(tvm_trace_options)];
    memset(mem, 0, sizeof mem);
    tvm_trace_options *o = (tvm_trace_options *)mem;
    FILE *f = tmpfile();
    o->size = offsetof(tvm_trace_options, ring_bytes);
    o->format = TVM_TRACE_TEXT;
    o->file = f;
    o->ring_bytes = 1000;
    o->policy = (tvm_trace_policy)7;
    cr_assert_eq(tvm_trace_start(v, o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_stop(v), TVM_OK);
    o->size = offsetof(tvm_trace_options, policy);
    cr_assert_eq(tvm_trace_start(v, o, &err), TVM_ERR_BADARG);
    cr_assert(strstr(err.message, "ring size 1000 must be a power of two"), "%s", err.message);
    o->size = sizeof(tvm_trace_options);
    cr_assert_eq(tvm_trace_start(v, o, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_start: bad policy 7 (expected drop or lossless)");

    struct {
        tvm_trace_options o;
        uint64_t later;
    } newer = { .o = { .size = sizeof newer, .file = f } };
    cr_assert_eq(tvm_trace_start(v, &newer.o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_stop(v), TVM_OK);
    newer.later = 1;
    cr_assert_eq(tvm_trace_start(v, &newer.o, &err), TVM_ERR_BADARG);
    char want[256];
    snprintf(want, sizeof want, "tvm_trace_start: tvm_trace_options: size %zu: a field past "
             "this library's %zu bytes is set, from a newer header than the library's (%s)",
             sizeof newer, sizeof(tvm_trace_options), TVM_VERSION_STRING);
    cr_assert_str_eq(err.message, want);
    cr_assert_eq(tvm_trace_start(v, &(tvm_trace_options){ .file = f }, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_start: tvm_trace_options: size is 0; "
                                  "set it to the struct's sizeof");
    fclose(f);
    tvm_destroy(v);
}

/* ---- tvm_backtrace_opts ---- */

static const char *const waiter =
    "module w\n"
    "export wait/0\n"
    "function wait/0 regs 2\n"
    "top:\n"
    "    recv r0, none\n    accept\n    ret r0\n"
    "none:\n"
    "    loadk r1, infinity\n    wait r1, never\n    jump top\n"
    "never:\n    ret r1\n"
    "end\n";

Test(backtrace_opts, older_struct_newer_struct_and_refusals)
{
    tvm_vm *v = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 1 });
    load_ok(v, "w.tasm", waiter);
    tvm_env *e = tvm_env_new(v);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(e, "w", "wait", 0, NULL, &pid), TVM_OK);
    char buf[8192];
    tvm_error err;
    /* A suspended process is read from its saved context, so the timeout
     * (garbage past an older header's size) is never needed; native_lines
     * past it stays off: no " at file:line" in the native frames. */
    tvm_backtrace_opts old;
    memset(&old, 0xff, sizeof old);
    old.size = offsetof(tvm_backtrace_opts, timeout_ms);
    tvm_status st;
    while ((st = tvm_backtrace(v, pid, buf, sizeof buf, &old, &err)) == TVM_OK &&
           !strstr(buf, "w:wait/0"))
        ;   /* until the process reached its wait */
    cr_assert_eq(st, TVM_OK, "%s", err.message);
    cr_assert_null(strstr(buf, " at "), "%s", buf);
    old = (tvm_backtrace_opts){ .size = sizeof old, .native_lines = true };
    cr_assert_eq(tvm_backtrace(v, pid, buf, sizeof buf, &old, &err), TVM_OK, "%s", err.message);
    cr_assert_not_null(strstr(buf, " at "), "%s", buf);

    struct {
        tvm_backtrace_opts o;
        uint64_t later;
    } newer = { .o = { .size = sizeof newer } };
    cr_assert_eq(tvm_backtrace(v, pid, buf, sizeof buf, &newer.o, &err), TVM_OK);
    newer.later = 1;
    cr_assert_eq(tvm_backtrace(v, pid, buf, sizeof buf, &newer.o, &err), TVM_ERR_BADARG);
    char want[256];
    snprintf(want, sizeof want, "tvm_backtrace: %llu: tvm_backtrace_opts: size %zu: a field "
             "past this library's %zu bytes is set, from a newer header than the library's (%s)",
             (unsigned long long)pid, sizeof newer, sizeof(tvm_backtrace_opts),
             TVM_VERSION_STRING);
    cr_assert_str_eq(err.message, want);
    cr_assert_eq(tvm_backtrace(v, pid, buf, sizeof buf, &(tvm_backtrace_opts){ 0 }, &err),
                 TVM_ERR_BADARG);
    snprintf(want, sizeof want, "tvm_backtrace: %llu: tvm_backtrace_opts: size is 0; "
             "set it to the struct's sizeof", (unsigned long long)pid);
    cr_assert_str_eq(err.message, want);

    tvm_term msg, result;
    tvm_make_atom(e, "go", &msg);
    cr_assert_eq(tvm_send(e, pid, msg), TVM_OK);
    cr_assert_eq(tvm_join(e, pid, &result), TVM_OK);
    tvm_env_free(e);
    tvm_destroy(v);
}
