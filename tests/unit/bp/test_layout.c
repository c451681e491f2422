/*
 * tests/unit/bp/test_layout.c - where a module's functions and their
 * breakpoint records lie in memory.  trace_pattern's staging pass reads
 * one line of each function and one of each record, in the module's
 * order; the hardware prefetchers help it only if memory holds them in
 * that order (docs/breakpoints.md, "Layout in memory").  Nothing
 * behaves differently when the order is lost, only slower, so these
 * tests look at the addresses themselves.
 */
#include <criterion/criterion.h>

#include "tests/unit/helpers.h"
#include "vm/atom.h"
#include "vm/breakpoint.h"
#include "vm/module.h"

/* Functions of 3, 5, 2 and 9 code words (ENTER and the body). */
static const char *const lay_src =
    "module lay\n"
    "export a/1, b/1, c/1, d/1\n"
    "function a/1 regs 1\n    addi r0, r0, 1\n    ret r0\nend\n"
    "function b/1 regs 1\n    addi r0, r0, 1\n    addi r0, r0, 2\n"
    "    addi r0, r0, 3\n    ret r0\nend\n"
    "function c/1 regs 1\n    ret r0\nend\n"
    "function d/1 regs 1\n"
    "    addi r0, r0, 1\n    addi r0, r0, 2\n    addi r0, r0, 3\n    addi r0, r0, 4\n"
    "    addi r0, r0, 5\n    addi r0, r0, 6\n    addi r0, r0, 7\n    ret r0\nend\n";

static const char *const names[] = { "a", "b", "c", "d" };
enum { NFUNCS = 4 };

static tvm_vm *vm;

static void setup(void)
{
    vm = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 1 });
    cr_assert_not_null(vm);
    load_ok(vm, "lay.tasm", lay_src);
}

static void teardown(void)
{
    tvm_destroy(vm);
}

TestSuite(layout, .init = setup, .fini = teardown, .timeout = 30);

/* lay:<name>/1's FuncInfo. */
static const FuncInfo *func(const char *name)
{
    Atom m, f;
    cr_assert(vm_atom_intern("lay", 3, &m) && vm_atom_intern(name, strlen(name), &f));
    const Export *e = vm_export_find(vm, m, f, 1);
    cr_assert_not_null(e, "lay:%s/1 is exported", name);
    return vm_export_target(vm, e);
}

Test(layout, a_modules_functions_lie_in_one_block_in_order)
{
    const uint32_t want_words[NFUNCS] = { 3, 5, 2, 9 };
    for (int i = 0; i < NFUNCS; i++) {
        const FuncInfo *fi = func(names[i]);
        cr_assert_eq(fi->ncode, want_words[i], "lay:%s/1 has %u code words", names[i], fi->ncode);
        cr_assert_eq((uintptr_t)fi % 32, 0, "lay:%s/1 is 32-byte aligned", names[i]);
        cr_assert_eq(fi->bp_orig, fi->code[0], "lay:%s/1's saved word is its first", names[i]);
        if (i == 0)
            continue;
        const FuncInfo *prev = func(names[i - 1]);
        /* The one before, rounded up to FuncInfo's alignment, ends where
         * this one begins. */
        const size_t stride = (offsetof(FuncInfo, code) + prev->ncode * sizeof(Instr) + 31) & ~(size_t)31;
        cr_assert_eq((const char *)fi - (const char *)prev, (ptrdiff_t)stride,
                     "lay:%s/1 follows lay:%s/1 directly (%td bytes apart, want %zu)",
                     names[i], names[i - 1], (const char *)fi - (const char *)prev, stride);
    }
}

/* Local call trace on or off for every function of lay. */
static void tp(tvm_tp_action how)
{
    tvm_error err;
    int matched = -1;
    cr_assert_eq(tvm_trace_pattern(vm, "lay:_/_", how, TVM_TP_LOCAL, &matched, &err), TVM_OK,
                 "%s", err.message);
    cr_assert_eq(matched, NFUNCS);
}

Test(layout, the_records_one_call_creates_lie_in_the_modules_order)
{
#ifdef VM_ASAN
    cr_skip_test("AddressSanitizer builds allocate each record alone");
#endif
    tp(TVM_TP_TRUE);
    const BpRecord *first = vm_atomic_load_ptr_relaxed(&func(names[0])->bp);
    cr_assert_not_null(first);
    for (int i = 1; i < NFUNCS; i++) {
        const BpRecord *r = vm_atomic_load_ptr_relaxed(&func(names[i])->bp);
        cr_assert_eq(r, first + i, "lay:%s/1's record is %d records on from lay:a/1's (it is %td bytes on)",
                     names[i], i, (const char *)r - (const char *)first);
        /* Hot lines one after the other, cold parts too, elsewhere. */
        cr_assert_eq(bp_cold(r), bp_cold(first) + i, "lay:%s/1's cold part follows", names[i]);
        cr_assert((const char *)bp_cold(r) >= (const char *)(first + NFUNCS) ||
                      (const char *)bp_cold(r) + sizeof(BpCold) <= (const char *)first,
                  "no cold part among the hot lines");
    }
    /* Switched off, they stay idle on their functions; on again, the
     * same records serve. */
    tp(TVM_TP_FALSE);
    tp(TVM_TP_TRUE);
    for (int i = 0; i < NFUNCS; i++)
        cr_assert_eq(vm_atomic_load_ptr_relaxed(&func(names[i])->bp), first + i);
}
