//! `tidepool-bench`: side-by-side benchmarks of tidepool against peer pools.
//!
//! ```text
//! cargo run --release -p tidepool-bench -- dispatch            # table
//! cargo run --release -p tidepool-bench -- dispatch --json     # one JSON object
//! cargo run --release -p tidepool-bench -- snapshot            # cost of Pool::stats
//! cargo run --release -p tidepool-bench -- soak --duration 10m  # RSS over a long run
//! cargo run --release -p tidepool-bench -- server --quick      # HTTP + PostgreSQL + wrk
//! cargo run --release -p tidepool-bench -- celery --quick      # the cluster against Celery
//! ```

use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};

use tidepool_bench::harness::{fmt_load, rotated};
use tidepool_bench::report::{Report, Samples};
use tidepool_bench::scenario::{self, Idle, Params, Sample, Scenario};
use tidepool_bench::subject::{Subject, Visit};
use tidepool_bench::subjects::Impl;

/// Side-by-side benchmarks of tidepool against peer thread pools.
#[derive(Debug, Parser)]
#[command(name = "tidepool-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Task dispatch: empty-task throughput (1, 2, 4 and 8 submitters), ~1 µs
    /// task throughput, bursts into an idle pool, and submit-to-start latency
    /// into an idle pool.
    Dispatch(DispatchArgs),
    /// Cost of one statistics snapshot (`Pool::stats`) by pool size: what
    /// the controller pays on every call of an adaptive policy.
    Snapshot(SnapshotArgs),
    /// Pipelines: tidepool-pipeline against peer pipeline crates, per shape.
    Pipeline(tidepool_bench::cmd_pipeline::PipelineArgs),
    /// Roysden (2004): per-stage priority scheduling on a columnsort pipeline.
    Roysden(tidepool_bench::cmd_pipeline::RoysdenArgs),
    /// Soak: a pool at a steady rate for a long time, RSS sampled (JSON).
    Soak(tidepool_bench::cmd_soak::SoakArgs),
    /// A real HTTP service over a real PostgreSQL under wrk: tidepool's
    /// policies against static sizes, thread-per-request and tokio.
    Server(tidepool_bench::server::ServerArgs),
    /// The cluster against Celery on Redis: throughput, latency, and what a
    /// SIGKILLed worker costs each.
    Celery(tidepool_bench::celery::CeleryArgs),
    /// A node of the Celery comparison (started by `celery`).
    #[command(hide = true)]
    CeleryNode(tidepool_bench::celery::NodeCmd),
}

#[derive(Debug, Args)]
struct SnapshotArgs {
    /// Pool sizes to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 18, 60])]
    sizes: Vec<usize>,
    /// Snapshots per size; the mean is reported.
    #[arg(long, default_value_t = 500)]
    snapshots: usize,
}

#[derive(Debug, Args)]
struct DispatchArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Empty tasks per throughput run.
    #[arg(long, default_value_t = 200_000)]
    tasks: usize,
    /// ~1 µs tasks per `work-1us` run.
    #[arg(long, default_value_t = 100_000)]
    work_tasks: usize,
    /// Lone tasks per `latency-idle` run.
    #[arg(long, default_value_t = 1_000)]
    samples: usize,
    /// Pause between two latency samples or bursts, with a unit (`500us`;
    /// 1µs to 1s), which lets the pool go idle.
    #[arg(long, value_name = "DURATION", default_value = "500us", value_parser = idle_gap)]
    idle: Duration,
    /// Bursts per `burst-idle` run.
    #[arg(long, default_value_t = 100)]
    bursts: usize,
    /// Empty tasks per burst.
    #[arg(long, default_value_t = 200)]
    burst_tasks: usize,
    /// Runs of every impl × scenario; the median is reported.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Back-to-back runs per throughput measurement, of which the best
    /// counts (filters out bursts of interference from other processes).
    #[arg(long, default_value_t = 3)]
    inner: usize,
    /// Worker threads of every pool (default: the number of cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print a Markdown table (ratios to the best peer) instead of the
    /// readable table.
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    /// Render a JSON report saved by `--save` instead of running anything.
    #[arg(long)]
    load: Option<std::path::PathBuf>,
    /// Also write the JSON report to this file.
    #[arg(long)]
    save: Option<std::path::PathBuf>,
    /// Only these implementations (repeat or comma-separate; default: all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<Impl>,
    /// Only these scenarios (repeat or comma-separate; default: all).
    #[arg(long, value_delimiter = ',', value_parser = parse_scenario)]
    scenario: Vec<Scenario>,
    /// Throughput tasks capture nothing (zero-sized closures) instead of an
    /// 8-byte payload.
    #[arg(long)]
    zero_sized: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    quiet: bool,
}

fn parse_scenario(s: &str) -> Result<Scenario, String> {
    Scenario::ALL
        .into_iter()
        .find(|sc| sc.name() == s)
        .ok_or_else(|| {
            let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
            format!(
                "unknown scenario `{s}`: expected one of {}",
                names.join(", ")
            )
        })
}

/// Warm one freshly built implementation up, then measure one scenario.
struct RunOne<'a> {
    scenario: Scenario,
    params: &'a Params,
}

impl Visit for RunOne<'_> {
    type Output = Sample;

    fn visit<S: Subject>(self, s: &S) -> Self::Output {
        scenario::warm_up(self.scenario, s, self.params);
        scenario::run(self.scenario, s, self.params)
    }
}

/// The 1-, 5- and 15-minute load averages, as `/proc/loadavg` shows them.
/// `--idle`: a duration with a unit, 1 µs to 1 s.
fn idle_gap(s: &str) -> Result<Duration, String> {
    tidepool_cluster::duration::parse_within(s, Duration::from_micros(1)..=Duration::from_secs(1))
}

fn dispatch(args: DispatchArgs) {
    if let Some(path) = &args.load {
        let report: Report = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
            .unwrap_or_else(|e| {
                eprintln!("cannot load {}: {e}", path.display());
                std::process::exit(2);
            });
        output(
            &args,
            &report,
            &format!("tidepool-bench dispatch: loaded {}", path.display()),
        );
        return;
    }
    let threads = args.threads.unwrap_or_else(tidepool::sys::cores);
    let impls = if args.only.is_empty() {
        Impl::defaults()
    } else {
        args.only.clone()
    };
    let scenarios = if args.scenario.is_empty() {
        Scenario::ALL.to_vec()
    } else {
        args.scenario.clone()
    };
    let params = Params {
        tasks: args.tasks,
        work_tasks: args.work_tasks,
        samples: args.samples,
        idle_gap: args.idle,
        bursts: args.bursts,
        burst_tasks: args.burst_tasks,
        zero_sized: args.zero_sized,
        inner: args.inner.max(1),
    };
    let repeats = args.repeats.max(1);
    // Calibrated here, outside any measurement.
    let per_us = tidepool_workload::BusyLoop::global().iters_per_us();
    let load_start = tidepool::sys::load_average();
    // Always on stderr (also with --json and --quiet): a run's numbers mean
    // little without the machine's load next to them.
    eprintln!(
        "dispatch: {} impls × {} scenarios × {repeats} repeats, {threads} threads, \
         spin {per_us:.0} iters/µs; load average {}",
        impls.len(),
        scenarios.len(),
        fmt_load(load_start)
    );

    let started = Instant::now();
    let mut samples = Samples::new();
    for rep in 0..repeats {
        let t = Instant::now();
        // Within a repeat, every scenario runs every impl back to back, in
        // an order that rotates with the repeat and the scenario: the impls
        // compared in one scenario ran within seconds of each other, under
        // the same load, and each takes every position in turn. Throughput
        // scenarios build one pool at a time (no other pool alive); the idle
        // scenarios keep every impl's pool alive and take their samples in
        // short blocks of each in turn (`scenario::BLOCK`, about 5 ms).
        for (k, &sc) in scenarios.iter().enumerate() {
            let order: Vec<Impl> = rotated(&impls, rep + k)
                .into_iter()
                .filter(|i| i.runs(sc))
                .collect();
            if sc.is_idle() {
                let pools: Vec<Box<dyn Idle>> =
                    order.iter().map(|i| i.build_idle(threads)).collect();
                let refs: Vec<&dyn Idle> = pools.iter().map(|b| &**b).collect();
                scenario::warm_up_idle(sc, &refs, &params);
                let results = scenario::run_idle(sc, &refs, &params, rep + k);
                for (imp, sample) in order.iter().zip(results) {
                    samples.entry((sc, *imp)).or_default().push(sample);
                }
                continue;
            }
            for imp in order {
                let sample = imp.with(
                    threads,
                    RunOne {
                        scenario: sc,
                        params: &params,
                    },
                );
                samples.entry((sc, imp)).or_default().push(sample);
            }
        }
        if !args.quiet {
            eprintln!(
                "  repeat {}/{repeats}: {:>6.2} s, load average {}",
                rep + 1,
                t.elapsed().as_secs_f64(),
                fmt_load(tidepool::sys::load_average())
            );
        }
    }
    let load_end = tidepool::sys::load_average();
    eprintln!("dispatch: done, load average {}", fmt_load(load_end));
    let report =
        Report::from_samples(&scenarios, &impls, &samples).with_load_average(load_start, load_end);
    if let Some(path) = &args.save {
        if let Err(e) = std::fs::write(path, report.to_json() + "\n") {
            eprintln!("cannot write {}: {e}", path.display());
            std::process::exit(2);
        }
    }
    let header = format!(
        "tidepool-bench dispatch: {threads} threads, median (min–max) of {repeats} repeats \
         (throughput: best of {} back-to-back runs each); {} empty tasks, \
         {} ~1 µs tasks, {} bursts of {}, {} latency samples ({} apart); {:.0} s total",
        params.inner,
        params.tasks,
        params.work_tasks,
        params.bursts,
        params.burst_tasks,
        params.samples,
        tidepool_cluster::duration::show(args.idle),
        started.elapsed().as_secs_f64()
    );
    output(&args, &report, &header);
}

/// Print `report` as JSON, Markdown or the readable table.
fn output(args: &DispatchArgs, report: &Report, header: &str) {
    if args.json {
        println!("{}", report.to_json());
    } else if args.markdown {
        print!("{}", report.to_markdown());
    } else {
        print!("{}", report.to_table(header));
    }
}

/// Time `Pool::stats` on pools with statistics on whose every worker has run
/// tasks (so each has a record, a CPU clock and scheduler statistics).
fn snapshot(args: SnapshotArgs) {
    println!(
        "{:>8}  {:>14}  {:>14}",
        "workers", "stats() mean", "per worker"
    );
    for &n in &args.sizes {
        let pool = match tidepool::Pool::builder()
            .threads(n)
            .statistics(true)
            .build()
        {
            Ok(p) => p,
            Err(e) => {
                eprintln!("tidepool-bench: pool of {n}: {e}");
                std::process::exit(2);
            }
        };
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
        for _ in 0..n {
            let b = barrier.clone();
            // Every worker takes one task: all of them hold a record.
            let _ = pool.execute(move || {
                b.wait();
            });
        }
        // Then tasks of 0–49 µs, so each worker's latency histograms hold
        // many buckets, as a server's do.
        for i in 0..n * 100 {
            let _ = pool.execute(move || {
                let until = Instant::now() + std::time::Duration::from_micros(i as u64 % 50);
                while Instant::now() < until {}
            });
        }
        pool.wait_idle();
        let k = args.snapshots.max(1);
        let start = Instant::now();
        for _ in 0..k {
            std::hint::black_box(pool.stats());
        }
        let mean = start.elapsed() / k as u32;
        println!(
            "{n:>8}  {:>11.1} µs  {:>11.2} µs",
            mean.as_secs_f64() * 1e6,
            mean.as_secs_f64() * 1e6 / n as f64
        );
    }
}

fn main() {
    match Cli::parse().command {
        Command::Dispatch(args) => dispatch(args),
        Command::Snapshot(args) => snapshot(args),
        Command::Pipeline(args) => tidepool_bench::cmd_pipeline::pipeline(args),
        Command::Roysden(args) => tidepool_bench::cmd_pipeline::roysden(args),
        Command::Soak(args) => tidepool_bench::cmd_soak::soak(args),
        Command::Server(args) => {
            if let Err(e) = tidepool_bench::server::server(args) {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
        Command::Celery(args) => {
            if let Err(e) = tidepool_bench::celery::celery(args) {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
        Command::CeleryNode(args) => {
            if let Err(e) = tidepool_bench::celery::node_main(args) {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }
}
