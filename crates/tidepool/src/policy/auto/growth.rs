//! Where growth stops besides the ceiling (module docs of [`super`], point
//! 9): at the tasks present, and — while other processes leave the pool no
//! free core — at the last size whose throughput proved growth pays.
//!
//! A worker past the tasks present finds nothing to run, however blocking
//! the tasks are. And a task that blocks may be waiting on another local
//! process (a database on the same cores): its wait reads as blocking (φ
//! small, the ceiling huge), yet more workers only queue more work for a
//! machine that has no core to spare. While the machine is busy and others
//! hold a share of it, the pool may therefore only double past a size it
//! measured with every worker given a task, and keeps the doubling only if
//! throughput rose by a quarter of the proportional gain; otherwise the
//! measured size becomes the learned cap. Tasks that block on something
//! else (sleep, a remote service) pass each doubling and keep growing.

use std::time::Duration;

use super::super::Observation;
use super::feedback::{Pending, Probe};
use super::{utilization, Auto, FEEDBACK_MIN_COMPLETIONS, FEEDBACK_MIN_GAIN, MIN_THREAD_WINDOW};

/// Share of the machine's CPU time busy (smoothed) from which it has no
/// core to spare.
pub(super) const MACHINE_BUSY: f64 = 0.9;
/// Shortest window whose machine-wide share is read on its own: the OS
/// counts the machine's CPU time in clock ticks (10 ms a core), so shorter
/// windows read 0 or 1.
const MACHINE_WINDOW: Duration = Duration::from_millis(12);
/// Time constant of the smoothed machine-wide shares: the pool can grow
/// by dozens of workers in a tenth of a second.
const MACHINE_SMOOTHING: Duration = Duration::from_millis(100);
/// Share of the machine's cores that other processes must hold (machine
/// busy less the pool's workers, smoothed) for growth to need proof.
const OTHERS_HOLD: f64 = 0.1;
/// Once growth needs proof, it does until the machine's busy share
/// (smoothed) falls below this or the others' below [`OTHERS_LEFT`]: a
/// saturated machine has moments with a core free, and each flicker out
/// of proof threw away what the proof had measured.
const MACHINE_FREE: f64 = 0.75;
/// See [`MACHINE_FREE`].
const OTHERS_LEFT: f64 = 0.05;
/// The tasks-present bound remembers the peak for between one and two of
/// these (two buckets).
const PEAK_BUCKET: Duration = Duration::from_secs(2);
/// Shortest span a proof probe pools (it needs [`FEEDBACK_MIN_COMPLETIONS`],
/// or two per worker, too): two ticks, so one noisy tick on a loaded
/// machine does not decide, and tasks that block on something else still
/// double their workers every 50 ms or so.
const PROOF_SPAN: Duration = Duration::from_millis(50);
/// Growth allowed past the last proven size while it needs proof.
const PROOF_FACTOR: usize = 2;
/// Growth past the proven size that gets a verdict: most of the way to
/// [`PROOF_FACTOR`]. A quarter more workers needs only 6% more throughput,
/// which two 50 ms spans of a loaded machine differ by anyway: such small
/// steps passed one after another up to 82 workers where 16 served best.
const PROOF_MIN_GROWTH: f64 = 0.6;

/// The largest number of tasks present, over the last one to two
/// [`PEAK_BUCKET`]s.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Peak {
    current: usize,
    previous: usize,
    since: Duration,
}

impl Peak {
    fn record(&mut self, n: usize, now: Duration) {
        let age = now.saturating_sub(self.since);
        if age >= PEAK_BUCKET * 2 {
            (self.previous, self.current, self.since) = (0, 0, now);
        } else if age >= PEAK_BUCKET {
            (self.previous, self.current, self.since) = (self.current, 0, now);
        }
        self.current = self.current.max(n);
    }

    fn value(&self) -> usize {
        self.current.max(self.previous)
    }
}

/// Growth that must prove itself: the last size measured with every worker
/// given a task, and the windows pooled for the next measurement.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Proof {
    base: Option<Probe>,
    pending: Pending,
    /// A window of the pending span had idle workers.
    idle: bool,
}

impl Auto {
    /// Feed the window's machine-wide CPU share and tasks present.
    pub(super) fn learn_machine(&mut self, obs: &Observation) {
        self.peak.record(obs.in_flight, obs.now);
        let Some(machine) = obs.machine_busy else {
            return;
        };
        if obs.window < MIN_THREAD_WINDOW {
            return;
        }
        self.machine
            .update_over(machine, obs.window, MACHINE_SMOOTHING);
        let own = utilization(obs).unwrap_or(0.0);
        self.others
            .update_over((machine - own).max(0.0), obs.window, MACHINE_SMOOTHING);
        if obs.window >= MACHINE_WINDOW {
            self.machine_was_busy = machine >= MACHINE_BUSY;
        }
        self.proving = if self.proving {
            self.machine.value >= MACHINE_FREE && self.others.value >= OTHERS_LEFT
        } else {
            (self.machine_was_busy || self.machine.value >= MACHINE_BUSY)
                && self.others.value >= OTHERS_HOLD
        };
    }

    /// Whether the machine had no free core in `obs`'s window (or, when the
    /// window is too short for the OS's clock ticks, lately): a worker
    /// waiting for one then has no run delay credited yet, and its thread
    /// totals read as blocking.
    pub(super) fn no_free_core(&self, obs: &Observation) -> bool {
        match obs.machine_busy {
            Some(m) if obs.window >= MIN_THREAD_WINDOW => m >= MACHINE_BUSY,
            _ => self.machine.is_primed() && self.machine.value >= MACHINE_BUSY,
        }
    }

    /// Whether growth must prove itself: the machine has no core to spare
    /// (lately, or in the last window long enough to tell) and other
    /// processes hold a share of it; and, once it must, until the machine
    /// or the others' share is clearly lower ([`MACHINE_FREE`]).
    pub(super) fn needs_proof(&self) -> bool {
        self.proving
    }

    /// The most workers growth may reach now: the peak of tasks present
    /// plus one per core, and while growth needs proof, twice the last
    /// proven size (no growth until one is measured). Never below the
    /// target: this stops growth, it does not shrink.
    pub(super) fn growth_bound(&self) -> usize {
        self.present_bound()
            .min(self.proof_gate().unwrap_or(usize::MAX))
            .max(self.target)
    }

    /// The peak of tasks present plus one per core.
    pub(super) fn present_bound(&self) -> usize {
        self.peak.value().saturating_add(self.cores)
    }

    /// The size last measured with every worker given a task, while growth
    /// needs proof (0 before one is).
    pub(super) fn measured_size(&self) -> usize {
        self.proof.base.map_or(0, |b| b.threads)
    }

    /// While growth needs proof, twice the last proven size, or the
    /// target until one is measured.
    fn proof_gate(&self) -> Option<usize> {
        self.needs_proof().then(|| {
            self.proof
                .base
                .map_or(self.target, |b| b.threads.saturating_mul(PROOF_FACTOR))
        })
    }

    /// At every call: while growth needs proof and every worker had a task,
    /// pool the window, and once a span is long enough compare its
    /// throughput with the proven size's. Otherwise start over.
    pub(super) fn prove(&mut self, obs: &Observation) {
        if !self.needs_proof() {
            self.proof = Proof::default();
            return;
        }
        self.proof.idle |= obs.in_flight < obs.live;
        // Long tasks complete slowly: two per worker are enough then.
        let completions = FEEDBACK_MIN_COMPLETIONS.min(2 * obs.live as u64);
        let Some(now) = self.proof.pending.add(obs, completions, PROOF_SPAN) else {
            return;
        };
        // A size with idle workers is no base (its throughput says nothing
        // of what it could do), but it is a verdict on the doubling that
        // made it: more workers than tasks and no more throughput is growth
        // that did not pay. (Waiting for a span without idle workers, the
        // verdict never came: 64 clients never keep 67 workers busy.)
        let full = !std::mem::take(&mut self.proof.idle);
        let Some(base) = self.proof.base.filter(|b| now.threads > b.threads) else {
            // The first size measured, or a smaller one: the new base.
            if full {
                self.proof.base = Some(now);
            }
            return;
        };
        let growth = now.threads as f64 / base.threads as f64 - 1.0;
        if growth < PROOF_MIN_GROWTH {
            // On the way to the doubling: no verdict, the base stays.
            return;
        }
        if now.throughput >= base.throughput * (1.0 + FEEDBACK_MIN_GAIN * growth) {
            if full {
                self.proof.base = Some(now);
            }
            self.forget_cap();
        } else {
            self.learn_cap(base.threads, obs.now);
        }
    }
}
