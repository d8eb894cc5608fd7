//! `tidepool sweep`: throughput, RAIT and p99 wait against static pool size;
//! stable point, degradation point, safe zone and oracle (Xu 2004, §6.2.2).

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;
use tidepool::policy::PolicySpec;
use tidepool_workload::analysis::{analyze_sweep, SweepAnalysis, SweepPoint};
use tidepool_workload::sweep::{SizedRun, SweepResult};
use tidepool_workload::TraceStats;

use super::ReplayArgs;
use crate::error::Interrupted;
use crate::exec::{self, Settings};
use crate::lists::{self, Sizes};
use crate::progress::Reporter;
use crate::source::{self, Workload};
use crate::table::{fmt_pct, fmt_rate, fmt_ratio, fmt_us, Table};
use crate::{cancel, output, plot, print};

const EXAMPLES: &str = "\
Examples:
  tidepool sweep --workload cpu --sizes 1,2,3,4,6,8
  tidepool sweep --workload io --scale 0.25 --sizes 1..64:x2 --out sweeps/io
  tidepool sweep --workload my.trace --sizes 1..16 --json > sweep.json

Sizes: N, A..B (every size), A..B:S (step S), A..B:xF (times F), comma-separated.
The safe zone is the longest run of sizes whose throughput stays within --tolerance of
the best, around the smallest size reaching it; its ends are the stable point and (when
throughput falls after it) the degradation point. The oracle is the in-band size with
the lowest mean turnaround. --out DIR writes sweep.json, sweep.csv, throughput.svg,
rait.svg and p99-wait.svg.";

/// Options of `tidepool sweep`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct SweepArgs {
    /// Suite name, generator spec or trace file.
    #[arg(long, short, value_name = "NAME_OR_SPEC")]
    pub workload: String,
    /// Static pool sizes to try [default: a suite workload's own sizes,
    /// 1,2,4,...,128 otherwise]
    #[arg(long, short, value_name = "SIZES", value_parser = lists::parse_sizes)]
    pub sizes: Option<Sizes>,
    /// Throughput band of the safe zone, as a fraction of the best (0.05 = 5%).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.05)]
    pub tolerance: f64,
    /// Length factor for suite workloads.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub scale: f64,
    /// Print one JSON object on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write JSON, CSV and SVG files into this folder.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replay and pool options.
    #[command(flatten)]
    pub replay: ReplayArgs,
}

/// Replay `w` on a static pool of each size (stopping early on Ctrl-C) and
/// analyse the curve with `tolerance`.
pub fn run_sweep(
    w: &Workload,
    sizes: &[usize],
    settings: &Settings,
    tolerance: f64,
    rep: &mut Reporter,
) -> anyhow::Result<SweepResult> {
    let mut runs = Vec::new();
    for &size in sizes {
        if cancel::requested() {
            break;
        }
        let label = format!("{} · fixed:{size}", w.label);
        let result = exec::run_reported(w, &PolicySpec::Fixed(size), &label, settings, rep)?;
        runs.push(SizedRun { size, result });
    }
    let points: Vec<SweepPoint> = runs
        .iter()
        .map(|r| SweepPoint::from_run(r.size, &r.result))
        .collect();
    Ok(SweepResult {
        analysis: analyze_sweep(&points, tolerance),
        runs,
    })
}

/// The JSON `tidepool sweep --json` prints.
#[derive(Debug, Serialize)]
pub struct SweepOutput<'a> {
    /// Workload label.
    pub workload: &'a str,
    /// Summary numbers of the trace.
    pub trace: TraceStats,
    /// The sizes run.
    pub sizes: Vec<usize>,
    /// The analysis: rows, stable point, degradation point, safe zone, oracle.
    #[serde(flatten)]
    pub analysis: Option<&'a SweepAnalysis>,
    /// Every run's full result (without per-task records).
    pub runs: &'a [SizedRun],
    /// True when stopped by Ctrl-C.
    pub cancelled: bool,
}

/// Run `tidepool sweep`.
pub fn run(a: SweepArgs) -> anyhow::Result<()> {
    if !(0.0..1.0).contains(&a.tolerance) {
        return Err(crate::error::usage(format!(
            "--tolerance {} must be a fraction in [0, 1)",
            a.tolerance
        )));
    }
    let settings = a.replay.settings(false)?;
    if let Some(dir) = &a.out {
        output::check_out_dir(dir)?;
    }
    let w = source::load(&a.workload, a.scale)?;
    let _ = cancel::flag();
    let sizes = a.sizes.as_ref().map_or_else(
        || tidepool_workload::suite::sweep_sizes(&a.workload).to_vec(),
        |s| s.0.clone(),
    );
    let mut rep = Reporter::new(a.replay.quiet, sizes.len());
    let mut s = run_sweep(&w, &sizes, &settings, a.tolerance, &mut rep)?;
    rep.finish();
    for r in &mut s.runs {
        r.result.records.clear();
    }
    let out = SweepOutput {
        workload: &w.label,
        trace: w.trace.stats(),
        sizes: s.runs.iter().map(|r| r.size).collect(),
        analysis: s.analysis.as_ref(),
        runs: &s.runs,
        cancelled: cancel::requested(),
    };
    if let Some(dir) = &a.out {
        write_files(dir, &w.label, &out)?;
        if !a.replay.quiet {
            eprintln!(
                "wrote sweep.json, sweep.csv, throughput.svg, rait.svg, p99-wait.svg to {}",
                dir.display()
            );
        }
    }
    if a.json {
        print(&format!("{}\n", serde_json::to_string(&out)?));
    } else {
        print(&format!(
            "sweep of {} ({} tasks)\n\n{}",
            w.label,
            w.trace.len(),
            match &s.analysis {
                Some(an) => format!("{}\n{}", sweep_table(an).render(), verdict(an)),
                None => "nothing completed: no analysis\n".into(),
            }
        ));
    }
    if cancel::requested() {
        return Err(Interrupted.into());
    }
    Ok(())
}

fn write_files(dir: &Path, label: &str, out: &SweepOutput<'_>) -> anyhow::Result<()> {
    output::ensure_dir(dir)?;
    output::write_json(&dir.join("sweep.json"), out)?;
    if let Some(an) = out.analysis {
        output::sweep_csv(&dir.join("sweep.csv"), an)?;
        for (file, m) in [
            ("throughput.svg", plot::SweepMetric::Throughput),
            ("rait.svg", plot::SweepMetric::Rait),
            ("p99-wait.svg", plot::SweepMetric::P99Wait),
        ] {
            plot::sweep_chart(&dir.join(file), label, an, m)?;
        }
    }
    Ok(())
}

/// One row per size: throughput, relative throughput, waits, RAIT, notes.
pub fn sweep_table(a: &SweepAnalysis) -> Table {
    let mut t = Table::new([
        "size",
        "throughput",
        "of best",
        "mean wait",
        "p99 wait",
        "RAIT",
        "mean turnaround",
        "note",
    ])
    .left_align(7);
    for r in &a.rows {
        let s = r.point.size;
        let mut notes = Vec::new();
        if s == a.stable_point {
            notes.push("stable point");
        }
        if Some(s) == a.degradation_point {
            notes.push("degradation point");
        }
        if s == a.oracle_size {
            notes.push("oracle");
        }
        if !r.in_band {
            notes.push("below band");
        }
        t.row([
            s.to_string(),
            fmt_rate(r.point.throughput),
            fmt_pct(r.relative_throughput),
            fmt_us(r.point.mean_wait_us),
            fmt_us(r.point.p99_wait_us),
            fmt_ratio(r.rait),
            fmt_us(r.point.mean_turnaround_us),
            notes.join(", "),
        ]);
    }
    t
}

/// The stable point, degradation point, safe zone and oracle in words.
pub fn verdict(a: &SweepAnalysis) -> String {
    let band = fmt_pct(a.tolerance);
    format!(
        "stable point:      {}\ndegradation point: {}\nsafe zone:         {}..{} (throughput within {band} of the best, {})\noracle:            {} (the in-band size with the lowest mean turnaround)\n",
        a.stable_point,
        a.degradation_point.map_or_else(
            || "not reached (throughput stays in the band up to the largest size tried)".to_string(),
            |d| d.to_string()
        ),
        a.safe_zone.0,
        a.safe_zone.1,
        fmt_rate(a.best_throughput),
        a.oracle_size,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_marks_the_special_sizes() {
        let pts: Vec<SweepPoint> = [(1usize, 100.0), (2, 200.0), (4, 199.0), (8, 120.0)]
            .iter()
            .map(|&(size, throughput)| SweepPoint {
                size,
                throughput,
                mean_wait_us: 100.0 / size as f64,
                p99_wait_us: 1.0,
                mean_turnaround_us: 10.0 + size as f64,
                p99_turnaround_us: 1.0,
            })
            .collect();
        let a = analyze_sweep(&pts, 0.05).unwrap();
        let s = sweep_table(&a).render();
        assert!(s.contains("stable point, oracle"), "{s}");
        assert!(s.contains("degradation point"), "{s}");
        assert!(s.contains("below band"), "{s}");
        let v = verdict(&a);
        assert!(v.contains("safe zone:         2..4"), "{v}");
    }
}
