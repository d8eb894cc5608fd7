//! The simplest credible pool: N workers receiving boxed jobs from one
//! unbounded crossbeam-channel.

use std::thread::JoinHandle;

use crossbeam_channel::{unbounded, Sender};

use crate::subject::Subject;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// N worker threads looping on `recv()` of an unbounded crossbeam channel.
/// Dropping it closes the channel and joins the workers (after they drained
/// the queue).
pub struct CrossbeamPool {
    tx: Option<Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
}

impl CrossbeamPool {
    /// A pool of `threads` workers.
    pub fn new(threads: usize) -> Self {
        let (tx, rx) = unbounded::<Job>();
        let workers = (0..threads)
            .map(|i| {
                let rx = rx.clone();
                std::thread::Builder::new()
                    .name(format!("bench-crossbeam-{i}"))
                    .spawn(move || {
                        while let Ok(job) = rx.recv() {
                            job();
                        }
                    })
                    .expect("spawn crossbeam worker")
            })
            .collect();
        CrossbeamPool {
            tx: Some(tx),
            workers,
        }
    }
}

impl Subject for CrossbeamPool {
    #[inline]
    fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        if let Some(tx) = &self.tx {
            tx.send(Box::new(f)).expect("crossbeam pool channel closed");
        }
    }
}

impl Drop for CrossbeamPool {
    fn drop(&mut self) {
        self.tx = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
