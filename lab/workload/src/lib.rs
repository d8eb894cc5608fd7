//! # tidepool-workload
//!
//! The laboratory half of tidepool: everything needed to drive an
//! [`Executor`] with a request stream and measure it the way the
//! papers do.
//!
//! | module | what |
//! |---|---|
//! | [`executor`] | the [`Executor`] interface a run drives, and the thread-per-request baseline |
//! | [`trace`] | the trace model: [`Trace`], [`TaskSpec`] |
//! | [`format`](mod@format) | the thesis's trace file format (Xu 2004, table 5-1): parse and write |
//! | [`import`] | real traces: Standard Workload Format, Azure LLM inference CSV |
//! | [`limits`] | caps on tasks per trace, line length and times ([`Limits`]) |
//! | [`dist`] | duration distributions ([`Dist`]) |
//! | [`generate`] | seeded generators and their spec strings ([`GenSpec`]) |
//! | [`suite`] | the built-in workload suite (`cpu`, `io`, `mixed`, `steps`, `bursty`, `azure`) |
//! | [`workload`] | resolve a `--workload` argument (suite name, spec or file) |
//! | [`body`] | task bodies: calibrated busy loop + sleep |
//! | [`median`](mod@median) | the median of repeated measurements |
//! | [`replay`](mod@replay) | the replay driver (thesis figure 5.2) |
//! | [`metrics`] | per-task records and the papers' metrics |
//! | [`result`] | [`RunResult`], the serialisable result of a run |
//! | [`run`] | run a trace against the executor a policy spec names |
//! | [`reproduce`] | the papers' headline experiments and their claims, side by side with ours |
//! | [`sweep`] | run a trace on static pools of several sizes |
//! | [`analysis`] | sweeps: RAIT, stable point, degradation point, safe zone, oracle |
//! | [`compare`] | policies against the oracle: ratios, geometric means, medians over repeats, the bar, the verdict |
//!
//! ```
//! use tidepool_workload::{replay, GenSpec, ReplayOptions, ThreadPerRequest};
//!
//! let trace = "poisson:rate=2000,service=exp:100us,n=50,free=50,seed=1"
//!     .parse::<GenSpec>()
//!     .unwrap()
//!     .generate();
//! let result = replay(&trace, &ThreadPerRequest::new(), &ReplayOptions::default());
//! assert_eq!(result.completed, 50);
//! println!("throughput {:.0}/s, AIT {:.1} µs", result.throughput, result.mean_wait_us);
//! ```
#![warn(missing_docs)]

pub mod analysis;
pub mod body;
pub mod compare;
pub mod dist;
pub mod error;
pub mod executor;
pub mod format;
pub mod generate;
pub mod import;
pub mod limits;
mod lines;
pub mod median;
pub mod metrics;
pub mod pace;
pub mod replay;
pub mod reproduce;
pub mod result;
pub mod run;
pub mod suite;
pub mod sweep;
pub mod trace;
pub mod workload;

pub use analysis::{analyze_sweep, SweepAnalysis, SweepPoint};
pub use body::{BusyLoop, CalibrationReport, TaskBody};
pub use dist::Dist;
pub use error::{SpecError, TraceError};
pub use executor::{Executor, ExecutorCounts, Job, ThreadPerRequest};
pub use format::{parse_trace, read_trace_file, write_trace, write_trace_file};
pub use generate::{GenSpec, TaskStream};
pub use limits::Limits;
pub use median::median;
pub use metrics::{LatencyAccumulator, LatencySummary, TaskRecord};
pub use replay::{replay, replay_pool, replay_with, Progress, ReplayHooks, ReplayOptions};
pub use result::{DecisionEntry, RunResult};
pub use suite::{suite_entry, suite_trace, SUITE};
pub use trace::{TaskSpec, Trace, TraceStats};
pub use workload::{load_workload, load_workload_with, WorkloadError};
