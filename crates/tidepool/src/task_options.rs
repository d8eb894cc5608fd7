//! Per-task options: a priority, a deadline and a cancel token, given with
//! [`Pool::submit_with`](crate::Pool::submit_with) and
//! [`Pool::execute_with`](crate::Pool::execute_with).
//!
//! A task without options (or with the default ones) takes the plain submit
//! path: nothing here costs it anything. A task with a deadline or a token
//! carries them inside its closure, and checks them itself when a worker
//! reaches it: not started by its deadline, or its token cancelled, it is
//! dropped unrun, its handle completed with [`JoinError::Expired`] or
//! [`JoinError::Cancelled`](crate::JoinError::Cancelled), and the pool counts it
//! ([`PoolStats::expired`](crate::PoolStats::expired),
//! [`PoolStats::cancelled`](crate::PoolStats::cancelled)).
//!
//! [`JoinError::Expired`]: crate::JoinError::Expired

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Which queued tasks start first: every queued `High` task before any
/// `Normal` one, every `Normal` before any `Low`; tasks of one priority
/// keep the pool's order. Strict: a `Low` task waits as long as higher
/// ones keep coming (`docs/policies.md`, "Per-task options: priorities, deadlines, cancellation").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Priority {
    /// Starts before every queued `Normal` and `Low` task.
    High,
    /// The default: what `submit` and `execute` give.
    #[default]
    Normal,
    /// Starts only when no `High` or `Normal` task is queued.
    Low,
}

/// Options for one task: see [`Pool::submit_with`](crate::Pool::submit_with).
///
/// ```
/// use std::time::{Duration, Instant};
/// use tidepool::{CancelToken, Pool, Priority, TaskOptions};
///
/// let pool = Pool::fixed(2)?;
/// let token = CancelToken::new();
/// let options = TaskOptions::new()
///     .priority(Priority::High)
///     .deadline(Instant::now() + Duration::from_secs(5))
///     .cancel_token(token.clone());
/// assert_eq!(pool.submit_with(options, || 6 * 7)?.join()?, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct TaskOptions {
    pub(crate) priority: Priority,
    pub(crate) deadline: Option<Instant>,
    pub(crate) token: Option<CancelToken>,
}

impl TaskOptions {
    /// No options: `Normal` priority, no deadline, no token.
    pub fn new() -> Self {
        TaskOptions::default()
    }

    /// Start before queued tasks of lower priority.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Never start after `deadline`: a task still queued then is dropped
    /// unrun, and its `join()` gives a `JoinError` whose `is_expired()` is true.
    pub fn deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Drop the task unrun if `token` is cancelled before it starts (its
    /// `join()` then gives `is_cancelled()` at once); a running task can
    /// watch its own clone of the token to stop early.
    pub fn cancel_token(mut self, token: CancelToken) -> Self {
        self.token = Some(token);
        self
    }

    /// Whether these are the default options (the plain submit path).
    pub(crate) fn is_plain(&self) -> bool {
        self.priority == Priority::Normal && self.deadline.is_none() && self.token.is_none()
    }
}

/// Something a cancellation completes at once: a queued task's handle.
pub(crate) trait OnCancel: Send + Sync {
    /// Complete the handle as cancelled, if nobody decided its fate yet.
    fn cancel(&self);
    /// True once the task finished, was cancelled or expired.
    fn is_done(&self) -> bool;
}

/// A cancellation signal shared by any number of tasks (and pools): cheap
/// to clone (one reference count), [`cancel`](CancelToken::cancel) once,
/// read with [`is_cancelled`](CancelToken::is_cancelled) anywhere — as .NET's
/// `CancellationToken` or oneTBB's `task_group_context`.
///
/// ```
/// use tidepool::{CancelToken, Pool, TaskOptions};
///
/// let pool = Pool::fixed(1)?;
/// let token = CancelToken::new();
/// let (tx, rx) = std::sync::mpsc::channel::<()>();
/// let busy = pool.submit(move || rx.recv().unwrap())?; // holds the only worker
/// let queued = pool.submit_with(TaskOptions::new().cancel_token(token.clone()), || 1)?;
/// token.cancel();
/// assert!(queued.join().unwrap_err().is_cancelled());
/// tx.send(())?;
/// busy.join()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    /// Handles of tasks submitted with this token, completed at `cancel`.
    /// Pruned of finished ones whenever it doubles.
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    hooks: Vec<Box<dyn OnCancel>>,
    pruned_at: usize,
}

impl CancelToken {
    /// A token not cancelled yet.
    pub fn new() -> Self {
        CancelToken::default()
    }

    /// Cancel every task carrying this token that has not started: their
    /// handles report `is_cancelled()` at once, and workers drop them unrun.
    /// Running tasks go on (they may watch [`is_cancelled`](Self::is_cancelled)).
    /// Idempotent.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::Release);
        let hooks = std::mem::take(&mut lock(&self.inner.waiting).hooks);
        for hook in hooks {
            hook.cancel();
        }
    }

    /// True once [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Complete `hook` when the token is cancelled (at once if it is).
    pub(crate) fn on_cancel(&self, hook: Box<dyn OnCancel>) {
        let mut waiting = lock(&self.inner.waiting);
        // Checked under the lock: `cancel` sets the flag before it takes
        // the hooks, so a hook added after that sees the flag.
        if self.is_cancelled() {
            drop(waiting);
            hook.cancel();
            return;
        }
        if waiting.hooks.len() >= 2 * waiting.pruned_at.max(32) {
            waiting.hooks.retain(|h| !h.is_done());
            waiting.pruned_at = waiting.hooks.len();
        }
        waiting.hooks.push(hook);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}
