//! Ending a run from outside: a [`StopHandle`] asks each pipeline's source
//! for no more items, and a deadline does the same at a set time.
//!
//! The source is asked between fills: once a stop is due, the source's
//! thread (or worker) does not call `fill` again and sends the empty last
//! buffer that [`crate::Flow::End`] sends. Buffers already filled finish
//! every stage, in order, and every stage still gets its last-buffer
//! notice and its `cleanup`; every thread is joined before `run` returns
//! `Ok`, with [`crate::Report::stopped`] true. A `fill` that blocks is not
//! interrupted: a source that may wait long for input should return now
//! and then (for example with [`crate::Flow::More`] on a buffer it marks
//! empty) so that the stop is seen.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Stops a pipeline's run from any thread ([`crate::Pipeline::stop_handle`]).
/// Cheap to clone; stopping twice, or before the run starts (the run then
/// ends at once), is fine.
#[derive(Debug, Clone, Default)]
pub struct StopHandle {
    flag: Arc<AtomicBool>,
}

impl StopHandle {
    /// Ask the pipeline's source for no more items (see the module doc).
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// Whether [`stop`](StopHandle::stop) was called.
    pub fn is_stopped(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

/// What a source asks before each fill: its pipeline's handle and deadline.
#[derive(Debug)]
pub(crate) struct Stopper {
    handle: StopHandle,
    deadline: Option<Instant>,
    /// The source ended the stream because a stop was due.
    stopped: AtomicBool,
}

impl Stopper {
    /// A stopper for a run starting now, ending at `deadline` after it.
    pub(crate) fn new(handle: StopHandle, deadline: Option<Duration>) -> Self {
        let now = Instant::now();
        Stopper {
            handle,
            // A deadline too far to represent is no deadline.
            deadline: deadline.and_then(|d| now.checked_add(d)),
            stopped: AtomicBool::new(false),
        }
    }

    /// Whether the source must end the stream instead of filling; records
    /// it if so.
    pub(crate) fn due(&self) -> bool {
        let due = self.handle.is_stopped() || self.deadline.is_some_and(|d| Instant::now() >= d);
        if due {
            self.stopped.store(true, Ordering::Relaxed);
        }
        due
    }

    /// Whether the run was stopped (read after every thread is joined).
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }
}
