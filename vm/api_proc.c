/*
 * vm/api_proc.c - the public process API (tracevm.h, "Processes").
 */
#include "include/tracevm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/hook.h"
#include "vm/links.h"
#include "vm/print.h"
#include "vm/qsbr.h"
#include "vm/sched.h"
#include "vm/timer.h"


#define ENV_OK(env) ((env) && (env)->p)

tvm_status tvm_spawn(tvm_env *env, const char *mod, const char *fun, int argc,
                     const tvm_term *argv, tvm_pid *pid)
{
    return tvm_spawn_opt(env, mod, fun, argc, argv, NULL, pid);
}

tvm_status tvm_spawn_opt(tvm_env *env, const char *mod, const char *fun, int argc,
                         const tvm_term *argv, const tvm_spawn_opts *opts, tvm_pid *pid)
{
    Term args[VM_MAX_ARITY];
    const Export *fn;
    if (!pid)
        return TVM_ERR_BADARG;
    tvm_status rs = vm_env_resolve(env, mod, fun, argc, argv, args, &fn);
    if (rs != TVM_OK)
        return rs;
    /* The host's struct as this library's (vm_opts_copy: the size rule). */
    tvm_spawn_opts o = { 0 };
    char why[128];
    if (opts && !vm_opts_copy(&o, sizeof o, opts, why, sizeof why))
        return TVM_ERR_BADARG;
    size_t max_heap = env->p->vm->max_heap;
    if (o.max_heap_words)
        max_heap = o.max_heap_words == TVM_NO_LIMIT ? 0 : o.max_heap_words;
    *pid = vm_spawn(env->p, fn, argc, args, true, false, max_heap);
    return *pid ? TVM_OK : TVM_ERR_LIMIT;
}

tvm_status tvm_join(tvm_env *env, tvm_pid pid, tvm_term *result)
{
    if (!ENV_OK(env) || !result)
        return TVM_ERR_BADARG;
    /* A native would wait on its scheduler thread: the process it joins
     * could never run there (with one scheduler, nothing could), and a
     * process joining itself would never exit.  Refused before the pid is
     * taken off the joinables, so a host thread can still join it. */
    if (vm_running_process())
        return TVM_ERR_BADARG;
    Process *self = env->p;
    SchedSystem *sys = vm_sched_of(self->vm);
    Process *p = sys ? vm_proc_join(sys, pid) : NULL;
    if (!p)
        return TVM_ERR_NOTFOUND;
    /* p has exited: its exit fields and exception trace no longer change. */
    Message *v = p->exit_value;
    vm_heap_ensure(self, v->words, NULL, 0);
    Term val = vm_copy_term(self, v->term);
    tvm_status st = TVM_OK;
    if (p->exit_class == make_atom(ATOM_NORMAL)) {
        *result = vm_root_push(self, val);
    } else {
        self->exc_class = p->exit_class;
        self->exc_reason = val;
        self->exc_trace_term = THE_NONE;
        self->exc_depth = p->exc_depth;
        memcpy(self->exc_trace, p->exc_trace, p->exc_depth * sizeof(RawFrame));
        self->exc_pending = true;
        st = TVM_EXCEPTION;
    }
    vm_proc_put(sys, p);
    return st;
}

tvm_status tvm_send(tvm_env *env, tvm_pid pid, tvm_term msg)
{
    if (!ENV_OK(env) || msg.h >= env->p->nroots)
        return TVM_ERR_BADARG;
    switch (vm_send(env->p->vm, env->p, pid, vm_root_get(env->p, msg))) {
    case VM_SEND_OK: return TVM_OK;
    case VM_SEND_TOO_BIG: return TVM_ERR_LIMIT;
    default: return TVM_ERR_NOTFOUND;
    }
}

tvm_status tvm_exit(tvm_env *env, tvm_pid pid, tvm_term reason)
{
    if (!ENV_OK(env) || reason.h >= env->p->nroots)
        return TVM_ERR_BADARG;
    switch (vm_exit_send(env->p, pid, vm_root_get(env->p, reason))) {
    case VM_EXIT_SENT: return TVM_OK;
    case VM_EXIT_TOO_BIG: return TVM_ERR_LIMIT;
    default: return TVM_ERR_NOTFOUND;
    }
}

tvm_status tvm_make_pid(tvm_env *env, tvm_pid pid, tvm_term *out)
{
    if (!ENV_OK(env) || !out || pid == 0 || pid >= ((uint64_t)1 << 57))
        return TVM_ERR_BADARG;
    *out = vm_root_push(env->p, make_pid(pid));
    return TVM_OK;
}

tvm_status tvm_get_pid(tvm_env *env, tvm_term t, tvm_pid *pid)
{
    if (!ENV_OK(env) || !pid || t.h >= env->p->nroots)
        return TVM_ERR_BADARG;
    Term v = vm_root_get(env->p, t);
    if (!term_is_pid(v))
        return TVM_ERR_TYPE;
    *pid = pid_value(v);
    return TVM_OK;
}

/* A process being killed (max_heap_size) does not wait: the wait would
 * keep its heap for as long as it lasted (vm/process.h).  The native gets
 * the exception to return; the interpreter raises the kill either way. */
static tvm_status being_killed(Process *p)
{
    vm_exception_set(p, make_atom(ATOM_EXIT), p->kill, NULL);
    return TVM_EXCEPTION;
}

tvm_status tvm_sleep(tvm_env *env, int64_t ms)
{
    if (!ENV_OK(env) || ms < 0)
        return TVM_ERR_BADARG;
    Process *p = env->p;
    if (VM_UNLIKELY(p->kill))
        return being_killed(p);
    if (!p->fiber) {
        struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
        bool was = vm_qsbr_block_begin();   /* offline while blocked (vm/qsbr.h) */
        while (nanosleep(&ts, &ts) != 0)
            ;
        vm_qsbr_block_end(was);
        return TVM_OK;
    }
    if (ms > VM_TIMEOUT_MAX_MS)
        ms = VM_TIMEOUT_MAX_MS;
    pthread_mutex_lock(&p->lock);
    uint64_t seq = ++p->timer_seq;
    p->timed_out = false;
    pthread_mutex_unlock(&p->lock);
    vm_timer_add(&vm_sched_of(p->vm)->timers, vm_now_ns() + (uint64_t)ms * 1000000u, p->pid, seq);
    for (;;) {
        p->want_wait = true;
        vm_proc_yield(p);
        pthread_mutex_lock(&p->lock);
        bool to = p->timed_out;
        pthread_mutex_unlock(&p->lock);
        /* An exit signal ends the sleep when it kills (vm/links.c). */
        if (vm_proc_signalled(p))
            return being_killed(p);
        if (to)
            return TVM_OK;
    }
}

bool tvm_consume_timeslice(tvm_env *env, int percent)
{
    if (!ENV_OK(env) || percent < 1 || percent > 100)
        return false;
    Process *p = env->p;
    p->reds -= (int32_t)((int64_t)VM_REDUCTIONS * percent / 100);
    return p->reds <= 0;
}

tvm_status tvm_receive(tvm_env *env, int64_t timeout_ms, tvm_term *msg)
{
    if (!ENV_OK(env) || !msg || !env->p->fiber)
        return TVM_ERR_BADARG;
    Process *p = env->p;
    if (VM_UNLIKELY(p->kill))
        return being_killed(p);
    p->cursor = &p->mq;
    bool got = vm_proc_wait(p, timeout_ms);
    if (VM_UNLIKELY(p->kill))   /* by the messages it took in */
        return being_killed(p);
    if (!got)
        return TVM_ERR_NOTFOUND;
    p->cursor = &p->mq;
    Message *m = p->mq;
    vm_heap_ensure(p, m->words, NULL, 0);
    *msg = vm_root_push(p, vm_copy_term(p, m->term));
    vm_proc_accept(p);
    return TVM_OK;
}

void tvm_wait_idle(tvm_vm *vm)
{
    SchedSystem *sys = vm ? vm_sched_of(vm) : NULL;
    /* From a process (a native) there is always a process alive, the
     * caller: waiting would block its scheduler thread forever. */
    if (!sys || vm_running_process())
        return;
    pthread_mutex_lock(&sys->lock);
    while (sys->live > 0) {
        sys->exit_waiters++;
        pthread_cond_wait(&sys->exited, &sys->lock);
        sys->exit_waiters--;
    }
    pthread_mutex_unlock(&sys->lock);
}

static const char *state_name(int st)
{
    switch (st) {
    case PS_RUNNABLE: return "runnable";
    case PS_RUNNING: return "running";
    case PS_WAITING: return "waiting";
    case PS_EXITED: return "exited";
    default: return "new";
    }
}

size_t tvm_processes(tvm_vm *vm, tvm_process_info *out, size_t max)
{
    SchedSystem *sys = vm ? vm_sched_of(vm) : NULL;
    if (!sys)
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&sys->lock);
    for (size_t i = 0; i < sys->cap; i++) {
        Process *p = sys->table[i];
        if (!p || p == (Process *)1)
            continue;
        if (out && n < max) {
            tvm_process_info *pi = &out[n];
            pi->pid = p->pid;
            pi->function[0] = '\0';
            pi->reductions = vm_atomic_load_relaxed(&p->reductions);
            pi->heap_words = vm_atomic_load_relaxed(&p->heap_words);
            pthread_mutex_lock(&p->lock);
            pi->state = state_name(p->state);
            pi->message_queue = vm_atomic_load_relaxed(&p->mq_len) + p->inbox_len;
            /* Not running: its frames cannot change while we hold its lock
             * (a scheduler takes the lock to make it RUNNING). */
            if (p->state != PS_RUNNING) {
                const FuncInfo *fi = p->nframes ? p->frames[p->nframes - 1].fn : NULL;
                const Export *e = p->entry;
                if (fi || e) {
                    StrBuf sb;
                    sb_init(&sb);
                    if (fi)
                        vm_print_mfa(&sb, fi->mod, fi->name, fi->arity);
                    else
                        vm_print_mfa(&sb, e->mod, e->name, e->arity);
                    sb_copy_out(&sb, pi->function, sizeof pi->function);
                    sb_free(&sb);
                }
            }
            pthread_mutex_unlock(&p->lock);
        }
        n++;
    }
    pthread_mutex_unlock(&sys->lock);
    return n;
}
