//! The lock-based flavors: one bounded deque behind a lock, generic over
//! the lock. `mutex`, `spin` and `hybrid` differ only in how a thread waits
//! for the lock, and whether an idle worker spins before it parks.

use std::fmt;
use std::ops::DerefMut;
use std::time::Duration;

use super::deque::Deque;
use super::spin_lock::{SpinGuard, SpinLock};
use super::TaskQueue;
use crate::sync::{lock, AtomicUsize, Mutex, MutexGuard};
use crate::task::Task;
use std::sync::atomic::Ordering::Acquire;

/// A lock around the deque.
pub(crate) trait DequeLock: Send + Sync + fmt::Debug {
    /// Proof of holding the lock.
    type Guard<'a>: DerefMut<Target = Deque>
    where
        Self: 'a;
    /// Whether an idle worker should spin before it parks with this lock.
    const SPIN_BEFORE_PARK: bool;
    /// Take the lock, waiting as this kind of lock waits.
    fn lock(&self) -> Self::Guard<'_>;
}

/// The papers' baseline: a mutex (futex-based: contenders sleep in the
/// kernel). Idle workers park at once, as the papers' mutex + condition
/// variable pools do.
#[derive(Debug)]
pub(crate) struct MutexLock(Mutex<Deque>);

impl DequeLock for MutexLock {
    type Guard<'a> = MutexGuard<'a, Deque>;
    const SPIN_BEFORE_PARK: bool = false;
    fn lock(&self) -> Self::Guard<'_> {
        lock(&self.0)
    }
}

/// A test-and-test-and-set spinlock: contenders spin, then yield.
impl DequeLock for SpinLock<Deque> {
    type Guard<'a> = SpinGuard<'a, Deque>;
    const SPIN_BEFORE_PARK: bool = true;
    fn lock(&self) -> Self::Guard<'_> {
        SpinLock::lock(self)
    }
}

/// Bahadur et al. §3.1, "spinlock first": up to `attempts` tries, and if all
/// fail the thread sleeps for `sleep` and starts over. Neither a context
/// switch per contended access (mutex) nor unbounded spinning (spinlock).
#[derive(Debug)]
pub(crate) struct HybridLock {
    lock: SpinLock<Deque>,
    attempts: u32,
    sleep: Duration,
}

impl DequeLock for HybridLock {
    type Guard<'a> = SpinGuard<'a, Deque>;
    const SPIN_BEFORE_PARK: bool = true;
    fn lock(&self) -> Self::Guard<'_> {
        loop {
            for _ in 0..self.attempts {
                if let Some(guard) = self.lock.try_lock() {
                    return guard;
                }
                std::hint::spin_loop();
            }
            std::thread::sleep(self.sleep);
        }
    }
}

/// A FIFO of tasks: a [`Deque`] behind the lock `L`, with its length
/// mirrored in an atomic so that `len`/`is_empty` never take the lock.
#[derive(Debug)]
pub(crate) struct LockedQueue<L> {
    deque: L,
    len: AtomicUsize,
}

/// The `mutex` flavor.
pub(crate) type MutexQueue = LockedQueue<MutexLock>;
/// The `spin` flavor.
pub(crate) type SpinQueue = LockedQueue<SpinLock<Deque>>;
/// The `hybrid` flavor.
pub(crate) type HybridQueue = LockedQueue<HybridLock>;

impl<L> LockedQueue<L> {
    fn with_lock(deque: L) -> Self {
        LockedQueue {
            deque,
            len: AtomicUsize::new(0),
        }
    }
}

impl MutexQueue {
    /// A queue holding at most `capacity` tasks (`None`: unbounded).
    pub(crate) fn new(capacity: Option<usize>) -> Self {
        Self::with_lock(MutexLock(Mutex::new(Deque::new(capacity))))
    }
}

impl SpinQueue {
    /// A queue holding at most `capacity` tasks (`None`: unbounded).
    pub(crate) fn new(capacity: Option<usize>) -> Self {
        Self::with_lock(SpinLock::new(Deque::new(capacity)))
    }
}

impl HybridQueue {
    /// A queue of at most `capacity` tasks; `attempts` lock tries (at least one
    /// is always made) before each `sleep`.
    pub(crate) fn new(capacity: Option<usize>, attempts: u32, sleep: Duration) -> Self {
        Self::with_lock(HybridLock {
            lock: SpinLock::new(Deque::new(capacity)),
            attempts: attempts.max(1),
            sleep,
        })
    }
}

impl<L: DequeLock> TaskQueue for LockedQueue<L> {
    fn push(&self, task: Task) -> Result<(), Task> {
        self.deque.lock().push(task, &self.len)
    }

    fn pop(&self) -> Option<Task> {
        // An idle worker's polls skip the lock while the queue looks empty.
        if self.is_empty() {
            return None;
        }
        self.deque.lock().pop(&self.len)
    }

    fn len(&self) -> usize {
        self.len.load(Acquire)
    }

    fn spin_before_park(&self) -> bool {
        L::SPIN_BEFORE_PARK
    }
}
