//! Stalls of the front end: a timer on its runtime that should fire every
//! 5 ms notes how late it does. The front end is one thread for
//! every contender, so a late timer means it could not run, and every
//! request in flight waits as long. At 10,000 requests a second one stall
//! of 100 ms delays a thousand requests, as many as a 10 s phase's 99th
//! percentile counts, so a p99 read beside the stalls tells a contender's
//! own tail from a moment the front end lost its core. Idle workers that
//! spin while the front end, preempted mid-push, waits for a core stall it
//! for 100–150 ms (a real-time thread timed beside it is never late: the
//! machine does not stop); `tidepool`'s queue yields in that wait
//! (`queue/ring.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the timer should fire.
const PERIOD: Duration = Duration::from_millis(5);
/// Lateness from which the front end counts as stalled: far above the
/// timer's millisecond granularity and a busy loop's turn.
pub const STALL: Duration = Duration::from_millis(20);

/// Stalls seen so far; shared by the timer and the benchmark.
#[derive(Debug, Default)]
pub struct Stalls {
    count: AtomicU64,
    longest_us: AtomicU64,
}

/// The stalls of a stretch of time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StallCount {
    /// Stalls of at least [`STALL`].
    pub count: u64,
    /// The longest, in milliseconds (0 without a stall).
    pub longest_ms: f64,
}

impl Stalls {
    /// Note a timer that fired `late`.
    fn note(&self, late: Duration) {
        if late >= STALL {
            self.count.fetch_add(1, Ordering::Relaxed);
            let us = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
            self.longest_us.fetch_max(us, Ordering::Relaxed);
        }
    }

    /// The stalls since the last call, and start counting afresh.
    pub fn take(&self) -> StallCount {
        StallCount {
            count: self.count.swap(0, Ordering::Relaxed),
            longest_ms: self.longest_us.swap(0, Ordering::Relaxed) as f64 / 1e3,
        }
    }

    /// Run the timer on the current tokio runtime, until the runtime drops it.
    pub async fn watch(self: Arc<Self>) {
        loop {
            let asked = Instant::now();
            tokio::time::sleep(PERIOD).await;
            self.note(asked.elapsed().saturating_sub(PERIOD));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_runtime_reads_as_a_stall_of_about_its_length() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let stalls = Arc::new(Stalls::default());
        rt.block_on(async {
            let timer = tokio::spawn(stalls.clone().watch());
            // Let the timer start, then hold the only thread.
            tokio::time::sleep(PERIOD * 2).await;
            std::thread::sleep(Duration::from_millis(80));
            tokio::time::sleep(PERIOD * 2).await;
            let seen = stalls.take();
            assert!(seen.count >= 1, "{seen:?}");
            assert!(seen.longest_ms >= 70.0, "{seen:?}");
            assert_eq!(stalls.take(), StallCount::default(), "taken once");
            timer.abort();
        });
    }

    #[test]
    fn a_timer_on_time_is_no_stall() {
        let stalls = Stalls::default();
        stalls.note(Duration::from_millis(3));
        stalls.note(STALL - Duration::from_micros(1));
        assert_eq!(stalls.take(), StallCount::default());
        stalls.note(STALL);
        assert_eq!(stalls.take().count, 1);
    }
}
