//! Run a trace against one policy: build the executor a [`PolicySpec`]
//! names, replay with the shared cancel flag, and tidy up.

use std::time::Duration;

use anyhow::Context;
use tidepool::policy::PolicySpec;
use tidepool::{Pool, ThreadPerRequest};
use tidepool_workload::{replay_pool, replay_with, Progress, ReplayHooks, ReplayOptions};
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

/// Replay `trace` against the executor `spec` names: a static pool for
/// `fixed:N`, a thread per request for `tpr`, otherwise a pool bounded by
/// `settings.min_threads..=max_threads` running the policy. The result's
/// `executor` is the spec's canonical form.
pub fn run_policy(
    trace: &Trace,
    spec: &PolicySpec,
    settings: &Settings,
    progress: &mut dyn FnMut(&Progress),
) -> anyhow::Result<RunResult> {
    let opts = settings.replay_options();
    let mut result = match spec {
        PolicySpec::ThreadPerRequest => {
            let tpr = ThreadPerRequest::new();
            replay_with(
                trace,
                &tpr,
                &opts,
                ReplayHooks {
                    progress: Some(progress),
                    target_size: None,
                },
            )
        }
        _ => {
            let pool = build_pool(spec, settings)?;
            let r = replay_pool(trace, &pool, &opts, Some(progress));
            // Cancelled or timed out: drop what never started instead of
            // running the backlog at shutdown.
            drop(pool.shutdown_now());
            r
        }
    };
    result.executor = spec.to_string();
    Ok(result)
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

/// The pool for a (non-`tpr`) spec.
pub fn build_pool(spec: &PolicySpec, settings: &Settings) -> anyhow::Result<Pool> {
    let name = format!("tp-{}", spec.name());
    let builder = match spec {
        PolicySpec::Fixed(n) => Pool::builder().name(name).threads(*n),
        _ => {
            let policy = spec
                .build()
                .context("this spec is not a pool policy (use tpr's own executor)")?;
            Pool::builder()
                .name(name)
                .min_threads(settings.min_threads)
                .max_threads(settings.max_threads)
                .policy_boxed(policy)
        }
    };
    builder
        .build()
        .with_context(|| format!("cannot build a pool for `{spec}`"))
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
