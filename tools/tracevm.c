/*
 * tools/tracevm.c - the tracevm command.
 *
 *   tracevm run FILE... [-e MOD:FUN] [--trace PATTERN ...] [--] [ARG...]
 *   tracevm check FILE...
 *   tracevm dis FILE...
 *   tracevm attach TARGET COMMAND ...
 *   tracevm --version
 *
 * Exit status: 0 on success, 1 when a program raised or a file was
 * rejected, 2 on a usage error.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/tracevm.h"

static const char *const usage_main =
    "usage: tracevm COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  run FILE... [-S N] [-q] [--crash-stacks] [-e MOD:FUN] [--trace PATTERN [--local]\n"
    "      [--match SPEC]] [--flags LIST] [--format FMT] [--out PATH]\n"
    "      [--max-events N] [--rate N/s] [--duration S]\n"
    "      [--profile[=cpu|off|alloc] [--hz N] --profile-out FILE] [--] [ARG...]\n"
    "                                           load modules, run a function as a process,\n"
    "                                           optionally tracing calls and processes,\n"
    "                                           or profiling them\n"
    "  check FILE...                            verify assembly files\n"
    "  dis FILE...                              disassemble assembly files\n"
    "  attach TARGET COMMAND [options]          look into and change a running VM\n"
    "  attach --list                            this user's running VMs\n"
    "\n"
    "`tracevm COMMAND --help` describes one command; `tracevm --version` prints\n"
    "the version of the library it runs with.  Manual: tracevm(1).\n";

static const char *const usage_run =
    "usage: tracevm run FILE... [-S N] [-q] [--crash-stacks] [-e MOD:FUN] [TRACING] [PROFILING]\n"
    "                   [--] [ARG...]\n"
    "\n"
    "Loads every FILE (.tasm), then runs MOD:FUN with the ARGs as the first\n"
    "process, prints its result when it returns, and exits (other processes\n"
    "are not waited for).  Each ARG is a term in the assembly's literal syntax (42, ok,\n"
    "'\"text\"', '[1,2]', '{a,b}'); the function's arity is the number of ARGs.\n"
    "Arguments ending in .tasm are files; use -- before ARGs that do too.\n"
    "\n"
    "  -e MOD:FUN   the function to call (default: main in the first file's module)\n"
    "  -S N         scheduler threads (default: one per core)\n"
    "  -q           no crash reports for other processes\n"
    "  --crash-stacks  crash reports add the VM + native stack of the raise\n"
    "  --no-control    do not serve the control socket that `tracevm attach`\n"
    "                  connects to (docs/control.md)\n"
    "SIGUSR1 to the running tracevm prints the stack (VM and native frames) of\n"
    "every live process to stderr (docs/stacks.md).\n"
    "\n"
    "Tracing (docs/tracing.md); every process gets the flags:\n"
    "  --trace PATTERN  trace calls of MOD:FUN/ARITY (trailing wildcards: m:f/_,\n"
    "                   m:_/_, _:_/_); repeatable; global patterns trace remote\n"
    "                   calls of exported functions\n"
    "  --local          the patterns are local: every call, local ones too\n"
    "  --match SPEC     a match spec for the patterns, e.g.\n"
    "                   \"[{['$1'],[{'>','$1',20}],[{return_trace}]}]\"\n"
    "  --flags LIST     process flags, comma-separated (default: call; '' for\n"
    "                   none: the pipeline runs, erlang:trace/3 chooses):\n"
    "                     call       call events {trace,<0.1.0>,call,{fib,fib,[10]}}\n"
    "                     arity      the arity instead of the arguments\n"
    "                     timestamp  trace_ts with {MegaSecs,Secs,MicroSecs} last\n"
    "                     monotonic_timestamp  ... with the monotonic ns last\n"
    "                     strict_monotonic_timestamp  ... with {Ns,Unique} last\n"
    "                     procs      spawn, spawned, exit, register, unregister, link,\n"
    "                                unlink, getting_linked and getting_unlinked\n"
    "                     return_to  {trace,<0.1.0>,return_to,{M,F,A}} (--local)\n"
    "                     silent     no call/return events (match specs still run)\n"
    "                     running    in/out events when scheduled in and out\n"
    "                     send       send events {trace,Pid,send,Msg,To}\n"
    "                     receive    receive events {trace,Pid,'receive',Msg}\n"
    "                     set_on_spawn  each process it spawns gets its flags\n"
    "                     set_on_first_spawn  the first one it spawns only\n"
    "                     garbage_collection  gc_major_start and gc_major_end around\n"
    "                                each collection of its heap\n"
    "                     set_on_link  each process it spawn_links gets its flags\n"
    "                     set_on_first_link  the first one it spawn_links only\n"
    "                     exiting    {trace,Pid,out_exited,0} as its last event\n"
    "                     all        every flag above\n"
    "  --format FMT     text (default), jsonl, chrome, ctf or ctf-raw (each\n"
    "                   scheduler's records copied as they are: the fastest)\n"
    "  --policy POLICY  drop (default: a full buffer drops events, counted) or\n"
    "                   lossless (a traced process waits for room instead)\n"
    "  --out PATH       where events go (default: stderr); a file, for ctf and\n"
    "                   ctf-raw a new or empty directory; required for chrome,\n"
    "                   ctf and ctf-raw\n"
    "  --trace-off      the --trace patterns start switched off\n"
    "Limits (the trace stops by itself: its patterns and flags are removed, the\n"
    "last record says why, {trace_stopped,Reason,Written,Lost}):\n"
    "  --max-events N   after N events\n"
    "  --rate N/s       when more than N events come in one second (N/ms, N/10s,\n"
    "                   N/250ms: other windows); with --rate-policy drop the\n"
    "                   events above the rate are dropped and counted instead\n"
    "  --duration S     S seconds (a decimal) after it started\n"
    "With a limit, or when events were lost, one line at exit on stderr says\n"
    "how many events the trace wrote and lost (and why it stopped).\n"
    "\n"
    "Profiling (docs/profiling.md), from the first process's start to its return:\n"
    "  --profile[=KIND]     cpu (default): on-CPU samples of every scheduler;\n"
    "                       off: the time processes wait, by stack; alloc: heap\n"
    "                       allocation, by VM stack\n"
    "  --hz N               cpu: samples per second of CPU time (default 99, <= 10000)\n"
    "  --alloc-interval KIB alloc: mean KiB allocated between samples (default 512)\n"
    "  --profile-out FILE   where the profile goes; the format from the extension:\n"
    "                       .folded (folded stacks), .json (speedscope), .pb.gz\n"
    "                       (pprof), .svg (an interactive flame graph)\n"
    "  --profile-format F   folded, speedscope, pprof or svg, whatever the extension\n"
    "  --profile-merge      one tree for all processes (default: a root per process)\n"
    "  --profile-lines      VM frames split by line (default: by function)\n"
    "SIGUSR2 to the running tracevm switches the --trace patterns off and on\n"
    "again (no scheduler pauses); each switch is reported on stderr.\n"
    "Events still buffered are written before the result is printed; events\n"
    "of processes that outlive the first are written until then.\n"
    "\n"
    "An uncaught exception is printed with its stack trace and the exit\n"
    "status is 1.\n";

static const char *const usage_check =
    "usage: tracevm check FILE...\n"
    "\n"
    "Parses and verifies each FILE and prints every error as\n"
    "FILE:LINE:COL: error: MESSAGE.  Exit status 1 if any file has an error.\n";

static const char *const usage_dis =
    "usage: tracevm dis FILE...\n"
    "\n"
    "Verifies each FILE and prints its code, instruction by instruction, with\n"
    "word offsets, branch targets as @OFFSET and source lines.\n";

static int usage(const char *text, int status)
{
    fputs(text, status ? stderr : stdout);
    return status;
}

static bool wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* check / dis: check each file without loading it (tvm_check_file). */
static int cmd_check(int argc, char **argv, bool dis)
{
    if (wants_help(argc, argv))
        return usage(dis ? usage_dis : usage_check, 0);
    if (argc == 0)
        return usage(dis ? usage_dis : usage_check, 2);
    tvm_vm *vm = tvm_new(NULL);
    int status = 0;
    for (int i = 0; i < argc; i++) {
        char *diag, *text;
        if (tvm_check_file(vm, argv[i], &diag, dis ? &text : NULL) != TVM_OK) {
            fputs(diag, stderr);
            status = 1;
        } else if (dis) {
            fputs(text, stdout);
            free(text);
        } else {
            printf("%s: ok\n", argv[i]);
        }
        free(diag);
    }
    tvm_destroy(vm);
    return status;
}

/* What `tracevm run` was asked to do. */
typedef struct RunOpts {
    const char **files, **args, **patterns;
    int nfiles, nargs, npatterns;
    const char *entry;
    tvm_config cfg;
    bool local;                /* --local: local patterns instead of global */
    bool flags_set;            /* --flags given */
    unsigned flags;            /* TVM_TRACE_* for every process */
    const char *format;        /* --format, or NULL */
    tvm_trace_format fmt;
    const char *out;           /* --out, or NULL */
    const char *match;         /* --match, or NULL */
    const char *policy;        /* --policy, or NULL */
    tvm_trace_policy pol;
    bool trace_off;            /* --trace-off: patterns start switched off */
    const char *limit;         /* the first limit option given, or NULL */
    uint64_t max_events;       /* --max-events */
    uint64_t rate, rate_window_ms; /* --rate N/WINDOW */
    bool rate_drop;            /* --rate-policy drop */
    bool rate_policy_set;
    uint64_t duration_ms;      /* --duration */
    bool profile;              /* --profile[=KIND] */
    tvm_profile_options prof;  /* its kind, --hz, --alloc-interval */
    const char *profile_out;   /* --profile-out FILE */
    const char *profile_format; /* --profile-format, or NULL: by the extension */
    tvm_profile_write_options pw; /* format, --profile-merge, --profile-lines */
    bool hz_set, interval_set;
} RunOpts;

static void run_opts_free(RunOpts *o)
{
    free(o->files);
    free(o->args);
    free(o->patterns);
}

/* The value of option argv[*i] (advancing *i); NULL with a message. */
static const char *option_value(int argc, char **argv, int *i, const char *what)
{
    if (*i + 1 == argc) {
        fprintf(stderr, "tracevm run: %s needs %s\n", argv[*i], what);
        return NULL;
    }
    return argv[++*i];
}

/* --flags LIST; false with a message.  An empty list starts the
 * pipeline with no process traced: the program chooses with
 * erlang:trace/3. */
static bool parse_trace_flags(const char *list, unsigned *flags)
{
    tvm_error err;
    if (!*list) {
        *flags = 0;
        return true;
    }
    if (tvm_trace_flags_parse(list, flags, &err) == TVM_OK)
        return true;
    fprintf(stderr, "tracevm run: --flags: %s\n", err.message);
    return false;
}

static bool parse_trace_format(const char *name, tvm_trace_format *fmt)
{
    static const struct {
        const char *name;
        tvm_trace_format fmt;
    } names[] = { { "text", TVM_TRACE_TEXT }, { "jsonl", TVM_TRACE_JSONL },
                  { "chrome", TVM_TRACE_CHROME }, { "ctf", TVM_TRACE_CTF },
                  { "ctf-raw", TVM_TRACE_CTF_RAW } };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].name)) {
            *fmt = names[i].fmt;
            return true;
        }
    fprintf(stderr, "tracevm run: --format: unknown format '%s' "
                    "(expected text, jsonl, chrome, ctf or ctf-raw)\n", name);
    return false;
}

static bool parse_trace_policy(const char *name, tvm_trace_policy *pol)
{
    if (!strcmp(name, "drop") || !strcmp(name, "lossless")) {
        *pol = name[0] == 'd' ? TVM_TRACE_DROP : TVM_TRACE_LOSSLESS;
        return true;
    }
    fprintf(stderr, "tracevm run: --policy: unknown policy '%s' (expected drop or lossless)\n",
            name);
    return false;
}

/* A whole number 1..max in decimal digits alone (no sign, no space, no
 * wrap past 64 bits: strtoull would take "-5" as 2^64 - 5 and clamp a
 * number too big to ULLONG_MAX). */
static bool parse_whole(const char *arg, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    if (!arg || *arg < '0' || *arg > '9')
        return false;
    errno = 0;
    unsigned long long n = strtoull(arg, &end, 10);
    if (errno || *end || n < 1 || n > max)
        return false;
    *out = n;
    return true;
}

/* A count of 1 or more; false with a message naming the option. */
static bool parse_count(const char *opt, const char *arg, uint64_t *out)
{
    if (!parse_whole(arg, UINT64_MAX, out)) {
        fprintf(stderr, "tracevm run: %s needs a number of events (1 or more, at most %llu), "
                        "got '%s'\n", opt, (unsigned long long)UINT64_MAX, arg ? arg : "");
        return false;
    }
    return true;
}

/* --rate N/WINDOW: WINDOW is s, ms, Ks or Kms (K a whole number). */
static bool parse_rate(const char *arg, RunOpts *o)
{
    const char *slash = arg ? strchr(arg, '/') : NULL;
    char count[32];
    if (!slash || (size_t)(slash - arg) >= sizeof count)
        goto bad;
    memcpy(count, arg, (size_t)(slash - arg));
    count[slash - arg] = '\0';
    char window[32];
    uint64_t k = 1;
    const char *unit = slash + 1;
    size_t digits = strspn(unit, "0123456789");
    if (digits >= sizeof window)
        goto bad;
    memcpy(window, unit, digits);
    window[digits] = '\0';
    unit += digits;
    uint64_t ms = !strcmp(unit, "s") ? 1000 : !strcmp(unit, "ms") ? 1 : 0;
    /* A window's K is bounded so that K times its unit fits 64 bits. */
    if (!ms || (digits && !parse_whole(window, UINT64_MAX / ms, &k)) ||
        !parse_whole(count, UINT64_MAX, &o->rate))
        goto bad;
    o->rate_window_ms = k * ms;
    return true;
bad:
    fprintf(stderr, "tracevm run: --rate needs N/s, N/ms, N/Ks or N/Kms (N events per "
                    "window), got '%s'\n", arg ? arg : "");
    return false;
}

static bool parse_duration(const char *arg, uint64_t *ms)
{
    char *end = NULL;
    double s = arg ? strtod(arg, &end) : 0;
    if (!arg || !*arg || *end || !(s > 0) || s > 1e9) {
        fprintf(stderr, "tracevm run: --duration needs seconds (a decimal above 0), got '%s'\n",
                arg ? arg : "");
        return false;
    }
    *ms = (uint64_t)(s * 1000.0 + 0.5);
    if (!*ms)
        *ms = 1;
    return true;
}

static bool parse_schedulers(const char *arg, tvm_config *cfg)
{
    char *end = NULL;
    long n = arg ? strtol(arg, &end, 10) : 0;
    if (!arg || *end || n < 1 || n > 1024) {
        fprintf(stderr, "tracevm run: -S needs a number of schedulers 1..1024\n");
        return false;
    }
    cfg->schedulers = (int)n;
    return true;
}

static bool parse_number(const char *opt, const char *arg, unsigned lo, unsigned hi,
                         unsigned *out)
{
    char *end = NULL;
    long n = strtol(arg, &end, 10);
    if (!*arg || *end || n < (long)lo || n > (long)hi) {
        fprintf(stderr, "tracevm run: %s needs a number %u..%u, got '%s'\n", opt, lo, hi, arg);
        return false;
    }
    *out = (unsigned)n;
    return true;
}

static bool parse_profile_kind(const char *kind, RunOpts *o)
{
    static const char *const names[] = { "cpu", "off", "alloc" };
    for (int i = 0; i < 3; i++)
        if (!strcmp(kind, names[i])) {
            o->profile = true;
            o->prof.kind = (tvm_profile_kind)i;
            return true;
        }
    fprintf(stderr, "tracevm run: --profile: unknown kind '%s' (expected cpu, off or alloc)\n",
            kind);
    return false;
}

/* The profiling options go together; false with a message. */
static bool check_profile_opts(RunOpts *o)
{
    const char *lone = o->profile_out      ? "--profile-out"
                       : o->profile_format ? "--profile-format"
                       : o->pw.merge       ? "--profile-merge"
                       : o->pw.lines       ? "--profile-lines"
                       : o->hz_set         ? "--hz"
                       : o->interval_set   ? "--alloc-interval"
                                           : NULL;
    if (!o->profile) {
        if (lone)
            fprintf(stderr, "tracevm run: %s needs --profile\n", lone);
        return !lone;
    }
    if (!o->profile_out) {
        fprintf(stderr, "tracevm run: --profile needs --profile-out FILE\n");
        return false;
    }
    if (o->hz_set && o->prof.kind != TVM_PROFILE_CPU) {
        fprintf(stderr, "tracevm run: --hz is for --profile=cpu\n");
        return false;
    }
    if (o->interval_set && o->prof.kind != TVM_PROFILE_ALLOC) {
        fprintf(stderr, "tracevm run: --alloc-interval is for --profile=alloc\n");
        return false;
    }
    if (o->profile_format) {
        if (tvm_profile_format_parse(o->profile_format, &o->pw.format) != TVM_OK) {
            fprintf(stderr, "tracevm run: --profile-format: unknown format '%s' (expected "
                            "folded, speedscope, pprof or svg)\n", o->profile_format);
            return false;
        }
    } else if (tvm_profile_format_of(o->profile_out, &o->pw.format) != TVM_OK) {
        fprintf(stderr, "tracevm run: --profile-out %s: no format for this extension (.folded, "
                        ".json, .pb.gz, .svg), or give --profile-format\n", o->profile_out);
        return false;
    }
    return true;
}

/* One option at argv[*i]; false (with a message) on a usage error. */
static bool parse_run_option(int argc, char **argv, int *i, RunOpts *o)
{
    const char *a = argv[*i], *v;
    if (!strcmp(a, "-e"))
        return (o->entry = option_value(argc, argv, i, "MOD:FUN")) != NULL;
    if (!strcmp(a, "-S"))
        return parse_schedulers(*i + 1 < argc ? argv[++*i] : NULL, &o->cfg);
    if (!strcmp(a, "-q"))
        return o->cfg.quiet_crashes = true;
    if (!strcmp(a, "--crash-stacks"))
        return o->cfg.crash_stacks = true;
    if (!strcmp(a, "--local"))
        return o->local = true;
    if (!strcmp(a, "--trace-off"))
        return o->trace_off = true;
    if (!strcmp(a, "--no-control")) {
        o->cfg.control = false;
        return true;
    }
    if (!strcmp(a, "--trace")) {
        if (!(v = option_value(argc, argv, i, "a pattern MOD:FUN/ARITY")))
            return false;
        o->patterns[o->npatterns++] = v;
        return true;
    }
    if (!strcmp(a, "--match"))
        return (o->match = option_value(argc, argv, i, "a match spec")) != NULL;
    if (!strcmp(a, "--flags"))
        return (v = option_value(argc, argv, i, "a list of flags")) &&
               (o->flags_set = parse_trace_flags(v, &o->flags));
    if (!strcmp(a, "--format"))
        return (o->format = option_value(argc, argv, i, "text, jsonl, chrome, ctf or ctf-raw")) &&
               parse_trace_format(o->format, &o->fmt);
    if (!strcmp(a, "--policy"))
        return (o->policy = option_value(argc, argv, i, "drop or lossless")) &&
               parse_trace_policy(o->policy, &o->pol);
    if (!strcmp(a, "--out"))
        return (o->out = option_value(argc, argv, i, "a path")) != NULL;
    if (!strcmp(a, "--max-events") || !strcmp(a, "--rate") || !strcmp(a, "--duration") ||
        !strcmp(a, "--rate-policy")) {
        if (!(v = option_value(argc, argv, i, !strcmp(a, "--rate-policy") ? "stop or drop"
                                                                          : "a value")))
            return false;
        if (!o->limit && strcmp(a, "--rate-policy"))
            o->limit = a;
        if (!strcmp(a, "--max-events"))
            return parse_count(a, v, &o->max_events);
        if (!strcmp(a, "--rate"))
            return parse_rate(v, o);
        if (!strcmp(a, "--duration"))
            return parse_duration(v, &o->duration_ms);
        o->rate_policy_set = true;
        if (!strcmp(v, "stop") || !strcmp(v, "drop")) {
            o->rate_drop = v[0] == 'd';
            return true;
        }
        fprintf(stderr, "tracevm run: --rate-policy: unknown policy '%s' (expected stop or "
                        "drop)\n", v);
        return false;
    }
    if (!strncmp(a, "--profile", 9) && (a[9] == '\0' || a[9] == '='))
        return parse_profile_kind(a[9] ? a + 10 : "cpu", o);
    if (!strcmp(a, "--hz"))
        return (v = option_value(argc, argv, i, "a rate 1..10000")) &&
               (o->hz_set = parse_number("--hz", v, 1, 10000, &o->prof.hz));
    if (!strcmp(a, "--alloc-interval")) {
        unsigned kib;
        if (!(v = option_value(argc, argv, i, "KiB")) ||
            !parse_number("--alloc-interval", v, 1, 1u << 20, &kib))
            return false;
        o->prof.alloc_interval = (size_t)kib * 1024;
        return o->interval_set = true;
    }
    if (!strcmp(a, "--profile-out"))
        return (o->profile_out = option_value(argc, argv, i, "a file")) != NULL;
    if (!strcmp(a, "--profile-format"))
        return (o->profile_format = option_value(argc, argv, i, "folded, speedscope, pprof "
                                                                "or svg")) != NULL;
    if (!strcmp(a, "--profile-merge"))
        return o->pw.merge = true;
    if (!strcmp(a, "--profile-lines"))
        return o->pw.lines = true;
    fprintf(stderr, "tracevm run: unknown option %s\n", a);
    return false;
}

/* The tracing options go together; false with a message. */
static bool check_trace_opts(RunOpts *o)
{
    bool tracing = o->npatterns || o->flags_set;
    const char *lone = o->local    ? "--local"
                       : o->format ? "--format"
                       : o->out    ? "--out"
                       : o->policy ? "--policy"
                       : o->limit  ? o->limit
                                   : NULL;
    if (o->rate_policy_set && !o->rate) {
        fprintf(stderr, "tracevm run: --rate-policy needs --rate\n");
        return false;
    }
    if (o->match && !o->npatterns) {
        fprintf(stderr, "tracevm run: --match needs --trace\n");
        return false;
    }
    if (o->trace_off && !o->npatterns) {
        fprintf(stderr, "tracevm run: --trace-off needs --trace\n");
        return false;
    }
    if (!tracing && lone) {
        fprintf(stderr, "tracevm run: %s needs --trace or --flags\n", lone);
        return false;
    }
    bool dir = o->fmt == TVM_TRACE_CTF || o->fmt == TVM_TRACE_CTF_RAW;
    if ((o->fmt == TVM_TRACE_CHROME || dir) && !o->out) {
        fprintf(stderr, "tracevm run: --format %s needs --out %s\n", o->format,
                dir ? "DIR (a new or empty directory)" : "FILE");
        return false;
    }
    if (!o->flags_set)
        o->flags = TVM_TRACE_CALL;
    return true;
}

/* Parses the command line of `run`; 0, or the exit status of an error. */
static int parse_run(int argc, char **argv, RunOpts *o)
{
    o->files = calloc((size_t)argc + 1, sizeof(char *));
    o->args = calloc((size_t)argc + 1, sizeof(char *));
    o->patterns = calloc((size_t)argc + 1, sizeof(char *));
    bool rest = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!rest && strcmp(a, "--") == 0)
            rest = true;
        else if (!rest && ends_with(a, ".tasm"))
            o->files[o->nfiles++] = a;
        else if (!rest && a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9')) {
            if (!parse_run_option(argc, argv, &i, o))
                return 2;
        } else
            o->args[o->nargs++] = a;
    }
    if (o->nfiles == 0 && o->nargs > 0) {
        /* `tracevm run prog` (a file without its .tasm, or one that is
         * not there under another name): say so rather than the usage. */
        fprintf(stderr, "tracevm run: no FILE given (a FILE's name ends in .tasm; '%s' was "
                        "taken as an ARG)\n", o->args[0]);
        return 2;
    }
    if (o->nfiles == 0)
        return usage(usage_run, 2);
    return check_trace_opts(o) && check_profile_opts(o) ? 0 : 2;
}

/* An API error's message without its "tvm_function: " prefix. */
static const char *api_why(const tvm_error *err)
{
    const char *colon = strstr(err->message, ": ");
    return !strncmp(err->message, "tvm_", 4) && colon ? colon + 2 : err->message;
}

/* Switches --trace pattern i on (with --match) or off; the number of
 * functions it matched, or -1 with err set. */
static int pattern_switch(tvm_vm *vm, const RunOpts *o, int i, bool on, tvm_error *err)
{
    int n = 0;
    if (tvm_trace_pattern_ms(vm, o->patterns[i], on ? o->match : NULL,
                             on ? TVM_TP_TRUE : TVM_TP_FALSE,
                             o->local ? TVM_TP_LOCAL : TVM_TP_GLOBAL, 0, &n, err) != TVM_OK)
        return -1;
    return n;
}

/* Patterns, the pipeline and the flags of new processes; 0 or 2.  With
 * --trace-off each pattern is still applied once (so a bad one is
 * reported now) and switched off before any process runs. */
static int trace_setup(tvm_vm *vm, const RunOpts *o)
{
    tvm_error err;
    for (int i = 0; i < o->npatterns; i++) {
        int n = pattern_switch(vm, o, i, true, &err);
        if (n < 0 || (o->trace_off && pattern_switch(vm, o, i, false, &err) < 0)) {
            fprintf(stderr, "tracevm run: --trace %s: %s\n", o->patterns[i], api_why(&err));
            return 2;
        }
        if (n == 0)
            fprintf(stderr, "tracevm run: warning: --trace %s matches no function%s\n",
                    o->patterns[i], o->local ? "" : " (without --local, exported ones only)");
    }
    tvm_trace_options topts = { .size = sizeof(tvm_trace_options),
                                .format = o->fmt, .path = o->out, .policy = o->pol,
                                .max_events = o->max_events, .rate = o->rate,
                                .rate_window_ms = o->rate_window_ms,
                                .rate_policy = o->rate_drop ? TVM_RATE_DROP : TVM_RATE_STOP,
                                .duration_ms = o->duration_ms };
    if (tvm_trace_start(vm, &topts, &err) != TVM_OK) {
        if (o->out)
            fprintf(stderr, "tracevm run: --out %s: %s\n", o->out, api_why(&err));
        else
            fprintf(stderr, "tracevm run: cannot start tracing: %s\n", api_why(&err));
        return 2;
    }
    tvm_trace_flags_all(vm, TVM_TRACE_NEW, o->flags, true);
    return 0;
}

/*
 * At exit, one line per session on stderr with the events it wrote and
 * lost, and why it stopped if it did (the CLI has one session, the
 * default one, which its --trace patterns and --flags set up).  Only when
 * it says something the trace itself does not: with a limit, or when
 * events were lost; a trace that went to stderr whole is not repeated.
 */
static void trace_summary(tvm_vm *vm, const RunOpts *o)
{
    tvm_session_info in;
    if (tvm_session_info_get(vm, TVM_SESSION_DEFAULT, &in) != TVM_OK ||
        (!o->limit && !in.lost))
        return;
    fprintf(stderr, "tracevm run: trace session %s: %llu events written, %llu lost%s%s\n",
            in.name, (unsigned long long)in.written, (unsigned long long)in.lost,
            in.stopped ? ", stopped: " : "", in.stopped ? in.stopped : "");
}

/* The entry function: -e MOD:FUN, or main in the first module; 0 or 2. */
static int entry_of(tvm_vm *vm, const char *entry, char mod[256], char fun[256])
{
    strcpy(fun, "main");
    mod[0] = '\0';
    if (entry) {
        const char *colon = strchr(entry, ':');
        if (!colon || colon == entry || !colon[1] || (size_t)(colon - entry) >= 256 ||
            strlen(colon + 1) >= 256) {
            fprintf(stderr, "tracevm run: -e expects MOD:FUN, got '%s'\n", entry);
            return 2;
        }
        memcpy(mod, entry, (size_t)(colon - entry));
        mod[colon - entry] = '\0';
        strcpy(fun, colon + 1);
        return 0;
    }
    /* The first file's module: the first one loaded. */
    tvm_module_info first;
    if (tvm_modules(vm, &first, 1) > 0)
        snprintf(mod, 256, "%s", first.name);
    return 0;
}

/* Prints what the entry process ended with; the exit status. */
static int report(tvm_env *env, tvm_status st, tvm_term result, const char *mod,
                  const char *fun, int nargs)
{
    if (st == TVM_OK) {
        size_t need = tvm_format_term(env, result, NULL, 0);
        char *buf = malloc(need + 1);
        tvm_format_term(env, result, buf, need + 1);
        printf("%s\n", buf);
        free(buf);
        return 0;
    }
    if (st == TVM_EXCEPTION) {
        size_t need = tvm_format_exception(env, NULL, 0);
        char *buf = malloc(need + 1);
        tvm_format_exception(env, buf, need + 1);
        fprintf(stderr, "tracevm: uncaught %s", buf);
        free(buf);
        return 1;
    }
    fprintf(stderr, "tracevm run: cannot call %s:%s/%d: %s\n", mod, fun, nargs,
            tvm_status_name(st));
    return 1;
}

/* Loads the files and parses the arguments; 0 or the exit status. */
static int prepare(tvm_vm *vm, tvm_env *env, const RunOpts *o, tvm_term *targs)
{
    tvm_error err;
    for (int i = 0; i < o->nfiles; i++) {
        if (tvm_load_file(vm, o->files[i], &err) != TVM_OK) {
            fputs(err.message, stderr);
            return 1;
        }
    }
    for (int i = 0; i < o->nargs; i++) {
        if (tvm_parse_term(env, o->args[i], &targs[i], &err) != TVM_OK) {
            /* A long argument is named by its first 64 bytes: the
             * message gives the column of what is wrong in it. */
            const char *a = o->args[i];
            bool cut = strlen(a) > 64;
            fprintf(stderr, "tracevm run: argument %d ('%.*s%s'): %s", i + 1,
                    cut ? 64 : (int)strlen(a), a, cut ? "..." : "", err.message);
            return 2;
        }
    }
    return 0;
}

/*
 * Control by signals while `tracevm run` runs: SIGUSR1 prints the stack
 * of every live process to stderr (tvm_backtrace); SIGUSR2 switches the
 * --trace patterns off and on again (tvm_trace_pattern from a foreign
 * thread: it waits for thread progress, no scheduler stops).  Both
 * signals are blocked in every thread (the mask is set before the VM
 * starts its threads) and taken by a thread of its own with sigwait, so
 * the work runs as ordinary code, never in a handler.  ctl_lock keeps
 * the VM alive while it runs: cmd_run clears ctl_vm under it before
 * tvm_destroy.  ctl_opts and ctl_on are also only used under it.
 */
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static tvm_vm *ctl_vm;
static const RunOpts *ctl_opts; /* the patterns SIGUSR2 switches */
static bool ctl_on;             /* whether they are on */

/* " NAME" into out where pid has a registered name, the atom as VM code
 * prints it ('idle two': one line whatever its bytes), else "". */
static void name_label(tvm_vm *vm, tvm_env *env, tvm_pid pid, char *out, size_t size)
{
    char name[256];
    tvm_term t;
    out[0] = '\0';
    if (tvm_process_name(vm, pid, name, sizeof name, NULL) != TVM_OK)
        return;
    size_t mark = tvm_handles_mark(env);
    /* The atom exists (it names a process), so nothing is created. */
    if (tvm_make_atom(env, name, &t) == TVM_OK) {
        out[0] = ' ';
        tvm_format_term(env, t, out + 1, size - 1);
    }
    tvm_handles_release(env, mark);
}

static void dump_backtraces(tvm_vm *vm)
{
    size_t n = tvm_processes(vm, NULL, 0);
    tvm_process_info *info = calloc(n + 16, sizeof *info);
    n = tvm_processes(vm, info, n + 16);
    static char text[1 << 16];
    tvm_env *env = tvm_env_new(vm);
    fprintf(stderr, "=BACKTRACES==== %zu processes\n", n);
    for (size_t i = 0; i < n; i++) {
        tvm_error err;
        char label[1100];
        name_label(vm, env, info[i].pid, label, sizeof label);
        tvm_status st = tvm_backtrace(vm, info[i].pid, text, sizeof text, NULL, &err);
        fprintf(stderr, "<0.%llu.0>%s (%s):\n", (unsigned long long)info[i].pid, label,
                info[i].state);
        /* TVM_ERR_LIMIT: the lines that fit, then why the rest is missing. */
        if (st == TVM_OK || st == TVM_ERR_LIMIT)
            fputs(text, stderr);
        if (st != TVM_OK)
            fprintf(stderr, "  (%s)\n", err.message);
    }
    fflush(stderr);
    tvm_env_free(env);
    free(info);
}

/* SIGUSR2: every --trace pattern switched to the other state. */
static void switch_patterns(tvm_vm *vm, const RunOpts *o)
{
    if (!o || !o->npatterns) {
        fprintf(stderr, "tracevm run: SIGUSR2: no --trace patterns to switch\n");
        return;
    }
    ctl_on = !ctl_on;
    for (int i = 0; i < o->npatterns; i++) {
        tvm_error err;
        int n = pattern_switch(vm, o, i, ctl_on, &err);
        if (n < 0)
            fprintf(stderr, "tracevm run: SIGUSR2: --trace %s: %s\n", o->patterns[i],
                    api_why(&err));
        else
            fprintf(stderr, "tracevm run: SIGUSR2: --trace %s %s, matched %d\n",
                    o->patterns[i], ctl_on ? "on" : "off", n);
    }
    fflush(stderr);
}

static void *control_main(void *arg)
{
    sigset_t *set = arg;
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0)
            continue;
        pthread_mutex_lock(&ctl_lock);
        if (ctl_vm && sig == SIGUSR1)
            dump_backtraces(ctl_vm);
        else if (ctl_vm)
            switch_patterns(ctl_vm, ctl_opts);
        pthread_mutex_unlock(&ctl_lock);
    }
    return NULL;
}

/* Blocks SIGUSR1 and SIGUSR2 here (and so in every thread started later)
 * and starts the thread that waits for them. */
static void start_control(void)
{
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, control_main, &set) == 0)
        pthread_detach(t);
}

/* Stops the profile and writes it (--profile-out); 0 or 1. */
static int write_profile(tvm_profile *prof, const RunOpts *o)
{
    tvm_profile_stop(prof);
    tvm_error err;
    if (tvm_profile_write(prof, o->profile_out, &o->pw, &err) != TVM_OK) {
        fprintf(stderr, "tracevm run: --profile-out: %s\n", api_why(&err));
        return 1;
    }
    tvm_profile_stats st;
    tvm_profile_get_stats(prof, &st);
    fprintf(stderr, "tracevm run: profile: %llu samples (%llu lost), %llu stacks, %.2f s -> %s\n",
            (unsigned long long)st.samples, (unsigned long long)st.lost,
            (unsigned long long)st.stacks, (double)st.duration_ns / 1e9, o->profile_out);
    return 0;
}

static int cmd_run(int argc, char **argv)
{
    if (wants_help(argc, argv))
        return usage(usage_run, 0);
    RunOpts o = { .cfg.size = sizeof(tvm_config), .prof.size = sizeof(tvm_profile_options),
                  .pw.size = sizeof(tvm_profile_write_options) };
    o.cfg.control = true;   /* tracevm attach can reach it (docs/control.md) */
    int status = parse_run(argc, argv, &o);
    if (status) {
        run_opts_free(&o);
        return status;
    }
    bool tracing = o.npatterns || o.flags_set;
    start_control();
    tvm_vm *vm = tvm_new(&o.cfg);
    tvm_env *env = tvm_env_new(vm);
    char mod[256], fun[256];
    tvm_term *targs = calloc((size_t)o.nargs + 1, sizeof(tvm_term));
    status = prepare(vm, env, &o, targs);
    if (status == 0)
        status = entry_of(vm, o.entry, mod, fun);
    if (status == 0 && tracing)
        status = trace_setup(vm, &o);
    tvm_profile *prof = NULL;
    if (status == 0 && o.profile) {
        tvm_error perr;
        if (tvm_profile_start(vm, &o.prof, &prof, &perr) != TVM_OK) {
            fprintf(stderr, "tracevm run: --profile: %s\n", api_why(&perr));
            status = 2;
        }
    }
    /* Signals act from here on: the patterns are in their first state. */
    pthread_mutex_lock(&ctl_lock);
    ctl_vm = vm;
    ctl_opts = &o;
    ctl_on = !o.trace_off;
    pthread_mutex_unlock(&ctl_lock);
    if (status == 0) {
        tvm_term result = { 0 };
        tvm_pid pid;
        tvm_status st = tvm_spawn(env, mod, fun, o.nargs, targs, &pid);
        if (st == TVM_OK)
            st = tvm_join(env, pid, &result);
        /* Every event so far reaches the output before the result.  An
         * output that failed says why (the session keeps its failure
         * after the stop: tvm_session_error). */
        tvm_error terr = { .status = TVM_OK };
        if (tracing && tvm_trace_stop(vm) == TVM_ERR_IO)
            tvm_session_error(vm, TVM_SESSION_DEFAULT, &terr);
        if (tracing)
            trace_summary(vm, &o);
        status = report(env, st, result, mod, fun, o.nargs);
        if (terr.status != TVM_OK) {
            fprintf(stderr, "tracevm run: %s\n", api_why(&terr));
            if (status == 0)
                status = 1;
        }
        if (prof && write_profile(prof, &o) != 0 && status == 0)
            status = 1;
    }
    tvm_profile_free(prof);
    pthread_mutex_lock(&ctl_lock);
    ctl_vm = NULL;
    ctl_opts = NULL;
    pthread_mutex_unlock(&ctl_lock);
    free(targs);
    run_opts_free(&o);
    tvm_env_free(env);
    tvm_destroy(vm);
    return status;
}

/* ==== tracevm attach ====
 *
 * A client of a running VM's control
 * endpoint (docs/control.md), built on the public client API alone.
 *
 *   tracevm attach --list
 *   tracevm attach TARGET COMMAND [ARG...]
 *
 * The command and its arguments go to the VM as they are (it checks
 * them and answers with an error naming what is wrong), except `load
 * FILE`, whose file is read here and sent as module text, and trace's
 * `--out PATH`, the file this client writes the stream to (instead of
 * stdout).  The reply's
 * lines are printed as they arrive, so `top` shows each table when it is
 * made.  Exit status: 0 on success, 1 when the VM answered with an error
 * or could not be reached, 2 on a usage error.
 */
static const char *const usage_attach =
    "usage: tracevm attach TARGET COMMAND [options]\n"
    "       tracevm attach --list\n"
    "\n"
    "Connects to a running VM's control endpoint (tracevm run serves one unless\n"
    "--no-control; an embedder with tvm_config.control or TRACEVM_CONTROL=1).\n"
    "TARGET is the VM's process id or its socket's path.  Nothing in the VM\n"
    "pauses for any of these (docs/control.md).\n"
    "\n"
    "  --list                 this user's running VMs: pid, socket, command\n"
    "  info                   version, schedulers, processes, modules, memory, uptime\n"
    "  procs [--sort pid|reds|mq|heap] [--limit N]\n"
    "                         processes: state, reductions, message queue, heap,\n"
    "                         current function\n"
    "  top [--interval MS] [--count N] [--sort ...] [--limit N]\n"
    "                         procs every interval with the reductions made in it\n"
    "  stacks [PID...] [--running] [--group]\n"
    "                         mixed VM + native stacks; --group folds identical ones\n"
    "  load FILE              load a new version of a module (errors: nothing changes)\n"
    "  profile --duration S [--kind cpu|off|alloc] [--hz N] [--alloc-interval KIB]\n"
    "          [--format F] [--merge] [--lines] --out FILE\n"
    "                         profile the VM for S seconds (docs/profiling.md); the VM\n"
    "                         writes FILE (folded, speedscope .json, pprof .pb.gz, .svg)\n"
    "  trace PATTERN... [--match SPEC] [--local] [--flags LIST] [--pids PID,...]\n"
    "        [--max-events N] [--duration S] [--rate N] [--format text|jsonl|chrome]\n"
    "        [--out FILE]\n"
    "                         trace calls of the matching functions (MOD:FUN/ARITY,\n"
    "                         _ for any part) in a session of this client's own, of\n"
    "                         every process or of --pids only, and print each event\n"
    "                         (to FILE with --out) until a limit (default 1000\n"
    "                         events), then the session's last record; interrupting\n"
    "                         it stops the trace\n"
    "  trace_info MOD:FUN/ARITY [ITEM]\n"
    "                         what each live trace session has set on the function\n"
    "  count PATTERN... --duration S [--limit N]\n"
    "                         call counts of the matching functions over S seconds\n"
    "  time PATTERN... --duration S [--limit N]\n"
    "                         call times: calls, exclusive time, per call, share\n";

/* profile's --out FILE made absolute: the VM writes it, from its own
 * working directory.  Returns a copy of argv to free, or NULL. */
static char **absolute_out(int argc, char **argv)
{
    char **v = calloc((size_t)argc + 1, sizeof *v);
    for (int i = 0; i < argc; i++)
        v[i] = argv[i];
    for (int i = 0; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--out") != 0 || argv[i + 1][0] == '/')
            continue;
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd))
            break;
        size_t n = strlen(cwd) + strlen(argv[i + 1]) + 2;
        v[i + 1] = malloc(n);
        snprintf(v[i + 1], n, "%s/%s", cwd, argv[i + 1]);
        v[argc] = v[i + 1];    /* to free */
        break;
    }
    return v;
}

/* trace's --out FILE: taken out of args (*argc shrinks), the file opened
 * in *out.  Returns 0, or the exit status after a message. */
static int trace_out(int *argc, char **args, FILE **out)
{
    for (int i = 1; i < *argc; i++) {
        if (strcmp(args[i], "--out") != 0)
            continue;
        if (i + 1 == *argc) {
            fprintf(stderr, "tracevm attach: trace: --out needs a FILE\n");
            return 2;
        }
        if (*out != stdout) {
            fprintf(stderr, "tracevm attach: trace: --out given twice\n");
            return 2;
        }
        *out = fopen(args[i + 1], "w");
        if (!*out) {
            fprintf(stderr, "tracevm attach: %s: %s\n", args[i + 1], strerror(errno));
            *out = stdout;
            return 1;
        }
        memmove(args + i, args + i + 2, sizeof *args * (size_t)(*argc - i - 2));
        *argc -= 2;
        i--;
    }
    return 0;
}

static void print_line(const char *line, size_t len, void *data)
{
    FILE *out = data;
    fwrite(line, 1, len, out);
    fputc('\n', out);
    fflush(out);
}

static int list(void)
{
    size_t n = tvm_control_list(NULL, 0);
    tvm_control_peer *peers = calloc(n + 8, sizeof *peers);
    n = tvm_control_list(peers, n + 8);
    for (size_t i = 0; i < n; i++)
        printf("%-8ld %s  %s\n", peers[i].pid, peers[i].path, peers[i].command);
    free(peers);
    return 0;
}

/* Reads a whole file; NULL (with a message) on failure.  At most
 * SLURP_MAX bytes and one more are read: a control endpoint takes a far
 * shorter text (tvm_control_load names its bound when it refuses one),
 * and a file without end (/dev/zero) must not be read until memory runs
 * out.  A read that fails (a directory) is an error, not an empty text. */
#define SLURP_MAX ((size_t)64 << 20)
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tracevm attach: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 65536, n = 0, k;
    char *buf = malloc(cap);
    errno = 0;
    while (buf && n <= SLURP_MAX &&
           (k = fread(buf + n, 1, cap - n < SLURP_MAX + 1 - n ? cap - n : SLURP_MAX + 1 - n,
                      f)) > 0) {
        n += k;
        if (n == cap) {
            char *more = realloc(buf, cap *= 2);
            if (!more)
                free(buf);
            buf = more;
        }
    }
    int bad = !buf ? ENOMEM : ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (bad) {
        fprintf(stderr, "tracevm attach: %s: cannot read: %s\n", path, strerror(bad));
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int load(tvm_control_client *c, const char *path)
{
    size_t len;
    char *text = slurp(path, &len);
    if (!text)
        return 1;
    tvm_error err;
    tvm_status st = tvm_control_load(c, path, text, len, print_line, stderr, &err);
    free(text);
    if (st == TVM_OK)
        return 0;
    if (st != TVM_ERR_LOAD)
        fprintf(stderr, "tracevm attach: %s\n", err.message);
    return 1;
}

/* Where a reply's payload goes, and the first write that failed there
 * (errno, 0: none): a full disk or a closed stream lost the rest
 * silently, and the command exited 0. */
typedef struct Payload {
    FILE *f;
    int err;
} Payload;

static void write_line(const char *line, size_t len, void *data)
{
    Payload *p = data;
    bool ok = fwrite(line, 1, len, p->f) == len && fputc('\n', p->f) != EOF &&
              fflush(p->f) == 0;
    if (!ok && !p->err)
        p->err = errno;
}

/* The payload's output failed (err): said, naming it; exit status 1. */
static int payload_failed(const char *cmd, const char *out_path, int err)
{
    bool trace = !strcmp(cmd, "trace");
    fprintf(stderr, "tracevm attach: writing the %s to %s failed: %s; %s from then on are "
                    "missing\n", trace ? "trace" : "reply", out_path ? out_path : "stdout",
            strerror(err), trace ? "events" : "lines");
    return 1;
}

/* Any other command: its reply's payload to stdout (or trace's --out). */
static int call(tvm_control_client *c, int argc, char **argv)
{
    Payload out = { .f = stdout };
    char **args;
    int nargs = argc, status = 0;
    if (!strcmp(argv[0], "trace")) {
        args = calloc((size_t)argc + 1, sizeof *args);
        memcpy(args, argv, sizeof *args * (size_t)argc);
        status = trace_out(&nargs, args, &out.f);
    } else {
        args = absolute_out(argc, argv);
    }
    /* trace_out took --out FILE out of args: its name is what follows
     * "--out" in argv. */
    const char *out_path = NULL;
    for (int i = 0; out.f != stdout && i + 1 < argc; i++)
        if (!strcmp(argv[i], "--out"))
            out_path = argv[i + 1];
    if (!status) {
        tvm_error err;
        tvm_status st = tvm_control_call(c, nargs, (const char *const *)args, write_line, &out,
                                         &err);
        status = st == TVM_OK ? 0 : 1;
        if (st != TVM_OK)
            fprintf(stderr, "tracevm attach: %s\n", err.message);
    }
    if (out.f != stdout && fclose(out.f) != 0 && !out.err)
        out.err = errno;
    if (out.err && !status)
        status = payload_failed(argv[0], out_path, out.err);
    free(args[argc]);
    free(args);
    return status;
}

static int cmd_attach(int argc, char **argv)
{
    if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        fputs(usage_attach, stdout);
        return 0;
    }
    if (argc == 1 && !strcmp(argv[0], "--list"))
        return list();
    if (argc < 2) {
        fputs(usage_attach, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "load") && argc != 3) {
        fprintf(stderr, "tracevm attach: load takes one FILE\n");
        return 2;
    }
    tvm_control_client *c;
    tvm_error err;
    if (tvm_control_connect(argv[0], &c, &err) != TVM_OK) {
        fprintf(stderr, "tracevm attach: %s\n", err.message);
        return 1;
    }
    int status;
    if (!strcmp(argv[1], "load")) {
        status = load(c, argv[2]);
    } else {
        status = call(c, argc - 1, argv + 1);
    }
    tvm_control_close(c);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(usage_main, 2);
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0)
        return usage(usage_main, 0);
    if (strcmp(cmd, "--version") == 0) {
        printf("tracevm %s\n", tvm_version(NULL, NULL, NULL));
        return 0;
    }
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc - 2, argv + 2, false);
    if (strcmp(cmd, "dis") == 0)
        return cmd_check(argc - 2, argv + 2, true);
    if (strcmp(cmd, "attach") == 0)
        return cmd_attach(argc - 2, argv + 2);
    fprintf(stderr, "tracevm: unknown command '%s'\n\n", cmd);
    return usage(usage_main, 2);
}
