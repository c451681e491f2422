/*
 * stacks/st_signal.c - signal mode: the stack of a RUNNING process (or of
 * a registered thread), read by a signal handler on the thread that runs
 * it, and the registry of non-VM threads.
 *
 * Protocol.  The tracer (holding the process's interlock, so the process
 * cannot switch away: it would wait on its own thread, where the signal
 * finds it) claims a slot from a static pool, arms it with a new sequence
 * number and sends pthread_sigqueue(thread, signo, {seq, slot}).  The
 * handler (SA_SIGINFO | SA_RESTART | SA_ONSTACK, every signal blocked
 * while it runs, errno saved) claims the slot only if it is still armed
 * with that very sequence number (a CAS of the whole slot word, so a late
 * signal never touches a slot abandoned or reused since), walks the
 * interrupted stack into it, copies the VM frames, and posts completion
 * (a release store of DONE and a futex wake).  No malloc, no lock, no
 * libunwind: only loads within known bounds, one CAS, one store and one
 * system call.  The tracer waits on the slot word with a timeout; on
 * timeout it takes the slot back with a CAS from ARMED, and a handler
 * that comes later fails its own CAS and does nothing.  If the CAS finds
 * the handler at work instead, the tracer waits for it to finish (it
 * takes well under a microsecond) and uses the result.  Slots are never
 * freed: nothing a late handler could write to goes away.
 *
 * The handler recognises an interrupted context switch (the pc inside
 * vm_fiber_switch / vm_fiber_switch_peer, or the stack pointer outside
 * the fiber of the process the scheduler says is current) and a process
 * that is no longer the current one, and answers "switching" instead of
 * walking; the tracer then tries again.
 */
#define _GNU_SOURCE
#include "stacks/st.h"

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "vm/arch.h"
#include "vm/arch_ucontext.h"
#include "vm/common.h"
#include "vm/fiber.h"
#include "vm/sched.h"

enum { SLOT_BITS = 5, ST_SLOTS = 1 << SLOT_BITS };
/* Slot word: seq << 2 | state. */
enum { SL_FREE = 0, SL_ARMED = 1, SL_BUSY = 2, SL_DONE = 3 };
#define SL_WORD(seq, st) ((uintptr_t)(seq) << 2 | (st))

/* What a handler found (Slot.answer). */
enum { ANS_OK, ANS_SWITCHING };

typedef struct Slot {
    /* seq << 2 | SL_*.  FREE -> (claim: DONE with a new seq, owned by the
     * tracer) -> ARMED (release, tracer) -> BUSY (CAS, handler) -> DONE
     * (release, handler) -> FREE (tracer); or ARMED -> FREE (CAS, tracer
     * abandoning it).  The futex word is its low half. */
    VmAtomic word;
    /* Written by the tracer before arming; read by the handler. */
    Process *p;                 /* NULL: a registered thread */
    uintptr_t lo, hi;           /* that thread's stack */
    Process *ctx;               /* that thread's call context, or NULL */
    /* Written by the handler before DONE; read by the tracer after. */
    int answer;
    StStack stack;
} Slot;

static Slot slots[ST_SLOTS];
static VmAtomic next_seq = VM_ATOMIC_INIT(1);
static VmAtomic signo_cfg;      /* 0 until configured: SIGRTMIN + 4 */
static VmAtomic timeout_cfg = VM_ATOMIC_INIT(50);
/* The signals that have our handler, bit signo - 1 (real-time signals
 * are 64 at most).  Set under install_lock, after the sigaction, with a
 * release ([SI1]); a round trip loads it with acquire ([SI1']) before
 * it sends that signal.  The handler stays on a signal for the life of
 * the OS process, so a signal still pending when the configuration
 * changes never meets the default action (which ends the process). */
static VmAtomic installed;
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;

static void handler(int sig, siginfo_t *si, void *ucv);

bool st_signal_free(int signo, void (*ours)(int, siginfo_t *, void *))
{
    struct sigaction old;
    if (sigaction(signo, NULL, &old) != 0)
        return false;
    if (old.sa_flags & SA_SIGINFO)
        return old.sa_sigaction == ours;
    return old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN;
}

bool st_configure(int signo, unsigned timeout_ms)
{
    if (signo > 0 && !st_signal_free(signo, handler))
        return false;
    if (signo > 0)
        vm_atomic_store_relaxed(&signo_cfg, (uintptr_t)signo);
    if (timeout_ms > 0)
        vm_atomic_store_relaxed(&timeout_cfg, timeout_ms);
    return true;
}

int st_signal_number(void)
{
    uintptr_t s = vm_atomic_load_relaxed(&signo_cfg);
    return s ? (int)s : SIGRTMIN + 4;
}

/* ---- the handler ---- */

ST_NO_SANITIZE static bool in_switch(uintptr_t pc)
{
    return pc >= (uintptr_t)&vm_fiber_switch && pc < (uintptr_t)vm_fiber_switch_end;
}

/* Whether every activation among the copied VM frames has its
 * interpreter's frame (Frame.native_fp) in the native walk, as st_join
 * needs to put its frames in place. */
ST_NO_SANITIZE static bool st_has_activations(const StStack *out)
{
    for (uint32_t i = 0; i < out->nvm; i++) {
        if (FRAME_KIND(out->vm[i].kind) != FRAME_ENTRY)
            continue;
        uint32_t j = 0;
        while (j < out->nnative && out->native[j].fp != out->vm[i].native_fp)
            j++;
        if (j == out->nnative)
            return false;
    }
    return true;
}

/*
 * Whether the interrupted registers still describe the stack.  Without
 * ThreadSanitizer the handler runs at the interruption: always.  TSan
 * defers an asynchronous signal to its next interceptor call and then
 * runs the handler with the registers saved at arrival; the frames they
 * point to are still in place only if the handler runs on the same stack
 * below them (else the stack has moved on, or the handler runs on the
 * alternate signal stack, and the capture is tried again).
 */
ST_NO_SANITIZE static bool st_registers_current(uintptr_t sp, uintptr_t lo, uintptr_t hi)
{
#if defined(VM_TSAN)
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    return here >= lo && here < sp && here < hi;
#else
    (void)sp, (void)lo, (void)hi;
    return true;
#endif
}

/* Fills the slot from the interrupted context (async-signal-safe). */
ST_NO_SANITIZE static void fill(Slot *s, const ucontext_t *uc)
{
    uintptr_t pc = vm_uc_pc(uc), fp = vm_uc_fp(uc), sp = vm_uc_sp(uc);
    StStack *out = &s->stack;
    uintptr_t lo = s->lo, hi = s->hi;
    Process *vmp = s->ctx;
    if (s->p) {
        Process *cur = vm_running_process();
        if (cur != s->p || !cur->fiber || in_switch(pc)) {
            s->answer = ANS_SWITCHING;
            return;
        }
        lo = (uintptr_t)cur->fiber->stack_lo;
        hi = (uintptr_t)cur->fiber->stack_hi;
        vmp = cur;
    }
    if (sp < lo || sp >= hi || !st_registers_current(sp, lo, hi)) {
        s->answer = ANS_SWITCHING;
        return;
    }
    uintptr_t bottom = s->p ? vm_fiber_entry_ret : 0;
    out->nnative = st_walk_interrupted(pc, fp, sp, lo, hi, bottom, out->native, ST_MAX_NATIVE,
                                       &out->walk_broken);
    if (vmp)
        st_copy_vm(vmp, out);
    else
        out->nvm = out->vm_dropped = 0;
    if (s->p && !st_has_activations(out)) {
        /* The walk missed an interpreter frame (a chain that skipped it):
         * joined, its VM frames would come after the fiber's bottom.
         * Keep frame 0 and mark the cut; the VM frames follow it. */
        out->nnative = 1;
        out->native[0].fp = 0;
        out->walk_broken = true;
    }
    s->answer = ANS_OK;
}

static void futex_wake(VmAtomic *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

ST_NO_SANITIZE static void handler(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    int saved_errno = errno;
    uintptr_t v = (uintptr_t)si->si_value.sival_ptr;
    if (si->si_code == SI_QUEUE && si->si_pid == getpid()) {
        Slot *s = &slots[v & (ST_SLOTS - 1)];
        uintptr_t seq = v >> SLOT_BITS;
        if (vm_atomic_cas_full(&s->word, SL_WORD(seq, SL_ARMED), SL_WORD(seq, SL_BUSY))) {
            fill(s, ucv);
            vm_atomic_store_release(&s->word, SL_WORD(seq, SL_DONE));
            futex_wake(&s->word);
        }
    }
    errno = saved_errno;
}

int st_install_handler(int signo, void (*fn)(int, siginfo_t *, void *))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigfillset(&sa.sa_mask);
    return sigaction(signo, &sa, NULL) != 0 ? errno : 0;
}

/* The signal captures use now, with our handler installed on it first
 * (the first time it is used: the configured signal may change between
 * captures). */
static int installed_signal(void)
{
    int signo = st_signal_number();
    uintptr_t bit = (uintptr_t)1 << (signo - 1);
    /* [SI1'] acquire: pairs with [SI1]; the handler is in place. */
    if (vm_atomic_load_acquire(&installed) & bit)
        return signo;
    pthread_mutex_lock(&install_lock);
    if (!(vm_atomic_load_relaxed(&installed) & bit)) {
        st_walk_learn_text();
        if (st_install_handler(signo, handler) != 0)
            vm_die("sigaction for the stack-capture signal");
        /* [SI1] release: the handler before the bit that says so. */
        vm_atomic_store_release(&installed, vm_atomic_load_relaxed(&installed) | bit);
    }
    pthread_mutex_unlock(&install_lock);
    return signo;
}

/* ---- the tracer ---- */

/* A free slot, owned by the caller (state DONE with a fresh seq). */
static Slot *claim(uintptr_t *seq)
{
    for (unsigned round = 0;; round++) {
        for (unsigned i = 0; i < ST_SLOTS; i++) {
            uintptr_t w = vm_atomic_load_relaxed(&slots[i].word);
            if ((w & 3) != SL_FREE)
                continue;
            uintptr_t n = vm_atomic_fetch_add_relaxed(&next_seq, 1);
            if (vm_atomic_cas_full(&slots[i].word, w, SL_WORD(n, SL_DONE))) {
                *seq = n;
                return &slots[i];
            }
        }
        /* All slots in flight (each for at most a timeout). */
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How long a requester polls before it sleeps on the futex: a handler
 * answers within a few microseconds, and waking a thread from a futex
 * sleep costs 30 us more on an idle VM (measured: running captures took
 * 35 us median on a quiet machine, 4 us on a busy one, where the CPU never
 * went idle). */
#define ST_SPIN_NS 50000u

/* Waits for the handler; false on timeout with the slot taken back. */
static bool wait_done(Slot *s, uintptr_t seq, unsigned timeout_ms)
{
    uint64_t start = now_ns(), deadline = start + (uint64_t)timeout_ms * 1000000u;
    for (unsigned i = 0;; i++) {
        if (vm_atomic_load_acquire(&s->word) == SL_WORD(seq, SL_DONE))
            return true;
        if ((i & 63) == 63 && now_ns() - start >= ST_SPIN_NS)
            break;
        vm_cpu_relax();
    }
    for (;;) {
        uintptr_t w = vm_atomic_load_acquire(&s->word);
        if (w == SL_WORD(seq, SL_DONE))
            return true;
        uint64_t now = now_ns();
        if (now >= deadline)
            break;
        uint64_t left = deadline - now;
        struct timespec rel = { (time_t)(left / 1000000000u), (long)(left % 1000000000u) };
        syscall(SYS_futex, (uint32_t *)&s->word, FUTEX_WAIT_PRIVATE, (uint32_t)w, &rel, NULL, 0);
    }
    if (vm_atomic_cas_full(&s->word, SL_WORD(seq, SL_ARMED), SL_WORD(seq, SL_FREE)))
        return false;
    /* The handler claimed it just in time: it finishes in microseconds. */
    while (vm_atomic_load_acquire(&s->word) != SL_WORD(seq, SL_DONE))
        sched_yield();
    return true;
}

/* One round trip to `thread`; the slot's target fields set by the caller
 * through `target`. */
static StResult round_trip(pthread_t thread, Process *p, uintptr_t lo, uintptr_t hi, Process *ctx,
                           StStack *out, unsigned timeout_ms)
{
    int signo = installed_signal();
    if (!timeout_ms)
        timeout_ms = (unsigned)vm_atomic_load_relaxed(&timeout_cfg);
    uintptr_t seq;
    Slot *s = claim(&seq);
    s->p = p;
    s->lo = lo;
    s->hi = hi;
    s->ctx = ctx;
    s->answer = ANS_SWITCHING;
    vm_atomic_store_release(&s->word, SL_WORD(seq, SL_ARMED));
    union sigval val = { .sival_ptr = (void *)(seq << SLOT_BITS | (uintptr_t)(s - slots)) };
    int rc;
    for (int i = 0; (rc = pthread_sigqueue(thread, signo, val)) == EAGAIN && i < 3; i++)
        sched_yield();
    if (rc != 0) {
        if (vm_atomic_cas_full(&s->word, SL_WORD(seq, SL_ARMED), SL_WORD(seq, SL_FREE)))
            return ST_R_SIGNAL;
    }
    if (!wait_done(s, seq, timeout_ms))
        return ST_R_TIMEOUT;
    StResult r = s->answer == ANS_OK ? ST_R_OK : ST_R_SWITCHING;
    if (r == ST_R_OK) {
        const StStack *in = &s->stack;
        out->walk_broken = in->walk_broken;
        out->vm_dropped = in->vm_dropped;
        out->nnative = in->nnative;
        out->nvm = in->nvm;
        memcpy(out->native, in->native, in->nnative * sizeof in->native[0]);
        memcpy(out->vm, in->vm, in->nvm * sizeof in->vm[0]);
    }
    vm_atomic_store_release(&s->word, SL_WORD(seq, SL_FREE));
    return r;
}

StResult st_signal_capture(Process *p, pthread_t thread, StStack *out, unsigned timeout_ms)
{
    return round_trip(thread, p, 0, 0, NULL, out, timeout_ms);
}

/* ---- registered threads (brpc's pseudo-bthreads for pthreads) ---- */

enum { ST_MAX_THREADS = 64 };

/*
 * A registered thread.  `lock` protects every field and is held by a
 * capture for its whole round trip, so a thread that unregisters (which
 * it must do before it exits) waits for the capture and is never sent a
 * signal after it is gone.
 */
typedef struct StThread {
    pthread_mutex_t lock;
    bool used;
    uint32_t gen;              /* bumped at every registration of the entry */
    pthread_t thread;
    uintptr_t lo, hi;          /* its stack (pthread_getattr_np, at registration) */
    Process *ctx;              /* its call context (VM frames), or NULL */
} StThread;

static StThread threads[ST_MAX_THREADS] = {
    [0 ... ST_MAX_THREADS - 1] = { .lock = PTHREAD_MUTEX_INITIALIZER },
};

/* Thread ids: the top bit, the generation, the index (never a pid). */
#define THREAD_ID(i, g) (ST_THREAD_ID_BIT | (uint64_t)(g) << 8 | (uint64_t)(i))

uint64_t st_thread_register(Process *ctx)
{
    installed_signal();
    for (unsigned i = 0; i < ST_MAX_THREADS; i++) {
        StThread *t = &threads[i];
        pthread_mutex_lock(&t->lock);
        if (!t->used) {
            t->used = true;
            t->gen++;
            t->thread = pthread_self();
            st_thread_bounds(&t->lo, &t->hi);
            t->ctx = ctx;
            uint64_t id = THREAD_ID(i, t->gen);
            pthread_mutex_unlock(&t->lock);
            return id;
        }
        pthread_mutex_unlock(&t->lock);
    }
    return 0;
}

/* The entry of a live id, locked; NULL if there is none. */
static StThread *lookup(uint64_t id)
{
    unsigned i = (unsigned)(id & 0xff);
    if (!(id & ST_THREAD_ID_BIT) || i >= ST_MAX_THREADS)
        return NULL;
    StThread *t = &threads[i];
    pthread_mutex_lock(&t->lock);
    if (t->used && THREAD_ID(i, t->gen) == id)
        return t;
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

bool st_thread_unregister(uint64_t id)
{
    StThread *t = lookup(id);
    if (!t)
        return false;
    t->used = false;
    t->ctx = NULL;
    pthread_mutex_unlock(&t->lock);
    return true;
}

StResult st_capture_thread(uint64_t id, StStack *out, unsigned timeout_ms)
{
    memset(out, 0, offsetof(StStack, native));
    out->pid = id;
    StThread *t = lookup(id);
    if (!t) {
        out->result = ST_R_NOPROC;
        return out->result;
    }
    if (pthread_equal(t->thread, pthread_self())) {
        Process *ctx = t->ctx;
        pthread_mutex_unlock(&t->lock);
        st_capture_self(ctx, out);
        out->pid = id;
        return out->result;
    }
    out->mode = ST_MODE_SIGNAL;
    StResult r = ST_R_SWITCHING;
    for (int i = 0; i < 3 && r == ST_R_SWITCHING; i++)
        r = round_trip(t->thread, NULL, t->lo, t->hi, t->ctx, out, timeout_ms);
    pthread_mutex_unlock(&t->lock);
    out->result = r;
    return r;
}
