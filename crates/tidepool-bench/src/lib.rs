//! # tidepool-bench
//!
//! Side-by-side dispatch benchmarks of `tidepool` against peer thread pools
//! (`threadpool`, `rusty_pool`, a crossbeam-channel pool, `rayon`, tokio's
//! blocking pool), all run in the same process with the same thread count.
//!
//! The pieces:
//! - [`subject`]: the [`Subject`](subject::Subject) trait every pool is driven
//!   through, and the completion [`Latch`](subject::Latch) all tasks report to;
//! - [`subjects`]: one file per implementation, and the [`Impl`](subjects::Impl)
//!   list that builds them;
//! - [`scenario`]: the measured scenarios (empty-task throughput with one or two
//!   submitters, ~1 µs tasks, idle submit-to-start latency);
//! - [`harness`]: medians and ratios;
//! - [`report`]: the JSON document and the readable table.
//!
//! The binary's `dispatch` subcommand ties them together.
#![warn(missing_docs)]

pub mod harness;
pub mod report;
pub mod scenario;
pub mod subject;
pub mod subjects;
