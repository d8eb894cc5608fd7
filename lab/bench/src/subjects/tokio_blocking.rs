//! tokio's blocking pool: `Runtime::spawn_blocking`.

use crate::subject::Subject;

/// A current-thread tokio runtime used only for its blocking pool, capped at
/// `max_blocking_threads = threads` (so no extra async worker thread exists).
pub struct TokioBlockingSubject(tokio::runtime::Runtime);

impl TokioBlockingSubject {
    /// A runtime whose blocking pool has at most `threads` threads.
    pub fn new(threads: usize) -> Self {
        TokioBlockingSubject(
            tokio::runtime::Builder::new_current_thread()
                .max_blocking_threads(threads)
                .thread_name("bench-tokio-blocking")
                .build()
                .expect("build tokio runtime"),
        )
    }
}

impl Subject for TokioBlockingSubject {
    #[inline]
    fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        // The JoinHandle is dropped: fire and forget.
        drop(self.0.spawn_blocking(f));
    }
}
