/*
 * vm/context.c - process (call context) state: stacks, handlers, roots
 * and exceptions.
 */
#include "vm/process.h"

#include <stdlib.h>
#include <string.h>

#include "vm/dict.h"
#include "vm/heap.h"
#include "vm/hook.h"
#include "vm/links.h"
#include "vm/print.h"
#include "vm/seqtrace.h"
#include "vm/strbuf.h"

/* Start values, on a zeroed Process whose buffers (heap, stack, frames,
 * at their start sizes) are already set. */
static void process_start(Process *p, tvm_vm *vm)
{
    p->vm = vm;
    p->env.p = p;
    p->htop = p->heap;
    p->hend = p->heap + p->heap_min;
    /* While allocation is profiled, the first allocation takes the slow
     * path, which sets up the sample point (vm/heap.c). */
    p->hlim = vm_pf_wanted(VM_PF_ALLOC) ? p->htop : p->hend;
    vm_atomic_store_relaxed(&p->heap_words, p->heap_min);
    p->stack_limit = (uint32_t)vm->stack_limit;
    Term *stack = p->stack;
    for (uint32_t i = 0, n = p->stack_size; i < n; i++)
        stack[i] = TERM_NIL;
    p->frames_limit = p->stack_limit / 4 > 64 ? p->stack_limit / 4 : 64;
    p->exc_class = p->exc_reason = TERM_NIL;
    p->exc_trace_term = THE_NONE;
    p->reds = p->reds_slice = VM_REDUCTIONS;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->il.lock, NULL);
    p->inbox_tail = &p->inbox;
    p->mq_tail = &p->mq;
    p->cursor = &p->mq;
    p->exit_class = TERM_NIL;
}

Process *vm_process_new(tvm_vm *vm)
{
    Process *p = vm_calloc(1, sizeof(Process));
    p->heap_min = vm->heap_min;
    p->heap = vm_malloc(p->heap_min * sizeof(Term));
    p->stack_size = VM_STACK_MIN_WORDS;
    p->stack = vm_malloc(p->stack_size * sizeof(Term));
    p->frames_cap = VM_FRAMES_MIN;
    p->frames = vm_malloc(p->frames_cap * sizeof(Frame));
    process_start(p, vm);
    return p;
}

bool vm_process_recyclable(const Process *p)
{
    return (size_t)(p->hend - p->heap) == p->vm->heap_min &&
           p->stack_size == VM_STACK_MIN_WORDS && p->frames_cap == VM_FRAMES_MIN &&
           p->handlers_cap <= 8 && p->roots_cap <= 32;
}

void vm_process_recycle(Process *p)
{
    tvm_vm *vm = p->vm;
    Term *heap = p->heap, *stack = p->stack, *roots = p->roots;
    Frame *frames = p->frames;
    Handler *handlers = p->handlers;
    uint32_t handlers_cap = p->handlers_cap, roots_cap = p->roots_cap;
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->il.lock);
    /* Freed at its exit already (vm/lifecycle.c); here too, so that no
     * way to the cache can hand a new process an old dictionary. */
    vm_dict_free(p);
    vm_seq_free(p);
    free(p->exc_stack);
    free(vm_atomic_load_ptr_relaxed(&p->trace_tab));
    free(p->ct_sess);
    memset(p, 0, sizeof *p);
    p->heap_min = vm->heap_min;
    p->heap = heap;
    p->stack_size = VM_STACK_MIN_WORDS;
    p->stack = stack;
    p->frames_cap = VM_FRAMES_MIN;
    p->frames = frames;
    p->handlers = handlers;
    p->handlers_cap = handlers_cap;
    p->roots = roots;
    p->roots_cap = roots_cap;
    process_start(p, vm);
}

void vm_process_free(Process *p)
{
    if (!p)
        return;
    pthread_mutex_destroy(&p->lock);
    vm_dict_free(p);
    vm_seq_free(p);
    free(p->exc_stack);
    free(vm_atomic_load_ptr_relaxed(&p->trace_tab));
    free(p->ct_sess);
    vm_links_release(p);
    free(p->heap);
    free(p->stack);
    free(p->frames);
    free(p->handlers);
    free(p->roots);
    free(p);
}

bool vm_stack_ensure(Process *p, size_t words)
{
    if (words <= p->stack_size)
        return true;
    if (words > p->stack_limit)
        return false;
    size_t n = p->stack_size;
    while (n < words)
        n *= 2;
    if (n > p->stack_limit)
        n = p->stack_limit;
    p->stack = vm_realloc(p->stack, n * sizeof(Term));
    for (size_t i = p->stack_size; i < n; i++)
        p->stack[i] = TERM_NIL;
    p->stack_size = (uint32_t)n;
    return true;
}

bool vm_frames_ensure(Process *p, uint32_t n)
{
    if (n <= p->frames_cap)
        return true;
    if (n > p->frames_limit)
        return false;
    uint32_t cap = p->frames_cap;
    while (cap < n)
        cap *= 2;
    if (cap > p->frames_limit)
        cap = p->frames_limit;
    /* Not realloc: a signal handler on this thread (a CPU profile's
     * sample, a running capture: profile/pf_sample.c, stacks/st_signal.c)
     * may interrupt the growth and copy frames through p->frames, and
     * realloc frees (and may unmap: mremap, a trimmed heap) the old array
     * before it returns the new one.  So the new array is filled and
     * published first and the old one freed after: the handler reads one
     * or the other, both whole up to nframes.  The fences keep the
     * compiler from moving the copy after the store or the store after
     * the free (vm_atomic_fence_signal). */
    Frame *old = p->frames, *grown = vm_malloc(cap * sizeof(Frame));
    memcpy(grown, old, p->frames_cap * sizeof(Frame));
    vm_atomic_fence_signal();
    p->frames = grown;
    p->frames_cap = cap;
    vm_atomic_fence_signal();
    free(old);
    return true;
}

void vm_handler_push(Process *p, uint32_t frame, uint32_t reg, const Instr *pc)
{
    if (p->nhandlers == p->handlers_cap) {
        p->handlers_cap = p->handlers_cap ? p->handlers_cap * 2 : 8;
        p->handlers = vm_realloc(p->handlers, p->handlers_cap * sizeof(Handler));
    }
    p->handlers[p->nhandlers++] = (Handler){ frame, reg, pc };
}

tvm_term vm_root_push(Process *p, Term t)
{
    if (p->nroots == p->roots_cap) {
        p->roots_cap = p->roots_cap ? p->roots_cap * 2 : 32;
        p->roots = vm_realloc(p->roots, p->roots_cap * sizeof(Term));
    }
    p->roots[p->nroots] = t;
    return (tvm_term){ p->nroots++ };
}

/* ==== exceptions ==== */

uint32_t vm_raw_frames(const Process *p, uint32_t n, const Instr *top_pc, RawFrame *out,
                       uint32_t max)
{
    uint32_t depth = 0;
    const Instr *pc = top_pc;
    for (uint32_t i = n; i-- > 0 && depth < max;) {
        const Frame *f = &p->frames[i];
        if (f->kind == FRAME_CALL && f->fn)
            out[depth++] = (RawFrame){ f->fn, pc ? vm_func_line(f->fn, pc) : 0 };
        /* The frame below resumes at its saved pc; the call is just before
         * it.  Entry frames and natives have no line to find. */
        uint32_t b = i;
        while (b > 0 && FRAME_KIND(p->frames[b - 1].kind) == FRAME_TRACE)
            b--;   /* trace frames sit between a call and its caller */
        const Frame *below = b > 0 ? &p->frames[b - 1] : NULL;
        pc = below && below->kind == FRAME_CALL && below->fn && !below->fn->native && below->pc
                 ? below->pc - 1
                 : NULL;
    }
    return depth;
}

void vm_exception_set(Process *p, Term cls, Term reason, const Instr *top_pc)
{
    p->exc_class = cls;
    p->exc_reason = reason;
    p->exc_pending = true;
    p->exc_trace_term = THE_NONE;
    if (VM_UNLIKELY(p->vm->crash_stacks))
        vm_hook_note_raise(p, top_pc);
    p->exc_depth = vm_raw_frames(p, p->nframes, top_pc, p->exc_trace, VM_STACKTRACE_DEPTH);
}

Term vm_exception_trace_term(Process *p)
{
    if (p->exc_trace_term == THE_NONE)
        p->exc_trace_term = vm_stacktrace_term(p, p->exc_trace, p->exc_depth);
    return p->exc_trace_term;
}

Term vm_stacktrace_term(Process *p, const RawFrame *frames, uint32_t n)
{
    /* Each frame: {M, F, A, [{file, F}, {line, L}]}: at most 5 + 6 + 6 + 4 + 3 + 3 words. */
    size_t per = 5 + 4 + 2 + 3 + 2 + 3 + 2 + 64;
    vm_heap_ensure(p, per * n + 2, NULL, 0);
    Term list = TERM_NIL;
    for (uint32_t i = n; i-- > 0;) {
        const RawFrame *rf = &frames[i];
        Term loc = TERM_NIL;
        if (rf->line) {
            Term *lt = vm_heap_alloc(p, 3);
            lt[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
            lt[1] = make_atom(ATOM_LINE);
            lt[2] = make_small(rf->line);
            Term *c = vm_heap_alloc(p, 2);
            c[0] = make_boxed(lt);
            c[1] = loc;
            loc = make_cons_ptr(c);
        }
        if (rf->fn->file) {
            size_t len = strlen(rf->fn->file);
            if (len > 400)
                len = 400;
            size_t words = binary_words(len);
            Term *b = vm_heap_alloc(p, words);
            b[words - 1] = 0;
            b[0] = MAKE_HEADER(IMM_HDR_BINARY, len);
            memcpy(b + 1, rf->fn->file, len);
            Term *ft = vm_heap_alloc(p, 3);
            ft[0] = MAKE_HEADER(IMM_HDR_TUPLE, 2);
            ft[1] = make_atom(ATOM_FILE);
            ft[2] = make_boxed(b);
            Term *c = vm_heap_alloc(p, 2);
            c[0] = make_boxed(ft);
            c[1] = loc;
            loc = make_cons_ptr(c);
        }
        Term *t = vm_heap_alloc(p, 5);
        t[0] = MAKE_HEADER(IMM_HDR_TUPLE, 4);
        t[1] = make_atom(rf->fn->mod);
        t[2] = make_atom(rf->fn->name);
        t[3] = make_small(rf->fn->arity);
        t[4] = loc;
        Term *c = vm_heap_alloc(p, 2);
        c[0] = make_boxed(t);
        c[1] = list;
        list = make_cons_ptr(c);
    }
    return list;
}

void vm_format_exception(Process *p, StrBuf *sb)
{
    sb_puts(sb, "exception ");
    vm_print_term(sb, p->exc_class);
    sb_puts(sb, ": ");
    vm_print_term(sb, p->exc_reason);
    sb_putc(sb, '\n');
    for (uint32_t i = 0; i < p->exc_depth; i++) {
        const RawFrame *rf = &p->exc_trace[i];
        sb_puts(sb, "  in ");
        vm_print_mfa(sb, rf->fn->mod, rf->fn->name, rf->fn->arity);
        if (rf->fn->file && rf->line)
            sb_printf(sb, " (%s:%u)", rf->fn->file, rf->line);
        else if (rf->fn->native)
            sb_puts(sb, " (native)");
        sb_putc(sb, '\n');
    }
}
