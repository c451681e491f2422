/*
 * tools/tracevm.c - the tracevm command.
 *
 *   tracevm run FILE... [-e MOD:FUN] [--] [ARG...]
 *   tracevm check FILE...
 *   tracevm dis FILE...
 *
 * Exit status: 0 on success, 1 when a program raised or a file was
 * rejected, 2 on a usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/tracevm.h"
#include "loader/loader.h"
#include "vm/atom.h"
#include "vm/module.h"

static const char *const usage_main =
    "usage: tracevm COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  run FILE... [-S N] [-q] [-e MOD:FUN] [--] [ARG...]\n"
    "                                           load modules, run a function as a process\n"
    "  check FILE...                            verify assembly files\n"
    "  dis FILE...                              disassemble assembly files\n"
    "\n"
    "`tracevm COMMAND --help` describes one command.\n";

static const char *const usage_run =
    "usage: tracevm run FILE... [-S N] [-q] [-e MOD:FUN] [--] [ARG...]\n"
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

/* Reads a whole file; NULL (with a message) on failure. */
static char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "%s: error: cannot open: ", path);
        perror(NULL);
        return NULL;
    }
    StrBuf sb;
    sb_init(&sb);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0)
        sb_put(&sb, buf, n);
    fclose(fp);
    *len = sb.len;
    return sb.s;
}

/* check / dis: build each file without installing it. */
static int cmd_check(int argc, char **argv, bool dis)
{
    if (wants_help(argc, argv))
        return usage(dis ? usage_dis : usage_check, 0);
    if (argc == 0)
        return usage(dis ? usage_dis : usage_check, 2);
    tvm_vm *vm = tvm_new(NULL);
    int status = 0;
    for (int i = 0; i < argc; i++) {
        size_t len;
        char *text = slurp(argv[i], &len);
        if (!text) {
            status = 1;
            continue;
        }
        StrBuf diag;
        sb_init(&diag);
        Module *m = ld_build(vm, argv[i], text, len, &diag);
        free(text);
        if (!m) {
            fputs(diag.s, stderr);
            status = 1;
        } else if (dis) {
            StrBuf out;
            sb_init(&out);
            ld_disassemble(m, &out);
            fputs(out.s, stdout);
            sb_free(&out);
        } else {
            printf("%s: ok\n", argv[i]);
        }
        ld_module_free(m);
        sb_free(&diag);
    }
    tvm_destroy(vm);
    return status;
}

static int cmd_run(int argc, char **argv)
{
    if (wants_help(argc, argv))
        return usage(usage_run, 0);
    const char **files = calloc((size_t)argc + 1, sizeof(char *));
    const char **args = calloc((size_t)argc + 1, sizeof(char *));
    int nfiles = 0, nargs = 0;
    const char *entry = NULL;
    bool rest = false;
    tvm_config cfg = { 0 };
    for (int i = 0; i < argc; i++) {
        if (!rest && strcmp(argv[i], "--") == 0) {
            rest = true;
        } else if (!rest && strcmp(argv[i], "-e") == 0) {
            if (i + 1 == argc) {
                fprintf(stderr, "tracevm run: -e needs MOD:FUN\n");
                free(files);
                free(args);
                return 2;
            }
            entry = argv[++i];
        } else if (!rest && strcmp(argv[i], "-S") == 0) {
            char *end = NULL;
            long n = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 == argc || *end || n < 1 || n > 1024) {
                fprintf(stderr, "tracevm run: -S needs a number of schedulers 1..1024\n");
                free(files);
                free(args);
                return 2;
            }
            cfg.schedulers = (int)n;
            i++;
        } else if (!rest && strcmp(argv[i], "-q") == 0) {
            cfg.quiet_crashes = true;
        } else if (!rest && ends_with(argv[i], ".tasm")) {
            files[nfiles++] = argv[i];
        } else if (!rest && argv[i][0] == '-' && argv[i][1] && !(argv[i][1] >= '0' && argv[i][1] <= '9')) {
            fprintf(stderr, "tracevm run: unknown option %s\n", argv[i]);
            free(files);
            free(args);
            return 2;
        } else {
            args[nargs++] = argv[i];
        }
    }
    if (nfiles == 0) {
        free(files);
        free(args);
        return usage(usage_run, 2);
    }

    tvm_vm *vm = tvm_new(&cfg);
    tvm_env *env = tvm_env_new(vm);
    int status = 0;
    char mod[256] = "", fun[256] = "main";
    tvm_error err;
    for (int i = 0; i < nfiles && status == 0; i++) {
        if (tvm_load_file(vm, files[i], &err) != TVM_OK) {
            fputs(err.message, stderr);
            status = 1;
        }
    }
    if (status == 0 && entry) {
        const char *colon = strchr(entry, ':');
        if (!colon || colon == entry || !colon[1] || (size_t)(colon - entry) >= sizeof mod ||
            strlen(colon + 1) >= sizeof fun) {
            fprintf(stderr, "tracevm run: -e expects MOD:FUN, got '%s'\n", entry);
            status = 2;
        } else {
            memcpy(mod, entry, (size_t)(colon - entry));
            mod[colon - entry] = '\0';
            strcpy(fun, colon + 1);
        }
    } else if (status == 0) {
        /* The first file's module: take it from the loaded module table. */
        Module *m = vm->nmodules ? vm->modules[0] : NULL;
        if (m) {
            size_t n;
            const char *s = vm_atom_name(m->name, &n);
            snprintf(mod, sizeof mod, "%.*s", (int)n, s);
        }
    }
    tvm_term *targs = calloc((size_t)nargs + 1, sizeof(tvm_term));
    for (int i = 0; i < nargs && status == 0; i++) {
        if (tvm_parse_term(env, args[i], &targs[i], &err) != TVM_OK) {
            fprintf(stderr, "tracevm run: argument %d ('%s'): %s", i + 1, args[i], err.message);
            status = 2;
        }
    }
    if (status == 0) {
        tvm_term result;
        tvm_pid pid;
        tvm_status st = tvm_spawn(env, mod, fun, nargs, targs, &pid);
        if (st == TVM_OK)
            st = tvm_join(env, pid, &result);
        if (st == TVM_OK) {
            size_t need = tvm_format_term(env, result, NULL, 0);
            char *buf = malloc(need + 1);
            tvm_format_term(env, result, buf, need + 1);
            printf("%s\n", buf);
            free(buf);
        } else if (st == TVM_EXCEPTION) {
            size_t need = tvm_format_exception(env, NULL, 0);
            char *buf = malloc(need + 1);
            tvm_format_exception(env, buf, need + 1);
            fprintf(stderr, "tracevm: uncaught %s", buf);
            free(buf);
            status = 1;
        } else {
            fprintf(stderr, "tracevm run: cannot call %s:%s/%d: %s\n", mod, fun, nargs,
                    tvm_status_name(st));
            status = 1;
        }
    }
    free(targs);
    free(files);
    free(args);
    tvm_env_free(env);
    tvm_destroy(vm);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(usage_main, 2);
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0)
        return usage(usage_main, 0);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc - 2, argv + 2, false);
    if (strcmp(cmd, "dis") == 0)
        return cmd_check(argc - 2, argv + 2, true);
    fprintf(stderr, "tracevm: unknown command '%s'\n\n", cmd);
    return usage(usage_main, 2);
}
