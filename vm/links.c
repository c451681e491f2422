/*
 * vm/links.c - links and exit signals.
 *
 * The semantics are BEAM's.  A link is two-way: link(Pid) joins the
 * caller and Pid, unlink(Pid) parts them, spawn_link/3 joins a parent
 * and its child before the child runs.  When a process exits, every
 * process linked to it gets the exit signal {'EXIT', Pid, Reason}; exit(
 * Pid, Reason) sends one to any process, also from a call context and as
 * the embedder's tvm_exit (vm_exit_send; From undefined where the sender
 * has no pid, as self() there).  A process that traps exits
 * (process_flag(trap_exit, true)) receives each signal as that message.
 * One that does not dies of it, with its reason, unless the reason is
 * normal (dropped, but for exit(self(), normal), which ends the caller);
 * exit(Pid, kill) kills even a trapping process, with the reason killed,
 * which is what its links then get.  link/1 to a process that does not
 * exist raises noproc, or for a trapping caller returns true and sends it
 * {'EXIT', Pid, noproc}.  unlink/1 drops the signals of that link not yet
 * taken in, so none comes after it returns.
 *
 * Link sets.  Process.links holds the pids a process is linked to, both
 * ends of every link, under the VM's link_lock (one mutex for all: links
 * change rarely, and one lock orders the two ends' updates without a
 * lock order between processes).  links_closed, set under it as a process
 * exits, makes later links to it fail as links to a process that is
 * gone.  The lock is taken before the process table's lock (vm_proc_get
 * is called under it), never under it, and nothing that may wait (a
 * trace event under the lossless policy) runs under it.
 *
 * Signals.  A signal is a message flagged with its kind (Message.sig),
 * put in the target's inbox behind the messages sent before it, so a
 * pair of processes sees messages and signals in the order they were
 * sent, as in BEAM.  The sender sets the target's sig_pending (under the
 * target's lock) and wakes it; the target acts on its signals itself, on
 * its own thread, when it moves its inbox into its queue: at a receive,
 * at a wait (which a signal ends), at a reduction check that finds
 * sig_pending set (vm_yield_point), and in timer:sleep/1.  So trap_exit
 * and the kill are only ever touched by the process they belong to.
 */
#include "vm/links.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/hook.h"
#include "vm/interp.h"
#include "vm/sched.h"
#include "vm/seqtrace.h"
#include "vm/vm.h"

/* ==== link sets (link_lock held) ==== */

static bool has_link(const Process *p, uint64_t pid)
{
    for (uint32_t i = 0; i < p->nlinks; i++)
        if (p->links[i] == pid)
            return true;
    return false;
}

static void add_link(Process *p, uint64_t pid)
{
    if (p->nlinks == p->links_cap) {
        p->links_cap = p->links_cap ? 2 * p->links_cap : 4;
        p->links = vm_realloc(p->links, p->links_cap * sizeof *p->links);
    }
    p->links[p->nlinks++] = pid;
}

static bool del_link(Process *p, uint64_t pid)
{
    for (uint32_t i = 0; i < p->nlinks; i++)
        if (p->links[i] == pid) {
            p->links[i] = p->links[--p->nlinks];
            return true;
        }
    return false;
}

/* ==== signals ==== */

bool vm_exit_signal(tvm_vm *vm, Process *by, Term from, uint64_t to, Term reason, int sig,
                    Process *seq)
{
    SchedSystem *sys = vm_sched_of(vm);
    Process *t = sys ? vm_proc_get_live(sys, to) : NULL;
    if (!t)
        return false;
    /* {'EXIT', From, Reason} built here, copied whole into the message
     * (the reason fits: an exit reason was capped to max_message_words
     * less the tuple, and exit/2 checks its own). */
    Term tuple[4] = { MAKE_HEADER(IMM_HDR_TUPLE, 3), make_atom(ATOM_UEXIT), from, reason };
    Message *m = VM_UNLIKELY(seq && seq->seq)
                     ? vm_seq_message(seq, to, make_boxed(tuple), term_size(make_boxed(tuple)))
                     : vm_message_new(by, make_boxed(tuple), SIZE_MAX);
    m->sig = (uint8_t)sig;
    vm_signal_deliver(sys, t, m);
    vm_proc_put(sys, t);
    return true;
}

VmExit vm_exit_send(Process *p, uint64_t pid, Term reason)
{
    /* The signal is a copy between processes, bounded as a message is. */
    if (term_size_capped(reason, p->vm->max_msg > 4 ? p->vm->max_msg - 4 : 0) == SIZE_MAX)
        return VM_EXIT_TOO_BIG;
    int sig = reason == make_atom(ATOM_KILL) ? VM_SIG_KILL : VM_SIG_EXIT;
    /* From a call context (pid 0), what self() gives there. */
    Term from = p->pid ? make_pid(p->pid) : make_atom(ATOM_UNDEFINED);
    bool sent = vm_exit_signal(p->vm, p, from, pid, reason, sig, NULL);
    /* A signal to itself is acted on before the call returns: the
     * interpreter finds the kill as the native returns. */
    if (sent && p->fiber && pid == p->pid)
        vm_proc_fetch(p);
    return sent ? VM_EXIT_SENT : VM_EXIT_NOPROC;
}

/* What a signal does to p, which does not trap it (or cannot: kill):
 * the reason p dies of, or 0 when it is dropped. */
static Term kill_reason(const Process *p, const Message *m)
{
    Term *e = tuple_elems(m->term);
    if (m->sig == VM_SIG_KILL)
        return make_atom(ATOM_KILLED);
    if (e[2] != make_atom(ATOM_NORMAL))
        return e[2];
    /* exit(self(), normal) ends the caller (BEAM since OTP 23). */
    return m->sig == VM_SIG_EXIT && e[1] == make_pid(p->pid) ? e[2] : 0;
}

void vm_signals_take(Process *p, Message **from)
{
    vm_atomic_store_relaxed(&p->sig_pending, 0);
    for (Message **pp = from; *pp;) {
        Message *m = *pp;
        if (!m->sig || (vm_atomic_load_relaxed(&p->trap_exit) && m->sig != VM_SIG_KILL)) {
            m->sig = VM_SIG_NONE;   /* kept: an ordinary message now */
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        if (p->mq_tail == &m->next)
            p->mq_tail = pp;
        vm_atomic_store_relaxed(&p->mq_len, vm_atomic_load_relaxed(&p->mq_len) - 1);
        p->mq_words -= m->words;
        m->next = NULL;
        Term why = kill_reason(p, m);
        if (why && !p->kill) {
            /* The reason stays in the message, off the heap (the
             * collector leaves such terms alone), until p is freed. */
            p->kill = why;
            p->kill_signal = true;
            p->kill_msg = m;
            p->reds = 0;
        } else {
            free(m);
        }
    }
}

/* ==== links ==== */

void vm_links_spawned(Process *parent, Process *child)
{
    tvm_vm *vm = parent->vm;
    pthread_mutex_lock(&vm->link_lock);
    add_link(parent, child->pid);
    add_link(child, parent->pid);
    pthread_mutex_unlock(&vm->link_lock);
}

void vm_links_exit(Process *p, Term reason)
{
    tvm_vm *vm = p->vm;
    SchedSystem *sys = vm_sched_of(vm);
    pthread_mutex_lock(&vm->link_lock);
    p->links_closed = true;
    uint32_t n = p->nlinks;
    Process **peers = n ? vm_malloc(n * sizeof *peers) : NULL;
    for (uint32_t i = 0; i < n; i++) {
        /* Still in the table: its exit would have taken it off our set. */
        peers[i] = vm_proc_get(sys, p->links[i]);
        if (peers[i])
            del_link(peers[i], p->pid);
    }
    p->nlinks = 0;
    pthread_mutex_unlock(&vm->link_lock);
    for (uint32_t i = 0; i < n; i++) {
        if (!peers[i])
            continue;
        vm_hook_procs(p, peers[i], VM_PEV_GETTING_UNLINKED, make_pid(p->pid));
        /* No lend of its own: the exit's copies are lent already when
         * long (vm/lifecycle.c). */
        vm_exit_signal(vm, NULL, make_pid(p->pid), peers[i]->pid, reason, VM_SIG_LINK, p);
        vm_proc_put(sys, peers[i]);
    }
    free(peers);
}

void vm_links_release(Process *p)
{
    free(p->links);
    p->links = NULL;
    p->nlinks = p->links_cap = 0;
    free(p->kill_msg);
    p->kill_msg = NULL;
}

/* ==== natives ==== */

static tvm_status raise(Process *p, Atom reason)
{
    vm_exception_set(p, make_atom(ATOM_ERROR), make_atom(reason), NULL);
    return TVM_EXCEPTION;
}

static tvm_status give(Process *p, Term t, tvm_term *result)
{
    *result = vm_root_push(p, t);
    return TVM_OK;
}

/* The pid argument of link/1 and unlink/1 from a process (a call context
 * has no links and takes no signals): false for badarg. */
static bool pid_arg(Process *p, tvm_term a, uint64_t *pid)
{
    Term t = vm_root_get(p, a);
    if (!term_is_pid(t) || !p->fiber)
        return false;
    *pid = pid_value(t);
    return true;
}

/* link(Pid) on t (Pid's process, NULL when it is gone). */
static tvm_status do_link(Process *p, uint64_t pid, Process *t, tvm_term *result)
{
    bool alive = false, made = false;
    pthread_mutex_lock(&p->vm->link_lock);
    if (t && !t->links_closed) {
        alive = true;
        made = !has_link(p, pid);
        if (made) {
            add_link(p, pid);
            add_link(t, p->pid);
        }
    }
    pthread_mutex_unlock(&p->vm->link_lock);
    /* As BEAM: the caller's event for every call, the target's only when
     * the link is new. */
    vm_hook_procs(p, p, VM_PEV_LINK, make_pid(pid));
    if (made)
        vm_hook_procs(p, t, VM_PEV_GETTING_LINKED, make_pid(p->pid));
    if (alive)
        return give(p, make_atom(ATOM_TRUE), result);
    if (!vm_atomic_load_relaxed(&p->trap_exit))
        return raise(p, ATOM_NOPROC);
    Term e[3] = { make_atom(ATOM_UEXIT), make_pid(pid), make_atom(ATOM_NOPROC) };
    vm_send(p->vm, NULL, p->pid, vm_make_tuple(p, 3, e));
    return give(p, make_atom(ATOM_TRUE), result);
}

/* unlink(Pid) on t (Pid's process, NULL when it is gone). */
static tvm_status do_unlink(Process *p, uint64_t pid, Process *t, tvm_term *result)
{
    pthread_mutex_lock(&p->vm->link_lock);
    bool had = del_link(p, pid);
    if (had && t)
        del_link(t, p->pid);
    pthread_mutex_unlock(&p->vm->link_lock);
    /* No signal of this link comes after the call: one still in the
     * inbox is dropped, also when the other end's exit removed the link
     * already (one taken in as a message before stays). */
    vm_signals_drop_from(p, pid, VM_SIG_LINK);
    vm_hook_procs(p, p, VM_PEV_UNLINK, make_pid(pid));
    if (had && t)
        vm_hook_procs(p, t, VM_PEV_GETTING_UNLINKED, make_pid(p->pid));
    return give(p, make_atom(ATOM_TRUE), result);
}

/* link/1 and unlink/1: the argument, itself (true, nothing to do), and a
 * reference to the other process for the call. */
static tvm_status link_call(Process *p, tvm_term a, bool on, tvm_term *result)
{
    uint64_t pid;
    if (!pid_arg(p, a, &pid))
        return raise(p, ATOM_BADARG);
    if (pid == p->pid)
        return give(p, make_atom(ATOM_TRUE), result);
    SchedSystem *sys = vm_sched_of(p->vm);
    Process *t = vm_proc_get(sys, pid);
    tvm_status st = on ? do_link(p, pid, t, result) : do_unlink(p, pid, t, result);
    if (t)
        vm_proc_put(sys, t);
    return st;
}

static tvm_status nif_link(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc, (void)data;
    return link_call(env->p, argv[0], true, result);
}

static tvm_status nif_unlink(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                             void *data)
{
    (void)argc, (void)data;
    return link_call(env->p, argv[0], false, result);
}

static tvm_status nif_exit2(tvm_env *env, int argc, const tvm_term *argv, tvm_term *result,
                            void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Term pid = vm_root_get(p, argv[0]);
    /* From a call context too: sending needs no mailbox of the sender
     * (From is then undefined, as self() there). */
    if (!term_is_pid(pid))
        return raise(p, ATOM_BADARG);
    if (vm_exit_send(p, pid_value(pid), vm_root_get(p, argv[1])) == VM_EXIT_TOO_BIG)
        return raise(p, ATOM_SYSTEM_LIMIT);
    /* true also when the process is gone, as BEAM's. */
    return give(p, make_atom(ATOM_TRUE), result);
}

static tvm_status nif_process_flag(tvm_env *env, int argc, const tvm_term *argv,
                                   tvm_term *result, void *data)
{
    (void)argc, (void)data;
    Process *p = env->p;
    Term flag = vm_root_get(p, argv[0]), v = vm_root_get(p, argv[1]);
    if (flag != make_atom(ATOM_TRAP_EXIT) || (v != TERM_TRUE && v != TERM_FALSE) || !p->fiber)
        return raise(p, ATOM_BADARG);
    bool old = vm_atomic_load_relaxed(&p->trap_exit);
    vm_atomic_store_relaxed(&p->trap_exit, v == TERM_TRUE);
    return give(p, make_bool(old), result);
}

static const VmNativeDef natives[] = {
    { "erlang", "link", 1, nif_link },
    { "erlang", "unlink", 1, nif_unlink },
    { "erlang", "exit", 2, nif_exit2 },
    { "erlang", "process_flag", 2, nif_process_flag },
};

VmNativeTable vm_links_natives(void)
{
    return VM_NATIVE_TABLE(natives);
}
