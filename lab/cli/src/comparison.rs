//! Policies against the oracle, rendered: the tables of `compare` (the
//! arithmetic is `tidepool_workload::compare`).

use serde::Serialize;
pub use tidepool_workload::compare::{
    Headline, SuiteComparison, SummaryRow, WorkloadComparison, WorkloadRuns,
};

use crate::table::{fmt_rate, fmt_ratio, fmt_us, Table};

/// What `compare --json` prints for one run of the plan: the workload's
/// object when there is one workload, the suite's otherwise.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
pub enum CompareJson<'a> {
    /// One workload.
    One(&'a WorkloadComparison),
    /// Several workloads (or none), with the summary.
    Several(&'a SuiteComparison),
}

impl<'a> CompareJson<'a> {
    /// The shape for `s`.
    pub fn of(s: &'a SuiteComparison) -> CompareJson<'a> {
        match &s.workloads[..] {
            [one] => CompareJson::One(one),
            _ => CompareJson::Several(s),
        }
    }
}
/// An empty table with the columns of [`policy_table`]; fill it with
/// [`policy_cells`].
pub fn policy_table_header() -> Table {
    Table::new([
        "policy",
        "throughput",
        "vs oracle",
        "mean wait",
        "p99 wait",
        "vs oracle",
        "p99 resp.",
        "turnaround",
        "vs oracle",
        "created",
        "avg threads",
    ])
}

/// The ratios to the oracle of one row of a policy table, formatted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RatioCells {
    /// Throughput vs oracle.
    pub throughput: String,
    /// p99 wait vs oracle.
    pub p99_wait: String,
    /// Mean turnaround vs oracle.
    pub turnaround: String,
}

impl RatioCells {
    /// The oracle's own row: 1.00 everywhere.
    pub fn oracle() -> RatioCells {
        RatioCells {
            throughput: "1.00".into(),
            p99_wait: "1.00".into(),
            turnaround: "1.00".into(),
        }
    }
}

/// The cells of one row of a policy table: `label`, the headline numbers
/// and the ratio cells, in the columns of [`policy_table_header`].
pub fn policy_cells(label: String, h: &Headline, vs: RatioCells) -> [String; 11] {
    [
        label,
        fmt_rate(h.throughput),
        vs.throughput,
        fmt_us(h.mean_wait_us),
        fmt_us(h.p99_wait_us),
        vs.p99_wait,
        fmt_us(h.p99_submit_blocked_us),
        fmt_us(h.mean_turnaround_us),
        vs.turnaround,
        h.threads_created.to_string(),
        format!("{:.1}", h.avg_threads),
    ]
}

/// The side-by-side table of one workload: the oracle first, then each policy.
pub fn policy_table(c: &WorkloadComparison) -> Table {
    let mut t = policy_table_header();
    if let Some(o) = &c.oracle {
        let label = format!("oracle (fixed:{})", o.size);
        t.row(policy_cells(label, &o.headline, RatioCells::oracle()));
    }
    for p in &c.policies {
        let stopped = if p.cancelled { " (stopped)" } else { "" };
        t.row(policy_cells(
            format!("{}{stopped}", p.policy),
            &p.headline,
            RatioCells {
                throughput: fmt_ratio(p.throughput_vs_oracle),
                p99_wait: fmt_ratio(p.p99_wait_vs_oracle),
                turnaround: fmt_ratio(p.turnaround_vs_oracle),
            },
        ));
    }
    t
}

/// An empty table with the columns of [`summary_table`].
pub fn summary_table_header() -> Table {
    Table::new([
        "policy",
        "workloads",
        "throughput vs oracle",
        "turnaround vs oracle",
        "p99 turnaround vs oracle",
        "p99 wait vs oracle",
        "threads created",
        "avg threads",
    ])
}

/// The across-workload summary table.
pub fn summary_table(rows: &[SummaryRow]) -> Table {
    let mut t = summary_table_header();
    for r in rows {
        t.row([
            r.policy.clone(),
            r.workloads.to_string(),
            fmt_ratio(r.geomean_throughput_vs_oracle),
            fmt_ratio(r.geomean_turnaround_vs_oracle),
            fmt_ratio(r.geomean_p99_turnaround_vs_oracle),
            fmt_ratio(r.geomean_p99_wait_vs_oracle),
            r.threads_created.to_string(),
            format!("{:.1}", r.avg_threads),
        ]);
    }
    t
}

/// Which ratio a workload × policy matrix shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ratio {
    /// `turnaround_vs_oracle`.
    Turnaround,
    /// `p99_turnaround_vs_oracle`.
    P99Turnaround,
    /// `throughput_vs_oracle`.
    Throughput,
}

/// Workloads × policies: one ratio to the oracle per cell.
pub fn matrix_table(comps: &[WorkloadComparison], summary: &[SummaryRow], which: Ratio) -> Table {
    let mut headers = vec!["workload".to_string(), "oracle size".to_string()];
    headers.extend(summary.iter().map(|s| s.policy.clone()));
    let mut t = Table::new(headers);
    for c in comps {
        let mut row = vec![
            c.workload.clone(),
            c.oracle.as_ref().map_or("-".into(), |o| o.size.to_string()),
        ];
        for s in summary {
            row.push(fmt_ratio(
                c.policies
                    .iter()
                    .find(|p| p.policy == s.policy)
                    .and_then(|p| match which {
                        Ratio::Turnaround => p.turnaround_vs_oracle,
                        Ratio::P99Turnaround => p.p99_turnaround_vs_oracle,
                        Ratio::Throughput => p.throughput_vs_oracle,
                    }),
            ));
        }
        t.row(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidepool_workload::compare::{summarize, OracleRow, PolicyRow};
    use tidepool_workload::RunResult;

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
    fn ratios_and_summary() {
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
        let s = summarize(&comps);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].policy, "auto");
        assert_eq!(s[0].workloads, 2);
        assert!((s[0].geomean_throughput_vs_oracle.unwrap() - 0.5).abs() < 1e-12);
        assert!((s[1].geomean_turnaround_vs_oracle.unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(s[1].geomean_p99_wait_vs_oracle, Some(1.0));
        // p99 turnaround is 2 × the mean here: 200 and 400 against the oracle's 100.
        assert_eq!(comps[0].policies[0].p99_turnaround_vs_oracle, Some(2.0));
        assert!((s[0].geomean_p99_turnaround_vs_oracle.unwrap() - 2.0).abs() < 1e-12);
        assert!((s[1].geomean_p99_turnaround_vs_oracle.unwrap() - 4.0).abs() < 1e-12);
        let st = summary_table(&s).render();
        assert!(
            st.lines()
                .next()
                .unwrap()
                .contains("turnaround vs oracle  p99 turnaround vs oracle  p99 wait vs oracle"),
            "{st}"
        );
        assert!(st.lines().nth(3).unwrap().contains("4.00"), "{st}");
        let m = matrix_table(&comps, &s, Ratio::P99Turnaround).render();
        assert!(m.contains("2.00") && m.contains("4.00"), "{m}");
        let t = policy_table(&comps[0]).render();
        assert!(t.contains("oracle (fixed:4)") && t.contains("tpr"), "{t}");
        let m = matrix_table(&comps, &s, Ratio::Turnaround).render();
        assert!(m.contains("4.00"), "{m}");
        let m = matrix_table(&comps, &s, Ratio::Throughput).render();
        assert!(m.contains("0.25"), "{m}");
        assert!(m.lines().nth(2).unwrap().starts_with("w "), "{m}");
        let j = serde_json::to_value(&comps[0]).unwrap();
        assert_eq!(j["oracle"]["size"], 4);
        assert_eq!(j["policies"][0]["throughput_vs_oracle"], 1.0);
        assert_eq!(j["policies"][0]["p99_turnaround_vs_oracle"], 2.0);
        let j = serde_json::to_value(&s[1]).unwrap();
        assert_eq!(j["geomean_p99_turnaround_vs_oracle"], 4.0);
    }

    #[test]
    fn no_oracle_means_no_ratio() {
        let r = PolicyRow::from_run(&run("auto", 10.0, 1.0), None);
        assert_eq!(r.throughput_vs_oracle, None);
        assert_eq!(r.p99_wait_vs_oracle, None);
        assert_eq!(r.p99_turnaround_vs_oracle, None);
        let j = serde_json::to_value(&r).unwrap();
        assert!(j["p99_turnaround_vs_oracle"].is_null(), "{j}");
        let s = summarize(&[WorkloadComparison {
            workload: "w".into(),
            tasks: 1,
            oracle: None,
            policies: vec![r],
            sweep: None,
        }]);
        assert_eq!(s[0].geomean_p99_turnaround_vs_oracle, None);
    }

    #[test]
    fn p99_wait_ratio_floors_both_waits_at_one_us() {
        let with_p99 = |p99: f64| RunResult {
            p99_wait_us: p99,
            ..run("x", 1.0, 1.0)
        };
        let oracle = OracleRow::from_run(2, &with_p99(0.2));
        let row = |p99: f64| PolicyRow::from_run(&with_p99(p99), Some(&oracle)).p99_wait_vs_oracle;
        assert_eq!(row(30.0), Some(30.0), "the oracle's 0.2 µs counts as 1 µs");
        assert_eq!(row(0.5), Some(1.0));
        let oracle = OracleRow::from_run(2, &with_p99(40.0));
        let r = PolicyRow::from_run(&with_p99(60.0), Some(&oracle));
        assert_eq!(r.p99_wait_vs_oracle, Some(1.5));
        let t = policy_table(&WorkloadComparison {
            workload: "w".into(),
            tasks: 1,
            oracle: Some(oracle),
            policies: vec![r],
            sweep: None,
        })
        .render();
        assert!(t.lines().nth(3).unwrap().contains("1.50"), "{t}");
    }

    #[test]
    fn p99_turnaround_ratio_floors_both_turnarounds_at_one_us() {
        let with_p99 = |p99: f64| RunResult {
            p99_turnaround_us: p99,
            ..run("x", 1.0, 1.0)
        };
        let oracle = OracleRow::from_run(2, &with_p99(0.2));
        let row =
            |p99: f64| PolicyRow::from_run(&with_p99(p99), Some(&oracle)).p99_turnaround_vs_oracle;
        assert_eq!(row(30.0), Some(30.0), "the oracle's 0.2 µs counts as 1 µs");
        assert_eq!(row(0.5), Some(1.0));
        let oracle = OracleRow::from_run(2, &with_p99(40.0));
        let r = PolicyRow::from_run(&with_p99(60.0), Some(&oracle));
        assert_eq!(r.p99_turnaround_vs_oracle, Some(1.5));
        assert_eq!(
            r.p99_wait_vs_oracle,
            Some(1.0),
            "the wait ratio is separate"
        );
        let c = WorkloadComparison {
            workload: "w".into(),
            tasks: 1,
            oracle: Some(oracle),
            policies: vec![r],
            sweep: None,
        };
        let s = summarize(std::slice::from_ref(&c));
        let m = matrix_table(&[c], &s, Ratio::P99Turnaround).render();
        assert!(m.lines().nth(2).unwrap().contains("1.50"), "{m}");
    }

    #[test]
    fn json_shape_follows_the_workload_count() {
        let oracle = OracleRow::from_run(4, &run("fixed:4", 100.0, 50.0));
        let c = WorkloadComparison {
            workload: "w".into(),
            tasks: 10,
            oracle: Some(oracle),
            policies: Vec::new(),
            sweep: None,
        };
        let suite = |n: usize| SuiteComparison {
            workloads: vec![c.clone(); n],
            summary: Vec::new(),
            cancelled: false,
        };
        let j = serde_json::to_value(CompareJson::of(&suite(1))).unwrap();
        assert_eq!(j["workload"], "w");
        let j = serde_json::to_value(CompareJson::of(&suite(2))).unwrap();
        assert_eq!(j["workloads"].as_array().unwrap().len(), 2);
        let j = serde_json::to_value(CompareJson::of(&suite(0))).unwrap();
        assert!(j["workloads"].as_array().unwrap().is_empty());
    }
}
