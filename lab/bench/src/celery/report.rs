//! One run's numbers from its per-request samples and the journals, and the
//! table: medians over the repeats and the paired ratio tidepool ÷ Celery.

use serde::Serialize;

use super::journal::Executions;
use crate::paired::{paired, Paired};

/// One request as its client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When the client submitted it (Unix ns).
    pub submitted_ns: u64,
    /// When its result arrived (Unix ns; 0: never).
    pub received_ns: u64,
    /// Whether the result was a success.
    pub ok: bool,
}

/// One run of one system on one task kind.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// `tidepool` or `celery`.
    pub system: String,
    /// `sleep` or `spin`.
    pub kind: String,
    /// Whether a worker was killed mid-run.
    pub kill: bool,
    /// Which repeat (0-based).
    pub repeat: usize,
    /// Requests submitted.
    pub requests: u64,
    /// Results received.
    pub results: u64,
    /// Results that were errors.
    pub failed: u64,
    /// Requests without a result at the end.
    pub lost: u64,
    /// Requests whose work was done more than once (journals).
    pub ran_twice: u64,
    /// Requests started more than once (journals): what the kill interrupted.
    pub restarted: u64,
    /// Requests whose work was never done (journals).
    pub never_finished: u64,
    /// Finished requests (journals) when the worker was killed.
    pub killed_at: Option<u64>,
    /// Results per second, first submit to last result.
    pub throughput: f64,
    /// Submits per second, first to last: how fast the client queued the
    /// requests (a slower client queues less, so its latencies are shorter).
    pub submit_rate: f64,
    /// Median submit → result, ms.
    pub p50_ms: f64,
    /// 99th percentile submit → result, ms.
    pub p99_ms: f64,
}

impl Run {
    /// Summarise `samples` (request id = index) and the journals.
    pub fn new(
        system: &str,
        kind: &str,
        kill: bool,
        repeat: usize,
        samples: &[Sample],
        ex: &Executions,
        killed_at: Option<u64>,
    ) -> Run {
        let got: Vec<&Sample> = samples.iter().filter(|s| s.received_ns > 0).collect();
        let mut lat: Vec<f64> = got
            .iter()
            .map(|s| s.received_ns.saturating_sub(s.submitted_ns) as f64 / 1e6)
            .collect();
        lat.sort_by(f64::total_cmp);
        let first = samples
            .iter()
            .map(|s| s.submitted_ns)
            .filter(|&t| t > 0)
            .min()
            .unwrap_or(0);
        let last = got.iter().map(|s| s.received_ns).max().unwrap_or(first);
        let span = (last.saturating_sub(first)) as f64 / 1e9;
        let last_submit = samples
            .iter()
            .map(|s| s.submitted_ns)
            .max()
            .unwrap_or(first);
        let submit_span = last_submit.saturating_sub(first) as f64 / 1e9;
        let n = samples.len() as u64;
        Run {
            system: system.into(),
            kind: kind.into(),
            kill,
            repeat,
            requests: n,
            results: got.len() as u64,
            failed: got.iter().filter(|s| !s.ok).count() as u64,
            lost: n - got.len() as u64,
            ran_twice: ex.ran_twice(),
            restarted: ex.restarted(),
            never_finished: ex.never_finished(n),
            killed_at,
            throughput: if span > 0.0 {
                got.len() as f64 / span
            } else {
                0.0
            },
            submit_rate: if submit_span > 0.0 {
                n as f64 / submit_span
            } else {
                0.0
            },
            p50_ms: quantile(&lat, 0.50),
            p99_ms: quantile(&lat, 0.99),
        }
    }
}

/// Nearest-rank quantile of sorted `v` (0 when empty).
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let rank = (q * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// One row of the table: a system on a task kind over the repeats.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Task kind.
    pub kind: String,
    /// System.
    pub system: String,
    /// Median throughput (results/s) of the runs without a kill.
    pub throughput: f64,
    /// Median submit rate (requests/s) of the runs without a kill.
    pub submit_rate: f64,
    /// Median p50 (ms).
    pub p50_ms: f64,
    /// Median p99 (ms).
    pub p99_ms: f64,
    /// Lost requests, summed over the kill runs.
    pub lost: u64,
    /// Requests whose work was done twice, summed over the kill runs.
    pub ran_twice: u64,
    /// Requests restarted after the kill, summed over the kill runs.
    pub restarted: u64,
    /// Failed results, summed over every run.
    pub failed: u64,
}

/// tidepool ÷ Celery per repeat, on one kind.
#[derive(Debug, Clone, Serialize)]
pub struct Ratios {
    /// Task kind.
    pub kind: String,
    /// Throughput ratios (above 1: tidepool faster).
    pub throughput: Vec<f64>,
    /// p99 ratios (below 1: tidepool lower).
    pub p99: Vec<f64>,
    /// Summary of the throughput ratios.
    pub throughput_paired: Option<Paired>,
    /// Summary of the p99 ratios.
    pub p99_paired: Option<Paired>,
}

fn median(v: impl IntoIterator<Item = f64>) -> f64 {
    tidepool_workload::median(v).unwrap_or(0.0)
}

/// The rows and ratios of `runs`.
pub fn summarise(runs: &[Run], kinds: &[&str], systems: &[&str]) -> (Vec<Row>, Vec<Ratios>) {
    let mut rows = Vec::new();
    let mut ratios = Vec::new();
    for &kind in kinds {
        for &system in systems {
            let of = |kill: bool| {
                runs.iter()
                    .filter(move |r| r.kind == kind && r.system == system && r.kill == kill)
            };
            rows.push(Row {
                kind: kind.into(),
                system: system.into(),
                throughput: median(of(false).map(|r| r.throughput)),
                submit_rate: median(of(false).map(|r| r.submit_rate)),
                p50_ms: median(of(false).map(|r| r.p50_ms)),
                p99_ms: median(of(false).map(|r| r.p99_ms)),
                lost: of(true).map(|r| r.lost).sum(),
                ran_twice: of(true).map(|r| r.ran_twice).sum(),
                restarted: of(true).map(|r| r.restarted).sum(),
                failed: of(false).chain(of(true)).map(|r| r.failed).sum(),
            });
        }
        let pick = |system: &str, repeat: usize| {
            runs.iter()
                .find(|r| r.kind == kind && r.system == system && !r.kill && r.repeat == repeat)
        };
        let repeats = runs.iter().map(|r| r.repeat + 1).max().unwrap_or(0);
        let pairs: Vec<(&Run, &Run)> = (0..repeats)
            .filter_map(|i| Some((pick("tidepool", i)?, pick("celery", i)?)))
            .collect();
        let throughput: Vec<f64> = pairs
            .iter()
            .map(|(t, c)| t.throughput / c.throughput)
            .collect();
        let p99: Vec<f64> = pairs.iter().map(|(t, c)| t.p99_ms / c.p99_ms).collect();
        ratios.push(Ratios {
            kind: kind.into(),
            throughput_paired: paired(&throughput),
            p99_paired: paired(&p99),
            throughput,
            p99,
        });
    }
    (rows, ratios)
}

/// The table: one line per kind × system, then the ratios per kind.
pub fn table(rows: &[Row], ratios: &[Ratios], kill_runs: usize) -> String {
    let mut out = format!(
        "{:<6} {:<9} {:>10} {:>10} {:>9} {:>9} {:>6} {:>9} {:>9} {:>6}\n",
        "kind",
        "system",
        "req/s",
        "submit/s",
        "p50 ms",
        "p99 ms",
        "lost",
        "ran twice",
        "restarted",
        "failed"
    );
    for r in rows {
        out += &format!(
            "{:<6} {:<9} {:>10.0} {:>10.0} {:>9.1} {:>9.1} {:>6} {:>9} {:>9} {:>6}\n",
            r.kind,
            r.system,
            r.throughput,
            r.submit_rate,
            r.p50_ms,
            r.p99_ms,
            r.lost,
            r.ran_twice,
            r.restarted,
            r.failed
        );
    }
    out += &format!(
        "(req/s, submit/s, p50, p99: medians of the runs without a kill; lost, ran twice, restarted: \
         sums over {kill_runs} run(s) per row with one worker SIGKILLed)\n"
    );
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for q in ratios {
        out += &format!(
            "{}: tidepool ÷ celery per repeat: throughput {} (median {:.2}), p99 {} (median {:.2})\n",
            q.kind,
            list(&q.throughput),
            q.throughput_paired.map_or(f64::NAN, |p| p.median),
            list(&q.p99),
            q.p99_paired.map_or(f64::NAN, |p| p.median),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(sub: u64, rec: u64) -> Sample {
        Sample {
            submitted_ns: sub,
            received_ns: rec,
            ok: true,
        }
    }

    #[test]
    fn a_run_counts_lost_and_takes_quantiles_over_results() {
        let samples: Vec<Sample> = (0..100)
            .map(|i| s(1, 1 + (i + 1) * 1_000_000))
            .chain([s(0, 0)])
            .collect();
        let r = Run::new(
            "tidepool",
            "sleep",
            false,
            0,
            &samples,
            &Executions::default(),
            None,
        );
        assert_eq!((r.requests, r.results, r.lost), (101, 100, 1));
        assert_eq!(r.p50_ms, 50.0);
        assert_eq!(r.p99_ms, 99.0);
        assert!((r.throughput - 1000.0).abs() < 1e-6, "{}", r.throughput);
        assert_eq!(r.never_finished, 101);
    }

    #[test]
    fn rows_take_medians_and_ratios_pair_repeats() {
        let run = |system: &str, repeat, tp: f64, kill| Run {
            system: system.into(),
            kind: "spin".into(),
            kill,
            repeat,
            requests: 10,
            results: 10,
            failed: 0,
            lost: u64::from(kill),
            ran_twice: 0,
            restarted: 0,
            never_finished: 0,
            killed_at: None,
            throughput: tp,
            submit_rate: tp,
            p50_ms: 1.0,
            p99_ms: 100.0 / tp,
        };
        let runs = vec![
            run("tidepool", 0, 200.0, false),
            run("celery", 0, 100.0, false),
            run("tidepool", 1, 300.0, false),
            run("celery", 1, 100.0, false),
            run("tidepool", 0, 1.0, true),
            run("celery", 0, 1.0, true),
        ];
        let (rows, ratios) = summarise(&runs, &["spin"], &["tidepool", "celery"]);
        assert_eq!(rows[0].throughput, 250.0);
        assert_eq!(rows[0].lost, 1);
        assert_eq!(ratios[0].throughput, vec![2.0, 3.0]);
        let t = table(&rows, &ratios, 1);
        for field in [
            "req/s",
            "submit/s",
            "p50 ms",
            "p99 ms",
            "lost",
            "ran twice",
            "tidepool ÷ celery",
        ] {
            assert!(t.contains(field), "{field} missing from\n{t}");
        }
    }
}
