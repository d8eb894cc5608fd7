//! Policies against the oracle: the ratios of each policy's run to the best
//! static size's (the oracle), the per-policy geometric means across
//! workloads, the medians over repeats ([`repeats`]) and the quality bar
//! ([`bar`]). The CLI renders these; the simulator and the benchmarks
//! compute with the same code.

pub mod bar;
pub mod repeats;
pub mod verdict;

pub use bar::{BarCell, BarGrid, Goals};
pub use repeats::{
    median, median_headline, summarize_repeats, MedianComparison, OracleMedian, PolicyMedian,
    Spread, SummarySpread, WorkloadMedian,
};

use crate::analysis::SweepAnalysis;
use crate::result::RunResult;
use crate::sweep::SizedRun;
use crate::trace::TraceStats;
use serde::{Deserialize, Serialize};

/// The headline numbers of one run, shared by the oracle's row and each
/// policy's row (flattened into both in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// Completed tasks per second.
    pub throughput: f64,
    /// Mean wait (AIT), µs.
    pub mean_wait_us: f64,
    /// 99th percentile wait, µs.
    pub p99_wait_us: f64,
    /// Mean submission latency, µs.
    pub mean_submit_blocked_us: f64,
    /// 99th percentile submission latency, µs.
    pub p99_submit_blocked_us: f64,
    /// Mean turnaround, µs.
    pub mean_turnaround_us: f64,
    /// 99th percentile turnaround, µs.
    pub p99_turnaround_us: f64,
    /// Threads created during the run.
    pub threads_created: u64,
    /// Mean live threads (sampled every 1 ms).
    pub avg_threads: f64,
}

impl Headline {
    /// The headline numbers of a run.
    pub fn from_run(r: &RunResult) -> Headline {
        Headline {
            throughput: r.throughput,
            mean_wait_us: r.mean_wait_us,
            p99_wait_us: r.p99_wait_us,
            mean_submit_blocked_us: r.mean_submit_blocked_us,
            p99_submit_blocked_us: r.p99_submit_blocked_us,
            mean_turnaround_us: r.mean_turnaround_us,
            p99_turnaround_us: r.p99_turnaround_us,
            threads_created: r.threads_created,
            avg_threads: r.avg_threads,
        }
    }
}

/// The best static pool size of the sweep and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OracleRow {
    /// Pool size.
    pub size: usize,
    /// What it measured.
    #[serde(flatten)]
    pub headline: Headline,
}

impl OracleRow {
    /// The oracle row of a run at a static `size`.
    pub fn from_run(size: usize, r: &RunResult) -> OracleRow {
        OracleRow {
            size,
            headline: Headline::from_run(r),
        }
    }
}

/// One policy's measurements on one workload, and its ratios to the oracle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyRow {
    /// Canonical policy spec.
    pub policy: String,
    /// What it measured.
    #[serde(flatten)]
    pub headline: Headline,
    /// Most live threads.
    pub max_threads: usize,
    /// Process CPU use over the run, fraction of all cores.
    pub process_cpu_utilization: f64,
    /// Tasks completed.
    pub completed: u64,
    /// True when the run stopped early (Ctrl-C or drain timeout).
    pub cancelled: bool,
    /// `throughput / oracle throughput` (higher is better; 1 = as good).
    pub throughput_vs_oracle: Option<f64>,
    /// `mean turnaround / oracle mean turnaround` (lower is better).
    pub turnaround_vs_oracle: Option<f64>,
    /// `p99 wait / oracle p99 wait`, both floored at 1 µs (lower is better).
    pub p99_wait_vs_oracle: Option<f64>,
    /// `p99 turnaround / oracle p99 turnaround`, both floored at 1 µs (lower
    /// is better). Unlike the wait, it also counts how long the task then
    /// ran: an oversubscribed pool starts tasks early but runs them slower.
    pub p99_turnaround_vs_oracle: Option<f64>,
}

/// p99 waits are floored at this many µs before taking their ratio, so that
/// an oracle that (almost) never queues does not make every ratio explode.
pub const P99_WAIT_FLOOR_US: f64 = 1.0;

/// p99 turnarounds are floored at this many µs before taking their ratio,
/// like p99 waits ([`P99_WAIT_FLOOR_US`]).
pub const P99_TURNAROUND_FLOOR_US: f64 = 1.0;

fn ratio(a: f64, b: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && b > 0.0).then(|| a / b)
}

/// `a / b` with both floored at `floor` first.
fn floored_ratio(a: f64, b: f64, floor: f64) -> Option<f64> {
    ratio(a.max(floor), b.max(floor))
}

impl PolicyRow {
    /// The row of a run, with ratios to `oracle` when there is one.
    pub fn from_run(r: &RunResult, oracle: Option<&OracleRow>) -> PolicyRow {
        PolicyRow {
            policy: r.executor.clone(),
            headline: Headline::from_run(r),
            max_threads: r.max_threads,
            process_cpu_utilization: r.process_cpu_utilization,
            completed: r.completed,
            cancelled: r.cancelled,
            throughput_vs_oracle: oracle.and_then(|o| ratio(r.throughput, o.headline.throughput)),
            turnaround_vs_oracle: oracle
                .and_then(|o| ratio(r.mean_turnaround_us, o.headline.mean_turnaround_us)),
            p99_wait_vs_oracle: oracle.and_then(|o| {
                floored_ratio(r.p99_wait_us, o.headline.p99_wait_us, P99_WAIT_FLOOR_US)
            }),
            p99_turnaround_vs_oracle: oracle.and_then(|o| {
                floored_ratio(
                    r.p99_turnaround_us,
                    o.headline.p99_turnaround_us,
                    P99_TURNAROUND_FLOOR_US,
                )
            }),
        }
    }
}

/// Everything measured on one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadRuns {
    /// Workload label.
    pub workload: String,
    /// Summary numbers of the trace.
    pub trace: TraceStats,
    /// The static-size sweep, in size order.
    pub sweep: Vec<SizedRun>,
    /// The sweep's analysis (`None` when nothing completed).
    pub analysis: Option<SweepAnalysis>,
    /// One run per policy, in the order asked.
    pub policies: Vec<RunResult>,
}

impl WorkloadRuns {
    /// The oracle's run, if the sweep found one.
    pub fn oracle_run(&self) -> Option<&SizedRun> {
        let size = self.analysis.as_ref()?.oracle_size;
        self.sweep.iter().find(|r| r.size == size)
    }
}

/// The comparison on one workload: `compare --json` with one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadComparison {
    /// Workload label.
    pub workload: String,
    /// Tasks in the trace.
    pub tasks: usize,
    /// The best static size (`None` when the sweep measured nothing).
    pub oracle: Option<OracleRow>,
    /// One row per policy.
    pub policies: Vec<PolicyRow>,
    /// The sweep's analysis: rows, stable point, degradation point, safe zone.
    pub sweep: Option<SweepAnalysis>,
}

impl WorkloadComparison {
    /// Build from the runs.
    pub fn from_runs(w: &WorkloadRuns) -> WorkloadComparison {
        let oracle = w
            .oracle_run()
            .map(|r| OracleRow::from_run(r.size, &r.result));
        WorkloadComparison {
            workload: w.workload.clone(),
            tasks: w.trace.tasks,
            policies: w
                .policies
                .iter()
                .map(|r| PolicyRow::from_run(r, oracle.as_ref()))
                .collect(),
            oracle,
            sweep: w.analysis.clone(),
        }
    }
}

/// One policy across workloads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// Canonical policy spec.
    pub policy: String,
    /// Workloads with a ratio to the oracle.
    pub workloads: usize,
    /// Geometric mean of `throughput_vs_oracle` (higher is better).
    pub geomean_throughput_vs_oracle: Option<f64>,
    /// Geometric mean of `turnaround_vs_oracle` (lower is better).
    pub geomean_turnaround_vs_oracle: Option<f64>,
    /// Geometric mean of p99 wait over the oracle's, with both floored at
    /// 1 µs (lower is better).
    pub geomean_p99_wait_vs_oracle: Option<f64>,
    /// Geometric mean of p99 turnaround over the oracle's, with both floored
    /// at 1 µs (lower is better).
    pub geomean_p99_turnaround_vs_oracle: Option<f64>,
    /// Threads created, summed over workloads.
    pub threads_created: u64,
    /// Mean of the average live threads over workloads.
    pub avg_threads: f64,
}

/// `compare --json` with several workloads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteComparison {
    /// One comparison per workload.
    pub workloads: Vec<WorkloadComparison>,
    /// One row per policy, across workloads.
    pub summary: Vec<SummaryRow>,
    /// True when stopped by Ctrl-C (some runs missing).
    pub cancelled: bool,
}

impl SuiteComparison {
    /// The comparison of one run of the plan; `cancelled` when it was cut
    /// short by Ctrl-C.
    pub fn from_runs(runs: &[WorkloadRuns], cancelled: bool) -> SuiteComparison {
        let workloads: Vec<WorkloadComparison> =
            runs.iter().map(WorkloadComparison::from_runs).collect();
        SuiteComparison {
            summary: summarize(&workloads),
            workloads,
            cancelled,
        }
    }
}

/// Geometric mean of the positive finite values; `None` when there is none.
pub fn geomean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for v in values {
        if v.is_finite() && v > 0.0 {
            sum += v.ln();
            n += 1;
        }
    }
    (n > 0).then(|| (sum / n as f64).exp())
}

/// Per-policy geometric means over the workloads, policies in first-seen order.
pub fn summarize(comps: &[WorkloadComparison]) -> Vec<SummaryRow> {
    let mut names: Vec<String> = Vec::new();
    for c in comps {
        for p in &c.policies {
            if !names.contains(&p.policy) {
                names.push(p.policy.clone());
            }
        }
    }
    names
        .into_iter()
        .map(|name| {
            let rows: Vec<&PolicyRow> = comps
                .iter()
                .flat_map(|c| c.policies.iter().filter(|p| p.policy == name))
                .collect();
            let n = rows.len().max(1) as f64;
            SummaryRow {
                workloads: rows
                    .iter()
                    .filter(|p| p.throughput_vs_oracle.is_some())
                    .count(),
                geomean_throughput_vs_oracle: geomean(
                    rows.iter().filter_map(|p| p.throughput_vs_oracle),
                ),
                geomean_turnaround_vs_oracle: geomean(
                    rows.iter().filter_map(|p| p.turnaround_vs_oracle),
                ),
                geomean_p99_wait_vs_oracle: geomean(
                    rows.iter().filter_map(|p| p.p99_wait_vs_oracle),
                ),
                geomean_p99_turnaround_vs_oracle: geomean(
                    rows.iter().filter_map(|p| p.p99_turnaround_vs_oracle),
                ),
                threads_created: rows.iter().map(|p| p.headline.threads_created).sum(),
                avg_threads: rows.iter().map(|p| p.headline.avg_threads).sum::<f64>() / n,
                policy: name,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, tput: f64, turn: f64) -> RunResult {
        RunResult {
            executor: name.into(),
            throughput: tput,
            mean_turnaround_us: turn,
            p99_turnaround_us: 2.0 * turn,
            p99_wait_us: 10.0,
            ..RunResult::default()
        }
    }

    #[test]
    fn geometric_means() {
        assert_eq!(geomean([]), None);
        assert!((geomean([2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert!((geomean([1.0, f64::NAN, 0.0, 1.0]).unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn ratios_to_the_oracle_and_their_geomeans() {
        let oracle = OracleRow::from_run(4, &run("fixed:4", 100.0, 50.0));
        let c = |tput_auto: f64| WorkloadComparison {
            workload: "w".into(),
            tasks: 10,
            oracle: Some(oracle.clone()),
            policies: vec![
                PolicyRow::from_run(&run("auto", tput_auto, 100.0), Some(&oracle)),
                PolicyRow::from_run(&run("tpr", 50.0, 200.0), Some(&oracle)),
            ],
            sweep: None,
        };
        let comps = [c(100.0), c(25.0)];
        assert_eq!(comps[0].policies[0].throughput_vs_oracle, Some(1.0));
        assert_eq!(comps[0].policies[1].turnaround_vs_oracle, Some(4.0));
        assert_eq!(comps[0].policies[0].p99_turnaround_vs_oracle, Some(2.0));
        let s = summarize(&comps);
        assert_eq!((s[0].policy.as_str(), s[0].workloads), ("auto", 2));
        assert!((s[0].geomean_throughput_vs_oracle.unwrap() - 0.5).abs() < 1e-12);
        assert!((s[1].geomean_turnaround_vs_oracle.unwrap() - 4.0).abs() < 1e-12);
        assert!((s[1].geomean_p99_turnaround_vs_oracle.unwrap() - 4.0).abs() < 1e-12);
    }

    #[test]
    fn no_oracle_means_no_ratio() {
        let r = PolicyRow::from_run(&run("auto", 10.0, 1.0), None);
        assert_eq!(r.throughput_vs_oracle, None);
        assert_eq!(r.p99_wait_vs_oracle, None);
        assert_eq!(r.p99_turnaround_vs_oracle, None);
        let s = summarize(&[WorkloadComparison {
            workload: "w".into(),
            tasks: 1,
            oracle: None,
            policies: vec![r],
            sweep: None,
        }]);
        assert_eq!(s[0].geomean_p99_turnaround_vs_oracle, None);
    }
}
