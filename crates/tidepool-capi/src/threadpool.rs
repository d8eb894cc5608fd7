//! The thesis's C interface (Xu 2004, chapter 4; `threadpool.h`), on tidepool.
//!
//! A `threadpool` is a `tidepool_pool *`, so every `tidepool_*` function
//! (statistics, last error, …) works on it too. Errors: functions returning
//! `int` return 0 or a `TIDEPOOL_ERR_*` code (`threadpool_size`: -1); the
//! others leave `tidepool_last_error_code()` non-zero. Either way
//! `tidepool_last_error()` says what went wrong.

use std::ffi::{c_int, c_void};
use std::time::Duration;

use tidepool::policy::Fixed;
use tidepool::{OnFull, Pool, MAX_THREADS};

use crate::boundary::{boundary, code};
use crate::error::Error;
use crate::handle::{self, tidepool_pool};
use crate::pool::{self as ops, Wait};

/// The thesis's opaque pool handle.
pub type threadpool = *mut tidepool_pool;

/// The thesis's task function: `void fn(void *arg)`.
pub type dispatch_fn = Option<unsafe extern "C-unwind" fn(arg: *mut c_void)>;

/// How many tasks the queue of a `create_threadpool` pool holds before
/// `dispatch` blocks. The thesis bounds the queue at 64 KB of nodes
/// (`MAX_QUEUE_MEMORY_SIZE`); at 64 bytes a node, that is 1024 tasks.
pub const THREADPOOL_QUEUE_CAPACITY: usize = 1024;

/// The keep-alive of a thesis pool: in practice forever, since the thesis's
/// pool changes size only when told to.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A thesis size argument as a thread count (1 to 32768).
fn size_arg(n: c_int, what: &str) -> Result<usize, Error> {
    usize::try_from(n)
        .ok()
        .filter(|n| (1..=MAX_THREADS).contains(n))
        .ok_or_else(|| Error::invalid(format!("{what} {n}: must be between 1 and {MAX_THREADS}")))
}

/// Create a pool of `num_threads` workers (1 to 32768) and a queue of
/// `THREADPOOL_QUEUE_CAPACITY` tasks. The pool changes size only through
/// `expand_threadpool` and `shrink_threadpool`. NULL on failure.
#[no_mangle]
pub extern "C" fn create_threadpool(num_threads: c_int) -> threadpool {
    boundary(
        |_| std::ptr::null_mut(),
        || {
            let n = size_arg(num_threads, "num_threads")?;
            let pool = Pool::builder()
                .name("threadpool")
                .min_threads(1)
                .max_threads(MAX_THREADS)
                .initial_threads(n)
                .queue_capacity(THREADPOOL_QUEUE_CAPACITY)
                .on_full(OnFull::Block)
                .keep_alive(FOREVER)
                .policy(Fixed::keep())
                .build()
                .map_err(|e| Error::invalid(e.to_string()))?;
            Ok(handle::register(pool, true))
        },
    )
}

/// Queue `dispatch_to_here(arg)` to run on a worker; blocks while the queue
/// is full. From a task of the same pool a full queue runs the task at once
/// on the calling thread instead (never a deadlock). On failure (NULL
/// function, invalid or shut-down pool) the task is not run and
/// `tidepool_last_error_code()` is non-zero.
///
/// # Safety
/// `dispatch_to_here` must be safe to call with `arg` from another thread.
#[no_mangle]
pub unsafe extern "C" fn dispatch(
    pool: threadpool,
    dispatch_to_here: dispatch_fn,
    arg: *mut c_void,
) {
    code(|| {
        ops::submit(
            &*handle::lookup(pool)?,
            dispatch_to_here,
            arg,
            None,
            Wait::AsBuilt,
        )
    });
}

/// Expand the pool to `size` workers (at least its current target size).
#[no_mangle]
pub extern "C" fn expand_threadpool(size: c_int, pool: threadpool) -> c_int {
    code(|| {
        let entry = handle::lookup(pool)?;
        let n = size_arg(size, "size")?;
        let target = entry.pool.target_size();
        if n < target {
            return Err(Error::invalid(format!(
                "expand_threadpool: size {n} is below the pool's size {target} (use shrink_threadpool)"
            )));
        }
        ops::resize(&entry, n)
    })
}

/// Shrink the pool to `size` workers (at most its current target size, at
/// least 1). Busy workers retire when their task ends.
#[no_mangle]
pub extern "C" fn shrink_threadpool(size: c_int, pool: threadpool) -> c_int {
    code(|| {
        let entry = handle::lookup(pool)?;
        let n = size_arg(size, "size")?;
        let target = entry.pool.target_size();
        if n > target {
            return Err(Error::invalid(format!(
                "shrink_threadpool: size {n} is above the pool's size {target} (use expand_threadpool)"
            )));
        }
        ops::resize(&entry, n)
    })
}

/// Worker threads alive now; -1 if `pool` is not a live pool.
#[no_mangle]
pub extern "C" fn threadpool_size(pool: threadpool) -> c_int {
    boundary(
        |_| -1,
        || {
            let live = handle::lookup(pool)?.pool.size();
            Ok(c_int::try_from(live).unwrap_or(c_int::MAX))
        },
    )
}

/// Run every queued task, join every worker, free the pool. Called from a
/// task of the same pool it does nothing and sets `TIDEPOOL_ERR_IN_OWN_TASK`.
#[no_mangle]
pub extern "C" fn destroy_threadpool(pool: threadpool) {
    code(|| ops::destroy(pool, "destroy_threadpool"));
}
