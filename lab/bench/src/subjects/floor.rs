//! The floor: the least a hand-off to a parked thread costs on this machine.
//!
//! Not a pool and not a peer: one worker thread, a job list under an
//! uncontended lock, and std's `park`/`unpark` (a futex word: one wake-up
//! system call when the worker is parked, none otherwise). No search, no
//! statistics, no sizing. It runs only in the latency scenario, where it
//! shows how much of a pool's submit-to-start time is the kernel's: a
//! parking pool cannot start a lone task sooner than this, whatever its
//! queue, except by not parking at all.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::subject::Subject;

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Inbox {
    jobs: Mutex<Vec<Job>>,
    /// The worker is parked or about to park: a submitter must unpark it.
    parked: AtomicBool,
    closed: AtomicBool,
}

/// One worker thread fed through a job list and `unpark`.
pub struct FloorSubject {
    inbox: Arc<Inbox>,
    worker: Option<JoinHandle<()>>,
}

impl FloorSubject {
    /// The floor's single worker, started.
    pub fn new() -> Self {
        let inbox = Arc::new(Inbox {
            jobs: Mutex::new(Vec::new()),
            parked: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        });
        let mine = inbox.clone();
        let worker = std::thread::Builder::new()
            .name("bench-floor".into())
            .spawn(move || run(&mine))
            .expect("spawn floor worker");
        FloorSubject {
            inbox,
            worker: Some(worker),
        }
    }
}

impl Default for FloorSubject {
    fn default() -> Self {
        Self::new()
    }
}

fn take(inbox: &Inbox) -> Vec<Job> {
    std::mem::take(&mut *inbox.jobs.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The worker: run what is there; else announce the park, look once more
/// (a job pushed before the announcement is seen here, one pushed after it
/// finds `parked` set and unparks us: the two `SeqCst` accesses on each
/// side order them), and park. Spurious wake-ups only loop.
fn run(inbox: &Inbox) {
    loop {
        let jobs = take(inbox);
        if !jobs.is_empty() {
            jobs.into_iter().for_each(|job| job());
            continue;
        }
        if inbox.closed.load(SeqCst) {
            return;
        }
        inbox.parked.store(true, SeqCst);
        let empty = inbox
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty();
        if empty && !inbox.closed.load(SeqCst) {
            std::thread::park();
        }
        inbox.parked.store(false, SeqCst);
    }
}

impl Subject for FloorSubject {
    #[inline]
    fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.inbox
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(f));
        if self.inbox.parked.load(SeqCst) {
            if let Some(w) = &self.worker {
                w.thread().unpark();
            }
        }
    }
}

impl Drop for FloorSubject {
    fn drop(&mut self) {
        self.inbox.closed.store(true, SeqCst);
        if let Some(w) = self.worker.take() {
            w.thread().unpark();
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// Every job runs, from several submitters, with pauses that let the
    /// worker park in between; dropping drains and joins.
    #[test]
    fn runs_every_job_and_joins() {
        static RAN: AtomicUsize = AtomicUsize::new(0);
        let floor = FloorSubject::new();
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for i in 0..300 {
                        floor.spawn(|| {
                            RAN.fetch_add(1, Relaxed);
                        });
                        if i % 50 == 0 {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                    }
                });
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while RAN.load(Relaxed) < 900 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(floor);
        assert_eq!(RAN.load(Relaxed), 900);
    }
}
