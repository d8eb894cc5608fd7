//! The interface every benchmarked pool is driven through, and the completion
//! latch every task reports to.
//!
//! # Measuring the pools, not the harness
//!
//! [`Subject::spawn`] is generic, so each implementation receives the task
//! closure itself and boxes it (at most) once, exactly as a user of that crate
//! would. The benchmark tasks capture nothing: they report to the global
//! [`LATCH`], so no per-task `Arc` clone or allocation is added by the harness.
//! Every implementation pays the same per-task completion cost (one atomic
//! decrement), and the waiting thread parks instead of spinning so it does not
//! steal a core from the pool under test.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// A thread pool under test.
///
/// Implementations are built with a fixed number of worker threads and shut
/// down (all tasks finished, threads joined or released) when dropped.
pub trait Subject: Sync {
    /// Run `f` on the pool, fire and forget.
    fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static;
}

/// Something to do with a freshly built [`Subject`]; lets the harness run
/// generic (monomorphised) code against each implementation in turn.
pub trait Visit {
    /// What the visit produces.
    type Output;
    /// Use the subject; it is dropped (shut down) after this returns.
    fn visit<S: Subject>(self, subject: &S) -> Self::Output;
}

/// Nanoseconds since the first call in this process: a cheap monotonic clock
/// that fits in an atomic.
#[inline]
pub fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Counts outstanding tasks; the task that brings the count to zero records
/// the time and unparks the waiting thread.
#[derive(Debug)]
#[repr(align(128))]
pub struct Latch {
    remaining: AtomicUsize,
    /// `now_ns()` when the last task finished.
    end_ns: AtomicU64,
    waiter: Mutex<Option<Thread>>,
}

/// The latch benchmark tasks report to. Scenarios run one at a time, so one
/// global latch suffices and tasks need not capture anything.
pub static LATCH: Latch = Latch::new();

impl Default for Latch {
    fn default() -> Self {
        Self::new()
    }
}

impl Latch {
    /// A latch with nothing outstanding.
    pub const fn new() -> Self {
        Latch {
            remaining: AtomicUsize::new(0),
            end_ns: AtomicU64::new(0),
            waiter: Mutex::new(None),
        }
    }

    /// Expect `n` tasks; the calling thread is the one [`wait`](Self::wait)
    /// will wake. Must not be called while tasks are still outstanding.
    pub fn arm(&self, n: usize) {
        *self.waiter.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread::current());
        self.end_ns.store(0, Ordering::Relaxed);
        self.remaining.store(n, Ordering::Release);
    }

    /// One task finished.
    #[inline]
    pub fn done(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.end_ns.store(now_ns(), Ordering::Release);
            if let Some(t) = &*self.waiter.lock().unwrap_or_else(|e| e.into_inner()) {
                t.unpark();
            }
        }
    }

    /// Tasks still outstanding.
    pub fn remaining(&self) -> usize {
        self.remaining.load(Ordering::Acquire)
    }

    /// Park until every expected task finished; returns `now_ns()` of the
    /// moment the last one finished.
    pub fn wait(&self) -> u64 {
        while self.remaining.load(Ordering::Acquire) != 0 {
            // The timeout only guards against a missed unpark; it is not the
            // normal wake-up path.
            thread::park_timeout(Duration::from_millis(50));
        }
        loop {
            let end = self.end_ns.load(Ordering::Acquire);
            if end != 0 {
                return end;
            }
            std::hint::spin_loop();
        }
    }
}

/// Report one finished task to the global [`LATCH`].
#[inline]
pub fn task_done() {
    LATCH.done();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latch_wakes_after_last_task() {
        static L: Latch = Latch::new();
        L.arm(100);
        let start = now_ns();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                thread::spawn(|| {
                    for _ in 0..25 {
                        L.done();
                    }
                })
            })
            .collect();
        let end = L.wait();
        assert_eq!(L.remaining(), 0);
        assert!(end >= start);
        for h in handles {
            h.join().unwrap();
        }
    }
}
