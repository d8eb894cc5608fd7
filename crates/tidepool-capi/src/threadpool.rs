//! The thesis's C interface (Xu 2004, chapter 4; `threadpool.h`), on tidepool.
//!
//! Each thesis function `X` is exported as `tidepool_X`, so the library
//! defines no generic global name (`dispatch`, `create_threadpool`) that could
//! collide with another library's. `threadpool.h` gives C programs the
//! thesis's own names as `static inline` wrappers over these (its trailer in
//! `cbindgen-threadpool.toml`).
//!
//! A `threadpool` is a `tidepool_pool *`, so every `tidepool_*` function
//! (statistics, last error, …) works on it too.

use std::ffi::{c_int, c_void};
use std::time::Duration;

use tidepool::policy::Fixed;
use tidepool::{OnFull, Pool, MAX_THREADS};

use crate::boundary::{boundary, code};
use crate::error::Error;
use crate::handle::{self, tidepool_pool};
use crate::pool::{self as ops, Wait};

/// The thesis's pool handle: a `tidepool_pool *`. Returned by
/// `create_threadpool`, owned by the caller until `destroy_threadpool`.
pub type threadpool = *mut tidepool_pool;

/// The thesis's task function: `void fn(void *arg)`, called once on a worker
/// thread with the `arg` given to `dispatch`.
pub type dispatch_fn = Option<unsafe extern "C-unwind" fn(arg: *mut c_void)>;

/// How many tasks the queue of a `create_threadpool()` pool holds before
/// `dispatch()` blocks. The thesis bounds the queue at 64 KB of nodes
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

/// `create_threadpool()`: start a pool of `num_threads` worker threads (1 to
/// 32768) with a queue of `THREADPOOL_QUEUE_CAPACITY` tasks. The pool changes
/// size only through `expand_threadpool()` and `shrink_threadpool()`.
///
/// Returns the pool, owned by the caller until `destroy_threadpool()`; or
/// NULL with the last error set (`TIDEPOOL_ERR_INVALID_ARGUMENT` for a size
/// out of range). Thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_create_threadpool(num_threads: c_int) -> threadpool {
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
            Ok(handle::register(pool))
        },
    )
}

/// `dispatch()`: queue `dispatch_to_here(arg)` to run on a worker thread;
/// waits while the queue is full. Called from a task of the same pool, a full
/// queue runs the task at once on the calling thread instead (never a
/// deadlock). `arg` stays the caller's: the library only passes it on.
///
/// On failure (`dispatch_to_here` NULL, `pool` not a live pool, pool shut
/// down) the task is not run and `tidepool_last_error_code()` returns the
/// reason; after a success it returns `TIDEPOOL_OK`. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_dispatch(
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

/// `expand_threadpool()`: grow the pool to `size` worker threads, at least
/// its current target size and at most 32768. The new threads start at once.
///
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_ARGUMENT` (size out of range
/// or below the target size: use `shrink_threadpool()`) or
/// `TIDEPOOL_ERR_INVALID_POOL`. Thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_expand_threadpool(size: c_int, pool: threadpool) -> c_int {
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

/// `shrink_threadpool()`: shrink the pool to `size` worker threads, at least
/// 1 and at most its current target size. Idle threads exit at once, busy
/// ones when their task returns (a running task is never interrupted).
///
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_ARGUMENT` (size out of range
/// or above the target size: use `expand_threadpool()`) or
/// `TIDEPOOL_ERR_INVALID_POOL`. Thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_shrink_threadpool(size: c_int, pool: threadpool) -> c_int {
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

/// `threadpool_size()`: the number of worker threads alive now; -1 (with
/// the last error set) if `pool` is not a live pool. Thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_threadpool_size(pool: threadpool) -> c_int {
    boundary(
        |_| -1,
        || {
            let live = handle::lookup(pool)?.pool.live_threads();
            Ok(c_int::try_from(live).unwrap_or(c_int::MAX))
        },
    )
}

/// `destroy_threadpool()`: stop accepting tasks, run every queued task, wait
/// for every worker thread to exit, and free the pool. `pool` is invalid
/// afterwards (later calls with it fail with `TIDEPOOL_ERR_INVALID_POOL`).
///
/// Called from a task of the same pool it would wait for itself: it does
/// nothing and sets the last error to `TIDEPOOL_ERR_IN_OWN_TASK`. Other
/// failures (`TIDEPOOL_ERR_INVALID_POOL`) also set the last error.
#[no_mangle]
pub extern "C" fn tidepool_destroy_threadpool(pool: threadpool) {
    code(|| ops::destroy(pool, "destroy_threadpool"));
}
