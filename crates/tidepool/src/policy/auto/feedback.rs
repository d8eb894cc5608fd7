//! The throughput feedback loop (module docs of [`super`], point 5): under
//! backlog, compare throughput before and after the pool grew; growth that
//! did not pay becomes a learned cap, forgotten after a while so the size is
//! probed again.

use std::time::Duration;

use super::super::Observation;
use super::{
    Auto, CAP_MEMORY, FEEDBACK_MIN_COMPLETIONS, FEEDBACK_MIN_GAIN, FEEDBACK_MIN_GROWTH,
    MAX_CAP_MEMORY,
};

/// A throughput sample taken under backlog.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Probe {
    threads: usize,
    throughput: f64,
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
        let acc = &mut self.pending;
        acc.completions += obs.completions;
        acc.span += obs.window;
        acc.worker_secs += obs.live as f64 * obs.window.as_secs_f64();
        if acc.completions < FEEDBACK_MIN_COMPLETIONS || acc.span.is_zero() {
            return;
        }
        let span = acc.span.as_secs_f64();
        let now = Probe {
            threads: ((acc.worker_secs / span).round() as usize).max(1),
            throughput: acc.completions as f64 / span,
        };
        self.pending = Pending::default();
        if let Some(before) = self.probe {
            let growth = now.threads as f64 / before.threads as f64 - 1.0;
            if growth >= FEEDBACK_MIN_GROWTH {
                let expected = before.throughput * (1.0 + FEEDBACK_MIN_GAIN * growth);
                // The missing completions must have been there to take: in an
                // open loop a pool that clears its queue cannot go faster
                // than the arrivals, however many threads it has.
                let missing = (expected - now.throughput) * span;
                if now.throughput < expected && obs.queue_len as f64 >= missing {
                    let confirmed = self.learned_cap.is_some();
                    if confirmed {
                        self.cap_memory = (self.cap_memory * 2).min(MAX_CAP_MEMORY);
                    }
                    let cap = before.threads.max(self.min);
                    self.learned_cap = Some((cap, obs.now + self.cap_memory));
                } else if now.throughput >= expected {
                    // Growth paid: forget any cap and its long memory.
                    self.learned_cap = None;
                    self.cap_memory = CAP_MEMORY;
                }
            }
        }
        self.probe = Some(now);
    }
}
