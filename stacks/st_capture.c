/*
 * stacks/st_capture.c - the tracer side of the interlock and context
 * mode: capturing a process from another thread.
 *
 * Protocol (docs/stacks.md has the essay; vm/interlock_switch.h the switch
 * side).  A capture of p:
 *   1. takes p->il.lock (one tracer of p at a time; tracers of different
 *      processes run in parallel), then lets a switch of p that an earlier
 *      capture made wait go through first (let_waiter_pass: no tracer
 *      starves the process by capturing it back to back);
 *   2. stores traced = 1 with a full barrier and loads the state word
 *      (acquire): from here on, a switch of p that has not yet checked
 *      traced waits for us;
 *   3. by the state: EXITED -> "exited"; NOSTACK or CREATED -> "no
 *      stack"; generation (pid) not the one asked for -> "no process";
 *      SUSPENDED with a saved sp -> context mode (4); RUNNING -> signal
 *      mode (st_signal.c) to the thread running it; SUSPENDED without a
 *      saved sp (its switch is still saving it) -> retry;
 *   4. context mode: the bounded walk from the saved registers and the
 *      copy of the VM frames, then the word is loaded again: a different
 *      word means p was switched in meanwhile (the race the switch side
 *      leaves to us), and the capture is retried;
 *   5. clears traced (release) and unlocks.
 * Retries are bounded (ST_RETRIES, with a short pause between): a
 * process that keeps switching gets "switching", never an endless spin
 * (brpc's lesson: do not spin on a state the target may leave and enter
 * again).  Holding traced across the retries is what makes them rare: a
 * switch that sees it waits.
 */
#include "stacks/st.h"

#include <sched.h>
#include <string.h>
#include <time.h>

#include "vm/arch.h"
#include "vm/interlock_switch.h"
#include "vm/sched.h"

enum { ST_RETRIES = 8 };

/* Context mode, steps 4's first half: reads the saved context (p is
 * SUSPENDED and its sp is saved).  Validated by the caller.
 *
 * The saved words: written by the switch (vm_fiber_switch's stores, then
 * its release store of fiber->sp, [IL4]), over stack words p's own code
 * wrote before; those writes are ordered before these reads by [IL1] (the
 * release store of SUSPENDED) and our load of the word, the saved words
 * by [IL4] and our acquire load of the sp ([IL4'], saved_sp), and these
 * reads before p's next writes by [IL2]/[IL2'] (traced).  The one case left is the
 * window the interlock leaves to validation: a switch-in that checked
 * traced before we set it runs p while we read here, so the reads are
 * relaxed atomic loads (racy by design, not by accident), and attempt()
 * throws the result away when the word or the saved sp has changed. */
static void read_context(Process *p, const uintptr_t *saved, StStack *out, const StOptions *o)
{
    uintptr_t lo = (uintptr_t)p->fiber->stack_lo, hi = (uintptr_t)p->fiber->stack_hi;
    out->unwound = false;
    if ((uintptr_t)saved < lo || (uintptr_t)saved > hi - FIBER_SAVED_WORDS * 8) {
        out->nnative = 0;
        out->walk_broken = true;
    } else {
        uintptr_t rip = vm_atomic_peek_relaxed(&saved[FIBER_SAVED_PC]);
        uintptr_t rbp = vm_atomic_peek_relaxed(&saved[FIBER_SAVED_FP]);
        out->nnative = st_walk_fp(rip, rbp, lo, hi,
                                  out->native, ST_MAX_NATIVE, &out->walk_broken);
        if (out->walk_broken && o && o->unwind) {
            StNative alt[ST_MAX_NATIVE];
            uint32_t n = st_walk_unwind(saved, lo, hi, alt, ST_MAX_NATIVE);
            if (n > out->nnative) {
                memcpy(out->native, alt, n * sizeof alt[0]);
                out->nnative = n;
                out->unwound = true;
            }
        }
    }
    st_copy_vm(p, out);
}

/* The thread running p, as its scheduler recorded it (written before
 * the RUNNING store we acquired; read outside the sanitizer's view, like
 * the two fields below, which belong to p's owner). */
ST_NO_SANITIZE static pthread_t thread_of(Process *p)
{
    Scheduler *volatile *s = (Scheduler *volatile *)&p->sched;
    return (*s)->thread;
}

/* [IL4'] acquire: pairs with [IL4], the switch's release store of the
 * saved sp after the saved words (vm/fiber_<arch>.S): a tracer that sees
 * the sp sees the words under it.  On x86-64 both are plain moves; on
 * aarch64 the stlr and this ldar keep the words from arriving after the
 * sp. */
ST_NO_SANITIZE static const uintptr_t *saved_sp(Process *p)
{
    return (const uintptr_t *)vm_atomic_peek_acquire((const uintptr_t *)&p->fiber->sp);
}

ST_NO_SANITIZE static bool is_waiting(Process *p)
{
    return *(volatile int *)&p->state == PS_WAITING;
}

/* One attempt (steps 3 and 4); ST_R_SWITCHING asks for another. */
static StResult attempt(Process *p, StStack *out, const StOptions *o, unsigned timeout_ms)
{
    /* Step 2's load: sequentially consistent (the reaper's Dekker); also
     * [IL1'], the acquire that pairs with the release store of SUSPENDED
     * ([IL1], vm_il_switch_out): p's stack writes before it come before
     * our reads of its saved context. */
    uintptr_t w = vm_atomic_load_rmw_full(&p->il.word);
    if (p->il.gen != out->pid)
        return ST_R_NOPROC;
    switch (IL_STATE_OF(w)) {
    case IL_EXITED:
        return ST_R_EXITED;
    case IL_CREATED:
    case IL_NOSTACK:
        return ST_R_NOSTACK;
    case IL_RUNNING:
        out->mode = ST_MODE_SIGNAL;
        return st_signal_capture(p, thread_of(p), out, timeout_ms);
    default:
        break;
    }
    /* SUSPENDED: the saved sp is there once the switch has stored it. */
    const uintptr_t *saved = saved_sp(p);
    if (!saved)
        return ST_R_SWITCHING;
    out->mode = ST_MODE_CONTEXT;
    out->waiting = is_waiting(p);
    read_context(p, saved, out, o);
    /* [ST-V] validation, a seqlock's read side: the re-load must come
     * after the reads it validates; pairs with [IL3], the switch-in's
     * store-store fence after RUNNING and the cleared sp.  On x86-64 loads
     * stay in order (a compiler barrier); aarch64 may satisfy the re-load
     * before the walk's loads, which would validate a walk of frames
     * written after the switch-in: dmb ishld. */
    vm_atomic_fence_acquire();
    if (vm_atomic_load_relaxed(&p->il.word) != w || saved_sp(p) != saved)
        return ST_R_SWITCHING;
    return ST_R_OK;
}

static void clear(StStack *out, uint64_t pid)
{
    out->pid = pid;
    out->result = ST_R_OK;
    out->mode = ST_MODE_NONE;
    out->waiting = out->walk_broken = out->unwound = false;
    out->vm_dropped = out->nnative = out->nvm = 0;
}

/* Step 1's end: a switch (or a reaper) of p that an earlier capture made
 * wait is still waiting (VmInterlock.waiting); with `traced` clear it
 * goes on as soon as its thread runs, and the lock we hold keeps every
 * other tracer from setting `traced` again meanwhile.  Without this, a
 * tracer capturing p back to back can set `traced` again before the
 * waiter ever sees it clear, and starve p for as long as it keeps
 * capturing (seen with two busy vCPUs and a loop of captures). */
static void let_waiter_pass(Process *p)
{
    for (unsigned i = 0; vm_atomic_load_acquire(&p->il.waiting); i++) {
        if (i < 64)
            vm_cpu_relax();
        else
            sched_yield();
    }
}

StResult st_capture(Process *p, StStack *out, const StOptions *o)
{
    clear(out, p->pid);
    unsigned timeout_ms = o && o->timeout_ms ? o->timeout_ms : 0;
    pthread_mutex_lock(&p->il.lock);
    let_waiter_pass(p);
    vm_atomic_fetch_add_full(&p->il.traced, 1);   /* 0 -> 1: a full store */
    StResult r = ST_R_SWITCHING;
    for (int i = 0; i < ST_RETRIES && r == ST_R_SWITCHING; i++) {
        if (i > 0) {
            /* Let the switch we met finish (it does not wait for us:
             * it passed its check before our store). */
            struct timespec ts = { 0, 1000L << (i - 1) };
            nanosleep(&ts, NULL);
        }
        out->nnative = out->nvm = 0;
        r = attempt(p, out, o, timeout_ms);
    }
    /* [IL2] release: our reads of p's stack before the clear; pairs with
     * [IL2'], the acquire check of traced when p is switched in again. */
    vm_atomic_store_release(&p->il.traced, 0);
    pthread_mutex_unlock(&p->il.lock);
    if (r != ST_R_OK)
        out->nnative = out->nvm = 0;
    out->result = r;
    return r;
}

/*
 * Any target by id, from any thread: a registered thread (signal mode,
 * or self), the caller's own process (self mode), or another process
 * (st_capture above), looked up and held by a reference for the capture.
 */
StResult st_capture_pid(tvm_vm *vm, uint64_t pid, StStack *s, const StOptions *o)
{
    if (pid & ST_THREAD_ID_BIT)
        return st_capture_thread(pid, s, o ? o->timeout_ms : 0);
    SchedSystem *sys = vm_sched_of(vm);
    Process *p = sys ? vm_proc_get(sys, pid) : NULL;
    if (!p) {
        clear(s, pid);
        s->result = ST_R_NOPROC;
        return s->result;
    }
    if (vm_running_process() == p)
        st_capture_self(p, s);
    else
        st_capture(p, s, o);
    vm_proc_put(sys, p);
    return s->result;
}

const char *st_result_name(StResult r)
{
    switch (r) {
    case ST_R_OK: return "ok";
    case ST_R_NOPROC: return "no such process";
    case ST_R_EXITED: return "exited";
    case ST_R_NOSTACK: return "not started yet (no stack)";
    case ST_R_SWITCHING: return "in a context switch at every try";
    case ST_R_TIMEOUT: return "signal timed out";
    case ST_R_SIGNAL: return "signal could not be sent";
    }
    return "?";
}
