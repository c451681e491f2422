/*
 * vm/lend.c - the cold parts of vm/lend.h: lending for the process that
 * runs on this thread, and the walks that passed VM_BIF_LEND_WORK.
 */
#include "vm/lend.h"

bool vm_lend_now(Process *p)
{
    /* p->lending is read by p's own thread only (vm/process.h): set, an
     * enclosing lend ends it, or the switch in lends again. */
    return p && !p->lending && vm_sched_lend(p);
}

int vm_compare_long(Process *p, Term a, Term b)
{
    if (p->vm->cmp_steps <= p->vm->cmp_first)
        return TERM_CMP_LIMIT;
    bool lent = vm_lend_now(p);
    int c = term_compare_steps(a, b, p->vm->cmp_steps);
    vm_lend_done(p, lent);
    return c;
}

size_t vm_size_long(Process *p, Term t, size_t cap, bool *lent)
{
    *lent = vm_lend_now(p);
    return term_size_capped(t, cap);
}
