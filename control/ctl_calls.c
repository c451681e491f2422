/*
 * control/ctl_calls.c - the control endpoint's count and time commands:
 * call counts (as OTP's cprof) and call times (as tprof) of a running VM
 * over a while, measured in a trace session of the client's own.
 *
 *   count PATTERN... --duration S [--limit N]
 *   time PATTERN... --duration S [--limit N]
 *
 * The session sets call_count (or call_time, with its call flag on every
 * process, which call_time needs as in BEAM) breakpoints on the matching
 * functions with the non-blocking sequence, the client's thread sleeps S
 * seconds, the table is read from the session's own counters, and the
 * session is destroyed, which removes every breakpoint it set.  The
 * program's own patterns and other clients' sessions keep theirs; no
 * scheduler pauses at any step.  The tables list the functions of loaded
 * modules that were called, most first (natives a pattern matched are
 * counted too but not listed: they are no module's functions).
 */
#include "control/ctl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vm/common.h"

#define CTL_CALLS_PATTERNS 16

typedef struct CallsReq {
    bool time;                 /* time (call_time) or count (call_count) */
    const char *patterns[CTL_CALLS_PATTERNS];
    int npatterns;
    double seconds;
    long limit;                /* rows shown; 0: all */
} CallsReq;

typedef struct CallRow {
    char mfa[520];
    uint64_t calls, ns;
} CallRow;

static bool parse(CtlClient *c, int argc, char **argv, CallsReq *r)
{
    const char *cmd = argv[0];
    *r = (CallsReq){ .time = !strcmp(cmd, "time") };
    bool have_duration = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (r->npatterns == CTL_CALLS_PATTERNS) {
                ctl_error(c, "%s: at most %d patterns", cmd, CTL_CALLS_PATTERNS);
                return false;
            }
            r->patterns[r->npatterns++] = a;
            continue;
        }
        if (strcmp(a, "--duration") && strcmp(a, "--limit")) {
            ctl_error(c, "%s: unknown option '%s'", cmd, a);
            return false;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            ctl_error(c, "%s: %s needs a value", cmd, a);
            return false;
        }
        bool ok;
        if (!strcmp(a, "--limit")) {
            ok = ctl_number(v, 1, 1000000, &r->limit);
        } else {
            char *end;
            r->seconds = strtod(v, &end);
            ok = *v && !*end && r->seconds > 0 && r->seconds <= CTL_REQUEST_MAX_MS / 1000;
            have_duration = true;
        }
        if (!ok) {
            ctl_error(c, "%s: bad value for %s: '%s'", cmd, a, v);
            return false;
        }
    }
    if (!r->npatterns || !have_duration) {
        ctl_error(c, "%s: needs a pattern (MOD:FUN/ARITY, _ for any part) and --duration S",
                  cmd);
        return false;
    }
    return true;
}

/* s's count or time of one function; false when it has none or no call. */
static bool read_row(tvm_vm *vm, tvm_session s, bool time, CallRow *row)
{
    row->calls = row->ns = 0;
    if (!time) {
        int64_t n;
        if (tvm_session_call_count(vm, s, row->mfa, &n) != TVM_OK || n <= 0)
            return false;
        row->calls = (uint64_t)n;
        return true;
    }
    tvm_call_time_entry small[16], *e = small;
    size_t n = 0;
    if (tvm_session_call_time(vm, s, row->mfa, small, 16, &n) != TVM_OK)
        return false;
    if (n > 16) {
        /* More processes called it: all of them (more may come meanwhile,
         * which the second read leaves out). */
        e = calloc(n, sizeof *e);
        size_t max = n;
        if (tvm_session_call_time(vm, s, row->mfa, e, max, &n) != TVM_OK)
            n = 0;
        n = n < max ? n : max;
    }
    for (size_t i = 0; i < n; i++) {
        row->calls += e[i].count;
        row->ns += e[i].ns;
    }
    if (e != small)
        free(e);
    return row->calls > 0;
}

/* Every function of every loaded module that s counted; *n rows. */
static CallRow *collect(tvm_vm *vm, tvm_session s, bool time, size_t *n)
{
    size_t nmod = tvm_modules(vm, NULL, 0);
    tvm_module_info *mods = vm_calloc(nmod + 1, sizeof *mods);
    nmod = tvm_modules(vm, mods, nmod);
    size_t cap = 64, len = 0;
    CallRow *rows = vm_malloc(cap * sizeof *rows);
    for (size_t m = 0; m < nmod; m++) {
        size_t nf = 0;
        if (tvm_functions(vm, mods[m].name, NULL, 0, &nf) != TVM_OK || !nf)
            continue;
        tvm_function_info *fs = vm_calloc(nf, sizeof *fs);
        tvm_functions(vm, mods[m].name, fs, nf, &nf);
        for (size_t f = 0; f < nf; f++) {
            if (len == cap)
                rows = vm_realloc(rows, (cap *= 2) * sizeof *rows);
            CallRow *row = &rows[len];
            snprintf(row->mfa, sizeof row->mfa, "%s:%s/%d", mods[m].name, fs[f].name,
                     fs[f].arity);
            if (read_row(vm, s, time, row))
                len++;
        }
        free(fs);
    }
    free(mods);
    *n = len;
    return rows;
}

static int by_calls(const void *a, const void *b)
{
    const CallRow *x = a, *y = b;
    return x->calls != y->calls ? (x->calls < y->calls ? 1 : -1) : strcmp(x->mfa, y->mfa);
}

static int by_time(const void *a, const void *b)
{
    const CallRow *x = a, *y = b;
    return x->ns != y->ns ? (x->ns < y->ns ? 1 : -1) : by_calls(a, b);
}

static void table(CtlClient *c, const CallsReq *r, CallRow *rows, size_t n)
{
    qsort(rows, n, sizeof *rows, r->time ? by_time : by_calls);
    uint64_t calls = 0, ns = 0;
    for (size_t i = 0; i < n; i++)
        calls += rows[i].calls, ns += rows[i].ns;
    size_t shown = r->limit && (size_t)r->limit < n ? (size_t)r->limit : n;
    ctl_ok(c);
    if (!r->time) {
        ctl_linef(c, "%-40s %12s", "FUNCTION", "CALLS");
        for (size_t i = 0; i < shown; i++)
            ctl_linef(c, "%-40s %12llu", rows[i].mfa, (unsigned long long)rows[i].calls);
        ctl_linef(c, "%zu functions, %llu calls in %.2f s", n, (unsigned long long)calls,
                  r->seconds);
    } else {
        ctl_linef(c, "%-40s %10s %12s %10s %7s", "FUNCTION", "CALLS", "TIME_US", "US/CALL",
                  "SHARE");
        for (size_t i = 0; i < shown; i++)
            ctl_linef(c, "%-40s %10llu %12.1f %10.3f %6.2f%%", rows[i].mfa,
                      (unsigned long long)rows[i].calls, (double)rows[i].ns / 1e3,
                      (double)rows[i].ns / 1e3 / (double)rows[i].calls,
                      ns ? 100.0 * (double)rows[i].ns / (double)ns : 0.0);
        ctl_linef(c, "%zu functions, %llu calls, %.1f us in %.2f s", n,
                  (unsigned long long)calls, (double)ns / 1e3, r->seconds);
    }
    ctl_end(c);
}

void ctl_cmd_calls(CtlClient *c, int argc, char **argv)
{
    CallsReq r;
    if (!parse(c, argc, argv, &r))
        return;
    tvm_vm *vm = c->srv->vm;
    /* No events: the sink only takes the session's last record. */
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_TEXT, .path = "/dev/null" };
    char name[64];
    snprintf(name, sizeof name, "control-%s-%d", argv[0], c->fd);
    tvm_session s;
    tvm_error err, derr;
    if (tvm_session_create(vm, name, &o, &s, &err) != TVM_OK) {
        ctl_error(c, "%s: %s", argv[0], ctl_api_why(&err));
        return;
    }
    unsigned flag = r.time ? TVM_TP_CALL_TIME : TVM_TP_CALL_COUNT;
    int total = 0;
    for (int i = 0; i < r.npatterns; i++) {
        int n = 0;
        if (tvm_session_trace_pattern(vm, s, r.patterns[i], NULL, TVM_TP_TRUE, flag, 0, &n,
                                      &err) != TVM_OK) {
            tvm_session_destroy(vm, s, &derr);
            ctl_error(c, "%s: %s: %s", argv[0], r.patterns[i], ctl_api_why(&err));
            return;
        }
        total += n;
    }
    if (total == 0) {
        tvm_session_destroy(vm, s, &derr);
        ctl_error(c, "%s: the patterns match no function", argv[0]);
        return;
    }
    /* call_time measures call-traced processes, as BEAM's (tprof sets the
     * flag too): the session's call flag for every process; with no call
     * trace pattern in the session it writes no event. */
    if (r.time && tvm_session_trace_flags_all(vm, s, TVM_TRACE_ALL, TVM_TRACE_CALL, true,
                                              &err) != TVM_OK) {
        tvm_session_destroy(vm, s, &derr);
        ctl_error(c, "%s: %s", argv[0], ctl_api_why(&err));
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const bool whole = ctl_nap(c, (long)(r.seconds * 1000 + 0.5));
    if (!whole && c->gone) {
        /* The client hung up: cancelled, and its session with it. */
        tvm_session_destroy(vm, s, &derr);
        return;
    }
    if (!whole) {
        /* Cut short by the endpoint's stop: the table says how long it
         * counted. */
        clock_gettime(CLOCK_MONOTONIC, &t1);
        r.seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    }
    /* Stopped first (pause: the counters keep their values), so that the
     * table is of exactly the interval, then read, then removed. */
    for (int i = 0; i < r.npatterns; i++)
        tvm_session_trace_pattern(vm, s, r.patterns[i], NULL, TVM_TP_PAUSE, flag, 0, NULL,
                                  &err);
    size_t n;
    CallRow *rows = collect(vm, s, r.time, &n);
    tvm_session_destroy(vm, s, &derr);
    table(c, &r, rows, n);
    free(rows);
}
