//! # tidepool
//!
//! A fast, elastic, instrumented thread pool that sizes itself.
#![warn(missing_docs)]

pub mod error;
pub mod executor;
pub mod metrics;
pub mod policy;
mod pool;
pub mod queue;
mod sync;
mod task;

pub use error::{BuildError, JoinError, SubmitError};
pub use executor::{Executor, ExecutorCounts, Job, ThreadPerRequest};
pub use metrics::{DecisionRecord, Latency, PoolStats, SizeSample};
pub use pool::{Builder, JoinHandle, OnFull, Pool, MAX_THREADS};
pub use queue::{QueueFlavor, TaskQueue};
pub use task::Task;
