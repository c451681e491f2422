/*
 * stacks/st.h - capturing the whole stack of a process: its VM frames and
 * the native frames on its fiber, joined into one backtrace.  The
 * protocol (interlock, modes, joining) is described in docs/stacks.md;
 * the switch side of the interlock is vm/interlock_switch.h.
 *
 * A capture stores raw data only: native (return address, frame address)
 * pairs and copies of the VM frames.  Names come later, outside any
 * signal handler: st_join() puts the two together and st_format() prints
 * them (native names through stacks/st_sym.h when it is there).
 */
#ifndef STACKS_ST_H
#define STACKS_ST_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/hook.h"
#include "vm/process.h"

enum { ST_MAX_NATIVE = 128, ST_MAX_VM = 128 };

/* For code that reads another context's stack or a running process's
 * fields on purpose (the interlock orders them; see st_walk.c). */
#if defined(__clang__)
#define ST_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))
#else
#define ST_NO_SANITIZE \
    __attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize_undefined))
#endif

/* How a capture ended (StStack.result). */
typedef enum StResult {
    ST_R_OK = 0,
    ST_R_NOPROC,      /* no such process (or thread) */
    ST_R_EXITED,      /* it exited (or was exiting) */
    ST_R_NOSTACK,     /* spawned but never run: nothing on its stack yet */
    ST_R_SWITCHING,   /* kept meeting it in the middle of a context switch */
    ST_R_TIMEOUT,     /* signal mode: no answer within the timeout */
    ST_R_SIGNAL,      /* signal mode: the signal could not be sent */
} StResult;

/* Which way the stack was read (StStack.mode). */
typedef enum StMode { ST_MODE_NONE = 0, ST_MODE_CONTEXT, ST_MODE_SIGNAL, ST_MODE_SELF } StMode;

typedef struct StNative {
    uintptr_t ip;   /* frame 0: the exact pc; others: a return address */
    uintptr_t fp;   /* the frame's frame pointer (rbp while in it) */
} StNative;

typedef struct StVm {
    const FuncInfo *fn;
    const Instr *pc;      /* the frame's saved pc (Frame.pc) */
    uint32_t kind;        /* Frame.kind (FRAME_KIND gives FRAME_*) */
    uintptr_t native_fp;  /* entry frames: the activation's native frame */
} StVm;

typedef struct StStack {
    uint64_t pid;
    StResult result;
    StMode mode;
    bool waiting;         /* suspended in a receive (else runnable/running) */
    bool walk_broken;     /* the native walk met an impossible frame address */
    bool unwound;         /* the native part came from libunwind (fallback) */
    uint32_t vm_dropped;  /* oldest VM frames left out (more than ST_MAX_VM) */
    uint32_t nnative, nvm;
    StNative native[ST_MAX_NATIVE];  /* innermost first */
    StVm vm[ST_MAX_VM];              /* p->frames order: outermost first */
} StStack;

/* ---- capture ---- */

typedef struct StOptions {
    unsigned timeout_ms;  /* signal mode; 0: the configured default */
    bool unwind;          /* context mode: libunwind when the fp walk breaks */
} StOptions;

/*
 * Captures p, which the caller holds a reference to, from any thread but
 * p's own (st_capture_self there).  Never blocks p for longer than the
 * capture; returns out->result.
 */
StResult st_capture(Process *p, StStack *out, const StOptions *o);

/* Any pid (a process, or a registered thread's id), from any thread. */
StResult st_capture_pid(tvm_vm *vm, uint64_t pid, StStack *out, const StOptions *o);

/*
 * The stack of the caller itself, which runs on p (a process on its
 * fiber, or a call context on its thread; p may be NULL for a thread with
 * no VM frames): no signal, no interlock (nobody else switches p).  The
 * frames of st_capture_self itself are left out.  For the `backtrace`
 * match-spec action.
 */
void st_capture_self(Process *p, StStack *out);

/* The stack of a raise for crash reports: vm_hook_note_raise and
 * vm_hook_format_raise (vm/hook.h, defined in st_walk.c). */

/* Signal mode settings, process-wide: the real-time signal (0 keeps the
 * current one, default SIGRTMIN + 4) and the default timeout in ms (0
 * keeps it, default 50).  Any time: a capture installs the handler on
 * the signal it uses.  False (nothing changed) when signo has a handler
 * that is not ours (the profiler's timer signal, the embedder's). */
bool st_configure(int signo, unsigned timeout_ms);

/* Installs fn on signo the way every stack-walking handler is installed
 * (this file's and the profiler's): SA_SIGINFO | SA_RESTART |
 * SA_ONSTACK, every signal blocked while it runs.  0, or sigaction's
 * errno. */
int st_install_handler(int signo, void (*fn)(int, siginfo_t *, void *));
/* Whether signo is free for a stack-walking handler `ours`: it has no
 * handler (SIG_DFL or SIG_IGN) or `ours` already.  False when it has
 * another (the embedder's, the profiler's for the capture's `ours`), or
 * sigaction refuses the number.  Installing over another handler would
 * silently take its signal from its owner, so both users refuse then
 * (tvm_backtrace_config, tvm_profile_start). */
bool st_signal_free(int signo, void (*ours)(int, siginfo_t *, void *));
int st_signal_number(void);

/*
 * Registered non-VM threads (an embedder's pthreads), captured by signal
 * like a running process.  Register on the thread itself (ctx: its call
 * context, whose VM frames join the native ones, or NULL); unregister
 * before the thread exits.  Ids have ST_THREAD_ID_BIT set (never a pid);
 * 0 when the registry (64 threads) is full.
 */
#define ST_THREAD_ID_BIT ((uint64_t)1 << 63)
uint64_t st_thread_register(Process *ctx);
bool st_thread_unregister(uint64_t id);
StResult st_capture_thread(uint64_t id, StStack *out, unsigned timeout_ms);

/* ---- joining and printing ---- */

/* ST_F_CUT: where older VM frames were left out (more than ST_MAX_VM),
 * just outside the outermost one kept; `line` holds how many. */
typedef enum StFrameType { ST_F_NATIVE, ST_F_VM, ST_F_TRACE, ST_F_CUT } StFrameType;

typedef struct StFrame {
    StFrameType type;
    uintptr_t ip;          /* ST_F_NATIVE */
    const FuncInfo *fn;    /* ST_F_VM, ST_F_TRACE (the traced function) */
    uint32_t line;         /* ST_F_VM: 0 when unknown */
} StFrame;

/*
 * Joins s into out[0 .. return-1], innermost first: each interpreter
 * activation found on the native stack (by frame address) is replaced by
 * the VM frames it owns.  *truncated is set when the native walk broke,
 * frames were dropped, or activations were not all found (their frames
 * then follow at the end).
 */
size_t st_join(const StStack *s, StFrame *out, size_t max, bool *truncated);

/*
 * Prints s, one frame per line, innermost first:
 *   "  mod:fun/arity (file:line)"      a VM frame
 *   "  mod:fun/arity (native)"         a VM-level native function
 *   "  <trace> mod:fun/arity"          a return/exception trace frame
 *   "  [c] name+0xoff (object)"        a native frame (raw "[c] 0x..."
 *                                      when it has no symbol)
 *   "  ... truncated"                  last, when st_join says so
 * A failed capture prints one line saying why.  Returns the length
 * (snprintf-like: may exceed size; buf is NUL-terminated when size > 0).
 */
size_t st_format(const StStack *s, char *buf, size_t size);

/* st_format into a StrBuf (appends); _lines adds " at file:line" to
 * native frames that have DWARF line info (st_sym_srcline: slow, not for
 * hot paths). */
struct StrBuf;
void st_format_sb(const StStack *s, struct StrBuf *sb);
void st_format_lines(const StStack *s, struct StrBuf *sb, bool native_lines);

/*
 * The caller's own stack (it runs on p) as a term on p's heap, innermost
 * first (the tracer's own native frames left out), at most `max` frames:
 * {M,F,A,Line}, {trace_frame,{M,F,A}}, <<"name+0xoff">> for native frames,
 * then '...' when cut or incomplete (stacks/st_term.c).  For the
 * `backtrace` match-spec action.
 */
Term st_backtrace_term(Process *p, unsigned max);

/* A readable name of a result ("ok", "exited", ...). */
const char *st_result_name(StResult r);

/* ---- internal, shared by the stacks/ files ---- */

/* Bounded frame-pointer walk from (ip, fp) inside [lo, hi). */
uint32_t st_walk_fp(uintptr_t ip, uintptr_t fp, uintptr_t lo, uintptr_t hi, StNative *out,
                    uint32_t max, bool *broken);
/*
 * The walk of a signal handler, from an interrupted (ip, fp, sp): the
 * frame-pointer walk, and when it does not give a whole stack (ip in
 * code built without frame pointers, a C library routine or the vDSO,
 * whose rbp may be any value) a recovery: the words above sp are scanned
 * for a frame record (a saved frame pointer above it, then a return
 * address into tracevm's own code, which keeps frame pointers), and the
 * walk goes on from there.  The frames between ip and that record's
 * function are left out.  With a bottom (a fiber's: vm_fiber_entry_ret),
 * a walk is whole only if it ends there (or fills max); a recovery that
 * is not whole is dropped, leaving frame 0 alone and *broken set.
 * Async-signal-safe: loads within [lo, hi) and of our own code only.
 */
uint32_t st_walk_interrupted(uintptr_t ip, uintptr_t fp, uintptr_t sp, uintptr_t lo,
                             uintptr_t hi, uintptr_t bottom, StNative *out, uint32_t max,
                             bool *broken);
/* Learns the bounds of the object holding tracevm's code, once (a
 * capture's or a profile's start, outside any handler, before its signal
 * is armed: st_walk_interrupted's recovery needs them). */
void st_walk_learn_text(void);
/* libunwind from a suspended fiber's saved registers (never in a handler). */
uint32_t st_walk_unwind(const uintptr_t *saved, uintptr_t lo, uintptr_t hi, StNative *out,
                        uint32_t max);
/* The calling thread's stack (cached per thread; not in a handler). */
void st_thread_bounds(uintptr_t *lo, uintptr_t *hi);
/* Copies p's innermost VM frames, at most ST_MAX_VM, into out (outermost
 * first) and returns how many; *dropped counts the older ones left out.
 * When some are, out[0] is the entry frame of the activation the cut
 * falls in, so that st_join places the kept part of it where it runs.
 * Async-signal-safe; the caller makes sure the frames hold still. */
uint32_t st_copy_frames(const Process *p, StVm *out, uint32_t *dropped);
/* st_copy_frames into out->vm, out->nvm and out->vm_dropped. */
void st_copy_vm(const Process *p, StStack *out);
/* Signal mode: the stack of p, RUNNING on `thread` (traced is held). */
StResult st_signal_capture(Process *p, pthread_t thread, StStack *out, unsigned timeout_ms);

#endif /* STACKS_ST_H */
