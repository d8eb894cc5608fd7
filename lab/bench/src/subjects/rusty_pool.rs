//! The `rusty_pool` crate: a crossbeam channel plus an atomic worker counter.

use crate::subject::Subject;

/// `rusty_pool::ThreadPool` with core size = max size = the thread count.
pub struct RustyPoolSubject(rusty_pool::ThreadPool);

impl RustyPoolSubject {
    /// A pool of `threads` workers (created on demand by rusty_pool).
    pub fn new(threads: usize) -> Self {
        RustyPoolSubject(
            rusty_pool::Builder::new()
                .core_size(threads)
                .max_size(threads)
                .build(),
        )
    }
}

impl Subject for RustyPoolSubject {
    #[inline]
    fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.0.execute(f);
    }
}

impl Drop for RustyPoolSubject {
    fn drop(&mut self) {
        self.0.join();
    }
}
