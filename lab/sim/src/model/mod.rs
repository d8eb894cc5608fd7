//! The simulation: tasks arrive from a stream, a modelled pool (or a thread
//! per request) runs them on the modelled cores, and the pool's rules come
//! from `tidepool::control` — the same functions the real pool calls.
//!
//! A worker's life, as in `tidepool::pool::worker`: between two tasks it
//! retires if the pool has a surplus ([`Sizes::release_surplus`]), else
//! takes the queue's oldest task, else parks on the idle stack (LIFO: the
//! most recently parked is woken first, so the surplus really goes idle and
//! its keep-alive runs out, [`Sizes::expire`]). A submit wakes the top of
//! the idle stack; with nobody idle it may spawn ([`wants_worker`],
//! [`Sizes::reserve`] up to `max`, [`Sizes::raise_target_to_live`]) or
//! raise an at-max event. The policy is called when [`Scheduler`] says so,
//! sees [`observation`]'s view of the window, and its decision goes through
//! [`apply`].
//!
//! Besides the tasks, the cores run what the replay spends (`Costs`): the
//! driver's spin before each arrival, each sleep's and each hand-off's CPU;
//! and with `slice` (or `preempt`) a thread made runnable while every core
//! computes waits (`pending`) for a core to free or, at the latest, for the
//! end of the compute part on the core it lands on (or the preemption).
//!
//! | file | one idea |
//! |---|---|
//! | `mod.rs` | the simulator's state ([`Sim`]) and its construction |
//! | `driver.rs` | the event loop: arrivals, the replay driver's spin and answers, time's advance, the outcome |
//! | `machine.rs` | the cores: a thread made runnable waits for one (slice, preemption), a task's compute/sleep slices |
//! | `pool.rs` | the pool: submit, wake, spawn, park, keep-alive, retire, complete, and the policy's calls |

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use tidepool::control::{Events, Limits, Scheduler, Sizes};
use tidepool::policy::{Schedule, SizingPolicy, Trigger};
use tidepool::PoolStats;
use tidepool_workload::metrics::{LatencyAccumulator, TaskRecord, ThreadMetricsBuilder};
use tidepool_workload::DecisionEntry;

use crate::config::{ExecutorModel, SimConfig};
use crate::cpu::Cpu;
use crate::events::Calendar;
use crate::outcome::{Bin, Steady};

mod driver;
mod machine;
mod pool;

/// A task in the system.
#[derive(Debug, Clone, Copy)]
struct Task {
    index: u64,
    request_id: u64,
    app_id: u64,
    arrival: u64,
    cpu: u64,
    blocked: u64,
    /// Arrived in the measured window (see `submit`).
    steady: bool,
}

/// A task on a worker: its body's compute/sleep slices, as the replay runs it.
#[derive(Debug, Clone, Copy)]
struct Running {
    task: Task,
    started: u64,
    slices: u32,
    done: u32,
    /// (compute, blocked) of every slice but the last (which takes the
    /// remainder): divided once per task, not per slice.
    each: (u64, u64),
    /// CPU before the first slice's compute (`Costs::handoff_cpu`).
    lead: u64,
}

impl Running {
    fn new(task: Task, started: u64, slices: u32, lead: u64) -> Running {
        let n = u64::from(slices.max(1));
        Running {
            task,
            started,
            slices: slices.max(1),
            done: 0,
            // (Two divisions of ~40 cycles each: skipped for one slice.)
            each: if n == 1 {
                (task.cpu, task.blocked)
            } else {
                (task.cpu / n, task.blocked / n)
            },
            lead,
        }
    }

    /// (compute, blocked) of the current slice; the last takes the remainder.
    #[inline]
    fn slice(&self) -> (u64, u64) {
        let (c, b) = self.each;
        if self.done + 1 == self.slices {
            let rest = u64::from(self.slices - 1);
            (self.task.cpu - c * rest, self.task.blocked - b * rest)
        } else {
            (c, b)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Starting,
    Idle,
    Waking,
    Computing,
    Blocked,
    Gone,
}

#[derive(Debug, Clone, Copy)]
struct Worker {
    state: State,
    /// The task it runs (a thread per request: from its creation, not yet
    /// started while `state` is `Starting`).
    run: Option<Running>,
    /// When the current park's keep-alive runs out.
    deadline: u64,
    /// The earliest keep-alive event pending for this worker (at most a few
    /// are: see `park`).
    timer: u64,
}

/// The policy and when to call it.
struct Control {
    policy: Box<dyn SizingPolicy>,
    scheduler: Option<Scheduler>,
    events: Events,
    /// When the scheduler next has something due without new events.
    at: Option<u64>,
    /// Statistics of the window since the last call.
    window: PoolStats,
    last_call: u64,
    cpu_at_call: f64,
    delay_at_call: f64,
}

/// The simulator's state.
pub(crate) struct Sim {
    now: u64,
    cores: usize,
    spawn: u64,
    wake: u64,
    oversleep: u64,
    /// `Costs::preempt` and `Costs::slice` (both 0: no thread waits for a
    /// core, see `pending`).
    preempt: u64,
    slice: u64,
    /// Threads that became runnable while every core computed, by when they
    /// run at the latest (then the order they came in). The earliest runs
    /// as soon as a core frees. One `u128` each, compared as one integer:
    /// the time in the high 64 bits, then a 36-bit count of pushes and the
    /// event ([`Event::pack`]); the count wraps after 2³⁶ pushes, which can
    /// only misorder threads due at the same ns pushed 6·10¹⁰ apart.
    pending: BinaryHeap<Reverse<u128>>,
    pending_seq: u64,
    /// Picks the core a thread that waits for one lands on (splitmix64: the
    /// same run gives the same picks).
    lands: u64,
    /// ∫ pending threads dt: run delay besides the cores' sharing.
    pending_ns: u128,
    /// `Costs::driver`: the replay driver spins this long before each
    /// arrival (0: not modelled).
    driver: u64,
    /// The arrival the driver's current or last spin is for.
    driver_for: u64,
    /// When the driver, woken for `driver_for` onto a core whose part it
    /// waits for (the slice's landing rule, as every woken thread), gets
    /// that core (`u64::MAX`: it is not waiting).
    driver_due: u64,
    /// `Costs::sleep_cpu` and `Costs::handoff_cpu`.
    sleep_cpu: u64,
    handoff_cpu: u64,
    /// The worker now taking a task was handed it by a wake-up.
    handed: bool,
    /// Its spin is on the cores (one thread: a spin that the sharing
    /// stretched past its arrival goes on into the next one's).
    driver_spinning: bool,
    /// A closed loop's driver, woken by an answer, is on the cores.
    driver_answering: bool,
    /// `preempt`, `slice` or `driver` is not zero (one test on the hot
    /// path when all are).
    contended: bool,
    /// `preempt` or `slice` is not zero: threads may wait for a core.
    core_wait: bool,
    per_request: bool,
    cpu: Cpu,
    calendar: Calendar,
    workers: Vec<Worker>,
    free: Vec<u32>,
    /// Parked workers, oldest at the front, the LIFO top at the back.
    idle: VecDeque<u32>,
    /// Workers woken and not running yet, and when the last was woken
    /// (one wake-up in flight: see `wake_one`).
    arriving: u32,
    arriving_since: u64,
    queue: VecDeque<Task>,
    capacity: Option<usize>,
    sizes: Sizes,
    limits: Limits,
    control: Option<Control>,
    /// Threads alive (per request; the pool's is `sizes.live`).
    threads: usize,
    /// A closed loop: answered tasks go to `answered` for the arrivals.
    closed: bool,
    answered: Vec<u64>,
    // What is measured.
    events_handled: u64,
    submitted: u64,
    accepted: u64,
    completed: u64,
    created: u64,
    created_at_start: u64,
    in_system: u64,
    /// Accepted tasks not started yet (queued, or waiting for their thread).
    waiting: u64,
    first_arrival: Option<u64>,
    last_finish: u64,
    in_system_ns: u128,
    queue_ns: u128,
    /// ∫ live threads dt up to `threads_at`; the count has not changed
    /// since (it changes far less often than time moves: see
    /// [`threads_ns`](Self::threads_ns)).
    threads_ns: u128,
    threads_at: u64,
    turnaround_sum: u128,
    wait_sum: u128,
    wait: LatencyAccumulator,
    /// A run of equal waits not yet in `wait`: (wait, count).
    wait_run: (u64, u64),
    processing: LatencyAccumulator,
    turnaround: LatencyAccumulator,
    sample_interval: u64,
    next_sample: u64,
    samples: ThreadMetricsBuilder,
    keep_records: bool,
    records: Vec<TaskRecord>,
    keep_decisions: bool,
    decisions: Vec<DecisionEntry>,
    warmup: u64,
    /// The task whose arrival ends the measured window (`u64::MAX`: none).
    steady_end: u64,
    /// Between the arrivals of tasks `warmup` and `steady_end`.
    in_steady: bool,
    steady: Steady,
    steady_from: Option<(u64, u128)>,
    /// The last arrival: the thread average stops there (not in the drain).
    steady_to: (u64, u128),
    threshold: Option<u64>,
    bin_edges: Vec<u64>,
}

/// The replay driver's id on the cores (above any worker's)...
const DRIVER: u32 = (1 << 26) - 1;
/// ...and its id while it takes an answer in a closed loop.
const DRIVER_ANSWER: u32 = DRIVER - 1;

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Sim {
    pub(crate) fn new(config: SimConfig) -> Sim {
        let SimConfig {
            cores,
            costs,
            executor,
            sample_interval,
            keep_records,
            keep_decisions,
            warmup_tasks,
            steady_tasks,
            wait_threshold,
            clients: _,
            size_bins,
        } = config;
        let cores = cores.max(1);
        let mut sim = Sim {
            now: 0,
            cores,
            spawn: ns(costs.spawn),
            wake: ns(costs.wake),
            oversleep: ns(costs.oversleep),
            preempt: ns(costs.preempt),
            slice: ns(costs.slice),
            pending: BinaryHeap::new(),
            pending_seq: 0,
            lands: 0x5EED,
            pending_ns: 0,
            driver: ns(costs.driver),
            driver_for: u64::MAX,
            driver_due: u64::MAX,
            driver_spinning: false,
            driver_answering: false,
            sleep_cpu: ns(costs.sleep_cpu),
            handoff_cpu: ns(costs.handoff_cpu),
            handed: false,
            contended: costs.preempt > Duration::ZERO
                || costs.slice > Duration::ZERO
                || costs.driver > Duration::ZERO,
            core_wait: costs.preempt > Duration::ZERO || costs.slice > Duration::ZERO,
            per_request: false,
            cpu: Cpu::new(cores),
            calendar: Calendar::default(),
            workers: Vec::new(),
            free: Vec::new(),
            idle: VecDeque::new(),
            arriving: 0,
            arriving_since: 0,
            queue: VecDeque::new(),
            capacity: None,
            sizes: Sizes::default(),
            limits: Limits {
                min: 0,
                max: usize::MAX,
                spawn_limit: None,
                keep_alive: Duration::MAX,
                grow_on_demand: false,
                worker_slice: None,
            },
            control: None,
            threads: 0,
            closed: false,
            answered: Vec::new(),
            events_handled: 0,
            submitted: 0,
            accepted: 0,
            completed: 0,
            created: 0,
            created_at_start: 0,
            in_system: 0,
            waiting: 0,
            first_arrival: None,
            last_finish: 0,
            in_system_ns: 0,
            queue_ns: 0,
            threads_ns: 0,
            threads_at: 0,
            turnaround_sum: 0,
            wait_sum: 0,
            wait: LatencyAccumulator::default(),
            wait_run: (0, 0),
            processing: LatencyAccumulator::default(),
            turnaround: LatencyAccumulator::default(),
            sample_interval: ns(sample_interval).max(1),
            next_sample: 0,
            samples: ThreadMetricsBuilder::default(),
            keep_records,
            records: Vec::new(),
            keep_decisions,
            decisions: Vec::new(),
            warmup: warmup_tasks,
            steady_end: steady_tasks.map_or(u64::MAX, |n| warmup_tasks.saturating_add(n)),
            in_steady: false,
            steady: Steady {
                bins: vec![
                    Bin::default();
                    if size_bins.is_empty() {
                        0
                    } else {
                        size_bins.len() + 1
                    }
                ],
                ..Steady::default()
            },
            steady_from: None,
            steady_to: (0, 0),
            threshold: wait_threshold.map(ns),
            bin_edges: size_bins.into_iter().map(ns).collect(),
        };
        match executor {
            ExecutorModel::PerRequest => sim.per_request = true,
            ExecutorModel::Pool(p) => {
                sim.capacity = p.capacity;
                sim.limits = Limits {
                    min: p.min,
                    max: p.max,
                    spawn_limit: None,
                    keep_alive: p.keep_alive,
                    grow_on_demand: false,
                    worker_slice: None,
                };
                sim.sizes = Sizes::new(0, p.initial);
                for _ in 0..p.initial {
                    match sim.sizes.reserve(p.initial) {
                        Some(s) => {
                            sim.set_sizes(s);
                            sim.spawn_worker(None);
                        }
                        None => break,
                    }
                }
                sim.created_at_start = sim.created;
                if let Some(policy) = p.policy {
                    sim.control = Some(Control {
                        policy,
                        scheduler: None,
                        events: Events::default(),
                        at: None,
                        window: PoolStats::default(),
                        last_call: 0,
                        cpu_at_call: 0.0,
                        delay_at_call: 0.0,
                    });
                    sim.call(Trigger::Start);
                    if let Some(c) = &mut sim.control {
                        let schedule = c.policy.schedule();
                        if schedule != Schedule::default() {
                            c.scheduler = Some(Scheduler::new(schedule, Duration::ZERO));
                            // Ask the scheduler now when the first call is
                            // due (without this a policy that only ticks,
                            // such as `frequency`, was never called again).
                            c.at = Some(0);
                        }
                    }
                    sim.poll_policy();
                }
            }
        }
        sim
    }

    /// ∫ live threads dt up to now.
    #[inline]
    fn threads_ns(&self) -> u128 {
        self.threads_ns + u128::from(self.now - self.threads_at) * self.live_threads() as u128
    }

    /// Bring [`threads_ns`](Self::threads_ns) up to now: before the count
    /// of live threads changes.
    #[inline]
    fn sync_threads(&mut self) {
        self.threads_ns = self.threads_ns();
        self.threads_at = self.now;
    }

    /// New sizes (the count of live threads may change).
    #[inline]
    fn set_sizes(&mut self, s: Sizes) {
        if s.live_threads != self.sizes.live_threads {
            self.sync_threads();
        }
        self.sizes = s;
    }

    #[inline]
    fn live_threads(&self) -> usize {
        if self.per_request {
            self.threads
        } else {
            self.sizes.live_threads
        }
    }
}
