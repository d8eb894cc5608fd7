//! `Pool::builder()`: every setting, its default, and validation.

use std::fmt;
use std::time::Duration;

use super::Pool;
use crate::error::BuildError;
use crate::policy::{Auto, Fixed, SizingPolicy};
use crate::queue::QueueFlavor;

pub use crate::control::MAX_THREADS;

/// Decision records and size samples a pool keeps by default.
pub const DEFAULT_HISTORY_LEN: usize = 4096;
/// The longest history a pool may keep (a decision record is a few hundred bytes).
pub const MAX_HISTORY_LEN: usize = 1 << 20;

/// The longest keep-alive: the pool keeps it in nanoseconds in a `u64`.
const MAX_KEEP_ALIVE: Duration = Duration::from_nanos(u64::MAX);

/// The fewest workers of a default (self-sizing) pool: one stays warm, so a
/// lone task into a quiet pool does not wait for a thread to start
/// (`docs/policies.md`, "Defaults").
pub const DEFAULT_MIN_THREADS: usize = 1;
/// The most workers of a default (self-sizing) pool: tokio's blocking-pool
/// cap. `auto` keeps CPU-bound work at the core count; the cap only bounds
/// how far blocking work may take it (`docs/policies.md`, "Defaults").
pub const DEFAULT_MAX_THREADS: usize = 512;
/// Keep-alive of idle workers above `min` when neither the user nor the
/// policy chose one.
const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// What `submit` does when the queue is full. `#[non_exhaustive]`: more of
/// Java's policies (discard-oldest, …) may come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnFull {
    /// Wait until there is room (Xu & Bode's dispatcher blocks).
    #[default]
    Block,
    /// Fail at once with [`SubmitError::Full`](crate::SubmitError::Full),
    /// handing the task back in a [`Rejected`](crate::Rejected) (run it
    /// yourself for Java's caller-runs).
    Reject,
}

/// A per-thread callback (start, stop) or name function.
pub(crate) type ThreadFn = std::sync::Arc<dyn Fn() + Send + Sync>;
type NameFn = std::sync::Arc<dyn Fn(u64) -> String + Send + Sync>;
type PanicFn = std::sync::Arc<dyn Fn(crate::error::Panic) + Send + Sync>;

/// The per-thread settings: names, stack, start/stop hooks, panic handler.
/// Each runs once per worker thread (or once per panic), never per task.
#[derive(Clone, Default)]
pub(crate) struct Threads {
    pub(crate) name: Option<NameFn>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) on_start: Option<ThreadFn>,
    pub(crate) on_stop: Option<ThreadFn>,
    pub(crate) on_panic: Option<PanicFn>,
}

impl fmt::Debug for Threads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Threads")
            .field("name", &self.name.is_some())
            .field("stack_size", &self.stack_size)
            .field("on_start", &self.on_start.is_some())
            .field("on_stop", &self.on_stop.is_some())
            .field("on_panic", &self.on_panic.is_some())
            .finish()
    }
}

impl PartialEq for Threads {
    /// Same settings: the same functions (by address) and stack size.
    fn eq(&self, other: &Self) -> bool {
        fn same<T: ?Sized>(a: &Option<std::sync::Arc<T>>, b: &Option<std::sync::Arc<T>>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
        }
        same(&self.name, &other.name)
            && self.stack_size == other.stack_size
            && same(&self.on_start, &other.on_start)
            && same(&self.on_stop, &other.on_stop)
            && same(&self.on_panic, &other.on_panic)
    }
}

/// Linux keeps 15 bytes of a thread's name.
const THREAD_NAME_BYTES: usize = 15;

impl Threads {
    /// Worker `id`'s thread name: the name function's, or `{pool}-{id}` with
    /// the pool name cut (at a character boundary) so that the whole fits in
    /// Linux's 15 bytes and `top -H` still tells the workers apart.
    pub(crate) fn name(&self, pool: &str, id: u64) -> String {
        if let Some(f) = &self.name {
            return f(id);
        }
        let suffix = format!("-{id}");
        let room = THREAD_NAME_BYTES.saturating_sub(suffix.len());
        let mut cut = pool.len().min(room);
        while !pool.is_char_boundary(cut) {
            cut -= 1;
        }
        // No doubled separator where the name was cut.
        let prefix = pool[..cut].trim_end_matches(['-', '_', '.', ' ']);
        format!("{prefix}{suffix}")
    }
}

/// The validated settings a pool runs with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    pub(crate) name: String,
    pub(crate) min: usize,
    pub(crate) max: usize,
    pub(crate) initial: usize,
    pub(crate) capacity: Option<usize>,
    pub(crate) on_full: OnFull,
    pub(crate) flavor: QueueFlavor,
    pub(crate) keep_alive: Duration,
    /// The user chose the keep-alive: a policy's preference does not apply.
    pub(crate) keep_alive_set: bool,
    /// The user chose the initial size: a policy's first target does not apply.
    pub(crate) initial_set: bool,
    pub(crate) statistics: bool,
    pub(crate) live_threads_series: bool,
    pub(crate) worker_slice: Option<Duration>,
    pub(crate) threads: Threads,
    pub(crate) history_len: usize,
}

/// Configures and builds a [`Pool`].
///
/// Defaults: a self-sizing pool — [`Auto`] between [`DEFAULT_MIN_THREADS`]
/// and [`DEFAULT_MAX_THREADS`] workers, starting at one per logical CPU —,
/// an unbounded lock-free queue, submitters block when a bounded queue is
/// full, statistics on. [`threads(n)`](Builder::threads) makes a static
/// pool of `n` (as [`Pool::new`] and [`Pool::fixed`] do). The sizing policy
/// defaults to [`Auto`] when the pool has room to move (`min < max`) and to
/// [`Fixed`] when it has not (no controller thread then); a policy named
/// explicitly must have room to move, or `build` says so. The keep-alive
/// and the initial size are the user's when set; otherwise the policy's
/// (`auto`: 2 s and one worker per CPU), or 10 s and `min`. The decision log and the live-threads series
/// keep the newest [`DEFAULT_HISTORY_LEN`] entries ([`history_len`](Builder::history_len)),
/// so a pool that runs for days holds constant memory.
///
/// ```
/// use std::time::Duration;
/// use tidepool::{OnFull, Pool, QueueFlavor};
///
/// let pool = Pool::builder()
///     .name("io")
///     .min_threads(2)
///     .max_threads(64)
///     .queue_capacity(10_000)
///     .on_full(OnFull::Reject)
///     .queue(QueueFlavor::LockFree)
///     .keep_alive(Duration::from_secs(30))
///     .build()?;
/// assert_eq!(pool.live_threads(), 2);
/// # Ok::<(), tidepool::BuildError>(())
/// ```
pub struct Builder {
    name: String,
    min: Option<usize>,
    max: Option<usize>,
    initial: Option<usize>,
    capacity: Option<usize>,
    on_full: OnFull,
    flavor: QueueFlavor,
    keep_alive: Option<Duration>,
    statistics: Option<bool>,
    live_threads_series: bool,
    worker_slice: Option<Duration>,
    threads: Threads,
    history_len: usize,
    policy: Option<Box<dyn SizingPolicy>>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            name: "tidepool".to_string(),
            min: None,
            max: None,
            initial: None,
            capacity: None,
            on_full: OnFull::Block,
            flavor: QueueFlavor::default(),
            keep_alive: None,
            statistics: None,
            live_threads_series: false,
            worker_slice: None,
            threads: Threads::default(),
            history_len: DEFAULT_HISTORY_LEN,
            policy: None,
        }
    }
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("name", &self.name)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("initial", &self.initial)
            .field("capacity", &self.capacity)
            .field("on_full", &self.on_full)
            .field("flavor", &self.flavor)
            .field("keep_alive", &self.keep_alive)
            .field("statistics", &self.statistics)
            .field("worker_slice", &self.worker_slice)
            .field("threads", &self.threads)
            .field("history_len", &self.history_len)
            .field(
                "policy",
                &self.policy.as_ref().map(|p| p.name().to_string()),
            )
            .finish()
    }
}

impl Builder {
    /// The pool's name (default `tidepool`): reported by [`Pool::name`](crate::Pool::name)
    /// and, cut to fit Linux's 15-byte limit, the prefix of worker thread
    /// names (`{name}-{n}`, e.g. `tidepool-3`) unless [`thread_name`](Builder::thread_name) is set.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// A static size: `min = max = initial = n`.
    pub fn threads(mut self, n: usize) -> Self {
        self.min = Some(n);
        self.max = Some(n);
        self.initial = Some(n);
        self
    }

    /// Fewest workers; the pool never retires below it (default
    /// [`DEFAULT_MIN_THREADS`], capped by max).
    pub fn min_threads(mut self, n: usize) -> Self {
        self.min = Some(n);
        self
    }

    /// Most workers (default: the larger of [`DEFAULT_MAX_THREADS`], min
    /// and initial).
    pub fn max_threads(mut self, n: usize) -> Self {
        self.max = Some(n);
        self
    }

    /// Workers started by `build` (default: the policy's first target, or
    /// min). Those above min retire one by one as their keep-alive runs out
    /// while idle. Set, it wins over the policy's first target.
    pub fn initial_threads(mut self, n: usize) -> Self {
        self.initial = Some(n);
        self
    }

    /// Bound the queue to `n` waiting tasks (default: unbounded).
    pub fn queue_capacity(mut self, n: usize) -> Self {
        self.capacity = Some(n);
        self
    }

    /// What `submit` does when a bounded queue is full (default: block).
    pub fn on_full(mut self, on_full: OnFull) -> Self {
        self.on_full = on_full;
        self
    }

    /// The queue flavor (default: lock-free, the fastest).
    pub fn queue(mut self, flavor: QueueFlavor) -> Self {
        self.flavor = flavor;
        self
    }

    /// How long a worker may stay idle before it retires, while the pool is
    /// above `min` (default: the policy's, else 10 s; at most 2^64 − 1 ns,
    /// about 584 years). Set, it wins over the policy's for the pool's life.
    pub fn keep_alive(mut self, keep_alive: Duration) -> Self {
        self.keep_alive = Some(keep_alive);
        self
    }

    /// Ask the OS scheduler for this time slice for every worker (Linux 6.12+
    /// EEVDF custom slices, 100 µs to 100 ms; ignored elsewhere). Default:
    /// the system's. A short slice lets a woken worker start its task sooner
    /// at the price of more preemption of long computations: for workers that
    /// mostly block. A policy may change it later ([`Decision::worker_slice`];
    /// `auto` does for blocking work).
    ///
    /// [`Decision::worker_slice`]: crate::policy::Decision::worker_slice
    ///
    /// ```
    /// use std::time::Duration;
    /// use tidepool::Pool;
    ///
    /// let pool = Pool::builder()
    ///     .threads(16)
    ///     .worker_slice(Duration::from_micros(100))
    ///     .build()?;
    /// # Ok::<(), tidepool::BuildError>(())
    /// ```
    pub fn worker_slice(mut self, slice: Duration) -> Self {
        self.worker_slice = Some(slice);
        self
    }

    /// Collect per-task statistics (default on). Off, the hot path takes no
    /// timestamps; every policy but [`Fixed`] needs them, so turning them
    /// off under another is a [`BuildError`] naming both.
    pub fn statistics(mut self, on: bool) -> Self {
        self.statistics = Some(on);
        self
    }

    /// Record the live threads and the target at every change (default off).
    pub fn record_live_threads_series(mut self, on: bool) -> Self {
        self.live_threads_series = on;
        self
    }

    /// Name worker `i` (counting from 0) `f(i)`. Linux shows only the
    /// first 15 bytes.
    pub fn thread_name(mut self, f: impl Fn(u64) -> String + Send + Sync + 'static) -> Self {
        self.threads.name = Some(std::sync::Arc::new(f));
        self
    }

    /// Each worker thread's stack size in bytes (default: the standard
    /// library's, 2 MiB unless `RUST_MIN_STACK` says otherwise).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.threads.stack_size = Some(bytes);
        self
    }

    /// Run `f` on every worker thread when it starts, before its first task.
    /// Per-thread setup (a database connection, a cache) belongs here: the
    /// worker counts as starting ([`PoolStats::starting_threads`]) meanwhile,
    /// so `auto` does not read the size's throughput from it.
    ///
    /// [`PoolStats::starting_threads`]: crate::PoolStats::starting_threads
    pub fn on_thread_start(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.threads.on_start = Some(std::sync::Arc::new(f));
        self
    }

    /// Run `f` on every worker thread when it stops (retires or shuts
    /// down), after its last task.
    pub fn on_thread_stop(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.threads.on_stop = Some(std::sync::Arc::new(f));
        self
    }

    /// Call `f`, on the worker, with each panic of a task submitted without
    /// a handle ([`Pool::execute`](crate::Pool::execute)) — as rayon's
    /// `panic_handler`. A task with a [`JoinHandle`](crate::JoinHandle)
    /// hands its panic to the handle instead. Either way the worker survives
    /// and the panic counts in [`PoolStats::panicked`](crate::PoolStats::panicked).
    pub fn panic_handler(
        mut self,
        f: impl Fn(crate::error::Panic) + Send + Sync + 'static,
    ) -> Self {
        self.threads.on_panic = Some(std::sync::Arc::new(f));
        self
    }

    /// The sizing policy by its spec string (see [`PolicySpec`]), e.g.
    /// `"auto"`, `"watermark:1..16"`, `"fixed:8"`.
    ///
    /// ```
    /// let pool = tidepool::Pool::builder()
    ///     .min_threads(1)
    ///     .max_threads(8)
    ///     .policy_spec("auto")?
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    /// ```
    ///
    /// [`PolicySpec`]: crate::policy::PolicySpec
    pub fn policy_spec(self, spec: &str) -> Result<Self, crate::policy::SpecError> {
        let parsed = crate::policy::PolicySpec::parse(spec)?;
        match parsed.build() {
            Some(policy) => Ok(self.policy_boxed(policy)),
            None => Err(crate::policy::SpecError {
                spec: spec.to_string(),
                problem: "thread-per-request is an executor, not a pool's sizing policy".into(),
            }),
        }
    }

    /// How many of the newest decision records ([`Pool::decisions`]) and size
    /// samples ([`Pool::live_threads_series`]) the pool keeps (default
    /// [`DEFAULT_HISTORY_LEN`], 1 to [`MAX_HISTORY_LEN`]). Older ones are
    /// dropped and counted in [`PoolStats::decisions_dropped`]: the chattiest
    /// policy, `xu-bode`, logs 200 decisions a second at 1,000 tasks/s.
    ///
    /// [`PoolStats::decisions_dropped`]: crate::PoolStats::decisions_dropped
    pub fn history_len(mut self, n: usize) -> Self {
        self.history_len = n;
        self
    }

    /// The sizing policy (default: [`Auto`] if `min < max`, else [`Fixed`]).
    /// A policy other than [`Fixed`] needs room to move: with `min == max`
    /// `build` fails rather than widen the range behind the user's back.
    pub fn policy(self, policy: impl SizingPolicy + 'static) -> Self {
        self.policy_boxed(Box::new(policy))
    }

    /// The sizing policy, already boxed.
    pub fn policy_boxed(mut self, policy: Box<dyn SizingPolicy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Validate the settings and start the pool.
    pub fn build(self) -> Result<Pool, BuildError> {
        let chosen = self.policy;
        let statistics = self.statistics;
        let mut config = validate(Builder {
            policy: None,
            ..self
        })?;
        let named = chosen.is_some();
        let policy = chosen.unwrap_or_else(|| default_policy(&config));
        let adaptive = policy.name() != "fixed";
        if adaptive && named && config.min == config.max {
            return Err(BuildError::new(
                "policy",
                policy.name(),
                format!(
                    "needs room to move, but min_threads = max_threads = {}: \
                     set a wider min_threads..max_threads, or use threads(n) alone for a static pool",
                    config.min
                ),
            ));
        }
        if adaptive && statistics == Some(false) {
            return Err(BuildError::new(
                "statistics",
                false,
                format!(
                    "policy `{}` sizes the pool from the statistics: leave them on, \
                     or use threads(n) for a static pool",
                    policy.name()
                ),
            ));
        }
        config.statistics = statistics.unwrap_or(true);
        Pool::start(config, policy)
    }
}

impl Builder {
    /// The validated config without starting a pool (model tests).
    #[cfg(all(test, loom))]
    pub(crate) fn config_for_tests(self) -> Config {
        validate(self).expect("valid test config")
    }
}

/// The scheduler's range for a slice request (`sched_attr::sched_runtime`).
const MIN_SLICE: Duration = Duration::from_micros(100);
const MAX_SLICE: Duration = Duration::from_millis(100);

/// `auto` when the pool has room to move, `fixed` when it has none.
fn default_policy(config: &Config) -> Box<dyn SizingPolicy> {
    if config.min < config.max {
        Box::new(Auto::new())
    } else {
        Box::new(Fixed::keep())
    }
}

fn validate(b: Builder) -> Result<Config, BuildError> {
    let range = format!("must be between 1 and {MAX_THREADS}");
    let max = b.max.unwrap_or_else(|| {
        DEFAULT_MAX_THREADS
            .max(b.min.unwrap_or(0))
            .max(b.initial.unwrap_or(0))
            .min(MAX_THREADS)
    });
    if max == 0 || max > MAX_THREADS {
        return Err(BuildError::new("max_threads", max, range));
    }
    let min = b.min.unwrap_or_else(|| DEFAULT_MIN_THREADS.min(max));
    if min > max {
        return Err(BuildError::new(
            "min_threads",
            min,
            format!("must be at most max_threads ({max})"),
        ));
    }
    let initial = b.initial.unwrap_or(min);
    if initial < min || initial > max {
        return Err(BuildError::new(
            "initial_threads",
            initial,
            format!("must be between min_threads ({min}) and max_threads ({max})"),
        ));
    }
    if b.capacity == Some(0) {
        return Err(BuildError::new(
            "queue_capacity",
            0,
            "must be at least 1 (leave it unset for an unbounded queue)",
        ));
    }
    let keep_alive = b.keep_alive.unwrap_or(DEFAULT_KEEP_ALIVE);
    if keep_alive.is_zero() || keep_alive > MAX_KEEP_ALIVE {
        return Err(BuildError::new(
            "keep_alive",
            format!("{keep_alive:?}"),
            "must be longer than zero and at most 2^64 - 1 ns (about 584 years)",
        ));
    }
    if let QueueFlavor::Hybrid { attempts: 0, .. } = b.flavor {
        return Err(BuildError::new(
            "queue.attempts",
            0,
            "the hybrid queue needs at least 1 lock attempt",
        ));
    }
    if let Some(s) = b.worker_slice {
        if !(MIN_SLICE..=MAX_SLICE).contains(&s) {
            return Err(BuildError::new(
                "worker_slice",
                format!("{s:?}"),
                "must be between 100µs and 100ms (the scheduler's range)",
            ));
        }
    }
    if !(1..=MAX_HISTORY_LEN).contains(&b.history_len) {
        return Err(BuildError::new(
            "history_len",
            b.history_len,
            format!("must be between 1 and {MAX_HISTORY_LEN}"),
        ));
    }
    if b.name.contains('\0') {
        return Err(BuildError::new("name", &b.name, "must not contain NUL"));
    }
    Ok(Config {
        name: b.name,
        min,
        max,
        initial,
        capacity: b.capacity,
        on_full: b.on_full,
        flavor: b.flavor,
        keep_alive,
        keep_alive_set: b.keep_alive.is_some(),
        initial_set: b.initial.is_some(),
        statistics: b.statistics.unwrap_or(true),
        live_threads_series: b.live_threads_series,
        worker_slice: b.worker_slice,
        threads: b.threads,
        history_len: b.history_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(b: Builder) -> Result<Config, BuildError> {
        validate(b)
    }

    #[test]
    fn defaults_are_a_self_sizing_pool() {
        let c = check(Builder::default()).unwrap();
        assert_eq!((c.min, c.max), (DEFAULT_MIN_THREADS, DEFAULT_MAX_THREADS));
        assert_eq!(default_policy(&c).name(), "auto");
        assert_eq!(c.capacity, None);
        assert!(c.statistics);
        assert!(!c.keep_alive_set && !c.initial_set);
    }

    #[test]
    fn one_bound_alone_keeps_the_other_default() {
        let c = check(Builder::default().max_threads(1000)).unwrap();
        assert_eq!((c.min, c.max), (DEFAULT_MIN_THREADS, 1000));
        let c = check(Builder::default().min_threads(600)).unwrap();
        assert_eq!((c.min, c.max), (600, 600));
        let c = check(Builder::default().min_threads(4)).unwrap();
        assert_eq!((c.min, c.max), (4, DEFAULT_MAX_THREADS));
    }

    #[test]
    fn a_set_keep_alive_and_initial_size_are_marked_as_the_users() {
        let c = check(
            Builder::default()
                .keep_alive(Duration::from_secs(3))
                .initial_threads(2),
        )
        .unwrap();
        assert!(c.keep_alive_set && c.initial_set);
        assert_eq!((c.keep_alive, c.initial), (Duration::from_secs(3), 2));
    }

    #[test]
    fn errors_name_the_field_and_range() {
        let e = check(Builder::default().min_threads(5).max_threads(2)).unwrap_err();
        assert_eq!(e.field, "min_threads");
        assert!(e.to_string().contains("at most max_threads (2)"), "{e}");

        let e = check(Builder::default().max_threads(0)).unwrap_err();
        assert_eq!(e.field, "max_threads");
        assert!(e.to_string().contains("between 1 and"), "{e}");

        let e = check(Builder::default().threads(MAX_THREADS + 1)).unwrap_err();
        assert_eq!(e.field, "max_threads");

        let e = check(Builder::default().queue_capacity(0)).unwrap_err();
        assert_eq!(e.field, "queue_capacity");

        let e = check(
            Builder::default()
                .min_threads(2)
                .max_threads(4)
                .initial_threads(9),
        )
        .unwrap_err();
        assert_eq!(e.field, "initial_threads");

        let e = check(Builder::default().keep_alive(Duration::ZERO)).unwrap_err();
        assert_eq!(e.field, "keep_alive");
        // Longer than u64 nanoseconds would wrap to a fraction of a second.
        for long in [MAX_KEEP_ALIVE + Duration::from_nanos(1), Duration::MAX] {
            let e = check(Builder::default().keep_alive(long)).unwrap_err();
            assert_eq!(e.field, "keep_alive");
            assert!(e.allowed.contains("584 years"), "{}", e.allowed);
        }
        assert!(check(Builder::default().keep_alive(MAX_KEEP_ALIVE)).is_ok());

        let e = check(Builder::default().queue(QueueFlavor::Hybrid {
            attempts: 0,
            sleep: Duration::from_millis(1),
        }))
        .unwrap_err();
        assert_eq!(e.field, "queue.attempts");

        for bad in [Duration::from_micros(99), Duration::from_millis(101)] {
            let e = check(Builder::default().worker_slice(bad)).unwrap_err();
            assert_eq!(e.field, "worker_slice");
            assert!(e.allowed.contains("100µs and 100ms"), "{}", e.allowed);
        }
        for bad in [0, MAX_HISTORY_LEN + 1] {
            let e = check(Builder::default().history_len(bad)).unwrap_err();
            assert_eq!(e.field, "history_len");
            assert!(e.allowed.contains("between 1 and 1048576"), "{}", e.allowed);
        }
        assert_eq!(
            check(Builder::default()).unwrap().history_len,
            DEFAULT_HISTORY_LEN
        );
        let c = check(Builder::default().worker_slice(Duration::from_micros(100))).unwrap();
        assert_eq!(c.worker_slice, Some(Duration::from_micros(100)));
    }

    #[test]
    fn default_thread_names_fit_linux_and_keep_the_number() {
        let t = Threads::default();
        assert_eq!(t.name("tidepool", 3), "tidepool-3");
        assert_eq!(t.name("a-very-long-pool-name", 12), "a-very-long-12");
        assert_eq!(t.name("ééééééééé", 7), "éééééé-7");
        for id in [0, 9, 10_000, u64::MAX] {
            let n = t.name("ingest-service", id);
            assert!(n.len() <= 15 || id == u64::MAX, "{n}");
            assert!(n.ends_with(&format!("-{id}")), "{n}");
        }
        let custom = Threads {
            name: Some(std::sync::Arc::new(|i| format!("io#{i}"))),
            ..Threads::default()
        };
        assert_eq!(custom.name("x", 4), "io#4");
    }

    #[test]
    fn the_default_policy_is_auto_only_with_room_to_move() {
        let fixed = check(Builder::default().threads(4)).unwrap();
        assert_eq!(default_policy(&fixed).name(), "fixed");
        let elastic = check(Builder::default().min_threads(1).max_threads(8)).unwrap();
        assert_eq!(default_policy(&elastic).name(), "auto");
    }
}

#[cfg(all(test, not(loom), target_os = "linux"))]
mod thread_tests {
    use super::Pool;

    /// The worker's stack as the OS gave it.
    fn own_stack_size() -> usize {
        // SAFETY: `attr` is initialised by `pthread_getattr_np` and destroyed once.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
            let mut size = 0;
            assert_eq!(libc::pthread_attr_getstacksize(&attr, &mut size), 0);
            libc::pthread_attr_destroy(&mut attr);
            size
        }
    }

    #[test]
    fn workers_get_the_stack_size_asked_for() {
        const ASKED: usize = 5 * 1024 * 1024; // more than the 2 MiB default
        let pool = Pool::builder()
            .threads(1)
            .stack_size(ASKED)
            .build()
            .unwrap();
        let got = pool.submit(own_stack_size).unwrap().join().unwrap();
        assert!(got >= ASKED, "{got} < {ASKED}");
    }
}
