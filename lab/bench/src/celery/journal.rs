//! The task bodies' journals, the same for both systems: each execution of
//! a request appends `S <id>` when it starts and `F <id>` when its work is
//! done, one `write(2)` each with `O_APPEND` (whole lines, also across the
//! processes of one Celery worker), one file per worker or node. A SIGKILL
//! can leave a started request without its `F` line; the file itself
//! survives. Counting them gives each request's executions, whatever the
//! broker or the client saw.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Starts and finishes per request id.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Executions {
    /// `S` lines per request.
    pub started: HashMap<u64, u32>,
    /// `F` lines per request.
    pub finished: HashMap<u64, u32>,
}

impl Executions {
    /// Read every journal (a missing file counts as empty; a torn last line
    /// is ignored).
    pub fn read(paths: &[PathBuf]) -> Executions {
        let mut e = Executions::default();
        for p in paths {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            for line in text.lines() {
                let (kind, id) = match line.split_once(' ') {
                    Some((k, id)) => (k, id.trim().parse::<u64>()),
                    None => continue,
                };
                let Ok(id) = id else { continue };
                match kind {
                    "S" => *e.started.entry(id).or_default() += 1,
                    "F" => *e.finished.entry(id).or_default() += 1,
                    _ => {}
                }
            }
        }
        e
    }

    /// Requests whose work was done more than once.
    pub fn ran_twice(&self) -> u64 {
        self.finished.values().filter(|&&n| n > 1).count() as u64
    }

    /// Requests started more than once (a redelivery after the kill).
    pub fn restarted(&self) -> u64 {
        self.started.values().filter(|&&n| n > 1).count() as u64
    }

    /// Of `0..requests`, those whose work was never done.
    pub fn never_finished(&self, requests: u64) -> u64 {
        (0..requests)
            .filter(|id| !self.finished.contains_key(id))
            .count() as u64
    }
}

/// `F` lines over all journals so far (cheap enough to poll: a few hundred
/// kilobytes at most).
pub fn finished_so_far(paths: &[PathBuf]) -> u64 {
    paths
        .iter()
        .map(|p| {
            std::fs::read(p)
                .map(|b| {
                    b.split(|&c| c == b'\n')
                        .filter(|l| l.starts_with(b"F "))
                        .count() as u64
                })
                .unwrap_or(0)
        })
        .sum()
}

/// Kills a worker once the journals show `at` finished requests: the same
/// trigger for both systems, whatever their clients see.
#[derive(Debug)]
pub struct Killer {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Option<u64>>,
}

impl Killer {
    /// Watch `journals` every 20 ms; at `at` finished, run `kill`.
    pub fn arm(journals: Vec<PathBuf>, at: u64, kill: impl FnOnce() + Send + 'static) -> Killer {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let done = finished_so_far(&journals);
                if done >= at {
                    kill();
                    return Some(done);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            None
        });
        Killer { stop, thread }
    }

    /// Stop watching; the finished count at the kill, if it happened.
    pub fn disarm(self) -> Option<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().ok().flatten()
    }
}

/// The journal of worker or node `i` in `dir`.
pub fn path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("worker-{i}.journal"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_starts_finishes_and_ignores_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let a = path(dir.path(), 0);
        let b = path(dir.path(), 1);
        std::fs::write(&a, "S 0\nF 0\nS 1\nS 2\nF 2\nS 3").unwrap();
        std::fs::write(&b, "S 1\nF 1\nS 2\nF 2\nF").unwrap();
        let paths = vec![a, b];
        let e = Executions::read(&paths);
        assert_eq!(e.ran_twice(), 1); // 2
        assert_eq!(e.restarted(), 2); // 1 and 2
        assert_eq!(e.never_finished(4), 1); // 3
        assert_eq!(finished_so_far(&paths), 4);
        let k = Killer::arm(paths, 4, || {});
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(k.disarm(), Some(4));
    }
}
