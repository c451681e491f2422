/*
 * tests/unit/vm/test_bif_lend.c - a built-in native given long work
 * (lists:sort/1 of 100,000 elements, a 16 MiB iolist flattened ...), and
 * any other long walk of a term made for VM code (two equal lists of
 * 1,000,000 elements compared by jeq, jlt or min/2, a message of
 * 2,000,000 words sent or read, spawn's arguments, an exit reason copied
 * into 1,000 'DOWN' messages, an exit dropping 1,000,000 monitors, a
 * monitor/2 pruning 2,097,152, a meta trace message with a long argument,
 * setelement/3 of a tuple of 1,000,000 elements, apply/2's walk of a long
 * list, code:load_binary/3 of a 2 MiB text, a collection of a heap of
 * 2,000,000 live words) lends its scheduler's local queue as an embedder's native does
 * (vm/lend.h; vm/sched.c, "Lending the local queue"): a process queued
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
 * lend, has that long to be given a CPU on a loaded machine.  Module w
 * holds the walks that are not natives of their own (each through
 * b:run/3 but recv's and the exits', which have their own loops, said
 * where they are).
 */
#include <criterion/criterion.h>

#include "tests/unit/helpers.h"

/* Two schedulers; io:format and erlang:display/1 write to /dev/null, and
 * w:exiter/1's exit prints no crash report. */
static tvm_config two_scheds = { .size = sizeof(tvm_config), .schedulers = 2,
                                 .quiet_crashes = true };
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
    "export run/3, behind/0, doubled/1, release/1, sort/0, reverse/0, seq/0, append/0, tuple_to_list/0, "
    "list_to_tuple/0, binary_to_list/0, iolist_to_binary/0, format_p/0, format_s/0, display/0, length/0\n"
    /* run(M, F, Args): as the header says (M, F, Args and the count
     * stay in r0..r3, below the calls' argument base, r4). */
    "function run/3 regs 8\n"
    "    call r4, r4, behind/0\n"
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
    /* behind(): spawns release(self()), which goes to the local queue
     * of the caller's scheduler, behind the caller. */
    "function behind/0 regs 3\n"
    "    self r2\n"
    "    loadk r0, []\n"
    "    cons r2, r2, r0\n"
    "    loadk r0, b\n"
    "    loadk r1, release\n"
    "    callx r0, r0, erlang:spawn/3\n"
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

/* The walks that are not natives of their own. */
static const char *const w_src =
    "module w\n"
    "export cmp/3, sort2/2, nop/1, tryapply/2, exiter/1, t_eq/0, t_lt/0, t_min/0, t_sort/0, "
    "t_send/0, t_recv/0, t_spawn/0, t_setelement/0, t_apply/0, t_exit/0, t_meta/0, "
    "watcher/2, t_drop/0, next/0, t_prune/0, t_load/0, t_gc/0\n"
    /* seq(N): lists:seq(1, N), a new list at each call. */
    "function seq/1 regs 2\n"
    "    move r1, r0\n"
    "    loadi r0, 1\n"
    "    callx r0, r0, lists:seq/2\n"
    "    ret r0\n"
    "end\n"
    /* two(M, F, N, Tail): b:run(M, F, [seq(N), seq(N) | Tail]). */
    "function two/4 regs 6\n"
    "    move r4, r2\n"
    "    call r4, r4, seq/1\n"
    "    move r5, r2\n"
    "    call r5, r5, seq/1\n"
    "    cons r3, r5, r3\n"
    "    cons r2, r4, r3\n"
    "    callx r0, r0, b:run/3\n"
    "    ret r0\n"
    "end\n"
    /* cmp(A, B, Op): A =:= B (jeq) if Op is eq, else A < B (jlt). */
    "function cmp/3 regs 4\n"
    "    loadk r3, eq\n"
    "    jne r2, r3, lt\n"
    "    loadk r2, true\n"
    "    jeq r0, r1, done\n"
    "    loadk r2, false\n"
    "    ret r2\n"
    "lt:\n"
    "    loadk r2, true\n"
    "    jlt r0, r1, done\n"
    "    loadk r2, false\n"
    "done:\n"
    "    ret r2\n"
    "end\n"
    /* sort2(A, B): lists:sort([A, B]). */
    "function sort2/2 regs 3\n"
    "    loadk r2, []\n"
    "    cons r1, r1, r2\n"
    "    cons r0, r0, r1\n"
    "    callx r0, r0, lists:sort/1\n"
    "    ret r0\n"
    "end\n"
    "function nop/1 regs 1\n"
    "    ret r0\n"
    "end\n"
    /* tryapply(F, Args): apply(F, Args), or caught. */
    "function tryapply/2 regs 5\n"
    "    try r2, caught\n"
    "    callx r0, r0, erlang:apply/2\n"
    "    endtry\n"
    "    ret r0\n"
    "caught:\n"
    "    loadk r0, caught\n"
    "    ret r0\n"
    "end\n"
    /* dead(): the pid of a process that has exited (its 'DOWN' seen). */
    "function dead/0 regs 3\n"
    "    loadk r0, w\n"
    "    loadk r1, nop\n"
    "    loadk r2, [x]\n"
    "    callx r0, r0, erlang:spawn/3\n"
    "    loadk r1, process\n"
    "    move r2, r0\n"
    "    callx r1, r1, erlang:monitor/2\n"
    "down:\n"
    "    recv r1, sleep\n"
    "    accept\n"
    "    ret r0\n"
    "sleep:\n"
    "    loadk r1, infinity\n"
    "    wait r1, gone\n"
    "    jump down\n"
    "gone:\n"
    "    ret r0\n"
    "end\n"
    "function t_eq/0 regs 4\n"
    "    loadk r0, w\n"
    "    loadk r1, cmp\n"
    "    loadi r2, 1000000\n"
    "    loadk r3, [eq]\n"
    "    call r0, r0, two/4\n"
    "    ret r0\n"
    "end\n"
    "function t_lt/0 regs 4\n"
    "    loadk r0, w\n"
    "    loadk r1, cmp\n"
    "    loadi r2, 1000000\n"
    "    loadk r3, [lt]\n"
    "    call r0, r0, two/4\n"
    "    ret r0\n"
    "end\n"
    "function t_min/0 regs 4\n"
    "    loadk r0, erlang\n"
    "    loadk r1, min\n"
    "    loadi r2, 1000000\n"
    "    loadk r3, []\n"
    "    call r0, r0, two/4\n"
    "    ret r0\n"
    "end\n"
    /* lists:sort([A, B]): one comparison, 1,000,000 pairs long. */
    "function t_sort/0 regs 4\n"
    "    loadk r0, w\n"
    "    loadk r1, sort2\n"
    "    loadi r2, 1000000\n"
    "    loadk r3, []\n"
    "    call r0, r0, two/4\n"
    "    ret r0\n"
    "end\n"
    /* send(Dead, seq(1000000)): the message is counted (2,000,000 words)
     * before the receiver is looked up; nothing is kept. */
    "function t_send/0 regs 6\n"
    "    loadi r2, 1000000\n"
    "    call r2, r2, seq/1\n"
    "    call r3, r3, dead/0\n"
    "    loadk r1, []\n"
    "    cons r2, r2, r1\n"
    "    cons r2, r3, r2\n"
    "    loadk r0, erlang\n"
    "    loadk r1, send\n"
    "    callx r0, r0, b:run/3\n"
    "    ret r0\n"
    "end\n"
    /* spawn(w, nop, [seq(200000)]): the arguments (400,000 words) are
     * copied into a message by the spawning process. */
    "function t_spawn/0 regs 4\n"
    "    loadi r2, 200000\n"
    "    call r2, r2, seq/1\n"
    "    loadk r3, []\n"
    "    cons r2, r2, r3\n"
    "    cons r2, r2, r3\n"
    "    loadk r3, nop\n"
    "    cons r2, r3, r2\n"
    "    loadk r3, w\n"
    "    cons r2, r3, r2\n"
    "    loadk r0, erlang\n"
    "    loadk r1, spawn\n"
    "    callx r0, r0, b:run/3\n"
    "    ret r0\n"
    "end\n"
    /* setelement(1, list_to_tuple(seq(1000000)), x). */
    "function t_setelement/0 regs 4\n"
    "    loadi r2, 1000000\n"
    "    call r2, r2, seq/1\n"
    "    callx r2, r2, erlang:list_to_tuple/1\n"
    "    loadk r3, [x]\n"
    "    cons r2, r2, r3\n"
    "    loadi r3, 1\n"
    "    cons r2, r3, r2\n"
    "    loadk r0, erlang\n"
    "    loadk r1, setelement\n"
    "    callx r0, r0, b:run/3\n"
    "    ret r0\n"
    "end\n"
    /* erlang:garbage_collect() with seq(1000000) live in r0, below the
     * call: each collection copies its 2,000,000 words (and nothing
     * else of the loop allocates, so no other collection comes first). */
    "function t_gc/0 regs 4\n"
    "    loadi r0, 1000000\n"
    "    call r0, r0, seq/1\n"
    "    loadk r1, erlang\n"
    "    loadk r2, garbage_collect\n"
    "    loadk r3, []\n"
    "    callx r1, r1, b:run/3\n"
    "    ret r1\n"
    "end\n"
    /* apply(fun w:nop/1, seq(1000000)): badarity, after a walk of the
     * whole list (an improper one is badarg). */
    "function t_apply/0 regs 5\n"
    "    loadk r2, w\n"
    "    loadk r3, nop\n"
    "    loadi r4, 1\n"
    "    callx r2, r2, erlang:make_fun/3\n"
    "    loadi r3, 1000000\n"
    "    call r3, r3, seq/1\n"
    "    loadk r0, []\n"
    "    cons r3, r3, r0\n"
    "    cons r2, r2, r3\n"
    "    loadk r0, w\n"
    "    loadk r1, tryapply\n"
    "    callx r0, r0, b:run/3\n"
    "    ret r0\n"
    "end\n"
    /* The call w:nop(seq(1000000)) meta-traced to a dead tracer: each
     * call's {trace_ts, Pid, call, {w, nop, [L]}, Ts} is counted
     * (2,000,000 words and more) before the tracer is looked up. */
    "function t_meta/0 regs 5\n"
    "    call r4, r4, dead/0\n"
    "    loadk r3, meta\n"
    "    tuple r3, 2, r3\n"
    "    loadk r4, []\n"
    "    cons r2, r3, r4\n"
    "    loadk r0, {w, nop, 1}\n"
    "    loadk r1, true\n"
    "    callx r0, r0, erlang:trace_pattern/3\n"
    "    loadi r2, 1000000\n"
    "    call r2, r2, seq/1\n"
    "    loadk r3, []\n"
    "    cons r2, r2, r3\n"
    "    cons r2, r2, r3\n"
    "    loadk r0, w\n"
    "    loadk r1, nop\n"
    "    callx r0, r0, b:run/3\n"
    "    ret r0\n"
    "end\n"
    /* recv copies the message at the cursor onto the heap each time it
     * reads it: seq(1000000) sent to itself before release is spawned,
     * then read up to 200 times (recv_next past it: a message after it
     * is release's; a wait of 0 puts the cursor back). */
    "function t_recv/0 regs 6\n"
    "    self r0\n"
    "    loadi r1, 1000000\n"
    "    call r1, r1, seq/1\n"
    "    callx r0, r0, erlang:send/2\n"
    "    callx r0, r0, b:behind/0\n"
    "    loadi r3, 200\n"
    "turn:\n"
    "    jeqi r3, 0, none\n"
    "    recv r4, none\n"
    "    recv_next\n"
    "    recv r4, reset\n"
    "    ret r4\n"
    "reset:\n"
    "    loadi r5, 0\n"
    "    wait r5, again\n"
    "    recv r4, again\n"
    "    ret r4\n"
    "again:\n"
    "    addi r3, r3, -1\n"
    "    jump turn\n"
    "none:\n"
    "    loadk r0, not_released\n"
    "    ret r0\n"
    "end\n"
    /* exiter(D): on go, spawns b:release(D), which goes behind it on its
     * scheduler's local queue, and exits with seq(10000) as its reason
     * (20,000 words), which every one of D's 1,000 monitors copies into
     * a 'DOWN' (20,000,000 words in all). */
    "function exiter/1 regs 8\n"
    "    call r1, r1, next/0\n"
    "    loadi r1, 10000\n"
    "    call r1, r1, seq/1\n"
    "    loadk r4, []\n"
    "    cons r6, r0, r4\n"
    "    loadk r4, b\n"
    "    loadk r5, release\n"
    "    callx r4, r4, erlang:spawn/3\n"
    "    callx r1, r1, erlang:exit/1\n"
    "    ret r1\n"
    "end\n"
    /* t_exit(): monitors exiter 1,000 times, lets it go, and answers
     * released if release's message comes before the last 'DOWN'. */
    "function t_exit/0 regs 8\n"
    "    self r2\n"
    "    loadk r4, []\n"
    "    cons r2, r2, r4\n"
    "    loadk r0, w\n"
    "    loadk r1, exiter\n"
    "    callx r0, r0, erlang:spawn/3\n"
    "    loadi r3, 1000\n"
    "mon:\n"
    "    jeqi r3, 0, go\n"
    "    loadk r4, process\n"
    "    move r5, r0\n"
    "    callx r4, r4, erlang:monitor/2\n"
    "    addi r3, r3, -1\n"
    "    jump mon\n"
    "go:\n"
    "    move r4, r0\n"
    "    loadk r5, go\n"
    "    callx r4, r4, erlang:send/2\n"
    "    loadi r3, 1000\n"
    "loop:\n"
    "    jeqi r3, 0, late\n"
    "    recv r4, sleep\n"
    "    accept\n"
    "    loadk r5, released\n"
    "    jeq r4, r5, yes\n"
    "    addi r3, r3, -1\n"
    "    jump loop\n"
    "sleep:\n"
    "    loadk r4, infinity\n"
    "    wait r4, late\n"
    "    jump loop\n"
    "yes:\n"
    "    ret r5\n"
    "late:\n"
    "    loadk r0, not_released\n"
    "    ret r0\n"
    "end\n"
    /* watcher(D, N): sets N monitors on D, tells D ready, and on go
     * spawns b:release(D), which goes behind it, and returns: its exit
     * drops the N monitors (a sort of N entries and a walk of D's list
     * of them). */
    "function watcher/2 regs 8\n"
    "mon:\n"
    "    jeqi r1, 0, ready\n"
    "    loadk r4, process\n"
    "    move r5, r0\n"
    "    callx r4, r4, erlang:monitor/2\n"
    "    addi r1, r1, -1\n"
    "    jump mon\n"
    "ready:\n"
    "    move r4, r0\n"
    "    loadk r5, ready\n"
    "    callx r4, r4, erlang:send/2\n"
    "    call r1, r1, next/0\n"
    "    loadk r4, []\n"
    "    cons r6, r0, r4\n"
    "    loadk r4, b\n"
    "    loadk r5, release\n"
    "    callx r4, r4, erlang:spawn/3\n"
    "    ret r4\n"
    "end\n"
    /* t_drop(): watcher sets 1,000,000 monitors on it; once ready, it
     * monitors watcher and lets it go, and answers released if release's
     * message comes before watcher's 'DOWN' (sent after the drop). */
    "function t_drop/0 regs 8\n"
    "    self r2\n"
    "    loadk r4, [1000000]\n"
    "    cons r2, r2, r4\n"
    "    loadk r0, w\n"
    "    loadk r1, watcher\n"
    "    callx r0, r0, erlang:spawn/3\n"
    "    call r4, r4, next/0\n"
    "    loadk r4, process\n"
    "    move r5, r0\n"
    "    callx r4, r4, erlang:monitor/2\n"
    "    move r4, r0\n"
    "    loadk r5, go\n"
    "    callx r4, r4, erlang:send/2\n"
    "    call r4, r4, first/0\n"
    "    ret r4\n"
    "end\n"
    /* next(): the next message, taken (waits for it). */
    "function next/0 regs 1\n"
    "top:\n"
    "    recv r0, sleep\n"
    "    accept\n"
    "    ret r0\n"
    "sleep:\n"
    "    loadk r0, infinity\n"
    "    wait r0, gone\n"
    "    jump top\n"
    "gone:\n"
    "    ret r0\n"
    "end\n"
    /* first(): the first message: released, or not_released for a
     * 'DOWN'. */
    "function first/0 regs 2\n"
    "    call r0, r0, next/0\n"
    "    loadk r1, released\n"
    "    jeq r0, r1, yes\n"
    "    loadk r1, not_released\n"
    "yes:\n"
    "    ret r1\n"
    "end\n"
    /* t_prune(): 2,097,052 monitors on T (a process that waits for
     * ever), then b:run(erlang, monitor, [process, T]): its 100th call
     * reaches 2^21 entries, where the list of monitors set is pruned (a
     * walk of every entry: is its target alive?). */
    "function t_prune/0 regs 6\n"
    "    loadk r0, w\n"
    "    loadk r1, next\n"
    "    loadk r2, []\n"
    "    callx r0, r0, erlang:spawn/3\n"
    "    loadi r1, 2097052\n"
    "mon:\n"
    "    jeqi r1, 0, turns\n"
    "    loadk r2, process\n"
    "    move r3, r0\n"
    "    callx r2, r2, erlang:monitor/2\n"
    "    addi r1, r1, -1\n"
    "    jump mon\n"
    "turns:\n"
    "    loadk r3, []\n"
    "    cons r2, r0, r3\n"
    "    loadk r3, process\n"
    "    cons r2, r3, r2\n"
    "    loadk r0, erlang\n"
    "    loadk r1, monitor\n"
    "    callx r0, r0, b:run/3\n"
    "    ret r0\n"
    "end\n"
    /* code:load_binary(m, \"m.tasm\", Text), Text a comment of 2 MiB
     * and nothing else: lexed whole, then badfile (no module line). */
    "function t_load/0 regs 4\n"
    "    loadi r2, 14\n"
    "    callx r2, r2, b:doubled/1\n"
    "    loadk r3, []\n"
    "    cons r2, r2, r3\n"
    "    loadk r3, \";\"\n"
    "    cons r2, r3, r2\n"
    "    callx r2, r2, erlang:iolist_to_binary/1\n"
    "    loadk r3, []\n"
    "    cons r2, r2, r3\n"
    "    loadk r3, \"m.tasm\"\n"
    "    cons r2, r3, r2\n"
    "    loadk r3, m\n"
    "    cons r2, r3, r2\n"
    "    loadk r0, code\n"
    "    loadk r1, load_binary\n"
    "    callx r0, r0, b:run/3\n"
    "    ret r0\n"
    "end\n";

/* Runs mod:fun/0 from this thread: its answer must be released. */
static void expect_in(const char *mod, const char *fun)
{
    load_ok(vm, "b", b_src);
    load_ok(vm, "w", w_src);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, mod, fun, 0, NULL, &pid), TVM_OK);
    tvm_term r;
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    char buf[64];
    tvm_format_term(env, r, buf, sizeof buf);
    cr_assert(tvm_is_atom(env, r, "released"),
              "%s:%s/0 answered %s: the process queued behind the long work did not "
              "run while it ran",
              mod, fun, buf);
}

static void expect_released(const char *fun) { expect_in("b", fun); }

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
Test(bif_lend, jeq, .timeout = 300) { expect_in("w", "t_eq"); }
Test(bif_lend, jlt, .timeout = 300) { expect_in("w", "t_lt"); }
Test(bif_lend, min, .timeout = 300) { expect_in("w", "t_min"); }
Test(bif_lend, sort_deep, .timeout = 300) { expect_in("w", "t_sort"); }
Test(bif_lend, send, .timeout = 300) { expect_in("w", "t_send"); }
Test(bif_lend, recv, .timeout = 300) { expect_in("w", "t_recv"); }
Test(bif_lend, spawn, .timeout = 300) { expect_in("w", "t_spawn"); }
Test(bif_lend, setelement, .timeout = 300) { expect_in("w", "t_setelement"); }
Test(bif_lend, apply, .timeout = 300) { expect_in("w", "t_apply"); }
Test(bif_lend, exit_down, .timeout = 300) { expect_in("w", "t_exit"); }
Test(bif_lend, meta_trace, .timeout = 300) { expect_in("w", "t_meta"); }
Test(bif_lend, exit_monitors, .timeout = 300) { expect_in("w", "t_drop"); }
Test(bif_lend, monitor_prune, .timeout = 300) { expect_in("w", "t_prune"); }
Test(bif_lend, load_binary, .timeout = 300) { expect_in("w", "t_load"); }
Test(bif_lend, garbage_collect, .timeout = 300) { expect_in("w", "t_gc"); }
