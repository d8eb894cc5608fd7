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
//! - [`scenario`]: the measured scenarios (empty-task throughput with 1, 2, 4
//!   and 8 submitters, ~1 µs tasks on the workload crate's `BusyLoop`, bursts
//!   into an idle pool, idle submit-to-start latency);
//! - [`harness`]: medians, ratios and the rotation that interleaves impls;
//! - [`report`]: the JSON document and the readable table.
//!
//! The binary's `dispatch` subcommand ties them together. Pipelines have
//! their own: [`pipeline`] (tidepool-pipeline against peer pipeline crates)
//! and [`roysden`] (per-stage priority scheduling, with [`welch`]'s t-test);
//! [`paired`] summarises a tidepool row against each peer, per repeat.
//! [`server`] runs a real HTTP service over a real PostgreSQL under `wrk`;
//! [`celery`] the distributed pool against Celery on Redis.
#![warn(missing_docs)]

pub mod celery;
pub mod cmd_pipeline;
pub mod cmd_soak;
pub mod harness;
pub mod paired;
pub mod pipeline;
pub mod report;
pub mod roysden;
pub mod scenario;
pub mod server;
pub mod subject;
pub mod subjects;
pub mod welch;
