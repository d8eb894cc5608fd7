//! `tidepool calibrate`: how exact the laboratory is on this machine — the
//! busy loop's compute error, the replay driver's pacing error (lateness),
//! and the blocking (sleep) error of task bodies.

use std::time::Duration;

use clap::Args;
use serde::Serialize;
use tidepool::policy::PolicySpec;
use tidepool_workload::metrics::LatencySummary;
use tidepool_workload::{BusyLoop, CalibrationReport, GenSpec};

use crate::exec::{run_policy, Settings};
use crate::table::{fmt_us, Table};
use crate::{cancel, print};

const EXAMPLES: &str = "\
Examples:
  tidepool calibrate
  tidepool calibrate --json > calibration.json

Busy loop: the compute part of a task is a calibrated spin; each target is burned 20
times and measured in thread CPU time (error = median, worst = largest |error|).
Pacing: two 1-second traces are replayed on a static pool; lateness is how late the
driver submitted each task relative to the trace. Blocking: 1 ms all-sleep and 1 ms
all-compute tasks on a pool that never queues them; the error is the mean processing
time over the 1 ms asked (sleeping and preemption only ever add time).";

/// Options of `tidepool calibrate`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct CalibrateArgs {
    /// Print one JSON object on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
}

/// Pacing of one trace.
#[derive(Debug, Clone, Serialize)]
pub struct Pacing {
    /// Generator spec replayed.
    pub workload: String,
    /// Lateness of submissions relative to the trace.
    pub lateness: LatencySummary,
}

/// Processing time of one kind of task body.
#[derive(Debug, Clone, Serialize)]
pub struct BodyCheck {
    /// Generator spec replayed.
    pub workload: String,
    /// Requested time per task, µs.
    pub target_us: f64,
    /// Measured processing time (wall clock, on a worker).
    pub processing: LatencySummary,
    /// `(mean - target) / target × 100`.
    pub error_pct: f64,
}

/// The JSON of `tidepool calibrate --json`.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// Calibrated busy-loop rate.
    pub iters_per_us: f64,
    /// One check per compute target.
    pub busy_loop: Vec<CalibrationReport>,
    /// Replay pacing.
    pub pacing: Vec<Pacing>,
    /// Blocking and compute bodies.
    pub bodies: Vec<BodyCheck>,
    /// Cores and load average when measured.
    pub cores: usize,
    /// 1-, 5-, 15-minute load averages.
    pub load_average: Option<[f64; 3]>,
}

/// Run `tidepool calibrate`.
pub fn run(a: CalibrateArgs) -> anyhow::Result<()> {
    let _ = cancel::flag();
    eprintln!("calibrating (about 5 s)…");
    let busy = BusyLoop::global();
    let busy_loop: Vec<CalibrationReport> = [50u64, 200, 1_000, 5_000]
        .iter()
        .map(|&us| busy.verify(Duration::from_micros(us), 20))
        .collect();
    let settings = Settings {
        keep_records: false,
        ..Settings::default()
    };
    let cores = tidepool::sys::cores();
    let mut pacing = Vec::new();
    for spec in [
        "periodic:rate=1000,n=1000,service=const:20us,seed=1",
        "poisson:rate=5000,n=5000,service=const:20us,seed=2",
    ] {
        let trace = spec.parse::<GenSpec>()?.generate();
        let r = run_policy(&trace, &PolicySpec::Fixed(cores), &settings, &mut |_| {})?;
        pacing.push(Pacing {
            workload: spec.into(),
            lateness: r.lateness,
        });
    }
    let mut bodies = Vec::new();
    for (spec, pool) in [
        (
            "periodic:rate=400,n=400,service=const:1ms,free=100,seed=3",
            8,
        ),
        ("periodic:rate=200,n=200,service=const:1ms,free=0,seed=4", 1),
    ] {
        let trace = spec.parse::<GenSpec>()?.generate();
        let r = run_policy(&trace, &PolicySpec::Fixed(pool), &settings, &mut |_| {})?;
        bodies.push(BodyCheck {
            workload: spec.into(),
            target_us: 1000.0,
            error_pct: (r.processing.mean_us - 1000.0) / 10.0,
            processing: r.processing,
        });
    }
    let c = Calibration {
        iters_per_us: busy.iters_per_us(),
        busy_loop,
        pacing,
        bodies,
        cores,
        load_average: tidepool::sys::load_average(),
    };
    if a.json {
        print(&format!("{}\n", serde_json::to_string(&c)?));
    } else {
        print(&text(&c));
    }
    if cancel::requested() {
        return Err(crate::error::Interrupted.into());
    }
    Ok(())
}

/// The calibration as tables.
pub fn text(c: &Calibration) -> String {
    let mut b = Table::new([
        "busy loop target",
        "measured (median)",
        "error",
        "worst |error|",
    ]);
    for r in &c.busy_loop {
        b.row([
            fmt_us(r.target_us),
            fmt_us(r.measured_us),
            format!("{:+.2}%", r.error_pct),
            format!("{:.2}%", r.worst_error_pct),
        ]);
    }
    let mut p = Table::new(["pacing (lateness)", "mean", "p50", "p99", "max"]);
    for x in &c.pacing {
        p.row([
            x.workload.clone(),
            fmt_us(x.lateness.mean_us),
            fmt_us(x.lateness.p50_us),
            fmt_us(x.lateness.p99_us),
            fmt_us(x.lateness.max_us),
        ]);
    }
    let mut t = Table::new(["task body (1 ms)", "mean", "p99", "error of mean"]);
    for x in &c.bodies {
        t.row([
            x.workload.clone(),
            fmt_us(x.processing.mean_us),
            fmt_us(x.processing.p99_us),
            format!("{:+.2}%", x.error_pct),
        ]);
    }
    format!(
        "busy loop: {:.1} iterations/µs; {} cores; load average {}\n\n{}\n{}\n{}",
        c.iters_per_us,
        c.cores,
        c.load_average.map_or("-".into(), |l| format!(
            "{:.2} {:.2} {:.2}",
            l[0], l[1], l[2]
        )),
        b.render(),
        p.render(),
        t.render()
    )
}
