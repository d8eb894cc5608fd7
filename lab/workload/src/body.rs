//! Task bodies that really compute and really block.
//!
//! Compute is a calibrated busy loop: [`BusyLoop::calibrate`] measures how
//! many iterations of a dependent xorshift chain the machine runs per
//! microsecond of *thread CPU time* (`CLOCK_THREAD_CPUTIME_ID`), so burning
//! `d` means doing a fixed amount of work worth `d` of CPU — when threads
//! outnumber cores the work takes longer in wall-clock time, as real compute
//! would. Blocking is `std::thread::sleep`. A [`TaskBody`] interleaves the two
//! in slices.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::median::median;
use crate::trace::TaskSpec;

/// CPU time of the calling thread, or where the OS has no such clock (see
/// [`tidepool::sys::SUPPORT`]) wall-clock time since the first call: the
/// loop then calibrates against elapsed time, which preemption inflates.
fn thread_cpu_time() -> Duration {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    tidepool::sys::thread_cpu_time().unwrap_or_else(|| EPOCH.get_or_init(Instant::now).elapsed())
}

#[inline(never)]
fn spin_iters(n: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = std::hint::black_box(x);
    }
    x
}

/// A calibrated busy loop.
///
/// ```
/// use std::time::Duration;
/// use tidepool_workload::body::BusyLoop;
/// let busy = BusyLoop::global(); // calibrated once per process
/// busy.burn(Duration::from_micros(100));
/// assert!(busy.iters_per_us() > 0.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BusyLoop {
    iters_per_us: f64,
}

/// How well a [`BusyLoop`] hits its target, measured in thread CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CalibrationReport {
    /// The loop's calibrated rate.
    pub iters_per_us: f64,
    /// Requested compute per trial, µs.
    pub target_us: f64,
    /// Median thread CPU time measured per trial, µs.
    pub measured_us: f64,
    /// Median signed error, percent: `(measured - target) / target × 100`.
    pub error_pct: f64,
    /// Largest absolute error over the trials, percent.
    pub worst_error_pct: f64,
    /// Number of trials.
    pub trials: usize,
}

impl BusyLoop {
    /// A loop with a known rate (iterations per µs of CPU), e.g. one stored
    /// from an earlier calibration.
    pub fn with_rate(iters_per_us: f64) -> BusyLoop {
        assert!(iters_per_us.is_finite() && iters_per_us > 0.0);
        BusyLoop { iters_per_us }
    }

    /// Calibrate against thread CPU time: 7 trials of about 3 ms each, median
    /// rate. Takes roughly 30 ms.
    pub fn calibrate() -> BusyLoop {
        // Find an iteration count worth about 3 ms.
        let mut n: u64 = 10_000;
        loop {
            let t0 = thread_cpu_time();
            spin_iters(n);
            let dt = thread_cpu_time().saturating_sub(t0);
            if dt >= Duration::from_millis(1) || n > 1 << 40 {
                let rate = n as f64 / dt.as_secs_f64().max(1e-9) / 1e6;
                n = (rate * 3000.0).max(1.0) as u64;
                break;
            }
            n *= 4;
        }
        let rates: Vec<f64> = (0..7)
            .map(|_| {
                let t0 = thread_cpu_time();
                spin_iters(n);
                let dt = thread_cpu_time().saturating_sub(t0).as_secs_f64().max(1e-9);
                n as f64 / dt / 1e6
            })
            .collect();
        BusyLoop {
            iters_per_us: median(rates).unwrap_or(1.0),
        }
    }

    /// The process-wide loop, calibrated on first use.
    pub fn global() -> BusyLoop {
        static GLOBAL: OnceLock<BusyLoop> = OnceLock::new();
        *GLOBAL.get_or_init(BusyLoop::calibrate)
    }

    /// Iterations per microsecond of CPU time.
    pub fn iters_per_us(&self) -> f64 {
        self.iters_per_us
    }

    /// Compute for `d` of CPU time.
    pub fn burn(&self, d: Duration) {
        if d.is_zero() {
            return;
        }
        let n = (d.as_secs_f64() * 1e6 * self.iters_per_us).round() as u64;
        spin_iters(n);
    }

    /// Burn `target` `trials` times and compare with the thread CPU time
    /// actually used.
    pub fn verify(&self, target: Duration, trials: usize) -> CalibrationReport {
        let trials = trials.max(1);
        let target_us = target.as_secs_f64() * 1e6;
        let measured: Vec<f64> = (0..trials)
            .map(|_| {
                let t0 = thread_cpu_time();
                self.burn(target);
                thread_cpu_time().saturating_sub(t0).as_secs_f64() * 1e6
            })
            .collect();
        let err = |m: f64| (m - target_us) / target_us.max(1e-9) * 100.0;
        let worst = measured.iter().map(|&m| err(m).abs()).fold(0.0, f64::max);
        let med = median(measured.iter().copied()).unwrap_or(0.0);
        CalibrationReport {
            iters_per_us: self.iters_per_us,
            target_us,
            measured_us: med,
            error_pct: err(med),
            worst_error_pct: worst,
            trials,
        }
    }
}

/// What one task does: `cpu` of compute and `blocked` of sleep, interleaved
/// in `slices` rounds of (compute `cpu/slices`, sleep `blocked/slices`).
///
/// ```
/// use std::time::Duration;
/// use tidepool_workload::body::{BusyLoop, TaskBody};
/// let body = TaskBody::new(Duration::from_micros(50), Duration::from_micros(100));
/// body.run(&BusyLoop::global());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskBody {
    /// Compute time.
    pub cpu: Duration,
    /// Blocked (sleep) time.
    pub blocked: Duration,
    /// Number of compute/sleep rounds (≥ 1).
    pub slices: u32,
}

/// Shortest sleep slice [`TaskBody::new`] aims for: sleeps overshoot by tens
/// of microseconds, so many tiny sleeps would inflate blocked time.
pub const MIN_SLEEP_SLICE: Duration = Duration::from_micros(500);

/// Most slices [`TaskBody::new`] uses.
pub const MAX_SLICES: u32 = 8;

impl TaskBody {
    /// A body with the default slicing: one slice when the task only
    /// computes or only blocks, otherwise `blocked / 500 µs` slices, clamped
    /// to 1..=8.
    pub fn new(cpu: Duration, blocked: Duration) -> TaskBody {
        let slices = if cpu.is_zero() || blocked.is_zero() {
            1
        } else {
            ((blocked.as_nanos() / MIN_SLEEP_SLICE.as_nanos()) as u32).clamp(1, MAX_SLICES)
        };
        TaskBody {
            cpu,
            blocked,
            slices,
        }
    }

    /// The body of a trace task.
    pub fn of(task: &TaskSpec) -> TaskBody {
        TaskBody::new(task.cpu, task.blocked)
    }

    /// Run the body on the calling thread.
    pub fn run(&self, busy: &BusyLoop) {
        let n = self.slices.max(1);
        let (c, b) = (self.cpu / n, self.blocked / n);
        for i in 0..n {
            // the last slice takes the rounding remainder
            let (c, b) = if i + 1 == n {
                (self.cpu - c * (n - 1), self.blocked - b * (n - 1))
            } else {
                (c, b)
            };
            busy.burn(c);
            if !b.is_zero() {
                std::thread::sleep(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_hits_thread_cpu_time() {
        // Thread CPU time does not count time descheduled, but it does count
        // time on a core slowed by its neighbours: on a shared host (another
        // guest on the SMT sibling, frequency scaling) the same loop takes
        // half as much CPU time again for a few tens of ms. So a calibration
        // passes if one of three attempts lands within the loose bound; a wrong
        // rate or unit misses in all three.
        let reports: Vec<CalibrationReport> = (0..3)
            .map(|_| BusyLoop::calibrate().verify(Duration::from_millis(2), 5))
            .collect();
        eprintln!("calibration: {reports:?}");
        assert!(reports.iter().all(|r| r.trials == 5));
        assert!(
            reports.iter().any(|r| r.error_pct.abs() < 50.0),
            "{reports:?}"
        );
    }

    #[test]
    fn clocks_move() {
        let t0 = thread_cpu_time();
        BusyLoop::global().burn(Duration::from_millis(1));
        assert!(thread_cpu_time() > t0);
    }

    #[test]
    fn body_blocks_at_least_its_blocked_time() {
        let body = TaskBody::new(Duration::from_micros(100), Duration::from_millis(2));
        assert_eq!(body.slices, 4);
        let t0 = Instant::now();
        let c0 = thread_cpu_time();
        body.run(&BusyLoop::global());
        // lower bounds only: sleeping never ends early
        assert!(t0.elapsed() >= Duration::from_millis(2));
        // sleeping uses (almost) no CPU: far less than the 2 ms blocked
        assert!(thread_cpu_time() - c0 < Duration::from_millis(50));
    }

    #[test]
    fn slicing_rules() {
        let ms = Duration::from_millis;
        assert_eq!(TaskBody::new(ms(5), Duration::ZERO).slices, 1);
        assert_eq!(TaskBody::new(Duration::ZERO, ms(5)).slices, 1);
        assert_eq!(TaskBody::new(ms(1), ms(100)).slices, MAX_SLICES);
        assert_eq!(TaskBody::new(ms(1), Duration::from_micros(10)).slices, 1);
    }
}
