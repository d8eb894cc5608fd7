//! A spinlock around a deque.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::deque::Deque;
use super::spin_lock::SpinLock;
use super::TaskQueue;
use crate::task::Task;

/// A spinlock-guarded FIFO: contenders spin (then yield) instead of sleeping.
#[derive(Debug)]
pub struct SpinQueue {
    deque: SpinLock<Deque>,
    len: AtomicUsize,
}

impl SpinQueue {
    /// A queue holding at most `capacity` tasks (`None`: unbounded).
    pub fn new(capacity: Option<usize>) -> Self {
        SpinQueue {
            deque: SpinLock::new(Deque::new(capacity)),
            len: AtomicUsize::new(0),
        }
    }
}

impl TaskQueue for SpinQueue {
    fn push(&self, task: Task) -> Result<(), Task> {
        self.deque.lock().push(task, &self.len)
    }

    fn pop(&self) -> Option<Task> {
        if self.is_empty() {
            return None;
        }
        self.deque.lock().pop(&self.len)
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    fn spin_before_park(&self) -> bool {
        true
    }
}
