/*
 * vm/timer.c - the monotonic clock and the timers of waiting processes:
 * a binary heap of deadlines under one lock, served by a timer thread that
 * wakes each process whose deadline passed (vm_proc_timeout).  A wake-up
 * names the wait it belongs to (pid and sequence number), so a timer that
 * fires after its wait ended already changes nothing.
 */
#include "vm/timer.h"

#include <stdlib.h>
#include <time.h>

#include "vm/common.h"
#include "vm/sched.h"

uint64_t vm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void theap_swap(Timer *a, Timer *b)
{
    Timer x = *a;
    *a = *b;
    *b = x;
}

void vm_timer_add(VmTimers *t, uint64_t deadline, uint64_t pid, uint64_t seq)
{
    pthread_mutex_lock(&t->lock);
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->heap = vm_realloc(t->heap, t->cap * sizeof(Timer));
    }
    size_t i = t->n++;
    t->heap[i] = (Timer){ deadline, pid, seq };
    while (i > 0 && t->heap[(i - 1) / 2].deadline > t->heap[i].deadline) {
        theap_swap(&t->heap[(i - 1) / 2], &t->heap[i]);
        i = (i - 1) / 2;
    }
    bool first = i == 0;
    pthread_mutex_unlock(&t->lock);
    if (first)
        pthread_cond_signal(&t->cond);
}

static Timer theap_pop(VmTimers *t)
{
    Timer top = t->heap[0];
    t->heap[0] = t->heap[--t->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < t->n && t->heap[l].deadline < t->heap[m].deadline)
            m = l;
        if (r < t->n && t->heap[r].deadline < t->heap[m].deadline)
            m = r;
        if (m == i)
            break;
        theap_swap(&t->heap[i], &t->heap[m]);
        i = m;
    }
    return top;
}

static void *timer_main(void *arg)
{
    VmTimers *t = arg;
    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        if (t->n == 0) {
            pthread_cond_wait(&t->cond, &t->lock);
            continue;
        }
        uint64_t now = vm_now_ns(), due = t->heap[0].deadline;
        if (due > now) {
            struct timespec ts = { (time_t)(due / 1000000000u), (long)(due % 1000000000u) };
            pthread_cond_timedwait(&t->cond, &t->lock, &ts);
            continue;
        }
        Timer due_timer = theap_pop(t);
        pthread_mutex_unlock(&t->lock);
        vm_proc_timeout(t->sys, due_timer.pid, due_timer.seq);
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

void vm_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

void vm_timers_start(VmTimers *t, struct SchedSystem *sys)
{
    t->sys = sys;
    pthread_mutex_init(&t->lock, NULL);
    vm_cond_init_monotonic(&t->cond);
    if (pthread_create(&t->thread, NULL, timer_main, t) != 0)
        vm_die("cannot start the timer thread");
}

void vm_timers_stop(VmTimers *t)
{
    pthread_mutex_lock(&t->lock);
    t->stop = true;
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cond);
    free(t->heap);
}
