//! `tidepool_*` on a live pool: submit, wait, resize, shut down, destroy.
//!
//! Calls back into a pool from its own tasks (and completion callbacks):
//! - Submitting is supported. A task never *waits* for room in its own pool's
//!   queue, since the workers it would wait for may all be doing the same: if
//!   the queue is full and the submit would wait (a pool that blocks when
//!   full, or `tidepool_submit_timeout`), the new task runs at once on the
//!   submitting task's thread (the pool's caller-runs rule; counted in
//!   `tidepool_stats.inline_jobs`). A pool that rejects when full rejects,
//!   and `tidepool_try_submit` fails.
//! - Destroy, shutdown, shutdown-now and wait-idle would wait for the calling
//!   task itself: they fail with `TIDEPOOL_ERR_IN_OWN_TASK` and change nothing.
//!
//! Cycles across pools (a task of pool A destroys pool B while a task of B
//! destroys A) are the caller's deadlock, as with any two threads joining
//! each other.

use std::ffi::{c_int, c_void};
use std::time::Duration;

use tidepool::Rejected;

use crate::boundary::code;
use crate::error::{Error, TIDEPOOL_ERR_IN_OWN_TASK};
use crate::handle::{self, tidepool_pool, Entry};
use crate::task::{discard, tidepool_done_fn, tidepool_task_fn, CTask, Submitting};

/// How long a submit may wait for room in a full queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// As the pool was built: wait (`OnFull::Block`) or fail at once.
    AsBuilt,
    /// Fail at once.
    Never,
    /// Wait at most this long.
    AtMost(Duration),
}

/// Submit a C task to `entry`'s pool.
///
/// The caller-runs rule is the pool's own: a worker that submits to its own
/// full queue runs the task at once instead of waiting. The thread is marked
/// as submitting meanwhile, which is how the task knows it runs inline; a
/// task the pool refused comes back in its error and is discarded silently.
pub(crate) fn submit(
    entry: &Entry,
    func: tidepool_task_fn,
    arg: *mut c_void,
    done: tidepool_done_fn,
    wait: Wait,
) -> Result<(), Error> {
    let func = func.ok_or_else(|| Error::invalid("the task function is NULL"))?;
    let task = CTask::new(func, arg, done, entry.tasks.clone());
    let pool = &entry.pool;
    let _submitting = Submitting::enter();
    match wait {
        Wait::AsBuilt => pool.execute(move || task.run()).map_err(refused),
        Wait::Never => pool.try_execute(move || task.run()).map_err(refused),
        Wait::AtMost(timeout) => pool
            .submit_timeout(move || task.run(), timeout)
            .map(drop)
            .map_err(refused),
    }
}

/// The error of a submit the pool refused; the task it hands back is
/// dropped without its completion callback (the error code reports it).
pub(crate) fn refused<F>(rejected: Rejected<F>) -> Error {
    let (error, task) = rejected.into_parts();
    discard(task);
    Error::from(error)
}

/// Fail with `TIDEPOOL_ERR_IN_OWN_TASK` if called from a task of `entry`.
pub(crate) fn not_from_own_task(entry: &Entry, what: &str) -> Result<(), Error> {
    if entry.pool.is_worker_thread() {
        return Err(Error::new(
            TIDEPOOL_ERR_IN_OWN_TASK,
            format!("{what} was called from a task of the same pool, which it would wait for"),
        ));
    }
    Ok(())
}

/// Shut the pool down gracefully, take it out of the registry and free it.
pub(crate) fn destroy(pool: *const tidepool_pool, what: &str) -> Result<(), Error> {
    let entry = handle::lookup(pool)?;
    not_from_own_task(&entry, what)?;
    let entry = handle::unregister(pool)?;
    entry.pool.shutdown();
    Ok(())
}

/// Set the target size to `n`, which must lie within the pool's bounds.
pub(crate) fn resize(entry: &Entry, n: usize) -> Result<(), Error> {
    let stats = entry.pool.stats();
    let (min, max) = (stats.min_threads, stats.max_threads);
    if !(min..=max).contains(&n) {
        return Err(Error::invalid(format!(
            "size {n} is outside the pool's bounds {min}..={max}"
        )));
    }
    entry.pool.resize(n);
    Ok(())
}

/// Queue `func(arg)` to run once on a worker thread. When the queue is full,
/// wait for room if the pool was built with `TIDEPOOL_ON_FULL_BLOCK` (the
/// default), else fail with `TIDEPOOL_ERR_FULL`. Called from a task of the same
/// pool, a submit that would wait for room (here or in
/// `tidepool_submit_timeout()`) runs the task at once on the calling thread
/// instead (counted in `tidepool_stats.inline_jobs`).
///
/// `arg` stays the caller's: the library only passes it to `func` and `done`.
/// `done`, if not NULL, is called once with `arg` and the task's status after
/// the task ran or was cancelled (the place to free `arg`); never when this call
/// fails. `func` and `done` must be safe to call on another thread.
///
/// Returns `TIDEPOOL_OK`; `TIDEPOOL_ERR_INVALID_ARGUMENT` (`func` NULL),
/// `TIDEPOOL_ERR_INVALID_POOL`, `TIDEPOOL_ERR_SHUT_DOWN` or
/// `TIDEPOOL_ERR_FULL`. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_submit(
    pool: *mut tidepool_pool,
    func: tidepool_task_fn,
    arg: *mut c_void,
    done: tidepool_done_fn,
) -> c_int {
    code(|| submit(&*handle::lookup(pool)?, func, arg, done, Wait::AsBuilt))
}

/// As `tidepool_submit()`, but never waits: fails at once with
/// `TIDEPOOL_ERR_FULL` if the queue is full.
#[no_mangle]
pub unsafe extern "C" fn tidepool_try_submit(
    pool: *mut tidepool_pool,
    func: tidepool_task_fn,
    arg: *mut c_void,
    done: tidepool_done_fn,
) -> c_int {
    code(|| submit(&*handle::lookup(pool)?, func, arg, done, Wait::Never))
}

/// As `tidepool_submit()`, but waits at most `timeout_us` microseconds for
/// room: fails with `TIDEPOOL_ERR_TIMEOUT` if the queue stayed full.
#[no_mangle]
pub unsafe extern "C" fn tidepool_submit_timeout(
    pool: *mut tidepool_pool,
    func: tidepool_task_fn,
    arg: *mut c_void,
    done: tidepool_done_fn,
    timeout_us: u64,
) -> c_int {
    let wait = Wait::AtMost(Duration::from_micros(timeout_us));
    code(|| submit(&*handle::lookup(pool)?, func, arg, done, wait))
}

/// Wait until the queue is empty and every worker thread waits for work.
/// Tasks submitted meanwhile by other threads may or may not be waited for.
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_POOL`, or
/// `TIDEPOOL_ERR_IN_OWN_TASK` if called from a task of the same pool (which it
/// would wait for). Thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_wait_idle(pool: *mut tidepool_pool) -> c_int {
    code(|| {
        let entry = handle::lookup(pool)?;
        not_from_own_task(&entry, "tidepool_wait_idle")?;
        entry.pool.wait_idle();
        Ok(())
    })
}

/// Set the pool's target size to `n` worker threads, within its min and max.
/// New threads start at once; idle threads above `n` exit at once, busy ones
/// when their task returns (a running task is never interrupted).
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_ARGUMENT` (`n` outside min..max)
/// or `TIDEPOOL_ERR_INVALID_POOL`. Thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_resize(pool: *mut tidepool_pool, n: usize) -> c_int {
    code(|| resize(&*handle::lookup(pool)?, n))
}

/// Store the number of worker threads alive now in `*out`.
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_ARGUMENT` (`out` NULL) or
/// `TIDEPOOL_ERR_INVALID_POOL`. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_size(pool: *mut tidepool_pool, out: *mut usize) -> c_int {
    code(|| {
        let entry = handle::lookup(pool)?;
        // SAFETY: per this function's contract.
        let out = unsafe { out.as_mut() }.ok_or_else(|| Error::invalid("out is NULL"))?;
        *out = entry.pool.live_threads();
        Ok(())
    })
}

/// Stop accepting tasks, run every queued task, and wait for every worker
/// thread to exit. The pool stays valid for `tidepool_stats_get()` until
/// `tidepool_destroy()`; calling this again does nothing.
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_POOL`, or
/// `TIDEPOOL_ERR_IN_OWN_TASK` if called from a task of the same pool. Thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_shutdown(pool: *mut tidepool_pool) -> c_int {
    code(|| {
        let entry = handle::lookup(pool)?;
        not_from_own_task(&entry, "tidepool_shutdown")?;
        entry.pool.shutdown();
        Ok(())
    })
}

/// Stop accepting tasks, cancel every task that has not started (each one's
/// `done` is called with `TIDEPOOL_ERR_CANCELLED`, on this thread), and wait
/// for the worker threads, which finish their current task, to exit. If
/// `cancelled` is not NULL, `*cancelled` receives how many tasks were cancelled.
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_POOL`, or
/// `TIDEPOOL_ERR_IN_OWN_TASK` if called from a task of the same pool. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_shutdown_now(
    pool: *mut tidepool_pool,
    cancelled: *mut usize,
) -> c_int {
    code(|| {
        let entry = handle::lookup(pool)?;
        not_from_own_task(&entry, "tidepool_shutdown_now")?;
        let pending = entry.pool.shutdown_now();
        let n = pending.len();
        drop(pending); // each dropped task calls its completion callback
                       // SAFETY: per this function's contract.
        if let Some(out) = unsafe { cancelled.as_mut() } {
            *out = n;
        }
        Ok(())
    })
}

/// Shut the pool down as `tidepool_shutdown()` does (if not yet), then free
/// it. `pool` is invalid afterwards: calls with it fail with
/// `TIDEPOOL_ERR_INVALID_POOL`.
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_POOL`, or
/// `TIDEPOOL_ERR_IN_OWN_TASK` if called from a task of the same pool (nothing
/// is done then). Thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_destroy(pool: *mut tidepool_pool) -> c_int {
    code(|| destroy(pool, "tidepool_destroy"))
}
