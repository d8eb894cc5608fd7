//! The fastest flavour: crossbeam's lock-free queues.

use crossbeam_queue::{ArrayQueue, SegQueue};

use super::TaskQueue;
use crate::task::Task;

/// A lock-free FIFO: a segmented list when unbounded, a ring buffer when
/// bounded. Idle workers spin, then yield, then park.
#[derive(Debug)]
pub enum LockFreeQueue {
    /// Unbounded: grows in segments, never full.
    Unbounded(SegQueue<Task>),
    /// Bounded: a fixed ring of the given capacity.
    Bounded(ArrayQueue<Task>),
}

impl LockFreeQueue {
    /// A queue holding at most `capacity` tasks (`None`: unbounded).
    pub fn new(capacity: Option<usize>) -> Self {
        match capacity {
            None => LockFreeQueue::Unbounded(SegQueue::new()),
            Some(n) => LockFreeQueue::Bounded(ArrayQueue::new(n.max(1))),
        }
    }
}

impl TaskQueue for LockFreeQueue {
    #[inline]
    fn push(&self, task: Task) -> Result<(), Task> {
        match self {
            LockFreeQueue::Unbounded(q) => {
                q.push(task);
                Ok(())
            }
            LockFreeQueue::Bounded(q) => q.push(task),
        }
    }

    #[inline]
    fn pop(&self) -> Option<Task> {
        match self {
            LockFreeQueue::Unbounded(q) => q.pop(),
            LockFreeQueue::Bounded(q) => q.pop(),
        }
    }

    fn len(&self) -> usize {
        match self {
            LockFreeQueue::Unbounded(q) => q.len(),
            LockFreeQueue::Bounded(q) => q.len(),
        }
    }

    #[inline]
    fn is_empty(&self) -> bool {
        match self {
            LockFreeQueue::Unbounded(q) => q.is_empty(),
            LockFreeQueue::Bounded(q) => q.is_empty(),
        }
    }

    fn spin_before_park(&self) -> bool {
        true
    }

    /// crossbeam-queue 0.3 moves the tail with a `SeqCst` compare-exchange in
    /// both `SegQueue::push` and `ArrayQueue::push`, and `is_empty` loads head
    /// and tail with `SeqCst` (checked against the source of the locked
    /// version; re-check when upgrading).
    fn push_is_seq_cst(&self) -> bool {
        true
    }
}
