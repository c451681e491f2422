/*
 * tests/progs/stacks_gdb.c - helper of tests/sh/stacks_gdb.sh: a process
 * suspended in a native (VM -> native -> receive), captured by our
 * context-mode walker; prints the walker's native frames by name
 * ("ours NAME", innermost first) and leaves the fiber's saved registers
 * in g_pc / g_sp / g_fp for gdb, which stops in stacks_gdb_stop(),
 * loads them and runs `bt` on the suspended fiber.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "include/tracevm.h"
#include "stacks/st.h"
#include "stacks/st_sym.h"
#include "vm/fiber.h"
#include "vm/sched.h"

unsigned long g_pc, g_sp, g_fp;
static _Atomic int reached;

tvm_status gdb_hold(tvm_env *env, int argc, const tvm_term *argv, tvm_term *res, void *d);
__attribute__((noinline)) tvm_status gdb_hold(tvm_env *env, int argc, const tvm_term *argv,
                                              tvm_term *res, void *d)
{
    (void)argc, (void)argv, (void)d;
    atomic_store(&reached, 1);
    tvm_status st = tvm_receive(env, -1, res);
    __asm__ volatile("" ::: "memory");   /* no tail call: this frame stays */
    return st;
}

void stacks_gdb_stop(void);
__attribute__((noinline)) void stacks_gdb_stop(void)
{
    __asm__ volatile("" ::: "memory");
}

static const char *src = "module g\nexport main/0\n"
                         "function main/0 regs 1\n    callx r0, r0, host:hold/0\n    ret r0\nend\n";

int main(void)
{
    tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 1 };
    tvm_vm *vm = tvm_new(&cfg);
    tvm_error err;
    if (tvm_register_native(vm, "host", "hold", 0, gdb_hold, NULL, &err) != TVM_OK ||
        tvm_load_string(vm, "g.tasm", src, strlen(src), &err) != TVM_OK) {
        fprintf(stderr, "setup: %s\n", err.message);
        return 1;
    }
    tvm_env *env = tvm_env_new(vm);
    tvm_pid pid;
    tvm_spawn(env, "g", "main", 0, NULL, &pid);
    while (!atomic_load(&reached))
        ;
    SchedSystem *sys = vm_sched_of(vm);
    Process *p = vm_proc_get(sys, pid);
    StStack *s = malloc(sizeof *s);
    do {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
        st_capture(p, s, NULL);
    } while (s->result != ST_R_OK || s->mode != ST_MODE_CONTEXT);
    for (uint32_t i = 0; i < s->nnative; i++) {
        StSym sym;
        uintptr_t ip = s->native[i].ip - (i > 0);
        printf("ours %s\n", st_sym_lookup(ip, &sym) ? sym.name : "??");
    }
    fflush(stdout);
    /* The fiber stays suspended while gdb looks: nobody sends it anything,
     * and the interlock holds it anyway. */
    vm_atomic_fetch_add_full(&p->il.traced, 1);
    const uintptr_t *saved = p->fiber->sp;
    g_pc = saved[FIBER_SAVED_PC];
    g_fp = saved[FIBER_SAVED_FP];
    g_sp = (unsigned long)(saved + FIBER_SAVED_WORDS);
    stacks_gdb_stop();
    vm_atomic_store_release(&p->il.traced, 0);
    tvm_term m, r;
    tvm_make_atom(env, "go", &m);
    tvm_send(env, pid, m);
    tvm_join(env, pid, &r);
    vm_proc_put(sys, p);
    free(s);
    tvm_env_free(env);
    tvm_destroy(vm);
    return 0;
}
