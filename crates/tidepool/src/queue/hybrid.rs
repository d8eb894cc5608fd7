//! Bahadur et al. §3.1: the hybrid spin-then-sleep queue lock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::deque::Deque;
use super::spin_lock::{SpinGuard, SpinLock};
use super::TaskQueue;
use crate::task::Task;

/// A FIFO whose lock is taken "spinlock first": up to `attempts` tries, and if
/// all fail the thread sleeps for `sleep` and starts over. Neither a context
/// switch per contended access (mutex) nor unbounded spinning (spinlock).
#[derive(Debug)]
pub struct HybridQueue {
    deque: SpinLock<Deque>,
    len: AtomicUsize,
    attempts: u32,
    sleep: Duration,
}

impl HybridQueue {
    /// A queue of at most `capacity` tasks; `attempts` lock tries (at least one
    /// is always made) before each `sleep`.
    pub fn new(capacity: Option<usize>, attempts: u32, sleep: Duration) -> Self {
        HybridQueue {
            deque: SpinLock::new(Deque::new(capacity)),
            len: AtomicUsize::new(0),
            attempts: attempts.max(1),
            sleep,
        }
    }

    fn lock(&self) -> SpinGuard<'_, Deque> {
        loop {
            for _ in 0..self.attempts {
                if let Some(guard) = self.deque.try_lock() {
                    return guard;
                }
                std::hint::spin_loop();
            }
            std::thread::sleep(self.sleep);
        }
    }
}

impl TaskQueue for HybridQueue {
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
        true
    }
}
