/*
 * tests/unit/vm/test_api.c - documented corners of the embedding API
 * (include/tracevm.h) that the other tests do not reach: tvm_raise with
 * every class and a bad one, tvm_receive with each kind of timeout and
 * from a call context, tvm_join and tvm_wait_idle from a native,
 * tvm_get_stacktrace, tvm_config.output and
 * heap_min_words, and every TVM_ERR_LIMIT the API documents.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/unit/helpers.h"
#include "vm/atomics.h"
#include "vm/heap.h"

TVM_FIXTURE(api, (&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2, .quiet_crashes = true }));

/* ---- tvm_raise ---- */

/* host:raise(Class, Reason): tvm_raise(Class as a string, Reason). */
static tvm_status nat_raise(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res, void *d)
{
    (void)argc, (void)res, (void)d;
    char cls[64];
    cr_assert_eq(tvm_get_atom(e, argv[0], cls, sizeof cls), TVM_OK);
    return tvm_raise(e, cls, argv[1]);
}

/* catch(Class, Reason): try host:raise(Class, Reason) -> {caught, C, R} */
static const char *const raise_src =
    "module rz\n"
    "export raise/2, catch/2\n"
    "function raise/2 regs 2\n    callx r0, r0, host:raise/2\n    ret r0\nend\n"
    "function catch/2 regs 6\n"
    "    try r3, caught\n    move r4, r0\n    move r5, r1\n"
    "    callx r4, r4, host:raise/2\n    endtry\n    ret r4\n"
    "caught:\n    loadk r2, caught\n    tuple r0, 3, r2\n    ret r0\nend\n";

static void raise_setup(void)
{
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "host", "raise", 2, nat_raise, NULL, &err), TVM_OK);
    load_ok(vm, "rz.tasm", raise_src);
}

/* rz:Fun(Class, Reason) with both parsed from text; its status, and the
 * result or the exception (class:reason) formatted into out. */
static tvm_status raise_via(const char *fun, const char *cls, const char *reason, char *out,
                            size_t size)
{
    tvm_term a[2], r;
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, cls, &a[0], &err), TVM_OK);
    cr_assert_eq(tvm_parse_term(env, reason, &a[1], &err), TVM_OK);
    tvm_status st = tvm_call(env, "rz", fun, 2, a, &r);
    if (st == TVM_OK) {
        tvm_format_term(env, r, out, size);
    } else {
        exception_fmt(env, out, size);
    }
    return st;
}

/* rz:Fun(Class, Reason): the status, then the result or the exception. */
static const struct {
    const char *fun, *cls, *reason;
    tvm_status st;
    const char *want;
} raise_cases[] = {
    /* Caught in VM code: the class and the reason as given. */
    { "catch", "error", "{bad,1}", TVM_OK, "{caught,error,{bad,1}}" },
    { "catch", "throw", "ball", TVM_OK, "{caught,throw,ball}" },
    { "catch", "exit", "shutdown", TVM_OK, "{caught,exit,shutdown}" },
    /* Uncaught: tvm_call gives the exception back (a throw as nocatch). */
    { "raise", "error", "oops", TVM_EXCEPTION, "error:oops" },
    { "raise", "exit", "[1,2]", TVM_EXCEPTION, "exit:[1,2]" },
    { "raise", "throw", "ball", TVM_EXCEPTION, "error:{nocatch,ball}" },
    /* Any other class: error:badarg, caught or not. */
    { "catch", "oops", "whatever", TVM_OK, "{caught,error,badarg}" },
    { "catch", "'Error'", "x", TVM_OK, "{caught,error,badarg}" },
    { "raise", "nocatch", "x", TVM_EXCEPTION, "error:badarg" },
};

Test(api, tvm_raise_each_class_and_a_bad_one)
{
    raise_setup();
    for (size_t i = 0; i < sizeof raise_cases / sizeof raise_cases[0]; i++) {
        char out[256];
        tvm_status st = raise_via(raise_cases[i].fun, raise_cases[i].cls, raise_cases[i].reason,
                                  out, sizeof out);
        cr_assert_eq(st, raise_cases[i].st, "%s(%s, %s)", raise_cases[i].fun,
                     raise_cases[i].cls, raise_cases[i].reason);
        cr_assert_str_eq(out, raise_cases[i].want);
    }
}

/* ---- tvm_receive ---- */

/* host:recv(Timeout): tvm_receive(Timeout); {got, Msg} or the status's
 * name. */
static tvm_status nat_recv(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res, void *d)
{
    (void)argc, (void)d;
    int64_t timeout;
    cr_assert_eq(tvm_get_int(e, argv[0], &timeout), TVM_OK);
    tvm_term msg;
    tvm_status st = tvm_receive(e, timeout, &msg);
    if (st != TVM_OK)
        return tvm_make_atom(e, tvm_status_name(st), res);
    tvm_term pair[2];
    cr_assert_eq(tvm_make_atom(e, "got", &pair[0]), TVM_OK);
    pair[1] = msg;
    return tvm_make_tuple(e, 2, pair, res);
}

static const char *const recv_src =
    "module rv\n"
    "export recv/1\n"
    "function recv/1 regs 1\n    callx r0, r0, host:recv/1\n    ret r0\nend\n";

static void recv_setup(void)
{
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "host", "recv", 1, nat_recv, NULL, &err), TVM_OK);
    load_ok(vm, "rv.tasm", recv_src);
}

static tvm_pid spawn_recv(int64_t timeout)
{
    return spawn_with_int(env, "rv", "recv", timeout);
}

static void send_atom(tvm_pid pid, const char *name)
{
    tvm_term m;
    cr_assert_eq(tvm_make_atom(env, name, &m), TVM_OK);
    cr_assert_eq(tvm_send(env, pid, m), TVM_OK);
}

static const char *join_fmt(tvm_pid pid)
{
    static char out[128];
    tvm_term r;
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    tvm_format_term(env, r, out, sizeof out);
    return out;
}

Test(api, tvm_receive_timeouts)
{
    recv_setup();
    /* 0: nothing there, so at once TVM_ERR_NOTFOUND. */
    cr_assert_str_eq(join_fmt(spawn_recv(0)), "'TVM_ERR_NOTFOUND'");
    /* A positive timeout that passes with nothing sent. */
    cr_assert_str_eq(join_fmt(spawn_recv(1)), "'TVM_ERR_NOTFOUND'");
    /* A positive timeout with a message sent while it waits: the message
     * (a minute, so only a broken receive could see it pass). */
    tvm_pid p = spawn_recv(60000);
    wait_proc_state(vm, p, "waiting");
    send_atom(p, "hello");
    cr_assert_str_eq(join_fmt(p), "{got,hello}");
    /* Forever (< 0), woken by a message. */
    p = spawn_recv(-1);
    wait_proc_state(vm, p, "waiting");
    send_atom(p, "late");
    cr_assert_str_eq(join_fmt(p), "{got,late}");
}

/* host:gate(): returns once the test opened the gate (sleeping 1 ms at a
 * time: the process is suspended meanwhile and its mailbox fills). */
static VmAtomic gate_open;

static tvm_status nat_gate(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res, void *d)
{
    (void)argc, (void)argv, (void)d;
    while (!vm_atomic_load_acquire(&gate_open))
        cr_assert_eq(tvm_sleep(e, 1), TVM_OK);
    return tvm_make_atom(e, "open", res);
}

/* three(): after the gate, receive(0) three times and once more */
static const char *const recv0_src =
    "module rv0\n"
    "export three/0\n"
    "function three/0 regs 5\n"
    "    callx r0, r0, host:gate/0\n"
    "    loadi r1, 0\n    callx r1, r1, host:recv/1\n"
    "    loadi r2, 0\n    callx r2, r2, host:recv/1\n"
    "    loadi r3, 0\n    callx r3, r3, host:recv/1\n"
    "    loadi r4, 0\n    callx r4, r4, host:recv/1\n"
    "    tuple r0, 4, r1\n    ret r0\nend\n";

/* What is already there, oldest first, then nothing: with timeout 0. */
Test(api, tvm_receive_zero_takes_what_is_there_oldest_first)
{
    recv_setup();
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "host", "gate", 0, nat_gate, NULL, &err), TVM_OK);
    load_ok(vm, "rv0.tasm", recv0_src);
    tvm_pid p;
    cr_assert_eq(tvm_spawn(env, "rv0", "three", 0, NULL, &p), TVM_OK);
    send_atom(p, "first");
    send_atom(p, "second");
    send_atom(p, "third");
    vm_atomic_store_release(&gate_open, 1);
    cr_assert_str_eq(join_fmt(p), "{{got,first},{got,second},{got,third},'TVM_ERR_NOTFOUND'}");
}

Test(api, tvm_receive_from_a_call_context_is_badarg)
{
    tvm_term m;
    cr_assert_eq(tvm_receive(env, 0, &m), TVM_ERR_BADARG);
    cr_assert_eq(tvm_receive(env, -1, &m), TVM_ERR_BADARG);
    cr_assert_eq(tvm_receive(env, 10, &m), TVM_ERR_BADARG);
    cr_assert_eq(tvm_receive(NULL, 0, &m), TVM_ERR_BADARG);
}

/* ---- tvm_join and tvm_wait_idle from a native ---- */

/* host:join(Pid): tvm_join(Pid)'s status by name. */
static tvm_status nat_join(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res, void *d)
{
    (void)argc, (void)d;
    tvm_pid pid;
    cr_assert_eq(tvm_get_pid(e, argv[0], &pid), TVM_OK);
    tvm_term r;
    return tvm_make_atom(e, tvm_status_name(tvm_join(e, pid, &r)), res);
}

/* host:idle(): tvm_wait_idle, then returned. */
static tvm_status nat_idle(tvm_env *e, int argc, const tvm_term *argv, tvm_term *res, void *d)
{
    (void)argc, (void)argv, (void)d;
    tvm_wait_idle(tvm_env_vm(e));
    return tvm_make_atom(e, "returned", res);
}

static const char *const wait_src =
    "module wj\n"
    "export join/1, idle/0\n"
    "function join/1 regs 1\n    callx r0, r0, host:join/1\n    ret r0\nend\n"
    "function idle/0 regs 1\n    callx r0, r0, host:idle/0\n    ret r0\nend\n";

/* Both would block the scheduler thread the native runs on: the join
 * until a process that is waiting for a message ends (it never gets the
 * scheduler's turn to, with one scheduler; here it waits for a message
 * only this thread sends, after the join), the wait until no process is
 * alive (the caller is).  Refused instead (the deadline fails the case if
 * either blocks), and the process stays joinable from a host thread. */
Test(api, tvm_join_and_tvm_wait_idle_from_a_native_do_not_block, .timeout = 60)
{
    recv_setup();
    tvm_error err;
    cr_assert_eq(tvm_register_native(vm, "host", "join", 1, nat_join, NULL, &err), TVM_OK);
    cr_assert_eq(tvm_register_native(vm, "host", "idle", 0, nat_idle, NULL, &err), TVM_OK);
    load_ok(vm, "wj.tasm", wait_src);
    tvm_pid waiter = spawn_recv(-1), joiner, idler;
    wait_proc_state(vm, waiter, "waiting");
    tvm_term pt;
    cr_assert_eq(tvm_make_pid(env, waiter, &pt), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "wj", "join", 1, &pt, &joiner), TVM_OK);
    cr_assert_str_eq(join_fmt(joiner), "'TVM_ERR_BADARG'");
    cr_assert_eq(tvm_spawn(env, "wj", "idle", 0, NULL, &idler), TVM_OK);
    cr_assert_str_eq(join_fmt(idler), "returned");
    send_atom(waiter, "bye");
    cr_assert_str_eq(join_fmt(waiter), "{got,bye}");
}

/* ---- tvm_get_stacktrace ---- */

static const char *const st_src =
    "module stk\n"                                  /* 1 */
    "export outer/1\n"                              /* 2 */
    "function outer/1 regs 1\n"                     /* 3 */
    "    call r0, r0, middle/1\n"                   /* 4 */
    "    ret r0\n"                                  /* 5 */
    "end\n"                                         /* 6 */
    "function middle/1 regs 1\n"                    /* 7 */
    "    call r0, r0, inner/1\n"                    /* 8 */
    "    ret r0\n"                                  /* 9 */
    "end\n"                                         /* 10 */
    "function inner/1 regs 2\n"                     /* 11 */
    "    loadk r1, atom\n"                          /* 12 */
    "    add r0, r0, r1\n"                          /* 13 */
    "    ret r0\n"                                  /* 14 */
    "end\n";                                        /* 15 */

Test(api, tvm_get_stacktrace_innermost_first)
{
    tvm_term t;
    cr_assert_eq(tvm_get_stacktrace(env, &t), TVM_ERR_NOTFOUND, "no exception yet");
    load_ok(vm, "stk.tasm", st_src);
    tvm_term a, r;
    cr_assert_eq(tvm_make_int(env, 1, &a), TVM_OK);
    cr_assert_eq(tvm_call(env, "stk", "outer", 1, &a, &r), TVM_EXCEPTION);
    cr_assert_eq(tvm_get_stacktrace(env, &t), TVM_OK);
    char out[1024];
    tvm_format_term(env, t, out, sizeof out);
    cr_assert_str_eq(out, "[{stk,inner,1,[{file,<<\"stk.tasm\">>},{line,13}]},"
                          "{stk,middle,1,[{file,<<\"stk.tasm\">>},{line,8}]},"
                          "{stk,outer,1,[{file,<<\"stk.tasm\">>},{line,4}]}]");
    cr_assert_eq(tvm_get_stacktrace(env, NULL), TVM_ERR_BADARG);
    cr_assert_eq(tvm_get_stacktrace(NULL, &t), TVM_ERR_BADARG);
    /* Cleared with the exception. */
    tvm_clear_exception(env);
    cr_assert_eq(tvm_get_stacktrace(env, &t), TVM_ERR_NOTFOUND);
}

/* ---- tvm_config ---- */

static const char *const out_src =
    "module o\n"
    "export hello/1\n"
    "function hello/1 regs 3\n"
    "    loadk r1, \"hello ~w~n\"\n    loadk r2, []\n    cons r2, r0, r2\n"
    "    callx r1, r1, io:format/2\n    ret r1\nend\n";

Test(api, config_output_takes_io_format)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    tvm_vm *v = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .output = f });
    tvm_env *e = tvm_env_new(v);
    load_ok(v, "o.tasm", out_src);
    tvm_term a, r;
    /* From a call context and from a process alike. */
    cr_assert_eq(tvm_make_int(e, 1, &a), TVM_OK);
    cr_assert_eq(tvm_call(e, "o", "hello", 1, &a, &r), TVM_OK);
    tvm_pid pid;
    cr_assert_eq(tvm_make_int(e, 2, &a), TVM_OK);
    cr_assert_eq(tvm_spawn(e, "o", "hello", 1, &a, &pid), TVM_OK);
    cr_assert_eq(tvm_join(e, pid, &r), TVM_OK);
    tvm_env_free(e);
    tvm_destroy(v);
    fclose(f);
    cr_assert_str_eq(text, "hello 1\nhello 2\n");
    free(text);
}

/* fiber_stack_bytes: 16 KiB .. 2^50, else tvm_new refuses the config.
 * A size near SIZE_MAX wrapped when rounded up to pages, and the first
 * spawn crashed.  (A stack too large to map is TVM_ERR_LIMIT at the spawn:
 * spawn_without_room_for_a_stack_is_limit.) */
Test(api, config_fiber_stack_bytes_range)
{
    static const struct {
        size_t bytes;
        bool ok;
    } cases[] = {
        { 16383, false },          { 16384, true },       { (size_t)1 << 50, true },
        { ((size_t)1 << 50) + 1, false }, { SIZE_MAX, false }, { SIZE_MAX - 4095, false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tvm_vm *v = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 1,
                                           .fiber_stack_bytes = cases[i].bytes });
        cr_assert_eq(v != NULL, cases[i].ok, "%zu", cases[i].bytes);
        tvm_destroy(v);
    }
}

/* tvm_create names what tvm_new refuses (tvm_new said only NULL): each
 * field out of its range, the struct's size, a NULL out; a good config
 * makes a VM and clears err. */
Test(api, tvm_create_names_the_field_out_of_range)
{
    static const struct {
        tvm_config cfg;
        const char *why;
    } cases[] = {
        { { .size = sizeof(tvm_config), .stack_limit_words = 255 },
          "stack_limit_words 255 is outside 256..2^30 (0: the default)" },
        { { .size = sizeof(tvm_config), .heap_min_words = 15 },
          "heap_min_words 15 is outside 16..2^30 (0: the default)" },
        { { .size = sizeof(tvm_config), .schedulers = 1025 },
          "schedulers 1025 is outside 0..1024 (0: one per core)" },
        { { .size = sizeof(tvm_config), .schedulers = -1 },
          "schedulers -1 is outside 0..1024 (0: one per core)" },
        { { .size = sizeof(tvm_config), .fiber_stack_bytes = 16383 },
          "fiber_stack_bytes 16383 is outside 16384..2^50 (0: the default)" },
        { { .schedulers = 2 }, "size is 0; set it to the struct's sizeof" },
    };
    char want[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tvm_vm *v = (tvm_vm *)&v;
        tvm_error err;
        cr_assert_eq(tvm_create(&cases[i].cfg, &v, &err), TVM_ERR_BADARG, "case %zu", i);
        cr_assert_null(v);
        cr_assert_eq(err.status, TVM_ERR_BADARG);
        snprintf(want, sizeof want, "tvm_create: tvm_config: %s", cases[i].why);
        cr_assert_str_eq(err.message, want);
        cr_assert_null(tvm_new(&cases[i].cfg));
    }
    tvm_error err = { .status = TVM_ERR_IO, .message = "stale" };
    cr_assert_eq(tvm_create(NULL, NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_create: NULL out");
    tvm_vm *v = NULL;
    cr_assert_eq(tvm_create(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 1 }, &v,
                            &err), TVM_OK);
    cr_assert_not_null(v);
    cr_assert_eq(err.status, TVM_OK);
    cr_assert_str_eq(err.message, "");
    tvm_destroy(v);
    cr_assert_eq(tvm_create(NULL, &v, NULL), TVM_OK);   /* err may be NULL */
    tvm_destroy(v);
}

Test(api, config_heap_min_words)
{
    /* The default, a chosen size, and the bounds tvm_new refuses. */
    cr_assert_eq(vm_heap_size(env->p), 128);
    tvm_vm *v = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .heap_min_words = 1000 });
    cr_assert_not_null(v);
    tvm_env *e = tvm_env_new(v);
    cr_assert_eq(vm_heap_size(e->p), 1000);
    tvm_env_free(e);
    tvm_destroy(v);
    v = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .heap_min_words = 16 });
    cr_assert_not_null(v);
    e = tvm_env_new(v);
    cr_assert_eq(vm_heap_size(e->p), 16);
    tvm_env_free(e);
    tvm_destroy(v);
    cr_assert_null(tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .heap_min_words = 15 }));
    cr_assert_null(tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .heap_min_words = ((size_t)1 << 30) + 1 }));
}

/* ---- TVM_ERR_LIMIT ---- */

Test(api, every_documented_limit)
{
    tvm_term t;
    /* tvm_make_int: 62 bits. */
    cr_assert_eq(tvm_make_int(env, ((int64_t)1 << 61) - 1, &t), TVM_OK);
    cr_assert_eq(tvm_make_int(env, (int64_t)1 << 61, &t), TVM_ERR_LIMIT);
    cr_assert_eq(tvm_make_int(env, -((int64_t)1 << 61), &t), TVM_OK);
    cr_assert_eq(tvm_make_int(env, -((int64_t)1 << 61) - 1, &t), TVM_ERR_LIMIT);
    /* tvm_make_atom: 255 bytes. */
    char name[300];
    memset(name, 'a', sizeof name);
    name[255] = '\0';
    cr_assert_eq(tvm_make_atom(env, name, &t), TVM_OK);
    name[255] = 'a';
    name[256] = '\0';
    cr_assert_eq(tvm_make_atom(env, name, &t), TVM_ERR_LIMIT);
    /* tvm_make_binary: 2^40 bytes (checked before anything is read). */
    cr_assert_eq(tvm_make_binary(env, name, ((size_t)1 << 40) + 1, &t), TVM_ERR_LIMIT);
    /* tvm_make_tuple: 2^24 - 1 elements (checked before any is read). */
    tvm_term one;
    cr_assert_eq(tvm_make_int(env, 1, &one), TVM_OK);
    cr_assert_eq(tvm_make_tuple(env, 0x1000000, &one, &t), TVM_ERR_LIMIT);
    /* tvm_thread_register: 64 threads (a thread may take several). */
    tvm_pid ids[65];
    for (int i = 0; i < 64; i++)
        cr_assert_eq(tvm_thread_register(NULL, &ids[i]), TVM_OK, "registration %d", i);
    cr_assert_eq(tvm_thread_register(NULL, &ids[64]), TVM_ERR_LIMIT);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(tvm_thread_unregister(ids[i]), TVM_OK, "unregistration %d", i);
    cr_assert_eq(tvm_thread_register(NULL, &ids[0]), TVM_OK, "a slot freed is taken again");
    cr_assert_eq(tvm_thread_unregister(ids[0]), TVM_OK);
}

/* tvm_spawn: no more processes fit when no fiber stack can be mapped. */
Test(api, spawn_without_room_for_a_stack_is_limit)
{
    tvm_vm *v = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .fiber_stack_bytes = (size_t)1 << 50 });
    cr_assert_not_null(v);
    tvm_env *e = tvm_env_new(v);
    load_ok(v, "o.tasm", out_src);
    tvm_term a;
    tvm_pid pid = 77;
    cr_assert_eq(tvm_make_int(e, 1, &a), TVM_OK);
    cr_assert_eq(tvm_spawn(e, "o", "hello", 1, &a, &pid), TVM_ERR_LIMIT);
    cr_assert_eq(pid, 0);
    tvm_env_free(e);
    tvm_destroy(v);
}

/* ---- terms through the API ---- */

Test(api, terms_built_and_taken_apart)
{
    tvm_term i1, i2, a, s, nil, list, cons, tup, el;
    cr_assert_eq(tvm_make_int(env, 1, &i1), TVM_OK);
    cr_assert_eq(tvm_make_int(env, 2, &i2), TVM_OK);
    cr_assert_eq(tvm_make_atom(env, "x", &a), TVM_OK);
    cr_assert_eq(tvm_make_string(env, "h\"i", &s), TVM_OK);
    nil = tvm_nil(env);
    tvm_term elems[3] = { i1, a, s };
    cr_assert_eq(tvm_make_list(env, 3, elems, &list), TVM_OK);
    cr_assert_eq(tvm_make_cons(env, i2, list, &cons), TVM_OK);
    tvm_term parts[3] = { cons, nil, i1 };
    cr_assert_eq(tvm_make_tuple(env, 3, parts, &tup), TVM_OK);
    char out[256];
    tvm_format_term(env, tup, out, sizeof out);
    cr_assert_str_eq(out, "{[2,1,x,<<\"h\\\"i\">>],[],1}");
    /* Taken apart again. */
    int n = -1;
    cr_assert_eq(tvm_tuple_size(env, tup, &n), TVM_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(tvm_tuple_get(env, tup, 1, &el), TVM_OK);
    cr_assert_eq(tvm_type_of(env, el), TVM_T_NIL);
    cr_assert(tvm_equal(env, el, nil));
    cr_assert_eq(tvm_tuple_get(env, tup, 0, &el), TVM_OK);
    cr_assert(tvm_equal(env, el, cons));
    cr_assert_not(tvm_equal(env, el, list));
    cr_assert_eq(tvm_tuple_get(env, tup, 3, &el), TVM_ERR_BADARG);
    cr_assert_eq(tvm_tuple_get(env, tup, -1, &el), TVM_ERR_BADARG);
    cr_assert_eq(tvm_tuple_get(env, list, 0, &el), TVM_ERR_TYPE);
    cr_assert_eq(tvm_tuple_size(env, a, &n), TVM_ERR_TYPE);
    const void *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(tvm_get_binary(env, s, &bytes, &len), TVM_OK);
    cr_assert_eq(len, 3);
    cr_assert_eq(memcmp(bytes, "h\"i", 3), 0);
    cr_assert_eq(tvm_get_binary(env, a, &bytes, &len), TVM_ERR_TYPE);
    /* Equal by structure, not by handle. */
    tvm_term again;
    tvm_error err;
    cr_assert_eq(tvm_parse_term(env, "{[2, 1, x, \"h\\\"i\"], [], 1}", &again, &err), TVM_OK,
                 "%s", err.message);
    cr_assert(tvm_equal(env, tup, again));
    cr_assert_not(tvm_equal(env, tup, i1));
    /* Pids: made, read back, and refused for other types. */
    tvm_term pt;
    tvm_pid pid = 0;
    cr_assert_eq(tvm_make_pid(env, 42, &pt), TVM_OK);
    cr_assert_eq(tvm_get_pid(env, pt, &pid), TVM_OK);
    cr_assert_eq(pid, 42);
    cr_assert_eq(tvm_get_pid(env, a, &pid), TVM_ERR_TYPE);
    cr_assert_eq(tvm_make_list(env, -1, elems, &list), TVM_ERR_BADARG);
    cr_assert_eq(tvm_make_string(env, NULL, &s), TVM_ERR_BADARG);
}

Test(api, trace_flags_by_name)
{
    unsigned f = 99;
    tvm_error err;
    cr_assert_eq(tvm_trace_flags_parse("call,arity,timestamp,procs,return_to,silent,running,"
                                       "send,receive,set_on_spawn,set_on_first_spawn", &f, &err),
                 TVM_OK);
    cr_assert_eq(f, TVM_TRACE_CALL | TVM_TRACE_ARITY | TVM_TRACE_TIMESTAMP | TVM_TRACE_PROCS |
                        TVM_TRACE_RETURN_TO | TVM_TRACE_SILENT | TVM_TRACE_RUNNING |
                        TVM_TRACE_SEND | TVM_TRACE_RECEIVE | TVM_TRACE_SET_ON_SPAWN |
                        TVM_TRACE_SET_ON_FIRST_SPAWN);
    cr_assert_str_eq(err.message, "");
    cr_assert_eq(tvm_trace_flags_parse("procs", &f, NULL), TVM_OK);
    cr_assert_eq(f, TVM_TRACE_PROCS);
    cr_assert_eq(tvm_trace_flags_parse("call,bogus", &f, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "unknown flag 'bogus' (expected a comma-separated list of call, "
                                  "arity, timestamp, procs, return_to, silent, running, send, "
                                  "receive, set_on_spawn, set_on_first_spawn, garbage_collection, "
                                  "set_on_link, set_on_first_link, exiting, monotonic_timestamp, "
                                  "strict_monotonic_timestamp or all)");
    cr_assert_eq(err.status, TVM_ERR_BADARG);
    cr_assert_eq(tvm_trace_flags_parse("", &f, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "unknown flag '' (expected a comma-separated list of call, "
                                  "arity, timestamp, procs, return_to, silent, running, send, "
                                  "receive, set_on_spawn, set_on_first_spawn, garbage_collection, "
                                  "set_on_link, set_on_first_link, exiting, monotonic_timestamp, "
                                  "strict_monotonic_timestamp or all)");
}
