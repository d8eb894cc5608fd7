//! `tidepool-bench soak`: a pool under steady load for a long time, with its
//! resident memory sampled, to show that it holds constant memory (the
//! decision log and size series are bounded rings).
//!
//! ```text
//! cargo run --release -p tidepool-bench -- soak --duration 10m --out soak.json
//! ```

use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use tidepool::policy::PolicySpec;
use tidepool::Pool;
use tidepool_cluster::duration;

use tidepool_workload::BusyLoop;

/// Options of `soak`.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// How long to run (1s..=7d).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = run_length)]
    duration: Duration,
    /// Tasks submitted per second, paced evenly.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    rate: u64,
    /// Work per task, spinning (0s..=1s).
    #[arg(long, value_name = "DURATION", default_value = "50us", value_parser = task_length)]
    task: Duration,
    /// Time between two RSS samples (1s..=1h).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = sample_every)]
    every: Duration,
    /// The sizing policy (default: the chattiest, `xu-bode`).
    #[arg(long, default_value = "xu-bode", value_parser = parse_policy)]
    policy: PolicySpec,
    /// Most worker threads.
    #[arg(long, default_value_t = 16)]
    max_threads: usize,
    /// Also write the JSON report to this file (checked before the run).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

fn run_length(s: &str) -> Result<Duration, String> {
    duration::parse_within(s, Duration::from_secs(1)..=Duration::from_secs(7 * 86_400))
}

fn task_length(s: &str) -> Result<Duration, String> {
    duration::parse_within(s, Duration::ZERO..=Duration::from_secs(1))
}

fn sample_every(s: &str) -> Result<Duration, String> {
    duration::parse_within(s, Duration::from_secs(1)..=Duration::from_secs(3600))
}

fn parse_policy(s: &str) -> Result<PolicySpec, String> {
    let spec = PolicySpec::parse(s).map_err(|e| e.to_string())?;
    match spec.build() {
        Some(_) => Ok(spec),
        None => Err(format!("`{s}` is not a pool policy")),
    }
}

/// One RSS sample.
#[derive(Debug, Serialize)]
struct Sample {
    /// Seconds since the run started.
    t: f64,
    rss_kb: u64,
    live_threads: usize,
    /// Decisions made so far (kept in the log + dropped from it).
    decisions: u64,
    decisions_kept: usize,
}

#[derive(Debug, Serialize)]
struct SoakReport {
    policy: String,
    rate: u64,
    task_us: u64,
    duration_s: u64,
    submitted: u64,
    completed: u64,
    spawn_failures: u64,
    /// Least-squares slope of RSS over the whole run, KB per second.
    slope_kb_per_s: f64,
    /// The same over the second half (after warm-up).
    slope_second_half_kb_per_s: f64,
    load_average_start: Option<[f64; 3]>,
    load_average_end: Option<[f64; 3]>,
    samples: Vec<Sample>,
}

/// Resident set size in KB, from `/proc/self/statm` (second field, pages).
fn rss_kb() -> u64 {
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page / 1024)
}

/// Least-squares slope of `y` over `x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    if sxx > 0.0 {
        sxy / sxx
    } else {
        0.0
    }
}

/// Run the soak and print its JSON report.
pub fn soak(args: SoakArgs) {
    if let Err(e) = run(&args) {
        eprintln!("soak: {e}");
        std::process::exit(1);
    }
}

fn run(args: &SoakArgs) -> Result<(), String> {
    // Checked before the run, so its results are never lost.
    let out = match &args.out {
        Some(path) => Some(
            std::fs::File::create(path)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        ),
        None => None,
    };
    BusyLoop::global(); // calibrated here, before the clock starts
    let policy = args.policy.build().ok_or("not a pool policy")?;
    let pool = Pool::builder()
        .name("soak")
        .min_threads(1)
        .max_threads(args.max_threads)
        .policy_boxed(policy)
        .build()
        .map_err(|e| e.to_string())?;
    let load_average_start = tidepool::sys::load_average();
    eprintln!(
        "soak: {} at {} tasks/s of {} for {}, RSS every {}; load average {:?}",
        args.policy.name(),
        args.rate,
        duration::show(args.task),
        duration::show(args.duration),
        duration::show(args.every),
        load_average_start
    );
    let start = Instant::now();
    let end = start + args.duration;
    let gap = Duration::from_secs(1) / args.rate as u32;
    let every = args.every;
    let mut samples = Vec::new();
    let mut next_sample = start;
    let mut next_task = start;
    let task = args.task;
    loop {
        let now = Instant::now();
        if now >= next_sample {
            let stats = pool.stats();
            let kept = pool.decisions().len();
            samples.push(Sample {
                t: now.duration_since(start).as_secs_f64(),
                rss_kb: rss_kb(),
                live_threads: stats.live_threads,
                decisions: kept as u64 + stats.decisions_dropped,
                decisions_kept: kept,
            });
            next_sample += every;
        }
        if now >= end {
            break;
        }
        if now < next_task {
            std::thread::sleep(next_task - now);
        }
        pool.execute(move || BusyLoop::global().burn(task))
            .map_err(|e| e.to_string())?;
        // Paced by the clock, not by the sleeps: a late wake-up catches up.
        next_task += gap;
    }
    pool.wait_idle();
    let stats = pool.stats();
    let points: Vec<(f64, f64)> = samples.iter().map(|s| (s.t, s.rss_kb as f64)).collect();
    let report = SoakReport {
        policy: args.policy.name().to_string(),
        rate: args.rate,
        task_us: args.task.as_micros() as u64,
        duration_s: args.duration.as_secs(),
        submitted: stats.submitted,
        completed: stats.completed,
        spawn_failures: stats.spawn_failures,
        slope_kb_per_s: slope(&points),
        slope_second_half_kb_per_s: slope(&points[points.len() / 2..]),
        load_average_start,
        load_average_end: tidepool::sys::load_average(),
        samples,
    };
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    if let Some(mut file) = out {
        use std::io::Write;
        writeln!(file, "{json}").map_err(|e| format!("cannot write the report: {e}"))?;
    }
    use std::io::Write;
    writeln!(std::io::stdout(), "{json}").map_err(|e| format!("cannot write to stdout: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_of_a_line_is_its_gradient() {
        let line: Vec<_> = (0..10).map(|x| (x as f64, 3.0 * x as f64 + 7.0)).collect();
        assert!((slope(&line) - 3.0).abs() < 1e-9);
        assert_eq!(slope(&line[..1]), 0.0);
        let flat: Vec<_> = (0..10).map(|x| (x as f64, 5.0)).collect();
        assert_eq!(slope(&flat), 0.0);
    }

    #[test]
    fn rss_is_read() {
        assert!(rss_kb() > 0);
    }
}
