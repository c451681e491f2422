/*
 * stacks/st_sym.h - native symbolization: code address -> "symbol+offset
 * (object)", and file:line on request.
 *
 * Stacks are captured as raw addresses (never symbolized in a signal
 * handler or on the capture path); these functions turn them into names
 * later, from a process-wide cache of every loaded object's ELF function
 * symbols (docs/stacks.md, "Symbolization").
 *
 * Thread safety: any thread may call any of these functions at any time,
 * concurrently with each other and with st_sym_reset().  None of them is
 * async-signal-safe (they may take locks, allocate, open files).
 *
 * Lifetime of returned strings: every `name`, `object` and `file` pointer
 * handed out stays valid for the life of the process, across
 * st_sym_reset() and dlclose(): the strings live in a pool that is never
 * freed (one copy per distinct object file, reused when the object is
 * symbolized again).
 */
#ifndef STACKS_ST_SYM_H
#define STACKS_ST_SYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct StSym {
    const char *name;      /* symbol name (not demangled), or NULL when unknown */
    uintptr_t offset;      /* addr - symbol start */
    const char *object;    /* path of the ELF object (executable or .so), or NULL */
    uintptr_t obj_offset;  /* addr relative to the object's load base */
} StSym;

/*
 * Process-wide cache of every loaded object's ELF symbols (executable,
 * shared libs, the vdso), built lazily (the object list on first use, an
 * object's symbol table on the first address inside it), refreshed when
 * objects were added or removed (dl_iterate_phdr's dlpi_adds/dlpi_subs,
 * checked when an address falls outside every known object, and by
 * st_sym_refresh()).
 *
 * st_sym_lookup: true when addr lies inside a function symbol (sized, or
 * zero-sized and before the next symbol and the end of its section); false
 * otherwise, with out->object and out->obj_offset filled when addr lies in
 * a loaded object (else NULL and 0), out->name NULL and out->offset 0.
 */
bool st_sym_lookup(uintptr_t addr, StSym *out);

/* st_sym_lookup for n addresses at once (out[i] for addrs[i]); returns how
 * many have a symbol.  Cheaper per address: one entry into the cache's
 * read side for the whole batch. */
size_t st_sym_lookup_n(const uintptr_t *addrs, size_t n, StSym *out);

/* file:line of a native code address (libdw / dwfl); false when no debug
 * info covers addr.  For a return address pass addr - 1 (the call).
 * Serialised by a lock: milliseconds the first time, microseconds after. */
bool st_sym_srcline(uintptr_t addr, const char **file, int *line);

/* Formats "name+0xoff (object)", "0xaddr (object)" or, outside every
 * object, "0xaddr" into buf (always NUL-terminated when size > 0);
 * returns the length needed, like snprintf. */
size_t st_sym_format(uintptr_t addr, char *buf, size_t size);

/* Re-reads the list of loaded objects if one was added or removed since
 * the cache last looked (a dlclose followed by a dlopen at the same
 * address is seen only here or by a lookup outside every object). */
void st_sym_refresh(void);

/* Drops the cache (tests, benchmarks: "cold"); the next lookup rebuilds
 * it.  Safe while other threads look up: it waits for the lookups that
 * started before it (a few microseconds) before freeing anything. */
void st_sym_reset(void);

#endif /* STACKS_ST_SYM_H */
