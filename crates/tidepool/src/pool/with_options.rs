//! `Pool::submit_with` and `Pool::execute_with`: tasks with a priority, a
//! deadline or a cancel token (`task_options`). Default options take the
//! plain path (`submit`, `execute`) unchanged. A deadline or a token is
//! carried inside the task's closure ([`Guarded`]), which checks them when
//! a worker reaches it; a priority other than `Normal` puts the task in a
//! lane beside the queue (`queue::lanes`).

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use super::join::{self, WithHandle};
use super::shared::Outcomes;
use super::{grow_if_starved, Detached, JoinHandle, Pool};
use crate::error::{JoinError, Rejected, SubmitError};
use crate::task::{Body, Task};
use crate::task_options::{CancelToken, Priority, TaskOptions};

/// A body that can be dropped unrun with a reason for its handle.
pub(crate) trait Refuse: Body {
    /// Drop unrun; a handle, if any, reports `why`.
    fn refuse(self, why: JoinError);
}

impl<F: FnOnce() + Send + 'static> Refuse for Detached<F> {
    fn refuse(self, _: JoinError) {}
}

impl<F, T> Refuse for WithHandle<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn refuse(self, why: JoinError) {
        WithHandle::refuse(self, why);
    }
}

/// A body with a deadline and/or a cancel token, checked just before it
/// would run.
pub(crate) struct Guarded<B> {
    body: B,
    deadline: Option<Instant>,
    token: Option<CancelToken>,
    outcomes: std::sync::Arc<Outcomes>,
}

impl<B: Refuse> Body for Guarded<B> {
    fn call(self) -> bool {
        if self.token.as_ref().is_some_and(CancelToken::is_cancelled) {
            self.outcomes.cancelled.fetch_add(1, Relaxed);
            self.body.refuse(JoinError::Cancelled);
            return false;
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.outcomes.expired.fetch_add(1, Relaxed);
            self.body.refuse(JoinError::Expired);
            return false;
        }
        self.body.call()
    }
}

impl Pool {
    /// [`submit`](Pool::submit) with per-task options: a [`Priority`], a
    /// deadline, a [`CancelToken`]. Default options are exactly `submit`.
    ///
    /// A task not started by its deadline never runs (`join()` gives
    /// [`JoinError::is_expired`]); one whose token is cancelled while queued
    /// never runs (`join()` gives [`JoinError::is_cancelled`] at once). Both
    /// are counted ([`PoolStats::expired`](crate::PoolStats::expired),
    /// [`PoolStats::cancelled`](crate::PoolStats::cancelled)). With a bounded
    /// queue, a `High` or `Low` task that finds it full is refused with
    /// [`SubmitError::Full`] at once (it does not block).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use tidepool::{Pool, Priority, TaskOptions};
    ///
    /// let pool = Pool::fixed(1)?;
    /// let urgent = TaskOptions::new()
    ///     .priority(Priority::High)
    ///     .deadline(Instant::now() + Duration::from_secs(1));
    /// assert_eq!(pool.submit_with(urgent, || "done")?.join()?, "done");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn submit_with<F, T>(
        &self,
        options: TaskOptions,
        f: F,
    ) -> Result<JoinHandle<T>, Rejected<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if options.is_plain() {
            return self.submit(f);
        }
        // Not run by a joiner (0): the deadline and token checks live with
        // the queued copy.
        let (handle, body) = join::pair(f, 0);
        if let Some(token) = &options.token {
            if let Some(hook) = body.on_cancel() {
                token.on_cancel(hook);
            }
        }
        match self.push_guarded(options, body) {
            Ok(()) => Ok(handle),
            Err((e, body)) => Err(Rejected::new(e, body.into_closure())),
        }
    }

    /// [`execute`](Pool::execute) with per-task options (see
    /// [`submit_with`](Pool::submit_with)). Default options are exactly `execute`.
    pub fn execute_with<F>(&self, options: TaskOptions, f: F) -> Result<(), Rejected<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        if options.is_plain() {
            return self.execute(f);
        }
        self.push_guarded(options, Detached(f))
            .map_err(|(e, body)| Rejected::new(e, body.0))
    }

    /// Push `body`, guarded by the options' deadline and token when it has
    /// any, into the lane of its priority; a refused body comes back.
    fn push_guarded<B: Refuse>(
        &self,
        options: TaskOptions,
        body: B,
    ) -> Result<(), (SubmitError, B)> {
        let TaskOptions {
            priority,
            deadline,
            token,
        } = options;
        if deadline.is_none() && token.is_none() {
            return self
                .push_prioritised(self.task(body), priority)
                // SAFETY: the task was built from a `B` just above.
                .map_err(|(e, task)| (e, unsafe { task.into_body::<B>() }));
        }
        let guarded = Guarded {
            body,
            deadline,
            token,
            outcomes: self.inner.shared.outcomes.clone(),
        };
        self.push_prioritised(self.task(guarded), priority)
            // SAFETY: the task was built from a `Guarded<B>` just above.
            .map_err(|(e, task)| (e, unsafe { task.into_body::<Guarded<B>>() }.body))
    }

    /// `push` for a task of any priority: `Normal` ones take the plain
    /// path (blocking on a full queue as the pool is configured); others go
    /// into their lane, or are refused at once if a bounded queue is full.
    /// The wake-up and shutdown protocols are `push`'s; the lane push
    /// always takes the fence (`queue::lanes`).
    fn push_prioritised(&self, task: Task, priority: Priority) -> Result<(), (SubmitError, Task)> {
        if priority == Priority::Normal {
            return self.push(task, self.blocking());
        }
        let shared = &*self.inner.shared;
        if shared.is_shutdown() {
            return Err((SubmitError::ShutDown, task));
        }
        if let Err(task) = shared.queue.push_with(task, priority) {
            shared.counters.rejected.fetch_add(1, Relaxed);
            return Err((SubmitError::Full, task));
        }
        let woke = shared.sleepers.notify_work_after(false);
        if shared.is_shutdown() {
            self.drain_after_shutdown();
        } else if !woke {
            grow_if_starved(&self.inner.shared);
        }
        Ok(())
    }
}
