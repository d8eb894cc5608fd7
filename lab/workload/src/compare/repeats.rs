//! Several repeats of a comparison: the median over repeats of every
//! number, the min–max of every ratio to the oracle, per workload and
//! policy, and of the per-repeat geometric means across workloads.
//!
//! Every repeat runs the whole plan, finds its own oracle, and computes its
//! ratios against that oracle; only then are repeats combined. A ratio's
//! median is therefore the median of per-repeat ratios, not the ratio of two
//! medians.

use serde::{Deserialize, Serialize};

use super::{Headline, SuiteComparison};

pub use crate::median::median;

/// Median, minimum and maximum of one quantity over repeats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Median over the repeats.
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of the finite values; `None` when there is none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        Some(Spread {
            median: median(v.iter().copied())?,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}
/// The median of each headline number. `threads_created` is rounded to a
/// whole number (an even count of repeats can put it half-way).
pub fn median_headline(hs: &[&Headline]) -> Headline {
    let m = |f: fn(&Headline) -> f64| median(hs.iter().map(|h| f(h))).unwrap_or(f64::NAN);
    Headline {
        throughput: m(|h| h.throughput),
        mean_wait_us: m(|h| h.mean_wait_us),
        p99_wait_us: m(|h| h.p99_wait_us),
        mean_submit_blocked_us: m(|h| h.mean_submit_blocked_us),
        p99_submit_blocked_us: m(|h| h.p99_submit_blocked_us),
        mean_turnaround_us: m(|h| h.mean_turnaround_us),
        p99_turnaround_us: m(|h| h.p99_turnaround_us),
        threads_created: median(hs.iter().map(|h| h.threads_created as f64))
            .map_or(0, |v| v.round() as u64),
        avg_threads: m(|h| h.avg_threads),
    }
}

/// The oracle of one workload over repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OracleMedian {
    /// The oracle's static size in each repeat that found one, in order.
    pub sizes: Vec<usize>,
    /// Medians of what the oracles measured.
    #[serde(flatten)]
    pub headline: Headline,
}

/// One policy on one workload over repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyMedian {
    /// Canonical policy spec.
    pub policy: String,
    /// Repeats that ran this policy on this workload.
    pub repeats: usize,
    /// Repeats in which the run stopped early (Ctrl-C or drain timeout).
    pub stopped: usize,
    /// Medians of what it measured.
    #[serde(flatten)]
    pub headline: Headline,
    /// Throughput vs that repeat's oracle: median, min, max.
    pub throughput_vs_oracle: Option<Spread>,
    /// Mean turnaround vs that repeat's oracle.
    pub turnaround_vs_oracle: Option<Spread>,
    /// p99 wait vs that repeat's oracle (both floored at 1 µs).
    pub p99_wait_vs_oracle: Option<Spread>,
    /// p99 turnaround vs that repeat's oracle (both floored at 1 µs).
    pub p99_turnaround_vs_oracle: Option<Spread>,
}

/// One workload over repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadMedian {
    /// Workload label.
    pub workload: String,
    /// Tasks in the trace.
    pub tasks: usize,
    /// The oracles (`None` when no repeat's sweep measured anything).
    pub oracle: Option<OracleMedian>,
    /// One row per policy, in the order asked.
    pub policies: Vec<PolicyMedian>,
}

/// One policy's geometric means across workloads, computed in each repeat,
/// over repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummarySpread {
    /// Canonical policy spec.
    pub policy: String,
    /// Repeats with a summary row for this policy.
    pub repeats: usize,
    /// Workloads with a ratio to the oracle (the fewest over repeats).
    pub workloads: usize,
    /// Per-repeat geometric mean of throughput vs oracle.
    pub geomean_throughput_vs_oracle: Option<Spread>,
    /// Per-repeat geometric mean of turnaround vs oracle.
    pub geomean_turnaround_vs_oracle: Option<Spread>,
    /// Per-repeat geometric mean of p99 wait vs oracle.
    pub geomean_p99_wait_vs_oracle: Option<Spread>,
    /// Per-repeat geometric mean of p99 turnaround vs oracle.
    pub geomean_p99_turnaround_vs_oracle: Option<Spread>,
    /// Threads created, summed over workloads in each repeat.
    pub threads_created: Option<Spread>,
    /// Mean of the average live threads over workloads in each repeat.
    pub avg_threads: Option<Spread>,
}

/// The `median` section: every workload and the summary, over repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MedianComparison {
    /// Repeats combined.
    pub repeats: usize,
    /// One entry per workload, in the order run.
    pub workloads: Vec<WorkloadMedian>,
    /// One row per policy (empty with a single workload).
    pub summary: Vec<SummarySpread>,
}

impl MedianComparison {
    /// Combine repeats of the same plan. Workloads, and policies within a
    /// workload, are matched by position (every repeat runs the same plan in
    /// the same order); summary rows by policy name.
    pub fn of(repeats: &[SuiteComparison]) -> MedianComparison {
        let n_workloads = repeats.iter().map(|r| r.workloads.len()).max().unwrap_or(0);
        let workloads = (0..n_workloads)
            .map(|i| {
                let comps: Vec<_> = repeats.iter().filter_map(|r| r.workloads.get(i)).collect();
                let oracles: Vec<_> = comps.iter().filter_map(|c| c.oracle.as_ref()).collect();
                let n_policies = comps.iter().map(|c| c.policies.len()).max().unwrap_or(0);
                WorkloadMedian {
                    workload: comps[0].workload.clone(),
                    tasks: comps[0].tasks,
                    oracle: (!oracles.is_empty()).then(|| OracleMedian {
                        sizes: oracles.iter().map(|o| o.size).collect(),
                        headline: median_headline(
                            &oracles.iter().map(|o| &o.headline).collect::<Vec<_>>(),
                        ),
                    }),
                    policies: (0..n_policies)
                        .map(|j| {
                            let rows: Vec<_> =
                                comps.iter().filter_map(|c| c.policies.get(j)).collect();
                            PolicyMedian {
                                policy: rows[0].policy.clone(),
                                repeats: rows.len(),
                                stopped: rows.iter().filter(|p| p.cancelled).count(),
                                headline: median_headline(
                                    &rows.iter().map(|p| &p.headline).collect::<Vec<_>>(),
                                ),
                                throughput_vs_oracle: Spread::of(
                                    rows.iter().filter_map(|p| p.throughput_vs_oracle),
                                ),
                                turnaround_vs_oracle: Spread::of(
                                    rows.iter().filter_map(|p| p.turnaround_vs_oracle),
                                ),
                                p99_wait_vs_oracle: Spread::of(
                                    rows.iter().filter_map(|p| p.p99_wait_vs_oracle),
                                ),
                                p99_turnaround_vs_oracle: Spread::of(
                                    rows.iter().filter_map(|p| p.p99_turnaround_vs_oracle),
                                ),
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        let summary = if n_workloads > 1 {
            summarize_repeats(repeats)
        } else {
            Vec::new()
        };
        MedianComparison {
            repeats: repeats.len(),
            workloads,
            summary,
        }
    }
}

/// Each repeat's summary (geometric means across its workloads), combined
/// per policy over repeats; policies in first-seen order.
pub fn summarize_repeats(repeats: &[SuiteComparison]) -> Vec<SummarySpread> {
    let mut names: Vec<&str> = Vec::new();
    for r in repeats {
        for s in &r.summary {
            if !names.contains(&s.policy.as_str()) {
                names.push(&s.policy);
            }
        }
    }
    names
        .into_iter()
        .map(|name| {
            let rows: Vec<_> = repeats
                .iter()
                .filter_map(|r| r.summary.iter().find(|s| s.policy == name))
                .collect();
            SummarySpread {
                policy: name.to_string(),
                repeats: rows.len(),
                workloads: rows.iter().map(|s| s.workloads).min().unwrap_or(0),
                geomean_throughput_vs_oracle: Spread::of(
                    rows.iter().filter_map(|s| s.geomean_throughput_vs_oracle),
                ),
                geomean_turnaround_vs_oracle: Spread::of(
                    rows.iter().filter_map(|s| s.geomean_turnaround_vs_oracle),
                ),
                geomean_p99_wait_vs_oracle: Spread::of(
                    rows.iter().filter_map(|s| s.geomean_p99_wait_vs_oracle),
                ),
                geomean_p99_turnaround_vs_oracle: Spread::of(
                    rows.iter()
                        .filter_map(|s| s.geomean_p99_turnaround_vs_oracle),
                ),
                threads_created: Spread::of(rows.iter().map(|s| s.threads_created as f64)),
                avg_threads: Spread::of(rows.iter().map(|s| s.avg_threads)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headline_medians_round_thread_counts() {
        let h = |tput: f64, created: u64| Headline {
            throughput: tput,
            mean_wait_us: tput / 10.0,
            p99_wait_us: 1.0,
            mean_submit_blocked_us: 1.0,
            p99_submit_blocked_us: 1.0,
            mean_turnaround_us: 1.0,
            p99_turnaround_us: 1.0,
            threads_created: created,
            avg_threads: 2.0,
        };
        let (a, b) = (h(100.0, 3), h(200.0, 4));
        let m = median_headline(&[&a, &b]);
        assert_eq!(m.throughput, 150.0);
        assert_eq!(m.mean_wait_us, 15.0);
        assert_eq!(m.threads_created, 4, "3.5 rounds to 4");
        assert!(median_headline(&[]).throughput.is_nan());
    }
}
