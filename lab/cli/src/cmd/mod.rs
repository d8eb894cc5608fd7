//! The command line: global structure and the options shared by several
//! subcommands. One file per subcommand.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::error::usage;
use crate::exec::Settings;
use crate::repeats::MAX_REPEATS;
use crate::source;
use tidepool_workload::limits::shown_f64;
use tidepool_workload::Limits;

pub mod calibrate;
pub mod cluster;
pub mod compare;
pub mod demo;
pub mod gen;
pub mod node;
pub mod pipeline;
pub mod reproduce;
pub mod run;
pub mod sim;
pub mod sweep;

const ABOUT: &str =
    "Run workloads against thread-pool sizing policies and show which is best, and why.";

const LONG_ABOUT: &str = "\
tidepool replays a request trace (a suite workload, a generator spec or a trace file) \
against thread pools sized by different policies, measures the papers' metrics \
(throughput, wait/idle time, response, turnaround, threads created and kept), sweeps \
static pool sizes to find the best one (the oracle), and compares policies against it, \
with tables, JSON, CSV and SVG plots.

Workloads: a suite name (cpu, io, mixed, steps, bursty, azure, and where size decides \
throughput sat100, sat50, sat10, closed, overload, shift; `suite` = all twelve), a \
generator spec such as `poisson:rate=2000,service=exp:200us,n=5000,free=50,seed=1` \
(kinds: poisson, periodic, normal, lognormal, steps, onoff, closed), or a trace file \
(thesis format, .swf, Azure .csv).

Policies: fixed:N, tpr, watermark[:MIN..MAX], xu-bode[:initial=N,stride=N], \
hisdyn[:max=N,p=P], frequency, hill-climb, auto.

Limits: a workload has at most --max-tasks tasks (default 1000000) and trace lines at \
most 65536 bytes (docs/trace-format.md).

Exit codes: 0 success, 1 runtime error, 2 usage error, 130 stopped by Ctrl-C (partial \
results written).";

const EXAMPLES: &str = "\
Examples:
  tidepool demo                                   # the whole suite vs the main policies, report in tidepool-report/
  tidepool run --workload cpu --policy auto       # one run, summary table
  tidepool sweep --workload io --sizes 1..64:x2   # throughput/RAIT vs static size, safe zone
  tidepool compare --workload mixed --policies auto,xu-bode,hisdyn,tpr --out report/
  tidepool gen poisson:rate=2000,n=5000 -o my.trace
  tidepool calibrate
  tidepool reproduce all --json                   # the papers' claims beside ours
  tidepool cluster up --nodes 3                   # a distributed pool on NATS JetStream";

/// `tidepool`: the command line.
#[derive(Debug, Parser)]
#[command(name = "tidepool", version, about = ABOUT, long_about = LONG_ABOUT, after_help = EXAMPLES)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
    /// Most tasks a workload may have (traces, generator specs, suite scales),
    /// 1 to 100000000; about 200 bytes of memory per task during a replay.
    #[arg(
        long,
        global = true,
        value_name = "N",
        default_value_t = Limits::DEFAULT_MAX_TASKS as u64,
        value_parser = clap::value_parser!(u64).range(1..=MAX_TASKS_CEILING)
    )]
    pub max_tasks: u64,
}

/// The highest `--max-tasks` (about 20 GB of replay state).
pub const MAX_TASKS_CEILING: u64 = 100_000_000;

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a trace file from a generator spec or suite name.
    Gen(gen::GenArgs),
    /// Replay one workload against one policy and summarise the run.
    Run(run::RunArgs),
    /// Replay one workload on static pools of several sizes: throughput, RAIT, safe zone.
    Sweep(sweep::SweepArgs),
    /// Compare policies on one or more workloads against the best static size (the oracle).
    Compare(compare::CompareArgs),
    /// The main job on built-in defaults: suite × main policies, report folder with plots.
    Demo(demo::DemoArgs),
    /// Measure the busy-loop calibration error and the replay pacing error.
    Calibrate(calibrate::CalibrateArgs),
    /// The comparison of `compare` in virtual time, at any core count; --validate, --bench.
    Sim(sim::SimArgs),
    /// Run the papers' headline experiments here; each claim beside ours, with a verdict.
    Reproduce(reproduce::ReproduceArgs),
    /// A distributed pool on NATS JetStream: up, replay, status, chaos.
    Cluster(cluster::ClusterArgs),
    /// Run one node of a cluster (a self-sizing pool fed by NATS JetStream).
    Node(node::NodeCmdArgs),
    /// Run a built-in pipeline (read → transform → checksum → write) and report its stages.
    Pipeline(pipeline::PipelineArgs),
}

/// Run the parsed command.
pub fn dispatch(cli: Cli) -> anyhow::Result<()> {
    source::set_max_tasks(usize::try_from(cli.max_tasks).unwrap_or(usize::MAX));
    match cli.command {
        Command::Gen(a) => gen::run(a),
        Command::Run(a) => run::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Calibrate(a) => calibrate::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Reproduce(a) => reproduce::run(a),
        Command::Cluster(a) => cluster::run(a),
        Command::Node(a) => node::run(a),
        Command::Pipeline(a) => pipeline::run(a),
    }
}

/// `--repeats N`, shared by `compare` and `demo`.
#[derive(Debug, Clone, Copy, Args)]
pub struct RepeatArgs {
    /// Run the whole comparison N times (1 to 20), each with its own sweep
    /// and oracle, and report medians (min–max) over the repeats.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_REPEATS))
    )]
    pub repeats: u32,
}

/// Allowed `--speed`.
pub const SPEED_RANGE: (f64, f64) = (1e-6, 1e6);
/// `--drain-timeout`: 1ms..=7d, with a unit.
fn drain_timeout(s: &str) -> Result<Duration, String> {
    tidepool_cluster::duration::parse_within(
        s,
        Duration::from_millis(1)..=Duration::from_secs(7 * 86_400),
    )
}

/// Replay and pool options shared by `run`, `sweep` and `compare`.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// Upper bound of adaptive pools (policies other than fixed and tpr).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max_threads: usize,
    /// Lower bound of adaptive pools (a policy may raise it).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub min_threads: usize,
    /// Replay speed: 2 halves every arrival gap (task bodies unchanged);
    /// 1e-6 to 1e6.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub speed: f64,
    /// Stop waiting for unfinished tasks this long after the last
    /// submission (the run is then marked as stopped early); 1ms..=7d.
    #[arg(long, value_name = "DURATION", value_parser = drain_timeout)]
    pub drain_timeout: Option<Duration>,
    /// No progress output on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

impl ReplayArgs {
    /// Validated settings (bad values are usage errors).
    pub fn settings(&self, keep_records: bool) -> anyhow::Result<Settings> {
        if self.min_threads == 0 || self.min_threads > self.max_threads {
            return Err(usage(format!(
                "--min-threads {} must be between 1 and --max-threads ({})",
                self.min_threads, self.max_threads
            )));
        }
        if !(1..=tidepool::MAX_THREADS).contains(&self.max_threads) {
            return Err(usage(format!(
                "--max-threads {} must be between 1 and {}",
                self.max_threads,
                tidepool::MAX_THREADS
            )));
        }
        if !(self.speed >= SPEED_RANGE.0 && self.speed <= SPEED_RANGE.1) {
            return Err(usage(format!(
                "--speed {} is outside {:e}..={:e}",
                shown_f64(self.speed),
                SPEED_RANGE.0,
                SPEED_RANGE.1
            )));
        }
        let drain_timeout = self.drain_timeout;
        Ok(Settings {
            min_threads: self.min_threads,
            max_threads: self.max_threads,
            speed: self.speed,
            drain_timeout,
            keep_records,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_has_examples_in_its_help() {
        let mut cmd = Cli::command();
        for sub in cmd.get_subcommands_mut() {
            let help = sub.render_long_help().to_string();
            assert!(help.contains("Examples:"), "{}", sub.get_name());
            assert!(help.contains("tidepool "), "{}", sub.get_name());
        }
    }
}
