//! The bounded deque that the lock-based flavors guard, with a length that
//! can be read without taking their lock.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use crate::sync::AtomicUsize;

use crate::task::Task;

/// A FIFO of tasks with an optional bound.
#[derive(Debug)]
pub(crate) struct Deque {
    items: VecDeque<Task>,
    capacity: usize,
}

impl Deque {
    pub(crate) fn new(capacity: Option<usize>) -> Self {
        Deque {
            items: VecDeque::new(),
            capacity: capacity.unwrap_or(usize::MAX),
        }
    }

    /// Push, mirroring the new length into `len`.
    pub(crate) fn push(&mut self, task: Task, len: &AtomicUsize) -> Result<(), Task> {
        if self.items.len() >= self.capacity {
            return Err(task);
        }
        self.items.push_back(task);
        len.store(self.items.len(), Ordering::Release);
        Ok(())
    }

    /// Pop, mirroring the new length into `len`.
    pub(crate) fn pop(&mut self, len: &AtomicUsize) -> Option<Task> {
        let task = self.items.pop_front();
        if task.is_some() {
            len.store(self.items.len(), Ordering::Release);
        }
        task
    }
}
