/*
 * trace/tr_sigpipe.c - SIGPIPE held off the threads that write a sink's
 * output (trace/tr_sigpipe.h).
 */
#include "trace/tr_sigpipe.h"

#include <pthread.h>
#include <time.h>

static void sigpipe_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGPIPE);
}

void tr_sigpipe_hold(TrSigpipe *g)
{
    sigset_t set, pend;
    sigpipe_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
    sigpending(&pend);
    g->pending = sigismember(&pend, SIGPIPE) == 1;
}

void tr_sigpipe_release(TrSigpipe *g)
{
    sigset_t set, pend;
    sigpipe_set(&set);
    /* A write to a pipe without a reader raises SIGPIPE for the writing
     * thread: blocked, it stays pending until taken here.  (A SIGPIPE
     * that another process sent to this one meanwhile may be taken
     * instead: a signal that, by default, ends the program.) */
    if (!g->pending && sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE) == 1) {
        struct timespec zero = { 0, 0 };
        sigtimedwait(&set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

void tr_sigpipe_block(void)
{
    sigset_t set;
    sigpipe_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}
