//! Per-task options for C: a priority, a deadline and a cancel token, given
//! to `tidepool_submit_with()`.
//!
//! The pool checks the deadline and the token when a worker reaches the
//! task (`tidepool::TaskOptions`): a task not started by its deadline, or
//! whose token was cancelled, is dropped unrun, and its completion callback
//! gets `TIDEPOOL_ERR_EXPIRED` or `TIDEPOOL_ERR_CANCELLED`. A dropped task
//! learns which from the task's own deadline and token (`Guarded`): the
//! token is checked first, as the pool does, so a task both cancelled and
//! expired by then reports `TIDEPOOL_ERR_CANCELLED`.

use std::ffi::{c_int, c_void};
use std::mem::ManuallyDrop;
use std::ptr;
use std::time::{Duration, Instant};

use tidepool::{CancelToken, Priority, TaskOptions};

use crate::boundary::{boundary, code};
use crate::error::{Error, TIDEPOOL_ERR_CANCELLED, TIDEPOOL_ERR_EXPIRED};
use crate::handle::{self, tidepool_pool, Entry};
use crate::pool::refused;
use crate::task::{tidepool_done_fn, tidepool_task_fn, CTask, Submitting};

/// `tidepool_submit_with` priority: the default, as `tidepool_submit()`.
pub const TIDEPOOL_PRIORITY_NORMAL: c_int = 0;
/// `tidepool_submit_with` priority: starts before every queued normal and low task.
pub const TIDEPOOL_PRIORITY_HIGH: c_int = 1;
/// `tidepool_submit_with` priority: starts only when no high or normal task is queued.
pub const TIDEPOOL_PRIORITY_LOW: c_int = 2;

/// An opaque cancel token, created by `tidepool_cancel_token_new()` or
/// `tidepool_cancel_token_clone()` and freed by `tidepool_cancel_token_free()`.
/// Cancelling it (through any clone) drops every task submitted with it that
/// has not started. Thread-safe.
pub struct tidepool_cancel_token {
    token: CancelToken,
}

/// A C task with a deadline and/or a token: reports why it was dropped unrun.
struct Guarded {
    task: ManuallyDrop<CTask>,
    deadline: Option<Instant>,
    token: Option<CancelToken>,
}

impl Guarded {
    fn run(self) {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; each field moves out once.
        let (task, token) = unsafe { (ptr::read(&*this.task), ptr::read(&this.token)) };
        drop(token);
        task.run();
    }

    /// Why the pool dropped this task unrun, if its options say so.
    fn refused_because(&self) -> Option<c_int> {
        if self.token.as_ref().is_some_and(CancelToken::is_cancelled) {
            Some(TIDEPOOL_ERR_CANCELLED)
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            Some(TIDEPOOL_ERR_EXPIRED)
        } else {
            None
        }
    }
}

impl Drop for Guarded {
    /// Dropped unrun: by its options (the pool counted it), else as any C task.
    fn drop(&mut self) {
        // SAFETY: `task` is taken once, here; `run` never lets `drop` see it.
        let task = unsafe { ManuallyDrop::take(&mut self.task) };
        match self.refused_because() {
            Some(status) => task.refuse(status),
            None => drop(task),
        }
    }
}

fn priority(p: c_int) -> Result<Priority, Error> {
    match p {
        TIDEPOOL_PRIORITY_NORMAL => Ok(Priority::Normal),
        TIDEPOOL_PRIORITY_HIGH => Ok(Priority::High),
        TIDEPOOL_PRIORITY_LOW => Ok(Priority::Low),
        other => Err(Error::invalid(format!(
            "priority {other}: must be TIDEPOOL_PRIORITY_NORMAL (0), _HIGH (1) or _LOW (2)"
        ))),
    }
}

fn submit_with(
    entry: &Entry,
    func: tidepool_task_fn,
    arg: *mut c_void,
    done: tidepool_done_fn,
    prio: c_int,
    deadline_ns: u64,
    token: *const tidepool_cancel_token,
) -> Result<(), Error> {
    let func = func.ok_or_else(|| Error::invalid("the task function is NULL"))?;
    let prio = priority(prio)?;
    // SAFETY: per `tidepool_submit_with`'s contract, NULL or a live token.
    let token = unsafe { token.as_ref() }.map(|t| t.token.clone());
    let deadline = match deadline_ns {
        0 => None,
        ns => Some(
            Instant::now()
                .checked_add(Duration::from_nanos(ns))
                .ok_or_else(|| Error::invalid(format!("deadline_ns {ns} is too far away")))?,
        ),
    };
    let mut options = TaskOptions::new().priority(prio);
    if let Some(d) = deadline {
        options = options.deadline(d);
    }
    if let Some(t) = &token {
        options = options.cancel_token(t.clone());
    }
    let task = Guarded {
        task: ManuallyDrop::new(CTask::new(func, arg, done, entry.tasks.clone())),
        deadline,
        token,
    };
    let _submitting = Submitting::enter();
    entry
        .pool
        .execute_with(options, move || task.run())
        .map_err(refused)
}

/// As `tidepool_submit()`, with per-task options:
/// - `priority`: `TIDEPOOL_PRIORITY_NORMAL` (as `tidepool_submit()`), `_HIGH`
///   (starts before every queued normal and low task) or `_LOW`. Strict: a
///   low task waits as long as higher ones keep coming. A high or low task
///   never waits for room: a full queue fails it at once with `TIDEPOOL_ERR_FULL`.
/// - `deadline_ns`: nanoseconds from now (0: none). A task not started by
///   then is dropped unrun; `done` gets `TIDEPOOL_ERR_EXPIRED`.
/// - `token`: NULL or a cancel token. Once it is cancelled, the task, if it
///   has not started, is dropped unrun when a worker reaches it (or at
///   `tidepool_shutdown_now()`); `done` gets `TIDEPOOL_ERR_CANCELLED`. The
///   library keeps its own reference: the caller may free `token` at once.
///
/// Returns as `tidepool_submit()`, and `TIDEPOOL_ERR_INVALID_ARGUMENT` for an
/// unknown priority. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_submit_with(
    pool: *mut tidepool_pool,
    func: tidepool_task_fn,
    arg: *mut c_void,
    done: tidepool_done_fn,
    priority: c_int,
    deadline_ns: u64,
    token: *const tidepool_cancel_token,
) -> c_int {
    code(|| {
        let entry = handle::lookup(pool)?;
        submit_with(&entry, func, arg, done, priority, deadline_ns, token)
    })
}

/// A new cancel token, not cancelled, owned by the caller until
/// `tidepool_cancel_token_free()`. Never NULL. Thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_cancel_token_new() -> *mut tidepool_cancel_token {
    crate::error::clear();
    Box::into_raw(Box::new(tidepool_cancel_token {
        token: CancelToken::new(),
    }))
}

/// A second reference to the same token (cancelling either cancels both),
/// freed on its own with `tidepool_cancel_token_free()`; NULL if `token` is
/// NULL (`TIDEPOOL_ERR_INVALID_ARGUMENT`). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_cancel_token_clone(
    token: *const tidepool_cancel_token,
) -> *mut tidepool_cancel_token {
    boundary(
        |_| ptr::null_mut(),
        || {
            // SAFETY: per this function's contract, NULL or a live token.
            let t = unsafe { token.as_ref() }.ok_or_else(|| Error::invalid("token is NULL"))?;
            Ok(Box::into_raw(Box::new(tidepool_cancel_token {
                token: t.token.clone(),
            })))
        },
    )
}

/// Cancel the token: every task submitted with it that has not started is
/// dropped unrun (its `done` gets `TIDEPOOL_ERR_CANCELLED`); running tasks go
/// on (they may poll `tidepool_cancel_token_is_cancelled()`). Idempotent.
/// Returns `TIDEPOOL_OK` or `TIDEPOOL_ERR_INVALID_ARGUMENT` (`token` NULL).
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_cancel_token_cancel(
    token: *const tidepool_cancel_token,
) -> c_int {
    code(|| {
        // SAFETY: per this function's contract, NULL or a live token.
        let t = unsafe { token.as_ref() }.ok_or_else(|| Error::invalid("token is NULL"))?;
        t.token.cancel();
        Ok(())
    })
}

/// 1 if the token was cancelled, 0 if not, -1 if `token` is NULL
/// (`TIDEPOOL_ERR_INVALID_ARGUMENT`). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_cancel_token_is_cancelled(
    token: *const tidepool_cancel_token,
) -> c_int {
    boundary(
        |_| -1,
        || {
            // SAFETY: per this function's contract, NULL or a live token.
            let t = unsafe { token.as_ref() }.ok_or_else(|| Error::invalid("token is NULL"))?;
            Ok(c_int::from(t.token.is_cancelled()))
        },
    )
}

/// Free one reference to a token (NULL: nothing). Tasks submitted with it
/// keep their own. Thread-safe, but `token` is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn tidepool_cancel_token_free(token: *mut tidepool_cancel_token) {
    crate::error::clear();
    if !token.is_null() {
        // SAFETY: per this function's contract, made by `_new` or `_clone`.
        drop(unsafe { Box::from_raw(token) });
    }
}

/// Run `func(arg)` on the calling thread, telling its pool (if the calling
/// thread is one of its workers) that the thread may block meanwhile: the
/// pool may start another worker, up to its maximum, so that queued tasks go
/// on. The way for a task to wait for other tasks of its own pool (on a
/// condition variable, a semaphore, a `done` callback's signal) without
/// starving it. On any other thread it just calls `func(arg)`.
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_ARGUMENT` (`func` NULL) or
/// `TIDEPOOL_ERR_PANIC` (a Rust `func` panicked; caught). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_block_in_place(
    func: tidepool_task_fn,
    arg: *mut c_void,
) -> c_int {
    code(|| {
        let func = func.ok_or_else(|| Error::invalid("the function is NULL"))?;
        // SAFETY: the caller gave a function that takes this arg.
        tidepool::block_in_place(|| unsafe { func(arg) });
        Ok(())
    })
}
