//! Per-task records and the papers' metrics computed from them.
//!
//! Xu's thesis (ch. 3) splits a task's **turnaround** time into
//! **response** time (how long the submitter was blocked: *submit blocked*
//! here), **idle** time (time in the
//! waiting queue; its mean is the AIT) and **processing** time. With the
//! driver's four instants per task:
//!
//! ```text
//! submitted ──submit blocked──▶ accepted ──wait (idle)──▶ started ──processing──▶ finished
//! └────────────────────────────── turnaround ─────────────────────────────────┘
//! ```
//!
//! A job can start on a worker before `execute_job` has returned to the
//! driver; the accepted instant is then taken as `min(accepted, started)`, so
//! the three parts always add up to the turnaround exactly.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// What the replay driver saw of one task. Instants are nanoseconds since
/// the start of the replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The trace's request id.
    pub request_id: u64,
    /// The trace's application id.
    pub app_id: u64,
    /// When the trace says the task arrives.
    pub scheduled_ns: u64,
    /// When the driver called `execute_job`.
    pub submitted_ns: u64,
    /// When `execute_job` returned `Ok` (`None`: rejected).
    pub accepted_ns: Option<u64>,
    /// When the task body started on a worker (`None`: never started).
    pub started_ns: Option<u64>,
    /// When the task body finished (`None`: not finished when measured).
    pub finished_ns: Option<u64>,
}

impl TaskRecord {
    /// Effective accepted instant: `min(accepted, started)`.
    pub fn accepted_eff(&self) -> Option<u64> {
        match (self.accepted_ns, self.started_ns) {
            (Some(a), Some(s)) => Some(a.min(s)),
            (a, _) => a,
        }
    }
    /// Submission latency.
    pub fn submit_blocked_ns(&self) -> Option<u64> {
        Some(self.accepted_eff()?.saturating_sub(self.submitted_ns))
    }
    /// Time in the queue (idle time).
    pub fn wait_ns(&self) -> Option<u64> {
        Some(self.started_ns?.saturating_sub(self.accepted_eff()?))
    }
    /// Time running.
    pub fn processing_ns(&self) -> Option<u64> {
        Some(self.finished_ns?.saturating_sub(self.started_ns?))
    }
    /// Submission to completion.
    pub fn turnaround_ns(&self) -> Option<u64> {
        Some(self.finished_ns?.saturating_sub(self.submitted_ns))
    }
    /// How late the driver dispatched the task.
    pub fn lateness_ns(&self) -> u64 {
        self.submitted_ns.saturating_sub(self.scheduled_ns)
    }
}

/// Distribution summary of one latency, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LatencySummary {
    /// Number of samples.
    pub count: u64,
    /// Exact mean.
    pub mean_us: f64,
    /// Smallest sample.
    pub min_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest sample.
    pub max_us: f64,
}

impl LatencySummary {
    /// Summarise samples given in nanoseconds. Quantiles come from an
    /// HDR histogram with 3 significant digits; mean, min and max are exact.
    ///
    /// ```
    /// use tidepool_workload::metrics::LatencySummary;
    /// let s = LatencySummary::from_ns([1_000u64, 2_000, 3_000]);
    /// assert_eq!(s.count, 3);
    /// assert_eq!(s.mean_us, 2.0);
    /// assert_eq!(s.max_us, 3.0);
    /// ```
    pub fn from_ns<I: IntoIterator<Item = u64>>(samples: I) -> LatencySummary {
        let mut acc = LatencyAccumulator::default();
        for v in samples {
            acc.record(v);
        }
        acc.summary()
    }
}

/// A [`LatencySummary`] built one sample at a time, in constant memory (the
/// simulator summarises ten million tasks this way).
///
/// ```
/// use tidepool_workload::metrics::{LatencyAccumulator, LatencySummary};
/// let mut acc = LatencyAccumulator::default();
/// acc.record(1_000);
/// acc.record_n(3_000, 2);
/// assert_eq!(acc.summary(), LatencySummary::from_ns([1_000, 3_000, 3_000]));
/// ```
#[derive(Debug, Clone)]
pub struct LatencyAccumulator {
    /// Counts in the buckets of an HDR histogram of 1 ns .. 1 hour at 3
    /// significant digits, indexed as `hdrhistogram` indexes them, grown to
    /// the largest bucket used. Recording is a shift and an add into the few
    /// kilobytes the samples fall in (the simulator records three latencies
    /// per task, and `hdrhistogram`'s bounds checks and 270 KB array cost it
    /// ~9% of its time); [`summary`](Self::summary) builds the histogram.
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

/// Largest value the histogram tells apart (longer values saturate; the
/// exact max is kept separately).
const HIGH_NS: u64 = 3_600_000_000_000;
/// `hdrhistogram`'s layout for a lowest value of 1 at 3 significant digits:
/// 2,048 sub-buckets, the first half of each bucket after the first unused.
const SUB_HALF_BITS: u32 = 10;

/// The index of `ns`'s bucket (as `hdrhistogram`'s `index_for`).
#[inline]
fn bucket_index(ns: u64) -> usize {
    let bucket = 53 - (ns | 2047).leading_zeros();
    (((bucket + 1) << SUB_HALF_BITS) as usize) + (ns >> bucket) as usize - (1 << SUB_HALF_BITS)
}

/// The smallest value in bucket `index` (as `hdrhistogram`'s `value_for`).
fn bucket_value(index: usize) -> u64 {
    let half = 1usize << SUB_HALF_BITS;
    if index < half {
        return index as u64;
    }
    let bucket = (index >> SUB_HALF_BITS) - 1;
    (((index & (half - 1)) + half) as u64) << bucket
}

impl Default for LatencyAccumulator {
    fn default() -> Self {
        LatencyAccumulator {
            counts: Vec::new(),
            n: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl LatencyAccumulator {
    /// Add one sample, in nanoseconds.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Add `n` samples of `ns` nanoseconds each.
    #[inline]
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        let i = bucket_index(ns.clamp(1, HIGH_NS));
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] = self.counts[i].saturating_add(n);
        self.n += n;
        self.sum += ns as u128 * n as u128;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// Samples so far.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Exact mean in nanoseconds (0 without samples).
    pub fn mean_ns(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// The summary of the samples so far: quantiles from the histogram,
    /// mean, min and max exact.
    pub fn summary(&self) -> LatencySummary {
        if self.n == 0 {
            return LatencySummary::default();
        }
        let mut hist = Histogram::<u64>::new_with_bounds(1, HIGH_NS, 3).expect("valid bounds");
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 {
                let _ = hist.record_n(bucket_value(i), c);
            }
        }
        let us = |v: u64| v as f64 / 1e3;
        let (min, max) = (self.min, self.max);
        let q = |p: f64| us(hist.value_at_quantile(p)).clamp(us(min), us(max));
        LatencySummary {
            count: self.n,
            mean_us: self.sum as f64 / self.n as f64 / 1e3,
            min_us: us(min),
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: us(max),
        }
    }
}

/// The task-level metrics of a run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TaskMetrics {
    /// Tasks the driver submitted.
    pub submitted: u64,
    /// Tasks the executor accepted.
    pub accepted: u64,
    /// Tasks the executor rejected.
    pub rejected: u64,
    /// Tasks that finished.
    pub completed: u64,
    /// From the first submission to the last completion, seconds.
    pub duration_s: f64,
    /// Completed tasks per second over `duration_s`.
    pub throughput: f64,
    /// Submission latency.
    #[serde(rename = "response")]
    pub submit_blocked: LatencySummary,
    /// Time in queue (idle time); `wait.mean_us` is the AIT.
    pub wait: LatencySummary,
    /// Running time.
    pub processing: LatencySummary,
    /// Submission to completion.
    pub turnaround: LatencySummary,
    /// How late the driver dispatched arrivals.
    pub lateness: LatencySummary,
}

/// Compute the task-level metrics from records.
///
/// ```
/// use tidepool_workload::metrics::{summarize, TaskRecord};
/// let r = TaskRecord { request_id: 1, app_id: 1, scheduled_ns: 0, submitted_ns: 0,
///     accepted_ns: Some(1_000), started_ns: Some(5_000), finished_ns: Some(10_000) };
/// let m = summarize(&[r]);
/// assert_eq!(m.wait.mean_us, 4.0);
/// assert_eq!(m.turnaround.mean_us, 10.0);
/// ```
pub fn summarize(records: &[TaskRecord]) -> TaskMetrics {
    let submitted = records.len() as u64;
    let accepted = records.iter().filter(|r| r.accepted_ns.is_some()).count() as u64;
    let completed = records.iter().filter(|r| r.finished_ns.is_some()).count() as u64;
    let first = records.iter().map(|r| r.submitted_ns).min().unwrap_or(0);
    let last = records
        .iter()
        .filter_map(|r| r.finished_ns)
        .max()
        .unwrap_or(first);
    let duration_s = last.saturating_sub(first) as f64 / 1e9;
    TaskMetrics {
        submitted,
        accepted,
        rejected: submitted - accepted,
        completed,
        duration_s,
        throughput: if duration_s > 0.0 {
            completed as f64 / duration_s
        } else {
            0.0
        },
        submit_blocked: LatencySummary::from_ns(
            records.iter().filter_map(TaskRecord::submit_blocked_ns),
        ),
        wait: LatencySummary::from_ns(records.iter().filter_map(TaskRecord::wait_ns)),
        processing: LatencySummary::from_ns(records.iter().filter_map(TaskRecord::processing_ns)),
        turnaround: LatencySummary::from_ns(records.iter().filter_map(TaskRecord::turnaround_ns)),
        lateness: LatencySummary::from_ns(records.iter().map(TaskRecord::lateness_ns)),
    }
}

/// One sample of the executor's thread counts (taken every 1 ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSample {
    /// Nanoseconds since the start of the replay.
    pub at_ns: u64,
    /// Live threads.
    pub live: usize,
    /// Queued (accepted, not started) jobs.
    pub queued: usize,
    /// The pool's target size, when the replay was given a probe for it.
    pub target: Option<usize>,
}

/// A point of the pool-size trajectory: emitted when the live count or the
/// target changes (plus the first and last samples).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SizePoint {
    /// Milliseconds since the start of the replay.
    pub t_ms: f64,
    /// Live threads.
    pub live: usize,
    /// Target size, if known.
    pub target: Option<usize>,
}

/// Thread metrics from 1 ms samples.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ThreadMetrics {
    /// Mean live threads over the samples (Oh & Kim's "threads kept").
    pub avg_threads: f64,
    /// Most live threads seen.
    pub max_threads: usize,
    /// Mean queue length over the samples.
    pub avg_queue: f64,
    /// Longest queue seen.
    pub max_queue: usize,
    /// Number of samples.
    pub samples: usize,
    /// Pool-size trajectory (change points).
    pub size_series: Vec<SizePoint>,
}

/// Reduce 1 ms samples to thread metrics.
///
/// ```
/// use tidepool_workload::metrics::{thread_metrics, ThreadSample};
/// let s = |ms: u64, live| ThreadSample { at_ns: ms * 1_000_000, live, queued: 0, target: None };
/// let m = thread_metrics(&[s(0, 2), s(1, 2), s(2, 4), s(3, 4)]);
/// assert_eq!(m.avg_threads, 3.0);
/// assert_eq!(m.size_series.len(), 3); // 2 at 0 ms, 4 at 2 ms, last sample
/// ```
pub fn thread_metrics(samples: &[ThreadSample]) -> ThreadMetrics {
    let mut b = ThreadMetricsBuilder::default();
    for s in samples {
        b.push(s, 1);
    }
    b.finish()
}

/// [`ThreadMetrics`] built one sample at a time: memory grows with the size
/// changes, not with the samples.
///
/// ```
/// use tidepool_workload::metrics::{thread_metrics, ThreadMetricsBuilder, ThreadSample};
/// let s = |ms: u64, live| ThreadSample { at_ns: ms * 1_000_000, live, queued: 0, target: None };
/// let mut b = ThreadMetricsBuilder::default();
/// b.push(&s(0, 2), 2); // the same state sampled at 0 and 1 ms
/// b.push(&s(2, 4), 1);
/// b.push(&s(3, 4), 1);
/// assert_eq!(b.finish(), thread_metrics(&[s(0, 2), s(1, 2), s(2, 4), s(3, 4)]));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ThreadMetricsBuilder {
    n: u64,
    live_sum: f64,
    queue_sum: f64,
    max_threads: usize,
    max_queue: usize,
    series: Vec<SizePoint>,
    last: Option<(ThreadSample, u64)>,
}

impl ThreadMetricsBuilder {
    /// Add `count` samples of the same state, the first taken at
    /// `sample.at_ns` and the last `count - 1` intervals later (the caller
    /// gives the interval through the next sample's time; only the last
    /// sample's time matters for the series' final point).
    pub fn push(&mut self, sample: &ThreadSample, count: u64) {
        if count == 0 {
            return;
        }
        self.n += count;
        self.live_sum += sample.live as f64 * count as f64;
        self.queue_sum += sample.queued as f64 * count as f64;
        self.max_threads = self.max_threads.max(sample.live);
        self.max_queue = self.max_queue.max(sample.queued);
        let changed = self
            .series
            .last()
            .is_none_or(|p| p.live != sample.live || p.target != sample.target);
        if changed {
            self.series.push(SizePoint {
                t_ms: sample.at_ns as f64 / 1e6,
                live: sample.live,
                target: sample.target,
            });
        }
        self.last = Some((*sample, count));
    }

    /// Set the time of the last sample pushed (for a run of equal samples,
    /// the time of its final one).
    pub fn last_at(&mut self, at_ns: u64) {
        if let Some((s, _)) = &mut self.last {
            s.at_ns = at_ns;
        }
    }

    /// The metrics of everything pushed.
    pub fn finish(mut self) -> ThreadMetrics {
        let Some((last, _)) = self.last else {
            return ThreadMetrics::default();
        };
        // The last sample always ends the series (unless it opened the
        // last point itself).
        let end = SizePoint {
            t_ms: last.at_ns as f64 / 1e6,
            live: last.live,
            target: last.target,
        };
        if self.series.last() != Some(&end) {
            self.series.push(end);
        }
        let n = self.n as f64;
        ThreadMetrics {
            avg_threads: self.live_sum / n,
            max_threads: self.max_threads,
            avg_queue: self.queue_sum / n,
            max_queue: self.max_queue,
            samples: self.n as usize,
            size_series: self.series,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bucket layout is `hdrhistogram`'s: every value lands in the
    /// bucket whose smallest value `hdrhistogram` reports as equivalent, and
    /// the summaries equal those of a histogram fed directly.
    #[test]
    fn buckets_and_summaries_are_hdrhistogram_s() {
        let h = Histogram::<u64>::new_with_bounds(1, HIGH_NS, 3).unwrap();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut values: Vec<u64> = (0..64).flat_map(|b| [1u64 << b, (1u64 << b) - 1]).collect();
        values.extend([
            0,
            1,
            2,
            1023,
            1024,
            2047,
            2048,
            2049,
            4095,
            4096,
            HIGH_NS,
            HIGH_NS + 1,
        ]);
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 64));
        }
        for &v in &values {
            let v = v.clamp(1, HIGH_NS);
            let i = bucket_index(v);
            assert_eq!(bucket_value(i), h.lowest_equivalent(v), "value {v}");
            assert_eq!(bucket_index(bucket_value(i)), i, "value {v}");
        }
        for chunk in values.chunks(997) {
            let mut direct = Histogram::<u64>::new_with_bounds(1, HIGH_NS, 3).unwrap();
            let mut acc = LatencyAccumulator::default();
            for &v in chunk {
                direct.record(v.clamp(1, HIGH_NS)).unwrap();
                acc.record(v);
            }
            let s = acc.summary();
            let us = |v: u64| v as f64 / 1e3;
            for (p, got) in [
                (0.5, s.p50_us),
                (0.9, s.p90_us),
                (0.99, s.p99_us),
                (0.999, s.p999_us),
            ] {
                let want = us(direct.value_at_quantile(p)).clamp(s.min_us, s.max_us);
                assert_eq!(got, want, "p{p}");
            }
        }
    }

    fn rec(
        id: u64,
        sched: u64,
        sub: u64,
        acc: Option<u64>,
        st: Option<u64>,
        fin: Option<u64>,
    ) -> TaskRecord {
        TaskRecord {
            request_id: id,
            app_id: 1,
            scheduled_ns: sched,
            submitted_ns: sub,
            accepted_ns: acc,
            started_ns: st,
            finished_ns: fin,
        }
    }

    #[test]
    fn known_answers() {
        // µs: task 1: sub 0, acc 1, start 3, fin 13 → resp 1, wait 2, proc 10, turn 13
        //     task 2: sub 10 (sched 8), acc 12, start 20, fin 40 → resp 2, wait 8, proc 20, turn 30
        //     task 3: rejected; task 4: accepted, never started
        let us = |v: u64| v * 1000;
        let recs = [
            rec(1, 0, 0, Some(us(1)), Some(us(3)), Some(us(13))),
            rec(2, us(8), us(10), Some(us(12)), Some(us(20)), Some(us(40))),
            rec(3, us(10), us(10), None, None, None),
            rec(4, us(11), us(11), Some(us(12)), None, None),
        ];
        let m = summarize(&recs);
        assert_eq!(
            (m.submitted, m.accepted, m.rejected, m.completed),
            (4, 3, 1, 2)
        );
        assert_eq!(m.duration_s, 40e-6);
        assert!((m.throughput - 2.0 / 40e-6).abs() < 1e-6);
        assert_eq!(m.submit_blocked.count, 3);
        assert!((m.submit_blocked.mean_us - (1.0 + 2.0 + 1.0) / 3.0).abs() < 1e-9);
        assert_eq!(m.wait.count, 2);
        assert_eq!(m.wait.mean_us, 5.0); // AIT
        assert_eq!(m.wait.max_us, 8.0);
        assert_eq!(m.processing.mean_us, 15.0);
        assert_eq!(m.turnaround.mean_us, 21.5);
        assert_eq!(m.lateness.max_us, 2.0);
        assert_eq!(m.lateness.count, 4);
    }

    #[test]
    fn parts_add_up_even_when_started_before_accepted() {
        let r = rec(1, 0, 100, Some(900), Some(500), Some(2_000));
        assert_eq!(r.submit_blocked_ns(), Some(400));
        assert_eq!(r.wait_ns(), Some(0));
        assert_eq!(
            r.submit_blocked_ns().unwrap() + r.wait_ns().unwrap() + r.processing_ns().unwrap(),
            r.turnaround_ns().unwrap()
        );
    }

    #[test]
    fn quantiles_of_uniform_samples() {
        let s = LatencySummary::from_ns((1..=10_000u64).map(|v| v * 1000));
        assert_eq!(s.count, 10_000);
        assert!((s.mean_us - 5000.5).abs() < 1e-6);
        assert!((s.p50_us - 5000.0).abs() / 5000.0 < 0.01, "{s:?}");
        assert!((s.p99_us - 9900.0).abs() / 9900.0 < 0.01, "{s:?}");
        assert_eq!(s.min_us, 1.0);
        assert_eq!(s.max_us, 10_000.0);
        assert_eq!(LatencySummary::from_ns([]), LatencySummary::default());
    }

    #[test]
    fn thread_metrics_from_samples() {
        let s = |ms: u64, live, queued, target| ThreadSample {
            at_ns: ms * 1_000_000,
            live,
            queued,
            target,
        };
        let m = thread_metrics(&[
            s(0, 1, 0, Some(1)),
            s(1, 1, 4, Some(1)),
            s(2, 3, 2, Some(3)),
            s(3, 3, 0, Some(3)),
            s(4, 2, 0, Some(2)),
        ]);
        assert_eq!(m.avg_threads, 2.0);
        assert_eq!(m.max_threads, 3);
        assert_eq!(m.avg_queue, 1.2);
        assert_eq!(m.max_queue, 4);
        let live: Vec<usize> = m.size_series.iter().map(|p| p.live).collect();
        assert_eq!(live, vec![1, 3, 2]);
        assert_eq!(m.size_series[1].t_ms, 2.0);
    }
}
