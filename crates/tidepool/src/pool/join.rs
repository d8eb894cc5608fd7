//! `JoinHandle`: the result of a submitted task, by blocking `join` or as a
//! `Future` (no async runtime needed: the worker wakes the stored `Waker`).

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::error::JoinError;
use crate::sync::{lock, Arc, AtomicBool, Condvar, Mutex};
use crate::task::Body;
use std::sync::atomic::Ordering::AcqRel;

enum State<T> {
    Pending(Option<Waker>),
    Done(Result<T, JoinError>),
    Taken,
}

struct Slot<T> {
    state: Mutex<State<T>>,
    done: Condvar,
    /// Claimed by whoever decides the task's fate first: the worker about
    /// to run it, or [`JoinHandle::cancel`]. One swap per task, on a line
    /// the worker writes anyway when it completes the slot.
    claimed: AtomicBool,
}

impl<T> Slot<T> {
    fn complete(&self, result: Result<T, JoinError>) {
        let waker = {
            let mut state = lock(&self.state);
            match std::mem::replace(&mut *state, State::Done(result)) {
                State::Pending(w) => w,
                _ => None,
            }
        };
        self.done.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The handle to a task submitted with [`Pool::submit`](crate::Pool::submit).
///
/// ```
/// let pool = tidepool::Pool::new(2)?;
/// let h = pool.submit(|| 6 * 7)?;
/// assert_eq!(h.join()?, 42);
///
/// let boom = pool.submit(|| -> u32 { panic!("boom") })?;
/// let err = boom.join().unwrap_err();
/// assert_eq!(err.panic_message(), Some("boom"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct JoinHandle<T> {
    slot: Arc<Slot<T>>,
}

/// The worker's end: fills the slot, or reports `Cancelled` when dropped unrun.
pub(crate) struct Completer<T> {
    slot: Option<Arc<Slot<T>>>,
}

/// A handle and its completer, sharing one slot.
pub(crate) fn pair<T>() -> (JoinHandle<T>, Completer<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Pending(None)),
        done: Condvar::new(),
        claimed: AtomicBool::new(false),
    });
    (
        JoinHandle { slot: slot.clone() },
        Completer { slot: Some(slot) },
    )
}

impl<T> Completer<T> {
    /// Run `f`, deliver its value or panic. Returns true if it panicked.
    /// A cancelled task is dropped unrun (its handle already has `Cancelled`).
    pub(crate) fn run(mut self, f: impl FnOnce() -> T) -> bool {
        if let Some(slot) = &self.slot {
            if slot.claimed.swap(true, AcqRel) {
                self.slot = None;
                return false;
            }
        }
        let result = catch_unwind(AssertUnwindSafe(f))
            .map_err(|p| JoinError::Panicked(crate::error::Panic::new(p)));
        let panicked = result.is_err();
        if let Some(slot) = self.slot.take() {
            slot.complete(result);
        }
        panicked
    }
}

impl<T> Completer<T> {
    /// Drop the task unrun: its handle reports `why`, unless its fate was
    /// already decided (cancelled through the handle or a token).
    pub(crate) fn refuse(mut self, why: JoinError) {
        if let Some(slot) = self.slot.take() {
            if !slot.claimed.swap(true, AcqRel) {
                slot.complete(Err(why));
            }
        }
    }

    /// What a [`CancelToken`](crate::CancelToken) completes when cancelled.
    pub(crate) fn on_cancel(&self) -> Option<Box<dyn crate::task_options::OnCancel>>
    where
        T: Send + 'static,
    {
        let slot = self.slot.clone()?;
        Some(Box::new(CancelSlot(slot)))
    }
}

/// A handle's slot as a cancel token sees it.
struct CancelSlot<T>(Arc<Slot<T>>);

impl<T: Send> crate::task_options::OnCancel for CancelSlot<T> {
    fn cancel(&self) {
        if !self.0.claimed.swap(true, AcqRel) {
            self.0.complete(Err(JoinError::Cancelled));
        }
    }

    fn is_done(&self) -> bool {
        !matches!(&*lock(&self.0.state), State::Pending(_))
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            if !slot.claimed.swap(true, AcqRel) {
                slot.complete(Err(JoinError::Cancelled));
            }
        }
    }
}

/// A submitted closure with its completer: a named type, so that a rejected
/// submission can take the closure back out of its [`Task`](crate::Task).
pub(crate) struct WithHandle<F, T> {
    pub(crate) f: F,
    pub(crate) completer: Completer<T>,
}

impl<F, T> Body for WithHandle<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    #[inline]
    fn call(self) -> bool {
        self.completer.run(self.f)
    }
}

impl<F, T> WithHandle<F, T> {
    /// The closure back, unrun; its handle is dropped without a result.
    pub(crate) fn into_closure(self) -> F {
        let WithHandle { f, mut completer } = self;
        // Nobody will join: forget the slot without completing it.
        completer.slot = None;
        f
    }
}

impl<T> JoinHandle<T> {
    /// Wait for the task: its value, or how it failed (panicked, cancelled).
    pub fn join(self) -> Result<T, JoinError> {
        let mut state = lock(&self.slot.state);
        loop {
            if let State::Done(_) = &*state {
                return take(&mut state);
            }
            state = self
                .slot
                .done
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Wait at most `timeout`; gives the handle back if the task is not done.
    /// A timeout too long to represent as an instant waits like [`join`](Self::join).
    pub fn join_timeout(self, timeout: Duration) -> Result<Result<T, JoinError>, Self> {
        let Some(deadline) = std::time::Instant::now().checked_add(timeout) else {
            return Ok(self.join());
        };
        {
            let mut state = lock(&self.slot.state);
            loop {
                if let State::Done(_) = &*state {
                    return Ok(take(&mut state));
                }
                let now = std::time::Instant::now();
                if now >= deadline {
                    break;
                }
                state = self
                    .slot
                    .done
                    .wait_timeout(state, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        Err(self)
    }

    /// Stop the task from running, if it has not started yet: true if this
    /// call stopped it (its `join` then reports [`JoinError::Cancelled`] at
    /// once), false if it had already started, finished or been cancelled.
    /// A running task is never interrupted. The closure itself is dropped
    /// when a worker reaches it in the queue.
    ///
    /// ```
    /// let pool = tidepool::Pool::new(1)?;
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// let busy = pool.submit(move || rx.recv().unwrap())?; // holds the only worker
    /// let queued = pool.submit(|| unreachable!("cancelled"))?;
    /// assert!(queued.cancel());
    /// assert!(queued.join().unwrap_err().is_cancelled());
    /// tx.send(()).unwrap();
    /// busy.join()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(&self) -> bool {
        if self.slot.claimed.swap(true, AcqRel) {
            return false;
        }
        self.slot.complete(Err(JoinError::Cancelled));
        true
    }

    /// True once the task has finished (or was cancelled).
    pub fn is_finished(&self) -> bool {
        !matches!(&*lock(&self.slot.state), State::Pending(_))
    }
}

fn take<T>(state: &mut State<T>) -> Result<T, JoinError> {
    match std::mem::replace(state, State::Taken) {
        State::Done(r) => r,
        _ => unreachable!("take is only called on a finished slot"),
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = lock(&self.slot.state);
        match &mut *state {
            State::Pending(waker) => {
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            State::Done(_) => Poll::Ready(take(&mut state)),
            State::Taken => panic!("JoinHandle polled after it returned Ready"),
        }
    }
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct CountWakes(AtomicUsize);
    impl Wake for CountWakes {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn dropping_the_completer_cancels() {
        let (h, c) = pair::<u8>();
        drop(c);
        assert!(matches!(h.join(), Err(JoinError::Cancelled)));
    }

    #[test]
    fn future_is_woken_once_done() {
        let (mut h, c) = pair::<u8>();
        let wakes = std::sync::Arc::new(CountWakes(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut h).poll(&mut cx).is_pending());
        assert!(!c.run(|| 5));
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        match Pin::new(&mut h).poll(&mut cx) {
            Poll::Ready(Ok(5)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn join_timeout_gives_the_handle_back() {
        let (h, c) = pair::<u8>();
        let h = h.join_timeout(Duration::from_millis(5)).unwrap_err();
        assert!(!h.is_finished());
        c.run(|| 1);
        assert_eq!(h.join_timeout(Duration::from_secs(5)).unwrap().unwrap(), 1);
    }

    #[test]
    fn panics_are_delivered() {
        let (h, c) = pair::<u8>();
        assert!(c.run(|| panic!("kaboom")));
        assert_eq!(h.join().unwrap_err().panic_message(), Some("kaboom"));
    }
}
