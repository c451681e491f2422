/*
 * trace/tr_outfail.c - a session's output failure, recorded once and
 * reported by the API (trace/tr_outfail.h has the threads and the lock).
 */
#include "trace/tr_outfail.h"

#include <stdio.h>
#include <string.h>

void tr_outfail_init(TrOutFail *f)
{
    pthread_mutex_init(&f->lock, NULL);
    f->id = 0;
    f->failed = false;
    f->dest[0] = f->where[0] = '\0';
}

void tr_outfail_destroy(TrOutFail *f)
{
    pthread_mutex_destroy(&f->lock);
}

void tr_outfail_reset(TrOutFail *f, uint64_t id, const char *dest)
{
    char pb[VM_MSG_PATH_MAX + 1];
    pthread_mutex_lock(&f->lock);
    f->id = id;
    f->failed = false;
    f->errnum = 0;
    snprintf(f->dest, sizeof f->dest, "%s", vm_msg_path(dest, pb));
    f->where[0] = '\0';
    pthread_mutex_unlock(&f->lock);
}

void tr_outfail_set(TrOutFail *f, int errnum, const char *file, const char *format)
{
    char pb[VM_MSG_PATH_MAX + 1];
    pthread_mutex_lock(&f->lock);
    if (!f->failed) {
        f->failed = true;
        f->errnum = errnum;
        snprintf(f->where, sizeof f->where, "%s (%s)", file ? vm_msg_path(file, pb) : f->dest,
                 format);
    }
    pthread_mutex_unlock(&f->lock);
}

bool tr_outfail_failed(TrOutFail *f)
{
    pthread_mutex_lock(&f->lock);
    bool failed = f->failed;
    pthread_mutex_unlock(&f->lock);
    return failed;
}

bool tr_outfail_get(TrOutFail *f, uint64_t id, char *buf, size_t n)
{
    pthread_mutex_lock(&f->lock);
    bool failed = f->failed && f->id == id;
    if (failed)
        snprintf(buf, n, "writing the trace to %s failed: %s; events from then on are missing",
                 f->where, strerror(f->errnum));
    pthread_mutex_unlock(&f->lock);
    return failed;
}
