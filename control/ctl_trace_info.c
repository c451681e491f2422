/*
 * control/ctl_trace_info.c - the control endpoint's trace_info command:
 * what every live trace session has set on one function, as
 * erlang:trace_info/3 gives it per session (docs/control.md).
 *
 *   trace_info MOD:FUN/ARITY [ITEM]
 *
 * One payload line per live session, by slot (the default session first):
 * `session ID NAME: {Item,Value}` (ITEM: traced, match_spec, meta,
 * meta_match_spec, call_count, call_time or all, the default).  An
 * operator sees what is armed in the VM, and which client armed it; a
 * client that left leaves no line (its session is gone, and with it
 * every breakpoint it set).
 */
#define _GNU_SOURCE
#include "control/ctl_internal.h"

#include <stdio.h>
#include <string.h>

#include "trace/tr_session.h"
#include "vm/config.h"

/* Session s's line; false after an error reply (a bad MFA or item). */
static bool session_line(CtlClient *c, tvm_env *env, tvm_session s, const char *mfa,
                         const char *item)
{
    tvm_session_info in;
    tvm_term t;
    tvm_error err;
    if (tvm_session_info_get(c->srv->vm, s, &in) != TVM_OK || in.stopped)
        return true;   /* destroyed or stopped meanwhile: not live */
    tvm_status st = tvm_session_trace_info(env, s, mfa, item, &t, &err);
    if (st == TVM_ERR_NOTFOUND)
        return true;
    if (st != TVM_OK) {
        /* A session that a limit stopped since (another client's trace
         * at its --max-events) answers with an error, as a bad MFA or
         * item does: it is asked again whether it still lives. */
        if (tvm_session_info_get(c->srv->vm, s, &in) != TVM_OK || in.stopped)
            return true;
        ctl_error(c, "trace_info: %s", ctl_api_why(&err));
        return false;
    }
    char text[4096], line[4096 + 320];
    tvm_format_term(env, t, text, sizeof text);
    int n = snprintf(line, sizeof line, "session %llu %s: %s", (unsigned long long)s.id,
                     s.id ? in.name : "default", text);
    ctl_line(c, line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
    return true;
}

void ctl_cmd_trace_info(CtlClient *c, int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        ctl_error(c, "trace_info: expects MOD:FUN/ARITY [ITEM]");
        return;
    }
    const char *item = argc == 3 ? argv[2] : "all";
    tvm_vm *vm = c->srv->vm;
    tvm_env *env = tvm_env_new(vm);
    /* The reply is built whole, so that an error found at the first
     * session (the MFA and item are checked there) is the only reply. */
    ctl_ok(c);
    bool ok = true;
    for (unsigned slot = 0; ok && slot < VM_SESSIONS_MAX; slot++) {
        uint64_t id = tr_session_id(vm, tr_session_at(vm, slot));
        if (slot == 0 || id != 0)
            ok = session_line(c, env, (tvm_session){ id }, argv[1], item);
    }
    tvm_env_free(env);
    if (ok)
        ctl_end(c);
}
