//! A latency distribution: an hdrhistogram plus the exact sum, so means are exact.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Nanosecond latencies: count, exact mean, and quantiles (2 significant digits).
#[derive(Debug, Clone)]
pub struct Latency {
    hist: Histogram<u64>,
    sum_ns: u128,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            // Auto-resizing, 2 significant digits: ±1% is plenty for wait/service
            // times and keeps each histogram a few KiB.
            hist: Histogram::new(2).expect("2 significant digits is valid"),
            sum_ns: 0,
        }
    }
}

impl Latency {
    /// Record one latency in nanoseconds (the pool records in bulk through
    /// its per-worker buckets; a simulator records each task).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.sum_ns += ns as u128;
        // An auto-resizing histogram accepts any u64.
        let _ = self.hist.record(ns.max(1));
    }

    /// Record `n` latencies of zero (cheaper than `n` calls).
    pub(crate) fn record_zeros(&mut self, n: u64) {
        self.record_n(0, n);
    }

    /// Record `n` latencies of `ns` each, leaving the exact sum to the caller.
    pub(crate) fn record_n(&mut self, ns: u64, n: u64) {
        if n > 0 {
            let _ = self.hist.record_n(ns.max(1), n);
        }
    }

    /// Add to the exact sum (with `record_n` calls of bucketed values).
    pub(crate) fn add_sum(&mut self, sum_ns: u128) {
        self.sum_ns += sum_ns;
    }

    /// This distribution minus an earlier one of the same source.
    pub(crate) fn since(&self, earlier: &Latency) -> Latency {
        let mut out = self.clone();
        out.sum_ns = self.sum_ns.saturating_sub(earlier.sum_ns);
        if out.hist.subtract(&earlier.hist).is_err() {
            // Not a prefix of this one (should not happen): keep the cumulative view.
            out.hist = self.hist.clone();
        }
        out
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Exact mean, or `None` without samples.
    pub fn mean(&self) -> Option<Duration> {
        let n = self.count();
        (n > 0).then(|| Duration::from_nanos((self.sum_ns / n as u128) as u64))
    }

    /// Sum of all samples.
    pub fn total(&self) -> Duration {
        Duration::from_nanos(self.sum_ns.min(u64::MAX as u128) as u64)
    }

    /// The `q` quantile (`0.0..=1.0`), or `None` without samples.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        (self.count() > 0)
            .then(|| Duration::from_nanos(self.hist.value_at_quantile(q.clamp(0.0, 1.0))))
    }

    /// The underlying histogram (nanoseconds).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_is_exact_and_quantiles_close() {
        let mut l = Latency::default();
        for ns in 1..=1000u64 {
            l.record(ns * 1000);
        }
        assert_eq!(l.count(), 1000);
        assert_eq!(l.mean(), Some(Duration::from_nanos(500_500)));
        let p99 = l.quantile(0.99).unwrap().as_nanos() as f64;
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 0.02, "{p99}");
    }

    #[test]
    fn since_subtracts_an_earlier_state() {
        let mut l = Latency::default();
        l.record(10);
        let earlier = l.clone();
        l.record(1_000);
        l.record(1_000);
        let w = l.since(&earlier);
        assert_eq!(w.count(), 2);
        assert_eq!(w.mean(), Some(Duration::from_nanos(1_000)));
        assert_eq!(Latency::default().mean(), None);
    }
}
