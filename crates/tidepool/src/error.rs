//! Errors: each names what went wrong and, for configuration, the allowed range.

use std::fmt;
use std::time::Duration;

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

/// Why a task was not accepted. The task itself is dropped (its `JoinHandle`,
/// if any, was never created).
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
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// The task panicked; the payload is the panic's.
    #[error("the task panicked: {}", panic_message(&**.0))]
    Panicked(Box<dyn std::any::Any + Send + 'static>),
    /// The task never ran: it was dropped by `shutdown_now` or with its queue.
    #[error("the task was cancelled before it ran")]
    Cancelled,
}

impl JoinError {
    /// The panic message, when the task panicked with a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(p) => Some(panic_message(&**p)),
            JoinError::Cancelled => None,
        }
    }

    /// The panic payload, to resume the panic with `std::panic::resume_unwind`.
    pub fn into_panic(self) -> Option<Box<dyn std::any::Any + Send + 'static>> {
        match self {
            JoinError::Panicked(p) => Some(p),
            JoinError::Cancelled => None,
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(p) => f
                .debug_tuple("Panicked")
                .field(&panic_message(&**p))
                .finish(),
            JoinError::Cancelled => f.write_str("Cancelled"),
        }
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
