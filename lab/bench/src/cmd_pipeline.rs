//! The `pipeline` and `roysden` subcommands' options and entry points.

use clap::Args;

use crate::pipeline::{self, Impl};
use crate::roysden::{self, Variant};

/// Options of `tidepool-bench pipeline`.
#[derive(Debug, Args)]
pub struct PipelineArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Items per run.
    #[arg(long, default_value_t = 4000)]
    pub items: usize,
    /// Items in flight: tidepool's buffer pool and the peers' total queue
    /// capacity (at least the number of stages, at most 4096).
    #[arg(long, default_value_t = pipeline::IN_FLIGHT)]
    pub in_flight: usize,
    /// Interleaved runs of every implementation × shape; the median counts
    /// (7: one full cycle of the balanced order with all six and the
    /// oracle; 6 or more give each paired ratio its 95% interval).
    #[arg(long, default_value_t = 7)]
    pub repeats: usize,
    /// Only these shapes (comma-separated; default: all).
    #[arg(long, value_delimiter = ',')]
    pub shape: Vec<String>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Only these implementations (comma-separated; default: all), e.g. to
    /// profile one.
    #[arg(long = "impl", value_delimiter = ',')]
    pub imp: Vec<String>,
}

/// Run `tidepool-bench pipeline`.
pub fn pipeline(a: PipelineArgs) {
    if a.items == 0 || a.repeats == 0 {
        eprintln!("tidepool-bench pipeline: --items and --repeats must be at least 1");
        std::process::exit(2);
    }
    if !(4..=4096).contains(&a.in_flight) {
        eprintln!(
            "tidepool-bench pipeline: --in-flight must be in 4..=4096 (every shape's queues need one slot per stage), got {}",
            a.in_flight
        );
        std::process::exit(2);
    }
    let names: Vec<&str> = pipeline::shapes(1).iter().map(|s| s.name).collect();
    if let Some(bad) = a.shape.iter().find(|s| !names.contains(&s.as_str())) {
        eprintln!(
            "tidepool-bench pipeline: unknown shape `{bad}`: expected one of {}",
            names.join(", ")
        );
        std::process::exit(2);
    }
    let mut impls = Vec::new();
    for name in &a.imp {
        match Impl::ALL.iter().find(|i| i.name() == name) {
            Some(&i) => impls.push(i),
            None => {
                let all: Vec<&str> = Impl::ALL.iter().map(|i| i.name()).collect();
                eprintln!(
                    "tidepool-bench pipeline: unknown --impl `{name}`: expected one of {}",
                    all.join(", ")
                );
                std::process::exit(2);
            }
        }
    }
    if impls.is_empty() {
        impls = Impl::ALL.to_vec();
    }
    let b = pipeline::run(a.items, a.in_flight, a.repeats, &impls, &a.shape, a.quiet);
    if a.json {
        println!("{}", serde_json::to_string(&b).expect("serializable"));
    } else {
        print!("{}", pipeline::table(&b));
    }
}

/// Options of `tidepool-bench roysden`.
#[derive(Debug, Args)]
pub struct RoysdenArgs {
    /// Small files and 3 runs per arm: a smoke test that takes seconds.
    #[arg(long)]
    pub quick: bool,
    /// Runs per arm (default 30; 3 with --quick).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Blocks of 1 MiB (64 KiB with --quick) per program, in place of its
    /// own 48 (compute) or 96 (io): longer runs, so that filling and
    /// draining the pipeline weigh less (1..=4096).
    #[arg(long)]
    pub blocks: Option<usize>,
    /// Only this program (compute or io; default both).
    #[arg(long, value_parser = ["compute", "io"])]
    pub variant: Option<String>,
    /// Directory for the data files (default: a fresh one under the temp dir).
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Print one JSON object instead of Markdown tables.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Run `tidepool-bench roysden`.
pub fn roysden(a: RoysdenArgs) {
    let runs = a.runs.unwrap_or(if a.quick { 3 } else { 30 });
    if runs < 2 {
        eprintln!("tidepool-bench roysden: --runs must be at least 2 (the t-test needs two)");
        std::process::exit(2);
    }
    if let Some(b) = a.blocks.filter(|b| !(1..=roysden::MAX_BLOCKS).contains(b)) {
        eprintln!(
            "tidepool-bench roysden: --blocks must be in 1..={}, got {b}",
            roysden::MAX_BLOCKS
        );
        std::process::exit(2);
    }
    let variants = match a.variant.as_deref() {
        Some("compute") => vec![Variant::Compute],
        Some("io") => vec![Variant::Io],
        _ => vec![Variant::Compute, Variant::Io],
    };
    let dir = a.dir.clone().unwrap_or_else(roysden::default_dir);
    let result = roysden::run(&dir, runs, a.quick, a.blocks, &variants, a.quiet);
    if a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    match result {
        Ok(r) if a.json => println!("{}", serde_json::to_string(&r).expect("serializable")),
        Ok(r) => print!("{}", roysden::markdown(&r)),
        Err(e) => {
            eprintln!("tidepool-bench roysden: {e}");
            std::process::exit(1);
        }
    }
}
