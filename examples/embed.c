/*
 * examples/embed.c - embedding tracevm in a C program.
 *
 * Registers two natives, loads examples/native_callback.tasm and calls
 * native_callback:main/0:
 *   host:log/1    prints its argument, prefixed with "host: "
 *   host:map/2    host:map(Fun, List) calls back into VM code (a nested
 *                 activation) for every element and returns the results;
 *                 an exception raised by Fun propagates to the caller.
 *
 * Usage: embed [FILE.tasm]
 */
#include <stdio.h>
#include <stdlib.h>

#include <tracevm.h>

static tvm_status host_log(tvm_env *env, int argc, const tvm_term *argv,
                           tvm_term *result, void *data)
{
    (void)argc;
    char buf[512];
    tvm_format_term(env, argv[0], buf, sizeof buf);
    fprintf((FILE *)data, "host: %s\n", buf);
    return tvm_make_atom(env, "ok", result);
}

static tvm_status host_map(tvm_env *env, int argc, const tvm_term *argv,
                           tvm_term *result, void *data)
{
    (void)argc;
    (void)data;
    tvm_term fun = argv[0], list = argv[1], head, tail;
    tvm_term out[256];
    int n = 0;
    while (tvm_list_cell(env, list, &head, &tail) == TVM_OK) {
        if (n == 256)
            return tvm_raise_badarg(env);
        /* erlang:apply(Fun, [X]) runs VM code on this process. */
        tvm_term args[2], one;
        tvm_status st = tvm_make_list(env, 1, &head, &one);
        if (st != TVM_OK)
            return st;
        args[0] = fun;
        args[1] = one;
        st = tvm_call(env, "erlang", "apply", 2, args, &out[n]);
        if (st != TVM_OK)
            return st; /* the exception propagates to the VM caller */
        n++;
        list = tail;
    }
    if (tvm_type_of(env, list) != TVM_T_NIL)
        return tvm_raise_badarg(env);
    return tvm_make_list(env, n, out, result);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "examples/native_callback.tasm";
    tvm_vm *vm = tvm_new(NULL);
    tvm_error err;
    if (tvm_register_native(vm, "host", "log", 1, host_log, stdout, &err) != TVM_OK ||
        tvm_register_native(vm, "host", "map", 2, host_map, NULL, &err) != TVM_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    if (tvm_load_file(vm, path, &err) != TVM_OK) {
        fputs(err.message, stderr);
        return 1;
    }
    tvm_env *env = tvm_env_new(vm);
    tvm_term result;
    tvm_status st = tvm_call(env, "native_callback", "main", 0, NULL, &result);
    char buf[4096];
    if (st == TVM_OK) {
        tvm_format_term(env, result, buf, sizeof buf);
        printf("result: %s\n", buf);
    } else {
        tvm_format_exception(env, buf, sizeof buf);
        fprintf(stderr, "uncaught %s", buf);
    }
    tvm_env_free(env);
    tvm_destroy(vm);
    return st == TVM_OK ? 0 : 1;
}
