/*
 * vm/config.h - every compile-time knob of tracevm, in one place.
 *
 * Each knob is `#ifndef VM_X / #define VM_X default` with a paragraph on the
 * trade-off.  Knobs are tested with `#if`, never `#ifdef`, so -Wundef
 * catches a misspelt one.
 */
#ifndef VM_CONFIG_H
#define VM_CONFIG_H

/*
 * VM_COMPUTED_GOTO: dispatch the interpreter through a table of label
 * addresses (GNU C "labels as values") instead of a switch.  It saves the
 * bounds check and gives every handler its own indirect jump, which the
 * branch predictor learns per opcode; measured in docs/benchmarks.md.  The
 * switch build is the portable fallback and is what the debug variant
 * uses, so both paths stay tested.
 */
#ifndef VM_COMPUTED_GOTO
#if defined(__GNUC__) && !defined(VM_DEBUG)
#define VM_COMPUTED_GOTO 1
#else
#define VM_COMPUTED_GOTO 0
#endif
#endif

/*
 * VM_HEAP_MIN_WORDS: the smallest process heap.  Small keeps an idle
 * process cheap (processes are meant to number in the 100,000s); the
 * collector grows a heap that stays mostly live after a collection.
 */
#ifndef VM_HEAP_MIN_WORDS
#define VM_HEAP_MIN_WORDS 128
#endif

/*
 * VM_STACK_MIN_WORDS / VM_FRAMES_MIN: the initial register stack and frame
 * stack of a process.  Both grow by doubling up to the process's limit.
 */
#ifndef VM_STACK_MIN_WORDS
#define VM_STACK_MIN_WORDS 64
#endif
#ifndef VM_FRAMES_MIN
#define VM_FRAMES_MIN 16
#endif

/*
 * VM_STACK_LIMIT_WORDS: default limit of a process's register stack.  A
 * process that needs more raises `system_limit` (in that process only).
 * The frame stack is limited to a quarter of this many frames.
 */
#ifndef VM_STACK_LIMIT_WORDS
#define VM_STACK_LIMIT_WORDS (4 * 1024 * 1024)
#endif

/*
 * VM_FIBER_STACK_SIZE: native stack of a process's fiber.  Memory is
 * reserved, not committed: an idle process touches a page or two.  Natives
 * that recurse deeply or keep large buffers on the stack need more.
 */
#ifndef VM_FIBER_STACK_SIZE
#define VM_FIBER_STACK_SIZE (256 * 1024)
#endif

/*
 * VM_FIBER_STACK_MAX: the largest tvm_config.fiber_stack_bytes tvm_new
 * takes.  The size is rounded up to pages, a guard region is added and a
 * slab maps VM_FIBER_SLAB_STACKS of them (vm/fiber.c): near SIZE_MAX the
 * rounding wrapped to 0 and the first spawn crashed, and past
 * SIZE_MAX / 64 a slab's length would wrap.  Up to 2^50 none of it wraps;
 * a stack that large is past what the OS maps, so a spawn is
 * TVM_ERR_LIMIT (no native stack can be mapped), not a crash.
 */
#ifndef VM_FIBER_STACK_MAX
#define VM_FIBER_STACK_MAX ((size_t)1 << 50)
#endif

/*
 * VM_FIBER_GUARD_BYTES: the guard region below every fiber stack, slab
 * stacks included (vm/fiber.c).  A native stack overflow faults there and
 * kills only the process that overflowed (vm/overflow.c).  A frame bigger
 * than the guard could step over it into whatever lies below (a slab
 * neighbour's stack): 64 KiB covers a native's large local buffers, and
 * the VM itself is built with -fstack-clash-protection, which probes every
 * page of a big frame.  It costs address space only (no memory, and with
 * Linux 6.13's guard regions no kernel mapping either).
 */
#ifndef VM_FIBER_GUARD_BYTES
#define VM_FIBER_GUARD_BYTES (64 * 1024)
#endif

/*
 * VM_FIBER_SLAB_STACKS: stacks per slab when tvm_config.fiber_slabs is
 * set (vm/fiber.c): one mapping per this many spawns.
 */
#ifndef VM_FIBER_SLAB_STACKS
#define VM_FIBER_SLAB_STACKS 64
#endif

/* VM_MAX_REGS: registers one function may declare (fits the A field). */
#ifndef VM_MAX_REGS
#define VM_MAX_REGS 1024
#endif

/*
 * VM_MAX_NESTING: nested activations (a native calling back into VM code,
 * which calls a native that calls back, ...) one process may stack.  Each
 * costs a few KiB of C stack; beyond the limit the call raises
 * `system_limit` instead of overflowing the native stack.
 */
#ifndef VM_MAX_NESTING
#define VM_MAX_NESTING 256
#endif

/*
 * VM_NATIVE_STACK_RESERVE: native stack a nested activation on a fiber
 * leaves for the natives it calls.  A new activation that would start with
 * less than this left raises `system_limit`.
 */
#ifndef VM_NATIVE_STACK_RESERVE
#define VM_NATIVE_STACK_RESERVE (48 * 1024)
#endif

/*
 * VM_MAX_PROCESSES: processes alive at once (tvm_config.max_processes'
 * default).  BEAM's default is 262,144; ours is larger because slab
 * stacks make 300,000 idle processes cheap.  A spawn beyond it raises
 * system_limit in the spawner, as BEAM's does.
 */
#ifndef VM_MAX_PROCESSES
#define VM_MAX_PROCESSES ((size_t)1 << 20)
#endif

/*
 * VM_MAX_EXPORTS: export entries that VM code and the C API may have
 * made by name at run time (tvm_config.max_exports' default): 524,288,
 * BEAM's EXPORT_LIMIT (erts/emulator/beam/export.c).  erlang:make_fun/3,
 * apply/3 and spawn/3 of a function nobody defines each make an entry
 * (about 290 bytes with its stub), and entries are never freed, so
 * without a bound a loop over names and arities grows the OS process
 * until it is killed.  Entries for code loaded from C and for natives
 * count towards it but are never refused (the embedder's code bounds
 * them); code:load_binary/3 from VM code is refused past it, since a
 * load, delete and purge of ever new names would grow it as make_fun/3
 * does.  A new
 * entry past it raises system_limit (TVM_ERR_LIMIT); BEAM ends the node
 * ("no more index entries").
 */
#ifndef VM_MAX_EXPORTS
#define VM_MAX_EXPORTS ((size_t)1 << 19)
#endif

/*
 * VM_MAX_CODE_BYTES: the memory that loaded code may hold before
 * code:load_binary/3 is refused (tvm_config.max_code_bytes' default):
 * 1 GiB.  Every version of every module stays allocated while the VM
 * lives (a process may still run it, a frame return into it, a fun or a
 * stale code index name it: vm/module.c), so purge_module frees nothing
 * and a loop of load_binary and purge_module grew the OS process by a
 * version each turn (4 KB for a two-function module) until it was
 * killed.  Past it a load from VM code is {error, system_limit}; code
 * loaded from C counts but is never refused (the embedder's code bounds
 * it).  BEAM frees purged code instead, killing the processes still in
 * it.
 */
#ifndef VM_MAX_CODE_BYTES
#define VM_MAX_CODE_BYTES ((size_t)1 << 30)
#endif

/*
 * VM_MAX_MESSAGE_WORDS: the largest term, counted flat, that one copy
 * between processes may hold (tvm_config.max_message_words' default):
 * messages, spawn arguments, exit values.  A heap holds a term with
 * shared subterms once, but a copy flattens it ({T, T} sixty levels deep
 * is a few words on the heap and 2^60 flat); the size is counted first and
 * the count stops at this cap, so an oversized send costs at most this
 * many steps and raises system_limit instead of exhausting memory.
 * 2^27 words is 1 GiB.  It bounds comparisons too: two terms that share
 * subterms compare as if flat, so a comparison (=:=, <, sorting, min/max)
 * may visit at most twice this many pairs of subterms, then raises
 * system_limit instead of holding its scheduler for 2^60 steps.
 */
#ifndef VM_MAX_MESSAGE_WORDS
#define VM_MAX_MESSAGE_WORDS ((size_t)1 << 27)
#endif

/*
 * VM_PRINT_MAX_BYTES: the most one printed term (erlang:display/1,
 * io:format's ~p and ~w, crash reports, tvm_format_term) takes; past it
 * the printer writes "..." and stops.  A term with shared subterms prints
 * flat, so a few words on the heap can stand for more text than memory
 * holds.  64 MiB: [[...]] nested 10,000,000 deep prints in 20 MB.
 */
#ifndef VM_PRINT_MAX_BYTES
#define VM_PRINT_MAX_BYTES ((size_t)1 << 26)
#endif

/*
 * VM_BIF_LEND_WORK: the work from which a built-in native, or a walk of
 * a term made for VM code, lends its scheduler's local queue while it
 * runs (vm/lend.h; the lend is vm/sched.c's "Lending the local queue"),
 * counted from its arguments before it starts: list elements built,
 * reversed or converted, words of bytes copied, comparisons of a sort
 * (n log2 n), list cells of an iolist walked, words of a term printed
 * (a list argument lends from that cell on, as its length is counted),
 * words of a message, of spawn's arguments or of an exit reason copied
 * (and of the 'DOWN' messages of an exit, added up), monitors a process
 * set walked by monitor/2's prune or dropped as it exits, elements of a
 * tuple copied by setelement/3, bytes of a module's text loaded by
 * code:load_binary/3, used words of a heap a collection copies; or, for
 * a walk that learns its length
 * as it goes, as it walks: pairs of subterms compared (an instruction
 * jeq, jne, jlt, jge or a comparison native: a first pass stops there,
 * and the comparison is made again, whole, with the queue lent), words
 * of a message counted.  A call below it pays one compare (a list, one
 * per cell of the count).  64 Ki: in the release build on a loaded two-core machine
 * (give or take a third) lists:seq/2 of
 * 64 Ki elements takes 50 us, lists:reverse/1 540 us and lists:sort/1
 * 4 to 6 ms (65,536 x 16 comparisons, 1 Mi units: a sort lends from
 * 8,192 elements), and a comparison of 64 Ki pairs 0.6 to 0.9 ms (two
 * distinct equal lists of 60,000 elements compared 10,000 times: 5.5 to
 * 8.3 s; a longer one walks its first 64 Ki pairs twice, that much more),
 * where a time slice of 4,000 reductions is 11 us.  The
 * lend's two full CASes (and a wake-up of a sleeping scheduler, a few
 * us, only when processes wait behind it) are under 0.1 % of the
 * shortest of them; a call just under it holds its queue for at most
 * about half a millisecond (lists:reverse/1, some 50 time slices; a
 * comparison, nearly a millisecond), the price of keeping the short
 * calls at one compare.
 */
#ifndef VM_BIF_LEND_WORK
#define VM_BIF_LEND_WORK ((size_t)1 << 16)
#endif

/* VM_TIMEOUT_MAX_MS: longer receive timeouts mean infinity (~31 years). */
#ifndef VM_TIMEOUT_MAX_MS
#define VM_TIMEOUT_MAX_MS ((int64_t)1000000000000)
#endif

/*
 * VM_SESSIONS_MAX: trace sessions that may be live at once, the default
 * session included (trace/tr_session.c, docs/tracing.md "Sessions").  A
 * session's slot is 8 bits wide wherever hot data names it (a process's
 * trace word, a breakpoint's per-session entry, a trace frame), and
 * every scheduler keeps a ring pointer per slot, so the bound costs
 * 8 bytes per slot per scheduler and nothing per process unless a
 * process is traced by two sessions at once (vm/process.h).  16 leaves
 * 15 sessions beside the default one.
 */
#ifndef VM_SESSIONS_MAX
#define VM_SESSIONS_MAX 16
#endif

/*
 * VM_DICT_MIN: entries a process dictionary's table starts with and never
 * shrinks below (vm/dict.c); 8 entries are 28 words off the heap.
 * VM_DICT_HASH_NODES: words of a key its hash visits at most, so that a
 * put/2 or get/1 of a long key costs a bounded hash (keys that agree on
 * what it visited are told apart by comparison).
 */
#ifndef VM_DICT_MIN
#define VM_DICT_MIN 8u
#endif
#ifndef VM_DICT_HASH_NODES
#define VM_DICT_HASH_NODES 256
#endif

/* VM_MAX_ARITY: arguments one function may take. */
#ifndef VM_MAX_ARITY
#define VM_MAX_ARITY 255
#endif

/*
 * VM_STACKTRACE_DEPTH: frames recorded in an exception's stack trace.
 * Recording happens at every raise, caught or not, so it is bounded.
 */
#ifndef VM_STACKTRACE_DEPTH
#define VM_STACKTRACE_DEPTH 32
#endif

/*
 * VM_REDUCTIONS: reductions a process may spend (one per call and per
 * backward jump) before it must yield its scheduler.
 */
#ifndef VM_REDUCTIONS
#define VM_REDUCTIONS 4000
#endif

/*
 * VM_REDUCTIONS_GP: the reductions of a time slice that begins soon after
 * a grace period was asked for or ended (vm/progress.h,
 * vm_progress_hurry_until): a grace period ends only when every scheduler
 * has switched processes, and a process woken from such a wait starts
 * only when the one running on its scheduler yields.
 */
#ifndef VM_REDUCTIONS_GP
#define VM_REDUCTIONS_GP 1000
#endif

/*
 * VM_PROGRESS_HURRY_NS: how long time slices stay short (VM_REDUCTIONS_GP)
 * after a grace period is asked for, or its end wakes processes
 * (vm/progress.h, vm_progress_hurry_until).
 */
#ifndef VM_PROGRESS_HURRY_NS
#define VM_PROGRESS_HURRY_NS 200000
#endif

/*
 * VM_OFFER_GAP_NS: the least time between two offers of a scheduler's CPU
 * to a thread waiting for a grace period (vm/sched.c, offer_cpu): the
 * longest such a waiter, once woken, waits for a CPU beyond the next
 * quiescent report, against one sched_yield() per this much time while a
 * grace period is held up.
 */
#ifndef VM_OFFER_GAP_NS
#define VM_OFFER_GAP_NS 50000
#endif

/*
 * VM_POOL_TRIM_DELAY_MS: how long the whole VM must stay idle (every
 * scheduler without work) before the pages of pooled fiber stacks go back
 * to the OS.  A burst of spawns that follows sooner reuses them without a
 * system call; later, memory returns.
 */
#ifndef VM_POOL_TRIM_DELAY_MS
#define VM_POOL_TRIM_DELAY_MS 20
#endif

/*
 * VM_QUEUED_SCAN: how far process_info/2 looks along its own scheduler's
 * local queue for a process whose frames it wants (one found there is
 * read directly; one further back, or elsewhere, is asked:
 * vm/procinfo.c).  A bound on the walk, not on the answer.
 */
#ifndef VM_QUEUED_SCAN
#define VM_QUEUED_SCAN 256
#endif

/*
 * VM_PROC_CACHE_MAX: ended processes each scheduler keeps, with their
 * fibers and buffers, for the next spawns it runs (a burst of spawns and
 * exits then calls neither malloc nor the fiber pool); also the most the
 * spare list, which hands ended processes between schedulers, holds
 * (vm/sched_cache.c).  A scheduler going idle moves its cache
 * there; both are freed once the whole VM stays idle.
 */
#ifndef VM_PROC_CACHE_MAX
#define VM_PROC_CACHE_MAX 4096
#endif

/*
 * VM_CODE_IX_COUNT: generations of export addresses.  Three, as in BEAM:
 * one active, one being staged, and one that readers which loaded the
 * index just before the last commit may still be reading.
 */
#ifndef VM_CODE_IX_COUNT
#define VM_CODE_IX_COUNT 3
#endif

/*
 * VM_FUZZ: the libFuzzer build (scons fuzz, fuzz/): adds vm_atoms_trim(),
 * which the harnesses call between inputs once no VM exists, because the
 * atom table is global and never shrinks and a fuzzer makes new names on
 * every input.  Never set in a build that embeds the VM.
 */
#ifndef VM_FUZZ
#define VM_FUZZ 0
#endif

/* VM_STRESS_GC: collect at every allocation check (debug knob, off). */
#ifndef VM_STRESS_GC
#define VM_STRESS_GC 0
#endif

#if defined(VM_DEBUG)
#define VM_ASSERTS 1
#else
#define VM_ASSERTS 0
#endif

#endif /* VM_CONFIG_H */
