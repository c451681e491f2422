/*
 * tests/unit/api/test_null_out.c - NULL where the embedding API writes
 * its answer (include/tracevm.h): each of these crashed the OS process
 * before.  The functions that return a length or a count treat a NULL
 * output as room for nothing (tvm_modules already did); the ones that
 * return a status refuse it with TVM_ERR_BADARG; tvm_nil without an env
 * gives a handle every function refuses; tvm_profile_get_stats does
 * nothing.
 */
#include <sys/stat.h>

#include "tests/unit/helpers.h"

TVM_FIXTURE(null_out, (&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 1 }));

/* Terms: the formatters measure, tvm_nil(NULL) is no env's handle. */
Test(null_out, formatting_into_no_buffer_only_measures)
{
    tvm_term t;
    cr_assert_eq(tvm_parse_term(env, "{ok,[1,2]}", &t, NULL), TVM_OK);
    cr_assert_eq(tvm_format_term(env, t, NULL, 64), 10);
    tvm_term r;
    cr_assert_eq(tvm_call(env, "erlang", "error", 1, &t, &r), TVM_EXCEPTION);
    char buf[128];
    size_t need = tvm_format_exception(env, buf, sizeof buf);
    cr_assert_gt(need, 0);
    cr_assert_eq(tvm_format_exception(env, NULL, 64), need);
    /* No exception pending: 0, as with a buffer. */
    tvm_clear_exception(env);
    cr_assert_eq(tvm_format_exception(env, NULL, 64), 0);

    tvm_term nil = tvm_nil(NULL);
    cr_assert_eq(tvm_type_of(env, nil), TVM_T_INVALID);
    cr_assert_eq(tvm_format_term(env, nil, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "");
    cr_assert_eq(tvm_type_of(env, tvm_nil(env)), TVM_T_NIL);
}

/* tvm_processes counts into no array, as tvm_modules does. */
Test(null_out, processes_counted_without_an_array)
{
    static const char src[] = "module w\n"
                              "export waiter/0\n"
                              "function waiter/0 regs 1\n"
                              "    loadk r0, infinity\n"
                              "    wait r0, done\n"
                              "done:\n"
                              "    ret r0\n"
                              "end\n";
    load_ok(vm, "w.tasm", src);
    tvm_pid a, b;
    cr_assert_eq(tvm_spawn(env, "w", "waiter", 0, NULL, &a), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "w", "waiter", 0, NULL, &b), TVM_OK);
    cr_assert_eq(tvm_processes(vm, NULL, 5), 2);
    cr_assert_eq(tvm_modules(vm, NULL, 5), 1);
    tvm_term m, r;
    cr_assert_eq(tvm_make_atom(env, "go", &m), TVM_OK);
    cr_assert_eq(tvm_send(env, a, m), TVM_OK);
    cr_assert_eq(tvm_send(env, b, m), TVM_OK);
    cr_assert_eq(tvm_join(env, a, &r), TVM_OK);
    cr_assert_eq(tvm_join(env, b, &r), TVM_OK);
}

/* tvm_control_list counts into no array: this VM serves, in a directory
 * of the test's own (no other program's peers). */
Test(null_out, control_peers_counted_without_an_array)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tvm-null-out.%ld", (long)getpid());
    cr_assert_eq(mkdir(dir, 0700), 0, "mkdir %s", dir);
    setenv("TRACEVM_CONTROL_DIR", dir, 1);
    tvm_error err;
    cr_assert_eq(tvm_control_start(vm, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_control_list(NULL, 5), 1);
    tvm_control_peer peer;
    cr_assert_eq(tvm_control_list(&peer, 1), 1);
    cr_assert_eq(peer.pid, (long)getpid());
    tvm_control_stop(vm);
    cr_assert_eq(rmdir(dir), 0);
}

/* Status-returning parsers refuse a NULL result; the stats do nothing. */
Test(null_out, parsers_refuse_a_null_result)
{
    tvm_error err;
    cr_assert_eq(tvm_trace_flags_parse("call", NULL, &err), TVM_ERR_BADARG);
    cr_assert_eq(err.status, TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_trace_flags_parse: NULL flags");
    cr_assert_eq(tvm_trace_flags_parse("call", NULL, NULL), TVM_ERR_BADARG);
    unsigned flags = 0;
    cr_assert_eq(tvm_trace_flags_parse("call,procs", &flags, &err), TVM_OK);
    cr_assert_eq(flags, TVM_TRACE_CALL | TVM_TRACE_PROCS);

    tvm_profile_format fmt = TVM_PROFILE_FOLDED;
    cr_assert_eq(tvm_profile_format_of("out.svg", NULL), TVM_ERR_BADARG);
    cr_assert_eq(tvm_profile_format_parse("svg", NULL), TVM_ERR_BADARG);
    cr_assert_eq(tvm_profile_format_of("out.svg", &fmt), TVM_OK);
    cr_assert_eq(fmt, TVM_PROFILE_SVG);
    cr_assert_eq(tvm_profile_format_parse("pprof", &fmt), TVM_OK);
    cr_assert_eq(fmt, TVM_PROFILE_PPROF);

    tvm_profile *prof;
    cr_assert_eq(tvm_profile_start(vm,
                                   &(tvm_profile_options){ .size = sizeof(tvm_profile_options),
                                                           .kind = TVM_PROFILE_OFF },
                                   &prof, &err),
                 TVM_OK, "%s", err.message);
    tvm_profile_get_stats(prof, NULL);
    tvm_profile_stats st;
    tvm_profile_get_stats(prof, &st);
    cr_assert_eq(st.kind, TVM_PROFILE_OFF);
    tvm_profile_free(prof);
}
