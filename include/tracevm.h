/*
 * tracevm.h - the embedding API of tracevm.
 *
 * tracevm is a register bytecode VM with BEAM-style processes whose
 * tracepoints can be switched on and off at run time without pausing it.
 * This header is the whole public interface; every type is opaque.
 *
 * Threads: a tvm_vm may be used from any number of threads at once.  A
 * tvm_env is a call context (it owns a heap and, while a call runs, a VM
 * stack); one env must be used by one thread at a time.
 *
 * Terms: a tvm_term is a handle to a value held by an env.  Handles stay
 * valid while the env lives (for an env made by tvm_env_new) or until the
 * native function that received them returns (for the env passed to a
 * native); the collector updates what they point at, so they survive any
 * number of collections.
 *
 * Errors: functions return a tvm_status; those that take a tvm_error *
 * also fill it with a message saying what and where (it may be NULL).
 * Nothing already loaded is lost when a call fails.
 */
#ifndef TRACEVM_H
#define TRACEVM_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Every function declared here is exported by libtracevm.so, and nothing
 * else is: the library is built with -fvisibility=hidden and a linker
 * version script (api/libtracevm.map).  The pragma also keeps these
 * declarations visible in a host built with -fvisibility=hidden.
 */
#pragma GCC visibility push(default)

/* ------------------------------------------------------------------ */
/* Versions (docs/embedding.md, "Versions and compatibility")          */

/* The release this header belongs to, MAJOR.MINOR.PATCH. */
#define TVM_VERSION_MAJOR 0
#define TVM_VERSION_MINOR 1
#define TVM_VERSION_PATCH 0
#define TVM_VERSION_STRING "0.1.0"
/* One number for comparisons in #if: TVM_VERSION >= TVM_VERSION_AT(0, 2, 0). */
#define TVM_VERSION_AT(major, minor, patch) ((major) * 1000000L + (minor) * 1000L + (patch))
#define TVM_VERSION TVM_VERSION_AT(TVM_VERSION_MAJOR, TVM_VERSION_MINOR, TVM_VERSION_PATCH)
/* The N of the shared library's name, libtracevm.so.N: it changes when,
 * and only when, a host built against an older header could no longer run
 * with the new library. */
#define TVM_ABI 0

/*
 * The version of the library the program runs with (which may be newer
 * than the header it was compiled against): "MAJOR.MINOR.PATCH", and the
 * three numbers into those of major, minor and patch that are not NULL.
 */
const char *tvm_version(int *major, int *minor, int *patch);

typedef struct tvm_vm tvm_vm;
typedef struct tvm_env tvm_env;

/* A handle to a term held by an env (see above). */
typedef struct tvm_term {
    uint32_t h;
} tvm_term;

typedef enum tvm_status {
    TVM_OK = 0,
    TVM_EXCEPTION,     /* VM code raised; see tvm_get_exception() */
    TVM_ERR_LOAD,      /* assembly rejected; the message lists file:line:col errors */
    TVM_ERR_IO,        /* a file could not be read */
    TVM_ERR_BADARG,    /* an API argument is invalid (NULL, out of range, ...) */
    TVM_ERR_TYPE,      /* a term is not of the type asked for */
    TVM_ERR_NOTFOUND,  /* nothing to return (e.g. no pending exception); an
                        * undefined function is an exception, error:undef */
    TVM_ERR_EXISTS,    /* the name is already taken */
    TVM_ERR_LIMIT,     /* a size limit was exceeded */
    TVM_ERR_BUSY,      /* the target could not be read in time (tvm_backtrace) */
} tvm_status;

/* A readable name for a status, e.g. "TVM_ERR_LOAD". */
const char *tvm_status_name(tvm_status s);

/* Error details filled in by calls that take one. */
typedef struct tvm_error {
    tvm_status status;
    char message[4096];  /* NUL-terminated; "" on success.  A path longer
                          * than 1,024 bytes is named by its first and last
                          * 510 bytes with "..." between, so that what
                          * follows it (the OS's reason) is never cut. */
} tvm_error;

/* ------------------------------------------------------------------ */
/* VM lifetime                                                         */

/*
 * The option structs an embedder fills in (tvm_config, tvm_trace_options,
 * tvm_backtrace_opts) begin with `size`: zero-initialise the struct and
 * set size to its sizeof,
 *     tvm_config cfg = { .size = sizeof(tvm_config), .schedulers = 2 };
 * Every field's zero value is its default.  A library newer than the
 * header reads the fields the header had and gives the rest their
 * defaults; a library older than the header accepts the fields it does not
 * know as long as they are zero.  A size of 0 is refused (tvm_new returns
 * NULL, the others TVM_ERR_BADARG): docs/embedding.md, "Versions and
 * compatibility".  (A field added later goes at the end, at or past the
 * struct's size in the previous release, recorded in tests/abi/, and its
 * zero keeps the old behaviour.)
 */
typedef struct tvm_config {
    size_t size;               /* sizeof(tvm_config) (above) */
    size_t stack_limit_words;  /* per-process VM stack limit; 0 = default (4 Mi words) */
    size_t heap_min_words;     /* smallest process heap; 0 = default (128 words) */
    void *output;              /* FILE * for io:format and friends; NULL = stdout */
    int schedulers;            /* scheduler threads; 0 = one per core */
    size_t fiber_stack_bytes;  /* native stack per process; 0 = default (256 KiB),
                                * else 16 KiB .. 2^50 bytes (else tvm_new
                                * returns NULL) */
    bool quiet_crashes;        /* do not print crash reports of processes */
    /* Fiber stacks carved from large slabs, so that hundreds of thousands
     * of processes fit in Linux's default vm.max_map_count.  Every stack,
     * slab or not, has a guard region below it: a native stack overflow
     * ends only the process that overflowed, with
     * error:{system_limit, native_stack} (docs/safety.md). */
    bool fiber_slabs;
    /* crash reports add the mixed VM + native stack where the exception
     * was raised (docs/stacks.md; each raise then walks its stack) */
    bool crash_stacks;
    /* trace_pattern parks every scheduler while it patches, as BEAM did
     * before R16.  For the pause-freedom benchmark only. */
    bool stop_the_world_tracing;
    /* Serve the control endpoint from creation on (tvm_control_start;
     * TRACEVM_CONTROL=1 in the environment does the same). */
    bool control;
    /* Limits (docs/safety.md); each ends only the process that exceeds it. */
    size_t max_heap_words;     /* default max_heap_size of processes: a process
                                * whose heap (with the messages it has taken
                                * into its queue) outgrows it is killed, reason
                                * killed; 0 = none (tvm_spawn_opt overrides) */
    size_t max_processes;      /* processes alive at once; 0 = default
                                * (1,048,576); spawns beyond it fail with
                                * system_limit / TVM_ERR_LIMIT */
    size_t max_message_words;  /* the largest term one copy between processes
                                * (a message, spawn arguments, an exit value)
                                * may hold, counted flat; 0 = default (2^27) */
    size_t max_exports;        /* export entries (one per module:function/arity
                                * ever named); 0 = default (524,288).  A name
                                * new past it, given at run time (make_fun/3,
                                * apply/3, spawn/3, code:load_binary/3,
                                * tvm_call, tvm_spawn), is system_limit /
                                * TVM_ERR_LIMIT; tvm_load_string and
                                * registering natives are never refused */
    size_t max_code_bytes;     /* memory that loaded code holds, every version
                                * of every module counted (none is freed
                                * while the VM lives, purged ones included);
                                * 0 = default (1 GiB).  code:load_binary/3 of
                                * a module that would take it past this is
                                * {error, system_limit}; tvm_load_string
                                * counts but is never refused */
} tvm_config;

/*
 * Creates a VM.  `cfg` may be NULL for defaults.  Returns NULL only if the
 * configuration is invalid (its size included).  Any thread.
 */
tvm_vm *tvm_new(const tvm_config *cfg);

/*
 * tvm_new with the reason: TVM_OK with the VM in *out, or TVM_ERR_BADARG
 * (*out NULL) with err naming the field, its value and its range
 * ("tvm_create: tvm_config: schedulers 2000 is outside 0..1024 (0: one
 * per core)"), or a NULL out.  `err` may be NULL.  Any thread.
 */
tvm_status tvm_create(const tvm_config *cfg, tvm_vm **out, tvm_error *err);

/* Destroys a VM.  No env of it may be in use.  From a thread of the
 * embedder outside any VM: from a process (a native, the call hook),
 * inside tvm_call (its natives and hook) or from a trace callback it
 * would wait for its own thread, so there it destroys nothing and writes
 * "tracevm: tvm_destroy: called from ..., which it would wait for;
 * nothing was destroyed (...)" to stderr (docs/embedding.md, "What may
 * be called from where"). */
void tvm_destroy(tvm_vm *vm);

/* ------------------------------------------------------------------ */
/* Loading code                                                        */

/*
 * Loads one module from .tasm text.  `name` is used in diagnostics (the
 * file name).  On any error nothing is loaded and the VM keeps what it had;
 * err->message holds one "name:line:col: error: message" line per error.
 * Loading a module that is already loaded replaces it (new calls through
 * the export table go to the new code).  TVM_ERR_LIMIT (with the place in
 * err) when the text names a new atom and the atom table is full, or is
 * longer than 256 MiB (tvm_load_file stops reading just past that).  Any
 * thread; loads are serialized.
 */
tvm_status tvm_load_string(tvm_vm *vm, const char *name, const char *text,
                           size_t len, tvm_error *err);

/* Reads `path` and loads it as tvm_load_string() does. */
tvm_status tvm_load_file(tvm_vm *vm, const char *path, tvm_error *err);

/*
 * Checks .tasm text as tvm_load_string() would, without loading anything:
 * TVM_OK when the module would load, TVM_ERR_LOAD when it would not,
 * TVM_ERR_BADARG for a NULL vm or name.  When `diagnostics` is non-NULL it
 * receives every "name:line:col: error: message" line, however many (a
 * string from malloc, "" when there is none; the caller frees it).  When
 * `disassembly` is non-NULL it receives, for text that checks, the
 * module's disassembly in the format `tracevm dis` prints (malloc'ed), and
 * NULL otherwise.  The VM's loaded code is untouched (only export entries
 * named by the code may be created, undefined).  Any thread.
 */
tvm_status tvm_check_string(tvm_vm *vm, const char *name, const char *text, size_t len,
                            char **diagnostics, char **disassembly);

/* Reads `path` and checks it as tvm_check_string() does; a file that
 * cannot be read gives TVM_ERR_IO and the line "path: error: cannot open:
 * REASON" (or "cannot read: REASON", a directory say) in *diagnostics. */
tvm_status tvm_check_file(tvm_vm *vm, const char *path, char **diagnostics,
                          char **disassembly);

typedef struct tvm_module_info {
    char name[256];          /* the module's name */
    const char *file;        /* the file it was loaded from (valid while the VM lives) */
    int functions;           /* functions it defines */
} tvm_module_info;

/* Fills up to max entries with the loaded modules, in the order they were
 * first loaded (a reload keeps its place); returns how many are loaded.
 * Any thread. */
size_t tvm_modules(tvm_vm *vm, tvm_module_info *out, size_t max);

typedef struct tvm_function_info {
    char name[256];
    int arity;
    bool exported;           /* callable as mod:fun/arity from other modules */
    int line;                /* the line of its first instruction (0: unknown) */
} tvm_function_info;

/* Fills up to max entries with the functions of loaded module `module`,
 * in definition order, and sets *count to how many it has;
 * TVM_ERR_NOTFOUND if no such module is loaded (natives are not
 * modules), TVM_ERR_BADARG for a NULL argument.  Any thread. */
tvm_status tvm_functions(tvm_vm *vm, const char *module, tvm_function_info *out, size_t max,
                         size_t *count);

/* ------------------------------------------------------------------ */
/* Natives                                                             */

/*
 * A native function.  Arguments are handles in `argv`; the native stores
 * its result handle in *result and returns TVM_OK, or returns the value of
 * tvm_raise() to raise an exception in the calling VM code.  A native may
 * build terms, inspect them and call back into VM code with tvm_call() on
 * the env it was given (a nested activation).
 */
typedef tvm_status (*tvm_native_fn)(tvm_env *env, int argc,
                                    const tvm_term *argv, tvm_term *result,
                                    void *data);

/*
 * Registers `fn` as mod:fun/arity.  Fails with TVM_ERR_EXISTS if that
 * function is already defined (by a native or by a loaded module named
 * `mod`), TVM_ERR_LIMIT if a name is new and the atom table is full.  Any
 * thread.
 */
tvm_status tvm_register_native(tvm_vm *vm, const char *mod, const char *fun,
                               int arity, tvm_native_fn fn, void *data,
                               tvm_error *err);

/* ------------------------------------------------------------------ */
/* Call contexts and calls                                              */

/* Creates a call context for the calling thread.  Any thread. */
tvm_env *tvm_env_new(tvm_vm *vm);

/* Frees a call context made by tvm_env_new() and every handle it holds. */
void tvm_env_free(tvm_env *env);

/* The VM an env belongs to. */
tvm_vm *tvm_env_vm(tvm_env *env);

/*
 * Calls mod:fun(argv...) through the export table.  On TVM_OK *result is
 * the returned term; on TVM_EXCEPTION the exception is kept in the env
 * (tvm_get_exception, tvm_format_exception).  An uncaught throw(V) comes
 * back as class error, reason {nocatch, V}.  TVM_ERR_BADARG if `mod` or
 * `fun` is not a valid atom name or argc is out of range; TVM_ERR_LIMIT if
 * a name is not an atom yet and the atom table (2^20 atoms, shared by
 * every VM of the OS process, never shrinking) is full, or mod:fun/argc
 * has no export entry yet and the table holds max_exports.  Callable
 * from a native on the env it was given (a nested activation).
 */
tvm_status tvm_call(tvm_env *env, const char *mod, const char *fun, int argc,
                    const tvm_term *argv, tvm_term *result);

/* The pending exception's class (error | throw | exit) and reason;
 * TVM_ERR_NOTFOUND if the last call did not end in an exception. */
tvm_status tvm_get_exception(tvm_env *env, tvm_term *cls, tvm_term *reason);

/* The pending exception's stack trace as a list of {M, F, Arity, [{file, F}, {line, L}]}. */
tvm_status tvm_get_stacktrace(tvm_env *env, tvm_term *trace);

/*
 * Formats the pending exception as
 *   "exception error: badarith\n  in fib:fib/1 (fib.tasm:7)\n ..."
 * into buf (always NUL-terminated; buf NULL: nothing is written, as with
 * size 0).  Returns the length it needed.
 */
size_t tvm_format_exception(tvm_env *env, char *buf, size_t size);

/* Forgets the pending exception (a native that handled it). */
void tvm_clear_exception(tvm_env *env);

/*
 * Raises class:reason from a native: stores the exception and returns
 * TVM_EXCEPTION, which the native must return.  `cls` is "error", "throw"
 * or "exit"; any other value raises error:badarg.
 */
tvm_status tvm_raise(tvm_env *env, const char *cls, tvm_term reason);

/* Raises error:badarg (the common case). */
tvm_status tvm_raise_badarg(tvm_env *env);

/* ------------------------------------------------------------------ */
/* Building terms (every builder returns TVM_OK or an error)           */

tvm_status tvm_make_int(tvm_env *env, int64_t v, tvm_term *out);      /* TVM_ERR_LIMIT beyond 62 bits */
tvm_status tvm_make_atom(tvm_env *env, const char *name, tvm_term *out); /* TVM_ERR_LIMIT beyond 255 bytes
                                                                          * or with the atom table full */
tvm_status tvm_make_binary(tvm_env *env, const void *bytes, size_t len, tvm_term *out);
tvm_status tvm_make_string(tvm_env *env, const char *s, tvm_term *out); /* a binary */
tvm_status tvm_make_tuple(tvm_env *env, int n, const tvm_term *elems, tvm_term *out);
tvm_status tvm_make_list(tvm_env *env, int n, const tvm_term *elems, tvm_term *out);
tvm_status tvm_make_cons(tvm_env *env, tvm_term head, tvm_term tail, tvm_term *out);
/* [] (a NULL env: a handle no env has, TVM_T_INVALID to tvm_type_of) */
tvm_term tvm_nil(tvm_env *env);

/*
 * Handles live as long as their env; a long-running host frees them in
 * scopes: mark = tvm_handles_mark(env); ... tvm_handles_release(env, mark)
 * drops every handle made after the mark (earlier ones stay valid).
 */
size_t tvm_handles_mark(tvm_env *env);
void tvm_handles_release(tvm_env *env, size_t mark);

/*
 * Parses a term from text in the assembly's literal syntax: 42, -7, ok,
 * 'Quoted', "string", [1, 2], {a, b}, [] (TVM_ERR_BADARG with a message
 * in err on a syntax error; TVM_ERR_LIMIT when an atom of it is new and
 * the atom table is full).
 */
tvm_status tvm_parse_term(tvm_env *env, const char *text, tvm_term *out,
                          tvm_error *err);

/* ------------------------------------------------------------------ */
/* Inspecting terms                                                    */

typedef enum tvm_type {
    TVM_T_INT, TVM_T_ATOM, TVM_T_NIL, TVM_T_CONS, TVM_T_TUPLE,
    TVM_T_BINARY, TVM_T_FUN, TVM_T_PID,
    TVM_T_INVALID,  /* not a valid handle of this env */
} tvm_type;

tvm_type tvm_type_of(tvm_env *env, tvm_term t);
tvm_status tvm_get_int(tvm_env *env, tvm_term t, int64_t *out);
/* Copies the atom's name (NUL-terminated, truncated to size). */
tvm_status tvm_get_atom(tvm_env *env, tvm_term t, char *buf, size_t size);
bool tvm_is_atom(tvm_env *env, tvm_term t, const char *name);
/* Points at a binary's bytes; valid until the next allocation in env. */
tvm_status tvm_get_binary(tvm_env *env, tvm_term t, const void **bytes, size_t *len);
tvm_status tvm_tuple_size(tvm_env *env, tvm_term t, int *n);
tvm_status tvm_tuple_get(tvm_env *env, tvm_term t, int i, tvm_term *out); /* 0-based */
tvm_status tvm_list_cell(tvm_env *env, tvm_term t, tvm_term *head, tvm_term *tail);
bool tvm_equal(tvm_env *env, tvm_term a, tvm_term b);

/*
 * Prints a term in Erlang syntax ({ok,[1,2]}, <<"text">>) into buf, always
 * NUL-terminated (buf NULL: nothing is written, as with size 0).  Returns
 * the length it needed.
 */
size_t tvm_format_term(tvm_env *env, tvm_term t, char *buf, size_t size);

/* ------------------------------------------------------------------ */
/* Processes                                                           */
/*
 * Processes run on scheduler threads (started on first use), each on its
 * own fiber.  A pid names one process for the VM's lifetime (pids are
 * never reused).
 */

typedef uint64_t tvm_pid;

/*
 * Spawns a process running mod:fun(argv...) (arguments are copied).  It
 * is joinable: its exit is kept until tvm_join() (and no crash report is
 * printed for it).  TVM_ERR_LIMIT when no more processes fit (max_processes
 * are alive, or no native stack can be mapped), the arguments are over
 * max_message_words, a name is new and the atom table is full, or
 * mod:fun/argc has no export entry yet and the table holds max_exports.
 * Any thread.
 */
tvm_status tvm_spawn(tvm_env *env, const char *mod, const char *fun, int argc,
                     const tvm_term *argv, tvm_pid *pid);

/* Options of tvm_spawn_opt (a zeroed struct with its size set: the VM's
 * defaults). */
#define TVM_NO_LIMIT ((size_t)-1)
typedef struct tvm_spawn_opts {
    size_t size;               /* sizeof(tvm_spawn_opts) (see tvm_config) */
    /* The process's max_heap_size in words: 0 = the VM's default
     * (tvm_config.max_heap_words), TVM_NO_LIMIT = none.  A process whose
     * heap, with the messages it has taken into its queue, outgrows it is
     * killed with reason killed (docs/safety.md), as erlang:spawn_opt/4
     * with {max_heap_size, Words} does. */
    size_t max_heap_words;
} tvm_spawn_opts;

/* tvm_spawn with options (opts may be NULL): TVM_ERR_BADARG for a size of
 * 0 or a larger struct with fields this library does not know set. */
tvm_status tvm_spawn_opt(tvm_env *env, const char *mod, const char *fun, int argc,
                         const tvm_term *argv, const tvm_spawn_opts *opts, tvm_pid *pid);

/*
 * Waits for a process made by tvm_spawn() to exit.  TVM_OK with its
 * return value in *result, or TVM_EXCEPTION with the exception that ended
 * it pending in env (class, reason and stack trace, as after tvm_call).
 * TVM_ERR_NOTFOUND if pid is not an unjoined tvm_spawn() process.  A
 * foreign thread blocks.  From a process (a native): TVM_ERR_BADARG, as
 * it would block the scheduler thread; pid stays joinable.
 */
tvm_status tvm_join(tvm_env *env, tvm_pid pid, tvm_term *result);

/* Sends a copy of msg to pid; TVM_ERR_NOTFOUND if it is not alive,
 * TVM_ERR_LIMIT if msg is over max_message_words (nothing is sent). */
tvm_status tvm_send(tvm_env *env, tvm_pid pid, tvm_term msg);

/*
 * Sends pid the exit signal `reason`, as erlang:exit(Pid, Reason) does
 * (docs/asm.md section 11.6): `kill` ends it even if it traps exits
 * (reason killed); otherwise a process that traps exits receives the
 * message {'EXIT', From, Reason}, and one that does not ends with Reason,
 * or, for `normal`, is left alone.  From is the pid of the process whose
 * env this is (a native's), and the atom `undefined` from a call context
 * (an env of tvm_env_new, or a native's under tvm_call on one), which has
 * no pid (`self()` is undefined there too).  A signal a native sends its
 * own process is taken in before this returns, and one that ends it (as
 * exit(self(), Reason) would: kill, or when it does not trap exits any
 * reason, normal included) ends the process as the native returns,
 * whatever the native returns.  TVM_OK when sent;
 * TVM_ERR_NOTFOUND when pid is not alive (it exited, is exiting, or never
 * existed), TVM_ERR_LIMIT when reason is over max_message_words (nothing
 * is sent), TVM_ERR_BADARG for a NULL env or an invalid handle.
 */
tvm_status tvm_exit(tvm_env *env, tvm_pid pid, tvm_term reason);

tvm_status tvm_make_pid(tvm_env *env, tvm_pid pid, tvm_term *out);
tvm_status tvm_get_pid(tvm_env *env, tvm_term t, tvm_pid *pid);

/*
 * Registered names (erlang:register/2; docs/asm.md section 11.5).
 * tvm_whereis: the pid registered as `name` (the atom's text, NUL-
 * terminated) into *pid, TVM_OK; TVM_ERR_NOTFOUND when no process holds
 * that name ("tvm_whereis: no process is registered as 'no such'", the
 * name as an atom prints); TVM_ERR_BADARG for a NULL vm, name or pid or a
 * name longer than an atom's 255 bytes.  No atom is created.
 * tvm_process_name: pid's name into buf (NUL-terminated; a name is at
 * most 255 bytes, so 256 always fit), TVM_OK; TVM_ERR_NOTFOUND when pid
 * has no name ("tvm_process_name: <0.7.0> has no registered name") or no
 * process pid is alive ("tvm_process_name: no process <0.7.0> is
 * alive"), buf then ""; TVM_ERR_LIMIT (buf "") when the name and its
 * NUL need more than size bytes, which err names; TVM_ERR_BADARG for a
 * NULL vm or a NULL buf with a size.  Each reads the table of names under
 * the lock that register/2, unregister/1 and a process's exit change it
 * under: the answer is true at one moment during the call and may change
 * right after (as whereis/1's).  `err` may be NULL.  Any thread.
 */
tvm_status tvm_whereis(tvm_vm *vm, const char *name, tvm_pid *pid, tvm_error *err);
tvm_status tvm_process_name(tvm_vm *vm, tvm_pid pid, char *buf, size_t size, tvm_error *err);

/*
 * From a native running on a process: suspends the process (its native
 * frames stay on its fiber) and lets the scheduler run others.
 *   tvm_sleep:   for ms milliseconds.
 *   tvm_receive: until a message arrives (the oldest is removed and
 *                returned) or timeout_ms passes (< 0: forever), then
 *                TVM_ERR_NOTFOUND.
 * On a call context (an env of tvm_env_new) tvm_sleep blocks the calling
 * thread and tvm_receive returns TVM_ERR_BADARG.  A process being killed
 * (its heap, with the messages it took in, over max_heap_size) does not
 * wait: both return TVM_EXCEPTION (exit:killed), which the native should
 * return; the process dies as the native returns whatever it returns.
 */
tvm_status tvm_sleep(tvm_env *env, int64_t ms);

/*
 * From a native: charges the calling process `percent` (1..100) of a time
 * slice for work the native did, as BEAM's enif_consume_timeslice does.
 * Reductions count calls and loops of VM code; a native that runs long
 * in C should say so, or the process keeps its scheduler for a whole
 * slice of reductions on top, and processes queued behind it wait (they
 * are handed to an idle scheduler only when their own scheduler switches).
 * Returns true when the slice is used up: the process yields at its next
 * call or loop.  False for a percent out of range (nothing charged).
 */
bool tvm_consume_timeslice(tvm_env *env, int percent);
tvm_status tvm_receive(tvm_env *env, int64_t timeout_ms, tvm_term *msg);

/* Blocks until no process is alive.  Any foreign thread; from a process
 * (a native) it returns at once (the caller itself is alive). */
void tvm_wait_idle(tvm_vm *vm);

typedef struct tvm_process_info {
    tvm_pid pid;
    const char *state;       /* "runnable", "running", "waiting", "exited" */
    char function[300];      /* mod:fun/arity it is in ("" while running) */
    uint64_t reductions;     /* reductions of its finished time slices */
    size_t message_queue;    /* messages sent to it and not yet received */
    size_t heap_words;       /* the size of its heap, in words */
} tvm_process_info;

/* Fills up to max entries (none when out is NULL); returns how many
 * processes are alive. */
size_t tvm_processes(tvm_vm *vm, tvm_process_info *out, size_t max);

/* ------------------------------------------------------------------ */
/* Stacks: a process's whole stack, VM and native (docs/stacks.md)     */

typedef struct tvm_backtrace_opts {
    size_t size;           /* sizeof(tvm_backtrace_opts) (see tvm_config) */
    unsigned timeout_ms;   /* a running process's signal; 0 = the default (50) */
    bool unwind;           /* libunwind where the frame-pointer walk breaks */
    bool native_lines;     /* native frames get " at file:line" (DWARF, libdw) */
} tvm_backtrace_opts;

/*
 * Prints the stack of a process (or of a thread registered with
 * tvm_thread_register) into buf, one frame per line, innermost first:
 * VM frames as "  mod:fun/arity (file:line)", natives as "  [c] name+0xoff
 * (object)", return/exception trace frames as "  <trace> mod:fun/arity",
 * and "  ... truncated" when part of it could not be read.  A suspended
 * process is read from its saved context; a running one by a signal to
 * its scheduler thread; neither is stopped for longer than the capture.
 * Any thread (a process may ask for its own).  opts may be NULL.
 * TVM_ERR_NOTFOUND: no such process, or it exited; TVM_ERR_BUSY: the
 * signal timed out, or the process was in a context switch at every try.
 * TVM_ERR_LIMIT: the text needs more than size bytes (with its NUL); buf
 * holds the whole lines that fit, NUL-terminated, and err's message
 * names the bytes needed (buf NULL with size 0 asks for that alone).
 * TVM_ERR_BADARG, naming it: a NULL vm, a NULL buf with a size, bad opts.
 */
tvm_status tvm_backtrace(tvm_vm *vm, tvm_pid pid, char *buf, size_t size,
                         const tvm_backtrace_opts *opts, tvm_error *err);

/* The real-time signal of running captures (0 keeps it; default
 * SIGRTMIN + 4; never SIGURG) and the default timeout in ms (0 keeps it;
 * default 50).  Process-wide; any time (the next capture uses them).
 * TVM_ERR_BADARG, nothing changed, for a signal outside
 * SIGRTMIN..SIGRTMAX or one that has another handler (yours, a
 * profile's timer signal). */
tvm_status tvm_backtrace_config(int signo, unsigned timeout_ms);

/*
 * Registers the calling (non-VM) thread so that tvm_backtrace can capture
 * it like a process, by signal; ctx: a call context of this thread whose
 * VM frames join its native ones, or NULL.  *id is a pseudo-pid (top bit
 * set).  Unregister before the thread exits.  TVM_ERR_LIMIT beyond 64
 * registered threads.
 */
tvm_status tvm_thread_register(tvm_env *ctx, tvm_pid *id);
tvm_status tvm_thread_unregister(tvm_pid id);


/* ------------------------------------------------------------------ */
/* Breakpoints: trace_pattern, trace_info, call counts, the call hook  */
/*
 * Breakpoints are switched on and off while every scheduler keeps running
 * (docs/breakpoints.md).  A pattern names functions with trailing
 * wildcards only: "m:f/a", "m:f/_", "m:_/_" or "_:_/_".
 *
 * Flags: TVM_TP_GLOBAL traces remote calls (through the export table) of
 * exported functions; TVM_TP_LOCAL traces every call; they exclude each
 * other per function (setting one clears the other).  TVM_TP_CALL_COUNT
 * counts every call by every process.  TVM_TP_CALL_TIME keeps, per
 * process, the calls and the exclusive time (time in the function itself,
 * not in call_time-traced callees, not while scheduled out): see
 * tvm_call_time.  Flags 0 means TVM_TP_GLOBAL.
 * Actions: TVM_TP_TRUE sets the flags (and restarts existing counts and
 * times at 0), TVM_TP_FALSE clears them, TVM_TP_PAUSE freezes counts and
 * times and TVM_TP_RESTART zeroes them and counts on (these two take only
 * TVM_TP_CALL_COUNT and TVM_TP_CALL_TIME).
 *
 * The pattern "on_load" (TVM_TP_TRUE or TVM_TP_FALSE) sets or clears
 * flags for every module loaded afterwards: each of its functions gets
 * them, as "m:_/_" would, from its first call on (*matched is 0).
 *
 * A traced call (local or global) of a process whose call tracing is on
 * (TVM_TRACE_CALL, below) runs the call hook and, while a trace pipeline
 * runs (tvm_trace_start), writes a call event.  TVM_TP_META (with
 * tvm_trace_pattern_ms) reports every call of every process, whatever its
 * flags, as messages to a tracer process (docs/tracing.md, "Meta trace").
 */

enum {
    TVM_TP_GLOBAL = 1u << 0,
    TVM_TP_LOCAL = 1u << 1,
    TVM_TP_CALL_COUNT = 1u << 2,
    TVM_TP_CALL_TIME = 1u << 3,
    TVM_TP_META = 1u << 4,
};

typedef enum tvm_tp_action {
    TVM_TP_TRUE, TVM_TP_FALSE, TVM_TP_PAUSE, TVM_TP_RESTART
} tvm_tp_action;

/*
 * Applies a pattern; *matched (may be NULL) gets the number of functions
 * it matched (for TVM_TP_GLOBAL: exported ones).  Returns when every later
 * call in the VM sees the new setting.  TVM_ERR_BADARG with a message in
 * err for a bad pattern, action or flags; nothing changes then.  Patterns
 * make no atom: a module or function name that is no atom yet names
 * nothing loaded, so the pattern matches nothing (*matched 0).  Any
 * thread: a process calling it (from a native) is suspended while it
 * waits, a foreign thread blocks.
 */
tvm_status tvm_trace_pattern(tvm_vm *vm, const char *pattern, tvm_tp_action how,
                             unsigned flags, int *matched, tvm_error *err);

/*
 * tvm_trace_pattern with a match spec (docs/tracing.md, "Match specs"),
 * in Erlang term syntax, e.g. "[{['$1'],[{'>','$1',3}],[{return_trace}]}]"
 * (NULL: every call, as TVM_TP_TRUE alone), for the call trace of the
 * matched functions, or with TVM_TP_META for their meta trace, whose
 * messages go to `meta_tracer`.  A bad spec: TVM_ERR_BADARG with
 * "tvm_trace_pattern: match spec clause N: ..." in err; nothing changes.
 * TVM_ERR_LIMIT when the spec text names a new atom and the atom table is
 * full (its other atoms, and the pattern's, are only looked up).
 */
tvm_status tvm_trace_pattern_ms(tvm_vm *vm, const char *pattern, const char *match_spec,
                                tvm_tp_action how, unsigned flags, tvm_pid meta_tracer,
                                int *matched, tvm_error *err);

/*
 * trace_info for one function "m:f/a" (or "on_load") into env: item is
 * "traced", "call_count", "call_time", "match_spec", "meta",
 * "meta_match_spec" or "all"; *out gets {Item, Value} as
 * erlang:trace_info/2 gives it (Value undefined when the function does
 * not exist; call_time: [{Pid, Count, Seconds, Microseconds}] by pid).
 */
tvm_status tvm_trace_info(tvm_env *env, const char *mfa, const char *item,
                          tvm_term *out, tvm_error *err);

/* The call count of "m:f/a": TVM_ERR_NOTFOUND when it has no counter. */
tvm_status tvm_call_count(tvm_vm *vm, const char *mfa, int64_t *count);

/* One process's call time of a function. */
typedef struct tvm_call_time_entry {
    uint64_t pid;       /* 0: call contexts (tvm_call on embedder threads) */
    uint64_t count;     /* calls */
    uint64_t ns;        /* exclusive time */
} tvm_call_time_entry;

/*
 * The call time of "m:f/a" per process, by pid: fills up to max entries of
 * out, *n gets how many there are.  TVM_ERR_NOTFOUND when the function has
 * no call time data.  Any thread; reads while every scheduler keeps
 * writing (nothing is stopped).
 */
tvm_status tvm_call_time(tvm_vm *vm, const char *mfa, tvm_call_time_entry *out, size_t max,
                         size_t *n);

/* Turns call tracing of a process on or off (pid 0: the env itself, a
 * call context): tvm_trace_flags(env, pid, TVM_TRACE_CALL, on). */
tvm_status tvm_trace_calls(tvm_env *env, tvm_pid pid, bool on);

typedef struct tvm_call_event {
    tvm_pid pid;             /* 0 for a call context */
    const char *module, *function;
    int arity;
    const tvm_term *argv;    /* arity handles, valid during the hook */
    bool global;             /* hit through the export entry */
} tvm_call_event;

/*
 * Runs on the calling process's thread for each traced call; env is that
 * process's.  It may inspect and format terms; it must not raise.  NULL
 * removes the hook.  Any thread; calls already in the hook finish with the
 * previous one.
 */
typedef void (*tvm_call_hook)(tvm_env *env, const tvm_call_event *ev, void *data);
void tvm_set_call_hook(tvm_vm *vm, tvm_call_hook hook, void *data);

/* ------------------------------------------------------------------ */
/* Tracing: process trace flags and the trace pipeline                 */
/*
 * Process trace flags say what a process reports (docs/tracing.md):
 *   TVM_TRACE_CALL       a call event for each call of a traced function
 *                        (tvm_trace_pattern): {trace,Pid,call,{M,F,Args}}
 *   TVM_TRACE_ARITY      call events carry the arity instead of the
 *                        arguments: {trace,Pid,call,{M,F,Arity}}
 *   TVM_TRACE_TIMESTAMP  the text format prints trace_ts messages with the
 *                        timestamp last, as BEAM's: {MegaSecs,Secs,MicroSecs}
 *                        of the system time (erlang:timestamp/0's form);
 *                        TVM_TRACE_MONOTONIC_TIMESTAMP: CLOCK_MONOTONIC in
 *                        ns (erlang:monotonic_time/0's value);
 *                        TVM_TRACE_STRICT_MONOTONIC_TIMESTAMP: {Mono,
 *                        Unique} (Unique as erlang:unique_integer([monotonic]));
 *                        with several, timestamp wins, then strict, as BEAM
 *   TVM_TRACE_PROCS      spawn, spawned, exit, register, unregister and link events:
 *                        {trace,Pid,spawn,Child,{M,F,Args}} (Pid spawned Child),
 *                        {trace,Pid,spawned,Parent,{M,F,Args}} (Pid was spawned:
 *                        its first event), {trace,Pid,exit,Reason},
 *                        {trace,Pid,register,Name} and
 *                        {trace,Pid,unregister,Name} (Pid got or lost a
 *                        registered name, whichever process made the
 *                        change; a name goes after the exit event),
 *                        {trace,Pid,link,Pid2} and {trace,Pid,unlink,Pid2}
 *                        (Pid's link/1, unlink/1, spawn_link/3) and
 *                        {trace,Pid,getting_linked,Pid2} and
 *                        {trace,Pid,getting_unlinked,Pid2} (the other end
 *                        of a link made or removed, also when Pid2 exits)
 *   TVM_TRACE_RETURN_TO  when a function traced with TVM_TP_LOCAL returns (or
 *                        an exception passing it is caught), the function
 *                        execution returns to: {trace,Pid,return_to,{M,F,A}};
 *                        one per tail-call chain
 *   TVM_TRACE_SILENT     call, return_from, exception_from and return_to
 *                        events are not written (match specs still run and
 *                        may switch it with {silent, Bool})
 *   TVM_TRACE_RUNNING    scheduling events: {trace,Pid,in,{M,F,A}} when the
 *                        process is scheduled in, {trace,Pid,out,{M,F,A}}
 *                        when it is scheduled out (0 instead of the MFA
 *                        when it is in no function: at its start); set
 *                        while the process waits, its next run begins
 *                        with `in`; an exit ends the run without `out`
 *                        (as BEAM: TVM_TRACE_EXITING reports it)
 *   TVM_TRACE_SEND       {trace,Pid,send,Msg,To} for each message the
 *                        process sends (VM code, natives, tvm_send); To
 *                        is the registered name a message was sent to
 *   TVM_TRACE_RECEIVE    {trace,Pid,'receive',Msg} for each message the
 *                        process takes from its mailbox (docs/tracing.md)
 *   TVM_TRACE_SET_ON_SPAWN  every process this one spawns gets its flags
 *                        (this one included), in each session that set it,
 *                        on top of the VM's defaults for new processes
 *   TVM_TRACE_SET_ON_FIRST_SPAWN  the next process this one spawns gets
 *                        its flags but this one and TVM_TRACE_SET_ON_SPAWN,
 *                        and this process loses both (BEAM's
 *                        set_on_first_spawn, which overrides set_on_spawn)
 *   TVM_TRACE_GARBAGE_COLLECTION  each collection of the process's heap:
 *                        {trace,Pid,gc_major_start,Info} before it and
 *                        {trace,Pid,gc_major_end,Info} after it (every
 *                        collection is a whole-heap one, BEAM's major);
 *                        Info a list of {Key, Words} as BEAM's
 *                        (docs/tracing.md)
 *   TVM_TRACE_SET_ON_LINK  every process this one spawns with a link
 *                        (spawn_link/3) gets its flags (this one
 *                        included), as TVM_TRACE_SET_ON_SPAWN does for
 *                        every spawn; link/1 hands nothing on (BEAM's
 *                        set_on_link, as OTP 25 behaves)
 *   TVM_TRACE_SET_ON_FIRST_LINK  the next process this one spawns with a
 *                        link gets its flags but this one and
 *                        TVM_TRACE_SET_ON_LINK, and this process loses
 *                        both (BEAM's set_on_first_link)
 *   TVM_TRACE_EXITING    {trace,Pid,out_exited,0} as the process's last
 *                        event, when its exit has run (BEAM's exiting
 *                        flag; an exit here is never scheduled out half
 *                        done, so BEAM's in_exiting and out_exiting do
 *                        not occur)
 * A change applies from the process's next event; nothing is stopped or
 * waited for.  Events are written only while a pipeline runs.
 */
enum {
    TVM_TRACE_CALL = 1u << 0,
    TVM_TRACE_ARITY = 1u << 1,
    TVM_TRACE_TIMESTAMP = 1u << 2,
    TVM_TRACE_PROCS = 1u << 3,
    TVM_TRACE_RETURN_TO = 1u << 4,
    TVM_TRACE_SILENT = 1u << 5,
    TVM_TRACE_RUNNING = 1u << 6,
    TVM_TRACE_SEND = 1u << 7,
    TVM_TRACE_RECEIVE = 1u << 8,
    TVM_TRACE_SET_ON_SPAWN = 1u << 9,
    TVM_TRACE_SET_ON_FIRST_SPAWN = 1u << 10,
    TVM_TRACE_GARBAGE_COLLECTION = 1u << 11,
    TVM_TRACE_SET_ON_LINK = 1u << 12,
    TVM_TRACE_SET_ON_FIRST_LINK = 1u << 13,
    TVM_TRACE_EXITING = 1u << 14,
    TVM_TRACE_MONOTONIC_TIMESTAMP = 1u << 15,
    TVM_TRACE_STRICT_MONOTONIC_TIMESTAMP = 1u << 16,
};

/*
 * Sets (on) or clears (off) `flags` of one process (pid 0: the env
 * itself, a call context); other flags stay.  TVM_ERR_NOTFOUND when the
 * process is not alive, TVM_ERR_BADARG for unknown flags.  Any thread.
 */
tvm_status tvm_trace_flags(tvm_env *env, tvm_pid pid, unsigned flags, bool on);

/*
 * Flags by name: "call,arity,timestamp,procs,return_to,silent,running,
 * send,receive,set_on_spawn,set_on_first_spawn,garbage_collection,
 * set_on_link,set_on_first_link,exiting,monotonic_timestamp,
 * strict_monotonic_timestamp" (any comma-separated subset;
 * "all" names every one of them, as BEAM's all) into TVM_TRACE_* bits;
 * TVM_ERR_BADARG naming the unknown flag otherwise, or for a NULL flags.
 */
tvm_status tvm_trace_flags_parse(const char *list, unsigned *flags, tvm_error *err);

/* The trace flags of one process (pid 0: the env itself). */
tvm_status tvm_trace_flags_get(tvm_env *env, tvm_pid pid, unsigned *flags);

/* Which processes tvm_trace_flags_all() changes. */
typedef enum tvm_trace_scope {
    TVM_TRACE_EXISTING = 1,  /* every process alive now */
    TVM_TRACE_NEW = 2,       /* the VM's default, copied into each process it spawns */
    TVM_TRACE_ALL = 3,       /* both */
} tvm_trace_scope;

/*
 * Sets or clears `flags` for a scope of processes without stopping any
 * scheduler and without visiting them: the change is recorded once and
 * each process takes it in before it next runs (or when its flags are
 * read); for existing processes the call then waits for thread progress
 * (a calling process is suspended meanwhile), so that once it returns,
 * every later event of every process follows the new flags and
 * tvm_trace_flags_get reports them.  The time does not depend on how
 * many processes there are.  A process spawned meanwhile is covered.  A
 * later change of one process (tvm_trace_flags) overrides this one for
 * that process.  Call contexts (tvm_env_new) are not processes here.
 * TVM_ERR_BADARG for an unknown scope or flags.  Any thread.
 */
tvm_status tvm_trace_flags_all(tvm_vm *vm, tvm_trace_scope scope, unsigned flags, bool on);

/* The default trace flags of new processes. */
unsigned tvm_trace_flags_new(tvm_vm *vm);

typedef enum tvm_trace_format {
    TVM_TRACE_TEXT,          /* {trace,<0.1.0>,call,{fib,fib,[10]}}, one per line */
    TVM_TRACE_JSONL,         /* one JSON object per line */
    TVM_TRACE_CHROME,        /* Chrome trace event JSON (Perfetto, speedscope) */
    TVM_TRACE_CTF,           /* CTF 1.8 into a directory (babeltrace2, Trace Compass) */
    TVM_TRACE_CALLBACK,      /* each event to a C function (callback, below) */
    TVM_TRACE_CTF_RAW,       /* CTF 1.8 into a directory, each scheduler's records
                                copied as they are: the fastest format, streams not
                                merged (docs/tracing.md, "Raw CTF") */
} tvm_trace_format;

/* One event as the callback format hands it over (valid during the call). */
typedef struct tvm_trace_event {
    uint64_t ts;             /* CLOCK_MONOTONIC ns */
    int sched;               /* the scheduler that wrote it; -1: another thread */
    const char *kind;        /* "call", "return_from", "exception_from", "return_to",
                                "spawn", "spawned", "exit", "in", "out", "send", "receive",
                                "register", "unregister", "link", "unlink",
                                "getting_linked", "getting_unlinked", "gc_major_start",
                                "gc_major_end", "out_exited", "lost" */
    tvm_pid pid;             /* 0 for a call context and for "lost" */
    const char *module, *function;   /* NULL when the event names no function */
    int arity;
    const char *text;        /* the whole event in the text format, e.g.
                                {trace,<0.1.0>,call,{fib,fib,[10]}} */
    uint64_t lost;           /* "lost": events dropped at this point */
} tvm_trace_event;

/* Runs on the pipeline's collector thread, one event at a time, in the
 * order the other formats write them.  It may call the API (on an env it
 * makes with tvm_env_new) but for the calls that wait for a collector
 * (tvm_trace_start, tvm_trace_stop, tvm_session_flush,
 * tvm_session_destroy: TVM_ERR_BADARG) and tvm_destroy (refused);
 * docs/embedding.md, "What may be called from where".  Events wait in
 * the rings while it runs. */
typedef void (*tvm_trace_callback)(const tvm_trace_event *ev, void *data);

typedef enum tvm_trace_policy {
    TVM_TRACE_DROP,          /* a full ring drops events and counts them (reported in place) */
    TVM_TRACE_LOSSLESS,      /* a full ring suspends the traced process until the
                                collector made room (its scheduler runs others);
                                a thread of the embedder blocks; nothing is lost */
} tvm_trace_policy;

/* What a session does above its rate (tvm_trace_options.rate). */
typedef enum tvm_rate_policy {
    TVM_RATE_STOP,           /* the session stops (recon_trace's semantics) */
    TVM_RATE_DROP,           /* events above the rate are dropped and counted */
} tvm_rate_policy;

typedef struct tvm_trace_options {
    size_t size;             /* sizeof(tvm_trace_options) (see tvm_config) */
    tvm_trace_format format;
    /* Where the output goes: `path` (a file; for CTF a directory, created,
     * which must be empty), else `file` (a FILE * that stays open and is
     * not closed; not for CTF), else the descriptor `fd` when `use_fd`
     * (below), else stderr (text and JSON lines only).  One at most. */
    const char *path;
    void *file;
    size_t ring_bytes;       /* per ring, a power of two up to 1 GiB; 0 = 1-8 MiB */
    tvm_trace_policy policy;
    tvm_trace_callback callback;   /* TVM_TRACE_CALLBACK: required */
    void *callback_data;
    /* An open descriptor to write to (a pipe, a socket), never closed
     * here; one that is closed or read-only is TVM_ERR_IO at the start
     * ("cannot write to descriptor N: Bad file descriptor").  A reader that cannot keep up costs events, not a blocked
     * scheduler: with TVM_TRACE_DROP the rings drop (counted), and the
     * writer waits for the descriptor in slices; once the session ends
     * it gives up on what is left when the reader takes nothing for a
     * second (docs/tracing.md, "Sessions"), which is not a failure; a
     * reader that went away (EPIPE) is (tvm_session_error). */
    bool use_fd;
    int fd;
    /* Limits (0: none).  The session stops by itself after max_events
     * events; when more than `rate` events come in one window of
     * rate_window_ms (0: 1000) it stops or, with TVM_RATE_DROP, drops the
     * ones above the rate and counts them; it stops duration_ms after its
     * start.  Stopping removes its breakpoints and process flags from a
     * thread of its own (never on a traced call's path) and writes a
     * last record, {trace_stopped,Reason,Written,Lost}. */
    uint64_t max_events;
    uint64_t rate;
    uint64_t rate_window_ms;
    tvm_rate_policy rate_policy;
    uint64_t duration_ms;
    /* Sessions only: destroyed when this process exits (0: none). */
    tvm_pid owner;
} tvm_trace_options;

/*
 * Starts the VM's trace pipeline: one ring per scheduler (the schedulers
 * are started first) and one shared by other threads, a collector thread
 * and the sink for `format`.  opts NULL: text to stderr.  TVM_ERR_EXISTS
 * if one is already running, TVM_ERR_BADARG (with a message) for bad
 * options, TVM_ERR_IO when the output cannot be opened (for the CTF
 * formats: the directory, or its metadata file), TVM_ERR_LIMIT when
 * the OS refuses the collector thread.  From a thread
 * that is not running a process (from a native: TVM_ERR_BADARG) nor
 * running a sink (from a trace callback of any session, a collector
 * thread: TVM_ERR_BADARG, as it may wait for a stopping pipeline's sink).
 */
tvm_status tvm_trace_start(tvm_vm *vm, const tvm_trace_options *opts, tvm_error *err);

/*
 * Stops the pipeline: later events are not written; every event written
 * so far reaches the output, which is finished (closed if it was opened
 * from `path`).  TVM_ERR_NOTFOUND if none runs; TVM_ERR_BADARG when
 * called from a process (a native): it waits for thread progress and for
 * the collector; TVM_ERR_BADARG as well from a sink (a trace callback of
 * any session, on a collector thread), which it could wait for (the
 * status alone: there is no tvm_error here).  TVM_ERR_IO when a write of
 * its sink to its output failed (any format and output but a callback:
 * a full disk, a pipe whose reader went away): the pipeline is stopped
 * all the same, what was written from the failure on is lost, and
 * tvm_session_error(vm, TVM_SESSION_DEFAULT, &err) says why.  Under the lossless
 * policy it waits for the sink (a blocking callback, a pipe nobody
 * reads); trace_pattern, loads and sessions in other threads do not, but
 * a tvm_trace_start or tvm_trace_stop waits for it (the start then
 * starts a new pipeline, the stop returns TVM_ERR_NOTFOUND).
 * tvm_destroy stops a pipeline still running.
 */
tvm_status tvm_trace_stop(tvm_vm *vm);

/* ------------------------------------------------------------------ */
/* Profiling: a sampling profiler of processes (docs/profiling.md)    */

typedef enum tvm_profile_kind {
    TVM_PROFILE_CPU,         /* on-CPU: each scheduler thread sampled by a timer of
                                its own CPU time, whatever it runs (a process, the
                                scheduler itself, a collection, a native); the
                                weight is samples (nanoseconds in pprof and speedscope) */
    TVM_PROFILE_OFF,         /* off-CPU: the time processes wait (receive, sleep, the
                                code permission, a lossless trace wait, a native that
                                suspended), charged to the stack they wait in; ns */
    TVM_PROFILE_ALLOC,       /* allocation: heap words allocated by processes, sampled
                                every alloc_interval bytes on average per process,
                                charged to the VM stack that allocated; bytes */
} tvm_profile_kind;

typedef struct tvm_profile_options {
    size_t size;             /* sizeof(tvm_profile_options) (see tvm_config) */
    tvm_profile_kind kind;
    unsigned hz;             /* CPU: samples per second of each scheduler's CPU time;
                                0 = 99; at most 10,000 */
    size_t alloc_interval;   /* ALLOC: mean bytes between samples; 0 = 512 KiB */
    int signo;               /* CPU: the timer's signal, SIGRTMIN..SIGRTMAX, not the
                                stack-capture signal, with no handler but the
                                profiler's (else TVM_ERR_BADARG); 0 = SIGRTMIN + 5 */
} tvm_profile_options;

typedef struct tvm_profile tvm_profile;

/*
 * Starts profiling the VM's processes (the schedulers are started first).
 * Nothing stops: samples are taken by each scheduler for itself and
 * gathered by a thread of the profiler's own.  One profile runs at a time
 * in an OS process: TVM_ERR_EXISTS while another runs; TVM_ERR_BADARG
 * (with a message naming the argument or option and its value: "NULL
 * vm", "NULL out (where the new profile goes)", "unknown kind 7 (...)",
 * "hz 20000 above 10000") for bad options, a signal that has another handler
 * (the embedder's: it is left in place), or when called from a process;
 * TVM_ERR_IO when a timer cannot be set up; TVM_ERR_LIMIT when the OS
 * refuses the profiler's thread or memory for its buffers (nothing is
 * left running).  Any thread that is not running a process.
 */
tvm_status tvm_profile_start(tvm_vm *vm, const tvm_profile_options *opts, tvm_profile **out,
                             tvm_error *err);

/* Stops sampling; what was gathered stays to be written.  Nothing when it
 * is already stopped.  Not from a process: from one (a native) it does
 * nothing and the profile runs on (tvm_profile_get_stats shows its
 * duration grow). */
void tvm_profile_stop(tvm_profile *prof);

/* Stops it if it runs and frees it.  Before tvm_destroy of its VM.  Not
 * from a process: from one it does nothing (the profile runs on, to be
 * freed from a thread of the embedder). */
void tvm_profile_free(tvm_profile *prof);

typedef enum tvm_profile_format {
    TVM_PROFILE_FOLDED,      /* "frame;frame;frame weight" lines, root first
                                (flamegraph.pl, inferno, speedscope) */
    TVM_PROFILE_SPEEDSCOPE,  /* speedscope's JSON file format */
    TVM_PROFILE_PPROF,       /* pprof's profile.proto, gzipped (go tool pprof) */
    TVM_PROFILE_SVG,         /* an interactive flame graph, one self-contained SVG */
} tvm_profile_format;

typedef struct tvm_profile_write_options {
    size_t size;             /* sizeof(tvm_profile_write_options) (see tvm_config) */
    tvm_profile_format format;
    bool merge;              /* one tree for all processes (else each process is a
                                root frame, <0.N.0>) */
    bool lines;              /* VM frames split by the line they are at (else one
                                frame per function, with the line it starts at) */
    const char *title;       /* the SVG's title; NULL: one naming the kind */
} tvm_profile_write_options;

/*
 * Writes what was gathered so far (a running profile too) to `path`
 * (TVM_ERR_IO when it cannot be written), or renders it into a malloc'ed
 * buffer (tvm_profile_render; *out is not NUL-terminated for pprof).
 * TVM_ERR_BADARG names a NULL argument ("tvm_profile_render: NULL len")
 * or the unknown format's value.
 */
tvm_status tvm_profile_write(tvm_profile *prof, const char *path,
                             const tvm_profile_write_options *opts, tvm_error *err);
tvm_status tvm_profile_render(tvm_profile *prof, const tvm_profile_write_options *opts,
                              char **out, size_t *len, tvm_error *err);

/* The format a file name asks for by its extension: .folded (or .txt),
 * .json (speedscope), .pb.gz (or .pprof), .svg; TVM_ERR_BADARG otherwise
 * and for a NULL argument. */
tvm_status tvm_profile_format_of(const char *path, tvm_profile_format *fmt);
/* A format by name: folded, speedscope, pprof, svg (else, or for a NULL
 * argument, TVM_ERR_BADARG). */
tvm_status tvm_profile_format_parse(const char *name, tvm_profile_format *fmt);

typedef struct tvm_profile_stats {
    tvm_profile_kind kind;
    unsigned hz;
    uint64_t samples;        /* samples gathered */
    uint64_t lost;           /* samples dropped (a full buffer) */
    uint64_t weight;         /* their total weight (samples, ns or bytes) */
    uint64_t stacks;         /* distinct stacks */
    uint64_t duration_ns;    /* from the start to the stop (or now) */
    uint64_t sample_ns;      /* CPU: time spent in the signal handler, in all */
    uint64_t overruns;       /* CPU: timer expirations merged into another sample
                                (counted in its weight) */
} tvm_profile_stats;

/* out zeroed for a NULL prof; nothing for a NULL out. */
void tvm_profile_get_stats(tvm_profile *prof, tvm_profile_stats *out);

/* ------------------------------------------------------------------ */
/* Live control: attaching to a running VM (docs/control.md)          */

/*
 * Starts serving the control endpoint: a Unix-domain socket in this
 * user's directory ($TRACEVM_CONTROL_DIR, else $XDG_RUNTIME_DIR/tracevm,
 * else /tmp/tracevm-UID; 0700, and refused when it exists with other
 * owners or permissions), named PID.N.sock (0600), served by threads of
 * its own, never by a scheduler; only peers of the same user (or root)
 * are served.  TVM_ERR_EXISTS when it already serves, TVM_ERR_IO when the
 * directory, the socket or its thread's pipe cannot be set up (as in a
 * process out of file descriptors), TVM_ERR_LIMIT when the OS refuses
 * the thread; nothing is left behind then.  Any thread.
 */
tvm_status tvm_control_start(tvm_vm *vm, tvm_error *err);

/* Stops serving: the socket is removed and clients are disconnected; a
 * request in progress ends its reply first, as at its own end (a trace
 * with its last record, a count, a time or a top with what it has, a
 * profile with its file), within about two seconds.  Nothing when not
 * serving.  tvm_destroy does it.  Any thread. */
void tvm_control_stop(tvm_vm *vm);

/* The socket's path while serving, else NULL.  The string stays readable
 * until tvm_destroy, also after a tvm_control_stop on another thread; a
 * restart serves the same path (unless TRACEVM_CONTROL_DIR changed). */
const char *tvm_control_path(tvm_vm *vm);

/* A running VM of this user that serves an endpoint. */
typedef struct tvm_control_peer {
    long pid;                /* the OS process */
    char path[256];          /* its socket */
    char command[128];       /* the OS process's command line, as ps shows it */
} tvm_control_peer;

/* Fills up to max entries with this user's VMs that answer on their
 * socket, or take no connection within a second (a stopped VM is
 * listed; stale sockets of processes that are gone are removed);
 * returns how many there are (out may be NULL, to count). */
size_t tvm_control_list(tvm_control_peer *out, size_t max);

typedef struct tvm_control_client tvm_control_client;

/*
 * Connects to a VM's endpoint: `target` is a pid (its first VM) or a
 * socket path.  TVM_ERR_NOTFOUND when nothing serves there, TVM_ERR_IO
 * for a refused connection or one the server does not take within 10
 * minutes (the reason in err), TVM_ERR_BADARG for a malformed target (a
 * pid is decimal digits only; anything else without a '/' is malformed),
 * a NULL or empty one, or a NULL out.
 */
tvm_status tvm_control_connect(const char *target, tvm_control_client **out, tvm_error *err);

/* Receives each line of a reply's payload (without its LF). */
typedef void (*tvm_control_line_fn)(const char *line, size_t len, void *data);

/*
 * Sends one request, the command and its arguments as words (quoted as
 * the protocol needs), and passes each payload line to on_line (may be
 * NULL) as it arrives: a streaming command (top) calls it until the
 * command ends.  TVM_OK for an "ok" reply; for an "error" reply the
 * status is TVM_ERR_BADARG and err holds the server's message.  TVM_ERR_IO
 * when the connection breaks, or when a line of the reply does not come
 * within an hour and ten minutes (a request may run for an hour).
 */
tvm_status tvm_control_call(tvm_control_client *c, int argc, const char *const *argv,
                            tvm_control_line_fn on_line, void *data, tvm_error *err);

/* Loads module text into the attached VM (as tvm_load_string there);
 * the loader's diagnostics come to on_line, one per line, with
 * TVM_ERR_LOAD. */
tvm_status tvm_control_load(tvm_control_client *c, const char *name, const char *text,
                            size_t len, tvm_control_line_fn on_line, void *data,
                            tvm_error *err);

void tvm_control_close(tvm_control_client *c);

/* ------------------------------------------------------------------ */
/* Trace sessions: several independent tracers (docs/tracing.md)        */
/*
 * A session is one tracer's view of the VM: its own patterns (every
 * kind, on_load too), its own process flags (per process, all, new), its
 * own sink (format, destination, policy: tvm_trace_options) and limits.
 * Two sessions tracing the same function and process each get their own
 * events; changing or destroying one leaves the others alone; nothing is
 * paused for any of it.  Every call above acts on the *default session*
 * (TVM_SESSION_DEFAULT), which always exists; each has a session variant
 * below.  At most TVM_SESSIONS_MAX sessions are live at once, the
 * default one included.  Every function here may be called from any
 * thread that is not running a process, unless it says otherwise.
 */

#define TVM_SESSIONS_MAX 16

typedef struct tvm_session {
    uint64_t id;             /* 0: the default session; never reused */
} tvm_session;

#define TVM_SESSION_DEFAULT ((tvm_session){ 0 })

/*
 * Creates a session named `name` (1..255 bytes; names need not be
 * unique) with the sink and limits of `opts` (NULL: text to stderr, no
 * limits), its pipeline started at once.  TVM_ERR_LIMIT when
 * TVM_SESSIONS_MAX sessions are live; TVM_ERR_BADARG or TVM_ERR_IO as
 * tvm_trace_start.  Nothing is traced until patterns and flags are set.
 */
tvm_status tvm_session_create(tvm_vm *vm, const char *name, const tvm_trace_options *opts,
                              tvm_session *out, tvm_error *err);

/*
 * Destroys a session: removes its patterns (on_load too), process flags
 * and call_count/call_time data through the same non-blocking sequence as
 * trace_pattern, writes its last record ({trace_stopped,destroyed,W,L}
 * unless a limit stopped it before), flushes and closes its sink, and
 * returns once all of it is done.  Other sessions are untouched.  Safe
 * while its sink is writing (a descriptor that does not drain is given
 * up after a short while).  TVM_ERR_IO when its output failed, with the
 * message tvm_session_error gives (but "tvm_session_destroy: ..."): the
 * session is destroyed all the same.  TVM_ERR_NOTFOUND for a session already
 * destroyed, TVM_ERR_BADARG for the default session, from a process, or
 * from a sink (a trace callback of any session, on a collector thread:
 * the destroy waits for a sink, and two sinks' callbacks destroying each
 * other's sessions would wait for each other).
 */
tvm_status tvm_session_destroy(tvm_vm *vm, tvm_session s, tvm_error *err);

typedef struct tvm_session_info {
    char name[256];
    bool live;               /* false once a limit stopped it: its settings are
                                removed and its last record written by then */
    const char *stopped;     /* why it stopped: "max_events", "rate", "duration",
                                "owner_exit", "destroyed"; set as soon as it is
                                asked to stop (it admits no event from then on),
                                while live may stay true until the stop is done;
                                NULL before */
    uint64_t written;        /* events written into its sink (or messages sent) */
    uint64_t lost;           /* events lost: full rings (drop policy), the rate */
} tvm_session_info;

/* What a session is and has done so far (the default session's too). */
tvm_status tvm_session_info_get(tvm_vm *vm, tvm_session s, tvm_session_info *out);

/* Waits until every event the session wrote so far reached its sink
 * (holding nothing another thread's call needs: a callback the collector
 * runs meanwhile may set patterns, load code, create sessions).
 * TVM_ERR_BADARG from a process or from a sink (a trace callback of any
 * session, on a collector thread: it would wait for itself). */
tvm_status tvm_session_flush(tvm_vm *vm, tvm_session s);

/*
 * Whether the session's output failed, and why: TVM_OK while every write
 * of its sink succeeded; TVM_ERR_IO from its first failure on, with what
 * was being written, its format and the OS's reason, e.g.
 * "tvm_session_error: writing the trace to /dev/full (text) failed: No
 * space left on device; events from then on are missing" (the output:
 * the `path`, "DIR/sched_0" or "DIR/metadata" of a CTF directory, "fd 5",
 * "stderr" or "the caller's FILE *"; "Broken pipe" for a pipe or socket
 * whose reader went away, which never raises SIGPIPE).  The sink goes on
 * and what it writes after a failure may be missing.  A failure is kept
 * until the session's next pipeline starts (tvm_trace_start for the
 * default session, after tvm_trace_stop returned TVM_ERR_IO), so it may be
 * asked for after the stop; tvm_session_destroy reports it itself.
 * Call tvm_session_flush first to include the events written so far.
 * TVM_ERR_NOTFOUND for a session destroyed ("no session N").  Any thread,
 * a process and a trace callback too (it waits for nothing).
 */
tvm_status tvm_session_error(tvm_vm *vm, tvm_session s, tvm_error *err);

/* The session variants: as the calls above, for session s.  A session
 * that is destroyed gives TVM_ERR_NOTFOUND (with err: "no session N"),
 * one a limit stopped TVM_ERR_BADARG ("session N stopped: max_events");
 * either way nothing changes. */
tvm_status tvm_session_trace_pattern(tvm_vm *vm, tvm_session s, const char *pattern,
                                     const char *match_spec, tvm_tp_action how, unsigned flags,
                                     tvm_pid meta_tracer, int *matched, tvm_error *err);
tvm_status tvm_session_trace_flags(tvm_vm *vm, tvm_session s, tvm_pid pid, unsigned flags,
                                   bool on, tvm_error *err);
tvm_status tvm_session_trace_flags_all(tvm_vm *vm, tvm_session s, tvm_trace_scope scope,
                                       unsigned flags, bool on, tvm_error *err);
/* pid 0: the session's flags for new processes. */
tvm_status tvm_session_trace_flags_get(tvm_vm *vm, tvm_session s, tvm_pid pid,
                                       unsigned *flags, tvm_error *err);
/* tvm_trace_info for session s (env: where the answer is built; any
 * thread that owns env). */
tvm_status tvm_session_trace_info(tvm_env *env, tvm_session s, const char *mfa,
                                  const char *item, tvm_term *out, tvm_error *err);
tvm_status tvm_session_call_count(tvm_vm *vm, tvm_session s, const char *mfa, int64_t *count);
tvm_status tvm_session_call_time(tvm_vm *vm, tvm_session s, const char *mfa,
                                 tvm_call_time_entry *out, size_t max, size_t *n);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* TRACEVM_H */
