//! A snapshot of a pool's statistics, and windows between two snapshots.

use std::time::Duration;

use super::latency::Latency;

/// A snapshot of a pool: gauges (threads, queue) at the moment it was taken,
/// and counters and latency distributions since the pool started — or, for a
/// window made with [`since`](PoolStats::since), since the earlier snapshot.
///
/// Task latencies: *submit blocked* is the time a submitter was blocked in
/// `submit` (submitted → accepted; Xu & Bode's "response time"), *wait* the
/// time in the queue (their "idle time", accepted → started), *service* the
/// execution (started → finished).
/// Every task is timed, except when tasks run for less than a microsecond:
/// then one in 64 is timed (the clock reads would cost more than the tasks),
/// so the latency distributions are an unbiased sample and `completed` stays
/// exact. With statistics off, counters of tasks and latencies stay empty;
/// thread counters and gauges are always kept.
///
/// The fields are read one after another, not frozen together: a worker
/// that retires while the snapshot is taken can show in `live_threads` and
/// in `threads_retired` (or in neither), and a thread being spawned is
/// live before it counts in `threads_created`.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct PoolStats {
    /// Time since the pool started (or the window's length).
    pub elapsed: Duration,
    /// Worker threads alive.
    pub live_threads: usize,
    /// Workers running a task (or about to), not counting blocked ones.
    pub busy_threads: usize,
    /// Workers waiting for a task (parked or spinning).
    pub idle_threads: usize,
    /// Workers inside [`block_in_place`](crate::block_in_place): running
    /// a task but not available (`busy + idle + blocked = live`).
    pub blocked_threads: usize,
    /// Workers in their start hook ([`on_thread_start`]) or running their
    /// first task: a new thread's start carries its setup (such as opening
    /// a database connection), so it says little of what the size serves.
    ///
    /// [`on_thread_start`]: crate::Builder::on_thread_start
    #[cfg_attr(feature = "serde", serde(default))]
    pub starting_threads: usize,
    /// The target size set by `resize` or the policy.
    pub target_size: usize,
    /// The user's lower bound on the pool size.
    pub min_threads: usize,
    /// The user's upper bound on the pool size.
    pub max_threads: usize,
    /// Where on-demand growth stops now: the policy's spawn limit inside
    /// `min_threads..=max_threads` (`max_threads` if it set none).
    pub spawn_limit: usize,
    /// Tasks waiting in the queue.
    pub queue_len: usize,
    /// Tasks accepted into the queue.
    pub submitted: u64,
    /// Tasks that finished (including those that panicked).
    pub completed: u64,
    /// Tasks refused because the queue was full.
    pub rejected: u64,
    /// Tasks that panicked.
    pub panicked: u64,
    /// Tasks dropped unrun because their deadline passed while queued.
    pub expired: u64,
    /// Tasks dropped unrun because their cancel token was cancelled.
    pub cancelled: u64,
    /// Worker threads created.
    pub threads_created: u64,
    /// Worker threads that retired.
    pub threads_retired: u64,
    /// Workers the pool wanted (to grow by `resize`, a policy or on demand)
    /// but the OS refused to create: the pool ran with fewer threads.
    pub spawn_failures: u64,
    /// Decision records dropped from the log to keep it at the builder's
    /// `history_len`.
    pub decisions_dropped: u64,
    /// Queue wait of started tasks (the papers' idle time).
    pub wait: Latency,
    /// Execution time of finished tasks.
    pub service: Latency,
    /// Time the submitters of finished tasks were blocked in `submit`
    /// (submitted → accepted; the papers' "response time").
    pub submit_blocked: Latency,
    /// CPU time used by the whole process (since it started, or in the window).
    pub process_cpu_time: Option<Duration>,
    /// CPU time used by this pool's worker threads (with statistics on;
    /// `None` where the OS cannot tell, see [`crate::sys::SUPPORT`]).
    pub worker_cpu_time: Option<Duration>,
    /// Time this pool's workers were runnable but waiting for a CPU (Linux
    /// scheduler statistics; with statistics on; `None` elsewhere).
    pub worker_run_delay: Option<Duration>,
    /// CPU time of every core of the machine (all processes) that was not
    /// idle, and all of it: over a window, their ratio is how busy the
    /// machine was ([`crate::sys::machine_cpu_time`]; `None` elsewhere).
    pub machine_cpu_time: Option<(Duration, Duration)>,
    /// The system's 1/5/15-minute load averages when the snapshot was taken.
    pub load_average: Option<[f64; 3]>,
    /// Logical CPUs available.
    pub cores: usize,
    /// Thread CPU time of a sample of tasks, measured around each task (the
    /// first 16 timed tasks of each worker, then one in 16 of tasks of 100 µs
    /// or more and one in 256 of shorter ones).
    pub sampled_task_cpu: Duration,
    /// Execution time of the same sample, less the time tasks of 100 µs or
    /// more spent preempted (runnable, waiting for a core): `sampled_task_cpu`
    /// over it is the tasks' own compute share, untouched by spinning, idle
    /// wake-ups or waiting for a core.
    pub sampled_task_time: Duration,
    /// How many tasks that sample holds.
    pub sampled_tasks: u64,
}

impl PoolStats {
    /// Completed tasks per second (thesis: completed / total execution time).
    pub fn throughput(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.completed as f64 / secs
        } else {
            0.0
        }
    }

    /// Average queue wait: Xu & Bode's AIT.
    pub fn mean_wait(&self) -> Option<Duration> {
        self.wait.mean()
    }

    /// Average execution time.
    pub fn mean_service(&self) -> Option<Duration> {
        self.service.mean()
    }

    /// Average submission latency.
    pub fn mean_submit_blocked(&self) -> Option<Duration> {
        self.submit_blocked.mean()
    }

    /// How long workers were busy running tasks: mean execution time ×
    /// completed tasks (exact when every task is timed; an estimate from the
    /// timed sample when tasks are too short to time each one).
    pub fn busy_time(&self) -> Duration {
        match self.service.mean() {
            Some(mean) => mean.mul_f64(self.completed as f64),
            None => Duration::ZERO,
        }
    }

    /// Process CPU utilisation in `0.0..=1.0` of all cores over `elapsed`.
    pub fn process_cpu_utilization(&self) -> Option<f64> {
        let cpu = self.process_cpu_time?.as_secs_f64();
        let wall = self.elapsed.as_secs_f64() * self.cores.max(1) as f64;
        (wall > 0.0).then(|| (cpu / wall).clamp(0.0, 1.0))
    }

    /// The window from `earlier` to `self`: counters, latencies and CPU time are
    /// differences; gauges are `self`'s.
    pub fn since(&self, earlier: &PoolStats) -> PoolStats {
        PoolStats {
            elapsed: self.elapsed.saturating_sub(earlier.elapsed),
            submitted: self.submitted.saturating_sub(earlier.submitted),
            completed: self.completed.saturating_sub(earlier.completed),
            rejected: self.rejected.saturating_sub(earlier.rejected),
            panicked: self.panicked.saturating_sub(earlier.panicked),
            expired: self.expired.saturating_sub(earlier.expired),
            cancelled: self.cancelled.saturating_sub(earlier.cancelled),
            threads_created: self.threads_created.saturating_sub(earlier.threads_created),
            threads_retired: self.threads_retired.saturating_sub(earlier.threads_retired),
            spawn_failures: self.spawn_failures.saturating_sub(earlier.spawn_failures),
            decisions_dropped: self
                .decisions_dropped
                .saturating_sub(earlier.decisions_dropped),
            wait: self.wait.since(&earlier.wait),
            service: self.service.since(&earlier.service),
            submit_blocked: self.submit_blocked.since(&earlier.submit_blocked),
            process_cpu_time: diff(self.process_cpu_time, earlier.process_cpu_time),
            worker_cpu_time: diff(self.worker_cpu_time, earlier.worker_cpu_time),
            worker_run_delay: diff(self.worker_run_delay, earlier.worker_run_delay),
            machine_cpu_time: self.machine_cpu_time.zip(earlier.machine_cpu_time).map(
                |((busy, total), (busy0, total0))| {
                    (busy.saturating_sub(busy0), total.saturating_sub(total0))
                },
            ),
            sampled_task_cpu: self
                .sampled_task_cpu
                .saturating_sub(earlier.sampled_task_cpu),
            sampled_task_time: self
                .sampled_task_time
                .saturating_sub(earlier.sampled_task_time),
            sampled_tasks: self.sampled_tasks.saturating_sub(earlier.sampled_tasks),
            ..self.clone()
        }
    }
}

fn diff(later: Option<Duration>, earlier: Option<Duration>) -> Option<Duration> {
    Some(later?.saturating_sub(earlier?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_and_windows() {
        let mut a = PoolStats {
            elapsed: Duration::from_secs(1),
            completed: 100,
            submitted: 120,
            cores: 2,
            process_cpu_time: Some(Duration::from_millis(500)),
            ..PoolStats::default()
        };
        a.wait.record(1_000);
        let mut b = a.clone();
        b.elapsed = Duration::from_secs(3);
        b.completed = 500;
        b.process_cpu_time = Some(Duration::from_millis(2500));
        b.wait.record(3_000);
        b.live_threads = 7;
        assert_eq!(a.throughput(), 100.0);
        let w = b.since(&a);
        assert_eq!(w.elapsed, Duration::from_secs(2));
        assert_eq!(w.completed, 400);
        assert_eq!(w.submitted, 0);
        assert_eq!(w.throughput(), 200.0);
        assert_eq!(w.mean_wait(), Some(Duration::from_nanos(3_000)));
        assert_eq!(w.live_threads, 7);
        assert_eq!(w.process_cpu_utilization(), Some(0.5));
        assert_eq!(PoolStats::default().throughput(), 0.0);
    }
}
