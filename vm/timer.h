/*
 * vm/timer.h - the monotonic clock and the timers of waiting processes
 * (receive with a timeout, sleep): see vm/timer.c.
 */
#ifndef VM_TIMER_H
#define VM_TIMER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct SchedSystem;

typedef struct Timer {
    uint64_t deadline;        /* CLOCK_MONOTONIC ns */
    uint64_t pid, seq;        /* the wait it ends (vm_proc_timeout) */
} Timer;

/* One per scheduler system.  `lock` protects heap, n, cap and stop. */
typedef struct VmTimers {
    struct SchedSystem *sys;  /* whose processes the timers wake */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;      /* on CLOCK_MONOTONIC: the next deadline or a new first one */
    Timer *heap;              /* a binary min-heap by deadline */
    size_t n, cap;
    bool stop;
} VmTimers;

/* CLOCK_MONOTONIC in nanoseconds.  Any thread. */
uint64_t vm_now_ns(void);

/* Initialises a condition variable whose timed waits count on
 * CLOCK_MONOTONIC (vm_now_ns), so a clock change does not move them. */
void vm_cond_init_monotonic(pthread_cond_t *c);

/* Starts the timer thread of `sys` (vm_sched_start) and stops it, freeing
 * the timers still pending (vm_sched_stop, after the schedulers). */
void vm_timers_start(VmTimers *t, struct SchedSystem *sys);
void vm_timers_stop(VmTimers *t);

/* At `deadline`, calls vm_proc_timeout(sys, pid, seq) on the timer
 * thread.  Any thread. */
void vm_timer_add(VmTimers *t, uint64_t deadline, uint64_t pid, uint64_t seq);

#endif /* VM_TIMER_H */
