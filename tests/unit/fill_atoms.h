/*
 * tests/unit/fill_atoms.h - fills the atom table (VM_ATOM_MAX_COUNT
 * atoms, for the whole OS process, never shrinking: only in a test that
 * runs in an OS process of its own, as Criterion runs each test).
 */
#ifndef TESTS_UNIT_FILL_ATOMS_H
#define TESTS_UNIT_FILL_ATOMS_H

#include <criterion/criterion.h>
#include <stdio.h>

#include "vm/atom.h"

/* Interns fill_0, fill_1, ... until the table refuses one; fails the test
 * unless the table is then full. */
static inline void fill_atom_table(void)
{
    char name[32];
    Atom a;
    for (unsigned i = 0;; i++) {
        int n = snprintf(name, sizeof name, "fill_%u", i);
        if (!vm_atom_intern(name, (size_t)n, &a))
            break;
    }
    cr_assert_eq(vm_atom_count(), VM_ATOM_MAX_COUNT);
}

#endif /* TESTS_UNIT_FILL_ATOMS_H */
