/*
 * vm/time.c - BEAM's time and unique-integer natives: erlang:monotonic_time,
 * system_time, time_offset, convert_time_unit, timestamp, now,
 * unique_integer and os:timestamp.
 *
 * Clocks.  Monotonic time is CLOCK_MONOTONIC in nanoseconds, the clock the
 * trace timestamps are given in (the text sink's trace_ts, CTF's clock,
 * trace/tr_clock.c): a program can set its own readings beside its trace
 * events.  System time is CLOCK_REALTIME in nanoseconds.  The native
 * unit is the nanosecond, as BEAM's on Linux
 * (erlang:convert_time_unit(1, second, native) is 1000000000 there too).
 * BEAM's monotonic time starts at an arbitrary, usually negative, point;
 * here it is the kernel's (time since boot), which the docs allow ("some
 * unspecified point in time").  Without big integers every result must
 * fit a small integer (62 bits): system time in nanoseconds does until
 * 2043; a conversion whose result does not fit raises system_limit where
 * BEAM would return a big integer.
 *
 * Time warp: BEAM's default mode (no_time_warp) keeps time_offset fixed
 * once it is read at start; here the offset is read when asked (the
 * kernel's two clocks, so an NTP step shows in it at once, as BEAM's
 * multi_time_warp mode would show it).
 *
 * Unique integers and erlang:now/0 are process-wide atomic counters:
 * nothing is shared but one word each, written by fetch-and-add or
 * compare-and-swap (any scheduler, any call context).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "vm/atom.h"
#include "vm/bif_internal.h"
#include "vm/atomics.h"
#include "vm/native.h"
#include "vm/time.h"

#define NS_PER_SEC 1000000000LL

/* CLOCK_MONOTONIC or CLOCK_REALTIME in ns.  Both are always there on
 * Linux: a failure is impossible and aborts with file and line. */
static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        vm_die("clock_gettime");
    return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

int64_t vm_time_mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

static pthread_once_t offset_once = PTHREAD_ONCE_INIT;
static int64_t fixed_offset;   /* written once under offset_once */

static void take_offset(void)
{
    fixed_offset = vm_time_offset_ns();
}

int64_t vm_time_offset_fixed_ns(void)
{
    /* pthread_once orders the write before every caller's read. */
    pthread_once(&offset_once, take_offset);
    return fixed_offset;
}

unsigned vm_time_stamp(VmTsForm form, int64_t mono_ns, int64_t e[3])
{
    switch (form) {
    case VM_TS_NOW: {
        uint64_t v[3];
        vm_time_triple((uint64_t)((mono_ns + vm_time_offset_fixed_ns()) / 1000), v);
        for (int i = 0; i < 3; i++)
            e[i] = (int64_t)v[i];
        return 3;
    }
    case VM_TS_STRICT:
        e[0] = mono_ns;
        e[1] = vm_unique_integer(false);
        return 2;
    default:
        e[0] = mono_ns;
        return 0;
    }
}

/* ==== time units ==== */

/* Parts per second of a time unit term: BEAM's names (and the
 * deprecated plural ones), native and perf_counter (nanoseconds here),
 * or a positive integer; 0 for anything else. */
static int64_t unit_pps(tvm_env *env, tvm_term unit)
{
    static const struct {
        const char *name;
        int64_t pps;
    } units[] = {
        { "second", 1 },          { "millisecond", 1000 },
        { "microsecond", 1000000 }, { "nanosecond", NS_PER_SEC },
        { "native", NS_PER_SEC }, { "perf_counter", NS_PER_SEC },
        { "seconds", 1 },         { "milli_seconds", 1000 },
        { "micro_seconds", 1000000 }, { "nano_seconds", NS_PER_SEC },
    };
    int64_t n;
    if (tvm_get_int(env, unit, &n) == TVM_OK)
        return n > 0 ? n : 0;
    char name[16];
    if (tvm_get_atom(env, unit, name, sizeof name) != TVM_OK)
        return 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(name, units[i].name))
            return units[i].pps;
    return 0;
}

/* floor(t * to / from), as BEAM's convert_time_unit rounds; false when
 * it does not fit a small integer. */
static bool convert(int64_t t, int64_t from, int64_t to, int64_t *out)
{
    __int128 num = (__int128)t * to;
    __int128 q = num / from;
    if (num % from != 0 && num < 0)
        q--;
    if (q < SMALL_MIN || q > SMALL_MAX)
        return false;
    *out = (int64_t)q;
    return true;
}

/* A reading in nanoseconds, ns, in the time unit `unit`: badarg for a
 * bad unit, system_limit when the value does not fit. */
static tvm_status in_unit(tvm_env *env, tvm_term unit, int64_t ns, tvm_term *result)
{
    int64_t pps = unit_pps(env, unit), v;
    if (!pps)
        return tvm_raise_badarg(env);
    if (!convert(ns, NS_PER_SEC, pps, &v))
        return tvm_raise(env, "error", vm_root_push(env->p, make_atom(ATOM_SYSTEM_LIMIT)));
    return tvm_make_int(env, v, result);
}

/* system_limit for a reading past the small integers (from 2043 on, in
 * nanoseconds). */
static tvm_status ns_result(tvm_env *env, int64_t ns, tvm_term *result)
{
    if (!small_fits(ns))
        return tvm_raise(env, "error", vm_root_push(env->p, make_atom(ATOM_SYSTEM_LIMIT)));
    return tvm_make_int(env, ns, result);
}

/* ==== the natives ==== */

#define UNUSED() (void)argc, (void)argv, (void)data

NATIVE_FN(nif_monotonic_time0)
{
    UNUSED();
    return ns_result(env, clock_ns(CLOCK_MONOTONIC), result);
}

NATIVE_FN(nif_monotonic_time1)
{
    UNUSED();
    return in_unit(env, argv[0], clock_ns(CLOCK_MONOTONIC), result);
}

NATIVE_FN(nif_system_time0)
{
    UNUSED();
    return ns_result(env, clock_ns(CLOCK_REALTIME), result);
}

NATIVE_FN(nif_system_time1)
{
    UNUSED();
    return in_unit(env, argv[0], clock_ns(CLOCK_REALTIME), result);
}

/* System time minus monotonic time (each read once, in that order). */
int64_t vm_time_offset_ns(void)
{
    int64_t sys = clock_ns(CLOCK_REALTIME);
    return sys - clock_ns(CLOCK_MONOTONIC);
}

NATIVE_FN(nif_time_offset0)
{
    UNUSED();
    return ns_result(env, vm_time_offset_ns(), result);
}

NATIVE_FN(nif_time_offset1)
{
    UNUSED();
    return in_unit(env, argv[0], vm_time_offset_ns(), result);
}

NATIVE_FN(nif_convert_time_unit)
{
    UNUSED();
    int64_t t, from = unit_pps(env, argv[1]), to = unit_pps(env, argv[2]), v;
    if (tvm_get_int(env, argv[0], &t) != TVM_OK || !from || !to)
        return tvm_raise_badarg(env);
    if (!convert(t, from, to, &v))
        return tvm_raise(env, "error", vm_root_push(env->p, make_atom(ATOM_SYSTEM_LIMIT)));
    return tvm_make_int(env, v, result);
}

/* {MegaSecs, Secs, MicroSecs} of a time in microseconds. */
static tvm_status triple(tvm_env *env, int64_t us, tvm_term *result)
{
    uint64_t v[3];
    tvm_term e[3];
    vm_time_triple((uint64_t)us, v);
    for (int i = 0; i < 3; i++)
        if (tvm_make_int(env, (int64_t)v[i], &e[i]) != TVM_OK)
            return tvm_raise_badarg(env);   /* cannot happen: each fits */
    return tvm_make_tuple(env, 3, e, result);
}

/* erlang:timestamp/0, os:timestamp/0: system time as a triple. */
NATIVE_FN(nif_timestamp)
{
    UNUSED();
    return triple(env, clock_ns(CLOCK_REALTIME) / 1000, result);
}

/* The last erlang:now/0 value, in microseconds: each call returns more
 * than any before it (BEAM's guarantee), CAS on this one word. */
static VmAtomic last_now;

/* erlang:now/0: system time as a triple, strictly increasing across the
 * OS process (a call in the same microsecond as the last gets one more). */
NATIVE_FN(nif_now)
{
    UNUSED();
    uintptr_t now = (uintptr_t)(clock_ns(CLOCK_REALTIME) / 1000), want;
    for (;;) {
        uintptr_t last = vm_atomic_load_relaxed(&last_now);
        want = now > last ? now : last + 1;
        if (vm_atomic_cas_full(&last_now, last, want))
            break;
    }
    return triple(env, (int64_t)want, result);
}

/* unique_integer's counter: every value comes from one fetch-and-add, so
 * all are unique and, in the order the adds happen, increasing. */
static VmAtomic unique_next;

/* BEAM's unique integers without `positive` start far below zero; these
 * start at -2^59 (positive ones at 1), so both stay small integers. */
#define UNIQUE_BASE (-((int64_t)1 << 59))

int64_t vm_unique_integer(bool positive)
{
    int64_t k = (int64_t)vm_atomic_fetch_add_relaxed(&unique_next, 1);
    return positive ? k + 1 : UNIQUE_BASE + k;
}

/* erlang:unique_integer(Modifiers): Modifiers a proper list of
 * `positive` and `monotonic` (badarg for anything else; a long list is
 * walked once, as any list a native reads). */
static tvm_status unique(tvm_env *env, tvm_term mods, tvm_term *result)
{
    bool positive = false;
    Term l = vm_root_get(env->p, mods);
    for (; term_is_cons(l); l = cons_tail(l)) {
        Term h = cons_head(l);
        const char *name = term_is_atom(h) ? vm_atom_name(atom_value(h), NULL) : "";
        if (!strcmp(name, "positive"))
            positive = true;
        else if (strcmp(name, "monotonic"))
            return tvm_raise_badarg(env);
    }
    if (!term_is_nil(l))
        return tvm_raise_badarg(env);
    return tvm_make_int(env, vm_unique_integer(positive), result);
}

NATIVE_FN(nif_unique_integer0)
{
    UNUSED();
    return unique(env, tvm_nil(env), result);
}

NATIVE_FN(nif_unique_integer1)
{
    UNUSED();
    return unique(env, argv[0], result);
}

static const VmNativeDef natives[] = {
    { "erlang", "monotonic_time", 0, nif_monotonic_time0 },
    { "erlang", "monotonic_time", 1, nif_monotonic_time1 },
    { "erlang", "system_time", 0, nif_system_time0 },
    { "erlang", "system_time", 1, nif_system_time1 },
    { "erlang", "time_offset", 0, nif_time_offset0 },
    { "erlang", "time_offset", 1, nif_time_offset1 },
    { "erlang", "convert_time_unit", 3, nif_convert_time_unit },
    { "erlang", "timestamp", 0, nif_timestamp },
    { "erlang", "now", 0, nif_now },
    { "erlang", "unique_integer", 0, nif_unique_integer0 },
    { "erlang", "unique_integer", 1, nif_unique_integer1 },
    { "os", "timestamp", 0, nif_timestamp },
};

VmNativeTable vm_time_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
