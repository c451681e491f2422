/*
 * control/ctl_cmd.c - the control endpoint's commands (docs/control.md):
 * info, procs, top, stacks, load and profile, each on the client's own
 * thread (trace is in ctl_trace.c, count and time in ctl_calls.c).
 *
 * Every command reads the VM through the public API (tvm_processes,
 * tvm_backtrace, tvm_load_string, ...), so what a client can do is what
 * an embedder can do, with the same guarantees: nothing here stops a
 * scheduler.  Options are parsed strictly: an unknown option, a missing
 * or malformed value gets an error naming it and the command does
 * nothing.
 */
#define _GNU_SOURCE
#include "control/ctl_internal.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trace/tr_session.h"
#include "vm/common.h"
#include "vm/print.h"
#include "vm/sched.h"
#include "vm/timer.h"
#include "vm/vm.h"

/* ==== replies ==== */

void ctl_ok(CtlClient *c)
{
    c->out.len = 0;
    sb_puts(&c->out, "ok\n");
}

void ctl_line(CtlClient *c, const char *s, size_t n)
{
    if (n > 0 && s[0] == '.')
        sb_putc(&c->out, '.');
    sb_put(&c->out, s, n);
    sb_putc(&c->out, '\n');
    if (c->out.len > 65536)
        ctl_flush(c);
}

void ctl_linef(CtlClient *c, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ctl_line(c, buf, n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

bool ctl_flush(CtlClient *c)
{
    if (!c->gone && c->out.len && !ctl_write(c->fd, c->out.s, c->out.len))
        c->gone = true;
    c->out.len = 0;
    return !c->gone;
}

void ctl_end(CtlClient *c)
{
    sb_puts(&c->out, ".\n");
    ctl_flush(c);
}

void ctl_error(CtlClient *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* The message is one line whatever it quotes, and printable: a word
     * may hold any byte through a \xHH escape, and the client prints
     * the message on a terminal, where control characters would act
     * (an escape sequence could retitle or rewrite the screen).  Line
     * breaks become spaces, other control characters '?', and bytes of
     * 0x80 and above too unless the whole message is UTF-8. */
    bool utf8 = ctl_utf8_ok(buf, strlen(buf));
    for (char *p = buf; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '\n' || ch == '\r')
            *p = ' ';
        else if (ch < 0x20 || ch == 0x7f || (ch >= 0x80 && !utf8))
            *p = '?';
    }
    c->out.len = 0;
    sb_printf(&c->out, "error %s\n.\n", buf);
    ctl_flush(c);
}

/* An API error's message without the function's name in front. */
const char *ctl_api_why(const tvm_error *err)
{
    const char *colon = strstr(err->message, ": ");
    return !strncmp(err->message, "tvm_", 4) && colon ? colon + 2 : err->message;
}

/* ==== options ==== */

typedef struct Opts {
    const char *sort;
    long limit, interval, count;
    bool running, group;
    int npos;                  /* positional words (after the command) */
    char **pos;
} Opts;

/* Parses a whole number in [lo, hi]; false if it is not one. */
bool ctl_number(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* A process id: digits only, as N or <0.N.0>, below 2^63 (ids with bit
 * 63 set name native threads in the stack capture, never a process).
 * sscanf's %llu took leading spaces, a sign and a saturated overflow:
 * " -5" was process 2^64 - 5. */
bool ctl_pid(const char *s, uint64_t *out)
{
    const bool wrapped = !strncmp(s, "<0.", 3);
    const char *p = wrapped ? s + 3 : s;
    size_t n = strspn(p, "0123456789");
    if (n == 0 || n > 19 || (wrapped ? strcmp(p + n, ".0>") != 0 : p[n] != '\0'))
        return false;
    uint64_t v = 0;   /* 19 digits stay below 2^64 */
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (uint64_t)(p[i] - '0');
    if (v >> 63)
        return false;
    *out = v;
    return true;
}

/* Parses argv[1..] against the options named in `allowed` (a
 * space-separated list); false after replying with the error.  The
 * positional words are gathered at argv[1..] in their order by swapping,
 * never by copying over: argv still owns each word exactly once when
 * ctl_words_free frees them (a copy over an option freed its value twice,
 * as in `stacks 5 --group 7`: fuzz/corpus/ctl/regress-options-double-free). */
static bool options(CtlClient *c, int argc, char **argv, const char *allowed, Opts *o)
{
    *o = (Opts){ .sort = "reds", .limit = 0, .interval = 1000, .count = 10 };
    o->pos = argv + 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            /* o->pos[npos] is argv[i] itself or a word already parsed. */
            char *w = argv[i];
            argv[i] = o->pos[o->npos];
            o->pos[o->npos++] = w;
            continue;
        }
        /* A name is lowercase letters and dashes: an empty one or one
         * holding a space (a quoted word) would be found in the list. */
        size_t namelen = strlen(a + 2);
        if (namelen == 0 || namelen > 30 ||
            strspn(a + 2, "abcdefghijklmnopqrstuvwxyz-") != namelen) {
            ctl_error(c, "%s: unknown option %s", argv[0], a);
            return false;
        }
        char key[40];
        snprintf(key, sizeof key, " %s ", a + 2);
        char list[160];
        snprintf(list, sizeof list, " %s ", allowed);
        if (!strstr(list, key)) {
            ctl_error(c, "%s: unknown option %s", argv[0], a);
            return false;
        }
        if (!strcmp(a, "--running") || !strcmp(a, "--group")) {
            *(a[2] == 'r' ? &o->running : &o->group) = true;
            continue;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            ctl_error(c, "%s: %s needs a value", argv[0], a);
            return false;
        }
        bool ok;
        if (!strcmp(a, "--sort")) {
            ok = !strcmp(v, "pid") || !strcmp(v, "reds") || !strcmp(v, "mq") ||
                 !strcmp(v, "heap");
            o->sort = v;
        } else if (!strcmp(a, "--limit")) {
            ok = ctl_number(v, 1, 1000000, &o->limit);
        } else if (!strcmp(a, "--interval")) {
            ok = ctl_number(v, 10, CTL_REQUEST_MAX_MS, &o->interval);
        } else {
            ok = ctl_number(v, 1, 1000000, &o->count);
        }
        if (!ok) {
            ctl_error(c, "%s: bad value for %s: '%s'", argv[0], a, v);
            return false;
        }
    }
    return true;
}

/* ==== info ==== */

static long resident_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void cmd_info(CtlClient *c, int argc, char **argv)
{
    Opts o;
    if (!options(c, argc, argv, "", &o))
        return;
    if (o.npos) {
        ctl_error(c, "info: unexpected argument '%s'", o.pos[0]);
        return;
    }
    tvm_vm *vm = c->srv->vm;
    SchedSystem *sys = vm_sched_of(vm);
    ctl_ok(c);
    ctl_linef(c, "protocol: %d", CTL_VERSION);
    ctl_linef(c, "pid: %ld", (long)getpid());
    ctl_linef(c, "schedulers: %d", sys ? sys->n : 0);
    ctl_linef(c, "processes: %zu", tvm_processes(vm, NULL, 0));
    ctl_linef(c, "modules: %zu", tvm_modules(vm, NULL, 0));
    ctl_linef(c, "memory_kib: %ld", resident_kib());
    ctl_linef(c, "uptime_s: %.1f", (double)(vm_now_ns() - c->srv->started_ns) / 1e9);
    ctl_linef(c, "clients: %d", ctl_clients(c->srv));
    ctl_linef(c, "sessions: %u", tr_sessions_live(vm));
    ctl_end(c);
}

/* ==== a process's label ==== */

/*
 * Appends pid's registered name, as the atom prints in Erlang syntax
 * ('idle two', 'a\nb': one printable line whatever bytes the name
 * holds, at most 4 * 255 + 2 bytes), and returns true; false (nothing
 * appended) when it has none, or is no longer alive, as the line is
 * written (tvm_process_name: the name at one moment, read under the
 * registry's lock).
 */
static bool put_name(tvm_vm *vm, tvm_pid pid, StrBuf *sb)
{
    char name[256];
    if (tvm_process_name(vm, pid, name, sizeof name, NULL) != TVM_OK)
        return false;
    /* A name holding a NUL byte (from VM code) shows up to it. */
    vm_print_atom_text(sb, name, strlen(name));
    return true;
}

/* "<0.N.0>", then " NAME" where the process has a name: how a process is
 * named in stacks' headings and groups. */
static void put_label(tvm_vm *vm, tvm_pid pid, StrBuf *sb)
{
    sb_printf(sb, "<0.%llu.0>", (unsigned long long)pid);
    size_t at = sb->len;
    sb_putc(sb, ' ');
    if (!put_name(vm, pid, sb)) {
        sb->len = at;
        sb->s[at] = '\0';
    }
}

/* ==== procs and top ==== */

typedef struct Row {
    tvm_process_info pi;
    uint64_t reds;             /* the sort's reductions: total, or during the interval */
} Row;

static int by_key(const void *a, const void *b, void *key)
{
    const Row *x = a, *y = b;
    const char *sort_key = key;
    uint64_t kx, ky;
    if (!strcmp(sort_key, "pid"))
        return x->pi.pid < y->pi.pid ? -1 : x->pi.pid > y->pi.pid;
    if (!strcmp(sort_key, "mq"))
        kx = x->pi.message_queue, ky = y->pi.message_queue;
    else if (!strcmp(sort_key, "heap"))
        kx = x->pi.heap_words, ky = y->pi.heap_words;
    else
        kx = x->reds, ky = y->reds;
    if (kx != ky)
        return kx > ky ? -1 : 1;
    return x->pi.pid < y->pi.pid ? -1 : x->pi.pid > y->pi.pid;
}

/* Every live process (malloc'ed), in table order. */
static Row *snapshot(tvm_vm *vm, size_t *n)
{
    size_t want = tvm_processes(vm, NULL, 0) + 64;
    tvm_process_info *pi = vm_calloc(want, sizeof *pi);
    size_t got = tvm_processes(vm, pi, want);
    if (got > want)
        got = want;
    Row *rows = vm_calloc(got ? got : 1, sizeof *rows);
    for (size_t i = 0; i < got; i++) {
        rows[i].pi = pi[i];
        rows[i].reds = pi[i].reductions;
    }
    free(pi);
    *n = got;
    return rows;
}

static void table(CtlClient *c, Row *rows, size_t n, const Opts *o, const char *reds_label)
{
    qsort_r(rows, n, sizeof *rows, by_key, (void *)o->sort);
    ctl_linef(c, "%-14s %-16s %-9s %12s %8s %10s  %s", "PID", "NAME", "STATE", reds_label, "MQ",
              "HEAP", "FUNCTION");
    size_t show = o->limit && (size_t)o->limit < n ? (size_t)o->limit : n;
    StrBuf row, name;
    sb_init(&row);
    sb_init(&name);
    for (size_t i = 0; i < show; i++) {
        const tvm_process_info *pi = &rows[i].pi;
        name.len = 0;
        if (!put_name(c->srv->vm, pi->pid, &name))
            sb_putc(&name, '-');
        /* A row in a buffer of its own: a quoted name may take 1,022
         * bytes, more than ctl_linef's line. */
        row.len = 0;
        char pid[32];
        snprintf(pid, sizeof pid, "<0.%llu.0>", (unsigned long long)pi->pid);
        sb_printf(&row, "%-14s %-16s %-9s %12llu %8zu %10zu  %s", pid, name.s, pi->state,
                  (unsigned long long)rows[i].reds, pi->message_queue, pi->heap_words,
                  pi->function[0] ? pi->function : "-");
        ctl_line(c, row.s, row.len);
    }
    sb_free(&row);
    sb_free(&name);
}

static void cmd_procs(CtlClient *c, int argc, char **argv)
{
    Opts o;
    if (!options(c, argc, argv, "sort limit", &o))
        return;
    if (o.npos) {
        ctl_error(c, "procs: unexpected argument '%s'", o.pos[0]);
        return;
    }
    size_t n;
    Row *rows = snapshot(c->srv->vm, &n);
    ctl_ok(c);
    table(c, rows, n, &o, "REDUCTIONS");
    free(rows);
    ctl_end(c);
}

bool ctl_client_here(CtlClient *c)
{
    struct pollfd p = { .fd = c->fd, .events = POLLRDHUP };
    if (poll(&p, 1, 0) == 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
        return true;
    /* A read side that ended because the endpoint stops (tvm_control_stop
     * shuts it after `stopping` is set, so this load sees the flag): the
     * client is still there to read the end of its reply. */
    return !(p.revents & (POLLHUP | POLLERR)) && vm_atomic_load_acquire(&c->srv->stopping);
}

/* Sleeps ms, in steps, returning false early when the endpoint stops or
 * the client leaves.  A client that hangs up in the middle of a count or
 * a profile (tracevm attach stopped by ^C) must not keep its thread, its
 * slot among the CTL_MAX_CLIENTS and its session's breakpoints for the
 * rest of a duration of up to an hour: nothing would read the result. */
bool ctl_nap(CtlClient *c, long ms)
{
    while (ms > 0) {
        long step = ms < 50 ? ms : 50;
        struct timespec ts = { step / 1000, (step % 1000) * 1000000L };
        nanosleep(&ts, NULL);
        ms -= step;
        if (vm_atomic_load_acquire(&c->srv->stopping))
            return false;
        if (!ctl_client_here(c)) {
            c->gone = true;
            return false;
        }
    }
    return true;
}

/* The row of pid in rows[0..n), sorted by pid; NULL when it has none. */
static const Row *by_pid(const Row *rows, size_t n, uint64_t pid)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rows[mid].pi.pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && rows[lo].pi.pid == pid ? &rows[lo] : NULL;
}

static void cmd_top(CtlClient *c, int argc, char **argv)
{
    Opts o;
    if (!options(c, argc, argv, "sort limit interval count", &o))
        return;
    if (o.npos) {
        ctl_error(c, "top: unexpected argument '%s'", o.pos[0]);
        return;
    }
    /* At most an hour in all, as every other long request. */
    if ((double)o.count * (double)o.interval > (double)CTL_REQUEST_MAX_MS) {
        ctl_error(c, "top: --count %ld times --interval %ld ms is more than an hour", o.count,
                  o.interval);
        return;
    }
    tvm_vm *vm = c->srv->vm;
    ctl_ok(c);
    ctl_flush(c);
    size_t nbefore;
    Row *before = snapshot(vm, &nbefore);
    for (long k = 0; k < o.count && !c->gone; k++) {
        if (!ctl_nap(c, o.interval))
            break;
        size_t n;
        Row *rows = snapshot(vm, &n);
        /* The reductions made during the interval: each process's earlier
         * count, found by a binary search of the earlier snapshot sorted by
         * pid (pids are unique in a snapshot), O((n + m) log m) on this
         * thread; rows stays in table order, so the table is unchanged. */
        qsort_r(before, nbefore, sizeof *before, by_key, (void *)"pid");
        for (size_t i = 0; i < n; i++) {
            const Row *b = by_pid(before, nbefore, rows[i].pi.pid);
            if (b)
                rows[i].reds -= b->pi.reductions < rows[i].reds ? b->pi.reductions
                                                                : rows[i].reds;
        }
        free(before);
        before = vm_calloc(n ? n : 1, sizeof *before);
        memcpy(before, rows, n * sizeof *rows);
        nbefore = n;
        table(c, rows, n, &o, "REDS/INT");
        ctl_line(c, "", 0);
        ctl_flush(c);
        free(rows);
    }
    free(before);
    ctl_end(c);
}

/* ==== stacks ==== */

/* The text of one process's stack, or its error, with `head` first. */
static void stack_of(tvm_vm *vm, tvm_pid pid, StrBuf *out)
{
    size_t size = 65536;
    char *buf = vm_malloc(size);
    tvm_error err;
    tvm_status st = tvm_backtrace(vm, pid, buf, size, NULL, &err);
    /* TVM_ERR_LIMIT: the lines that fit, then why the rest is missing. */
    if (st == TVM_OK || st == TVM_ERR_LIMIT)
        sb_puts(out, buf);
    if (st != TVM_OK)
        sb_printf(out, "  (%s)\n", err.message);
    free(buf);
}

/* Pids listed in a group's heading. */
#define GROUP_PIDS 8

typedef struct Group {
    char *text;                /* the stack, without the pid */
    uint64_t hash;             /* of text (FNV-1a) */
    StrBuf pids;
    size_t n;
} Group;

/* Group numbers by their group's size, descending, then by number. */
static int by_size(const void *a, const void *b, void *groups)
{
    const Group *g = groups;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (g[x].n != g[y].n)
        return g[x].n > g[y].n ? -1 : 1;
    return (x > y) - (x < y);
}

static uint64_t text_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

/* The group of `text` in an open-addressing index of `mask + 1` slots
 * (group number + 1, 0 empty; at least twice as many slots as groups),
 * made if it is new.  A linear search made grouping quadratic: as many
 * string comparisons as processes times groups. */
static size_t group_of(Group *groups, size_t *ng, size_t *index, size_t mask, const char *text,
                       size_t len)
{
    uint64_t h = text_hash(text);
    size_t i = (size_t)h & mask;
    for (; index[i]; i = (i + 1) & mask) {
        Group *g = &groups[index[i] - 1];
        if (g->hash == h && !strcmp(g->text, text))
            return index[i] - 1;
    }
    Group *g = &groups[*ng];
    g->text = vm_strndup(text, len);
    g->hash = h;
    sb_init(&g->pids);
    index[i] = ++*ng;
    return *ng - 1;
}

static void emit_lines(CtlClient *c, const char *text)
{
    while (*text) {
        const char *nl = strchr(text, '\n');
        size_t len = nl ? (size_t)(nl - text) : strlen(text);
        ctl_line(c, text, len);
        text += len + (nl ? 1 : 0);
    }
}

static void cmd_stacks(CtlClient *c, int argc, char **argv)
{
    Opts o;
    if (!options(c, argc, argv, "running group", &o))
        return;
    tvm_vm *vm = c->srv->vm;
    size_t n;
    Row *rows;
    if (o.npos) {
        rows = vm_calloc((size_t)o.npos, sizeof *rows);
        n = 0;
        for (int i = 0; i < o.npos; i++) {
            uint64_t v;
            if (!ctl_pid(o.pos[i], &v)) {
                free(rows);
                ctl_error(c, "stacks: bad pid '%s' (N or <0.N.0>)", o.pos[i]);
                return;
            }
            rows[n++].pi.pid = v;
        }
    } else {
        rows = snapshot(vm, &n);
        qsort_r(rows, n, sizeof *rows, by_key, (void *)"pid");
    }
    ctl_ok(c);
    Group *groups = o.group ? vm_calloc(n ? n : 1, sizeof *groups) : NULL;
    size_t ng = 0, mask = 1;
    while (mask < 2 * n)
        mask <<= 1;
    size_t *index = o.group ? vm_calloc(mask--, sizeof *index) : NULL;
    StrBuf sb, label;
    sb_init(&sb);
    sb_init(&label);
    for (size_t i = 0; i < n && !c->gone; i++) {
        if (o.running && (o.npos || strcmp(rows[i].pi.state, "running") != 0))
            continue;
        sb.len = 0;
        sb.s[0] = '\0';
        stack_of(vm, rows[i].pi.pid, &sb);
        label.len = 0;
        put_label(vm, rows[i].pi.pid, &label);
        if (!o.group) {
            ctl_line(c, label.s, label.len);
            emit_lines(c, sb.s);
            continue;
        }
        /* --group writes nothing until every stack is taken, so only a
         * look at the socket tells a client that hung up: it cancels the
         * rest, as for the streaming requests. */
        if ((i & 255) == 255 && !ctl_client_here(c)) {
            c->gone = true;
            break;
        }
        size_t g = group_of(groups, &ng, index, mask, sb.s, sb.len);
        /* The first pids of a group name it; the count says the rest. */
        if (groups[g].n < GROUP_PIDS)
            sb_printf(&groups[g].pids, "%s%s", groups[g].n ? " " : "", label.s);
        else if (groups[g].n == GROUP_PIDS)
            sb_puts(&groups[g].pids, " ...");
        groups[g].n++;
    }
    /* Largest groups first, ties in the order they were met: the
     * index's slots hold the group numbers to sort. */
    for (size_t g = 0; g < ng; g++)
        index[g] = g;
    if (ng)
        qsort_r(index, ng, sizeof *index, by_size, groups);
    for (size_t k = 0; k < ng && !c->gone; k++) {
        const Group *gr = &groups[index[k]];
        /* Not ctl_linef: eight labels with quoted names pass its 1,024 bytes. */
        label.len = 0;
        sb_printf(&label, "%zu process%s: %s", gr->n, gr->n == 1 ? "" : "es", gr->pids.s);
        ctl_line(c, label.s, label.len);
        emit_lines(c, gr->text);
    }
    for (size_t g = 0; g < ng; g++) {
        free(groups[g].text);
        sb_free(&groups[g].pids);
    }
    free(groups);
    free(index);
    sb_free(&sb);
    sb_free(&label);
    free(rows);
    ctl_end(c);
}

/* ==== load ==== */

static void cmd_load(CtlClient *c, int argc, char **argv)
{
    long bytes;
    if (argc != 3 || !ctl_number(argv[2], 0, CTL_LOAD_MAX, &bytes)) {
        ctl_error(c, "load: expects NAME BYTES (BYTES at most %u)", CTL_LOAD_MAX);
        if (argc == 3)
            c->gone = true;   /* the bytes that may follow cannot be told from requests */
        return;
    }
    /* The text must come whole within the idle limit, however it
     * trickles in: a client sending a byte now and then held its thread
     * and its slot for as long as it liked.  A timeout is said (the
     * connection ends: the rest of the text could not be told from
     * requests); EOF or an error just ends it. */
    char *text = vm_malloc((size_t)bytes + 1);
    if (!ctl_read_bytes(&c->in, text, (size_t)bytes, ctl_idle_ms)) {
        free(text);
        if (ctl_client_here(c) && !vm_atomic_load_acquire(&c->srv->stopping)) {
            ctl_error(c, "load: the %ld bytes of text did not come within %g s", bytes,
                      ctl_idle_ms / 1000.0);
            ctl_linger(c->fd);
        }
        c->gone = true;
        return;
    }
    tvm_error err;
    tvm_status st = tvm_load_string(c->srv->vm, argv[1], text, (size_t)bytes, &err);
    if (st == TVM_OK) {
        free(text);
        ctl_ok(c);
        ctl_end(c);
        return;
    }
    if (st != TVM_ERR_LOAD) {
        free(text);
        ctl_error(c, "load: %s", err.message);
        return;
    }
    /* Every diagnostic (a tvm_error holds 4 KiB of them): checking the
     * same text again gives them all; nothing was loaded.  A module the
     * checker passes (one that natives provide) has its reason in err. */
    char *diag = NULL;
    tvm_check_string(c->srv->vm, argv[1], text, (size_t)bytes, &diag, NULL);
    c->out.len = 0;
    sb_puts(&c->out, "error load failed\n");
    emit_lines(c, diag && *diag ? diag : err.message);
    free(diag);
    free(text);
    ctl_end(c);
}

/* ==== profile ==== */

/*
 * profile --duration S [--kind cpu|off|alloc] [--hz N] [--alloc-interval KIB]
 *         [--format F] [--merge] [--lines] --out PATH
 * Profiles the VM for S seconds (tvm_profile_start, then stop) and writes
 * the profile to PATH, an absolute path the client names (the client and
 * the VM run as the same user: SO_PEERCRED), in the format F or the one
 * PATH's extension names.  The reply's payload says what was written.
 * The client's thread sleeps meanwhile; no scheduler waits for it.
 */
static void cmd_profile(CtlClient *c, int argc, char **argv)
{
    tvm_profile_options po = { .size = sizeof(tvm_profile_options), .kind = TVM_PROFILE_CPU };
    tvm_profile_write_options wo = { .size = sizeof wo };
    const char *out = NULL, *format = NULL;
    double seconds = 0;
    bool have_duration = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--merge") || !strcmp(a, "--lines")) {
            *(a[2] == 'm' ? &wo.merge : &wo.lines) = true;
            continue;
        }
        static const char *const valued[] = { "--duration", "--kind", "--hz",
                                              "--alloc-interval", "--format", "--out" };
        bool known = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            known = known || !strcmp(a, valued[k]);
        if (!known) {
            ctl_error(c, "profile: %s '%s'", a[0] == '-' ? "unknown option" : "unexpected argument",
                      a);
            return;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            ctl_error(c, "profile: %s needs a value", a);
            return;
        }
        bool ok = true;
        long n;
        if (!strcmp(a, "--duration")) {
            char *end;
            seconds = strtod(v, &end);
            ok = *v && !*end && seconds > 0 && seconds <= CTL_REQUEST_MAX_MS / 1000;
            have_duration = true;
        } else if (!strcmp(a, "--kind")) {
            ok = !strcmp(v, "cpu") || !strcmp(v, "off") || !strcmp(v, "alloc");
            po.kind = v[0] == 'c' ? TVM_PROFILE_CPU : v[0] == 'o' ? TVM_PROFILE_OFF
                                                                 : TVM_PROFILE_ALLOC;
        } else if (!strcmp(a, "--hz")) {
            ok = ctl_number(v, 1, 10000, &n);
            po.hz = ok ? (unsigned)n : 0;
        } else if (!strcmp(a, "--alloc-interval")) {
            ok = ctl_number(v, 1, 1 << 20, &n);
            po.alloc_interval = ok ? (size_t)n * 1024 : 0;
        } else if (!strcmp(a, "--format")) {
            ok = tvm_profile_format_parse(v, &wo.format) == TVM_OK;
            format = v;
        } else {
            ok = v[0] == '/';
            out = v;
        }
        if (!ok) {
            ctl_error(c, "profile: bad value for %s: '%s'", a, v);
            return;
        }
    }
    if (!have_duration || !out) {
        ctl_error(c, "profile: needs --duration S and --out PATH (absolute)");
        return;
    }
    if (!format && tvm_profile_format_of(out, &wo.format) != TVM_OK) {
        ctl_error(c, "profile: no format for '%s' (.folded, .json, .pb.gz, .svg): give --format",
                  out);
        return;
    }
    tvm_profile *prof;
    tvm_error err;
    if (tvm_profile_start(c->srv->vm, &po, &prof, &err) != TVM_OK) {
        ctl_error(c, "profile: %s", err.message);
        return;
    }
    const bool stayed = ctl_nap(c, (long)(seconds * 1000 + 0.5)) || !c->gone;
    tvm_profile_stop(prof);
    if (!stayed) {
        /* The client hung up: the profile is cancelled, no file. */
        tvm_profile_free(prof);
        return;
    }
    tvm_profile_stats st;
    tvm_profile_get_stats(prof, &st);
    tvm_status ws = tvm_profile_write(prof, out, &wo, &err);
    tvm_profile_free(prof);
    if (ws != TVM_OK) {
        ctl_error(c, "profile: %s", err.message);
        return;
    }
    static const char *const kinds[] = { "cpu", "off", "alloc" };
    static const char *const formats[] = { "folded", "speedscope", "pprof", "svg" };
    ctl_ok(c);
    ctl_linef(c, "path: %s", out);
    ctl_linef(c, "kind: %s", kinds[po.kind]);
    ctl_linef(c, "format: %s", formats[wo.format]);
    ctl_linef(c, "samples: %llu", (unsigned long long)st.samples);
    ctl_linef(c, "lost: %llu", (unsigned long long)st.lost);
    ctl_linef(c, "stacks: %llu", (unsigned long long)st.stacks);
    ctl_linef(c, "duration_s: %.2f", (double)st.duration_ns / 1e9);
    ctl_end(c);
}

/* ==== dispatch ==== */

static const struct {
    const char *name;
    void (*fn)(CtlClient *c, int argc, char **argv);
    bool session;              /* runs in a trace session of its own */
} commands[] = {
    { "info", cmd_info, false },
    { "procs", cmd_procs, false },
    { "top", cmd_top, false },
    { "stacks", cmd_stacks, false },
    { "load", cmd_load, false },
    { "profile", cmd_profile, false },
    { "trace", ctl_cmd_trace, true },
    { "trace_info", ctl_cmd_trace_info, false },
    { "count", ctl_cmd_calls, true },
    { "time", ctl_cmd_calls, true },
};

/* Takes one of the CTL_MAX_SESSIONS sessions the clients may hold at once
 * (srv->sessions), or replies with the error.  Why a share: the VM has
 * TVM_SESSIONS_MAX sessions for everyone, and 15 clients tracing for an
 * hour took every one the program itself could have created.  A command
 * holds its share from before it creates its session until after it
 * destroyed it (trace's check session comes and goes before its own), so
 * the clients never hold more sessions than shares. */
static bool session_share(CtlClient *c, const char *cmd)
{
    uintptr_t n = vm_atomic_fetch_add_relaxed(&c->srv->sessions, 1);
    if (n < CTL_MAX_SESSIONS)
        return true;
    vm_atomic_fetch_add_relaxed(&c->srv->sessions, (uintptr_t)-1);
    ctl_error(c, "%s: the control clients hold %d trace sessions, the most they may "
                 "(the others are the program's)", cmd, CTL_MAX_SESSIONS);
    return false;
}

void ctl_dispatch(CtlClient *c, int argc, char **argv)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (!strcmp(argv[0], commands[i].name)) {
            if (commands[i].session && !session_share(c, argv[0]))
                return;
            commands[i].fn(c, argc, argv);
            if (commands[i].session)
                vm_atomic_fetch_add_relaxed(&c->srv->sessions, (uintptr_t)-1);
            return;
        }
    }
    ctl_error(c, "unknown command '%.64s'", argv[0]);
}
