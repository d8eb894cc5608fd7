//! `Pool::scope`: tasks that borrow from the caller's stack (as
//! `std::thread::scope` and `rayon::scope`).
//!
//! Safety argument. A scoped task's closure may borrow anything that outlives
//! `'scope`; the pool's queue wants `'static` tasks, so [`Scope::spawn`]
//! erases the lifetime. That is sound because nothing of the closure can be
//! touched after [`Pool::scope`] returns or unwinds:
//! - every spawned task is counted in `pending` before it is queued, and the
//!   count drops only when the task's closure is *gone* — run to completion
//!   (a panic is caught) or dropped unrun (say, by `shutdown_now`): the
//!   decrement is done by `ScopedJob`'s `Drop`, after the closure was dropped;
//! - `Pool::scope` waits for `pending == 0` on every path: after the user's
//!   closure returned *and* after it panicked (the panic is caught, the wait
//!   done, then the panic resumed);
//! - the wait itself cannot be skipped by a panic (it only locks and waits)
//!   and cannot deadlock: a worker of this pool that waits runs queued tasks
//!   itself meanwhile, and a refused submission runs on the caller at once.
//!
//! After the decrement a task touches only its `Arc<State>`, which is owned.

use std::any::Any;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::{worker, Pool};

/// What the scope and its tasks share.
#[derive(Default)]
struct State {
    /// Tasks spawned and not yet gone.
    pending: Mutex<usize>,
    all_done: Condvar,
    /// The first panic of a task, resumed by `Pool::scope`.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl State {
    fn lock_pending(&self) -> std::sync::MutexGuard<'_, usize> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record_panic(&self, payload: Box<dyn Any + Send>) {
        let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(payload);
    }
}

/// A scope to spawn borrowing tasks in; see [`Pool::scope`].
pub struct Scope<'scope, 'env: 'scope> {
    pool: Pool,
    state: Arc<State>,
    /// Invariant in both lifetimes, as `std::thread::Scope`.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// A spawned closure and the scope's count: the count drops only after the
/// closure is gone, run or not (see the module's safety argument).
struct ScopedJob<F> {
    f: Option<F>,
    state: Arc<State>,
}

impl<F: FnOnce()> ScopedJob<F> {
    fn run(mut self) {
        if let Some(f) = self.f.take() {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
                self.state.record_panic(payload);
            }
        }
    }
}

impl<F> Drop for ScopedJob<F> {
    fn drop(&mut self) {
        if self.f.take().is_some() {
            self.state
                .record_panic(Box::new("a scoped task was dropped unrun (shutdown_now)"));
        }
        let mut pending = self.state.lock_pending();
        *pending -= 1;
        if *pending == 0 {
            self.state.all_done.notify_all();
        }
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Run `f` on the pool; it may borrow anything that outlives the scope.
    /// If the pool refuses it (shut down, or a full queue with
    /// [`OnFull::Reject`](crate::OnFull::Reject)) it runs here, at once.
    pub fn spawn<F>(&'scope self, f: F)
    where
        F: FnOnce() + Send + 'scope,
    {
        *self.state.lock_pending() += 1;
        let job = ScopedJob {
            f: Some(f),
            state: self.state.clone(),
        };
        let job: Box<dyn FnOnce() + Send + 'scope> = Box::new(move || job.run());
        // SAFETY: `Pool::scope` does not return or unwind before `pending`
        // is zero, which happens only once this job is gone (module docs).
        let job: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(job) };
        if let Err(rejected) = self.pool.execute_waiting(job, self.pool.blocking()) {
            rejected.into_inner()();
        }
    }
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("pending", &*self.state.lock_pending())
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// Run `f` with a [`Scope`] whose tasks may borrow from the caller's
    /// stack; returns once every task spawned in it has finished. A panic in
    /// `f` or in a task is propagated after that (`f`'s first, else the first
    /// task's), as `rayon::scope`.
    ///
    /// ```
    /// let pool = tidepool::Pool::new(2)?;
    /// let data = vec![1u64, 2, 3, 4];
    /// let mut halves = [0u64; 2];
    /// let (left, right) = halves.split_at_mut(1);
    /// pool.scope(|s| {
    ///     s.spawn(|| left[0] = data[..2].iter().sum());
    ///     s.spawn(|| right[0] = data[2..].iter().sum());
    /// });
    /// assert_eq!(halves, [3, 7]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scope<'env, F, R>(&self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        let scope = Scope {
            pool: self.clone(),
            state: Arc::new(State::default()),
            scope: PhantomData,
            env: PhantomData,
        };
        let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
        scope.wait();
        let task_panic = scope
            .state
            .panic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match (result, task_panic) {
            (Err(payload), _) | (Ok(_), Some(payload)) => resume_unwind(payload),
            (Ok(r), None) => r,
        }
    }
}

impl Scope<'_, '_> {
    /// Block until every spawned task is gone. A worker of this pool runs
    /// queued tasks meanwhile, so a scope inside a task cannot deadlock.
    fn wait(&self) {
        let shared = &*self.pool.inner.shared;
        let helping = worker::is_worker_of(shared);
        let mut pending = self.state.lock_pending();
        while *pending > 0 {
            if helping {
                drop(pending);
                if let Some(task) = shared.queue.pop() {
                    shared.notify_room();
                    task.run();
                    pending = self.state.lock_pending();
                    continue;
                }
                pending = self.state.lock_pending();
                if *pending == 0 {
                    break;
                }
                // Our tasks run elsewhere; look at the queue again shortly.
                pending = self
                    .state
                    .all_done
                    .wait_timeout(pending, Duration::from_millis(1))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            } else {
                pending = self
                    .state
                    .all_done
                    .wait(pending)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}
