//! The `metrics`-facade exporter (feature `metrics`).

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics::{SharedString, Unit};

use crate::metrics::Latency;
use crate::PoolStats;

/// The sample budget of one [`MetricsExporter::publish`] per latency, unless
/// [`MetricsExporter::max_samples`] says otherwise.
pub const DEFAULT_MAX_SAMPLES: usize = 4096;

/// Publishes a pool's statistics through the `metrics` facade, labelled
/// `pool="NAME"`. Call [`publish`](Self::publish) with a fresh
/// [`Pool::stats`](crate::Pool::stats) whenever the exporter should see new
/// numbers (every second, or on each scrape).
///
/// | metric | kind | what |
/// |---|---|---|
/// | `tidepool_threads_live`, `_busy`, `_idle`, `_blocked` | gauge | worker threads now (`_blocked`: inside [`block_in_place`](crate::block_in_place)) |
/// | `tidepool_threads_target`, `_min`, `_max` | gauge | the size the policy wants, and the user's bounds |
/// | `tidepool_threads_spawn_limit` | gauge | where on-demand growth stops now (the policy's spawn limit, inside the bounds) |
/// | `tidepool_queue_length` | gauge | tasks waiting |
/// | `tidepool_process_cpu_utilization` | gauge | process CPU time over wall time × cores (0–1), where the OS tells |
/// | `tidepool_tasks_submitted_total`, `_completed_total`, `_rejected_total`, `_panicked_total` | counter | tasks |
/// | `tidepool_threads_created_total`, `_retired_total` | counter | workers started and retired |
/// | `tidepool_task_wait_seconds` | histogram | queue wait (accepted → started) |
/// | `tidepool_task_service_seconds` | histogram | run time (started → finished) |
/// | `tidepool_task_submit_blocked_seconds` | histogram | time a submitter was blocked |
///
/// Histograms get the tasks finished since the previous `publish`. Past
/// [`DEFAULT_MAX_SAMPLES`] of them, that many samples are spread over the
/// latency's buckets in proportion, each non-empty bucket keeping at least
/// one (so at most the budget plus the number of buckets: a busy pool
/// finishes millions of tasks between two scrapes, and a recorder keeps
/// every sample until it aggregates them):
/// their quantiles keep the distribution's shape; the exact counts are the
/// counters.
///
/// ```
/// use tidepool::{export::MetricsExporter, Pool};
///
/// let pool = Pool::builder().name("io").threads(2).build()?;
/// let mut exporter = MetricsExporter::new("io");
/// MetricsExporter::describe();
/// pool.submit(|| ())?.join()?;
/// exporter.publish(&pool.stats()); // to whichever recorder is installed
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct MetricsExporter {
    pool: SharedString,
    max_samples: usize,
    last: Option<PoolStats>,
}

impl MetricsExporter {
    /// An exporter whose metrics carry the label `pool="{pool}"`.
    pub fn new(pool: impl Into<String>) -> Self {
        MetricsExporter {
            pool: SharedString::from(pool.into()),
            max_samples: DEFAULT_MAX_SAMPLES,
            last: None,
        }
    }

    /// A budget of `n` histogram samples per latency per `publish` (at
    /// least 1; plus at most one per non-empty bucket, see above).
    pub fn max_samples(mut self, n: usize) -> Self {
        self.max_samples = n.max(1);
        self
    }

    /// Give the installed recorder every metric's unit and description
    /// (once, after installing it).
    pub fn describe() {
        for (name, what) in GAUGES {
            describe_gauge!(*name, Unit::Count, *what);
        }
        describe_gauge!(
            "tidepool_process_cpu_utilization",
            "Process CPU time over wall time times cores, 0 to 1"
        );
        for (name, what) in COUNTERS {
            describe_counter!(*name, Unit::Count, *what);
        }
        for (name, what) in HISTOGRAMS {
            describe_histogram!(*name, Unit::Seconds, *what);
        }
    }

    /// Publish `stats` (a snapshot from [`Pool::stats`](crate::Pool::stats)
    /// of this exporter's pool): gauges and counters are set to its values,
    /// histograms get the tasks finished since the previous call.
    pub fn publish(&mut self, stats: &PoolStats) {
        let label = [("pool", self.pool.clone())];
        let gauges = [
            stats.live_threads,
            stats.busy_threads,
            stats.idle_threads,
            stats.blocked_threads,
            stats.target_size,
            stats.min_threads,
            stats.max_threads,
            stats.spawn_limit,
            stats.queue_len,
        ];
        for ((name, _), value) in GAUGES.iter().zip(gauges) {
            gauge!(*name, &label).set(value as f64);
        }
        if let Some(u) = stats.process_cpu_utilization() {
            gauge!("tidepool_process_cpu_utilization", &label).set(u);
        }
        let counters = [
            stats.submitted,
            stats.completed,
            stats.rejected,
            stats.panicked,
            stats.threads_created,
            stats.threads_retired,
        ];
        for ((name, _), value) in COUNTERS.iter().zip(counters) {
            counter!(*name, &label).absolute(value);
        }
        let window = match &self.last {
            Some(last) => stats.since(last),
            None => stats.clone(),
        };
        let latencies = [&window.wait, &window.service, &window.submit_blocked];
        for ((name, _), latency) in HISTOGRAMS.iter().zip(latencies) {
            let h = histogram!(*name, &label);
            for (seconds, n) in thinned(latency, self.max_samples) {
                h.record_many(seconds, n);
            }
        }
        self.last = Some(stats.clone());
    }
}

/// Gauges in the order `publish` reads them.
const GAUGES: &[(&str, &str)] = &[
    ("tidepool_threads_live", "Worker threads alive"),
    ("tidepool_threads_busy", "Worker threads running a task"),
    ("tidepool_threads_idle", "Worker threads waiting for a task"),
    (
        "tidepool_threads_blocked",
        "Worker threads inside block_in_place: running a task, not available",
    ),
    (
        "tidepool_threads_target",
        "Pool size the sizing policy wants",
    ),
    ("tidepool_threads_min", "Fewest worker threads allowed"),
    ("tidepool_threads_max", "Most worker threads allowed"),
    (
        "tidepool_threads_spawn_limit",
        "Where on-demand growth stops now: the policy's spawn limit within the bounds",
    ),
    ("tidepool_queue_length", "Tasks waiting in the queue"),
];

/// Counters in the order `publish` reads them.
const COUNTERS: &[(&str, &str)] = &[
    ("tidepool_tasks_submitted_total", "Tasks accepted"),
    ("tidepool_tasks_completed_total", "Tasks finished"),
    ("tidepool_tasks_rejected_total", "Submissions refused"),
    ("tidepool_tasks_panicked_total", "Tasks that panicked"),
    ("tidepool_threads_created_total", "Worker threads started"),
    ("tidepool_threads_retired_total", "Worker threads retired"),
];

/// Histograms in the order `publish` reads them.
const HISTOGRAMS: &[(&str, &str)] = &[
    (
        "tidepool_task_wait_seconds",
        "Time tasks waited in the queue",
    ),
    ("tidepool_task_service_seconds", "Time tasks ran"),
    (
        "tidepool_task_submit_blocked_seconds",
        "Time submitters were blocked",
    ),
];

/// `(seconds, samples)` per bucket of `latency`, scaled down in proportion
/// so that they add up to `max`, give or take rounding, plus at most one per
/// bucket (a bucket keeps at least one sample, so small tails stay visible).
fn thinned(latency: &Latency, max: usize) -> impl Iterator<Item = (f64, usize)> + '_ {
    let total = latency.count();
    let scale = if total as usize > max {
        max as f64 / total as f64
    } else {
        1.0
    };
    latency.buckets().map(move |b| {
        let n = ((b.count as f64 * scale).round() as usize).max(1);
        (b.upper.as_secs_f64(), n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_small_windows_whole_and_bounds_large_ones() {
        let mut small = Latency::default();
        small.record_n(1_000, 10);
        small.record_n(1_000_000, 5);
        let kept: Vec<_> = thinned(&small, 100).collect();
        assert_eq!(kept.iter().map(|&(_, n)| n).sum::<usize>(), 15);

        let mut big = Latency::default();
        big.record_n(1_000, 900_000);
        big.record_n(1_000_000, 100_000);
        big.record_n(1_000_000_000, 1);
        let kept: Vec<_> = thinned(&big, 1000).collect();
        let counts: Vec<usize> = kept.iter().map(|&(_, n)| n).collect();
        assert_eq!(counts, [900, 100, 1], "shape kept, rare tail kept");
        assert!((kept[1].0 - 1e-3).abs() < 1e-5);
    }
}
