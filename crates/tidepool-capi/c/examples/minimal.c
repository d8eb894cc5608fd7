/* The thesis's thread pool interface (Xu 2004, chapter 4), on tidepool.
 *
 *   cc -std=c11 minimal.c $(pkg-config --cflags --libs tidepool) -o minimal
 *
 * Creates a pool of 4 threads, dispatches 100 tasks, expands the pool to 8
 * threads and shrinks it to 2 while they run, then destroys it (which runs
 * whatever is still queued and joins every thread). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "threadpool.h"

static atomic_long sum;

/* A task: add its number to the sum. */
static void add(void *arg) { atomic_fetch_add(&sum, (long)(intptr_t)arg); }

int main(void) {
    threadpool pool = create_threadpool(4);
    if (pool == NULL) {
        fprintf(stderr, "create_threadpool: %s\n", tidepool_last_error());
        return 1;
    }
    printf("created a pool of %d threads\n", threadpool_size(pool));

    for (int i = 1; i <= 100; i++) dispatch(pool, add, (void *)(intptr_t)i);

    if (expand_threadpool(8, pool) != 0) {
        fprintf(stderr, "expand_threadpool: %s\n", tidepool_last_error());
        return 1;
    }
    printf("expanded to %d threads\n", threadpool_size(pool));
    if (shrink_threadpool(2, pool) != 0) {
        fprintf(stderr, "shrink_threadpool: %s\n", tidepool_last_error());
        return 1;
    }
    printf("shrinking to 2 threads (idle ones leave at once, busy ones after their task)\n");

    destroy_threadpool(pool);
    printf("sum of 1..100 computed by the pool: %ld\n", atomic_load(&sum));
    return atomic_load(&sum) == 5050 ? 0 : 1;
}
