/*
 * profile/pf_api.c - the profiler's public functions (include/tracevm.h,
 * tvm_profile_*) and the composition root's stop.
 */
#define _GNU_SOURCE
#include "profile/pf.h"
#include "profile/pf_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/common.h"
#include "vm/strbuf.h"
#include "vm/timer.h"
#include "vm/vm.h"

#define PF_DEFAULT_HZ 99
#define PF_MAX_HZ 10000
#define PF_DEFAULT_ALLOC ((size_t)512 * 1024)

static tvm_status fail(tvm_error *err, tvm_status st, const char *msg, const char *arg)
{
    if (err) {
        err->status = st;
        snprintf(err->message, sizeof err->message, "%s%s", msg, arg ? arg : "");
    }
    return st;
}

/* The first NULL of a function's required pointer arguments, named, for
 * its TVM_ERR_BADARG message ("FN: NULL ARG"): the caller learns which
 * argument was missing, not only that one was.  names[i] goes with
 * given[i]; false when none is NULL. */
static bool null_arg(tvm_error *err, const char *fn, int n, const char *const names[],
                     const bool given[])
{
    for (int i = 0; i < n; i++)
        if (!given[i]) {
            if (err) {
                err->status = TVM_ERR_BADARG;
                snprintf(err->message, sizeof err->message, "%s: NULL %s", fn, names[i]);
            }
            return true;
        }
    return false;
}

tvm_status tvm_profile_start(tvm_vm *vm, const tvm_profile_options *opts, tvm_profile **out,
                             tvm_error *err)
{
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    static const char *const args[] = { "vm", "out (where the new profile goes)" };
    if (null_arg(err, "tvm_profile_start", 2, args, (const bool[]){ vm, out }))
        return TVM_ERR_BADARG;
    *out = NULL;
    if (vm_running_process())
        return fail(err, TVM_ERR_BADARG, "tvm_profile_start: not from a process", NULL);
    /* The host's options as this library's struct (the size rule). */
    tvm_profile_options o = { 0 };
    char why[128];
    if (opts && !vm_opts_copy(&o, sizeof o, opts, why, sizeof why))
        return fail(err, TVM_ERR_BADARG, "tvm_profile_start: ", why);
    if (o.kind != TVM_PROFILE_CPU && o.kind != TVM_PROFILE_OFF && o.kind != TVM_PROFILE_ALLOC) {
        snprintf(why, sizeof why, "%d (expected TVM_PROFILE_CPU, _OFF or _ALLOC)", (int)o.kind);
        return fail(err, TVM_ERR_BADARG, "tvm_profile_start: unknown kind ", why);
    }
    if (o.hz == 0)
        o.hz = PF_DEFAULT_HZ;
    if (o.hz > PF_MAX_HZ) {
        snprintf(why, sizeof why, "%u above %d", o.hz, PF_MAX_HZ);
        return fail(err, TVM_ERR_BADARG, "tvm_profile_start: hz ", why);
    }
    if (o.alloc_interval == 0)
        o.alloc_interval = PF_DEFAULT_ALLOC;
    if (o.alloc_interval < sizeof(Term))
        return fail(err, TVM_ERR_BADARG, "tvm_profile_start: alloc_interval below 8 bytes",
                    NULL);
    if (o.signo == 0)
        o.signo = SIGRTMIN + 5;
    if (o.signo < SIGRTMIN || o.signo > SIGRTMAX || o.signo == st_signal_number())
        return fail(err, TVM_ERR_BADARG,
                    "tvm_profile_start: signo must be a real-time signal other than the "
                    "stack-capture signal", NULL);
    tvm_profile *S = vm_calloc(1, sizeof *S);
    S->vm = vm;
    S->kind = o.kind;
    S->hz = o.hz;
    S->alloc_mean_words = o.alloc_interval / sizeof(Term);
    S->signo = o.signo;
    pthread_mutex_init(&S->lock, NULL);
    tvm_status st = pf_start(S, err);
    if (st != TVM_OK) {
        pthread_mutex_destroy(&S->lock);
        free(S);
        return st;
    }
    *out = S;
    return TVM_OK;
}

/*
 * Stopping and freeing are refused from a process (a native called by VM
 * code): the stop joins the profiler's thread after its last drain, which
 * names every new frame, so the process's scheduler would stand still
 * that long (nothing of a profile is to stop a scheduler); and a profile
 * freed by VM code is still the embedder's, whose threads may be writing
 * it.  Both return void: the profile runs on, which tvm_profile_get_stats
 * (a duration that grows) and tvm_profile_start (TVM_ERR_EXISTS) show.
 */
static bool refused(const tvm_profile *S)
{
    return !S || vm_running_process();
}

void tvm_profile_stop(tvm_profile *S)
{
    if (!refused(S))
        pf_stop(S);
}

void tvm_profile_free(tvm_profile *S)
{
    if (refused(S))
        return;
    pf_stop(S);
    pf_rings_free(S);
    pf_data_free(&S->data);
    pthread_mutex_destroy(&S->lock);
    free(S);
}

void pf_layer_stop(tvm_vm *vm)
{
    tvm_profile *S = pf_running(vm);
    if (S)
        pf_stop(S);
}

void tvm_profile_get_stats(tvm_profile *S, tvm_profile_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!S)
        return;
    pthread_mutex_lock(&S->lock);
    out->kind = S->kind;
    out->hz = S->kind == TVM_PROFILE_CPU ? S->hz : 0;
    out->samples = S->data.samples;
    out->weight = S->data.weight;
    out->stacks = S->data.nstacks;
    /* t_stop under the lock: pf_stop writes it from the stopping thread. */
    out->duration_ns = (S->t_stop ? S->t_stop : vm_now_ns()) - S->t_start;
    pthread_mutex_unlock(&S->lock);
    out->lost = pf_lost(S);
    for (int i = 0; S->sched && i < S->n; i++) {
        out->sample_ns += vm_atomic_load_relaxed(&S->sched[i].handler_ns);
        out->overruns += vm_atomic_load_relaxed(&S->sched[i].overruns);
    }
}

/* ==== formats ==== */

static const char *const format_names[] = { "folded", "speedscope", "pprof", "svg" };

tvm_status tvm_profile_format_parse(const char *name, tvm_profile_format *fmt)
{
    for (int i = 0; name && fmt && i < 4; i++)
        if (!strcmp(name, format_names[i])) {
            *fmt = (tvm_profile_format)i;
            return TVM_OK;
        }
    return TVM_ERR_BADARG;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

tvm_status tvm_profile_format_of(const char *path, tvm_profile_format *fmt)
{
    if (!path || !fmt)
        return TVM_ERR_BADARG;
    static const struct {
        const char *ext;
        tvm_profile_format fmt;
    } exts[] = {
        { ".folded", TVM_PROFILE_FOLDED }, { ".txt", TVM_PROFILE_FOLDED },
        { ".json", TVM_PROFILE_SPEEDSCOPE }, { ".pb.gz", TVM_PROFILE_PPROF },
        { ".pprof", TVM_PROFILE_PPROF }, { ".svg", TVM_PROFILE_SVG },
    };
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (ends_with(path, exts[i].ext)) {
            *fmt = exts[i].fmt;
            return TVM_OK;
        }
    return TVM_ERR_BADARG;
}

tvm_status tvm_profile_render(tvm_profile *S, const tvm_profile_write_options *opts,
                              char **out, size_t *len, tvm_error *err)
{
    if (err) {
        err->status = TVM_OK;
        err->message[0] = '\0';
    }
    static const char *const args[] = { "profile", "out", "len" };
    if (null_arg(err, "tvm_profile_render", 3, args, (const bool[]){ S, out, len }))
        return TVM_ERR_BADARG;
    tvm_profile_write_options o = { 0 };
    char why[128];
    if (opts && !vm_opts_copy(&o, sizeof o, opts, why, sizeof why))
        return fail(err, TVM_ERR_BADARG, "tvm_profile_render: ", why);
    if ((unsigned)o.format > TVM_PROFILE_SVG) {
        snprintf(why, sizeof why, "%d (expected TVM_PROFILE_FOLDED, _SPEEDSCOPE, _PPROF or _SVG)",
                 (int)o.format);
        return fail(err, TVM_ERR_BADARG, "tvm_profile_render: unknown format ", why);
    }
    StrBuf sb;
    sb_init(&sb);
    bool ok = true;
    pthread_mutex_lock(&S->lock);
    if (o.format == TVM_PROFILE_PPROF) {
        ok = pf_write_pprof(S, o.lines, o.merge, &sb);
    } else {
        PfTree t;
        pf_tree_build(&t, &S->data, o.lines, o.merge);
        if (o.format == TVM_PROFILE_FOLDED)
            pf_write_folded(&t, &sb);
        else if (o.format == TVM_PROFILE_SPEEDSCOPE)
            pf_write_speedscope(S, &t, &sb);
        else
            pf_write_svg(S, &t, o.title, &sb);
        pf_tree_free(&t);
    }
    pthread_mutex_unlock(&S->lock);
    if (!ok) {
        sb_free(&sb);
        return fail(err, TVM_ERR_LIMIT, "tvm_profile_render: compression failed", NULL);
    }
    *out = sb.s;
    *len = sb.len;
    return TVM_OK;
}

tvm_status tvm_profile_write(tvm_profile *S, const char *path,
                             const tvm_profile_write_options *opts, tvm_error *err)
{
    static const char *const args[] = { "profile", "path" };
    if (null_arg(err, "tvm_profile_write", 2, args, (const bool[]){ S, path }))
        return TVM_ERR_BADARG;
    char *buf;
    size_t len;
    tvm_status st = tvm_profile_render(S, opts, &buf, &len, err);
    if (st != TVM_OK)
        return st;
    /* The reason is errno as the call that failed left it: a full disk
     * shows only at fclose, which writes what stdio buffered (the errno
     * of a write that succeeded was stale: "Bad address" for /dev/full). */
    errno = 0;
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(buf, 1, len, f) == len;
    int e = errno;
    if (f && fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    free(buf);
    if (!ok) {
        if (err) {
            err->status = TVM_ERR_IO;
            char pb[VM_MSG_PATH_MAX + 1];
            snprintf(err->message, sizeof err->message, "tvm_profile_write: %s: %s",
                     vm_msg_path(path, pb), strerror(e ? e : EIO));
        }
        return TVM_ERR_IO;
    }
    return TVM_OK;
}
