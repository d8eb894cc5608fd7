//! `JoinHandle`: the result of a submitted task, by blocking `join` or as a
//! `Future` (no async runtime needed: the worker wakes the stored `Waker`).
//!
//! # The claim protocol (a join that helps)
//!
//! A task and its handle share one allocation, the [`Slot`]: the closure,
//! the result, and a `claimed` flag. A task is *queued* (in the pool's
//! queue, unclaimed), *claimed* (someone owns its closure: it is running,
//! or being dropped unrun), then *done* (its result is in the slot).
//!
//! Whoever decides a task's fate first claims it, with one atomic swap of
//! `claimed` from false to true; exactly one swap wins, and only the winner
//! touches the closure. The claimants are the worker that pops the task,
//! [`JoinHandle::cancel`], a cancel token or a deadline (which drop the
//! closure and complete the slot with their error), and a **joiner on a
//! worker of the same pool**: `join` or `join_timeout` there claims a task
//! that has not started and runs it right on the joining thread — so a
//! task that submits into its own pool and joins what it submitted never
//! waits for a worker that is itself waiting. The loser of the race skips
//! the closure: the worker that later pops a task a joiner ran finds it
//! claimed and moves on (the queued copy is a no-op), and a joiner that
//! loses waits for the result. Only tasks submitted without a deadline or
//! a cancel token are run by a joiner (those checks live with the queued
//! copy).
//!
//! No lost wake-up: the result is stored and the waiters are notified
//! under the slot's mutex, and a waiter checks for the result under the
//! same mutex before it sleeps. A joiner on a worker that must wait (the
//! task runs elsewhere) counts as blocked for the whole wait, exactly as in
//! [`block_in_place`](crate::block_in_place), so the pool may compensate.

use std::cell::UnsafeCell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::blocking::Blocked;
use crate::error::JoinError;
use crate::sync::{lock, AtomicBool, Condvar, Mutex};
use crate::task::Body;
use std::sync::atomic::Ordering::AcqRel;

enum State<T> {
    Pending(Option<Waker>),
    Done(Result<T, JoinError>),
    Taken,
}

/// The part of a slot that does not depend on the closure's type.
struct Header<T> {
    state: Mutex<State<T>>,
    done: Condvar,
    /// Claimed by whoever decides the task's fate first (see the module
    /// doc). One swap per task, on a line the worker writes anyway when it
    /// completes the slot.
    claimed: AtomicBool,
    /// The pool whose workers may run the task from a join (`Shared::id`;
    /// 0: none).
    pool: usize,
}

impl<T> Header<T> {
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

    /// Claim the task: true for the one caller that wins.
    #[inline]
    fn claim(&self) -> bool {
        !self.claimed.swap(true, AcqRel)
    }

    fn is_done(&self) -> bool {
        !matches!(&*lock(&self.state), State::Pending(_))
    }
}

/// A task's closure and its result, shared by the queued task and the handle.
struct Slot<T, F> {
    header: Header<T>,
    /// Taken only by the claimant (the winner of `Header::claim`).
    f: UnsafeCell<Option<F>>,
}

// SAFETY: the closure is moved out by exactly one thread, the claimant
// (the `AcqRel` swap orders the slot's creation before it); everything else
// in the slot is behind a mutex or atomic.
unsafe impl<T: Send, F: Send> Sync for Slot<T, F> {}

impl<T, F> Slot<T, F> {
    /// The closure. Only the claimant may call this, once.
    fn take_closure(&self) -> Option<F> {
        // SAFETY: see the `Sync` impl; the caller won the claim.
        unsafe { (*self.f.get()).take() }
    }
}

/// A slot seen without its closure's type: what a handle holds.
trait Claimable<T>: Send + Sync {
    fn header(&self) -> &Header<T>;
    /// Run the closure and deliver its result; the caller has claimed the
    /// task. Returns true if it panicked.
    fn run_claimed(&self) -> bool;
    /// Drop the closure unrun; the caller has claimed the task.
    fn drop_closure(&self);
}

impl<T, F> Claimable<T> for Slot<T, F>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    #[inline]
    fn header(&self) -> &Header<T> {
        &self.header
    }

    #[inline]
    fn run_claimed(&self) -> bool {
        let Some(f) = self.take_closure() else {
            return false;
        };
        let result = catch_unwind(AssertUnwindSafe(f))
            .map_err(|p| JoinError::Panicked(crate::error::Panic::new(p)));
        let panicked = result.is_err();
        self.header.complete(result);
        panicked
    }

    fn drop_closure(&self) {
        drop(self.take_closure());
    }
}

/// The handle to a task submitted with [`Pool::submit`](crate::Pool::submit).
///
/// Joined on a worker of the task's own pool, a task that has not started
/// runs right there (see the module source for the protocol), so a task may
/// submit into its own pool and join what it submitted.
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
    slot: Arc<dyn Claimable<T>>,
}

/// A submitted closure as the queue holds it: runs it unless its fate was
/// decided elsewhere; dropped unrun, reports `Cancelled`.
pub(crate) struct WithHandle<F, T> {
    slot: Option<Arc<Slot<T, F>>>,
}

/// A handle and its task, sharing one slot. `pool`: the `Shared::id` of the
/// pool whose workers may run it from a join (0: none).
pub(crate) fn pair<F, T>(f: F, pool: usize) -> (JoinHandle<T>, WithHandle<F, T>)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let slot = Arc::new(Slot {
        header: Header {
            state: Mutex::new(State::Pending(None)),
            done: Condvar::new(),
            claimed: AtomicBool::new(false),
            pool,
        },
        f: UnsafeCell::new(Some(f)),
    });
    (
        JoinHandle { slot: slot.clone() },
        WithHandle { slot: Some(slot) },
    )
}

impl<F, T> Body for WithHandle<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    /// Run the closure and deliver its value or panic, unless the task was
    /// claimed already (cancelled, or run by a joiner). Returns true if it
    /// panicked.
    #[inline]
    fn call(mut self) -> bool {
        let Some(slot) = self.slot.take() else {
            return false;
        };
        if !slot.header.claim() {
            return false;
        }
        slot.run_claimed()
    }
}

impl<F, T> WithHandle<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    /// Drop the task unrun: its handle reports `why`, unless its fate was
    /// already decided (cancelled through the handle or a token).
    pub(crate) fn refuse(mut self, why: JoinError) {
        if let Some(slot) = self.slot.take() {
            refuse(&*slot, why);
        }
    }

    /// What a [`CancelToken`](crate::CancelToken) completes when cancelled.
    pub(crate) fn on_cancel(&self) -> Option<Box<dyn crate::task_options::OnCancel>> {
        let slot: Arc<dyn Claimable<T>> = self.slot.clone()?;
        Some(Box::new(CancelSlot(slot)))
    }

    /// The closure back, unrun; its handle is dropped without a result.
    pub(crate) fn into_closure(mut self) -> F {
        let slot = self.slot.take().expect("a task's slot is taken once");
        // Nobody else has seen the task: the claim is ours.
        slot.header.claim();
        slot.take_closure()
            .expect("an unclaimed task has its closure")
    }
}

/// Claim `slot` and drop its closure unrun, completing it with `why`.
fn refuse<T>(slot: &dyn Claimable<T>, why: JoinError) -> bool {
    if !slot.header().claim() {
        return false;
    }
    // The closure goes now (not when the queued copy is reached).
    slot.drop_closure();
    slot.header().complete(Err(why));
    true
}

impl<F, T> Drop for WithHandle<F, T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            if slot.header.claim() {
                drop(slot.take_closure());
                slot.header.complete(Err(JoinError::Cancelled));
            }
        }
    }
}

/// A handle's slot as a cancel token sees it.
struct CancelSlot<T>(Arc<dyn Claimable<T>>);

impl<T: Send> crate::task_options::OnCancel for CancelSlot<T> {
    fn cancel(&self) {
        refuse(&*self.0, JoinError::Cancelled);
    }

    fn is_done(&self) -> bool {
        self.0.header().is_done()
    }
}

impl<T> JoinHandle<T> {
    /// Wait for the task: its value, or how it failed (panicked, cancelled).
    pub fn join(self) -> Result<T, JoinError> {
        let _blocked = self.help();
        let header = self.slot.header();
        let mut state = lock(&header.state);
        loop {
            if let State::Done(_) = &*state {
                return take(&mut state);
            }
            state = header.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Wait at most `timeout`; gives the handle back if the task is not done.
    /// A timeout too long to represent as an instant waits like [`join`](Self::join).
    pub fn join_timeout(self, timeout: Duration) -> Result<Result<T, JoinError>, Self> {
        let Some(deadline) = std::time::Instant::now().checked_add(timeout) else {
            return Ok(self.join());
        };
        {
            let _blocked = self.help();
            let header = self.slot.header();
            let mut state = lock(&header.state);
            loop {
                if let State::Done(_) = &*state {
                    return Ok(take(&mut state));
                }
                let now = std::time::Instant::now();
                if now >= deadline {
                    break;
                }
                state = header
                    .done
                    .wait_timeout(state, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        Err(self)
    }

    /// On a worker, before waiting: run the task here if it belongs to
    /// this worker's pool and has not started; otherwise, if it is not
    /// done, count this worker as blocked for the wait (the guard).
    fn help(&self) -> Option<Blocked> {
        let shared = super::worker::current()?;
        let header = self.slot.header();
        if header.is_done() {
            return None;
        }
        if header.pool == shared.id() && self.run_here() {
            return None;
        }
        Some(Blocked::enter(shared))
    }

    /// Claim the task and run it on this thread: false if someone else
    /// claimed it first.
    pub(crate) fn run_here(&self) -> bool {
        if !self.slot.header().claim() {
            return false;
        }
        self.slot.run_claimed();
        true
    }

    /// Stop the task from running, if it has not started yet: true if this
    /// call stopped it (its `join` then reports [`JoinError::Cancelled`] at
    /// once, and the closure is dropped), false if it had already started,
    /// finished or been cancelled. A running task is never interrupted.
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
        refuse(&*self.slot, JoinError::Cancelled)
    }

    /// True once the task has finished (or was cancelled).
    pub fn is_finished(&self) -> bool {
        self.slot.header().is_done()
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
        let mut state = lock(&self.slot.header().state);
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
    fn dropping_the_task_cancels() {
        let (h, c) = pair(|| 1u8, 0);
        drop(c);
        assert!(matches!(h.join(), Err(JoinError::Cancelled)));
    }

    #[test]
    fn future_is_woken_once_done() {
        let (mut h, c) = pair(|| 5u8, 0);
        let wakes = std::sync::Arc::new(CountWakes(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut h).poll(&mut cx).is_pending());
        assert!(!c.call());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        match Pin::new(&mut h).poll(&mut cx) {
            Poll::Ready(Ok(5)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn join_timeout_gives_the_handle_back() {
        let (h, c) = pair(|| 1u8, 0);
        let h = h.join_timeout(Duration::from_millis(5)).unwrap_err();
        assert!(!h.is_finished());
        c.call();
        assert_eq!(h.join_timeout(Duration::from_secs(5)).unwrap().unwrap(), 1);
    }

    #[test]
    fn panics_are_delivered() {
        let (h, c) = pair(|| -> u8 { panic!("kaboom") }, 0);
        assert!(c.call());
        assert_eq!(h.join().unwrap_err().panic_message(), Some("kaboom"));
    }

    #[test]
    fn a_task_run_here_is_a_no_op_when_popped() {
        let runs = std::sync::Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let (h, c) = pair(move || r.fetch_add(1, Ordering::SeqCst), 0);
        assert!(h.run_here());
        assert!(!h.run_here());
        assert!(!c.call());
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(h.join().unwrap(), 0);
    }

    #[test]
    fn cancel_drops_the_closure_at_once() {
        let token = std::sync::Arc::new(());
        let held = token.clone();
        let (h, c) = pair(move || drop(held), 0);
        assert!(h.cancel());
        assert_eq!(std::sync::Arc::strong_count(&token), 1);
        assert!(!c.call());
        assert!(h.join().unwrap_err().is_cancelled());
    }
}
