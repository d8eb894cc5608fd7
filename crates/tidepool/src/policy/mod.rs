//! Sizing policies: pure state machines that decide how big the pool should be.
//!
//! A policy receives an [`Observation`] (a window of the pool's statistics) and
//! returns a [`Decision`]. It never reads a clock, sleeps, spawns or locks: the
//! pool's controller owns time and threads, so the same policy runs in the real
//! pool, in unit tests fed with scripted observations, and in virtual time.
//!
//! The controller calls [`SizingPolicy::decide`] at the moments the policy asks
//! for through [`SizingPolicy::schedule`], and applies what it returns.

mod auto;
mod fixed;
mod frequency;
mod hill_climb;
mod hisdyn;
mod queueing;
mod record;
mod spec;
mod watermark;
mod xu_bode;

use std::borrow::Cow;
use std::time::Duration;

pub use auto::Auto;
pub use fixed::Fixed;
pub use frequency::Frequency;
pub use hill_climb::HillClimb;
pub use hisdyn::HisDyn;
pub use record::DecisionRecord;
pub use spec::{PolicySpec, SpecError, VALID_FORMS};
pub use watermark::Watermark;
pub use xu_bode::{XuBode, XuBodeBranch};

/// Why the controller is calling the policy now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Trigger {
    /// The first call, right after the pool starts (lets a policy set its initial size).
    #[default]
    Start,
    /// The policy's [`Schedule::every`] period elapsed.
    Tick,
    /// [`Schedule::every_completions`] more tasks completed.
    Completions,
    /// The pool spawned a worker on demand because a task waited with nobody idle.
    Starved,
    /// A worker above the target size retired after its keep-alive elapsed.
    Retired,
    /// A task waited with nobody idle, but the pool was at its `max` and
    /// spawned nothing. At most one such call per millisecond.
    AtMax,
}

/// When the controller should call a policy.
///
/// A policy can ask for any combination; the controller calls it on whichever
/// comes first. The default asks for nothing, so the policy is only called at
/// [`Trigger::Start`].
///
/// The controller reads the schedule again after every call, so a policy may
/// change it as it learns (say, listen for [`Trigger::AtMax`] only while its
/// `max` is a guess). A policy whose schedule is empty after
/// [`Trigger::Start`] is never called again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Schedule {
    /// Call every time this much time has passed since the last call.
    pub every: Option<Duration>,
    /// Call every time this many more tasks have completed.
    pub every_completions: Option<u64>,
    /// Call when the pool spawned a worker on demand ([`Trigger::Starved`]).
    pub on_starved: bool,
    /// Call when a surplus worker retired after its keep-alive ([`Trigger::Retired`]).
    pub on_retired: bool,
    /// Call when a task waited with nobody idle and the pool, at its `max`,
    /// could not spawn ([`Trigger::AtMax`]). Only while on-demand growth is
    /// on: without it the pool never tries to spawn.
    pub on_at_max: bool,
}

/// Builders (the struct is `#[non_exhaustive]`, so code outside tidepool
/// starts from `Schedule::default()`).
impl Schedule {
    /// Also call every time `d` has passed.
    pub const fn with_every(mut self, d: Duration) -> Self {
        self.every = Some(d);
        self
    }

    /// Also call every time `n` more tasks have completed.
    pub const fn with_every_completions(mut self, n: u64) -> Self {
        self.every_completions = Some(n);
        self
    }

    /// Whether to call on [`Trigger::Starved`].
    pub const fn with_on_starved(mut self, on: bool) -> Self {
        self.on_starved = on;
        self
    }

    /// Whether to call on [`Trigger::Retired`].
    pub const fn with_on_retired(mut self, on: bool) -> Self {
        self.on_retired = on;
        self
    }

    /// Whether to call on [`Trigger::AtMax`].
    pub const fn with_on_at_max(mut self, on: bool) -> Self {
        self.on_at_max = on;
        self
    }
}

/// What the pool looked like over the window since the policy's previous call.
///
/// Durations are `None` when the window holds no sample to average (no task
/// completed, no two arrivals). All times are measured by the pool; a policy
/// must not read a clock of its own.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Observation {
    /// Why the policy is being called.
    pub trigger: Trigger,
    /// Time since the pool started.
    pub now: Duration,
    /// Length of the window this observation covers.
    pub window: Duration,
    /// Tasks submitted (accepted into the queue) during the window.
    pub arrivals: u64,
    /// Tasks that finished during the window.
    pub completions: u64,
    /// Mean time a task that started in the window waited in the queue (the
    /// papers' idle time; its mean is Xu & Bode's AIT).
    pub mean_wait: Option<Duration>,
    /// 99th percentile of the queue wait of tasks started in the window.
    pub p99_wait: Option<Duration>,
    /// Mean execution time of tasks that finished in the window.
    pub mean_service: Option<Duration>,
    /// Mean time between consecutive arrivals in the window.
    pub mean_interarrival: Option<Duration>,
    /// Tasks waiting in the queue at the end of the window.
    pub queue_len: usize,
    /// Worker threads alive at the end of the window.
    pub live: usize,
    /// Workers running a task at the end of the window.
    pub busy: usize,
    /// Workers waiting for a task at the end of the window.
    pub idle: usize,
    /// Workers inside [`block_in_place`](crate::block_in_place) at the end
    /// of the window: neither busy nor idle, and not available.
    pub blocked: usize,
    /// The pool's current target size.
    pub target: usize,
    /// The user's lower bound (the pool's `min`, which a policy may have set).
    pub min: usize,
    /// The user's upper bound (the pool's `max`, which a policy may have
    /// set); a policy's spawn limit is not in it.
    pub max: usize,
    /// Workers in their start hook or first task at the end of the window (see
    /// [`PoolStats::starting_threads`](crate::PoolStats::starting_threads)).
    #[cfg_attr(feature = "serde", serde(default))]
    pub starting: usize,
    /// Worker threads created during the window.
    pub threads_created: u64,
    /// Worker threads retired during the window.
    pub threads_retired: u64,
    /// Sum over workers of the time they spent running tasks in the window.
    pub busy_time: Duration,
    /// CPU time the pool's worker threads consumed during the window (not the
    /// whole process: other pools and threads do not blur it), if the OS tells.
    pub worker_cpu_time: Option<Duration>,
    /// Logical CPUs available to the process.
    pub cores: usize,
    /// Time the pool's workers were runnable but waiting for a CPU during the
    /// window (Linux scheduler statistics). Lets a policy tell "blocked" from
    /// "waiting for a core" when the CPUs are oversubscribed.
    pub run_delay: Option<Duration>,
    /// Thread CPU time of a sample of the window's tasks, measured around
    /// each task (the first tasks of every worker, then one in 16 long tasks
    /// or one in 256 short ones).
    pub sampled_task_cpu: Duration,
    /// Execution time of the same sample, less the time tasks of 100 µs or
    /// more spent preempted: `sampled_task_cpu` over it is the tasks' own
    /// compute share (see [`Observation::task_cpu_share`]).
    pub sampled_task_time: Duration,
    /// How many tasks that sample holds.
    pub sampled_tasks: u64,
    /// Tasks in the pool at the end of the window: queued or running
    /// (accepted and not finished). Unlike `busy + queue_len` it does not
    /// count a worker woken for a task another worker took.
    pub in_flight: usize,
    /// Share of the whole machine's CPU time, all processes together, that
    /// was busy during the window (`0.0..=1.0`), if the OS tells: a window
    /// in which the pool's workers leave cores unused while the machine
    /// has none free means other processes hold them — perhaps one the
    /// tasks wait on.
    pub machine_busy: Option<f64>,
}

impl Observation {
    /// The user's bounds as a range: `min` at least 1, `max` at least
    /// `min`, and a `max` of 0 (none given) as `usize::MAX`. Policies that
    /// keep their own bounds (`watermark:MIN..MAX`, `hisdyn:max=N`) clamp
    /// them into it: the user's bounds always win.
    pub fn user_bounds(&self) -> (usize, usize) {
        let min = self.min.max(1);
        let max = if self.max == 0 {
            usize::MAX
        } else {
            self.max.max(min)
        };
        (min, max)
    }

    /// Fraction of the busy workers' time that they wanted a CPU (running on
    /// one, or runnable and waiting for one), in `0.0..=1.0` (1.0 = all
    /// compute, near 0.0 = all blocked). `None` without CPU data or busy time.
    pub fn cpu_fraction(&self) -> Option<f64> {
        let cpu = (self.worker_cpu_time? + self.run_delay.unwrap_or_default()).as_secs_f64();
        let busy = self.busy_time.as_secs_f64();
        (busy > 0.0).then(|| (cpu / busy).clamp(0.0, 1.0))
    }

    /// The tasks' own compute share, from the per-task CPU sample: CPU time
    /// over execution time, in `0.0..=1.0`. Unlike [`cpu_fraction`](Self::cpu_fraction)
    /// it counts nothing outside tasks (spinning, idle wake-ups) and no time
    /// spent waiting for a core. `None` with less than `min_time` of sampled
    /// task time.
    pub fn task_cpu_share(&self, min_time: Duration) -> Option<f64> {
        (self.sampled_task_time >= min_time && !self.sampled_task_time.is_zero()).then(|| {
            (self.sampled_task_cpu.as_secs_f64() / self.sampled_task_time.as_secs_f64())
                .clamp(0.0, 1.0)
        })
    }

    /// Completed tasks per second over the window.
    pub fn throughput(&self) -> f64 {
        let secs = self.window.as_secs_f64();
        if secs > 0.0 {
            self.completions as f64 / secs
        } else {
            0.0
        }
    }
}

/// What a policy wants the pool to do. Every field is optional: `None` leaves the
/// pool's current setting as it is.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Decision {
    /// New target size (clamped by the pool into `min..=max`).
    pub target: Option<usize>,
    /// New lower bound: the pool never retires below it.
    pub min: Option<usize>,
    /// New upper bound: the pool never spawns above it.
    pub max: Option<usize>,
    /// New spawn limit: the policy's own limit on on-demand growth, which
    /// it moves inside the user's `min..=max` (the pool clamps it into
    /// them: the user's bounds always win, and setting the limit leaves
    /// them as they are). The pool starts without one.
    pub spawn_limit: Option<usize>,
    /// New keep-alive: how long an idle worker waits before retiring while the
    /// pool is above `min` (each retirement lowers the target by one).
    pub keep_alive: Option<Duration>,
    /// Whether the pool may spawn a worker when a task waits and nobody is idle.
    pub grow_on_demand: Option<bool>,
    /// The time slice to ask the OS scheduler for on behalf of each worker
    /// (Linux 6.12+ EEVDF custom slices; ignored elsewhere); `Duration::ZERO`
    /// asks for the system default again. A short slice lets a woken worker
    /// run sooner, at the price of more preemption of long computations:
    /// worth it for workers that mostly block.
    pub worker_slice: Option<Duration>,
    /// A short human-readable reason, recorded in the decision log.
    pub reason: Cow<'static, str>,
}

impl Decision {
    /// Keep everything as it is.
    pub fn hold() -> Self {
        Decision::default()
    }

    /// Set the target size, with a reason.
    pub fn resize(target: usize, reason: impl Into<Cow<'static, str>>) -> Self {
        Decision {
            target: Some(target),
            reason: reason.into(),
            ..Decision::default()
        }
    }

    /// Also set the target size.
    pub fn with_target(mut self, n: usize) -> Self {
        self.target = Some(n);
        self
    }

    /// Also set the lower bound.
    pub fn with_min(mut self, n: usize) -> Self {
        self.min = Some(n);
        self
    }

    /// Also set the upper bound.
    pub fn with_max(mut self, n: usize) -> Self {
        self.max = Some(n);
        self
    }

    /// Also set the spawn limit (where on-demand growth stops, inside the
    /// user's `min..=max`).
    pub fn with_spawn_limit(mut self, n: usize) -> Self {
        self.spawn_limit = Some(n);
        self
    }

    /// Also set the keep-alive.
    pub fn with_keep_alive(mut self, d: Duration) -> Self {
        self.keep_alive = Some(d);
        self
    }

    /// Also turn on-demand growth on or off.
    pub fn with_grow_on_demand(mut self, on: bool) -> Self {
        self.grow_on_demand = Some(on);
        self
    }

    /// Also ask for a scheduler slice per worker.
    pub fn with_worker_slice(mut self, d: Duration) -> Self {
        self.worker_slice = Some(d);
        self
    }

    /// Replace the reason.
    pub fn with_reason(mut self, reason: impl Into<Cow<'static, str>>) -> Self {
        self.reason = reason.into();
        self
    }

    /// True when the decision changes nothing.
    pub fn is_hold(&self) -> bool {
        self.target.is_none()
            && self.min.is_none()
            && self.max.is_none()
            && self.spawn_limit.is_none()
            && self.keep_alive.is_none()
            && self.grow_on_demand.is_none()
            && self.worker_slice.is_none()
    }
}

/// A controller that sets the pool size at run time.
///
/// Implementations must be deterministic functions of the observations they
/// are fed: no clocks, sleeps, threads or locks.
///
/// ```
/// use tidepool::policy::{Decision, Observation, Schedule, SizingPolicy};
/// use std::time::Duration;
///
/// /// Grows by one thread whenever tasks are waiting at a tick.
/// struct GrowWhenQueued;
///
/// impl SizingPolicy for GrowWhenQueued {
///     fn name(&self) -> &str { "grow-when-queued" }
///     fn schedule(&self) -> Schedule {
///         Schedule::default().with_every(Duration::from_millis(100))
///     }
///     fn decide(&mut self, obs: &Observation) -> Decision {
///         if obs.queue_len > 0 {
///             Decision::resize(obs.target + 1, "tasks are waiting")
///         } else {
///             Decision::hold()
///         }
///     }
/// }
///
/// let mut p = GrowWhenQueued;
/// let mut obs = Observation::default();
/// (obs.queue_len, obs.target) = (3, 2);
/// assert_eq!(p.decide(&obs).target, Some(3));
/// ```
pub trait SizingPolicy: Send {
    /// The policy's name as used in spec strings and logs.
    fn name(&self) -> &str;

    /// When the controller should call [`decide`](Self::decide).
    fn schedule(&self) -> Schedule {
        Schedule::default()
    }

    /// Decide from an observation. Called once with [`Trigger::Start`], then
    /// as the [`schedule`](Self::schedule) asks.
    fn decide(&mut self, obs: &Observation) -> Decision;
}
