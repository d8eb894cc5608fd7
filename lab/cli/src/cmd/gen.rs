//! `tidepool gen SPEC -o FILE`: write a trace file.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tidepool_workload::{write_trace, write_trace_file};

use crate::source;

const EXAMPLES: &str = "\
Examples:
  tidepool gen poisson:rate=2000,service=exp:200us,n=5000,free=50,seed=1 -o poisson.trace
  tidepool gen steps:rate=500,step=10,steps=10,step_time=1s,service=exp:2ms -o steps.trace
  tidepool gen io --scale 0.25 -o io.trace       # a suite workload, a quarter as long
  tidepool gen my-cluster.swf -o cluster.trace   # convert an SWF or Azure CSV trace
  tidepool gen cpu | head                        # no -o: the trace on stdout
  tidepool gen closed -o closed.trace            # a closed loop: the file says `clients 64`

The file is in the thesis trace format (docs/trace-format.md): one task per line,
`request_id app_id start_delay_us exec_us [cpu_us blocked_us]`. A closed-loop
spec writes a `clients N` line first, and `start_delay_us` is then each task's
think time: the file replays closed-loop, like the spec.";

/// Options of `tidepool gen`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct GenArgs {
    /// Generator spec (KIND:key=value,...), suite name, or trace file to convert.
    #[arg(value_name = "SPEC")]
    pub spec: String,
    /// Output file (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Length factor for suite workloads (0.25 = a quarter as many tasks).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub scale: f64,
}

/// Run `tidepool gen`.
pub fn run(a: GenArgs) -> anyhow::Result<()> {
    if let Some(path) = a.output.as_deref().filter(|p| p.as_os_str() != "-") {
        crate::output::check_out_file(path)?;
    }
    let w = source::load(&a.spec, a.scale)?;
    let s = w.trace.stats();
    match &a.output {
        Some(path) if path.as_os_str() != "-" => {
            write_trace_file(&w.trace, path)
                .with_context(|| format!("cannot write trace file `{}`", path.display()))?;
            eprintln!(
                "wrote {} tasks to {} (span {:.2} s, {:.0} tasks/s, mean service {:.0} µs, offered {:.2} cores)",
                s.tasks,
                path.display(),
                s.span_s,
                s.arrival_rate,
                s.mean_exec_us,
                s.offered_cores
            );
        }
        _ => {
            let out = std::io::stdout();
            let mut lock = out.lock();
            match write_trace(&w.trace, &mut lock).and_then(|_| lock.flush()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(e) => return Err(e).context("cannot write the trace to stdout"),
            }
        }
    }
    Ok(())
}
