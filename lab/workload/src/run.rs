//! Run a trace against the executor a [`PolicySpec`] names: a static pool
//! for `fixed:N`, a thread per request for `tpr`, otherwise a pool bounded
//! by [`Bounds`] running the policy. Shared by the CLI, `reproduce` and the
//! benchmarks, so every caller builds the same executors.

use tidepool::policy::PolicySpec;
use tidepool::{BuildError, Pool, QueueFlavor};

use crate::executor::ThreadPerRequest;
use crate::replay::{replay_pool, replay_with, Progress, ReplayHooks, ReplayOptions};
use crate::result::RunResult;
use crate::trace::Trace;

/// Bounds given to adaptive pools, and the queue every pool uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Lower bound (a policy may raise it).
    pub min_threads: usize,
    /// Upper bound: the policies' `max`.
    pub max_threads: usize,
    /// Queue flavor.
    pub queue: QueueFlavor,
}

impl Default for Bounds {
    /// 1 to 100 threads, the default (lock-free) queue.
    fn default() -> Self {
        Bounds {
            min_threads: 1,
            max_threads: 100,
            queue: QueueFlavor::default(),
        }
    }
}

/// The pool for a spec other than `tpr` (`None` for `tpr`).
pub fn build_pool(spec: &PolicySpec, bounds: &Bounds) -> Option<Result<Pool, BuildError>> {
    let name = format!("tp-{}", spec.name());
    let builder = match spec {
        PolicySpec::Fixed(n) => Pool::builder().name(name).threads(*n),
        _ => Pool::builder()
            .name(name)
            .min_threads(bounds.min_threads)
            .max_threads(bounds.max_threads)
            .policy_boxed(spec.build()?),
    };
    // A replay is finite and reports every decision (decisions.csv): keep
    // the longest history the pool allows, not a server's default ring.
    Some(
        builder
            .queue(bounds.queue)
            .history_len(tidepool::MAX_HISTORY_LEN)
            .build(),
    )
}

/// Replay `trace` against the executor `spec` names; the result's
/// `executor` is the spec's canonical form.
///
/// ```
/// use tidepool::policy::PolicySpec;
/// use tidepool_workload::run::{run_spec, Bounds};
/// use tidepool_workload::{GenSpec, ReplayOptions};
/// let trace = "poisson:rate=4000,n=40,service=exp:50us".parse::<GenSpec>().unwrap().generate();
/// let spec = PolicySpec::parse("watermark:1..4").unwrap();
/// let r = run_spec(&trace, &spec, &Bounds::default(), &ReplayOptions::default(), &mut |_| {}).unwrap();
/// assert_eq!((r.completed, r.executor.as_str()), (40, "watermark:1..4"));
/// ```
pub fn run_spec(
    trace: &Trace,
    spec: &PolicySpec,
    bounds: &Bounds,
    opts: &ReplayOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RunResult, BuildError> {
    let mut result = match build_pool(spec, bounds) {
        None => replay_with(
            trace,
            &ThreadPerRequest::new(),
            opts,
            ReplayHooks {
                progress: Some(progress),
                target_size: None,
            },
        ),
        Some(pool) => {
            let pool = pool?;
            let r = replay_pool(trace, &pool, opts, Some(progress));
            // Cancelled or timed out: drop what never started instead of
            // running the backlog at shutdown.
            drop(pool.shutdown_now());
            r
        }
    };
    result.executor = spec.to_string();
    Ok(result)
}
