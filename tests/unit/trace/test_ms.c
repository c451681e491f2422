/*
 * tests/unit/trace/test_ms.c - match specifications (trace/tr_ms_compile.c, tr_ms_run.c):
 * every construct of the language, BEAM's examples (BEAM behaviours
 * 12-14), variables, guards that raise, body errors giving
 * 'EXIT', deep and long terms against the bounds, the exact message of
 * each kind of bad spec (nothing compiled), the source term back, the
 * heap variant across a collection, and one spec run by several threads.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include "tests/unit/helpers.h"
#include "trace/tr_ms.h"
#include "trace/tr_ms_internal.h"
#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/print.h"

TVM_FIXTURE(ms, NULL);

static TrMsScratch scratch;

/* A term parsed from text, rooted in the fixture's env. */
static Term P(const char *text)
{
    tvm_term h;
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, text, &h, &err), TVM_OK, "%s: %s", text, err.message);
    return vm_root_get(env->p, h);
}

static TrMs *compile_ok(const char *spec, int arity)
{
    char err[256];
    TrMs *ms = tr_ms_compile(P(spec), arity, err, sizeof err);
    cr_assert(ms, "%s: %s", spec, err);
    return ms;
}

static const char *compile_err(const char *spec, int arity)
{
    static char err[256];
    TrMs *ms = tr_ms_compile(P(spec), arity, err, sizeof err);
    cr_assert_null(ms, "%s compiled", spec);
    return err;
}

static const char *show(Term t)
{
    static char out[1024];
    StrBuf sb;
    sb_init(&sb);
    vm_print_term(&sb, t);
    sb_copy_out(&sb, out, sizeof out);
    sb_free(&sb);
    return out;
}

/* Runs ms on the arguments in the list `args` (text). */
static bool run_on(const TrMs *ms, const char *args, TrMsResult *res)
{
    Term l = P(args), a[16];
    unsigned n = 0;
    for (; term_is_cons(l); l = cons_tail(l))
        a[n++] = cons_head(l);
    return tr_ms_run(ms, a, n, NULL, &scratch, res);
}

/* Compiles spec (arity from args), runs it and describes the outcome:
 * "nomatch", or "match" plus the message and flags. */
static const char *outcome(const char *spec, const char *args)
{
    static char out[1024];
    Term l = P(args);
    int arity = 0;
    for (; term_is_cons(l); l = cons_tail(l))
        arity++;
    TrMs *ms = compile_ok(spec, arity);
    TrMsResult res;
    bool m = run_on(ms, args, &res);
    if (!m) {
        tr_ms_free(ms);
        return "nomatch";
    }
    StrBuf sb;
    sb_init(&sb);
    sb_puts(&sb, "match");
    if (res.message == TR_MS_MSG_OFF)
        sb_puts(&sb, " msg=off");
    if (res.message == TR_MS_MSG_TERM)
        sb_printf(&sb, " msg=%s", show(res.msg));
    static const char *names[] = { "return_trace", "exception_trace", "caller", "silent_on",
                                   "silent_off", "display", "backtrace" };
    for (unsigned i = 0; i < 7; i++)
        if (res.flags & (1u << i))
            sb_printf(&sb, " %s", names[i]);
    for (unsigned i = 0; i < res.ndisplay; i++)
        sb_printf(&sb, " d=%s", show(res.display[i]));
    sb_copy_out(&sb, out, sizeof out);
    sb_free(&sb);
    tr_ms_free(ms);
    return out;
}

/* The value of guard-style expression `expr` with '$1' the first
 * argument: the body is [{message, Expr}], so a raising expression shows
 * as 'EXIT'. */
static const char *eval(const char *expr, const char *args)
{
    char spec[512];
    snprintf(spec, sizeof spec, "[{['$1' | '_'], [], [{message, %s}]}]", expr);
    static char out[1024];
    const char *o = outcome(spec, args);
    if (strcmp(o, "match msg=off") == 0)
        snprintf(out, sizeof out, "false");
    else if (strncmp(o, "match msg=", 10) == 0)
        snprintf(out, sizeof out, "%s", o + 10);
    else if (strcmp(o, "match") == 0)
        snprintf(out, sizeof out, "true");
    else
        snprintf(out, sizeof out, "%s", o);
    return out;
}

/* Whether the guard holds ('$1' is the first argument). */
static bool holds(const char *guard, const char *args)
{
    char spec[512];
    snprintf(spec, sizeof spec, "[{['$1' | '_'], [%s], []}]", guard);
    return strcmp(outcome(spec, args), "match") == 0;
}

/* ---- BEAM's examples ---- */

Test(ms, beam_item_12_head_patterns_filter_and_message_adds_a_term)
{
    const char *spec = "[{[{a,tuple},'$1'],[],[]}, {[{a,bigger,tuple},'$1'],[],[{message,'$1'}]}]";
    cr_expect_str_eq(outcome(spec, "[{a,tuple}, 1]"), "match");
    cr_expect_str_eq(outcome(spec, "[{a,bigger,tuple}, [x,y]]"), "match msg=[x,y]");
    cr_expect_str_eq(outcome(spec, "[{a,other}, 1]"), "nomatch");
    cr_expect_str_eq(outcome(spec, "[{a,tuple,x}, 1]"), "nomatch");
}

Test(ms, beam_item_13_format_gives_the_latest_source_back)
{
    const char *a = "[{['$1'],[{'>','$1',3}],[{message,{{big,'$1'}}},{return_trace}]}]";
    const char *b = "[{'_',[],[{message,\"text\"}]},{[x],[],[]}]";
    TrMs *ma = compile_ok(a, 1), *mb = compile_ok(b, -1);
    char buf[256];
    tr_ms_format(ma, buf, sizeof buf);
    cr_expect_str_eq(buf, "[{['$1'],[{'>','$1',3}],[{message,{{big,'$1'}}},{return_trace}]}]");
    tr_ms_format(mb, buf, sizeof buf);
    cr_expect_str_eq(buf, "[{'_',[],[{message,<<\"text\">>}]},{[x],[],[]}]");
    cr_expect_str_eq(show(tr_ms_source(mb)), buf);
    cr_expect_eq(tr_ms_format(ma, buf, 4), strlen(show(tr_ms_source(ma))));
    cr_expect_str_eq(buf, "[{[");
    tr_ms_free(ma);
    tr_ms_free(mb);
}

Test(ms, beam_item_14_message_false_with_return_trace_and_message_true)
{
    cr_expect_str_eq(outcome("[{'_',[],[{message,false},{return_trace}]}]", "[1]"),
                     "match msg=off return_trace");
    cr_expect_str_eq(outcome("[{'_',[],[{message,true}]}]", "[1]"), "match");
    cr_expect_str_eq(outcome("[{'_',[],[]}]", "[1]"), "match");
    /* The last message wins. */
    cr_expect_str_eq(outcome("[{'_',[],[{message,a},{message,true}]}]", "[1]"), "match");
    cr_expect_str_eq(outcome("[{'_',[],[{message,false},{message,b}]}]", "[1]"), "match msg=b");
}

/* The constant shortcut ([{'_', [], Actions}] with only return/exception
 * trace and message true/false) gives what the program would: for any
 * arity, the last message action winning; anything else in the body, a
 * guard or another clause takes the program. */
Test(ms, constant_specs_give_the_same_results)
{
    const char *k = "[{'_',[],[{message,false},{return_trace},{exception_trace},{message,true}]}]";
    cr_expect_str_eq(outcome(k, "[]"), "match return_trace exception_trace");
    cr_expect_str_eq(outcome(k, "[1, {a}, [b]]"), "match return_trace exception_trace");
    cr_expect_str_eq(outcome("[{'_',[],[{exception_trace},{message,false}]}]", "[x]"),
                     "match msg=off exception_trace");
    TrMs *c = compile_ok("[{'_',[],[{return_trace}]}]", -1);
    cr_expect(c->constant);
    tr_ms_free(c);
    static const char *const general[] = {
        "[{'_',[],[{return_trace},{message,x}]}]", "[{'_',[true],[{return_trace}]}]",
        "[{['_'],[],[{return_trace}]}]", "[{'_',[],[{return_trace}]},{'_',[],[]}]",
        "[{'_',[],[{caller}]}]",
    };
    for (size_t i = 0; i < sizeof general / sizeof general[0]; i++) {
        TrMs *m = compile_ok(general[i], -1);
        cr_expect(!m->constant, "%s", general[i]);
        tr_ms_free(m);
    }
    cr_expect_str_eq(outcome("[{['_'],[],[{return_trace}]}]", "[1]"), "match return_trace");
}

/* ---- heads ---- */

Test(ms, head_literals_of_every_kind)
{
    cr_expect_str_eq(outcome("[{[1, -2, ok, [], \"bin\", {}, [a|b]], [], []}]",
                             "[1, -2, ok, [], \"bin\", {}, [a|b]]"), "match");
    cr_expect_str_eq(outcome("[{[1, -2, ok, [], \"bin\", {}, [a|b]], [], []}]",
                             "[1, -2, ok, [], \"bim\", {}, [a|b]]"), "nomatch");
    cr_expect_str_eq(outcome("[{[\"bin\"], [], []}]", "[\"bin2\"]"), "nomatch");
    cr_expect_str_eq(outcome("[{[2], [], []}]", "[1]"), "nomatch");
    cr_expect_str_eq(outcome("[{[a], [], []}]", "[\"a\"]"), "nomatch");
}

Test(ms, head_pids)
{
    TrMs *ms = compile_ok("[{['$1', '$1'], [{is_pid, '$1'}], [{message, '$1'}]}]", 2);
    Term a[2] = { make_pid(7), make_pid(7) };
    TrMsResult res;
    cr_expect(tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "<0.7.0>");
    a[1] = make_pid(8);
    cr_expect(!tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    tr_ms_free(ms);
}

Test(ms, head_wildcards_nested_tuples_lists_and_improper_tails)
{
    const char *spec = "[{[{a, '_', ['$1' | '$2']}, '_'], [], [{message, {{'$1', '$2'}}}]}]";
    cr_expect_str_eq(outcome(spec, "[{a, 1, [x, y, z]}, q]"), "match msg={x,[y,z]}");
    cr_expect_str_eq(outcome(spec, "[{a, {deep}, [x | tail]}, q]"), "match msg={x,tail}");
    cr_expect_str_eq(outcome(spec, "[{a, 1, []}, q]"), "nomatch");
    cr_expect_str_eq(outcome(spec, "[{a, 1}, q]"), "nomatch");
    cr_expect_str_eq(outcome(spec, "[{b, 1, [x]}, q]"), "nomatch");
    cr_expect_str_eq(outcome("[{[[a, {b, '$1'}]], [], [{message, '$1'}]}]", "[[a, {b, 5}]]"),
                     "match msg=5");
    cr_expect_str_eq(outcome("[{[[a, {b, '$1'}]], [], []}]", "[[a, {b, 5}, c]]"), "nomatch");
}

Test(ms, head_underscore_and_whole_list_variable_match_any_arity)
{
    TrMs *ms = compile_ok("[{'_', [], [{message, any}]}]", -1);
    TrMsResult res;
    cr_expect(run_on(ms, "[]", &res));
    cr_expect(run_on(ms, "[1, 2, 3]", &res));
    tr_ms_free(ms);
    ms = compile_ok("[{'$1', [{'==', {length, '$1'}, 3}], [{message, '$1'}]}]", -1);
    cr_expect(run_on(ms, "[a, b, c]", &res));
    cr_expect_str_eq(show(res.msg), "[a,b,c]");
    cr_expect(!run_on(ms, "[a, b]", &res));
    tr_ms_free(ms);
}

Test(ms, head_arity_checked_at_run_time_when_unknown)
{
    TrMs *ms = compile_ok("[{[a], [], [{message, one}]}, {[a, '_'], [], [{message, two}]},"
                          " {[a, b, c | '_'], [], [{message, more}]}]", -1);
    TrMsResult res;
    cr_expect(run_on(ms, "[a]", &res));
    cr_expect_str_eq(show(res.msg), "one");
    cr_expect(run_on(ms, "[a, x]", &res));
    cr_expect_str_eq(show(res.msg), "two");
    cr_expect(run_on(ms, "[a, b]", &res));
    cr_expect_str_eq(show(res.msg), "two");
    cr_expect(run_on(ms, "[a, b, c, d, e]", &res));
    cr_expect_str_eq(show(res.msg), "more");
    cr_expect(run_on(ms, "[a, b, c]", &res));
    cr_expect_str_eq(show(res.msg), "more");
    cr_expect(!run_on(ms, "[b]", &res));
    cr_expect_eq(res.flags, 0);
    cr_expect_eq(res.message, TR_MS_MSG_DEFAULT);
    tr_ms_free(ms);
}

/* A head longer or shorter than the known arity compiles (BEAM accepts
 * it: erlang:trace_pattern/3 returns the count) and never matches; the
 * clauses after it still do. */
Test(ms, head_of_another_arity_compiles_and_never_matches)
{
    TrMs *ms = compile_ok("[{[a, b], [], [{message, two}]}, {[], [], [{message, none}]},"
                          " {[a, b, c | '_'], [], [{message, more}]}, {[a], [], [{message, one}]}]",
                          1);
    TrMsResult res;
    cr_expect(run_on(ms, "[a]", &res));
    cr_expect_str_eq(show(res.msg), "one");
    cr_expect(!run_on(ms, "[b]", &res));
    tr_ms_free(ms);
    ms = compile_ok("[{[a, b], [], [{return_trace}]}]", 1);
    cr_expect(!run_on(ms, "[a]", &res));
    cr_expect_eq(res.flags, 0);
    tr_ms_free(ms);
}

Test(ms, first_matching_clause_wins)
{
    const char *spec = "[{['$1'], [{is_atom, '$1'}], [{message, atom}]},"
                       " {['$1'], [{is_integer, '$1'}], [{message, int}]},"
                       " {'_', [], [{message, other}]}]";
    cr_expect_str_eq(outcome(spec, "[x]"), "match msg=atom");
    cr_expect_str_eq(outcome(spec, "[1]"), "match msg=int");
    cr_expect_str_eq(outcome(spec, "[[]]"), "match msg=other");
    cr_expect_str_eq(outcome("[]", "[1]"), "nomatch");
}

/* ---- variables ---- */

Test(ms, repeated_variables_must_be_equal)
{
    const char *spec = "[{['$1', '_', '$1'], [], []}]";
    cr_expect_str_eq(outcome(spec, "[a, b, a]"), "match");
    cr_expect_str_eq(outcome(spec, "[a, b, c]"), "nomatch");
    cr_expect_str_eq(outcome(spec, "[{x, [1, 2, \"b\"]}, b, {x, [1, 2, \"b\"]}]"), "match");
    cr_expect_str_eq(outcome(spec, "[{x, [1, 2, \"b\"]}, b, {x, [1, 2, \"c\"]}]"), "nomatch");
    cr_expect_str_eq(outcome("[{[{'$1', '$1'}, '$1'], [], []}]", "[{q, q}, q]"), "match");
    cr_expect_str_eq(outcome("[{[{'$1', '$1'}, '$1'], [], []}]", "[{q, q}, r]"), "nomatch");
    /* Large numbers are variables too; BEAM's range ends at 100000000. */
    cr_expect_str_eq(outcome("[{['$100000000', '$0'], [], [{message, {{'$0', '$100000000'}}}]}]",
                             "[a, b]"), "match msg={b,a}");
}

Test(ms, dollar_underscore_and_dollar_dollar)
{
    cr_expect_str_eq(eval("'$_'", "[1, {a}, x]"), "[1,{a},x]");
    cr_expect_str_eq(outcome("[{['$3', '_', '$1'], [], [{message, '$$'}]}]", "[c, b, a]"),
                     "match msg=[a,c]");
    cr_expect_str_eq(outcome("[{['_'], [], [{message, '$$'}]}]", "[c]"), "match msg=[]");
    cr_expect_str_eq(outcome("[{'_', [], [{message, '$_'}]}]", "[]"), "match msg=[]");
}

/* ---- guards ---- */

Test(ms, comparisons_in_term_order)
{
    cr_expect(holds("{'>', '$1', 3}", "[4]"));
    cr_expect(!holds("{'>', '$1', 3}", "[3]"));
    cr_expect(holds("{'>=', '$1', 3}", "[3]"));
    cr_expect(holds("{'<', '$1', 3}", "[2]"));
    cr_expect(holds("{'=<', '$1', 3}", "[3]"));
    cr_expect(!holds("{'=<', '$1', 3}", "[4]"));
    cr_expect(holds("{'==', '$1', {const, {a, [b]}}}", "[{a, [b]}]"));
    cr_expect(holds("{'=:=', '$1', {const, {a, [b]}}}", "[{a, [b]}]"));
    cr_expect(holds("{'/=', '$1', 1}", "[2]"));
    cr_expect(holds("{'=/=', '$1', 1}", "[2]"));
    cr_expect(!holds("{'=/=', '$1', 1}", "[1]"));
    /* number < atom < tuple < nil < list < binary */
    cr_expect(holds("{'<', 99, '$1'}", "[a]"));
    cr_expect(holds("{'<', '$1', {{}}}", "[zzz]"));
    cr_expect(holds("{'<', {{z}}, []}", "[0]"));
    cr_expect(holds("{'<', [], [a]}", "[0]"));
    cr_expect(holds("{'<', [z], \"a\"}", "[0]"));
    cr_expect(holds("{'<', '$1', abd}", "[abc]"));
    cr_expect(holds("{'<', {{a, b}}, {{a, b, c}}}", "[0]"));
    cr_expect(holds("{'<', [a, b], [a, c]}", "[0]"));
    cr_expect(holds("{'<', [a], [a, a]}", "[0]"));
    cr_expect(holds("{'<', \"ab\", \"abc\"}", "[0]"));
    cr_expect_str_eq(eval("{min, '$1', b}", "[a]"), "a");
    cr_expect_str_eq(eval("{max, '$1', b}", "[a]"), "b");
}

Test(ms, type_tests)
{
    cr_expect(holds("{is_atom, '$1'}", "[a]"));
    cr_expect(!holds("{is_atom, '$1'}", "[1]"));
    cr_expect(holds("{is_integer, '$1'}", "[1]"));
    cr_expect(holds("{is_number, '$1'}", "[-1]"));
    cr_expect(!holds("{is_float, '$1'}", "[1]"));
    cr_expect(holds("{is_boolean, '$1'}", "[false]"));
    cr_expect(!holds("{is_boolean, '$1'}", "[maybe]"));
    cr_expect(holds("{is_tuple, '$1'}", "[{}]"));
    cr_expect(holds("{is_list, '$1'}", "[[]]"));
    cr_expect(holds("{is_list, '$1'}", "[[a|b]]"));
    cr_expect(!holds("{is_list, '$1'}", "[{}]"));
    cr_expect(holds("{is_binary, '$1'}", "[\"\"]"));
    cr_expect(!holds("{is_pid, '$1'}", "[1]"));
    cr_expect(!holds("{is_function, '$1'}", "[1]"));
    cr_expect(!holds("{is_function, '$1', 1}", "[1]"));
}

Test(ms, is_function_on_a_fun)
{
    Export x = { .mod = vm_atom_cstr("m"), .name = vm_atom_cstr("f"), .arity = 2 };
    Term fun[2] = { MAKE_HEADER(IMM_HDR_FUN, 1), (Term)(uintptr_t)&x };
    Term a = make_boxed(fun);
    TrMsResult res;
    TrMs *ms = compile_ok("[{['$1'], [{is_function, '$1'}, {is_function, '$1', 2},"
                          " {'not', {is_function, '$1', 1}}], []}]", 1);
    cr_expect(tr_ms_run(ms, &a, 1, NULL, &scratch, &res));
    tr_ms_free(ms);
}

Test(ms, boolean_operators)
{
    cr_expect(holds("{'andalso', true, {'>', '$1', 1}, true}", "[2]"));
    cr_expect(!holds("{'andalso', true, {'>', '$1', 1}}", "[1]"));
    /* andalso stops at the first non-true: the raising hd is not evaluated. */
    cr_expect(holds("{'orelse', {'andalso', '$1', {hd, []}}, true}", "[false]"));
    cr_expect(!holds("{'orelse', {'andalso', '$1', {hd, []}}, true}", "[true]"));
    /* In a body the raising hd gives 'EXIT', which is not true. */
    cr_expect_str_eq(eval("{'andalso', '$1', {hd, []}}", "[true]"), "false");
    cr_expect_str_eq(eval("{'andalso', '$1'}", "[other]"), "false");
    cr_expect(holds("{'orelse', false, {'>', '$1', 1}}", "[2]"));
    cr_expect(holds("{'orelse', '$1', {hd, []}}", "[true]"));
    cr_expect_str_eq(eval("{'orelse', '$1', x}", "[false]"), "false");
    cr_expect(holds("{'and', true, true, {is_atom, '$1'}}", "[a]"));
    cr_expect(!holds("{'and', true, false}", "[a]"));
    cr_expect(holds("{'or', false, false, {is_atom, '$1'}}", "[a]"));
    cr_expect(!holds("{'or', false, x}", "[a]"));
    cr_expect(holds("{'not', {is_atom, '$1'}}", "[1]"));
    cr_expect(!holds("{'not', '$1'}", "[true]"));
    cr_expect(holds("{'xor', true, '$1'}", "[false]"));
    cr_expect(!holds("{'xor', true, '$1'}", "[true]"));
    cr_expect(!holds("{'xor', x, '$1'}", "[false]"));
    /* A guard that is not exactly true fails. */
    cr_expect(!holds("'$1'", "[yes]"));
    cr_expect(holds("'$1'", "[true]"));
    cr_expect(holds("true, {is_atom, '$1'}", "[a]"));
    cr_expect(!holds("true, false", "[a]"));
}

Test(ms, arithmetic)
{
    cr_expect_str_eq(eval("{'+', '$1', 2}", "[40]"), "42");
    cr_expect_str_eq(eval("{'-', '$1', 50}", "[8]"), "-42");
    cr_expect_str_eq(eval("{'*', '$1', -6}", "[7]"), "-42");
    cr_expect_str_eq(eval("{'div', '$1', 2}", "[-7]"), "-3");
    cr_expect_str_eq(eval("{'rem', '$1', 2}", "[-7]"), "-1");
    cr_expect_str_eq(eval("{'band', '$1', 6}", "[12]"), "4");
    cr_expect_str_eq(eval("{'bor', '$1', 3}", "[12]"), "15");
    cr_expect_str_eq(eval("{'bxor', '$1', 5}", "[12]"), "9");
    cr_expect_str_eq(eval("{'bsl', '$1', 4}", "[3]"), "48");
    cr_expect_str_eq(eval("{'bsr', '$1', 2}", "[-17]"), "-5");
    cr_expect_str_eq(eval("{'bsl', '$1', -1}", "[8]"), "4");
    cr_expect_str_eq(eval("{'-', '$1'}", "[5]"), "-5");
    cr_expect_str_eq(eval("{'+', '$1'}", "[5]"), "5");
    cr_expect_str_eq(eval("{'bnot', '$1'}", "[5]"), "-6");
    cr_expect_str_eq(eval("{abs, '$1'}", "[-5]"), "5");
    /* badarith: a non-integer, division by zero, beyond 62 bits. */
    cr_expect_str_eq(eval("{'+', '$1', 1}", "[a]"), "'EXIT'");
    cr_expect_str_eq(eval("{'div', '$1', 0}", "[1]"), "'EXIT'");
    cr_expect_str_eq(eval("{'rem', '$1', 0}", "[1]"), "'EXIT'");
    cr_expect_str_eq(eval("{'*', '$1', '$1'}", "[2305843009213693951]"), "'EXIT'");
    cr_expect_str_eq(eval("{'+', '$1', 1}", "[2305843009213693951]"), "'EXIT'");
    cr_expect_str_eq(eval("{'bsl', '$1', 62}", "[1]"), "'EXIT'");
    cr_expect_str_eq(eval("{'bsl', '$1', 100}", "[0]"), "0");
    cr_expect_str_eq(eval("{'bsr', '$1', 100}", "[-9]"), "-1");
    cr_expect_str_eq(eval("{'-', '$1'}", "[-2305843009213693952]"), "'EXIT'");
}

Test(ms, data_functions)
{
    cr_expect_str_eq(eval("{element, 2, '$1'}", "[{a, b, c}]"), "b");
    cr_expect_str_eq(eval("{element, 4, '$1'}", "[{a, b, c}]"), "'EXIT'");
    cr_expect_str_eq(eval("{element, 0, '$1'}", "[{a, b, c}]"), "'EXIT'");
    cr_expect_str_eq(eval("{size, '$1'}", "[{a, b, c}]"), "3");
    cr_expect_str_eq(eval("{size, '$1'}", "[\"four\"]"), "4");
    cr_expect_str_eq(eval("{size, '$1'}", "[[]]"), "'EXIT'");
    cr_expect_str_eq(eval("{tuple_size, '$1'}", "[{}]"), "0");
    cr_expect_str_eq(eval("{byte_size, '$1'}", "[\"four\"]"), "4");
    cr_expect_str_eq(eval("{hd, '$1'}", "[[a, b]]"), "a");
    cr_expect_str_eq(eval("{tl, '$1'}", "[[a, b]]"), "[b]");
    cr_expect_str_eq(eval("{hd, '$1'}", "[[]]"), "'EXIT'");
    cr_expect_str_eq(eval("{length, '$1'}", "[[a, b, c]]"), "3");
    cr_expect_str_eq(eval("{length, '$1'}", "[[a | b]]"), "'EXIT'");
    cr_expect_str_eq(eval("{hd, {tl, {element, 1, '$1'}}}", "[{[x, y]}]"), "y");
}

Test(ms, constants_and_construction)
{
    cr_expect_str_eq(eval("{const, {'$1', '$2'}}", "[a]"), "{'$1','$2'}");
    cr_expect_str_eq(eval("{{'$1', [a, '$1' | '$1'], {{}}}}", "[q]"), "{q,[a,q|q],{}}");
    cr_expect_str_eq(eval("[{{a}}]", "[q]"), "[{a}]");
    cr_expect_str_eq(eval("['$1']", "[[]]"), "[[]]");
    cr_expect_str_eq(eval("42", "[q]"), "42");
    cr_expect_str_eq(eval("'_'", "[q]"), "'_'");
    cr_expect_str_eq(eval("\"hello\"", "[q]"), "<<\"hello\">>");
    cr_expect_str_eq(eval("[]", "[q]"), "[]");
}

Test(ms, beam_guide_examples)
{
    /* Third argument is {A1, A2} or a list starting with A1, A2. */
    const char *spec = "[{['$1', '$2', '$3'], [{'orelse', {'=:=', '$3', {{'$1','$2'}}},"
                       " {'and', {'=:=', '$1', {hd, '$3'}}, {'=:=', '$2', {hd, {tl, '$3'}}}}}],"
                       " []}]";
    cr_expect_str_eq(outcome(spec, "[a, b, [a, b, c]]"), "match");
    cr_expect_str_eq(outcome(spec, "[a, b, {a, b}]"), "match");
    cr_expect_str_eq(outcome(spec, "[a, b, {a, c}]"), "nomatch");
    /* The first is a tuple starting with a list starting with 2 * the second. */
    spec = "[{['$1', '$2'],[{'=:=', {'*', 2, '$2'}, {hd, {element, 1, '$1'}}}], []}]";
    cr_expect_str_eq(outcome(spec, "[{[4, x], y}, 2]"), "match");
    cr_expect_str_eq(outcome(spec, "[{[8], y, z}, 4]"), "match");
    cr_expect_str_eq(outcome(spec, "[{[8], y, z}, 5]"), "nomatch");
}

Test(ms, a_raising_guard_is_false_and_the_next_clause_is_tried)
{
    const char *spec = "[{['$1'], [{'>', {hd, '$1'}, 0}], [{message, positive_head}]},"
                       " {['$1'], [], [{message, fallback}]}]";
    cr_expect_str_eq(outcome(spec, "[[5]]"), "match msg=positive_head");
    cr_expect_str_eq(outcome(spec, "[[]]"), "match msg=fallback");
    cr_expect_str_eq(outcome(spec, "[7]"), "match msg=fallback");
    /* Inside 'not' too: the whole guard fails, it is not negated. */
    cr_expect(!holds("{'not', {hd, '$1'}}", "[[]]"));
    cr_expect(!holds("{'or', true, {element, 9, '$1'}}", "[{}]"));
}

/* ---- actions ---- */

Test(ms, every_action)
{
    cr_expect_str_eq(outcome("[{'_', [], [{return_trace}, {exception_trace}, {backtrace}]}]", "[]"),
                     "match return_trace exception_trace backtrace");
    cr_expect_str_eq(outcome("[{'_', [], [{silent, true}]}]", "[]"), "match silent_on");
    cr_expect_str_eq(outcome("[{'_', [], [{silent, '$_'}]}]", "[]"), "match");
    cr_expect_str_eq(outcome("[{['$1'], [], [{silent, true}, {silent, '$1'}]}]", "[false]"),
                     "match silent_off");
    cr_expect_str_eq(outcome("[{['$1'], [], [{display, '$1'}, {display, {{x, '$1'}}}]}]", "[7]"),
                     "match display d=7 d={x,7}");
    /* Actions return true; an expression as an action is evaluated and ignored. */
    cr_expect_str_eq(outcome("[{'_', [], [{message, {return_trace}}, {hd, []}, x]}]", "[]"),
                     "match return_trace");
    /* A raising body function gives 'EXIT' and the body goes on. */
    cr_expect_str_eq(outcome("[{['$1'], [], [{message, {hd, '$1'}}, {return_trace}]}]", "[a]"),
                     "match msg='EXIT' return_trace");
    cr_expect_str_eq(outcome("[{['$1'], [], [{message, {{{hd, '$1'}, ok}}}]}]", "[a]"),
                     "match msg={'EXIT',ok}");
}

/* "pid on=.. off=.." per entry of res->trace, flags as erlang:trace/3
 * names them (the VM_TRACE_* bits of the three used here). */
static const char *trace_changes(const TrMsResult *res)
{
    static char out[256];
    static const struct { unsigned bit; const char *name; } fl[] = {
        { VM_TRACE_CALL, "call" }, { VM_TRACE_PROCS, "procs" }, { VM_TRACE_SEND, "send" } };
    char *o = out;
    *o = 0;
    for (unsigned i = 0; i < res->ntrace; i++) {
        const TrMsTrace *t = &res->trace[i];
        o += sprintf(o, "%s%llu", i ? "; " : "", (unsigned long long)t->pid);
        for (unsigned k = 0; k < 2; k++) {
            unsigned m = k ? t->off : t->on;
            o += sprintf(o, " %s=", k ? "off" : "on");
            for (unsigned j = 0; j < 3; j++)
                if (m & fl[j].bit)
                    o += sprintf(o, "%s,", fl[j].name);
        }
        if (t->tracer)
            o += sprintf(o, " tracer=%llu", (unsigned long long)t->tracer);
    }
    return out;
}

/* {enable_trace, ...}, {disable_trace, ...} and {trace, ...} record the
 * changes in order (the last action on a flag wins; trace disables, then
 * enables), for the caller (pid 0, also when named by its pid) and for
 * other processes; trace answers whether the caller's flags changed (for
 * another process, whether it named a flag); a bad flag, a bad pid, an
 * improper list and a fifth process fail ('EXIT'), and they are body
 * actions only (BEAM's shapes, checked on OTP 25's erl). */
Test(ms, trace_flag_changes_are_recorded_in_order)
{
    TrMs *ms = compile_ok("[{'_', [], [{enable_trace, send}, {disable_trace, call}, "
                          "{message, {trace, [send], [procs]}}]}]", 0);
    cr_expect_eq(tr_ms_needs(ms), TR_MS_NEED_SELF | TR_MS_NEED_FLAGS);
    TrMsCtx ctx = { .self = make_pid(5), .flags = VM_TRACE_CALL };
    TrMsResult res;
    cr_assert(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_eq(res.flags, TR_MS_TRACE);
    cr_expect_eq(res.message, TR_MS_MSG_DEFAULT);   /* {message, true}: trace said true */
    cr_expect_str_eq(trace_changes(&res), "0 on=procs, off=call,send,");
    tr_ms_free(ms);
    /* trace/2: false when nothing changes; the caller by its own pid */
    ms = compile_ok("[{'_', [], [{message, {{{trace, [], [call]}, "
                    "{trace, {self}, [call], []}, {trace, [call], [call]}}}}]}]", 0);
    cr_assert(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "{false,true,true}");
    cr_expect_str_eq(trace_changes(&res), "0 on=call, off=");
    tr_ms_free(ms);
    /* other processes: their own entries, at most four */
    ms = compile_ok("[{['$1', '$2'], [], [{enable_trace, '$1', procs}, {disable_trace, '$2', send}, "
                    "{enable_trace, '$1', send}, {message, {{{trace, '$2', [], []}, "
                    "{trace, '$2', [call], []}}}}]}]", 2);
    Term two[2] = { make_pid(7), make_pid(9) };
    cr_assert(tr_ms_run(ms, two, 2, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "{false,true}");
    cr_expect_str_eq(trace_changes(&res), "7 on=procs,send, off=; 9 on= off=call,send,");
    tr_ms_free(ms);
    ms = compile_ok("[{'_', [], [{enable_trace, {self}, call}]}]", 0);
    cr_assert(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_str_eq(trace_changes(&res), "0 on=call, off=");
    tr_ms_free(ms);
    ms = compile_ok("[{['$1'], [], [{enable_trace, '$1', call}]}]", 1);
    Term pids[5];
    for (unsigned i = 0; i < 5; i++) {
        pids[0] = make_pid(10 + i);
        cr_assert(tr_ms_run(ms, pids, 1, &ctx, &scratch, &res));
    }
    cr_expect_eq(res.ntrace, 1);   /* each run starts afresh */
    tr_ms_free(ms);
    /* (no context: {self} is undefined, which is not a pid) */
    cr_expect_str_eq(outcome("[{'_', [], [{message, {{{enable_trace, call}, "
                             "{enable_trace, {self}, call}}}}]}]", "[]"),
                     "match msg={true,'EXIT'}");
    /* failures: 'EXIT', and nothing recorded */
    cr_expect_str_eq(eval("{enable_trace, bogus}", "[a]"), "'EXIT'");
    cr_expect_str_eq(eval("{disable_trace, \"call\"}", "[a]"), "'EXIT'");
    cr_expect_str_eq(eval("{enable_trace, '$1', call}", "[a]"), "'EXIT'");
    cr_expect_str_eq(eval("{trace, [call | send], []}", "[a]"), "'EXIT'");
    cr_expect_str_eq(eval("{trace, [call], [bogus]}", "[a]"), "'EXIT'");
    ms = compile_ok("[{['$1', '$2', '$3', '$4', '$5'], [], [{enable_trace, '$1', call}, "
                    "{enable_trace, '$2', call}, {enable_trace, '$3', call}, "
                    "{enable_trace, '$4', call}, {message, {enable_trace, '$5', call}}]}]", 5);
    for (unsigned i = 0; i < 5; i++)
        pids[i] = make_pid(20 + i);
    cr_assert(tr_ms_run(ms, pids, 5, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "'EXIT'");
    cr_expect_eq(res.ntrace, 4);
    tr_ms_free(ms);
    cr_expect_str_eq(compile_err("[{'_', [{enable_trace, call}], []}]", 0),
                     "match spec clause 1: guard 1: enable_trace/1 is allowed only in the body");
    cr_expect_str_eq(compile_err("[{'_', [], [{trace, call}]}]", 0),
                     "match spec clause 1: action 1: unknown function trace/1");
}

/* {tracer, Pid} in trace's lists: the process's own tracer, in the
 * default session only (the context says), the last one named winning;
 * anything else shaped like it is not a flag. */
Test(ms, trace_may_name_a_tracer_in_the_default_session)
{
    TrMs *ms = compile_ok("[{['$1', '$2'], [], [{message, {{{trace, [], [send, {{tracer, '$1'}}]}, "
                          "{trace, '$2', [{{tracer, '$2'}}], [call]}, "
                          "{trace, [], [{{tracer, '$2'}}]}}}}]}]", 2);
    TrMsCtx ctx = { .self = make_pid(5), .flags = VM_TRACE_SEND, .tracer_ok = true };
    Term two[2] = { make_pid(7), make_pid(9) };
    TrMsResult res;
    cr_assert(tr_ms_run(ms, two, 2, &ctx, &scratch, &res));
    /* naming a tracer is a change even where the flags stay as they were */
    cr_expect_str_eq(show(res.msg), "{true,true,true}");
    cr_expect_str_eq(trace_changes(&res), "0 on=send, off= tracer=9; 9 on=call, off= tracer=9");
    /* outside the default session: 'EXIT', as erlang:trace/3's badarg */
    ctx.tracer_ok = false;
    cr_assert(tr_ms_run(ms, two, 2, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "{'EXIT','EXIT','EXIT'}");
    cr_expect_eq(res.ntrace, 0);
    tr_ms_free(ms);
    ctx.tracer_ok = true;
    const char *bad[] = { "[{['$1'], [], [{message, {trace, [], [{{tracer, a}}]}}]}]",
                          "[{['$1'], [], [{message, {trace, [], [{{tracer, '$1', '$1'}}]}}]}]",
                          "[{['$1'], [], [{message, {trace, [], [{{tracers, '$1'}}]}}]}]",
                          "[{['$1'], [], [{message, {trace, [], [{{'$1', '$1'}}]}}]}]" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ms = compile_ok(bad[i], 1);
        cr_assert(tr_ms_run(ms, two, 1, &ctx, &scratch, &res));
        cr_expect_str_eq(show(res.msg), "'EXIT'", "%s", bad[i]);
        cr_expect_eq(res.ntrace, 0, "%s", bad[i]);
        tr_ms_free(ms);
    }
}

/* A context that looks processes up: 7 is live, 9 is not. */
static bool stub_alive(void *data, uint64_t pid)
{
    (*(unsigned *)data)++;
    return pid == 7;
}

/* With the context's alive, a process that is not live is a failure, as
 * in BEAM; each process is looked up once per run. */
Test(ms, another_process_is_looked_up_where_the_context_can)
{
    TrMs *ms = compile_ok("[{['$1', '$2'], [], [{message, {{{trace, '$1', [], [send]}, "
                          "{trace, '$1', [send], [call]}, {enable_trace, '$2', call}, "
                          "{trace, '$2', [], [call]}}}}]}]", 2);
    unsigned looked = 0;
    TrMsCtx ctx = { .self = make_pid(5), .alive = stub_alive, .alive_data = &looked };
    Term two[2] = { make_pid(7), make_pid(9) };
    TrMsResult res;
    cr_assert(tr_ms_run(ms, two, 2, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "{true,true,'EXIT','EXIT'}");
    cr_expect_str_eq(trace_changes(&res), "7 on=call, off=send,");
    cr_expect_eq(looked, 3, "%u lookups", looked);   /* 7 once, 9 twice (never kept) */
    /* without alive: recorded all the same */
    ctx.alive = NULL;
    cr_assert(tr_ms_run(ms, two, 2, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "{true,true,true,true}");
    cr_expect_str_eq(trace_changes(&res), "7 on=call, off=send,; 9 on=call, off=");
    tr_ms_free(ms);
}

Test(ms, caller_and_self_come_from_the_context)
{
    TrMs *ms = compile_ok("[{'_', [], [{message, {{{caller}, {self}}}}]}]", 0);
    cr_expect_eq(tr_ms_needs(ms), TR_MS_NEED_CALLER | TR_MS_NEED_SELF);
    TrMsResult res;
    cr_expect(tr_ms_run(ms, NULL, 0, NULL, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "{undefined,undefined}");
    cr_expect_eq(res.flags, TR_MS_CALLER);
    TrMsCtx ctx = { .self = make_pid(3), .caller_known = true, .caller_mod = vm_atom_cstr("m"),
                    .caller_fun = vm_atom_cstr("f"), .caller_arity = 2 };
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "{{m,f,2},<0.3.0>}");
    tr_ms_free(ms);
    ms = compile_ok("[{'_', [{'==', {self}, {self}}], [{caller}]}]", 0);
    cr_expect_eq(tr_ms_needs(ms), TR_MS_NEED_CALLER | TR_MS_NEED_SELF);
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_eq(res.flags, TR_MS_CALLER);
    cr_expect_eq(res.message, TR_MS_MSG_DEFAULT);
    tr_ms_free(ms);
    ms = compile_ok("[{'_', [], []}]", 0);
    cr_expect_eq(tr_ms_needs(ms), 0);
    tr_ms_free(ms);
}

/* A file name of size - 1 'x's, longer than TR_MS_FILE_MAX: runs cut it. */
static void long_name(char *buf, size_t size)
{
    memset(buf, 'x', size - 1);
    buf[size - 1] = 0;
}

/* {caller_line}: {M, F, A, {File, Line}}, {M, F, A, undefined} without a
 * line (a native caller), undefined without a caller; a file name is cut
 * at TR_MS_FILE_MAX bytes. */
Test(ms, caller_line_comes_from_the_context)
{
    TrMs *ms = compile_ok("[{'_', [], [{message, {caller_line}}]}]", 0);
    cr_expect_eq(tr_ms_needs(ms), TR_MS_NEED_CALLER);
    TrMsResult res;
    cr_expect(tr_ms_run(ms, NULL, 0, NULL, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "undefined");
    TrMsCtx ctx = { .caller_known = true, .caller_mod = vm_atom_cstr("m"),
                    .caller_fun = vm_atom_cstr("f"), .caller_arity = 2 };
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "{m,f,2,undefined}");
    ctx.caller_file = "src/m.tasm";
    ctx.caller_line = 17;
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "{m,f,2,{<<\"src/m.tasm\">>,17}}");
    cr_expect_eq(res.flags, TR_MS_CALLER);
    char longname[TR_MS_FILE_MAX + 40];
    long_name(longname, sizeof longname);
    ctx.caller_file = longname;
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_eq(strlen(show(res.msg)), strlen("{m,f,2,{<<\"\">>,17}}") + TR_MS_FILE_MAX);
    tr_ms_free(ms);
    /* three of them in a clause fit the scratch */
    ms = compile_ok("[{'_', [], [{message, {{{caller_line}, {caller_line}, {caller_line}}}}]}]", 0);
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    tr_ms_free(ms);
}

static size_t list_len(Term l)
{
    size_t n = 0;
    for (; term_is_cons(l); l = cons_tail(l))
        n++;
    return n;
}

/* {current_stacktrace}: the context's frames in order, each with the
 * items it has (a native's none), at most TR_MS_STACK_DEPTH or Depth of
 * them; [] without a process; the words of a full stack of long file
 * names fit the scratch twice in a clause. */
Test(ms, current_stacktrace_comes_from_the_context)
{
    TrMs *ms = compile_ok("[{'_', [], [{message, {current_stacktrace}}]}]", 0);
    cr_expect_eq(tr_ms_needs(ms), TR_MS_NEED_STACK);
    TrMsResult res;
    cr_expect(tr_ms_run(ms, NULL, 0, NULL, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "[]");
    TrMsFrame frames[TR_MS_STACK_DEPTH + 2];
    for (unsigned i = 0; i < TR_MS_STACK_DEPTH + 2; i++)
        frames[i] = (TrMsFrame){ .mod = vm_atom_cstr("m"), .fun = vm_atom_cstr("f"),
                                 .arity = i, .file = "m.tasm", .line = 10 + i };
    frames[1] = (TrMsFrame){ .mod = vm_atom_cstr("n"), .fun = vm_atom_cstr("nat"), .arity = 1 };
    frames[2].line = 0;
    TrMsCtx ctx = { .stack = frames, .nstack = 3 };
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "[{m,f,0,[{file,<<\"m.tasm\">>},{line,10}]},{n,nat,1,[]},"
                                    "{m,f,2,[{file,<<\"m.tasm\">>}]}]");
    ctx.nstack = TR_MS_STACK_DEPTH + 2;
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_eq(list_len(res.msg), TR_MS_STACK_DEPTH);
    tr_ms_free(ms);
    ms = compile_ok("[{'_', [], [{message, {current_stacktrace, 2}}]}]", 0);
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "[{m,f,0,[{file,<<\"m.tasm\">>},{line,10}]},{n,nat,1,[]}]");
    tr_ms_free(ms);
    ms = compile_ok("[{'_', [], [{message, {current_stacktrace, 0}}]}]", 0);
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "[]");
    tr_ms_free(ms);
    /* a depth past the cap builds no more than the cap */
    ms = compile_ok("[{'_', [], [{message, {current_stacktrace, 1000000}}]}]", 0);
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    cr_expect_eq(list_len(res.msg), TR_MS_STACK_DEPTH);
    tr_ms_free(ms);
    char longname[TR_MS_FILE_MAX + 40];
    long_name(longname, sizeof longname);
    for (unsigned i = 0; i < TR_MS_STACK_DEPTH + 2; i++)
        frames[i].file = longname;
    ms = compile_ok("[{'_', [], [{message, {{{current_stacktrace}, {current_stacktrace}}}}]}]", 0);
    cr_expect(tr_ms_run(ms, NULL, 0, &ctx, &scratch, &res));
    tr_ms_free(ms);
}

/* ---- bounds ---- */

/* Builds {{{...X..., 0}, 0}, 0} of `depth` levels in `words` (the nesting
 * is in the first element: a last element costs a comparison no depth). */
static Term nest(Term *words, unsigned depth, Term leaf)
{
    Term t = leaf;
    for (unsigned i = 0; i < depth; i++) {
        words[3 * i] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
        words[3 * i + 1] = t;
        words[3 * i + 2] = make_small(0);
        t = make_boxed(&words[3 * i]);
    }
    return t;
}

static Term long_list(Term *cells, size_t n, Term last)
{
    Term l = TERM_NIL;
    for (size_t i = n; i-- > 0;) {
        cells[2 * i] = make_small(i == n - 1 ? small_value(last) : (int64_t)i);
        cells[2 * i + 1] = l;
        l = make_cons_ptr(&cells[2 * i]);
    }
    return l;
}

Test(ms, deep_terms_compare_within_the_depth_bound_and_raise_beyond)
{
    static Term w1[3 * 300], w2[3 * 300];
    TrMs *ms = compile_ok("[{['$1', '$2'], [{'=:=', '$1', '$2'}], []}]", 2);
    TrMsResult res;
    Term a[2] = { nest(w1, 100, make_small(1)), nest(w2, 100, make_small(1)) };
    cr_expect(tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    a[1] = nest(w2, 100, make_small(2));
    cr_expect(!tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    /* Deeper than TR_MS_CMP_DEPTH: the comparison raises, the guard fails. */
    a[0] = nest(w1, 300, make_small(1));
    a[1] = nest(w2, 300, make_small(1));
    cr_expect(!tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    /* Nesting in last elements is followed without depth. */
    static Term t1[2 * 5000], t2[2 * 5000];
    Term x = make_small(1), y = make_small(1);
    for (unsigned i = 0; i < 5000; i++) {
        t1[2 * i] = t2[2 * i] = MAKE_HEADER(IMM_HDR_TUPLE, 1);
        t1[2 * i + 1] = x;
        t2[2 * i + 1] = y;
        x = make_boxed(&t1[2 * i]);
        y = make_boxed(&t2[2 * i]);
    }
    a[0] = x;
    a[1] = y;
    cr_expect(tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    tr_ms_free(ms);
    /* Different at the top: no descent, so no limit. */
    ms = compile_ok("[{['$1', '$2'], [{'<', '$1', '$2'}], []}]", 2);
    a[1] = make_atom(ATOM_OK);
    cr_expect(!tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    a[1] = TERM_NIL;
    cr_expect(tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    tr_ms_free(ms);
}

Test(ms, long_lists_cost_no_depth_but_steps)
{
    size_t n = 100000;
    Term *c1 = malloc(2 * n * sizeof(Term)), *c2 = malloc(2 * n * sizeof(Term));
    TrMs *ms = compile_ok("[{['$1', '$1'], [{'==', {length, '$1'}, 100000}], []}]", 2);
    TrMsResult res;
    Term a[2] = { long_list(c1, n, make_small(1)), long_list(c2, n, make_small(1)) };
    cr_expect(tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    a[1] = long_list(c2, n, make_small(2));
    cr_expect(!tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    tr_ms_free(ms);
    free(c1);
    free(c2);
    /* Past TR_MS_MAX_STEPS cells the comparison raises. */
    n = TR_MS_MAX_STEPS + 10;
    c1 = malloc(2 * n * sizeof(Term));
    c2 = malloc(2 * n * sizeof(Term));
    ms = compile_ok("[{['$1', '$2'], [{'==', '$1', '$2'}], []}]", 2);
    a[0] = long_list(c1, n, make_small(1));
    a[1] = long_list(c2, n, make_small(1));
    cr_expect(!tr_ms_run(ms, a, 2, NULL, &scratch, &res));
    tr_ms_free(ms);
    free(c1);
    free(c2);
}

/* Compiles *(const char **)arg; returns the spec (NULL on error). */
static void *compile_thread(void *arg)
{
    char err[256];
    return tr_ms_compile(P(*(const char **)arg), 1, err, sizeof err);
}

/*
 * A head pattern of a long list with a variable at its end: compiled on
 * a thread with a process's native stack (256 KiB, VM_FIBER_STACK_SIZE),
 * where erlang:trace_pattern/3 compiles it.  The compiler went one level
 * of C recursion per list cell and died at a few thousand cells.
 */
Test(ms, long_list_patterns_cost_no_native_stack)
{
    enum { N = 15000 };
    StrBuf sb;
    sb_init(&sb);
    sb_puts(&sb, "[{[[");
    for (int i = 0; i < N; i++)
        sb_printf(&sb, "%d,", i);
    sb_puts(&sb, "'$1']], [], [{message, '$1'}]}]");
    const char *text = sb.s;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, &attr, compile_thread, &text), 0);
    void *got;
    pthread_join(th, &got);
    pthread_attr_destroy(&attr);
    TrMs *ms = got;
    cr_assert(ms, "not compiled");
    static Term cells[2 * (N + 1)];
    TrMsResult res;
    Term l = TERM_NIL;
    for (int i = N + 1; i-- > 0;) {
        cells[2 * i] = i == N ? make_atom(ATOM_OK) : make_small(i);
        cells[2 * i + 1] = l;
        l = make_cons_ptr(&cells[2 * i]);
    }
    Term a[1] = { l };
    cr_expect(tr_ms_run(ms, a, 1, NULL, &scratch, &res));
    cr_expect_str_eq(show(res.msg), "ok");
    cells[2 * (N - 1)] = make_small(0);
    cr_expect(!tr_ms_run(ms, a, 1, NULL, &scratch, &res));
    tr_ms_free(ms);
    sb_free(&sb);
}

/* ---- errors ---- */

Test(ms, bad_specs_give_exact_messages)
{
    static const struct { const char *spec; int arity; const char *msg; } cases[] = {
        { "foo", 1, "match spec: not a list" },
        { "{a, b}", 1, "match spec: not a list" },
        { "[{'_', [], []} | x]", 1, "match spec: not a proper list" },
        { "[{'_', [], []}, foo]", 1, "match spec clause 2: not a tuple {Head, Guards, Body}" },
        { "[{'_', []}]", 1, "match spec clause 1: not a tuple {Head, Guards, Body}" },
        { "[{['$x'], [], []}]", 1, "match spec clause 1: head: variable '$x' is not a valid variable" },
        { "[{[{a, ['$1x']}], [], []}]", 1,
          "match spec clause 1: head: variable '$1x' is not a valid variable" },
        { "[{['$100000001'], [], []}]", 1,
          "match spec clause 1: head: variable '$100000001' is not a valid variable" },
        { "[{['$_'], [], []}]", 1, "match spec clause 1: head: '$_' is allowed only in guards and the body" },
        { "[{'$$', [], []}]", 1, "match spec clause 1: head: '$$' is allowed only in guards and the body" },
        { "[{foo, [], []}]", 1, "match spec clause 1: head: not a list of argument patterns, '_' or a variable" },
        { "[{[a | b], [], []}]", -1, "match spec clause 1: head: not a proper list" },
        { "[{'_', x, []}]", 1, "match spec clause 1: guards are not a list" },
        { "[{'_', [], x}]", 1, "match spec clause 1: body is not a list" },
        { "[{'_', [], []}, {'_', [true, {foo, 1, 2}], []}]", 1,
          "match spec clause 2: guard 2: unknown function foo/2" },
        { "[{'_', [{element, 1}], []}]", 1, "match spec clause 1: guard 1: unknown function element/1" },
        { "[{'_', [{'and'}], []}]", 1, "match spec clause 1: guard 1: unknown function 'and'/0" },
        { "[{['$1'], [{'>', '$2', 1}], []}]", 1,
          "match spec clause 1: guard 1: variable '$2' is not bound in the head" },
        { "[{['$1'], [], [{message, '$3'}]}]", 1,
          "match spec clause 1: action 1: variable '$3' is not bound in the head" },
        { "[{['$1'], [{is_atom, '$y'}], []}]", 1,
          "match spec clause 1: guard 1: variable '$y' is not a valid variable" },
        { "[{'_', [{message, 1}], []}]", 1, "match spec clause 1: guard 1: message/1 is allowed only in the body" },
        { "[{'_', [{caller}], []}]", 1, "match spec clause 1: guard 1: caller/0 is allowed only in the body" },
        { "[{'_', [], [{return_trace, x}]}]", 1,
          "match spec clause 1: action 1: unknown function return_trace/1" },
        { "[{'_', [], [{message, {}}]}]", 1,
          "match spec clause 1: action 1: {} is not an expression (build an empty tuple with {{}})" },
        { "[{'_', [], [{1, 2}]}]", 1,
          "match spec clause 1: action 1: {1,2} is not an expression: a call is {Function, Args...}, "
          "a tuple {{...}} or {const, T}" },
        { "[{'_', [], [{display, 1}, {display, 2}, {display, 3}, {display, 4}, {display, 5}]}]", 1,
          "match spec clause 1: action 5: more than 4 display actions in a clause" },
        { "[{'_', [], [{message, {current_stacktrace, a}}]}]", 1,
          "match spec clause 1: action 1: current_stacktrace/1: the depth must be a non-negative "
          "integer, not a" },
        { "[{'_', [], [{message, {current_stacktrace, -1}}]}]", 1,
          "match spec clause 1: action 1: current_stacktrace/1: the depth must be a non-negative "
          "integer, not -1" },
        { "[{'_', [{current_stacktrace}], []}]", 1,
          "match spec clause 1: guard 1: current_stacktrace/0 is allowed only in the body" },
        { "[{'_', [], [{message, {{{current_stacktrace}, {current_stacktrace}, {current_stacktrace}}}}]}]", 1,
          "match spec clause 1: action 1: builds more than 1024 words of terms" },
        { "[{'_', [], []}]", 300, "match spec: arity 300 is out of range" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_str_eq(compile_err(cases[i].spec, cases[i].arity), cases[i].msg, "case %zu", i);
}

Test(ms, specs_beyond_the_limits_are_rejected)
{
    /* Nesting: 70 levels of lists in a constant. */
    char text[4096] = "[{'_', [], [{const, ";
    for (int i = 0; i < 70; i++)
        strcat(text, "[");
    for (int i = 0; i < 70; i++)
        strcat(text, "]");
    strcat(text, "}]}]");
    cr_expect_str_eq(compile_err(text, 1), "match spec: the term is nested deeper than 64 levels");
    /* Too many variables in one clause. */
    StrBuf sb;
    sb_init(&sb);
    sb_puts(&sb, "[{[{");
    for (int i = 0; i <= TR_MS_MAX_VARS; i++)
        sb_printf(&sb, "%s'$%d'", i ? "," : "", i);
    sb_puts(&sb, "}], [], []}]");
    cr_expect_str_eq(compile_err(sb.s, 1), "match spec clause 1: head: more than 64 variables");
    sb_free(&sb);
    /* Built terms beyond the scratch: '$_' of an unknown arity costs 510 words. */
    cr_expect_str_eq(compile_err("[{'_', [], [{message, {{'$_', '$_', '$_'}}}]}]", -1),
                     "match spec clause 1: action 1: builds more than 1024 words of terms");
    TrMs *ms = compile_ok("[{'_', [], [{message, {{'$_', '$_', '$_'}}}]}]", 3);
    tr_ms_free(ms);
    /* Too many clauses. */
    sb_init(&sb);
    sb_puts(&sb, "[");
    for (int i = 0; i <= TR_MS_MAX_CLAUSES; i++)
        sb_puts(&sb, i ? ",{'_',[],[]}" : "{'_',[],[]}");
    sb_puts(&sb, "]");
    cr_expect_str_eq(compile_err(sb.s, 1), "match spec: more than 256 clauses");
    sb_free(&sb);
    /* Too wide an expression for the value stack. */
    sb_init(&sb);
    sb_puts(&sb, "[{'_', [], [{message, [");
    for (int i = 0; i <= TR_MS_MAX_STACK; i++)
        sb_puts(&sb, i ? ",[x]" : "[x]");
    sb_puts(&sb, "]}]}]");
    cr_expect_str_eq(compile_err(sb.s, 1),
                     "match spec clause 1: action 1: holds more than 128 values at once");
    sb_free(&sb);
}

/* ---- life cycle and the heap variant ---- */

Test(ms, the_source_is_a_copy_and_references_are_counted)
{
    TrMs *ms = compile_ok("[{[{a, '$1'}], [], [{message, {const, {lit, [1, 2]}}}]}]", 1);
    /* Collect the env's heap: the spec's literals must not move with it. */
    vm_gc(env->p, 0, NULL, 0);
    tvm_handles_release(env, 0);
    vm_gc(env->p, 0, NULL, 0);
    TrMsResult res;
    cr_expect(run_on(ms, "[{a, 1}]", &res));
    cr_expect_str_eq(show(res.msg), "{lit,[1,2]}");
    tr_ms_retain(ms);
    tr_ms_free(ms);
    cr_expect(run_on(ms, "[{a, 1}]", &res));
    tr_ms_free(ms);
    tr_ms_free(NULL);
}

Test(ms, run_heap_copies_the_result_and_survives_a_collection)
{
    TrMs *ms = compile_ok("[{['$1', '$2'], [], [{message, {{'$1', ['$2'], '$_'}}}, {display, '$2'}]}]", 2);
    Process *p = env->p;
    /* The arguments live on p's heap, rooted by handles. */
    tvm_term h[2];
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, "{big, [1, 2, 3, 4, 5, 6, 7, 8]}", &h[0], &err), TVM_OK);
    cr_assert_eq(tvm_parse_term(env, "[x, \"yz\"]", &h[1], &err), TVM_OK);
    for (int round = 0; round < 2; round++) {
        /* Round 1: fill the heap so that the copy has to collect. */
        if (round == 1)
            p->htop = p->hend - 1;
        size_t gcs = p->gc_count;
        TrMsResult res;
        /* args[] is not a root: pass the handles' own slots. */
        Term *argv = &p->roots[h[0].h];
        cr_assert_eq(h[1].h, h[0].h + 1);
        cr_expect(tr_ms_run_heap(ms, p, argv, 2, NULL, &scratch, &res));
        if (round == 1)
            cr_expect_gt(p->gc_count, gcs);
        /* Overwrite the scratch: the result lives on p's heap. */
        memset(&scratch, 0, sizeof scratch);
        cr_expect(res.msg >= (Term)(uintptr_t)p->heap && res.msg < (Term)(uintptr_t)p->htop);
        cr_expect_str_eq(show(res.msg),
                         "{{big,[1,2,3,4,5,6,7,8]},[[x,<<\"yz\">>]],[{big,[1,2,3,4,5,6,7,8]},[x,<<\"yz\">>]]}");
        cr_expect_str_eq(show(res.display[0]), "[x,<<\"yz\">>]");
    }
    tr_ms_free(ms);
}

/* ---- threads ---- */

typedef struct Worker {
    const TrMs *ms;
    int id;
    int bad;
} Worker;

static void *worker(void *arg)
{
    Worker *w = arg;
    TrMsScratch *s = malloc(sizeof *s);
    Term tup[3];
    for (int i = 0; i < 20000; i++) {
        int64_t x = (int64_t)w->id * 100000 + i;
        tup[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
        tup[1] = make_small(x);
        tup[2] = make_atom(i % 3 ? ATOM_OK : ATOM_ERROR);
        Term a[2] = { make_boxed(tup), make_small(i % 7) };
        TrMsResult res;
        bool m = tr_ms_run(w->ms, a, 2, NULL, s, &res);
        bool want = i % 3 != 0 && i % 7 > 2;
        if (m != want) {
            w->bad++;
            continue;
        }
        if (!m)
            continue;
        /* msg = {X, X + N} built in this thread's scratch. */
        Term msg = res.msg;
        if (!term_is_tuple(msg) || tuple_elems(msg)[0] != make_small(x) ||
            tuple_elems(msg)[1] != make_small(x + i % 7) || !(res.flags & TR_MS_RETURN_TRACE))
            w->bad++;
    }
    free(s);
    return NULL;
}

Test(ms, one_spec_runs_on_many_threads_at_once)
{
    TrMs *ms = compile_ok("[{[{'$1', ok}, '$2'], [{'>', '$2', 2}],"
                          " [{message, {{'$1', {'+', '$1', '$2'}}}}, {return_trace}]}]", 2);
    enum { N = 6 };
    pthread_t th[N];
    Worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (Worker){ ms, i, 0 };
        pthread_create(&th[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(w[i].bad, 0, "thread %d: %d wrong results", i, w[i].bad);
    }
    tr_ms_free(ms);
}
