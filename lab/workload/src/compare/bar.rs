//! The quality bar, per policy and workload, and the goals of `auto`
//! against `watermark` across workloads.
//!
//! **The bar** (one policy on one workload): throughput at least 97% of the
//! oracle's and p99 turnaround at most 1.2× the oracle's. Checked on one
//! run's ratios, or on the medians over repeats.
//!
//! **The goals** (one policy against a rival, across workloads): the bar on
//! every workload, a lower geometric mean than the rival's of both mean and
//! p99 turnaround vs the oracle, and at most 5% of the rival's threads
//! created.

use serde::{Deserialize, Serialize};

use super::repeats::MedianComparison;
use super::{geomean, WorkloadComparison};

/// Lowest throughput vs oracle that meets the bar.
pub const MIN_THROUGHPUT_VS_ORACLE: f64 = 0.97;

/// Highest p99 turnaround vs oracle that meets the bar.
pub const MAX_P99_TURNAROUND_VS_ORACLE: f64 = 1.2;

/// Most threads a policy may create, as a share of its rival's, to meet the
/// goals.
pub const MAX_THREADS_CREATED_SHARE: f64 = 0.05;

/// One policy on one workload: the numbers the bar and the goals look at
/// (medians when over repeats).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BarCell {
    /// Throughput vs oracle (`None`: no oracle).
    pub throughput_vs_oracle: Option<f64>,
    /// Mean turnaround vs oracle.
    pub turnaround_vs_oracle: Option<f64>,
    /// p99 turnaround vs oracle (both floored at 1 µs).
    pub p99_turnaround_vs_oracle: Option<f64>,
    /// Smallest and largest p99 turnaround vs oracle over repeats (equal
    /// for one run).
    pub p99_turnaround_range: Option<(f64, f64)>,
    /// Threads created.
    pub threads_created: f64,
}

impl BarCell {
    /// Throughput ≥ 97% of the oracle's (`None`: not measured).
    pub fn throughput_met(&self) -> Option<bool> {
        self.throughput_vs_oracle
            .map(|r| r >= MIN_THROUGHPUT_VS_ORACLE)
    }

    /// p99 turnaround ≤ 1.2× the oracle's (`None`: not measured).
    pub fn p99_turnaround_met(&self) -> Option<bool> {
        self.p99_turnaround_vs_oracle
            .map(|r| r <= MAX_P99_TURNAROUND_VS_ORACLE)
    }

    /// Both parts met.
    pub fn met(&self) -> bool {
        self.throughput_met() == Some(true) && self.p99_turnaround_met() == Some(true)
    }
}

/// Policies × workloads: the bar in each cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BarGrid {
    /// Column labels.
    pub workloads: Vec<String>,
    /// `(policy, one cell per workload)`; `None` where the policy did not run.
    pub rows: Vec<(String, Vec<Option<BarCell>>)>,
    /// Repeats the cells are medians of (1: a single run).
    pub repeats: usize,
}

impl BarGrid {
    fn build<'a, W, P>(
        workloads: &'a [W],
        label: fn(&W) -> &str,
        policies: P,
        repeats: usize,
    ) -> BarGrid
    where
        P: Fn(&'a W) -> Vec<(&'a str, BarCell)>,
    {
        let mut names: Vec<&str> = Vec::new();
        let cells: Vec<Vec<(&str, BarCell)>> = workloads.iter().map(&policies).collect();
        for (name, _) in cells.iter().flatten() {
            if !names.contains(name) {
                names.push(name);
            }
        }
        BarGrid {
            workloads: workloads.iter().map(|w| label(w).to_string()).collect(),
            rows: names
                .into_iter()
                .map(|name| {
                    let row = cells
                        .iter()
                        .map(|w| w.iter().find(|(n, _)| *n == name).map(|(_, c)| *c))
                        .collect();
                    (name.to_string(), row)
                })
                .collect(),
            repeats,
        }
    }

    /// The bar on one run's comparisons.
    pub fn of_run(comps: &[WorkloadComparison]) -> BarGrid {
        BarGrid::build(
            comps,
            |c| &c.workload,
            |c| {
                c.policies
                    .iter()
                    .map(|p| {
                        let cell = BarCell {
                            throughput_vs_oracle: p.throughput_vs_oracle,
                            turnaround_vs_oracle: p.turnaround_vs_oracle,
                            p99_turnaround_vs_oracle: p.p99_turnaround_vs_oracle,
                            p99_turnaround_range: p.p99_turnaround_vs_oracle.map(|r| (r, r)),
                            threads_created: p.headline.threads_created as f64,
                        };
                        (p.policy.as_str(), cell)
                    })
                    .collect()
            },
            1,
        )
    }

    /// The bar on the medians over repeats.
    pub fn of_medians(m: &MedianComparison) -> BarGrid {
        BarGrid::build(
            &m.workloads,
            |w| &w.workload,
            |w| {
                w.policies
                    .iter()
                    .map(|p| {
                        let cell = BarCell {
                            throughput_vs_oracle: p.throughput_vs_oracle.map(|s| s.median),
                            turnaround_vs_oracle: p.turnaround_vs_oracle.map(|s| s.median),
                            p99_turnaround_vs_oracle: p.p99_turnaround_vs_oracle.map(|s| s.median),
                            p99_turnaround_range: p
                                .p99_turnaround_vs_oracle
                                .map(|s| (s.min, s.max)),
                            threads_created: p.headline.threads_created as f64,
                        };
                        (p.policy.as_str(), cell)
                    })
                    .collect()
            },
            m.repeats,
        )
    }

    /// The row of `policy`: exactly that name, or else the first whose name
    /// starts with it followed by `:` (`watermark` finds `watermark:3..100`).
    pub fn row(&self, policy: &str) -> Option<(&str, &[Option<BarCell>])> {
        self.rows
            .iter()
            .find(|(n, _)| n == policy)
            .or_else(|| {
                self.rows
                    .iter()
                    .find(|(n, _)| n.strip_prefix(policy).is_some_and(|r| r.starts_with(':')))
            })
            .map(|(n, c)| (n.as_str(), c.as_slice()))
    }

    /// Per policy: the geometric means across workloads of its mean and p99
    /// turnaround vs oracle, and its threads created summed over workloads.
    pub fn totals(&self, policy: &str) -> Option<Totals> {
        let (name, cells) = self.row(policy)?;
        let cells: Vec<&BarCell> = cells.iter().flatten().collect();
        Some(Totals {
            policy: name.to_string(),
            workloads: cells.len(),
            met: cells.iter().filter(|c| c.met()).count(),
            geomean_throughput_vs_oracle: geomean(
                cells.iter().filter_map(|c| c.throughput_vs_oracle),
            ),
            geomean_turnaround_vs_oracle: geomean(
                cells.iter().filter_map(|c| c.turnaround_vs_oracle),
            ),
            geomean_p99_turnaround_vs_oracle: geomean(
                cells.iter().filter_map(|c| c.p99_turnaround_vs_oracle),
            ),
            threads_created: cells.iter().map(|c| c.threads_created).sum(),
        })
    }
}

/// One policy's row of a [`BarGrid`] summed up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// The policy's full name.
    pub policy: String,
    /// Workloads it ran on.
    pub workloads: usize,
    /// Workloads where it meets the bar.
    pub met: usize,
    /// Geometric mean of throughput vs oracle.
    pub geomean_throughput_vs_oracle: Option<f64>,
    /// Geometric mean of mean turnaround vs oracle.
    pub geomean_turnaround_vs_oracle: Option<f64>,
    /// Geometric mean of p99 turnaround vs oracle.
    pub geomean_p99_turnaround_vs_oracle: Option<f64>,
    /// Threads created, summed over workloads.
    pub threads_created: f64,
}

/// A policy against its rival across workloads (module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goals {
    /// The policy.
    pub policy: Totals,
    /// The rival.
    pub rival: Totals,
}

impl Goals {
    /// `policy` against `rival` in `grid`; `None` when either did not run.
    pub fn of(grid: &BarGrid, policy: &str, rival: &str) -> Option<Goals> {
        Some(Goals {
            policy: grid.totals(policy)?,
            rival: grid.totals(rival)?,
        })
    }

    /// The bar met on every workload.
    pub fn bar_met(&self) -> bool {
        self.policy.workloads > 0 && self.policy.met == self.policy.workloads
    }

    /// Lower geometric mean of mean turnaround vs oracle than the rival's.
    pub fn turnaround_better(&self) -> bool {
        lower(
            self.policy.geomean_turnaround_vs_oracle,
            self.rival.geomean_turnaround_vs_oracle,
        )
    }

    /// Lower geometric mean of p99 turnaround vs oracle than the rival's.
    pub fn p99_turnaround_better(&self) -> bool {
        lower(
            self.policy.geomean_p99_turnaround_vs_oracle,
            self.rival.geomean_p99_turnaround_vs_oracle,
        )
    }

    /// Threads created as a share of the rival's (`None`: the rival created
    /// none).
    pub fn threads_share(&self) -> Option<f64> {
        (self.rival.threads_created > 0.0)
            .then(|| self.policy.threads_created / self.rival.threads_created)
    }

    /// At most 5% of the rival's threads created.
    pub fn threads_met(&self) -> bool {
        match self.threads_share() {
            Some(s) => s <= MAX_THREADS_CREATED_SHARE,
            None => self.policy.threads_created == 0.0,
        }
    }

    /// Every goal met.
    pub fn met(&self) -> bool {
        self.bar_met()
            && self.turnaround_better()
            && self.p99_turnaround_better()
            && self.threads_met()
    }
}

fn lower(a: Option<f64>, b: Option<f64>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a < b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{OracleRow, PolicyRow};
    use crate::RunResult;

    fn cell(tp: f64, p99: f64) -> BarCell {
        BarCell {
            throughput_vs_oracle: Some(tp),
            turnaround_vs_oracle: Some(1.0),
            p99_turnaround_vs_oracle: Some(p99),
            p99_turnaround_range: Some((p99, p99)),
            threads_created: 0.0,
        }
    }

    #[test]
    fn thresholds_are_inclusive() {
        assert!(cell(0.97, 1.2).met());
        assert!(!cell(0.969, 1.0).met());
        assert!(!cell(1.0, 1.21).met());
        let none = BarCell {
            throughput_vs_oracle: None,
            p99_turnaround_vs_oracle: None,
            ..cell(1.0, 1.0)
        };
        assert!(!none.met());
    }

    fn grid() -> BarGrid {
        let r = |name: &str, tput: f64, turn: f64, created: u64| RunResult {
            executor: name.into(),
            throughput: tput,
            mean_turnaround_us: turn,
            p99_turnaround_us: 2.0 * turn,
            threads_created: created,
            ..RunResult::default()
        };
        let oracle = OracleRow::from_run(2, &r("fixed:2", 100.0, 100.0, 2));
        let comp = |w: &str, auto_turn: f64| WorkloadComparison {
            workload: w.into(),
            tasks: 1,
            oracle: Some(oracle.clone()),
            policies: vec![
                PolicyRow::from_run(&r("auto", 99.0, auto_turn, 4), Some(&oracle)),
                PolicyRow::from_run(&r("watermark:3..100", 100.0, 110.0, 100), Some(&oracle)),
            ],
            sweep: None,
        };
        BarGrid::of_run(&[comp("cpu", 100.0), comp("io", 400.0)])
    }

    #[test]
    fn grid_and_goals_of_a_run() {
        let g = grid();
        assert_eq!(g.workloads, vec!["cpu", "io"]);
        assert_eq!(g.rows.len(), 2);
        assert_eq!(g.row("watermark").unwrap().0, "watermark:3..100");
        assert!(g.row("water").is_none());
        let goals = Goals::of(&g, "auto", "watermark").unwrap();
        assert_eq!((goals.policy.met, goals.policy.workloads), (1, 2));
        // auto: turnaround 1.0 and 4.0 → geomean 2.0; watermark 1.1
        assert!((goals.policy.geomean_turnaround_vs_oracle.unwrap() - 2.0).abs() < 1e-12);
        assert!(!goals.turnaround_better() && !goals.p99_turnaround_better());
        assert_eq!(goals.threads_share(), Some(0.04));
        assert!(goals.threads_met());
        assert!(!goals.met());
        assert!(Goals::of(&g, "auto", "hisdyn").is_none());
    }
}
