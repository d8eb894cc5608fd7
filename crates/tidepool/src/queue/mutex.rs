//! The papers' baseline: a mutex around a deque.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::deque::Deque;
use super::TaskQueue;
use crate::task::Task;

/// A mutex-guarded FIFO. Idle workers park at once instead of spinning,
/// as the papers' mutex + condition variable pools do.
#[derive(Debug)]
pub struct MutexQueue {
    deque: Mutex<Deque>,
    len: AtomicUsize,
}

impl MutexQueue {
    /// A queue holding at most `capacity` tasks (`None`: unbounded).
    pub fn new(capacity: Option<usize>) -> Self {
        MutexQueue {
            deque: Mutex::new(Deque::new(capacity)),
            len: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Deque> {
        self.deque.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TaskQueue for MutexQueue {
    fn push(&self, task: Task) -> Result<(), Task> {
        self.lock().push(task, &self.len)
    }

    fn pop(&self) -> Option<Task> {
        if self.is_empty() {
            return None;
        }
        self.lock().pop(&self.len)
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    fn spin_before_park(&self) -> bool {
        false
    }
}
