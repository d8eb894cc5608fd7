//! Errors: each names what went wrong and, for configuration, the allowed range.

use std::fmt;
use std::time::Duration;

use sync_wrapper::SyncWrapper;

/// An invalid pool configuration: names the field, the value and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pool setting `{field}` = {value}: {allowed}")]
#[non_exhaustive]
pub struct BuildError {
    /// The builder field at fault (`min_threads`, `queue_capacity`, …).
    pub field: &'static str,
    /// The value that was given.
    pub value: String,
    /// What would have been accepted.
    pub allowed: String,
}

impl BuildError {
    pub(crate) fn new(
        field: &'static str,
        value: impl fmt::Display,
        allowed: impl Into<String>,
    ) -> Self {
        BuildError {
            field,
            value: value.to_string(),
            allowed: allowed.into(),
        }
    }
}

/// Why a task was not accepted. A refused submission returns it inside a
/// [`Rejected`], with the task handed back (its `JoinHandle`, if any, was
/// never created).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// The pool is shutting down or shut down.
    #[error("the pool is shut down")]
    ShutDown,
    /// The queue is full and the pool rejects rather than blocks (or `try_submit`).
    #[error("the task queue is full")]
    Full,
    /// The queue stayed full for the whole timeout.
    #[error("the task queue stayed full for {0:?}")]
    Timeout(Duration),
    /// The OS refused to create a thread (thread-per-request executor).
    #[error("could not spawn a thread: {0}")]
    Spawn(String),
}

/// Why a [`JoinHandle`](crate::JoinHandle) has no value.
///
/// `Send + Sync + 'static`, so `handle.join()?` works in a function returning
/// `anyhow::Result` or `Result<_, Box<dyn Error + Send + Sync>>`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// The task panicked; [`JoinError::into_panic`] gives back its payload.
    #[error("the task panicked: {}", .0.message())]
    Panicked(Panic),
    /// The task never ran: cancelled by [`JoinHandle::cancel`](crate::JoinHandle::cancel),
    /// dropped by `shutdown_now` or with its queue.
    #[error("the task was cancelled before it ran")]
    Cancelled,
    /// The task never ran: its deadline
    /// ([`TaskOptions::deadline`](crate::TaskOptions::deadline)) passed
    /// while it was queued.
    #[error("the task's deadline passed before it started")]
    Expired,
}

impl JoinError {
    /// The panic message, when the task panicked with a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(p) => Some(p.message()),
            JoinError::Cancelled | JoinError::Expired => None,
        }
    }

    /// True if the task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked(_))
    }

    /// True if the task never ran because it was cancelled (by its
    /// handle, its [`CancelToken`](crate::CancelToken), `shutdown_now`, or
    /// with its queue).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }

    /// True if the task never ran because its deadline passed first.
    pub fn is_expired(&self) -> bool {
        matches!(self, JoinError::Expired)
    }

    /// The panic payload, to resume the panic with `std::panic::resume_unwind`.
    ///
    /// ```
    /// let pool = tidepool::Pool::new(1)?;
    /// let err = pool.submit(|| panic!("boom"))?.join().unwrap_err();
    /// let payload = err.into_panic().unwrap();
    /// let resumed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
    ///     std::panic::resume_unwind(payload)
    /// }));
    /// assert_eq!(resumed.unwrap_err().downcast_ref::<&str>(), Some(&"boom"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_panic(self) -> Option<Box<dyn std::any::Any + Send + 'static>> {
        match self {
            JoinError::Panicked(p) => Some(p.into_payload()),
            JoinError::Cancelled | JoinError::Expired => None,
        }
    }
}

/// A task's panic: its message, and its payload to resume it with.
///
/// The payload is `Send` but not `Sync`; this wrapper is `Sync` because a
/// shared reference gives no access to it (only [`into_payload`](Panic::into_payload),
/// by value) — the same argument as tokio's `JoinError`, proved by
/// [`SyncWrapper`] (see [`Rejected`]).
pub struct Panic {
    message: String,
    payload: SyncWrapper<Box<dyn std::any::Any + Send + 'static>>,
}

impl Panic {
    pub(crate) fn new(payload: Box<dyn std::any::Any + Send + 'static>) -> Self {
        Panic {
            message: panic_message(&*payload).to_string(),
            payload: SyncWrapper::new(payload),
        }
    }

    /// The panic message (`<non-string panic payload>` if it was not a string).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The payload, for `std::panic::resume_unwind`.
    pub fn into_payload(self) -> Box<dyn std::any::Any + Send + 'static> {
        self.payload.into_inner()
    }
}

impl fmt::Debug for Panic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Panic").field(&self.message).finish()
    }
}

/// The message of a panic payload (`&str` or `String`), or a placeholder.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<non-string panic payload>")
}

/// A submission that was not accepted, with the task handed back (as
/// `crossbeam`'s `TrySendError` hands back the message): run it yourself
/// (Java's caller-runs), retry it later, or drop it.
///
/// Returned by every submitting call: [`Pool::submit`](crate::Pool::submit),
/// [`Pool::execute`](crate::Pool::execute), their `try_` forms and
/// [`Pool::submit_timeout`](crate::Pool::submit_timeout).
///
/// `Rejected<F>` is an [`Error`](std::error::Error) and `Send + Sync +
/// 'static` for any `F: Send + 'static` (no `F: Sync` needed), so `?` turns
/// it into an `anyhow::Error`, a `Box<dyn Error + Send + Sync>` or a
/// [`SubmitError`]. It is `Sync` because a shared reference never reaches
/// the task: only [`into_inner`](Rejected::into_inner) and
/// [`into_parts`](Rejected::into_parts) give it back, by value; `Debug` and
/// `Display` show the error alone.
///
/// ```
/// use tidepool::Pool;
///
/// let pool = Pool::builder().threads(1).build()?;
/// pool.shutdown();
/// let rejected = pool.submit(|| 6 * 7).unwrap_err();
/// assert_eq!(*rejected.error(), tidepool::SubmitError::ShutDown);
/// assert_eq!(rejected.into_inner()(), 42); // caller runs
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Rejected<F> {
    error: SubmitError,
    /// Reachable by value only, hence `Sync` without `F: Sync`.
    task: SyncWrapper<F>,
}

impl<F> Rejected<F> {
    pub(crate) fn new(error: SubmitError, task: F) -> Self {
        Rejected {
            error,
            task: SyncWrapper::new(task),
        }
    }

    /// Why the task was refused.
    pub fn error(&self) -> &SubmitError {
        &self.error
    }

    /// The task, unrun.
    pub fn into_inner(self) -> F {
        self.task.into_inner()
    }

    /// Both parts.
    pub fn into_parts(self) -> (SubmitError, F) {
        (self.error, self.task.into_inner())
    }
}

impl<F> fmt::Debug for Rejected<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<F> fmt::Display for Rejected<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

/// Transparent, as thiserror's `#[error(transparent)]`: the message and the
/// source are the [`SubmitError`]'s, so an error chain does not say it twice.
impl<F> std::error::Error for Rejected<F> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

impl<F> From<Rejected<F>> for SubmitError {
    fn from(r: Rejected<F>) -> Self {
        r.error
    }
}
