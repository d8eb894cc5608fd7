//! Back-pressure: submitters blocked on a full bounded queue, and how the
//! workers' pops wake them.
//!
//! # Protocol (why no wake-up is ever lost)
//!
//! A submitter whose push found the queue full:
//! 1. counts itself in `blocked` (a `SeqCst` read-modify-write) and issues a
//!    `SeqCst` fence;
//! 2. takes the room lock and checks once more whether the queue has room
//!    (or the pool shut down); if so it retries the push at once;
//! 3. otherwise waits on the room condition variable, which releases the
//!    lock atomically with starting to wait; woken, it retries the push and,
//!    if another submitter took the room first, goes back to 2.
//!
//! A worker that took a task (which lowered the queue's length):
//! 1. issues a `SeqCst` fence — unneeded when the pop itself was a `SeqCst`
//!    read-modify-write, as in the lock-free queue (see `TaskQueue::pop_is_seq_cst`);
//! 2. reads `blocked`; only if it is non-zero does it take the room lock and
//!    notify every waiter.
//!
//! The two fences order "lower the length → read `blocked`" against "raise
//! `blocked` → read the length" (the store-buffering pattern): at least one
//! side sees the other's write. Either the submitter sees the room in step 2,
//! or the worker sees `blocked > 0` and notifies — and since it notifies under
//! the room lock, it cannot slip between the submitter's check and its wait.
//! Without the worker's fence (a `Release` store of the length, then a load
//! of `blocked`) both sides can read the old values: the submitter sleeps
//! while the queue has room, rescued only by its poll timeout
//! (`loom_blocked_submitter_is_woken` in `loom_tests.rs` finds it).
//!
//! While nobody is blocked, a worker pays one fence (lock-based queues only)
//! and one load of `blocked`, which only blocking submitters write.

use std::time::Duration;

use crate::sync::{fence, lock, AtomicUsize, Condvar, Mutex};
use std::sync::atomic::Ordering::SeqCst;

/// Submitters waiting for room, and where they wait.
#[derive(Debug, Default)]
pub(crate) struct Room {
    blocked: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Room {
    /// A submitter starts waiting for room (step 1).
    pub(crate) fn enter(&self) {
        self.blocked.fetch_add(1, SeqCst);
        fence(SeqCst);
    }

    /// The submitter stopped waiting (pushed, gave up, or the pool shut down).
    pub(crate) fn leave(&self) {
        self.blocked.fetch_sub(1, SeqCst);
    }

    /// Wait until notified or `timeout` passes, unless `ready` (room or
    /// shutdown) already holds under the lock (steps 2 and 3).
    pub(crate) fn wait(&self, timeout: Duration, ready: impl Fn() -> bool) {
        let guard = lock(&self.lock);
        if ready() {
            return;
        }
        let _ = self.cv.wait_timeout(guard, timeout);
    }

    /// A worker lowered the queue's length; `fenced`: by a `SeqCst`
    /// read-modify-write. Wakes the blocked submitters, if any.
    #[inline]
    pub(crate) fn notify_after_pop(&self, fenced: bool) {
        if !fenced {
            fence(SeqCst);
        }
        if self.blocked.load(SeqCst) > 0 {
            self.notify_all();
        }
    }

    /// Wake every blocked submitter (shutdown).
    #[cold]
    pub(crate) fn notify_all(&self) {
        let _guard = lock(&self.lock);
        self.cv.notify_all();
    }
}
