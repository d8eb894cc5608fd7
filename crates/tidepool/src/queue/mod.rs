//! Task queues: one trait, four flavors.
//!
//! A queue only stores tasks; waiting for work is the pool's idle protocol
//! (`pool::sleep`). What a flavor decides is how threads contend for the
//! queue itself, and whether an idle worker spins a little before it parks.

mod deque;
pub(crate) mod lanes;
mod lock_free;
mod locked;
mod ring;
mod seg;
pub(crate) mod spill;
mod spin_lock;
pub(crate) mod width;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::task::Task;
use crate::task_options::Priority;

pub(crate) use lock_free::set_home;
pub use lock_free::LockFreeQueue;
use locked::{HybridQueue, MutexQueue, SpinQueue};

/// A multi-producer multi-consumer queue of tasks, optionally bounded: FIFO
/// for each producing thread (the default flavor is sharded, so tasks of
/// different producers need not come out in the order they went in, and in
/// a backlog a rare race can take one task ahead of older ones of its
/// producer: `spill`, "What the order is").
pub trait TaskQueue: Send + Sync + fmt::Debug {
    /// Add a task; gives it back if the queue is full. Never blocks for long.
    fn push(&self, task: Task) -> Result<(), Task>;
    /// Take the oldest task, if any. Never blocks for long.
    fn pop(&self) -> Option<Task>;
    /// Tasks in the queue now (may be stale by the time it is read).
    fn len(&self) -> usize;
    /// True when no task is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether an idle worker should spin (then yield) before it parks. Cheap
    /// for a lock-free queue; the papers' mutex queue parks at once.
    fn spin_before_park(&self) -> bool;
    /// True if every successful `push` includes a `SeqCst` read-modify-write
    /// and `is_empty` reads with `SeqCst`: then the wake-up protocol needs no
    /// extra fence on the submit path (see `pool::sleep`). False is always safe.
    fn push_is_seq_cst(&self) -> bool {
        false
    }
    /// True if every successful `pop` includes a `SeqCst` read-modify-write
    /// and `len` reads with `SeqCst`: then the back-pressure protocol needs
    /// no extra fence after a pop (see `pool::room`). False is always safe.
    fn pop_is_seq_cst(&self) -> bool {
        false
    }
}

/// Which task queue a pool uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueFlavor {
    /// A mutex around a deque; idle workers park at once (the papers' baseline).
    Mutex,
    /// A spinlock around a deque (spin, then yield, while the lock is held).
    Spin,
    /// Bahadur et al.'s hybrid lock: `attempts` spinning tries, then sleep
    /// `sleep` and start over.
    Hybrid {
        /// Lock attempts before sleeping (the paper: 3).
        attempts: u32,
        /// How long to sleep after the attempts failed (the paper: 10 ms).
        sleep: Duration,
    },
    /// A lock-free segmented queue; idle workers spin, then yield, then park.
    #[default]
    LockFree,
}

impl QueueFlavor {
    /// The hybrid queue with the paper's parameters (3 attempts, 10 ms sleep).
    pub const HYBRID: QueueFlavor = QueueFlavor::Hybrid {
        attempts: 3,
        sleep: Duration::from_millis(10),
    };

    /// Build a queue of this flavor holding at most `capacity` tasks
    /// (`None`: unbounded).
    pub(crate) fn build(self, capacity: Option<usize>) -> Box<dyn TaskQueue> {
        match self {
            QueueFlavor::Mutex => Box::new(MutexQueue::new(capacity)),
            QueueFlavor::Spin => Box::new(SpinQueue::new(capacity)),
            QueueFlavor::Hybrid { attempts, sleep } => {
                Box::new(HybridQueue::new(capacity, attempts, sleep))
            }
            QueueFlavor::LockFree => Box::new(LockFreeQueue::new(capacity)),
        }
    }

    /// The flavor's short name (`mutex`, `spin`, `hybrid`, `lock-free`).
    pub fn name(&self) -> &'static str {
        match self {
            QueueFlavor::Mutex => "mutex",
            QueueFlavor::Spin => "spin",
            QueueFlavor::Hybrid { .. } => "hybrid",
            QueueFlavor::LockFree => "lock-free",
        }
    }
}

/// The queue a pool holds: the flavor's queue for `Normal` tasks, and the
/// priority lanes beside it (`lanes`), which cost one relaxed load per pop
/// until a task of another priority comes.
#[derive(Debug)]
pub(crate) struct PoolQueue {
    main: MainQueue,
    lanes: lanes::Lanes,
    capacity: Option<usize>,
}

/// The default flavor by value, so its `push` and `pop` inline into the
/// submit path and the worker loop (a task then moves once into a slot and
/// once out, not through a virtual call's return slot and extra stack
/// copies); the other flavors behind the trait.
// One per pool: its size does not matter, the missing indirection does.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum MainQueue {
    /// The default flavor.
    LockFree(LockFreeQueue),
    /// Any other flavor.
    Dyn(Box<dyn TaskQueue>),
}

impl PoolQueue {
    /// The queue of `flavor` holding at most `capacity` tasks.
    pub(crate) fn new(flavor: QueueFlavor, capacity: Option<usize>) -> Self {
        let main = match flavor {
            QueueFlavor::LockFree => MainQueue::LockFree(LockFreeQueue::new(capacity)),
            other => MainQueue::Dyn(other.build(capacity)),
        };
        PoolQueue {
            main,
            lanes: lanes::Lanes::default(),
            capacity,
        }
    }

    /// The queue as the trait sees it.
    #[inline]
    fn get(&self) -> &dyn TaskQueue {
        match &self.main {
            MainQueue::LockFree(q) => q,
            MainQueue::Dyn(q) => &**q,
        }
    }

    /// [`TaskQueue::push`] of a `Normal` task.
    #[inline]
    pub(crate) fn push(&self, task: Task) -> Result<(), Task> {
        match &self.main {
            MainQueue::LockFree(q) => q.push(task),
            MainQueue::Dyn(q) => q.push(task),
        }
    }

    /// Push a task of any priority; gives it back if a bounded queue is
    /// full (the lanes count toward the capacity).
    pub(crate) fn push_with(&self, task: Task, priority: Priority) -> Result<(), Task> {
        if priority == Priority::Normal {
            return self.push(task);
        }
        if self.capacity.is_some_and(|c| self.len() >= c) {
            return Err(task);
        }
        self.lanes.push(task, priority);
        Ok(())
    }

    /// The next task: `High` lane, queue, `Low` lane.
    #[inline]
    pub(crate) fn pop(&self) -> Option<Task> {
        if self.lanes.in_use() {
            return self.pop_by_priority();
        }
        self.pop_main()
    }

    #[inline]
    fn pop_main(&self) -> Option<Task> {
        match &self.main {
            MainQueue::LockFree(q) => q.pop(),
            MainQueue::Dyn(q) => q.pop(),
        }
    }

    #[cold]
    fn pop_by_priority(&self) -> Option<Task> {
        self.lanes
            .pop_high()
            .or_else(|| self.pop_main())
            .or_else(|| self.lanes.pop_low())
    }

    /// [`TaskQueue::is_empty`], lanes included.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        let main = match &self.main {
            MainQueue::LockFree(q) => q.is_empty(),
            MainQueue::Dyn(q) => q.is_empty(),
        };
        main && self.lanes.len() == 0
    }

    /// [`TaskQueue::len`], lanes included.
    pub(crate) fn len(&self) -> usize {
        self.get().len() + self.lanes.len()
    }

    /// [`TaskQueue::spin_before_park`].
    pub(crate) fn spin_before_park(&self) -> bool {
        self.get().spin_before_park()
    }

    /// [`TaskQueue::push_is_seq_cst`].
    pub(crate) fn push_is_seq_cst(&self) -> bool {
        self.get().push_is_seq_cst()
    }

    /// [`TaskQueue::pop_is_seq_cst`].
    pub(crate) fn pop_is_seq_cst(&self) -> bool {
        self.get().pop_is_seq_cst()
    }
}

impl fmt::Display for QueueFlavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error for an unknown queue flavor name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown queue flavor `{0}`: expected one of mutex, spin, hybrid, lock-free")]
pub struct UnknownFlavor(pub String);

impl FromStr for QueueFlavor {
    type Err = UnknownFlavor;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mutex" => Ok(QueueFlavor::Mutex),
            "spin" => Ok(QueueFlavor::Spin),
            "hybrid" => Ok(QueueFlavor::HYBRID),
            "lock-free" | "lockfree" => Ok(QueueFlavor::LockFree),
            other => Err(UnknownFlavor(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests;
