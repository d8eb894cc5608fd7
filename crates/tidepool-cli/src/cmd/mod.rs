//! The command line: global structure and the options shared by several
//! subcommands. One file per subcommand.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::error::usage;
use crate::exec::Settings;
use crate::repeats::MAX_REPEATS;

pub mod calibrate;
pub mod compare;
pub mod demo;
pub mod gen;
pub mod pipeline;
pub mod run;
pub mod sweep;

const ABOUT: &str =
    "Run workloads against thread-pool sizing policies and show which is best, and why.";

const LONG_ABOUT: &str = "\
tidepool replays a request trace (a suite workload, a generator spec or a trace file) \
against thread pools sized by different policies, measures the papers' metrics \
(throughput, wait/idle time, response, turnaround, threads created and kept), sweeps \
static pool sizes to find the best one (the oracle), and compares policies against it, \
with tables, JSON, CSV and SVG plots.

Workloads: a suite name (cpu, io, mixed, steps, bursty, azure; `suite` = all six), a \
generator spec such as `poisson:rate=2000,service=exp:200us,n=5000,free=50,seed=1` \
(kinds: poisson, periodic, normal, lognormal, steps, onoff), or a trace file (thesis \
format, .swf, Azure .csv).

Policies: fixed:N, tpr, watermark[:MIN..MAX], xu-bode[:initial=N,stride=N], \
hisdyn[:max=N,p=P], frequency, hill-climb, auto.

Exit codes: 0 success, 1 runtime error, 2 usage error, 130 stopped by Ctrl-C (partial \
results written).";

const EXAMPLES: &str = "\
Examples:
  tidepool demo                                   # the whole suite vs the main policies, report in tidepool-report/
  tidepool run --workload cpu --policy auto       # one run, summary table
  tidepool sweep --workload io --sizes 1..64:x2   # throughput/RAIT vs static size, safe zone
  tidepool compare --workload mixed --policies auto,xu-bode,hisdyn,tpr --out report/
  tidepool gen poisson:rate=2000,n=5000 -o my.trace
  tidepool calibrate";

/// `tidepool`: the command line.
#[derive(Debug, Parser)]
#[command(name = "tidepool", version, about = ABOUT, long_about = LONG_ABOUT, after_help = EXAMPLES)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

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
    /// Run a built-in pipeline (read → transform → checksum → write) and report its stages.
    Pipeline(pipeline::PipelineArgs),
}

/// Run the parsed command.
pub fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Gen(a) => gen::run(a),
        Command::Run(a) => run::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Calibrate(a) => calibrate::run(a),
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

/// Replay and pool options shared by `run`, `sweep` and `compare`.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// Upper bound of adaptive pools (policies other than fixed and tpr).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max_threads: usize,
    /// Lower bound of adaptive pools (a policy may raise it).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub min_threads: usize,
    /// Replay speed: 2 halves every arrival gap (task bodies unchanged).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub speed: f64,
    /// Stop waiting for unfinished tasks this many seconds after the last
    /// submission (the run is then marked as stopped early).
    #[arg(long, value_name = "SECS")]
    pub drain_timeout: Option<f64>,
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
        if !(self.speed.is_finite() && self.speed > 0.0) {
            return Err(usage(format!("--speed {} must be > 0", self.speed)));
        }
        let drain_timeout = match self.drain_timeout {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
            Some(s) => return Err(usage(format!("--drain-timeout {s} must be > 0"))),
        };
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
