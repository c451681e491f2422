/*
 * vm/fiber.h - fibers: native stacks that a process runs on, switched by
 * an assembly routine (vm/fiber_<arch>.S; the saved-register layout is
 * documented there).
 *
 * Stacks are mmap'd with a guard region below them (VM_FIBER_GUARD_BYTES)
 * and kept in a pool for reuse; or, in a slab pool, carved from large
 * mappings, each with its guard too (vm/fiber.c explains the mappings).
 * A pool may be used from any thread; a Fiber is owned by whoever runs or
 * holds it.
 */
#ifndef VM_FIBER_H
#define VM_FIBER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Fiber {
    /* The saved stack pointer while switched out, NULL while running.
     * Written by the switch out (vm/fiber_<arch>.S, a release store after
     * the saved words: [IL4]) and cleared by the thread switching the
     * fiber in (vm_il_switch_in, an atomic relaxed store before the
     * store fence [IL3]); read by its owner, and concurrently by a stack
     * capture (saved_sp in stacks/st_capture.c, an acquire load, its
     * reading validated by the interlock word: vm/interlock.h). */
    void *sp;
    void *tsan;            /* ThreadSanitizer's fiber (tsan builds only) */
    char *stack_lo;        /* usable stack: [stack_lo, stack_hi) */
    char *stack_hi;
    struct Fiber *next_free;
    bool dirty;            /* in the pool with pages not yet given back */
    bool in_slab;          /* carved from a slab: never unmapped on its own */
} Fiber;

/* The words vm_fiber_switch saves at the saved sp (the layouts are in
 * vm/fiber_<arch>.S): the frame pointer, the pc the context resumes at,
 * and how many words there are (the caller's sp at the call is sp +
 * FIBER_SAVED_WORDS words).  FIBER_SAVED_ARG and FIBER_SAVED_FN are where
 * vm_fiber_init puts the first body and its argument. */
#if defined(__x86_64__)
/* r15 r14 r13 r12 rbx rbp, return address */
enum { FIBER_SAVED_FN = 3, FIBER_SAVED_ARG = 2,
       FIBER_SAVED_FP = 5, FIBER_SAVED_PC = 6, FIBER_SAVED_WORDS = 7 };
#elif defined(__aarch64__)
/* x29 x30 (a frame record), x19-x28, d8-d15 */
enum { FIBER_SAVED_FP = 0, FIBER_SAVED_PC = 1, FIBER_SAVED_FN = 2, FIBER_SAVED_ARG = 3,
       FIBER_SAVED_WORDS = 20 };
#else
#error "no fiber switch for this architecture (vm/fiber_<arch>.S)"
#endif

typedef void (*FiberFn)(void *arg);

/*
 * ThreadSanitizer must be told about every switch between stacks (it
 * keeps a shadow call stack and happens-before state per context).  Call
 * vm_fiber_tsan_switch(target) right before vm_fiber_switch() into
 * target's context; vm_fiber_tsan_current() names the running one.  Both
 * compile to nothing outside tsan builds.
 */
#if defined(VM_TSAN)
#include <sanitizer/tsan_interface.h>
static inline void *vm_fiber_tsan_current(void) { return __tsan_get_current_fiber(); }
static inline void vm_fiber_tsan_switch(void *target) { __tsan_switch_to_fiber(target, 0); }
static inline void *vm_fiber_tsan_new(void) { return __tsan_create_fiber(0); }
#else
static inline void *vm_fiber_tsan_current(void) { return NULL; }
static inline void vm_fiber_tsan_switch(void *target) { (void)target; }
static inline void *vm_fiber_tsan_new(void) { return NULL; }
#endif

/* Saves the running context into *save_sp and resumes the one at next_sp. */
void vm_fiber_switch(void **save_sp, void *next_sp);
/* The same, between two contexts suspended at the same call site (the
 * direct process-to-process switch; see vm/fiber_<arch>.S for why). */
void vm_fiber_switch_peer(void **save_sp, void *next_sp);
/* Code bounds of both switches, from vm_fiber_switch (a sample in there
 * is mid-switch). */
extern const char vm_fiber_switch_end[];
/* The bottom frame of every fiber, and the return address of its call of
 * the body (the last frame of every whole walk of a fiber). */
void vm_fiber_entry(void);
extern const uintptr_t vm_fiber_entry_ret;

/*
 * Prepares `f` so that the first vm_fiber_switch() into f->sp runs
 * fn(arg) on its stack.  fn must never return: it ends by switching away.
 */
void vm_fiber_init(Fiber *f, FiberFn fn, void *arg);

typedef struct FiberPool {
    size_t stack_size;     /* usable bytes per stack (a multiple of the page size) */
    size_t max_free;       /* stacks kept for reuse; more are unmapped */
    /* lock protects free, nfree, ndirty, release_calls and live; the
     * system calls (mmap, madvise, munmap) run outside it. */
    pthread_mutex_t lock;
    Fiber *free;
    size_t nfree;
    size_t ndirty;         /* free stacks whose pages are still resident */
    size_t release_calls;  /* madvise calls trims made (neighbours share one) */
    size_t live;           /* stacks handed out and not yet returned */
    /* Slab pools (vm_fiber_pool_use_slabs), under lock: the slab being
     * carved ([slab_next, slab_end)) and every slab, unmapped at destroy. */
    bool slabs;
    char *slab_next, *slab_end;
    void **slab_list;
    size_t nslabs, slab_cap;
} FiberPool;

/* stack_size is rounded up to pages; 0 means VM_FIBER_STACK_SIZE. */
void vm_fiber_pool_init(FiberPool *pool, size_t stack_size, size_t max_free);
void vm_fiber_pool_destroy(FiberPool *pool);
/* Whether addr is in the guard region below f's stack (a fault there is
 * f's stack overflowing: vm/overflow.c).  Async-signal-safe. */
bool vm_fiber_in_guard(const Fiber *f, uintptr_t addr);

/* Makes a fresh pool carve its stacks from slabs (before the first alloc). */
void vm_fiber_pool_use_slabs(FiberPool *pool);
/* A fiber with a fresh or reused stack; NULL when no stack can be mapped. */
Fiber *vm_fiber_alloc(FiberPool *pool);
/*
 * Returns a fiber's stack to the pool, with its pages still resident (a
 * spawn that reuses it makes no system call); the stack is unmapped when
 * the pool already keeps max_free stacks.
 */
void vm_fiber_free(FiberPool *pool, Fiber *f);

/*
 * Gives the resident pages of the pool's free stacks back to the OS, one
 * madvise for each run of neighbouring stacks (release_calls counts
 * them).  The last scheduler to go idle calls it once the whole VM has
 * stayed idle VM_POOL_TRIM_DELAY_MS, so memory returns once a burst of
 * processes is over, and the burst itself pays no system calls.
 */
void vm_fiber_pool_trim(FiberPool *pool);

#endif /* VM_FIBER_H */
