/*
 * control/ctl_trace.c - the control endpoint's trace command: call
 * tracing switched on in a running VM from another OS process, and off
 * again, through a trace session of the client's own (docs/control.md,
 * docs/tracing.md "Sessions").
 *
 *   trace PATTERN... [--match SPEC] [--local] [--flags LIST] [--pids PID,...]
 *         [--max-events N] [--duration S] [--rate N] [--format text|jsonl|chrome]
 *
 * The reply is `ok`, then each event as a payload line in the format
 * asked for (text by default, as `tracevm run --trace` writes them), then
 * the session's last record ({trace_stopped,Reason,Written,Lost} in the
 * text format), then the end of the reply.  --pids traces the given
 * processes only (their flags set one by one) instead of every process,
 * new ones included.
 *
 * Why nothing here pauses the VM, or can be held up by the client:
 *  - the session is one of the VM's sixteen: its patterns and process
 *    flags are its own, set and removed by the same non-blocking sequence
 *    as trace_pattern; the program's own tracing and other clients'
 *    sessions are untouched;
 *  - its sink writes, from the session's collector thread, with the drop
 *    policy and without blocking (trace/tr_fdout.c), into a pipe that the
 *    client's thread relays to the socket whole lines at a time
 *    (control/ctl_relay.c): a client that does not read loses events,
 *    which the last record counts, and never a reply's framing; no
 *    scheduler ever waits for it;
 *  - it always ends: at its first limit (with neither --max-events nor
 *    --duration, after CTL_TRACE_EVENTS events, as recon_trace insists on
 *    a limit), when the client hangs up, or when the endpoint stops; the
 *    session is destroyed then, and with it every setting it made.
 * CTF is not a stream (a directory of files) and is refused.
 */
#define _GNU_SOURCE
#include "control/ctl_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The events a trace without a limit of its own stops after. */
#define CTL_TRACE_EVENTS 1000
/* Patterns one request may name. */
#define CTL_TRACE_PATTERNS 16
/* Processes one --pids may name. */
#define CTL_TRACE_PIDS 64

typedef struct TraceReq {
    const char *patterns[CTL_TRACE_PATTERNS];
    int npatterns;
    const char *match;         /* --match, or NULL */
    bool local;                /* --local: local patterns (every call) */
    unsigned flags;            /* --flags (default call) */
    tvm_pid pids[CTL_TRACE_PIDS];   /* --pids; none: every process */
    int npids;
    tvm_trace_format format;   /* --format (default text) */
    long max_events, rate;     /* 0: none */
    double seconds;            /* --duration, 0: none */
} TraceReq;

/* --pids PID,...: each N or <0.N.0>; false after an error reply. */
static bool parse_pids(CtlClient *c, const char *v, TraceReq *r)
{
    char *list = strdup(v), *save = NULL;
    bool ok = true;
    r->npids = 0;
    for (char *p = strtok_r(list, ",", &save); ok && p; p = strtok_r(NULL, ",", &save)) {
        uint64_t pid;
        if (!ctl_pid(p, &pid) || pid == 0) {
            ctl_error(c, "trace: bad pid '%s' in --pids (N or <0.N.0>, comma-separated)", p);
            ok = false;
        } else if (r->npids == CTL_TRACE_PIDS) {
            ctl_error(c, "trace: at most %d pids in --pids", CTL_TRACE_PIDS);
            ok = false;
        } else {
            r->pids[r->npids++] = pid;
        }
    }
    if (ok && !r->npids) {
        ctl_error(c, "trace: --pids names no process");
        ok = false;
    }
    free(list);
    return ok;
}

/* --format: the formats a stream can carry; false after an error reply. */
static bool parse_format(CtlClient *c, const char *v, TraceReq *r)
{
    static const struct {
        const char *name;
        tvm_trace_format format;
    } formats[] = { { "text", TVM_TRACE_TEXT }, { "jsonl", TVM_TRACE_JSONL },
                    { "chrome", TVM_TRACE_CHROME } };
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        if (!strcmp(v, formats[i].name)) {
            r->format = formats[i].format;
            return true;
        }
    }
    if (!strcmp(v, "ctf") || !strcmp(v, "ctf-raw"))
        ctl_error(c, "trace: --format %s writes a directory, not a stream (tracevm run "
                     "--format %s --out DIR traces to one)", v, v);
    else
        ctl_error(c, "trace: bad value for --format: '%s' (expected text, jsonl or chrome)", v);
    return false;
}

/* One option with its value; false after an error reply. */
static bool option(CtlClient *c, const char *a, const char *v, TraceReq *r)
{
    tvm_error err;
    bool ok = true;
    if (!strcmp(a, "--pids")) {
        return parse_pids(c, v, r);
    } else if (!strcmp(a, "--format")) {
        return parse_format(c, v, r);
    } else if (!strcmp(a, "--match")) {
        r->match = v;
    } else if (!strcmp(a, "--flags")) {
        if (tvm_trace_flags_parse(v, &r->flags, &err) != TVM_OK) {
            ctl_error(c, "trace: --flags: %s", ctl_api_why(&err));
            return false;
        }
    } else if (!strcmp(a, "--max-events")) {
        ok = ctl_number(v, 1, 1000000000, &r->max_events);
    } else if (!strcmp(a, "--rate")) {
        ok = ctl_number(v, 1, 1000000000, &r->rate);
    } else {
        char *end;
        r->seconds = strtod(v, &end);
        ok = *v && !*end && r->seconds > 0 && r->seconds <= CTL_REQUEST_MAX_MS / 1000;
    }
    if (!ok)
        ctl_error(c, "trace: bad value for %s: '%s'", a, v);
    return ok;
}

static bool parse(CtlClient *c, int argc, char **argv, TraceReq *r)
{
    static const char *const valued[] = { "--match", "--flags", "--max-events", "--duration",
                                          "--rate",  "--pids",  "--format" };
    *r = (TraceReq){ .flags = TVM_TRACE_CALL, .format = TVM_TRACE_TEXT };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (r->npatterns == CTL_TRACE_PATTERNS) {
                ctl_error(c, "trace: at most %d patterns", CTL_TRACE_PATTERNS);
                return false;
            }
            r->patterns[r->npatterns++] = a;
            continue;
        }
        if (!strcmp(a, "--local")) {
            r->local = true;
            continue;
        }
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            known = known || !strcmp(a, valued[k]);
        if (!known && !strcmp(a, "--out")) {
            ctl_error(c, "trace: --out is the client's option (tracevm attach writes the "
                         "stream to the file), not the VM's");
            return false;
        }
        if (!known) {
            ctl_error(c, "trace: unknown option '%s'", a);
            return false;
        }
        if (i + 1 >= argc) {
            ctl_error(c, "trace: %s needs a value", a);
            return false;
        }
        if (!option(c, a, argv[++i], r))
            return false;
    }
    if (!r->npatterns) {
        ctl_error(c, "trace: needs a pattern (MOD:FUN/ARITY, _ for any part)");
        return false;
    }
    if (!r->max_events && r->seconds == 0)
        r->max_events = CTL_TRACE_EVENTS;
    return true;
}

/* Sets r's patterns in session s; the functions matched, or -1 with the
 * reason in err (and the pattern in *bad). */
static int set_patterns(tvm_vm *vm, tvm_session s, const TraceReq *r, const char **bad,
                        tvm_error *err)
{
    int total = 0;
    for (int i = 0; i < r->npatterns; i++) {
        int n = 0;
        if (tvm_session_trace_pattern(vm, s, r->patterns[i], r->match, TVM_TP_TRUE,
                                      r->local ? TVM_TP_LOCAL : TVM_TP_GLOBAL, 0, &n,
                                      err) != TVM_OK) {
            *bad = r->patterns[i];
            return -1;
        }
        total += n;
    }
    return total;
}

/* Sets r's process flags in session s: on every process (and new ones),
 * or on each of --pids; false with the reason in err. */
static bool set_flags(tvm_vm *vm, tvm_session s, const TraceReq *r, tvm_error *err)
{
    if (!r->npids)
        return tvm_session_trace_flags_all(vm, s, TVM_TRACE_ALL, r->flags, true, err) == TVM_OK;
    for (int i = 0; i < r->npids; i++)
        if (tvm_session_trace_flags(vm, s, r->pids[i], r->flags, true, err) != TVM_OK)
            return false;
    return true;
}

/* Whether every process of --pids exists (checked in session s, whose
 * flags it leaves off); false after an error reply. */
static bool check_pids(CtlClient *c, tvm_session s, const TraceReq *r)
{
    tvm_error err;
    for (int i = 0; i < r->npids; i++) {
        if (tvm_session_trace_flags(c->srv->vm, s, r->pids[i], r->flags, false, &err) !=
            TVM_OK) {
            ctl_error(c, "trace: --pids: %s", ctl_api_why(&err));
            return false;
        }
    }
    return true;
}

/*
 * The patterns and pids are tried first in a session whose sink is
 * /dev/null, so that a bad pattern or spec, one that matches nothing, or
 * a process that does not exist, gets an error reply before anything is
 * written to the client (a session writes its last record when it is
 * destroyed).
 */
static bool check_patterns(CtlClient *c, const TraceReq *r)
{
    tvm_vm *vm = c->srv->vm;
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_TEXT, .path = "/dev/null" };
    tvm_session s;
    tvm_error err, derr;
    if (tvm_session_create(vm, "control-check", &o, &s, &err) != TVM_OK) {
        ctl_error(c, "trace: %s", ctl_api_why(&err));
        return false;
    }
    const char *bad = NULL;
    int n = set_patterns(vm, s, r, &bad, &err);
    if (n < 0)
        ctl_error(c, "trace: %s: %s", bad, ctl_api_why(&err));
    else if (n == 0)
        ctl_error(c, "trace: the patterns match no function%s",
                  r->local ? "" : " (without --local, exported ones only)");
    bool ok = n > 0 && check_pids(c, s, r);
    tvm_session_destroy(vm, s, &derr);
    return ok;
}

/* A session destroyed on a thread of its own, while the client's thread
 * keeps relaying what its sink writes until then (its last record). */
typedef struct Destroyer {
    tvm_vm *vm;
    tvm_session s;
    VmAtomic done;             /* release store by the destroyer, acquire load by the relay */
} Destroyer;

static void *destroy_main(void *arg)
{
    Destroyer *d = arg;
    tvm_error err;
    tvm_session_destroy(d->vm, d->s, &err);
    vm_atomic_store_release(&d->done, 1);
    return NULL;
}

/* Destroys s (its settings removed, its last record written, its sink
 * drained) while relaying the sink's output to the client. */
static void destroy_relaying(CtlClient *c, tvm_session s, CtlRelay *rl)
{
    Destroyer d = { .vm = c->srv->vm, .s = s };
    pthread_t th;
    if (pthread_create(&th, NULL, destroy_main, &d) != 0) {
        destroy_main(&d);   /* the sink drops what the pipe cannot take */
    } else {
        while (!vm_atomic_load_acquire(&d.done))
            ctl_relay_pump(c, rl, 20, true);
        pthread_join(th, NULL);
    }
    ctl_relay_pump(c, rl, 0, true);
    ctl_relay_finish(c, rl);
}

void ctl_cmd_trace(CtlClient *c, int argc, char **argv)
{
    TraceReq r;
    if (!parse(c, argc, argv, &r) || !check_patterns(c, &r))
        return;
    tvm_vm *vm = c->srv->vm;
    CtlRelay rl;
    if (!ctl_relay_open(&rl)) {
        ctl_error(c, "trace: no pipe for the events (the process is out of descriptors?)");
        return;
    }
    tvm_trace_options o = {
        .size = sizeof o,
        .format = r.format,
        .use_fd = true,
        .fd = rl.wr,
        .policy = TVM_TRACE_DROP,
        .max_events = (uint64_t)r.max_events,
        .rate = (uint64_t)r.rate,
        .duration_ms = (uint64_t)(r.seconds * 1000 + 0.5),
    };
    char name[64];
    snprintf(name, sizeof name, "control-%d", c->fd);
    tvm_session s;
    tvm_error err;
    if (tvm_session_create(vm, name, &o, &s, &err) != TVM_OK) {
        ctl_relay_close(&rl);
        ctl_error(c, "trace: %s", ctl_api_why(&err));
        return;
    }
    ctl_ok(c);
    ctl_flush(c);
    const char *bad = NULL;
    bool ok = set_patterns(vm, s, &r, &bad, &err) >= 0 && set_flags(vm, s, &r, &err);
    tvm_session_info in;
    while (ok && !c->gone && !vm_atomic_load_acquire(&c->srv->stopping) && ctl_client_here(c) &&
           tvm_session_info_get(vm, s, &in) == TVM_OK && !in.stopped)
        ctl_relay_pump(c, &rl, 50, false);
    destroy_relaying(c, s, &rl);
    ctl_relay_close(&rl);
    if (!ok)
        ctl_linef(c, "trace: %s%s%s", bad ? bad : "", bad ? ": " : "", ctl_api_why(&err));
    ctl_end(c);
}
