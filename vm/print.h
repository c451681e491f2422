/*
 * vm/print.h - printing terms in Erlang syntax.
 */
#ifndef VM_PRINT_H
#define VM_PRINT_H

#include "vm/strbuf.h"
#include "vm/term.h"

/* Appends `t` in Erlang syntax: {ok,[1,2]}, 'Quoted', <<"text">>, <0.3.0>. */
void vm_print_term(StrBuf *sb, Term t);
void vm_print_atom(StrBuf *sb, Atom a);
/* Appends n bytes of an atom's name as vm_print_atom prints the atom
 * (quoted and escaped as needed), whether or not that atom exists. */
void vm_print_atom_text(StrBuf *sb, const char *s, size_t n);
/*
 * Appends a binary's bytes as vm_print_term does (<<"text">> or <<1,2>>);
 * `more` adds "..." before ">>" for a binary cut short (trace payloads).
 */
void vm_print_bytes(StrBuf *sb, const uint8_t *b, size_t n, bool more);
/* Appends mod:name/arity with atoms quoted as needed. */
void vm_print_mfa(StrBuf *sb, Atom mod, Atom name, unsigned arity);

#endif /* VM_PRINT_H */
