/*
 * trace/tr_outfail.h - a session's output failure: the first write of its
 * sink that failed, with the OS's reason and what was being written, kept
 * for the API to report (tvm_session_error, tvm_session_destroy).
 *
 * Threads.  A failure is recorded by whichever thread's write failed: a
 * collector thread (every sink's event and flush; a raw sink has one per
 * ring, which may fail at the same time), the thread that starts a
 * pipeline (a sink's open: CTF metadata) and the thread that frees it
 * (a sink's close, the stream's fclose).  It is read by any API thread,
 * while the pipeline runs or after it is gone.  `lock`, a leaf (held only
 * to copy the fields in or out, never while waiting for anything),
 * orders them: the first writer under it fills the record, later ones
 * find it failed and leave it; a reader copies it whole under it.  A
 * reset (a new pipeline of the session, a new session in the slot) is
 * made under it too, before the pipeline's threads start.
 */
#ifndef TRACE_TR_OUTFAIL_H
#define TRACE_TR_OUTFAIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/common.h"

typedef struct TrOutFail {
    pthread_mutex_t lock;
    /* Under lock.  id: the session the record belongs to (its sink alone
     * writes here; a reader asking about another session finds none).
     * dest: the pipeline's output as messages name it ("/dev/full",
     * "fd 5", "stderr", "the caller's FILE *"), set by the reset before
     * the pipeline starts.  failed, errnum, where: the first failure,
     * where = the file that failed (a CTF stream) or dest, then the
     * format in parentheses: "/dev/full (text)". */
    uint64_t id;
    bool failed;
    int errnum;
    char dest[VM_MSG_PATH_MAX + 1];
    char where[VM_MSG_PATH_MAX + 32];
} TrOutFail;

void tr_outfail_init(TrOutFail *f);
void tr_outfail_destroy(TrOutFail *f);

/* No failure, for session `id` writing to `dest` (may be ""). */
void tr_outfail_reset(TrOutFail *f, uint64_t id, const char *dest);

/* Records errnum as the failure unless one was recorded before: `file`
 * is what failed (NULL: the record's dest), `format` the sink's name
 * ("text", "jsonl", "chrome", "ctf", "ctf-raw").  Any thread. */
void tr_outfail_set(TrOutFail *f, int errnum, const char *file, const char *format);

/* Whether a failure is recorded (for the session the record is for). */
bool tr_outfail_failed(TrOutFail *f);

/* Whether session id's output failed; if so, the message in buf:
 * "writing the trace to /dev/full (text) failed: No space left on
 * device; events from then on are missing".  Any thread. */
bool tr_outfail_get(TrOutFail *f, uint64_t id, char *buf, size_t n);

#endif /* TRACE_TR_OUTFAIL_H */
