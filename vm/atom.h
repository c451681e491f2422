/*
 * vm/atom.h - the global atom table.
 *
 * Atoms are shared by every VM in the OS process: an atom term holds an
 * index into this table.  Interning (name -> index) takes a mutex; reading
 * a name by index takes no lock (entries never move and are never freed).
 *
 * Concurrency:
 *   - entries[i] is written once by the interning thread, under atom_lock,
 *     before the release store of `count` ([AT1]); a reader that holds an
 *     atom term got it through a chain that started after that store, so
 *     the plain read of the entry is ordered.
 *   - the name hash index is read and written only under atom_lock.
 */
#ifndef VM_ATOM_H
#define VM_ATOM_H

#include <stddef.h>
#include <stdbool.h>

#include "vm/term.h"

#define VM_ATOM_MAX_LEN 255
#define VM_ATOM_MAX_COUNT (1u << 20)

/* Initialise the table and the predefined atoms; idempotent, thread-safe. */
void vm_atoms_init(void);

/*
 * Intern `name` (len bytes, any bytes but length <= VM_ATOM_MAX_LEN).
 * Returns false if the name is too long or the table is full.
 * Context: any thread.
 */
bool vm_atom_intern(const char *name, size_t len, Atom *out);

/* Look an existing atom up; false if there is none.  Any thread. */
bool vm_atom_lookup(const char *name, size_t len, Atom *out);

/* The name of an atom (NUL-terminated; its length in *len if len is set). */
const char *vm_atom_name(Atom a, size_t *len);

/* Interns a NUL-terminated name, aborting on failure: for tests and
 * benchmarks only.  The library never calls it: the atoms its C code
 * needs are predefined (vm/atoms.def), and everything else interns with
 * vm_atom_intern and reports a full table (docs/safety.md). */
Atom vm_atom_cstr(const char *name);

/* Number of atoms interned so far. */
size_t vm_atom_count(void);

#if VM_FUZZ
/* Forgets every atom but the predefined ones.  Only while no VM exists
 * and no atom term survives anywhere (the fuzz harnesses, between two
 * inputs); not thread-safe against readers of names. */
void vm_atoms_trim(void);
#endif

#endif /* VM_ATOM_H */
