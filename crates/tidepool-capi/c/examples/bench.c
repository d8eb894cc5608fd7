/* The thesis's benchmark simulator (Xu 2004, section 5.1) against tidepool.h.
 *
 *   cc -std=c11 bench.c $(pkg-config --cflags --libs tidepool) -o bench
 *   ./bench TRACE [--threads N] [--policy SPEC --max N] [--queue FLAVOR]
 *
 * Reads a trace in the thesis's format (docs/trace-format.md: one task a line,
 * `request_id app_id start_delay_us exec_us [cpu_us blocked_us]`, delays
 * relative to the previous task), dispatches each task at its start delay,
 * and prints the throughput and the average idle time (time in the queue).
 * A task computes `cpu_us` (a busy loop on the thread's CPU clock) and
 * sleeps `blocked_us`, interleaved; with 4 fields it computes `exec_us`.
 *
 * Default: a static pool of 4 threads, as in the thesis's experiments.
 * `--policy auto --max 64` lets tidepool size the pool itself. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "tidepool.h"

typedef struct {
    uint64_t id, app;
    int64_t delay_ns, cpu_ns, blocked_ns;
    long line;
} task;

static const char *FIELDS[] = {"request_id", "app_id", "start_delay_us", "exec_us", "cpu_us", "blocked_us"};

static int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t deadline_ns) {
    struct timespec ts = {deadline_ns / 1000000000, deadline_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void sleep_for(int64_t ns) {
    if (ns > 0) sleep_until(now_ns(CLOCK_MONOTONIC) + ns);
}

/* Compute for `ns` of this thread's CPU time: a fixed amount of work. */
static void compute(int64_t ns) {
    int64_t end = now_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
    volatile uint64_t x = 0;
    while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end)
        for (int i = 0; i < 64; i++) x += (uint64_t)i * 2654435761u;
}

/* The task body: compute and block in slices, as tidepool's replay does. */
static void run_task(void *arg) {
    const task *t = arg;
    int64_t slices = 1;
    if (t->cpu_ns > 0 && t->blocked_ns > 0) {
        slices = t->blocked_ns / 500000;
        slices = slices < 1 ? 1 : slices > 8 ? 8 : slices;
    }
    for (int64_t i = 0; i < slices; i++) {
        compute(t->cpu_ns / slices);
        sleep_for(t->blocked_ns / slices);
    }
}

/* ---- the trace parser: every error names the file, line and field ---- */

static const char *path;

static void fail(long line, int field, const char *what, const char *text) {
    fprintf(stderr, "%s:%ld: field `%s`: `%s` %s\n", path, line, FIELDS[field], text, what);
    exit(2);
}

static void *grow(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return q;
}

static uint64_t parse_id(const char *s, long line, int field) {
    uint64_t v = 0;
    if (!*s) fail(line, field, "is not a non-negative integer", s);
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p) || v > (UINT64_MAX - 9) / 10)
            fail(line, field, "is not a non-negative integer", s);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    return v;
}

/* Microseconds with at most 3 decimals, exactly, as nanoseconds. */
static int64_t parse_us(const char *s, long line, int field) {
    int64_t whole = 0, frac = 0, decimals = 0;
    const char *p = s;
    if (!isdigit((unsigned char)*p)) fail(line, field, "is not a non-negative number of microseconds", s);
    for (; isdigit((unsigned char)*p); p++) {
        if (whole > INT64_MAX / 10000) fail(line, field, "is too large", s);
        whole = whole * 10 + (*p - '0');
    }
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++, decimals++) {
            if (decimals == 3) fail(line, field, "has more than 3 decimals (nanoseconds)", s);
            frac = frac * 10 + (*p - '0');
        }
        if (decimals == 0) fail(line, field, "is not a non-negative number of microseconds", s);
    }
    if (*p) fail(line, field, "is not a non-negative number of microseconds", s);
    for (; decimals < 3; decimals++) frac *= 10;
    return whole * 1000 + frac;
}

static int by_id(const void *a, const void *b) {
    const task *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : (x->line > y->line) - (x->line < y->line);
}

static task *read_trace(size_t *count) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        exit(2);
    }
    size_t n = 0, cap = 1024;
    task *tasks = grow(NULL, cap * sizeof *tasks);
    char *buf = NULL;
    size_t buf_cap = 0;
    long line = 0;
    int seen_data = 0;
    while (getline(&buf, &buf_cap, f) != -1) {
        line++;
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        char *fields[7], *save = NULL;
        int k = 0;
        for (char *tok = strtok_r(buf, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save))
            if (k < 7) fields[k++] = tok;
            else k = 7;
        if (k == 0) continue;
        if (!seen_data++ && strcasecmp(fields[0], "request_id") == 0) continue; /* header */
        if (k != 4 && k != 6) {
            fprintf(stderr, "%s:%ld: expected 4 or 6 fields (%s), found %s%d\n", path, line,
                    "request_id app_id start_delay_us exec_us [cpu_us blocked_us]", k == 7 ? "more than " : "",
                    k == 7 ? 6 : k);
            exit(2);
        }
        if (n == cap) tasks = grow(tasks, (cap *= 2) * sizeof *tasks);
        task *t = &tasks[n++];
        t->line = line;
        t->id = parse_id(fields[0], line, 0);
        t->app = parse_id(fields[1], line, 1);
        t->delay_ns = parse_us(fields[2], line, 2);
        int64_t exec = parse_us(fields[3], line, 3);
        t->cpu_ns = exec;
        t->blocked_ns = 0;
        if (k == 6) {
            t->cpu_ns = parse_us(fields[4], line, 4);
            t->blocked_ns = parse_us(fields[5], line, 5);
            if (t->cpu_ns + t->blocked_ns != exec) {
                fprintf(stderr, "%s:%ld: field `blocked_us`: cpu_us + blocked_us (%s + %s) must equal exec_us (%s)\n",
                        path, line, fields[4], fields[5], fields[3]);
                exit(2);
            }
        }
    }
    free(buf);
    if (ferror(f)) {
        fprintf(stderr, "%s: read error: %s\n", path, strerror(errno));
        exit(2);
    }
    fclose(f);
    /* A repeated request id is an error, named at its second line. */
    task *sorted = grow(NULL, n * sizeof *sorted);
    memcpy(sorted, tasks, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_id);
    for (size_t i = 1; i < n; i++)
        if (sorted[i].id == sorted[i - 1].id) {
            fprintf(stderr, "%s:%ld: field `request_id`: `%llu` repeats the id of line %ld\n", path,
                    sorted[i].line, (unsigned long long)sorted[i].id, sorted[i - 1].line);
            exit(2);
        }
    free(sorted);
    *count = n;
    return tasks;
}

/* ---- the benchmark loop ---- */

static void usage(void) {
    fprintf(stderr, "usage: bench TRACE [--threads N] [--policy SPEC --max N] [--queue FLAVOR]\n");
    exit(2);
}

static size_t parse_count(const char *flag, const char *s) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || !isdigit((unsigned char)*s) || v == 0 || v > 32768) {
        fprintf(stderr, "%s `%s`: expected a number of threads between 1 and 32768\n", flag, s);
        exit(2);
    }
    return (size_t)v;
}

static void check(int rc, const char *what) {
    if (rc != TIDEPOOL_OK) {
        fprintf(stderr, "%s: %s\n", what, tidepool_last_error());
        exit(2);
    }
}

int main(int argc, char **argv) {
    const char *policy = NULL, *queue = NULL;
    size_t threads = 4, max = 64;
    if (argc < 2) usage();
    path = argv[1];
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--threads")) threads = parse_count("--threads", argv[++i]);
        else if (!strcmp(argv[i], "--max")) max = parse_count("--max", argv[++i]);
        else if (!strcmp(argv[i], "--policy")) policy = argv[++i];
        else if (!strcmp(argv[i], "--queue")) queue = argv[++i];
        else usage();
    }

    size_t n;
    task *tasks = read_trace(&n);

    tidepool_builder *b = tidepool_builder_new();
    check(tidepool_builder_name(b, "bench"), "name");
    if (policy) {
        check(tidepool_builder_min_threads(b, 1), "--threads");
        check(tidepool_builder_max_threads(b, max), "--max");
        check(tidepool_builder_policy(b, policy), "--policy");
    } else {
        check(tidepool_builder_threads(b, threads), "--threads");
    }
    if (queue) check(tidepool_builder_queue(b, queue), "--queue");
    tidepool_pool *pool = tidepool_builder_build(b);
    if (!pool) {
        fprintf(stderr, "cannot build the pool: %s\n", tidepool_last_error());
        return 2;
    }

    /* Dispatch each task at its arrival time (the running sum of delays). */
    int64_t start = now_ns(CLOCK_MONOTONIC), arrival = 0, late_ns = 0;
    for (size_t i = 0; i < n; i++) {
        arrival += tasks[i].delay_ns;
        if (tasks[i].delay_ns > 0) sleep_until(start + arrival);
        int64_t lag = now_ns(CLOCK_MONOTONIC) - (start + arrival);
        late_ns += lag > 0 ? lag : 0;
        check(tidepool_submit(pool, run_task, &tasks[i], NULL), "dispatch");
    }
    check(tidepool_wait_idle(pool), "wait");
    double elapsed = (double)(now_ns(CLOCK_MONOTONIC) - start) / 1e9;

    tidepool_stats s;
    check(tidepool_stats_get(pool, &s), "statistics");
    printf("trace              %s: %zu tasks over %.3f s of arrivals\n", path, n, (double)arrival / 1e9);
    if (policy)
        printf("pool               policy %s, 1..%zu threads\n", policy, max);
    else
        printf("pool               %zu threads (static)\n", threads);
    printf("replay             %.3f s; dispatch %.1f us late on average\n", elapsed,
           n ? (double)late_ns / 1e3 / (double)n : 0.0);
    printf("throughput         %.1f tasks/s (completed tasks / replay time)\n",
           elapsed > 0 ? (double)s.completed_jobs / elapsed : 0.0);
    printf("average idle time  %.1f us (time in the queue); p50 %.1f, p99 %.1f, max %.1f us\n", s.wait.mean_us,
           s.wait.p50_us, s.wait.p99_us, s.wait.max_us);
    printf("service time       mean %.1f us, p99 %.1f us\n", s.service.mean_us, s.service.p99_us);
    printf("submit blocked     mean %.1f us (the thesis's response time)\n", s.submit_blocked.mean_us);
    printf("table 4.2          threadNum %llu, submittedJob %llu, completedJob %llu, "
           "executionTime %.3f s, throughput %.1f/s\n",
           (unsigned long long)s.thread_num, (unsigned long long)s.submitted_jobs,
           (unsigned long long)s.completed_jobs, s.execution_time_s, s.throughput);
    printf("threads created    %llu, retired %llu\n", (unsigned long long)s.threads_created,
           (unsigned long long)s.threads_retired);

    int ok = s.completed_jobs == n;
    check(tidepool_destroy(pool), "destroy");
    free(tasks);
    if (!ok) fprintf(stderr, "only %llu of %zu tasks completed\n", (unsigned long long)s.completed_jobs, n);
    return ok ? 0 : 1;
}
