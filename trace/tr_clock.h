/*
 * trace/tr_clock.h - the clock trace records are stamped with.
 *
 * Producers stamp records with raw ticks and the collector converts them
 * to CLOCK_MONOTONIC nanoseconds, because the stamp is on the hot path of
 * every event: on x86_64 with an invariant TSC (constant rate, running in
 * every C-state, synchronised across cores: CPUID 0x80000007 EDX bit 8)
 * a tick is one `rdtsc` (about 17 ns on the development VM, against 40 ns
 * for clock_gettime through the vDSO).  On aarch64 a tick is one read of
 * the generic timer's virtual count (`mrs cntvct_el0`), which the
 * architecture defines as constant-rate, monotonic and the same on every
 * core, at the frequency cntfrq_el0 gives; Linux lets user space read both
 * (it is what its vDSO clock_gettime reads).  Neither read is ordered
 * with the loads and stores around it (rdtsc is not serialising either):
 * a stamp is as precise as an unordered read can be, on both.  Elsewhere
 * a tick is a CLOCK_MONOTONIC nanosecond.  "TSC" below names the hardware
 * counter of either machine.
 *
 * Conversion: ns = mono0 + (ticks - tsc0) * mult / 2^32, where (tsc0,
 * mono0) come from a sample done once per OS process (tr_clock_init)
 * that brackets clock_gettime between two counter reads.  On x86_64 the
 * rate comes from a calibration of TR_CLOCK_CALIBRATE_NS: a second sample
 * then, so the rate is off by at most about 2 x 40 ns / 2 ms = 4e-5 of
 * elapsed time (in practice far less): converted times may drift from
 * CLOCK_MONOTONIC by that fraction over a long trace, but they are
 * monotonic and consistent between rings, which is what ordering and
 * durations need.  On aarch64 the rate is cntfrq_el0's, exact by
 * definition (mult = 10^9 * 2^32 / frequency), so no calibration waits.
 *
 * The test clock.  A unit test may switch the clock to a manual one
 * (tr_clock_set_manual) that stands still until the test moves it
 * (tr_clock_advance): stamps and call_time durations are then exact
 * values the test chose, not measurements.  It is a mode without TSC
 * (ticks are its nanoseconds), so the hot path's TSC branch is the same
 * load and test as before; the one extra test sits on the clock_gettime
 * path, which costs some 40 ns anyway.  Nothing but tests switches it.
 */
#ifndef TRACE_TR_CLOCK_H
#define TRACE_TR_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "vm/atomics.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* The hardware counter (TrClock.tsc): the TSC, or aarch64's virtual count. */
#if defined(__x86_64__) || defined(__aarch64__)
#define TR_CLOCK_HW 1
static inline uint64_t tr_clock_hw(void)
{
#if defined(__x86_64__)
    return __rdtsc();
#else
    uint64_t t;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(t));
    return t;
#endif
}
#else
#define TR_CLOCK_HW 0
#endif

/* How long the one calibration takes. */
#define TR_CLOCK_CALIBRATE_NS 2000000

typedef struct TrClock {
    bool tsc;           /* ticks are hardware counts (else they are ns) */
    bool manual;        /* ticks are the test clock's (tr_clock_manual_ns) */
    uint64_t tsc0;      /* the count at the calibration's start */
    uint64_t mono0;     /* CLOCK_MONOTONIC ns at tsc0 */
    uint64_t mult;      /* ns per tick, 32.32 fixed point */
} TrClock;

/* Written once under pthread_once (tr_clock_init); read-only afterwards.
 * Hidden: every event reads it, and position-independent code (the
 * library is built with -fPIC, SConstruct) reads a variable of default
 * visibility through the GOT, two instructions instead of one (callgrind:
 * about 2 per call event). */
extern TrClock tr_clock __attribute__((visibility("hidden")));

/* Calibrates (once per OS process; thread-safe).  Call before any
 * tr_clock_ticks() whose value is converted. */
void tr_clock_init(void);

/*
 * CLOCK_REALTIME minus CLOCK_MONOTONIC in ns, taken once per OS process
 * when first asked (any thread): the system time of a trace stamp is its
 * monotonic time plus this (the timestamp flag's {MegaSecs,Secs,
 * MicroSecs}).  Fixed, as BEAM's default time warp mode (no_time_warp)
 * fixes the offset at start; an event costs no clock read for it.
 */
int64_t tr_clock_realtime_offset(void);

/* The test clock's time in ns (when tr_clock.manual). */
extern VmAtomic tr_clock_manual_ns;

/* Tests only: from now on the clock reads `ns` until tr_clock_advance
 * moves it.  Before any other thread reads the clock (before tvm_new):
 * the mode is a plain field that hot paths read without ordering. */
void tr_clock_set_manual(uint64_t ns);

/* Tests only: moves the test clock `ns` forward (any thread). */
void tr_clock_advance(uint64_t ns);

static inline uint64_t tr_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The current tick count (hot path: no lock, no system call). */
static inline uint64_t tr_clock_ticks(void)
{
#if TR_CLOCK_HW
    if (__builtin_expect(tr_clock.tsc, 1))
        return tr_clock_hw();
#endif
    if (__builtin_expect(tr_clock.manual, 0))
        return vm_atomic_load_relaxed(&tr_clock_manual_ns);
    return tr_mono_ns();
}

/* Ticks to CLOCK_MONOTONIC ns. */
static inline uint64_t tr_clock_ns(uint64_t ticks)
{
    if (!tr_clock.tsc)
        return ticks;
    if (ticks >= tr_clock.tsc0)
        return tr_clock.mono0 +
               (uint64_t)(((unsigned __int128)(ticks - tr_clock.tsc0) * tr_clock.mult) >> 32);
    return tr_clock.mono0 -
           (uint64_t)(((unsigned __int128)(tr_clock.tsc0 - ticks) * tr_clock.mult) >> 32);
}

#endif /* TRACE_TR_CLOCK_H */
