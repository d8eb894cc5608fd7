/* The C API tested from C: every function of threadpool.h and tidepool.h,
 * the error paths (bad arguments, full queue with reject, submit after
 * shutdown, dead handles), callbacks that call back into their own pool, and
 * 8 threads dispatching while another resizes. Built and run by
 * tests/c_programs.rs, also under valgrind. Exit status 0 when every check
 * passed. No check depends on timing: waits are on conditions. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "threadpool.h"
#include "tidepool.h"

static atomic_int checks, failures; /* checks also run on worker threads */

#define CHECK(cond)                                                                    \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            failures++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__,    \
                    __LINE__, #cond, tidepool_last_error());                           \
        }                                                                              \
    } while (0)

#define CHECK_CODE(expr, want)                                                         \
    do {                                                                               \
        int got_ = (expr);                                                             \
        checks++;                                                                      \
        if (got_ != (want)) {                                                          \
            failures++;                                                                \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (last error: %s)\n",   \
                    __FILE__, __LINE__, #expr, tidepool_error_name(got_),              \
                    tidepool_error_name(want), tidepool_last_error());                 \
        }                                                                              \
    } while (0)

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- helpers: a counter task, a gate tasks wait at, completion statuses ---- */

static void count(void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }

typedef struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    int open, arrived;
} gate;

static void gate_init(gate *g) {
    pthread_mutex_init(&g->m, NULL);
    pthread_cond_init(&g->c, NULL);
    g->open = g->arrived = 0;
}

static void gate_destroy(gate *g) {
    pthread_mutex_destroy(&g->m);
    pthread_cond_destroy(&g->c);
}

static void at_gate(void *arg) {
    gate *g = arg;
    pthread_mutex_lock(&g->m);
    g->arrived++;
    pthread_cond_broadcast(&g->c);
    while (!g->open) pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

static void gate_await(gate *g, int arrivals) {
    pthread_mutex_lock(&g->m);
    while (g->arrived < arrivals) pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

static void gate_open(gate *g) {
    pthread_mutex_lock(&g->m);
    g->open = 1;
    pthread_cond_broadcast(&g->c);
    pthread_mutex_unlock(&g->m);
}

static atomic_int status_ok, status_cancelled, status_other;

static void record_status(void *arg, int status) {
    (void)arg;
    if (status == TIDEPOOL_OK)
        atomic_fetch_add(&status_ok, 1);
    else if (status == TIDEPOOL_ERR_CANCELLED)
        atomic_fetch_add(&status_cancelled, 1);
    else
        atomic_fetch_add(&status_other, 1);
}

static void reset_statuses(void) {
    atomic_store(&status_ok, 0);
    atomic_store(&status_cancelled, 0);
    atomic_store(&status_other, 0);
}

static tidepool_stats stats_of(tidepool_pool *pool) {
    tidepool_stats s;
    memset(&s, 0, sizeof s);
    CHECK_CODE(tidepool_stats_get(pool, &s), TIDEPOOL_OK);
    return s;
}

/* ---- threadpool.h: the thesis's functions ---- */

static void test_thesis_functions(void) {
    atomic_int done = 0;
    threadpool pool = create_threadpool(4);
    CHECK(pool != NULL);
    CHECK(threadpool_size(pool) == 4);
    for (int i = 0; i < 500; i++) {
        dispatch(pool, count, &done);
        CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_OK);
    }
    CHECK_CODE(expand_threadpool(8, pool), TIDEPOOL_OK);
    CHECK(threadpool_size(pool) == 8);
    CHECK_CODE(shrink_threadpool(2, pool), TIDEPOOL_OK);
    for (int i = 0; i < 60000 && threadpool_size(pool) != 2; i++) sleep_ms(1);
    CHECK(threadpool_size(pool) == 2);

    /* Bad arguments: an error code, and nothing changes. */
    CHECK_CODE(expand_threadpool(1, pool), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tidepool_last_error(), "use shrink_threadpool") != NULL);
    CHECK_CODE(shrink_threadpool(3, pool), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(shrink_threadpool(0, pool), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(expand_threadpool(-1, pool), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(expand_threadpool(40000, pool), TIDEPOOL_ERR_INVALID_ARGUMENT);
    dispatch(pool, NULL, &done);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK(threadpool_size(pool) == 2);

    destroy_threadpool(pool);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_OK);
    CHECK(atomic_load(&done) == 500);

    /* A destroyed pool is detected by every function. */
    CHECK(threadpool_size(pool) == -1);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_POOL);
    dispatch(pool, count, &done);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(expand_threadpool(8, pool), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(shrink_threadpool(1, pool), TIDEPOOL_ERR_INVALID_POOL);
    destroy_threadpool(pool);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_POOL);
    CHECK(atomic_load(&done) == 500);

    /* So is NULL, and a bad size for create. */
    CHECK(threadpool_size(NULL) == -1);
    CHECK(strstr(tidepool_last_error(), "NULL") != NULL);
    dispatch(NULL, count, &done);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_POOL);
    destroy_threadpool(NULL);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_POOL);
    CHECK(create_threadpool(0) == NULL);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK(create_threadpool(-2) == NULL);
    CHECK(create_threadpool(32769) == NULL);
}

typedef struct {
    threadpool pool;
    gate *g;
    atomic_int returned;
} blocked_dispatch;

static void *dispatch_one(void *arg) {
    blocked_dispatch *b = arg;
    dispatch(b->pool, at_gate, b->g);
    atomic_store(&b->returned, 1);
    return NULL;
}

static void test_dispatch_blocks_while_full(void) {
    gate g;
    gate_init(&g);
    threadpool pool = create_threadpool(1);
    dispatch(pool, at_gate, &g);
    gate_await(&g, 1); /* the only worker is held at the gate */
    for (int i = 0; i < THREADPOOL_QUEUE_CAPACITY; i++) dispatch(pool, at_gate, &g);
    CHECK(stats_of(pool).queue_len == THREADPOOL_QUEUE_CAPACITY);

    blocked_dispatch b = {pool, &g, 0};
    pthread_t t;
    pthread_create(&t, NULL, dispatch_one, &b);
    /* The queue stays full until the gate opens: the dispatch must wait. */
    sleep_ms(50);
    CHECK(atomic_load(&b.returned) == 0);
    gate_open(&g);
    pthread_join(t, NULL);
    CHECK(atomic_load(&b.returned) == 1);
    destroy_threadpool(pool);
    CHECK(g.arrived == THREADPOOL_QUEUE_CAPACITY + 2);
    gate_destroy(&g);
}

/* ---- tidepool.h: builder, submit variants, statistics, shutdown ---- */

static tidepool_pool *one_worker(size_t capacity, int on_full) {
    tidepool_builder *b = tidepool_builder_new();
    CHECK(b != NULL);
    CHECK_CODE(tidepool_builder_name(b, "ctest"), TIDEPOOL_OK);
    CHECK_CODE(tidepool_builder_threads(b, 1), TIDEPOOL_OK);
    CHECK_CODE(tidepool_builder_queue_capacity(b, capacity), TIDEPOOL_OK);
    CHECK_CODE(tidepool_builder_on_full(b, on_full), TIDEPOOL_OK);
    CHECK_CODE(tidepool_builder_queue(b, "mutex"), TIDEPOOL_OK);
    CHECK_CODE(tidepool_builder_keep_alive_ms(b, 1000), TIDEPOOL_OK);
    CHECK_CODE(tidepool_builder_statistics(b, true), TIDEPOOL_OK);
    tidepool_pool *pool = tidepool_builder_build(b);
    CHECK(pool != NULL);
    return pool;
}

static void test_full_queue_and_shutdown(void) {
    gate g;
    gate_init(&g);
    reset_statuses();
    tidepool_pool *pool = one_worker(2, TIDEPOOL_ON_FULL_REJECT);
    CHECK_CODE(tidepool_submit(pool, at_gate, &g, record_status), TIDEPOOL_OK);
    gate_await(&g, 1);
    CHECK_CODE(tidepool_submit(pool, at_gate, &g, record_status), TIDEPOOL_OK);
    CHECK_CODE(tidepool_try_submit(pool, at_gate, &g, record_status), TIDEPOOL_OK);
    /* Full: reject, try and timeout all fail, and no callback runs. */
    CHECK_CODE(tidepool_submit(pool, at_gate, &g, record_status), TIDEPOOL_ERR_FULL);
    CHECK_CODE(tidepool_try_submit(pool, at_gate, &g, record_status), TIDEPOOL_ERR_FULL);
    CHECK_CODE(tidepool_submit_timeout(pool, at_gate, &g, record_status, 1000),
               TIDEPOOL_ERR_TIMEOUT);
    CHECK(strstr(tidepool_last_error(), "stayed full") != NULL);
    CHECK_CODE(tidepool_submit(pool, NULL, &g, NULL), TIDEPOOL_ERR_INVALID_ARGUMENT);
    tidepool_stats s = stats_of(pool);
    CHECK(s.queue_len == 2 && s.rejected_jobs == 3);

    gate_open(&g);
    CHECK_CODE(tidepool_wait_idle(pool), TIDEPOOL_OK);
    s = stats_of(pool);
    CHECK(s.submitted_jobs == 3 && s.completed_jobs == 3);
    CHECK(atomic_load(&status_ok) == 3 && atomic_load(&status_other) == 0);
    CHECK(s.thread_num == 1 && s.min_threads == 1 && s.max_threads == 1);
    CHECK(s.wait.count == 3 && s.service.count == 3);
    CHECK(s.execution_time_s > 0 && s.throughput > 0);
    CHECK(s.service.p50_us <= s.service.p99_us && s.service.p99_us <= s.service.max_us);
    CHECK_CODE(tidepool_submit_timeout(pool, at_gate, &g, NULL, 1000), TIDEPOOL_OK);

    double us = -1;
    CHECK_CODE(tidepool_stats_quantile(pool, TIDEPOOL_LATENCY_WAIT, 0.999, &us), TIDEPOOL_OK);
    CHECK(us >= 0);
    CHECK_CODE(tidepool_stats_quantile(pool, TIDEPOOL_LATENCY_SUBMIT_BLOCKED, 0.5, &us), TIDEPOOL_OK);
    CHECK_CODE(tidepool_stats_quantile(pool, TIDEPOOL_LATENCY_SERVICE, 1.0, &us), TIDEPOOL_OK);
    CHECK(us > 0);
    CHECK_CODE(tidepool_stats_quantile(pool, 7, 0.5, &us), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_stats_quantile(pool, 1, -0.1, &us), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_stats_quantile(pool, 1, 0.5, NULL), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_stats_get(pool, NULL), TIDEPOOL_ERR_INVALID_ARGUMENT);

    size_t live = 0;
    CHECK_CODE(tidepool_size(pool, &live), TIDEPOOL_OK);
    CHECK(live == 1);
    CHECK_CODE(tidepool_size(pool, NULL), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_resize(pool, 1), TIDEPOOL_OK);
    CHECK_CODE(tidepool_resize(pool, 2), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tidepool_last_error(), "bounds 1..=1") != NULL);

    /* Submit after shutdown. */
    CHECK_CODE(tidepool_shutdown(pool), TIDEPOOL_OK);
    CHECK_CODE(tidepool_shutdown(pool), TIDEPOOL_OK);
    CHECK_CODE(tidepool_submit(pool, count, &g, NULL), TIDEPOOL_ERR_SHUT_DOWN);
    CHECK_CODE(tidepool_try_submit(pool, count, &g, NULL), TIDEPOOL_ERR_SHUT_DOWN);
    CHECK_CODE(tidepool_submit_timeout(pool, count, &g, NULL, 10), TIDEPOOL_ERR_SHUT_DOWN);
    dispatch(pool, count, &g);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_ERR_SHUT_DOWN);
    CHECK(stats_of(pool).completed_jobs == 4);
    CHECK_CODE(tidepool_destroy(pool), TIDEPOOL_OK);

    /* Every tidepool_ function on a destroyed pool. */
    tidepool_stats dead;
    CHECK_CODE(tidepool_destroy(pool), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(tidepool_submit(pool, count, &g, NULL), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(tidepool_try_submit(pool, count, &g, NULL), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(tidepool_submit_timeout(pool, count, &g, NULL, 1), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(tidepool_wait_idle(pool), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(tidepool_resize(pool, 1), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(tidepool_size(pool, &live), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(tidepool_shutdown(pool), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(tidepool_shutdown_now(pool, NULL), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(tidepool_stats_get(pool, &dead), TIDEPOOL_ERR_INVALID_POOL);
    CHECK_CODE(tidepool_stats_quantile(pool, 1, 0.5, &us), TIDEPOOL_ERR_INVALID_POOL);
    gate_destroy(&g);
}

static void test_builder(void) {
    tidepool_builder *b = tidepool_builder_new();
    CHECK_CODE(tidepool_builder_min_threads(b, 5), TIDEPOOL_OK);
    CHECK_CODE(tidepool_builder_max_threads(b, 2), TIDEPOOL_OK);
    CHECK(tidepool_builder_build(b) == NULL); /* consumed */
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tidepool_last_error(), "min_threads") != NULL);

    b = tidepool_builder_new();
    CHECK_CODE(tidepool_builder_queue_capacity(b, 0), TIDEPOOL_OK);
    CHECK(tidepool_builder_build(b) == NULL);
    CHECK(strstr(tidepool_last_error(), "queue_capacity") != NULL);

    b = tidepool_builder_new();
    CHECK_CODE(tidepool_builder_keep_alive_ms(b, 0), TIDEPOOL_OK);
    CHECK(tidepool_builder_build(b) == NULL);
    CHECK(strstr(tidepool_last_error(), "keep_alive") != NULL);

    b = tidepool_builder_new();
    CHECK_CODE(tidepool_builder_initial_threads(b, 100000), TIDEPOOL_OK);
    CHECK(tidepool_builder_build(b) == NULL);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_ARGUMENT);

    b = tidepool_builder_new();
    CHECK_CODE(tidepool_builder_queue(b, "nope"), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tidepool_last_error(), "`nope`") != NULL); /* names the value... */
    CHECK(strstr(tidepool_last_error(), "lock-free") != NULL); /* ...and the choices */
    CHECK_CODE(tidepool_builder_policy(b, "watermark:9..3"), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tidepool_last_error(), "valid forms") != NULL);
    CHECK_CODE(tidepool_builder_policy(b, "tpr"), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_policy(b, NULL), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_on_full(b, 9), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_name(b, NULL), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_queue(b, NULL), TIDEPOOL_ERR_INVALID_ARGUMENT);
    tidepool_builder_free(b);
    tidepool_builder_free(NULL);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_OK);

    CHECK_CODE(tidepool_builder_name(NULL, "x"), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tidepool_last_error(), "builder is NULL") != NULL);
    CHECK_CODE(tidepool_builder_threads(NULL, 1), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_min_threads(NULL, 1), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_max_threads(NULL, 1), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_initial_threads(NULL, 1), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_queue_capacity(NULL, 1), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_on_full(NULL, 0), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_queue(NULL, "spin"), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_keep_alive_ms(NULL, 5), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_policy(NULL, "auto"), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_builder_statistics(NULL, false), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK(tidepool_builder_build(NULL) == NULL);

    /* A self-sizing pool: policy spec, bounds, every queue flavor. */
    const char *flavors[] = {"lock-free", "mutex", "spin", "hybrid"};
    for (int i = 0; i < 4; i++) {
        atomic_int done = 0;
        b = tidepool_builder_new();
        CHECK_CODE(tidepool_builder_min_threads(b, 1), TIDEPOOL_OK);
        CHECK_CODE(tidepool_builder_max_threads(b, 4), TIDEPOOL_OK);
        CHECK_CODE(tidepool_builder_policy(b, i % 2 ? "watermark:1..4" : "auto"), TIDEPOOL_OK);
        CHECK_CODE(tidepool_builder_queue(b, flavors[i]), TIDEPOOL_OK);
        tidepool_pool *pool = tidepool_builder_build(b);
        CHECK(pool != NULL);
        for (int k = 0; k < 200; k++) CHECK_CODE(tidepool_submit(pool, count, &done, NULL), TIDEPOOL_OK);
        CHECK_CODE(tidepool_destroy(pool), TIDEPOOL_OK);
        CHECK(atomic_load(&done) == 200);
    }
}

static void test_errors_and_version(void) {
    CHECK(strcmp(tidepool_error_name(TIDEPOOL_ERR_FULL), "TIDEPOOL_ERR_FULL") == 0);
    CHECK(strcmp(tidepool_error_name(TIDEPOOL_ERR_IN_OWN_TASK), "TIDEPOOL_ERR_IN_OWN_TASK") == 0);
    CHECK(strcmp(tidepool_error_name(-1), "unknown error code") == 0);
    /* The macros this program was compiled with, the library it loaded. */
    CHECK(tidepool_version() == TIDEPOOL_VERSION_NUMBER);
    CHECK(tidepool_version() / 10000 == TIDEPOOL_VERSION_MAJOR);
    CHECK(tidepool_version() / 100 % 100 == TIDEPOOL_VERSION_MINOR);
    CHECK(tidepool_version() % 100 == TIDEPOOL_VERSION_PATCH);
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", TIDEPOOL_VERSION_MAJOR, TIDEPOOL_VERSION_MINOR,
             TIDEPOOL_VERSION_PATCH);
    CHECK(strcmp(tidepool_version_string(), version) == 0);
    printf("tidepool %s\n", tidepool_version_string());
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_OK);
    CHECK(strcmp(tidepool_last_error(), "") == 0);
}

/* ---- shutdown_now: a task holds the only worker until the queue is taken ---- */

typedef struct {
    tidepool_pool *pool;
    atomic_int started, armed;
} hold;

static void hold_until_drained(void *arg) {
    hold *h = arg;
    atomic_store(&h->started, 1);
    while (!atomic_load(&h->armed)) sleep_ms(1);
    for (;;) {
        tidepool_stats s;
        if (tidepool_stats_get(h->pool, &s) != TIDEPOOL_OK || s.queue_len == 0) break;
        sleep_ms(1);
    }
}

static void test_shutdown_now(void) {
    atomic_int done = 0;
    reset_statuses();
    tidepool_pool *pool = one_worker(100, TIDEPOOL_ON_FULL_BLOCK);
    hold h = {pool, 0, 0};
    CHECK_CODE(tidepool_submit(pool, hold_until_drained, &h, record_status), TIDEPOOL_OK);
    while (!atomic_load(&h.started)) sleep_ms(1);
    for (int i = 0; i < 5; i++) CHECK_CODE(tidepool_submit(pool, count, &done, record_status), TIDEPOOL_OK);
    atomic_store(&h.armed, 1);
    size_t cancelled = 0;
    CHECK_CODE(tidepool_shutdown_now(pool, &cancelled), TIDEPOOL_OK);
    CHECK(cancelled == 5);
    CHECK(atomic_load(&done) == 0);
    CHECK(atomic_load(&status_cancelled) == 5 && atomic_load(&status_ok) == 1);
    CHECK(stats_of(pool).cancelled_jobs == 5);
    CHECK_CODE(tidepool_submit(pool, count, &done, NULL), TIDEPOOL_ERR_SHUT_DOWN);
    CHECK_CODE(tidepool_destroy(pool), TIDEPOOL_OK);
}

/* ---- per-task options: priority, deadline, cancel token; block_in_place ---- */

typedef struct {
    pthread_mutex_t m;
    int order[8], n;
    atomic_int expired, cancelled;
} task_log;

typedef struct {
    task_log *log;
    int id;
} logged;

static void log_run(void *arg) {
    logged *l = arg;
    pthread_mutex_lock(&l->log->m);
    l->log->order[l->log->n++] = l->id;
    pthread_mutex_unlock(&l->log->m);
}

static void log_done(void *arg, int status) {
    logged *l = arg;
    if (status == TIDEPOOL_ERR_EXPIRED) atomic_fetch_add(&l->log->expired, 1);
    if (status == TIDEPOOL_ERR_CANCELLED) atomic_fetch_add(&l->log->cancelled, 1);
}

static void test_task_options(void) {
    task_log log = {.n = 0};
    pthread_mutex_init(&log.m, NULL);
    gate g;
    gate_init(&g);
    tidepool_pool *pool = one_worker(100, TIDEPOOL_ON_FULL_BLOCK);
    CHECK_CODE(tidepool_submit(pool, at_gate, &g, NULL), TIDEPOOL_OK);
    gate_await(&g, 1);
    logged t[5] = {{&log, 0}, {&log, 1}, {&log, 2}, {&log, 3}, {&log, 4}};
    tidepool_cancel_token *token = tidepool_cancel_token_new();
    tidepool_cancel_token *clone = tidepool_cancel_token_clone(token);
    CHECK(token != NULL && clone != NULL);
    CHECK_CODE(tidepool_submit_with(pool, log_run, &t[0], log_done, TIDEPOOL_PRIORITY_LOW, 0, NULL), TIDEPOOL_OK);
    CHECK_CODE(tidepool_submit_with(pool, log_run, &t[1], log_done, TIDEPOOL_PRIORITY_NORMAL, 0, NULL), TIDEPOOL_OK);
    CHECK_CODE(tidepool_submit_with(pool, log_run, &t[2], log_done, TIDEPOOL_PRIORITY_HIGH, 0, NULL), TIDEPOOL_OK);
    /* Expires: 1 ms from now, while the only worker is held. */
    CHECK_CODE(tidepool_submit_with(pool, log_run, &t[3], log_done, TIDEPOOL_PRIORITY_HIGH, 1000000, NULL), TIDEPOOL_OK);
    CHECK_CODE(tidepool_submit_with(pool, log_run, &t[4], log_done, TIDEPOOL_PRIORITY_HIGH, 0, token), TIDEPOOL_OK);
    CHECK_CODE(tidepool_submit_with(pool, log_run, &t[0], log_done, 3, 0, NULL), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tidepool_last_error(), "priority 3") != NULL);
    CHECK(tidepool_cancel_token_is_cancelled(token) == 0);
    CHECK_CODE(tidepool_cancel_token_cancel(clone), TIDEPOOL_OK);
    CHECK(tidepool_cancel_token_is_cancelled(token) == 1);
    CHECK(tidepool_cancel_token_is_cancelled(NULL) == -1);
    tidepool_cancel_token_free(token);
    tidepool_cancel_token_free(clone);
    sleep_ms(20); /* past the deadline for sure */
    gate_open(&g);
    CHECK_CODE(tidepool_wait_idle(pool), TIDEPOOL_OK);
    CHECK(log.n == 3 && log.order[0] == 2 && log.order[1] == 1 && log.order[2] == 0);
    CHECK(atomic_load(&log.expired) == 1 && atomic_load(&log.cancelled) == 1);
    tidepool_stats s = stats_of(pool);
    CHECK(s.expired_jobs == 1 && s.cancelled_jobs == 1 && s.blocked_threads == 0);
    CHECK_CODE(tidepool_destroy(pool), TIDEPOOL_OK);
    gate_destroy(&g);
    pthread_mutex_destroy(&log.m);
}

typedef struct {
    tidepool_pool *pool;
    gate child_done;
    atomic_int parent_done;
} nested;

static void nested_child(void *arg) { gate_open(&((nested *)arg)->child_done); }

static void nested_wait(void *arg) { at_gate(&((nested *)arg)->child_done); }

/* The only worker submits a child into its own pool and waits for it. */
static void nested_parent(void *arg) {
    nested *n = arg;
    CHECK_CODE(tidepool_submit(n->pool, nested_child, n, NULL), TIDEPOOL_OK);
    CHECK_CODE(tidepool_block_in_place(nested_wait, n), TIDEPOOL_OK);
    atomic_store(&n->parent_done, 1);
}

static void test_block_in_place(void) {
    tidepool_builder *b = tidepool_builder_new();
    CHECK_CODE(tidepool_builder_max_threads(b, 2), TIDEPOOL_OK);
    CHECK_CODE(tidepool_builder_min_threads(b, 1), TIDEPOOL_OK);
    tidepool_pool *pool = tidepool_builder_build(b);
    CHECK(pool != NULL);
    nested n = {.pool = pool};
    gate_init(&n.child_done);
    CHECK_CODE(tidepool_submit(pool, nested_parent, &n, NULL), TIDEPOOL_OK);
    while (!atomic_load(&n.parent_done)) sleep_ms(1);
    CHECK_CODE(tidepool_wait_idle(pool), TIDEPOOL_OK);
    CHECK(stats_of(pool).completed_jobs == 2);
    CHECK_CODE(tidepool_block_in_place(NULL, NULL), TIDEPOOL_ERR_INVALID_ARGUMENT);
    CHECK_CODE(tidepool_destroy(pool), TIDEPOOL_OK);
    gate_destroy(&n.child_done);
}

/* ---- callbacks that call back into their own pool ---- */

typedef struct {
    threadpool pool;
    int children;
    atomic_int ran;
} fan_out;

static void fan_out_child(void *arg) { atomic_fetch_add(&((fan_out *)arg)->ran, 1); }

static void fan_out_parent(void *arg) {
    fan_out *f = arg;
    for (int i = 0; i < f->children; i++) {
        dispatch(f->pool, fan_out_child, f);
        CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_OK);
    }
}

static void test_dispatch_into_own_full_pool(void) {
    /* One worker, busy with the parent: nobody drains the queue, so past
     * its capacity the children run on the parent's thread. */
    threadpool pool = create_threadpool(1);
    fan_out f = {pool, THREADPOOL_QUEUE_CAPACITY + 300, 0};
    dispatch(pool, fan_out_parent, &f);
    CHECK_CODE(tidepool_wait_idle(pool), TIDEPOOL_OK);
    CHECK(atomic_load(&f.ran) == f.children);
    CHECK(stats_of(pool).inline_jobs == 300);
    CHECK(stats_of(pool).rejected_jobs == 0); /* run inline, not refused */
    destroy_threadpool(pool);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_OK);
}

typedef struct {
    threadpool pool, other;
    int codes[8];
    int n;
} self_calls;

static void call_own_pool(void *arg) {
    self_calls *s = arg;
    destroy_threadpool(s->pool);
    s->codes[s->n++] = tidepool_last_error_code();
    s->codes[s->n++] = tidepool_destroy(s->pool);
    s->codes[s->n++] = tidepool_shutdown(s->pool);
    s->codes[s->n++] = tidepool_shutdown_now(s->pool, NULL);
    s->codes[s->n++] = tidepool_wait_idle(s->pool);
    s->codes[s->n++] = tidepool_destroy(s->other); /* another pool: fine */
}

static void destroy_own_in_done(void *arg, int status) {
    self_calls *s = arg;
    (void)status;
    s->codes[s->n++] = tidepool_destroy(s->pool);
}

static void nothing(void *arg) { (void)arg; }

static void test_destroy_from_own_task(void) {
    self_calls s = {create_threadpool(2), create_threadpool(1), {0}, 0};
    dispatch(s.pool, call_own_pool, &s);
    CHECK_CODE(tidepool_wait_idle(s.pool), TIDEPOOL_OK);
    CHECK(s.n == 6);
    for (int i = 0; i < 5; i++) CHECK_CODE(s.codes[i], TIDEPOOL_ERR_IN_OWN_TASK);
    CHECK_CODE(s.codes[5], TIDEPOOL_OK);
    CHECK(threadpool_size(s.other) == -1);

    s.n = 0;
    CHECK_CODE(tidepool_submit(s.pool, nothing, &s, destroy_own_in_done), TIDEPOOL_OK);
    CHECK_CODE(tidepool_wait_idle(s.pool), TIDEPOOL_OK);
    CHECK(s.n == 1);
    CHECK_CODE(s.codes[0], TIDEPOOL_ERR_IN_OWN_TASK);
    CHECK(threadpool_size(s.pool) == 2);
    destroy_threadpool(s.pool);
    CHECK_CODE(tidepool_last_error_code(), TIDEPOOL_OK);
}

typedef struct {
    tidepool_pool *pool;
    tidepool_cancel_token *token;
    int codes[2];
    atomic_int child_ran, child_dones, child_status;
} own_refusal;

static void mark_ran(void *arg) { atomic_store(&((own_refusal *)arg)->child_ran, 1); }

static void child_done(void *arg, int status) {
    own_refusal *o = arg;
    atomic_store(&o->child_status, status);
    atomic_fetch_add(&o->child_dones, 1);
}

/* On the pool's only worker: the first submit fills the queue, so the
 * second runs inline (the caller-runs rule), where its cancelled token
 * refuses it. */
static void submit_refused_inline(void *arg) {
    own_refusal *o = arg;
    o->codes[0] = tidepool_submit(o->pool, nothing, NULL, NULL);
    o->codes[1] = tidepool_submit_with(o->pool, mark_ran, o, child_done,
                                       TIDEPOOL_PRIORITY_NORMAL, 0, o->token);
}

static void test_refused_inline_gets_its_done_call(void) {
    own_refusal o = {.pool = one_worker(1, TIDEPOOL_ON_FULL_BLOCK),
                     .token = tidepool_cancel_token_new()};
    CHECK_CODE(tidepool_cancel_token_cancel(o.token), TIDEPOOL_OK);
    CHECK_CODE(tidepool_submit(o.pool, submit_refused_inline, &o, NULL), TIDEPOOL_OK);
    CHECK_CODE(tidepool_wait_idle(o.pool), TIDEPOOL_OK);
    CHECK_CODE(o.codes[0], TIDEPOOL_OK);
    CHECK_CODE(o.codes[1], TIDEPOOL_OK);
    CHECK(atomic_load(&o.child_ran) == 0);
    CHECK(atomic_load(&o.child_dones) == 1); /* exactly once */
    CHECK_CODE(atomic_load(&o.child_status), TIDEPOOL_ERR_CANCELLED);
    tidepool_stats s = stats_of(o.pool);
    CHECK(s.cancelled_jobs == 1 && s.inline_jobs == 0);
    CHECK_CODE(tidepool_destroy(o.pool), TIDEPOOL_OK);
    tidepool_cancel_token_free(o.token);
}

/* ---- 8 threads dispatching while another resizes ---- */

enum { DISPATCHERS = 8, PER_DISPATCHER = 1000 };

typedef struct {
    threadpool pool;
    atomic_int done, stop, failures;
} shared_pool;

static void *dispatcher(void *arg) {
    shared_pool *sp = arg;
    for (int i = 0; i < PER_DISPATCHER; i++) {
        dispatch(sp->pool, count, &sp->done);
        if (tidepool_last_error_code() != TIDEPOOL_OK) atomic_fetch_add(&sp->failures, 1);
    }
    return NULL;
}

static void *resizer(void *arg) {
    shared_pool *sp = arg;
    static const int sizes[] = {1, 8, 3, 16, 2};
    long resizes = 0;
    int current = 4;
    while (!atomic_load(&sp->stop)) {
        int n = sizes[resizes % 5];
        int rc = n >= current ? expand_threadpool(n, sp->pool) : shrink_threadpool(n, sp->pool);
        if (rc != TIDEPOOL_OK || threadpool_size(sp->pool) < 1) atomic_fetch_add(&sp->failures, 1);
        current = n;
        resizes++;
        sched_yield();
    }
    return (void *)resizes;
}

static void test_concurrent_dispatch_and_resize(void) {
    shared_pool sp = {create_threadpool(4), 0, 0, 0};
    pthread_t d[DISPATCHERS], r;
    pthread_create(&r, NULL, resizer, &sp);
    for (int i = 0; i < DISPATCHERS; i++) pthread_create(&d[i], NULL, dispatcher, &sp);
    for (int i = 0; i < DISPATCHERS; i++) pthread_join(d[i], NULL);
    atomic_store(&sp.stop, 1);
    void *resizes;
    pthread_join(r, &resizes);
    CHECK((long)resizes > 0);
    CHECK(atomic_load(&sp.failures) == 0);
    destroy_threadpool(sp.pool);
    CHECK(atomic_load(&sp.done) == DISPATCHERS * PER_DISPATCHER);
}

int main(void) {
    test_errors_and_version();
    test_thesis_functions();
    test_dispatch_blocks_while_full();
    test_full_queue_and_shutdown();
    test_builder();
    test_shutdown_now();
    test_task_options();
    test_block_in_place();
    test_dispatch_into_own_full_pool();
    test_destroy_from_own_task();
    test_refused_inline_gets_its_done_call();
    test_concurrent_dispatch_and_resize();
    if (failures) {
        fprintf(stderr, "test_capi: %d of %d checks failed\n", atomic_load(&failures),
                atomic_load(&checks));
        return 1;
    }
    printf("test_capi: all %d checks passed\n", atomic_load(&checks));
    return 0;
}
