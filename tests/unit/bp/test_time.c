/*
 * tests/unit/bp/test_time.c - call_time (breakpoints/bp_time.c): the
 * per-scheduler tables directly (exact sums per process, growth; readers
 * while writers insert are in tests/stress/stress_time.c), and the
 * accounting through the hit-side interface (bp_time_call /
 * bp_time_return / sched_out / sched_in) on a real VM's call_time
 * records: exclusive time, time scheduled out, pause, restart, false,
 * trace_info and tvm_call_time.  The trace clock is the test clock
 * (trace/tr_clock.h), which moves only when a test advances it: every
 * duration is an exact number of nanoseconds.
 */
#include <criterion/criterion.h>

#include "breakpoints/bp_time.h"
#include "tests/unit/helpers.h"
#include "trace/tr_clock.h"
#include "vm/atom.h"

/* Ticks are the test clock's nanoseconds. */
static void manual_clock(void)
{
    tr_clock_set_manual(0);
}

/* ---- the tables ---- */

TestSuite(time_tab, .init = manual_clock);

Test(time_tab, sums_each_process_over_the_shards)
{
    BpTime *t = bp_time_new(3);
    bp_time_add(t, 1, 42, 1, 100);
    bp_time_add(t, 2, 42, 2, 50);
    bp_time_add(t, 0, 42, 1, 0);
    bp_time_add(t, 2, 7, 1, 1000);
    bp_time_add(t, 1, 0, 3, 30);
    bp_time_add(t, 1, 42, 0, 25);
    BpTimeSample *v;
    size_t n = bp_time_read(t, &v);
    cr_assert_eq(n, 3);
    cr_assert_eq(v[0].pid, 0);
    cr_assert_eq(v[0].count, 3);
    cr_assert_eq(v[0].ns, 30);
    cr_assert_eq(v[1].pid, 7);
    cr_assert_eq(v[1].count, 1);
    cr_assert_eq(v[1].ns, 1000);
    cr_assert_eq(v[2].pid, 42);
    cr_assert_eq(v[2].count, 4);
    cr_assert_eq(v[2].ns, 175);
    free(v);
    bp_time_free(t);
}

Test(time_tab, empty_reads_nothing)
{
    BpTime *t = bp_time_new(2);
    BpTimeSample *v = (BpTimeSample *)1;
    cr_assert_eq(bp_time_read(t, &v), 0);
    cr_assert_null(v);
    bp_time_free(t);
}

/* growth: 10,000 processes in one shard, each once, one of them 3 times */
Test(time_tab, grows_and_keeps_every_entry)
{
    BpTime *t = bp_time_new(2);
    for (uint64_t pid = 1; pid <= 10000; pid++)
        bp_time_add(t, 1, pid, 1, pid);
    bp_time_add(t, 1, 5000, 2, 0);
    BpTimeTab *tab = vm_atomic_load_ptr_relaxed(&t->shard[1].tab);
    cr_assert_eq(tab->cap, 32768, "cap %u", tab->cap);
    cr_assert_eq(tab->used, 10000);
    int retired = 0;
    for (BpTimeTab *r = tab->retired; r; r = r->retired)
        retired++;
    cr_assert_eq(retired, 12, "8 -> 32768 is 12 doublings");
    BpTimeSample *v;
    size_t n = bp_time_read(t, &v);
    cr_assert_eq(n, 10000);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(v[i].pid, i + 1);
        cr_assert_eq(v[i].count, i + 1 == 5000 ? 3 : 1);
        cr_assert_eq(v[i].ns, i + 1);
    }
    free(v);
    bp_time_free(t);
}

/* Readers walking the tables while writers insert: tests/stress/stress_time.c
 * (a plain program, so that it runs under ThreadSanitizer too). */

/* ---- the accounting, through the hit-side interface ---- */

static const char *const ct_src =
    "module ct\nexport f/0, g/0, h/0\n"
    "function f/0 regs 1\n    loadk r0, 1\n    ret r0\nend\n"
    "function g/0 regs 1\n    loadk r0, 2\n    ret r0\nend\n"
    "function h/0 regs 1\n    loadk r0, 3\n    ret r0\nend\n";

static tvm_vm *vm;
static tvm_env *env;

static void setup(void)
{
    tr_clock_set_manual(0);
    vm = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true });
    env = tvm_env_new(vm);
    load_ok(vm, "ct.tasm", ct_src);
}

static void teardown(void)
{
    tvm_env_free(env);
    tvm_destroy(vm);
}

TestSuite(time_acct, .init = setup, .fini = teardown, .timeout = 60);

static const FuncInfo *fn_of(const char *name)
{
    Atom m, f;
    cr_assert(vm_atom_intern("ct", 2, &m));
    cr_assert(vm_atom_intern(name, strlen(name), &f));
    return vm_export_target(vm, vm_export_find(vm, m, f, 0));
}

/* The active generation of fn's local record (what a hit would read). */
static const BpGen *gen_of(const FuncInfo *fn)
{
    const BpRecord *r = vm_atomic_load_ptr_relaxed(&fn->bp);
    cr_assert_not_null(r);
    return &r->gen[vm_atomic_load_relaxed(&vm->bp_ix)];
}

/* No time frame was pushed (the call was not accumulating). */
#define NO_FRAME ((void *)&no_frame)
static char no_frame;

/* A traced call as the interpreter makes it: bp_time_call when the active
 * generation accumulates; returns the time frame's data, or NO_FRAME. */
static void *enter(const char *name)
{
    const FuncInfo *fn = fn_of(name);
    const BpGen *g = gen_of(fn);
    void *saved = NO_FRAME;
    if (g->flags & BP_TIME_ACTIVE)
        cr_assert(bp_time_call(env->p, fn, g, &saved));
    return saved;
}

/* The return, through the time frame if one was pushed. */
static void leave(const char *name, void *saved)
{
    if (saved != NO_FRAME)
        bp_time_return(env->p, fn_of(name), saved);
}

static void tp(const char *pattern, tvm_tp_action how)
{
    tvm_error err;
    cr_assert_eq(tvm_trace_pattern(vm, pattern, how, TVM_TP_CALL_TIME, NULL, &err), TVM_OK, "%s",
                 err.message);
}

/* One process's line (pid 0: this call context); false if none. */
static bool line(const char *mfa, tvm_call_time_entry *e)
{
    tvm_call_time_entry v[4];
    size_t n = 99;
    cr_assert_eq(tvm_call_time(vm, mfa, v, 4, &n), TVM_OK);
    cr_assert(n <= 1);
    if (n)
        *e = v[0];
    return n == 1;
}

#define MS 1000000u

/* The process's time moves by `ms` (it is in f, g, or scheduled out). */
static void pass_ms(uint64_t ms)
{
    tr_clock_advance(ms * MS);
}

/* f spends 20 ms, calls g which spends 100 ms, spends 10 ms more: f's
 * time excludes g's */
Test(time_acct, exclusive_time)
{
    tp("ct:_/_", TVM_TP_TRUE);
    void *sf = enter("f");
    cr_assert_null(sf, "nothing was current");
    pass_ms(20);
    void *sg = enter("g");
    cr_assert_eq(sg, fn_of("f"), "the frame saves f");
    pass_ms(100);
    leave("g", sg);
    pass_ms(10);
    leave("f", sf);
    cr_assert_null(env->p->ct_fn);
    tvm_call_time_entry f, g, h;
    cr_assert(line("ct:f/0", &f));
    cr_assert(line("ct:g/0", &g));
    cr_assert_not(line("ct:h/0", &h), "h was never called");
    cr_assert_eq(f.pid, 0);
    cr_assert_eq(f.count, 1);
    cr_assert_eq(g.count, 1);
    cr_assert_eq(f.ns, 30 * MS, "f: %lu ns", (unsigned long)f.ns);
    cr_assert_eq(g.ns, 100 * MS, "g: %lu ns", (unsigned long)g.ns);
}

/* recursion and exact counts: f -> f -> f, then g three times */
Test(time_acct, counts_are_exact)
{
    tp("ct:_/_", TVM_TP_TRUE);
    void *s1 = enter("f"), *s2 = enter("f"), *s3 = enter("f");
    cr_assert_eq(s2, fn_of("f"));
    leave("f", s3);
    leave("f", s2);
    leave("f", s1);
    for (int i = 0; i < 3; i++)
        leave("g", enter("g"));
    tvm_call_time_entry f, g;
    cr_assert(line("ct:f/0", &f));
    cr_assert(line("ct:g/0", &g));
    cr_assert_eq(f.count, 3);
    cr_assert_eq(g.count, 3);
    cr_assert_null(env->p->ct_fn);
}

/* a tail call from f to g pushes no frame of its own: the return through
 * f's frame charges g, the current function */
Test(time_acct, tail_call_charges_the_current_function)
{
    tp("ct:_/_", TVM_TP_TRUE);
    void *sf = enter("f");
    (void)enter("g");   /* tail call: its frame is not pushed */
    pass_ms(50);
    leave("f", sf);
    tvm_call_time_entry f, g;
    cr_assert(line("ct:f/0", &f));
    cr_assert(line("ct:g/0", &g));
    cr_assert_eq(f.ns, 0, "f: %lu ns", (unsigned long)f.ns);
    cr_assert_eq(g.ns, 50 * MS, "g: %lu ns", (unsigned long)g.ns);
    cr_assert_null(env->p->ct_fn);
}

/* What the VM does around a switch (vm/sched.c's yield): the hooks
 * run only while the process is in a call_time-traced function. */
static void sched_out(Process *p)
{
    if (p->ct_fn)
        vm_hook_time_out(p);
}

static void sched_in(Process *p)
{
    if (p->ct_fn)
        vm_hook_time_in(p);
}

/* scheduled out for 100 ms inside f: not charged */
Test(time_acct, scheduled_out_time_is_not_charged)
{
    tp("ct:_/_", TVM_TP_TRUE);
    void *sf = enter("f");
    pass_ms(10);
    sched_out(env->p);
    pass_ms(100);
    sched_in(env->p);
    pass_ms(10);
    leave("f", sf);
    tvm_call_time_entry f;
    cr_assert(line("ct:f/0", &f));
    cr_assert_eq(f.ns, 20 * MS, "f: %lu ns", (unsigned long)f.ns);
    /* the hooks cost nothing (and change nothing) outside traced code */
    sched_out(env->p);
    sched_in(env->p);
    cr_assert_null(env->p->ct_fn);
}

/* pause freezes count and time (still readable); restart counts from 0;
 * false removes the data */
Test(time_acct, pause_restart_false)
{
    tp("ct:_/_", TVM_TP_TRUE);
    for (int i = 0; i < 2; i++) {
        void *s = enter("f");
        pass_ms(1);
        leave("f", s);
    }
    void *sf = enter("f");
    tp("ct:f/0", TVM_TP_PAUSE);
    pass_ms(50);
    leave("f", sf);  /* f is no longer accumulating: this time is dropped */
    leave("f", enter("f"));
    tvm_call_time_entry f;
    cr_assert(line("ct:f/0", &f));
    cr_assert_eq(f.count, 3);
    cr_assert_eq(f.ns, 2 * MS, "f: %lu ns", (unsigned long)f.ns);
    tvm_term t;
    char out[256];
    cr_assert_eq(tvm_trace_info(env, "ct:f/0", "call_time", &t, NULL), TVM_OK);
    tvm_format_term(env, t, out, sizeof out);
    cr_assert_str_eq(out, "{call_time,[{<0.0.0>,3,0,2000}]}");
    tp("ct:f/0", TVM_TP_RESTART);
    size_t n = 9;
    cr_assert_eq(tvm_call_time(vm, "ct:f/0", NULL, 0, &n), TVM_OK);
    cr_assert_eq(n, 0, "fresh data after restart");
    sf = enter("f");
    pass_ms(7);
    leave("f", sf);
    cr_assert(line("ct:f/0", &f));
    cr_assert_eq(f.count, 1);
    cr_assert_eq(f.ns, 7 * MS, "f: %lu ns", (unsigned long)f.ns);
    tp("ct:f/0", TVM_TP_FALSE);
    cr_assert_eq(tvm_call_time(vm, "ct:f/0", NULL, 0, &n), TVM_ERR_NOTFOUND);
    cr_assert_eq(n, 0);
    cr_assert_eq(tvm_trace_info(env, "ct:f/0", "call_time", &t, NULL), TVM_OK);
    tvm_format_term(env, t, out, sizeof out);
    cr_assert_str_eq(out, "{call_time,false}");
    cr_assert_eq(tvm_trace_info(env, "ct:g/0", "all", &t, NULL), TVM_OK);
    tvm_format_term(env, t, out, sizeof out);
    cr_assert_str_eq(out, "{all,[{traced,false},{match_spec,false},{meta,false},"
                          "{meta_match_spec,false},{call_time,[]},{call_count,false}]}");
}

/* the C API's arguments */
Test(time_acct, api_arguments)
{
    size_t n;
    tvm_call_time_entry e[1];
    cr_assert_eq(tvm_call_time(NULL, "ct:f/0", e, 1, &n), TVM_ERR_BADARG);
    cr_assert_eq(tvm_call_time(vm, "ct:f/_", e, 1, &n), TVM_ERR_BADARG);
    cr_assert_eq(tvm_call_time(vm, "ct:f/0", NULL, 1, &n), TVM_ERR_BADARG);
    cr_assert_eq(tvm_call_time(vm, "ct:f/0", e, 1, NULL), TVM_ERR_BADARG);
    cr_assert_eq(tvm_call_time(vm, "ct:f/0", e, 1, &n), TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_call_time(vm, "ct:nope/0", e, 1, &n), TVM_ERR_NOTFOUND);
    tp("ct:_/_", TVM_TP_TRUE);
    leave("f", enter("f"));
    leave("f", enter("f"));
    n = 0;
    cr_assert_eq(tvm_call_time(vm, "ct:f/0", e, 0, &n), TVM_OK);
    cr_assert_eq(n, 1, "the length even when nothing fits");
    cr_assert_eq(tvm_call_time(vm, "ct:f/0", e, 1, &n), TVM_OK);
    cr_assert_eq(e[0].count, 2);
}
