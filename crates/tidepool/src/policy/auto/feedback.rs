//! The throughput feedback loop (module docs of [`super`], point 5): under
//! backlog, compare throughput before and after the pool grew; growth that
//! did not pay becomes a learned cap, forgotten after a while so the size is
//! probed again.

use std::time::Duration;

use super::super::Observation;
use super::{
    Auto, BURST_CORES, CAP_MEMORY, FEEDBACK_MIN_COMPLETIONS, FEEDBACK_MIN_GAIN,
    FEEDBACK_MIN_GROWTH, MAX_CAP_MEMORY,
};

/// A throughput sample taken under backlog.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Probe {
    /// Mean live workers over the span.
    pub(super) threads: usize,
    /// Completions per second over the span.
    pub(super) throughput: f64,
    /// How long the span was.
    pub(super) span: Duration,
}

/// Backlogged windows pooled for the next throughput probe.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Pending {
    completions: u64,
    span: Duration,
    worker_secs: f64,
}

impl Auto {
    /// The learned throughput cap, if still fresh.
    pub(super) fn learned_cap(&self, now: Duration) -> Option<usize> {
        self.learned_cap
            .and_then(|(cap, until)| (now < until).then_some(cap))
    }

    /// Under backlog, compare throughput with the last backlogged span.
    /// Consecutive backlogged windows are pooled until they hold enough
    /// completions to compare (at 25 ms ticks a single window rarely does).
    pub(super) fn feedback(&mut self, obs: &Observation) {
        let Some(now) = self
            .pending
            .add(obs, FEEDBACK_MIN_COMPLETIONS, Duration::ZERO)
        else {
            return;
        };
        let span = now.span.as_secs_f64();
        if let Some(before) = self.probe {
            let growth = now.threads as f64 / before.threads as f64 - 1.0;
            if growth >= FEEDBACK_MIN_GROWTH {
                let expected = before.throughput
                    * gain_needed(self.free_growth(), before.threads, now.threads);
                // The missing completions must have been there to take: in an
                // open loop a pool that clears its queue cannot go faster
                // than the arrivals, however many threads it has.
                let missing = (expected - now.throughput) * span;
                if now.throughput < expected && obs.queue_len as f64 >= missing {
                    self.learn_cap(before.threads, obs.now);
                } else if now.throughput >= expected {
                    self.forget_cap();
                }
            }
        }
        self.probe = Some(now);
    }

    /// The size up to which growth need only not lose throughput: `2 ×
    /// cores`, where a sustained backlog takes even CPU-bound work (module
    /// docs, point 3), as runnable workers past the cores fill the gaps
    /// blocking leaves. That is worth 8–15%, short of a quarter of a
    /// doubling's gain: in three of ten runs `sat10`'s pool went back to 2
    /// workers after 4 served 815/s against 2's 658/s. Not while other
    /// processes hold most of the machine: the tasks then likely wait on
    /// one of them (lookups in a database on the same cores: 4 workers
    /// served 0.82–0.93 of 2), and each worker past its need queues more.
    pub(super) fn free_growth(&self) -> usize {
        if self.others_hold_most() {
            0
        } else {
            BURST_CORES * self.cores
        }
    }

    /// Growth paid: forget any cap and its long memory.
    pub(super) fn forget_cap(&mut self) {
        self.learned_cap = None;
        self.cap_memory = CAP_MEMORY;
    }

    /// Growth past `threads` did not pay: cap the size there until `now`
    /// plus the cap's memory, which each confirmation doubles.
    pub(super) fn learn_cap(&mut self, threads: usize, now: Duration) {
        if self.learned_cap.is_some() {
            self.cap_memory = (self.cap_memory * 2).min(MAX_CAP_MEMORY);
        }
        self.learned_cap = Some((threads.max(self.min), now + self.cap_memory));
    }
}

/// The factor by which throughput must rise for growth from `from` to `to`
/// workers to pay: a quarter of the proportional gain, or, up to `floor`
/// workers ([`Auto::free_growth`]), no loss.
pub(super) fn gain_needed(floor: usize, from: usize, to: usize) -> f64 {
    if to <= floor {
        return 1.0;
    }
    let growth = (to as f64 / from as f64 - 1.0).max(0.0);
    1.0 + FEEDBACK_MIN_GAIN * growth
}

impl Pending {
    /// Pool `obs`'s window; once the pool holds `completions` and spans
    /// `span` (and more than nothing), return its probe and start over.
    pub(super) fn add(
        &mut self,
        obs: &Observation,
        completions: u64,
        span: Duration,
    ) -> Option<Probe> {
        self.completions += obs.completions;
        self.span += obs.window;
        self.worker_secs += obs.live as f64 * obs.window.as_secs_f64();
        if self.completions < completions || self.span < span || self.span.is_zero() {
            return None;
        }
        let secs = self.span.as_secs_f64();
        let probe = Probe {
            threads: ((self.worker_secs / secs).round() as usize).max(1),
            throughput: self.completions as f64 / secs,
            span: self.span,
        };
        *self = Pending::default();
        Some(probe)
    }
}
