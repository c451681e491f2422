/*
 * tests/unit/bp/test_time_vm.c - call_time end to end: VM processes run
 * call_time-traced bytecode on two schedulers, and the test reads
 * tvm_call_time / trace_info: exact counts per process, exclusive time
 * (a caller's time leaves out its traced callee's), time scheduled out
 * (waiting in a receive) not charged, exceptions passing time frames, tail
 * loops, restart while processes run, pause.
 *
 * The trace clock is the test clock (trace/tr_clock.h): it moves only when
 * a process calls host:pass(Us), so every time is an exact number.
 */
#include <criterion/criterion.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "trace/tr_clock.h"

/*
 * spin(N): N us of the test clock pass (host:pass/1, a native: its time
 * is its caller's, and spin's own when spin is traced).
 * f(N): spin(N), then g(N).  g(N): spin(N) eight times.
 * nap(): spin(5000), waits for a message, spin(3000).
 * catcher(N): try thrower(N) (spin(N), then throw), then spin(N) eight
 * times.  tl(K, N): spin(N), then tail-calls tl(K - 1, N) until K = 0.
 * many(K, N): f(N) K times.
 */
static const char *const src =
    "module ctv\n"
    "export f/1, g/1, nap/0, catcher/1, tl/2, many/2, spin/1\n"
    "function spin/1 regs 1\n"
    "    callx r0, r0, host:pass/1\n    ret r0\nend\n"
    "function f/1 regs 2\n"
    "    move r1, r0\n    call r1, r1, spin/1\n"
    "    move r1, r0\n    call r1, r1, g/1\n    ret r0\nend\n"
    "function g/1 regs 3\n"
    "    loadk r2, 8\n"
    "top:\n    jeqi r2, 0, done\n"
    "    move r1, r0\n    call r1, r1, spin/1\n"
    "    addi r2, r2, -1\n    jump top\n"
    "done:\n    ret r0\nend\n"
    "function nap/0 regs 2\n"
    "    loadi r1, 5000\n    call r1, r1, spin/1\n"
    "loop:\n    recv r0, none\n    accept\n"
    "    loadi r1, 3000\n    call r1, r1, spin/1\n    ret r0\n"
    "none:\n    loadk r1, infinity\n    wait r1, never\n    jump loop\n"
    "never:\n    ret r1\nend\n"
    "function thrower/1 regs 2\n"
    "    call r0, r0, spin/1\n    loadk r0, throw\n    loadk r1, ball\n    raise r0, r1\nend\n"
    "function catcher/1 regs 5\n"
    "    try r2, caught\n    move r1, r0\n    call r1, r1, thrower/1\n    endtry\n"
    "caught:\n"
    "    loadk r1, 8\n"
    "top:\n    jeqi r1, 0, done\n"
    "    move r2, r0\n    call r2, r2, spin/1\n"
    "    addi r1, r1, -1\n    jump top\n"
    "done:\n    ret r0\nend\n"
    "function tl/2 regs 3\n"
    "    jeqi r0, 0, done\n"
    "    move r2, r1\n    call r2, r2, spin/1\n"
    "    addi r0, r0, -1\n    tailcall r0, tl/2\n"
    "done:\n    ret r0\nend\n"
    "function many/2 regs 3\n"
    "top:\n    jeqi r0, 0, done\n"
    "    move r2, r1\n    call r2, r2, f/1\n"
    "    addi r0, r0, -1\n    jump top\n"
    "done:\n    ret r0\nend\n";

/* host:pass(Us): the test clock moves Us microseconds. */
static tvm_status pass(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res, void *data)
{
    (void)argc, (void)data;
    int64_t us;
    cr_assert_eq(tvm_get_int(e, argv[0], &us), TVM_OK);
    tr_clock_advance((uint64_t)us * 1000u);
    return tvm_make_atom(e, "ok", res);
}

static tvm_vm *vm;
static tvm_env *env;

static void setup(void)
{
    tr_clock_set_manual(0);
    vm = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true });
    env = tvm_env_new(vm);
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "host", "pass", 1, pass, NULL, &err), TVM_OK);
    load_ok(vm, "ctv.tasm", src);
}

static void teardown(void)
{
    tvm_env_free(env);
    tvm_destroy(vm);
}

TestSuite(time_vm, .init = setup, .fini = teardown);

static void tp(const char *pattern, tvm_tp_action how)
{
    tvm_error err;
    /* call_time measures call-traced processes (BEAM behaviour 34). */
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_ALL, TVM_TRACE_CALL, true), TVM_OK);
    cr_assert_eq(tvm_trace_pattern(vm, pattern, how, TVM_TP_CALL_TIME, NULL, &err), TVM_OK, "%s",
                 err.message);
}

/* Runs ctv:fun(args) as a process on the schedulers; returns its pid. */
static tvm_pid run(const char *fun, int argc, const int64_t *args)
{
    tvm_term a[4], r;
    for (int i = 0; i < argc; i++)
        cr_assert_eq(tvm_make_int(env, args[i], &a[i]), TVM_OK);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "ctv", fun, argc, a, &pid), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    return pid;
}

/* The line of `pid` in mfa's call time (count 0 and ns 0 if none). */
static tvm_call_time_entry line_of(const char *mfa, tvm_pid pid)
{
    tvm_call_time_entry v[16], none = { pid, 0, 0 };
    size_t n;
    cr_assert_eq(tvm_call_time(vm, mfa, v, 16, &n), TVM_OK, "no call time on %s", mfa);
    for (size_t i = 0; i < n && i < 16; i++)
        if (v[i].pid == pid)
            return v[i];
    return none;
}

static size_t lines(const char *mfa)
{
    size_t n;
    cr_assert_eq(tvm_call_time(vm, mfa, NULL, 0, &n), TVM_OK);
    return n;
}

/* One spin: 1 ms of the test clock. */
#define SPIN 1000
#define SPIN_NS (SPIN * 1000u)

/* Runs ctv:fun(SPIN) with outer and inner traced (restarted first);
 * checks each was called once and charged exactly its own spins. */
static void exclusive(const char *fun, const char *outer, uint64_t outer_ns, const char *inner,
                      uint64_t inner_ns)
{
    tp(outer, TVM_TP_RESTART);
    tp(inner, TVM_TP_RESTART);
    tvm_pid pid = run(fun, 1, (int64_t[]){ SPIN });
    tvm_call_time_entry o = line_of(outer, pid), i = line_of(inner, pid);
    cr_assert_eq(o.count, 1);
    cr_assert_eq(i.count, 1);
    cr_assert_eq(o.ns, outer_ns, "%s: %lu ns", outer, (unsigned long)o.ns);
    cr_assert_eq(i.ns, inner_ns, "%s: %lu ns", inner, (unsigned long)i.ns);
}

/* f's own time is one spin, g's eight: f is not charged for g */
Test(time_vm, exclusive_time_leaves_out_traced_callees)
{
    tp("ctv:f/1", TVM_TP_TRUE);
    tp("ctv:g/1", TVM_TP_TRUE);
    exclusive("f", "ctv:f/1", SPIN_NS, "ctv:g/1", 8 * SPIN_NS);
    /* without g traced, f is charged for all of it */
    tp("ctv:g/1", TVM_TP_FALSE);
    tp("ctv:f/1", TVM_TP_RESTART);
    tvm_pid pid = run("f", 1, (int64_t[]){ SPIN });
    tvm_call_time_entry e = line_of("ctv:f/1", pid);
    cr_assert_eq(e.count, 1);
    cr_assert_eq(e.ns, 9 * SPIN_NS, "f without g traced: %lu ns", (unsigned long)e.ns);
}

/* three processes, each f five times: one line per process, exact counts
 * and times (everything traced: spin has all the time) */
Test(time_vm, counts_per_process_are_exact)
{
    tp("ctv:_/_", TVM_TP_TRUE);
    tvm_pid pids[3];
    for (int i = 0; i < 3; i++)
        pids[i] = run("many", 2, (int64_t[]){ 5, 100 });
    cr_assert_eq(lines("ctv:f/1"), 3);
    cr_assert_eq(lines("ctv:g/1"), 3);
    cr_assert_eq(lines("ctv:many/2"), 3);
    cr_assert_eq(lines("ctv:spin/1"), 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(line_of("ctv:many/2", pids[i]).count, 1);
        cr_assert_eq(line_of("ctv:f/1", pids[i]).count, 5);
        cr_assert_eq(line_of("ctv:g/1", pids[i]).count, 5);
        cr_assert_eq(line_of("ctv:spin/1", pids[i]).count, 5 * 9);
        cr_assert_eq(line_of("ctv:many/2", pids[i]).ns, 0);
        cr_assert_eq(line_of("ctv:f/1", pids[i]).ns, 0);
        cr_assert_eq(line_of("ctv:g/1", pids[i]).ns, 0);
        cr_assert_eq(line_of("ctv:spin/1", pids[i]).ns, 5 * 9 * 100 * 1000u);
    }
    /* trace_info from the env: the same lines, by pid */
    tvm_term t;
    char out[512], want[512];
    cr_assert_eq(tvm_trace_info(env, "ctv:spin/1", "call_time", &t, NULL), TVM_OK);
    tvm_format_term(env, t, out, sizeof out);
    snprintf(want, sizeof want,
             "{call_time,[{<0.%lu.0>,45,0,4500},{<0.%lu.0>,45,0,4500},{<0.%lu.0>,45,0,4500}]}",
             (unsigned long)pids[0], (unsigned long)pids[1], (unsigned long)pids[2]);
    cr_assert_str_eq(out, want);
}

/* nap spends 5 ms, waits for a message while 100 ms pass, spends 3 ms:
 * the wait (scheduled out) is not charged */
Test(time_vm, time_scheduled_out_is_not_charged)
{
    tp("ctv:nap/0", TVM_TP_TRUE);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "ctv", "nap", 0, NULL, &pid), TVM_OK);
    wait_proc_state(vm, pid, "waiting");
    tr_clock_advance(100 * 1000000u);
    tvm_term msg, r;
    cr_assert_eq(tvm_make_atom(env, "wake", &msg), TVM_OK);
    cr_assert_eq(tvm_send(env, pid, msg), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    tvm_call_time_entry e = line_of("ctv:nap/0", pid);
    cr_assert_eq(e.count, 1);
    cr_assert_eq(e.ns, 8 * 1000000u, "nap: %lu ns", (unsigned long)e.ns);
}

/* a throw passes thrower's time frame: thrower is charged its own spin,
 * catcher the eight spins after the catch */
Test(time_vm, exceptions_pass_time_frames)
{
    tp("ctv:thrower/1", TVM_TP_TRUE);
    tp("ctv:catcher/1", TVM_TP_TRUE);
    exclusive("catcher", "ctv:thrower/1", SPIN_NS, "ctv:catcher/1", 8 * SPIN_NS);
}

/* a tail loop of 1,000 iterations: every call counted, the time all its
 * own, and the frame stack bounded (one time frame for the chain) */
Test(time_vm, tail_loops_count_every_call)
{
    tp("ctv:tl/2", TVM_TP_TRUE);
    tvm_pid pid = run("tl", 2, (int64_t[]){ 1000, 10 });
    cr_assert_eq(line_of("ctv:tl/2", pid).count, 1001);
    cr_assert_eq(line_of("ctv:tl/2", pid).ns, 1000 * 10 * 1000u);
    /* 100,000 iterations would need 100,000 frames if each pushed one */
    pid = run("tl", 2, (int64_t[]){ 100000, 0 });
    cr_assert_eq(line_of("ctv:tl/2", pid).count, 100001);
}

/* pause freezes, restart starts from zero, false removes */
Test(time_vm, pause_restart_false)
{
    tp("ctv:f/1", TVM_TP_TRUE);
    tvm_pid p1 = run("many", 2, (int64_t[]){ 4, 10 });
    cr_assert_eq(line_of("ctv:f/1", p1).count, 4);
    tp("ctv:f/1", TVM_TP_PAUSE);
    tvm_pid p2 = run("many", 2, (int64_t[]){ 4, 10 });
    cr_assert_eq(lines("ctv:f/1"), 1, "paused: p2 is not counted");
    cr_assert_eq(line_of("ctv:f/1", p1).count, 4);
    /* f(10) is nine spins of 10 us (g untraced: f's) */
    cr_assert_eq(line_of("ctv:f/1", p1).ns, 4 * 9 * 10 * 1000u);
    cr_assert_eq(line_of("ctv:f/1", p2).count, 0);
    tp("ctv:f/1", TVM_TP_RESTART);
    cr_assert_eq(lines("ctv:f/1"), 0);
    p2 = run("many", 2, (int64_t[]){ 3, 10 });
    cr_assert_eq(lines("ctv:f/1"), 1);
    cr_assert_eq(line_of("ctv:f/1", p2).count, 3);
    cr_assert_eq(line_of("ctv:f/1", p2).ns, 3 * 9 * 10 * 1000u);
    tp("ctv:f/1", TVM_TP_FALSE);
    size_t n;
    cr_assert_eq(tvm_call_time(vm, "ctv:f/1", NULL, 0, &n), TVM_ERR_NOTFOUND);
}

/* call_time and call_count together count the same calls */
Test(time_vm, with_call_count)
{
    tvm_error err;
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_ALL, TVM_TRACE_CALL, true), TVM_OK);
    cr_assert_eq(tvm_trace_pattern(vm, "ctv:g/1", TVM_TP_TRUE,
                                   TVM_TP_CALL_TIME | TVM_TP_CALL_COUNT | TVM_TP_LOCAL, NULL,
                                   &err),
                 TVM_OK, "%s", err.message);
    tvm_pid pid = run("many", 2, (int64_t[]){ 7, 10 });
    int64_t c;
    cr_assert_eq(tvm_call_count(vm, "ctv:g/1", &c), TVM_OK);
    cr_assert_eq(c, 7);
    cr_assert_eq(line_of("ctv:g/1", pid).count, 7);
}

/* call_time measures call-traced processes only (BEAM behaviour 34):
 * a process without the call flag leaves no line, one with it does, and
 * enabled-but-not-hit is []. */
Test(time_vm, only_call_traced_processes)
{
    tp("ctv:_/_", TVM_TP_TRUE);
    cr_assert_eq(lines("ctv:f/1"), 0);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, false), TVM_OK);
    tvm_pid quiet = run("many", 2, (int64_t[]){ 5, 100 });
    cr_assert_eq(lines("ctv:f/1"), 0);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
    tvm_pid traced = run("many", 2, (int64_t[]){ 5, 100 });
    cr_assert_eq(lines("ctv:f/1"), 1);
    cr_assert_eq(line_of("ctv:f/1", traced).count, 5);
    cr_assert_eq(line_of("ctv:f/1", quiet).count, 0);
}
