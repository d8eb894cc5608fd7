//! The `threadpool` crate: an mpsc channel behind a mutex, condvar join.

use crate::subject::Subject;

/// `threadpool::ThreadPool` with a fixed number of workers.
pub struct ThreadpoolSubject(threadpool::ThreadPool);

impl ThreadpoolSubject {
    /// A pool of `threads` workers.
    pub fn new(threads: usize) -> Self {
        ThreadpoolSubject(threadpool::ThreadPool::new(threads))
    }
}

impl Subject for ThreadpoolSubject {
    #[inline]
    fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.0.execute(f);
    }
}

impl Drop for ThreadpoolSubject {
    fn drop(&mut self) {
        self.0.join();
    }
}
