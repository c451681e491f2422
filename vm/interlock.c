/*
 * vm/interlock.c - the switch side's waits of the capture interlock
 * (vm/interlock.h has the protocol).
 */
#include "vm/interlock_switch.h"

#include <sched.h>

#include "vm/arch.h"

enum { IL_SPINS = 128 };

void vm_il_wait_untraced(Process *p)
{
    vm_atomic_store_relaxed(&p->il.waiting, 1);
    for (unsigned i = 0; vm_atomic_load_acquire(&p->il.traced); i++) {
        if (i < IL_SPINS)
            vm_cpu_relax();
        else
            sched_yield();
    }
    vm_atomic_store_release(&p->il.waiting, 0);
}

void vm_il_exited(Process *p)
{
    uintptr_t w = vm_atomic_load_relaxed(&p->il.word);
    /* Dekker with step 2 of a capture: a full store (as an RMW, which
     * ThreadSanitizer understands; we are the word's only writer), then a
     * sequentially consistent load. */
    vm_atomic_fetch_add_full(&p->il.word, IL_NEXT(w, IL_EXITED) - w);
    if (vm_atomic_load_rmw_full(&p->il.traced))
        vm_il_wait_untraced(p);
}

