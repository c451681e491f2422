/*
 * tests/outside/host.c - an embedding program built outside the tree with
 * nothing but `pkg-config --cflags --libs tracevm` (tests/outside/run.sh,
 * run by tests/sh/install.sh on a scratch install and by CI on the
 * installed Debian packages).  It loads a module from a string, calls it,
 * runs it as a process whose calls the callback sink counts, and reads an
 * exception.
 */
#include <stdio.h>
#include <string.h>
#include <tracevm.h>

static const char fib[] =
    "module fib\n"
    "export fib/1\n"
    "function fib/1 regs 3\n"
    "    jlti r0, 2, small\n"
    "    addi r1, r0, -1\n"
    "    call r1, r1, fib/1\n"
    "    addi r2, r0, -2\n"
    "    call r2, r2, fib/1\n"
    "    add  r0, r1, r2\n"
    "small:\n"
    "    ret  r0\n"
    "end\n";

static void count_calls(const tvm_trace_event *ev, void *data)
{
    if (strcmp(ev->kind, "call") == 0)
        ++*(int *)data;
}

int main(void)
{
    if (strcmp(tvm_version(NULL, NULL, NULL), TVM_VERSION_STRING) != 0) {
        fprintf(stderr, "library %s, header %s\n", tvm_version(NULL, NULL, NULL),
                TVM_VERSION_STRING);
        return 1;
    }
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (!vm || tvm_load_string(vm, "fib.tasm", fib, strlen(fib), &err) != TVM_OK) {
        fprintf(stderr, "%s", vm ? err.message : "tvm_new failed\n");
        return 1;
    }
    tvm_env *env = tvm_env_new(vm);
    tvm_term arg, result;
    char buf[256];
    tvm_make_int(env, 20, &arg);
    if (tvm_call(env, "fib", "fib", 1, &arg, &result) != TVM_OK)
        return 1;
    tvm_format_term(env, result, buf, sizeof buf);
    printf("fib(20) = %s\n", buf);

    /* fib(3) as a process, its calls counted by the callback sink */
    int calls = 0;
    tvm_trace_options topts = { .size = sizeof(tvm_trace_options),
                                .format = TVM_TRACE_CALLBACK, .callback = count_calls,
                                .callback_data = &calls };
    tvm_pid pid;
    tvm_make_int(env, 3, &arg);
    if (tvm_trace_pattern(vm, "fib:fib/1", TVM_TP_TRUE, TVM_TP_LOCAL, NULL, &err) != TVM_OK ||
        tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true) != TVM_OK ||
        tvm_trace_start(vm, &topts, &err) != TVM_OK ||
        tvm_spawn(env, "fib", "fib", 1, &arg, &pid) != TVM_OK ||
        tvm_join(env, pid, &result) != TVM_OK || tvm_trace_stop(vm) != TVM_OK) {
        fprintf(stderr, "tracing: %s\n", err.message);
        return 1;
    }
    tvm_format_term(env, result, buf, sizeof buf);
    printf("fib(3) = %s in a process, %d traced calls\n", buf, calls);

    tvm_make_atom(env, "foo", &arg);
    if (tvm_call(env, "fib", "fib", 1, &arg, &result) == TVM_EXCEPTION) {
        tvm_format_exception(env, buf, sizeof buf);
        fputs(buf, stdout);
    }
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}
