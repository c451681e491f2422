/*
 * vm/links.h - links and exit signals (erlang:link/1, unlink/1,
 * spawn_link/3, exit/2, process_flag(trap_exit, Bool)), as BEAM's.
 */
#ifndef VM_LINKS_H
#define VM_LINKS_H

#include <stdbool.h>
#include <stdint.h>

#include "vm/native.h"
#include "vm/process.h"

/* What kind of exit signal a message in an inbox is (Message.sig). */
enum {
    VM_SIG_NONE = 0,   /* an ordinary message */
    VM_SIG_LINK,       /* a linked process exited with the reason */
    VM_SIG_EXIT,       /* exit(Pid, Reason) */
    VM_SIG_KILL,       /* exit(Pid, kill): untrappable, the reason killed */
};

/*
 * Sends the exit signal {'EXIT', From, Reason} of kind `sig` to pid `to`:
 * false (nothing sent) when it is not alive, that is exiting or gone, at
 * the lookup (one that begins its exit right after drops the signal).
 * Reason is copied; a long copy lends the queue of `by`, the process on
 * whose thread this runs (NULL: none, as within a lend already;
 * vm/lend.h).  The target acts on the signal itself, in its order with
 * the messages sent before (vm_signals_take).  `seq`: the exiting
 * process whose seq_trace token a link's signal carries (a send of its,
 * vm/seqtrace.h); NULL for exit/2's, which carries none.
 */
bool vm_exit_signal(tvm_vm *vm, Process *by, Term from, uint64_t to, Term reason, int sig,
                    Process *seq);

/* What vm_exit_send did. */
typedef enum VmExit {
    VM_EXIT_SENT,
    VM_EXIT_NOPROC,    /* pid is not alive: nothing sent */
    VM_EXIT_TOO_BIG,   /* Reason is over max_message_words: nothing sent */
} VmExit;

/*
 * exit(Pid, Reason) by p, on p's thread (erlang:exit/2, tvm_exit): a
 * process, or a call context, whose signals say From `undefined` (what
 * self() gives there).  Reason `kill` is the untrappable kind.  A signal
 * p sends itself (a process) is taken in before this returns, so one
 * that kills ends p as the native returns.
 */
VmExit vm_exit_send(Process *p, uint64_t pid, Term reason);

/*
 * Acts on the exit signals among the messages from *from on, which p
 * just moved from its inbox into its queue (p's own thread, p->lock
 * held): a trapping process keeps each as the message {'EXIT', From,
 * Reason}; otherwise a signal that kills marks p (Process.kill, its
 * reductions zeroed: it dies at its next reduction check, or as the
 * native or wait it is in returns) and the rest are dropped.
 */
void vm_signals_take(Process *p, Message **from);

/*
 * `child` was just spawned by `parent` with a link (spawn_link/3): the
 * link is made before the child can run (it is in no run queue yet).
 * The two link events are vm_hook_spawn's, in BEAM's order among the
 * spawn's events.
 */
void vm_links_spawned(Process *parent, Process *child);

/*
 * p is exiting with `reason` (its own fiber, after its exit event): no
 * link can be made to it from here on, every process linked to it loses
 * the link (a getting_unlinked event of each, where traced) and gets the
 * exit signal.
 */
void vm_links_exit(Process *p, Term reason);

/* What p's links and the exit signal it was killed by leave behind
 * (vm/lifecycle.c, as the process is freed or recycled). */
void vm_links_release(Process *p);

/* erlang:link/1, unlink/1, exit/2 and process_flag/2 (trap_exit). */
VmNativeTable vm_links_natives(void);

#endif /* VM_LINKS_H */
