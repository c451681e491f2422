/*
 * vm/fiber_aarch64.S - the fiber context switch for aarch64 (AAPCS64).
 *
 * void vm_fiber_switch(void **save_sp, void *next_sp)
 *
 * Saves the callee-saved registers of the running context on its own
 * stack, stores its stack pointer in *save_sp, loads next_sp and restores
 * the registers the other context saved the same way, then returns into
 * it (to the lr it saved).  Caller-saved registers need no saving: this
 * is an ordinary call.  AAPCS64's callee-saved set is x19-x28, x29 (fp),
 * x30 (lr, the return address), sp, and the low 64 bits of v8-v15
 * (d8-d15).  FPCR is not saved: the VM never changes it.
 *
 * Saved layout, from the saved stack pointer `sp` upwards (8-byte words;
 * 160 bytes, so sp stays 16-byte aligned as AAPCS64 requires):
 *
 *   sp[0] x29   sp[1] x30 (the resume address)  -- an AAPCS64 frame record
 *   sp[2] x19   sp[3] x20  ...  sp[11] x28
 *   sp[12] d8   ...  sp[19] d15
 *   caller's sp at the call = sp + 160
 *
 * sp[0..1] being a frame record {fp, lr} means a frame-pointer walk
 * starts at a switched-out fiber as at any frame: pc = sp[1], fp = sp[0]
 * (vm/fiber.h: FIBER_SAVED_PC, FIBER_SAVED_FP).
 *
 * CFI: every instruction that moves sp or saves a register is described,
 * and because both stacks have the same layout the description stays
 * true after sp is replaced, so gdb, libunwind and our frame-pointer
 * walker unwind through a fiber that is switched out (or interrupted in
 * the middle of a switch).  The CFA is the caller's sp (sp + 160 once the
 * registers are saved).
 *
 * vm_fiber_entry is the bottom frame of every new fiber.  vm_fiber_init()
 * builds a first "saved context" whose resume address is vm_fiber_entry,
 * with the body in x19 and its argument in x20.  Its CFI marks the return
 * address (x30) undefined, and x29 is zero, so every unwinder stops there.
 */
    /* Saves the callee-saved registers, swaps stacks, restores them from
     * the other stack, x30 last (the two entry points below return in
     * their own way).  With CFI for every step. */
    .macro SAVE_SWAP_RESTORE
    stp     x29, x30, [sp, #-160]!
    .cfi_def_cfa_offset 160
    .cfi_offset x29, -160
    .cfi_offset x30, -152
    stp     x19, x20, [sp, #16]
    .cfi_offset x19, -144
    .cfi_offset x20, -136
    stp     x21, x22, [sp, #32]
    .cfi_offset x21, -128
    .cfi_offset x22, -120
    stp     x23, x24, [sp, #48]
    .cfi_offset x23, -112
    .cfi_offset x24, -104
    stp     x25, x26, [sp, #64]
    .cfi_offset x25, -96
    .cfi_offset x26, -88
    stp     x27, x28, [sp, #80]
    .cfi_offset x27, -80
    .cfi_offset x28, -72
    stp     d8, d9, [sp, #96]
    .cfi_offset d8, -64
    .cfi_offset d9, -56
    stp     d10, d11, [sp, #112]
    .cfi_offset d10, -48
    .cfi_offset d11, -40
    stp     d12, d13, [sp, #128]
    .cfi_offset d12, -32
    .cfi_offset d13, -24
    stp     d14, d15, [sp, #144]
    .cfi_offset d14, -16
    .cfi_offset d15, -8
    /* [IL4] release: the saved words above before the saved sp (a
     * capture on another thread reads them once it sees the sp: vm/
     * interlock.h).  x86_64's plain store is a release under TSO; here
     * stlr, or the sp could become visible before the stp's. */
    mov     x9, sp
    stlr    x9, [x0]
    mov     sp, x1
    /* Now on the other stack, whose top has the same layout. */
    ldp     d14, d15, [sp, #144]
    .cfi_restore d14
    .cfi_restore d15
    ldp     d12, d13, [sp, #128]
    .cfi_restore d12
    .cfi_restore d13
    ldp     d10, d11, [sp, #112]
    .cfi_restore d10
    .cfi_restore d11
    ldp     d8, d9, [sp, #96]
    .cfi_restore d8
    .cfi_restore d9
    ldp     x27, x28, [sp, #80]
    .cfi_restore x27
    .cfi_restore x28
    ldp     x25, x26, [sp, #64]
    .cfi_restore x25
    .cfi_restore x26
    ldp     x23, x24, [sp, #48]
    .cfi_restore x23
    .cfi_restore x24
    ldp     x21, x22, [sp, #32]
    .cfi_restore x21
    .cfi_restore x22
    ldp     x19, x20, [sp, #16]
    .cfi_restore x19
    .cfi_restore x20
    ldp     x29, x30, [sp], #160
    .cfi_def_cfa_offset 0
    .cfi_restore x29
    .cfi_restore x30
    .endm

    .text
    .globl  vm_fiber_switch
    .type   vm_fiber_switch, %function
    .p2align 4
vm_fiber_switch:
    .cfi_startproc
    SAVE_SWAP_RESTORE
    /* Return by an indirect branch, not `ret`: between a process and its
     * scheduler the two sides run different call chains, so the return
     * stack predictor (pushed by bl, popped by ret, as x86's return-stack
     * buffer) names the wrong context on every switch; `br` is predicted
     * from its own history, which learns the alternation.  The reasoning
     * of the x86_64 switch, where it was measured (36 -> 25 ns); not
     * measured on aarch64 hardware. */
    br      x30
    .cfi_endproc
    .size   vm_fiber_switch, . - vm_fiber_switch

    /* void vm_fiber_switch_peer(void **save_sp, void *next_sp): the same
     * switch, for two contexts suspended at the same call site (a process
     * handing the scheduler straight to another, both in
     * vm_sched_yield_to_next).  There the return stack is right, as every
     * return address above the switch is the same in both, and a plain
     * `ret` keeps it balanced. */
    .globl  vm_fiber_switch_peer
    .type   vm_fiber_switch_peer, %function
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
    .type   vm_fiber_entry, %function
    .p2align 4
vm_fiber_entry:
    .cfi_startproc
    .cfi_undefined x30
    mov     x29, #0
    mov     x0, x20
    blr     x19
1:
    /* A fiber body never returns: it switches away for good. */
    brk     #0x3e8
    .cfi_endproc
    .size   vm_fiber_entry, . - vm_fiber_entry

    /* The return address of the body's frame (1 above): a frame-pointer
     * walk that reaches it, with a saved x29 of 0, has reached the fiber's
     * bottom.  A word of data, not a code label, so that no symbolizer
     * names that address after it. */
    .section .data.rel.ro, "aw"
    .p2align 3
    .globl  vm_fiber_entry_ret
    .type   vm_fiber_entry_ret, %object
vm_fiber_entry_ret:
    .quad   1b
    .size   vm_fiber_entry_ret, 8

    .section .note.GNU-stack,"",%progbits
