/*
 * tests/unit/trace/test_fdout.c - a sink's output to a descriptor
 * (trace/tr_fdout.c) while its pipeline closes: a reader that keeps
 * reading gets every byte however slowly it reads, and one that stops is
 * given up on after a second, with the bytes it did not take counted
 * exactly.
 *
 * The pipe holds one page (F_SETPIPE_SZ 4096), so the writer finds it
 * full after every page and must wait for the reader each time.
 */
#define _GNU_SOURCE   /* F_SETPIPE_SZ */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

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
    FILE *f = tr_fdout_open(fd, &o);
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
