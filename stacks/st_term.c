/*
 * stacks/st_term.c - a process's whole stack as a term, for the
 * `backtrace` match-spec action (breakpoints/bp_hit.c): the caller's own
 * stack (st_capture_self: no signal, no interlock), joined (st_join) and
 * built on its heap, innermost first:
 *   {M, F, A, Line}           a VM frame (Line 0 when unknown)
 *   {trace_frame, {M, F, A}}  a return/exception trace frame
 *   <<"name+0xoff">>          a native frame, symbolized here (on the
 *                             process's thread, never in a handler);
 *                             <<"0xaddr (object)">> without a symbol
 * The native frames above the innermost VM frame (the tracer's own:
 * the breakpoint hit, the match spec, this function) are left out.
 * and the atom '...' last when the stack was longer than `max` frames or
 * the join was incomplete.
 */
#include "stacks/st.h"

#include <stdio.h>
#include <string.h>

#include "stacks/st_sym.h"
#include "vm/atom.h"
#include "vm/heap.h"

/* The capture and the joined frames: large, so per thread (a hit never
 * suspends while it uses them). */
static __thread StStack self_stack;
static __thread StFrame self_frames[ST_MAX_NATIVE + ST_MAX_VM];

static Term frame_term(Process *p, const StFrame *f)
{
    if (f->type == ST_F_CUT)
        return make_atom(ATOM_DOTS);   /* older VM frames left out here */
    if (f->type == ST_F_NATIVE) {
        /* name+0xoff, or 0xaddr (object file name) without a symbol:
         * short, because trace payloads are capped. */
        char name[200];
        StSym sym;
        int n;
        if (st_sym_lookup(f->ip, &sym) && sym.name) {
            n = snprintf(name, sizeof name, "%s+0x%lx", sym.name, (unsigned long)sym.offset);
        } else {
            const char *obj = sym.object ? strrchr(sym.object, '/') : NULL;
            obj = obj ? obj + 1 : sym.object ? sym.object : "?";
            n = snprintf(name, sizeof name, "0x%lx (%s)", (unsigned long)f->ip, obj);
        }
        size_t len = n < 0 ? 0 : (size_t)n < sizeof name ? (size_t)n : sizeof name - 1;
        return vm_make_binary(p, name, len);
    }
    Term mfa[4] = { make_atom(f->fn->mod), make_atom(f->fn->name), make_small(f->fn->arity),
                    make_small(f->line) };
    if (f->type == ST_F_VM)
        return vm_make_tuple(p, 4, mfa);
    Term e[2] = { make_atom(ATOM_TRACE_FRAME), vm_make_tuple(p, 3, mfa) };
    return vm_make_tuple(p, 2, e);
}

Term st_backtrace_term(Process *p, unsigned max)
{
    st_capture_self(p, &self_stack);
    bool truncated = false;
    size_t n = st_join(&self_stack, self_frames, sizeof self_frames / sizeof self_frames[0],
                       &truncated);
    /* The native frames above the innermost VM frame are the tracer's own
     * (the hit, the match spec, this function): left out. */
    size_t first = 0;
    while (first < n && self_frames[first].type == ST_F_NATIVE)
        first++;
    if (first == n)
        first = 0;
    n -= first;
    const StFrame *frames = self_frames + first;
    if (n > max) {
        n = max;
        truncated = true;
    }
    /* Built from the outermost frame kept, so the list comes out
     * innermost first; a root holds it across each allocation. */
    uint32_t rbase = p->nroots;
    tvm_term list = vm_root_push(p, truncated ? vm_make_cons(p, make_atom(ATOM_DOTS), TERM_NIL)
                                              : TERM_NIL);
    for (size_t i = n; i-- > 0;) {
        tvm_term el = vm_root_push(p, frame_term(p, &frames[i]));
        p->roots[list.h] = vm_make_cons(p, p->roots[el.h], p->roots[list.h]);
        p->nroots = el.h;
    }
    Term out = p->roots[list.h];
    p->nroots = rbase;
    return out;
}
