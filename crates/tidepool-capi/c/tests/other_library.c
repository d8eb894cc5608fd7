/* Another library a program might link beside tidepool: it defines global
 * functions under the generic names of the thesis's interface. It must not
 * include threadpool.h (whose wrappers have the same names). */

int dispatch(int job);
int create_threadpool(int n);
int other_library_calls(void);

static int calls;

int dispatch(int job) { return calls += job; }

int create_threadpool(int n) { return n; }

int other_library_calls(void) { return dispatch(create_threadpool(1)); }
