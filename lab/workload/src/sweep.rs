//! Run a trace against static pools of several sizes (the thesis's
//! throughput-vs-pool-size experiments) and analyse the curve.

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};
use tidepool::Pool;

use crate::analysis::{analyze_sweep, SweepAnalysis, SweepPoint};
use crate::replay::{replay_pool, ReplayOptions};
use crate::result::RunResult;
use crate::trace::Trace;

/// The runs of a sweep and their analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// One run per size, in the order given.
    pub runs: Vec<SizedRun>,
    /// The analysis (`None` when nothing completed).
    pub analysis: Option<SweepAnalysis>,
}

/// A run at one static pool size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizedRun {
    /// Pool size.
    pub size: usize,
    /// What was measured.
    pub result: RunResult,
}

/// Replay `trace` on a fresh `Pool::new(size)` for each size, calling
/// `on_run` after each; stops early when `opts.cancel` is set. Sizes the
/// pool refuses to build are skipped (reported through `on_run` never being
/// called for them).
///
/// ```
/// use tidepool_workload::sweep::sweep;
/// use tidepool_workload::{GenSpec, ReplayOptions};
/// let trace = "poisson:rate=2000,n=30,service=exp:50us".parse::<GenSpec>().unwrap().generate();
/// let s = sweep(&trace, &[1, 2], &ReplayOptions::default(), |_, _| {});
/// assert_eq!(s.runs.len(), 2);
/// assert!(s.analysis.is_some());
/// ```
pub fn sweep(
    trace: &Trace,
    sizes: &[usize],
    opts: &ReplayOptions,
    mut on_run: impl FnMut(usize, &RunResult),
) -> SweepResult {
    let mut runs = Vec::new();
    for &size in sizes {
        if opts
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            break;
        }
        let Ok(pool) = Pool::new(size) else { continue };
        let result = replay_pool(trace, &pool, opts, None);
        drop(pool);
        on_run(size, &result);
        runs.push(SizedRun { size, result });
    }
    let points: Vec<SweepPoint> = runs
        .iter()
        .map(|r| SweepPoint::from_run(r.size, &r.result))
        .collect();
    SweepResult {
        analysis: analyze_sweep(&points, 0.05),
        runs,
    }
}
