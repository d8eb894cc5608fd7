//! Where a stage thread sleeps while its input queue is empty: a pipe of its
//! own, so that the thread that wakes it gives the kernel a *synchronous*
//! wake-up.
//!
//! # Why a pipe and not a futex
//!
//! A futex wake-up tells the scheduler nothing about the waker, so on a busy
//! machine it often queues the woken stage thread behind the thread running
//! on the *other* CPU, while the waker's own CPU, which the waker is about to
//! free by parking, then idles (`docs/benchmarks.md`, pipelines, session 4:
//! 94% of the idle time of `balanced-compute` was spent so). A write to a
//! pipe wakes its reader with `WF_SYNC` (`pipe_write` →
//! `wake_up_interruptible_sync_poll`), and the scheduler's `wake_affine_idle`
//! then places the reader on the waker's CPU when the waker is the only
//! thread running there — the hint "I am about to sleep" — unless some CPU
//! is idle, which `select_idle_sibling` still prefers. Nothing is pinned and
//! no migration is forced (pinning was tried, and lost: same section).
//!
//! # Contract
//!
//! [`Parker::park`] returns once per [`Parker::unpark`], which may come
//! before it (the token is kept: a pipe holds the byte). A queue hands out
//! exactly one unpark per registration of a waiter, so at most one token is
//! ever pending and a park never returns without one (no spurious returns,
//! although the queue's wait loop would tolerate them).
//!
//! # Fallback
//!
//! Each thread makes its pipe the first time it parks and closes it when it
//! exits (the thread-local's destructor, which runs on every exit path).
//! Pipes are descriptors the user's own code may need (a stage that opens
//! files), so at most a quarter of the process's descriptor limit, and at
//! most [`MAX_PIPES`], are parkers' pipes at any time. A thread beyond that
//! budget, or whose pipe cannot be made — the process is out of descriptors
//! (`EMFILE`, `ENFILE`), or the OS has no pipes — parks on a mutex and
//! condition variable instead (a futex: correct, only without the hint). Under `--cfg loom` every parker is that one, with loom's
//! primitives, so the models check the same wait/notify contract.

use std::sync::Arc;

use crate::sync::{lock, Condvar, Mutex};

/// The most parkers' pipes open at once (two descriptors each).
#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) const MAX_PIPES: usize = 256;

/// Parkers' pipes open now.
#[cfg(all(target_os = "linux", not(loom)))]
static PIPES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many pipes the process's descriptor limit leaves room for (see the
/// module's fallback), read once.
#[cfg(all(target_os = "linux", not(loom)))]
fn pipe_budget() -> usize {
    static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit into `l`.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
            return 0;
        }
        // Two descriptors a pipe, a quarter of the limit for all of them.
        usize::try_from(l.rlim_cur / 8).map_or(MAX_PIPES, |n| n.min(MAX_PIPES))
    })
}

/// One thread's place to sleep (see the module's contract).
#[derive(Debug)]
pub(crate) struct Parker {
    how: How,
}

#[derive(Debug)]
enum How {
    /// The read and write ends of a pipe.
    #[cfg(all(target_os = "linux", not(loom)))]
    Pipe { read: i32, write: i32 },
    /// Tokens pending, under a lock, with a condition variable.
    Futex { tokens: Mutex<usize>, cv: Condvar },
}

#[cfg(not(loom))]
std::thread_local!(static MINE: Arc<Parker> = Arc::new(Parker::new()));
#[cfg(loom)]
loom::thread_local!(static MINE: Arc<Parker> = Arc::new(Parker::futex()));

impl Parker {
    /// The calling thread's parker (made on first use).
    pub(crate) fn current() -> Arc<Parker> {
        MINE.with(Arc::clone)
    }

    #[cfg(not(loom))]
    fn new() -> Self {
        #[cfg(target_os = "linux")]
        {
            use std::sync::atomic::Ordering::Relaxed;
            if PIPES.fetch_add(1, Relaxed) < pipe_budget() {
                let mut fds = [0i32; 2];
                // SAFETY: pipe2 writes two descriptors into `fds`, which has room.
                if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == 0 {
                    return Parker {
                        how: How::Pipe {
                            read: fds[0],
                            write: fds[1],
                        },
                    };
                }
            }
            // Over the budget, or out of descriptors: the futex park below.
            PIPES.fetch_sub(1, Relaxed);
        }
        Self::futex()
    }

    fn futex() -> Self {
        Parker {
            how: How::Futex {
                tokens: Mutex::new(0),
                cv: Condvar::new(),
            },
        }
    }

    /// This parker waits on a pipe (not the futex fallback).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn is_pipe(&self) -> bool {
        !matches!(self.how, How::Futex { .. })
    }

    /// Sleep until a token is there, and take it.
    pub(crate) fn park(&self) {
        match &self.how {
            #[cfg(all(target_os = "linux", not(loom)))]
            How::Pipe { read, .. } => {
                let mut byte = 0u8;
                loop {
                    // SAFETY: reads at most one byte into `byte`.
                    let n = unsafe { libc::read(*read, (&mut byte as *mut u8).cast(), 1) };
                    if n == 1 {
                        return;
                    }
                    let e = std::io::Error::last_os_error();
                    assert!(
                        n < 0 && e.kind() == std::io::ErrorKind::Interrupted,
                        "tidepool-pipeline: reading a parked thread's pipe failed: {e}"
                    );
                }
            }
            How::Futex { tokens, cv } => {
                let mut t = lock(tokens);
                while *t == 0 {
                    t = cv.wait(t).unwrap_or_else(|e| e.into_inner());
                }
                *t -= 1;
            }
        }
    }

    /// Give the parker a token, waking its thread if it sleeps. On a pipe,
    /// the kernel is told the caller is about to sleep (see the module).
    pub(crate) fn unpark(&self) {
        match &self.how {
            #[cfg(all(target_os = "linux", not(loom)))]
            How::Pipe { write, .. } => loop {
                // SAFETY: writes one byte from a live local.
                let n = unsafe { libc::write(*write, (&1u8 as *const u8).cast(), 1) };
                if n == 1 {
                    return;
                }
                let e = std::io::Error::last_os_error();
                assert!(
                    n < 0 && e.kind() == std::io::ErrorKind::Interrupted,
                    "tidepool-pipeline: waking a parked thread's pipe failed: {e}"
                );
            },
            How::Futex { tokens, cv } => {
                *lock(tokens) += 1;
                cv.notify_one();
            }
        }
    }
}

impl Drop for Parker {
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", not(loom)))]
        if let How::Pipe { read, write } = self.how {
            // SAFETY: both descriptors are this parker's own, closed once.
            unsafe {
                libc::close(read);
                libc::close(write);
            }
            PIPES.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_token_given_before_the_park_is_kept_and_one_park_takes_one() {
        for p in [Parker::new(), Parker::futex()] {
            p.unpark();
            p.park();
            p.unpark();
            p.unpark();
            p.park();
            p.park();
        }
    }

    #[test]
    fn unpark_wakes_a_parked_thread() {
        let p = Parker::current();
        #[cfg(target_os = "linux")]
        assert!(p.is_pipe(), "a thread parks on a pipe by default");
        let q = p.clone();
        let t = std::thread::spawn(move || q.unpark());
        p.park();
        t.join().unwrap();
    }

    /// No more than the budget of pipes is ever open: threads beyond it
    /// park on the futex fallback, and a closed pipe frees its place.
    #[cfg(target_os = "linux")]
    #[test]
    fn pipes_stay_within_the_budget() {
        let budget = pipe_budget();
        assert!(budget > 0 && budget <= MAX_PIPES);
        let many: Vec<Parker> = (0..budget + 3).map(|_| Parker::new()).collect();
        let pipes = many.iter().filter(|p| p.is_pipe()).count();
        // Other tests' threads may hold pipes too: never more than the
        // budget in all, and the last ones made here are over it.
        assert!(pipes <= budget);
        assert!(!many.last().unwrap().is_pipe());
        assert!(PIPES.load(std::sync::atomic::Ordering::Relaxed) <= budget);
        drop(many);
        assert!(Parker::new().is_pipe(), "closing pipes frees the budget");
    }

    /// The pipe is closed when its thread exits: a thread's parker leaves no
    /// descriptor behind. (The number may be reused by then, so the test
    /// compares the file behind it, not only whether it is open.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_closes_its_pipe_when_it_exits() {
        fn inode(fd: i32) -> Option<(u64, u64)> {
            // SAFETY: fstat writes into a zeroed stat of the right type.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
        }
        let (fd, was) = std::thread::spawn(|| match Parker::current().how {
            How::Pipe { read, .. } => (read, inode(read).expect("the pipe is open")),
            How::Futex { .. } => panic!("expected a pipe"),
        })
        .join()
        .unwrap();
        assert_ne!(
            inode(fd),
            Some(was),
            "the exited thread's pipe is still open"
        );
    }
}
