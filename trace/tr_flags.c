/*
 * trace/tr_flags.c - process trace flags per session: the flags by
 * name, tvm_trace_flags for one process, tvm_trace_calls on top of it,
 * the trace word's state that every change writes, and the session
 * variants (for all processes and new ones: trace/tr_flags_all.c).
 *
 * Protocol: one word for the hot paths, a table for several sessions.
 *
 * Terms.  A process's trace word (Process.trace, vm/traceword.h) holds the
 * union of every session's flags for it and the sid of the session they
 * belong to, or VM_SID_MULTI when several sessions have flags: then each
 * session's word (its flags and its sid) is in the process's table
 * (Process.trace_tab), and the trace word's flags are their union.  The
 * hot paths test the union (one load, as before sessions existed); an
 * emitter that needs one session's flags takes them from the word when it
 * names that session, else from the table (tr_pflags).  The VM's defaults
 * for new processes (vm->trace_new, vm->trace_new_tab) have the same form.
 *
 * Writers.  Every change of a process's flags, by any thread (an API
 * call, erlang:trace, a fold of the changes for all, a match spec's
 * {silent, B} on the process's own thread, a parent handing its flags
 * to a child it spawned or dropping set_on_first_spawn or set_on_first_link:
 * tr_flags_inherit,
 * one process's lock at a time), takes p->lock, reads the
 * sessions' words (from the word or the table: tr_state_words), changes
 * them, and writes the table (allocated on first need) and then the word
 * (tr_state_store), so the union always matches the table a reader finds
 * through it.  The table is published ([TF1] release) before the first
 * word that says VM_SID_MULTI; readers load it ([TF1'] acquire) after
 * such a word.  A table is never freed before its process: a reader may
 * hold it while the word changes back to one session and later to
 * several again (then it reads each session's word as it was before or
 * after, which is what racing with a change means anyway).  The defaults
 * have the same protocol under the sessions' flags_lock.  A change of a
 * session that is not live is refused, tested after the fold under the
 * same lock (why a destroyed session so leaves no flags:
 * trace/tr_flags_all.c, "A session's end").
 *
 * Readers load the word relaxed: a process reads its own word at each
 * breakpoint hit, spawn, exit and its other events, and a change applies
 * from its next read.  Nothing is stopped and nothing is waited for, so a
 * process running on another scheduler may still emit (or not) one event
 * under the old flags while the change becomes visible.
 *
 * All processes and new processes: trace/tr_flags_all.c (a generation
 * that each process folds in before it next runs, or when another thread
 * looks at its flags; tr_pflags_change folds first, so a change of one
 * process made after a change for all comes after it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/tr_flags_internal.h"
#include "trace/tr_ms.h"
#include "trace/tr_session.h"
#include "trace/tr_vm.h"
#include "vm/atom.h"
#include "vm/heap.h"
#include "vm/strbuf.h"
#include "vm/sched.h"

/* The flags by name, for the CLI, erlang:trace/3 and error messages, and
 * as predefined atoms (vm/atoms.def) for trace_info's list, which a full
 * atom table must not shorten. */
static const struct {
    const char *name;
    unsigned bit;
    Atom atom;
} flag_names[] = {
    { "call", TVM_TRACE_CALL, ATOM_CALL },
    { "arity", TVM_TRACE_ARITY, ATOM_ARITY },
    { "timestamp", TVM_TRACE_TIMESTAMP, ATOM_TIMESTAMP },
    { "procs", TVM_TRACE_PROCS, ATOM_PROCS },
    { "return_to", TVM_TRACE_RETURN_TO, ATOM_RETURN_TO },
    { "silent", TVM_TRACE_SILENT, ATOM_SILENT },
    { "running", TVM_TRACE_RUNNING, ATOM_RUNNING },
    { "send", TVM_TRACE_SEND, ATOM_SEND },
    { "receive", TVM_TRACE_RECEIVE, ATOM_RECEIVE },
    { "set_on_spawn", TVM_TRACE_SET_ON_SPAWN, ATOM_SET_ON_SPAWN },
    { "set_on_first_spawn", TVM_TRACE_SET_ON_FIRST_SPAWN, ATOM_SET_ON_FIRST_SPAWN },
    { "garbage_collection", TVM_TRACE_GARBAGE_COLLECTION, ATOM_GARBAGE_COLLECTION },
    { "set_on_link", TVM_TRACE_SET_ON_LINK, ATOM_SET_ON_LINK },
    { "set_on_first_link", TVM_TRACE_SET_ON_FIRST_LINK, ATOM_SET_ON_FIRST_LINK },
    { "exiting", TVM_TRACE_EXITING, ATOM_EXITING },
    { "monotonic_timestamp", TVM_TRACE_MONOTONIC_TIMESTAMP, ATOM_MONOTONIC_TIMESTAMP },
    { "strict_monotonic_timestamp", TVM_TRACE_STRICT_MONOTONIC_TIMESTAMP,
      ATOM_STRICT_MONOTONIC_TIMESTAMP },
};

#define NFLAG_NAMES (sizeof flag_names / sizeof flag_names[0])

unsigned tr_flag_bit(const char *name, size_t n)
{
    /* BEAM's all: every flag it has but tracer and cpu_timestamp, here
     * every flag there is (not a row: trace_info lists single flags). */
    if (n == 3 && !strncmp(name, "all", 3))
        return VM_TRACE_ALL;
    for (size_t k = 0; k < NFLAG_NAMES; k++)
        if (strlen(flag_names[k].name) == n && !strncmp(name, flag_names[k].name, n))
            return flag_names[k].bit;
    return 0;
}

tvm_status tvm_trace_flags_parse(const char *list, unsigned *flags, tvm_error *err)
{
    if (!flags) {
        if (err) {
            err->status = TVM_ERR_BADARG;
            snprintf(err->message, sizeof err->message, "tvm_trace_flags_parse: NULL flags");
        }
        return TVM_ERR_BADARG;
    }
    *flags = 0;
    for (const char *p = list ? list : "";; p++) {
        size_t n = strcspn(p, ",");
        unsigned bit = tr_flag_bit(p, n);
        if (!bit) {
            if (err) {
                StrBuf sb;
                sb_init(&sb);
                for (size_t k = 0; k < NFLAG_NAMES; k++)
                    sb_printf(&sb, "%s%s", k ? ", " : "", flag_names[k].name);
                sb_puts(&sb, " or all");
                err->status = TVM_ERR_BADARG;
                snprintf(err->message, sizeof err->message,
                         "unknown flag '%.*s' (expected a comma-separated list of %s)", (int)n,
                         p, sb.s);
                sb_free(&sb);
            }
            return TVM_ERR_BADARG;
        }
        *flags |= bit;
        p += n;
        if (!*p)
            break;
    }
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    return TVM_OK;
}

Term tr_flags_term(Process *p, unsigned flags)
{
    Term l = TERM_NIL;
    for (size_t k = NFLAG_NAMES; k-- > 0;) {
        if (!(flags & flag_names[k].bit))
            continue;
        tvm_term h = vm_root_push(p, l);
        l = vm_make_cons(p, make_atom(flag_names[k].atom), vm_root_get(p, h));
        p->nroots = h.h;
    }
    return l;
}

bool tr_flags_valid(unsigned flags)
{
    return (flags & ~(unsigned)VM_TRACE_ALL) == 0;
}

/* ==== one session's flags in a word and a table ==== */

unsigned tr_pflags(const Process *p, uintptr_t pf, unsigned sid)
{
    unsigned wsid = vm_trace_sid(pf);
    if (wsid == sid)
        return VM_TRACE_FLAGS(pf);
    if (wsid != VM_SID_MULTI)
        return 0;
    /* [TF1'] acquire: pairs with [TF1] (the table before the word). */
    const VmTraceTab *t = vm_atomic_load_ptr_acquire(&p->trace_tab);
    uintptr_t w = t ? vm_atomic_load_relaxed(&t->w[vm_sid_slot(sid)]) : 0;
    return vm_trace_sid(w) == sid ? VM_TRACE_FLAGS(w) : 0;
}

void tr_state_words(const VmAtomic *word, const VmTraceTab *tab, uintptr_t w[VM_SESSIONS_MAX])
{
    uintptr_t pf = vm_atomic_load_relaxed(word);
    unsigned wsid = vm_trace_sid(pf);
    for (unsigned i = 0; i < VM_SESSIONS_MAX; i++)
        w[i] = wsid == VM_SID_MULTI ? vm_atomic_load_relaxed(&tab->w[i]) : 0;
    if (wsid != VM_SID_MULTI && VM_TRACE_FLAGS(pf))
        w[vm_sid_slot(wsid)] = pf;
}

void tr_state_store(VmAtomic *word, VmAtomic *tabp, VmTraceTab *fixed,
                    const uintptr_t w[VM_SESSIONS_MAX])
{
    unsigned n = 0, all = 0;
    uintptr_t one = 0;
    for (unsigned i = 0; i < VM_SESSIONS_MAX; i++)
        if (VM_TRACE_FLAGS(w[i])) {
            n++;
            all |= VM_TRACE_FLAGS(w[i]);
            one = w[i];
        }
    if (n <= 1) {
        vm_atomic_store_relaxed(word, one);
        return;
    }
    VmTraceTab *tab = fixed ? fixed : vm_atomic_load_ptr_relaxed(tabp);
    if (!tab) {
        tab = vm_calloc(1, sizeof *tab);
        /* [TF1] release: the table (zeroed) before any word names it. */
        vm_atomic_store_ptr_release(tabp, tab);
    }
    for (unsigned i = 0; i < VM_SESSIONS_MAX; i++)
        vm_atomic_store_relaxed(&tab->w[i], w[i]);
    /* [TF1] release: the table's words before the word that sends
     * readers to them. */
    vm_atomic_store_release(word, vm_trace_word(VM_SID_MULTI, all));
}

bool tr_state_change(VmAtomic *word, VmAtomic *tabp, VmTraceTab *fixed, unsigned sid,
                     unsigned flags, bool on)
{
    uintptr_t w[VM_SESSIONS_MAX];
    tr_state_words(word, fixed ? fixed : vm_atomic_load_ptr_relaxed(tabp), w);
    unsigned slot = vm_sid_slot(sid);
    unsigned cur = vm_trace_sid(w[slot]) == sid ? VM_TRACE_FLAGS(w[slot]) : 0;
    unsigned nw = on ? cur | flags : cur & ~flags;
    if (nw == cur && (nw || !w[slot]))
        return false;
    w[slot] = nw ? vm_trace_word(sid, nw) : 0;
    tr_state_store(word, tabp, fixed, w);
    return true;
}

bool tr_pflags_change(Process *p, unsigned sid, unsigned flags, bool on, bool force)
{
    pthread_mutex_lock(&p->lock);
    /* The changes for all first: this one comes after them.  And before
     * the test of the session: a stop that the test does not see records
     * its clearing after this fold, so p folds it in later. */
    tr_fold_locked(p);
    bool ok = force || tr_session_live(p->vm, sid);
    if (ok)
        tr_state_change(&p->trace, &p->trace_tab, NULL, sid, flags, on);
    pthread_mutex_unlock(&p->lock);
    return ok;
}

/* ==== inheritance at spawn: set_on_spawn, set_on_link and their firsts ==== */

/*
 * What parent hands its new child in one session, given parent's flags
 * there (*f, which this updates as parent loses flags), in BEAM's order
 * (erl_create_process in erts/emulator/beam/erl_process.c, as OTP 25
 * behaves): with SOS or SOS1, the flags, and with SOS1 without SOS1 and
 * SOS, which parent loses (set_on_first_spawn overrides set_on_spawn);
 * then, for a spawn_link with SOL or SOL1, parent's flags as they are by
 * then on top, and with SOL1 both lose SOL1 and SOL.  (A link/1 of an
 * existing process hands nothing on: OTP 25's link/1 does not.)
 */
static unsigned inherit_flags(unsigned *f, bool link)
{
    const unsigned sos = VM_TRACE_SOS | VM_TRACE_SOS1, sol = VM_TRACE_SOL | VM_TRACE_SOL1;
    unsigned give = 0;
    if (*f & sos) {
        give = *f;
        if (*f & VM_TRACE_SOS1) {
            give &= ~sos;
            *f &= ~sos;
        }
    }
    if (link && (*f & sol)) {
        give |= *f;
        if (*f & VM_TRACE_SOL1) {
            give &= ~sol;
            *f &= ~sol;
        }
    }
    return give;
}

/* inherit_flags for each session of parent, into give[] (words);
 * parent->lock held, the changes for all folded in. */
static void inherit_locked(Process *parent, bool link, uintptr_t give[VM_SESSIONS_MAX])
{
    uintptr_t w[VM_SESSIONS_MAX];
    tr_state_words(&parent->trace, vm_atomic_load_ptr_relaxed(&parent->trace_tab), w);
    for (unsigned i = 0; i < VM_SESSIONS_MAX; i++) {
        unsigned f = VM_TRACE_FLAGS(w[i]);
        const unsigned was = f, sid = vm_trace_sid(w[i]);
        unsigned g = inherit_flags(&f, link);
        if (f != was)
            tr_state_change(&parent->trace, &parent->trace_tab, NULL, sid, was & ~f, false);
        give[i] = g ? vm_trace_word(sid, g) : 0;
    }
}

void tr_flags_inherit(Process *parent, uint64_t child, bool link)
{
    uintptr_t give[VM_SESSIONS_MAX];
    pthread_mutex_lock(&parent->lock);
    tr_fold_locked(parent);
    inherit_locked(parent, link, give);
    const uint64_t tracer = vm_atomic_load_relaxed(&parent->tracer);
    pthread_mutex_unlock(&parent->lock);
    /* (Killed before it ran: nothing to hand on.) */
    Process *c = tr_proc_get(parent->vm, child);
    if (!c)
        return;
    for (unsigned i = 0; i < VM_SESSIONS_MAX; i++) {
        const unsigned f = VM_TRACE_FLAGS(give[i]);
        if (f & VM_TRACE_TRACER)
            tr_pflags_own_tracer(c, tracer, f & ~(unsigned)VM_TRACE_TRACER, true);
        else if (f)
            tr_pflags_change(c, vm_trace_sid(give[i]), f, true, false);
    }
    vm_proc_put(vm_sched_of(parent->vm), c);
}

void tr_flags_from_ms(Process *p, unsigned sid, const TrMsResult *res)
{
    for (unsigned i = 0; i < res->ntrace; i++) {
        const TrMsTrace *t = &res->trace[i];
        Process *q = t->pid ? tr_proc_get(p->vm, t->pid) : p;
        if (!q)
            continue;
        if (t->off)
            tr_pflags_change(q, sid, t->off, false, false);
        /* {tracer, Pid}: the process's own tracer, as erlang:trace/3
         * gives it (the run allowed it in the default session only);
         * refused, as there, while another live tracer has it. */
        if (t->tracer && sid == 0)
            tr_pflags_own_tracer(q, t->tracer, t->on, true);
        else if (t->on)
            tr_pflags_change(q, sid, t->on, true, false);
        if (q != p)
            vm_proc_put(vm_sched_of(p->vm), q);
    }
}

uint64_t tr_tracer_of(Term t)
{
    if (!term_is_tuple(t) || tuple_arity(t) != 2 || !term_is_pid(tuple_elems(t)[1]) ||
        !term_is_atom(tuple_elems(t)[0]))
        return 0;
    size_t n;
    const char *name = vm_atom_name(atom_value(tuple_elems(t)[0]), &n);
    return n == 6 && !memcmp(name, "tracer", 6) ? pid_value(tuple_elems(t)[1]) : 0;
}

/* Whether pid is a live process (a snapshot); vm a tvm_vm (void * for
 * TrMsCtx.alive). */
bool tr_ms_alive(void *vm, uint64_t pid)
{
    Process *t = pid ? tr_proc_get(vm, pid) : NULL;
    if (t)
        vm_proc_put(vm_sched_of(vm), t);
    return t != NULL;
}

bool tr_pflags_own_tracer(Process *p, uint64_t tracer, unsigned flags, bool on)
{
    const unsigned own = VM_TRACE_TRACER;
    if (on) {
        uint64_t old = vm_atomic_load_relaxed(&p->tracer);
        bool other = old && old != tracer && tr_ms_alive(p->vm, old);
        pthread_mutex_lock(&p->lock);
        /* The changes for all first, as in tr_pflags_change. */
        tr_fold_locked(p);
        bool has = tr_pflags(p, vm_atomic_load_relaxed(&p->trace), 0) & own;
        bool ok = !(has && other);
        if (ok) {
            vm_atomic_store_relaxed(&p->tracer, tracer);
            tr_state_change(&p->trace, &p->trace_tab, NULL, 0, flags | own, true);
        }
        pthread_mutex_unlock(&p->lock);
        return ok;
    }
    pthread_mutex_lock(&p->lock);
    tr_fold_locked(p);
    tr_state_change(&p->trace, &p->trace_tab, NULL, 0, flags, false);
    /* Nothing left to send to the tracer: it is forgotten (BEAM). */
    if (tr_pflags(p, vm_atomic_load_relaxed(&p->trace), 0) == own)
        tr_state_change(&p->trace, &p->trace_tab, NULL, 0, own, false);
    pthread_mutex_unlock(&p->lock);
    return true;
}

Process *tr_proc_get(tvm_vm *vm, uint64_t pid)
{
    /* Live only: tvm_join returns once a process has exited, before its
     * scheduler reaps it, and a joined pid must be gone for tracing. */
    SchedSystem *sys = vm_sched_of(vm);
    return sys ? vm_proc_get_live(sys, pid) : NULL;
}

/* The process of pid (a reference to drop with vm_proc_put), env's own
 * for pid 0 (*held false). */
static Process *target(tvm_env *env, tvm_pid pid, bool *held)
{
    *held = false;
    if (!pid)
        return env->p;
    Process *p = tr_proc_get(env->p->vm, pid);
    *held = p != NULL;
    return p;
}

tvm_status tvm_trace_flags(tvm_env *env, tvm_pid pid, unsigned flags, bool on)
{
    bool held;
    if (!env || !env->p || !tr_flags_valid(flags))
        return TVM_ERR_BADARG;
    Process *p = target(env, pid, &held);
    if (!p)
        return TVM_ERR_NOTFOUND;
    bool ok = tr_pflags_change(p, 0, flags, on, false);
    if (held)
        vm_proc_put(vm_sched_of(env->p->vm), p);
    return ok ? TVM_OK : TVM_ERR_BADARG;
}

tvm_status tvm_trace_flags_get(tvm_env *env, tvm_pid pid, unsigned *flags)
{
    bool held;
    if (!env || !env->p || !flags)
        return TVM_ERR_BADARG;
    Process *p = target(env, pid, &held);
    if (!p)
        return TVM_ERR_NOTFOUND;
    *flags = tr_pflags(p, tr_pword(p), 0) & VM_TRACE_ALL;
    if (held)
        vm_proc_put(vm_sched_of(env->p->vm), p);
    return TVM_OK;
}

tvm_status tvm_trace_calls(tvm_env *env, tvm_pid pid, bool on)
{
    return tvm_trace_flags(env, pid, VM_TRACE_CALL, on);
}

/* ==== the session variants ==== */

static tvm_status sfail(tvm_error *err, tvm_status st, const char *fn, const char *why)
{
    if (err) {
        err->status = st;
        snprintf(err->message, sizeof err->message, "%s: %s", fn, why);
    }
    return st;
}

static tvm_status sok(tvm_error *err)
{
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    return TVM_OK;
}

tvm_status tvm_session_trace_flags(tvm_vm *vm, tvm_session s, tvm_pid pid, unsigned flags,
                                   bool on, tvm_error *err)
{
    static const char fn[] = "tvm_session_trace_flags";
    char why[200];
    unsigned sid;
    tvm_status st;
    if (!vm || !pid)
        return sfail(err, TVM_ERR_BADARG, fn, !vm ? "NULL vm" : "pid 0 (a call context) "
                                                                "takes only the default "
                                                                "session's flags");
    if (!tr_flags_valid(flags))
        return sfail(err, TVM_ERR_BADARG, fn, "unknown flags");
    if (!tr_session_resolve(vm, s.id, &sid, &st, why, sizeof why))
        return sfail(err, st, fn, why);
    Process *p = tr_proc_get(vm, pid);
    if (!p) {
        snprintf(why, sizeof why, "no process <0.%llu.0>", (unsigned long long)pid);
        return sfail(err, TVM_ERR_NOTFOUND, fn, why);
    }
    bool ok = tr_pflags_change(p, sid, flags, on, false);
    vm_proc_put(vm_sched_of(vm), p);
    if (!ok && !tr_session_resolve(vm, s.id, &sid, &st, why, sizeof why))
        return sfail(err, st, fn, why);   /* ended meanwhile: nothing changed */
    return sok(err);
}

tvm_status tvm_session_trace_flags_all(tvm_vm *vm, tvm_session s, tvm_trace_scope scope,
                                       unsigned flags, bool on, tvm_error *err)
{
    static const char fn[] = "tvm_session_trace_flags_all";
    char why[200];
    unsigned sid;
    tvm_status st;
    if (!vm || !tr_flags_valid(flags) || (scope & ~(unsigned)TVM_TRACE_ALL) || !scope)
        return sfail(err, TVM_ERR_BADARG, fn, "NULL vm, unknown flags or a bad scope");
    if (!tr_session_resolve(vm, s.id, &sid, &st, why, sizeof why))
        return sfail(err, st, fn, why);
    if (tr_flags_all(vm, sid, scope, flags, on, false) < 0 &&
        !tr_session_resolve(vm, s.id, &sid, &st, why, sizeof why))
        return sfail(err, st, fn, why);
    return sok(err);
}

tvm_status tvm_session_trace_flags_get(tvm_vm *vm, tvm_session s, tvm_pid pid,
                                       unsigned *flags, tvm_error *err)
{
    static const char fn[] = "tvm_session_trace_flags_get";
    char why[200];
    unsigned sid;
    tvm_status st;
    if (!vm || !flags)
        return sfail(err, TVM_ERR_BADARG, fn, !vm ? "NULL vm" : "NULL flags");
    if (!tr_session_resolve(vm, s.id, &sid, &st, why, sizeof why))
        return sfail(err, st, fn, why);
    if (!pid) {
        *flags = tr_flags_new(vm, sid);
        return sok(err);
    }
    Process *p = tr_proc_get(vm, pid);
    if (!p) {
        snprintf(why, sizeof why, "no process <0.%llu.0>", (unsigned long long)pid);
        return sfail(err, TVM_ERR_NOTFOUND, fn, why);
    }
    *flags = tr_pflags(p, tr_pword(p), sid);
    vm_proc_put(vm_sched_of(vm), p);
    return sok(err);
}
