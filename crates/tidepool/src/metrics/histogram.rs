//! A lock-free latency histogram for the hot path: one writer (the worker that
//! owns it) bumps log-linear buckets with plain relaxed loads and stores; any
//! thread may read it, and reads convert it to an hdrhistogram.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::latency::Latency;

/// Sub-buckets per power of two: 2^5 = 32, so a value is kept within ~3%.
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
/// Values are clamped below 2^40 ns (about 18 minutes).
const MAX_BITS: u32 = 40;
const BUCKETS: usize = (MAX_BITS - SUB_BITS + 1) as usize * SUB;

/// Add `v` to a counter only this thread writes: no read-modify-write needed.
#[inline]
pub(crate) fn bump(counter: &AtomicU64, v: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(v), Relaxed);
}

#[inline]
fn index(v: u64) -> usize {
    let v = v.min((1u64 << MAX_BITS) - 1);
    if v < SUB as u64 {
        return v as usize;
    }
    let shift = 63 - v.leading_zeros() - SUB_BITS;
    (shift as usize + 1) * SUB + ((v >> shift) as usize - SUB)
}

/// The middle of bucket `i`'s value range.
fn midpoint(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let shift = (i / SUB - 1) as u32;
    let low = ((i % SUB + SUB) as u64) << shift;
    low + ((1u64 << shift) >> 1)
}

/// Nanosecond latencies written by one thread, read by any.
pub(crate) struct AtomicLatency {
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Default for AtomicLatency {
    fn default() -> Self {
        AtomicLatency {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for AtomicLatency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomicLatency")
            .field("sum_ns", &self.sum.load(Relaxed))
            .finish_non_exhaustive()
    }
}

impl AtomicLatency {
    /// Record one value. Only the owning thread may call this.
    #[inline]
    pub(crate) fn record(&self, ns: u64) {
        bump(&self.buckets[index(ns)], 1);
        bump(&self.sum, ns);
    }

    /// Add what has been recorded so far into `out`.
    pub(crate) fn add_into(&self, out: &mut Latency) {
        // Straight into `out`: a histogram per worker, then a merge, cost
        // twice as much (the controller does this for every live worker).
        for (i, b) in self.buckets.iter().enumerate() {
            let n = b.load(Relaxed);
            if n > 0 {
                out.record_n(midpoint(i), n);
            }
        }
        out.add_sum(self.sum.load(Relaxed) as u128);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_values_within_three_percent() {
        for v in [
            0u64,
            1,
            31,
            32,
            33,
            100,
            1_000,
            12_345,
            1 << 20,
            987_654_321,
            1 << 39,
        ] {
            let m = midpoint(index(v));
            let err = (m as f64 - v as f64).abs() / (v.max(1) as f64);
            assert!(err <= 0.032, "{v} -> {m} ({err})");
        }
        assert!(index(u64::MAX) < BUCKETS);
        let mut last = 0;
        for v in (0..5_000_000u64).step_by(997) {
            let i = index(v);
            assert!(i >= last, "index is monotone");
            last = i;
        }
    }

    #[test]
    fn converts_to_an_exact_mean_and_close_quantiles() {
        let h = AtomicLatency::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let mut l = Latency::default();
        h.add_into(&mut l);
        assert_eq!(l.count(), 1000);
        assert_eq!(l.mean().unwrap().as_nanos(), 500_500);
        let p50 = l.quantile(0.5).unwrap().as_nanos() as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.04, "{p50}");
    }

    #[test]
    fn several_workers_add_into_one_distribution() {
        let (a, b) = (AtomicLatency::default(), AtomicLatency::default());
        for v in 1..=100u64 {
            a.record(v * 1000);
            b.record(v * 3000);
        }
        let mut l = Latency::default();
        a.add_into(&mut l);
        b.add_into(&mut l);
        assert_eq!(l.count(), 200);
        // Exact sum: (5050 + 15150) µs over 200 tasks.
        assert_eq!(l.mean().unwrap().as_nanos(), 101_000);
        assert_eq!(l.total().as_nanos(), 20_200_000);
        // Adding again counts again (the caller adds each worker once).
        a.add_into(&mut l);
        assert_eq!(l.count(), 300);
    }
}
