/* A program written for the thesis's thread pool library (Xu 2004, chapter 4):
 * it includes only threadpool.h and uses only the thesis's names. Built and
 * run by tests/c_programs.rs (also under valgrind), and linked statically
 * with other_library.c, which defines the same generic names as global
 * functions: the link succeeds only because the library exports none of
 * them. Exit status 0 when every check passed. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "threadpool.h"
#include "threadpool.h" /* twice: the header and its wrappers are guarded */

/* other_library.c: reports how its own `dispatch` was called. */
int other_library_calls(void);

static int failures;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            failures++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
        }                                                                              \
    } while (0)

static atomic_long sum;

static void add(void *arg) { atomic_fetch_add(&sum, (long)(intptr_t)arg); }

int main(void) {
    /* The thesis's types and constants. */
    dispatch_fn task = add;
    void (*dispatcher)(threadpool, dispatch_fn, void *) = dispatch; /* a function, not a macro */
    CHECK(THREADPOOL_QUEUE_CAPACITY == 1024);

    threadpool pool = create_threadpool(2);
    CHECK(pool != NULL);
    CHECK(threadpool_size(pool) == 2);
    for (int i = 1; i <= 1000; i++) dispatcher(pool, task, (void *)(intptr_t)i);
    CHECK(expand_threadpool(6, pool) == 0);
    CHECK(threadpool_size(pool) == 6);
    CHECK(shrink_threadpool(1, pool) == 0);
    CHECK(expand_threadpool(0, pool) != 0); /* out of range: an error code */
    destroy_threadpool(pool);
    CHECK(atomic_load(&sum) == 500500L);

    CHECK(create_threadpool(0) == NULL);
    CHECK(other_library_calls() == 1);

    if (failures) {
        fprintf(stderr, "thesis_names: %d checks failed\n", failures);
        return 1;
    }
    printf("thesis_names: sum 500500, all checks passed\n");
    return 0;
}
