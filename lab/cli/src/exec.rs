//! Run a trace against one policy: build the executor a [`PolicySpec`]
//! names, replay with the shared cancel flag, and tidy up.

use std::time::Duration;

use anyhow::Context;
use tidepool::policy::PolicySpec;
use tidepool_workload::run::{run_spec, Bounds};
use tidepool_workload::{Progress, ReplayOptions};
use tidepool_workload::{RunResult, Trace};

use crate::cancel;
use crate::progress::Reporter;
use crate::source::Workload;

/// How every run of a command is set up.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Lower bound given to adaptive pools (the policy may raise it).
    pub min_threads: usize,
    /// Upper bound given to adaptive pools (their `max`).
    pub max_threads: usize,
    /// Replay speed (2.0 halves every arrival gap).
    pub speed: f64,
    /// Stop waiting for stragglers this long after the last submission.
    pub drain_timeout: Option<Duration>,
    /// Keep per-task records (for CSV and latency CDFs).
    pub keep_records: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            min_threads: 1,
            max_threads: 100,
            speed: 1.0,
            drain_timeout: None,
            keep_records: true,
        }
    }
}

impl Settings {
    /// The pool bounds these settings mean.
    pub fn bounds(&self) -> Bounds {
        Bounds {
            min_threads: self.min_threads,
            max_threads: self.max_threads,
            ..Bounds::default()
        }
    }

    /// The replay options these settings mean, with the Ctrl-C flag attached.
    pub fn replay_options(&self) -> ReplayOptions {
        ReplayOptions {
            speed: self.speed,
            drain_timeout: self.drain_timeout,
            cancel: Some(cancel::flag()),
            keep_records: self.keep_records,
            ..ReplayOptions::default()
        }
    }
}

/// Replay `trace` against the executor `spec` names (see
/// [`tidepool_workload::run::run_spec`]), with these settings' bounds and
/// the Ctrl-C flag.
pub fn run_policy(
    trace: &Trace,
    spec: &PolicySpec,
    settings: &Settings,
    progress: &mut dyn FnMut(&Progress),
) -> anyhow::Result<RunResult> {
    run_spec(
        trace,
        spec,
        &settings.bounds(),
        &settings.replay_options(),
        progress,
    )
    .with_context(|| format!("cannot build a pool for `{spec}`"))
}

/// [`run_policy`] with a progress bar labelled `label`.
pub fn run_reported(
    w: &Workload,
    spec: &PolicySpec,
    label: &str,
    settings: &Settings,
    rep: &mut Reporter,
) -> anyhow::Result<RunResult> {
    let bar = rep.start_run(label, w.trace.len());
    let r = run_policy(&w.trace, spec, settings, &mut |p| bar.update(p));
    if let Ok(r) = &r {
        rep.finish_run(bar, label, r);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidepool_workload::GenSpec;

    #[test]
    fn runs_a_policy_a_static_pool_and_tpr() {
        let trace = "poisson:rate=4000,n=60,service=exp:50us,seed=3"
            .parse::<GenSpec>()
            .unwrap()
            .generate();
        let s = Settings::default();
        for spec in ["fixed:2", "tpr", "watermark:1..4"] {
            let spec = PolicySpec::parse(spec).unwrap();
            let r = run_policy(&trace, &spec, &s, &mut |_| {}).unwrap();
            assert_eq!(r.completed, 60, "{spec}");
            assert_eq!(r.executor, spec.to_string());
            assert_eq!(r.records.len(), 60);
        }
    }
}
