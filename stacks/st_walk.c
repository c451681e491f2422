/*
 * stacks/st_walk.c - reading a stack: the bounded frame-pointer walk, the
 * libunwind fallback for code without frame pointers, and the copy of a
 * process's VM frames.
 *
 * The walk reads words of a stack that is not the caller's own (another
 * fiber's, or, in a signal handler, the interrupted code's).  Every
 * address is checked against the stack's exact bounds before it is read,
 * so a corrupt chain ends the walk instead of faulting; the checks (the
 * union of the ones gperftools' stacktrace_x86-inl.h, absl's
 * stacktrace_x86-inl.inc and async-profiler's stackWalker.cpp make; the
 * same hold for AAPCS64's frame records, {saved x29, x30} at x29, laid
 * out as x86_64's {saved rbp, return address} at rbp: docs/stacks.md):
 *   - fp 8-aligned, lo <= fp and fp + 16 <= hi;
 *   - the next fp strictly above this one (the stack grows down) and at
 *     most ST_MAX_FRAME bytes above it; 0 is the end (vm_fiber_entry
 *     zeroes the frame pointer, so every fiber's chain ends in 0);
 *   - a return address of 0 ends the walk;
 *   - at most `max` frames.
 * These reads race, by design, with nothing the interlock allows (the
 * stack holds still, or the walker runs on the stack's own thread); a
 * capture that lost the one race the interlock leaves to validation is
 * thrown away.  The sanitizers are told to look away (ST_NO_SANITIZE):
 * the words read are other frames' locals and redzones.
 */
#define _GNU_SOURCE
#include "stacks/st.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "vm/common.h"
#include "vm/fiber.h"
#include "vm/strbuf.h"

/* A frame bigger than this is taken for a corrupt chain (absl: 100 kB). */
#define ST_MAX_FRAME ((uintptr_t)128 * 1024)

ST_NO_SANITIZE
uint32_t st_walk_fp(uintptr_t ip, uintptr_t fp, uintptr_t lo, uintptr_t hi, StNative *out,
                    uint32_t max, bool *broken)
{
    uint32_t n = 0;
    *broken = false;
    if (max == 0 || ip == 0)
        return 0;
    out[n++] = (StNative){ ip, fp };
    while (n < max && fp != 0) {
        if ((fp & 7) || fp < lo || fp > hi - 16) {
            *broken = true;
            break;
        }
        const volatile uintptr_t *w = (const volatile uintptr_t *)fp;
        uintptr_t next = w[0], ret = w[1];
        if (ret == 0)
            break;
        if (next != 0 && (next <= fp || next - fp > ST_MAX_FRAME)) {
            /* The return address is still good (it was read from inside
             * the bounds); the chain above it is not. */
            out[n++] = (StNative){ ret, 0 };
            *broken = true;
            break;
        }
        out[n++] = (StNative){ ret, next };
        fp = next;
    }
    return n;
}

/* The executable segment of the object that holds tracevm's code, which
 * is built with frame pointers (st_walk_learn_text).  Written once, under
 * learn_once, by the first capture or profile before it arms its signal
 * (a capture's release of its slot, a profile's release of the session,
 * order the write before the handlers' reads); read by handlers.  Before,
 * every new capture signal wrote it again while a profile's handler read
 * it (ThreadSanitizer, stress_deep_frames), and a profile in a process
 * that had taken no capture ran without it (no recovery). */
static uintptr_t text_lo, text_hi;

static int find_text(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t self = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (self >= lo && self < hi) {
            text_lo = lo;
            text_hi = hi;
            return 1;
        }
    }
    return 0;
}

static pthread_once_t learn_once = PTHREAD_ONCE_INIT;

static void learn_text(void)
{
    dl_iterate_phdr(find_text, (void *)(uintptr_t)&st_walk_fp);
}

void st_walk_learn_text(void)
{
    pthread_once(&learn_once, learn_text);
}

/* How far above sp the recovery looks for a frame record. */
#define ST_SCAN_BYTES 4096u

static bool st_in_text(uintptr_t a)
{
    return a >= text_lo && a < text_hi;
}

#if defined(__x86_64__)
/* The length of a ModRM operand (ModRM, SIB, displacement). */
static unsigned st_modrm_len(uint8_t m)
{
    unsigned mod = m >> 6, rm = m & 7;
    if (mod == 3)
        return 1;
    unsigned n = 1 + (rm == 4);
    if (mod == 0)
        return n + (rm == 5 ? 4 : 0);
    return n + (mod == 1 ? 1 : 4);
}
#endif

/*
 * Whether a word read off the stack is one of our return addresses: in
 * our text, just after a call.  On x86_64 a call is E8 rel32, or FF /2 in
 * any operand form; on aarch64 the instruction before the return address
 * is BL imm26 (100101 imm26) or BLR Xn (1101011000111111000000 Rn 00000).
 * A function pointer or a constant that falls in our text (a callback
 * argument, a saved callee-saved register) is not, and taking it for one
 * made up frames.
 */
ST_NO_SANITIZE static bool st_after_call(uintptr_t ra)
{
    if (!st_in_text(ra) || ra - 8 < text_lo)
        return false;
#if defined(__x86_64__)
    const volatile uint8_t *c = (const volatile uint8_t *)ra;
    if (c[-5] == 0xe8)
        return true;
    for (unsigned k = 2; k <= 7; k++)
        if (c[-(int)k] == 0xff && (c[1 - (int)k] & 0x38) == 0x10 &&
            st_modrm_len(c[1 - (int)k]) == k - 1)
            return true;
    return false;
#else
    if (ra & 3)
        return false;
    uint32_t insn = ((const volatile uint32_t *)ra)[-1];
    return (insn & 0xfc000000u) == 0x94000000u || (insn & 0xfffffc1fu) == 0xd63f0000u;
#endif
}

/* Whether out[0..n) is a whole walk: it reached `bottom` (the fiber's
 * vm_fiber_entry frame, whose saved frame pointer is 0), or filled max;
 * without a bottom (a thread's stack), any end is taken. */
static bool st_whole(const StNative *out, uint32_t n, uint32_t max, uintptr_t bottom)
{
    return !bottom || n == max || (n > 0 && out[n - 1].ip == bottom && out[n - 1].fp == 0);
}

/*
 * The frame of the record found at a (interrupted at ip, sp), into
 * out[k], returns k + 1, or k when there is none to add.  In our code
 * (frame pointers everywhere) the first record above sp is ip's own
 * frame's: frame 0 gets fp a.  In foreign code, the record belongs to
 * the function of ours it was called from (or to a foreign function that
 * saved a frame record), whose pc is the return address of that call: the first
 * one between sp and a.  Without that frame, a record that is the
 * interpreter's would be skipped, and its activation joined below the
 * fiber's bottom.
 */
ST_NO_SANITIZE static uint32_t st_record_owner(uintptr_t ip, uintptr_t sp, uintptr_t a,
                                               StNative *out, uint32_t k)
{
    if (st_in_text(ip)) {
        out[0].fp = a;
        return k;
    }
    for (uintptr_t x = sp; x < a; x += 8) {
        uintptr_t r = *(const volatile uintptr_t *)x;
        if (st_after_call(r)) {
            out[k] = (StNative){ r, a };
            return k + 1;
        }
    }
    return k;
}

ST_NO_SANITIZE
uint32_t st_walk_interrupted(uintptr_t ip, uintptr_t fp, uintptr_t sp, uintptr_t lo,
                             uintptr_t hi, uintptr_t bottom, StNative *out, uint32_t max,
                             bool *broken)
{
    if (max == 0 || ip == 0)
        return 0;
    /* In vm_fiber_entry before its call of the body: the bottom itself. */
    if (bottom && ip >= (uintptr_t)&vm_fiber_entry && ip <= bottom) {
        out[0] = (StNative){ ip, 0 };
        *broken = false;
        return 1;
    }
    /* A live frame's record is at or above sp: a frame pointer below it points at
     * dead frames (foreign code may leave any value there). */
    uint32_t n = 1;
    out[0] = (StNative){ ip, 0 };
    *broken = true;
    if (fp >= sp)
        n = st_walk_fp(ip, fp, lo, hi, out, max, broken);
    if (!*broken && st_whole(out, n, max, bottom))
        return n;
    /* Not whole: a chain cut short in our code stays as far as it went
     * (marked broken); from foreign code, whose frame pointer may be any value,
     * nothing past frame 0 is kept unless the recovery gives a whole
     * walk. */
    *broken = true;
    if (st_in_text(ip) && n > 1)
        return n;
    out[0].fp = 0;
    if (max < 3 || text_hi == 0 || (sp & 7) || sp < lo || sp > hi - 16)
        return 1;
    uintptr_t end = sp + ST_SCAN_BYTES < hi - 16 ? sp + ST_SCAN_BYTES : hi - 16;
    for (uintptr_t a = sp; a <= end; a += 8) {
        const volatile uintptr_t *w = (const volatile uintptr_t *)a;
        uintptr_t next = w[0], ret = w[1];
        if ((next & 7) || !st_after_call(ret))
            continue;
        if (next != 0 && (next <= a || next > hi - 16 || next - a > ST_MAX_FRAME))
            continue;
        /* A frame record at a: its function's return address and the
         * caller's frame pointer; walk on from the caller.  Taken only if
         * that walk is whole (a word pair that merely looks like a record
         * leads nowhere near the fiber's bottom). */
        uint32_t k = st_record_owner(ip, sp, a, out, 1);
        bool b;
        uint32_t m = k + st_walk_fp(ret, next, lo, hi, out + k, max - k, &b);
        if (!b && st_whole(out, m, max, bottom)) {
            *broken = false;
            return m;
        }
        out[0].fp = 0;
    }
    return 1;
}

/*
 * libunwind, for code built without frame pointers (the VM and its
 * embedders are built with them; third-party libraries may not be).
 * Context mode only, never in a signal handler: the DWARF path takes the
 * loader lock (dl_iterate_phdr) and libunwind's global cache lock.  The
 * calls:
 *   unw_init_local(cursor, uc)  a cursor over a context we build from the
 *                               saved registers (pc = the saved resume
 *                               address, sp = the address just past the
 *                               saved words, the frame pointer and the
 *                               callee-saved registers as saved:
 *                               st_saved_context), since the registers are
 *                               not live in any thread;
 *   unw_step(cursor)            one frame up, by the CFI (.eh_frame);
 *   unw_get_reg(UNW_REG_IP / UNW_REG_SP / the frame pointer)
 *                               the frame's pc, CFA (checked against the
 *                               fiber's bounds before the next step, which
 *                               reads below it) and frame pointer.
 */
/* A libunwind context from the words vm_fiber_switch saved at `saved`
 * (vm/fiber_<arch>.S): the callee-saved registers, the frame pointer, the
 * resume address as the pc and the stack pointer past the saved words. */
ST_NO_SANITIZE static void st_saved_context(const uintptr_t *saved, unw_context_t *uc)
{
    memset(uc, 0, sizeof *uc);
#if defined(__x86_64__)
    greg_t *g = uc->uc_mcontext.gregs;
    g[REG_R15] = (greg_t)saved[0];
    g[REG_R14] = (greg_t)saved[1];
    g[REG_R13] = (greg_t)saved[2];
    g[REG_R12] = (greg_t)saved[3];
    g[REG_RBX] = (greg_t)saved[4];
    g[REG_RBP] = (greg_t)saved[FIBER_SAVED_FP];
    g[REG_RIP] = (greg_t)saved[FIBER_SAVED_PC];
    g[REG_RSP] = (greg_t)(uintptr_t)(saved + FIBER_SAVED_WORDS);
#else
    for (int r = 19; r <= 28; r++)
        uc->uc_mcontext.regs[r] = saved[2 + r - 19];
    uc->uc_mcontext.regs[29] = saved[FIBER_SAVED_FP];
    uc->uc_mcontext.regs[30] = saved[FIBER_SAVED_PC];
    uc->uc_mcontext.pc = saved[FIBER_SAVED_PC];
    uc->uc_mcontext.sp = (uintptr_t)(saved + FIBER_SAVED_WORDS);
#endif
}

#if defined(__x86_64__)
#define ST_UNW_FP UNW_X86_64_RBP
#else
#define ST_UNW_FP UNW_AARCH64_X29
#endif

ST_NO_SANITIZE
uint32_t st_walk_unwind(const uintptr_t *saved, uintptr_t lo, uintptr_t hi, StNative *out,
                        uint32_t max)
{
    unw_context_t uc;
    st_saved_context(saved, &uc);
    unw_cursor_t c;
    if (unw_init_local(&c, &uc) != 0)
        return 0;
    uint32_t n = 0;
    while (n < max) {
        unw_word_t ip = 0, sp = 0, bp = 0;
        unw_get_reg(&c, UNW_REG_IP, &ip);
        unw_get_reg(&c, UNW_REG_SP, &sp);
        unw_get_reg(&c, ST_UNW_FP, &bp);
        /* sp == hi: the bottom frame (vm_fiber_entry), whose stack
         * pointer is the top of the stack */
        if (ip == 0 || sp < lo || sp > hi)
            break;
        out[n++] = (StNative){ (uintptr_t)ip, (uintptr_t)bp };
        if (unw_step(&c) <= 0)
            break;
    }
    return n;
}

/*
 * The entry frame of the activation that frame `cut` belongs to: the
 * innermost entry at or below it, found through the chain that starts at
 * Process.entry_top (each entry frame's ret_reg links to the enclosing
 * activation's).  UINT32_MAX when the chain does not lead there: every
 * link is checked (below n, of an entry frame, strictly outward), since a
 * handler may catch it mid-update.  As many steps as activations.
 */
ST_NO_SANITIZE static uint32_t entry_of_cut(const Process *p, const Frame *fr, uint32_t n,
                                            uint32_t cut)
{
    uint32_t e = *(volatile const uint32_t *)&p->entry_top;
    while (e > 0) {
        uint32_t i = e - 1;
        if (i >= n || FRAME_KIND(fr[i].kind) != FRAME_ENTRY)
            return UINT32_MAX;
        if (i <= cut)
            return i;
        uint32_t prev = fr[i].ret_reg;
        if (prev >= e)
            return UINT32_MAX;
        e = prev;
    }
    return UINT32_MAX;
}

ST_NO_SANITIZE
uint32_t st_copy_frames(const Process *p, StVm *out, uint32_t *dropped)
{
    uint32_t n = p->nframes, cap = p->frames_cap;
    const Frame *fr = p->frames;
    if (n > cap)
        n = cap;
    uint32_t start = n > ST_MAX_VM ? n - ST_MAX_VM : 0, k = 0;
    /* A cut inside an activation: its entry frame takes the oldest kept
     * frame's place, so that st_join still finds the activation among the
     * native frames; without it the kept frames would follow every native
     * frame, below the fiber's first. */
    uint32_t e = start > 0 ? entry_of_cut(p, fr, n, start) : UINT32_MAX;
    if (e < start) {
        out[k++] = (StVm){ NULL, fr[e].pc, fr[e].kind, (uintptr_t)fr[e].native_fp };
        start++;
    }
    for (uint32_t i = start; i < n; i++) {
        const Frame *f = &fr[i];
        uint32_t kind = f->kind;
        out[k++] = (StVm){ f->fn, f->pc, kind,
                           FRAME_KIND(kind) == FRAME_ENTRY ? (uintptr_t)f->native_fp : 0 };
    }
    *dropped = n - k;
    return k;
}

ST_NO_SANITIZE
void st_copy_vm(const Process *p, StStack *out)
{
    out->nvm = st_copy_frames(p, out->vm, &out->vm_dropped);
}

/* The calling thread's stack bounds, looked up once per thread
 * (pthread_getattr_np is not async-signal-safe: never from a handler). */
void st_thread_bounds(uintptr_t *lo, uintptr_t *hi)
{
    static _Thread_local uintptr_t tlo, thi;
    if (!thi) {
        pthread_attr_t a;
        void *addr = NULL;
        size_t size = 0;
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
            pthread_attr_getstack(&a, &addr, &size);
            pthread_attr_destroy(&a);
        }
        tlo = (uintptr_t)addr;
        thi = tlo + size;
    }
    *lo = tlo;
    *hi = thi;
}

/*
 * The caller's own stack.  The walk starts in this function's caller
 * (its return address and saved frame pointer), so st_capture_self's own
 * frame is not in it.
 */
__attribute__((noinline)) ST_NO_SANITIZE
void st_capture_self(Process *p, StStack *out)
{
    out->pid = p ? p->pid : 0;
    out->result = ST_R_OK;
    out->mode = ST_MODE_SELF;
    out->waiting = false;
    out->unwound = false;
    uintptr_t *fp = __builtin_frame_address(0);
    uintptr_t lo, hi;
    if (p && p->fiber) {
        lo = (uintptr_t)p->fiber->stack_lo;
        hi = (uintptr_t)p->fiber->stack_hi;
    } else {
        st_thread_bounds(&lo, &hi);
    }
    out->nnative = st_walk_fp(fp[1], fp[0], lo, hi, out->native, ST_MAX_NATIVE,
                              &out->walk_broken);
    if (p)
        st_copy_vm(p, out);
    else
        out->nvm = out->vm_dropped = 0;
}

/* The frames of vm_hook_note_raise and vm_exception_set are not the raise's. */
enum { RAISE_SKIP = 2 };

void vm_hook_note_raise(Process *p, const Instr *top_pc)
{
    if (!p->exc_stack)
        p->exc_stack = vm_malloc(sizeof(StStack));
    StStack *s = p->exc_stack;
    st_capture_self(p, s);
    if (s->nnative > RAISE_SKIP) {
        memmove(s->native, s->native + RAISE_SKIP, (s->nnative - RAISE_SKIP) * sizeof s->native[0]);
        s->nnative -= RAISE_SKIP;
    }
    /* The top frame raised at top_pc (NULL: a native raised; its frame
     * keeps the pc of its NATIVE instruction). */
    if (top_pc && s->nvm > 0 && FRAME_KIND(s->vm[s->nvm - 1].kind) == FRAME_CALL)
        s->vm[s->nvm - 1].pc = top_pc;
}

void vm_hook_note_fault(Process *p, uintptr_t pc, uintptr_t fp)
{
    if (!p->exc_stack)
        p->exc_stack = vm_malloc(sizeof(StStack));
    StStack *s = p->exc_stack;
    s->pid = p->pid;
    s->result = ST_R_OK;
    s->mode = ST_MODE_SIGNAL;
    s->waiting = false;
    s->unwound = false;
    s->nnative = st_walk_fp(pc, fp, (uintptr_t)p->fiber->stack_lo, (uintptr_t)p->fiber->stack_hi,
                            s->native, ST_MAX_NATIVE, &s->walk_broken);
    st_copy_vm(p, s);
}

void vm_hook_format_raise(const Process *p, StrBuf *sb)
{
    st_format_sb(p->exc_stack, sb);
}
