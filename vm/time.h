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

#endif /* VM_TIME_H */
