//! Importers for real traces: the Standard Workload Format of the Parallel
//! Workloads Archive ([`swf`]) and the Azure LLM inference CSV ([`azure`]).
//!
//! Real traces run on scales of seconds to hours; a thread pool serves
//! requests in microseconds to milliseconds. Each importer therefore takes a
//! time compression (trace seconds per replay second) for arrivals and a
//! service-time model that maps the recorded job size to a task's service
//! time, then the `free` split (percent blocked) of [`crate::generate`].

pub mod azure;
pub mod swf;

use serde::{Deserialize, Serialize};

use crate::error::TraceError;
use crate::limits::shown_f64;
use crate::trace::Trace;

/// A trace read from a real log, plus what the importer left out and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Imported {
    /// The imported trace.
    pub trace: Trace,
    /// Records present in the log but not imported because the log marks a
    /// needed value as unknown (SWF `-1`). Never silent: counted here.
    pub skipped_unknown: usize,
    /// Records read (imported + skipped), excluding headers and comments.
    pub records: usize,
}

/// Allowed `compress` (trace seconds per replay second).
pub const COMPRESS_RANGE: (f64, f64) = (1e-6, 1e12);
/// Allowed SWF `service_scale` (service seconds per run-time second).
pub const SCALE_RANGE: (f64, f64) = (1e-12, 1e6);

pub(crate) fn check_range(option: &str, v: f64, (lo, hi): (f64, f64)) -> Result<(), TraceError> {
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(TraceError::option(
            option,
            format!("{} is outside {lo:e}..={hi:e}", shown_f64(v)),
        ))
    }
}

pub(crate) fn check_free(free: f64) -> Result<(), TraceError> {
    if (0.0..=100.0).contains(&free) {
        Ok(())
    } else {
        Err(TraceError::option(
            "free",
            format!("{} is outside 0..=100", shown_f64(free)),
        ))
    }
}
