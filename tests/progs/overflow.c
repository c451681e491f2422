/*
 * tests/progs/overflow.c - helper of tests/sh/overflow.sh: a process
 * started by VM code (erlang:spawn/3, so it prints a crash report) calls a
 * native that recurses until its native stack overflows.  The process
 * dies with error:{system_limit, native_stack}; its crash report, with
 * the mixed stack of the fault, goes to stderr; the first process, which
 * monitored it, prints the 'DOWN' reason to stdout and goes on to a
 * second round (the scheduler keeps working).
 */
#include <stdio.h>
#include <string.h>

#include "include/tracevm.h"

static volatile int stop_recursion;

/* Recurses until the stack runs out: 512 bytes a level. */
int overflow_recurse(volatile char *prev, int depth);
__attribute__((noinline)) int overflow_recurse(volatile char *prev, int depth)
{
    volatile char buf[512];
    buf[0] = (char)depth;
    buf[511] = prev ? prev[0] : 0;
    if (stop_recursion)
        return buf[0];
    return overflow_recurse(buf, depth + 1) + buf[511];
}

static tvm_status nat_deep(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc;
    (void)argv;
    (void)data;
    return tvm_make_int(env, overflow_recurse(NULL, 0), result);
}

static const char src[] =
    "module ov\n"
    "export main/0, attacker/0\n"
    "function attacker/0 regs 1\n"
    "    loadi r0, 0\n"
    "    callx r0, r0, ovn:deep/1\n"
    "    ret r0\n"
    "end\n"
    /* down(): spawn attacker(), monitor it, its 'DOWN' reason */
    "function down/0 regs 4\n"
    "    loadk r0, ov\n"
    "    loadk r1, attacker\n"
    "    loadk r2, []\n"
    "    callx r0, r0, erlang:spawn/3\n"
    "    loadk r1, process\n"
    "    move r2, r0\n"
    "    callx r1, r1, erlang:monitor/2\n"
    "top:\n"
    "    recv r1, none\n"
    "    accept\n"
    "    getel r0, r1, 5\n"
    "    ret r0\n"
    "none:\n"
    "    loadk r2, infinity\n"
    "    wait r2, next\n"
    "next:\n"
    "    jump top\n"
    "end\n"
    "function main/0 regs 4\n"
    "    call r1, r1, down/0\n"
    "    call r2, r2, down/0\n"
    "    tuple r0, 2, r1\n"
    "    ret r0\n"
    "end\n";

int main(void)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1, .fiber_stack_bytes = 128 * 1024 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    tvm_error err;
    if (tvm_register_native(vm, "ovn", "deep", 1, nat_deep, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "ov", src, sizeof src - 1, &err) != TVM_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    tvm_pid pid;
    tvm_term r;
    if (tvm_spawn(env, "ov", "main", 0, NULL, &pid) != TVM_OK || tvm_join(env, pid, &r) != TVM_OK)
        return 3;
    char out[1000];
    tvm_format_term(env, r, out, sizeof out);
    printf("%s\n", out);
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}
