/*
 * trace/tr_clock.c - calibration of the trace clock (see tr_clock.h).
 */
#include "trace/tr_clock.h"

#include <pthread.h>

#include "vm/time.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

TrClock tr_clock;
VmAtomic tr_clock_manual_ns;

static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
/* The TSC counts at a constant rate in every state (CPUID 0x80000007 EDX
 * bit 8); the generic timer of aarch64 always does. */
static bool invariant_tsc(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return false;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1;
}
#endif

#if TR_CLOCK_HW
/* One (tsc, mono) pair: the TSC is the midpoint of two reads around the
 * clock_gettime; returns the bracket width (its uncertainty). */
static uint64_t sample(uint64_t *tsc, uint64_t *mono)
{
    uint64_t a = tr_clock_hw();
    *mono = tr_mono_ns();
    uint64_t b = tr_clock_hw();
    *tsc = a + (b - a) / 2;
    return b - a;
}

/* The tightest of a few samples (an interrupt widens a bracket). */
static void best_sample(uint64_t *tsc, uint64_t *mono)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 8; i++) {
        uint64_t t, m;
        uint64_t w = sample(&t, &m);
        if (w < best) {
            best = w;
            *tsc = t;
            *mono = m;
        }
    }
}
#endif

static void calibrate(void)
{
#if defined(__x86_64__)
    if (!invariant_tsc())
        return;
    uint64_t t0, m0, t1, m1;
    best_sample(&t0, &m0);
    while (tr_mono_ns() - m0 < TR_CLOCK_CALIBRATE_NS)
        ;
    best_sample(&t1, &m1);
    if (t1 <= t0 || m1 <= m0)
        return;
    tr_clock.tsc0 = t0;
    tr_clock.mono0 = m0;
    tr_clock.mult = (uint64_t)(((unsigned __int128)(m1 - m0) << 32) / (t1 - t0));
    tr_clock.tsc = true;
#elif defined(__aarch64__)
    uint64_t freq;
    __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(freq));
    if (freq == 0)
        return;   /* firmware left it unset: CLOCK_MONOTONIC instead */
    best_sample(&tr_clock.tsc0, &tr_clock.mono0);
    tr_clock.mult = (uint64_t)(((unsigned __int128)1000000000u << 32) / freq);
    tr_clock.tsc = true;
#endif
}

int64_t tr_clock_realtime_offset(void)
{
    /* The VM's, read once (vm/time.c): seq_trace's timestamps agree. */
    return vm_time_offset_fixed_ns();
}

void tr_clock_init(void)
{
    /* pthread_once orders the writes above before every later caller's
     * reads, and producers only stamp after tr_pipeline_new() returned. */
    pthread_once(&clock_once, calibrate);
}

void tr_clock_set_manual(uint64_t ns)
{
    tr_clock_init();    /* a later first call must not calibrate over it */
    vm_atomic_store_relaxed(&tr_clock_manual_ns, ns);
    tr_clock.tsc = false;
    tr_clock.manual = true;
}

void tr_clock_advance(uint64_t ns)
{
    vm_atomic_fetch_add_relaxed(&tr_clock_manual_ns, ns);
}
