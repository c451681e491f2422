/*
 * tools/attach.c - tracevm attach: a client of a running VM's control
 * endpoint (docs/control.md), built on the public client API alone.
 *
 *   tracevm attach --list
 *   tracevm attach TARGET COMMAND [ARG...]
 *
 * The command and its arguments go to the VM as they are (it checks
 * them and answers with an error naming what is wrong), except `load
 * FILE`, whose file is read here and sent as module text.  The reply's
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
    "  trace PATTERN... [--match SPEC] [--local] [--flags LIST] [--max-events N]\n"
    "        [--duration S] [--rate N]\n"
    "                         trace calls of the matching functions (MOD:FUN/ARITY,\n"
    "                         _ for any part) in a session of this client's own, and\n"
    "                         print each event until a limit (default 1000 events),\n"
    "                         then the session's last record; interrupting it stops\n"
    "                         the trace\n"
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
        char **args = absolute_out(argc - 1, argv + 1);
        tvm_status st = tvm_control_call(c, argc - 1, (const char *const *)args, print_line,
                                         stdout, &err);
        free(args[argc - 1]);
        free(args);
        status = st == TVM_OK ? 0 : 1;
        if (st != TVM_OK)
            fprintf(stderr, "tracevm attach: %s\n", err.message);
    }
    tvm_control_close(c);
    return status;
}
