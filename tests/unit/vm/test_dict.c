/*
 * tests/unit/vm/test_dict.c - the process dictionary's bounds (vm/dict.c,
 * docs/asm.md section 10): where terms with shared parts would make BEAM
 * walk for ever, tracevm raises system_limit in the process that asked,
 * on a VM whose max_message_words is 1,000 so that the bounds are small:
 * the copy of another process's dictionary for process_info/2 (exact at
 * the limit), and the comparison of keys built apart.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "tests/unit/helpers.h"

static tvm_config small_copies = { .size = sizeof(tvm_config), .schedulers = 1,
                                   .quiet_crashes = true, .max_message_words = 1000 };
TVM_FIXTURE(dict, &small_copies);

/* (A call's register window starts at its argument register and
 * overwrites the caller's registers from there up.) */
static const char *const d_src =
    "module d\n"
    "export holder/2, pi/1, dag/1, apart/1, same/1\n"
    TASM_DAG_LIST
    /* holder(Kind, N): put(v, dag(N)) (Kind dag) or put(v, list(N)),
     * then waits for ever */
    "function holder/2 regs 4\n"
    "    loadk r2, dag\n"
    "    jne r0, r2, lst\n"
    "    call r1, r1, dag/1\n"
    "    jump put\n"
    "lst:\n"
    "    call r1, r1, list/1\n"
    "put:\n"
    "    move r2, r1\n"
    "    loadk r1, v\n"
    "    callx r1, r1, erlang:put/2\n"
    "top:\n"
    "    recv r1, w\n"
    "    accept\n"
    "    jump top\n"
    "w:\n"
    "    loadk r2, infinity\n"
    "    wait r2, again\n"
    "again:\n"
    "    jump top\n"
    "end\n"
    /* pi(Pid): the length of process_info(Pid, dictionary)'s pairs */
    "function pi/1 regs 2\n"
    "    loadk r1, dictionary\n"
    "    callx r0, r0, erlang:process_info/2\n"
    "    getel r0, r0, 2\n"
    "    callx r0, r0, erlang:length/1\n"
    "    ret r0\n"
    "end\n"
    /* apart(N): erase(), put(dag(N), found), then get/1 of dag(N) built
     * anew */
    "function apart/1 regs 3\n"
    "    callx r1, r1, erlang:erase/0\n"
    "    move r1, r0\n"
    "    call r1, r1, dag/1\n"
    "    loadk r2, found\n"
    "    callx r1, r1, erlang:put/2\n"
    "    move r1, r0\n"
    "    call r1, r1, dag/1\n"
    "    callx r1, r1, erlang:get/1\n"
    "    ret r1\n"
    "end\n"
    /* same(N): erase(), K = dag(N), put(K, found), get(K) */
    "function same/1 regs 3\n"
    "    callx r1, r1, erlang:erase/0\n"
    "    move r1, r0\n"
    "    call r1, r1, dag/1\n"
    "    move r0, r1\n"
    "    loadk r2, found\n"
    "    callx r1, r1, erlang:put/2\n"
    "    move r1, r0\n"
    "    callx r1, r1, erlang:get/1\n"
    "    ret r1\n"
    "end\n";

/* Spawns d:holder(Kind, N) and waits until it waits. */
static tvm_pid holder(const char *kind, int64_t n)
{
    tvm_term a[2];
    cr_assert_eq(tvm_make_atom(env, kind, &a[0]), TVM_OK);
    cr_assert_eq(tvm_make_int(env, n, &a[1]), TVM_OK);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "d", "holder", 2, a, &pid), TVM_OK);
    wait_proc_state(vm, pid, "waiting");
    return pid;
}

/* d:pi(Pid) from the embedder's thread, formatted into out. */
static tvm_status pi(tvm_pid pid, char *out, size_t size)
{
    tvm_term a, r;
    cr_assert_eq(tvm_make_pid(env, pid, &a), TVM_OK);
    tvm_status st = tvm_call(env, "d", "pi", 1, &a, &r);
    if (st == TVM_OK)
        tvm_format_term(env, r, out, size);
    else
        exception_fmt(env, out, size);
    return st;
}

Test(dict, process_info_copies_another_dictionary_up_to_max_message_words)
{
    load_ok(vm, "d", d_src);
    char out[100];
    /* One pair: its cell and tuple (5 words) and [1..N] (2N): 1,000
     * words for N = 497 copy, 1,002 for 498 do not. */
    cr_assert_eq(pi(holder("list", 497), out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "1");
    cr_assert_eq(pi(holder("list", 498), out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    /* 3 * 20 words on the holder's heap, 3 * (2^20 - 1) flat: refused
     * after counting past the cap, not after a million steps. */
    tvm_pid h = holder("dag", 20);
    cr_assert_eq(pi(h, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    char state[32];
    cr_assert_str_eq(proc_state(vm, h, state, sizeof state), "waiting");
}

Test(dict, keys_with_much_sharing_built_apart_are_a_system_limit)
{
    load_ok(vm, "d", d_src);
    char out[100];
    /* Two copies built apart compare as 2^40 pairs flat: past the 2,000
     * steps a comparison may take.  Small ones compare equal. */
    int64_t n = 40;
    cr_assert_eq(call_fmt(env, "d", "apart", 1, &n, out, sizeof out), TVM_EXCEPTION);
    cr_assert_str_eq(out, "error:system_limit");
    n = 5;
    cr_assert_eq(call_fmt(env, "d", "apart", 1, &n, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "found");
    /* The key itself is found at once (the same term). */
    n = 40;
    cr_assert_eq(call_fmt(env, "d", "same", 1, &n, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "found");
}
