//! The result of one replay run: what the CLI prints as JSON. Field names are
//! stable and documented in `docs/metrics.md`.

use serde::{Deserialize, Serialize};

use crate::metrics::{LatencySummary, SizePoint, TaskRecord};

/// One decision of a sizing policy, as logged by the pool. [`crate::replay_pool`]
/// fills these in; with another executor, build them with
/// [`DecisionEntry::from_record`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DecisionEntry {
    /// Milliseconds since the start of the replay (negative: before it).
    pub t_ms: f64,
    /// Why the policy was called (`start`, `tick`, `starved`, …).
    pub trigger: String,
    /// Target size before the decision.
    pub old_target: usize,
    /// Target size after the decision.
    pub new_target: usize,
    /// The policy's explanation.
    pub reason: String,
}

impl DecisionEntry {
    /// One decision at `t_ms` (e.g. from the simulator, which has no
    /// [`tidepool::DecisionRecord`]); `trigger` as [`DecisionEntry::trigger`].
    pub fn new(
        t_ms: f64,
        trigger: impl Into<String>,
        old_target: usize,
        new_target: usize,
        reason: impl Into<String>,
    ) -> Self {
        DecisionEntry {
            t_ms,
            trigger: trigger.into(),
            old_target,
            new_target,
            reason: reason.into(),
        }
    }

    /// Convert a pool decision; `offset` is the pool's age when the replay
    /// started, so `t_ms` lines up with the size trajectory.
    pub fn from_record(d: &tidepool::DecisionRecord, offset: std::time::Duration) -> Self {
        DecisionEntry {
            t_ms: (d.at.as_secs_f64() - offset.as_secs_f64()) * 1e3,
            trigger: format!("{:?}", d.trigger).to_lowercase(),
            old_target: d.old_target,
            new_target: d.new_target,
            reason: d.reason.clone(),
        }
    }
}

/// Everything measured in one replay of a trace against one executor.
///
/// The flat fields `throughput`, `mean_wait_us`, `p99_wait_us`,
/// `p99_submit_blocked_us`, `threads_created` and `avg_threads` are the ones
/// `compare --json` needs per policy; the summaries carry the full
/// distributions. The submit-blocked fields keep the thesis's name in JSON
/// (`response`, `mean_response_us`, `p99_response_us`): the simulator's
/// checked-in agreement fixtures and golden results are written with it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunResult {
    /// The executor's name (`tpr`, `tidepool`, a policy name, …).
    pub executor: String,
    /// The trace's name (file, generator spec or suite entry).
    pub workload: String,
    /// Tasks in the trace.
    pub tasks: usize,
    /// Tasks submitted (fewer than `tasks` when cancelled).
    pub submitted: u64,
    /// Tasks the executor accepted.
    pub accepted: u64,
    /// Tasks the executor rejected.
    pub rejected: u64,
    /// Tasks that finished.
    pub completed: u64,
    /// True when the run stopped early on the cancel flag (or drain timeout).
    pub cancelled: bool,
    /// From the first submission to the last completion, seconds.
    pub duration_s: f64,
    /// Completed tasks per second (`completed / duration_s`).
    pub throughput: f64,
    /// Mean time in queue, µs: Xu & Bode's average idle time (AIT).
    pub mean_wait_us: f64,
    /// 99th percentile of the time in queue, µs.
    pub p99_wait_us: f64,
    /// Mean submission latency, µs.
    #[serde(rename = "mean_response_us")]
    pub mean_submit_blocked_us: f64,
    /// 99th percentile of the submission latency, µs.
    #[serde(rename = "p99_response_us")]
    pub p99_submit_blocked_us: f64,
    /// Mean turnaround (submission to completion), µs.
    pub mean_turnaround_us: f64,
    /// 99th percentile of the turnaround, µs.
    pub p99_turnaround_us: f64,
    /// Submission latency distribution (the thesis's response time).
    #[serde(rename = "response")]
    pub submit_blocked: LatencySummary,
    /// Time-in-queue distribution (the thesis's idle time).
    pub wait: LatencySummary,
    /// Processing (running) time distribution.
    pub processing: LatencySummary,
    /// Turnaround distribution.
    pub turnaround: LatencySummary,
    /// How late the driver dispatched arrivals relative to the trace.
    pub lateness: LatencySummary,
    /// Process CPU time over the run, seconds (includes the driver).
    #[serde(rename = "cpu_time_s")]
    pub process_cpu_time_s: f64,
    /// `process_cpu_time_s / wall time / cores`, 0–1.
    #[serde(rename = "cpu_utilisation")]
    pub process_cpu_utilization: f64,
    /// Cores available to the process.
    pub cores: usize,
    /// 1-, 5-, 15-minute load averages at the end of the run.
    pub load_average: Option<[f64; 3]>,
    /// Threads the executor created during the run.
    pub threads_created: u64,
    /// Mean live threads, sampled every 1 ms (Oh & Kim's threads kept).
    pub avg_threads: f64,
    /// Most live threads seen.
    pub max_threads: usize,
    /// Mean queue length over the samples.
    pub avg_queue: f64,
    /// Longest queue seen.
    pub max_queue: usize,
    /// Interval of the thread samples, ms.
    pub sample_interval_ms: f64,
    /// Pool-size trajectory: change points of the live count / target.
    pub size_series: Vec<SizePoint>,
    /// The sizing policy's decision log, when the caller attached one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<DecisionEntry>,
    /// Per-task records, when the replay kept them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<TaskRecord>,
}

impl RunResult {
    /// Xu & Bode's average idle time, µs (same as `mean_wait_us`).
    pub fn ait_us(&self) -> f64 {
        self.mean_wait_us
    }
}
