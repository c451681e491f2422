/*
 * tools/attach.c - tracevm attach: a client of a running VM's control
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
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/tracevm.h"
#include "tools/cli.h"

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

/* Reads a whole file; NULL (with a message) on failure. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tracevm attach: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
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

/* Any other command: its reply's payload to stdout (or trace's --out). */
static int call(tvm_control_client *c, int argc, char **argv)
{
    FILE *out = stdout;
    char **args;
    int nargs = argc, status = 0;
    if (!strcmp(argv[0], "trace")) {
        args = calloc((size_t)argc + 1, sizeof *args);
        memcpy(args, argv, sizeof *args * (size_t)argc);
        status = trace_out(&nargs, args, &out);
    } else {
        args = absolute_out(argc, argv);
    }
    if (!status) {
        tvm_error err;
        tvm_status st = tvm_control_call(c, nargs, (const char *const *)args, print_line, out,
                                         &err);
        status = st == TVM_OK ? 0 : 1;
        if (st != TVM_OK)
            fprintf(stderr, "tracevm attach: %s\n", err.message);
    }
    if (out != stdout && fclose(out) != 0 && !status) {
        fprintf(stderr, "tracevm attach: --out: %s\n", strerror(errno));
        status = 1;
    }
    free(args[argc]);
    free(args);
    return status;
}

int cmd_attach(int argc, char **argv)
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
