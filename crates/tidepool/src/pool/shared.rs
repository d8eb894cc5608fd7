//! The state every worker, submitter and the controller share, and the two
//! size-changing mechanics: spawning a worker and retiring one.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::builder::{Config, OnFull};
use super::room::Room;
use super::sleep::Sleepers;
use crate::control::{Events, Limits, Sizes};
use crate::error::SubmitError;
use crate::metrics::clock::Clock;
use crate::metrics::record::Records;
use crate::metrics::sampling::Sampler;
use crate::metrics::series::Ring;
use crate::metrics::LiveThreadsSample;
use crate::policy::DecisionRecord;
use crate::queue::PoolQueue;
use crate::sync::{fence, lock, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex};
use crate::task::Task;

/// Live and target counts ([`Sizes`]), packed in one word so that every
/// decision that compares them (retire only while `live > target`, spawn only
/// below a limit, keep-alive expiry) is one compare-and-swap over both: a
/// concurrent `resize` can never make a retirement undershoot the new target.
/// The transitions themselves are `Sizes`' pure functions. Read on every
/// task, so kept on its own cache line.
#[derive(Debug)]
pub(crate) struct PackedSizes {
    /// `target << 32 | live`.
    word: AtomicU64,
    /// The user's bounds ([`Limits::min`], [`Limits::max`]).
    pub(crate) min: AtomicUsize,
    pub(crate) max: AtomicUsize,
    /// The policy's [`Limits::spawn_limit`] (`usize::MAX`: none).
    pub(crate) spawn_limit: AtomicUsize,
}

const LIVE_MASK: u64 = u32::MAX as u64;

#[inline]
fn pack(s: Sizes) -> u64 {
    ((s.target as u64) << 32) | s.live_threads as u64
}

#[inline]
fn unpack(word: u64) -> Sizes {
    Sizes::new((word & LIVE_MASK) as usize, (word >> 32) as usize)
}

impl PackedSizes {
    fn new(sizes: Sizes, min: usize, max: usize) -> Self {
        PackedSizes {
            word: AtomicU64::new(pack(sizes)),
            min: AtomicUsize::new(min),
            max: AtomicUsize::new(max),
            spawn_limit: AtomicUsize::new(usize::MAX),
        }
    }

    /// `(live, target)` at one instant.
    #[inline]
    pub(crate) fn load(&self) -> Sizes {
        unpack(self.word.load(Acquire))
    }

    /// Atomically replace `(live, target)` by `f`'s answer, if it has one;
    /// returns the new pair.
    #[inline]
    pub(crate) fn update(&self, mut f: impl FnMut(Sizes) -> Option<Sizes>) -> Option<Sizes> {
        let mut new = None;
        self.word
            .fetch_update(AcqRel, Acquire, |w| {
                new = f(unpack(w));
                new.map(pack)
            })
            .ok()
            .and(new)
    }
}

/// Counters that exist with statistics on or off.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) rejected: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) created: AtomicU64,
    pub(crate) retired: AtomicU64,
    /// Workers the OS refused (see `pool::spawn`).
    pub(crate) spawn_failed: AtomicU64,
}

/// Where the controller is woken from (starved spawns, retirements,
/// completions). Only touched when a policy asked for it.
#[derive(Debug, Default)]
pub(crate) struct ControlSignal {
    pub(crate) flags: Mutex<ControlFlags>,
    pub(crate) cv: Condvar,
    /// Completions between policy calls (0 = not asked for).
    pub(crate) every_completions: AtomicU64,
    /// Completions since the last call, counted only when `every_completions > 0`.
    pub(crate) completions: AtomicU64,
    pub(crate) want_starved: AtomicBool,
    pub(crate) want_retired: AtomicBool,
    pub(crate) want_at_max: AtomicBool,
    /// An at-max call is raised and not yet taken: further starved submits
    /// at the limit then touch no lock.
    pub(crate) at_max_pending: AtomicBool,
}

/// Pending reasons to call the policy, and the order to stop.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ControlFlags {
    pub(crate) events: Events,
    pub(crate) stop: bool,
}

impl ControlSignal {
    pub(crate) fn raise(&self, set: impl FnOnce(&mut ControlFlags)) {
        set(&mut lock(&self.flags));
        self.cv.notify_one();
    }

    /// A task waited with nobody idle and the pool is at its limit: call the
    /// policy if it asked, unless a call for that is already pending.
    #[cold]
    pub(crate) fn at_max(&self) {
        if self.want_at_max.load(Relaxed)
            && !self.at_max_pending.load(Relaxed)
            && !self.at_max_pending.swap(true, Relaxed)
        {
            self.raise(|f| f.events.at_max = true);
        }
    }

    /// The controller has made the at-max call: the next starved submit at
    /// the limit raises another.
    pub(crate) fn at_max_taken(&self) {
        // A swap, not a store: the same effect, and loom 0.7 (the model
        // tests) wrongly lets a plain store fall between the read and the
        // write of a concurrent swap (tokio-rs/loom#254).
        self.at_max_pending.swap(false, Relaxed);
    }
}

/// How long a submit blocked on a full queue sleeps between re-checks at most
/// (a safety net only: workers wake blocked submitters as they pop).
const ROOM_POLL: Duration = Duration::from_millis(10);

/// `Shared::worker_slice_ns` while nobody asked for a slice.
pub(crate) const NO_SLICE: u64 = u64::MAX;

/// A requested slice as `Shared::worker_slice_ns` holds it (never
/// [`NO_SLICE`]: absurdly long requests saturate just below it).
pub(crate) fn slice_ns(slice: Duration) -> u64 {
    u64::try_from(slice.as_nanos()).map_or(NO_SLICE - 1, |ns| ns.min(NO_SLICE - 1))
}

/// Shared pool state.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) queue: PoolQueue,
    /// `queue.push_is_seq_cst()`, read once.
    pub(crate) push_is_seq_cst: bool,
    /// `queue.pop_is_seq_cst()`, read once.
    pub(crate) pop_is_seq_cst: bool,
    pub(crate) sleepers: Sleepers,
    pub(crate) sizes: CachePadded<PackedSizes>,
    /// Set when shutdown begins (see `Pool::push` for the protocol).
    pub(crate) shutdown: CachePadded<AtomicBool>,
    /// Set once shutdown has begun and every in-flight submit has finished:
    /// from then on an empty queue stays empty and workers may exit.
    pub(crate) shutdown_settled: AtomicBool,
    pub(crate) grow_on_demand: AtomicBool,
    pub(crate) keep_alive_ns: AtomicU64,
    /// The user chose the keep-alive (builder or `Pool::set_keep_alive`):
    /// the policy's keep-alive no longer applies.
    pub(crate) user_keep_alive: AtomicBool,
    /// The scheduler slice the builder or the policy asked for, in ns (0:
    /// the system default; [`NO_SLICE`]: never asked). Each worker applies
    /// it to itself.
    pub(crate) worker_slice_ns: AtomicU64,
    pub(crate) counters: Counters,
    /// Workers inside `block_in_place` (see `pool::blocking`).
    pub(crate) blocked: AtomicUsize,
    /// Workers in their start hook or first task (see `PoolStats::starting_threads`).
    pub(crate) starting: AtomicUsize,
    /// Tasks dropped unrun by their options (shared with those tasks).
    pub(crate) outcomes: std::sync::Arc<Outcomes>,
    pub(crate) records: Option<Records>,
    /// Which submissions get timestamps (with statistics on).
    pub(crate) sampler: Sampler,
    /// Submitters blocked on a full queue, and where they wait.
    pub(crate) room: Room,
    pub(crate) control: ControlSignal,
    /// Held while the limits are read, changed and stored.
    limits_lock: Mutex<()>,
    pub(crate) started_instant: std::time::Instant,
    /// The newest `history_len` size samples (if recorded) and decisions.
    pub(crate) series: Option<Mutex<Ring<LiveThreadsSample>>>,
    pub(crate) decisions: Mutex<Ring<DecisionRecord>>,
    pub(crate) threads: Mutex<Vec<(u64, std::thread::JoinHandle<()>)>>,
    /// Handles of workers that retired and may still be on their way out;
    /// shutdown joins them too, so it returns only once every thread the
    /// pool started has ended (a C program's `exit` then finds none running).
    pub(crate) retired: Mutex<Vec<std::thread::JoinHandle<()>>>,
    pub(crate) next_worker_id: AtomicU64,
}

impl Shared {
    pub(crate) fn new(config: Config) -> Self {
        let queue = PoolQueue::new(config.flavor, config.capacity);
        Shared {
            push_is_seq_cst: queue.push_is_seq_cst(),
            pop_is_seq_cst: queue.pop_is_seq_cst(),
            sizes: CachePadded::new(PackedSizes::new(
                Sizes::new(0, config.initial),
                config.min,
                config.max,
            )),
            queue,
            sleepers: Sleepers::default(),
            shutdown: CachePadded::new(AtomicBool::new(false)),
            shutdown_settled: AtomicBool::new(false),
            grow_on_demand: AtomicBool::new(false),
            worker_slice_ns: AtomicU64::new(config.worker_slice.map_or(NO_SLICE, slice_ns)),
            keep_alive_ns: AtomicU64::new(config.keep_alive.as_nanos() as u64),
            user_keep_alive: AtomicBool::new(config.keep_alive_set),
            counters: Counters::default(),
            blocked: AtomicUsize::new(0),
            starting: AtomicUsize::new(0),
            outcomes: Default::default(),
            records: config.statistics.then(Records::default),
            sampler: Sampler::default(),
            room: Room::default(),
            control: ControlSignal::default(),
            limits_lock: Mutex::new(()),
            started_instant: std::time::Instant::now(),
            series: config
                .live_threads_series
                .then(|| Mutex::new(Ring::new(config.history_len))),
            decisions: Mutex::new(Ring::new(config.history_len)),
            threads: Mutex::new(Vec::new()),
            retired: Mutex::new(Vec::new()),
            next_worker_id: AtomicU64::new(0),
            config,
        }
    }

    /// This pool's identity (its address), as join handles and worker
    /// threads record it.
    #[inline]
    pub(crate) fn id(&self) -> usize {
        self as *const Shared as usize
    }

    #[inline]
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(SeqCst)
    }

    #[inline]
    pub(crate) fn live_threads(&self) -> usize {
        self.sizes.load().live_threads
    }

    #[inline]
    pub(crate) fn target(&self) -> usize {
        self.sizes.load().target
    }

    /// More workers alive than the target.
    #[inline]
    pub(crate) fn has_surplus(&self) -> bool {
        self.sizes.load().has_surplus()
    }

    /// Set the target (the caller clamps it).
    pub(crate) fn set_target(&self, target: usize) {
        self.sizes.update(|s| Some(s.with_target(target)));
    }

    /// A worker that never started, or one leaving at shutdown: one fewer live.
    pub(crate) fn drop_live(&self) {
        self.sizes.update(|s| Some(s.drop_live()));
    }

    pub(crate) fn keep_alive(&self) -> Duration {
        Duration::from_nanos(self.keep_alive_ns.load(Relaxed))
    }

    /// The settings a decision may change, as they stand.
    pub(crate) fn limits(&self) -> Limits {
        let slice = self.worker_slice_ns.load(Relaxed);
        Limits {
            min: self.sizes.min.load(Relaxed),
            max: self.sizes.max.load(Relaxed),
            spawn_limit: Some(self.sizes.spawn_limit.load(Relaxed)).filter(|&l| l != usize::MAX),
            keep_alive: self.keep_alive(),
            grow_on_demand: self.grow_on_demand.load(Relaxed),
            worker_slice: (slice != NO_SLICE).then(|| Duration::from_nanos(slice)),
        }
    }

    /// Replace the settings by `change`'s answer (`None`: keep them), as one
    /// step: the controller applying a decision and the user calling
    /// `Pool::set_min_threads` both read, change and store them, and
    /// neither may store over the other's change with what it read before.
    pub(crate) fn change_limits(
        &self,
        change: impl FnOnce(&Limits) -> Option<Limits>,
    ) -> Option<Limits> {
        let _one_at_a_time = lock(&self.limits_lock);
        let new = change(&self.limits())?;
        self.set_limits(&new);
        Some(new)
    }

    /// Store the settings of `new` that differ from the current ones
    /// (through [`Shared::change_limits`]); storing nothing that did not
    /// change keeps the cache lines workers read untouched.
    fn set_limits(&self, new: &Limits) {
        let old = self.limits();
        if new.min != old.min {
            self.sizes.min.store(new.min, Relaxed);
        }
        if new.max != old.max {
            self.sizes.max.store(new.max, Relaxed);
        }
        if new.spawn_limit != old.spawn_limit {
            let limit = new.spawn_limit.unwrap_or(usize::MAX);
            self.sizes.spawn_limit.store(limit, Relaxed);
        }
        if new.keep_alive != old.keep_alive {
            // `Limits::apply` saturates at `MAX_KEEP_ALIVE`, which fits.
            let ns = u64::try_from(new.keep_alive.as_nanos()).unwrap_or(u64::MAX);
            self.keep_alive_ns.store(ns, Relaxed);
        }
        if new.grow_on_demand != old.grow_on_demand {
            self.grow_on_demand.store(new.grow_on_demand, Relaxed);
        }
        if new.worker_slice != old.worker_slice {
            let ns = new.worker_slice.map_or(NO_SLICE, slice_ns);
            self.worker_slice_ns.store(ns, Relaxed);
        }
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.started_instant.elapsed()
    }

    /// Where on-demand growth stops ([`Limits::effective_spawn_limit`]), read
    /// without the rest of the limits.
    pub(crate) fn effective_spawn_limit(&self) -> usize {
        let s = &self.sizes;
        crate::control::effective_spawn_limit(
            s.spawn_limit.load(Relaxed),
            s.min.load(Relaxed),
            s.max.load(Relaxed),
        )
    }

    /// Reserve a slot for one more worker if `live < limit`; false otherwise.
    pub(crate) fn reserve_worker(&self, limit: usize) -> bool {
        self.sizes.update(|s| s.reserve(limit)).is_some()
    }

    /// Give back one worker slot if `live > target`: the caller retires
    /// (counted here, as it leaves the live count, so that a snapshot sees
    /// the two change together but for the instant between the two stores).
    pub(crate) fn release_surplus(&self) -> bool {
        self.counted_retirement(self.sizes.update(Sizes::release_surplus).is_some())
    }

    /// A worker's keep-alive ran out: it is not needed. If the pool is above
    /// `min`, retire it (true) and lower the target with it.
    pub(crate) fn expire_worker(&self) -> bool {
        let min = self.sizes.min.load(Relaxed);
        self.counted_retirement(self.sizes.update(|s| s.expire(min)).is_some())
    }

    /// A worker left the live count to retire (`left`): count it retired.
    fn counted_retirement(&self, left: bool) -> bool {
        if left {
            self.counters.retired.fetch_add(1, Relaxed);
        }
        left
    }

    /// A worker was spawned on demand: the target follows it up, so the new
    /// worker is not surplus (it leaves only through its keep-alive).
    pub(crate) fn raise_target_to_live(&self) {
        self.sizes.update(Sizes::raise_target_to_live);
    }

    /// Record the pool size in the time series, if it is being recorded.
    pub(crate) fn sample_size(&self) {
        if let Some(series) = &self.series {
            let sample = LiveThreadsSample {
                at: self.elapsed(),
                live_threads: self.live_threads(),
                target: self.target(),
            };
            let mut s = lock(series);
            if s.last().map(|l| (l.live_threads, l.target))
                != Some((sample.live_threads, sample.target))
            {
                s.push(sample);
            }
        }
    }

    /// A worker took a task: wake the submitters blocked on a full queue,
    /// if any (see `pool::room`).
    #[inline]
    pub(crate) fn notify_room(&self) {
        self.room.notify_after_pop(self.pop_is_seq_cst);
    }

    /// Whether `submit` should block (true) or reject (false) on a full queue.
    pub(crate) fn blocks_when_full(&self) -> bool {
        self.config.on_full == OnFull::Block
    }

    /// Back-pressure (see `pool::room`): push `task`, waiting for room until
    /// `deadline` (`None`: forever; the `Duration` is the caller's timeout, for
    /// the error) or until the pool shuts down.
    pub(crate) fn push_blocking(
        &self,
        mut task: Task,
        deadline: Option<(Instant, Duration)>,
    ) -> Result<(), (SubmitError, Task)> {
        self.room.enter();
        let result = loop {
            // Make sure someone is draining the queue while we wait.
            self.sleepers.notify_work();
            let step = match deadline {
                None => ROOM_POLL,
                Some((d, timeout)) => {
                    let now = Instant::now();
                    if now >= d {
                        self.counters.rejected.fetch_add(1, Relaxed);
                        break Err((SubmitError::Timeout(timeout), task));
                    }
                    (d - now).min(ROOM_POLL)
                }
            };
            self.wait_for_room(step);
            if self.is_shutdown() {
                break Err((SubmitError::ShutDown, task));
            }
            if self.records.is_some() && task.stamps.submitted != 0 {
                task.stamps.accepted = Clock::ticks();
            }
            match self.queue.push(task) {
                Ok(()) => break Ok(()),
                Err(back) => task = back,
            }
        };
        self.room.leave();
        result
    }

    /// Wait up to `timeout` for room in the queue (woken by workers' pops)
    /// or for shutdown. The caller is counted in `room` (`Room::enter`).
    pub(crate) fn wait_for_room(&self, timeout: Duration) {
        self.room
            .wait(timeout, || self.queue_has_room() || self.is_shutdown());
    }

    fn queue_has_room(&self) -> bool {
        self.config
            .capacity
            .is_none_or(|cap| self.queue.len() < cap)
    }

    /// Refuse new submissions, then let workers exit once the queue is
    /// empty and wake everyone who waits (workers, blocked submitters).
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, SeqCst);
        fence(SeqCst);
        self.shutdown_settled.store(true, Release);
        self.room.notify_all();
        self.sleepers.wake_all();
    }

    #[inline]
    pub(crate) fn is_shutdown_settled(&self) -> bool {
        self.shutdown_settled.load(Acquire)
    }
}

/// Tasks dropped unrun by their options; shared by the pool and the tasks.
#[derive(Debug, Default)]
pub(crate) struct Outcomes {
    pub(crate) expired: std::sync::atomic::AtomicU64,
    pub(crate) cancelled: std::sync::atomic::AtomicU64,
}
