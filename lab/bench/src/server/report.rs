//! The server benchmark's results: one record per contender, phase and
//! repeat; medians over repeats with their spread; the oracle (the static
//! size with the most requests/s in each phase) and each contender's
//! requests/s and p99 against it paired per repeat; the table and the JSON.

use serde::Serialize;
use tidepool_workload::median;

use crate::harness::spread;
use crate::paired::{paired_per_repeat, verdict, Paired};

/// One contender in one phase of one repeat.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Successful responses per second.
    pub requests_per_sec: f64,
    /// Latency percentiles, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Connect, read and write errors and non-2xx responses.
    pub errors: u64,
    /// Requests without an answer within wrk's timeout.
    pub timeouts: u64,
    /// Handler threads created during the phase.
    pub threads_created: u64,
    /// Most handler threads alive at once during the phase (sampled every 5 ms).
    pub peak_threads: usize,
    /// Database connections opened during the phase.
    pub db_connections: u64,
    /// CPU seconds of the service's process during the phase.
    pub service_cpu_s: f64,
    /// CPU seconds of the database's processes during the phase.
    pub db_cpu_s: f64,
    /// Times the front end could not run for 20 ms or more (`stalls.rs`).
    pub stalls: u64,
    /// The longest of them, in milliseconds.
    pub longest_stall_ms: f64,
    /// The median change of requests/s from one 200 ms span to the next,
    /// percent (`spans.rs`).
    pub span_change_pct: Option<f64>,
    /// What a tidepool pool saw and decided (absent for tpr and tokio).
    pub pool: Option<PoolView>,
}

/// A tidepool pool's own view of a phase: why it sized itself as it did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PoolView {
    /// Target size at the end of the phase.
    pub target_end: usize,
    /// Spawn limit at the end of the phase.
    pub spawn_limit_end: usize,
    /// The workers' CPU time over their busy (task) time: the compute share
    /// the pool sees; the database's CPU is not in it.
    pub phi: Option<f64>,
    /// The workers' run delay over their busy time (waiting for a core).
    pub run_delay_share: Option<f64>,
    /// Decisions that raised the target during the phase.
    pub raises: usize,
    /// The most frequent reason among those raises, with its count.
    pub top_raise: Option<String>,
    /// Every change of the target during the phase, as `seconds trigger
    /// old->new reason` (seconds since the pool started; from the pool's
    /// decision log, which keeps the latest 4,096 decisions).
    pub moves: Vec<String>,
}

/// A contender's result in a phase: medians over the repeats.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The contender (`auto`, `fixed:8`, `tpr`, `tokio`, …).
    #[serde(rename = "impl")]
    pub name: String,
    /// Successful responses per second (median).
    pub requests_per_sec: f64,
    /// Every repeat's requests/s, in repeat order.
    pub requests_per_sec_runs: Vec<f64>,
    /// (max − min) / median of the repeats' requests/s.
    pub spread: Option<f64>,
    /// Latency percentiles (medians), in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Every repeat's p99, in repeat order.
    pub p99_ms_runs: Vec<f64>,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Errors (median).
    pub errors: u64,
    /// Timeouts (median).
    pub timeouts: u64,
    /// Handler threads created during the phase (median).
    pub threads_created: u64,
    /// Peak handler threads (median).
    pub peak_threads: u64,
    /// Database connections opened during the phase (median).
    pub db_connections: u64,
    /// Service CPU seconds (median).
    pub service_cpu_s: f64,
    /// Database CPU seconds (median).
    pub db_cpu_s: f64,
    /// Front-end stalls of 20 ms or more (median).
    pub stalls: u64,
    /// The longest front-end stall, in milliseconds (median).
    pub longest_stall_ms: f64,
    /// The median change of requests/s from one 200 ms span to the next,
    /// percent (median over the repeats): the noise a policy comparing
    /// spans must see through.
    pub span_change_pct: Option<f64>,
    /// requests/s ÷ the oracle's.
    pub ratio_to_oracle: Option<f64>,
    /// p99 ÷ the oracle's p99.
    pub p99_ratio_to_oracle: Option<f64>,
    /// requests/s ÷ the oracle's in the same repeat, summarised over the
    /// repeats: the repeats run every contender one after the other, so
    /// the ratio cancels what the machine did to both.
    pub vs_oracle: Option<Paired>,
    /// What [`Row::vs_oracle`]'s 95% interval says: `level`, `ahead`,
    /// `behind`, or `too few repeats` (fewer than 6).
    pub verdict: Option<&'static str>,
    /// p99 ÷ the oracle's in the same repeat, summarised over the repeats
    /// (below 1 is better): one stall of the machine moves a phase's p99,
    /// so a single ratio says little.
    pub p99_vs_oracle: Option<Paired>,
    /// What [`Row::p99_vs_oracle`]'s 95% interval says: `level`, `lower`,
    /// `higher`, or `too few repeats`.
    pub p99_verdict: Option<&'static str>,
    /// The pool's own view in each repeat, in repeat order (tidepool pools
    /// only; empty for the others).
    pub pools: Vec<PoolView>,
}

/// The best static size of a phase.
#[derive(Debug, Clone, Serialize)]
pub struct Oracle {
    /// `fixed:K`.
    #[serde(rename = "impl")]
    pub name: String,
    /// Its requests/s.
    pub requests_per_sec: f64,
    /// Its p99, in milliseconds.
    pub p99_ms: f64,
}

/// One phase's results.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// `mix-c64`, `change-external`, …
    pub name: String,
    /// wrk connections.
    pub connections: usize,
    /// The endpoint weights.
    pub mix: String,
    /// One row per contender.
    pub results: Vec<Row>,
    /// The best static size (absent without `fixed:K` contenders).
    pub oracle: Option<Oracle>,
}

fn med(values: impl IntoIterator<Item = f64>) -> f64 {
    median(values).unwrap_or(f64::NAN)
}

impl Row {
    /// The medians of `runs` (one per repeat) of contender `name`.
    pub fn of(name: &str, runs: &[Run]) -> Row {
        let m = |f: fn(&Run) -> f64| med(runs.iter().map(f));
        let rps: Vec<f64> = runs.iter().map(|r| r.requests_per_sec).collect();
        let p99: Vec<f64> = runs.iter().map(|r| r.p99_ms).collect();
        Row {
            name: name.to_string(),
            requests_per_sec: m(|r| r.requests_per_sec),
            spread: spread(&rps),
            requests_per_sec_runs: rps,
            p50_ms: m(|r| r.p50_ms),
            p99_ms: med(p99.iter().copied()),
            p99_ms_runs: p99,
            p999_ms: m(|r| r.p999_ms),
            errors: m(|r| r.errors as f64).round() as u64,
            timeouts: m(|r| r.timeouts as f64).round() as u64,
            threads_created: m(|r| r.threads_created as f64).round() as u64,
            peak_threads: m(|r| r.peak_threads as f64).round() as u64,
            db_connections: m(|r| r.db_connections as f64).round() as u64,
            service_cpu_s: m(|r| r.service_cpu_s),
            db_cpu_s: m(|r| r.db_cpu_s),
            stalls: m(|r| r.stalls as f64).round() as u64,
            longest_stall_ms: m(|r| r.longest_stall_ms),
            span_change_pct: median(runs.iter().filter_map(|r| r.span_change_pct)),
            ratio_to_oracle: None,
            p99_ratio_to_oracle: None,
            vs_oracle: None,
            verdict: None,
            p99_vs_oracle: None,
            p99_verdict: None,
            pools: runs.iter().filter_map(|r| r.pool.clone()).collect(),
        }
    }
}

impl Phase {
    /// A phase from its rows; `is_static(name)` tells the oracle's candidates.
    pub fn new(
        name: String,
        connections: usize,
        mix: String,
        mut results: Vec<Row>,
        is_static: impl Fn(&str) -> bool,
    ) -> Phase {
        let oracle = results
            .iter()
            .filter(|r| is_static(&r.name) && r.requests_per_sec.is_finite())
            .max_by(|a, b| a.requests_per_sec.total_cmp(&b.requests_per_sec))
            .map(|r| Oracle {
                name: r.name.clone(),
                requests_per_sec: r.requests_per_sec,
                p99_ms: r.p99_ms,
            });
        if let Some(o) = &oracle {
            let (oracle_runs, oracle_p99) = results
                .iter()
                .find(|r| r.name == o.name)
                .map(|r| (r.requests_per_sec_runs.clone(), r.p99_ms_runs.clone()))
                .unwrap_or_default();
            for r in &mut results {
                r.ratio_to_oracle =
                    (o.requests_per_sec > 0.0).then(|| r.requests_per_sec / o.requests_per_sec);
                r.p99_ratio_to_oracle = (o.p99_ms > 0.0).then(|| r.p99_ms / o.p99_ms);
                r.vs_oracle = paired_per_repeat(&r.requests_per_sec_runs, &oracle_runs);
                r.verdict = r.vs_oracle.as_ref().map(verdict);
                // Latency: the contender's ÷ the oracle's, as the goal reads it.
                r.p99_vs_oracle = paired_per_repeat(&r.p99_ms_runs, &oracle_p99);
                r.p99_verdict = r.p99_vs_oracle.as_ref().map(latency_verdict);
            }
        }
        Phase {
            name,
            connections,
            mix,
            results,
            oracle,
        }
    }
}

/// The readable table.
pub fn table(phases: &[Phase]) -> String {
    let mut out = String::new();
    for p in phases {
        let oracle = p
            .oracle
            .as_ref()
            .map_or("none".to_string(), |o| o.name.clone());
        out.push_str(&format!(
            "\n{} ({} connections, mix {}; oracle {oracle})\n",
            p.name, p.connections, p.mix
        ));
        out.push_str(&format!(
            "{:<16} {:>8} {:>6} {:>7} {:>7} {:>8} {:>6} {:>5} {:>6} {:>5} {:>6} {:>6} {:>6} {:>7} {:>6} {:>6} {:>6}  {:<28} {}\n",
            "impl", "req/s", "spread", "p50ms", "p99ms", "p99.9ms", "errors", "tmo", "thr+", "peak", "dbconn",
            "svcCPU", "dbCPU", "stallms", "span%", "x rps", "x p99", "paired x rps (95%)",
            "paired x p99 (95%)"
        ));
        let opt =
            |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
        for r in &p.results {
            out.push_str(&format!(
                "{:<16} {:>8.0} {:>6} {:>7.2} {:>7.2} {:>8.2} {:>6} {:>5} {:>6} {:>5} {:>6} {:>6.2} {:>6.2} {:>7.0} {:>6} {:>6} {:>6}  {:<28} {}\n",
                r.name,
                r.requests_per_sec,
                opt(r.spread, 2),
                r.p50_ms,
                r.p99_ms,
                r.p999_ms,
                r.errors,
                r.timeouts,
                r.threads_created,
                r.peak_threads,
                r.db_connections,
                r.service_cpu_s,
                r.db_cpu_s,
                r.longest_stall_ms,
                opt(r.span_change_pct, 0),
                opt(r.ratio_to_oracle, 2),
                opt(r.p99_ratio_to_oracle, 2),
                paired_cell(r.vs_oracle.as_ref(), verdict),
                paired_cell(r.p99_vs_oracle.as_ref(), latency_verdict),
            ));
        }
    }
    out
}

/// A paired ratio to the oracle: its median, and its 95% interval and
/// verdict (`verdict` of it), or the repeats above and below 1 when there
/// are too few for one.
fn paired_cell(p: Option<&Paired>, verdict: fn(&Paired) -> &'static str) -> String {
    let Some(p) = p else {
        return "-".to_string();
    };
    let v = verdict(p);
    match p.ci95 {
        Some((lo, hi)) => format!("{:.2} [{lo:.2}, {hi:.2}] {v}", p.median),
        None => format!("{:.2} ({}↑ {}↓, {v})", p.median, p.won, p.lost),
    }
}

/// What a paired latency ratio's 95% interval says: `level` when it
/// includes 1.0, `lower` or `higher` when all of it lies on one side.
fn latency_verdict(p: &Paired) -> &'static str {
    match verdict(p) {
        "ahead" => "higher",
        "behind" => "lower",
        v => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rps: f64, p99: f64) -> Run {
        Run {
            requests_per_sec: rps,
            p99_ms: p99,
            ..Run::default()
        }
    }

    /// A phase of `auto` against one static size, its oracle.
    fn auto_against_fixed(auto: &[Run], oracle: &[Run]) -> Phase {
        Phase::new(
            "x".into(),
            8,
            "m".into(),
            vec![Row::of("auto", auto), Row::of("fixed:4", oracle)],
            |n| n.starts_with("fixed:"),
        )
    }

    #[test]
    fn the_oracle_is_the_fastest_static_size_and_ratios_follow() {
        let rows = vec![
            Row::of(
                "auto",
                &[run(90.0, 12.0), run(110.0, 10.0), run(100.0, 11.0)],
            ),
            Row::of("fixed:2", &[run(50.0, 5.0)]),
            Row::of("fixed:8", &[run(120.0, 10.0)]),
            Row::of("tokio", &[run(500.0, 1.0)]),
        ];
        let p = Phase::new("mix-c8".into(), 8, "lookup=1".into(), rows, |n| {
            n.starts_with("fixed:")
        });
        let o = p.oracle.as_ref().unwrap();
        assert_eq!(o.name, "fixed:8");
        let auto = &p.results[0];
        assert_eq!(auto.requests_per_sec, 100.0);
        assert_eq!(auto.spread, Some(0.2));
        assert!((auto.ratio_to_oracle.unwrap() - 100.0 / 120.0).abs() < 1e-9);
        assert!((auto.p99_ratio_to_oracle.unwrap() - 1.1).abs() < 1e-9);
        assert!(table(std::slice::from_ref(&p)).contains("oracle fixed:8"));
        // One repeat of the oracle: auto's first repeat pairs with it.
        let paired = auto.vs_oracle.unwrap();
        assert!((paired.median - 90.0 / 120.0).abs() < 1e-9);
        assert_eq!(auto.verdict, Some("too few repeats"));
    }

    #[test]
    fn the_paired_ratio_pairs_each_repeat_with_the_oracles_own() {
        // auto's median is below the oracle's, but in every repeat it
        // served more than the oracle did in the same repeat.
        let oracle: Vec<Run> = [100.0, 200.0, 100.0, 200.0, 100.0, 200.0]
            .map(|v| run(v, 1.0))
            .into();
        let auto: Vec<Run> = [110.0, 210.0, 110.0, 210.0, 110.0, 210.0]
            .map(|v| run(v, 1.0))
            .into();
        let p = auto_against_fixed(&auto, &oracle);
        let a = &p.results[0];
        let v = a.vs_oracle.unwrap();
        assert_eq!((v.won, v.lost), (6, 0));
        assert_eq!(a.verdict, Some("ahead"));
        // Equal p99 in every repeat: level.
        assert_eq!(a.p99_vs_oracle.unwrap().median, 1.0);
        assert_eq!(a.p99_verdict, Some("level"));
        assert_eq!(p.results[1].verdict, Some("level"));
        let t = table(std::slice::from_ref(&p));
        assert!(t.contains("ahead") && t.contains("level"), "{t}");
    }

    #[test]
    fn the_p99_pairs_each_repeat_with_the_oracles_own() {
        // The oracle's own p99 moves fourfold from repeat to repeat (the
        // machine's stalls); auto's is above it in every repeat.
        let oracle: Vec<Run> = [10.0, 40.0, 10.0, 40.0, 10.0, 40.0, 40.0]
            .map(|p99| run(100.0, p99))
            .into();
        let auto: Vec<Run> = [15.0, 60.0, 15.0, 60.0, 15.0, 60.0, 45.0]
            .map(|p99| run(90.0, p99))
            .into();
        let p = auto_against_fixed(&auto, &oracle);
        let a = &p.results[0];
        assert_eq!(a.p99_ms_runs.len(), 7);
        let v = a.p99_vs_oracle.unwrap();
        assert_eq!((v.median, v.won, v.lost), (1.5, 7, 0));
        assert_eq!(a.p99_verdict, Some("higher"));
        let t = table(std::slice::from_ref(&p));
        assert!(t.contains("1.50 [") && t.contains("higher"), "{t}");
    }

    #[test]
    fn without_static_sizes_there_is_no_oracle() {
        let p = Phase::new(
            "x".into(),
            8,
            "m".into(),
            vec![Row::of("auto", &[run(1.0, 1.0)])],
            |_| false,
        );
        assert!(p.oracle.is_none() && p.results[0].ratio_to_oracle.is_none());
    }
}
