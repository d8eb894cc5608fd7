//! Sending a pool's statistics elsewhere.
//!
//! With the `metrics` feature, `MetricsExporter` publishes a
//! [`PoolStats`](crate::PoolStats) snapshot through the
//! [`metrics`](https://docs.rs/metrics) facade, so any of its exporters
//! (Prometheus, StatsD, OpenTelemetry, …) serves the pool's gauges, counters
//! and histograms. With the `serde` feature the statistics and decision
//! types serialise directly; with `tracing` the pool emits an event for
//! every policy decision, worker spawn and retirement (target `tidepool`).

#[cfg(feature = "metrics")]
mod metrics;

#[cfg(feature = "metrics")]
pub use self::metrics::{MetricsExporter, DEFAULT_MAX_SAMPLES};
