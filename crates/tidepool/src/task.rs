//! A unit of work as it travels through the queue: one thin box holding the
//! closure and its timestamps, so a queue slot is two words.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Clock ticks of a task's submission and acceptance (0 with statistics off).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stamps {
    pub(crate) submitted: u64,
    pub(crate) accepted: u64,
}

/// The boxed part of a task.
pub(crate) trait Body: Send {
    /// Run the closure; true when the user's code panicked (and the panic was
    /// already caught and handed to a `JoinHandle`).
    fn call(self: Box<Self>) -> bool;
    fn stamps(&self) -> Stamps;
    fn stamps_mut(&mut self) -> &mut Stamps;
}

struct Job<F> {
    stamps: Stamps,
    f: F,
}

impl<F: FnOnce() -> bool + Send> Body for Job<F> {
    #[inline]
    fn call(self: Box<Self>) -> bool {
        (self.f)()
    }
    #[inline]
    fn stamps(&self) -> Stamps {
        self.stamps
    }
    #[inline]
    fn stamps_mut(&mut self) -> &mut Stamps {
        &mut self.stamps
    }
}

/// A task waiting in a pool's queue.
///
/// [`Pool::shutdown_now`](crate::Pool::shutdown_now) hands back the tasks that
/// never started; [`run`](Task::run) runs one on the calling thread, and
/// dropping it cancels it (its `JoinHandle` then reports
/// [`JoinError::Cancelled`](crate::JoinError::Cancelled)).
pub struct Task(Box<dyn Body>);

impl Task {
    /// Wrap a closure that returns whether it panicked.
    #[inline]
    pub(crate) fn new(f: impl FnOnce() -> bool + Send + 'static) -> Self {
        Task(Box::new(Job {
            stamps: Stamps::default(),
            f,
        }))
    }

    #[inline]
    pub(crate) fn stamps(&self) -> Stamps {
        self.0.stamps()
    }

    #[inline]
    pub(crate) fn stamps_mut(&mut self) -> &mut Stamps {
        self.0.stamps_mut()
    }

    /// Run on the current thread, catching a panic; true if it panicked.
    #[inline]
    pub(crate) fn call(self) -> bool {
        catch_unwind(AssertUnwindSafe(|| self.0.call())).unwrap_or(true)
    }

    /// Run the task on the calling thread. A panic in the task is caught and
    /// delivered as it would have been on a worker.
    pub fn run(self) {
        self.call();
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_two_words() {
        assert_eq!(
            std::mem::size_of::<Task>(),
            2 * std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn run_catches_panics() {
        let t = Task::new(|| panic!("inside a task"));
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        assert!(t.call());
        std::panic::set_hook(prev);
        assert!(!Task::new(|| false).call());
    }
}
