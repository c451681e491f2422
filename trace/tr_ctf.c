/*
 * trace/tr_ctf.c - what the CTF sinks share (trace/tr_ctf.h).
 */
#include "trace/tr_ctf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "trace/tr_sink.h"
#include "vm/common.h"

static bool dir_is_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = false;
    closedir(d);
    return empty;
}

/* Creates dir/metadata empty (the sink writes it whole when it opens):
 * a directory where the file cannot be made (read-only, its path too
 * long) fails the start here, with the reason, rather than leave a
 * pipeline that writes nothing, its sink dropped at open with a line on
 * stderr. */
static bool metadata_create(const char *dir, char *err, size_t errlen)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/metadata", dir);
    FILE *f = NULL;
    if (n < 0 || (size_t)n >= sizeof path)
        errno = ENAMETOOLONG;
    else
        f = fopen(path, "w");
    if (!f || fclose(f) != 0) {
        int e = errno;
        char pb[VM_MSG_PATH_MAX + 1];
        snprintf(err, errlen, "trace: cannot create CTF metadata %s/metadata: %s",
                 vm_msg_path(dir, pb), strerror(e));
        return false;
    }
    return true;
}

static bool dir_prepare(const char *dir, bool *made_out, char *err, size_t errlen)
{
    bool made = mkdir(dir, 0777) == 0;
    int e = errno;
    char pb[VM_MSG_PATH_MAX + 1];
    if (!made && e != EEXIST) {
        snprintf(err, errlen, "trace: cannot create CTF directory %s: %s",
                 vm_msg_path(dir, pb), strerror(e));
        return false;
    }
    if (!dir_is_empty(dir)) {
        snprintf(err, errlen, "trace: CTF directory %s is not empty (or not a directory)",
                 vm_msg_path(dir, pb));
        return false;
    }
    if (!metadata_create(dir, err, errlen)) {
        /* Nothing left that was not there: the directory this call made
         * goes again (empty: the metadata was not made). */
        if (made)
            rmdir(dir);
        return false;
    }
    *made_out = made;
    return true;
}

static void make_uuid(uint8_t u[16])
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, u, 16) : -1;
    if (fd >= 0)
        close(fd);
    if (got != 16) {
        /* No urandom: time and pid still tell traces apart. */
        uint64_t a = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull;
        uint64_t b = (uint64_t)getpid() * 0xBF58476D1CE4E5B9ull ^ (uint64_t)clock();
        memcpy(u, &a, 8);
        memcpy(u + 8, &b, 8);
    }
    u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);   /* version 4 */
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);   /* RFC 4122 variant */
}

bool tr_ctf_out_init(TrCtfOut *o, const char *dir, int64_t clock_offset_ns, char *err,
                     size_t errlen)
{
    bool made = false;
    if (!dir_prepare(dir, &made, err, errlen))
        return false;
    o->made_dir = made;
    o->dir = vm_strndup(dir, strlen(dir));
    o->clock_offset = clock_offset_ns;
    o->failed = false;
    make_uuid(o->uuid);
    return true;
}

void tr_ctf_out_free(TrCtfOut *o)
{
    free(o->dir);
    o->dir = NULL;
}

void tr_ctf_out_discard(TrCtfOut *o, int nscheds)
{
    /* Only names this start made can be in the directory: it was empty
     * when the start began (dir_prepare), and nothing else writes there
     * while the trace is ours.  A name that does not fit the buffer is
     * skipped rather than cut (a cut one could name another file); no
     * such name was created either (the sinks use the same buffer). */
    char path[TR_CTF_PATH_MAX];
    for (int ring = 0; ring <= nscheds; ring++) {
        tr_ctf_stream_path(o->dir, ring, nscheds, path, sizeof path);
        if (strlen(path) < sizeof path - 1)
            unlink(path);
    }
    if ((size_t)snprintf(path, sizeof path, "%s/metadata", o->dir) < sizeof path - 1)
        unlink(path);
    if (o->made_dir)
        rmdir(o->dir);
    tr_ctf_out_free(o);
}

void tr_ctf_failed(TrSink *sink, TrCtfOut *o, int errnum, const char *file)
{
    tr_sink_failed(sink, errnum, file);
    o->failed = true;
}

void tr_ctf_packet_header(uint8_t *out, const uint8_t uuid[16], int ring)
{
    uint32_t magic = TR_CTF_MAGIC, stream_id = 0;
    uint64_t instance = (uint64_t)ring;
    memcpy(out, &magic, 4);
    memcpy(out + 4, uuid, 16);
    memcpy(out + 20, &stream_id, 4);
    memcpy(out + 24, &instance, 8);
}

void tr_ctf_stream_path(const char *dir, int ring, int nscheds, char *out, size_t n)
{
    if (ring == nscheds)
        snprintf(out, n, "%s/shared", dir);
    else
        snprintf(out, n, "%s/sched_%d", dir, ring);
}

static void uuid_text(const uint8_t *u, char out[37])
{
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
             u[12], u[13], u[14], u[15]);
}

void tr_ctf_preamble(FILE *f, const uint8_t uuid[16])
{
    char u[37];
    uuid_text(uuid, u);
    fprintf(f,
            "/* CTF 1.8 */\n\n"
            "typealias integer { size = 8;  align = 8; signed = false; } := uint8_t;\n"
            "typealias integer { size = 16; align = 8; signed = false; } := uint16_t;\n"
            "typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n"
            "typealias integer { size = 32; align = 8; signed = true; } := int32_t;\n"
            "typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n"
            "typealias integer { size = 64; align = 8; signed = true; } := int64_t;\n\n"
            "trace {\n\tmajor = 1;\n\tminor = 8;\n\tuuid = \"%s\";\n\tbyte_order = le;\n"
            "\tpacket.header := struct {\n\t\tuint32_t magic;\n\t\tuint8_t  uuid[16];\n"
            "\t\tuint32_t stream_id;\n\t\tuint64_t stream_instance_id;\n\t};\n};\n\n"
            "env {\n\tdomain = \"tracevm\";\n\ttracer_name = \"tracevm\";\n"
            "\ttracer_major = 0;\n\ttracer_minor = 1;\n",
            u);
}

void tr_ctf_clock(FILE *f, const char *name, const uint8_t uuid[16], const char *descr,
                  uint64_t freq, int64_t offset_ns)
{
    char u[37];
    uuid_text(uuid, u);
    int64_t off_s = offset_ns / 1000000000, off_ns = offset_ns % 1000000000;
    if (off_ns < 0) {
        off_s--;
        off_ns += 1000000000;
    }
    /* offset is in cycles of the clock, below one second. */
    uint64_t off_cycles =
        (uint64_t)(((unsigned __int128)(uint64_t)off_ns * freq) / 1000000000u);
    fprintf(f,
            "clock {\n\tname = \"%s\";\n\tuuid = \"%s\";\n\tdescription = \"%s\";\n"
            "\tfreq = %llu;\n\tprecision = 1;\n\toffset_s = %lld;\n\toffset = %llu;\n"
            "\tabsolute = true;\n};\n\n",
            name, u, descr, (unsigned long long)freq, (long long)off_s,
            (unsigned long long)off_cycles);
}
