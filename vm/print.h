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
/* Appends mod:name/arity with atoms quoted as needed. */
void vm_print_mfa(StrBuf *sb, Atom mod, Atom name, unsigned arity);

#endif /* VM_PRINT_H */
