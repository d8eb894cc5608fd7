//! Throughput over 200 ms spans, as the front end answers requests: how
//! much one span differs from the next with nothing changed but time. A
//! policy that sizes itself by comparing spans (`auto` under proof compares
//! spans of 50–250 ms) cannot resolve a difference between two sizes
//! smaller than this; a phase's static sizes show how large it is on the
//! machine the benchmark ran on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tidepool_workload::median;

/// The span throughput is read over: the length of a trial of `auto`.
pub const SPAN: Duration = Duration::from_millis(200);

/// Requests answered, and the count at the end of each span so far.
#[derive(Debug, Default)]
pub struct Spans {
    answered: AtomicU64,
    marks: Mutex<Vec<(Instant, u64)>>,
}

impl Spans {
    /// Count one answered request.
    pub fn answered(&self) {
        self.answered.fetch_add(1, Ordering::Relaxed);
    }

    /// The median change of requests/s from one span to the next since the
    /// last call, in percent of the earlier span (`None` with fewer than
    /// three spans), and start afresh from now.
    pub fn take(&self) -> Option<f64> {
        let mut marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        let rates: Vec<f64> = marks
            .windows(2)
            .map(|w| (w[1].1 - w[0].1) as f64 / (w[1].0 - w[0].0).as_secs_f64().max(1e-9))
            .collect();
        marks.clear();
        marks.push((Instant::now(), self.answered.load(Ordering::Relaxed)));
        median_change_pct(&rates)
    }

    /// Mark the end of a span every [`SPAN`] on the current tokio runtime,
    /// until the runtime drops it. A late timer (a stalled front end) makes
    /// a longer span: rates are per second of the span's own length.
    pub async fn watch(self: Arc<Self>) {
        let mut every = tokio::time::interval(SPAN);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let mark = (Instant::now(), self.answered.load(Ordering::Relaxed));
            self.marks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(mark);
        }
    }
}

/// The median of `|rate[i+1] / rate[i] − 1|` over spans that served
/// anything, in percent.
fn median_change_pct(rates: &[f64]) -> Option<f64> {
    let changes: Vec<f64> = rates
        .windows(2)
        .filter(|w| w[0] > 0.0)
        .map(|w| (w[1] / w[0] - 1.0).abs() * 100.0)
        .collect();
    median(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_change_is_the_median_of_successive_relative_changes() {
        // 100 → 110 (+10%) → 99 (−10%) → 99 (0%) → 198 (+100%)
        let got = median_change_pct(&[100.0, 110.0, 99.0, 99.0, 198.0]).unwrap();
        assert!((got - 10.0).abs() < 1e-9, "{got}");
        assert_eq!(median_change_pct(&[5.0]), None);
        // A span that served nothing is no base for a ratio.
        assert_eq!(median_change_pct(&[0.0, 10.0]), None);
    }

    #[test]
    fn spans_on_a_runtime_read_the_requests_answered() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let spans = Arc::new(Spans::default());
        rt.block_on(async {
            let timer = tokio::spawn(spans.clone().watch());
            assert_eq!(spans.take(), None, "nothing marked yet");
            for _ in 0..(4 * SPAN.as_millis()) {
                spans.answered();
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // How much the spans differ depends on the machine; that they
            // were marked and read does not.
            let change = spans.take().expect("spans marked");
            assert!(change.is_finite() && change >= 0.0, "{change}");
            assert_eq!(spans.take(), None, "taken once");
            timer.abort();
        });
    }
}
