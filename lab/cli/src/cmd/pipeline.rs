//! `tidepool pipeline`: run a built-in read → transform → checksum → write
//! pipeline and show where its time goes and which stage limits it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tidepool::policy::PolicySpec;
use tidepool_pipeline::{BoxError, Context, Flow, Pipeline, PrioritySpec, Report};
use tidepool_workload::body::{BusyLoop, TaskBody};

use crate::error::usage;
use crate::output;
use crate::plot::{self, ChartSpec, Series};

const EXAMPLES: &str = "\
Examples:
  tidepool pipeline                                  # 2000 items, the report as a table
  tidepool pipeline --replicas 1                     # the transform on one thread: it limits
  tidepool pipeline --io-priority nice:19 --json     # I/O stages niced up, JSON report
  tidepool pipeline --out pipeline-report/           # report.json, stages.csv, depth.svg, threads.svg
  tidepool pipeline --buffers 64 --compute 20us --transform-io 2ms   # I/O-bound transform: auto grows it

Stages: read (blocks --io), transform (computes --compute, blocks
--transform-io; --replicas N or
auto, a self-sizing stage run by tidepool's `auto` policy), checksum (computes
--compute / 8), write (blocks --io). Durations take a unit (300us, 2ms, 1s).
See docs/pipelines.md.";

/// A per-item time (`--io`, `--compute`, `--transform-io`): 0s..=1s.
fn item_time(s: &str) -> Result<Duration, String> {
    tidepool_cluster::duration::parse_within(s, Duration::ZERO..=Duration::from_secs(1))
}

/// Options of `tidepool pipeline`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct PipelineArgs {
    /// Items (rounds) the source produces.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub items: u64,
    /// Buffers in the pool (the bound on items in flight).
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub buffers: usize,
    /// Threads of the transform stage: a number, or `auto` (self-sizing).
    #[arg(long, value_name = "N|auto", default_value = "auto")]
    pub replicas: String,
    /// Most threads a self-sizing transform may use.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub max_threads: usize,
    /// Blocking time of read and write per item (0s..=1s).
    #[arg(long, value_name = "DURATION", default_value = "300us", value_parser = item_time)]
    pub io: Duration,
    /// CPU time of the transform per item (0s..=1s).
    #[arg(long, value_name = "DURATION", default_value = "600us", value_parser = item_time)]
    pub compute: Duration,
    /// Blocking time of the transform per item (0s..=1s; an I/O-bound
    /// transform: a self-sizing one grows past the core count).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = item_time)]
    pub transform_io: Duration,
    /// Priority of the read and write threads (nice:N, batch[:N], idle,
    /// dynamic-up[:STEP], dynamic-up-down[:STEP], backpressure[:STEP]).
    #[arg(long, value_name = "SPEC")]
    pub io_priority: Option<String>,
    /// Priority of the transform and checksum threads.
    #[arg(long, value_name = "SPEC")]
    pub compute_priority: Option<String>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write report.json, stages.csv and charts to this folder.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

fn priority(flag: &str, s: &Option<String>) -> anyhow::Result<Option<PrioritySpec>> {
    s.as_deref()
        .map(|s| PrioritySpec::parse(s).map_err(|e| usage(format!("{flag}: {e}"))))
        .transpose()
}

/// Run `tidepool pipeline`.
pub fn run(a: PipelineArgs) -> anyhow::Result<()> {
    if a.items == 0 {
        return Err(usage("--items must be at least 1"));
    }
    if !(1..=1024).contains(&a.buffers) {
        return Err(usage(format!(
            "--buffers {} must be between 1 and 1024",
            a.buffers
        )));
    }
    if !(1..=tidepool::MAX_THREADS).contains(&a.max_threads) {
        return Err(usage(format!(
            "--max-threads {} must be between 1 and {}",
            a.max_threads,
            tidepool::MAX_THREADS
        )));
    }
    let replicas = match a.replicas.as_str() {
        "auto" => None,
        n => match n.parse::<usize>() {
            Ok(n) if (1..=256).contains(&n) => Some(n),
            _ => {
                return Err(usage(format!(
                    "--replicas `{n}`: expected a number from 1 to 256, or `auto`"
                )))
            }
        },
    };
    let io_prio = priority("--io-priority", &a.io_priority)?;
    let cpu_prio = priority("--compute-priority", &a.compute_priority)?;
    if replicas.is_none() && !matches!(cpu_prio, None | Some(PrioritySpec::Fixed(_))) {
        return Err(usage(
            "--compute-priority: a self-sizing transform (--replicas auto) takes a fixed priority only (nice:N, batch[:N], idle)",
        ));
    }
    // Before the run, so that an unwritable --out costs no run.
    if let Some(dir) = &a.out {
        output::check_out_dir(dir)?;
    }
    let busy = BusyLoop::global();
    let io = TaskBody::new(Duration::ZERO, a.io);
    let compute = a.compute;
    let transform_body = TaskBody::new(compute, a.transform_io);
    let items = a.items;
    // Ctrl-C ends the stream at the next round: the report covers what ran.
    let cancel = crate::cancel::flag();
    let mut b = Pipeline::builder("demo")
        .buffers(a.buffers, || vec![0u64; 512])
        .source(
            "read",
            move |buf: &mut Vec<u64>, cx: &Context| -> Result<Flow, BoxError> {
                io.run(&busy);
                buf[0] = cx.round();
                let stop = cancel.load(std::sync::atomic::Ordering::Relaxed);
                Ok(if stop || cx.round() + 1 >= items {
                    Flow::Last
                } else {
                    Flow::More
                })
            },
        );
    if let Some(p) = io_prio {
        b = b.priority(p);
    }
    let transform = move || {
        move |buf: &mut Vec<u64>, _: &Context| -> Result<(), BoxError> {
            transform_body.run(&busy);
            buf[1] = buf[0].wrapping_mul(2654435761);
            Ok(())
        }
    };
    b = match replicas {
        Some(n) => b.replicated("transform", n, transform),
        None => b.sized(
            "transform",
            PolicySpec::parse("auto").expect("valid"),
            a.max_threads,
            transform,
        ),
    };
    if let Some(p) = cpu_prio {
        b = b.priority(p);
    }
    b = b.stage(
        "checksum",
        move |buf: &mut Vec<u64>, _: &Context| -> Result<(), BoxError> {
            busy.burn(compute / 8);
            buf[2] = buf.iter().fold(0, |a, &x| a ^ x);
            Ok(())
        },
    );
    if let Some(p) = cpu_prio {
        b = b.priority(p);
    }
    b = b.stage(
        "write",
        move |_: &mut Vec<u64>, _: &Context| -> Result<(), BoxError> {
            io.run(&busy);
            Ok(())
        },
    );
    if let Some(p) = io_prio {
        b = b.priority(p);
    }
    let report = b
        .build()
        .map_err(|e| usage(e.to_string()))?
        .run()
        .context("the demo pipeline failed")?;
    if a.json {
        crate::print(&(serde_json::to_string_pretty(&report)? + "\n"));
    } else {
        crate::print(&report.to_table());
    }
    if let Some(dir) = &a.out {
        let written = write_out(dir, &report)?;
        if !a.json {
            for p in written {
                eprintln!("wrote {}", p.display());
            }
        }
    }
    if crate::cancel::requested() {
        return Err(crate::error::Interrupted.into());
    }
    Ok(())
}

/// report.json, stages.csv, depth.svg and (for a self-sizing stage) threads.svg.
fn write_out(dir: &std::path::Path, r: &Report) -> anyhow::Result<Vec<PathBuf>> {
    output::ensure_dir(dir)?;
    let mut out = vec![output::write_json(&dir.join("report.json"), r)?];
    let secs = |d: Duration| format!("{:.6}", d.as_secs_f64());
    out.push(output::write_csv(
        &dir.join("stages.csv"),
        &[
            "stage",
            "threads",
            "items",
            "busy_s",
            "wait_input_s",
            "wait_output_s",
            "cpu_s",
            "us_per_item",
            "max_items_per_s",
        ],
        r.stages.iter().map(|s| {
            vec![
                s.name.clone(),
                s.threads.to_string(),
                s.items.to_string(),
                secs(s.busy),
                secs(s.wait_input),
                secs(s.wait_output),
                s.cpu.map(secs).unwrap_or_default(),
                s.time_per_item()
                    .map(|t| format!("{:.1}", t.as_secs_f64() * 1e6))
                    .unwrap_or_default(),
                s.capacity().map(|c| format!("{c:.1}")).unwrap_or_default(),
            ]
        }),
    )?);
    let depth: Vec<Series> = r
        .stages
        .iter()
        .map(|s| Series {
            name: s.name.clone(),
            points: s.depth.iter().map(|&(t, d)| (t, d as f64)).collect(),
            markers: false,
        })
        .collect();
    out.push(plot::line_chart(
        &dir.join("depth.svg"),
        &ChartSpec {
            title: "input queue depth (for the source: free buffers)".into(),
            x_label: "time since start (s)".into(),
            y_label: "buffers waiting".into(),
            y_from_zero: true,
            integer_y: true,
            ..ChartSpec::default()
        },
        &depth,
    )?);
    let sized: Vec<Series> = r
        .stages
        .iter()
        .filter(|s| !s.sizes.is_empty())
        .map(|s| Series {
            name: s.name.clone(),
            points: s.sizes.iter().map(|&(t, n)| (t, n as f64)).collect(),
            markers: true,
        })
        .collect();
    if !sized.is_empty() {
        out.push(plot::line_chart(
            &dir.join("threads.svg"),
            &ChartSpec {
                title: "self-sizing stage: threads over time".into(),
                x_label: "time since start (s)".into(),
                y_label: "live threads".into(),
                y_from_zero: true,
                integer_y: true,
                ..ChartSpec::default()
            },
            &sized,
        )?);
    }
    Ok(out)
}
