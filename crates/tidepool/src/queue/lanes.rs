//! The priority lanes beside a pool's queue: `High` tasks in one, `Low`
//! tasks in another, `Normal` ones in the queue itself. Untouched (one
//! relaxed load per pop) until a task with another priority is submitted.
//!
//! Protocol with the pool's idle protocol (`pool::sleep`): a lane push
//! counts the task in `queued` with a `SeqCst` read-modify-write after
//! `used` is set, and the submitter then issues the pool's `SeqCst` fence
//! before it looks for a sleeping worker; `is_empty` reads `used` and
//! `queued` with `SeqCst` (a plain load on x86). A worker about to park
//! therefore either sees the lane task or is seen, and woken, by its
//! submitter — as with the mutex queue flavor.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use crate::sync::{lock, AtomicBool, AtomicUsize, Mutex};
use crate::task::Task;
use crate::task_options::Priority;

/// The `High` and `Low` lanes.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    /// Set (for good) by the first lane push.
    used: AtomicBool,
    /// Tasks in both lanes.
    queued: AtomicUsize,
    high: Mutex<VecDeque<Task>>,
    low: Mutex<VecDeque<Task>>,
}

impl Lanes {
    /// Whether a lane was ever used: the one relaxed load on the pop path.
    #[inline]
    pub(crate) fn in_use(&self) -> bool {
        self.used.load(Relaxed)
    }

    /// Queue `task` in the lane of `priority` (`Normal` has none: the
    /// caller pushes it into the queue).
    pub(crate) fn push(&self, task: Task, priority: Priority) {
        if !self.used.load(Relaxed) {
            self.used.store(true, SeqCst);
        }
        let lane = match priority {
            Priority::High => &self.high,
            _ => &self.low,
        };
        let mut lane = lock(lane);
        lane.push_back(task);
        self.queued.fetch_add(1, SeqCst);
    }

    /// The oldest `High` task.
    pub(crate) fn pop_high(&self) -> Option<Task> {
        self.pop(&self.high)
    }

    /// The oldest `Low` task.
    pub(crate) fn pop_low(&self) -> Option<Task> {
        self.pop(&self.low)
    }

    fn pop(&self, lane: &Mutex<VecDeque<Task>>) -> Option<Task> {
        if self.queued.load(SeqCst) == 0 {
            return None;
        }
        let task = lock(lane).pop_front()?;
        self.queued.fetch_sub(1, SeqCst);
        Some(task)
    }

    /// Tasks in both lanes.
    pub(crate) fn len(&self) -> usize {
        if self.used.load(SeqCst) {
            self.queued.load(SeqCst)
        } else {
            0
        }
    }
}
