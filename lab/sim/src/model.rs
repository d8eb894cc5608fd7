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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use tidepool::control::{
    apply, holds_wake_up, observation, wants_worker, Events, Limits, Next, Scheduler, Sizes,
};
use tidepool::policy::{Schedule, SizingPolicy, Trigger};
use tidepool::PoolStats;
use tidepool_workload::body::TaskBody;
use tidepool_workload::metrics::{
    LatencyAccumulator, TaskRecord, ThreadMetricsBuilder, ThreadSample,
};
use tidepool_workload::{DecisionEntry, TaskSpec};

use crate::arrivals::Arrivals;
use crate::config::{ExecutorModel, SimConfig};
use crate::cpu::Cpu;
use crate::events::{self, Calendar, Event};
use crate::outcome::{Bin, LittlesLaw, SimOutcome, Steady};

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

    /// Run every task of `tasks` to completion.
    pub(crate) fn run(
        mut self,
        tasks: impl Iterator<Item = TaskSpec>,
        workload: &str,
        clients: Option<usize>,
    ) -> SimOutcome {
        let mut arrivals = Arrivals::new(tasks, clients);
        self.closed = arrivals.is_closed();
        let mut taken = 0u64;
        // The next arrival: it moves only when a task is taken or answered.
        let mut ta = arrivals.next_at().unwrap_or(u64::MAX);
        // What a run keeps from start to end, in locals the loop need not
        // reload from `self` at every event.
        let (contended, preempting, closed) = (self.contended, self.preempt > 0, self.closed);
        loop {
            let tc = self.cpu.next_done().unwrap_or(u64::MAX);
            let te = self.calendar.next_at().unwrap_or(u64::MAX);
            let tp = self.control.as_ref().and_then(|c| c.at).unwrap_or(u64::MAX);
            let mut t = ta.min(tc).min(te).min(tp);
            // Threads waiting for a core, and the driver's next spin.
            let (mut tq, mut td) = (u64::MAX, u64::MAX);
            if contended {
                tq = self
                    .pending
                    .peek()
                    .map_or(u64::MAX, |Reverse(k)| (k >> 64) as u64);
                // As the replay: no spin while tasks queue past the idle
                // workers (the next one queues whenever it comes).
                let backlog = self.queue.len() > self.idle.len();
                if self.driver > 0 && ta != u64::MAX && self.driver_for != ta && !backlog {
                    td = ta.saturating_sub(self.driver).max(self.now);
                }
                td = td.min(self.driver_due);
                t = t.min(tq).min(td);
            }
            if t == u64::MAX {
                break;
            }
            self.advance(t);
            self.events_handled += 1;
            if tc == t {
                while let Some(w) = self.cpu.pop_done() {
                    if w == DRIVER {
                        self.driver_spinning = false;
                    } else if w == DRIVER_ANSWER {
                        self.driver_answering = false;
                    } else {
                        self.compute_done(w);
                    }
                }
            } else if te == t {
                if let Some((_, e)) = self.calendar.pop() {
                    self.handle(e);
                }
            } else if ta == t {
                let task = arrivals.take_with(|arrival, index, spec| Task {
                    index,
                    request_id: spec.request_id,
                    app_id: spec.app_id,
                    arrival,
                    cpu: ns(spec.cpu),
                    blocked: ns(spec.blocked),
                    steady: false,
                });
                if let Some(task) = task {
                    self.submit(task);
                    taken += 1;
                }
                ta = arrivals.next_at().unwrap_or(u64::MAX);
            } else if tq == t {
                if let Some(Reverse(k)) = self.pending.pop() {
                    self.proceed(Event::unpack(k as u64));
                }
            } else if td == t {
                if self.driver_due == t {
                    // The driver gets the core it landed on.
                    self.driver_due = u64::MAX;
                    self.spin_driver();
                } else {
                    // The driver wakes to spin to the arrival. It is a
                    // thread like the workers: with the slice's rule it
                    // lands on a core and waits there for the running part
                    // (at most a slice), then spins what is left (docs/notebook/sim.md; before, it shared the cores at
                    // once and stretched the parts it woke among).
                    self.driver_for = ta;
                    if self.driver_due == u64::MAX {
                        let wait = if self.preempt == 0 {
                            self.landing_wait()
                        } else {
                            0
                        };
                        if wait > 0 {
                            self.driver_due = t + wait;
                        } else {
                            self.spin_driver();
                        }
                    }
                }
            }
            if preempting {
                self.release_pending();
            }
            if closed {
                for i in self.answered.drain(..) {
                    arrivals.answered(i, self.now);
                }
                ta = arrivals.next_at().unwrap_or(u64::MAX);
            }
            self.poll_policy();
            if ta == u64::MAX && self.in_system == 0 {
                // Nothing left but timers of idle workers and policy ticks
                // (in a closed loop every answer has scheduled its next task).
                break;
            }
        }
        let end = self.last_finish.max(self.now);
        self.flush_samples(end + 1);
        self.finish(workload, taken)
    }

    /// Let time run to `t`: integrals, samples, the cores.
    #[inline(always)]
    fn advance(&mut self, t: u64) {
        if t <= self.now {
            return;
        }
        let dt = u128::from(t - self.now);
        self.in_system_ns += dt * u128::from(self.in_system);
        if !self.pending.is_empty() {
            self.pending_ns += dt * self.pending.len() as u128;
        }
        self.queue_ns += dt * u128::from(self.waiting);
        if t > self.next_sample {
            self.flush_samples(t);
        }
        self.cpu.advance(t);
        self.now = t;
    }

    /// Record the samples due before `t` (the state has not changed since).
    fn flush_samples(&mut self, t: u64) {
        if t <= self.next_sample {
            return;
        }
        let k = (t - 1 - self.next_sample) / self.sample_interval + 1;
        let sample = ThreadSample {
            at_ns: self.next_sample,
            live: self.live(),
            queued: self.queue.len(),
            target: (!self.per_request).then_some(self.sizes.target),
        };
        self.samples.push(&sample, k);
        self.samples
            .last_at(self.next_sample + (k - 1) * self.sample_interval);
        self.next_sample += k * self.sample_interval;
    }

    /// ∫ live threads dt up to now.
    #[inline]
    fn threads_ns(&self) -> u128 {
        self.threads_ns + u128::from(self.now - self.threads_at) * self.live() as u128
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
        if s.live != self.sizes.live {
            self.sync_threads();
        }
        self.sizes = s;
    }

    #[inline]
    fn live(&self) -> usize {
        if self.per_request {
            self.threads
        } else {
            self.sizes.live
        }
    }

    /// A thread becomes runnable. With `preempt`, if every core computes it
    /// waits in `pending` for a core to free, at most `preempt`. With
    /// `slice`, as measured on this machine (docs/notebook/sim.md): it
    /// lands on one of the cores, evenly, whether or not another is idle
    /// (`wait_probe`: 44–68% of hand-offs are woken on the driver's CPU);
    /// if a compute part runs there it waits for that part to end, at most
    /// a slice (EEVDF's RUN_TO_PARITY keeps the running thread from
    /// wake-up preemption for its slice), and no idle core pulls it
    /// sooner. Otherwise (or with neither cost) it goes on at once.
    #[inline(always)]
    fn handle(&mut self, e: Event) {
        if self.contended && self.core_wait && !matches!(e, Event::KeepAlive(_)) {
            let running = self.cpu.running();
            let wait = if self.preempt > 0 {
                if running >= self.cores {
                    self.preempt
                } else {
                    0
                }
            } else {
                self.landing_wait()
            };
            if wait > 0 {
                let k = events::key(&mut self.pending_seq, self.now + wait, e);
                self.pending.push(Reverse(k));
                return;
            }
        }
        self.proceed(e);
    }

    /// How long a thread made runnable now waits for the core it lands on
    /// (the slice's rule of [`handle`](Self::handle)).
    #[inline]
    fn landing_wait(&mut self) -> u64 {
        let running = self.cpu.running();
        let k = self.land() % running.max(self.cores) as u64;
        if (k as usize) < running {
            self.cpu.left(k as usize).min(self.slice)
        } else {
            0
        }
    }

    /// The driver's spin to the arrival it woke for, after a nap's CPU
    /// (none left if it got its core late: the arrival stays on time,
    /// as the model's driver is never late).
    fn spin_driver(&mut self) {
        if !self.driver_spinning {
            self.driver_spinning = true;
            let spin = self.driver_for.saturating_sub(self.now);
            self.cpu.start(DRIVER, spin + self.sleep_cpu);
        }
    }

    /// The next pick of [`handle`](Self::handle)'s core (splitmix64).
    #[inline]
    fn land(&mut self) -> u64 {
        self.lands = self.lands.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.lands;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// With `preempt`, run pending threads, the earliest due first, while a
    /// core is free (with `slice` a thread waits for its own core's part;
    /// the caller tests `preempt`: a call per event was 2–4% of a run).
    fn release_pending(&mut self) {
        while !self.pending.is_empty() && self.cpu.running() < self.cores {
            if let Some(Reverse(k)) = self.pending.pop() {
                self.proceed(Event::unpack(k as u64));
            }
        }
    }

    #[inline(always)]
    fn proceed(&mut self, e: Event) {
        match e {
            Event::Ready(w) => {
                if self.per_request {
                    let task = self.workers[w as usize].run.take().map(|r| r.task);
                    if let Some(task) = task {
                        if !self.start_task(w, task) {
                            self.leave(w);
                        }
                    }
                } else {
                    self.run_worker(w, false);
                }
            }
            Event::Woken(w) => {
                self.arriving -= 1;
                let last = self.arriving == 0;
                self.handed = true;
                self.run_worker(w, last);
                self.handed = false;
            }
            Event::Unblocked(w) => self.slice_done(w),
            Event::KeepAlive(w) => self.keep_alive(w),
        }
    }

    /// A task arrives.
    fn submit(&mut self, mut task: Task) {
        self.submitted += 1;
        self.first_arrival.get_or_insert(task.arrival);
        // The measured window runs from the arrival of task `warmup` to that
        // of task `steady_end`, in time: in an open loop that is the tasks
        // `warmup..steady_end`; in a closed loop, clients drift apart and a
        // task's index no longer says when it arrives.
        if task.index == self.warmup {
            self.steady_from = Some((self.now, self.threads_ns()));
            self.in_steady = true;
        }
        if task.index == self.steady_end {
            self.in_steady = false;
        }
        let steady = self.in_steady;
        task.steady = steady;
        if steady {
            self.steady_to = (self.now, self.threads_ns());
        }
        if steady {
            self.steady.submitted += 1;
        }
        if let Some(c) = &mut self.control {
            c.window.submitted += 1;
        }
        if self.per_request {
            self.accept();
            self.sync_threads();
            self.threads += 1;
            self.spawn_worker(Some(task));
            return;
        }
        if self.wake == 0 && (!self.core_wait || self.cpu.running() < self.cores) {
            // An idle worker takes the task at once: it never waits in the
            // queue (so a queue with no room still admits it).
            if let Some(w) = self.idle.pop_back() {
                self.accept();
                self.handed = true;
                if !self.start_task(w, task) {
                    self.run_worker(w, false);
                }
                self.handed = false;
                return;
            }
        }
        if self.capacity.is_some_and(|cap| self.queue.len() >= cap) {
            if steady {
                self.steady.rejected += 1;
            }
            if let Some(c) = &mut self.control {
                c.window.submitted -= 1;
                c.window.rejected += 1;
            }
            if self.closed {
                self.answered.push(task.index);
            }
            return;
        }
        self.accept();
        self.queue.push_back(task);
        if !self.idle.is_empty() {
            self.notify_work();
        } else if wants_worker(
            self.sizes.live,
            || self.limits.grow_on_demand,
            || 0,
            || self.queue.len(),
        ) {
            match self.sizes.reserve(self.limits.on_demand_limit().max(1)) {
                Some(s) => {
                    self.set_sizes(s.raise_target_to_live().unwrap_or(s));
                    self.spawn_worker(None);
                    if let Some(c) = &mut self.control {
                        if let Some(s) = &c.scheduler {
                            s.starved(&mut c.events);
                        }
                    }
                }
                None => {
                    if let Some(c) = &mut self.control {
                        if let Some(s) = &c.scheduler {
                            s.at_max(&mut c.events);
                        }
                    }
                }
            }
        }
    }

    #[inline]
    fn accept(&mut self) {
        self.accepted += 1;
        self.in_system += 1;
        self.waiting += 1;
    }

    /// Start a thread (its slot is reserved); it takes work after the spawn cost.
    fn spawn_worker(&mut self, own: Option<Task>) {
        let worker = Worker {
            state: State::Starting,
            run: own.map(|task| Running::new(task, 0, 1, 0)),
            deadline: 0,
            timer: u64::MAX,
        };
        let w = match self.free.pop() {
            Some(w) => {
                self.workers[w as usize] = worker;
                w
            }
            None => {
                self.workers.push(worker);
                (self.workers.len() - 1) as u32
            }
        };
        self.created += 1;
        if let Some(c) = &mut self.control {
            c.window.threads_created += 1;
        }
        self.calendar.push(self.now + self.spawn, Event::Ready(w));
    }

    /// Work was queued and workers are parked: wake the top of the idle
    /// stack, unless a wake-up younger than [`ARRIVAL_GRACE`](tidepool::control::ARRIVAL_GRACE) is still on
    /// its way (the pool's rule, [`holds_wake_up`]: one wake-up in flight).
    fn notify_work(&mut self) {
        let since = || Duration::from_nanos(self.now - self.arriving_since);
        if holds_wake_up(self.arriving as usize, since) {
            return;
        }
        self.wake_one();
    }

    /// Wake the most recently parked worker, if any (`Sleepers::wake_one`):
    /// it is on its way until its `Woken` event.
    fn wake_one(&mut self) -> bool {
        let Some(w) = self.idle.pop_back() else {
            return false;
        };
        self.arriving += 1;
        self.arriving_since = self.now;
        self.workers[w as usize].state = State::Waking;
        self.calendar.push(self.now + self.wake, Event::Woken(w));
        true
    }

    /// A pool worker between tasks: retire as surplus, take a task, or park.
    /// `hand_on`: it was the last woken worker to arrive, so once it has a
    /// task it wakes the next if work is left (`Sleepers::hand_on`).
    fn run_worker(&mut self, w: u32, mut hand_on: bool) {
        loop {
            if let Some(s) = self.sizes.release_surplus() {
                self.set_sizes(s);
                self.retire(w, false);
                return;
            }
            match self.queue.pop_front() {
                Some(task) => {
                    if std::mem::take(&mut hand_on)
                        && !self.queue.is_empty()
                        && !self.idle.is_empty()
                    {
                        self.notify_work();
                    }
                    if self.start_task(w, task) {
                        return;
                    }
                }
                None => {
                    self.park(w, self.now.saturating_add(ns(self.limits.keep_alive)));
                    return;
                }
            }
        }
    }

    /// Park `w` on top of the idle stack until `deadline`. A worker keeps at
    /// most one keep-alive event pending for its current deadline or an
    /// earlier one (which re-arms itself when it finds a later deadline), so
    /// the calendar grows with the workers, not with the parks.
    fn park(&mut self, w: u32, deadline: u64) {
        let worker = &mut self.workers[w as usize];
        worker.state = State::Idle;
        worker.deadline = deadline;
        if worker.timer > deadline {
            worker.timer = deadline;
            self.calendar.push(deadline, Event::KeepAlive(w));
        }
        self.idle.push_back(w);
    }

    fn keep_alive(&mut self, w: u32) {
        let now = self.now;
        let worker = &mut self.workers[w as usize];
        if worker.timer == now {
            worker.timer = u64::MAX;
        }
        if worker.state != State::Idle {
            return;
        }
        if worker.deadline > now {
            if worker.timer > worker.deadline {
                worker.timer = worker.deadline;
                let d = worker.deadline;
                self.calendar.push(d, Event::KeepAlive(w));
            }
            return;
        }
        // Its keep-alive ran out: off the idle stack, then retire or park again.
        if let Some(i) = self.idle.iter().position(|&x| x == w) {
            self.idle.remove(i);
        }
        match self.sizes.expire(self.limits.min) {
            Some(s) => {
                self.set_sizes(s);
                self.retire(w, true);
            }
            None => self.park(w, now.saturating_add(ns(self.limits.keep_alive))),
        }
    }

    fn retire(&mut self, w: u32, expired: bool) {
        self.workers[w as usize].state = State::Gone;
        self.free.push(w);
        if let Some(c) = &mut self.control {
            c.window.threads_retired += 1;
            if expired {
                if let Some(s) = &c.scheduler {
                    s.retired(&mut c.events);
                }
            }
        }
    }

    /// A thread per request: its task is done, the thread exits.
    fn leave(&mut self, w: u32) {
        self.workers[w as usize].state = State::Gone;
        self.free.push(w);
        self.sync_threads();
        self.threads -= 1;
    }

    /// `w` starts `task`; false if the task had nothing to do and is
    /// already complete.
    fn start_task(&mut self, w: u32, task: Task) -> bool {
        let wait = self.now - task.arrival;
        self.waiting -= 1;
        // Runs of equal waits (zero, or the wake-up cost) are recorded in bulk.
        if wait == self.wait_run.0 {
            self.wait_run.1 += 1;
        } else {
            self.wait.record_n(self.wait_run.0, self.wait_run.1);
            self.wait_run = (wait, 1);
        }
        self.wait_sum += u128::from(wait);
        if task.steady {
            self.steady.waited += 1;
            self.steady.wait_sum_ns += u128::from(wait);
            if self.threshold.is_some_and(|t| wait > t) {
                self.steady.waits_over += 1;
            }
        }
        if let Some(c) = &mut self.control {
            if c.scheduler.is_some() {
                c.window.wait.record(wait);
            }
        }
        // The replay's slicing; one slice when the task only computes or
        // only blocks, as `TaskBody::new` says, without its two `Duration`s
        // (a division each: the common case of a compute-only stream).
        let slices = if task.cpu == 0 || task.blocked == 0 {
            1
        } else {
            TaskBody::new(
                Duration::from_nanos(task.cpu),
                Duration::from_nanos(task.blocked),
            )
            .slices
        };
        // The hand-off's CPU, once: a worker that goes on to the next task
        // without parking pays none.
        let lead = if std::mem::take(&mut self.handed) {
            self.handoff_cpu
        } else {
            0
        };
        self.workers[w as usize].run = Some(Running::new(task, self.now, slices, lead));
        self.begin_slice(w)
    }

    /// Start the current slice of `w`'s task; false if the task completed.
    #[inline(always)]
    fn begin_slice(&mut self, w: u32) -> bool {
        loop {
            // By reference: the record is ~100 bytes, a slice reads 40.
            let Some(run) = &self.workers[w as usize].run else {
                return false;
            };
            let (mut c, b) = run.slice();
            if b > 0 {
                c += self.sleep_cpu;
            }
            if run.done == 0 {
                c += run.lead;
            }
            if c > 0 {
                self.workers[w as usize].state = State::Computing;
                self.cpu.start(w, c);
                return true;
            }
            if b > 0 {
                self.block(w, b);
                return true;
            }
            if !self.next_slice(w) {
                return false;
            }
        }
    }

    #[inline(always)]
    fn block(&mut self, w: u32, b: u64) {
        self.workers[w as usize].state = State::Blocked;
        self.calendar
            .push_unblocked(self.now + b + self.oversleep, w);
    }

    /// The current slice is over: true if another follows, else the task
    /// completes (bookkeeping only).
    #[inline(always)]
    fn next_slice(&mut self, w: u32) -> bool {
        let worker = &mut self.workers[w as usize];
        let Some(run) = &mut worker.run else {
            return false;
        };
        run.done += 1;
        if run.done < run.slices {
            return true;
        }
        let run = *run;
        worker.run = None;
        self.complete(run);
        false
    }

    #[inline(always)]
    fn compute_done(&mut self, w: u32) {
        let Some(run) = &self.workers[w as usize].run else {
            return;
        };
        let (_, b) = run.slice();
        if b > 0 {
            self.block(w, b);
        } else {
            self.slice_done(w);
        }
    }

    #[inline(always)]
    fn slice_done(&mut self, w: u32) {
        if self.next_slice(w) && self.begin_slice(w) {
            return;
        }
        if self.per_request {
            self.leave(w);
        } else {
            self.run_worker(w, false);
        }
    }

    /// An answer in a closed loop: the replay's driver waits for answers
    /// in a timed channel receive, so one that comes while it sleeps wakes
    /// it, and it naps again: a nap's CPU (`sleep_cpu`) on the cores. One
    /// already awake (spinning, or taking an earlier answer) takes it in
    /// passing. Only with the driver modelled (`Costs::driver`).
    fn wake_driver(&mut self) {
        if self.driver > 0 && self.sleep_cpu > 0 && !self.driver_spinning && !self.driver_answering
        {
            self.driver_answering = true;
            self.cpu.start(DRIVER_ANSWER, self.sleep_cpu);
        }
    }

    /// A task finished now.
    fn complete(&mut self, run: Running) {
        let task = run.task;
        let now = self.now;
        self.completed += 1;
        self.in_system -= 1;
        self.last_finish = now;
        let service = now - run.started;
        let turnaround = now - task.arrival;
        self.processing.record(service);
        self.turnaround.record(turnaround);
        self.turnaround_sum += u128::from(turnaround);
        if self.closed {
            self.answered.push(task.index);
            self.wake_driver();
        }
        if task.steady {
            self.steady.completed += 1;
            self.steady.turnaround_sum_ns += u128::from(turnaround);
            if !self.steady.bins.is_empty() {
                let size = task.cpu + task.blocked;
                let i = self.bin_edges.partition_point(|&e| e < size);
                let bin = &mut self.steady.bins[i];
                bin.tasks += 1;
                bin.turnaround_sum_ns += u128::from(turnaround);
                bin.size_sum_ns += u128::from(size);
            }
        }
        if self.keep_records {
            self.records.push(TaskRecord {
                request_id: task.request_id,
                app_id: task.app_id,
                scheduled_ns: task.arrival,
                submitted_ns: task.arrival,
                accepted_ns: Some(task.arrival),
                started_ns: Some(run.started),
                finished_ns: Some(now),
            });
        }
        if let Some(c) = &mut self.control {
            if let Some(s) = &mut c.scheduler {
                s.completed(&mut c.events);
                let w = &mut c.window;
                w.completed += 1;
                w.service.record(service);
                // Every task is in the CPU sample, and the model's tasks
                // compute exactly `cpu` (plus their sleeps' own CPU, which
                // a thread's CPU clock counts) and want a core for nothing
                // else: their own compute share is cpu / (cpu + blocked).
                let sleeps = if task.blocked > 0 {
                    u64::from(run.slices) * self.sleep_cpu
                } else {
                    0
                };
                w.sampled_tasks += 1;
                w.sampled_task_cpu += Duration::from_nanos(task.cpu + sleeps);
                w.sampled_task_time += Duration::from_nanos(task.cpu + sleeps + task.blocked);
            }
        }
    }

    /// Call the policy if the scheduler has a call due now.
    #[inline(always)]
    fn poll_policy(&mut self) {
        let Some(c) = &self.control else { return };
        if c.events == Events::default() && c.at.is_none_or(|t| self.now < t) {
            return;
        }
        self.call_due();
    }

    /// [`poll_policy`](Self::poll_policy) found a call due: make the calls.
    fn call_due(&mut self) {
        let now = Duration::from_nanos(self.now);
        let mut calls = 0u32;
        loop {
            let Some(c) = &mut self.control else { return };
            let Some(s) = &mut c.scheduler else {
                c.at = None;
                return;
            };
            match s.next(&mut c.events, now) {
                Next::Call(call) => {
                    self.call(call.trigger);
                    let Some(c) = &mut self.control else { return };
                    let schedule = c.policy.schedule();
                    if let Some(s) = &mut c.scheduler {
                        s.called(call, now, schedule);
                    }
                    calls += 1;
                    if calls >= 1_000 {
                        // A schedule that is always due (a zero period):
                        // the real controller would spin; let time move.
                        c.at = Some(self.now + 1_000_000);
                        return;
                    }
                }
                Next::At(t) => {
                    c.at = Some(ns(t));
                    return;
                }
                Next::Wait => {
                    c.at = None;
                    return;
                }
            }
        }
    }

    /// Call the policy for `trigger` and apply its decision.
    fn call(&mut self, trigger: Trigger) {
        let now = self.now;
        let idle = self.idle.len().min(self.sizes.live);
        // PoolStats is non_exhaustive: start from the default, set the gauges.
        let mut gauges = PoolStats::default();
        gauges.elapsed = Duration::from_nanos(now);
        gauges.live_threads = self.sizes.live;
        gauges.busy_threads = self.sizes.live - idle;
        gauges.idle_threads = idle;
        gauges.target_size = self.sizes.target;
        gauges.min_threads = self.limits.min;
        gauges.max_threads = self.limits.max;
        gauges.queue_len = self.queue.len();
        gauges.cores = self.cores;
        let (busy, delay) = (
            self.cpu.busy_ns(),
            self.cpu.delay_ns() + self.pending_ns as f64,
        );
        let Some(c) = &mut self.control else { return };
        let mut window = std::mem::take(&mut c.window);
        window.elapsed = Duration::from_nanos(now - c.last_call);
        window.worker_cpu_time = Some(Duration::from_nanos((busy - c.cpu_at_call) as u64));
        window.worker_run_delay = Some(Duration::from_nanos((delay - c.delay_at_call) as u64));
        let obs = observation(trigger, &gauges, &window);
        c.last_call = now;
        c.cpu_at_call = busy;
        c.delay_at_call = delay;
        let decision = c.policy.decide(&obs);
        if decision.is_hold() {
            return;
        }
        let old_target = self.sizes.target;
        let applied = apply(&decision, &self.limits, self.sizes.target);
        self.limits = applied.limits;
        let new_target = self.apply_target(applied.target);
        if self.keep_decisions {
            self.decisions.push(DecisionEntry::new(
                now as f64 / 1e6,
                format!("{trigger:?}").to_lowercase(),
                old_target,
                new_target,
                decision.reason,
            ));
        }
    }

    /// A new target: spawn up to it, wake idle workers so the surplus retires.
    fn apply_target(&mut self, n: usize) -> usize {
        let target = self.limits.clamp(n);
        self.set_sizes(self.sizes.with_target(target));
        while self.sizes.live < target {
            match self.sizes.reserve(target) {
                Some(s) => {
                    self.set_sizes(s);
                    self.spawn_worker(None);
                }
                None => break,
            }
        }
        for _ in 0..self.sizes.surplus() {
            if !self.wake_one() {
                break;
            }
        }
        target
    }

    fn finish(mut self, workload: &str, tasks: u64) -> SimOutcome {
        let first = self.first_arrival.unwrap_or(0);
        let span = self.last_finish.saturating_sub(first);
        let duration_s = span as f64 / 1e9;
        let samples = std::mem::take(&mut self.samples).finish();
        let zeros = |n: u64| {
            let mut a = LatencyAccumulator::default();
            a.record_n(0, n);
            a.summary()
        };
        self.wait.record_n(self.wait_run.0, self.wait_run.1);
        let wait = self.wait.summary();
        let turnaround = self.turnaround.summary();
        let cpu_s = self.cpu.busy_ns() / 1e9;
        let result = tidepool_workload::RunResult {
            executor: String::new(),
            workload: workload.to_string(),
            tasks: tasks as usize,
            submitted: self.submitted,
            accepted: self.accepted,
            rejected: self.submitted - self.accepted,
            completed: self.completed,
            cancelled: false,
            duration_s,
            throughput: if duration_s > 0.0 {
                self.completed as f64 / duration_s
            } else {
                0.0
            },
            mean_wait_us: wait.mean_us,
            p99_wait_us: wait.p99_us,
            mean_response_us: 0.0,
            p99_response_us: 0.0,
            mean_turnaround_us: turnaround.mean_us,
            p99_turnaround_us: turnaround.p99_us,
            response: zeros(self.accepted),
            wait,
            processing: self.processing.summary(),
            turnaround,
            lateness: zeros(self.submitted),
            cpu_time_s: cpu_s,
            cpu_utilisation: if duration_s > 0.0 {
                cpu_s / duration_s / self.cores as f64
            } else {
                0.0
            },
            cores: self.cores,
            load_average: None,
            threads_created: self.created - self.created_at_start,
            avg_threads: samples.avg_threads,
            max_threads: samples.max_threads,
            avg_queue: samples.avg_queue,
            max_queue: samples.max_queue,
            sample_interval_ms: self.sample_interval as f64 / 1e6,
            size_series: samples.size_series,
            decisions: self.decisions,
            records: self.records,
        };
        let mut steady = self.steady;
        if let Some((t0, threads0)) = self.steady_from {
            let (t1, threads1) = self.steady_to;
            steady.span_ns = t1.saturating_sub(t0);
            steady.threads_ns = threads1 - threads0;
        }
        SimOutcome {
            result,
            events: self.events_handled,
            littles_law: LittlesLaw {
                span_ns: span,
                accepted: self.accepted,
                in_system_ns: self.in_system_ns,
                turnaround_sum_ns: self.turnaround_sum,
                queue_ns: self.queue_ns,
                wait_sum_ns: self.wait_sum,
            },
            steady,
        }
    }
}
