/*
 * tests/unit/qemu_exec.c - lets Criterion 2.4 run its workers under
 * qemu-user.  Linked into the unit programs of a cross build only
 * (ARCH=aarch64: tests/SConscript).
 *
 * Criterion runs every test case in a worker that BoxFort starts by
 * fork() and then an execve of the program's own path (read from
 * /proc/self/exe) with argv { "boxfort-worker" } (BoxFort's bxfi_exec).
 * Under qemu-user the program is emulated, and without a binfmt_misc
 * handler (none in CI's containers) the kernel cannot execute an aarch64
 * file: the execve fails and the runner aborts with "Could not spawn test
 * instance: Protocol error".  qemu-user passes an emulated program's
 * execve system call to the host kernel, which can run a host program: so
 * this execve, which the executable's export (-rdynamic) makes the one
 * libcriterion calls, runs an execve of the program itself as
 * `$TRACEVM_RUN -0 ARGV0 PATH ARGS...` (qemu's -0 keeps the worker's
 * argv[0]) when the runner names the emulator, by its absolute path, in
 * TRACEVM_RUN (tests/runner.py).  Any other execve is passed on as it is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { MAX_ARGS = 64 };

static int real_execve(const char *path, char *const argv[], char *const envp[])
{
    return (int)syscall(SYS_execve, path, argv, envp);
}

/* Whether path names this program (BoxFort's worker). */
static int is_self(const char *path)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 0;
    self[n] = 0;
    return strcmp(self, path) == 0;
}

int execve(const char *path, char *const argv[], char *const envp[])
{
    const char *emu = getenv("TRACEVM_RUN");
    if (!emu || emu[0] != '/' || !argv[0] || !is_self(path))
        return real_execve(path, argv, envp);
    char *nargv[MAX_ARGS + 4];
    int n = 0;
    nargv[n++] = (char *)emu;
    nargv[n++] = (char *)"-0";
    nargv[n++] = argv[0];
    nargv[n++] = (char *)path;
    for (int i = 1; argv[i]; i++) {
        if (n == MAX_ARGS) {
            errno = E2BIG;
            return -1;
        }
        nargv[n++] = argv[i];
    }
    nargv[n] = NULL;
    return real_execve(emu, nargv, envp);
}
