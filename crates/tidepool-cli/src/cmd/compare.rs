//! `tidepool compare`: several policies on one or more workloads, side by
//! side with the sweep's best static size (the oracle).

use std::path::{Path, PathBuf};

use clap::Args;
use tidepool::policy::PolicySpec;

use super::sweep::run_sweep;
use super::ReplayArgs;
use crate::comparison::{
    matrix_table, policy_table, summarize, summary_table, Ratio, SuiteComparison,
    WorkloadComparison, WorkloadRuns,
};
use crate::error::{usage, Interrupted};
use crate::exec::{self, Settings};
use crate::lists::{self, PolicyList, Sizes};
use crate::progress::Reporter;
use crate::source::{self, Workload};
use crate::{cancel, print, report};

/// The policies `compare` runs when none are given.
pub const DEFAULT_POLICIES: &str = "auto,xu-bode,hisdyn,watermark,frequency,hill-climb,tpr";

const EXAMPLES: &str = "\
Examples:
  tidepool compare --workload cpu
  tidepool compare --workload io --scale 0.25 --policies auto,xu-bode,hisdyn --sizes 4..64:x2
  tidepool compare --workload suite --scale 0.25 --out report/     # all six, with a summary
  tidepool compare -w mixed -w 'poisson:rate=3000,service=exp:300us,n=3000,free=80' --json

Each workload is first swept over --sizes on static pools; the oracle is the best static
size (the in-band size with the lowest mean turnaround, see `tidepool sweep --help`).
Then every policy runs the same trace. `vs oracle` is throughput / oracle throughput
(higher is better) and mean turnaround / oracle turnaround (lower is better). With
several workloads a summary gives each policy's geometric mean across them.
--json prints one object (docs/cli.md); --out DIR writes report.md, compare.json,
compare.csv, per-workload sweep CSVs and SVG plots.";

/// Options of `tidepool compare`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct CompareArgs {
    /// Workload: suite name, generator spec or trace file; repeat, list with
    /// commas, or `suite` for all six.
    #[arg(long, short, value_name = "NAME_OR_SPEC", required = true)]
    pub workload: Vec<String>,
    /// Policy specs, comma-separated (repeatable).
    #[arg(long, short, value_name = "SPECS", default_value = DEFAULT_POLICIES, value_parser = lists::parse_policy_list)]
    pub policies: Vec<PolicyList>,
    /// Static pool sizes swept to find the oracle.
    #[arg(long, short, value_name = "SIZES", default_value = "1,2,4,8,16,32", value_parser = lists::parse_sizes)]
    pub sizes: Sizes,
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
}

impl Plan {
    /// Number of replays the plan makes.
    pub fn runs(&self) -> usize {
        self.workloads
            .iter()
            .map(|(_, s)| s.len() + self.policies.len())
            .sum()
    }
}

/// Run a plan: per workload, the sweep, then each policy. Stops early on
/// Ctrl-C, returning what was measured.
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
}

/// Print the comparison (tables or JSON) and write the report folder.
pub fn present(runs: &[WorkloadRuns], how: &Present<'_>) -> anyhow::Result<()> {
    let comps: Vec<WorkloadComparison> = runs.iter().map(WorkloadComparison::from_runs).collect();
    let summary = summarize(&comps);
    let suite = SuiteComparison {
        workloads: comps,
        summary,
        cancelled: cancel::requested(),
    };
    if let Some(dir) = how.out {
        let md = report::write(dir, runs, &suite, &how.command)?;
        if !how.quiet {
            eprintln!("report written to {}", md.display());
        }
    }
    if how.json {
        let text = if suite.workloads.len() == 1 {
            serde_json::to_string(&suite.workloads[0])?
        } else {
            serde_json::to_string(&suite)?
        };
        print(&format!("{text}\n"));
    } else {
        print(&text_report(&suite));
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
        out.push_str(&policy_table(c).render());
        out.push('\n');
    }
    if s.workloads.len() > 1 {
        out.push_str("== summary: geometric means across workloads (throughput: higher is better; turnaround, p99 wait: lower is better; 1.000 = the oracle) ==\n");
        out.push_str(&summary_table(&s.summary).render());
        out.push_str("\n== mean turnaround vs oracle, per workload ==\n");
        out.push_str(&matrix_table(&s.workloads, &s.summary, Ratio::Turnaround).render());
    }
    if s.cancelled {
        out.push_str("\n(stopped by Ctrl-C: partial results)\n");
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
    let names = source::expand(&a.workload);
    if names.is_empty() {
        return Err(usage("no workload given"));
    }
    let workloads = names
        .iter()
        .map(|n| source::load(n, a.scale).map(|w| (w, a.sizes.0.clone())))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let plan = Plan {
        workloads,
        policies: a.policies.into_iter().flat_map(|l| l.0).collect(),
        tolerance: a.tolerance,
    };
    let _ = cancel::flag();
    let mut rep = Reporter::new(a.replay.quiet, plan.runs());
    let runs = run_plan(&plan, &settings, &mut rep)?;
    rep.finish();
    present(
        &runs,
        &Present {
            json: a.json,
            out: a.out.as_deref(),
            command: command_line(),
            quiet: a.replay.quiet,
        },
    )?;
    if cancel::requested() {
        return Err(Interrupted.into());
    }
    Ok(())
}
