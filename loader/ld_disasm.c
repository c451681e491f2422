/*
 * loader/ld_disasm.c - the disassembler, driven by the opcode table.
 *
 * One line per instruction: word offset, mnemonic, operands (registers as
 * rN, branch targets as @OFFSET, literals in Erlang syntax) and the source
 * line.  It is for reading, not re-assembly: `enter` is internal and
 * binaries print as <<"...">>.
 */
#include "loader/loader.h"

#include "vm/atom.h"
#include "vm/opcode.h"
#include "vm/print.h"

static void operand(StrBuf *out, const Instr *w, int fld, char kind, uint32_t off)
{
    Instr i = w[0];
    switch (kind) {
    case 'R':
        sb_printf(out, "r%u", fld == 0 ? INSTR_A(i) : fld == 1 ? INSTR_B(i) : INSTR_C(i));
        return;
    case 'I':
        sb_printf(out, "%d", fld == 1 ? INSTR_BS(i) : INSTR_CS(i));
        return;
    case 'N':
        sb_printf(out, "%u", fld == 0 ? INSTR_A(i) : fld == 1 ? INSTR_B(i) : INSTR_C(i));
        return;
    case 'L':
        sb_printf(out, "@%d", (int)off + INSTR_CS(i));
        return;
    case 'K':
        vm_print_term(out, (Term)w[1]);
        return;
    case 'F': {
        const FuncInfo *fi = (const FuncInfo *)w[1];
        vm_print_atom(out, fi->name);
        sb_printf(out, "/%u", fi->arity);
        return;
    }
    case 'E': {
        const Export *e = (const Export *)w[1];
        vm_print_mfa(out, e->mod, e->name, e->arity);
        return;
    }
    default:
        return;
    }
}

static void function(const FuncInfo *fi, StrBuf *out)
{
    sb_puts(out, "function ");
    vm_print_atom(out, fi->name);
    sb_printf(out, "/%u regs %u%s\n", fi->arity, fi->nregs, fi->export ? "  ; exported" : "");
    for (uint32_t off = 0; off < fi->ncode;) {
        const Instr *w = &fi->code[off];
        unsigned op = INSTR_OP(w[0]);
        const OpInfo *oi = &vm_opinfo[op];
        StrBuf line;
        sb_init(&line);
        sb_printf(&line, "  %4u  %-10s", off, oi->name);
        int pos = 0;
        for (int fld = 0; fld < 4; fld++) {
            if (oi->fmt[fld] == '-')
                continue;
            sb_puts(&line, pos++ ? ", " : " ");
            operand(&line, w, fld, oi->fmt[fld], off);
        }
        uint32_t src = vm_func_line(fi, w);
        if (src) {
            while (line.len < 44)
                sb_putc(&line, ' ');
            sb_printf(&line, " ; line %u", src);
        }
        sb_puts(out, line.s);
        sb_putc(out, '\n');
        sb_free(&line);
        off += oi->words;
    }
    sb_puts(out, "end\n");
}

void ld_disassemble(const Module *m, StrBuf *out)
{
    sb_puts(out, "module ");
    vm_print_atom(out, m->name);
    sb_putc(out, '\n');
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        sb_putc(out, '\n');
        function(m->funcs[i], out);
    }
}
