//! A calibrated busy-wait: the body of the `work-1us` tasks.
//!
//! The spin is a fixed number of loop iterations (a fixed amount of CPU work),
//! not "spin until the clock says 1 µs": a task that is preempted half-way
//! still does the same work, so throughput compares like with like.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crate::subject::thread_cpu_ns;

/// Loop iterations per microsecond, set by [`calibrate`] (0 = not calibrated).
static ITERS_PER_US: AtomicU64 = AtomicU64::new(0);

#[inline(never)]
fn spin_iters(iters: u64) {
    let mut x = 0u64;
    for i in 0..iters {
        x = black_box(x.wrapping_add(i));
    }
    black_box(x);
}

/// Measure how many iterations of the spin loop make one microsecond of CPU
/// time on this machine, remember it, and return it. Trials are timed with
/// the thread's CPU clock (so being preempted on a busy machine does not
/// shrink the estimate); the fastest of several counts.
pub fn calibrate() -> u64 {
    const ITERS: u64 = 2_000_000;
    spin_iters(ITERS); // warm up
    let mut best = f64::MAX;
    for _ in 0..7 {
        let (c0, t0) = (thread_cpu_ns(), Instant::now());
        spin_iters(ITERS);
        let cpu = thread_cpu_ns().saturating_sub(c0);
        // Fall back to the wall clock if the CPU clock is unavailable.
        let secs = if cpu > 0 {
            cpu as f64 / 1e9
        } else {
            t0.elapsed().as_secs_f64()
        };
        best = best.min(secs);
    }
    let per_us = ((ITERS as f64) / (best * 1e6)).round().max(1.0) as u64;
    ITERS_PER_US.store(per_us, Relaxed);
    per_us
}

/// Iterations per microsecond as last calibrated (calibrating first if needed).
pub fn iters_per_us() -> u64 {
    match ITERS_PER_US.load(Relaxed) {
        0 => calibrate(),
        n => n,
    }
}

/// Busy-wait for about `us` microseconds of CPU work. Call [`calibrate`]
/// first, outside any measurement.
#[inline]
pub fn spin_us(us: u64) {
    spin_iters(ITERS_PER_US.load(Relaxed).max(1) * us);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrated_spin_is_about_right() {
        let per_us = calibrate();
        assert!(per_us >= 1);
        // 2 ms of spinning should cost at least ~1 ms of CPU even on a noisy
        // machine (CPU time, not wall time: preemption does not count).
        let c0 = thread_cpu_ns();
        spin_us(2_000);
        let cpu = thread_cpu_ns() - c0;
        assert!(cpu >= 1_000_000, "{cpu} ns");
    }
}
