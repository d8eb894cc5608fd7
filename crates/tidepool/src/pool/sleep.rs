//! The idle-worker protocol: a LIFO stack of parked workers.
//!
//! # Protocol (why no wake-up is ever lost)
//!
//! A worker that found the queue empty:
//! 1. pushes its parker on the idle stack (under the stack's lock) and bumps
//!    `num_idle`;
//! 2. issues a `SeqCst` fence and checks the queue once more; if work appeared it
//!    takes itself off the stack (or, if a waker already took it, consumes that
//!    wake-up) and goes back to work;
//! 3. otherwise waits on its own parker until notified (or the keep-alive ends).
//!
//! A submitter pushes its task, issues a `SeqCst` fence (unneeded when the
//! push itself was a `SeqCst` read-modify-write: then the `SeqCst` total order
//! alone orders it before the `SeqCst` load), then reads `num_idle`;
//! if it is non-zero (and nobody is spinning for work) it pops the *most
//! recently* idled worker and notifies it.
//!
//! The two fences order "push task → read num_idle" against "bump num_idle →
//! re-check queue": at least one side sees the other's write, so either the
//! worker sees the task in step 2 or the submitter sees the idle worker and
//! wakes it. The default queue is sharded (a submitter pushes to its home
//! shard): the re-check in step 2 must then read *every* shard, as
//! `is_empty` does — a worker that looked only at its own shard would miss
//! a task pushed elsewhere (the loom model `loom_sharded_queue_loses_no_wakeup`
//! deadlocks then). It still does while the queue is narrow (one submitter
//! so far, `queue::width`): a re-check that read the old width while a
//! second submitter's push widened the queue sees that push's shard too
//! (`loom_widening_strands_no_task`).
//!
//! A submitter skips the wake-up while a worker is *searching* (spinning for
//! work): the spinner will take the task. A spinner that instead leaves for
//! good (the pool shrank while it spun) would strand that task with every
//! other worker parked, so a leaving worker first stops searching, then
//! issues a `SeqCst` fence and checks the queue once more, and if work is
//! there wakes a parked worker in its place ([`Sleepers::hand_on`]). The same
//! fence pair as above applies: either the submitter saw the spinner gone and
//! woke someone itself, or the leaving worker sees the task.
//!
//! # One wake-up in flight
//!
//! A woken worker needs 5–50 µs to run (an idle virtual CPU must be
//! interrupted and scheduled). While it is on its way, a submitter that
//! finds work queued and workers parked does not wake another: the
//! woken worker is *arriving* (counted from the moment the waker pops it
//! until its `park` returns), and when it arrives it takes a task and, if
//! it was the last to arrive and work is left, wakes the next worker
//! itself ([`Sleepers::hand_on`]). A burst into an idle pool thus costs
//! its submitter one wake-up, not one per parked worker, and the pool
//! still ramps up, one wake-up at a time, each paid by a worker that
//! already runs (tokio's rule, and what `threadpool`'s mutex hand-off does).
//!
//! The hold is bounded: a wake-up older than
//! [`ARRIVAL_GRACE`](crate::control::ARRIVAL_GRACE) no longer
//! holds the others back. On a loaded machine a woken worker can wait
//! milliseconds for a core, and without the bound every task of the next
//! burst would wait for that one thread (measured: `burst-idle` fell from
//! 6–8 to 0.2–0.4 M tasks/s at load 21–37 with an unbounded hold).
//!
//! Why a skipped wake-up loses no task: the submitter skipped only after it
//! read `arriving > 0` after its push and fence, so some arriving worker's
//! decrement follows that read; that worker's `hand_on` (a `SeqCst` fence,
//! then a look at the queue) is the store-buffering pair of the submitter's,
//! so it sees the task — and it looks at the queue again before it parks
//! in any case. The loom model `loom_one_wake_up_in_flight_hands_on` checks
//! that a worker that takes one task and leaves still gets the second task
//! to the other parked worker.
//!
//! LIFO wake-up means the workers at the bottom of the stack stay
//! idle for long stretches and really reach their keep-alive, so surplus
//! threads retire instead of all being kept half-busy.

use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::metrics::clock::Clock;
use crate::sync::{fence, lock, Arc, AtomicU64, AtomicUsize, Condvar, Mutex};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

/// The statistics clock's ticks (the TSC where usable), read when a worker
/// is woken and by a submitter about to skip a wake-up. Under loom time
/// stands still, so every wake-up stays young and the models check that the
/// hand-on alone loses no task.
#[inline]
fn ticks() -> u64 {
    #[cfg(not(loom))]
    return Clock::ticks();
    #[cfg(loom)]
    return 0;
}

/// Time since `since` ([`ticks`]).
#[inline]
fn elapsed_since(since: u64) -> Duration {
    Duration::from_nanos(Clock::nanos_between(since, ticks()))
}

/// One worker's private wake-up flag.
#[derive(Debug, Default)]
pub(crate) struct Parker {
    notified: Mutex<bool>,
    cv: Condvar,
}

/// How a wait on the idle stack ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Work appeared before the worker parked.
    WorkSeen,
    /// Another thread popped this worker off the stack and notified it.
    /// `last`: it was the last worker on its way, so it must call
    /// [`Sleepers::hand_on`] once it has taken a task (see the module docs).
    Notified {
        /// The last arriving worker: hand the wake-up on.
        last: bool,
    },
    /// The timeout elapsed; the worker is no longer on the stack.
    TimedOut,
}

/// The stack of parked workers plus the counters the submit path reads.
#[derive(Debug, Default)]
pub(crate) struct Sleepers {
    stack: Mutex<Vec<Arc<Parker>>>,
    /// Read by every submit; written only when a worker parks or is woken.
    num_idle: CachePadded<AtomicUsize>,
    /// Workers spinning for work: a submitter need not wake anyone while one
    /// spins. Written often (each spin phase), so kept off `num_idle`'s line.
    searching: CachePadded<AtomicUsize>,
    /// Workers woken and not yet running, and when the last was woken.
    arriving: CachePadded<Arriving>,
}

/// The workers on their way (see the module docs).
#[derive(Debug, Default)]
struct Arriving {
    count: AtomicUsize,
    /// [`ticks`] when the last of them was woken.
    since: AtomicU64,
}

impl Sleepers {
    /// Workers parked on the stack now.
    pub(crate) fn idle(&self) -> usize {
        self.num_idle.load(Relaxed)
    }

    /// Workers spinning for work now.
    pub(crate) fn searching(&self) -> usize {
        self.searching.load(Relaxed)
    }

    /// Mark the caller as spinning for work.
    pub(crate) fn start_search(&self) {
        self.searching.fetch_add(1, SeqCst);
    }

    /// The caller stopped spinning; returns true if it was the last spinner.
    pub(crate) fn end_search(&self) -> bool {
        self.searching.fetch_sub(1, SeqCst) == 1
    }

    /// Called by a submitter after it pushed work: wake one parked worker unless
    /// someone is already spinning for it or a recent wake-up is on its way.
    /// Returns true if a worker is on its way (woken now or just before).
    /// `fenced`: the push already was a `SeqCst` read-modify-write (then the
    /// `SeqCst` loads below are ordered after it without a fence).
    #[inline]
    pub(crate) fn notify_work_after(&self, fenced: bool) -> bool {
        if !fenced {
            fence(SeqCst);
        }
        // `num_idle` first: while every worker is busy or spinning it is 0 and
        // the hot, often-written `searching` line is never touched.
        if self.num_idle.load(SeqCst) == 0 || self.searching.load(SeqCst) > 0 {
            return false;
        }
        let arriving = self.arriving.count.load(SeqCst);
        if crate::control::holds_wake_up(arriving, || {
            elapsed_since(self.arriving.since.load(Relaxed))
        }) {
            return true;
        }
        self.wake_one()
    }

    /// `notify_work_after` for callers that have not fenced.
    #[inline]
    pub(crate) fn notify_work(&self) -> bool {
        self.notify_work_after(false)
    }

    /// Wake the most recently parked worker, if any.
    pub(crate) fn wake_one(&self) -> bool {
        let parker = {
            let mut stack = lock(&self.stack);
            let p = stack.pop();
            if p.is_some() {
                // Before `num_idle` drops: a submitter that sees one idle
                // worker fewer also sees the one on its way.
                self.arriving.since.store(ticks(), Relaxed);
                self.arriving.count.fetch_add(1, SeqCst);
            }
            self.num_idle.store(stack.len(), SeqCst);
            p
        };
        match parker {
            Some(p) => {
                *lock(&p.notified) = true;
                p.cv.notify_one();
                true
            }
            None => false,
        }
    }

    /// Called by a worker that leaves the pool for good, after it stopped
    /// searching, and by the last arriving worker once it has a task: if
    /// `has_work`, a submitter may have skipped its wake-up because of this
    /// worker, so wake a parked worker in its place (see module docs).
    /// Returns true if a worker is on its way.
    pub(crate) fn hand_on(&self, has_work: impl Fn() -> bool) -> bool {
        fence(SeqCst);
        has_work() && self.notify_work_after(true)
    }

    /// Wake every parked worker (shutdown, shrink).
    pub(crate) fn wake_all(&self) {
        while self.wake_one() {}
    }

    /// Park `me` until notified or `timeout` passes. `has_work` is re-checked
    /// after registering, closing the lost-wake-up window (see module docs).
    pub(crate) fn park(
        &self,
        me: &Arc<Parker>,
        timeout: Option<Duration>,
        has_work: impl Fn() -> bool,
    ) -> Wake {
        {
            let mut stack = lock(&self.stack);
            stack.push(me.clone());
            self.num_idle.store(stack.len(), SeqCst);
        }
        fence(SeqCst);
        if has_work() {
            return if self.unregister(me) {
                Wake::WorkSeen
            } else {
                self.wait_notified(me, None);
                self.arrived()
            };
        }
        if self.wait_notified(me, timeout) {
            return self.arrived();
        }
        if self.unregister(me) {
            Wake::TimedOut
        } else {
            // A waker popped us between the timeout and the unregister: its
            // notification is on its way and belongs to us.
            self.wait_notified(me, None);
            self.arrived()
        }
    }

    /// A woken worker runs again: it is no longer on its way.
    fn arrived(&self) -> Wake {
        Wake::Notified {
            last: self.arriving.count.fetch_sub(1, SeqCst) == 1,
        }
    }

    /// Take `me` off the stack; false if a waker already popped it.
    fn unregister(&self, me: &Arc<Parker>) -> bool {
        let mut stack = lock(&self.stack);
        let found = stack.iter().rposition(|p| Arc::ptr_eq(p, me));
        if let Some(i) = found {
            stack.remove(i);
            self.num_idle.store(stack.len(), SeqCst);
        }
        found.is_some()
    }

    /// Wait for (and consume) a notification. Returns false on timeout.
    fn wait_notified(&self, me: &Parker, timeout: Option<Duration>) -> bool {
        let mut notified = lock(&me.notified);
        match timeout {
            None => {
                while !*notified {
                    notified = me.cv.wait(notified).unwrap_or_else(|e| e.into_inner());
                }
            }
            Some(t) => {
                let deadline = std::time::Instant::now() + t;
                while !*notified {
                    let now = std::time::Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    notified = me
                        .cv
                        .wait_timeout(notified, deadline - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        *notified = false;
        true
    }
}
