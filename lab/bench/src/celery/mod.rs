//! `tidepool-bench celery`: the cluster against Celery 5 on Redis, side by
//! side on this machine, on the same two tasks.
//!
//! ```text
//! cargo run --release -p tidepool-bench -- celery            # 10,000 requests per kind, 3 repeats
//! cargo run --release -p tidepool-bench -- celery --quick    # 200 requests, 1 repeat
//! cargo run --release -p tidepool-bench -- celery --json     # the runs, rows and ratios as JSON
//! cargo run --release -p tidepool-bench -- celery --rate 150/s  # latency at the same offered load
//! ```
//!
//! Each system gets two worker processes with `--concurrency` slots each:
//! two tidepool nodes with pool maximum N ([`tide`]) against two Celery
//! workers with `--concurrency N` ([`pyside`]), each with a fresh broker
//! ([`redis`], or a `nats-server`) in its own directory. The tasks: `sleep`
//! (blocking, 10 ms) and `spin` (1 ms of the thread's CPU time). Per
//! repeat, per kind, the systems alternate (A B, then B A): a run without a
//! kill (throughput from the first submit to the last result, p50 and p99
//! of submit → result), then a run in which one worker process (the whole
//! Celery worker, main and children; one node process) is SIGKILLed once a
//! third of the requests are done, and not restarted. The task bodies
//! journal each start and finish ([`journal`]): `ran twice` counts requests
//! whose work was done twice, `lost` requests without a result. Every
//! process and directory is removed at the end, after an error, and on
//! Ctrl-C or SIGTERM ([`procs`]).

pub mod journal;
pub mod procs;
pub mod pyside;
pub mod redis;
pub mod report;
pub mod tide;
pub mod venv;

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use crate::server::cleanup;
use report::Run;
use tidepool_cluster::duration;

pub use tide::{node_main, NodeCmd};

/// Worker processes per system (nodes, Celery workers).
pub const WORKERS: usize = 2;

/// The task kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Blocking work (a sleep).
    Sleep,
    /// Computation (CPU time).
    Spin,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Sleep => "sleep",
            Kind::Spin => "spin",
        }
    }
}

/// One run's parameters.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The task kind.
    pub kind: Kind,
    /// How long each task works.
    pub length: Duration,
    /// Requests to submit.
    pub requests: usize,
    /// Slots per worker process.
    pub concurrency: usize,
    /// Ack wait / visibility timeout.
    pub redeliver: Duration,
    /// How long to wait for results after the last submit.
    pub timeout: Duration,
    /// Kill one worker mid-run.
    pub kill: bool,
    /// Submits per second (`None`: as fast as the client can).
    pub rate: Option<f64>,
    /// The run's directory (journals, logs, broker data).
    pub dir: PathBuf,
}

fn sleep_length(s: &str) -> Result<Duration, String> {
    duration::parse_within(s, Duration::from_micros(1)..=Duration::from_secs(10))
}

fn rate(s: &str) -> Result<f64, String> {
    let r = tidepool_cluster::limits::parse_rate(s)?;
    if !(0.1..=100_000.0).contains(&r) {
        return Err(format!(
            "rate {r}/s is out of range: allowed 0.1/s..=100000/s"
        ));
    }
    Ok(r)
}

fn redeliver(s: &str) -> Result<Duration, String> {
    duration::parse_within(s, Duration::from_secs(1)..=Duration::from_secs(3600))
}

/// Options of `celery`.
#[derive(Debug, Clone, Args)]
pub struct CeleryArgs {
    /// Requests per kind and run (3..=1000000).
    #[arg(long, default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(3..=1_000_000))]
    requests: u64,
    /// Repeats; each runs both systems on both kinds, with and without a kill (1..=100).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    repeats: u64,
    /// Slots per worker process: each node's pool maximum and each Celery
    /// worker's --concurrency (1..=256).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
    concurrency: u64,
    /// The blocking task's sleep (1us..=10s).
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = sleep_length)]
    sleep: Duration,
    /// The computing task's CPU time (1us..=10s).
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = sleep_length)]
    spin: Duration,
    /// How long an unacknowledged request waits before it goes to another
    /// worker: the nodes' ack wait and Redis's visibility timeout (1s..=1h).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = redeliver)]
    redeliver_after: Duration,
    /// How long to wait for the results after the last submit (1s..=1d).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = duration::result_timeout)]
    timeout: Duration,
    /// Submit at this rate (R/s, e.g. 150/s) instead of as fast as each
    /// client can: latency at the same offered load for both systems
    /// (0.1/s..=100000/s).
    #[arg(long, value_name = "R/s", value_parser = rate)]
    rate: Option<f64>,
    /// A smoke run: 200 requests per kind, one repeat (the kill included).
    #[arg(long)]
    quick: bool,
    /// Print the runs, rows and ratios as JSON instead of the table.
    #[arg(long)]
    json: bool,
}

/// The JSON document.
#[derive(Debug, Serialize)]
struct Doc {
    requests: u64,
    repeats: u64,
    workers: usize,
    concurrency: u64,
    sleep_ms: f64,
    spin_ms: f64,
    redeliver_after_s: f64,
    rate_per_s: Option<f64>,
    runs: Vec<Run>,
    rows: Vec<report::Row>,
    ratios: Vec<report::Ratios>,
}

/// Run the comparison and print the table (or JSON).
pub fn celery(mut args: CeleryArgs) -> Result<(), String> {
    if args.quick {
        args.requests = 200;
        args.repeats = 1;
    }
    cleanup::on_stop_signal()?;
    let venv = venv::ensure()?;
    let root = std::env::temp_dir().join(format!("tidepool-celery-{}", std::process::id()));
    std::fs::create_dir_all(&root).map_err(|e| format!("cannot make {}: {e}", root.display()))?;
    let _root = {
        let root = root.clone();
        cleanup::register(move || {
            let _ = std::fs::remove_dir_all(&root);
        })
    };
    eprintln!("celery bench: dir={}", root.display());
    let kinds = [(Kind::Sleep, args.sleep), (Kind::Spin, args.spin)];
    let mut runs = Vec::new();
    for repeat in 0..args.repeats as usize {
        for (k, &(kind, length)) in kinds.iter().enumerate() {
            for kill in [false, true] {
                let mut systems = ["tidepool", "celery"];
                if (repeat + k + usize::from(kill)) % 2 == 1 {
                    systems.reverse();
                }
                for system in systems {
                    let dir = root.join(format!(
                        "{system}-{}-{repeat}-{}",
                        kind.name(),
                        if kill { "kill" } else { "run" }
                    ));
                    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                    let spec = Spec {
                        kind,
                        length,
                        requests: args.requests as usize,
                        concurrency: args.concurrency as usize,
                        redeliver: args.redeliver_after,
                        timeout: args.timeout,
                        kill,
                        rate: args.rate,
                        dir: dir.clone(),
                    };
                    let (samples, killed_at) = match system {
                        "tidepool" => tide::run(&spec)?,
                        _ => pyside::run(&spec, &venv)?,
                    };
                    let ex = journal::Executions::read(
                        &(0..WORKERS)
                            .map(|i| journal::path(&dir, i))
                            .collect::<Vec<_>>(),
                    );
                    let run = Run::new(system, kind.name(), kill, repeat, &samples, &ex, killed_at);
                    eprintln!(
                        "repeat {repeat} {} {system}{}: {:.0} req/s, submit {:.0}/s, p50 {:.1} ms, p99 {:.1} ms, lost {}, never finished {}, ran twice {}, restarted {}",
                        kind.name(),
                        if kill { " (kill)" } else { "" },
                        run.throughput, run.submit_rate, run.p50_ms, run.p99_ms, run.lost, run.never_finished, run.ran_twice, run.restarted
                    );
                    runs.push(run);
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
        }
    }
    let names = ["sleep", "spin"];
    let (rows, ratios) = report::summarise(&runs, &names, &["tidepool", "celery"]);
    if args.json {
        let doc = Doc {
            requests: args.requests,
            repeats: args.repeats,
            workers: WORKERS,
            concurrency: args.concurrency,
            sleep_ms: args.sleep.as_secs_f64() * 1e3,
            spin_ms: args.spin.as_secs_f64() * 1e3,
            redeliver_after_s: args.redeliver_after.as_secs_f64(),
            rate_per_s: args.rate,
            runs,
            rows,
            ratios,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", report::table(&rows, &ratios, args.repeats as usize));
    }
    Ok(())
}
