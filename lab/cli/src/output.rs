//! Result files: JSON, and CSV of per-task records, the pool-size series,
//! the decision log and sweep rows.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;
use tidepool_workload::analysis::SweepAnalysis;
use tidepool_workload::metrics::{SizePoint, TaskRecord};
use tidepool_workload::DecisionEntry;

/// Create `dir` (and parents).
pub fn ensure_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create output folder `{}`", dir.display()))
}

/// Create `dir` and check that a file can be written in it: called before
/// any replay, so an unwritable `--out` does not lose a long run's results.
pub fn check_out_dir(dir: &Path) -> anyhow::Result<()> {
    ensure_dir(dir)?;
    let probe = dir.join(format!(".tidepool-write-test-{}", std::process::id()));
    let written =
        File::create(&probe).and_then(|mut f| f.write_all(b"ok\n").and_then(|_| f.sync_all()));
    let _ = std::fs::remove_file(&probe);
    written.with_context(|| format!("cannot write into output folder `{}`", dir.display()))
}

/// Check that `path` can be written (created, or opened for writing without
/// truncating it) before any work; a file this creates is removed again.
pub fn check_out_file(path: &Path) -> anyhow::Result<()> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("cannot write `{}`", path.display()))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Write `value` as pretty JSON.
pub fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<PathBuf> {
    let f = File::create(path).with_context(|| format!("cannot create `{}`", path.display()))?;
    let mut w = BufWriter::new(f);
    serde_json::to_writer_pretty(&mut w, value)
        .map_err(anyhow::Error::new)
        .and_then(|()| Ok(writeln!(w)?))
        .and_then(|()| Ok(w.flush()?))
        .with_context(|| format!("cannot write `{}`", path.display()))?;
    Ok(path.to_path_buf())
}

/// Write a CSV file from a header and rows of cells.
pub fn write_csv<I, R>(path: &Path, header: &[&str], rows: I) -> anyhow::Result<PathBuf>
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    let mut w = csv::Writer::from_path(path)
        .with_context(|| format!("cannot create `{}`", path.display()))?;
    let write = || -> anyhow::Result<()> {
        w.write_record(header)?;
        for r in rows {
            w.write_record(r)?;
        }
        Ok(w.flush()?)
    };
    write().with_context(|| format!("cannot write `{}`", path.display()))?;
    Ok(path.to_path_buf())
}

fn us(ns: Option<u64>) -> String {
    ns.map_or(String::new(), |v| format!("{:.3}", v as f64 / 1e3))
}

/// Per-task records: the four instants (µs since the start of the replay)
/// and the derived response, wait, processing, turnaround and lateness.
pub fn records_csv(path: &Path, records: &[TaskRecord]) -> anyhow::Result<PathBuf> {
    write_csv(
        path,
        &[
            "request_id",
            "app_id",
            "scheduled_us",
            "submitted_us",
            "accepted_us",
            "started_us",
            "finished_us",
            "submit_blocked_us",
            "wait_us",
            "processing_us",
            "turnaround_us",
            "lateness_us",
        ],
        records.iter().map(|r| {
            vec![
                r.request_id.to_string(),
                r.app_id.to_string(),
                us(Some(r.scheduled_ns)),
                us(Some(r.submitted_ns)),
                us(r.accepted_ns),
                us(r.started_ns),
                us(r.finished_ns),
                us(r.submit_blocked_ns()),
                us(r.wait_ns()),
                us(r.processing_ns()),
                us(r.turnaround_ns()),
                us(Some(r.lateness_ns())),
            ]
        }),
    )
}

/// The pool-size trajectory: `t_ms,live,target` at every change.
pub fn size_series_csv(path: &Path, series: &[SizePoint]) -> anyhow::Result<PathBuf> {
    write_csv(
        path,
        &["t_ms", "live", "target"],
        series.iter().map(|p| {
            vec![
                format!("{:.3}", p.t_ms),
                p.live.to_string(),
                p.target.map_or(String::new(), |t| t.to_string()),
            ]
        }),
    )
}

/// The policy's decision log.
pub fn decisions_csv(path: &Path, decisions: &[DecisionEntry]) -> anyhow::Result<PathBuf> {
    write_csv(
        path,
        &["t_ms", "trigger", "old_target", "new_target", "reason"],
        decisions.iter().map(|d| {
            vec![
                format!("{:.3}", d.t_ms),
                d.trigger.clone(),
                d.old_target.to_string(),
                d.new_target.to_string(),
                d.reason.clone(),
            ]
        }),
    )
}

/// One row per swept size.
pub fn sweep_csv(path: &Path, a: &SweepAnalysis) -> anyhow::Result<PathBuf> {
    write_csv(
        path,
        &[
            "size",
            "throughput",
            "mean_wait_us",
            "p99_wait_us",
            "mean_turnaround_us",
            "p99_turnaround_us",
            "rait",
            "relative_throughput",
            "in_band",
        ],
        a.rows.iter().map(|r| {
            vec![
                r.point.size.to_string(),
                format!("{:.3}", r.point.throughput),
                format!("{:.3}", r.point.mean_wait_us),
                format!("{:.3}", r.point.p99_wait_us),
                format!("{:.3}", r.point.mean_turnaround_us),
                format!("{:.3}", r.point.p99_turnaround_us),
                r.rait.map_or(String::new(), |v| format!("{v:.4}")),
                format!("{:.4}", r.relative_throughput),
                r.in_band.to_string(),
            ]
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritable_outputs_are_found_before_any_work() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        let e = check_out_dir(&file.join("sub")).unwrap_err();
        assert!(
            format!("{e:#}").contains("cannot create output folder"),
            "{e:#}"
        );
        check_out_dir(&dir.path().join("new")).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path().join("new")).unwrap().count(),
            0
        );
        // a file to be written: an existing one is kept, a new one not left behind
        check_out_file(&file).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
        let fresh = dir.path().join("fresh.trace");
        check_out_file(&fresh).unwrap();
        assert!(!fresh.exists());
        assert!(check_out_file(dir.path()).is_err());
    }

    #[test]
    fn csv_files_have_headers_and_rows() {
        let dir = tempfile::tempdir().unwrap();
        let r = TaskRecord {
            request_id: 7,
            app_id: 1,
            scheduled_ns: 0,
            submitted_ns: 1_000,
            accepted_ns: Some(2_000),
            started_ns: Some(5_000),
            finished_ns: None,
        };
        let p = records_csv(&dir.path().join("r.csv"), &[r]).unwrap();
        let s = std::fs::read_to_string(p).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("request_id,app_id,scheduled_us"));
        assert_eq!(lines[1], "7,1,0.000,1.000,2.000,5.000,,1.000,3.000,,,1.000");
        let p = size_series_csv(
            &dir.path().join("s.csv"),
            &[SizePoint {
                t_ms: 1.5,
                live: 3,
                target: None,
            }],
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(p).unwrap(),
            "t_ms,live,target\n1.500,3,\n"
        );
        let p = write_json(&dir.path().join("x.json"), &serde_json::json!({"a": 1})).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        assert_eq!(v["a"], 1);
    }
}
