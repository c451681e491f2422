/*
 * vm/time.h - the clocks and unique integers of BEAM's time natives
 * (vm/time.c), for the layers above (the trace timestamps' forms).
 */
#ifndef VM_TIME_H
#define VM_TIME_H

#include <stdbool.h>
#include <stdint.h>

/* erlang:unique_integer/1's next value (any thread): unique in the OS
 * process, larger than every value returned before; from 1 with
 * `positive`, else from -2^59. */
int64_t vm_unique_integer(bool positive);

/* CLOCK_REALTIME minus CLOCK_MONOTONIC in ns, read now (the system time
 * of a monotonic reading; erlang:time_offset/0). */
int64_t vm_time_offset_ns(void);

/* {MegaSecs, Secs, MicroSecs} (erlang:timestamp/0's form, and the
 * timestamp trace flag's) of a time of day in microseconds. */
static inline void vm_time_triple(uint64_t us, uint64_t out[3])
{
    out[0] = us / 1000000000000u;
    out[1] = us / 1000000 % 1000000;
    out[2] = us % 1000000;
}

/* CLOCK_REALTIME minus CLOCK_MONOTONIC in ns as first read (any
 * thread; read once, then fixed, as BEAM's no_time_warp keeps it): the
 * system time of every trace timestamp. */
int64_t vm_time_offset_fixed_ns(void);

/* BEAM's three trace timestamp forms (the trace flags timestamp,
 * monotonic_timestamp, strict_monotonic_timestamp; seq_trace's too). */
typedef enum VmTsForm {
    VM_TS_NONE,     /* no timestamp */
    VM_TS_NOW,      /* {MegaSecs, Secs, MicroSecs} of the system time */
    VM_TS_MONO,     /* the monotonic time in ns */
    VM_TS_STRICT,   /* {Mono, Unique} */
} VmTsForm;

/* A timestamp of `form` (not VM_TS_NONE) read now, of the monotonic
 * time `mono_ns`: its elements in e[] and how many (3 or 2), or 0 for
 * the one integer in e[0].  Each element fits a small integer. */
unsigned vm_time_stamp(VmTsForm form, int64_t mono_ns, int64_t e[3]);

/* CLOCK_MONOTONIC in ns (the trace timestamps' clock). */
int64_t vm_time_mono_ns(void);

#endif /* VM_TIME_H */
