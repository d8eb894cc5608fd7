//! The fastest flavour: crossbeam's lock-free queues.
//!
//! Bounded, it is one preallocated ring (`ArrayQueue`). Unbounded, it is a
//! preallocated ring that spills into a segmented lock-free list
//! ([`SegQueue`], crossbeam's with its blocks recycled) only while the ring is
//! full. Tasks are stored by value (56 bytes). The ring reuses its slots
//! forever and costs two read-modify-writes per task; the list four, which is
//! why it is not the whole queue — but once the ring is full the pool is
//! backlogged, and there the list's lock-free push and pop matter more: the
//! mutex-guarded deque that used to be the overflow made every push and pop
//! of a backlog contend on one lock (with two submitters on two cores, a
//! quarter of all CPU time in `Overflow::push`/`pop`, and futex sleeps on a
//! quiet machine; `docs/design.md`, "Why two submitters lost"), and
//! crossbeam's own `SegQueue` made every backlog fault its memory in afresh
//! ("Why eight submitters lost").

use crossbeam_queue::ArrayQueue;

use super::seg::SegQueue;

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
    /// Unbounded only: tasks pushed while the ring was full, and every later
    /// task until this drains (so order is kept: the ring's tasks are older).
    overflow: Option<SegQueue<Task>>,
}

impl LockFreeQueue {
    /// A queue holding at most `capacity` tasks (`None`: unbounded).
    pub fn new(capacity: Option<usize>) -> Self {
        match capacity {
            None => LockFreeQueue {
                ring: ArrayQueue::new(RING_SLOTS),
                overflow: Some(SegQueue::new()),
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
        // In a long backlog the ring is often empty while the overflow is
        // not: two plain loads skip the failed `pop` (and its fence) then.
        if !self.ring.is_empty() {
            if let Some(task) = self.ring.pop() {
                return Some(task);
            }
        }
        self.overflow.as_ref().and_then(SegQueue::pop)
    }

    fn len(&self) -> usize {
        self.ring.len() + self.overflow.as_ref().map_or(0, SegQueue::len)
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.ring.is_empty() && self.overflow.as_ref().is_none_or(SegQueue::is_empty)
    }

    fn spin_before_park(&self) -> bool {
        true
    }

    /// crossbeam-queue 0.3's `ArrayQueue::push` and our `SegQueue::push` move
    /// the tail with a `SeqCst` compare-exchange, and their `is_empty` loads
    /// head and tail with `SeqCst` (checked against the source of the locked
    /// version, 0.3.14; re-check when upgrading).
    fn push_is_seq_cst(&self) -> bool {
        true
    }

    /// Likewise both `pop`s move the head with a `SeqCst` compare-exchange and
    /// `len` loads head and tail with `SeqCst`. (Only the bounded queue — the
    /// ring alone — ever blocks a submitter.)
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
        let n = 2 * RING_SLOTS + 100;
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

    /// A backlog drained by two workers while two submitters keep adding:
    /// every task runs exactly once, through the ring and the overflow.
    #[test]
    fn a_backlog_drains_through_refills_exactly_once() {
        const PER: usize = 3 * RING_SLOTS;
        let q = Arc::new(LockFreeQueue::new(None));
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let task = |ran: &Arc<std::sync::atomic::AtomicUsize>| {
            let ran = ran.clone();
            Task::new(move || {
                ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                false
            })
        };
        for _ in 0..PER {
            q.push(task(&ran)).unwrap();
        }
        assert!(q.len() >= PER && !q.overflow.as_ref().unwrap().is_empty());
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let (q, ran) = (q.clone(), ran.clone());
                std::thread::spawn(move || {
                    if i < 2 {
                        for _ in 0..PER {
                            q.push(task(&ran)).unwrap();
                        }
                    } else {
                        while ran.load(std::sync::atomic::Ordering::Relaxed) < 3 * PER {
                            match q.pop() {
                                Some(t) => t.run(),
                                None => std::thread::yield_now(),
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 3 * PER);
        assert!(q.is_empty() && q.pop().is_none() && q.len() == 0);
    }
}
