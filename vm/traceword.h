/*
 * vm/traceword.h - the trace word: one word that says, for a process or
 * for the processes spawned next, what every trace session asks of it.
 * The VM reads it on hot paths (the breakpoint hit, scheduling, spawn);
 * the trace layer writes it (trace/tr_flags.c has the protocol; for all
 * processes at once, trace/tr_flags_all.c).
 */
#ifndef VM_TRACEWORD_H
#define VM_TRACEWORD_H

#include <stdint.h>

#include "vm/atomics.h"
#include "vm/common.h"

/*
 * Trace sessions (trace/tr_session.c).  A process's trace word
 * (Process.trace) and the VM's default for new processes
 * (tvm_vm.trace_new) hold the flags of every session in one word, so that
 * the hot paths still test one load:
 *   bits 0..31   the union of every session's VM_TRACE_* flags;
 *   bits 32..47  the id of the session those flags belong to (a *sid*:
 *                slot | generation << 8) when one session alone has
 *                flags, or VM_SID_MULTI when several have: each one's
 *                word is then in a VmTraceTab (Process.trace_tab,
 *                tvm_vm.trace_new_tab).
 * A sid names one incarnation of a slot: reusing a slot bumps its
 * generation, so what an ended session left behind (a trace frame still
 * on a stack) is not taken for its successor's (until the generation
 * wraps, after 256 reuses of that slot).  The default session is slot 0,
 * generation 0: a process traced by it alone has exactly the word it had
 * before sessions existed.
 */
#define VM_SID_SHIFT 32
#define VM_SID_MULTI 0xffffu
#define VM_TRACE_FLAGS(w) ((unsigned)((w) & 0xffffffffu))

/* (Nothing is kept above the sid: one shift reads it.) */
static inline unsigned vm_trace_sid(uintptr_t w)
{
    return (unsigned)(w >> VM_SID_SHIFT);
}

static inline unsigned vm_sid_slot(unsigned sid)
{
    return sid & 0xffu;
}

static inline uintptr_t vm_trace_word(unsigned sid, unsigned flags)
{
    return (uintptr_t)flags | (uintptr_t)sid << VM_SID_SHIFT;
}

/* Each session's trace word (vm_trace_word, 0: none), by slot.  Written
 * by the trace layer under the owner's lock (trace/tr_flags.c); read
 * relaxed. */
typedef struct VmTraceTab {
    VmAtomic w[VM_SESSIONS_MAX];
} VmTraceTab;

#endif /* VM_TRACEWORD_H */
