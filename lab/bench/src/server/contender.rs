//! The contenders: what runs the service's handlers. A tidepool pool under a
//! policy spec (`auto`, `watermark`, `hill-climb`, `fixed:K`, …),
//! thread-per-request (`tpr`), or tokio's `spawn_blocking` (`tokio`).

use std::fmt;
use std::ops::RangeInclusive;
use std::str::FromStr;
use std::sync::Arc;

use tidepool::error::SubmitError;
use tidepool::policy::PolicySpec;
use tidepool::Pool;
use tidepool_workload::{Executor, ExecutorCounts, Job, ThreadPerRequest};

use super::handlers::release_connection;

use super::service::{Dispatch, ThreadGauge};

/// tokio's default `max_blocking_threads`, which the front end keeps.
const TOKIO_MAX_BLOCKING_THREADS: usize = 512;

/// One contender, by the name it has in reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Contender {
    /// A tidepool pool (static for `fixed:K`), or thread-per-request for `tpr`.
    Tidepool(PolicySpec),
    /// tokio's default blocking pool, through `spawn_blocking`.
    Tokio,
}

impl Contender {
    /// The executor the service dispatches to; adaptive pools get
    /// `threads` workers.
    pub fn dispatch(&self, threads: RangeInclusive<usize>) -> Result<Dispatch, String> {
        let spec = match self {
            Contender::Tokio => {
                return Ok(Dispatch::SpawnBlocking(Arc::new(ThreadGauge::default())))
            }
            Contender::Tidepool(PolicySpec::ThreadPerRequest) => {
                return Ok(Dispatch::Executor(Arc::new(ReleasingTpr(
                    ThreadPerRequest::new(),
                ))))
            }
            Contender::Tidepool(spec) => spec,
        };
        let builder = match spec {
            PolicySpec::Fixed(n) => Pool::builder().threads(*n),
            _ => Pool::builder()
                .min_threads(*threads.start())
                .max_threads(*threads.end())
                .policy_spec(&spec.to_string())
                .map_err(|e| e.to_string())?,
        };
        let pool = builder
            .name("server")
            .on_thread_stop(release_connection)
            .build()
            .map_err(|e| format!("cannot build the pool for {self}: {e}"))?;
        Ok(Dispatch::Executor(Arc::new(pool)))
    }

    /// The most threads this contender runs handlers on at once, when
    /// bounded: adaptive pools get `adaptive_max`, tokio's blocking pool has
    /// its default 512, thread-per-request has no bound.
    pub fn max_threads(&self, adaptive_max: usize) -> Option<usize> {
        match self {
            Contender::Tokio => Some(TOKIO_MAX_BLOCKING_THREADS),
            Contender::Tidepool(PolicySpec::ThreadPerRequest) => None,
            Contender::Tidepool(PolicySpec::Fixed(n)) => Some(*n),
            Contender::Tidepool(_) => Some(adaptive_max),
        }
    }

    /// Whether this is a tidepool pool that sizes itself (not `fixed:K`,
    /// not thread-per-request): one that takes the thread bounds.
    pub fn is_adaptive(&self) -> bool {
        matches!(self, Contender::Tidepool(spec)
            if !matches!(spec, PolicySpec::Fixed(_) | PolicySpec::ThreadPerRequest))
    }

    /// Whether this is a static pool (a candidate for the oracle).
    pub fn fixed_size(&self) -> Option<usize> {
        match self {
            Contender::Tidepool(PolicySpec::Fixed(n)) => Some(*n),
            _ => None,
        }
    }
}

/// Thread-per-request whose threads hand back their database connection after
/// their one job (see [`release_connection`]).
struct ReleasingTpr(ThreadPerRequest);

impl Executor for ReleasingTpr {
    fn name(&self) -> String {
        self.0.name()
    }
    fn execute_job(&self, job: Job) -> Result<(), SubmitError> {
        struct Release;
        impl Drop for Release {
            fn drop(&mut self) {
                release_connection(); // also when the job panics
            }
        }
        self.0.execute_job(Box::new(move || {
            let _release = Release;
            job();
        }))
    }
    fn counts(&self) -> ExecutorCounts {
        self.0.counts()
    }
    fn wait_idle(&self) {
        self.0.wait_idle()
    }
}

impl fmt::Display for Contender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Contender::Tidepool(spec) => write!(f, "{spec}"),
            Contender::Tokio => f.write_str("tokio"),
        }
    }
}

impl FromStr for Contender {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("tokio") {
            return Ok(Contender::Tokio);
        }
        PolicySpec::parse(s)
            .map(Contender::Tidepool)
            .map_err(|e| format!("--contenders: {e}; or `tokio` (spawn_blocking)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_ones_name_the_option() {
        for name in [
            "auto",
            "watermark:3..100",
            "hill-climb",
            "fixed:8",
            "tpr",
            "tokio",
        ] {
            assert_eq!(name.parse::<Contender>().unwrap().to_string(), name);
        }
        assert_eq!(
            "fixed:8".parse::<Contender>().unwrap().fixed_size(),
            Some(8)
        );
        let err = "fixed:0".parse::<Contender>().unwrap_err();
        assert!(err.starts_with("--contenders:"), "{err}");
    }

    #[test]
    fn every_kind_builds_an_executor() {
        for name in ["auto", "watermark", "hill-climb", "fixed:2", "tpr", "tokio"] {
            let d = name.parse::<Contender>().unwrap().dispatch(1..=8).unwrap();
            assert_eq!(d.counts().queued, 0, "{name}");
        }
    }

    #[test]
    fn the_most_threads_are_known_except_for_thread_per_request() {
        let max = |name: &str| name.parse::<Contender>().unwrap().max_threads(9);
        assert_eq!(max("fixed:4"), Some(4));
        assert_eq!(max("watermark"), Some(9));
        assert_eq!(max("tokio"), Some(512));
        assert_eq!(max("tpr"), None);
    }

    #[test]
    fn adaptive_pools_get_the_thread_bounds() {
        let auto: Contender = "auto".parse().unwrap();
        assert!(auto.is_adaptive());
        for name in ["fixed:4", "tpr", "tokio"] {
            assert!(!name.parse::<Contender>().unwrap().is_adaptive(), "{name}");
        }
        assert_eq!(auto.max_threads(9), Some(9));
        let Dispatch::Executor(e) = auto.dispatch(3..=9).unwrap() else {
            panic!("auto runs on a tidepool pool");
        };
        let stats = e.pool().expect("a tidepool pool").stats();
        assert_eq!((stats.min_threads, stats.max_threads), (3, 9));
    }
}
