/*
 * tests/unit/bp/call_events.h - the call hook the breakpoint tests record
 * with: every traced call as "mod:fun/arity(args) local|global" (args
 * formatted with tvm_format_term, comma-separated), with its pid; a test
 * compares the whole sequence, joined with " | ", against the exact
 * expected text (take_events).  Included by one test file each: the
 * state is the file's own.
 */
#ifndef TESTS_UNIT_BP_CALL_EVENTS_H
#define TESTS_UNIT_BP_CALL_EVENTS_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "include/tracevm.h"

#define MAX_EVENTS 512

static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static char events[MAX_EVENTS][200];
static tvm_pid event_pid[MAX_EVENTS];
static int nevents;

static void hook(tvm_env *e, const tvm_call_event *ev, void *data)
{
    (void)data;
    char buf[200];
    int n = snprintf(buf, sizeof buf, "%s:%s/%d(", ev->module, ev->function, ev->arity);
    for (int i = 0; i < ev->arity && n < (int)sizeof buf; i++) {
        if (i)
            n += snprintf(buf + n, sizeof buf - n, ",");
        if (n < (int)sizeof buf)
            n += (int)tvm_format_term(e, ev->argv[i], buf + n, sizeof buf - n);
    }
    if (n < (int)sizeof buf)
        snprintf(buf + n, sizeof buf - n, ") %s", ev->global ? "global" : "local");
    pthread_mutex_lock(&ev_lock);
    if (nevents < MAX_EVENTS) {
        strcpy(events[nevents], buf);
        event_pid[nevents] = ev->pid;
        nevents++;
    }
    pthread_mutex_unlock(&ev_lock);
}

/* The events since the last call, joined with " | " ("" for none), and
 * forgotten. */
static const char *take_events(void)
{
    static char out[MAX_EVENTS * 8];
    out[0] = '\0';
    pthread_mutex_lock(&ev_lock);
    size_t n = 0;
    for (int i = 0; i < nevents && n < sizeof out; i++)
        n += (size_t)snprintf(out + n, sizeof out - n, "%s%s", i ? " | " : "", events[i]);
    nevents = 0;
    pthread_mutex_unlock(&ev_lock);
    return out;
}

/* Records the calls of v from now on, none yet, with the call context e
 * traced. */
static void record_calls(tvm_vm *v, tvm_env *e)
{
    nevents = 0;
    tvm_set_call_hook(v, hook, NULL);
    cr_assert_eq(tvm_trace_calls(e, 0, true), TVM_OK);
}

#endif /* TESTS_UNIT_BP_CALL_EVENTS_H */
