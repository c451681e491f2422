/*
 * vm/heap.h - process heaps and the copying collector.
 *
 * A process allocates by bumping p->htop.  When there is no room the
 * collector (Cheney, two spaces) copies everything reachable from the
 * process's roots into a fresh block and frees the old one.  Roots: the
 * whole register stack, the native handles, the pending exception and
 * the process dictionary's keys and values (vm/dict.h).
 * Boxed terms outside the heap (module literals) are left where they are.
 *
 * Sizing: after a collection the next block is chosen so that live data
 * fills at most half of it (the heap grows), and a heap that is less than
 * an eighth live shrinks, but never below the process's minimum.  So a
 * loop that allocates without keeping anything runs in bounded memory.
 */
#ifndef VM_HEAP_H
#define VM_HEAP_H

#include "vm/native.h"
#include "vm/process.h"

/*
 * Makes sure `words` words are free, collecting if needed.  `extra` points
 * to `nextra` more root terms (updated in place).  Never fails (aborts on
 * out-of-memory).
 */
void vm_heap_ensure(Process *p, size_t words, Term *extra, size_t nextra);

/* Allocates `words` words; the caller has ensured room. */
static inline Term *vm_heap_alloc(Process *p, size_t words)
{
    Term *r = p->htop;
    p->htop += words;
    VM_ASSERT(p->htop <= p->hend, "heap overflow");
    return r;
}

/* Runs a collection now, with room for `need` more words afterwards.
 * One of VM_BIF_LEND_WORK used words or more lends p's scheduler's local
 * queue while it copies (vm/lend.h). */
void vm_gc(Process *p, size_t need, Term *extra, size_t nextra);

/* erlang:garbage_collect/0, installed by the composition root. */
VmNativeTable vm_heap_natives(void);

/*
 * max_heap_size: when p's heap block, the messages in its queue, its
 * monitors and its dictionary's table are over p->max_heap, marks p to
 * be killed with reason killed at its next reduction check
 * (Process.kill).  After each collection (the only time the heap grows),
 * when messages enter the queue and when the dictionary's table grows.
 */
void vm_heap_check_max(Process *p);

/*
 * For a native about to allocate `words` words in one go, an amount its
 * arguments chose (lists:seq/2, binary_to_list/1, iolist_to_binary/1):
 * true when those words alone are more than p's max_heap_size, and then
 * p is marked to be killed exactly as vm_heap_check_max marks it (reason
 * killed, the crash report's "reached" being the block, the request, the
 * queue and the monitors), so the caller returns TVM_EXCEPTION without
 * allocating and the process dies as the native returns.  False (nothing
 * done) without a limit or within it: the caller allocates as usual.
 */
bool vm_heap_max_refuses(Process *p, size_t words);

/* Size in words of the heap block in use. */
static inline size_t vm_heap_size(const Process *p)
{
    return (size_t)(p->hend - p->heap);
}

/* What max_heap_size is compared with, as BEAM compares it with
 * total_heap_size: the heap block, the messages in p's own queue, its
 * monitors and its dictionary's table, in words.  p's own thread, or p
 * held still under its lock (vm/procinfo.c). */
size_t vm_heap_total_words(const Process *p);

/* Copies term `t` (which may live anywhere) onto p's heap; room ensured
 * for term_size(t) words by the caller. */
Term vm_copy_term(Process *p, Term t);

/* Copies term `t` to the words at *hp, advancing *hp; room for
 * term_size(t) words is the caller's business. */
Term vm_copy_to(Term **hp, Term t);

/*
 * Builders on p's heap; each ensures its own room (and may collect).
 * vm_make_tuple treats elems[] as extra roots and updates it in place;
 * vm_make_cons keeps head and tail across its collection.
 */
Term vm_make_tuple(Process *p, uint32_t n, Term *elems);
Term vm_make_cons(Process *p, Term head, Term tail);
Term vm_make_binary(Process *p, const void *bytes, size_t len);
/* A binary of len bytes whose bytes (*bytes) the caller fills before
 * anything else allocates; extra[0..nextra-1] are roots the collection
 * it may run updates (vm_heap_ensure). */
Term vm_alloc_binary(Process *p, size_t len, Term *extra, size_t nextra, uint8_t **bytes);

#endif /* VM_HEAP_H */
