//! One entry point for the CLI's `--workload` argument: a suite name, a
//! generator spec, or a trace file.

use std::path::Path;

use thiserror::Error;

use crate::error::{SpecError, TraceError};
use crate::format::read_trace_file_with;
use crate::generate::GenSpec;
use crate::import::azure::{read_azure_file_with, AzureOptions};
use crate::import::swf::{read_swf_file_with, SwfOptions};
use crate::limits::Limits;
use crate::suite::{suite_trace_with, SUITE};
use crate::trace::Trace;

/// Loading a workload failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// Bad suite name or generator spec.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Bad trace file.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Resolve a workload argument:
///
/// 1. a suite name (`cpu`, `io`, `mixed`, `steps`, `bursty`, `azure`), built
///    at `scale`;
/// 2. a generator spec (`KIND:key=value,...`, see [`crate::generate`]);
///    `scale` is not applied (the spec says exactly what it wants);
/// 3. a file: `*.swf` → [`read_swf_file`](crate::import::swf::read_swf_file) with default options, `*.csv` →
///    [`read_azure_file`](crate::import::azure::read_azure_file) with default options, anything else → the thesis
///    trace format ([`read_trace_file`](crate::format::read_trace_file)).
///
/// ```
/// use tidepool_workload::workload::load_workload;
/// assert_eq!(load_workload("poisson:rate=100,n=5", 1.0).unwrap().len(), 5);
/// assert_eq!(load_workload("io", 0.01).unwrap().len(), 160);
/// assert!(load_workload("/no/such/file.trace", 1.0).is_err());
/// ```
pub fn load_workload(arg: &str, scale: f64) -> Result<Trace, WorkloadError> {
    load_workload_with(arg, scale, &Limits::default())
}

/// [`load_workload`] within `limits` (tasks per trace, line length).
pub fn load_workload_with(arg: &str, scale: f64, limits: &Limits) -> Result<Trace, WorkloadError> {
    if SUITE.contains(&arg) {
        return Ok(suite_trace_with(arg, scale, limits)?);
    }
    let path = Path::new(arg);
    if !path.exists() {
        if let Some((kind, _)) = arg.split_once(':') {
            if !kind.contains('/') && !kind.contains('.') {
                return Ok(GenSpec::parse_with(arg, limits)?.try_generate(limits)?);
            }
        }
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    Ok(match ext.as_deref() {
        Some("swf") => read_swf_file_with(path, &SwfOptions::default(), limits)?.trace,
        Some("csv") => read_azure_file_with(path, &AzureOptions::default(), limits)?.trace,
        _ => read_trace_file_with(path, limits)?,
    })
}
