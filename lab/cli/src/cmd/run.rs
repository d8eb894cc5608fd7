//! `tidepool run`: one workload, one policy, one summary.

use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args};
use serde::Serialize;
use tidepool::policy::PolicySpec;
use tidepool_workload::metrics::LatencySummary;
use tidepool_workload::{RunResult, TraceStats};

use super::ReplayArgs;
use crate::error::Interrupted;
use crate::progress::Reporter;
use crate::table::{fmt_pct, fmt_rate, fmt_us, Table};
use crate::{cancel, exec, lists, output, plot, print, source};

const EXAMPLES: &str = "\
Examples:
  tidepool run --workload cpu --policy auto
  tidepool run --workload io --scale 0.25 --policy xu-bode:initial=16 --out runs/io-xu
  tidepool run --trace my.trace --policy hisdyn:max=100,p=0.01 --json > result.json
  tidepool run --workload 'poisson:rate=2000,service=exp:200us,n=5000,free=50' --policy fixed:8

--json prints one JSON object on stdout (progress goes to stderr): the run's metrics
(docs/cli.md lists the fields). --out DIR writes result.json, records.csv (one row per
task), size_series.csv (pool size over time), decisions.csv (the policy's decision log),
size.svg and wait-ccdf.svg.";

/// Options of `tidepool run`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
#[command(group(ArgGroup::new("input").required(true).args(["trace", "workload"])))]
pub struct RunArgs {
    /// Trace file to replay (thesis format; .swf and Azure .csv by extension).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Suite name, generator spec or trace file.
    #[arg(long, short, value_name = "NAME_OR_SPEC")]
    pub workload: Option<String>,
    /// Sizing policy spec.
    #[arg(long, short, value_name = "SPEC", default_value = "auto", value_parser = lists::parse_policy)]
    pub policy: PolicySpec,
    /// Length factor for suite workloads (0.25 = a quarter as many tasks).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub scale: f64,
    /// Print one JSON object on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Write JSON, CSV and SVG files into this folder.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replay and pool options.
    #[command(flatten)]
    pub replay: ReplayArgs,
}

/// The JSON `tidepool run --json` prints: the policy spec, the trace's
/// numbers, and every field of the run result (without per-task records).
#[derive(Debug, Serialize)]
pub struct RunOutput<'a> {
    /// Canonical policy spec.
    pub policy: String,
    /// Summary numbers of the trace replayed.
    pub trace: TraceStats,
    /// The measurements.
    #[serde(flatten)]
    pub result: &'a RunResult,
}

/// Run `tidepool run`.
pub fn run(a: RunArgs) -> anyhow::Result<()> {
    let settings = a.replay.settings(a.out.is_some())?;
    if let Some(dir) = &a.out {
        output::check_out_dir(dir)?;
    }
    let w = match (&a.trace, &a.workload) {
        (Some(path), _) => source::load_file(path)?,
        (None, Some(w)) => source::load(w, a.scale)?,
        (None, None) => unreachable!("clap requires one input"),
    };
    let _ = cancel::flag();
    let mut rep = Reporter::new(a.replay.quiet, 1);
    let label = format!("{} · {}", w.label, a.policy);
    let mut r = exec::run_reported(&w, &a.policy, &label, &settings, &mut rep)?;
    rep.finish();
    let stats = w.trace.stats();
    if let Some(dir) = &a.out {
        write_files(dir, &w.label, &r)?;
        if !a.replay.quiet {
            eprintln!("wrote result.json, records.csv, size_series.csv, decisions.csv, size.svg, wait-ccdf.svg to {}", dir.display());
        }
    }
    r.records.clear();
    let out = RunOutput {
        policy: a.policy.to_string(),
        trace: stats,
        result: &r,
    };
    if a.json {
        print(&format!("{}\n", serde_json::to_string(&out)?));
    } else {
        print(&summary(&w.label, &out));
    }
    if cancel::requested() {
        return Err(Interrupted.into());
    }
    Ok(())
}

fn write_files(dir: &Path, label: &str, r: &RunResult) -> anyhow::Result<()> {
    output::ensure_dir(dir)?;
    output::records_csv(&dir.join("records.csv"), &r.records)?;
    output::size_series_csv(&dir.join("size_series.csv"), &r.size_series)?;
    output::decisions_csv(&dir.join("decisions.csv"), &r.decisions)?;
    plot::size_chart(
        &dir.join("size.svg"),
        label,
        &[(r.executor.as_str(), &r.size_series[..])],
    )?;
    plot::ccdf_chart(
        &dir.join("wait-ccdf.svg"),
        label,
        &[(r.executor.as_str(), &r.records[..])],
    )?;
    let mut copy = r.clone();
    copy.records.clear();
    output::write_json(&dir.join("result.json"), &copy)?;
    Ok(())
}

/// The latency table: one row per latency, its mean and quantiles.
pub fn latency_table(r: &RunResult) -> Table {
    let mut t = Table::new(["latency", "mean", "p50", "p90", "p99", "p99.9", "max"]);
    let rows: [(&str, &LatencySummary); 5] = [
        ("wait (queue, AIT)", &r.wait),
        ("submit blocked", &r.submit_blocked),
        ("processing", &r.processing),
        ("turnaround", &r.turnaround),
        ("replay lateness", &r.lateness),
    ];
    for (name, s) in rows {
        t.row([
            name.to_string(),
            fmt_us(s.mean_us),
            fmt_us(s.p50_us),
            fmt_us(s.p90_us),
            fmt_us(s.p99_us),
            fmt_us(s.p999_us),
            fmt_us(s.max_us),
        ]);
    }
    t
}

/// The human-readable summary of one run.
pub fn summary(label: &str, o: &RunOutput<'_>) -> String {
    let r = o.result;
    let mut kv: Vec<(String, String)> = Vec::new();
    kv.push((
        "workload".to_string(),
        format!(
            "{label}: {} tasks over {:.2} s, {:.0} tasks/s, offered {:.2} cores",
            o.trace.tasks, o.trace.span_s, o.trace.arrival_rate, o.trace.offered_cores
        ),
    ));
    kv.push(("policy".to_string(), o.policy.clone()));
    kv.push((
        "completed".to_string(),
        format!(
            "{} of {}{}",
            r.completed,
            r.tasks,
            if r.cancelled { " (stopped early)" } else { "" }
        ),
    ));
    kv.push((
        "throughput".to_string(),
        format!("{} over {:.2} s", fmt_rate(r.throughput), r.duration_s),
    ));
    kv.push((
        "CPU utilisation".to_string(),
        format!(
            "{} of {} cores",
            fmt_pct(r.process_cpu_utilization),
            r.cores
        ),
    ));
    kv.push((
        "load average".to_string(),
        r.load_average.map_or("-".into(), |l| {
            format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2])
        }),
    ));
    kv.push(("threads created".to_string(), r.threads_created.to_string()));
    kv.push((
        "threads (avg/max)".to_string(),
        format!("{:.1} / {}", r.avg_threads, r.max_threads),
    ));
    kv.push((
        "queue (avg/max)".to_string(),
        format!("{:.1} / {}", r.avg_queue, r.max_queue),
    ));
    kv.push(("decisions".to_string(), r.decisions.len().to_string()));
    let width = kv.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, v) in &kv {
        out.push_str(&format!("{k:<width$}  {v}\n"));
    }
    format!("{out}\n{}", latency_table(r).render())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_mentions_every_metric() {
        let r = RunResult {
            tasks: 10,
            completed: 10,
            throughput: 1000.0,
            cores: 2,
            ..RunResult::default()
        };
        let o = RunOutput {
            policy: "auto".into(),
            trace: TraceStats::default(),
            result: &r,
        };
        let s = summary("cpu", &o);
        for word in [
            "throughput",
            "1000/s",
            "wait (queue, AIT)",
            "turnaround",
            "replay lateness",
            "CPU utilisation",
            "load average",
            "threads created",
        ] {
            assert!(s.contains(word), "{word} missing in\n{s}");
        }
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["policy"], "auto");
        assert_eq!(v["throughput"], 1000.0);
        assert!(v.get("records").is_none());
    }
}
