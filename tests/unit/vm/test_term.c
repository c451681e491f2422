/*
 * tests/unit/vm/test_term.c - tagged terms, atoms, term order, printing.
 */
#include <criterion/criterion.h>

#include "tests/unit/helpers.h"
#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/print.h"
#include "vm/process.h"

TVM_FIXTURE(term, NULL);

static const char *show(Term t)
{
    static char buf[512];
    StrBuf sb;
    sb_init(&sb);
    vm_print_term(&sb, t);
    sb_copy_out(&sb, buf, sizeof buf);
    sb_free(&sb);
    return buf;
}

Test(term, small_integers_round_trip_at_the_limits)
{
    int64_t vals[] = { 0, 1, -1, 42, SMALL_MAX, SMALL_MIN, (int64_t)1 << 40 };
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        Term t = make_small(vals[i]);
        cr_assert(term_is_small(t));
        cr_assert_eq(small_value(t), vals[i]);
    }
    cr_assert(!small_fits(SMALL_MAX + 1));
    cr_assert(!small_fits(SMALL_MIN - 1));
}

Test(term, tags_are_disjoint)
{
    Atom ok = vm_atom_cstr("ok");
    Term a = make_atom(ok), n = TERM_NIL, p = make_pid(7), s = make_small(3);
    cr_assert(term_is_atom(a) && !term_is_atom(n) && !term_is_atom(p) && !term_is_atom(s));
    cr_assert(term_is_nil(n) && !term_is_nil(a));
    cr_assert(term_is_pid(p) && !term_is_pid(a));
    cr_assert(!term_is_header(a) && !term_is_header(s));
    cr_assert(term_is_header(MAKE_HEADER(IMM_HDR_TUPLE, 3)));
}

Test(term, atoms_intern_once_and_keep_names)
{
    Atom a, b, c;
    cr_assert(vm_atom_intern("hello", 5, &a));
    cr_assert(vm_atom_intern("hello", 5, &b));
    cr_assert(vm_atom_intern("hellp", 5, &c));
    cr_assert_eq(a, b);
    cr_assert_neq(a, c);
    size_t n;
    cr_assert_str_eq(vm_atom_name(a, &n), "hello");
    cr_assert_eq(n, 5);
    cr_assert_eq(vm_atom_cstr("true"), ATOM_TRUE);
    char big[300];
    memset(big, 'x', sizeof big);
    cr_assert(!vm_atom_intern(big, 256, &a), "atoms are at most 255 bytes");
    cr_assert(vm_atom_intern(big, 255, &a));
}

Test(term, erlang_term_order)
{
    Process *p = env->p;
    Term one = make_small(1), atom = make_atom(vm_atom_cstr("a"));
    Term e[2] = { one, one };
    Term tup = vm_make_tuple(p, 2, e);
    Term bin = vm_make_binary(p, "ab", 2);
    /* number < atom < pid < tuple < nil < list < binary */
    Term order[] = { make_small(-5), one, atom, make_atom(vm_atom_cstr("b")), make_pid(1),
                     tup, TERM_NIL };
    for (size_t i = 0; i + 1 < sizeof order / sizeof order[0]; i++)
        cr_assert_lt(term_compare(order[i], order[i + 1]), 0, "item %zu", i);
    cr_assert_lt(term_compare(TERM_NIL, bin), 0);
    cr_assert_eq(term_compare(tup, tup), 0);
    Term bin2 = vm_make_binary(p, "abc", 3);
    cr_assert_lt(term_compare(vm_root_get(p, vm_root_push(p, bin)), bin2), 0);
}

Test(term, printing_uses_erlang_syntax)
{
    tvm_term t;
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, "{ok, [1, -2, 'Big atom', \"s\\n\"], {}, [a | b], []}", &t, &err),
                 TVM_OK, "%s", err.message);
    char buf[256];
    tvm_format_term(env, t, buf, sizeof buf);
    cr_assert_str_eq(buf, "{ok,[1,-2,'Big atom',<<\"s\\n\">>],{},[a|b],[]}");
    cr_assert_str_eq(show(make_pid(42)), "<0.42.0>");
    cr_assert_str_eq(show(vm_make_binary(env->p, "\x01\x02", 2)), "<<1,2>>");
    /* Every width of a byte, and the escapes between runs of plain text. */
    cr_assert_str_eq(show(vm_make_binary(env->p, "\x00\x09\x0a\x63\x64\xff", 6)),
                     "<<0,9,10,99,100,255>>");
    cr_assert_str_eq(show(vm_make_binary(env->p, "ab\"c\\d\te\r\nf", 11)),
                     "<<\"ab\\\"c\\\\d\\te\\r\\nf\">>");
    Atom a;
    cr_assert(vm_atom_intern("it's\x7f\x01x", 7, &a));
    cr_assert_str_eq(show(make_atom(a)), "'it\\'s\\x7f\\x01x'");
}

Test(term, parse_term_reports_bad_syntax)
{
    tvm_term t;
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, "{1, 2", &t, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "term:1:6: error: bad literal: expected ',' or '}', got end of file\n");
    cr_assert_eq(tvm_parse_term(env, "1 2", &t, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "term:1:3: error: unexpected '2' after the term\n");
}

Test(term, term_size_counts_heap_words)
{
    tvm_term t;
    cr_assert_eq(tvm_parse_term(env, "{a, [1, 2], \"xyz\"}", &t, NULL), TVM_OK);
    /* tuple 4 + two cons cells 4 + binary 2 */
    cr_assert_eq(term_size(vm_root_get(env->p, t)), 10);
}
