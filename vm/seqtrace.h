/*
 * vm/seqtrace.h - sequential tracing (BEAM's seq_trace): the trace token
 * a process carries, which travels with every message it sends, and the
 * events that go to the system tracer as plain messages.  vm/seqtrace.c
 * says what the rules are and where tracevm differs from OTP 25.
 *
 * Who touches what:
 *   Process.seq, seq_clock, seq_lastcnt, seq_cgen: the process's own
 *     thread only (its natives, its sends, its receives, its spawns, its
 *     exit's link signals); a child's are written by its parent in
 *     vm_spawn, before the child is published.
 *   Message.seq: written by the sender before the message is appended
 *     to the receiver's inbox under the receiver's lock, read by the
 *     receiver after it took the message out of its inbox under that
 *     lock: the lock orders the two, as it does for the message's term.
 *     Never changed once delivered.
 *   tvm_vm.seq_tracer, seq_gen: global, any thread (vm/vm.h).
 */
#ifndef VM_SEQTRACE_H
#define VM_SEQTRACE_H

#include <stddef.h>
#include <stdint.h>

#include "vm/native.h"
#include "vm/process.h"

/* The token's flags, OTP's bits (get_token/0 shows them as one integer). */
enum {
    VM_SEQ_SEND = 1,
    VM_SEQ_RECEIVE = 2,
    VM_SEQ_PRINT = 4,
    VM_SEQ_TIMESTAMP = 8,
    VM_SEQ_STRICT_TS = 16,
    VM_SEQ_MONO_TS = 32,
};

/*
 * A trace token, off any heap: {Flags, Label, Serial, From, LastCnt} as
 * OTP keeps it, the label copied into data (an immediate label uses
 * none).  A process's token is its own allocation (Process.seq); a
 * message's lives in the message's own block, after its term, and goes
 * with it.
 */
typedef struct VmSeqToken {
    uint64_t gen;          /* tvm_vm.seq_gen when made: older ones reset_trace dropped */
    int64_t serial;        /* the token's Serial (the sender's curr_cnt) */
    int64_t lastcnt;       /* its LastCnt (the sender's prev_cnt) */
    uint64_t from;         /* the pid of the last process that sent or set it */
    uint32_t flags;        /* VM_SEQ_* */
    size_t words;          /* of data */
    Term label;
    Term data[];
} VmSeqToken;

/* Message.seq of a message that leaves its receiver's token as it is
 * (OTP's messages with no sending process: 'DOWN', a link's noproc
 * 'EXIT'; the VM's own: trace messages, trace_delivered's reply).  NULL
 * is a message sent without a token: its receiver's token is cleared. */
extern const VmSeqToken vm_seq_keep;
#define VM_SEQ_KEEP (&vm_seq_keep)

VmNativeTable vm_seq_natives(void);

/*
 * p, which has a token, sends msg (`words` words) to the live process
 * `to`: its serial moves on, the send event goes to the system tracer
 * when the token asks for it, and the message is made carrying the
 * token (a plain one if reset_trace dropped it).  Any thread that may
 * run p's code (p's own).
 */
Message *vm_seq_message(Process *p, uint64_t to, Term msg, size_t words);

/* p takes m out of its queue and either p or m has a token (or m is
 * VM_SEQ_KEEP): p takes m's token, with the receive rules. */
void vm_seq_receive(Process *p, const Message *m);

/* parent, which has a token, spawned child (not yet published): the
 * child starts with the token, as OTP's does after its spawn_request. */
void vm_seq_spawn(Process *parent, Process *child);

/* Frees p's token (its exit, recycling, freeing). */
void vm_seq_free(Process *p);

#endif /* VM_SEQTRACE_H */
