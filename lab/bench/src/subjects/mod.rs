//! The implementations under test, one file each, and the [`Impl`] list that
//! names and builds them.

mod crossbeam;
mod floor;
mod rayon;
mod rusty_pool;
mod threadpool;
mod tidepool;
mod tokio_blocking;

use std::fmt;
use std::str::FromStr;

use crate::scenario::{Idle, Scenario};
use crate::subject::Visit;

/// Build `$imp`'s subject (its own type, so `$body` is monomorphised per
/// pool) with `$threads` workers, bind it to `$s` and evaluate `$body`.
macro_rules! build {
    ($imp:expr, $threads:expr, |$s:ident| $body:expr) => {
        match $imp {
            Impl::Tidepool
            | Impl::TidepoolNoStats
            | Impl::TidepoolStats
            | Impl::TidepoolMutex
            | Impl::TidepoolSpin
            | Impl::TidepoolHybrid
            | Impl::TidepoolLockFree
            | Impl::TidepoolSlice
            | Impl::TidepoolAuto => {
                let $s = TidepoolSubject::new($imp, $threads);
                $body
            }
            Impl::Threadpool => {
                let $s = ThreadpoolSubject::new($threads);
                $body
            }
            Impl::RustyPool => {
                let $s = RustyPoolSubject::new($threads);
                $body
            }
            Impl::Crossbeam => {
                let $s = CrossbeamPool::new($threads);
                $body
            }
            Impl::Rayon => {
                let $s = RayonSubject::new($threads);
                $body
            }
            Impl::TokioBlocking => {
                let $s = TokioBlockingSubject::new($threads);
                $body
            }
            Impl::Floor => {
                let $s = FloorSubject::new();
                $body
            }
        }
    };
}

/// The floor's name in reports: a reference row, not a peer
/// ([`Impl::Floor`]).
pub const FLOOR: &str = "floor";

pub use self::crossbeam::CrossbeamPool;
pub use self::floor::FloorSubject;
pub use self::rayon::RayonSubject;
pub use self::rusty_pool::RustyPoolSubject;
pub use self::threadpool::ThreadpoolSubject;
pub use self::tidepool::{TidepoolSubject, SHORT_SLICE};
pub use self::tokio_blocking::TokioBlockingSubject;

/// One implementation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Impl {
    /// `tidepool::Pool` as `Pool::builder().threads(n)` builds it.
    Tidepool,
    /// tidepool with statistics explicitly off.
    TidepoolNoStats,
    /// tidepool with statistics explicitly on.
    TidepoolStats,
    /// tidepool on the mutex + condvar queue.
    TidepoolMutex,
    /// tidepool on the spinlock queue.
    TidepoolSpin,
    /// tidepool on the hybrid spin-then-sleep queue.
    TidepoolHybrid,
    /// tidepool on the lock-free queue (named explicitly).
    TidepoolLockFree,
    /// tidepool whose workers ask the scheduler for a short slice
    /// ([`SHORT_SLICE`], `Builder::worker_slice`); opt-in (`--only`), not in
    /// the default set: it shows what EEVDF's wake-up preemption does to a
    /// lone task and to a burst (`docs/notebook/dispatch.md`).
    TidepoolSlice,
    /// tidepool as `Pool::builder().build()` builds it: the self-sizing
    /// default (`auto`), which ignores the benchmark's thread count.
    TidepoolAuto,
    /// The `threadpool` crate.
    Threadpool,
    /// The `rusty_pool` crate.
    RustyPool,
    /// A minimal worker pool over an unbounded crossbeam-channel.
    Crossbeam,
    /// `rayon::ThreadPool::spawn`.
    Rayon,
    /// tokio's blocking pool (`spawn_blocking`), `max_blocking_threads = n`.
    TokioBlocking,
    /// Not a pool: the bare hand-off to one parked thread
    /// ([`FloorSubject`]), a reference row in the latency scenario only,
    /// never counted as a peer.
    Floor,
}

impl Impl {
    /// Every implementation, in report order.
    pub const ALL: [Impl; 15] = [
        Impl::Tidepool,
        Impl::TidepoolNoStats,
        Impl::TidepoolStats,
        Impl::TidepoolMutex,
        Impl::TidepoolSpin,
        Impl::TidepoolHybrid,
        Impl::TidepoolLockFree,
        Impl::TidepoolSlice,
        Impl::TidepoolAuto,
        Impl::Threadpool,
        Impl::RustyPool,
        Impl::Crossbeam,
        Impl::Rayon,
        Impl::TokioBlocking,
        Impl::Floor,
    ];

    /// The implementations run when none is selected: every one except the
    /// variants that duplicate the default configuration and the opt-in
    /// short-slice experiment.
    pub fn defaults() -> Vec<Impl> {
        Impl::ALL
            .into_iter()
            .filter(|i| !TidepoolSubject::duplicates_default(*i) && *i != Impl::TidepoolSlice)
            .collect()
    }

    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Tidepool => "tidepool",
            Impl::TidepoolNoStats => "tidepool-nostats",
            Impl::TidepoolStats => "tidepool-stats",
            Impl::TidepoolMutex => "tidepool-mutex",
            Impl::TidepoolSpin => "tidepool-spin",
            Impl::TidepoolHybrid => "tidepool-hybrid",
            Impl::TidepoolLockFree => "tidepool-lockfree",
            Impl::TidepoolSlice => "tidepool-slice",
            Impl::TidepoolAuto => "tidepool-auto",
            Impl::Threadpool => "threadpool",
            Impl::RustyPool => "rusty_pool",
            Impl::Crossbeam => "crossbeam",
            Impl::Rayon => "rayon",
            Impl::TokioBlocking => "tokio-blocking",
            Impl::Floor => FLOOR,
        }
    }

    /// True for tidepool and its variants; false for the peers.
    pub fn is_tidepool(self) -> bool {
        self.name().starts_with("tidepool")
    }

    /// Whether this implementation takes part in `scenario`: the floor
    /// (one worker thread) only in the latency scenario, where one task is
    /// in flight at a time; everything else everywhere.
    pub fn runs(self, scenario: Scenario) -> bool {
        self != Impl::Floor || scenario.measures_latency()
    }

    /// Build this implementation with `threads` workers, hand it to `v`, then
    /// drop (shut down) it.
    pub fn with<V: Visit>(self, threads: usize, v: V) -> V::Output {
        build!(self, threads, |s| v.visit(&s))
    }

    /// Build this implementation with `threads` workers for the idle
    /// scenarios, which keep every implementation alive at once
    /// ([`run_interleaved`](crate::scenario::run_interleaved)); dropping the
    /// box shuts it down.
    pub fn build_idle(self, threads: usize) -> Box<dyn Idle> {
        build!(self, threads, |s| Box::new(s))
    }
}

impl fmt::Display for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Impl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Impl::ALL
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Impl::ALL.iter().map(|i| i.name()).collect();
                format!("unknown impl `{s}`: expected one of {}", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for i in Impl::ALL {
            assert_eq!(i.name().parse::<Impl>(), Ok(i));
        }
        assert!("nope".parse::<Impl>().is_err());
        assert!(Impl::defaults().contains(&Impl::Tidepool));
        assert!(!Impl::defaults().contains(&Impl::TidepoolSlice));
        assert!(Impl::TidepoolSlice.is_tidepool());
        assert!(!Impl::Rayon.is_tidepool());
        assert!(Impl::defaults().contains(&Impl::Floor));
        assert!(Impl::Floor.runs(Scenario::LatencyIdle));
        assert!(!Impl::Floor.runs(Scenario::BurstIdle));
        assert!(Impl::Crossbeam.runs(Scenario::BurstIdle));
    }
}
