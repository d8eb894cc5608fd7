//! C tasks: a callback, its argument and an optional completion callback,
//! wrapped into a closure the pool can run.
//!
//! Rules kept here:
//! - A panic in a callback (a Rust callback declared `extern "C-unwind"`) is
//!   caught on the worker, counted, and reported to the completion callback as
//!   `TIDEPOOL_ERR_PANIC`; the worker lives on.
//! - The completion callback runs exactly once for every accepted task: after
//!   it ran (`TIDEPOOL_OK` or `TIDEPOOL_ERR_PANIC`), or when it is dropped
//!   unrun (`TIDEPOOL_ERR_CANCELLED` by `tidepool_shutdown_now` or its token,
//!   `TIDEPOOL_ERR_EXPIRED` by its deadline). That holds wherever the pool
//!   drops it, on a worker or inside a submit call that ran it inline.
//! - A task the pool refused (full, shut down, timed out) comes back to the
//!   submit call in the pool's error, and the call drops it through
//!   `discard`, which marks the thread as discarding: no callback then, the
//!   submit call's error code says it all. Only that drop is silent: the mark
//!   is set for nothing else, so a task dropped unrun anywhere else (say, by
//!   its deadline while the pool ran it inline) still gets its callback.
//! - A task that runs while its thread is marked as submitting was run by the
//!   pool inside the submit call (its caller-runs rule, or a submit that
//!   raced with shutdown): it is counted in `inline_jobs`.
//! - A call back into the same pool that would wait for the calling task
//!   itself is refused when the thread is one of the pool's workers
//!   (`Pool::is_worker_thread`, used by `not_from_own_task` in `pool.rs`).

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::error::{TIDEPOOL_ERR_CANCELLED, TIDEPOOL_ERR_PANIC, TIDEPOOL_OK};
use crate::handle::TaskShared;

/// A task: `void fn(void *arg)`, called once on a worker thread with the
/// `arg` given when it was submitted.
pub type tidepool_task_fn = Option<unsafe extern "C-unwind" fn(arg: *mut c_void)>;

/// A completion callback: `void done(void *arg, int status)`, called once per
/// accepted task with its `arg` and status: `TIDEPOOL_OK` (it ran),
/// `TIDEPOOL_ERR_PANIC` (a task written in Rust panicked),
/// `TIDEPOOL_ERR_CANCELLED` (`tidepool_shutdown_now()` or its cancel token
/// removed it unrun) or `TIDEPOOL_ERR_EXPIRED` (not started by its deadline).
pub type tidepool_done_fn = Option<unsafe extern "C-unwind" fn(arg: *mut c_void, status: c_int)>;

thread_local! {
    /// True inside a submit call: a task run now runs inline.
    static SUBMITTING: Cell<bool> = const { Cell::new(false) };
    /// True while a submit call drops the task the pool refused.
    static DISCARDING: Cell<bool> = const { Cell::new(false) };
}

/// Drop `refused`, the pool's error holding a task it refused, without the
/// task's completion callback: the submit call's error code reports it.
pub(crate) fn discard<T>(refused: T) {
    // `try_with`: a task may be dropped while the thread's locals are torn down.
    let was = DISCARDING.try_with(|d| d.replace(true)).unwrap_or(false);
    drop(refused);
    let _ = DISCARDING.try_with(|d| d.set(was));
}

fn discarding() -> bool {
    DISCARDING.try_with(Cell::get).unwrap_or(false)
}

/// Clears the submitting mark while a callback runs (a task it submits is
/// its own business, not the outer submit's), until dropped.
struct Running(bool);

impl Running {
    fn enter() -> Self {
        Running(SUBMITTING.try_with(|s| s.replace(false)).unwrap_or(false))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = SUBMITTING.try_with(|s| s.set(self.0));
    }
}

/// Marks the thread as submitting until dropped.
pub(crate) struct Submitting(bool);

impl Submitting {
    pub(crate) fn enter() -> Self {
        Submitting(SUBMITTING.try_with(|s| s.replace(true)).unwrap_or(false))
    }
}

impl Drop for Submitting {
    fn drop(&mut self) {
        let _ = SUBMITTING.try_with(|s| s.set(self.0));
    }
}

/// A C task on its way through the pool. Four words, so the pool stores it
/// inline in its queue slot without allocating.
pub(crate) struct CTask {
    func: unsafe extern "C-unwind" fn(*mut c_void),
    arg: *mut c_void,
    done: tidepool_done_fn,
    shared: Arc<TaskShared>,
}

// SAFETY: the C caller hands `arg` to another thread by submitting it; that
// it may be used there is the documented contract of every submit function.
unsafe impl Send for CTask {}

impl CTask {
    pub(crate) fn new(
        func: unsafe extern "C-unwind" fn(*mut c_void),
        arg: *mut c_void,
        done: tidepool_done_fn,
        shared: Arc<TaskShared>,
    ) -> Self {
        CTask {
            func,
            arg,
            done,
            shared,
        }
    }

    /// Run the task, then its completion callback.
    pub(crate) fn run(self) {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; the Arc moves out once.
        let shared = unsafe { ptr::read(&this.shared) };
        let (func, arg) = (this.func, this.arg);
        if SUBMITTING.try_with(Cell::get).unwrap_or(false) {
            // Run by the pool inside the submit call (its caller-runs rule).
            shared.inline.fetch_add(1, Relaxed);
        }
        let _running = Running::enter();
        // SAFETY: the caller of submit gave a function that takes this arg.
        let status = match catch_unwind(AssertUnwindSafe(|| unsafe { func(arg) })) {
            Ok(()) => TIDEPOOL_OK,
            Err(payload) => {
                shared.panicked.fetch_add(1, Relaxed);
                drop_quietly(payload);
                TIDEPOOL_ERR_PANIC
            }
        };
        complete(&shared, this.done, arg, status);
    }
}

impl CTask {
    /// Drop unrun because its options said so (the pool counted it): its
    /// completion callback gets `status` — unless the pool refused the task
    /// and its submit call is discarding it.
    pub(crate) fn refuse(self, status: c_int) {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; the Arc moves out once.
        let shared = unsafe { ptr::read(&this.shared) };
        if discarding() {
            return;
        }
        let _running = Running::enter();
        complete(&shared, this.done, this.arg, status);
    }
}

impl Drop for CTask {
    /// Dropped unrun: refused by a submit (silent) or cancelled.
    fn drop(&mut self) {
        if discarding() {
            return;
        }
        self.shared.cancelled.fetch_add(1, Relaxed);
        let _running = Running::enter();
        complete(&self.shared, self.done, self.arg, TIDEPOOL_ERR_CANCELLED);
    }
}

/// Call the completion callback, if any, catching a panic in it.
fn complete(shared: &TaskShared, done: tidepool_done_fn, arg: *mut c_void, status: c_int) {
    if let Some(done) = done {
        // SAFETY: the caller of submit gave a callback that takes this arg.
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| unsafe { done(arg, status) })) {
            shared.panicked.fetch_add(1, Relaxed);
            drop_quietly(payload);
        }
    }
}

/// Drop a panic payload; a payload whose destructor panics is leaked instead.
fn drop_quietly(payload: Box<dyn std::any::Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(|| drop(payload))) {
        std::mem::forget(again);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_fits_in_four_words() {
        assert_eq!(
            std::mem::size_of::<CTask>(),
            4 * std::mem::size_of::<usize>()
        );
    }
}
