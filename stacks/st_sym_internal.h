/*
 * stacks/st_sym_internal.h - what the symbolizer's files share: the
 * per-object symbol table (built by st_elf.c, searched by st_sym.c) and
 * the never-freed string pool.
 */
#ifndef STACKS_ST_SYM_INTERNAL_H
#define STACKS_ST_SYM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One function symbol: [start, start + len) in the object's own
 * addresses (the file's virtual addresses; runtime = start + bias).  For a
 * zero-sized symbol len reaches the next symbol or the end of its
 * section.  name is an offset into StTable.strs. */
typedef struct StSymEnt {
    uintptr_t start;
    uint32_t len;
    uint32_t name;
} StSymEnt;

/* An object's function symbols sorted by start, one per start address
 * (aliases collapsed to the preferred name).  Immutable once built; strs
 * lives in the string pool (never freed), ents is freed with the table. */
typedef struct StTable {
    size_t n;
    StSymEnt *ents;
    const char *strs;
} StTable;

/* The table of an object with no readable symbols (a deleted file, no
 * symbol section): empty, static, never freed. */
extern const StTable st_empty_table;

/* Where an object's symbols come from. */
typedef struct StObjSrc {
    const char *path;      /* interned: the object's file, or the vdso's soname */
    uintptr_t bias;        /* dlpi_addr: runtime address - file address */
    bool vdso;             /* read from memory at the vdso's ELF header, not a file */
} StObjSrc;

/* Reads the object's .symtab (else .dynsym) with libelf and returns its
 * table, or &st_empty_table when there is none.  Not thread-safe: the
 * caller serialises builds (st_sym.c's build lock). */
const StTable *st_elf_table(const StObjSrc *src);

/* Frees a table returned by st_elf_table (not its strings). */
void st_elf_table_free(const StTable *t);

/* The address of the symbol at table index i's name. */
static inline const char *st_ent_name(const StTable *t, const StSymEnt *e)
{
    return t->strs + e->name;
}

/* Interns s[0..n) in the never-freed pool: equal strings give the same
 * pointer.  Thread-safe (the pool's own lock). */
const char *st_intern(const char *s, size_t n);

#endif /* STACKS_ST_SYM_INTERNAL_H */
