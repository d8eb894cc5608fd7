//! `tidepool demo`: the main job on built-in defaults — the six suite
//! workloads at a short scale, against the main policies and the oracle of a
//! small per-workload sweep, with a report folder of tables and plots.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use tidepool_workload::suite::SUITE;

use super::compare::{command_line, present, run_repeats, Plan, Present};
use super::RepeatArgs;
use crate::error::{usage, Interrupted};
use crate::exec::Settings;
use crate::lists::{self, PolicyList};
use crate::progress::Reporter;
use crate::{cancel, source};

/// The policies the demo compares.
pub const DEMO_POLICIES: &str = "auto,xu-bode,hisdyn,watermark,frequency,hill-climb";

/// Static sizes swept per suite workload: around each one's best size, four
/// or five runs each so the whole demo stays near two to three minutes.
pub const DEMO_SIZES: [(&str, &[usize]); 6] = [
    ("cpu", &[1, 2, 4, 8]),
    ("io", &[8, 16, 32, 64]),
    ("mixed", &[2, 4, 8, 16]),
    ("steps", &[2, 4, 8, 16]),
    ("bursty", &[2, 4, 8, 16, 32]),
    ("azure", &[2, 4, 8, 16, 32]),
];

const EXAMPLES: &str = "\
Examples:
  tidepool demo                               # about 2-3 minutes, report in tidepool-report/
  tidepool demo --out /tmp/report --scale 0.1 # quicker, noisier
  tidepool demo --policies auto,xu-bode,tpr   # other policies
  tidepool demo --repeats 3                   # about 7 minutes, medians over 3 runs

Runs the six suite workloads (cpu, io, mixed, steps, bursty, azure) at --scale, each
swept on a few static sizes (cpu 1,2,4,8; io 8..64; mixed and steps 2..16; bursty and
azure 2..32) to find the oracle, then against each policy. Writes report.md (tables and
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
    /// Length factor of the suite workloads (1.0 ≈ 7-8 s per run).
    #[arg(long, value_name = "X", default_value_t = 0.25)]
    pub scale: f64,
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
    if !(a.scale.is_finite() && a.scale > 0.0 && a.scale <= 2.0) {
        return Err(usage(format!(
            "--scale {} must be in (0, 2] (0.25 takes about 2-3 minutes)",
            tidepool_workload::limits::shown_f64(a.scale)
        )));
    }
    crate::output::check_out_dir(&a.out)?;
    let workloads = SUITE
        .iter()
        .map(|name| {
            let sizes = DEMO_SIZES
                .iter()
                .find(|(n, _)| n == name)
                .map_or(&[1usize, 2, 4, 8, 16, 32][..], |(_, s)| s);
            source::load(name, a.scale).map(|w| (w, sizes.to_vec()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let plan = Plan {
        workloads,
        policies: a.policies.into_iter().flat_map(|l| l.0).collect(),
        tolerance: 0.05,
        repeats: a.repeat.repeats as usize,
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
            a.scale,
            plan.policies.len(),
            match plan.repeats {
                1 => String::new(),
                n => format!(", {n} repeats"),
            },
            plan.runs(),
            (8.0 * a.scale).max(0.5)
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
