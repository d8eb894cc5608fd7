//! Statistics: per-task timestamps (Xu & Bode table 4.1), pool counters
//! (table 4.2), latency histograms, windows, and the pool-size time series.

pub(crate) mod clock;
mod histogram;
mod latency;
pub mod os;
pub(crate) mod record;
pub(crate) mod sampling;
pub(crate) mod series;
mod stats;

pub use latency::Latency;
pub use series::{DecisionRecord, SizeSample};
pub use stats::PoolStats;
