//! Turn `--workload` / `--trace` arguments into traces, with errors that say
//! what was expected.

use std::path::Path;

use anyhow::Context;
use tidepool_workload::suite::SUITE;
use tidepool_workload::{load_workload, read_trace_file, Trace, WorkloadError};

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

/// Load one `--workload` argument: suite name (built at `scale`), generator
/// spec, or trace file. Bad names and specs are usage errors.
pub fn load(arg: &str, scale: f64) -> anyhow::Result<Workload> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(usage(format!("--scale {scale}: must be a number > 0")));
    }
    let path = Path::new(arg);
    let trace = match load_workload(arg, scale) {
        Ok(t) => t,
        Err(WorkloadError::Spec(e)) => {
            return Err(usage(format!("invalid workload `{arg}`: {e}")));
        }
        Err(WorkloadError::Trace(_)) if !path.exists() && !arg.contains(['/', '.']) => {
            return Err(usage(format!(
                "unknown workload `{arg}`: expected a suite name ({}, or `suite` for all), \
                 a generator spec such as `poisson:rate=2000,service=exp:200us,n=5000` \
                 (kinds: poisson, periodic, normal, lognormal, steps, onoff, closed), or a trace file",
                SUITE.join(", ")
            )));
        }
        Err(e @ WorkloadError::Trace(_)) => {
            return Err(anyhow::Error::new(e).context(format!("cannot load workload `{arg}`")));
        }
    };
    finish(label_of(arg), trace)
}

/// Load a trace file (`--trace`), thesis format or by extension (`.swf`,
/// `.csv` Azure).
pub fn load_file(path: &Path) -> anyhow::Result<Workload> {
    let s = path.to_string_lossy();
    let trace = if matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("swf" | "csv" | "SWF" | "CSV")
    ) {
        load_workload(&s, 1.0).map_err(anyhow::Error::new)
    } else {
        read_trace_file(path).map_err(anyhow::Error::new)
    }
    .with_context(|| format!("cannot read trace file `{}`", path.display()))?;
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
