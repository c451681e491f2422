/*
 * tests/unit/vm/test_deep.c - terms 10,000,000 levels deep (fewer outside
 * the native release build: deep_levels) in each of the four shapes
 * (nested in a list's head, in its tail, in a tuple's first and in its
 * last element) are compared, sized, copied, printed and sent
 * between processes, and returned as a process's exit value, with
 * constant C stack; a term whose sharing makes it astronomically big flat
 * is refused quickly.  The walks keep their work on the heap
 * (vm/term.c, vm/heap.c): with recursion a few thousand levels would
 * overflow a 256 KiB fiber stack.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/helpers.h"
#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/print.h"
#include "vm/sched.h"

/* The depth: 10,000,000 levels in the optimised native build (release),
 * the one users run, and 1,000,000 in the debug, ASan and clang builds.
 * A million is already past what recursion survives on any stack these
 * walks run on: a few thousand levels overflow a 256 KiB fiber stack, and
 * on a thread every recursive level costs at least 16 bytes (both ABIs
 * keep the stack 16-byte aligned at a call), 16 MB for the million, twice
 * the 8 MiB of a main thread's default stack.  The deeper run adds only
 * time, ten times as much.  200,000 levels (as tests/e2e/deep_terms.tasm
 * in every build: twelve times what recursion survives on a fiber stack)
 * under ThreadSanitizer, which slows these single-threaded walks tenfold
 * and looks for races they cannot have, and under user-mode emulation (a
 * cross build's suite: the runner names the emulator in TRACEVM_RUN),
 * where every instruction is emulated; the same C code walks the deeper
 * terms natively.  The runner names the build in TRACEVM_MODE
 * (tests/runner.py). */
static size_t deep_levels(void)
{
    const char *mode = getenv("TRACEVM_MODE");
    if (test_full_scale())
        return 10000000u;
    if (getenv("TRACEVM_RUN") || (mode && strcmp(mode, "tsan") == 0))
        return 200000u;
    return 1000000u;
}
#define DEEP deep_levels()

enum Shape { HLIST, TLIST, TFIRST, TLAST };

/* A term `depth` levels deep around `leaf`, in a malloc'd block (terms
 * may live anywhere, as module literals do), the other element of each
 * level the atom ok (short to print).  *block gets the block. */
static Term build(enum Shape s, size_t depth, Term leaf, Term **block)
{
    size_t per = s == HLIST || s == TLIST ? 2 : 3;
    Term *w = malloc(depth * per * sizeof(Term));
    cr_assert(w);
    *block = w;
    Term t = leaf;
    for (size_t i = 0; i < depth; i++, w += per) {
        switch (s) {
        case HLIST: w[0] = t; w[1] = TERM_NIL; t = make_cons_ptr(w); break;
        case TLIST: w[0] = TERM_OK; w[1] = t; t = make_cons_ptr(w); break;
        case TFIRST:
            w[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2); w[1] = t; w[2] = TERM_OK;
            t = make_boxed(w);
            break;
        case TLAST:
            w[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2); w[1] = TERM_OK; w[2] = t;
            t = make_boxed(w);
            break;
        }
    }
    return t;
}

static const char *const shape_names[] = { "hlist", "tlist", "tfirst", "tlast" };

/* Atoms are printed by name: the table must be there (tvm_new makes it). */
TestSuite(deep, .init = vm_atoms_init);

Test(deep, compared_sized_copied_in_every_shape, .timeout = 300)
{
    /* Where build() put the leaf: in the first level it wrote. */
    static const int leaf_at[] = { [HLIST] = 0, [TLIST] = 1, [TFIRST] = 1, [TLAST] = 2 };
    for (int s = HLIST; s <= TLAST; s++) {
        Term *ba;
        Term a = build(s, DEEP, TERM_NIL, &ba);
        const char *n = shape_names[s];
        size_t words = (s == HLIST || s == TLIST ? 2 : 3) * (size_t)DEEP;
        cr_assert_eq(term_size_capped(a, words), words, "%s", n);
        cr_assert_eq(term_size_capped(a, words - 1), SIZE_MAX, "%s", n);
        /* A copy (as a message) is exactly term_size words, equal to the
         * original all the way down (no pointer in common). */
        Message *m = vm_message_new(NULL, a, words);
        cr_assert(m, "%s", n);
        cr_assert_eq(m->words, words, "%s", n);
        cr_assert_eq(term_compare(m->term, a), 0, "%s: the copy differs", n);
        /* The original with 1 for its leaf: at the bottom 1 sorts before
         * [] (numbers come first), and only there do the two differ. */
        cr_assert_eq(ba[leaf_at[s]], TERM_NIL, "%s: the leaf", n);
        ba[leaf_at[s]] = make_small(1);
        cr_assert_eq(term_compare(a, m->term), -1, "%s: a with leaf 1 < the copy", n);
        vm_messages_free(m);
        free(ba);
    }
}

/* The printed form, its length and its two ends. */
static void check_print(Term t, size_t len, const char *head, const char *tail)
{
    StrBuf sb;
    sb_init(&sb);
    vm_print_term(&sb, t);
    cr_assert_eq(sb.len, len, "printed %zu bytes, expected %zu", sb.len, len);
    cr_assert_eq(memcmp(sb.s, head, strlen(head)), 0, "starts %.40s", sb.s);
    cr_assert_str_eq(sb.s + sb.len - strlen(tail), tail);
    sb_free(&sb);
}

Test(deep, printed_in_every_shape, .timeout = 300)
{
    Term *blk;
    /* [[...[[]]...]]: N + 1 opening brackets, N + 1 closing ones. */
    check_print(build(HLIST, DEEP, TERM_NIL, &blk), 2 * (size_t)DEEP + 2, "[[[[[[", "]]]]]]");
    free(blk);
    /* N times "ok", N - 1 commas and the brackets. */
    check_print(build(TLIST, DEEP, TERM_NIL, &blk), 3 * (size_t)DEEP + 1, "[ok,ok,ok,", ",ok,ok]");
    free(blk);
    /* {{...{[],ok},ok}...,ok} and {ok,{ok,{...{ok,[]}...}}}: each level
     * "{", "ok", "," and "}", and "[]" once. */
    check_print(build(TFIRST, DEEP, TERM_NIL, &blk), 5 * (size_t)DEEP + 2, "{{{{{{{{",
                ",ok},ok},ok}");
    free(blk);
    check_print(build(TLAST, DEEP, TERM_NIL, &blk), 5 * (size_t)DEEP + 2, "{ok,{ok,{ok,",
                "}}}}}}}}");
    free(blk);
    /* Improper tails and nesting in the middle of a tuple print too. */
    Term *b2;
    Term mid = build(HLIST, 3, TERM_NIL, &b2);
    Term tup[4] = { MAKE_HEADER(IMM_HDR_TUPLE, 3), make_small(1), mid, make_small(2) };
    Term cell[2] = { make_boxed(tup), make_small(3) };
    check_print(make_cons_ptr(cell), 18, "[{1,[[[[]]]],2}|3]", "[{1,[[[[]]]],2}|3]");
    free(b2);
}

Test(deep, shared_subterms_are_counted_flat_and_the_count_stops_at_the_cap)
{
    /* t = {t0, t0} sixty times: 2^60 words flat.  Counting stops past the
     * cap, so this takes about `cap` steps, not 2^60. */
    Term pairs[60][3];
    Term t = TERM_NIL;
    for (int i = 0; i < 60; i++) {
        pairs[i][0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
        pairs[i][1] = pairs[i][2] = t;
        t = make_boxed(pairs[i]);
    }
    cr_assert_eq(term_size_capped(t, 1000000), SIZE_MAX);
    cr_assert_eq(vm_message_new(NULL, t, 1000000), NULL);
    /* Ten levels: 3 * (2^10 - 1) words, shared or not. */
    Term t10 = make_boxed(pairs[9]);
    cr_assert_eq(term_size(t10), 3 * 1023);
    Message *m = vm_message_new(NULL, t10, 3 * 1023);
    cr_assert(m);
    cr_assert_eq(term_compare(m->term, t10), 0);
    vm_messages_free(m);
}

static const char *const deep_src =
    "module deep\n"
    "export hlist/1\n"
    /* hlist(N): [[...[]...]], N levels */
    "function hlist/1 regs 3\n"
    "    loadk r1, []\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    addi r0, r0, -1\n"
    "    loadk r2, []\n"
    "    cons r1, r1, r2\n"
    "    jump loop\n"
    "done:\n"
    "    ret r1\n"
    "end\n";

Test(deep, a_process_returns_a_deep_term_as_its_exit_value, .timeout = 300)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    load_ok(vm, "deep", deep_src);
    tvm_term n, r;
    cr_assert_eq(tvm_make_int(env, DEEP, &n), TVM_OK);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "deep", "hlist", 1, &n, &pid), TVM_OK);
    /* The exit value is copied out of the process, then into env. */
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    size_t len = tvm_format_term(env, r, NULL, 0);
    cr_assert_eq(len, 2 * (size_t)DEEP + 2);
    Term *blk;
    Term want = build(HLIST, DEEP, TERM_NIL, &blk);
    tvm_term w;
    cr_assert_eq(tvm_parse_term(env, "[]", &w, NULL), TVM_OK);
    cr_assert(!tvm_equal(env, r, w));
    cr_assert_eq(term_compare(vm_root_get(env->p, r), want), 0);
    free(blk);
    tvm_env_free(env);
    tvm_destroy(vm);
}
