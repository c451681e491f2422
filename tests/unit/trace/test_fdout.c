/*
 * tests/unit/trace/test_fdout.c - a sink's output to a descriptor
 * (trace/tr_fdout.c) while its pipeline closes: a reader that keeps
 * reading gets every byte however slowly it reads, and one that stops is
 * given up on after a second, with the bytes it did not take counted
 * exactly.
 *
 * The pipe holds one page (F_SETPIPE_SZ 4096), so the writer finds it
 * full after every page and must wait for the reader each time.
 *
 * A descriptor that is not open for writing is refused when the session
 * starts (before, every write failed and the events were counted as
 * written).
 */
#define _GNU_SOURCE   /* F_SETPIPE_SZ */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "trace/tr_fdout.h"

enum { TOTAL = 65536, PAGE = 4096 };

typedef struct Reader {
    int fd;
    size_t got;
    bool bytes_ok;
} Reader;

/* Reads a page every millisecond until end of file: never near the
 * second a closing stream waits for its reader, and still slower than
 * the writer, which so finds the pipe full after every page. */
static void *steady_reader(void *arg)
{
    Reader *r = arg;
    char buf[PAGE];
    struct timespec nap = { 0, 1000000 };
    for (;;) {
        ssize_t k = read(r->fd, buf, sizeof buf);
        if (k == 0)
            break;
        if (k < 0)
            continue;   /* EINTR */
        for (ssize_t i = 0; i < k; i++)
            if (buf[i] != (char)((r->got + (size_t)i) % 251))
                r->bytes_ok = false;
        r->got += (size_t)k;
        nanosleep(&nap, NULL);
    }
    return NULL;
}

/* The pipe, one page; the write end non-blocking, as the control
 * endpoint's relay makes it. */
static void one_page_pipe(int p[2])
{
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    cr_assert_geq(fcntl(p[1], F_SETPIPE_SZ, PAGE), PAGE);
    cr_assert_eq(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
}

/* Writes TOTAL bytes (i % 251) through a closing tr_fdout stream;
 * returns the bytes it dropped. */
static uint64_t write_closing(int fd)
{
    TrFdOut *o;
    FILE *f = tr_fdout_open(fd, NULL, "text", &o);
    cr_assert(f);
    tr_fdout_closing(o);
    static char data[TOTAL];
    for (size_t i = 0; i < TOTAL; i++)
        data[i] = (char)(i % 251);
    cr_assert_eq(fwrite(data, 1, TOTAL, f), TOTAL);
    fclose(f);
    uint64_t dropped = tr_fdout_dropped(o);
    tr_fdout_free(o);
    return dropped;
}

/* A closing stream writes TOTAL bytes to `reader` on its own thread,
 * which must get every one of them, intact. */
static void gets_every_byte(void *(*reader)(void *))
{
    int p[2];
    one_page_pipe(p);
    Reader r = { .fd = p[0], .bytes_ok = true };
    pthread_t t;
    pthread_create(&t, NULL, reader, &r);
    uint64_t dropped = write_closing(p[1]);
    close(p[1]);
    pthread_join(t, NULL);
    close(p[0]);
    cr_expect_eq(dropped, 0, "%llu bytes dropped", (unsigned long long)dropped);
    cr_expect_eq(r.got, TOTAL, "%zu bytes read", r.got);
    cr_expect(r.bytes_ok);
}

Test(fdout, a_reader_that_keeps_reading_gets_every_byte, .timeout = 60)
{
    /* 16 pages at one per ms: the writer finds the pipe full 15 times
     * while closing; the reader never lets a slice pass, so nothing is
     * dropped (before, the second full pipe gave up at once: 57,344
     * bytes dropped). */
    gets_every_byte(steady_reader);
}

/* Sleeps 200 ms, four slices of the stream's poll, then reads as
 * steady_reader: a thread starved of CPU for a while, as a control
 * client's relay was on a loaded machine. */
static void *late_reader(void *arg)
{
    struct timespec late = { 0, 200 * 1000000 };
    nanosleep(&late, NULL);
    return steady_reader(arg);
}

Test(fdout, a_reader_late_by_several_slices_gets_every_byte, .timeout = 60)
{
    /* The stream is closing and finds the pipe full after the first
     * page; the reader takes nothing for 200 ms, then everything.  (When
     * a closing stream gave up after one 50 ms slice without progress,
     * 61,440 bytes were dropped here.) */
    gets_every_byte(late_reader);
}

Test(fdout, a_reader_that_stops_is_given_up_on_after_a_second, .timeout = 60)
{
    /* Nobody reads while the stream writes: the pipe takes one page, a
     * second (TR_FDOUT_GIVE_UP_MS) passes without progress, and the rest
     * is dropped, counted. */
    int p[2];
    one_page_pipe(p);
    uint64_t dropped = write_closing(p[1]);
    close(p[1]);
    Reader r = { .fd = p[0], .bytes_ok = true };
    steady_reader(&r);
    close(p[0]);
    cr_expect_eq(dropped, TOTAL - PAGE);
    cr_expect_eq(r.got, PAGE);
    cr_expect(r.bytes_ok);
}

/* tvm_session_create with opts writing to fd: its status, and err's
 * message in msg. */
static tvm_status session_on(tvm_vm *vm, int fd, char *msg, size_t size)
{
    tvm_trace_options o = { .size = sizeof o, .use_fd = true, .fd = fd };
    tvm_session s;
    tvm_error err;
    tvm_status st = tvm_session_create(vm, "fd", &o, &s, &err);
    snprintf(msg, size, "%s", err.message);
    if (st == TVM_OK)
        cr_assert_eq(tvm_session_destroy(vm, s, &err), TVM_OK, "%s", err.message);
    return st;
}

Test(fdout, a_descriptor_not_open_for_writing_is_refused_at_the_start)
{
    tvm_vm *vm = tvm_new(&(tvm_config){ .size = sizeof(tvm_config), .schedulers = 1 });
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    /* A closed descriptor: a number far above any this program opens, so
     * that no thread of the VM takes it meanwhile. */
    int closed = fcntl(p[0], F_DUPFD_CLOEXEC, 900);
    cr_assert_geq(closed, 900);
    cr_assert_eq(close(closed), 0);
    char msg[4096], want[128];
    const struct {
        int fd;
        tvm_status st;
    } cases[] = { { closed, TVM_ERR_IO }, { p[0], TVM_ERR_IO }, { p[1], TVM_OK } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(session_on(vm, cases[i].fd, msg, sizeof msg), cases[i].st, "fd %d: %s",
                     cases[i].fd, msg);
        if (cases[i].st == TVM_OK)
            snprintf(want, sizeof want, "%s", "");
        else
            snprintf(want, sizeof want,
                     "tvm_session_create: cannot write to descriptor %d: Bad file descriptor",
                     cases[i].fd);
        cr_assert_str_eq(msg, want);
    }
    /* The refused ones left nothing live: the write end's session had its
     * slot, and every other slot is still free (TVM_SESSIONS_MAX - 1
     * sessions besides the default one). */
    tvm_session s[TVM_SESSIONS_MAX];
    tvm_error err;
    FILE *null = fopen("/dev/null", "w");
    tvm_trace_options quiet = { .size = sizeof quiet, .file = null };
    for (int i = 0; i < TVM_SESSIONS_MAX - 1; i++)
        cr_assert_eq(tvm_session_create(vm, "slot", &quiet, &s[i], &err), TVM_OK, "%d: %s", i,
                     err.message);
    cr_assert_eq(tvm_session_create(vm, "slot", &quiet, &s[TVM_SESSIONS_MAX - 1], &err),
                 TVM_ERR_LIMIT);
    for (int i = 0; i < TVM_SESSIONS_MAX - 1; i++)
        cr_assert_eq(tvm_session_destroy(vm, s[i], &err), TVM_OK);
    fclose(null);
    close(p[0]);
    close(p[1]);
    tvm_destroy(vm);
}
