//! tidepool's `Pool`, in its default configuration and per queue flavor.

use std::time::Duration;

use tidepool::{Pool, QueueFlavor};

use super::Impl;
use crate::subject::Subject;

/// The slice `tidepool-slice`'s workers ask for: well under the default
/// (0.75 ms × (1 + log2 of the CPU count)), so a woken worker's slice is the
/// shorter one and EEVDF lets it preempt the thread that woke it.
pub const SHORT_SLICE: Duration = Duration::from_micros(300);

/// A `tidepool::Pool` configured for one of the tidepool [`Impl`]s.
pub struct TidepoolSubject(Pool);

impl TidepoolSubject {
    /// Build the pool for `which` (one of the tidepool impls) with `threads`
    /// workers (min = max = initial); `tidepool-auto` is the default pool,
    /// which sizes itself.
    pub fn new(which: Impl, threads: usize) -> Self {
        if which == Impl::TidepoolAuto {
            let pool = Pool::builder().name(which.name()).build();
            return TidepoolSubject(pool.expect("build the default tidepool pool"));
        }
        let b = Pool::builder().name(which.name()).threads(threads);
        let b = match which {
            Impl::TidepoolNoStats => b.statistics(false),
            Impl::TidepoolStats => b.statistics(true),
            Impl::TidepoolMutex => b.queue(QueueFlavor::Mutex),
            Impl::TidepoolSpin => b.queue(QueueFlavor::Spin),
            Impl::TidepoolHybrid => b.queue(QueueFlavor::HYBRID),
            Impl::TidepoolLockFree => b.queue(QueueFlavor::LockFree),
            Impl::TidepoolSlice => b.worker_slice(SHORT_SLICE),
            _ => b,
        };
        TidepoolSubject(b.build().expect("build tidepool pool"))
    }

    /// True for a variant that is configured exactly like the default
    /// `tidepool` impl (so running it too would only repeat a row).
    pub fn duplicates_default(which: Impl) -> bool {
        // The default queue is the lock-free one; the default statistics
        // setting is on (see `Builder`).
        matches!(which, Impl::TidepoolLockFree | Impl::TidepoolStats)
    }
}

impl Subject for TidepoolSubject {
    #[inline]
    fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.0.execute(f).expect("tidepool rejected a task");
    }
}
