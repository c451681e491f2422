/*
 * fuzz/fuzz_pattern.c - patterns and match specs: the input is three
 * lines, a pattern ("m:f/a", wildcards, "on_load"), a match spec in term
 * syntax and an argument list; the rest of the input is ignored.
 *   - bp_pattern_parse on the pattern (it must make no atom);
 *   - tr_ms_compile on the spec, for the pattern's arity (or any), and
 *     when it compiles: tr_ms_format, then tr_ms_run and tr_ms_run_heap on
 *     the arguments (a list of at most 255 terms; other terms are wrapped
 *     in one), whose results must agree;
 *   - one input in 64 also goes through tvm_trace_pattern_ms for real,
 *     on a VM with a small module loaded (the engine's staging, commit and
 *     thread-progress waits).
 * Findings: crashes, sanitizer reports, leaks, hangs, a broken invariant.
 */
#include "breakpoints/bp.h"
#include "fuzz/fuzz_util.h"
#include "trace/tr_ms.h"
#include "vm/heap.h"
#include "vm/process.h"

static const char *const mod_src =
    "module m\n"
    "export f/0, f/1, f/2, g/3\n"
    "function f/0 regs 1\n    loadk r0, ok\n    ret r0\nend\n"
    "function f/1 regs 1\n    ret r0\nend\n"
    "function f/2 regs 2\n    ret r1\nend\n"
    "function g/3 regs 3\n    ret r2\nend\n"
    "function h/1 regs 1\n    ret r0\nend\n";

/* The next line of the input at *p (NUL-terminated copy; caller frees). */
static char *line(const char **p, const char *end)
{
    const char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    *p = nl ? nl + 1 : end;
    char *out = malloc((size_t)(e - s) + 1);
    memcpy(out, s, (size_t)(e - s));
    out[e - s] = '\0';
    return out;
}

static uint64_t counter;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    char *pattern = line(&p, end), *spec = line(&p, end), *args = line(&p, end);
    bool real = (counter++ & 63) == 0;
    tvm_vm *vm = fuzz_vm(real ? 1 : 20000);
    tvm_env *env = tvm_env_new(vm);
    BpPattern pat;
    char why[300];
    size_t atoms = vm_atom_count();
    bool pat_ok = bp_pattern_parse(pattern, &pat, why, sizeof why);
    FUZZ_CHECK(vm_atom_count() == atoms, "the pattern %s made an atom", pattern);
    FUZZ_CHECK(pat_ok || why[0], "rejected without a reason");
    int arity = pat_ok && !pat.any_arity && !pat.on_load ? pat.arity : -1;
    tvm_term st, at;
    tvm_error err;
    if (tvm_parse_term(env, spec, &st, &err) == TVM_OK) {
        char e[200];
        TrMs *ms = tr_ms_compile(vm_root_get(env->p, st), arity, e, sizeof e);
        FUZZ_CHECK(ms || e[0], "rejected without a message");
        if (ms) {
            char buf[256];
            tr_ms_format(ms, buf, sizeof buf);
            /* The arguments: a proper list of at most 255, else [Term]. */
            Process *proc = env->p;
            uint32_t base = proc->nroots;
            if (tvm_parse_term(env, args, &at, &err) != TVM_OK)
                tvm_make_atom(env, "none", &at);
            Term l = vm_root_get(proc, at);
            unsigned n = 0;
            Term t = l;
            for (; term_is_cons(t) && n < 255; t = cons_tail(t))
                n++;
            if (!term_is_nil(t)) {
                vm_root_push(proc, l);
                n = 1;
            } else {
                for (t = l; term_is_cons(t); t = cons_tail(t))
                    vm_root_push(proc, cons_head(t));
            }
            const Term *argv = proc->roots + proc->nroots - n;
            TrMsCtx ctx = { .self = make_pid(7), .caller_known = true,
                            .caller_mod = ATOM_ERLANG, .caller_fun = ATOM_CALL,
                            .caller_arity = 2 };
            static TrMsScratch s1, s2;
            TrMsResult r1, r2;
            bool m1 = tr_ms_run(ms, argv, n, &ctx, &s1, &r1);
            bool m2 = tr_ms_run_heap(ms, proc, proc->roots + proc->nroots - n, n, &ctx, &s2, &r2);
            FUZZ_CHECK(m1 == m2 && r1.flags == r2.flags && r1.message == r2.message &&
                           r1.ndisplay == r2.ndisplay && r1.ntrace == r2.ntrace,
                       "run and run_heap disagree on %s", buf);
            proc->nroots = base;
            tr_ms_free(ms);
        }
    }
    if (real) {
        tvm_error lerr;
        if (tvm_load_string(vm, "m.tasm", mod_src, strlen(mod_src), &lerr) == TVM_OK) {
            int matched;
            tvm_status s = tvm_trace_pattern_ms(vm, pattern, spec[0] ? spec : NULL, TVM_TP_TRUE,
                                                TVM_TP_LOCAL, 0, &matched, &err);
            FUZZ_CHECK(s == TVM_OK || s == TVM_ERR_BADARG || s == TVM_ERR_LIMIT, "status %s",
                       tvm_status_name(s));
            /* Calls of a call-traced context run the spec in the hit. */
            tvm_term a, r;
            tvm_trace_calls(env, 0, true);
            tvm_make_int(env, 42, &a);
            tvm_call(env, "m", "f", 1, &a, &r);
            tvm_call(env, "m", "h", 1, &a, &r);
        }
    }
    tvm_env_free(env);
    free(pattern);
    free(spec);
    free(args);
    return 0;
}
