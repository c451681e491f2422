/*
 * breakpoints/bp.h - the breakpoint engine's interface to the rest of the
 * VM: trace_pattern and trace_info on parsed patterns, the module-reload
 * hook, and the engine's lifetime.
 */
#ifndef BREAKPOINTS_BP_H
#define BREAKPOINTS_BP_H

#include <stdbool.h>
#include <stddef.h>

#include "vm/module.h"
#include "vm/native.h"
#include "vm/hook.h"
#include "vm/process.h"

/* mod:fun/arity with trailing wildcards (any_* set from the first one on),
 * or on_load: modules loaded later. */
typedef struct BpPattern {
    Atom mod, fun;
    int arity;
    bool any_mod, any_fun, any_arity;
    bool on_load;
    bool unknown;        /* a module or function name that is no atom: matches nothing */
} BpPattern;

/* Parses "m:f/a", "m:f/_", "m:_/_", "_:_/_" or "on_load"; false with a
 * reason.  Makes no atom (a name that is none matches nothing). */
bool bp_pattern_parse(const char *text, BpPattern *out, char *why, size_t whylen);

/*
 * What one trace_pattern does to each function it matches.  `ms` is the
 * match spec of the call trace, or with TVM_TP_META of the meta trace
 * (NULL: every call); the engine takes its own references to it.
 */
typedef struct BpRequest {
    tvm_tp_action how;
    unsigned flags;            /* TVM_TP_*; 0 means TVM_TP_GLOBAL */
    struct TrMs *ms;
    uint64_t meta_tracer;      /* TVM_TP_META: the tracer's pid */
} BpRequest;

/* Checks that the action and flags go together for the pattern (on_load
 * takes no meta; pause and restart change nothing on it, as BEAM, which
 * returns 0); false with a reason. */
bool bp_request_check(const BpPattern *pat, const BpRequest *req, char *why, size_t whylen);

/*
 * Runs trace_pattern for session sid (the request must have passed the
 * checks above): takes the code-modification permission, runs the staged
 * sequence and returns the number of functions matched, or -1 when sid is
 * not live (nothing changes).  Any thread; a calling process is
 * suspended while it waits.  on_load only records the flags (0).
 */
int bp_trace_pattern(tvm_vm *vm, unsigned sid, const BpPattern *pat, const BpRequest *req);

/* Removes every breakpoint of session sid (its on_load flags too) with
 * the staged sequence; the permission held (breakpoints/bp_session.c). */
void bp_remove_session(tvm_vm *vm, unsigned sid);

/* trace_info items. */
typedef enum BpInfoItem {
    BP_INFO_TRACED, BP_INFO_CALL_COUNT, BP_INFO_ALL, BP_INFO_MATCH_SPEC, BP_INFO_META,
    BP_INFO_META_MATCH_SPEC, BP_INFO_CALL_TIME
} BpInfoItem;

/* {Item, Value} for function mod:fun/arity, built on p's heap. */
/* The item named `name` ("traced", "match_spec", ...); false if none. */
bool bp_info_item(const char *name, BpInfoItem *out);

Term bp_trace_info(Process *p, unsigned sid, Atom mod, Atom fun, int arity, BpInfoItem item);

/* {Item, Value} for on_load: the flags modules loaded later get. */
Term bp_trace_info_on_load(Process *p, unsigned sid, BpInfoItem item);

/* The call count of a function in session sid; false if it has no
 * counter or does not exist. */
bool bp_call_count(tvm_vm *vm, unsigned sid, Atom mod, Atom fun, int arity, int64_t *count);

/* The call time of a function per process (malloc'd, by pid) in *out;
 * false if it has no call time data or does not exist.  Reads while every
 * scheduler writes (breakpoints/bp_time.c). */
struct BpTimeSample;
bool bp_call_time(tvm_vm *vm, unsigned sid, Atom mod, Atom fun, int arity,
                  struct BpTimeSample **out, size_t *n);

/* Loading a module: vm_hook_module_replaced and vm_hook_module_loading
 * (vm/hook.h, defined in bp_pattern.c). */

/* The engine's lifetime (tvm_new / tvm_destroy, api/root.c), and its
 * natives: erlang:trace_pattern/3 and erlang:trace_info/2 (bp_api.c). */
void bp_engine_init(tvm_vm *vm);
void bp_engine_destroy(tvm_vm *vm);
VmNativeTable bp_natives(void);

/* Thread-progress waits the engine has made so far (a statistic for the
 * pausefree benchmark).  Any thread; a relaxed read, ordered with nothing. */
uint64_t bp_waits(tvm_vm *vm);

/* The time those waits took in all, ns (a statistic, as above). */
uint64_t bp_wait_ns(tvm_vm *vm);

#endif /* BREAKPOINTS_BP_H */
