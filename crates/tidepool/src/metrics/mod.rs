//! Statistics: per-task timestamps (Xu & Bode table 4.1), pool counters
//! (table 4.2), latency histograms, windows, and the pool-size time series.

pub(crate) mod clock;
pub(crate) mod cpu_sample;
mod histogram;
mod latency;
#[cfg(feature = "serde")]
mod latency_serde;
pub(crate) mod record;
pub(crate) mod sampling;
pub(crate) mod series;
mod stats;

pub use latency::{Bucket, Latency};
pub use series::LiveThreadsSample;
pub use stats::PoolStats;
