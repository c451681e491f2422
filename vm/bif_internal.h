/*
 * vm/bif_internal.h - what the files of the VM's built-in natives share
 * (vm/bif.c, vm/bif_proc.c, vm/dict.c, vm/time.c, vm/seqtrace.c,
 * vm/sysinfo.c, vm/sysmon.c): the shape of a native's definition, its
 * argument and result handling, and the list walks that several of them
 * make.  Private to vm/.
 *
 * A native's arguments are term handles of the calling process (or call
 * context): ARG(i) reads one, RETURN(t) hands t back through a new
 * handle.  An exception is raised by setting it on the process and
 * returning TVM_EXCEPTION, which the interpreter turns into a throw at
 * the call.
 */
#ifndef VM_BIF_INTERNAL_H
#define VM_BIF_INTERNAL_H

#include <stdbool.h>

#include "vm/atom.h"
#include "vm/process.h"

#define NATIVE_FN(name) \
    static tvm_status name(tvm_env *env, int argc, const tvm_term *argv, \
                           tvm_term *result, void *data)
#define SETUP() \
    Process *p = env->p; (void)argc; (void)argv; (void)data; (void)result
#define ARG(i) vm_root_get(p, argv[i])
#define RETURN(t) do { *result = vm_root_push(p, (t)); return TVM_OK; } while (0)
#define BADARG() return vm_bif_error(p, make_atom(ATOM_BADARG))

/* Raises error:reason in p; returns what the native returns then. */
static inline tvm_status vm_bif_error(Process *p, Term reason)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), reason, NULL);
    return TVM_EXCEPTION;
}

/* The length of a proper list of at most max elements, or -1 (an
 * improper list, or one longer than max: the walk stops past max). */
long vm_bif_list_length_max(Term l, long max);

/* The length of a proper list, -1 for an improper one; a walk past
 * VM_BIF_LEND_WORK cells lends p's scheduler queue (*lent: pass it to
 * vm_lend_done when the work on the list is over; false after -1). */
long vm_bif_list_length_lend(Process *p, Term l, bool *lent);

/* A new array of n + 1 slots holding the first n elements of proper list
 * l (the last slot is free for the caller); the caller frees it. */
Term *vm_bif_list_to_array(Term l, long n);

#endif
