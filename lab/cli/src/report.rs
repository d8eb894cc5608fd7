//! The report folder of `compare --out` and `demo`: `report.md` with the
//! tables and links to the plots, `compare.json`, CSV files, and per
//! workload a folder of SVG plots and CSVs. With `--repeats N`, N > 1, the
//! tables are medians over repeats and the plots are the last repeat's.

use std::path::{Path, PathBuf};

use anyhow::Context;
use tidepool_workload::metrics::{SizePoint, TaskRecord};

use crate::bar::{bar_table, BarGrid, MAX_P99_TURNAROUND_VS_ORACLE, MIN_THROUGHPUT_VS_ORACLE};
use crate::cmd::sweep::{sweep_table, verdict};
use crate::comparison::{
    matrix_table, policy_table, summary_table, Headline, Ratio, SuiteComparison, WorkloadRuns,
};
use crate::output::{self, write_csv};
use crate::plot::{self, SweepMetric};
use crate::repeats::{
    fmt_oracle_sizes, fmt_repeats, median_matrix_table, median_policy_table, median_summary_table,
    MedianComparison, RepeatedComparison, Spread,
};
use crate::source::slug;
use tidepool_workload::compare::verdict::verdict as verdict_paragraph;

/// The plots and files written for one workload, relative to the report folder.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkloadFiles {
    /// Sub-folder name.
    pub dir: String,
    /// `(caption, relative path)` of each plot.
    pub plots: Vec<(String, String)>,
}

/// Write the report folder of one run of the plan; returns the path of
/// `report.md`.
pub fn write(
    dir: &Path,
    runs: &[WorkloadRuns],
    suite: &SuiteComparison,
    command: &str,
) -> anyhow::Result<PathBuf> {
    output::ensure_dir(dir)?;
    output::write_json(&dir.join("compare.json"), suite)?;
    compare_csv(&dir.join("compare.csv"), &[(None, suite)])?;
    if suite.workloads.len() > 1 {
        summary_csv(&dir.join("summary.csv"), &[(None, suite)])?;
    }
    write_rest(dir, runs, suite, None, command)
}

/// Write the report folder of several repeats: `runs` are the last kept
/// repeat's (for plots and sweep tables). Returns the path of `report.md`.
pub fn write_repeated(
    dir: &Path,
    runs: &[WorkloadRuns],
    r: &RepeatedComparison,
    command: &str,
) -> anyhow::Result<PathBuf> {
    output::ensure_dir(dir)?;
    output::write_json(&dir.join("compare.json"), r)?;
    let numbered: Vec<(Option<usize>, &SuiteComparison)> = r
        .repeats
        .iter()
        .enumerate()
        .map(|(i, s)| (Some(i + 1), s))
        .collect();
    compare_csv(&dir.join("compare.csv"), &numbered)?;
    if r.median.workloads.len() > 1 {
        summary_csv(&dir.join("summary.csv"), &numbered)?;
    }
    median_csv(&dir.join("median.csv"), &r.median)?;
    let empty = SuiteComparison {
        workloads: Vec::new(),
        summary: Vec::new(),
        cancelled: r.cancelled,
    };
    let last = r.repeats.last().unwrap_or(&empty);
    write_rest(dir, runs, last, Some(r), command)
}

/// The per-workload folders and `report.md`.
fn write_rest(
    dir: &Path,
    runs: &[WorkloadRuns],
    suite: &SuiteComparison,
    repeated: Option<&RepeatedComparison>,
    command: &str,
) -> anyhow::Result<PathBuf> {
    let mut used = Vec::new();
    let mut files = Vec::new();
    for w in runs {
        let mut name = slug(&w.workload);
        while used.contains(&name) {
            name.push('_');
        }
        used.push(name.clone());
        files.push(workload_files(dir, &name, w)?);
    }
    let grid = match repeated {
        Some(r) => BarGrid::of_medians(&r.median),
        None => BarGrid::of_run(&suite.workloads),
    };
    let figure = if grid.workloads.is_empty() {
        None
    } else {
        plot::summary_chart(&dir.join("summary.svg"), &grid)?;
        Some("summary.svg")
    };
    let md = markdown(runs, suite, repeated, &files, command, figure);
    let path = dir.join("report.md");
    std::fs::write(&path, md).with_context(|| format!("cannot write `{}`", path.display()))?;
    Ok(path)
}

fn workload_files(root: &Path, name: &str, w: &WorkloadRuns) -> anyhow::Result<WorkloadFiles> {
    let dir = root.join(name);
    output::ensure_dir(&dir)?;
    let mut f = WorkloadFiles {
        dir: name.to_string(),
        plots: Vec::new(),
    };
    let mut add = |caption: &str, file: &str| {
        f.plots
            .push((caption.to_string(), format!("{name}/{file}")));
    };
    if let Some(a) = &w.analysis {
        output::sweep_csv(&dir.join("sweep.csv"), a)?;
        for (file, caption, m) in [
            (
                "throughput.svg",
                "throughput vs pool size",
                SweepMetric::Throughput,
            ),
            ("rait.svg", "RAIT vs pool size", SweepMetric::Rait),
            (
                "p99-wait.svg",
                "p99 wait vs pool size",
                SweepMetric::P99Wait,
            ),
        ] {
            plot::sweep_chart(&dir.join(file), &w.workload, a, m)?;
            add(caption, file);
        }
    }
    // Lines per run: the policies, then the oracle.
    let oracle = w.oracle_run();
    let oracle_name = oracle.map(|o| format!("oracle (fixed:{})", o.size));
    let mut sizes: Vec<(&str, &[SizePoint])> = w
        .policies
        .iter()
        .map(|r| (r.executor.as_str(), &r.size_series[..]))
        .collect();
    let mut records: Vec<(&str, &[TaskRecord])> = w
        .policies
        .iter()
        .map(|r| (r.executor.as_str(), &r.records[..]))
        .collect();
    if let (Some(o), Some(n)) = (oracle, &oracle_name) {
        sizes.push((n.as_str(), &o.result.size_series[..]));
        records.push((n.as_str(), &o.result.records[..]));
    }
    if !sizes.is_empty() {
        plot::size_chart(&dir.join("size.svg"), &w.workload, &sizes)?;
        add("pool size over time", "size.svg");
        plot::ccdf_chart(&dir.join("wait-ccdf.svg"), &w.workload, &records)?;
        add(
            "wait time CCDF (share of tasks waiting longer than x)",
            "wait-ccdf.svg",
        );
    }
    write_csv(
        &dir.join("size_series.csv"),
        &["policy", "t_ms", "live", "target"],
        sizes.iter().flat_map(|(name, s)| {
            s.iter().map(move |p| {
                vec![
                    name.to_string(),
                    format!("{:.3}", p.t_ms),
                    p.live.to_string(),
                    p.target.map_or(String::new(), |t| t.to_string()),
                ]
            })
        }),
    )?;
    write_csv(
        &dir.join("decisions.csv"),
        &[
            "policy",
            "t_ms",
            "trigger",
            "old_target",
            "new_target",
            "reason",
        ],
        w.policies.iter().flat_map(|r| {
            r.decisions.iter().map(move |d| {
                vec![
                    r.executor.clone(),
                    format!("{:.3}", d.t_ms),
                    d.trigger.clone(),
                    d.old_target.to_string(),
                    d.new_target.to_string(),
                    d.reason.clone(),
                ]
            })
        }),
    )?;
    Ok(f)
}

/// The CSV columns of a [`Headline`], in the order of [`headline_cells`].
const HEADLINE_COLUMNS: [&str; 9] = [
    "throughput",
    "mean_wait_us",
    "p99_wait_us",
    "mean_submit_blocked_us",
    "p99_submit_blocked_us",
    "mean_turnaround_us",
    "p99_turnaround_us",
    "threads_created",
    "avg_threads",
];

/// A [`Headline`]'s cells for the [`HEADLINE_COLUMNS`].
fn headline_cells(h: &Headline) -> [String; 9] {
    let f = |v: f64| format!("{v:.3}");
    [
        f(h.throughput),
        f(h.mean_wait_us),
        f(h.p99_wait_us),
        f(h.mean_submit_blocked_us),
        f(h.p99_submit_blocked_us),
        f(h.mean_turnaround_us),
        f(h.p99_turnaround_us),
        h.threads_created.to_string(),
        f(h.avg_threads),
    ]
}

/// `compare.csv`: one row per workload × (oracle + policy) of each given
/// run of the plan; a leading `repeat` column when they are numbered.
fn compare_csv(path: &Path, runs: &[(Option<usize>, &SuiteComparison)]) -> anyhow::Result<PathBuf> {
    let o = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    let numbered = runs.iter().any(|(n, _)| n.is_some());
    let mut header = Vec::new();
    if numbered {
        header.push("repeat");
    }
    header.extend(["workload", "policy"]);
    header.extend(HEADLINE_COLUMNS);
    header.extend([
        "throughput_vs_oracle",
        "turnaround_vs_oracle",
        "p99_wait_vs_oracle",
        "p99_turnaround_vs_oracle",
    ]);
    let rows = runs.iter().flat_map(|(n, suite)| {
        suite.workloads.iter().flat_map(move |c| {
            let row = move |label: String, h: &Headline, vs: [String; 4]| {
                let mut cells: Vec<String> = n.iter().map(usize::to_string).collect();
                cells.extend([c.workload.clone(), label]);
                cells.extend(headline_cells(h));
                cells.extend(vs);
                cells
            };
            let oracle = c.oracle.iter().map(move |r| {
                let label = format!("oracle:fixed:{}", r.size);
                row(
                    label,
                    &r.headline,
                    ["1".into(), "1".into(), "1".into(), "1".into()],
                )
            });
            oracle.chain(c.policies.iter().map(move |p| {
                let vs = [
                    o(p.throughput_vs_oracle),
                    o(p.turnaround_vs_oracle),
                    o(p.p99_wait_vs_oracle),
                    o(p.p99_turnaround_vs_oracle),
                ];
                row(p.policy.clone(), &p.headline, vs)
            }))
        })
    });
    write_csv(path, &header, rows)
}

/// `summary.csv`: one row per policy of each given run of the plan; a
/// leading `repeat` column when they are numbered.
fn summary_csv(path: &Path, runs: &[(Option<usize>, &SuiteComparison)]) -> anyhow::Result<PathBuf> {
    let o = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    let numbered = runs.iter().any(|(n, _)| n.is_some());
    let mut header = Vec::new();
    if numbered {
        header.push("repeat");
    }
    header.extend([
        "policy",
        "workloads",
        "geomean_throughput_vs_oracle",
        "geomean_turnaround_vs_oracle",
        "geomean_p99_wait_vs_oracle",
        "threads_created",
        "avg_threads",
        "geomean_p99_turnaround_vs_oracle",
    ]);
    let rows = runs.iter().flat_map(|(n, s)| {
        s.summary.iter().map(move |r| {
            let mut cells: Vec<String> = n.iter().map(usize::to_string).collect();
            cells.extend([
                r.policy.clone(),
                r.workloads.to_string(),
                o(r.geomean_throughput_vs_oracle),
                o(r.geomean_turnaround_vs_oracle),
                o(r.geomean_p99_wait_vs_oracle),
                r.threads_created.to_string(),
                format!("{:.2}", r.avg_threads),
                o(r.geomean_p99_turnaround_vs_oracle),
            ]);
            cells
        })
    });
    write_csv(path, &header, rows)
}

/// `median.csv`: one row per workload × (oracle + policy): the medians over
/// repeats of the headline numbers, and median, min and max of each ratio.
fn median_csv(path: &Path, m: &MedianComparison) -> anyhow::Result<PathBuf> {
    let spread = |s: Option<Spread>| -> [String; 3] {
        s.map_or([String::new(), String::new(), String::new()], |s| {
            [
                format!("{:.4}", s.median),
                format!("{:.4}", s.min),
                format!("{:.4}", s.max),
            ]
        })
    };
    let one = || ["1".to_string(), "1".to_string(), "1".to_string()];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for w in &m.workloads {
        if let Some(o) = &w.oracle {
            let mut r = vec![
                w.workload.clone(),
                format!("oracle:{}", fmt_oracle_sizes(Some(o)).replace(", ", "/")),
                o.sizes.len().to_string(),
            ];
            r.extend(headline_cells(&o.headline));
            r.extend(one().into_iter().chain(one()).chain(one()).chain(one()));
            rows.push(r);
        }
        for p in &w.policies {
            let mut r = vec![w.workload.clone(), p.policy.clone(), p.repeats.to_string()];
            r.extend(headline_cells(&p.headline));
            r.extend(spread(p.throughput_vs_oracle));
            r.extend(spread(p.turnaround_vs_oracle));
            r.extend(spread(p.p99_wait_vs_oracle));
            r.extend(spread(p.p99_turnaround_vs_oracle));
            rows.push(r);
        }
    }
    let mut header = vec!["workload", "policy", "repeats"];
    header.extend(HEADLINE_COLUMNS);
    header.extend([
        "throughput_vs_oracle",
        "throughput_vs_oracle_min",
        "throughput_vs_oracle_max",
        "turnaround_vs_oracle",
        "turnaround_vs_oracle_min",
        "turnaround_vs_oracle_max",
        "p99_wait_vs_oracle",
        "p99_wait_vs_oracle_min",
        "p99_wait_vs_oracle_max",
        "p99_turnaround_vs_oracle",
        "p99_turnaround_vs_oracle_min",
        "p99_turnaround_vs_oracle_max",
    ]);
    write_csv(path, &header, rows)
}

/// Today's date (UTC) as `YYYY-MM-DD`.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date((secs / 86_400) as i64)
}

/// Days since 1970-01-01 to `YYYY-MM-DD` (Howard Hinnant's algorithm).
pub fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The text of `report.md`. `suite` is the comparison of `runs` (the last
/// kept repeat when `repeated` is given); with `repeated`, the tables are
/// medians over its repeats.
pub fn markdown(
    runs: &[WorkloadRuns],
    suite: &SuiteComparison,
    repeated: Option<&RepeatedComparison>,
    files: &[WorkloadFiles],
    command: &str,
    figure: Option<&str>,
) -> String {
    let cores = tidepool::sys::cores();
    let load = tidepool::sys::load_average().map_or("-".into(), |l| {
        format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2])
    });
    let mut md = String::new();
    md.push_str("# tidepool policy comparison\n\n");
    md.push_str(&format!(
        "Command: `{command}`  \nDate: {} · {cores} cores · load average at the end: {load}\n\n",
        today()
    ));
    let grid = match repeated {
        Some(r) => BarGrid::of_medians(&r.median),
        None => BarGrid::of_run(&suite.workloads),
    };
    md.push_str(&verdict_paragraph(&grid));
    md.push_str("\n\n");
    if let Some(f) = figure {
        md.push_str(&format!(
            "![summary: p99 turnaround vs the oracle and threads created, per policy and workload]({f})\n\n\
             *Top: p99 turnaround over the oracle's (log scale; 1 = as good as the best static \
             size; the dashed line is the bar, {MAX_P99_TURNAROUND_VS_ORACLE}×). Bottom: threads \
             created (log scale).*\n\n"
        ));
    }
    md.push_str(TERMS);
    let tolerance = suite
        .workloads
        .iter()
        .find_map(|w| w.sweep.as_ref().map(|a| a.tolerance))
        .unwrap_or(0.05);
    md.push_str(&format!(
        "Each workload was first replayed on static pools of several sizes (the sweep); the \
         **oracle** is the best static size (within {:.0}% of the best throughput, lowest mean \
         turnaround). Then every policy replayed the same trace. Ratios: throughput / oracle \
         throughput (higher is better), mean turnaround / oracle's, p99 turnaround / oracle's \
         and p99 wait / oracle's (lower is better; p99s floored at 1 µs); 1.00 is as good as \
         the oracle. p99 wait alone rewards a pool that starts tasks early but then runs them \
         slower (oversubscribed); the p99 turnaround is what a user waits for. Field definitions: \
         `docs/metrics.md` and `docs/cli.md` in the tidepool repository.\n\n",
        tolerance * 100.0
    ));
    match repeated {
        Some(r) => {
            md.push_str(&repeats_intro(r));
            if let Some(note) = r.stop_note() {
                md.push_str(&format!("**{note}.**\n\n"));
            }
        }
        None if suite.cancelled => md.push_str("**Stopped by Ctrl-C: partial results.**\n\n"),
        None => {}
    }
    if suite.workloads.len() > 1 {
        md.push_str(&summary_section(suite, repeated.map(|r| &r.median)));
    }
    md.push_str(&bar_section(suite, repeated.map(|r| &r.median)));
    for (i, ((w, c), f)) in runs.iter().zip(&suite.workloads).zip(files).enumerate() {
        md.push_str(&format!("## {}\n\n", w.workload));
        let t = &w.trace;
        md.push_str(&format!(
            "{} tasks over {:.2} s ({:.0} tasks/s), mean service {:.0} µs ({:.0} µs compute, {:.0} µs blocked), offered {:.2} cores.\n\n",
            t.tasks, t.span_s, t.arrival_rate, t.mean_exec_us, t.mean_cpu_us, t.mean_blocked_us, t.offered_cores
        ));
        match repeated.and_then(|r| r.median.workloads.get(i).map(|m| (r, m))) {
            Some((r, m)) => {
                md.push_str(&format!(
                    "### Policies: median over {}\n\nOracle per repeat: {}. Ratios: median (min–max) of the per-repeat ratios.\n\n",
                    fmt_repeats(r.median.repeats),
                    fmt_oracle_sizes(m.oracle.as_ref())
                ));
                md.push_str(&median_policy_table(m).markdown());
                if r.median.workloads.len() == 1 {
                    md.push_str(p99_turnaround_caption(true));
                    md.push_str(&median_matrix_table(&r.median, Ratio::P99Turnaround).markdown());
                }
            }
            None => {
                md.push_str("### Policies\n\n");
                md.push_str(&policy_table(c).markdown());
                if suite.workloads.len() == 1 {
                    md.push_str(p99_turnaround_caption(false));
                    md.push_str(
                        &matrix_table(&suite.workloads, &suite.summary, Ratio::P99Turnaround)
                            .markdown(),
                    );
                }
            }
        }
        if let Some(a) = &w.analysis {
            md.push_str(match repeated {
                Some(_) => "\n### Static sweep (last repeat)\n\n",
                None => "\n### Static sweep\n\n",
            });
            md.push_str(&sweep_table(a).markdown());
            md.push_str("\n```text\n");
            md.push_str(&verdict(a));
            md.push_str("```\n");
        }
        md.push_str(&format!(
            "\nData{}: [sweep.csv]({d}/sweep.csv), [size_series.csv]({d}/size_series.csv), [decisions.csv]({d}/decisions.csv)\n\n",
            if repeated.is_some() { " and plots (last repeat)" } else { "" },
            d = f.dir
        ));
        for (caption, path) in &f.plots {
            md.push_str(&format!("![{caption}]({path})\n"));
        }
        md.push('\n');
    }
    md
}

/// The words the report uses, explained once near the top.
const TERMS: &str = "**Terms.** *Oracle*: the best static pool size found by sweeping \
fixed sizes on the same trace. *Turnaround*: submission to completion, what a client \
waits for; *wait* (the papers' idle time): time in the queue before a worker takes the \
task. *AIT*: average idle time, Xu & Bode's mean wait; *RAIT*: AIT at the smallest swept \
size over AIT at this size, rising as the pool gets big enough. *p99*: the 99th \
percentile. *Bar*: throughput ≥ 0.97 of the oracle's and p99 turnaround ≤ 1.2× the \
oracle's on a workload. *Threads created*: threads the pool spawned during the run; \
*avg threads*: live threads sampled every 1 ms (Oh & Kim's threads kept). *CCDF*: the \
share of tasks that waited longer than x; on log axes the tail is visible.\n\n";

/// The caption above the p99 turnaround table of a one-workload report
/// (with several workloads that table is in the summary).
fn p99_turnaround_caption(over_repeats: bool) -> &'static str {
    if over_repeats {
        "\np99 turnaround relative to the oracle, median over repeats (lower is better):\n\n"
    } else {
        "\np99 turnaround relative to the oracle (lower is better):\n\n"
    }
}

/// How the repeats were run and combined.
fn repeats_intro(r: &RepeatedComparison) -> String {
    format!(
        "**Repeats.** {n} of the whole comparison are combined here ({complete} of {asked} \
         asked for ran to the end{kept}). Each repeat swept every workload again and found its own oracle, \
         and every ratio was computed against that repeat's oracle. Tables give the median \
         over repeats of each number and, for ratios, `median (min–max)`; the summary takes \
         the geometric means across workloads in each repeat, then their median (min–max). \
         Static sweep tables, plots and the CSV files in each workload's folder are from the \
         last repeat. `compare.json` holds every repeat and the medians, `compare.csv` every \
         repeat's rows, `median.csv` the medians.\n\n",
        n = fmt_repeats(r.median.repeats),
        complete = r.repeats_complete,
        asked = r.repeats_requested,
        kept = if r.dropped_partial_repeat {
            "; an interrupted repeat was dropped"
        } else {
            ""
        },
    )
}

/// `## Summary`: geometric means across workloads (over repeats when
/// `median` is given), and the workload × policy matrices.
fn summary_section(suite: &SuiteComparison, median: Option<&MedianComparison>) -> String {
    let mut md = String::from("## Summary\n\n");
    match median {
        Some(m) => {
            md.push_str(&format!(
                "Geometric means across workloads in each repeat, median (min–max) over {} (threads created: summed over workloads):\n\n",
                fmt_repeats(m.repeats)
            ));
            md.push_str(&median_summary_table(&m.summary).markdown());
            md.push_str("\nMean turnaround relative to the oracle, per workload, median over repeats (lower is better):\n\n");
            md.push_str(&median_matrix_table(m, Ratio::Turnaround).markdown());
            md.push_str("\np99 turnaround relative to the oracle, per workload, median over repeats (lower is better):\n\n");
            md.push_str(&median_matrix_table(m, Ratio::P99Turnaround).markdown());
            md.push_str("\nThroughput relative to the oracle, per workload, median over repeats (below 1: the pool fell behind the arrivals):\n\n");
            md.push_str(&median_matrix_table(m, Ratio::Throughput).markdown());
        }
        None => {
            md.push_str("Geometric means across workloads:\n\n");
            md.push_str(&summary_table(&suite.summary).markdown());
            md.push_str(
                "\nMean turnaround relative to the oracle, per workload (lower is better):\n\n",
            );
            md.push_str(
                &matrix_table(&suite.workloads, &suite.summary, Ratio::Turnaround).markdown(),
            );
            md.push_str(
                "\np99 turnaround relative to the oracle, per workload (lower is better):\n\n",
            );
            md.push_str(
                &matrix_table(&suite.workloads, &suite.summary, Ratio::P99Turnaround).markdown(),
            );
            md.push_str("\nThroughput relative to the oracle, per workload (below 1: the pool fell behind the arrivals):\n\n");
            md.push_str(
                &matrix_table(&suite.workloads, &suite.summary, Ratio::Throughput).markdown(),
            );
        }
    }
    md.push('\n');
    md
}

/// `## Bar`: per policy and workload, throughput ≥ 97% of the oracle's and
/// p99 turnaround ≤ 1.2× the oracle's (on the medians when `median` is given).
fn bar_section(suite: &SuiteComparison, median: Option<&MedianComparison>) -> String {
    let (grid, of) = match median {
        Some(m) => (
            BarGrid::of_medians(m),
            format!(" (medians over {})", fmt_repeats(m.repeats)),
        ),
        None => (BarGrid::of_run(&suite.workloads), String::new()),
    };
    format!(
        "## Bar\n\nPer workload: throughput vs oracle (✓ when ≥ {:.2}) · p99 turnaround vs oracle \
         (✓ when ≤ {:.1}){of}. `both met` counts the workloads where both hold.\n\n{}\n",
        MIN_THROUGHPUT_VS_ORACLE,
        MAX_P99_TURNAROUND_VS_ORACLE,
        bar_table(&grid).markdown()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(19_723), "2024-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(today().len(), 10);
    }
}
