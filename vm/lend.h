/*
 * vm/lend.h - long work reachable from VM code lends its scheduler's
 * local queue (vm/sched.c, "Lending the local queue").
 *
 * A process that does work whose length a term chooses (a native given a
 * long list, an instruction comparing two deep terms, a message, a
 * spawn's arguments or an exit reason copied) holds its scheduler's
 * thread for that long, and the processes queued behind it there wait
 * with other schedulers idle.  From VM_BIF_LEND_WORK units of work on
 * (vm/config.h, which says what a unit is and why 64 Ki) the work lends
 * the queue as an embedder native's call does, and takes it back after.
 *
 * Cost: a short call pays one compare of work it knows, or for a walk
 * that finds its length as it goes (a term compared or counted) the walk
 * is first bounded by VM_BIF_LEND_WORK; only one that reaches the bound
 * lends and walks again without it (the answer is the same; the first
 * VM_BIF_LEND_WORK steps are walked twice, which at most doubles the
 * work of a walk that lends).
 *
 * Where: only the process running on this thread can lend (vm_sched_lend
 * checks it: on an embedder's thread, inside tvm_call, nothing is lent),
 * only on a VM of more than one scheduler (alone, nobody could take it),
 * never inside an enclosing lend (p->lending: an embedder native's, or a
 * built-in native's that calls back into VM code), and never while the
 * caller holds a lock (the lend may wake a scheduler, taking its lock;
 * its end may wait out a thief for a few stores).
 */
#ifndef VM_LEND_H
#define VM_LEND_H

#include <stdbool.h>
#include <stddef.h>

#include "vm/config.h"
#include "vm/process.h"
#include "vm/sched.h"
#include "vm/term.h"
#include "vm/vm.h"

/* Lends p's scheduler's queue now: true if this call lent (then
 * vm_lend_done(p, true) ends it); false for a NULL p, inside an
 * enclosing lend, or off p's scheduler thread. */
bool vm_lend_now(Process *p);

/* Lends if `work`, counted before it starts, reaches VM_BIF_LEND_WORK;
 * a short call pays this one compare. */
static inline bool vm_lend_if_long(Process *p, size_t work)
{
    return VM_UNLIKELY(work >= VM_BIF_LEND_WORK) && vm_lend_now(p);
}

/* Lends if t is over VM_BIF_LEND_WORK words, before a copy of t that
 * counts it again (a message made by the VM for p: a meta trace
 * message); the count stops at VM_BIF_LEND_WORK. */
static inline bool vm_lend_if_big(Process *p, Term t)
{
    return term_size_capped(t, VM_BIF_LEND_WORK) == SIZE_MAX && vm_lend_now(p);
}

/* Once the work is over: ends a lend vm_lend_if_long or the walks below
 * reported (lent). */
static inline void vm_lend_done(Process *p, bool lent)
{
    if (VM_UNLIKELY(lent))
        vm_sched_lend_end(p);
}

/* The comparison of a and b for p after a first pass of
 * p->vm->cmp_first steps ran out (the cold part of vm_compare_lend):
 * TERM_CMP_LIMIT if that was all of cmp_steps, else the whole
 * comparison again, with p's queue lent. */
int vm_compare_long(Process *p, Term a, Term b);

/*
 * term_compare_steps(a, b, p->vm->cmp_steps) for p (the comparisons of
 * VM code and of the natives it calls): the same answer, with p's queue
 * lent while a comparison past VM_BIF_LEND_WORK pairs runs (two equal
 * lists of 1,000,000 elements are 1,000,000 pairs).
 */
static inline int vm_compare_lend(Process *p, Term a, Term b)
{
    int c = term_compare_steps(a, b, p->vm->cmp_first);
    return VM_LIKELY(c != TERM_CMP_LIMIT) ? c : vm_compare_long(p, a, b);
}

/* term_size_capped past VM_BIF_LEND_WORK words, lent (the cold part of
 * vm_size_lend). */
size_t vm_size_long(Process *p, Term t, size_t cap, bool *lent);

/*
 * term_size_capped(t, cap) before a copy of t made by p's thread (a
 * message, spawn's arguments, an exit value): a term of more than
 * VM_BIF_LEND_WORK words lends p's queue from the count on (*lent, for
 * vm_lend_done once the copy is made; set too when the count passes
 * `cap`, SIZE_MAX).  p may be NULL (a copy made for no process: lends
 * nothing).
 */
static inline size_t vm_size_lend(Process *p, Term t, size_t cap, bool *lent)
{
    *lent = false;
    if (cap <= VM_BIF_LEND_WORK)
        return term_size_capped(t, cap);
    size_t n = term_size_capped(t, VM_BIF_LEND_WORK);
    return VM_LIKELY(n != SIZE_MAX) ? n : vm_size_long(p, t, cap, lent);
}

#endif /* VM_LEND_H */
