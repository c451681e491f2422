/*
 * vm/dict.h - the process dictionary: erlang:put/2, get/0,1,
 * get_keys/0,1 and erase/0,1, and what the collector, the heap limit,
 * process_info/2 and a process's end need of it.  vm/dict.c says how it
 * is kept and why.
 *
 * Only the process itself changes its dictionary, and only while it
 * runs; another thread reads it only as process_info/2 reads a process's
 * own queue (vm/procinfo.c: under the process's lock while it is not
 * running or is held still, or through a request it answers itself).
 */
#ifndef VM_DICT_H
#define VM_DICT_H

#include <stdbool.h>
#include <stddef.h>

#include "vm/native.h"
#include "vm/process.h"

VmNativeTable vm_dict_natives(void);

/* The terms of p's dictionary (every key and value, *n of them, in one
 * array) for the collector, which treats them as roots and updates them
 * in place; NULL with *n 0 when p has none. */
Term *vm_dict_roots(Process *p, size_t *n);

/* The words p's dictionary's table takes off the heap (its keys and
 * values are on the heap): counted toward max_heap_size (vm/heap.c). */
size_t vm_dict_words(const Process *p);

/* Empties p's dictionary and frees its table (a process's exit, its
 * recycling or freeing, a native stack overflow that dropped its heap). */
void vm_dict_free(Process *p);

/* The list [{Key, Value}] of p's dictionary on p's heap (get/0's order);
 * [] when empty.  May collect. */
Term vm_dict_pairs(Process *p);

/*
 * A copy of t's dictionary as [{Key, Value}] off any heap (a Message
 * whose term is the list; the caller frees it with vm_messages_free),
 * for process_info/2 of another process: t's own thread, or t's lock
 * held while t is held still.  NULL for an empty dictionary, and, with
 * *over set, when the copy would be over max_words words (terms with
 * shared parts copy flat).
 */
Message *vm_dict_copy(const Process *t, size_t max_words, bool *over);

#endif /* VM_DICT_H */
