/*
 * vm/opcode.c - the opcode information table, generated from opcodes.def.
 */
#include "vm/opcode.h"

#include <string.h>

#define WORDS(fmt) ((fmt)[3] != '-' ? 2 : 1)

const OpInfo vm_opinfo[OP__COUNT] = {
#define X(nm, mn, fm, ru, fl) [OP_##nm] = { mn, fm, ru, fl, WORDS(fm) },
#include "vm/opcodes.def"
#undef X
};

int vm_opcode_lookup(const char *name, unsigned len)
{
    for (int op = 0; op < OP__COUNT; op++) {
        const char *n = vm_opinfo[op].name;
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return op;
    }
    return -1;
}
