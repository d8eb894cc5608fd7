//! rayon: `ThreadPool::spawn` (fire and forget on the global injector).

use crate::subject::Subject;

/// A `rayon::ThreadPool` with a fixed number of threads.
pub struct RayonSubject(rayon::ThreadPool);

impl RayonSubject {
    /// A pool of `threads` workers.
    pub fn new(threads: usize) -> Self {
        RayonSubject(
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("bench-rayon-{i}"))
                .build()
                .expect("build rayon pool"),
        )
    }
}

impl Subject for RayonSubject {
    #[inline]
    fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.0.spawn(f);
    }
}
