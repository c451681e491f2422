/*
 * tests/unit/vm/test_limits.c - the limits that end only the process (or
 * the call) that hits them (docs/safety.md): max_message_words on every
 * copy between processes (sends, spawn arguments, exit values and
 * reasons), max_processes, and the bounds on walks over terms whose
 * sharing makes them astronomically big flat (a comparison's steps, a
 * printed term's bytes).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "vm/config.h"
#include "vm/process.h"
#include "vm/sched.h"

/* Functions of N build what they need inside the process: an argument
 * over the limit could not be passed to a process in the first place.
 * (A call's register window starts at its argument register and
 * overwrites the caller's registers from there up.) */
static const char *const lim_src =
    "module lim\n"
    "export dag/1, list/1, send_list/1, send_dag/1, spawn_ret/1, ret/1, ret_list/1\n"
    "export exit_with/1, eq_dags/1, lt_dags/1, sort_dags/1, eq_same/1, waiter/0\n"
    "export spawn_waiter/0, down_of/1, grow/1, flat_iodag/1, flat_nils/1, fmt_iodag/1\n"
    /* grow(Acc): conses forever */
    "function grow/1 regs 2\n"
    "loop:\n"
    "    loadi r1, 7\n"
    "    cons r0, r1, r0\n"
    "    jump loop\n"
    "end\n"
    TASM_DAG_LIST
    "function send_self/1 regs 3\n"
    "    self r1\n"
    "    move r2, r0\n"
    "    callx r1, r1, erlang:send/2\n"
    "    loadk r0, sent\n"
    "    ret r0\n"
    "end\n"
    "function send_list/1 regs 1\n"
    "    call r0, r0, list/1\n"
    "    tailcall r0, send_self/1\n"
    "end\n"
    "function send_dag/1 regs 1\n"
    "    call r0, r0, dag/1\n"
    "    tailcall r0, send_self/1\n"
    "end\n"
    /* spawn_ret(N): spawns ret([1..N]) */
    "function spawn_ret/1 regs 4\n"
    "    call r0, r0, list/1\n"
    "    loadk r1, lim\n"
    "    loadk r2, ret\n"
    "    loadk r3, []\n"
    "    cons r3, r0, r3\n"
    "    callx r1, r1, erlang:spawn/3\n"
    "    loadk r0, spawned\n"
    "    ret r0\n"
    "end\n"
    "function ret/1 regs 1\n"
    "    ret r0\n"
    "end\n"
    "function ret_list/1 regs 1\n"
    "    call r0, r0, list/1\n"
    "    ret r0\n"
    "end\n"
    /* exit_with(N): exit([1..N]) */
    "function exit_with/1 regs 2\n"
    "    call r0, r0, list/1\n"
    "    loadk r1, exit\n"
    "    raise r1, r0\n"
    "end\n"
    /* eq_dags(N), lt_dags(N), sort_dags(N): two dag(N) built apart */
    "function eq_dags/1 regs 8\n"
    "    move r4, r0\n"
    "    call r1, r4, dag/1\n"
    "    move r4, r0\n"
    "    call r2, r4, dag/1\n"
    "    jeq r1, r2, yes\n"
    "    loadk r0, false\n"
    "    ret r0\n"
    "yes:\n"
    "    loadk r0, true\n"
    "    ret r0\n"
    "end\n"
    "function eq_same/1 regs 2\n"
    "    call r0, r0, dag/1\n"
    "    move r1, r0\n"
    "    jeq r0, r1, yes\n"
    "    loadk r0, false\n"
    "    ret r0\n"
    "yes:\n"
    "    loadk r0, true\n"
    "    ret r0\n"
    "end\n"
    "function lt_dags/1 regs 8\n"
    "    move r4, r0\n"
    "    call r1, r4, dag/1\n"
    "    move r4, r0\n"
    "    call r2, r4, dag/1\n"
    "    callx r0, r1, erlang:'<'/2\n"
    "    ret r0\n"
    "end\n"
    "function sort_dags/1 regs 8\n"
    "    move r4, r0\n"
    "    call r1, r4, dag/1\n"
    "    move r4, r0\n"
    "    call r2, r4, dag/1\n"
    "    loadk r3, []\n"
    "    cons r2, r2, r3\n"
    "    cons r0, r1, r2\n"
    "    callx r0, r0, lists:sort/1\n"
    "    ret r0\n"
    "end\n"
    /* iodag(N): L = [L, L] N levels deep over []: 2^(N+1) - 2 list
     * cells flat, not one byte */
    "function iodag/1 regs 3\n"
    "    loadk r1, []\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    addi r0, r0, -1\n"
    "    loadk r2, []\n"
    "    cons r2, r1, r2\n"
    "    cons r1, r1, r2\n"
    "    jump loop\n"
    "done:\n"
    "    ret r1\n"
    "end\n"
    /* nils(N): a list of N [] (N cells) */
    "function nils/1 regs 3\n"
    "    loadk r1, []\n"
    "    loadk r2, []\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    addi r0, r0, -1\n"
    "    cons r1, r2, r1\n"
    "    jump loop\n"
    "done:\n"
    "    ret r1\n"
    "end\n"
    "function flat_iodag/1 regs 1\n"
    "    call r0, r0, iodag/1\n"
    "    tailcallx r0, erlang:iolist_to_binary/1\n"
    "end\n"
    "function flat_nils/1 regs 1\n"
    "    call r0, r0, nils/1\n"
    "    tailcallx r0, erlang:iolist_to_binary/1\n"
    "end\n"
    /* fmt_iodag(N): io:format(\"~s\", [iodag(N)]) */
    "function fmt_iodag/1 regs 3\n"
    "    call r2, r0, iodag/1\n"
    "    loadk r1, []\n"
    "    cons r1, r2, r1\n"
    "    loadk r0, \"~s\"\n"
    "    tailcallx r0, io:format/2\n"
    "end\n"
    "function waiter/0 regs 1\n"
    "    loadk r0, infinity\n"
    "    wait r0, done\n"
    "done:\n"
    "    ret r0\n"
    "end\n"
    "function spawn_waiter/0 regs 3\n"
    "    loadk r0, lim\n"
    "    loadk r1, waiter\n"
    "    loadk r2, []\n"
    "    callx r0, r0, erlang:spawn/3\n"
    "    ret r0\n"
    "end\n"
    /* down_of(N): the reason in the 'DOWN' of a process exiting with [1..N] */
    "function down_of/1 regs 6\n"
    "    loadk r1, lim\n"
    "    loadk r2, exit_with\n"
    "    loadk r3, []\n"
    "    cons r3, r0, r3\n"
    "    callx r1, r1, erlang:spawn/3\n"
    "    loadk r2, process\n"
    "    move r3, r1\n"
    "    callx r2, r2, erlang:monitor/2\n"
    "again:\n"
    "    recv r2, wait\n"
    "    accept\n"
    "    getel r0, r2, 5\n"
    "    ret r0\n"
    "wait:\n"
    "    loadk r2, infinity\n"
    "    wait r2, next\n"
    "next:\n"
    "    jump again\n"
    "end\n";

/* mod:fun(args...) from a process (spawned, joined); its result or
 * exception, formatted. */
static tvm_status run_fmt(tvm_env *env, const char *fun, int argc, const tvm_term *argv,
                          char *out, size_t size)
{
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "lim", fun, argc, argv, &pid), TVM_OK);
    tvm_term r;
    tvm_status st = tvm_join(env, pid, &r);
    if (st == TVM_OK) {
        tvm_format_term(env, r, out, size);
    } else {
        exception_fmt(env, out, size);
    }
    return st;
}

/* Waits until the table holds n processes (an exited process leaves it
 * when its scheduler reaps it, just after a join returns). */
static void await_live(tvm_vm *vm, size_t n)
{
    while (tvm_processes(vm, NULL, 0) != n)
        usleep(1000);
}

/* lim:fun(n) in a process: its result or exception, formatted. */
static tvm_status run_n(tvm_env *env, const char *fun, int64_t n, char *out, size_t size)
{
    tvm_term a;
    cr_assert_eq(tvm_make_int(env, n, &a), TVM_OK);
    return run_fmt(env, fun, 1, &a, out, size);
}

/* lim:fun(n) in a process gives `want` (a result, or Class:Reason). */
static void expect_n(tvm_env *env, const char *fun, int64_t n, const char *want)
{
    char out[100];
    run_n(env, fun, n, out, sizeof out);
    cr_assert_str_eq(out, want, "lim:%s(%lld)", fun, (long long)n);
}

/* A term of lim's fun(n), called in env. */
static tvm_term make(tvm_env *env, const char *fun, int64_t n)
{
    tvm_term a, r;
    cr_assert_eq(tvm_make_int(env, n, &a), TVM_OK);
    cr_assert_eq(tvm_call(env, "lim", fun, 1, &a, &r), TVM_OK);
    return r;
}

Test(limits, a_copy_over_max_message_words_is_a_system_limit_in_that_process_only)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .quiet_crashes = true, .max_message_words = 1000 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "lim", lim_src);
    char out[300];
    /* [1..500] is 1000 words and goes; [1..501] does not. */
    cr_assert_eq(run_n(env, "send_list", 500, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "sent");
    cr_assert_eq(run_n(env, "send_list", 501, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    /* From C: the same limit. */
    tvm_term fits = make(env, "list", 500), big = make(env, "list", 501);
    tvm_pid w;
    cr_assert_eq(tvm_spawn(env, "lim", "waiter", 0, NULL, &w), TVM_OK);
    cr_assert_eq(tvm_send(env, w, big), TVM_ERR_LIMIT);
    cr_assert_eq(tvm_send(env, w, fits), TVM_OK);
    /* Spawn arguments are a copy too: [T] costs 2 words more than T. */
    cr_assert_eq(run_n(env, "spawn_ret", 499, out, sizeof out), TVM_OK);
    cr_assert_eq(run_n(env, "spawn_ret", 500, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "lim", "ret", 1, &fits, &pid), TVM_ERR_LIMIT);
    /* A value too big to leave the process: the joiner gets system_limit;
     * a reason too big for 'DOWN' (9 words around it: the tuple and a
     * monitor by name's {Name, Node}) becomes system_limit. */
    cr_assert_eq(run_n(env, "ret_list", 497, out, sizeof out), TVM_OK);
    cr_assert_eq(run_n(env, "ret_list", 498, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    cr_assert_eq(run_n(env, "down_of", 2, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "[1,2]");
    cr_assert_eq(run_n(env, "down_of", 495, out, sizeof out), TVM_OK);
    cr_assert_eq(out[0], '[');
    cr_assert_eq(run_n(env, "down_of", 496, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "system_limit");
    /* A term with much sharing: 3 * 40 words on the heap, 3 * (2^40 - 1)
     * flat; refused after counting past the cap, not after 2^40 steps. */
    cr_assert_eq(run_n(env, "send_dag", 40, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    tvm_term dag = make(env, "dag", 40);
    cr_assert_eq(tvm_send(env, w, dag), TVM_ERR_LIMIT);
    tvm_env_free(env);
    tvm_destroy(vm);
}
Test(limits, max_processes_bounds_the_live_processes)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .max_processes = 3 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "lim", lim_src);
    tvm_pid w[3];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(tvm_spawn(env, "lim", "waiter", 0, NULL, &w[i]), TVM_OK);
    /* The third process, spawned from C, spawns a fourth from VM code. */
    char out[100];
    tvm_pid third;
    cr_assert_eq(tvm_spawn(env, "lim", "spawn_waiter", 0, NULL, &third), TVM_OK);
    tvm_term r;
    cr_assert_eq(tvm_join(env, third, &r), TVM_EXCEPTION);
    tvm_term c, reason;
    cr_assert_eq(tvm_get_exception(env, &c, &reason), TVM_OK);
    tvm_format_term(env, reason, out, sizeof out);
    cr_assert_str_eq(out, "system_limit");
    await_live(vm, 2);
    cr_assert_eq(tvm_spawn(env, "lim", "waiter", 0, NULL, &w[2]), TVM_OK);
    tvm_pid none;
    cr_assert_eq(tvm_spawn(env, "lim", "waiter", 0, NULL, &none), TVM_ERR_LIMIT);
    /* One ends: there is room again. */
    tvm_term m;
    cr_assert_eq(tvm_make_atom(env, "go", &m), TVM_OK);
    cr_assert_eq(tvm_send(env, w[0], m), TVM_OK);
    cr_assert_eq(tvm_join(env, w[0], &r), TVM_OK);
    await_live(vm, 2);
    cr_assert_eq(tvm_spawn(env, "lim", "ret", 1, &m, &none), TVM_OK);
    cr_assert_eq(tvm_join(env, none, &r), TVM_OK);
    tvm_env_free(env);
    tvm_destroy(vm);
}

Test(limits, comparing_and_printing_terms_with_much_sharing_are_bounded, .timeout = 120)
{
    SKIP_SINGLE_THREADED_UNDER_TSAN("comparisons and prints of 2^20 pairs");
    /* Comparisons may visit 2 * max_message_words pairs of subterms. */
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .quiet_crashes = true, .max_message_words = 1 << 20 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "lim", lim_src);
    char out[100];
    /* Two copies built apart share nothing with each other: =:= would
     * visit 2^40 pairs; it raises after 2^21. */
    cr_assert_eq(run_n(env, "eq_dags", 40, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    cr_assert_eq(run_n(env, "lt_dags", 40, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    cr_assert_eq(run_n(env, "sort_dags", 40, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    /* Built apart but small, they compare; a term is equal to itself at
     * once (the pointers are). */
    cr_assert_eq(run_n(env, "eq_dags", 10, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "true");
    cr_assert_eq(run_n(env, "eq_same", 40, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "true");
    tvm_term a = make(env, "dag", 40), b = make(env, "dag", 40);
    cr_assert(!tvm_equal(env, a, b), "not known equal");
    /* Printed flat it would be 2^40 * 3 bytes: cut at VM_PRINT_MAX_BYTES. */
    size_t n = tvm_format_term(env, a, out, sizeof out);
    cr_assert_gt(n, VM_PRINT_MAX_BYTES);
    cr_assert_lt(n, VM_PRINT_MAX_BYTES + 64);
    char want[100];
    memset(want, '{', 40);
    strcpy(want + 40, "[],[]},{[],[]}},{{[],[]},{[],[]}}},{{{[],[]},{[],[]}},{{[],");
    cr_assert_str_eq(out, want);
    tvm_env_free(env);
    tvm_destroy(vm);
}

/* A binary is one leaf of a printed term: its bytes are cut too, not
 * printed whole before the cut is looked at (32 MiB of 255 printed as
 * 128 MiB; 1 GiB, which VM code can make, as 4 GiB). */
Test(limits, printing_a_big_binary_is_cut_at_the_print_cap)
{
    SKIP_SINGLE_THREADED_UNDER_TSAN("printing up to the print cap");
    tvm_vm *vm = tvm_new(NULL);
    tvm_env *env = tvm_env_new(vm);
    size_t len = VM_PRINT_MAX_BYTES / 2;
    unsigned char *bytes = malloc(len);
    memset(bytes, 255, len);
    tvm_term bin, tup;
    cr_assert_eq(tvm_make_binary(env, bytes, len, &bin), TVM_OK);
    char out[64];
    /* "<<255,...,255...>>...": to the byte that passes the cap, then both cuts. */
    cr_assert_eq(tvm_format_term(env, bin, out, sizeof out), VM_PRINT_MAX_BYTES + 13);
    cr_assert_str_eq(out, "<<255,255,255,255,255,255,255,255,255,255,255,255,255,255,255,2");
    /* Text, after something else: cut where the whole term passes the cap. */
    memset(bytes, 'a', len);
    cr_assert_eq(tvm_make_binary(env, bytes, len, &bin), TVM_OK);
    tvm_term two[2] = { bin, bin };
    cr_assert_eq(tvm_make_tuple(env, 2, two, &tup), TVM_OK);
    cr_assert_eq(tvm_format_term(env, tup, out, sizeof out), VM_PRINT_MAX_BYTES + 13);
    free(bytes);
    tvm_env_free(env);
    tvm_destroy(vm);
}

Test(limits, flattening_an_iolist_visits_a_bounded_number_of_cells)
{
    /* 8,000 bytes and 2 * 1,000 cells. */
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .quiet_crashes = true, .max_message_words = 1000 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "lim", lim_src);
    expect_n(env, "flat_nils", 2000, "<<>>");
    expect_n(env, "flat_nils", 2001, "error:system_limit");
    /* Sharing with nothing at the leaves: no byte to count, so only the
     * cells end the walk (2^61 - 2 of them at 60 levels, which held the
     * scheduler for good). */
    expect_n(env, "flat_iodag", 9, "<<>>");
    expect_n(env, "flat_iodag", 10, "error:system_limit");
    expect_n(env, "flat_iodag", 60, "error:system_limit");
    expect_n(env, "fmt_iodag", 60, "error:system_limit");
    tvm_env_free(env);
    tvm_destroy(vm);
}

Test(limits, max_heap_size_kills_the_process_that_outgrows_it)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .max_heap_words = 1000 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "lim", lim_src);
    char out[100];
    /* The VM's default applies to tvm_spawn... */
    tvm_term nil = tvm_nil(env);
    cr_assert_eq(run_fmt(env, "grow", 1, &nil, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "exit:killed");
    /* ...and tvm_spawn_opt overrides it either way. */
    tvm_term n;
    cr_assert_eq(tvm_make_int(env, 5000, &n), TVM_OK);
    tvm_spawn_opts none = { .size = sizeof none, .max_heap_words = TVM_NO_LIMIT },
                   small = { .size = sizeof small, .max_heap_words = 300 };
    tvm_pid pid;
    tvm_term r;
    cr_assert_eq(tvm_spawn_opt(env, "lim", "ret_list", 1, &n, &none, &pid), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    cr_assert_eq(tvm_spawn_opt(env, "lim", "ret_list", 1, &n, &small, &pid), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_EXCEPTION);
    tvm_term c, reason;
    cr_assert_eq(tvm_get_exception(env, &c, &reason), TVM_OK);
    cr_assert(tvm_is_atom(env, c, "exit") && tvm_is_atom(env, reason, "killed"));
    /* A call context has no limit (the embedder's own thread). */
    cr_assert_eq(tvm_call(env, "lim", "ret_list", 1, &n, &r), TVM_OK);
    tvm_env_free(env);
    tvm_destroy(vm);
}

/* What tvm_receive or tvm_sleep told the native below (status_of's
 * process is the only one that writes it; the test reads it after
 * joining that process). */
static tvm_status waited_status;

/* host:wait/1(How): tvm_receive (How = 0) or tvm_sleep (1) for 20 s. */
static tvm_status nat_wait(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res,
                           void *data)
{
    (void)argc, (void)data;
    int64_t how;
    cr_assert_eq(tvm_get_int(e, argv[0], &how), TVM_OK);
    tvm_term msg;
    waited_status = how == 0 ? tvm_receive(e, 20000, &msg) : tvm_sleep(e, 20000);
    if (waited_status == TVM_EXCEPTION)
        return TVM_EXCEPTION;
    return tvm_make_atom(e, "waited", res);
}

/* recv_wait(How): sends itself a binary of 4,000 bytes (501 words; the
 * test fills in its literal), takes it into its queue with `recv` (its
 * queue is then over a max_heap_size of 300: it is being killed, and
 * neither a call nor a backward jump came since), then host:wait(How). */
static const char *const kw_fmt =
    "module kw\n"
    "export recv_wait/1\n"
    "function recv_wait/1 regs 4\n"
    "    move r3, r0\n"
    "    self r1\n"
    "    loadk r2, \"%s\"\n"
    "    callx r1, r1, erlang:send/2\n"
    "    recv r1, none\n"
    "    move r0, r3\n"
    "    callx r0, r0, host:wait/1\n"
    "    ret r0\n"
    "none:\n"
    "    ret r1\n"
    "end\n";

Test(limits, a_native_of_a_process_being_killed_does_not_wait, .timeout = 120)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "host", "wait", 1, nat_wait, NULL, &err), TVM_OK);
    static char text[4001], src[4500];
    memset(text, 'x', sizeof text - 1);
    snprintf(src, sizeof src, kw_fmt, text);
    load_ok(vm, "kw", src);
    tvm_spawn_opts small = { .size = sizeof small, .max_heap_words = 300 };
    for (int how = 0; how < 2; how++) {
        tvm_term a, r, c, reason;
        tvm_pid pid;
        waited_status = TVM_OK;
        cr_assert_eq(tvm_make_int(env, how, &a), TVM_OK);
        cr_assert_eq(tvm_spawn_opt(env, "kw", "recv_wait", 1, &a, &small, &pid), TVM_OK);
        /* It dies of the limit without waiting the 20 s it asked for:
         * tvm_receive and tvm_sleep said so with TVM_EXCEPTION. */
        cr_assert_eq(tvm_join(env, pid, &r), TVM_EXCEPTION);
        cr_assert_eq(tvm_get_exception(env, &c, &reason), TVM_OK);
        cr_assert(tvm_is_atom(env, c, "exit") && tvm_is_atom(env, reason, "killed"));
        cr_assert_eq(waited_status, TVM_EXCEPTION, "how %d: %s", how,
                     tvm_status_name(waited_status));
    }
    tvm_env_free(env);
    tvm_destroy(vm);
}

/* mon(Pid, N): monitors Pid N times, then lim:waiter() (returns
 * infinity once a message came). */
static const char *const mon_src =
    "module mon\n"
    "export mon/2\n"
    "function mon/2 regs 5\n"
    "loop:\n"
    "    jeqi r1, 0, done\n"
    "    loadk r3, process\n"
    "    move r4, r0\n"
    "    callx r3, r3, erlang:monitor/2\n"
    "    addi r1, r1, -1\n"
    "    jump loop\n"
    "done:\n"
    "    tailcallx r0, lim:waiter/0\n"
    "end\n";

/* How many monitors the process pid holds (its watchers' nodes). */
static size_t monitors_on(tvm_vm *vm, tvm_pid pid)
{
    SchedSystem *sys = vm_sched_of(vm);
    Process *t = vm_proc_get(sys, pid);
    cr_assert(t);
    size_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (Monitor *m = t->monitors; m; m = m->next)
        n++;
    pthread_mutex_unlock(&t->lock);
    vm_proc_put(sys, t);
    return n;
}

/* Starts mon(target, n) with a max_heap_size of max_heap words (0: none). */
static tvm_pid spawn_mon(tvm_env *env, tvm_pid target, int64_t n, size_t max_heap)
{
    tvm_term a[2];
    tvm_pid pid;
    tvm_spawn_opts o = { .size = sizeof o, .max_heap_words = max_heap ? max_heap : TVM_NO_LIMIT };
    cr_assert_eq(tvm_make_pid(env, target, &a[0]), TVM_OK);
    cr_assert_eq(tvm_make_int(env, n, &a[1]), TVM_OK);
    cr_assert_eq(tvm_spawn_opt(env, "mon", "mon", 2, a, &o, &pid), TVM_OK);
    return pid;
}

Test(limits, monitors_count_toward_max_heap_size_and_go_with_their_watcher, .timeout = 120)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "lim", lim_src);
    load_ok(vm, "mon", mon_src);
    tvm_pid target, w;
    tvm_term r, c, reason, msg;
    cr_assert_eq(tvm_spawn(env, "lim", "waiter", 0, NULL, &target), TVM_OK);
    /* 1,000,000 monitors under a limit of 1,000 words: killed (each
     * monitor is VM_MONITOR_WORDS off the heap, which the limit did not see). */
    w = spawn_mon(env, target, 1000000, 1000);
    cr_assert_eq(tvm_join(env, w, &r), TVM_EXCEPTION);
    cr_assert_eq(tvm_get_exception(env, &c, &reason), TVM_OK);
    cr_assert(tvm_is_atom(env, c, "exit") && tvm_is_atom(env, reason, "killed"));
    /* ...and the monitors it had set went with it. */
    cr_assert_eq(monitors_on(vm, target), 0);
    /* Within the limit: 3 monitors while the watcher lives, none after. */
    w = spawn_mon(env, target, 3, 1000);
    while (monitors_on(vm, target) < 3)
        usleep(1000);
    cr_assert_eq(tvm_make_atom(env, "go", &msg), TVM_OK);
    cr_assert_eq(tvm_send(env, w, msg), TVM_OK);
    cr_assert_eq(tvm_join(env, w, &r), TVM_OK);
    cr_assert(tvm_is_atom(env, r, "infinity"));
    cr_assert_eq(monitors_on(vm, target), 0);
    tvm_env_free(env);
    tvm_destroy(vm);
}
