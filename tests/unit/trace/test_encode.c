/*
 * tests/unit/trace/test_encode.c - the payload encoding: every term kind
 * round-trips through the printer exactly as vm_print_term prints it;
 * cuts at the size cap leave a well-formed encoding with a truncation
 * marker and never write past the cap; nesting is bounded.
 */
#include <criterion/criterion.h>

#include "tests/unit/trace/tr_fixture.h"
#include "vm/print.h"

static Arena arena;

static void setup(void)
{
    vm_atoms_init();
    arena.used = 0;
}

TestSuite(encode, .init = setup);

/* Encodes [t] with `cap` and prints it back. */
static const char *round_trip(Term t, size_t cap, bool *cut)
{
    static char out[16384];
    uint8_t buf[4096];
    unsigned items;
    bool c;
    size_t len = tr_encode(buf, cap, &t, 1, &items, &c);
    cr_assert_leq(len, cap);
    StrBuf sb;
    sb_init(&sb);
    const uint8_t *p = buf;
    cr_assert(tr_print_seq(&sb, &p, buf + len, items, false), "malformed: %s", sb.s);
    cr_assert_eq(p, buf + len, "the printer consumed the whole encoding");
    sb_copy_out(&sb, out, sizeof out);
    sb_free(&sb);
    if (cut)
        *cut = c;
    return out;
}

static const char *vm_show(Term t)
{
    static char out[4096];
    StrBuf sb;
    sb_init(&sb);
    vm_print_term(&sb, t);
    sb_copy_out(&sb, out, sizeof out);
    sb_free(&sb);
    return out;
}

Test(encode, every_term_kind_round_trips_like_vm_print_term)
{
    Export x;
    Term elems[] = { I(0), I(-1), I(SMALL_MAX), I(SMALL_MIN), A("ok"), A("Quoted atom"),
                     TERM_NIL, make_pid(42), bin_of(&arena, "text", 4),
                     bin_of(&arena, "\x01\x02\xff", 3), bin_of(&arena, "", 0),
                     fun_of(&arena, &x, "lists", "map", 2) };
    size_t n = sizeof elems / sizeof elems[0];
    Term terms[] = {
        tuple_of(&arena, 0, NULL),
        tuple_of(&arena, (unsigned)n, elems),
        list_of(&arena, (unsigned)n, elems),
        cons(&arena, I(1), I(2)),                                   /* [1|2] */
        cons(&arena, I(1), tuple_of(&arena, 2, elems)),             /* improper, boxed tail */
        T2(&arena, list_of(&arena, 2, elems), T2(&arena, TERM_NIL, A("x"))),
    };
    for (size_t i = 0; i < n; i++) {
        bool cut = true;
        cr_expect_str_eq(round_trip(elems[i], 4096, &cut), vm_show(elems[i]));
        cr_expect(!cut);
    }
    for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++)
        cr_expect_str_eq(round_trip(terms[i], 4096, NULL), vm_show(terms[i]));
}

Test(encode, a_list_cut_at_the_cap_ends_with_the_marker)
{
    Term e[100];
    for (int i = 0; i < 100; i++)
        e[i] = I(i);
    Term l = list_of(&arena, 100, e);
    bool cut = false;
    /* LIST + 9 elements of 2 bytes fit in 24 with 3 bytes of reserve. */
    cr_expect_str_eq(round_trip(l, 24, &cut), "[0,1,2,3,4,5,6,7,8,9|...]");
    cr_expect(cut);
    /* TUPLE, ATOM ok (2 bytes: its index, a predefined atom's, is under
     * 128; an atom interned after the predefined ones has a longer
     * varint once there are more than 127 of those), LIST, then elements
     * while 4 bytes stay free. */
    cr_expect_str_eq(round_trip(T2(&arena, A("ok"), l), 12, &cut), "{ok,[0,1|...]}");
    cr_expect(cut);
    cr_expect_str_eq(round_trip(T2(&arena, l, A("ok")), 8, &cut), "{[0|...]}");
}

Test(encode, binaries_keep_what_fits_and_say_so)
{
    Term b = bin_of(&arena, "0123456789", 10);
    bool cut = false;
    cr_expect_str_eq(round_trip(b, 10, &cut), "<<\"01234\"...>>");
    cr_expect(cut);
    cr_expect_str_eq(round_trip(b, 15, &cut), "<<\"0123456789\">>");
    cr_expect(!cut);
}

Test(encode, every_cap_gives_a_well_formed_encoding_within_the_cap)
{
    Export x;
    Term inner[] = { I(123456789), A("some_atom"), bin_of(&arena, "binary!", 7),
                     fun_of(&arena, &x, "m", "f", 3), make_pid(1000000) };
    Term t = T2(&arena, list_of(&arena, 5, inner), tuple_of(&arena, 5, inner));
    Term args[3] = { t, I(7), t };
    for (size_t cap = 1; cap < 120; cap++) {
        uint8_t buf[256];
        memset(buf, 0xAA, sizeof buf);
        unsigned items;
        bool cut;
        size_t len = tr_encode(buf, cap, args, 3, &items, &cut);
        cr_assert_leq(len, cap, "cap %zu", cap);
        cr_assert_eq(buf[cap], 0xAA, "wrote past the cap %zu", cap);
        StrBuf sb;
        sb_init(&sb);
        const uint8_t *p = buf;
        cr_assert(tr_print_seq(&sb, &p, buf + len, items, true), "cap %zu: %s", cap, sb.s);
        cr_assert_eq(p, buf + len);
        if (cut)
            cr_assert(strstr(sb.s, "..."), "cap %zu: no marker in %s", cap, sb.s);
        sb_free(&sb);
    }
}

Test(encode, args_after_a_cut_argument_are_marked)
{
    Term args[2] = { bin_of(&arena, "0123456789abcdefghij", 20), I(2) };
    uint8_t buf[64];
    unsigned items;
    bool cut;
    size_t len = tr_encode(buf, 12, args, 2, &items, &cut);
    StrBuf sb;
    sb_init(&sb);
    const uint8_t *p = buf;
    sb_putc(&sb, '[');
    tr_print_seq(&sb, &p, buf + len, items, true);
    sb_putc(&sb, ']');
    /* BIN 20 7 + 7 bytes, the top-level reserve byte: TRUNC. */
    cr_expect_str_eq(sb.s, "[<<\"0123456\"...>>|...]");
    cr_expect(cut);
    sb_free(&sb);
}

Test(encode, deep_nesting_is_bounded_and_siblings_survive)
{
    Term t = A("bottom");
    for (int i = 0; i < 1000; i++)
        t = T2(&arena, t, I(i));
    bool cut = false;
    const char *s = round_trip(t, 4096, &cut);
    cr_expect(cut);
    /* TR_ENCODE_DEPTH tuples open, the next level is "...", and the
     * right-hand elements of every level are still there. */
    char want[512] = "";
    for (int i = 0; i < TR_ENCODE_DEPTH; i++)
        strcat(want, "{");
    strcat(want, "...");
    for (int i = 0; i < TR_ENCODE_DEPTH; i++)
        sprintf(want + strlen(want), ",%d}", 1000 - TR_ENCODE_DEPTH + i);
    cr_expect_str_eq(s, want);
}

Test(encode, long_lists_do_not_recurse)
{
    static Term e[20000];
    for (int i = 0; i < 20000; i++)
        e[i] = I(i % 10);
    Term l = list_of(&arena, 20000, e);
    bool cut = false;
    const char *s = round_trip(l, 4096, &cut);
    cr_expect(cut);
    cr_expect(strncmp(s, "[0,1,2,3", 8) == 0);
    cr_expect(strcmp(s + strlen(s) - 5, "|...]") == 0, "%s", s + strlen(s) - 10);
}

Test(encode, zero_cap_and_no_terms)
{
    uint8_t buf[4];
    unsigned items = 9;
    bool cut = true;
    Term t = I(1);
    cr_expect_eq(tr_encode(buf, 0, &t, 1, &items, &cut), 0);
    cr_expect_eq(items, 0);
    cr_expect(cut);
    cr_expect_eq(tr_encode(buf, 4, NULL, 0, &items, &cut), 0);
    cr_expect_eq(items, 0);
    cr_expect(!cut);
}

Test(encode, json_escape)
{
    StrBuf sb;
    sb_init(&sb);
    tr_json_escape(&sb, "a\"b\\c\nd\x01\xc3\xa9\xff", 11);
    cr_expect_str_eq(sb.s, "a\\\"b\\\\c\\nd\\u0001\xc3\xa9\\u00ff");
    sb_free(&sb);
}

/* The sinks' integers: every digit count, both ends of both types, and
 * each power of ten and the number before it (where a digit pair
 * splits or a one-digit head starts). */
Test(encode, integers_in_decimal)
{
    StrBuf sb, want;
    sb_init(&sb);
    sb_init(&want);
    uint64_t p = 1;
    for (int digits = 1; digits <= 20; digits++, p *= 10) {
        const uint64_t vs[] = { p - 1, p, p + 1, p * 3 + 7 };
        for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
            if (digits == 20 && i > 1)
                break;          /* past UINT64_MAX */
            sb.len = want.len = 0;
            tr_put_u64(&sb, vs[i]);
            sb_printf(&want, "%llu", (unsigned long long)vs[i]);
            cr_assert_eq(sb.len, want.len, "%llu: %.*s", (unsigned long long)vs[i], (int)sb.len,
                         sb.s);
            cr_assert_eq(memcmp(sb.s, want.s, sb.len), 0, "%llu: %.*s",
                         (unsigned long long)vs[i], (int)sb.len, sb.s);
        }
    }
    const int64_t is[] = { 0, -1, 9, -10, 99, -100, INT64_MAX, INT64_MIN };
    for (size_t i = 0; i < sizeof is / sizeof is[0]; i++) {
        sb.len = want.len = 0;
        tr_put_i64(&sb, is[i]);
        sb_printf(&want, "%lld", (long long)is[i]);
        cr_assert(sb.len == want.len && memcmp(sb.s, want.s, sb.len) == 0, "%lld: %.*s",
                  (long long)is[i], (int)sb.len, sb.s);
    }
    sb.len = 0;
    tr_put_u64(&sb, UINT64_MAX);
    cr_assert(sb.len == 20 && memcmp(sb.s, "18446744073709551615", 20) == 0);
    sb_free(&sb);
    sb_free(&want);
}
