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
    /// The buckets in use, `lo..hi`, as `lo | hi << 32` (none: `BUCKETS..0`):
    /// a reader scans only those (a server's latencies span about half the
    /// buckets, a histogram of submissions that never blocked none).
    used: AtomicU64,
}

/// `lo..hi` as [`AtomicLatency::used`] keeps it.
fn pack(lo: usize, hi: usize) -> u64 {
    lo as u64 | (hi as u64) << 32
}

/// The range [`pack`] packed.
fn unpack(used: u64) -> (usize, usize) {
    ((used & u64::from(u32::MAX)) as usize, (used >> 32) as usize)
}

impl Default for AtomicLatency {
    fn default() -> Self {
        AtomicLatency {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            used: AtomicU64::new(pack(BUCKETS, 0)),
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
        let i = index(ns);
        let (lo, hi) = unpack(self.used.load(Relaxed));
        if i < lo || i >= hi {
            self.used.store(pack(lo.min(i), hi.max(i + 1)), Relaxed);
        }
        bump(&self.buckets[i], 1);
        bump(&self.sum, ns);
    }
}

/// Several [`AtomicLatency`]s' buckets summed as plain counts, converted to
/// a [`Latency`] once: the controller reads every live worker's on each
/// call, and converting each worker's buckets on its own cost half its
/// time (80 workers of a server, 0.9 ms a call).
#[derive(Debug, Clone)]
pub(crate) struct BucketSums {
    counts: Box<[u64]>,
    sum: u128,
}

impl Default for BucketSums {
    fn default() -> Self {
        BucketSums {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            sum: 0,
        }
    }
}

impl BucketSums {
    /// Add what `h` has recorded so far.
    pub(crate) fn add(&mut self, h: &AtomicLatency) {
        let (lo, hi) = unpack(h.used.load(Relaxed));
        if lo < hi {
            for (c, b) in self.counts[lo..hi].iter_mut().zip(&h.buckets[lo..hi]) {
                *c += b.load(Relaxed);
            }
        }
        self.sum += h.sum.load(Relaxed) as u128;
    }

    /// Add the summed counts into `out`.
    pub(crate) fn add_into(&self, out: &mut Latency) {
        for (i, &n) in self.counts.iter().enumerate() {
            if n > 0 {
                out.record_n(midpoint(i), n);
            }
        }
        out.add_sum(self.sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `hs` summed and converted.
    fn latency(hs: &[&AtomicLatency]) -> Latency {
        let mut sums = BucketSums::default();
        for h in hs {
            sums.add(h);
        }
        let mut l = Latency::default();
        sums.add_into(&mut l);
        l
    }

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
        let l = latency(&[&h]);
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
        let l = latency(&[&a, &b]);
        assert_eq!(l.count(), 200);
        // Exact sum: (5050 + 15150) µs over 200 tasks.
        assert_eq!(l.mean().unwrap().as_nanos(), 101_000);
        assert_eq!(l.total().as_nanos(), 20_200_000);
        // Adding again counts again (the caller adds each worker once).
        assert_eq!(latency(&[&a, &b, &a]).count(), 300);
    }

    #[test]
    fn only_the_buckets_in_use_are_read_and_every_one_is() {
        let h = AtomicLatency::default();
        assert_eq!(unpack(h.used.load(Relaxed)), (BUCKETS, 0));
        assert_eq!(latency(&[&h]).count(), 0);
        // In from both ends and in the middle: every value is counted.
        for v in [5_000u64, 40, 1 << 30, 7_000, 0] {
            h.record(v);
        }
        assert_eq!(unpack(h.used.load(Relaxed)), (0, index(1 << 30) + 1));
        let l = latency(&[&h]);
        assert_eq!(l.count(), 5);
        assert_eq!(l.total().as_nanos(), 5_000 + 40 + (1 << 30) + 7_000);
        let max = l.max().unwrap().as_nanos() as f64;
        assert!((max - (1u64 << 30) as f64).abs() / max < 0.04, "{max}");
    }
}
