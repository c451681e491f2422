/*
 * tests/unit/vm/test_names.c - registered names from C: tvm_whereis and
 * tvm_process_name (include/tracevm.h, "Registered names"), with the
 * exact statuses and messages, and a stress case reading names while
 * processes on two schedulers register, unregister and exit.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/helpers.h"
#include "vm/atom.h"
#include "vm/atomics.h"

TVM_FIXTURE(names, (&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 2,
                                   .quiet_crashes = true }));

/* hold(Name): registers itself as Name and returns the first message it
 * receives.  churn(Name, N): N times register(Name, self()) and
 * unregister(Name), then registers once more and returns N, so that its
 * exit takes the name. */
static const char *const names_src =
    "module nm\n"
    "export hold/1, churn/2, waiter/0\n"
    TASM_WAITER
    "function hold/1 regs 4\n"
    "    move r1, r0\n    self r2\n    callx r1, r1, erlang:register/2\n"
    "    call r1, r1, waiter/0\n    ret r1\nend\n"
    "function churn/2 regs 5\n"
    "    move r2, r1\n"
    "loop:\n"
    "    jeqi r2, 0, done\n"
    "    move r3, r0\n    self r4\n    callx r3, r3, erlang:register/2\n"
    "    move r3, r0\n    callx r3, r3, erlang:unregister/1\n"
    "    addi r2, r2, -1\n    jump loop\n"
    "done:\n"
    "    move r3, r0\n    self r4\n    callx r3, r3, erlang:register/2\n"
    "    ret r1\nend\n";

/* Spawns nm:hold(Name) and waits until it holds Name (a hang guard of a
 * minute, not a measurement). */
static tvm_pid hold(const char *name)
{
    tvm_term a;
    tvm_pid pid, got = 0;
    cr_assert_eq(tvm_parse_term(env, name, &a, NULL), TVM_OK);
    cr_assert_eq(tvm_spawn(env, "nm", "hold", 1, &a, &pid), TVM_OK);
    char text[300];
    cr_assert_eq(tvm_get_atom(env, a, text, sizeof text), TVM_OK);
    for (int i = 0; i < 60000 && tvm_whereis(vm, text, &got, NULL) != TVM_OK; i++)
        usleep(1000);
    cr_assert_eq(got, pid, "%s never registered", name);
    return pid;
}

/* Ends a nm:hold process: a message, then its join. */
static void release(tvm_pid pid)
{
    tvm_term m, r;
    cr_assert_eq(tvm_make_atom(env, "bye", &m), TVM_OK);
    cr_assert_eq(tvm_send(env, pid, m), TVM_OK);
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
}

Test(names, a_registered_process_is_found_both_ways)
{
    load_ok(vm, "nm.tasm", names_src);
    tvm_pid srv = hold("srv"), quoted = hold("'my server'");
    tvm_pid pid = 0;
    tvm_error err;
    char buf[256];
    cr_assert_eq(tvm_whereis(vm, "srv", &pid, &err), TVM_OK);
    cr_assert_eq(pid, srv);
    cr_assert_str_eq(err.message, "");
    cr_assert_eq(tvm_whereis(vm, "my server", &pid, &err), TVM_OK);
    cr_assert_eq(pid, quoted);
    cr_assert_eq(tvm_process_name(vm, srv, buf, sizeof buf, &err), TVM_OK);
    cr_assert_str_eq(buf, "srv");
    cr_assert_eq(tvm_process_name(vm, quoted, buf, sizeof buf, &err), TVM_OK);
    cr_assert_str_eq(buf, "my server");
    /* Exactly the name and its NUL fit. */
    cr_assert_eq(tvm_process_name(vm, srv, buf, 4, &err), TVM_OK);
    cr_assert_str_eq(buf, "srv");

    release(srv);
    release(quoted);
    /* A name goes with its process. */
    pid = 0;
    cr_assert_eq(tvm_whereis(vm, "srv", &pid, &err), TVM_ERR_NOTFOUND);
    cr_assert_eq(pid, 0);
    cr_assert_eq(err.status, TVM_ERR_NOTFOUND);
    cr_assert_str_eq(err.message, "tvm_whereis: no process is registered as srv");
    cr_assert_eq(tvm_whereis(vm, "my server", &pid, &err), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(err.message, "tvm_whereis: no process is registered as 'my server'");
    strcpy(buf, "x");
    cr_assert_eq(tvm_process_name(vm, srv, buf, sizeof buf, &err), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(buf, "");
    char want[128];
    snprintf(want, sizeof want, "tvm_process_name: no process <0.%llu.0> is alive",
             (unsigned long long)srv);
    cr_assert_str_eq(err.message, want);
}

Test(names, an_unnamed_process_and_unknown_names)
{
    load_ok(vm, "nm.tasm", names_src);
    tvm_pid pid;
    cr_assert_eq(tvm_spawn(env, "nm", "waiter", 0, NULL, &pid), TVM_OK);
    tvm_error err;
    char buf[256] = "x", want[128];
    cr_assert_eq(tvm_process_name(vm, pid, buf, sizeof buf, &err), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(buf, "");
    snprintf(want, sizeof want, "tvm_process_name: <0.%llu.0> has no registered name",
             (unsigned long long)pid);
    cr_assert_str_eq(err.message, want);
    /* A name that is no atom yet: not found, and no atom is made. */
    size_t atoms = vm_atom_count();
    tvm_pid got = 0;
    cr_assert_eq(tvm_whereis(vm, "never_an_atom_9f3e", &got, &err), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(err.message, "tvm_whereis: no process is registered as never_an_atom_9f3e");
    cr_assert_eq(vm_atom_count(), atoms);
    /* undefined is never a name; an unprintable name prints escaped. */
    cr_assert_eq(tvm_whereis(vm, "undefined", &got, &err), TVM_ERR_NOTFOUND);
    cr_assert_eq(tvm_whereis(vm, "a\nb", &got, &err), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(err.message, "tvm_whereis: no process is registered as 'a\\nb'");
    cr_assert_eq(got, 0);
    /* A pid never used, and pid 0 (a call context's self is undefined). */
    cr_assert_eq(tvm_process_name(vm, 1000000, buf, sizeof buf, &err), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(err.message, "tvm_process_name: no process <0.1000000.0> is alive");
    cr_assert_eq(tvm_process_name(vm, 0, buf, sizeof buf, &err), TVM_ERR_NOTFOUND);
    cr_assert_str_eq(err.message, "tvm_process_name: no process <0.0.0> is alive");
    release(pid);
}

Test(names, bad_arguments_are_statuses)
{
    load_ok(vm, "nm.tasm", names_src);
    tvm_pid srv = hold("srv"), pid = 0;
    tvm_error err;
    char buf[256], name[300];
    cr_assert_eq(tvm_whereis(NULL, "srv", &pid, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_whereis: NULL vm");
    cr_assert_eq(tvm_whereis(vm, NULL, &pid, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_whereis: NULL name");
    cr_assert_eq(tvm_whereis(vm, "srv", NULL, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_whereis: NULL pid");
    memset(name, 'a', 256);
    name[256] = '\0';
    cr_assert_eq(tvm_whereis(vm, name, &pid, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_whereis: a name of 256 bytes (an atom has at most 255)");
    cr_assert_eq(pid, 0);
    cr_assert_eq(tvm_whereis(vm, "srv", &pid, NULL), TVM_OK, "err may be NULL");

    cr_assert_eq(tvm_process_name(NULL, srv, buf, sizeof buf, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_process_name: NULL vm");
    cr_assert_eq(tvm_process_name(vm, srv, NULL, 8, &err), TVM_ERR_BADARG);
    cr_assert_str_eq(err.message, "tvm_process_name: NULL buf with size 8");
    /* Too small: nothing cut, the size needed named. */
    strcpy(buf, "x");
    cr_assert_eq(tvm_process_name(vm, srv, buf, 3, &err), TVM_ERR_LIMIT);
    cr_assert_str_eq(buf, "");
    char want[160];
    snprintf(want, sizeof want,
             "tvm_process_name: the name of <0.%llu.0> needs 4 bytes with its NUL, size is 3",
             (unsigned long long)srv);
    cr_assert_str_eq(err.message, want);
    cr_assert_eq(tvm_process_name(vm, srv, NULL, 0, &err), TVM_ERR_LIMIT);
    snprintf(want, sizeof want,
             "tvm_process_name: the name of <0.%llu.0> needs 4 bytes with its NUL, size is 0",
             (unsigned long long)srv);
    cr_assert_str_eq(err.message, want);
    cr_assert_eq(tvm_process_name(vm, srv, buf, sizeof buf, NULL), TVM_OK, "err may be NULL");
    cr_assert_str_eq(buf, "srv");
    release(srv);
}

/* ---- reads racing register, unregister and exit ---- */

enum { CHURNERS = 4 };

typedef struct Race {
    tvm_pid pids[CHURNERS];
    char names[CHURNERS][16];
    VmAtomic stop;             /* set by the main thread once all are joined */
} Race;

/* Every answer is the truth at some moment: process i holds name i or
 * nothing, and name i is held by process i or by nobody. */
static void *observe(void *arg)
{
    Race *r = arg;
    char buf[256];
    while (!vm_atomic_load_acquire(&r->stop)) {
        for (int i = 0; i < CHURNERS; i++) {
            tvm_error err;
            tvm_status st = tvm_process_name(vm, r->pids[i], buf, sizeof buf, &err);
            cr_assert(st == TVM_OK || st == TVM_ERR_NOTFOUND, "%s", err.message);
            if (st == TVM_OK)
                cr_assert_str_eq(buf, r->names[i]);
            tvm_pid pid = 0;
            st = tvm_whereis(vm, r->names[i], &pid, &err);
            cr_assert(st == TVM_OK || st == TVM_ERR_NOTFOUND, "%s", err.message);
            if (st == TVM_OK)
                cr_assert_eq(pid, r->pids[i]);
        }
    }
    return NULL;
}

Test(names, reads_race_register_unregister_and_exit)
{
    load_ok(vm, "nm.tasm", names_src);
    /* Enough rounds that the two schedulers and the two observers
     * interleave many times (ThreadSanitizer sees every pair of accesses
     * of the races it could find within the first few). */
    const int64_t rounds = test_full_scale() ? 20000 : 3000;
    static Race r;
    memset(&r, 0, sizeof r);
    tvm_term a[2];
    for (int i = 0; i < CHURNERS; i++) {
        snprintf(r.names[i], sizeof r.names[i], "churn_%d", i);
        cr_assert_eq(tvm_make_atom(env, r.names[i], &a[0]), TVM_OK);
        cr_assert_eq(tvm_make_int(env, rounds, &a[1]), TVM_OK);
        /* pids before the observers start: they read r.pids unlocked. */
        cr_assert_eq(tvm_spawn(env, "nm", "churn", 2, a, &r.pids[i]), TVM_OK);
    }
    pthread_t obs[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&obs[i], NULL, observe, &r), 0);
    for (int i = 0; i < CHURNERS; i++) {
        tvm_term res;
        int64_t n;
        cr_assert_eq(tvm_join(env, r.pids[i], &res), TVM_OK);
        cr_assert_eq(tvm_get_int(env, res, &n), TVM_OK);
        cr_assert_eq(n, rounds);
    }
    vm_atomic_store_release(&r.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(obs[i], NULL);
    /* Each ended holding its name: gone with it. */
    for (int i = 0; i < CHURNERS; i++) {
        tvm_pid pid;
        char buf[256];
        cr_assert_eq(tvm_whereis(vm, r.names[i], &pid, NULL), TVM_ERR_NOTFOUND);
        cr_assert_eq(tvm_process_name(vm, r.pids[i], buf, sizeof buf, NULL), TVM_ERR_NOTFOUND);
    }
}
