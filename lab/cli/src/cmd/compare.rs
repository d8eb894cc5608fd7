//! `tidepool compare`: several policies on one or more workloads, side by
//! side with the sweep's best static size (the oracle).

use std::path::{Path, PathBuf};

use clap::Args;
use tidepool::policy::PolicySpec;
use tidepool_workload::compare::verdict::verdict;
use tidepool_workload::compare::BarGrid;
use tidepool_workload::suite::sweep_sizes;

use super::sweep::run_sweep;
use super::{RepeatArgs, ReplayArgs};
use crate::comparison::{
    matrix_table, policy_table, summary_table, CompareJson, Ratio, SuiteComparison, WorkloadRuns,
};
use crate::error::{usage, Interrupted};
use crate::exec::{self, Settings};
use crate::lists::{self, PolicyList, Sizes};
use crate::progress::Reporter;
use crate::repeats::{
    fmt_oracle_sizes, fmt_repeats, median_matrix_table, median_policy_table, median_summary_table,
    RepeatedComparison,
};
use crate::source::{self, Workload};
use crate::{cancel, print, report};

/// The policies `compare` runs when none are given.
pub const DEFAULT_POLICIES: &str = "auto,xu-bode,hisdyn,watermark,frequency,hill-climb,tpr";

const EXAMPLES: &str = "\
Examples:
  tidepool compare --workload cpu
  tidepool compare --workload io --scale 0.25 --policies auto,xu-bode,hisdyn --sizes 4..64:x2
  tidepool compare --workload suite --scale 0.25 --out report/     # all twelve, with a summary
  tidepool compare -w mixed -w 'poisson:rate=3000,service=exp:300us,n=3000,free=80' --json
  tidepool compare -w cpu,io --scale 0.25 --repeats 3    # medians (min–max) over 3 runs

Each workload is first swept over --sizes on static pools (by default each suite
workload's own sizes, reaching past the policies' max of 100 where the workload can use
that many threads, and 1,2,4,...,128 otherwise); the oracle is the best static
size (the in-band size with the lowest mean turnaround, see `tidepool sweep --help`).
Then every policy runs the same trace. `vs oracle` is throughput / oracle throughput
(higher is better), p99 wait / oracle p99 wait (both floored at 1 µs) and mean
turnaround / oracle turnaround (lower is better); a last table gives p99 turnaround /
oracle p99 turnaround (both floored at 1 µs) per workload, since p99 wait alone rewards
a pool that starts tasks early but runs them slower (oversubscribed). With
several workloads a summary gives each policy's geometric mean across them.
--repeats N runs all of that N times; each repeat finds its own oracle and computes its
own ratios, and the tables show the median over repeats (ratios as median (min–max)).
--json prints one object (docs/cli.md); --out DIR writes report.md, compare.json,
compare.csv, per-workload sweep CSVs and SVG plots.";

/// Options of `tidepool compare`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct CompareArgs {
    /// Workload: suite name, generator spec or trace file; repeat, list with
    /// commas, or `suite` for all twelve.
    #[arg(long, short, value_name = "NAME_OR_SPEC", required = true)]
    pub workload: Vec<String>,
    /// Policy specs, comma-separated (repeatable).
    #[arg(long, short, value_name = "SPECS", default_value = DEFAULT_POLICIES, value_parser = lists::parse_policy_list)]
    pub policies: Vec<PolicyList>,
    /// Static pool sizes swept to find the oracle [default: each suite
    /// workload's own sizes, up to 128 where it can use that many threads;
    /// 1,2,4,...,128 for other workloads]
    #[arg(long, short, value_name = "SIZES", value_parser = lists::parse_sizes)]
    pub sizes: Option<Sizes>,
    /// Throughput band of the sweep's safe zone (fraction of the best).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.05)]
    pub tolerance: f64,
    /// Length factor for suite workloads.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub scale: f64,
    /// Print one JSON object on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Write a report folder (report.md, JSON, CSV, SVG plots).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Repeats.
    #[command(flatten)]
    pub repeat: RepeatArgs,
    /// Replay and pool options.
    #[command(flatten)]
    pub replay: ReplayArgs,
}

/// What to run: each workload with its sweep sizes, and the policies.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Workloads and the static sizes swept on each.
    pub workloads: Vec<(Workload, Vec<usize>)>,
    /// Policies run on every workload.
    pub policies: Vec<PolicySpec>,
    /// Safe-zone tolerance.
    pub tolerance: f64,
    /// How many times the whole plan runs (`--repeats`).
    pub repeats: usize,
}

impl Plan {
    /// Number of replays in one repeat of the plan.
    pub fn runs_per_repeat(&self) -> usize {
        self.workloads
            .iter()
            .map(|(_, s)| s.len() + self.policies.len())
            .sum()
    }

    /// Number of replays the plan makes, over all repeats.
    pub fn runs(&self) -> usize {
        self.runs_per_repeat() * self.repeats
    }
}

/// One repeat of a plan: per workload, the sweep, then each policy. Stops
/// early on Ctrl-C, returning what was measured.
pub fn run_plan(
    plan: &Plan,
    settings: &Settings,
    rep: &mut Reporter,
) -> anyhow::Result<Vec<WorkloadRuns>> {
    let mut out = Vec::new();
    for (w, sizes) in &plan.workloads {
        if cancel::requested() {
            break;
        }
        let sweep = run_sweep(w, sizes, settings, plan.tolerance, rep)?;
        let mut policies = Vec::new();
        for spec in &plan.policies {
            if cancel::requested() {
                break;
            }
            let label = format!("{} · {}", w.label, spec);
            policies.push(exec::run_reported(w, spec, &label, settings, rep)?);
        }
        if let Some(a) = &sweep.analysis {
            rep.note(&format!(
                "{}: oracle fixed:{}, safe zone {}..{}",
                w.label, a.oracle_size, a.safe_zone.0, a.safe_zone.1
            ));
        }
        out.push(WorkloadRuns {
            workload: w.label.clone(),
            trace: w.trace.stats(),
            sweep: sweep.runs,
            analysis: sweep.analysis,
            policies,
        });
    }
    Ok(out)
}

/// What the repeats of a plan measured.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// The comparison of each kept repeat, in order: the complete ones and,
    /// when Ctrl-C cut the first repeat short, that partial one.
    pub repeats: Vec<SuiteComparison>,
    /// Every run of the last kept repeat (for plots, sweep tables and CSVs);
    /// earlier repeats keep only their comparison.
    pub last_runs: Vec<WorkloadRuns>,
    /// Repeats that ran to the end.
    pub complete: usize,
    /// True when Ctrl-C cut a later repeat short and it was left out.
    pub dropped_partial: bool,
}

/// Run the plan `plan.repeats` times. On Ctrl-C, stops and keeps the
/// complete repeats; the interrupted repeat is dropped unless it is the first
/// (then it is all there is, and is kept, marked cancelled).
pub fn run_repeats(
    plan: &Plan,
    settings: &Settings,
    rep: &mut Reporter,
) -> anyhow::Result<Measured> {
    let mut m = Measured::default();
    for k in 1..=plan.repeats.max(1) {
        if plan.repeats > 1 {
            rep.note(&format!("repeat {k} of {}", plan.repeats));
        }
        let runs = run_plan(plan, settings, rep)?;
        if !m.add(runs, cancel::requested()) {
            if m.dropped_partial {
                rep.note(&format!(
                    "stopped during repeat {k} of {}: that repeat is dropped, results are over the complete {}",
                    plan.repeats,
                    fmt_repeats(m.complete)
                ));
            }
            break;
        }
    }
    Ok(m)
}

impl Measured {
    /// Add one repeat's runs, `partial` when Ctrl-C cut it short. A partial
    /// repeat is kept only if it is the first; returns whether to go on.
    pub fn add(&mut self, runs: Vec<WorkloadRuns>, partial: bool) -> bool {
        if partial && !self.repeats.is_empty() {
            self.dropped_partial = true;
            return false;
        }
        self.repeats
            .push(SuiteComparison::from_runs(&runs, partial));
        self.last_runs = runs;
        if !partial {
            self.complete += 1;
        }
        !partial
    }
}

/// How to present a comparison.
#[derive(Debug, Clone)]
pub struct Present<'a> {
    /// JSON on stdout instead of tables.
    pub json: bool,
    /// Report folder.
    pub out: Option<&'a Path>,
    /// The command line that produced it, for the report.
    pub command: String,
    /// No notes on stderr.
    pub quiet: bool,
    /// Repeats asked for: with more than one, medians over repeats are shown.
    pub repeats: usize,
}

/// Print the comparison (tables or JSON) and write the report folder. With
/// one repeat asked for, the output is that run's; with more, medians over
/// the kept repeats (even if Ctrl-C left only one).
pub fn present(m: Measured, how: &Present<'_>) -> anyhow::Result<()> {
    let Measured {
        mut repeats,
        last_runs,
        complete,
        dropped_partial,
    } = m;
    let cancelled = cancel::requested();
    if how.repeats <= 1 {
        let mut suite = repeats.pop().unwrap_or_else(|| SuiteComparison {
            workloads: Vec::new(),
            summary: Vec::new(),
            cancelled,
        });
        suite.cancelled = cancelled;
        if let Some(dir) = how.out {
            let md = report::write(dir, &last_runs, &suite, &how.command)?;
            if !how.quiet {
                eprintln!("report written to {}", md.display());
            }
        }
        if how.json {
            let text = serde_json::to_string(&CompareJson::of(&suite))?;
            print(&format!("{text}\n"));
        } else {
            print(&text_report(&suite));
        }
        return Ok(());
    }
    let repeated =
        RepeatedComparison::new(how.repeats, repeats, complete, dropped_partial, cancelled);
    if let Some(dir) = how.out {
        let md = report::write_repeated(dir, &last_runs, &repeated, &how.command)?;
        if !how.quiet {
            eprintln!("report written to {}", md.display());
        }
    }
    if how.json {
        print(&format!("{}\n", serde_json::to_string(&repeated)?));
    } else {
        print(&repeated_text_report(&repeated));
    }
    Ok(())
}

/// The tables printed by `compare` and `demo`.
pub fn text_report(s: &SuiteComparison) -> String {
    let mut out = String::new();
    for c in &s.workloads {
        out.push_str(&format!("== {} ({} tasks)", c.workload, c.tasks));
        if let Some(a) = &c.sweep {
            out.push_str(&format!(
                ": oracle fixed:{}, stable point {}, safe zone {}..{}",
                a.oracle_size, a.stable_point, a.safe_zone.0, a.safe_zone.1
            ));
        }
        out.push_str(" ==\n");
        out.push_str(&policy_table(c).render_for_stdout());
        out.push('\n');
    }
    if s.workloads.len() > 1 {
        out.push_str("== summary: geometric means across workloads (throughput: higher is better; turnaround, p99 wait: lower is better; 1.00 = the oracle) ==\n");
        out.push_str(&summary_table(&s.summary).render_for_stdout());
        out.push_str("\n== mean turnaround vs oracle, per workload ==\n");
        out.push_str(
            &matrix_table(&s.workloads, &s.summary, Ratio::Turnaround).render_for_stdout(),
        );
        out.push('\n');
    }
    if !s.workloads.is_empty() {
        out.push_str("== p99 turnaround vs oracle, per workload (both floored at 1 µs) ==\n");
        out.push_str(
            &matrix_table(&s.workloads, &s.summary, Ratio::P99Turnaround).render_for_stdout(),
        );
    }
    if !s.workloads.is_empty() {
        out.push_str("\n== verdict ==\n");
        out.push_str(&verdict(&BarGrid::of_run(&s.workloads)));
        out.push('\n');
    }
    if s.cancelled {
        out.push_str("\n(stopped by Ctrl-C: partial results)\n");
    }
    out
}

/// The tables printed by `compare` and `demo` with `--repeats N`, N > 1:
/// medians over repeats, ratios as `median (min–max)`.
pub fn repeated_text_report(r: &RepeatedComparison) -> String {
    let m = &r.median;
    let mut out = String::new();
    for w in &m.workloads {
        out.push_str(&format!(
            "== {} ({} tasks): oracle per repeat {}; median (min–max) over {} ==\n",
            w.workload,
            w.tasks,
            fmt_oracle_sizes(w.oracle.as_ref()),
            fmt_repeats(m.repeats)
        ));
        out.push_str(&median_policy_table(w).render_for_stdout());
        out.push('\n');
    }
    if m.workloads.len() > 1 {
        out.push_str(&format!(
            "== summary over {}: geometric means across workloads in each repeat, median (min–max) over repeats (throughput: higher is better; turnaround, p99 wait: lower is better; 1.00 = the oracle) ==\n",
            fmt_repeats(m.repeats)
        ));
        out.push_str(&median_summary_table(&m.summary).render_for_stdout());
        out.push_str("\n== mean turnaround vs oracle, per workload, median over repeats ==\n");
        out.push_str(&median_matrix_table(m, Ratio::Turnaround).render_for_stdout());
        out.push('\n');
    }
    if !m.workloads.is_empty() {
        out.push_str("== p99 turnaround vs oracle, per workload, median over repeats (both floored at 1 µs) ==\n");
        out.push_str(&median_matrix_table(m, Ratio::P99Turnaround).render_for_stdout());
    }
    if !m.workloads.is_empty() {
        out.push_str("\n== verdict ==\n");
        out.push_str(&verdict(&BarGrid::of_medians(m)));
        out.push('\n');
    }
    if let Some(note) = r.stop_note() {
        out.push_str(&format!("\n({note})\n"));
    }
    out
}

/// The command line as typed (program name as `tidepool`), for reports.
pub fn command_line() -> String {
    std::env::args()
        .enumerate()
        .map(|(i, a)| if i == 0 { "tidepool".to_string() } else { a })
        .map(|a| {
            if a.contains([' ', '\'', '"', '*', ';', '&', '|']) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Run `tidepool compare`.
pub fn run(a: CompareArgs) -> anyhow::Result<()> {
    if !(0.0..1.0).contains(&a.tolerance) {
        return Err(usage(format!(
            "--tolerance {} must be a fraction in [0, 1)",
            a.tolerance
        )));
    }
    let settings = a.replay.settings(true)?;
    if let Some(dir) = &a.out {
        crate::output::check_out_dir(dir)?;
    }
    let names = source::expand(&a.workload);
    if names.is_empty() {
        return Err(usage("no workload given"));
    }
    let workloads = names
        .iter()
        .map(|n| {
            let sizes = a
                .sizes
                .as_ref()
                .map_or_else(|| sweep_sizes(n).to_vec(), |s| s.0.clone());
            source::load(n, a.scale).map(|w| (w, sizes))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let plan = Plan {
        workloads,
        policies: a.policies.into_iter().flat_map(|l| l.0).collect(),
        tolerance: a.tolerance,
        repeats: a.repeat.repeats as usize,
    };
    let _ = cancel::flag();
    let mut rep = Reporter::new(a.replay.quiet, plan.runs());
    let measured = run_repeats(&plan, &settings, &mut rep)?;
    rep.finish();
    present(
        measured,
        &Present {
            json: a.json,
            out: a.out.as_deref(),
            command: command_line(),
            quiet: a.replay.quiet,
            repeats: plan.repeats,
        },
    )?;
    if cancel::requested() {
        return Err(Interrupted.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_repeat_is_kept_only_when_it_is_the_first() {
        let mut m = Measured::default();
        assert!(m.add(Vec::new(), false));
        assert!(m.add(Vec::new(), false));
        assert!(!m.add(Vec::new(), true));
        assert_eq!(
            (m.repeats.len(), m.complete, m.dropped_partial),
            (2, 2, true)
        );
        assert!(m.repeats.iter().all(|r| !r.cancelled));

        let mut first = Measured::default();
        assert!(!first.add(Vec::new(), true));
        assert_eq!((first.repeats.len(), first.complete), (1, 0));
        assert!(!first.dropped_partial && first.repeats[0].cancelled);
    }

    #[test]
    fn runs_count_every_repeat() {
        let w = source::load("poisson:rate=1000,n=10,seed=1", 1.0).unwrap();
        let plan = Plan {
            workloads: vec![(w.clone(), vec![1, 2]), (w, vec![4])],
            policies: vec![PolicySpec::parse("auto").unwrap()],
            tolerance: 0.05,
            repeats: 3,
        };
        assert_eq!(plan.runs_per_repeat(), 3 + 2);
        assert_eq!(plan.runs(), 15);
    }
}
