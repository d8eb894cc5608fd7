//! A unit of work as it travels through the queue.

use std::fmt;

/// A task's body. It returns `true` when the user's code panicked and the
/// panic was already caught and handed to a `JoinHandle`.
pub(crate) type Body = Box<dyn FnOnce() -> bool + Send + 'static>;

/// A task waiting in a pool's queue.
///
/// [`Pool::shutdown_now`](crate::Pool::shutdown_now) hands back the tasks that
/// never started; [`run`](Task::run) runs one on the calling thread, and
/// dropping it cancels it (its `JoinHandle` then reports
/// [`JoinError::Cancelled`](crate::JoinError::Cancelled)).
pub struct Task {
    pub(crate) body: Body,
    /// Clock ticks when `submit` was called (0 with statistics off).
    pub(crate) submitted: u64,
    /// Clock ticks when the queue accepted the task (0 with statistics off).
    pub(crate) accepted: u64,
}

impl Task {
    pub(crate) fn new(body: Body) -> Self {
        Task {
            body,
            submitted: 0,
            accepted: 0,
        }
    }

    /// Run the task on the calling thread. A panic in the task is caught and
    /// delivered as it would have been on a worker.
    pub fn run(self) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(self.body));
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task").finish_non_exhaustive()
    }
}
