/*
 * tests/unit/vm/test_heap.c - the copying collector: roots survive, memory
 * stays bounded, heaps grow and shrink.
 */
#include <criterion/criterion.h>

#include "tests/unit/helpers.h"
#include "vm/heap.h"
#include "vm/process.h"

TVM_FIXTURE(heap, NULL);

/* garbage(N): allocates N 3-word tuples and keeps none of them.
 * build(N): returns a list [N, N-1, ..., 1] (live data).
 * sum(L): sums a list. */
static const char *const src =
    "module gc\n"
    "export garbage/1, build/1, sum/1\n"
    "function garbage/1 regs 4\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    move r1, r0\n"
    "    tuple r2, 2, r0\n"
    "    addi r0, r0, -1\n"
    "    jump loop\n"
    "done:\n"
    "    loadk r0, ok\n"
    "    ret r0\n"
    "end\n"
    "function build/1 regs 3\n"
    "    loadk r1, []\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    cons r1, r0, r1\n"
    "    addi r0, r0, -1\n"
    "    jump loop\n"
    "done:\n"
    "    ret r1\n"
    "end\n"
    "function sum/1 regs 3\n"
    "    loadi r1, 0\n"
    "loop:\n"
    "    is_cons r0, done\n"
    "    hd r2, r0\n"
    "    add r1, r1, r2\n"
    "    tl r0, r0\n"
    "    jump loop\n"
    "done:\n"
    "    ret r1\n"
    "end\n";

Test(heap, allocating_100x_the_heap_keeps_memory_bounded)
{
    load_ok(vm, "gc.tasm", src);
    Process *p = env->p;
    size_t before = vm_heap_size(p);
    /* 3 words per tuple: 100x the minimum heap is 100 * 128 / 3 tuples;
     * run 100x that again to be far beyond. */
    int64_t n = 100 * 100 * VM_HEAP_MIN_WORDS / 3;
    char out[64];
    cr_assert_eq(call_fmt(env, "gc", "garbage", 1, &n, out, sizeof out), TVM_OK);
    cr_assert_str_eq(out, "ok");
    cr_assert_gt(p->gc_count, 1000, "the loop must have collected many times (%zu)", p->gc_count);
    cr_assert_leq(vm_heap_size(p), 4 * before, "heap grew to %zu words", vm_heap_size(p));
}

Test(heap, live_data_survives_collections_and_heap_grows_then_shrinks)
{
    load_ok(vm, "gc.tasm", src);
    Process *p = env->p;
    tvm_term n, list, total;
    cr_assert_eq(tvm_make_int(env, 100000, &n), TVM_OK);
    cr_assert_eq(tvm_call(env, "gc", "build", 1, &n, &list), TVM_OK);
    cr_assert_geq(vm_heap_size(p), 200000, "the heap holds 100,000 cons cells");
    /* Garbage on top of live data: the list (a handle) must stay intact. */
    tvm_term g;
    cr_assert_eq(tvm_make_int(env, 200000, &g), TVM_OK);
    tvm_term r;
    cr_assert_eq(tvm_call(env, "gc", "garbage", 1, &g, &r), TVM_OK);
    cr_assert_eq(tvm_call(env, "gc", "sum", 1, &list, &total), TVM_OK);
    int64_t v;
    cr_assert_eq(tvm_get_int(env, total, &v), TVM_OK);
    cr_assert_eq(v, (int64_t)100000 * 100001 / 2);
    /* Drop every handle: the next collection shrinks the heap. */
    p->nroots = 0;
    vm_gc(p, 0, NULL, 0);
    cr_assert_leq(vm_heap_size(p), 4 * VM_HEAP_MIN_WORDS, "heap is %zu words", vm_heap_size(p));
}

Test(heap, collector_preserves_sharing_free_structure_and_binaries)
{
    Process *p = env->p;
    tvm_term t;
    cr_assert_eq(tvm_parse_term(env, "{[1, {2, \"two\"}], \"\", fun m:f/2}", &t, NULL), TVM_OK);
    char before[256], after[256];
    tvm_format_term(env, t, before, sizeof before);
    for (int i = 0; i < 5; i++)
        vm_gc(p, 0, NULL, 0);
    tvm_format_term(env, t, after, sizeof after);
    cr_assert_str_eq(before, after);
    cr_assert_str_eq(after, "{[1,{2,<<\"two\">>}],<<>>,fun m:f/2}");
}
