/*
 * vm/sysmon.h - BEAM's system monitor: erlang:system_monitor/0,1,2 and
 * the long_schedule, long_gc and large_heap messages to the one monitor
 * process of a VM.  vm/sysmon.c says how it is kept, who reads and
 * writes each word, and what the switch and the collector pay for it.
 */
#ifndef VM_SYSMON_H
#define VM_SYSMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "vm/atomics.h"
#include "vm/native.h"

struct Process;
struct Scheduler;

/*
 * A VM's setting (struct tvm_vm.sysmon).  Every word is written only by
 * system_monitor/1,2 and by the monitor's exit, under `lock` (which
 * orders the writers); `on` last when a setting is made (release) and
 * first when one is cleared.  Read relaxed, without the lock, by every
 * scheduler: `on` at each switch in and each collection (the one
 * predictable branch they pay while no monitor is set), the rest only
 * after `on` was seen nonzero.  A switch or a collection that races with
 * a change is judged by the old or the new value of each word (a
 * threshold of 0 is off), as a BEAM event that happens just before or
 * after the change would be.
 */
typedef struct VmSysmon {
    VmAtomic on;              /* nonzero: long_gc, long_schedule or large_heap is set */
    VmAtomic pid;             /* the monitor process, 0 for none */
    VmAtomic long_gc;         /* ms, 0 for off (else at least 1, as BEAM's) */
    VmAtomic long_schedule;   /* ms, 0 for off (else at least 1) */
    VmAtomic large_heap;      /* words, 0 for off (else at least 16384) */
    VmAtomic busy;            /* VM_SYSMON_BUSY_* accepted, never sent: no ports */
    pthread_mutex_t lock;
} VmSysmon;

enum { VM_SYSMON_BUSY_PORT = 1, VM_SYSMON_BUSY_DIST_PORT = 2 };

/* When and where the process running on a scheduler was switched in
 * while a monitor watched for long schedules (Scheduler.sysmon_in):
 * written and read only by that scheduler's thread (its loop, and the
 * direct switch on the fiber of the process it runs).  ns 0: not timed
 * (no monitor, or long_schedule off, when it was switched in). */
typedef struct VmSysmonIn {
    uint64_t ns;
    bool known;               /* mod, name, arity: its {M, F, A}; else undefined */
    uint32_t mod, name;       /* Atoms */
    uint32_t arity;
} VmSysmonIn;

/* The layer's init and free (api/root.c): the lock. */
void vm_sysmon_init(tvm_vm *vm);
void vm_sysmon_free(tvm_vm *vm);

/* erlang:system_monitor/0,1,2, installed by the composition root. */
VmNativeTable vm_sysmon_natives(void);

/* s switches p in, with vm->sysmon.on seen set: notes when and where
 * (for long_schedule). */
void vm_sysmon_in(struct Scheduler *s, struct Process *p);

/* p has switched out of s, whose sysmon_in.ns is set: a long_schedule
 * message when it ran longer than the setting; clears sysmon_in.ns. */
void vm_sysmon_out(struct Scheduler *s, struct Process *p);

/* A collection of p's heap took `ns` (vm/heap.c, with vm->sysmon.on seen
 * set): long_gc and large_heap messages as the setting asks. */
void vm_sysmon_gc(struct Process *p, uint64_t ns);

/* p, whose pid the setting names, is exiting (vm/lifecycle.c, after
 * p->exiting is set): the setting is cleared, as BEAM's is when its
 * monitor process ends. */
void vm_sysmon_exited(struct Process *p);

#endif /* VM_SYSMON_H */
