/*
 * vm/interp.c - the interpreter.
 *
 * vm_execute() runs one *activation*: it pushes an entry frame, then the
 * called function's frame, and runs instructions until that function
 * returns into the entry frame (OP_STOP) or an exception escapes every
 * handler of this activation.  VM calls never recurse in C: a call pushes
 * a Frame and jumps.  Only a native that calls back into VM code starts a
 * nested activation (a C-level recursion), which is what makes mixed
 * VM + native stacks.
 *
 * Hot state lives in locals: pc (next instruction), insn (the word being
 * executed), reg (the current register window) and f (the top frame).
 * Anything that can move the register stack or the frame stack (a stack
 * check, a native call) is followed by RELOAD(), and anything that can
 * collect is free to do so because the collector updates registers in
 * place and never moves the register stack.
 */
#include "vm/interp.h"

#include <string.h>

#include "vm/breakpoint.h"
#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/hook.h"
#include "vm/lend.h"
#include "vm/process.h"
#include "vm/procinfo.h"
#include "vm/sched.h"
#include "vm/fiber.h"

/* The continuation of every entry frame. */
static const Instr stop_code[1] = { (Instr)OP_STOP };

/* Builds the {Tag, Value} reason of errors such as {badarity, F}. */
static Term make_pair(Process *p, Term a, Term b)
{
    Term e[2] = { a, b };
    return vm_make_tuple(p, 2, e);
}

/* Small-integer arithmetic that the fast path could not finish. */
static bool arith_slow(unsigned op, Term a, Term b, Term *out)
{
    if (!term_is_small(a) || !term_is_small(b))
        return false;
    int64_t x = small_value(a), y = small_value(b), r;
    switch (op) {
    case OP_ADD: r = x + y; break; /* 62-bit operands: cannot overflow 64 */
    case OP_SUB: r = x - y; break;
    case OP_MUL:
        if (__builtin_mul_overflow(x, y, &r))
            return false;
        break;
    case OP_DIV:
        if (y == 0)
            return false;
        r = x / y;
        break;
    case OP_REM:
        if (y == 0)
            return false;
        r = x % y;
        break;
    case OP_BSL:
    case OP_BSR: {
        int64_t s = op == OP_BSL ? y : -y;
        if (s >= 0) {
            if (x == 0) {
                r = 0;
                break;
            }
            if (s >= 62)
                return false;
            r = (int64_t)((uint64_t)x << s);
            if ((r >> s) != x)
                return false;
        } else {
            r = s <= -63 ? (x < 0 ? -1 : 0) : x >> -s;
        }
        break;
    }
    default:
        return false;
    }
    if (!small_fits(r))
        return false;
    *out = make_small(r);
    return true;
}

static bool is_class(Term t)
{
    return t == make_atom(ATOM_ERROR) || t == make_atom(ATOM_THROW) ||
           t == make_atom(ATOM_EXIT);
}

/*
 * The comparisons of two registers, A and B of insn: one pass of at most
 * cmp_first steps, and only if that runs out, vm/lend.h's
 * vm_compare_long (the whole comparison, with p's queue lent).  That
 * call reads the registers again from reg and insn, which the
 * interpreter keeps anyway: the fast path keeps nothing else live across
 * its call of term_compare_steps.
 */
static __attribute__((noinline)) int cmp_regs_long(Process *p, const Term *reg, Instr insn)
{
    return vm_compare_long(p, reg[INSTR_A(insn)], reg[INSTR_B(insn)]);
}

/* Exact equality with an immediate fast path (immediates are canonical):
 * 1 equal, 0 not, -1 when the comparison ran out of steps
 * (TERM_CMP_LIMIT: the caller raises system_limit). */
static inline int eq_regs(Process *p, const Term *reg, Instr insn)
{
    Term a = reg[INSTR_A(insn)], b = reg[INSTR_B(insn)];
    if (a == b)
        return 1;
    if ((a | b) & 2)
        return 0;
    int c = term_compare_steps(a, b, p->vm->cmp_first);
    if (VM_UNLIKELY(c == TERM_CMP_LIMIT))
        c = cmp_regs_long(p, reg, insn);
    return c == 0 ? 1 : c == TERM_CMP_LIMIT ? -1 : 0;
}

/* A < B: 1, 0, or -1 as eq_regs. */
static inline int lt_regs(Process *p, const Term *reg, Instr insn)
{
    Term a = reg[INSTR_A(insn)], b = reg[INSTR_B(insn)];
    if (VM_LIKELY((a & b & TAG_MASK) == TAG_SMALL))
        return (int64_t)a < (int64_t)b;
    int c = term_compare_steps(a, b, p->vm->cmp_first);
    if (VM_UNLIKELY(c == TERM_CMP_LIMIT))
        c = cmp_regs_long(p, reg, insn);
    return c == TERM_CMP_LIMIT ? -1 : c < 0;
}

/* a < the small integer b: one step at most (a term of another type
 * compares by its type alone). */
static inline int lt_small(const Process *p, Term a, Term b)
{
    if (VM_LIKELY(term_is_small(a)))
        return (int64_t)a < (int64_t)b;
    int c = term_compare_steps(a, b, p->vm->cmp_steps);
    return c == TERM_CMP_LIMIT ? -1 : c < 0;
}

static tvm_status execute(Process *p, const FuncInfo *fn, int argc, const Term *args,
                          Term *result);

tvm_status vm_execute(Process *p, const FuncInfo *fn, int argc, const Term *args,
                      Term *result)
{
    /* On a fiber the bound is the native stack left, not the count: an
     * activation costs a few KiB of it (VM_NATIVE_STACK_RESERVE). */
    if (p->nesting >= VM_MAX_NESTING ||
        (p->fiber && (char *)__builtin_frame_address(0) <
                         p->fiber->stack_lo + VM_NATIVE_STACK_RESERVE)) {
        vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(ATOM_SYSTEM_LIMIT), NULL);
        return TVM_EXCEPTION;
    }
    p->nesting++;
    uint32_t entry_top = p->entry_top;
    tvm_status st = execute(p, fn, argc, args, result);
    p->entry_top = entry_top;
    p->nesting--;
    return st;
}

/* One activation (see the file comment); vm_execute() bounds the nesting. */
static tvm_status execute(Process *p, const FuncInfo *fn, int argc, const Term *args,
                          Term *result)
{
    /* ---- set up the activation: entry frame, then fn's frame ---- */
    uint32_t base0 = 0;
    if (p->nframes) {
        const Frame *top = &p->frames[p->nframes - 1];
        base0 = top->base + (top->fn ? top->fn->nregs : 1);
    }
    if (!vm_frames_ensure(p, p->nframes + 2) ||
        !vm_stack_ensure(p, (size_t)base0 + (argc > 0 ? (size_t)argc : 1))) {
        vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(ATOM_SYSTEM_LIMIT), NULL);
        return TVM_EXCEPTION;
    }
    const uint32_t entry = p->nframes;
    p->frames[entry] = (Frame){ NULL, stop_code, base0, p->entry_top, p->nhandlers, FRAME_ENTRY,
                                { __builtin_frame_address(0) } };
    memcpy(p->stack + base0, args, (size_t)argc * sizeof(Term));
    p->frames[entry + 1] = (Frame){ fn, NULL, base0, 0, p->nhandlers, FRAME_CALL, { NULL } };
    p->nframes = entry + 2;
    p->entry_top = entry + 1;   /* vm_execute puts the enclosing one back */

    Frame *f = &p->frames[entry + 1];
    Term *reg = p->stack + base0;
    const Instr *pc = fn->code;
    Instr insn;
    Term tmp;

/* Re-derives the locals after something may have moved the stacks. */
#define RELOAD() (f = &p->frames[p->nframes - 1], reg = p->stack + f->base)
#define A INSTR_A(insn)
#define B INSTR_B(insn)
#define C INSTR_C(insn)
#define RAISE_ERROR(reason)                                                 \
    do {                                                                    \
        tmp = (reason);                                                     \
        vm_exception_set(p, make_atom(ATOM_ERROR), tmp, pc);                \
        goto unwind;                                                        \
    } while (0)

#if VM_COMPUTED_GOTO
    static const void *const labels[OP__COUNT] = {
#define X(nm, mn, fm, ru, fl) [OP_##nm] = &&L_##nm,
#include "vm/opcodes.def"
#undef X
    };
#define CASE(nm) L_##nm:
#define DISPATCH_INSN() goto *labels[INSTR_OP(insn)]
#define DISPATCH() do { insn = vm_code_fetch(pc); DISPATCH_INSN(); } while (0)
    DISPATCH();
#else
#define CASE(nm) case OP_##nm:
#define DISPATCH_INSN() goto dispatch_insn
#define DISPATCH() goto dispatch_top
dispatch_top:
    insn = vm_code_fetch(pc);
dispatch_insn: __attribute__((unused));
    switch (INSTR_OP(insn)) {
#endif
#define NEXT(n) do { pc += (n); DISPATCH(); } while (0)

    CASE(ENTER) {
        /* A = registers of the function.  A reduction per call. */
        if (VM_UNLIKELY(--p->reds <= 0)) {
            f->pc = pc;   /* the line of a suspended frame (stacks/st_join.c) */
            if (VM_UNLIKELY(vm_yield_point(p)))
                goto killed;
        }
        if (VM_UNLIKELY(f->base + A > p->stack_size)) {
            if (!vm_stack_ensure(p, (size_t)f->base + A))
                RAISE_ERROR(make_atom(ATOM_SYSTEM_LIMIT));
            RELOAD();
        }
        NEXT(1);
    }

    CASE(MOVE) { reg[A] = reg[B]; NEXT(1); }
    CASE(LOADI) { reg[A] = make_small(INSTR_CS(insn)); NEXT(1); }
    CASE(LOADK) { reg[A] = (Term)pc[1]; NEXT(2); }

    CASE(ADD) {
        Term a = reg[B], b = reg[C];
        int64_t r;
        if (VM_LIKELY((a & b & TAG_MASK) == TAG_SMALL) &&
            !__builtin_add_overflow((int64_t)a, (int64_t)b - TAG_SMALL, &r)) {
            reg[A] = (Term)r;
            NEXT(1);
        }
        goto arith;
    }
    CASE(SUB) {
        Term a = reg[B], b = reg[C];
        int64_t r;
        if (VM_LIKELY((a & b & TAG_MASK) == TAG_SMALL) &&
            !__builtin_sub_overflow((int64_t)a, (int64_t)b - TAG_SMALL, &r)) {
            reg[A] = (Term)r;
            NEXT(1);
        }
        goto arith;
    }
    CASE(ADDI) {
        Term a = reg[B];
        int64_t r;
        if (VM_LIKELY(term_is_small(a)) &&
            !__builtin_add_overflow((int64_t)a, (int64_t)INSTR_CS(insn) * 4, &r)) {
            reg[A] = (Term)r;
            NEXT(1);
        }
        RAISE_ERROR(make_atom(ATOM_BADARITH));
    }
    CASE(MUL) goto arith;
    CASE(DIV) goto arith;
    CASE(REM) goto arith;
    CASE(BSL) goto arith;
    CASE(BSR) goto arith;
    CASE(BAND) {
        Term a = reg[B], b = reg[C];
        if ((a & b & TAG_MASK) != TAG_SMALL)
            RAISE_ERROR(make_atom(ATOM_BADARITH));
        reg[A] = a & b;
        NEXT(1);
    }
    CASE(BOR) {
        Term a = reg[B], b = reg[C];
        if ((a & b & TAG_MASK) != TAG_SMALL)
            RAISE_ERROR(make_atom(ATOM_BADARITH));
        reg[A] = a | b;
        NEXT(1);
    }
    CASE(BXOR) {
        Term a = reg[B], b = reg[C];
        if ((a & b & TAG_MASK) != TAG_SMALL)
            RAISE_ERROR(make_atom(ATOM_BADARITH));
        reg[A] = (a ^ b) | TAG_SMALL;
        NEXT(1);
    }
arith:
    if (!arith_slow(INSTR_OP(insn), reg[B], reg[C], &tmp))
        RAISE_ERROR(make_atom(ATOM_BADARITH));
    reg[A] = tmp;
    NEXT(1);

    /* A comparison that ran out of steps (-1) raises system_limit. */
#define CMP_BRANCH(r, want)                                                 \
    do {                                                                    \
        int r_ = (r);                                                       \
        if (r_ == (want))                                                   \
            NEXT(INSTR_CS(insn));                                           \
        if (VM_UNLIKELY(r_ < 0))                                            \
            RAISE_ERROR(make_atom(ATOM_SYSTEM_LIMIT));                      \
        NEXT(1);                                                            \
    } while (0)
    CASE(JLT) { CMP_BRANCH(lt_regs(p, reg, insn), 1); }
    CASE(JGE) { CMP_BRANCH(lt_regs(p, reg, insn), 0); }
    CASE(JEQ) { CMP_BRANCH(eq_regs(p, reg, insn), 1); }
    CASE(JNE) { CMP_BRANCH(eq_regs(p, reg, insn), 0); }
    CASE(JLTI) { CMP_BRANCH(lt_small(p, reg[A], make_small(INSTR_BS(insn))), 1); }
    CASE(JGEI) { CMP_BRANCH(lt_small(p, reg[A], make_small(INSTR_BS(insn))), 0); }
#undef CMP_BRANCH
    CASE(JEQI) { if (reg[A] == make_small(INSTR_BS(insn))) NEXT(INSTR_CS(insn)); NEXT(1); }
    CASE(JNEI) { if (reg[A] != make_small(INSTR_BS(insn))) NEXT(INSTR_CS(insn)); NEXT(1); }
    CASE(JUMP) {
        int off = INSTR_CS(insn);
        /* A backward jump is a loop iteration: it costs a reduction. */
        if (off <= 0 && VM_UNLIKELY(--p->reds <= 0)) {
            f->pc = pc;
            if (VM_UNLIKELY(vm_yield_point(p)))
                goto killed;
        }
        NEXT(off);
    }

#define TYPE_TEST(nm, test) \
    CASE(nm) { if (!(test)) NEXT(INSTR_CS(insn)); NEXT(1); }
    TYPE_TEST(IS_INT, term_is_small(reg[A]))
    TYPE_TEST(IS_ATOM, term_is_atom(reg[A]))
    TYPE_TEST(IS_TUPLE, term_is_tuple(reg[A]))
    TYPE_TEST(IS_LIST, term_is_list(reg[A]))
    TYPE_TEST(IS_CONS, term_is_cons(reg[A]))
    TYPE_TEST(IS_NIL, term_is_nil(reg[A]))
    TYPE_TEST(IS_BINARY, term_is_binary(reg[A]))
    TYPE_TEST(IS_FUN, term_is_fun(reg[A]))
    TYPE_TEST(IS_PID, term_is_pid(reg[A]))
    TYPE_TEST(IS_TUPLE_OF, term_is_tuple(reg[A]) && tuple_arity(reg[A]) == B)
#undef TYPE_TEST

    CASE(TUPLE) {
        uint32_t n = B;
        vm_heap_ensure(p, 1 + (size_t)n, NULL, 0);
        Term *t = vm_heap_alloc(p, 1 + (size_t)n);
        t[0] = MAKE_HEADER(IMM_HDR_TUPLE, n);
        memcpy(t + 1, reg + C, n * sizeof(Term));
        reg[A] = make_boxed(t);
        NEXT(1);
    }
    CASE(GETEL) {
        Term t = reg[B];
        if (!term_is_tuple(t) || C < 1 || C > tuple_arity(t))
            RAISE_ERROR(make_atom(ATOM_BADARG));
        reg[A] = tuple_elems(t)[C - 1];
        NEXT(1);
    }
    CASE(CONS) {
        vm_heap_ensure(p, 2, NULL, 0);
        Term *c = vm_heap_alloc(p, 2);
        c[0] = reg[B];
        c[1] = reg[C];
        reg[A] = make_cons_ptr(c);
        NEXT(1);
    }
    CASE(HD) {
        if (!term_is_cons(reg[B]))
            RAISE_ERROR(make_atom(ATOM_BADARG));
        reg[A] = cons_head(reg[B]);
        NEXT(1);
    }
    CASE(TL) {
        if (!term_is_cons(reg[B]))
            RAISE_ERROR(make_atom(ATOM_BADARG));
        reg[A] = cons_tail(reg[B]);
        NEXT(1);
    }

    {
        const FuncInfo *callee;
        uint32_t argbase;
    CASE(CALL)
        callee = (const FuncInfo *)pc[1];
        argbase = B;
        goto do_call;
    CASE(CALLX)
        callee = vm_export_target(p->vm, (const Export *)pc[1]);
        argbase = B;
        goto do_call;
    CASE(CALLF) {
        Term fun = reg[B];
        if (!term_is_fun(fun))
            RAISE_ERROR(make_pair(p, make_atom(ATOM_BADFUN), reg[B]));
        const Export *e = fun_export(fun);
        if (e->arity != C)
            RAISE_ERROR(make_pair(p, make_atom(ATOM_BADARITY), reg[B]));
        callee = vm_export_target(p->vm, e);
        argbase = B + 1;
    }
    do_call:
        f->pc = pc + vm_opinfo[INSTR_OP(insn)].words;
        if (VM_UNLIKELY(p->nframes == p->frames_cap)) {
            if (!vm_frames_ensure(p, p->nframes + 1))
                RAISE_ERROR(make_atom(ATOM_SYSTEM_LIMIT));
            RELOAD();
        }
        f[1] = (Frame){ callee, NULL, f->base + argbase, A, p->nhandlers, FRAME_CALL, { NULL } };
        f++;
        p->nframes++;
        reg += argbase;
        pc = callee->code;
        DISPATCH();

    CASE(TAILCALL)
        callee = (const FuncInfo *)pc[1];
        goto do_tail;
    CASE(TAILCALLX)
        callee = vm_export_target(p->vm, (const Export *)pc[1]);
    do_tail:
        if (A)
            memmove(reg, reg + A, callee->arity * sizeof(Term));
        p->nhandlers = f->hbase;
        f->fn = callee;
        pc = callee->code;
        DISPATCH();
    }

    CASE(RET) {
        Term val = reg[A];
    do_return:
        p->nhandlers = f->hbase;
        uint32_t ret_reg = f->ret_reg;
        p->nframes--;
        f--;
        reg = p->stack + f->base;
        reg[ret_reg] = val;
        pc = f->pc;
        DISPATCH();

    CASE(NATIVE) {
        const FuncInfo *fi = f->fn;
        uint32_t rbase = p->nroots;
        tvm_term argv[VM_MAX_ARITY];
        for (uint32_t i = 0; i < fi->arity; i++)
            argv[i] = vm_root_push(p, reg[i]);
        tvm_term res = { UINT32_MAX }; /* a native that sets no result gets badarg */
        f->pc = pc;
        /* An embedder's native may block or compute for long: while it
         * runs, processes queued behind p on this scheduler's local queue
         * may be taken by idle schedulers (vm/sched.c, "Lending the local
         * queue").  On one scheduler nothing (vm_sched_lend_useful);
         * else with an empty queue two plain stores, with a backlog one
         * atomic RMW at the call and one CAS at the return; the VM's own
         * natives pay two predicted tests here, and lend by themselves
         * when their arguments ask for long work (vm/bif.c,
         * lend_if_long). */
        bool lent = VM_UNLIKELY(fi->lends) && vm_sched_lend_useful(p) && vm_sched_lend(p);
        tvm_status st = fi->native(&p->env, fi->arity, argv, &res, fi->native_data);
        if (VM_UNLIKELY(lent))
            vm_sched_lend_end(p);
        RELOAD();
        /* A native that took the heap over max_heap_size: the process dies
         * as it returns (a native call is no reduction check), before it
         * can go and wait holding that heap. */
        if (VM_UNLIKELY(p->kill)) {
            p->nroots = rbase;
            goto killed;
        }
        if (st == TVM_OK && res.h < p->nroots) {
            val = p->roots[res.h];
            p->nroots = rbase;
            goto do_return;
        }
        p->nroots = rbase;
        if (st != TVM_EXCEPTION || !p->exc_pending)
            RAISE_ERROR(make_atom(ATOM_BADARG));
        goto unwind;
    }

    /* A traced activation returned into its trace frame (r0 of the
     * frame's window holds the value): report, then return it. */
    CASE(RETURN_TRACE) {
        /* The trace frame's window comes back from vm_hook_trace_return (read
         * there early): one dependent load less before the return. */
        reg = vm_hook_trace_return(p);
        f = &p->frames[p->nframes - 1];
        val = reg[0];
        goto do_return;
    }
    }

    CASE(UNDEF) RAISE_ERROR(make_atom(ATOM_UNDEF));

    CASE(TRY) {
        vm_handler_push(p, p->nframes - 1, A, pc + INSTR_CS(insn));
        NEXT(1);
    }
    CASE(ENDTRY) {
        if (p->nhandlers > f->hbase)
            p->nhandlers--;
        NEXT(1);
    }
    CASE(RAISE) {
        if (!is_class(reg[A]))
            RAISE_ERROR(make_atom(ATOM_BADARG));
        vm_exception_set(p, reg[A], reg[B], pc);
        goto unwind;
    }

    CASE(RECV) {
        if (!*p->cursor)
            vm_proc_fetch_any(p);
        const Message *m = *p->cursor;
        if (!m)
            NEXT(INSTR_CS(insn));
        /* A fresh copy on the heap each time the cursor reads a message,
         * so matching code never holds pointers into the message.  A long
         * copy lends p's queue (vm/lend.h). */
        bool lent = vm_lend_if_long(p, m->words);
        vm_heap_ensure(p, m->words, NULL, 0);
        reg[A] = vm_copy_term(p, m->term);
        vm_lend_done(p, lent);
        NEXT(1);
    }
    CASE(RECV_NEXT) {
        if (*p->cursor)
            p->cursor = &(*p->cursor)->next;
        NEXT(1);
    }
    CASE(ACCEPT) {
        if (*p->cursor)
            vm_proc_accept(p);
        NEXT(1);
    }
    CASE(WAIT) {
        Term t = reg[A];
        int64_t ms;
        if (t == make_atom(ATOM_INFINITY))
            ms = -1;
        else if (term_is_small(t) && small_value(t) >= 0)
            ms = small_value(t);
        else
            RAISE_ERROR(make_atom(ATOM_BADARG));
        f->pc = pc;
        int got = vm_receive_wait(p, ms);
        if (VM_UNLIKELY(p->kill))
            goto killed;   /* it did not wait (vm_proc_wait) */
        if (got < 0)
            RAISE_ERROR(make_atom(ATOM_BADARG));
        RELOAD();
        if (!got) {
            p->cursor = &p->mq;
            NEXT(INSTR_CS(insn));
        }
        NEXT(1);
    }
    CASE(SELF) {
        reg[A] = p->pid ? make_pid(p->pid) : make_atom(ATOM_UNDEFINED);
        NEXT(1);
    }

    /*
     * A breakpoint hit (vm/breakpoint.h).  The record is reached
     * through the running frame's function: the armed function itself
     * (BREAKPOINT, local), or the trampoline the export entry pointed at
     * (BREAKPOINT_TRAMP, global).  Everything needed from the record is
     * copied out before the hook runs: the hook may suspend the process,
     * and a record may be freed once this thread has been quiescent.  For
     * the same reason a trampoline hands the frame to the real function
     * before the hook, so nothing (a stack listing while the hook is
     * suspended) finds the trampoline in a frame after it could be freed.
     * TRAMP is a constant in each expansion, so neither kind tests it.
     */
#define BP_HIT(TRAMP)                                                          \
    do {                                                                       \
        const BpRecord *r = (const BpRecord *)vm_atomic_load_ptr_relaxed(&f->fn->bp); \
        const BpGen *g = &r->gen[vm_atomic_load_relaxed(&p->vm->bp_ix)];      \
        const Instr orig = (TRAMP) ? 0 : f->fn->bp_orig;                       \
        const uint32_t fl = g->flags;                                          \
        if (TRAMP) {                                                           \
            const FuncInfo *target = bp_cold(r)->target;                       \
            f->fn = target;                                                    \
            pc = target->code;                                                 \
        }                                                                      \
        if (fl & BP_COUNT_ACTIVE) {                                            \
            VmAtomic *n = &g->count->shard[p->bp_slot].n;                      \
            if (VM_LIKELY(p->bp_slot != 0))                                    \
                /* This scheduler is the shard's only writer. */               \
                vm_atomic_store_relaxed(n, vm_atomic_load_relaxed(n) + 1);     \
            else                                                               \
                vm_atomic_fetch_add_relaxed(n, 1);                             \
        }                                                                      \
        /* The process's flag first: an untraced process (the common case)   \
         * falls through after one load and two tests. */                     \
        const uintptr_t pf = vm_atomic_load_relaxed(&p->trace);              \
        if ((VM_UNLIKELY(pf & VM_TRACE_CALL) && (fl & BP_CALL_TRACED)) ||      \
            VM_UNLIKELY(fl & BP_ANY_PROCESS)) {                                \
            f->pc = pc;                                                        \
            bool ok = vm_hook_bp_hit(p, g, fl, f->fn, pf, reg);                        \
            RELOAD();                                                          \
            if (VM_UNLIKELY(!ok))                                              \
                RAISE_ERROR(make_atom(ATOM_SYSTEM_LIMIT));                     \
        }                                                                      \
        if (TRAMP)                                                             \
            DISPATCH();     /* the real function's first word */               \
        insn = orig;                                                           \
        DISPATCH_INSN();                                                       \
    } while (0)

    CASE(BREAKPOINT) { BP_HIT(false); }
    CASE(BREAKPOINT_TRAMP) { BP_HIT(true); }
#undef BP_HIT

    CASE(STOP) {
        /* The function called by this activation returned into its entry frame. */
        *result = reg[0];
        p->nframes = entry;
        return TVM_OK;
    }

#if !VM_COMPUTED_GOTO
    default:
        VM_UNREACHABLE();
    }
#endif

killed:
    /* The process is being killed (Process.kill): exit with its reason. */
    vm_exception_set(p, make_atom(ATOM_EXIT), p->kill, pc);
    /* fall through */
unwind:
    /*
     * An exception is pending in p->exc_*.  The innermost handler of this
     * activation (one whose frame is above the entry frame) catches it;
     * otherwise the activation ends with TVM_EXCEPTION.  A process being
     * killed is caught by nothing: every activation ends, as BEAM's kill
     * signal is untrappable.
     */
    if (p->nhandlers > p->frames[entry].hbase &&
        p->handlers[p->nhandlers - 1].frame > entry && VM_LIKELY(!p->kill)) {
        if (VM_UNLIKELY(p->ntrace)) {
            uint32_t hf = p->handlers[p->nhandlers - 1].frame;
            vm_hook_trace_unwind(p, hf + 1, (int)hf, entry == 0);
        }
        Handler h = p->handlers[--p->nhandlers];
        p->exc_pending = false;
        p->nframes = h.frame + 1;
        RELOAD();
        Term trace = vm_exception_trace_term(p);
        reg[h.reg] = p->exc_class;
        reg[h.reg + 1] = p->exc_reason;
        reg[h.reg + 2] = trace;
        pc = h.pc;
        DISPATCH();
    }
    if (VM_UNLIKELY(p->ntrace))
        vm_hook_trace_unwind(p, entry, -1, entry == 0);
    p->nhandlers = p->frames[entry].hbase;
    p->nframes = entry;
    return TVM_EXCEPTION;

#undef RELOAD
#undef A
#undef B
#undef C
#undef RAISE_ERROR
#undef CASE
#undef DISPATCH_INSN
#undef DISPATCH
#undef NEXT
}

bool vm_yield_point(Process *p)
{
    /* Exit signals are taken in at each reduction check, so that a
     * process that never receives still dies of one within a slice. */
    if (VM_UNLIKELY(p->kill) || vm_proc_signalled(p))
        return true;
    /* Another process asked for its frames while it ran (vm/procinfo.c):
     * its frames are as the caller left them, the top one's pc set. */
    if (VM_UNLIKELY(vm_atomic_load_relaxed(&p->info_reqs)))
        vm_procinfo_serve(p);
    /*
     * A call context runs on its caller's thread and has nobody to yield
     * to, so its time slice simply starts again.  A process on a
     * scheduler gives the scheduler to others here.
     */
    vm_reds_account(p);
    if (p->fiber)
        vm_proc_yield(p);
    /* A signal that came while it was switched out. */
    return vm_proc_signalled(p);
}

void vm_proc_fetch_any(Process *p)
{
    if (p->fiber)
        vm_proc_fetch(p);
}

int vm_receive_wait(Process *p, int64_t ms)
{
    if (!p->fiber) {
        /* A call context cannot be suspended; it may only poll. */
        return ms == 0 ? 0 : -1;
    }
    return vm_proc_wait(p, ms) ? 1 : 0;
}
