//! tidepool's `Pool`, in its default configuration and per queue flavour.

use tidepool::{Pool, QueueFlavor};

use super::Impl;
use crate::subject::Subject;

/// A fixed-size `tidepool::Pool` configured for one of the tidepool [`Impl`]s.
pub struct TidepoolSubject(Pool);

impl TidepoolSubject {
    /// Build the pool for `which` (one of the tidepool impls) with `threads`
    /// workers (min = max = initial).
    pub fn new(which: Impl, threads: usize) -> Self {
        let b = Pool::builder().name(which.name()).threads(threads);
        let b = match which {
            Impl::TidepoolNoStats => b.statistics(false),
            Impl::TidepoolStats => b.statistics(true),
            Impl::TidepoolMutex => b.queue(QueueFlavor::Mutex),
            Impl::TidepoolSpin => b.queue(QueueFlavor::Spin),
            Impl::TidepoolHybrid => b.queue(QueueFlavor::HYBRID),
            Impl::TidepoolLockFree => b.queue(QueueFlavor::LockFree),
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
