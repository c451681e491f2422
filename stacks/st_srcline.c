/*
 * stacks/st_srcline.c - file:line of a native code address, from the DWARF
 * line tables through libdw's dwfl.
 *
 * On request only (a crash report, tracevm printing a backtrace with
 * lines): the first call reports every object of the process to dwfl
 * (dwfl_linux_proc_report reads /proc/self/maps; the ELF files and their
 * debug info, in the file or under /usr/lib/debug by build-id, are opened
 * lazily per module), which costs milliseconds; later calls are a module
 * search and a line-table search, microseconds.  dwfl is not thread-safe,
 * so one lock serialises every call; the module list is re-read when an
 * address falls outside every reported module (a dlopen since), at most
 * once per call.
 *
 * The file names dwfl returns live as long as the Dwfl; they are interned
 * (st_intern) so callers may keep them across st_sym_reset, which ends
 * the Dwfl.
 */
#include <elfutils/libdwfl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "stacks/st_sym.h"
#include "stacks/st_sym_internal.h"

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
};

static pthread_mutex_t dwfl_lock = PTHREAD_MUTEX_INITIALIZER;
static Dwfl *dwfl;     /* under dwfl_lock; NULL until the first call or after a reset */

/* (Re-)reports the process's modules to dwfl; false when it cannot. */
static bool report(void)
{
    if (!dwfl && !(dwfl = dwfl_begin(&callbacks)))
        return false;
    dwfl_report_begin(dwfl);
    int err = dwfl_linux_proc_report(dwfl, getpid());
    return dwfl_report_end(dwfl, NULL, NULL) == 0 && err == 0;
}

bool st_sym_srcline(uintptr_t addr, const char **file, int *line)
{
    bool ok = false;
    pthread_mutex_lock(&dwfl_lock);
    Dwfl_Module *mod = NULL;
    if (dwfl || report())
        mod = dwfl_addrmodule(dwfl, (Dwarf_Addr)addr);
    if (!mod && report())
        mod = dwfl_addrmodule(dwfl, (Dwarf_Addr)addr);
    Dwfl_Line *l = mod ? dwfl_module_getsrc(mod, (Dwarf_Addr)addr) : NULL;
    int lineno = 0;
    const char *f = l ? dwfl_lineinfo(l, NULL, &lineno, NULL, NULL, NULL) : NULL;
    if (f && lineno > 0) {
        *file = st_intern(f, strlen(f));
        *line = lineno;
        ok = true;
    }
    pthread_mutex_unlock(&dwfl_lock);
    return ok;
}

void st_srcline_reset(void)
{
    pthread_mutex_lock(&dwfl_lock);
    if (dwfl)
        dwfl_end(dwfl);
    dwfl = NULL;
    pthread_mutex_unlock(&dwfl_lock);
}
