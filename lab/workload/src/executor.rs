//! "Run this job": the one interface the replay driver and benchmarks need, so
//! that a pool, the thread-per-request baseline and the peer pools are
//! measured the same way.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use tidepool::{Pool, SubmitError};

/// A job handed to an [`Executor`].
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// Thread counts an executor reports, for the papers' "threads created" and
/// "threads kept" metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ExecutorCounts {
    /// Threads alive now.
    pub live_threads: usize,
    /// Threads created since the executor started.
    pub threads_created: u64,
    /// Jobs accepted but not yet started.
    pub queued: usize,
}

impl ExecutorCounts {
    /// Counts from an [`Executor`] implementation (the struct is
    /// `#[non_exhaustive]`: fields added later start at zero).
    pub fn new(live_threads: usize, threads_created: u64, queued: usize) -> Self {
        ExecutorCounts {
            live_threads,
            threads_created,
            queued,
        }
    }
}

/// Something that runs jobs on other threads.
pub trait Executor: Send + Sync {
    /// A short name for reports (`tidepool`, `tpr`, …).
    fn name(&self) -> String;
    /// Run `job` eventually. Fails only when the executor cannot accept it
    /// (shut down, or its queue is full and it rejects).
    fn execute_job(&self, job: Job) -> Result<(), SubmitError>;
    /// Current thread counts.
    fn counts(&self) -> ExecutorCounts;
    /// Block until every accepted job has finished.
    fn wait_idle(&self);
    /// The tidepool [`Pool`] behind this executor, if it is one:
    /// gives access to its statistics, size series and decision log.
    fn pool(&self) -> Option<&Pool> {
        None
    }
}

/// Thread per request: one new OS thread for every job, the papers' TPR
/// baseline. Cheap to reason about, expensive to run.
///
/// ```
/// use tidepool_workload::{Executor, ThreadPerRequest};
/// let tpr = ThreadPerRequest::new();
/// tpr.execute_job(Box::new(|| println!("on my own thread"))).unwrap();
/// tpr.wait_idle();
/// assert_eq!(tpr.counts().threads_created, 1);
/// ```
#[derive(Debug, Default, Clone)]
pub struct ThreadPerRequest {
    inner: Arc<TprInner>,
    threads: Arc<Reaper>,
}

#[derive(Debug, Default)]
struct TprInner {
    created: AtomicU64,
    live: AtomicUsize,
    running: Mutex<usize>,
    done: Condvar,
}

/// The handles of the threads started, each joined once its thread has
/// finished and never dropped unjoined: dropping a handle detaches its
/// thread, and glibc's (2.36) detach of a thread that is exiting at that
/// moment can read the thread's freed stack. The server benchmark's front
/// end, starting about 10,000 threads a second, died of it.
#[derive(Debug, Default)]
struct Reaper(Mutex<Vec<std::thread::JoinHandle<()>>>);

impl Reaper {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<std::thread::JoinHandle<()>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep `handle`, and join the threads that have finished.
    fn keep(&self, handle: std::thread::JoinHandle<()>) {
        let done: Vec<_> = {
            let mut threads = self.lock();
            let (done, going) = threads.drain(..).partition(|h| h.is_finished());
            *threads = going;
            threads.push(handle);
            done
        };
        done.into_iter().for_each(|h| {
            let _ = h.join();
        });
    }

    /// Join every thread (but the calling one, should a job hold the
    /// executor: it cannot join itself).
    fn join_all(&self) {
        let me = std::thread::current().id();
        let all = std::mem::take(&mut *self.lock());
        for h in all {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.join_all();
    }
}

impl ThreadPerRequest {
    /// A new thread-per-request executor.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Executor for ThreadPerRequest {
    fn name(&self) -> String {
        "tpr".to_string()
    }

    fn execute_job(&self, job: Job) -> Result<(), SubmitError> {
        let inner = self.inner.clone();
        *inner.running.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        inner.live.fetch_add(1, Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name("tidepool-tpr".into())
            .spawn(move || {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                inner.live.fetch_sub(1, Ordering::Relaxed);
                let mut running = inner.running.lock().unwrap_or_else(|e| e.into_inner());
                *running -= 1;
                if *running == 0 {
                    inner.done.notify_all();
                }
            });
        match spawned {
            Ok(handle) => {
                self.inner.created.fetch_add(1, Ordering::Relaxed);
                self.threads.keep(handle);
                Ok(())
            }
            Err(e) => {
                self.inner.live.fetch_sub(1, Ordering::Relaxed);
                *self.inner.running.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
                Err(SubmitError::Spawn(e.to_string()))
            }
        }
    }

    fn counts(&self) -> ExecutorCounts {
        ExecutorCounts {
            live_threads: self.inner.live.load(Ordering::Relaxed),
            threads_created: self.inner.created.load(Ordering::Relaxed),
            queued: 0,
        }
    }

    fn wait_idle(&self) {
        let mut running = self.inner.running.lock().unwrap_or_else(|e| e.into_inner());
        while *running > 0 {
            running = self
                .inner
                .done
                .wait(running)
                .unwrap_or_else(|e| e.into_inner());
        }
        drop(running);
        self.threads.join_all();
    }
}

impl Executor for Pool {
    fn name(&self) -> String {
        Pool::name(self).to_string()
    }

    fn execute_job(&self, job: Job) -> Result<(), SubmitError> {
        self.execute(job).map_err(SubmitError::from)
    }

    fn counts(&self) -> ExecutorCounts {
        ExecutorCounts {
            live_threads: self.live_threads(),
            threads_created: self.threads_created(),
            queued: self.queued(),
        }
    }

    fn wait_idle(&self) {
        Pool::wait_idle(self)
    }

    fn pool(&self) -> Option<&Pool> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    #[test]
    fn pool_and_tpr_are_executors() {
        let executors: Vec<Box<dyn Executor>> = vec![
            Box::new(Pool::new(2).unwrap()),
            Box::new(ThreadPerRequest::new()),
        ];
        for ex in executors {
            let n = Arc::new(AtomicUsize::new(0));
            for _ in 0..20 {
                let n = n.clone();
                ex.execute_job(Box::new(move || {
                    n.fetch_add(1, Ordering::SeqCst);
                }))
                .unwrap();
            }
            ex.wait_idle();
            assert_eq!(n.load(Ordering::SeqCst), 20, "{}", ex.name());
            let counts = ex.counts();
            assert!(counts.threads_created >= 2);
            assert_eq!(counts.queued, 0);
            assert_eq!(ex.pool().is_some(), ex.name() == "tidepool");
        }
    }

    #[test]
    fn tpr_joins_every_thread_it_started() {
        // No handle is dropped unjoined (a detach racing the thread's exit
        // is a glibc use-after-free): finished threads are joined as new
        // ones start, and the rest by `wait_idle`.
        let tpr = ThreadPerRequest::new();
        let gate = Arc::new(std::sync::Barrier::new(2));
        let held = gate.clone();
        tpr.execute_job(Box::new(move || {
            held.wait();
        }))
        .unwrap();
        for _ in 0..50 {
            tpr.execute_job(Box::new(|| {})).unwrap();
        }
        let kept = tpr.threads.lock().len();
        assert!(kept >= 1, "the running thread's handle was let go");
        gate.wait();
        tpr.wait_idle();
        assert_eq!(tpr.threads.lock().len(), 0);
        assert_eq!(tpr.counts().threads_created, 51);
        // Dropping a clone used by a job joins nothing it cannot: the job
        // holding the last clone is the caller.
        let tpr2 = tpr.clone();
        tpr.execute_job(Box::new(move || drop(tpr2))).unwrap();
        drop(tpr);
    }
}
