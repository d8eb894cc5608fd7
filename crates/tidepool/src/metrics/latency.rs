//! A latency distribution: a histogram plus the exact sum, so means are exact.
//!
//! The histogram is an hdrhistogram inside; the public face is tidepool's own
//! (count, mean, quantiles, extremes, buckets), so the histogram crate can
//! change without changing this API.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Nanosecond latencies: count, exact mean, and quantiles (2 significant digits).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = tidepool::Pool::builder().threads(2).build()?;
/// pool.submit(|| std::thread::sleep(std::time::Duration::from_millis(1)))?.join()?;
/// pool.wait_idle(); // statistics are recorded just after the task returns
/// let service = pool.stats().service;
/// assert_eq!(service.count(), 1);
/// assert!(service.quantile(0.99) >= Some(std::time::Duration::from_millis(1)));
/// let tasks: u64 = service.buckets().map(|b| b.count).sum();
/// assert_eq!(tasks, 1);
/// # Ok(()) }
/// ```
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

    /// The smallest sample (to the histogram's precision), or `None`
    /// without samples.
    pub fn min(&self) -> Option<Duration> {
        (self.count() > 0).then(|| Duration::from_nanos(self.hist.min()))
    }

    /// The largest sample (to the histogram's precision), or `None`
    /// without samples.
    pub fn max(&self) -> Option<Duration> {
        (self.count() > 0).then(|| Duration::from_nanos(self.hist.max()))
    }

    /// The non-empty buckets, smallest first: every sample falls in exactly
    /// one, so their counts add up to [`count`](Self::count). Use them to
    /// feed another histogram (a metrics exporter's) without losing shape.
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        self.hist.iter_recorded().map(|v| Bucket {
            upper: Duration::from_nanos(self.hist.highest_equivalent(v.value_iterated_to())),
            count: v.count_at_value(),
        })
    }
}

/// One bucket of a [`Latency`]: `count` samples no longer than `upper` (and
/// longer than the previous bucket's `upper`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Bucket {
    /// The longest latency the bucket holds.
    pub upper: Duration,
    /// How many samples fell in it.
    pub count: u64,
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

    #[test]
    fn buckets_cover_every_sample_in_order() {
        let mut l = Latency::default();
        for ns in [5u64, 5, 900, 1_000_000, 1_000_000, 1_000_000] {
            l.record(ns);
        }
        let buckets: Vec<Bucket> = l.buckets().collect();
        assert_eq!(buckets.iter().map(|b| b.count).sum::<u64>(), 6);
        assert!(buckets.windows(2).all(|w| w[0].upper < w[1].upper));
        assert_eq!(buckets[0].count, 2);
        assert_eq!(buckets.last().unwrap().count, 3);
        // Each bucket's bound is within the histogram's 1% of its samples.
        let top = buckets.last().unwrap().upper.as_nanos() as f64;
        assert!((top - 1e6).abs() / 1e6 < 0.01, "{top}");
        assert_eq!(l.min(), Some(Duration::from_nanos(5)));
        let max = l.max().unwrap().as_nanos() as f64;
        assert!((max - 1e6).abs() / 1e6 < 0.01);
        assert_eq!(Latency::default().buckets().count(), 0);
        assert_eq!(Latency::default().max(), None);
    }
}
