/*
 * tests/unit/vm/test_bif_lend.c - a built-in native given long work
 * (lists:sort/1 of 100,000 elements, a 16 MiB iolist flattened ...) lends
 * its scheduler's local queue as an embedder's native does (vm/bif.c,
 * lend_if_long; vm/sched.c, "Lending the local queue"): a process queued
 * behind it there runs on the other, idle scheduler while it runs.
 *
 * b:run/3 spawns b:release/1, which goes to the local queue of run's own
 * scheduler, behind run, then calls the native up to 200 times, looking
 * for release's message after each call.  Each turn costs a few
 * reductions (800 for all 200, within one time slice), so run is never
 * preempted in the loop: without the lend, release cannot run before run
 * returns, and run answers not_released after 200 calls (seconds of
 * native work); with it, the other scheduler takes release during the
 * first call.  No timing is asserted: the answer is released or not.
 * The work of each call is chosen so that 200 of them take about half a
 * second or more in the debug build: the other scheduler, woken by the
 * lend, has that long to be given a CPU on a loaded machine.
 */
#include <criterion/criterion.h>

#include "tests/unit/helpers.h"

/* Two schedulers; io:format and erlang:display/1 write to /dev/null. */
static tvm_config two_scheds = { .size = sizeof(tvm_config), .schedulers = 2 };
static FILE *devnull;
static tvm_vm *vm;
static tvm_env *env;

static void setup(void)
{
    devnull = fopen("/dev/null", "w");
    cr_assert(devnull);
    two_scheds.output = devnull;
    vm = tvm_new(&two_scheds);
    env = tvm_env_new(vm);
}

static void teardown(void)
{
    tvm_env_free(env);
    tvm_destroy(vm);
    fclose(devnull);
}

TestSuite(bif_lend, .init = setup, .fini = teardown);

static const char *const b_src =
    "module b\n"
    "export release/1, sort/0, reverse/0, seq/0, append/0, tuple_to_list/0, "
    "list_to_tuple/0, binary_to_list/0, iolist_to_binary/0, format_p/0, format_s/0, display/0, length/0\n"
    /* run(M, F, Args): as the header says (M, F, Args and the count
     * stay in r0..r3, below the calls' argument base, r4). */
    "function run/3 regs 8\n"
    "    self r5\n"
    "    loadk r4, []\n"
    "    cons r6, r5, r4\n"
    "    loadk r4, b\n"
    "    loadk r5, release\n"
    "    callx r4, r4, erlang:spawn/3\n"
    "    loadi r3, 200\n"
    "again:\n"
    "    jeqi r3, 0, late\n"
    "    move r4, r0\n"
    "    move r5, r1\n"
    "    move r6, r2\n"
    "    callx r4, r4, erlang:apply/3\n"
    "    recv r4, next\n"
    "    accept\n"
    "    ret r4\n"
    "next:\n"
    "    addi r3, r3, -1\n"
    "    jump again\n"
    "late:\n"
    "    loadk r0, not_released\n"
    "    ret r0\n"
    "end\n"
    /* release(Pid): sends Pid released. */
    "function release/1 regs 2\n"
    "    loadk r1, released\n"
    "    callx r0, r0, erlang:send/2\n"
    "    ret r0\n"
    "end\n"
    /* list(): lists:seq(1, 100000). */
    "function list/0 regs 2\n"
    "    loadi r0, 1\n"
    "    loadi r1, 100000\n"
    "    callx r0, r0, lists:seq/2\n"
    "    ret r0\n"
    "end\n"
    /* doubled(N): a 128-byte binary doubled N times by sharing. */
    "function doubled/1 regs 3\n"
    "    move r2, r0\n"
    "    loadk r0, \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"\n"
    "again:\n"
    "    jeqi r2, 0, done\n"
    "    loadk r1, []\n"
    "    cons r1, r0, r1\n"
    "    cons r0, r0, r1\n"
    "    addi r2, r2, -1\n"
    "    jump again\n"
    "done:\n"
    "    ret r0\n"
    "end\n"
    /* one(M, F, X): run(M, F, [X]). */
    "function one/3 regs 4\n"
    "    loadk r3, []\n"
    "    cons r2, r2, r3\n"
    "    call r0, r0, run/3\n"
    "    ret r0\n"
    "end\n"
    "function sort/0 regs 3\n"
    "    call r2, r2, list/0\n"
    "    loadk r0, lists\n"
    "    loadk r1, sort\n"
    "    call r0, r0, one/3\n"
    "    ret r0\n"
    "end\n"
    "function reverse/0 regs 3\n"
    "    call r2, r2, list/0\n"
    "    loadk r0, lists\n"
    "    loadk r1, reverse\n"
    "    call r0, r0, one/3\n"
    "    ret r0\n"
    "end\n"
    "function seq/0 regs 3\n"
    "    loadk r0, lists\n"
    "    loadk r1, seq\n"
    "    loadk r2, [1, 1000000]\n"
    "    call r0, r0, run/3\n"
    "    ret r0\n"
    "end\n"
    /* append(): list() ++ []. */
    "function append/0 regs 4\n"
    "    call r2, r2, list/0\n"
    "    loadk r3, [[]]\n"
    "    cons r2, r2, r3\n"
    "    loadk r0, erlang\n"
    "    loadk r1, '++'\n"
    "    call r0, r0, run/3\n"
    "    ret r0\n"
    "end\n"
    "function tuple_to_list/0 regs 3\n"
    "    call r2, r2, list/0\n"
    "    callx r2, r2, erlang:list_to_tuple/1\n"
    "    loadk r0, erlang\n"
    "    loadk r1, tuple_to_list\n"
    "    call r0, r0, one/3\n"
    "    ret r0\n"
    "end\n"
    "function list_to_tuple/0 regs 3\n"
    "    call r2, r2, list/0\n"
    "    loadk r0, erlang\n"
    "    loadk r1, list_to_tuple\n"
    "    call r0, r0, one/3\n"
    "    ret r0\n"
    "end\n"
    /* binary_to_list(): of a 512 KiB binary. */
    "function binary_to_list/0 regs 3\n"
    "    loadi r2, 12\n"
    "    call r2, r2, doubled/1\n"
    "    callx r2, r2, erlang:iolist_to_binary/1\n"
    "    loadk r0, erlang\n"
    "    loadk r1, binary_to_list\n"
    "    call r0, r0, one/3\n"
    "    ret r0\n"
    "end\n"
    /* iolist_to_binary(): of 16 MiB flat. */
    "function iolist_to_binary/0 regs 3\n"
    "    loadi r2, 17\n"
    "    call r2, r2, doubled/1\n"
    "    loadk r0, erlang\n"
    "    loadk r1, iolist_to_binary\n"
    "    call r0, r0, one/3\n"
    "    ret r0\n"
    "end\n"
    /* fmt(Fmt, X): run(io, format, [Fmt, [X]]). */
    "function fmt/2 regs 4\n"
    "    loadk r3, []\n"
    "    cons r1, r1, r3\n"
    "    cons r1, r1, r3\n"
    "    cons r2, r0, r1\n"
    "    loadk r0, io\n"
    "    loadk r1, format\n"
    "    call r0, r0, run/3\n"
    "    ret r0\n"
    "end\n"
    /* format_p(): io:format(\"~p\", [list()]). */
    "function format_p/0 regs 2\n"
    "    call r1, r1, list/0\n"
    "    loadk r0, \"~p\"\n"
    "    call r0, r0, fmt/2\n"
    "    ret r0\n"
    "end\n"
    /* format_s(): io:format(\"~s\", [16 MiB flat]). */
    "function format_s/0 regs 2\n"
    "    loadi r1, 17\n"
    "    call r1, r1, doubled/1\n"
    "    loadk r0, \"~s\"\n"
    "    call r0, r0, fmt/2\n"
    "    ret r0\n"
    "end\n"
    /* length(): of 2,000,000 elements (the walk alone is the work). */
    "function length/0 regs 3\n"
    "    loadi r0, 1\n"
    "    loadi r1, 2000000\n"
    "    callx r2, r0, lists:seq/2\n"
    "    loadk r0, erlang\n"
    "    loadk r1, length\n"
    "    call r0, r0, one/3\n"
    "    ret r0\n"
    "end\n"
    "function display/0 regs 3\n"
    "    call r2, r2, list/0\n"
    "    loadk r0, erlang\n"
    "    loadk r1, display\n"
    "    call r0, r0, one/3\n"
    "    ret r0\n"
    "end\n";

/* Runs b:fun/0 from this thread: its answer must be released. */
static void expect_released(const char *fun)
{
    load_ok(vm, "b", b_src);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "b", fun, 0, NULL, &pid), TVM_OK);
    tvm_term r;
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    char buf[64];
    tvm_format_term(env, r, buf, sizeof buf);
    cr_assert(tvm_is_atom(env, r, "released"),
              "b:%s/0 answered %s: the process queued behind the native did not run "
              "during 200 calls of it",
              fun, buf);
}

Test(bif_lend, sort, .timeout = 300) { expect_released("sort"); }
Test(bif_lend, reverse, .timeout = 300) { expect_released("reverse"); }
Test(bif_lend, seq, .timeout = 300) { expect_released("seq"); }
Test(bif_lend, append, .timeout = 300) { expect_released("append"); }
Test(bif_lend, tuple_to_list, .timeout = 300) { expect_released("tuple_to_list"); }
Test(bif_lend, list_to_tuple, .timeout = 300) { expect_released("list_to_tuple"); }
Test(bif_lend, binary_to_list, .timeout = 300) { expect_released("binary_to_list"); }
Test(bif_lend, iolist_to_binary, .timeout = 300) { expect_released("iolist_to_binary"); }
Test(bif_lend, format_p, .timeout = 300) { expect_released("format_p"); }
Test(bif_lend, format_s, .timeout = 300) { expect_released("format_s"); }
Test(bif_lend, display, .timeout = 300) { expect_released("display"); }
Test(bif_lend, length, .timeout = 300) { expect_released("length"); }
