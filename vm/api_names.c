/*
 * vm/api_names.c - registered names from C (tracevm.h, "Processes"):
 * tvm_whereis and tvm_process_name, the embedder's whereis/1 and
 * process_info(Pid, registered_name).
 *
 * Both read the registry under its read lock (vm/registry.c), the lock
 * register/2, unregister/1 and a process's exit write under: an answer is
 * the table at one moment between those changes, a snapshot that may be
 * out of date as soon as it is returned (as whereis/1's is).  Neither
 * creates an atom: a name that is no atom yet is held by no process.
 */
#include "include/tracevm.h"

#include <string.h>

#include "vm/api_error.h"
#include "vm/atom.h"
#include "vm/print.h"
#include "vm/registry.h"
#include "vm/sched.h"

tvm_status tvm_whereis(tvm_vm *vm, const char *name, tvm_pid *pid, tvm_error *err)
{
    vm_api_clear(err);
    if (!vm || !name || !pid)
        return vm_api_fail(err, TVM_ERR_BADARG, "tvm_whereis: NULL %s",
                    !vm ? "vm" : !name ? "name" : "pid");
    size_t len = strlen(name);
    if (len > VM_ATOM_MAX_LEN)
        return vm_api_fail(err, TVM_ERR_BADARG,
                    "tvm_whereis: a name of %zu bytes (an atom has at most %d)", len,
                    VM_ATOM_MAX_LEN);
    Atom a;
    uint64_t v;
    if (vm_atom_lookup(name, len, &a) && vm_registry_whereis(vm, a, &v)) {
        *pid = v;
        return TVM_OK;
    }
    /* The name as an atom prints, so that any bytes make one line. */
    StrBuf sb;
    sb_init(&sb);
    vm_print_atom_text(&sb, name, len);
    vm_api_fail(err, TVM_ERR_NOTFOUND, "tvm_whereis: no process is registered as %s", sb.s);
    sb_free(&sb);
    return TVM_ERR_NOTFOUND;
}

/* pid's name, when it is alive and has one (NOTFOUND saying which). */
static tvm_status name_of(tvm_vm *vm, tvm_pid pid, Atom *name, tvm_error *err)
{
    SchedSystem *sys = vm_sched_of(vm);
    /* The reference keeps p's fields readable after a concurrent exit. */
    Process *p = sys ? vm_proc_get_live(sys, pid) : NULL;
    if (!p)
        return vm_api_fail(err, TVM_ERR_NOTFOUND,
                           "tvm_process_name: no process <0.%llu.0> is alive",
                           (unsigned long long)pid);
    bool named = vm_registry_name_of(p, name);
    vm_proc_put(sys, p);
    if (!named)
        return vm_api_fail(err, TVM_ERR_NOTFOUND,
                           "tvm_process_name: <0.%llu.0> has no registered name",
                           (unsigned long long)pid);
    return TVM_OK;
}

tvm_status tvm_process_name(tvm_vm *vm, tvm_pid pid, char *buf, size_t size, tvm_error *err)
{
    vm_api_clear(err);
    if (!vm)
        return vm_api_fail(err, TVM_ERR_BADARG, "tvm_process_name: NULL vm");
    if (!buf && size)
        return vm_api_fail(err, TVM_ERR_BADARG, "tvm_process_name: NULL buf with size %zu", size);
    if (size)
        buf[0] = '\0';
    Atom a;
    tvm_status st = name_of(vm, pid, &a, err);
    if (st != TVM_OK)
        return st;
    size_t len;
    const char *s = vm_atom_name(a, &len);
    /* Never cut: a part of a name could be another process's name. */
    if (len >= size)
        return vm_api_fail(err, TVM_ERR_LIMIT,
                    "tvm_process_name: the name of <0.%llu.0> needs %zu bytes with its NUL, "
                    "size is %zu",
                    (unsigned long long)pid, len + 1, size);
    memcpy(buf, s, len + 1);
    return TVM_OK;
}
