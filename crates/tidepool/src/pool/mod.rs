//! The pool: `Pool`, its builder, workers, resizing and shutdown.

mod blocking;
mod builder;
mod controller;
mod join;
#[cfg(all(test, loom))]
mod loom_tests;
mod room;
mod scope;
mod shared;
pub(crate) mod sleep;
mod spawn;
mod with_options;
mod worker;

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

pub use blocking::block_in_place;
pub use builder::{
    Builder, OnFull, DEFAULT_HISTORY_LEN, DEFAULT_MAX_THREADS, DEFAULT_MIN_THREADS,
    MAX_HISTORY_LEN, MAX_THREADS,
};
pub use join::JoinHandle;
pub use scope::Scope;

use crate::error::{BuildError, Rejected, SubmitError};
use crate::metrics::{LiveThreadsSample, PoolStats};
use crate::policy::{Decision, DecisionRecord, SizingPolicy};
use crate::sync::{lock, Arc, Mutex};
use crate::sys as os;
use crate::task::Body;
use crate::task::Task;
use builder::Config;
use join::WithHandle;
use shared::Shared;

/// A closure submitted without a handle: a named type, so that a rejected
/// submission can take it back out of its [`Task`].
struct Detached<F>(F);

impl<F: FnOnce() + Send + 'static> Body for Detached<F> {
    #[inline]
    fn call(self) -> bool {
        (self.0)();
        false
    }
}

/// Where a submitted task went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pushed {
    /// Into the queue.
    Queued,
    /// Nowhere: it already ran on the submitting worker (see `push_when_room`).
    RanInline,
}

/// An elastic, instrumented thread pool.
///
/// Tasks go into a queue; worker threads take each submitting thread's
/// tasks in FIFO order (tasks of different threads, submitted at the same
/// time, may start in either order; in a backlog of thousands, the default
/// queue can rarely start one task ahead of older ones of its thread:
/// `docs/design.md`, "Order"). The pool
/// keeps between `min` and `max` workers, steered by its sizing policy or by
/// [`resize`](Pool::resize).
///
/// `Pool` is a cheap handle: clone it into threads and tasks (one reference
/// count, like tokio's `Handle`). Dropping the last handle shuts the pool
/// down gracefully ([`shutdown`](Pool::shutdown)).
///
/// ```
/// use tidepool::Pool;
///
/// let pool = Pool::builder().threads(4).build()?;
/// let answers: Vec<_> = (0..8u64)
///     .map(|i| pool.submit(move || i * i))
///     .collect::<Result<_, _>>()?;
/// let sum: u64 = answers.into_iter().map(|h| h.join().unwrap()).sum();
/// assert_eq!(sum, 140);
/// pool.wait_idle(); // statistics are recorded just after each task returns
/// assert_eq!(pool.stats().completed, 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Pool {
    inner: std::sync::Arc<Inner>,
}

/// What the handles share; dropped with the last one.
#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    controller: Mutex<Option<std::thread::JoinHandle<()>>>,
    last_window: Mutex<Option<PoolStats>>,
    /// `shutdown_timeout` gave up waiting: the last drop must not wait either.
    detached: std::sync::atomic::AtomicBool,
}

impl Pool {
    /// Configure a pool.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A static pool of `threads` workers with default settings (as
    /// [`Pool::fixed`]; [`Pool::auto`] is the self-sizing one).
    pub fn new(threads: usize) -> Result<Pool, BuildError> {
        Pool::fixed(threads)
    }

    /// A static pool of exactly `threads` workers: `Pool::builder().threads(threads)`.
    pub fn fixed(threads: usize) -> Result<Pool, BuildError> {
        Pool::builder().threads(threads).build()
    }

    /// The default pool, as `Pool::builder().build()`: it sizes itself
    /// ([`policy::Auto`](crate::policy::Auto)) between
    /// [`DEFAULT_MIN_THREADS`] and [`DEFAULT_MAX_THREADS`] workers.
    ///
    /// ```
    /// let pool = tidepool::Pool::auto()?;
    /// assert_eq!(pool.submit(|| 6 * 7)?.join()?, 42);
    /// assert_eq!(pool.stats().max_threads, tidepool::DEFAULT_MAX_THREADS);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn auto() -> Result<Pool, BuildError> {
        Pool::builder().build()
    }

    pub(crate) fn start(config: Config, policy: Box<dyn SizingPolicy>) -> Result<Pool, BuildError> {
        let initial = config.initial;
        let shared = Arc::new(Shared::new(config));
        let pool = Pool {
            inner: std::sync::Arc::new(Inner {
                shared: shared.clone(),
                controller: Mutex::new(None),
                last_window: Mutex::new(None),
                detached: std::sync::atomic::AtomicBool::new(false),
            }),
        };
        // On an error `pool` is dropped, which shuts down the workers started.
        for started in 0..initial {
            if !shared.reserve_worker(initial) {
                break;
            }
            worker::spawn(&shared).map_err(|e| {
                BuildError::new(
                    "initial_threads",
                    initial,
                    format!("the OS refused thread {} after {started}: {e}", started + 1),
                )
            })?;
        }
        let handle = controller::start(&shared, policy).map_err(|e| {
            BuildError::new(
                "policy",
                "controller",
                format!("the OS refused a thread: {e}"),
            )
        })?;
        *lock(&pool.inner.controller) = handle;
        Ok(pool)
    }

    /// Submit a task and get a handle to its result. Blocks while a bounded
    /// queue is full if the pool was built with [`OnFull::Block`] (the default).
    ///
    /// A refused task ([`OnFull::Reject`] with a full queue, or a shut-down
    /// pool) comes back in the [`Rejected`]: run it yourself (caller-runs),
    /// or let `?` turn the refusal into your error type.
    ///
    /// ```
    /// use tidepool::{OnFull, Pool, SubmitError};
    ///
    /// let pool = Pool::builder().threads(1).queue_capacity(1).on_full(OnFull::Reject).build()?;
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// let gate = std::sync::Mutex::new(rx);
    /// pool.execute(move || gate.lock().unwrap().recv().unwrap())?; // busy...
    /// # while pool.stats().queue_len > 0 { std::thread::yield_now() }
    /// pool.execute(|| {})?; // ...and the queue is full
    /// let answer = match pool.submit(|| 6 * 7) {
    ///     Ok(handle) => handle.join()?,
    ///     Err(rejected) => {
    ///         assert_eq!(*rejected.error(), SubmitError::Full);
    ///         rejected.into_inner()() // caller runs
    ///     }
    /// };
    /// assert_eq!(answer, 42);
    /// tx.send(())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn submit<F, T>(&self, f: F) -> Result<JoinHandle<T>, Rejected<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.submit_waiting(f, self.blocking())
    }

    /// Submit a task without a handle (cheapest). A panic in it is counted
    /// in [`PoolStats::panicked`] and reported by the panic hook. A refused
    /// closure comes back in the [`Rejected`], as with [`submit`](Pool::submit).
    #[inline]
    pub fn execute<F>(&self, f: F) -> Result<(), Rejected<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.execute_waiting(f, self.blocking())
    }

    /// Like [`submit`](Pool::submit) but never blocks: a full queue is
    /// [`SubmitError::Full`], and the closure comes back in the [`Rejected`].
    pub fn try_submit<F, T>(&self, f: F) -> Result<JoinHandle<T>, Rejected<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.submit_waiting(f, Some(Duration::ZERO))
    }

    /// Like [`execute`](Pool::execute) but never blocks; a refused closure
    /// comes back in the [`Rejected`] (run it yourself for caller-runs).
    ///
    /// ```
    /// use tidepool::{Pool, SubmitError};
    ///
    /// let pool = Pool::builder().threads(1).queue_capacity(1).build()?;
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// let gate = std::sync::Mutex::new(rx);
    /// pool.execute(move || gate.lock().unwrap().recv().unwrap())?; // busy...
    /// # while pool.stats().queue_len > 0 { std::thread::yield_now() }
    /// pool.execute(|| {})?; // ...and the queue is full
    /// let mut ran_here = false;
    /// match pool.try_execute(|| {}) {
    ///     Ok(()) => {}
    ///     Err(rejected) => {
    ///         assert_eq!(*rejected.error(), SubmitError::Full);
    ///         rejected.into_inner()(); // caller runs
    ///         ran_here = true;
    ///     }
    /// }
    /// assert!(ran_here);
    /// tx.send(()).unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_execute<F>(&self, f: F) -> Result<(), Rejected<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.execute_waiting(f, Some(Duration::ZERO))
    }

    /// Like [`submit`](Pool::submit) but waits at most `timeout` for room:
    /// [`SubmitError::Timeout`] if the queue stayed full, with the closure
    /// handed back.
    pub fn submit_timeout<F, T>(
        &self,
        f: F,
        timeout: Duration,
    ) -> Result<JoinHandle<T>, Rejected<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.submit_waiting(f, Some(timeout))
    }

    /// `submit` with a handle; `wait` as in [`push`](Self::push).
    fn submit_waiting<F, T>(
        &self,
        f: F,
        wait: Option<Duration>,
    ) -> Result<JoinHandle<T>, Rejected<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let pool = self.inner.shared.id();
        let (handle, body) = join::pair(f, pool);
        match self.push(self.task(body), wait) {
            Ok(()) => Ok(handle),
            // SAFETY: the task was built from a `WithHandle<F, T>` just above.
            Err((e, task)) => Err(Rejected::new(e, unsafe {
                task.into_body::<WithHandle<F, T>>().into_closure()
            })),
        }
    }

    /// `execute` without a handle; `wait` as in [`push`](Self::push).
    #[inline]
    fn execute_waiting<F>(&self, f: F, wait: Option<Duration>) -> Result<(), Rejected<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        match self.push(self.task(Detached(f)), wait) {
            Ok(()) => Ok(()),
            // SAFETY: the task was built from a `Detached<F>` just above.
            Err((e, task)) => Err(Rejected::new(e, unsafe {
                task.into_body::<Detached<F>>().0
            })),
        }
    }

    /// Box a task, stamped with the submit instant when statistics are on.
    #[inline]
    fn task(&self, f: impl Body) -> Task {
        let ticks = if self.inner.shared.records.is_some() {
            self.inner.shared.sampler.stamp()
        } else {
            0
        };
        Task::stamped(f, ticks)
    }

    /// How long a full queue may block a plain submit: forever, or not at all.
    fn blocking(&self) -> Option<Duration> {
        if self.inner.shared.blocks_when_full() {
            None
        } else {
            Some(Duration::ZERO)
        }
    }

    /// The submit path. `wait`: how long to wait for room (`None`: forever).
    ///
    /// Shutdown protocol: the submitter pushes, issues a `SeqCst` fence (in
    /// `notify_work_after`, or the push itself was a `SeqCst` read-modify-write)
    /// and reads the shutdown flag with `SeqCst`; `begin_shutdown` sets the flag and
    /// issues a `SeqCst` fence before anyone drains the queue for the last
    /// time. If the submitter read "not shut down", its task was pushed before
    /// the final drains look, so a worker, `shutdown` or `shutdown_now` takes
    /// it. If it read "shut down", nobody may look again, so the submitter
    /// drains the queue itself. Either way an accepted task runs exactly once
    /// or is returned by `shutdown_now` — without any shared counter on the
    /// submit path.
    #[inline]
    fn push(&self, task: Task, wait: Option<Duration>) -> Result<(), (SubmitError, Task)> {
        let shared = &*self.inner.shared;
        if shared.is_shutdown() {
            return Err((SubmitError::ShutDown, task));
        }
        if let Err(back) = shared.queue.push(task) {
            if self.push_when_room(back, wait)? == Pushed::RanInline {
                return Ok(());
            }
        }
        let woke = shared.sleepers.notify_work_after(shared.push_is_seq_cst);
        if shared.is_shutdown() {
            self.drain_after_shutdown();
        } else if !woke {
            grow_if_starved(&self.inner.shared);
        }
        Ok(())
    }

    /// A submit that raced with shutdown: run what is left in the queue here,
    /// since the workers and the final drain may already be gone.
    #[cold]
    fn drain_after_shutdown(&self) {
        while let Some(task) = self.inner.shared.queue.pop() {
            task.run();
        }
    }

    /// The queue was full: wait for room (or fail) according to `wait`.
    ///
    /// A worker of this pool never waits for room in its own queue: if every
    /// worker did, nobody would ever make room (a deadlock). Its task runs
    /// right here instead, inline, as part of the calling task — the
    /// back-pressure then is that the caller is busy for as long as it runs.
    #[cold]
    fn push_when_room(
        &self,
        task: Task,
        wait: Option<Duration>,
    ) -> Result<Pushed, (SubmitError, Task)> {
        let shared = &*self.inner.shared;
        if wait == Some(Duration::ZERO) {
            shared.counters.rejected.fetch_add(1, Relaxed);
            return Err((SubmitError::Full, task));
        }
        if worker::is_worker_of(shared) {
            task.run();
            return Ok(Pushed::RanInline);
        }
        // A wait too long to be an instant (`Duration::MAX`) waits without a deadline.
        let deadline = wait.and_then(|w| Some((Instant::now().checked_add(w)?, w)));
        shared
            .push_blocking(task, deadline)
            .map(|()| Pushed::Queued)
    }

    /// Set the target size to `n`, clamped into `min..=max`; returns the new
    /// target. Growing spawns workers at once; shrinking retires idle workers
    /// at once and busy ones when their current task ends (never interrupting
    /// a running task).
    pub fn resize(&self, n: usize) -> usize {
        apply_target(&self.inner.shared, n)
    }

    /// Set the fewest workers (Java's `setCorePoolSize`), validated by the
    /// same rules as a policy's decision (the pool's control rules);
    /// the target is re-clamped at once. `min` and `max` are the user's
    /// bounds: `auto` moves only its own spawn limit inside them
    /// ([`PoolStats::spawn_limit`](crate::PoolStats::spawn_limit)), though
    /// policies with bounds of their own (`watermark`, `hisdyn`) set them.
    ///
    /// ```
    /// // `auto` (the default) on any number of cores.
    /// let pool = tidepool::Pool::builder().min_threads(1).max_threads(16).build()?;
    /// pool.set_min_threads(12)?; // more than the cores: still the user's call
    /// assert!(pool.live_threads() >= 12);
    /// assert_eq!(pool.stats().max_threads, 16);
    /// assert!(pool.set_min_threads(17).is_err()); // above max
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_min_threads(&self, n: usize) -> Result<(), BuildError> {
        self.set_limits(
            Decision {
                min: Some(n),
                ..Decision::hold()
            },
            |l| l.min == n,
            || BuildError::new("min_threads", n, "must be at most max_threads"),
        )
    }

    /// Set the most workers (Java's `setMaximumPoolSize`): between `min` and
    /// [`MAX_THREADS`]. Workers above it retire as soon as they are idle.
    pub fn set_max_threads(&self, n: usize) -> Result<(), BuildError> {
        self.set_limits(
            Decision {
                max: Some(n),
                ..Decision::hold()
            },
            |l| l.max == n,
            || {
                BuildError::new(
                    "max_threads",
                    n,
                    format!("must be between min_threads and {MAX_THREADS}"),
                )
            },
        )
    }

    /// Set how long an idle worker above `min` waits before it retires
    /// (Java's `setKeepAliveTime`); longer than zero.
    pub fn set_keep_alive(&self, keep_alive: Duration) -> Result<(), BuildError> {
        // The user's choice from now on, whatever the policy prefers.
        self.inner.shared.user_keep_alive.store(true, Relaxed);
        self.set_limits(
            Decision {
                keep_alive: Some(keep_alive),
                ..Decision::hold()
            },
            |l| l.keep_alive == keep_alive.min(crate::control::MAX_KEEP_ALIVE),
            || {
                BuildError::new(
                    "keep_alive",
                    format!("{keep_alive:?}"),
                    "must be longer than zero",
                )
            },
        )
    }

    /// Apply `change` through [`Limits::apply`](crate::control::Limits::apply)
    /// (the rules a policy's decisions follow); `took` says whether it was
    /// accepted, `error` what to report if not. Then re-clamp the target.
    fn set_limits(
        &self,
        change: Decision,
        took: impl FnOnce(&crate::control::Limits) -> bool,
        error: impl FnOnce() -> BuildError,
    ) -> Result<(), BuildError> {
        let shared = &self.inner.shared;
        shared
            .change_limits(|limits| Some(limits.apply(&change)).filter(|new| took(new)))
            .ok_or_else(error)?;
        apply_target(shared, shared.target());
        Ok(())
    }

    /// Xu & Bode's `expand_threadpool`: grow the pool to `n` workers.
    pub fn expand(&self, n: usize) -> usize {
        self.resize(n.max(self.inner.shared.target()))
    }

    /// Xu & Bode's `shrink_threadpool`: shrink the pool to `n` workers.
    pub fn shrink(&self, n: usize) -> usize {
        self.resize(n.min(self.inner.shared.target()))
    }

    /// Xu & Bode's `threadpool_size`: worker threads alive now.
    pub fn live_threads(&self) -> usize {
        self.inner.shared.live_threads()
    }

    /// The size the pool is steering toward.
    pub fn target_size(&self) -> usize {
        self.inner.shared.target()
    }

    /// A snapshot of the pool's statistics since it started.
    pub fn stats(&self) -> PoolStats {
        snapshot(&self.inner.shared)
    }

    /// Statistics since the previous call of `stats_window` (or since start).
    pub fn stats_window(&self) -> PoolStats {
        let now = self.stats();
        let mut last = lock(&self.inner.last_window);
        let window = match &*last {
            Some(prev) => now.since(prev),
            None => now.clone(),
        };
        *last = Some(now);
        window
    }

    /// The live threads and the target at every change, if the builder
    /// asked to record them: the newest [`Builder::history_len`] samples.
    pub fn live_threads_series(&self) -> Vec<LiveThreadsSample> {
        self.inner
            .shared
            .series
            .as_ref()
            .map(|s| lock(s).to_vec())
            .unwrap_or_default()
    }

    /// The policy decisions that changed the pool's settings, oldest first:
    /// the newest [`Builder::history_len`] of them (older ones are counted in
    /// [`PoolStats::decisions_dropped`]).
    pub fn decisions(&self) -> Vec<DecisionRecord> {
        lock(&self.inner.shared.decisions).to_vec()
    }

    /// Block until the queue is empty and every worker is waiting for work.
    /// Tasks submitted meanwhile by other threads may or may not be waited for.
    /// Called from a task of this pool, it waits for every *other* worker.
    pub fn wait_idle(&self) {
        let shared = &*self.inner.shared;
        let me = worker::is_worker_of(shared) as usize;
        let backoff = crossbeam_utils::Backoff::new();
        let mut pause = Duration::from_micros(20);
        loop {
            if shared.queue.is_empty() && shared.sleepers.idle() + me >= shared.live_threads() {
                return;
            }
            if !backoff.is_completed() {
                backoff.snooze();
            } else {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(2));
            }
        }
    }

    /// Stop accepting tasks, run every queued task, and join every worker.
    /// Idempotent.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// Stop accepting tasks, take back every task that has not started, and
    /// join the workers (which finish their current task). Dropping a returned
    /// task cancels it; [`Task::run`] runs it here.
    pub fn shutdown_now(&self) -> Vec<Task> {
        let inner = &*self.inner;
        inner.begin_shutdown();
        let mut pending = Vec::new();
        while let Some(task) = inner.shared.queue.pop() {
            pending.push(task);
        }
        inner.join_workers();
        while let Some(task) = inner.shared.queue.pop() {
            pending.push(task);
        }
        pending
    }

    /// Stop accepting tasks and wait at most `timeout` for the queued and
    /// running tasks to finish: true if every one did (the workers are then
    /// joined). Otherwise false: the workers go on with the remaining tasks
    /// and leave by themselves, and dropping the pool no longer waits for
    /// them (as tokio's `Runtime::shutdown_timeout`).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let pool = tidepool::Pool::new(2)?;
    /// pool.execute(|| std::thread::sleep(Duration::from_millis(1)))?;
    /// assert!(pool.shutdown_timeout(Duration::from_secs(60)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown_timeout(&self, timeout: Duration) -> bool {
        let inner = &*self.inner;
        let shared = &*inner.shared;
        inner.begin_shutdown();
        // A task of this pool shutting it down: its own worker stays busy.
        let me = worker::is_worker_of(shared) as usize;
        let deadline = Instant::now().checked_add(timeout);
        let mut pause = Duration::from_micros(50);
        while shared.live_threads() > me || (me == 1 && !shared.queue.is_empty()) {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                inner.detached.store(true, Relaxed);
                return false;
            }
            let left = deadline.map_or(pause, |d| d - now);
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(Duration::from_millis(5));
        }
        // Every worker has left (they leave only with the queue empty).
        inner.shutdown();
        true
    }

    /// True once shutdown has begun.
    pub fn is_shutdown(&self) -> bool {
        self.inner.shared.is_shutdown()
    }

    /// True if the calling thread is one of this pool's workers: the code
    /// runs inside a task of this pool (or a hook this pool calls on its
    /// workers). A library built on the pool asks this before it does
    /// something that would wait for its own task, such as refusing a
    /// shutdown from inside a task instead of leaving it half done.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tidepool::Pool::new(1)?);
    /// assert!(!pool.is_worker_thread());
    /// let p = pool.clone();
    /// assert!(pool.submit(move || p.is_worker_thread())?.join()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_worker_thread(&self) -> bool {
        worker::is_worker_of(&self.inner.shared)
    }
}

impl Inner {
    fn shutdown(&self) {
        self.begin_shutdown();
        self.join_workers();
        // Anything a worker could not take (e.g. the pool had no workers).
        while let Some(task) = self.shared.queue.pop() {
            task.run();
        }
    }

    fn begin_shutdown(&self) {
        let shared = &*self.shared;
        shared.begin_shutdown();
        shared.control.raise(|f| f.stop = true);
    }

    /// Join the controller and every worker — except the calling thread, if
    /// a task of this pool is the one shutting it down (say, by dropping the
    /// last `Arc<Pool>`): that worker leaves by itself when its task returns.
    fn join_workers(&self) {
        let me = std::thread::current().id();
        if let Some(ctl) = lock(&self.controller).take() {
            if ctl.thread().id() != me {
                let _ = ctl.join();
            }
        }
        loop {
            let handles: Vec<_> = std::mem::take(&mut *lock(&self.shared.threads));
            if handles.iter().all(|(_, h)| h.thread().id() == me) {
                break;
            }
            for (_, h) in handles {
                if h.thread().id() != me {
                    let _ = h.join();
                }
            }
        }
        // Workers that retired earlier may still be leaving: wait for them too.
        let retired: Vec<_> = std::mem::take(&mut *lock(&self.shared.retired));
        for h in retired {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

/// A task waits and nobody is parked or spinning for it: spawn a worker if
/// the policy allows on-demand growth — or if there is no worker at all.
/// Called by a submitter whose task woke nobody, and by the last spinning
/// worker when it leaves work behind in the queue.
#[inline]
pub(crate) fn grow_if_starved(shared: &Arc<Shared>) {
    if !crate::control::wants_worker(
        shared.live_threads(),
        || shared.grow_on_demand.load(Relaxed),
        || shared.sleepers.searching(),
        || shared.queue.len(),
    ) {
        return;
    }
    if !shared.reserve_worker(shared.effective_spawn_limit().max(1)) {
        shared.control.at_max();
        return;
    }
    shared.raise_target_to_live();
    if worker::spawn(shared).is_ok() && shared.control.want_starved.load(Relaxed) {
        shared.control.raise(|f| f.events.starved = true);
    }
}

/// Apply a new target (clamped), spawning or waking workers to reach it.
pub(crate) fn apply_target(shared: &Arc<Shared>, n: usize) -> usize {
    let target = shared.limits().clamp(n);
    shared.set_target(target);
    if !shared.is_shutdown() {
        while shared.live_threads() < target && shared.reserve_worker(target) {
            if worker::spawn(shared).is_err() {
                break;
            }
        }
    }
    // Wake idle workers so surplus ones notice and retire now.
    let surplus = shared.live_threads().saturating_sub(target);
    for _ in 0..surplus {
        if !shared.sleepers.wake_one() {
            break;
        }
    }
    shared.sample_size();
    target
}

/// Build a statistics snapshot from the shared state.
pub(crate) fn snapshot(shared: &Shared) -> PoolStats {
    let live = shared.live_threads();
    let idle = (shared.sleepers.idle() + shared.sleepers.searching()).min(live);
    let blocked = shared.blocked.load(Relaxed).min(live - idle);
    let c = &shared.counters;
    let mut stats = PoolStats {
        elapsed: shared.elapsed(),
        live_threads: live,
        busy_threads: live - idle - blocked,
        idle_threads: idle,
        blocked_threads: blocked,
        starting_threads: shared.starting.load(Relaxed).min(live),
        target_size: shared.target(),
        min_threads: shared.sizes.min.load(Relaxed),
        max_threads: shared.sizes.max.load(Relaxed),
        spawn_limit: shared.effective_spawn_limit(),
        queue_len: shared.queue.len(),
        rejected: c.rejected.load(Relaxed),
        panicked: c.panicked.load(Relaxed),
        threads_created: c.created.load(Relaxed),
        threads_retired: c.retired.load(Relaxed),
        spawn_failures: c.spawn_failed.load(Relaxed),
        expired: shared.outcomes.expired.load(Relaxed),
        cancelled: shared.outcomes.cancelled.load(Relaxed),
        decisions_dropped: lock(&shared.decisions).dropped(),
        process_cpu_time: os::process_cpu_time(),
        load_average: os::load_average(),
        machine_cpu_time: os::machine_cpu_time(),
        cores: os::cores(),
        ..PoolStats::default()
    };
    if let Some(records) = &shared.records {
        let totals = records.totals();
        stats.completed = totals.completed;
        // `None` where the OS cannot tell: zero would read as "never computes".
        stats.worker_cpu_time = os::SUPPORT.worker_cpu_time.then_some(totals.cpu);
        stats.worker_run_delay = os::SUPPORT.run_delay.then_some(totals.run_delay);
        stats.sampled_task_cpu = totals.sampled_cpu;
        stats.sampled_task_time = totals.sampled_service;
        stats.sampled_tasks = totals.sampled_tasks;
        // Accepted = started by a worker + still queued: counted without a
        // shared counter on the submit path.
        stats.submitted = totals.started + stats.queue_len as u64;
        stats.submit_blocked = totals.submit_blocked_with_zeros();
        stats.wait = totals.wait;
        stats.service = totals.service;
    }
    stats
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.detached.load(Relaxed) {
            // `shutdown_timeout` gave up: let the workers finish unjoined.
            self.begin_shutdown();
            return;
        }
        self.shutdown();
    }
}

impl Pool {
    /// The name given to [`Builder::name`] (`tidepool` by default).
    pub fn name(&self) -> &str {
        &self.inner.shared.config.name
    }

    /// Tasks waiting in the queue now: [`PoolStats::queue_len`] without the
    /// cost of a whole snapshot.
    pub fn queued(&self) -> usize {
        self.inner.shared.queue.len()
    }

    /// Worker threads created since the pool started:
    /// [`PoolStats::threads_created`] without the cost of a whole snapshot.
    pub fn threads_created(&self) -> u64 {
        self.inner.shared.counters.created.load(Relaxed)
    }
}
