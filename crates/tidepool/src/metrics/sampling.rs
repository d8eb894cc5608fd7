//! Adaptive task timing. Every task is timed — unless tasks are so short that
//! the clock reads would cost a noticeable share of the tasks themselves;
//! then one task in 64 is timed, which keeps the latency distributions (an
//! unbiased sample) at a nanosecond or two per task. Sampling starts once a
//! worker has run `SHORT_STREAK` short timed tasks, not counting lone long
//! ones (fewer than `LONG_STREAK` in a row): a task that wakes a thread (a
//! futex call is microseconds on a virtual machine) or is preempted now and
//! then must not keep a pool of short tasks timing every task for good — it
//! did, and cost `burst-idle` with one worker 35 % of its throughput
//! (`docs/design.md`, "Sampling"). While sampling, the first timed task
//! that runs for `SHORT_NS` or more switches back to timing every task (a
//! timed task stands for 64, so waiting for a second would delay the switch
//! by that many); the next short one switches sampling on again, unless
//! `LONG_STREAK` long ones came in a row first (the tasks really got long:
//! the worker's short streak starts over). So an outlier while sampling
//! costs a handful of timed tasks, not the next 256.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

use super::clock::Clock;

/// Tasks shorter than this count as "too short to time each one". Timing a
/// task takes three TSC reads (submit, start, finish) and three histogram
/// updates: ~100 ns where a TSC read costs ~30 ns (virtual machines; measured
/// on the 2-core VM of docs/benchmarks.md), a tenth of a 1 µs task. Below
/// 4 µs sampling keeps that under ~3 %.
const SHORT_NS: u64 = 4_000;
pub(crate) use crate::limits::SHORT_STREAK;
/// Consecutive long timed tasks (on one worker) that break a short streak;
/// fewer are outliers.
pub(crate) const LONG_STREAK: u32 = 4;
/// Time one task in `SAMPLE_MASK + 1` while sampling. One in 16 cost 5–15 ns
/// per empty task (docs/design.md, "Sampling"); 64 still gives a
/// ten-thousand-task histogram from every 640 000 short tasks.
const SAMPLE_MASK: u32 = 63;

/// Decides which submissions get timestamps.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    /// 0: time every task; otherwise time tasks whose per-thread sequence
    /// number has these bits clear. Written only when the regime changes.
    mask: CachePadded<AtomicU32>,
}

thread_local! {
    static SEQ: Cell<u32> = const { Cell::new(0) };
}

/// One worker's run of consecutive short, and of consecutive long, timed
/// tasks (see [`Sampler::observe`]).
#[derive(Debug, Default)]
pub(crate) struct Streaks {
    short: Cell<u32>,
    long: Cell<u32>,
}

impl Sampler {
    /// Ticks for a new submission, or 0 if this one is not timed.
    #[inline]
    pub(crate) fn stamp(&self) -> u64 {
        let mask = self.mask.load(Relaxed);
        if mask != 0 {
            let seq = SEQ.with(|s| {
                let n = s.get().wrapping_add(1);
                s.set(n);
                n
            });
            if seq & mask != 0 {
                return 0;
            }
        }
        Clock::ticks().max(1)
    }

    /// A worker timed a task that ran for `service_ns`; `streak` is that
    /// worker's streaks.
    #[inline]
    pub(crate) fn observe(&self, service_ns: u64, streak: &Streaks) {
        if service_ns < SHORT_NS {
            streak.long.set(0);
            let n = streak.short.get().saturating_add(1);
            streak.short.set(n);
            // A load first: the line is shared, and the store is needed
            // only when the regime changes.
            if n >= SHORT_STREAK && self.mask.load(Relaxed) == 0 {
                self.mask.store(SAMPLE_MASK, Relaxed);
            }
        } else {
            let n = streak.long.get().saturating_add(1);
            streak.long.set(n);
            if self.mask.load(Relaxed) != 0 {
                self.mask.store(0, Relaxed);
            }
            if n >= LONG_STREAK {
                streak.short.set(0);
            }
        }
    }

    /// True while only a sample of tasks is timed.
    #[cfg(test)]
    pub(crate) fn sampling(&self) -> bool {
        self.mask.load(Relaxed) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_tasks_switch_to_sampling_and_long_ones_back() {
        let s = Sampler::default();
        let streak = Streaks::default();
        assert!(
            (0..100).all(|_| s.stamp() != 0),
            "everything is timed at first"
        );
        for _ in 0..SHORT_STREAK {
            s.observe(50, &streak);
        }
        assert!(s.sampling());
        let timed = (0..6400).filter(|_| s.stamp() != 0).count();
        assert_eq!(timed, 100, "one in 64 while sampling");
        s.observe(5_000, &streak);
        assert!(!s.sampling());
        assert!((0..100).all(|_| s.stamp() != 0));
    }

    /// A long task now and then (fewer than `LONG_STREAK` in a row) does
    /// not keep sampling from starting; while sampling, it switches to
    /// timing every task only until the next short one. `LONG_STREAK` in a
    /// row start the short streak over.
    #[test]
    fn lone_long_tasks_do_not_hold_sampling_off() {
        let s = Sampler::default();
        let streak = Streaks::default();
        let run = |shorts: u32| {
            for i in 0..shorts {
                if i % 100 == 99 {
                    for _ in 0..LONG_STREAK - 1 {
                        s.observe(50_000, &streak);
                    }
                }
                s.observe(50, &streak);
            }
        };
        run(SHORT_STREAK);
        assert!(s.sampling(), "started despite the outliers");
        for _ in 0..LONG_STREAK - 1 {
            s.observe(50_000, &streak);
            assert!(!s.sampling(), "a timed long task ends sampling");
        }
        run(1);
        assert!(s.sampling(), "the next short one starts it again");
        for _ in 0..LONG_STREAK {
            s.observe(50_000, &streak);
        }
        run(100);
        assert!(!s.sampling(), "a run of long tasks breaks the streak");
        run(SHORT_STREAK - 101);
        assert!(!s.sampling());
        run(1);
        assert!(s.sampling(), "256 short ones in a row start it again");
    }
}
