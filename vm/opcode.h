/*
 * vm/opcode.h - instruction encoding, generated from vm/opcodes.def.
 *
 * An instruction is one 64-bit word, optionally followed by one extension
 * word (for the F, E and K operand kinds: a FuncInfo *, an Export * or a
 * literal Term):
 *
 *   63                    40 39            24 23             8 7        0
 *  +------------------------+----------------+----------------+----------+
 *  |      C (24 bits)       |  B (16 bits)   |  A (16 bits)   | op (8)   |
 *  +------------------------+----------------+----------------+----------+
 *  [ X: extension word, only when the format's fourth letter is F or E ]
 *
 * C is signed when it holds an I or an L operand; B is signed when it holds
 * an I.  Instruction 0 of every function is ENTER, one aligned word: the
 * breakpoint engine replaces it with a single store.
 */
#ifndef VM_OPCODE_H
#define VM_OPCODE_H

#include <stdint.h>

typedef uint64_t Instr;

enum {
#define X(name, mn, fmt, rule, flags) OP_##name,
#include "vm/opcodes.def"
#undef X
    OP__COUNT
};
_Static_assert(OP__COUNT <= 256, "opcode must fit 8 bits");

enum {
    R_NONE, R_ENTER, R_SPAN_CB, R_TRY, R_ARGS_B, R_ARGS_A, R_CALLF
};

enum {
    OPF_TERM = 1u << 0,
    OPF_BRANCH = 1u << 1,
    OPF_CALL = 1u << 2,
    OPF_INTERNAL = 1u << 3,
};

typedef struct OpInfo {
    const char *name;
    char fmt[5];      /* A, B, C, X operand kinds, '-' unused */
    uint8_t rule;     /* R_* */
    uint8_t flags;    /* OPF_* */
    uint8_t words;    /* 1, or 2 with an extension word */
} OpInfo;

extern const OpInfo vm_opinfo[OP__COUNT];

#define INSTR_OP(i) ((unsigned)((i) & 0xff))
#define INSTR_A(i) ((unsigned)(((i) >> 8) & 0xffff))
#define INSTR_B(i) ((unsigned)(((i) >> 24) & 0xffff))
#define INSTR_BS(i) ((int)(int16_t)(((i) >> 24) & 0xffff))
#define INSTR_C(i) ((unsigned)((i) >> 40))
#define INSTR_CS(i) ((int)((int64_t)(i) >> 40))

#define FIELD_A_MAX 0xffffu
#define FIELD_B_MAX 0xffffu
#define FIELD_C_MAX 0xffffffu
#define FIELD_BS_MIN (-32768)
#define FIELD_BS_MAX 32767
#define FIELD_CS_MIN (-(1 << 23))
#define FIELD_CS_MAX ((1 << 23) - 1)

static inline Instr instr_make(unsigned op, unsigned a, unsigned b, unsigned c)
{
    return (Instr)op | ((Instr)(a & 0xffff) << 8) | ((Instr)(b & 0xffff) << 24) |
           ((Instr)(c & 0xffffff) << 40);
}

/* Finds an opcode by mnemonic; -1 if none. */
int vm_opcode_lookup(const char *name, unsigned len);

#endif /* VM_OPCODE_H */
