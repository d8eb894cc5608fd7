//! The fastest flavour: crossbeam's lock-free queues.
//!
//! Unbounded, it is a preallocated ring (`ArrayQueue`) that spills into a
//! mutex-guarded deque only while the ring is full. Tasks are stored by value
//! (56 bytes); a segmented lock-free list (`SegQueue`) would allocate a fresh
//! ~2 KiB block every 31 tasks — `malloc`, page faults and zeroing on the
//! submit path, measured at a quarter of the CPU time in a backlog. The ring
//! reuses its slots forever, and the overflow deque keeps its buffer: once
//! the ring is full the pool is backlogged anyway, and a short lock there
//! costs less than fresh memory.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

use crossbeam_queue::ArrayQueue;

use super::TaskQueue;
use crate::task::Task;

/// Slots in the unbounded queue's ring (64 bytes each: 256 KiB).
pub const RING_SLOTS: usize = 4096;

/// A lock-free FIFO. Idle workers spin, then yield, then park.
#[derive(Debug)]
pub struct LockFreeQueue {
    /// The preallocated ring: the whole queue when bounded; when unbounded,
    /// used while the overflow is empty.
    ring: ArrayQueue<Task>,
    /// Unbounded only: what did not fit in the ring.
    overflow: Option<Overflow>,
}

/// Tasks pushed while the ring was full, and every later task until this
/// drains (so order is kept: the ring's tasks are older).
#[derive(Debug, Default)]
struct Overflow {
    /// Tasks in `deque`, changed with `SeqCst` read-modify-writes (see
    /// `push_is_seq_cst`) and read without the lock.
    len: AtomicUsize,
    deque: Mutex<VecDeque<Task>>,
}

impl Overflow {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Task>> {
        self.deque.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_empty(&self) -> bool {
        self.len.load(SeqCst) == 0
    }

    fn push(&self, task: Task) {
        let mut deque = self.lock();
        deque.push_back(task);
        self.len.fetch_add(1, SeqCst);
    }

    fn pop(&self) -> Option<Task> {
        if self.is_empty() {
            return None;
        }
        let mut deque = self.lock();
        let task = deque.pop_front();
        if task.is_some() {
            self.len.fetch_sub(1, SeqCst);
        } else {
            // Drained: give back the memory a long backlog grew.
            deque.shrink_to(RING_SLOTS);
        }
        task
    }
}

impl LockFreeQueue {
    /// A queue holding at most `capacity` tasks (`None`: unbounded).
    pub fn new(capacity: Option<usize>) -> Self {
        match capacity {
            None => LockFreeQueue {
                ring: ArrayQueue::new(RING_SLOTS),
                overflow: Some(Overflow::default()),
            },
            Some(n) => LockFreeQueue {
                ring: ArrayQueue::new(n.max(1)),
                overflow: None,
            },
        }
    }
}

impl TaskQueue for LockFreeQueue {
    #[inline]
    fn push(&self, task: Task) -> Result<(), Task> {
        match &self.overflow {
            None => self.ring.push(task),
            // FIFO except for pushes racing the moment the ring fills or the
            // overflow drains: those may swap places with each other.
            Some(overflow) if overflow.is_empty() => {
                if let Err(task) = self.ring.push(task) {
                    overflow.push(task);
                }
                Ok(())
            }
            Some(overflow) => {
                overflow.push(task);
                Ok(())
            }
        }
    }

    #[inline]
    fn pop(&self) -> Option<Task> {
        self.ring
            .pop()
            .or_else(|| self.overflow.as_ref().and_then(Overflow::pop))
    }

    fn len(&self) -> usize {
        self.ring.len() + self.overflow.as_ref().map_or(0, |o| o.len.load(SeqCst))
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.ring.is_empty() && self.overflow.as_ref().map_or(true, Overflow::is_empty)
    }

    fn spin_before_park(&self) -> bool {
        true
    }

    /// crossbeam-queue 0.3's `ArrayQueue::push` moves the tail with a `SeqCst`
    /// compare-exchange and `is_empty` loads head and tail with `SeqCst`
    /// (checked against the source of the locked version; re-check when
    /// upgrading); the overflow counts its tasks with `SeqCst` read-modify-
    /// writes and is read with `SeqCst` loads.
    fn push_is_seq_cst(&self) -> bool {
        true
    }

    /// Likewise `ArrayQueue::pop` moves the head with a `SeqCst`
    /// compare-exchange and `len` loads head and tail with `SeqCst`; the
    /// overflow's count falls with a `SeqCst` read-modify-write. (Only the
    /// bounded queue — the ring alone — ever blocks a submitter.)
    fn pop_is_seq_cst(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn spills_past_the_ring_and_keeps_order() {
        let q = LockFreeQueue::new(None);
        let out = Arc::new(Mutex::new(Vec::new()));
        let n = RING_SLOTS + 100;
        for i in 0..n {
            let out = out.clone();
            q.push(Task::new(move || {
                out.lock().unwrap().push(i);
                false
            }))
            .unwrap();
        }
        assert_eq!(q.len(), n);
        // Drain part of the ring, push more: they queue behind the overflow.
        for _ in 0..10 {
            q.pop().unwrap().run();
        }
        for i in n..n + 5 {
            let out = out.clone();
            q.push(Task::new(move || {
                out.lock().unwrap().push(i);
                false
            }))
            .unwrap();
        }
        while let Some(t) = q.pop() {
            t.run();
        }
        assert!(q.is_empty());
        assert_eq!(*out.lock().unwrap(), (0..n + 5).collect::<Vec<_>>());
    }
}
