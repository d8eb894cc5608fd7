//! Turn `--workload` / `--trace` arguments into traces, with errors that say
//! what was expected.

use std::path::Path;

use std::sync::atomic::{AtomicUsize, Ordering};

use tidepool_workload::format::read_trace_file_with;
use tidepool_workload::limits::{shown, shown_f64};
use tidepool_workload::suite::{self, SUITE};
use tidepool_workload::{load_workload_with, Limits, SpecError, Trace, WorkloadError};

use crate::error::usage;
use crate::lists::split_specs;

/// A workload ready to replay.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Short label for tables and file names (`cpu`, a file stem, the spec).
    pub label: String,
    /// The tasks.
    pub trace: Trace,
}

/// Expand `--workload` values: comma lists are split (specs keep their own
/// commas) and `suite` stands for the twelve suite workloads.
pub fn expand(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for a in args {
        for w in split_specs(a) {
            if w == "suite" {
                out.extend(SUITE.iter().map(|s| s.to_string()));
            } else {
                out.push(w);
            }
        }
    }
    out
}

/// `--max-tasks`, set once by `dispatch` before any workload is loaded.
static MAX_TASKS: AtomicUsize = AtomicUsize::new(Limits::DEFAULT_MAX_TASKS);

/// Set the task limit of every workload loaded from now on (`--max-tasks`).
pub fn set_max_tasks(n: usize) {
    MAX_TASKS.store(n, Ordering::Relaxed);
}

/// The limits workloads are loaded with.
pub fn limits() -> Limits {
    Limits {
        max_tasks: MAX_TASKS.load(Ordering::Relaxed),
        ..Limits::default()
    }
}

/// Load one `--workload` argument: suite name (built at `scale`), generator
/// spec, or trace file. Bad names, specs and scales are usage errors.
pub fn load(arg: &str, scale: f64) -> anyhow::Result<Workload> {
    let (lo, hi) = suite::SCALE_RANGE;
    if !(scale >= lo && scale <= hi) {
        return Err(usage(format!(
            "--scale {} is outside {lo:e}..={hi:e}",
            shown_f64(scale)
        )));
    }
    let path = Path::new(arg);
    let trace = match load_workload_with(arg, scale, &limits()) {
        Ok(t) => t,
        Err(WorkloadError::Spec(SpecError::BadValue { key, message }))
            if key == "scale" && SUITE.contains(&arg) =>
        {
            return Err(usage(format!("--scale {message}")));
        }
        Err(WorkloadError::Spec(e)) => {
            return Err(usage(format!("invalid workload `{}`: {e}", shown(arg))));
        }
        Err(WorkloadError::Trace(_)) if !path.exists() && !arg.contains(['/', '.']) => {
            return Err(usage(format!(
                "unknown workload `{}`: expected a suite name ({}, or `suite` for all), \
                 a generator spec such as `poisson:rate=2000,service=exp:200us,n=5000` \
                 (kinds: poisson, periodic, normal, lognormal, steps, onoff, closed), or a trace file",
                shown(arg),
                SUITE.join(", ")
            )));
        }
        // The error names the file (and line and field).
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    finish(label_of(arg), trace)
}

/// Load a trace file (`--trace`), thesis format or by extension (`.swf`,
/// `.csv` Azure).
pub fn load_file(path: &Path) -> anyhow::Result<Workload> {
    let s = path.to_string_lossy();
    // The errors name the file (and line and field).
    let trace = if matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("swf" | "csv" | "SWF" | "CSV")
    ) {
        load_workload_with(&s, 1.0, &limits()).map_err(anyhow::Error::new)
    } else {
        read_trace_file_with(path, &limits()).map_err(anyhow::Error::new)
    }?;
    finish(label_of(&s), trace)
}

fn finish(label: String, trace: Trace) -> anyhow::Result<Workload> {
    if trace.is_empty() {
        anyhow::bail!("workload `{label}` has no tasks");
    }
    Ok(Workload { label, trace })
}

/// A short label: suite names as they are, files by their stem, specs
/// as given.
fn label_of(arg: &str) -> String {
    if SUITE.contains(&arg) {
        return arg.to_string();
    }
    let p = Path::new(arg);
    if p.exists() {
        if let Some(stem) = p.file_stem().and_then(|s| s.to_str()) {
            return stem.to_string();
        }
    }
    arg.to_string()
}

/// A file-name-safe slug of a label (`poisson:rate=2000,n=5` → `poisson-rate-2000-n-5`).
pub fn slug(label: &str) -> String {
    let mut s = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    let s = s.trim_matches('-');
    let s: String = s.chars().take(60).collect();
    if s.is_empty() {
        "workload".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::exit_code;

    #[test]
    fn expands_suite_and_lists() {
        assert_eq!(expand(&["suite".into()]).len(), SUITE.len());
        assert_eq!(
            expand(&["cpu,poisson:rate=10,n=5".into(), "io".into()]),
            vec!["cpu", "poisson:rate=10,n=5", "io"]
        );
    }

    #[test]
    fn errors_are_usage_or_runtime() {
        let e = load("nosuch", 1.0).unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("unknown workload `nosuch`"), "{e}");
        let e = load("poisson:rate=fast", 1.0).unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("rate"), "{e}");
        let e = load("/no/such/file.trace", 1.0).unwrap_err();
        assert_eq!(exit_code(&e), 1);
        assert!(format!("{e:#}").contains("/no/such/file.trace"), "{e:#}");
        let e = load_file(Path::new("/no/such/x.trace")).unwrap_err();
        assert!(format!("{e:#}").contains("/no/such/x.trace"));
        assert_eq!(exit_code(&load("cpu", 0.0).unwrap_err()), 2);
    }

    #[test]
    fn labels_and_slugs() {
        let w = load("cpu", 0.01).unwrap();
        assert_eq!(w.label, "cpu");
        assert_eq!(slug("poisson:rate=2000,n=5"), "poisson-rate-2000-n-5");
        assert_eq!(slug("::"), "workload");
    }
}
