/*
 * vm/procinfo.h - erlang:processes/0 and erlang:process_info/2: what a
 * process can learn of the others (vm/procinfo.c says what each item
 * reads, and under which lock).
 */
#ifndef VM_PROCINFO_H
#define VM_PROCINFO_H

#include "vm/native.h"

VmNativeTable vm_procinfo_natives(void);

#endif /* VM_PROCINFO_H */
