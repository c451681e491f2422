/*
 * vm/procinfo.h - erlang:processes/0 and erlang:process_info/1,2: what a
 * process can learn of the others (vm/procinfo.c says what each item
 * reads, and under which lock).
 */
#ifndef VM_PROCINFO_H
#define VM_PROCINFO_H

#include "vm/native.h"
#include "vm/process.h"

VmNativeTable vm_procinfo_natives(void);

/* At a reduction check of p (its own thread): answers the requests for
 * its frames, messages or monitors that askers left while it ran
 * (Process.info_reqs). */
void vm_procinfo_serve(Process *p);

#endif /* VM_PROCINFO_H */
