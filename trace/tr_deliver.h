/*
 * trace/tr_deliver.h - events as messages to a session's tracer process
 * (trace/tr_deliver.c).
 */
#ifndef TRACE_TR_DELIVER_H
#define TRACE_TR_DELIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "trace/tr.h"
#include "vm/process.h"
#include "vm/sched.h"

struct TrSession;

/*
 * Sends ev, written for p, to session s's tracer as BEAM's trace message;
 * true when it was delivered (counted in s->sent).  Never collects, never
 * suspends; any thread that may emit for p.
 */
bool tr_deliver(Process *p, struct TrSession *s, const TrEmit *ev);

/* The same to the process `tracer` (a process's own tracer, erlang:trace/3's
 * {tracer, T}): VM_SEND_OK when delivered, VM_SEND_NOPROC when it is not
 * alive, VM_SEND_TOO_BIG when the message is not sent for its size. */
VmSend tr_deliver_to(Process *p, uint64_t tracer, const TrEmit *ev);

/* The last message: {trace_stopped, Session, Reason, Written, Lost}. */
void tr_deliver_stopped(tvm_vm *vm, struct TrSession *s, Term reason, uint64_t written,
                        uint64_t lost);

/* A session's handle as VM code sees it, {trace_session, Id}, built in
 * hp[0..2]. */
Term tr_session_handle(Term *hp, uint64_t id);

#endif /* TRACE_TR_DELIVER_H */
