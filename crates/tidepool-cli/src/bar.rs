//! The quality bar, per policy and workload: throughput at least 95% of the
//! oracle's and p99 queue wait at most 1.5× the oracle's. Checked on one
//! run's ratios, or on the medians over repeats.

use crate::comparison::WorkloadComparison;
use crate::repeats::MedianComparison;
use crate::table::{fmt_ratio, Table};

/// Lowest throughput vs oracle that meets the bar.
pub const MIN_THROUGHPUT_VS_ORACLE: f64 = 0.95;

/// Highest p99 wait vs oracle that meets the bar.
pub const MAX_P99_WAIT_VS_ORACLE: f64 = 1.5;

/// One policy on one workload: the two ratios the bar looks at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BarCell {
    /// Throughput vs oracle (`None`: no oracle).
    pub throughput_vs_oracle: Option<f64>,
    /// p99 wait vs oracle (`None`: no oracle).
    pub p99_wait_vs_oracle: Option<f64>,
}

impl BarCell {
    /// Throughput ≥ 95% of the oracle's (`None`: not measured).
    pub fn throughput_met(&self) -> Option<bool> {
        self.throughput_vs_oracle
            .map(|r| r >= MIN_THROUGHPUT_VS_ORACLE)
    }

    /// p99 wait ≤ 1.5× the oracle's (`None`: not measured).
    pub fn p99_wait_met(&self) -> Option<bool> {
        self.p99_wait_vs_oracle.map(|r| r <= MAX_P99_WAIT_VS_ORACLE)
    }

    /// Both parts met.
    pub fn met(&self) -> bool {
        self.throughput_met() == Some(true) && self.p99_wait_met() == Some(true)
    }

    /// `✓ 1.000 · ✗ 2.45`: each part's mark and ratio, throughput first.
    pub fn render(&self) -> String {
        let part = |met: Option<bool>, r: Option<f64>| match met {
            Some(true) => format!("✓ {}", fmt_ratio(r)),
            Some(false) => format!("✗ {}", fmt_ratio(r)),
            None => "-".to_string(),
        };
        format!(
            "{} · {}",
            part(self.throughput_met(), self.throughput_vs_oracle),
            part(self.p99_wait_met(), self.p99_wait_vs_oracle)
        )
    }
}

/// Policies × workloads: the bar in each cell.
#[derive(Debug, Clone, PartialEq)]
pub struct BarGrid {
    /// Column labels.
    pub workloads: Vec<String>,
    /// `(policy, one cell per workload)`; `None` where the policy did not run.
    pub rows: Vec<(String, Vec<Option<BarCell>>)>,
}

impl BarGrid {
    fn build<'a, W, P>(workloads: &'a [W], label: fn(&W) -> &str, policies: P) -> BarGrid
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
                            p99_wait_vs_oracle: p.p99_wait_vs_oracle,
                        };
                        (p.policy.as_str(), cell)
                    })
                    .collect()
            },
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
                            p99_wait_vs_oracle: p.p99_wait_vs_oracle.map(|s| s.median),
                        };
                        (p.policy.as_str(), cell)
                    })
                    .collect()
            },
        )
    }

    /// One row per policy, one column per workload, and how many workloads
    /// meet both parts.
    pub fn table(&self) -> Table {
        let mut headers = vec!["policy".to_string()];
        headers.extend(self.workloads.iter().cloned());
        headers.push("both met".into());
        let mut t = Table::new(headers);
        for (policy, cells) in &self.rows {
            let mut row = vec![policy.clone()];
            row.extend(
                cells
                    .iter()
                    .map(|c| c.map_or("-".to_string(), |c| c.render())),
            );
            let met = cells.iter().flatten().filter(|c| c.met()).count();
            row.push(format!("{met}/{}", self.workloads.len()));
            t.row(row);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparison::{OracleRow, PolicyRow};
    use tidepool_workload::RunResult;

    fn cell(tp: f64, p99: f64) -> BarCell {
        BarCell {
            throughput_vs_oracle: Some(tp),
            p99_wait_vs_oracle: Some(p99),
        }
    }

    #[test]
    fn thresholds_are_inclusive() {
        assert!(cell(0.95, 1.5).met());
        assert!(!cell(0.949, 1.0).met());
        assert!(!cell(1.0, 1.51).met());
        assert_eq!(cell(1.0, 2.45).render(), "✓ 1.000 · ✗ 2.450");
        let none = BarCell {
            throughput_vs_oracle: None,
            p99_wait_vs_oracle: None,
        };
        assert!(!none.met());
        assert_eq!(none.render(), "- · -");
    }

    #[test]
    fn grid_of_a_run() {
        let r = |name: &str, tput: f64, p99: f64| RunResult {
            executor: name.into(),
            throughput: tput,
            p99_wait_us: p99,
            ..RunResult::default()
        };
        let oracle = OracleRow::from_run(2, &r("fixed:2", 100.0, 100.0));
        let comp = |w: &str, auto_p99: f64| WorkloadComparison {
            workload: w.into(),
            tasks: 1,
            oracle: Some(oracle.clone()),
            policies: vec![PolicyRow::from_run(
                &r("auto", 99.0, auto_p99),
                Some(&oracle),
            )],
            sweep: None,
        };
        let g = BarGrid::of_run(&[comp("cpu", 120.0), comp("io", 400.0)]);
        assert_eq!(g.workloads, vec!["cpu", "io"]);
        assert_eq!(g.rows.len(), 1);
        let t = g.table().render();
        let auto = t.lines().nth(2).unwrap();
        assert!(auto.starts_with("auto"), "{t}");
        assert!(auto.contains("✓ 0.990 · ✓ 1.200"), "{t}");
        assert!(auto.contains("✓ 0.990 · ✗ 4.000"), "{t}");
        assert!(auto.ends_with("1/2"), "{t}");
    }
}
