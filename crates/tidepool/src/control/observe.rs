//! The policy's view of one window: an [`Observation`] from two statistics
//! snapshots, the pool's (or a simulator's) state now and the window since
//! the policy's previous call.

use crate::metrics::PoolStats;
use crate::policy::{Observation, Trigger};

/// The observation of a call for `trigger`: gauges (threads, queue, bounds)
/// from `now`, counts, means and CPU times from `window` (see
/// [`PoolStats::since`]).
///
/// ```
/// # #[cfg(feature = "sim-hooks")] {
/// use std::time::Duration;
/// use tidepool::control::observation;
/// use tidepool::policy::Trigger;
/// use tidepool::PoolStats;
///
/// // PoolStats is non_exhaustive: set fields on a default.
/// let mut now = PoolStats::default();
/// (now.elapsed, now.live_threads) = (Duration::from_secs(3), 4);
/// let mut window = PoolStats::default();
/// (window.elapsed, window.submitted) = (Duration::from_secs(1), 10);
/// let obs = observation(Trigger::Tick, &now, &window);
/// assert_eq!((obs.now, obs.window, obs.live), (now.elapsed, window.elapsed, 4));
/// assert_eq!(obs.mean_interarrival, Some(Duration::from_millis(100)));
/// # }
/// ```
pub fn observation(trigger: Trigger, now: &PoolStats, window: &PoolStats) -> Observation {
    let w = window;
    Observation {
        trigger,
        now: now.elapsed,
        window: w.elapsed,
        arrivals: w.submitted,
        completions: w.completed,
        mean_wait: w.wait.mean(),
        p99_wait: w.wait.quantile(0.99),
        mean_service: w.service.mean(),
        mean_interarrival: (w.submitted > 0)
            .then(|| w.elapsed / w.submitted.min(u32::MAX as u64) as u32),
        queue_len: now.queue_len,
        live: now.live_threads,
        busy: now.busy_threads,
        idle: now.idle_threads,
        blocked: now.blocked_threads,
        starting: now.starting_threads,
        target: now.target_size,
        min: now.min_threads,
        max: now.max_threads,
        threads_created: w.threads_created,
        threads_retired: w.threads_retired,
        busy_time: w.busy_time(),
        worker_cpu_time: w.worker_cpu_time,
        run_delay: w.worker_run_delay,
        sampled_task_cpu: w.sampled_task_cpu,
        sampled_task_time: w.sampled_task_time,
        sampled_tasks: w.sampled_tasks,
        cores: now.cores,
        in_flight: usize::try_from(now.submitted.saturating_sub(now.completed))
            .unwrap_or(usize::MAX),
        machine_busy: w.machine_cpu_time.and_then(|(busy, total)| {
            (!total.is_zero()).then(|| (busy.as_secs_f64() / total.as_secs_f64()).clamp(0.0, 1.0))
        }),
    }
}
