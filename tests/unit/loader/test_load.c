/*
 * tests/unit/loader/test_load.c - loading: all-or-nothing, replacing a
 * module, keeping what was loaded when a load fails.
 */
#include <criterion/criterion.h>
#include <sys/mman.h>

#include "tests/unit/helpers.h"

TVM_FIXTURE(load, NULL);

static const char *const v1 =
    "module m\nexport f/0, g/0\n"
    "function f/0 regs 1\n    loadi r0, 1\n    ret r0\nend\n"
    "function g/0 regs 1\n    loadk r0, g1\n    ret r0\nend\n";
static const char *const v2 =
    "module m\nexport f/0\n"
    "function f/0 regs 1\n    loadi r0, 2\n    ret r0\nend\n";

static const char *call0(const char *mod, const char *fun)
{
    /* The result, or "class:reason" when the call raised. */
    static char out[256];
    call_fmt(env, mod, fun, 0, NULL, out, sizeof out);
    return out;
}

Test(load, reloading_replaces_the_module_and_drops_removed_exports)
{
    load_ok(vm, "m.tasm", v1);
    cr_assert_str_eq(call0("m", "f"), "1");
    cr_assert_str_eq(call0("m", "g"), "g1");
    load_ok(vm, "m.tasm", v2);
    cr_assert_str_eq(call0("m", "f"), "2");
    cr_assert_str_eq(call0("m", "g"), "error:undef");
}

Test(load, a_file_with_an_error_loads_nothing_and_keeps_the_old_version)
{
    load_ok(vm, "m.tasm", v1);
    const char *bad =
        "module m\nexport f/0\n"
        "function f/0 regs 1\n    loadi r0, 3\n    ret r0\nend\n"
        "function h/0 regs 1\n    bogus r0\n    ret r0\nend\n";
    tvm_error err;
    cr_assert_eq(tvm_load_string(vm, "m2.tasm", bad, strlen(bad), &err), TVM_ERR_LOAD);
    cr_assert_str_eq(err.message, "m2.tasm:8:5: error: unknown instruction 'bogus'\n");
    cr_assert_str_eq(call0("m", "f"), "1");
    cr_assert_str_eq(call0("m", "g"), "g1");
    /* A new module with an error is not loaded at all. */
    const char *bad2 = "module n\nexport f/0\nfunction f/0 regs 1\n    ret r5\nend\n";
    cr_assert_eq(tvm_load_string(vm, "n.tasm", bad2, strlen(bad2), &err), TVM_ERR_LOAD);
    cr_assert_str_eq(err.message,
                     "n.tasm:4:9: error: register r5 out of range: f/0 has 1 registers\n");
    cr_assert_str_eq(call0("n", "f"), "error:undef");
}

Test(load, every_error_of_a_file_is_reported)
{
    const char *bad =
        "module m\nexport f/0, nothere/3\n"
        "function f/0 regs 1\n    add r0, r0\n    jump nowhere\nend\n"
        "function f/0 regs 1\n    ret r0\nend\n";
    tvm_error err;
    cr_assert_eq(tvm_load_string(vm, "e.tasm", bad, strlen(bad), &err), TVM_ERR_LOAD);
    cr_assert_str_eq(err.message,
                     "e.tasm:4:15: error: 'add' takes 3 operands, got 2\n"
                     "e.tasm:7:1: error: duplicate function f/0 (first defined at line 3)\n"
                     "e.tasm:2:13: error: export of undefined function nothere/3\n"
                     "e.tasm:5:10: error: undefined label 'nowhere'\n");
}

Test(load, missing_files_and_bad_arguments)
{
    tvm_error err;
    cr_assert_eq(tvm_load_file(vm, "/nonexistent/x.tasm", &err), TVM_ERR_IO);
    cr_assert_str_eq(err.message, "/nonexistent/x.tasm: error: cannot open: No such file or directory\n");
    /* A path near PATH_MAX is named by its start and its end, and the
     * reason stays (it was cut off the message's end before). */
    char base[] = "/tmp/ld_long_XXXXXX", pb[1025];
    static char dir[4096], file[4200], want[sizeof err.message];
    cr_assert(mkdtemp(base));
    long_chain_make(base, dir, 4080);
    snprintf(file, sizeof file, "%s/nope/x.tasm", dir);
    cr_assert_eq(tvm_load_file(vm, file, &err), TVM_ERR_IO);
    snprintf(want, sizeof want, "%s: error: cannot open: No such file or directory\n",
             msg_path(file, pb));
    cr_assert_str_eq(err.message, want);
    /* The chain itself opens (a directory) and cannot be read. */
    cr_assert_eq(tvm_load_file(vm, dir, &err), TVM_ERR_IO);
    snprintf(want, sizeof want, "%s: error: cannot read: Is a directory\n", msg_path(dir, pb));
    cr_assert_str_eq(err.message, want);
    long_chain_remove(base, dir);
    /* A directory opens, and its first read fails: the reason is named. */
    cr_assert_eq(tvm_load_file(vm, "examples", &err), TVM_ERR_IO);
    cr_assert_str_eq(err.message, "examples: error: cannot read: Is a directory\n");
    cr_assert_eq(tvm_load_string(vm, NULL, "", 0, &err), TVM_ERR_BADARG);
}

/*
 * A text longer than LD_TEXT_MAX (256 MiB) is refused by its length
 * before a byte of it is read, and what was loaded stays.  Without the
 * bound, /dev/zero was read until memory ran out, and a text past 2 GiB
 * would overflow the diagnostics' int columns.
 */
Test(load, a_text_past_the_loaders_bound_is_refused_and_the_old_version_stays, .timeout = 120)
{
    SKIP_SINGLE_THREADED_UNDER_TSAN("the loader refusing 256 MiB of text");
    load_ok(vm, "m.tasm", v1);
    const size_t max = (size_t)256 << 20;
    /* Mapped, never touched: the loader must not read it. */
    char *big = mmap(NULL, max + 1, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(big != MAP_FAILED);
    tvm_error err;
    cr_assert_eq(tvm_load_string(vm, "big.tasm", big, max + 1, &err), TVM_ERR_LIMIT);
    cr_assert_str_eq(err.message, "big.tasm:1:1: error: text longer than 268435456 bytes, "
                                  "the most a module's text may be\n");
    char *diag = NULL;
    cr_assert_eq(tvm_check_string(vm, "big.tasm", big, max + 1, &diag, NULL), TVM_ERR_LOAD);
    cr_assert_str_eq(diag, "big.tasm:1:1: error: text longer than 268435456 bytes, "
                           "the most a module's text may be\n");
    free(diag);
    munmap(big, max + 1);
    /* A file without end: reading stops within one read past the bound. */
    cr_assert_eq(tvm_load_file(vm, "/dev/zero", &err), TVM_ERR_LIMIT);
    cr_assert_str_eq(err.message, "/dev/zero:1:1: error: text longer than 268435456 bytes, "
                                  "the most a module's text may be\n");
    cr_assert_str_eq(call0("m", "f"), "1");
    cr_assert_str_eq(call0("m", "g"), "g1");
}

Test(load, module_can_call_another_module_loaded_later)
{
    load_ok(vm, "a.tasm", "module a\nexport f/0\nfunction f/0 regs 1\n    callx r0, r0, b:g/0\n    ret r0\nend\n");
    cr_assert_str_eq(call0("a", "f"), "error:undef");
    load_ok(vm, "b.tasm", "module b\nexport g/0\nfunction g/0 regs 1\n    loadk r0, {from, b}\n    ret r0\nend\n");
    cr_assert_str_eq(call0("a", "f"), "{from,b}");
}

/* tvm_check_string: every diagnostic, however long, and nothing loaded.
 * The loader stops after 20 errors; with a 200-byte file name they make
 * more text than a tvm_error holds (4096 bytes). */
Test(load, checking_reports_every_error_and_loads_nothing)
{
    char name[201];
    memset(name, 'x', 200);
    name[200] = '\0';
    char text[30 * 16 + 128];
    size_t n = (size_t)sprintf(text, "module c\nfunction f/0 regs 1\n");
    for (int i = 0; i < 30; i++)
        n += (size_t)sprintf(text + n, "    bogus r0\n");
    n += (size_t)sprintf(text + n, "    ret r0\nend\n");
    char *diag = NULL, *dis = (char *)1;
    cr_assert_eq(tvm_check_string(vm, name, text, n, &diag, &dis), TVM_ERR_LOAD);
    cr_assert_null(dis);
    char want[600];
    snprintf(want, sizeof want, "%s:3:5: error: unknown instruction 'bogus'\n", name);
    cr_assert(strncmp(diag, want, strlen(want)) == 0, "%s", diag);
    int lines = 0;
    for (const char *p = diag; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 21);
    cr_assert_gt(strlen(diag), 4096);
    snprintf(want, sizeof want, "%s:22:5: error: unknown instruction 'bogus'\n"
             "%s:22:5: error: too many errors, stopping\n", name, name);
    cr_assert_str_eq(diag + strlen(diag) - strlen(want), want);
    free(diag);
    cr_assert_eq(tvm_modules(vm, NULL, 0), 0);
}

Test(load, checking_good_text_gives_its_disassembly_and_loads_nothing)
{
    char *diag, *dis;
    cr_assert_eq(tvm_check_string(vm, "m.tasm", v2, strlen(v2), &diag, &dis), TVM_OK);
    cr_assert_str_eq(diag, "");
    cr_assert_str_eq(dis, "module m\n\n"
                          "function f/0 regs 1  ; exported\n"
                          "     0  enter      1                         ; line 3\n"
                          "     1  loadi      r0, 2                     ; line 4\n"
                          "     2  ret        r0                        ; line 5\n"
                          "end\n");
    free(diag);
    free(dis);
    cr_assert_eq(tvm_modules(vm, NULL, 0), 0);
    cr_assert_str_eq(call0("m", "f"), "error:undef");
    /* Without the optional outputs. */
    cr_assert_eq(tvm_check_string(vm, "m.tasm", v2, strlen(v2), NULL, NULL), TVM_OK);
    cr_assert_eq(tvm_check_string(NULL, "m.tasm", v2, strlen(v2), &diag, NULL), TVM_ERR_BADARG);
    cr_assert_str_eq(diag, "tvm_check_string: NULL argument\n");
    free(diag);
}

Test(load, checking_a_file_that_cannot_be_read)
{
    char *diag, *dis;
    cr_assert_eq(tvm_check_file(vm, "/nonexistent/x.tasm", &diag, &dis), TVM_ERR_IO);
    cr_assert_null(dis);
    cr_assert_str_eq(diag, "/nonexistent/x.tasm: error: cannot open: No such file or directory\n");
    free(diag);
    cr_assert_eq(tvm_check_file(vm, "examples/fib.tasm", &diag, NULL), TVM_OK);
    cr_assert_str_eq(diag, "");
    free(diag);
}

/* tvm_modules and tvm_functions: load order, a reload keeps its place. */
Test(load, listing_modules_and_functions)
{
    load_ok(vm, "m.tasm", v1);
    load_ok(vm, "n.tasm", "module n\nfunction h/2 regs 2\n    ret r1\nend\n");
    load_ok(vm, "m2.tasm", v2);
    tvm_module_info mods[4];
    cr_assert_eq(tvm_modules(vm, mods, 4), 2);
    cr_assert_str_eq(mods[0].name, "m");
    cr_assert_str_eq(mods[0].file, "m2.tasm");
    cr_assert_eq(mods[0].functions, 1);
    cr_assert_str_eq(mods[1].name, "n");
    cr_assert_str_eq(mods[1].file, "n.tasm");
    cr_assert_eq(mods[1].functions, 1);
    cr_assert_eq(tvm_modules(vm, mods, 1), 2);   /* fills one, counts both */

    load_ok(vm, "m.tasm", v1);
    tvm_function_info fns[1];
    size_t count = 0;
    cr_assert_eq(tvm_functions(vm, "m", fns, 1, &count), TVM_OK);
    cr_assert_eq(count, 2);
    cr_assert_str_eq(fns[0].name, "f");
    cr_assert_eq(fns[0].arity, 0);
    cr_assert(fns[0].exported);
    cr_assert_eq(fns[0].line, 3);
    tvm_function_info nf;
    cr_assert_eq(tvm_functions(vm, "n", &nf, 1, &count), TVM_OK);
    cr_assert_eq(count, 1);
    cr_assert_str_eq(nf.name, "h");
    cr_assert_eq(nf.arity, 2);
    cr_assert(!nf.exported);
    cr_assert_eq(tvm_functions(vm, "erlang", &nf, 1, &count), TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_functions(vm, "no_such_module_anywhere", &nf, 1, &count), TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_functions(vm, NULL, &nf, 1, &count), TVM_ERR_BADARG);
}

/* A function of n labels l0..l<n-1>, each on a forward branch to l<n>,
 * then `tail` (which defines l<n>).  Malloc'ed. */
static char *many_labels(int n, const char *tail)
{
    size_t cap = (size_t)n * 32 + 256, len;
    char *text = malloc(cap);
    len = (size_t)sprintf(text, "module lab\nexport f/0\nfunction f/0 regs 1\n    loadi r0, 0\n");
    for (int i = 0; i < n; i++)
        len += (size_t)sprintf(text + len, "l%d: jeqi r0, 1, l%d\n", i, n);
    sprintf(text + len, "%send\n", tail);
    return text;
}

/* The verifier finds labels through a hash index: a linear search made
 * it quadratic in a function's labels (200,000 of them took minutes, in
 * a native when VM code loads: code:load_binary/3); the timeout makes
 * that a failure.  The first of duplicates is the one reported. */
Test(load, a_function_of_many_labels_verifies_in_linear_time, .timeout = 60)
{
    SKIP_SINGLE_THREADED_UNDER_TSAN("the verifier over 200,000 labels");
    enum { N = 200000 };
    char tail[64];
    sprintf(tail, "l%d: ret r0\n", N);
    char *text = many_labels(N, tail);
    load_ok(vm, "lab.tasm", text);
    cr_assert_str_eq(call0("lab", "f"), "0");
    free(text);
    sprintf(tail, "l7: loadi r0, 7\nl%d: ret r0\n", N);
    text = many_labels(N, tail);
    tvm_error err;
    cr_assert_eq(tvm_load_string(vm, "dup.tasm", text, strlen(text), &err), TVM_ERR_LOAD);
    char want[100];
    sprintf(want, "dup.tasm:%d:1: error: duplicate label 'l7' (first at line 12)\n", N + 5);
    cr_assert_str_eq(err.message, want);
    free(text);
}
