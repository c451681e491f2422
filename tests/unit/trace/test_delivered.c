/*
 * tests/unit/trace/test_delivered.c - erlang:trace_delivered/1's
 * collector side: marks (tr_pipeline_mark) answered once every record
 * published before them, in every ring, reached the sink (a decoded sink
 * merging three rings, and a raw sink with a collector thread per ring),
 * an empty pipeline's and an unstarted one's, a mark open while the
 * pipeline is freed (answered once, after its last drain); and through
 * the VM: a reply after a session's stop that came with the request open,
 * a VM destroyed with one open (answered or dropped, and freed: nothing
 * open afterwards, ASan clean), a caller that exits before its reply,
 * two sessions (one lossless, its process waiting for room), and badarg
 * from a call context.  The sink
 * is held shut where a request must stay open: each step waits for a
 * state the previous one produces, never for a time.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "tests/unit/helpers.h"
#include "tests/unit/trace/tr_fixture.h"
#include "trace/tr_delivered.h"
#include "trace/tr_internal.h"
#include "trace/tr_session.h"
#include "trace/tr_sink.h"
#include "trace/tr_vm_internal.h"
#include "vm/atomics.h"

/* ==== a sink the test can hold shut ==== */

/* Written by the collector thread under `lock`, read by the test under
 * it. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool shut, held;
    uint64_t events, bytes;
    uint64_t events2;          /* a second session's sink (never shut) */
} sink = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void sink_reset(bool shut)
{
    pthread_mutex_lock(&sink.lock);
    sink.shut = shut;
    sink.held = false;
    sink.events = sink.bytes = sink.events2 = 0;
    pthread_mutex_unlock(&sink.lock);
}

/* Waits while shut (saying so), then counts. */
static void sink_take(uint64_t events, uint64_t bytes)
{
    pthread_mutex_lock(&sink.lock);
    sink.held = true;
    pthread_cond_broadcast(&sink.cond);
    while (sink.shut)
        pthread_cond_wait(&sink.cond, &sink.lock);
    sink.events += events;
    sink.bytes += bytes;
    pthread_mutex_unlock(&sink.lock);
}

static void sink_open(void)
{
    pthread_mutex_lock(&sink.lock);
    sink.shut = false;
    pthread_cond_broadcast(&sink.cond);
    pthread_mutex_unlock(&sink.lock);
}

static void sink_wait_held(void)
{
    pthread_mutex_lock(&sink.lock);
    while (!sink.held)
        pthread_cond_wait(&sink.cond, &sink.lock);
    pthread_mutex_unlock(&sink.lock);
}

static uint64_t sink_events(uint64_t *second)
{
    pthread_mutex_lock(&sink.lock);
    uint64_t n = sink.events;
    *second = sink.events2;
    pthread_mutex_unlock(&sink.lock);
    return n;
}

static void on_event(const TrEvent *ev, void *data)
{
    (void)data;
    if (ev->kind != TR_K_LOST)
        sink_take(1, 0);
}

/* ==== marks: how many answers, and the sink's count at each ==== */

typedef struct Answers {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int n;
    uint64_t events_at[8], bytes_at[8];
} Answers;

static Answers answers;

static void answers_reset(void)
{
    pthread_mutex_lock(&answers.lock);
    answers.n = 0;
    pthread_mutex_unlock(&answers.lock);
}

static void on_mark(void *data)
{
    (void)data;
    pthread_mutex_lock(&sink.lock);
    uint64_t ev = sink.events, by = sink.bytes;
    pthread_mutex_unlock(&sink.lock);
    pthread_mutex_lock(&answers.lock);
    if (answers.n < 8) {
        answers.events_at[answers.n] = ev;
        answers.bytes_at[answers.n] = by;
    }
    answers.n++;
    pthread_cond_broadcast(&answers.cond);
    pthread_mutex_unlock(&answers.lock);
}

static int answers_wait(int n)
{
    pthread_mutex_lock(&answers.lock);
    while (answers.n < n)
        pthread_cond_wait(&answers.cond, &answers.lock);
    int got = answers.n;
    pthread_mutex_unlock(&answers.lock);
    return got;
}

static int answers_now(void)
{
    pthread_mutex_lock(&answers.lock);
    int got = answers.n;
    pthread_mutex_unlock(&answers.lock);
    return got;
}

static void setup(void)
{
    vm_atoms_init();
    pthread_mutex_init(&answers.lock, NULL);
    pthread_cond_init(&answers.cond, NULL);
    answers_reset();
    sink_reset(false);
}

TestSuite(delivered, .init = setup, .timeout = 120);

/* ==== the pipeline ==== */

static TrPipeline *pipeline(int nscheds, TrSink *s)
{
    char err[256];
    TrOptions o = { .nscheds = nscheds, .ring_bytes = 1 << 16 };
    TrPipeline *tp = tr_pipeline_new(&o, err, sizeof err);
    cr_assert(tp, "%s", err);
    tr_pipeline_add_sink(tp, s);
    return tp;
}

/* n call events into ring `sched` (-1: the shared ring). */
static void emit_n(TrPipeline *tp, int sched, int n)
{
    Term arg = make_small(7);
    TrEmit ev = { .kind = TR_K_CALL, .pid = 1, .mod = ATOM_TRUE, .fun = ATOM_TRUE,
                  .arity = 1, .terms = &arg, .nterms = 1 };
    for (int i = 0; i < n; i++)
        cr_assert_eq(tr_emit(tp, sched, &ev), TR_OK);
}

/* Each ring written by its own thread, as schedulers write theirs. */
typedef struct Producer {
    TrPipeline *tp;
    int sched, n;
} Producer;

static void *produce(void *arg)
{
    Producer *p = arg;
    emit_n(p->tp, p->sched, p->n);
    return NULL;
}

static void emit_on_three_rings(TrPipeline *tp, int n0, int n1, int nshared)
{
    Producer p[3] = { { tp, 0, n0 }, { tp, 1, n1 }, { tp, -1, nshared } };
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, produce, &p[i]), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
}

Test(delivered, a_mark_comes_after_every_earlier_event_of_every_ring)
{
    TrPipeline *tp = pipeline(2, tr_sink_callback_new(on_event, NULL));
    cr_assert(tr_pipeline_start(tp));
    emit_on_three_rings(tp, 300, 200, 100);
    cr_assert(tr_pipeline_mark(tp, on_mark, NULL));
    cr_assert_eq(answers_wait(1), 1);
    cr_assert_eq(answers.events_at[0], 600);
    /* A second round: its mark counts the first round's too. */
    emit_on_three_rings(tp, 10, 20, 30);
    cr_assert(tr_pipeline_mark(tp, on_mark, NULL));
    cr_assert_eq(answers_wait(2), 2);
    cr_assert_eq(answers.events_at[1], 660);
    tr_pipeline_free(tp);
    cr_assert_eq(answers_now(), 2, "a mark answered twice");
}

Test(delivered, a_mark_on_empty_rings_is_answered)
{
    TrPipeline *tp = pipeline(2, tr_sink_callback_new(on_event, NULL));
    cr_assert(tr_pipeline_start(tp));
    cr_assert(tr_pipeline_mark(tp, on_mark, NULL));
    cr_assert_eq(answers_wait(1), 1);
    cr_assert_eq(answers.events_at[0], 0);
    tr_pipeline_free(tp);
}

Test(delivered, a_pipeline_that_never_started_refuses_a_mark)
{
    TrPipeline *tp = pipeline(1, tr_sink_callback_new(on_event, NULL));
    cr_assert_not(tr_pipeline_mark(tp, on_mark, NULL));
    tr_pipeline_free(tp);
    cr_assert_eq(answers_now(), 0);
}

static void *free_pipeline(void *tp)
{
    tr_pipeline_free(tp);
    return NULL;
}

Test(delivered, a_mark_waits_for_a_held_sink_and_is_answered_by_the_last_drain)
{
    sink_reset(true);
    TrPipeline *tp = pipeline(2, tr_sink_callback_new(on_event, NULL));
    cr_assert(tr_pipeline_start(tp));
    emit_on_three_rings(tp, 50, 40, 30);
    sink_wait_held();   /* the collector is inside the first event */
    cr_assert(tr_pipeline_mark(tp, on_mark, NULL));
    /* Shut, the sink has taken no event whole: the mark cannot be
     * answered yet. */
    cr_assert_eq(answers_now(), 0);
    /* The pipeline is freed with the mark open: its stop waits for the
     * collector, which waits for the sink. */
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, free_pipeline, tp), 0);
    for (;;) {
        pthread_mutex_lock(&tp->lock);
        bool stopping = tp->stop;
        pthread_mutex_unlock(&tp->lock);
        if (stopping)
            break;
        sched_yield();
    }
    cr_assert_eq(answers_now(), 0);
    sink_open();
    pthread_join(t, NULL);
    cr_assert_eq(answers_now(), 1);
    cr_assert_eq(answers.events_at[0], 120);
}

/* A raw sink: each ring has its own collector thread; the mark needs
 * them all.  It counts the bytes of the ranges. */
static void raw_range(TrSink *s, const TrRange *r)
{
    (void)s;
    sink_take(0, r->len);
}

static void raw_close(TrSink *s)
{
    free(s);
}

static const TrSinkOps raw_ops = { .name = "raw-test", .close = raw_close, .range = raw_range,
                                   .event = NULL };

Test(delivered, a_mark_needs_every_collector_thread_of_a_raw_sink)
{
    TrSink *s = calloc(1, sizeof *s);
    s->ops = &raw_ops;
    TrPipeline *tp = pipeline(2, s);
    cr_assert(tr_pipeline_start(tp));
    cr_assert_eq(tp->nworkers, 3);
    emit_on_three_rings(tp, 100, 50, 25);
    uint64_t heads = 0;
    for (int i = 0; i < tp->nrings; i++)
        heads += vm_atomic_load_acquire(&tp->rings[i].head);
    cr_assert(tr_pipeline_mark(tp, on_mark, NULL));
    cr_assert_eq(answers_wait(1), 1);
    /* No lap ended: the ranges are every byte published. */
    cr_assert_eq(answers.bytes_at[0], heads);
    tr_pipeline_free(tp);
}

/* ==== through the VM ==== */

static const char *const src =
    "module td\n"
    "export g/1, run/1, quit/1\n"
    "function g/1 regs 1\n    ret r0\nend\n"
    /* quit(N): g(N), trace_delivered(self()), and the end of the process
     * before the reply */
    "function quit/1 regs 2\n"
    "    move r1, r0\n"
    "    call r1, r1, g/1\n"
    "    self r0\n"
    "    callx r0, r0, erlang:trace_delivered/1\n"
    "    ret r0\n"
    "end\n"
    /* run(N): g(N), ..., g(1), trace_delivered(self()), then the reply's
     * Ref handed to td_host:got/1 (compared with the call's). */
    "function run/1 regs 4\n"
    "loop:\n"
    "    jeqi r0, 0, done\n"
    "    move r1, r0\n"
    "    call r1, r1, g/1\n"
    "    addi r0, r0, -1\n"
    "    jump loop\n"
    "done:\n"
    "    self r0\n"
    "    callx r0, r0, erlang:trace_delivered/1\n"
    "wait:\n"
    "    recv r1, none\n"
    "    accept\n"
    "    getel r2, r1, 3\n"
    "    jne r0, r2, bad\n"
    "    loadk r1, ok\n"
    "    callx r1, r1, td_host:got/1\n"
    "    ret r1\n"
    "bad:\n"
    "    callx r1, r1, td_host:got/1\n"
    "    ret r1\n"
    "none:\n"
    "    loadk r2, infinity\n"
    "    wait r2, to\n"
    "    jump wait\n"
    "to:\n"
    "    jump wait\n"
    "end\n";

/* The reply as the process got it: ok, and the sink's count then.  Set
 * by the process (got), read by the test after joining it. */
static struct {
    bool ok;
    uint64_t events, events2;
    int n;
} got;

static tvm_status host_got(tvm_env *e, int argc, const tvm_term *argv, tvm_term *result,
                           void *data)
{
    (void)argc, (void)data;
    char a[16];
    got.ok = tvm_get_atom(e, argv[0], a, sizeof a) == TVM_OK && !strcmp(a, "ok");
    got.events = sink_events(&got.events2);
    got.n++;
    *result = argv[0];
    return TVM_OK;
}

static void vm_event(const tvm_trace_event *ev, void *data)
{
    if (strcmp(ev->kind, "call") != 0)
        return;
    if (!data) {
        sink_take(1, 0);
        return;
    }
    pthread_mutex_lock(&sink.lock);
    sink.events2++;
    pthread_mutex_unlock(&sink.lock);
}

static tvm_vm *vm;
static tvm_env *env;

/* A VM of `nscheds` schedulers with the program and td:g/1 traced for
 * new processes into the default session's callback sink (`policy`,
 * rings of ring_bytes, 0 for the default). */
static void vm_start(int nscheds, tvm_trace_policy policy, size_t ring_bytes)
{
    tvm_config cfg = { .size = sizeof cfg, .schedulers = nscheds };
    vm = tvm_new(&cfg);
    env = tvm_env_new(vm);
    tvm_error err;
    load_ok(vm, "td", src);
    cr_assert_eq(tvm_register_native(vm, "td_host", "got", 1, host_got, NULL, &err), TVM_OK);
    int m = 0;
    cr_assert_eq(tvm_trace_pattern(vm, "td:g/1", TVM_TP_TRUE, TVM_TP_LOCAL, &m, &err), TVM_OK);
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CALLBACK,
                            .callback = vm_event, .policy = policy, .ring_bytes = ring_bytes };
    cr_assert_eq(tvm_trace_start(vm, &o, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_trace_flags_all(vm, TVM_TRACE_NEW, TVM_TRACE_CALL, true), TVM_OK);
}

static tvm_pid spawn_run(int64_t n)
{
    return spawn_with_int(env, "td", "run", n);
}

/* vm_start on one scheduler, the sink held shut and run(n) spawned;
 * returns once the request is open and the collector held in the sink. */
static tvm_pid start_vm(int64_t n)
{
    vm_start(1, TVM_TRACE_DROP, 0);
    sink_reset(true);
    tvm_pid pid = spawn_run(n);
    while (tr_delivered_open() == 0)
        sched_yield();
    sink_wait_held();
    return pid;
}

static void *stop_trace(void *arg)
{
    (void)arg;
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    return NULL;
}

/* Until the default session's pipeline is unpublished (a stop or a
 * destroy has begun: it then waits for the sink). */
static void wait_unpublished(void)
{
    while (vm_atomic_load_ptr_acquire(&tr_session_at(vm, 0)->out))
        sched_yield();
}

Test(delivered, a_session_stopped_with_a_request_open_answers_it_after_its_events)
{
    memset(&got, 0, sizeof got);
    tvm_pid pid = start_vm(40);
    cr_assert_eq(tr_delivered_open(), 1);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, stop_trace, NULL), 0);
    wait_unpublished();
    cr_assert_eq(tr_delivered_open(), 1);
    sink_open();
    pthread_join(t, NULL);
    tvm_term r;
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    cr_assert_eq(got.n, 1);
    cr_assert(got.ok, "the reply's Ref is not the call's");
    cr_assert_eq(got.events, 40);
    cr_assert_eq(tr_delivered_open(), 0);
    tvm_env_free(env);
    tvm_destroy(vm);
}

Test(delivered, a_caller_that_exits_first_leaves_nothing_open)
{
    vm_start(1, TVM_TRACE_DROP, 0);
    sink_reset(true);
    tvm_term r;
    cr_assert_eq(tvm_join(env, spawn_with_int(env, "td", "quit", 5), &r), TVM_OK);
    cr_assert_eq(tr_delivered_open(), 1);
    sink_open();
    /* Answered to a process that is gone: the reply is dropped, the
     * request freed. */
    while (tr_delivered_open() != 0)
        sched_yield();
    cr_assert_eq(tvm_trace_stop(vm), TVM_OK);
    uint64_t second;
    cr_assert_eq(sink_events(&second), 1);
    tvm_env_free(env);
    tvm_destroy(vm);
}

static void *destroy_vm(void *arg)
{
    (void)arg;
    tvm_env_free(env);
    tvm_destroy(vm);
    return NULL;
}

Test(delivered, a_vm_destroyed_with_a_request_open_frees_it)
{
    memset(&got, 0, sizeof got);
    start_vm(25);
    cr_assert_eq(tr_delivered_open(), 1);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, destroy_vm, NULL), 0);
    /* The destroy's drain waits for the sink (the VM stays until then). */
    wait_unpublished();
    sink_open();
    pthread_join(t, NULL);
    /* Answered in the last drain (the process may or may not have been
     * there to take it), and freed. */
    cr_assert_eq(tr_delivered_open(), 0);
    cr_assert_leq(got.n, 1);
}

Test(delivered, two_sessions_one_lossless_both_have_every_event_before_the_reply)
{
    memset(&got, 0, sizeof got);
    /* The default session lossless with the smallest rings: the process
     * is suspended for room again and again on the way. */
    vm_start(2, TVM_TRACE_LOSSLESS, 4096);
    tvm_error err;
    tvm_trace_options o = { .size = sizeof o, .format = TVM_TRACE_CALLBACK,
                            .callback = vm_event, .callback_data = &sink };
    tvm_session s;
    cr_assert_eq(tvm_session_create(vm, "second", &o, &s, &err), TVM_OK, "%s", err.message);
    int m = 0;
    cr_assert_eq(tvm_session_trace_pattern(vm, s, "td:g/1", NULL, TVM_TP_TRUE, TVM_TP_LOCAL, 0,
                                           &m, &err),
                 TVM_OK, "%s", err.message);
    cr_assert_eq(tvm_session_trace_flags_all(vm, s, TVM_TRACE_NEW, TVM_TRACE_CALL, true, &err),
                 TVM_OK, "%s", err.message);
    /* The default session's sink held shut until the process waits for
     * room in its 4 KiB ring (it cannot write 3,000 events there, so it
     * is not yet waiting for the reply). */
    sink_reset(true);
    tvm_pid pid = spawn_run(3000);
    wait_proc_state(vm, pid, "waiting");
    sink_open();
    tvm_term r;
    cr_assert_eq(tvm_join(env, pid, &r), TVM_OK);
    cr_assert_eq(got.n, 1);
    cr_assert(got.ok, "the reply's Ref is not the call's");
    cr_assert_eq(got.events, 3000);
    cr_assert_eq(got.events2, 3000);
    /* The lossless ring was full on the way (the process waited). */
    TrVm *t = vm_atomic_load_ptr_acquire(&tr_session_at(vm, 0)->out);
    TrStats *st = tr_pipeline_stats(t->tp);
    uint64_t full = 0;
    for (int i = 0; i < st->nrings; i++)
        full += st->ring[i].full;
    free(st);
    cr_assert_gt(full, 0);
    cr_assert_eq(tvm_session_destroy(vm, s, &err), TVM_OK, "%s", err.message);
    cr_assert_eq(tr_delivered_open(), 0);
    tvm_env_free(env);
    tvm_destroy(vm);
}

Test(delivered, a_call_context_gets_badarg)
{
    tvm_config cfg = { .size = sizeof cfg, .schedulers = 1 };
    vm = tvm_new(&cfg);
    env = tvm_env_new(vm);
    tvm_term all, r;
    cr_assert_eq(tvm_make_atom(env, "all", &all), TVM_OK);
    cr_assert_eq(tvm_call(env, "erlang", "trace_delivered", 1, &all, &r), TVM_EXCEPTION);
    char text[256];
    exception_fmt(env, text, sizeof text);
    cr_assert_str_eq(text, "error:badarg");
    cr_assert_eq(tr_delivered_open(), 0);
    tvm_env_free(env);
    tvm_destroy(vm);
}
