/*
 * trace/tr_sigpipe.h - a write of a sink to a pipe whose reader went away
 * fails with EPIPE, which the sink records (trace/tr_outfail.h), rather
 * than raising a SIGPIPE that ends the embedder's program.
 */
#ifndef TRACE_TR_SIGPIPE_H
#define TRACE_TR_SIGPIPE_H

#include <signal.h>
#include <stdbool.h>

/*
 * Writes that may reach a pipe, on a thread the embedder owns (a sink's
 * open and close, the output's fclose), between tr_sigpipe_hold and
 * tr_sigpipe_release: SIGPIPE is blocked meanwhile, and one that the
 * writes raised is taken back before the thread's mask is restored, so
 * the write fails with EPIPE (recorded) and the program goes on.  A
 * SIGPIPE already pending for the thread before the hold is left alone.
 * Collector threads block SIGPIPE for their whole life instead
 * (tr_sigpipe_block).
 */
typedef struct TrSigpipe {
    sigset_t old;
    bool pending;
} TrSigpipe;
void tr_sigpipe_hold(TrSigpipe *g);
void tr_sigpipe_release(TrSigpipe *g);
void tr_sigpipe_block(void);

#endif /* TRACE_TR_SIGPIPE_H */
