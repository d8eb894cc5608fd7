//! Several repeats of a comparison (`compare`/`demo --repeats N`): the
//! median over repeats of every number, the min–max of every ratio to the
//! oracle, per workload and policy, and of the per-repeat geometric means
//! across workloads; their tables and the JSON printed when N > 1.
//!
//! Every repeat runs the whole plan, finds its own oracle, and computes its
//! ratios against that oracle; only then are repeats combined. A ratio's
//! median is therefore the median of per-repeat ratios, not the ratio of two
//! medians.

use serde::{Serialize, Serializer};

pub use tidepool_workload::compare::repeats::{
    MedianComparison, OracleMedian, Spread, SummarySpread, WorkloadMedian,
};

use crate::comparison::{
    policy_cells, policy_table_header, summary_table_header, CompareJson, Ratio, RatioCells,
    SuiteComparison,
};
use crate::table::{fmt_ratio, Table};

/// The most repeats `--repeats` accepts.
pub const MAX_REPEATS: u32 = 20;

/// A ratio's spread as `median (min–max)`, e.g. `1.03 (1.02–1.08)`, with
/// the precision the spread allows (`1.5 (1.0–2.0)` when the repeats
/// disagree by more than a fifth); `-` when absent.
pub fn fmt_spread(s: Option<Spread>) -> String {
    match s {
        // Repeats that disagree by more than a fifth earn one decimal, no more.
        Some(s) if s.median > 0.0 && (s.max - s.min) > 0.2 * s.median && s.max < 100.0 => {
            format!("{:.1} ({:.1}–{:.1})", s.median, s.min, s.max)
        }
        Some(s) => format!(
            "{} ({}–{})",
            fmt_ratio(Some(s.median)),
            fmt_ratio(Some(s.min)),
            fmt_ratio(Some(s.max))
        ),
        None => "-".into(),
    }
}

/// A count's spread as `median (min–max)`, e.g. `80 (76–83)`; a median
/// half-way between two counts is rounded up, as in [`median_headline`].
pub fn fmt_count_spread(s: Option<Spread>) -> String {
    match s {
        Some(s) => format!(
            "{:.0} ({:.0}–{:.0})",
            s.median.round(),
            s.min.round(),
            s.max.round()
        ),
        None => "-".into(),
    }
}
/// What `compare --json` and `demo --json` print with `--repeats N`, N > 1,
/// and what `compare.json` holds then.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatedComparison {
    /// N, as asked.
    pub repeats_requested: usize,
    /// Repeats that ran to the end.
    pub repeats_complete: usize,
    /// True when Ctrl-C cut a repeat short after at least one complete
    /// repeat: that partial repeat is left out of `repeats` and `median`.
    pub dropped_partial_repeat: bool,
    /// Every kept repeat, each in the shape `--json` prints without
    /// `--repeats` (one workload's object, or the several-workload object).
    #[serde(serialize_with = "as_compare_json")]
    pub repeats: Vec<SuiteComparison>,
    /// Medians and ranges over `repeats`.
    pub median: MedianComparison,
    /// True when stopped by Ctrl-C.
    pub cancelled: bool,
}

fn as_compare_json<S: Serializer>(repeats: &[SuiteComparison], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(repeats.iter().map(CompareJson::of))
}

impl RepeatedComparison {
    /// Combine the kept repeats.
    pub fn new(
        requested: usize,
        repeats: Vec<SuiteComparison>,
        complete: usize,
        dropped_partial: bool,
        cancelled: bool,
    ) -> RepeatedComparison {
        RepeatedComparison {
            repeats_requested: requested,
            repeats_complete: complete,
            dropped_partial_repeat: dropped_partial,
            median: MedianComparison::of(&repeats),
            repeats,
            cancelled,
        }
    }

    /// What Ctrl-C did to the repeats, when it was pressed.
    pub fn stop_note(&self) -> Option<String> {
        if !self.cancelled {
            None
        } else if self.dropped_partial_repeat {
            Some(format!(
                "stopped by Ctrl-C: {} of {} repeats complete; the interrupted repeat was dropped",
                self.repeats_complete, self.repeats_requested
            ))
        } else if self.repeats_complete == 0 {
            Some(format!(
                "stopped by Ctrl-C during the first of {} repeats: partial results of that repeat",
                self.repeats_requested
            ))
        } else {
            Some(format!(
                "stopped by Ctrl-C after the last run: all {} repeats complete",
                self.repeats_complete
            ))
        }
    }
}

/// `1 repeat`, `3 repeats`.
pub fn fmt_repeats(n: usize) -> String {
    if n == 1 {
        "1 repeat".into()
    } else {
        format!("{n} repeats")
    }
}

/// The oracle sizes of each repeat, e.g. `fixed:2, 2, 4`; `-` when none.
pub fn fmt_oracle_sizes(o: Option<&OracleMedian>) -> String {
    match o {
        Some(o) if !o.sizes.is_empty() => {
            let sizes: Vec<String> = o.sizes.iter().map(usize::to_string).collect();
            format!("fixed:{}", sizes.join(", "))
        }
        _ => "-".into(),
    }
}

/// One workload over repeats: the oracles' medians, then each policy's
/// medians with `median (min–max)` ratios.
pub fn median_policy_table(w: &WorkloadMedian) -> Table {
    let mut t = policy_table_header();
    if let Some(o) = &w.oracle {
        t.row(policy_cells(
            "oracle (median)".into(),
            &o.headline,
            RatioCells::oracle(),
        ));
    }
    for p in &w.policies {
        let stopped = match p.stopped {
            0 => String::new(),
            k => format!(" (stopped in {k}/{})", p.repeats),
        };
        t.row(policy_cells(
            format!("{}{stopped}", p.policy),
            &p.headline,
            RatioCells {
                throughput: fmt_spread(p.throughput_vs_oracle),
                p99_wait: fmt_spread(p.p99_wait_vs_oracle),
                turnaround: fmt_spread(p.turnaround_vs_oracle),
            },
        ));
    }
    t
}

/// The summary over repeats: per policy, `median (min–max)` of the
/// per-repeat geometric means.
pub fn median_summary_table(rows: &[SummarySpread]) -> Table {
    let mut t = summary_table_header();
    for r in rows {
        t.row([
            r.policy.clone(),
            r.workloads.to_string(),
            fmt_spread(r.geomean_throughput_vs_oracle),
            fmt_spread(r.geomean_turnaround_vs_oracle),
            fmt_spread(r.geomean_p99_turnaround_vs_oracle),
            fmt_spread(r.geomean_p99_wait_vs_oracle),
            fmt_count_spread(r.threads_created),
            r.avg_threads
                .map_or("-".into(), |s| format!("{:.1}", s.median)),
        ]);
    }
    t
}

/// Workloads × policies: the median over repeats of one ratio per cell.
/// Policies as in the summary; with one workload (no summary), that
/// workload's policies.
pub fn median_matrix_table(m: &MedianComparison, which: Ratio) -> Table {
    let mut policies: Vec<&str> = m.summary.iter().map(|s| s.policy.as_str()).collect();
    if policies.is_empty() {
        for p in m.workloads.iter().flat_map(|w| &w.policies) {
            if !policies.contains(&p.policy.as_str()) {
                policies.push(&p.policy);
            }
        }
    }
    let mut headers = vec!["workload".to_string(), "oracle sizes".to_string()];
    headers.extend(policies.iter().map(|p| p.to_string()));
    let mut t = Table::new(headers);
    for w in &m.workloads {
        let mut row = vec![w.workload.clone(), fmt_oracle_sizes(w.oracle.as_ref())];
        for name in &policies {
            let p = w.policies.iter().find(|p| p.policy == *name);
            let spread = p.and_then(|p| match which {
                Ratio::Turnaround => p.turnaround_vs_oracle,
                Ratio::P99Turnaround => p.p99_turnaround_vs_oracle,
                Ratio::Throughput => p.throughput_vs_oracle,
            });
            row.push(fmt_ratio(spread.map(|s| s.median)));
        }
        t.row(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidepool_workload::compare::{
        summarize, summarize_repeats, OracleRow, PolicyRow, WorkloadComparison,
    };
    use tidepool_workload::RunResult;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn spread_is_median_min_max() {
        assert_eq!(Spread::of([]), None);
        assert_eq!(
            Spread::of([2.0, 9.0, 1.0, f64::NAN]),
            Some(Spread {
                median: 2.0,
                min: 1.0,
                max: 9.0
            })
        );
        let s = Spread::of([1.02, 1.079, 1.033]);
        assert_eq!(fmt_spread(s), "1.03 (1.02–1.08)");
        assert_eq!(fmt_spread(None), "-");
        assert_eq!(
            fmt_count_spread(Spread::of([76.0, 83.0, 80.0])),
            "80 (76–83)"
        );
    }

    /// A run whose p99 turnaround is twice its mean turnaround.
    fn run(name: &str, tput: f64, turn: f64, p99: f64) -> RunResult {
        RunResult {
            executor: name.into(),
            throughput: tput,
            mean_turnaround_us: turn,
            p99_turnaround_us: 2.0 * turn,
            p99_wait_us: p99,
            ..RunResult::default()
        }
    }

    /// One repeat on two workloads whose oracle has throughput 100,
    /// turnaround 10 (p99 turnaround 20) and p99 wait `oracle_p99`; `auto`
    /// measures `auto[i]` = (throughput, turnaround, p99 wait) on workload i,
    /// and a p99 turnaround of twice that turnaround.
    fn repeat(oracle_size: usize, oracle_p99: f64, auto: [(f64, f64, f64); 2]) -> SuiteComparison {
        let oracle = OracleRow::from_run(oracle_size, &run("fixed", 100.0, 10.0, oracle_p99));
        let workloads: Vec<WorkloadComparison> = auto
            .iter()
            .enumerate()
            .map(|(i, &(tp, ta, p99))| WorkloadComparison {
                workload: format!("w{i}"),
                tasks: 10,
                oracle: Some(oracle.clone()),
                policies: vec![
                    PolicyRow::from_run(&run("auto", tp, ta, p99), Some(&oracle)),
                    PolicyRow::from_run(&run("tpr", 100.0, 10.0, oracle_p99), Some(&oracle)),
                ],
                sweep: None,
            })
            .collect();
        SuiteComparison {
            summary: summarize(&workloads),
            workloads,
            cancelled: false,
        }
    }

    #[test]
    fn ratios_are_per_repeat_then_median() {
        // Repeat 1: the oracle's p99 is 10 µs, auto's 20 → 2.0.
        // Repeat 2: the oracle's p99 is 40 µs, auto's 20 → 0.5.
        // Repeat 3: the oracle's p99 is 20 µs, auto's 30 → 1.5.
        // Median of ratios 1.5; the ratio of medians would be 20/20 = 1.
        let reps = [
            repeat(2, 10.0, [(100.0, 10.0, 20.0), (50.0, 40.0, 20.0)]),
            repeat(4, 40.0, [(90.0, 20.0, 20.0), (100.0, 10.0, 20.0)]),
            repeat(2, 20.0, [(80.0, 30.0, 30.0), (100.0, 10.0, 20.0)]),
        ];
        let m = MedianComparison::of(&reps);
        assert_eq!(m.repeats, 3);
        assert_eq!(m.workloads.len(), 2);
        let w0 = &m.workloads[0];
        assert_eq!(w0.oracle.as_ref().unwrap().sizes, vec![2, 4, 2]);
        assert_eq!(w0.oracle.as_ref().unwrap().headline.p99_wait_us, 20.0);
        let auto = &w0.policies[0];
        assert_eq!((auto.policy.as_str(), auto.repeats), ("auto", 3));
        assert_eq!(auto.headline.p99_wait_us, 20.0);
        let p99 = auto.p99_wait_vs_oracle.unwrap();
        assert_eq!((p99.median, p99.min, p99.max), (1.5, 0.5, 2.0));
        let tp = auto.throughput_vs_oracle.unwrap();
        assert_eq!((tp.median, tp.min, tp.max), (0.9, 0.8, 1.0));
        assert_eq!(auto.turnaround_vs_oracle.unwrap().median, 2.0);
        // p99 turnarounds 20, 40, 60 against the oracle's 20 in each repeat.
        let p99t = auto.p99_turnaround_vs_oracle.unwrap();
        assert_eq!((p99t.median, p99t.min, p99t.max), (2.0, 1.0, 3.0));
        // Per-repeat geometric means over the two workloads: sqrt(1 × 4) = 2,
        // sqrt(2 × 1), sqrt(3 × 1); median sqrt(3).
        let g = m.summary[0].geomean_p99_turnaround_vs_oracle.unwrap();
        assert!(close(Some(g.median), 3f64.sqrt()), "{g:?}");
        assert!(
            close(Some(g.min), 2f64.sqrt()) && close(Some(g.max), 2.0),
            "{g:?}"
        );
        assert!(close(
            m.summary[1]
                .geomean_p99_turnaround_vs_oracle
                .map(|g| g.median),
            1.0
        ));
        assert_eq!(m.workloads[1].policies[1].policy, "tpr");
        assert_eq!(fmt_oracle_sizes(w0.oracle.as_ref()), "fixed:2, 4, 2");
    }

    #[test]
    fn summary_is_geomean_per_repeat_then_median() {
        // auto's throughput ratios per repeat: (1.0, 0.25) → geomean 0.5;
        // (0.16, 1.0) → 0.4; (1.0, 0.64) → 0.8. Median 0.5, range 0.4–0.8.
        // (A geomean of the per-workload medians would be
        // sqrt(1.0 * 0.64) = 0.8, not what we report.)
        let reps = [
            repeat(2, 10.0, [(100.0, 10.0, 10.0), (25.0, 10.0, 10.0)]),
            repeat(2, 10.0, [(16.0, 10.0, 10.0), (100.0, 10.0, 10.0)]),
            repeat(2, 10.0, [(100.0, 10.0, 10.0), (64.0, 10.0, 10.0)]),
        ];
        let s = summarize_repeats(&reps);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].policy.as_str(), s[0].repeats, s[0].workloads),
            ("auto", 3, 2)
        );
        let g = s[0].geomean_throughput_vs_oracle.unwrap();
        assert!(close(Some(g.median), 0.5) && close(Some(g.min), 0.4) && close(Some(g.max), 0.8));
        assert!(close(
            s[1].geomean_p99_wait_vs_oracle.map(|g| g.median),
            1.0
        ));
        let even = summarize_repeats(&reps[..2]);
        assert!(close(
            even[0].geomean_throughput_vs_oracle.map(|g| g.median),
            0.45
        ));
        let table = median_summary_table(&s).render();
        assert!(table.contains("0.5 (0.4–0.8)"), "{table}");
        let header: Vec<&str> = table
            .lines()
            .next()
            .unwrap()
            .split("  ")
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .collect();
        let col = |name: &str| header.iter().position(|h| *h == name);
        assert_eq!(
            col("p99 turnaround vs oracle"),
            col("turnaround vs oracle").map(|i| i + 1),
            "{table}"
        );
        assert_eq!(MedianComparison::of(&reps).summary, s);
    }

    #[test]
    fn json_keeps_every_repeat_in_the_single_run_shape() {
        let reps = vec![
            repeat(2, 10.0, [(100.0, 10.0, 10.0), (50.0, 10.0, 10.0)]),
            repeat(2, 10.0, [(100.0, 10.0, 10.0), (50.0, 10.0, 10.0)]),
        ];
        let r = RepeatedComparison::new(3, reps, 2, true, true);
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["repeats_requested"], 3);
        assert_eq!(j["repeats_complete"], 2);
        assert_eq!(j["dropped_partial_repeat"], true);
        assert_eq!(j["repeats"].as_array().unwrap().len(), 2);
        assert_eq!(j["repeats"][0]["workloads"][1]["workload"], "w1");
        assert_eq!(j["median"]["repeats"], 2);
        let auto = &j["median"]["workloads"][1]["policies"][0];
        assert_eq!(auto["throughput_vs_oracle"]["median"], 0.5);
        assert_eq!(auto["p99_turnaround_vs_oracle"]["median"], 1.0);
        assert_eq!(
            j["median"]["summary"][0]["geomean_p99_turnaround_vs_oracle"]["max"],
            1.0
        );
        assert_eq!(auto["throughput"], 50.0);
        assert_eq!(j["median"]["summary"][0]["policy"], "auto");
        // One workload: each repeat is that workload's object.
        let mut one = repeat(2, 10.0, [(100.0, 10.0, 10.0), (50.0, 10.0, 10.0)]);
        one.workloads.truncate(1);
        let r = RepeatedComparison::new(2, vec![one.clone(), one], 2, false, false);
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["repeats"][1]["workload"], "w0");
        assert!(j["median"]["summary"].as_array().unwrap().is_empty());
    }

    #[test]
    fn tables_show_medians_and_ranges() {
        let reps = [
            repeat(2, 10.0, [(100.0, 10.0, 20.0), (50.0, 10.0, 10.0)]),
            repeat(4, 10.0, [(90.0, 10.0, 10.0), (50.0, 10.0, 10.0)]),
        ];
        let m = MedianComparison::of(&reps);
        let t = median_policy_table(&m.workloads[0]).render();
        assert!(t.contains("oracle (median)"), "{t}");
        assert!(t.contains("0.95 (0.90–1.00)"), "{t}");
        assert!(t.contains("1.5 (1.0–2.0)"), "{t}");
        let mx = median_matrix_table(&m, Ratio::Throughput).render();
        assert!(mx.contains("fixed:2, 4") && mx.contains("0.95"), "{mx}");
        let mx = median_matrix_table(&m, Ratio::P99Turnaround).render();
        assert!(mx.lines().nth(2).unwrap().contains("1.00"), "{mx}");
    }

    #[test]
    fn matrix_of_one_workload_lists_its_policies() {
        // One workload: no summary, so the matrix takes the workload's policies.
        let mut reps = [
            repeat(2, 10.0, [(100.0, 30.0, 10.0), (50.0, 10.0, 10.0)]),
            repeat(2, 10.0, [(100.0, 10.0, 10.0), (50.0, 10.0, 10.0)]),
        ];
        for r in &mut reps {
            r.workloads.truncate(1);
        }
        let m = MedianComparison::of(&reps);
        assert!(m.summary.is_empty());
        let mx = median_matrix_table(&m, Ratio::P99Turnaround).render();
        let lines: Vec<&str> = mx.lines().collect();
        assert!(
            lines[0].contains("auto") && lines[0].contains("tpr"),
            "{mx}"
        );
        // auto: p99 turnaround 60 then 20 against 20 → median 2.0; tpr 1.0.
        assert!(
            lines[2].contains("2.00") && lines[2].contains("1.00"),
            "{mx}"
        );
    }
}
