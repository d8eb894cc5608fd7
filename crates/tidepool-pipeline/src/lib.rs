//! # tidepool-pipeline
//!
//! FG-style pipelined programs (Cormen & Davidson's framework generator):
//! stages on threads, a fixed pool of recycled buffers, multistage threads and
//! repeat, replicated stages (ordered or not), self-sizing stages run by a
//! tidepool sizing policy, fork/join (each buffer down one branch, or down
//! every branch with a broadcast; forks nest), pipelines that share a stage
//! (on one thread or replicated), and
//! per-stage priority scheduling (Roysden 2004). See `docs/pipelines.md`.
//!
//! ```
//! use tidepool_pipeline::{Context, Flow, Pipeline};
//!
//! let mut next = 0u64;
//! let mut total = 0u64;
//! let report = Pipeline::builder("squares")
//!     .buffers(4, || vec![0u64; 256])
//!     .source("read", move |buf: &mut Vec<u64>, _: &Context| {
//!         buf.iter_mut().for_each(|x| { *x = next; next += 1; });
//!         Ok(if next >= 256 * 100 { Flow::Last } else { Flow::More })
//!     })
//!     .stage("square", |buf: &mut Vec<u64>, _: &Context| {
//!         buf.iter_mut().for_each(|x| *x *= *x);
//!         Ok(())
//!     })
//!     .stage("sum", move |buf: &mut Vec<u64>, cx: &Context| {
//!         total += buf.iter().sum::<u64>();
//!         if cx.is_last() { println!("sum of squares: {total}"); }
//!         Ok(())
//!     })
//!     .build()?
//!     .run()?;
//! assert_eq!(report.pipelines[0].rounds, 100);
//! println!("{}", report.to_table());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod builder;
mod error;
mod exec;
mod pipeline;
pub mod priority;
mod queue;
mod report;
mod running;
mod stage;
mod stop;
mod sync;
pub mod sys;
mod typed;

#[cfg(all(test, loom))]
mod loom_tests;

pub use builder::{Builder, Order, Replicas, SharedStage};
pub use error::{BuildError, Cause, PipelineError, Step};
pub use pipeline::{run_all, Pipeline};
pub use priority::{Priority, PrioritySpec};
pub use report::{PipelineReport, Report, StageReport};
pub use stage::{BoxError, Context, Flow, Source, Stage};
pub use stop::StopHandle;
pub use typed::{Slot, Typed, TypedPipeline, TypedSource};
