/*
 * vm/sysinfo.c - erlang:system_info/1: what a program may ask about the
 * VM it runs in (its schedulers, the machine's processors, the process
 * and atom tables and their limits, the word size, what it is), as
 * BEAM answers for the items tracevm has a counterpart for.
 *
 * One table names every item and the function that answers it, so the
 * items a program may ask for, the answers and docs/asm.md's list derive
 * from one place.  Every answer is read from what its writers publish:
 * the scheduler count once the schedulers started (vm_sched_of's
 * acquire) or the configuration they will start with, the live-process
 * count under the process table's lock, the atom count by its acquire
 * load (vm/atom.c), the rest constants of the build and the OS.  Like
 * BEAM's, an answer is a moment's picture: process_count may be old by
 * the time the caller looks at it.
 */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vm/atom.h"
#include "vm/bif_internal.h"
#include "vm/heap.h"
#include "vm/native.h"
#include "vm/sched.h"
#include "vm/vm.h"

/* The string s as a list of its bytes (BEAM's answers are lists). */
static Term string_term(Process *p, const char *s)
{
    size_t n = strlen(s);
    vm_heap_ensure(p, 2 * n, NULL, 0);
    Term l = TERM_NIL;
    for (size_t i = n; i-- > 0;) {
        Term *c = vm_heap_alloc(p, 2);
        c[0] = make_small((unsigned char)s[i]);
        c[1] = l;
        l = make_cons_ptr(c);
    }
    return l;
}

/* The schedulers the VM runs, or will start with (as vm_sched_start
 * counts them: the configuration's, else one per online processor). */
static Term si_schedulers(Process *p)
{
    SchedSystem *sys = vm_sched_of(p->vm);
    if (sys)
        return make_small(sys->n);
    return make_small(vm_sched_count_for(p->vm->schedulers));
}

/* The processors the OS has configured, has online, and lets this OS
 * process run on (its affinity mask); `unknown`, as BEAM's, when the OS
 * does not say. */
static Term cpus(long c)
{
    return c > 0 ? make_small(c) : make_atom(ATOM_UNKNOWN);
}

static Term si_logical(Process *p)
{
    (void)p;
    return cpus(sysconf(_SC_NPROCESSORS_CONF));
}

static Term si_logical_online(Process *p)
{
    (void)p;
    return cpus(sysconf(_SC_NPROCESSORS_ONLN));
}

static Term si_logical_available(Process *p)
{
    (void)p;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return make_atom(ATOM_UNKNOWN);
    return cpus(CPU_COUNT(&set));
}

/* Processes alive (those exiting included until they are gone, as
 * BEAM's count). */
static Term si_process_count(Process *p)
{
    SchedSystem *sys = vm_sched_of(p->vm);
    if (!sys)
        return make_small(0);
    pthread_mutex_lock(&sys->lock);
    size_t n = sys->live;
    pthread_mutex_unlock(&sys->lock);
    return make_small((int64_t)n);
}

static Term si_process_limit(Process *p)
{
    return make_small((int64_t)p->vm->max_procs);
}

/* The atom table is the OS process's, shared by its VMs (vm/atom.c). */
static Term si_atom_count(Process *p)
{
    (void)p;
    return make_small((int64_t)vm_atom_count());
}

static Term si_atom_limit(Process *p)
{
    (void)p;
    return make_small(VM_ATOM_MAX_COUNT);
}

static Term si_wordsize(Process *p)
{
    (void)p;
    return make_small((int64_t)sizeof(Term));
}

static Term si_machine(Process *p)
{
    return string_term(p, "tracevm");
}

static Term si_version(Process *p)
{
    return string_term(p, TVM_VERSION_STRING);
}

static Term si_architecture(Process *p)
{
#if defined(__x86_64__)
    return string_term(p, "x86_64-pc-linux-gnu");
#elif defined(__aarch64__)
    return string_term(p, "aarch64-unknown-linux-gnu");
#else
    return string_term(p, "unknown-linux-gnu");
#endif
}

static Term si_true(Process *p)
{
    (void)p;
    return TERM_TRUE;
}

/* None: tracevm has no dirty schedulers (a long native lends its queue
 * instead, vm/lend.h), no async thread pool and no ports. */
static Term si_zero(Process *p)
{
    (void)p;
    return make_small(0);
}

static Term si_build_type(Process *p)
{
    (void)p;
#ifdef VM_DEBUG
    return make_atom(ATOM_DEBUG);
#else
    return make_atom(ATOM_OPT);
#endif
}

/* The items: an atom, or {wordsize, internal | external} (key2). */
static const struct {
    Atom key, key2;
    Term (*answer)(Process *p);
} items[] = {
    { ATOM_SCHEDULERS, 0, si_schedulers },
    { ATOM_SCHEDULERS_ONLINE, 0, si_schedulers },
    { ATOM_LOGICAL_PROCESSORS, 0, si_logical },
    { ATOM_LOGICAL_PROCESSORS_AVAILABLE, 0, si_logical_available },
    { ATOM_LOGICAL_PROCESSORS_ONLINE, 0, si_logical_online },
    { ATOM_PROCESS_COUNT, 0, si_process_count },
    { ATOM_PROCESS_LIMIT, 0, si_process_limit },
    { ATOM_ATOM_COUNT, 0, si_atom_count },
    { ATOM_ATOM_LIMIT, 0, si_atom_limit },
    { ATOM_WORDSIZE, 0, si_wordsize },
    { ATOM_WORDSIZE, ATOM_INTERNAL, si_wordsize },
    { ATOM_WORDSIZE, ATOM_EXTERNAL, si_wordsize },
    { ATOM_MACHINE, 0, si_machine },
    { ATOM_VERSION, 0, si_version },
    { ATOM_SYSTEM_ARCHITECTURE, 0, si_architecture },
    { ATOM_THREADS, 0, si_true },
    { ATOM_SMP_SUPPORT, 0, si_true },
    { ATOM_DIRTY_CPU_SCHEDULERS, 0, si_zero },
    { ATOM_THREAD_POOL_SIZE, 0, si_zero },
    { ATOM_PORT_COUNT, 0, si_zero },
    { ATOM_BUILD_TYPE, 0, si_build_type },
    { ATOM_EMU_TYPE, 0, si_build_type },
};

/* Whether what matches item i of the table. */
static bool item_is(size_t i, Term what)
{
    if (!items[i].key2)
        return what == make_atom(items[i].key);
    return term_is_tuple(what) && tuple_arity(what) == 2 &&
           tuple_elems(what)[0] == make_atom(items[i].key) &&
           tuple_elems(what)[1] == make_atom(items[i].key2);
}

/* system_info(What): the answer, badarg for any other What. */
NATIVE_FN(nif_system_info)
{
    SETUP();
    Term what = ARG(0);
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++)
        if (item_is(i, what))
            RETURN(items[i].answer(p));
    BADARG();
}

static const VmNativeDef natives[] = {
    { "erlang", "system_info", 1, nif_system_info },
};

VmNativeTable vm_sysinfo_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
