//! `tidepool demo`: the main job on built-in defaults — the twelve suite
//! workloads at a short scale, against the main policies and the oracle of a
//! small per-workload sweep, with a report folder of tables and plots.
//! `--full` runs the whole suite at a longer scale with each workload's full
//! sweep and repeats.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use tidepool_workload::suite::{sweep_sizes, SUITE};

use super::compare::{command_line, present, run_repeats, Plan, Present};
use super::RepeatArgs;
use crate::error::{usage, Interrupted};
use crate::exec::Settings;
use crate::lists::{self, PolicyList};
use crate::progress::Reporter;
use crate::{cancel, source};

/// The policies the demo compares.
pub const DEMO_POLICIES: &str = "auto,xu-bode,hisdyn,watermark,frequency,hill-climb";

/// Static sizes swept per suite workload in the quick demo: three around
/// each one's best size (measured with the full sweeps), so the whole demo
/// stays within about four minutes on a 2-core machine.
pub const DEMO_SIZES: [(&str, &[usize]); 12] = [
    ("cpu", &[1, 2, 4]),
    ("io", &[16, 32, 64]),
    ("mixed", &[4, 8, 16]),
    ("steps", &[4, 8, 16]),
    ("bursty", &[8, 16, 32]),
    ("azure", &[4, 8, 16]),
    ("sat100", &[16, 32, 64]),
    ("sat50", &[4, 8, 16]),
    ("sat10", &[2, 3, 4]),
    ("closed", &[16, 32, 64]),
    ("overload", &[2, 3, 4]),
    ("shift", &[8, 16, 32]),
];

/// Scale of the quick demo.
pub const DEMO_SCALE: f64 = 0.15;

/// Scale of `demo --full`.
pub const FULL_SCALE: f64 = 0.5;

/// Repeats of `demo --full` unless `--repeats` asks for more than one.
pub const FULL_REPEATS: u32 = 5;

const EXAMPLES: &str = "\
Examples:
  tidepool demo                               # 2–4 minutes, report in tidepool-report/
  tidepool demo --out /tmp/report --scale 0.1 # quicker, noisier
  tidepool demo --policies auto,xu-bode,tpr   # other policies
  tidepool demo --repeats 3                   # medians over 3 runs
  tidepool demo --full                        # the whole suite, full sweeps, 5 repeats (about an hour)

Runs the twelve suite workloads (cpu, io, mixed, steps, bursty, azure, and the six where
size decides throughput: sat100, sat50, sat10, closed, overload, shift) at --scale
(default 0.15), each swept on three static sizes around its best one to find the oracle,
then against each policy. --full uses scale 0.5, each workload's full sweep (up to 128
threads where it can use them, see `tidepool compare --help`) and 5 repeats unless
--repeats asks for more than one. Writes report.md (tables and
plots), compare.json, compare.csv, summary.csv and per-workload folders of SVG plots and
CSVs. Runs that do not drain within 15 s of their last arrival are cut short (marked
`stopped`). Same as `tidepool compare --workload suite` with these sizes. --repeats N
runs all of it N times (each repeat with its own sweep and oracle) and reports the
median over repeats of every number, with the min–max of the ratios to the oracle.";

/// Options of `tidepool demo`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct DemoArgs {
    /// Report folder.
    #[arg(long, value_name = "DIR", default_value = "tidepool-report")]
    pub out: PathBuf,
    /// Length factor of the suite workloads (1.0 ≈ 6-8 s per run) [default:
    /// 0.15, or 0.5 with --full]
    #[arg(long, value_name = "X")]
    pub scale: Option<f64>,
    /// The whole suite: longer runs, each workload's full sweep, 5 repeats.
    #[arg(long)]
    pub full: bool,
    /// Policies to compare.
    #[arg(long, short, value_name = "SPECS", default_value = DEMO_POLICIES, value_parser = lists::parse_policy_list)]
    pub policies: Vec<PolicyList>,
    /// Print the comparison as JSON on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Repeats.
    #[command(flatten)]
    pub repeat: RepeatArgs,
    /// No progress output on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Run `tidepool demo`.
pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    let scale = a
        .scale
        .unwrap_or(if a.full { FULL_SCALE } else { DEMO_SCALE });
    if !(scale.is_finite() && scale > 0.0 && scale <= 2.0) {
        return Err(usage(format!(
            "--scale {} must be in (0, 2] (0.15 takes 2–4 minutes)",
            tidepool_workload::limits::shown_f64(scale)
        )));
    }
    crate::output::check_out_dir(&a.out)?;
    let repeats = match a.repeat.repeats {
        1 if a.full => FULL_REPEATS,
        n => n,
    };
    let workloads = SUITE
        .iter()
        .map(|name| {
            let sizes = if a.full {
                sweep_sizes(name)
            } else {
                DEMO_SIZES
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(sweep_sizes(name), |(_, s)| s)
            };
            source::load(name, scale).map(|w| (w, sizes.to_vec()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let plan = Plan {
        workloads,
        policies: a.policies.into_iter().flat_map(|l| l.0).collect(),
        tolerance: 0.05,
        repeats: repeats as usize,
    };
    let settings = Settings {
        drain_timeout: Some(Duration::from_secs(15)),
        ..Settings::default()
    };
    let _ = cancel::flag();
    if !a.quiet {
        eprintln!(
            "tidepool demo: {} workloads at scale {}, {} policies + a static sweep each{}: {} runs of about {:.0} s; Ctrl-C stops and still writes the report",
            plan.workloads.len(),
            scale,
            plan.policies.len(),
            match plan.repeats {
                1 => String::new(),
                n => format!(", {n} repeats"),
            },
            plan.runs(),
            (8.0 * scale).max(0.5)
        );
    }
    let start = Instant::now();
    let mut rep = Reporter::new(a.quiet, plan.runs());
    let measured = run_repeats(&plan, &settings, &mut rep)?;
    rep.finish();
    present(
        measured,
        &Present {
            json: a.json,
            out: Some(&a.out),
            command: command_line(),
            quiet: a.quiet,
            repeats: plan.repeats,
        },
    )?;
    if !a.quiet {
        eprintln!(
            "demo took {:.0} s; open {} for the tables and plots",
            start.elapsed().as_secs_f64(),
            a.out.join("report.md").display()
        );
    }
    if cancel::requested() {
        return Err(Interrupted.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_suite_workload_has_demo_sizes() {
        for name in SUITE {
            assert!(DEMO_SIZES.iter().any(|(n, _)| *n == name), "{name}");
        }
        assert!(lists::parse_policy_list(DEMO_POLICIES).is_ok());
    }
}
