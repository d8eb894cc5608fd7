//! # tidepool
//!
//! A fast, elastic, instrumented thread pool that sizes itself.
//!
//! Build a [`Pool`] with [`Pool::builder`], submit closures with
//! [`Pool::submit`] (a [`JoinHandle`] you can `join()` or `.await`) or
//! [`Pool::execute`] (fire and forget), and read its statistics with
//! [`Pool::stats`]. [`Pool::scope`] runs tasks that borrow from the caller's
//! stack; `Pool` is a cheap `Clone` handle; a refused task comes back to the
//! caller in a [`Rejected`]; every error is `Send + Sync`, so `?` carries it
//! into `anyhow`. A [`policy::SizingPolicy`] — chosen by a spec string
//! through [`policy::PolicySpec`] — resizes the pool at run time; `auto` needs
//! no tuning.
//!
//! ```
//! use tidepool::Pool;
//!
//! let pool = Pool::builder()
//!     .min_threads(1)
//!     .max_threads(16)
//!     .policy_spec("watermark:1..16")?
//!     .build()?;
//! let squares: Vec<_> = (0..10u64).map(|i| pool.submit(move || i * i)).collect::<Result<_, _>>()?;
//! let total: u64 = squares.into_iter().map(|h| h.join().unwrap()).sum();
//! assert_eq!(total, 285);
//! pool.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The pool's parts: the statistics ([`metrics`]) and how to get them out
//! ([`export`]), the sizing policies ([`policy`]), and every operating-system
//! call ([`sys`]).
//!
//! ## Optional features
//!
//! All off by default:
//!
//! - `serde`: `Serialize`/`Deserialize` on [`PoolStats`], [`Latency`],
//!   [`LiveThreadsSample`], [`DecisionRecord`] and the policy types;
//! - `metrics`: `export::MetricsExporter`, the pool's gauges, counters and
//!   histograms through the `metrics` facade (see the `prometheus` example);
//! - `tracing`: an event for every policy decision, worker spawn and
//!   retirement (target `tidepool`);
//! - `sim-hooks`: the `control` module, the clock-free rules by which the
//!   pool applies decisions, wakes workers and grows on demand, public so
//!   that a simulator (`tidepool-sim`) runs the very same rules in virtual
//!   time. Not an application's API: it changes when the pool does.
//!
//! ## Platforms
//!
//! Linux gives every statistic. Other Unixes and Windows build and run with
//! fewer (no per-worker CPU time or run delay; on Windows no CPU time or load
//! average either, so `auto` cannot tell blocking tasks from computing ones
//! and stays near the core count): [`sys`] says what each platform loses,
//! and [`sys::SUPPORT`] what this build has.
#![warn(missing_docs)]

#[cfg(feature = "sim-hooks")]
pub mod control;
#[cfg(not(feature = "sim-hooks"))]
mod control;
pub mod error;
mod events;
pub mod export;
mod limits;
pub mod metrics;
pub mod policy;
mod pool;
mod queue;
mod sync;
pub mod sys;
mod task;
mod task_options;

pub use error::{BuildError, JoinError, Panic, Rejected, SubmitError};
pub use metrics::{Latency, LiveThreadsSample, PoolStats};
pub use policy::DecisionRecord;
pub use pool::{
    block_in_place, Builder, JoinHandle, OnFull, Pool, Scope, DEFAULT_HISTORY_LEN,
    DEFAULT_MAX_THREADS, DEFAULT_MIN_THREADS, MAX_HISTORY_LEN, MAX_THREADS,
};
pub use queue::{QueueFlavor, UnknownFlavor};
pub use task::Task;
pub use task_options::{CancelToken, Priority, TaskOptions};

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
