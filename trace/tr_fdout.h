/*
 * trace/tr_fdout.h - a sink's output to an open file descriptor that
 * never holds a session's end for longer than a slice once the pipeline
 * closes (trace/tr_fdout.c).
 */
#ifndef TRACE_TR_FDOUT_H
#define TRACE_TR_FDOUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct TrFdOut TrFdOut;

/* A stream writing to fd (not closed at fclose); NULL with errno EBADF
 * when fd is not open for writing (closed, or read-only), or with
 * stdio's errno if it cannot make one.  A write the descriptor refuses
 * (EPIPE: the reader closed) is recorded in `fail` (unless NULL) with
 * `format` (the sink's name; trace/tr_outfail.h).  *out: the state to pass to the
 * functions below. */
struct TrOutFail;
FILE *tr_fdout_open(int fd, struct TrOutFail *fail, const char *format, TrFdOut **out);

/* The pipeline is closing: from now on the stream gives up once a whole
 * slice passes in which the reader takes nothing, and drops the rest.
 * Any thread. */
void tr_fdout_closing(TrFdOut *o);

/* Bytes dropped so far (a slow or gone reader). */
uint64_t tr_fdout_dropped(const TrFdOut *o);

/* After fclose of the stream. */
void tr_fdout_free(TrFdOut *o);

#endif /* TRACE_TR_FDOUT_H */
