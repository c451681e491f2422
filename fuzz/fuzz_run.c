/*
 * fuzz/fuzz_run.c - runs whatever the verifier accepts.  The input is a
 * .tasm file; when it loads, every exported function (the first eight)
 * is spawned as a process, with arguments from a fixed list, on a fresh VM
 * with one scheduler and tight limits: max_heap_words, max_processes,
 * max_message_words, a small VM stack.  A trace pipeline runs meanwhile
 * (its format and whether every call is traced come from the input's
 * first bytes), so the encoders and sinks see what the program makes;
 * where bit 4 of the second byte is set, raw CTF into a fresh directory
 * in /dev/shm instead (the rings' ranges and their cut table under the
 * program's traffic), removed after.
 * After RUN_BUDGET_MS, or once no process is left, the VM is destroyed:
 * the schedulers stop between two processes (every process yields within
 * a time slice) and whatever is alive is freed.
 *
 * Findings: a crash, a sanitizer report, a leak, or a hang past
 * libFuzzer's -timeout (a scheduler that never comes back: a process
 * that cannot be preempted, a walk that never ends).  A process that dies
 * of a limit is the VM keeping its promise, not a finding.
 */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fuzz/fuzz_util.h"
#include "loader/loader.h"
#include "vm/module.h"

#define RUN_BUDGET_MS 30
#define MAX_ENTRIES 8

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The i-th argument value, for any function. */
static tvm_term arg(tvm_env *env, unsigned i)
{
    static const char *const texts[] = {
        "0", "ok", "[1, 2, 3]", "{a, \"b\", [c]}", "-1", "[]", "\"text\"", "3",
        "{}", "[{x, 1} | y]", "infinity", "100",
    };
    tvm_term t;
    if (tvm_parse_term(env, texts[i % (sizeof texts / sizeof texts[0])], &t, NULL) != TVM_OK)
        t = tvm_nil(env);
    return t;
}

static void on_event(const tvm_trace_event *ev, void *data)
{
    (void)ev;
    (void)data;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tvm_config cfg = {
        .size = sizeof(tvm_config),
        .schedulers = 1,
        .quiet_crashes = true,
        .output = fuzz_devnull(),
        .stack_limit_words = 1 << 14,
        .fiber_stack_bytes = 128 * 1024,
        .fiber_slabs = size > 0 && (data[0] & 1),
        .max_heap_words = 1 << 16,
        .max_processes = 32,
        .max_message_words = 1 << 14,
    };
    tvm_vm *vm = tvm_new(&cfg);
    StrBuf diag;
    sb_init(&diag);
    /* Built once to list the exports (not installed), then loaded. */
    Module *m = ld_build(vm, "fuzz.tasm", (const char *)data, size, &diag);
    sb_free(&diag);
    if (!m) {
        tvm_destroy(vm);
        fuzz_atoms_trim();
        return 0;
    }
    char names[MAX_ENTRIES][256];
    int arity[MAX_ENTRIES], n = 0;
    for (uint32_t i = 0; i < m->nfuncs && n < MAX_ENTRIES; i++) {
        const FuncInfo *fi = m->funcs[i];
        if (!fi->export)
            continue;
        snprintf(names[n], sizeof names[n], "%s", vm_atom_name(fi->name, NULL));
        arity[n++] = fi->arity;
    }
    char mod[256];
    snprintf(mod, sizeof mod, "%s", vm_atom_name(m->name, NULL));
    ld_module_free(m);
    tvm_error err;
    if (tvm_load_string(vm, "fuzz.tasm", (const char *)data, size, &err) != TVM_OK) {
        /* A module of natives' name (erlang, lists, ...) is refused here. */
        tvm_destroy(vm);
        fuzz_atoms_trim();
        return 0;
    }
    uint8_t mode = size > 1 ? data[1] : 0;
    static const tvm_trace_format formats[] = { TVM_TRACE_TEXT, TVM_TRACE_JSONL,
                                                TVM_TRACE_CHROME, TVM_TRACE_CALLBACK };
    tvm_trace_options topts = {
        .size = sizeof(tvm_trace_options),
        .format = formats[mode & 3],
        .file = fuzz_devnull(),
        .ring_bytes = 1 << 16,
        .policy = (mode & 4) ? TVM_TRACE_LOSSLESS : TVM_TRACE_DROP,
        .callback = on_event,
    };
    char raw_dir[] = "/dev/shm/fuzz_run_XXXXXX";
    bool raw = (mode & 16) && mkdtemp(raw_dir);
    if (raw) {
        topts.format = TVM_TRACE_CTF_RAW;
        topts.file = NULL;
        topts.path = raw_dir;
    }
    bool tracing = tvm_trace_start(vm, &topts, &err) == TVM_OK;
    if (tracing) {
        tvm_trace_flags_all(vm, TVM_TRACE_NEW,
                            TVM_TRACE_CALL | TVM_TRACE_PROCS | TVM_TRACE_RUNNING |
                                TVM_TRACE_SEND | TVM_TRACE_RECEIVE | TVM_TRACE_RETURN_TO,
                            true);
        if (mode & 8)
            tvm_trace_pattern_ms(vm, "_:_/_", "[{'_', [], [{return_trace}]}]", TVM_TP_TRUE,
                                 TVM_TP_LOCAL, 0, NULL, &err);
    }
    tvm_env *env = tvm_env_new(vm);
    for (int i = 0; i < n; i++) {
        tvm_term argv[VM_MAX_ARITY];
        for (int k = 0; k < arity[i]; k++)
            argv[k] = arg(env, (unsigned)(i + k));
        tvm_pid pid;
        tvm_spawn(env, mod, names[i], arity[i], argv, &pid);
    }
    for (uint64_t end = now_ms() + RUN_BUDGET_MS; now_ms() < end;) {
        if (tvm_processes(vm, NULL, 0) == 0)
            break;
        struct timespec ts = { 0, 500000 };
        nanosleep(&ts, NULL);
    }
    tvm_env_free(env);
    if (tracing)
        tvm_trace_stop(vm);
    tvm_destroy(vm);
    if (raw) {
        fuzz_dir_empty(raw_dir);
        rmdir(raw_dir);
    }
    fuzz_atoms_trim();
    return 0;
}
