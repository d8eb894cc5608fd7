//! # tidepool
//!
//! A fast, elastic, instrumented thread pool that sizes itself.
#![warn(missing_docs)]

pub mod error;
pub mod executor;
pub mod policy;
pub mod queue;
mod sync;
mod task;

pub use error::{BuildError, JoinError, SubmitError};
pub use executor::{Executor, ExecutorCounts, Job, ThreadPerRequest};
pub use queue::{QueueFlavor, TaskQueue};
pub use task::Task;
