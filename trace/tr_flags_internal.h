/*
 * trace/tr_flags_internal.h - the trace word's state, shared by the
 * changes of one process (trace/tr_flags.c) and the changes for all
 * processes (trace/tr_flags_all.c).  Not for other components.
 */
#ifndef TRACE_TR_FLAGS_INTERNAL_H
#define TRACE_TR_FLAGS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/process.h"
#include "vm/traceword.h"

/*
 * A state is a trace word and, while it says VM_SID_MULTI, a table: a
 * process's (word, tabp: allocated on first need) or the defaults for new
 * processes (word, `fixed`).  Its writers hold the state's lock (p->lock,
 * or the sessions' flags_lock for the defaults).
 */

/* Every session's word of the state, by slot (0: none). */
void tr_state_words(const VmAtomic *word, const VmTraceTab *tab, uintptr_t w[VM_SESSIONS_MAX]);

/* Writes w[] as the state: the table (allocated into *tabp if needed,
 * [TF1] release) first, then the word, so that the word's union always
 * matches the table a reader finds through it. */
void tr_state_store(VmAtomic *word, VmAtomic *tabp, VmTraceTab *fixed,
                    const uintptr_t w[VM_SESSIONS_MAX]);

/* Session sid's flags in the state become `flags` added (on) or removed;
 * whether anything changed. */
bool tr_state_change(VmAtomic *word, VmAtomic *tabp, VmTraceTab *fixed, unsigned sid,
                     unsigned flags, bool on);

/* Folds the changes for all that p's word has not taken in yet into it
 * (nothing for a call context); p->lock held. */
void tr_fold_locked(Process *p);

#endif /* TRACE_TR_FLAGS_INTERNAL_H */
