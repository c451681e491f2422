/*
 * vm/monitors.h - monitors (erlang:monitor/2, demonitor/1,2) and the
 * 'DOWN' messages of an exiting process, as BEAM's.
 */
#ifndef VM_MONITORS_H
#define VM_MONITORS_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/native.h"
#include "vm/process.h"

/*
 * Registers a monitor of process `target` by p and returns its
 * reference; `name` is the registered name it was given by (the 'DOWN'
 * then names {Name, nonode@nohost}) or TERM_NIL.  A target that is gone
 * gets p an immediate 'DOWN' with reason noproc; p itself gets no
 * monitor (nothing would ever come of it).  The monitor counts toward
 * p's max_heap_size (vm/process.h).
 */
uint64_t vm_proc_monitor(Process *p, uint64_t target, Term name);

/*
 * Takes p's monitor `ref` off (p's own thread): true when it was still
 * on, so that its 'DOWN' never comes; false when it was not p's, or its
 * 'DOWN' is in p's queue already.  After the call no 'DOWN' of it can
 * arrive, also when its target was delivering it at that moment.
 */
bool vm_proc_demonitor(Process *p, uint64_t ref);

/* Drops p's entries for monitors whose target has exited, and those
 * demonitor took off. */
void vm_proc_monitors_prune(Process *p);

/* At p's exit (exiting set): takes p's monitor nodes off its targets and
 * frees its list. */
void vm_proc_monitors_drop(Process *p);

/*
 * At p's exit (exiting set, p's own fiber): sends each watcher its
 * {'DOWN', Ref, process, Item, Reason}, Reason the term in root `reason`
 * of `rw` words (vm_size_lend), Item p's pid or {Name, nonode@nohost}.
 * The copies count toward a lend of p's queue (*lent, vm/lend.h).
 */
void vm_proc_monitors_fire(Process *p, tvm_term reason, size_t rw, bool *lent);

/* The words a 'DOWN' adds around its reason: the 5-tuple, and a name's
 * {Name, Node} in place of the pid.  An exit reason is bounded so that
 * its 'DOWN' still fits a message (VM_DOWN_WORDS). */
#define VM_DOWN_TUPLE_WORDS 6
#define VM_DOWN_NAME_WORDS 3
#define VM_DOWN_WORDS (VM_DOWN_TUPLE_WORDS + VM_DOWN_NAME_WORDS)

/* erlang:monitor/2, demonitor/1, demonitor/2. */
VmNativeTable vm_monitors_natives(void);

#endif /* VM_MONITORS_H */
