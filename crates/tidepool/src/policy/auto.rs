//! `auto` — tidepool's default policy: no parameters, sized from what the pool
//! measures. The design (see `docs/policies.md` for the argument):
//!
//! 1. **Useful concurrency from the tasks' compute share.** φ = CPU time over
//!    busy time less run delay (the time runnable but waiting for a core):
//!    the tasks' own compute share, whoever holds the cores. Smoothed as a
//!    ratio of fading sums with a prior of φ = 1 worth 5 ms; busy time is
//!    also bounded below by the workers busy through the window, so the
//!    first spawns already measure it. Keeping the cores busy takes
//!    `cores / φ` workers on average; the *ceiling* is the fewest workers
//!    that, all busy and each runnable with probability φ, keep every core
//!    busy 99% of the time (a binomial count; a blocked-to-compute ratio
//!    of up to 0.25 is a dead band, as VM steal time reads as blocking), so
//!    CPU-bound work (φ ≈ 1) gets exactly `cores`, and an oversubscribed
//!    CPU-bound pool still reads φ ≈ 1 (its wait is run delay): no feedback
//!    loop. Without run-delay data φ may only fall on windows with at most
//!    `cores` busy workers.
//! 2. **Demand by Little's law.** The offered load is `a = λ·S` busy workers
//!    (arrival rate × mean service); the demand size is the smallest `n` whose
//!    Erlang-C wait probability is at most 1% (so the 99th percentile task
//!    does not wait), capped by the ceiling.
//! 3. **Bursts are met by spawning.** The pool spawns on demand (a task waits,
//!    nobody idle) up to the *burst ceiling* the policy sets as `max`: the
//!    ceiling, but at least `2 × cores` while the workers leave a tenth of the
//!    cores unused. Each spawn calls the policy, which adopts the new worker
//!    into the target (it is kept, not re-created for the next burst) and
//!    injects escalating extra ones (0, 1, 3, 7, …, never more than the tasks
//!    waiting).
//! 4. **Backlog.** When tasks queue with nobody idle at a tick under real
//!    pressure (more arrivals than completions, or waits as long as service),
//!    grow by an escalating step (1, 2, 4, … 16) toward the burst ceiling.
//!    Neither backlog growth nor injection happens while the pool's workers
//!    use ≥ 90% of the cores: more threads cannot add throughput then.
//! 5. **Throughput feedback, only under backlog** (backlogged windows pooled
//!    into spans of ≥ 30 completions). If a ≥ 25% larger pool did
//!    not deliver a quarter of the proportional throughput gain although enough
//!    tasks were queued to show it, the smaller size becomes a cap (tasks that
//!    block on a shared resource). The cap is forgotten after 5 s so the size
//!    is probed again; each confirmation doubles its memory (up to 60 s).
//! 6. **Shrink with hysteresis.** A smaller size is applied only after 2 s of
//!    consecutive low-demand ticks (ticks are every 25 ms), half the gap at a
//!    time every further 0.5 s; surplus workers keep a 2 s keep-alive. Threads
//!    are created once per level of load, not once per burst.
//! 7. **Short scheduler slices for blocking work.** Once φ is settled below
//!    0.75, the workers ask the scheduler for 100 µs slices (Linux EEVDF), so
//!    a woken worker starts its task sooner; above 0.85, the default again.

use std::time::Duration;

use super::{Decision, Observation, Schedule, SizingPolicy, Trigger};

/// How often `auto` looks at the pool.
const TICK: Duration = Duration::from_millis(25);
/// Time constant of the smoothed estimates.
const SMOOTHING: Duration = Duration::from_millis(500);
/// Erlang-C wait probability the demand size aims for (1%: the 99th
/// percentile task should find a free worker).
const WAIT_PROBABILITY: f64 = 0.01;
/// Probability with which the ceiling's busy workers must keep every core
/// busy (at most 1% of the time fewer runnable workers than cores).
const CORES_BUSY_PROBABILITY: f64 = 0.99;
/// Smallest φ believed (the ceiling is then about 100 × cores at most).
const MIN_CPU_FRACTION: f64 = 0.02;
/// CPU use of the pool's workers (of all cores) from which the CPU counts
/// as saturated.
const CPU_SATURATED: f64 = 0.9;
/// Sampled task time (per-task CPU measurements) a window needs before its
/// compute share is used.
const SAMPLED_TASK_TIME: Duration = Duration::from_micros(500);
/// Scheduler slice the workers ask for while the tasks mostly block (EEVDF
/// custom slices, Linux 6.12+): workers that run briefly and then sleep are
/// the latency-sensitive case the slice request is for, and a woken worker
/// starts its task sooner (`docs/benchmarks.md`, "Short scheduler slices").
const SHORT_SLICE: Duration = Duration::from_micros(100);
/// φ below which the workers ask for [`SHORT_SLICE`]...
const SHORT_SLICE_BELOW: f64 = 0.75;
/// ...and above which they ask for the system default again.
const DEFAULT_SLICE_ABOVE: f64 = 0.85;
/// Shortest window the thread-level φ estimate uses.
const MIN_THREAD_WINDOW: Duration = Duration::from_millis(5);
/// Sampled tasks needed before the sample's compute share replaces the
/// starting guess (a smaller sample is weighed with it).
const FIRST_SAMPLE_TASKS: u64 = 4;
/// Busy time needed in a window before φ is trusted.
const MIN_BUSY_FOR_CPU: Duration = Duration::from_millis(2);
/// Bursts and backlog may take the pool to this many workers per core even
/// for CPU-bound work, while the pool's workers do not saturate the cores.
const BURST_CORES: usize = 2;
/// Blocked-to-compute ratio ignored by the ceiling (noise, VM steal time).
const STEAL_DEAD_BAND: f64 = 0.25;
/// Weight of the starting guess φ = 1, in task time.
const PRIOR_BUSY: Duration = Duration::from_millis(5);
/// Largest escalating step.
const MAX_STEP: usize = 16;
/// Sustained low demand (consecutive low ticks) before a shrink.
const SHRINK_AFTER: Duration = Duration::from_secs(2);
/// Keep-alive of workers above the target.
const KEEP_ALIVE: Duration = Duration::from_secs(2);
/// How long a throughput-learned cap first holds before it is probed again.
const CAP_MEMORY: Duration = Duration::from_secs(5);
/// The longest a confirmed cap holds.
const MAX_CAP_MEMORY: Duration = Duration::from_secs(60);
/// Completions a window needs for its throughput to be compared.
const FEEDBACK_MIN_COMPLETIONS: u64 = 30;
/// Relative pool growth a throughput comparison needs.
const FEEDBACK_MIN_GROWTH: f64 = 0.25;
/// Share of the proportional throughput gain below which growth did not pay.
const FEEDBACK_MIN_GAIN: f64 = 0.25;
/// Sanity bound on the Erlang-C search when the pool has no upper bound.
const SEARCH_LIMIT: usize = 100_000;

/// An exponentially weighted mean, weighted by elapsed time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Smoothed {
    value: f64,
    primed: bool,
}

impl Smoothed {
    const fn starting_at(value: f64) -> Self {
        Smoothed {
            value,
            primed: false,
        }
    }

    fn update(&mut self, sample: f64, elapsed: Duration) {
        if !self.primed {
            self.value = sample;
            self.primed = true;
            return;
        }
        let alpha = 1.0 - (-elapsed.as_secs_f64() / SMOOTHING.as_secs_f64()).exp();
        self.value += alpha * (sample - self.value);
    }
}

/// The smallest number of servers whose Erlang-C probability of waiting for
/// offered load `a` (erlangs) is at most `p`, searching up to `limit`
/// (returned if none is enough). Zero load needs zero servers.
pub fn erlang_c_servers(a: f64, p: f64, limit: usize) -> usize {
    if a.is_nan() || a <= 0.0 {
        return 0;
    }
    // Erlang B by its recurrence, then C from B: stable for large n and a.
    let mut b = 1.0;
    for n in 1..=limit {
        let nf = n as f64;
        b = a * b / (nf + a * b);
        if nf > a {
            let c = nf * b / (nf - a * (1.0 - b));
            if c <= p {
                return n;
            }
        }
    }
    limit
}

/// The fewest workers `n ≥ cores` such that, when each is runnable with
/// probability `phi` independently, at least `cores` of them are runnable
/// with probability `p` or more: `P(Binomial(n, φ) ≥ cores) ≥ p`. Searching
/// up to `limit` (returned if none is enough). Fewer busy workers leave a
/// core idle more often; more add contention without adding throughput.
pub fn cores_busy_workers(cores: usize, phi: f64, p: f64, limit: usize) -> usize {
    let cores = cores.max(1);
    let limit = limit.max(1);
    if phi.is_nan() || phi >= 1.0 {
        return cores.min(limit);
    }
    if phi <= 0.0 {
        return limit;
    }
    let miss = 1.0 - p;
    let odds = phi / (1.0 - phi);
    // The mean runnable count first reaches `cores` at `cores / φ`: the
    // answer is at least that, so start there.
    let start = (cores as f64 / phi).floor().min(limit as f64) as usize;
    for n in start.max(cores)..limit {
        // P(X < cores) = Σ_{k < cores} C(n, k) φ^k (1 − φ)^(n − k), each
        // term from the last (the first in logs: it may underflow).
        let mut term = (n as f64 * (1.0 - phi).ln()).exp();
        let mut below = term;
        for k in 0..cores - 1 {
            term *= (n - k) as f64 / (k + 1) as f64 * odds;
            below += term;
        }
        if below <= miss {
            return n;
        }
    }
    limit
}

/// Per-task CPU samples pooled over short windows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct PendingSample {
    cpu: Duration,
    time: Duration,
    tasks: u64,
    span: Duration,
}

/// A throughput sample taken under backlog.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Probe {
    threads: usize,
    throughput: f64,
}

/// Backlogged windows pooled for the next throughput probe.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Pending {
    completions: u64,
    span: Duration,
    worker_secs: f64,
}

/// tidepool's default sizing policy (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Auto {
    floor: usize,
    bound: usize,
    cores: usize,
    target: usize,
    limit: usize,
    arrival_rate: Smoothed,
    service: Smoothed,
    cpu_fraction: Smoothed,
    compute_sum: f64,
    wanted_sum: f64,
    /// Weight of the starting guess φ = 1 in the sums above (task-seconds):
    /// fades with them, and is dropped once the per-task sample holds
    /// [`FIRST_SAMPLE_TASKS`] tasks.
    prior: f64,
    /// Whether φ has come from the pool's per-task CPU sample yet.
    sampled: bool,
    /// Sampled task time not yet enough to use.
    pending_sample: PendingSample,
    /// Tasks in the per-task sample so far (counted until they are enough).
    sampled_tasks: u64,
    /// Tasks completed so far (counted until they are enough).
    completions_seen: u64,
    last_busy: usize,
    measured: bool,
    saturated: bool,
    step: usize,
    injection: usize,
    low_for: Duration,
    probe: Option<Probe>,
    pending: Pending,
    learned_cap: Option<(usize, Duration)>,
    cap_memory: Duration,
    sent_limit: Option<usize>,
    /// Whether the workers should ask for the short scheduler slice.
    short_slice: bool,
    /// What the pool was last told about the slice.
    sent_short_slice: bool,
}

impl Auto {
    /// The default policy; it learns everything from the pool.
    pub fn new() -> Self {
        Auto {
            floor: 1,
            bound: usize::MAX,
            cores: 1,
            target: 1,
            limit: 1,
            arrival_rate: Smoothed::starting_at(0.0),
            service: Smoothed::starting_at(0.0),
            // Until measured, assume CPU-bound: the cautious guess.
            cpu_fraction: Smoothed::starting_at(1.0),
            compute_sum: 0.0,
            wanted_sum: 0.0,
            // The CPU-bound guess as a prior worth a few ms of task time: a
            // single short, noisy window cannot make φ small on its own.
            prior: PRIOR_BUSY.as_secs_f64(),
            sampled: false,
            pending_sample: PendingSample::default(),
            sampled_tasks: 0,
            completions_seen: 0,
            last_busy: 0,
            measured: false,
            saturated: false,
            step: 1,
            injection: 0,
            low_for: Duration::ZERO,
            probe: None,
            pending: Pending::default(),
            learned_cap: None,
            cap_memory: CAP_MEMORY,
            sent_limit: None,
            short_slice: false,
            sent_short_slice: false,
        }
    }

    /// The target size the policy last asked for.
    pub fn target(&self) -> usize {
        self.target
    }

    /// The spawn ceiling (`max`) the policy last asked for.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The smoothed compute share of the tasks: CPU time over busy time less
    /// the time spent waiting for a core.
    pub fn cpu_fraction(&self) -> f64 {
        self.cpu_fraction.value
    }

    /// The useful-concurrency ceiling: the fewest workers that, all busy,
    /// keep every core busy 99% of the time when each is runnable with
    /// probability φ (a binomial count: see `cores_busy_workers`), within
    /// the user's bounds. About `cores / φ` plus a margin that grows as φ
    /// falls; exactly `cores` for CPU-bound work.
    pub fn ceiling(&self) -> usize {
        let phi = self.cpu_fraction.value.clamp(MIN_CPU_FRACTION, 1.0);
        // The first quarter of blocked-to-compute ratio buys nothing: CPU-bound
        // work on a VM reads φ ≈ 1 − steal (stolen time is neither CPU time
        // nor run delay), and should not grow on that.
        let blocked = (1.0 / phi - 1.0 - STEAL_DEAD_BAND).max(0.0);
        let runnable = 1.0 / (1.0 + blocked);
        let limit = self.bound.min(SEARCH_LIMIT);
        self.clamp(cores_busy_workers(
            self.cores,
            runnable,
            CORES_BUSY_PROBABILITY,
            limit,
        ))
    }

    fn clamp(&self, n: usize) -> usize {
        n.clamp(self.floor, self.bound)
    }

    /// Feed the window's samples into the smoothed estimates.
    fn learn(&mut self, obs: &Observation) {
        let secs = obs.window.as_secs_f64();
        if secs > 0.0 {
            self.arrival_rate
                .update(obs.arrivals as f64 / secs, obs.window);
        }
        if let Some(s) = obs.mean_service {
            self.service.update(s.as_secs_f64(), obs.window);
        }
        self.completions_seen = self.completions_seen.saturating_add(obs.completions);
        if secs <= 0.0 {
            return;
        }
        // Best evidence first: the pool measured the CPU time of a sample of
        // tasks around each task. Their ratio is the tasks' own compute share
        // — no spinning, idle wake-ups or waiting for a core in it — and it is
        // there from the first finished tasks on.
        // Short windows (calls on events come a millisecond apart) are
        // pooled until the sample holds enough task time.
        let acc = &mut self.pending_sample;
        acc.cpu += obs.sampled_task_cpu;
        acc.time += obs.sampled_task_time;
        acc.tasks = acc.tasks.saturating_add(obs.sampled_tasks);
        acc.span += obs.window;
        if acc.time >= SAMPLED_TASK_TIME {
            let acc = std::mem::take(&mut self.pending_sample);
            let fade = (-acc.span.as_secs_f64() / SMOOTHING.as_secs_f64()).exp();
            // The pool already took out the time long sampled tasks spent
            // preempted (waiting for a core is neither compute nor blocking).
            let wanted = acc.time.as_secs_f64();
            let cpu = acc.cpu.as_secs_f64().min(wanted);
            // Measured per task, the sample outweighs anything the noisier
            // thread-level estimate said, and once it holds a few tasks, the
            // prior guess too. Until then it is weighed with the prior: one
            // task that lost its core for a millisecond the run delay does
            // not show (VM steal) would read as blocking work.
            let keep = if self.sampled { fade } else { 0.0 };
            self.sampled = true;
            self.compute_sum = self.compute_sum * keep + cpu;
            self.wanted_sum = self.wanted_sum * keep + wanted;
            self.sampled_tasks = self.sampled_tasks.saturating_add(acc.tasks);
            if self.sampled_tasks >= FIRST_SAMPLE_TASKS {
                self.prior = 0.0;
            }
            self.update_phi();
            self.measured = true;
            return;
        }
        // Once tasks are sampled, the thread-level estimate below has
        // nothing to add; before, it needs a window long enough that the
        // run delay a worker has not been credited yet (the kernel adds it
        // when the worker gets its core back) is small beside it.
        if self.sampled || obs.window < MIN_THREAD_WINDOW {
            return;
        }
        // Busy time counts finished tasks only. A worker busy at both ends
        // of the window was busy through it unless it finished a task in
        // between, so `min(busy before, busy now − created) − completions`
        // workers × the window is a lower bound too. It is what tells the
        // first spawns, a few milliseconds into a run, and tasks longer than
        // the window, whether the busy workers compute.
        let busy_before = std::mem::replace(&mut self.last_busy, obs.busy);
        let through = obs
            .busy
            .saturating_sub(obs.threads_created as usize)
            .min(busy_before)
            .saturating_sub(usize::try_from(obs.completions).unwrap_or(usize::MAX));
        let busy = obs.busy_time.as_secs_f64().max(through as f64 * secs);
        if busy < MIN_BUSY_FOR_CPU.as_secs_f64() {
            return;
        }
        let Some(cpu) = obs.cpu_time else { return };
        let cpu = cpu.as_secs_f64();
        if let Some(delay) = obs.run_delay {
            // Time waiting for a core is neither compute nor blocking: take it
            // out, so φ is the tasks' own compute share, whoever holds the
            // cores (our workers or other processes). The run delay also holds
            // waits outside tasks (a worker woken or yielding while idle), so
            // φ is a ratio of sums that fade with the smoothing time
            // constant: windows with little task time, where that part
            // weighs most, count least (a first spawn a few milliseconds
            // into a run is soon outweighed by full ticks).
            let wanted = busy - delay.as_secs_f64();
            if wanted >= MIN_BUSY_FOR_CPU.as_secs_f64() {
                let fade = (-secs / SMOOTHING.as_secs_f64()).exp();
                self.compute_sum = self.compute_sum * fade + cpu.min(wanted);
                self.wanted_sum = self.wanted_sum * fade + wanted;
                self.prior *= fade;
                self.update_phi();
                self.measured = true;
            }
            return;
        }
        // Without run delay, time spent waiting for a core would look like
        // blocking once more workers than cores are busy (and grow a
        // CPU-bound pool without end): φ may only fall on an uncontended
        // window.
        let phi = (cpu / busy).clamp(0.0, 1.0);
        let concurrency = busy / secs;
        let uncontended =
            concurrency <= self.cores as f64 && utilization(obs).is_some_and(|u| u < CPU_SATURATED);
        if uncontended || phi > self.cpu_fraction.value {
            self.cpu_fraction.update(phi, obs.window);
            self.measured = true;
        }
    }

    /// φ from the fading sums and what is left of the prior.
    fn update_phi(&mut self) {
        let wanted = self.wanted_sum + self.prior;
        if wanted > 0.0 {
            self.cpu_fraction.value = ((self.compute_sum + self.prior) / wanted).clamp(0.0, 1.0);
        }
    }

    /// Whether φ rests on enough evidence for the spawn limit to stop being
    /// a guess: a per-task sample of [`FIRST_SAMPLE_TASKS`] tasks, or so
    /// many completions that a pool able to sample would have (the first
    /// 16 timed tasks of each worker are sampled; at least one task in 16
    /// is timed).
    fn settled(&self) -> bool {
        self.sampled_tasks >= FIRST_SAMPLE_TASKS || self.completions_seen >= 16 * FIRST_SAMPLE_TASKS
    }

    /// Short scheduler slices for workers that mostly block, once φ is
    /// settled; with hysteresis, so a φ near the line does not flip it.
    fn choose_slice(&mut self) {
        if !self.settled() {
            return;
        }
        let phi = self.cpu_fraction.value;
        if phi < SHORT_SLICE_BELOW {
            self.short_slice = true;
        } else if phi > DEFAULT_SLICE_ABOVE {
            self.short_slice = false;
        }
    }

    /// Workers needed for the offered load: Little's law and Erlang C.
    fn demand(&self, obs: &Observation) -> usize {
        // The latest window when it is long enough to trust (the shrink
        // hysteresis supplies the stability); the smoothed rate otherwise.
        let rate = if obs.window >= TICK / 2 {
            obs.arrivals as f64 / obs.window.as_secs_f64()
        } else {
            self.arrival_rate.value
        };
        let offered = rate * self.service.value;
        erlang_c_servers(offered, WAIT_PROBABILITY, self.bound.min(SEARCH_LIMIT))
    }

    /// The learned throughput cap, if still fresh.
    fn learned_cap(&self, now: Duration) -> Option<usize> {
        self.learned_cap
            .and_then(|(cap, until)| (now < until).then_some(cap))
    }

    /// Under backlog, compare throughput with the last backlogged span.
    /// Consecutive backlogged windows are pooled until they hold enough
    /// completions to compare (at 25 ms ticks a single window rarely does).
    fn feedback(&mut self, obs: &Observation) {
        let acc = &mut self.pending;
        acc.completions += obs.completions;
        acc.span += obs.window;
        acc.worker_secs += obs.live as f64 * obs.window.as_secs_f64();
        if acc.completions < FEEDBACK_MIN_COMPLETIONS || acc.span.is_zero() {
            return;
        }
        let span = acc.span.as_secs_f64();
        let now = Probe {
            threads: ((acc.worker_secs / span).round() as usize).max(1),
            throughput: acc.completions as f64 / span,
        };
        self.pending = Pending::default();
        if let Some(before) = self.probe {
            let growth = now.threads as f64 / before.threads as f64 - 1.0;
            if growth >= FEEDBACK_MIN_GROWTH {
                let expected = before.throughput * (1.0 + FEEDBACK_MIN_GAIN * growth);
                // The missing completions must have been there to take: in an
                // open loop a pool that clears its queue cannot go faster
                // than the arrivals, however many threads it has.
                let missing = (expected - now.throughput) * span;
                if now.throughput < expected && obs.queue_len as f64 >= missing {
                    let confirmed = self.learned_cap.is_some();
                    if confirmed {
                        self.cap_memory = (self.cap_memory * 2).min(MAX_CAP_MEMORY);
                    }
                    let cap = before.threads.max(self.floor);
                    self.learned_cap = Some((cap, obs.now + self.cap_memory));
                } else if now.throughput >= expected {
                    // Growth paid: forget any cap and its long memory.
                    self.learned_cap = None;
                    self.cap_memory = CAP_MEMORY;
                }
            }
        }
        self.probe = Some(now);
    }

    fn tick(&mut self, obs: &Observation) -> Decision {
        self.saturated = utilization(obs).is_some_and(|u| u >= CPU_SATURATED);
        let pressure = obs.arrivals > obs.completions
            || matches!((obs.mean_wait, obs.mean_service), (Some(w), Some(s)) if w >= s);
        let backlog = obs.queue_len > 0 && obs.idle == 0 && pressure;
        let ceiling = self.ceiling();
        let mut desired = self.demand(obs).min(ceiling);
        let mut why = "demand";

        if backlog {
            self.feedback(obs);
            if !self.saturated {
                let grown =
                    (obs.live.max(self.target) + self.step).min(self.burst_ceiling(ceiling));
                if grown > desired {
                    desired = grown;
                    why = "backlog";
                }
                self.step = (self.step * 2).min(MAX_STEP);
            }
        } else {
            self.step = 1;
            self.injection = 0;
            self.probe = None;
            self.pending = Pending::default();
        }
        if let Some(cap) = self.learned_cap(obs.now) {
            if desired > cap {
                desired = cap;
                // Re-probe gently once the cap expires.
                self.step = 1;
                why = "throughput stopped growing";
            }
        }
        if self.saturated {
            // More threads cannot help a saturated CPU.
            desired = desired.min(self.target);
        }
        let desired = self.clamp(desired);

        let old = self.target;
        if desired >= self.target {
            self.low_for = Duration::ZERO;
            self.target = desired;
        } else {
            self.low_for += obs.window;
            if self.low_for >= SHRINK_AFTER {
                let gap = self.target - desired;
                self.target -= gap.div_ceil(2);
                // Keep shrinking every half second while demand stays low.
                self.low_for = SHRINK_AFTER - SHRINK_AFTER_STEP;
                why = "shrink after sustained low demand";
            }
        }
        self.limit = self.spawn_limit(ceiling, obs.now);
        self.emit(old, ceiling, why)
    }

    fn starved(&mut self, obs: &Observation) -> Decision {
        let old = self.target;
        // φ may have just been learned from this window (the first spawns
        // come before the first tick): the limit follows the ceiling, which
        // depends on φ only, so spawns cannot ratchet it up.
        let ceiling = self.ceiling();
        self.limit = self.spawn_limit(ceiling, obs.now);
        // Adopt the worker the pool just spawned.
        let mut desired = obs.live.max(self.target);
        // Until φ is measured, only adopt: each further spawn then calls
        // again with a longer window to measure it, where injecting up to
        // the limit at once would silence the pool until the next tick.
        if !self.saturated && self.measured {
            // 1, 3, 7, 15, …: inject 0, 1, 3, 7, … extra workers.
            self.injection = (self.injection * 2 + 1).min(2 * MAX_STEP - 1);
            let extra = (self.injection / 2).min(obs.queue_len);
            desired = (obs.live + extra).max(desired);
            // Tasks wait with nobody idle: go straight to what the traffic
            // needs (at a run's start, as soon as φ is known) rather than
            // escalating one spawn at a time.
            desired = desired.max(self.demand(obs));
        }
        // Within the spawn limit set at the last tick.
        let mut desired = self.clamp(desired.min(self.limit.max(obs.live)));
        if let Some(cap) = self.learned_cap(obs.now) {
            desired = desired.min(cap.max(old));
        }
        self.target = desired.max(old);
        self.low_for = Duration::ZERO;
        self.emit(old, ceiling, "starved: adopt and inject")
    }

    /// How far bursts and backlog may take the pool: the ceiling, but at
    /// least `2 × cores` while the pool's workers leave a tenth of the cores
    /// unused — tasks then wait because the cores are held by other
    /// processes, or the work is bursty, and a few more workers than cores
    /// win back the share. Never past the user's `max`. `ceiling` is
    /// [`Auto::ceiling`], computed once per call (a binomial search).
    fn burst_ceiling(&self, ceiling: usize) -> usize {
        if self.saturated {
            ceiling
        } else {
            self.clamp(ceiling.max(BURST_CORES * self.cores))
        }
    }

    /// Where on-demand spawning stops: the burst ceiling, or a fresh learned
    /// cap (never below the target).
    fn spawn_limit(&self, ceiling: usize, now: Duration) -> usize {
        let cap = self.learned_cap(now).unwrap_or(usize::MAX);
        self.burst_ceiling(ceiling).min(cap).max(self.target)
    }

    fn emit(&mut self, old: usize, ceiling: usize, why: &'static str) -> Decision {
        let limit = self.limit.max(self.target);
        self.limit = limit;
        let slice = (self.short_slice != self.sent_short_slice).then(|| {
            self.sent_short_slice = self.short_slice;
            if self.short_slice {
                SHORT_SLICE
            } else {
                Duration::ZERO
            }
        });
        if self.target == old && Some(limit) == self.sent_limit && slice.is_none() {
            return Decision::hold();
        }
        self.sent_limit = Some(limit);
        Decision {
            target: Some(self.target),
            max: Some(limit),
            worker_slice: slice,
            reason: format!(
                "auto: {why} (phi {:.2}, ceiling {ceiling})",
                self.cpu_fraction.value
            )
            .into(),
            ..Decision::default()
        }
    }
}

/// Further shrink steps come this often while demand stays low.
const SHRINK_AFTER_STEP: Duration = Duration::from_millis(500);

impl Default for Auto {
    fn default() -> Self {
        Auto::new()
    }
}

/// CPU use of the pool's workers over the window, as a fraction of all cores.
fn utilization(obs: &Observation) -> Option<f64> {
    let cpu = obs.cpu_time?.as_secs_f64();
    let capacity = obs.window.as_secs_f64() * obs.cores.max(1) as f64;
    (capacity > 0.0).then(|| cpu / capacity)
}

impl SizingPolicy for Auto {
    fn name(&self) -> &str {
        "auto"
    }

    fn schedule(&self) -> Schedule {
        Schedule {
            every: Some(TICK),
            on_starved: true,
            // Until φ is settled the spawn limit is a guess (at first the
            // CPU-bound one): a pool stuck at it must not wait for the next
            // tick.
            on_at_max: !self.settled(),
            ..Schedule::default()
        }
    }

    fn decide(&mut self, obs: &Observation) -> Decision {
        match obs.trigger {
            Trigger::Start => {
                // Remember the user's bounds: `max` is ours from now on.
                self.floor = obs.min.max(1);
                self.bound = if obs.max == 0 {
                    usize::MAX
                } else {
                    obs.max.max(self.floor)
                };
                self.cores = obs.cores.max(1);
                self.target = self.clamp(self.cores);
                self.limit = self.spawn_limit(self.ceiling(), obs.now);
                self.sent_limit = Some(self.limit);
                Decision {
                    target: Some(self.target),
                    max: Some(self.limit),
                    keep_alive: Some(KEEP_ALIVE),
                    grow_on_demand: Some(true),
                    reason: "auto: one worker per core to start".into(),
                    ..Decision::default()
                }
            }
            Trigger::Tick | Trigger::Completions | Trigger::Retired => {
                self.learn(obs);
                self.choose_slice();
                self.tick(obs)
            }
            Trigger::Starved | Trigger::AtMax => {
                self.learn(obs);
                self.choose_slice();
                self.starved(obs)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORES: usize = 4;
    const WINDOW: Duration = Duration::from_millis(100);

    fn start(p: &mut Auto) -> Decision {
        p.decide(&Observation {
            min: 1,
            max: 512,
            cores: CORES,
            target: 1,
            ..Observation::default()
        })
    }

    /// A tick of a pool whose `live` workers are all busy on tasks that spend
    /// `phi` of their time on a CPU (the process gets at most all the cores),
    /// completing `completions` tasks in the window; arrivals keep pace and
    /// the mean service time obeys Little's law (`live = throughput × S`).
    fn busy_tick(
        at: u32,
        live: usize,
        phi: f64,
        queue_len: usize,
        completions: u64,
    ) -> Observation {
        let busy = WINDOW * live as u32;
        let cpu = busy.mul_f64(phi).min(WINDOW * CORES as u32);
        Observation {
            trigger: Trigger::Tick,
            now: WINDOW * at,
            window: WINDOW,
            arrivals: completions,
            completions,
            mean_wait: Some(Duration::from_millis(20)),
            mean_service: Some(busy / completions.max(1) as u32),
            queue_len,
            live,
            busy: live,
            idle: 0,
            target: live,
            min: 1,
            max: 512,
            busy_time: busy,
            cpu_time: Some(cpu),
            cores: CORES,
            ..Observation::default()
        }
    }

    fn quiet_tick(at: u32, live: usize) -> Observation {
        Observation {
            trigger: Trigger::Tick,
            now: WINDOW * at,
            window: WINDOW,
            live,
            idle: live,
            target: live,
            min: 1,
            max: 512,
            cpu_time: Some(Duration::ZERO),
            cores: CORES,
            ..Observation::default()
        }
    }

    /// Applies a decision the way the pool does: live follows the target.
    fn apply(live: &mut usize, d: &Decision) {
        if let Some(t) = d.target {
            *live = t;
        }
    }

    #[test]
    fn erlang_c_by_hand() {
        // a = 1: C(2) = 1/3, C(3) = 1/11 ≈ 0.091, C(4) = 1/49 ≈ 0.020.
        assert_eq!(erlang_c_servers(1.0, 0.05, 100), 4);
        assert_eq!(erlang_c_servers(1.0, 0.1, 100), 3);
        assert_eq!(erlang_c_servers(1.0, 0.4, 100), 2);
        assert_eq!(erlang_c_servers(0.0, 0.05, 100), 0);
        assert_eq!(erlang_c_servers(1000.0, 0.05, 100), 100);
        // Larger loads need a margin that grows like sqrt(a).
        let n = erlang_c_servers(100.0, 0.05, 1000);
        assert!((110..=125).contains(&n), "{n}");
    }

    #[test]
    fn cores_busy_workers_by_hand() {
        // CPU-bound: exactly the cores.
        assert_eq!(cores_busy_workers(2, 1.0, 0.99, 100), 2);
        // φ = 1/2, 2 cores: P(X ≤ 1) = (n + 1) / 2^n is 0.0107 at n = 10
        // and 0.0059 at n = 11.
        assert_eq!(cores_busy_workers(2, 0.5, 0.99, 100), 11);
        // φ = 0.1, 1 core: 0.9^n ≤ 0.01 first at n = 44.
        assert_eq!(cores_busy_workers(1, 0.1, 0.99, 1000), 44);
        // Never past the limit; nothing blocks without bound.
        assert_eq!(cores_busy_workers(2, 0.01, 0.99, 50), 50);
        assert_eq!(cores_busy_workers(2, 0.0, 0.99, 50), 50);
        assert_eq!(cores_busy_workers(4, 1.0, 0.99, 3), 3);
        // Tiny φ on many cores: no underflow, about cores / φ plus a margin.
        let n = cores_busy_workers(64, 0.02, 0.99, 100_000);
        assert!((3200..4400).contains(&n), "{n}");
        // Monotone: less compute per task, more workers.
        let mut last = 0;
        for phi in [1.0, 0.9, 0.7, 0.5, 0.3, 0.1, 0.05] {
            let n = cores_busy_workers(4, phi, 0.99, 10_000);
            assert!(n >= last, "{phi}: {n} < {last}");
            last = n;
        }
    }

    #[test]
    fn start_is_one_worker_per_core_with_on_demand_growth() {
        let mut p = Auto::new();
        let d = start(&mut p);
        assert_eq!(d.target, Some(CORES));
        // Assumed CPU-bound until measured: bursts may spawn 2 × cores.
        assert_eq!(d.max, Some(BURST_CORES * CORES));
        assert_eq!(d.grow_on_demand, Some(true));
        assert_eq!(d.keep_alive, Some(KEEP_ALIVE));
        let s = p.schedule();
        assert_eq!(s.every, Some(TICK));
        assert!(s.on_starved);
    }

    #[test]
    fn cpu_bound_backlog_stays_at_cores() {
        let mut p = Auto::new();
        let mut live = start(&mut p).target.unwrap();
        for at in 1..=100 {
            let d = p.decide(&busy_tick(at, live, 1.0, 1000, 400));
            apply(&mut live, &d);
            assert!(live <= CORES, "grew to {live} at tick {at}");
            assert!(d.max.unwrap_or(p.limit()) <= CORES);
        }
        assert_eq!(live, CORES);
    }

    #[test]
    fn cpu_bound_never_grows_even_if_oversubscribed() {
        // Someone resized the pool to 12 with CPU-bound work: the CPU is
        // saturated and CPU time alone says phi = 1/3, but auto must not take
        // that as blocking — with or without run-delay data.
        for with_run_delay in [false, true] {
            let mut p = Auto::new();
            start(&mut p);
            let mut live = 12;
            for at in 1..=50 {
                let mut obs = busy_tick(at, live, 1.0, 1000, 400);
                if with_run_delay {
                    obs.run_delay = Some(obs.busy_time - obs.cpu_time.unwrap());
                }
                let d = p.decide(&obs);
                apply(&mut live, &d);
                assert!(live <= 12);
            }
            assert!(p.cpu_fraction() > 0.99, "{with_run_delay}");
            assert_eq!(p.ceiling(), CORES);
            assert_eq!(p.target(), CORES, "{with_run_delay}");
        }
    }

    #[test]
    fn run_delay_does_not_read_as_blocking_or_as_compute() {
        // Tasks of 1 ms compute + 9 ms blocked on a machine busy with other
        // processes: each also waits 10 ms for a core. Busy time is 20 ms a
        // task; phi must still come out at 1/10 (the tasks' own compute
        // share), not 1/20 (CPU time over busy time) nor 11/20 (the
        // fraction of time wanting a CPU).
        let mut p = Auto::new();
        start(&mut p);
        for at in 1..=20 {
            let mut obs = busy_tick(at, 12, 0.05, 0, 60);
            obs.run_delay = Some(obs.busy_time / 2);
            p.decide(&obs);
        }
        assert!(
            (p.cpu_fraction() - 0.1).abs() < 0.01,
            "{}",
            p.cpu_fraction()
        );
        // phi = 0.1 (0.103 past the dead band): 95 workers keep 4 cores
        // busy 99% of the time.
        assert_eq!(p.ceiling(), 95);
    }

    #[test]
    fn workers_busy_at_both_ends_count_only_without_completions_between() {
        // CPU-bound work at half load: 3 workers busy at two calls 40 ms
        // apart, but 20 tasks finished in between, so nobody need have been
        // busy throughout. 20 ms of CPU over 20 ms of finished tasks is φ = 1,
        // not 20 / (3 × 40).
        let mut p = Auto::new();
        start(&mut p);
        let mut obs = starved(40, 3, 1);
        obs.window = Duration::from_millis(40);
        obs.busy = 3;
        obs.completions = 20;
        obs.busy_time = Duration::from_millis(20);
        obs.cpu_time = Some(Duration::from_millis(20));
        obs.run_delay = Some(Duration::ZERO);
        p.decide(&obs);
        p.decide(&obs);
        assert_eq!(p.cpu_fraction(), 1.0);
        assert_eq!(p.ceiling(), CORES);
    }

    #[test]
    fn a_small_first_window_is_soon_outweighed() {
        // A spawn call 6 ms into the run saw CPU-bound-looking work; the
        // first full tick (12 workers, 10% compute) outweighs it at once.
        let mut p = Auto::new();
        start(&mut p);
        let mut first = starved(6, 3, 5);
        first.window = Duration::from_millis(6);
        first.completions = 3;
        first.busy_time = Duration::from_millis(6);
        first.cpu_time = Some(Duration::from_millis(6));
        first.run_delay = Some(Duration::ZERO);
        p.decide(&first);
        assert_eq!(p.cpu_fraction(), 1.0);
        let mut obs = busy_tick(1, 12, 0.1, 0, 100);
        obs.run_delay = Some(Duration::ZERO);
        p.decide(&obs);
        assert!(p.cpu_fraction() < 0.12, "{}", p.cpu_fraction());
    }

    #[test]
    fn io_bound_backlog_grows_toward_the_ceiling() {
        let mut p = Auto::new();
        let mut live = start(&mut p).target.unwrap();
        let mut trace = vec![live];
        for at in 1..=30 {
            // Perfectly parallel I/O: throughput proportional to workers.
            let d = p.decide(&busy_tick(at, live, 0.1, 1000, 10 * live as u64));
            apply(&mut live, &d);
            trace.push(live);
        }
        // phi = 0.1 (0.103 past the dead band): 95 workers keep 4 cores
        // busy 99% of the time.
        assert_eq!(p.ceiling(), 95);
        assert!(live > 10 * CORES, "only reached {live}: {trace:?}");
        assert!(live <= 95, "{trace:?}");
        // Escalating, not one at a time: past 20 within 6 ticks.
        assert!(trace[6] >= 20, "{trace:?}");
    }

    #[test]
    fn io_bound_without_backlog_sizes_by_littles_law() {
        let mut p = Auto::new();
        start(&mut p);
        // 500 tasks/s of 20 ms (a = 10 erlangs), 10% CPU, nobody waiting.
        let mut obs = busy_tick(1, 4, 0.1, 0, 50);
        obs.arrivals = 50;
        obs.mean_service = Some(Duration::from_millis(20));
        obs.idle = 0;
        let d = p.decide(&obs);
        let expected = erlang_c_servers(10.0, WAIT_PROBABILITY, 512);
        assert_eq!(d.target, Some(expected));
        assert!((16..=20).contains(&expected), "{expected}");
    }

    #[test]
    fn no_demand_shrinks_only_after_hysteresis() {
        let mut p = Auto::new();
        let mut live = start(&mut p).target.unwrap();
        for at in 1..=20 {
            let d = p.decide(&busy_tick(at, live, 0.1, 1000, 10 * live as u64));
            apply(&mut live, &d);
        }
        let grown = live;
        assert!(grown > 20);
        let ticks = (SHRINK_AFTER.as_millis() / WINDOW.as_millis()) as u32;
        for k in 1..ticks {
            let d = p.decide(&quiet_tick(20 + k, live));
            apply(&mut live, &d);
            assert_eq!(live, grown, "shrank after only {k} quiet ticks");
        }
        let d = p.decide(&quiet_tick(20 + ticks, live));
        apply(&mut live, &d);
        assert!(live < grown, "did not shrink after {ticks} quiet ticks");
        assert!(live >= grown / 2, "shrinks half the gap at a time");
        for at in 20 + ticks + 1..300 {
            let d = p.decide(&quiet_tick(at, live));
            apply(&mut live, &d);
        }
        assert_eq!(live, 1, "an idle pool ends at its floor");
    }

    #[test]
    fn intermittent_quiet_ticks_do_not_shrink() {
        let mut p = Auto::new();
        let mut live = start(&mut p).target.unwrap();
        for at in 1..=20 {
            let d = p.decide(&busy_tick(at, live, 0.1, 1000, 10 * live as u64));
            apply(&mut live, &d);
        }
        let grown = live;
        for at in 21..=120 {
            let obs = if at % 8 == 0 {
                busy_tick(at, live, 0.1, 5, 10 * live as u64)
            } else {
                quiet_tick(at, live)
            };
            let d = p.decide(&obs);
            apply(&mut live, &d);
        }
        assert!(
            live >= grown,
            "shrank from {grown} to {live} between bursts"
        );
    }

    fn starved(now_ms: u64, live: usize, queue_len: usize) -> Observation {
        Observation {
            trigger: Trigger::Starved,
            now: Duration::from_millis(now_ms),
            window: Duration::from_millis(1),
            live,
            busy: live,
            queue_len,
            target: live,
            min: 1,
            max: 512,
            cores: CORES,
            ..Observation::default()
        }
    }

    #[test]
    fn starvation_adopts_and_escalates_within_the_queue() {
        let mut p = Auto::new();
        start(&mut p);
        // Teach it the work is I/O-bound so the ceiling is high.
        for at in 1..=5 {
            let mut obs = busy_tick(at, 4, 0.1, 0, 40);
            obs.arrivals = 0;
            obs.busy = 0;
            obs.idle = 4;
            p.decide(&obs);
        }
        assert_eq!(p.ceiling(), 95);
        // The pool may spawn on demand up to the ceiling.
        assert_eq!(p.limit(), 95);
        // 1st: adopt the spawned worker; 2nd: +1; 3rd: +3; 4th: +7.
        assert_eq!(p.decide(&starved(550, 5, 50)).target, Some(5));
        assert_eq!(p.decide(&starved(551, 6, 50)).target, Some(7));
        assert_eq!(p.decide(&starved(552, 8, 50)).target, Some(11));
        assert_eq!(p.decide(&starved(553, 12, 50)).target, Some(19));
        assert_eq!(p.limit(), 95, "spawns do not move the spawn limit");
        // Never more extra workers than tasks waiting (+15 wanted, 2 waiting).
        assert_eq!(p.decide(&starved(554, 20, 2)).target, Some(22));
        // A calm tick resets the escalation and keeps the workers.
        let mut calm = busy_tick(6, 22, 0.1, 0, 100);
        calm.arrivals = 10;
        calm.idle = 2;
        let d = p.decide(&calm);
        assert_eq!(d.target.unwrap_or(p.target()), 22);
        assert_eq!(p.decide(&starved(700, 23, 50)).target, Some(23));
        assert_eq!(p.decide(&starved(701, 24, 50)).target, Some(25));
    }

    #[test]
    fn first_spawns_learn_phi_before_any_task_finishes() {
        // I/O-bound tasks of 5 ms arrive fast: the pool spawns within the
        // first milliseconds, before any task finished. The busy workers'
        // low CPU use is enough to lift the spawn limit at once.
        let mut p = Auto::new();
        start(&mut p);
        assert_eq!(p.limit(), BURST_CORES * CORES);
        let mut obs = starved(30, CORES + 2, 20);
        obs.window = Duration::from_millis(30);
        obs.completions = 0;
        obs.busy = CORES + 2;
        obs.threads_created = 1;
        obs.cpu_time = Some(Duration::from_millis(15));
        obs.run_delay = Some(Duration::ZERO);
        // The first call cannot tell how long its busy workers were busy.
        p.decide(&obs);
        assert_eq!(p.cpu_fraction(), 1.0);
        let d = p.decide(&obs);
        // (4 + 2 − 1) workers busy at both ends × 30 ms, 15 ms CPU: phi = 0.1,
        // pulled up a little by the 5 ms prior of phi = 1.
        assert!(
            (0.1..0.14).contains(&p.cpu_fraction()),
            "{}",
            p.cpu_fraction()
        );
        assert!(d.max.unwrap() >= 70, "{d:?}");
        // The same window with CPU-bound workers keeps the limit.
        let mut p = Auto::new();
        start(&mut p);
        obs.cpu_time = Some(Duration::from_millis(150));
        p.decide(&obs);
        p.decide(&obs);
        assert_eq!(p.cpu_fraction(), 1.0);
        assert_eq!(p.limit(), BURST_CORES * CORES);
    }

    #[test]
    fn starvation_jumps_to_the_demand_once_phi_is_known() {
        // 2000 tasks/s of 5 ms (10 erlangs), 10% compute, a few ms into a
        // run: the spawn call goes straight to the Erlang-C size.
        let mut p = Auto::new();
        start(&mut p);
        let mut obs = starved(30, CORES + 2, 20);
        obs.window = Duration::from_millis(30);
        obs.busy = CORES + 2;
        obs.threads_created = 1;
        obs.arrivals = 60;
        obs.completions = 0;
        obs.cpu_time = Some(Duration::from_millis(15));
        obs.run_delay = Some(Duration::ZERO);
        p.decide(&obs);
        obs.completions = 1;
        obs.mean_service = Some(Duration::from_millis(5));
        obs.busy_time = Duration::from_millis(5);
        obs.busy = CORES + 3;
        let d = p.decide(&obs);
        let want = erlang_c_servers(10.0, WAIT_PROBABILITY, 512);
        assert!(p.cpu_fraction() < 0.2, "{}", p.cpu_fraction());
        assert_eq!(d.target, Some(want));
    }

    #[test]
    fn before_phi_is_measured_spawns_are_only_adopted() {
        // The first spawn, 3 ms into a run, nothing measured yet: adopt the
        // worker, inject nothing, so the next spawn calls again to measure.
        let mut p = Auto::new();
        start(&mut p);
        let d = p.decide(&starved(3, CORES + 1, 50));
        assert_eq!(d.target, Some(CORES + 1));
        assert!(!p.measured);
    }

    #[test]
    fn at_its_guessed_limit_the_pool_calls_until_phi_is_known() {
        // Tasks queue at the CPU-bound guess of a limit (2 × cores), no
        // worker can be spawned: the pool calls at-max until the first
        // sampled tasks tell φ, and the limit then opens to the ceiling.
        let mut p = Auto::new();
        start(&mut p);
        assert!(p.schedule().on_at_max);
        let mut obs = starved(2, BURST_CORES * CORES, 30);
        obs.trigger = Trigger::AtMax;
        let d = p.decide(&obs);
        assert_eq!(d.max, Some(BURST_CORES * CORES), "nothing measured yet");
        assert!(p.schedule().on_at_max);
        obs.now = Duration::from_millis(3);
        obs.sampled_task_time = Duration::from_millis(2);
        obs.sampled_task_cpu = Duration::from_micros(600);
        obs.sampled_tasks = FIRST_SAMPLE_TASKS;
        let d = p.decide(&obs);
        assert!((p.cpu_fraction() - 0.3).abs() < 1e-9);
        assert_eq!(d.max, Some(p.ceiling()));
        assert!(p.ceiling() > BURST_CORES * CORES);
        assert!(!p.schedule().on_at_max, "the limit is no longer a guess");
    }

    #[test]
    fn millisecond_windows_neither_guess_from_threads_nor_waste_samples() {
        // At-max calls a millisecond apart, CPU-bound workers sharing the
        // cores with other processes: 4 workers busy through 1.3 ms with
        // 0.4 ms of CPU and only 0.9 ms of run delay credited so far (the
        // rest comes when they get a core back). Read from threads that is
        // φ ≈ 0.1; such a short window is not used.
        let mut p = Auto::new();
        start(&mut p);
        let mut obs = starved(5, 4, 10);
        obs.trigger = Trigger::AtMax;
        obs.window = Duration::from_micros(1300);
        obs.cpu_time = Some(Duration::from_micros(375));
        obs.run_delay = Some(Duration::from_micros(857));
        p.decide(&obs);
        p.decide(&obs);
        assert_eq!(p.cpu_fraction(), 1.0);
        // Samples too small for one window add up over several.
        obs.sampled_task_cpu = Duration::from_micros(300);
        obs.sampled_task_time = Duration::from_micros(300);
        obs.sampled_tasks = 1;
        p.decide(&obs);
        assert!(!p.measured);
        p.decide(&obs);
        assert!(p.measured);
        assert_eq!(p.cpu_fraction(), 1.0);
    }

    #[test]
    fn blocking_work_gets_short_worker_slices_cpu_bound_work_the_default() {
        let mut p = Auto::new();
        start(&mut p);
        let mut obs = starved(5, 8, 10);
        obs.sampled_tasks = FIRST_SAMPLE_TASKS;
        obs.sampled_task_time = Duration::from_millis(10);
        obs.sampled_task_cpu = Duration::from_millis(1);
        assert_eq!(p.decide(&obs).worker_slice, Some(SHORT_SLICE));
        // Said once, not again.
        obs.now = Duration::from_millis(6);
        assert_eq!(p.decide(&obs).worker_slice, None);
        // The work turns CPU-bound: back to the default slice (past the
        // hysteresis band, which φ crosses as the sums fade).
        let mut flipped = None;
        for at in 1..200 {
            obs.now = Duration::from_millis(6 + 25 * at);
            obs.window = Duration::from_millis(25);
            obs.sampled_task_cpu = obs.sampled_task_time;
            if let Some(s) = p.decide(&obs).worker_slice {
                flipped = Some((s, p.cpu_fraction()));
                break;
            }
        }
        let (slice, phi) = flipped.expect("never went back to the default slice");
        assert_eq!(slice, Duration::ZERO);
        assert!(phi > DEFAULT_SLICE_ABOVE, "{phi}");
        // CPU-bound from the start: never asks.
        let mut p = Auto::new();
        start(&mut p);
        obs.now = Duration::from_millis(5);
        for _ in 0..5 {
            assert_eq!(p.decide(&obs).worker_slice, None);
            obs.now += Duration::from_millis(25);
        }
    }

    #[test]
    fn cpu_bound_bursts_spawn_no_further_than_twice_the_cores() {
        let mut p = Auto::new();
        let mut live = start(&mut p).target.unwrap();
        // The workers saturate the cores: no spawning past them.
        for at in 1..=5 {
            let d = p.decide(&busy_tick(at, live, 1.0, 0, 300));
            apply(&mut live, &d);
        }
        assert_eq!(p.ceiling(), CORES);
        assert_eq!(p.limit(), CORES);
        let d = p.decide(&starved(600, CORES, 100));
        assert!(d.target.unwrap_or(CORES) <= CORES);
        assert_eq!(p.limit(), CORES);
        // Half the cores idle (other processes hold them, or the work comes
        // in bursts): bursts and backlog may take the pool to 2 × cores.
        let mut trace = vec![];
        for at in 6..=30 {
            // More workers win more CPU share, so throughput follows them.
            let mut obs = busy_tick(at, live, 1.0, 50, 50 * live as u64);
            obs.cpu_time = Some(WINDOW * CORES as u32 / 2);
            obs.run_delay = Some(obs.busy_time - obs.cpu_time.unwrap());
            let d = p.decide(&obs);
            apply(&mut live, &d);
            trace.push(live);
        }
        assert_eq!(p.ceiling(), CORES, "phi stays 1: waiting is not blocking");
        assert_eq!(p.limit(), BURST_CORES * CORES, "{trace:?}");
        assert!(live <= BURST_CORES * CORES, "{trace:?}");
    }

    #[test]
    fn bursts_with_quiet_gaps_keep_their_workers() {
        // 200 ms bursts every 600 ms (the suite's `bursty`): the workers made
        // for the first burst stay through the gaps, so later bursts create
        // nothing.
        let mut p = Auto::new();
        let mut live = start(&mut p).target.unwrap();
        let mut peak = live;
        let mut created = 0;
        for at in 1..=60u32 {
            let phase = at % 6;
            let d = if phase < 2 {
                // A burst: 4 workers busy, 60 tasks waiting, phi 0.3.
                let mut obs = busy_tick(at, live, 0.3, 60, 40 * live as u64);
                obs.arrivals = obs.completions + 60;
                obs
            } else {
                quiet_tick(at, live)
            };
            let before = live;
            let d = p.decide(&d);
            apply(&mut live, &d);
            if phase < 2 {
                // The pool also spawns on demand during a burst.
                while live < p.limit() && live < before + 8 {
                    live += 1;
                    created += 1;
                    let d = p.decide(&starved(u64::from(at) * 100 + 1, live, 50));
                    apply(&mut live, &d);
                }
            }
            peak = peak.max(live);
            if at > 12 {
                assert!(live >= peak * 3 / 4, "shrank to {live} from {peak} at {at}");
            }
        }
        assert!(peak > 2 * CORES, "{peak}");
        assert!(
            created <= peak,
            "created {created} workers for a peak of {peak}"
        );
    }

    #[test]
    fn growth_that_does_not_pay_is_capped() {
        // Low CPU, but throughput is stuck at 2000/s whatever the size
        // (tasks queue on a shared resource): growth must stop early.
        let mut p = Auto::new();
        let mut live = start(&mut p).target.unwrap();
        for at in 1..=40 {
            let d = p.decide(&busy_tick(at, live, 0.1, 1000, 200));
            apply(&mut live, &d);
        }
        assert!(live < 20, "kept growing to {live} without throughput");
        assert!(p.ceiling() > 40, "the cap comes from throughput, not CPU");
        // After the cap expires, the re-probe is small, and once confirmed
        // the cap holds longer (10 s) before the next probe.
        let mut peak_after = 0;
        for at in 41..=200 {
            let d = p.decide(&busy_tick(at, live, 0.1, 1000, 200));
            apply(&mut live, &d);
            peak_after = peak_after.max(live);
        }
        assert!(peak_after <= 12, "re-probed up to {peak_after}");
        assert!(p.cap_memory > CAP_MEMORY);
    }

    #[test]
    fn growth_that_does_not_pay_is_capped_with_short_windows() {
        // 25 ms ticks at 1000 tasks/s hold 25 completions each, fewer than a
        // comparison needs: backlogged windows are pooled. CPU-bound-looking
        // work whose throughput stays flat must still be capped.
        let mut p = Auto::new();
        let mut live = start(&mut p).target.unwrap();
        for at in 1..=200u32 {
            let mut obs = busy_tick(at, live, 0.1, 1000, 25);
            obs.window = Duration::from_millis(25);
            obs.now = Duration::from_millis(25) * at;
            obs.busy_time = obs.window * live as u32;
            obs.mean_service = Some(obs.busy_time / 25);
            obs.cpu_time = Some(obs.busy_time.mul_f64(0.1));
            let d = p.decide(&obs);
            apply(&mut live, &d);
        }
        assert!(live < 20, "kept growing to {live} without throughput");
        assert!(p.learned_cap.is_some());
    }

    #[test]
    fn respects_user_bounds() {
        let mut p = Auto::new();
        let d = p.decide(&Observation {
            min: 2,
            max: 10,
            cores: 16,
            ..Observation::default()
        });
        assert_eq!(d.target, Some(10));
        let mut live = 10;
        for at in 1..=30 {
            let mut obs = busy_tick(at, live, 0.05, 1000, 1000);
            obs.cores = 16;
            obs.min = 2;
            obs.max = 10;
            let d = p.decide(&obs);
            apply(&mut live, &d);
            assert!(live <= 10);
            assert!(d.max.unwrap_or(10) <= 10);
        }
        for at in 31..300 {
            let d = p.decide(&quiet_tick(at, live));
            apply(&mut live, &d);
        }
        assert_eq!(live, 2);
    }

    #[test]
    fn the_per_task_cpu_sample_sets_phi_at_once() {
        let mut p = Auto::new();
        p.decide(&Observation {
            trigger: Trigger::Start,
            cores: 2,
            min: 1,
            max: 100,
            ..Observation::default()
        });
        let obs = Observation {
            trigger: Trigger::Starved,
            window: Duration::from_millis(5),
            cores: 2,
            min: 1,
            max: 100,
            live: 4,
            busy: 4,
            target: 4,
            queue_len: 10,
            sampled_task_time: Duration::from_millis(2),
            sampled_task_cpu: Duration::from_micros(200),
            sampled_tasks: FIRST_SAMPLE_TASKS,
            ..Observation::default()
        };
        p.decide(&obs);
        assert!(
            (p.cpu_fraction() - 0.1).abs() < 1e-9,
            "the first sample replaces the prior guess: {}",
            p.cpu_fraction()
        );
    }

    #[test]
    fn a_sample_of_one_task_is_weighed_with_the_prior() {
        // One 2 ms CPU-bound task that lost 1.5 ms of its core where the run
        // delay does not show it: alone it would read φ = 0.25 and open the
        // limit to 2 × (1/φ) workers. Weighed with the 5 ms prior of φ = 1 it
        // moves φ only to (5 + 0.5) / (5 + 2).
        let mut p = Auto::new();
        start(&mut p);
        let mut obs = starved(3, CORES + 1, 5);
        obs.sampled_task_time = Duration::from_millis(2);
        obs.sampled_task_cpu = Duration::from_micros(500);
        obs.sampled_tasks = 1;
        p.decide(&obs);
        assert!(
            (p.cpu_fraction() - 5.5 / 7.0).abs() < 1e-9,
            "{}",
            p.cpu_fraction()
        );
        assert!(p.ceiling() <= CORES + 1, "{}", p.ceiling());
        assert!(p.schedule().on_at_max, "still a guess");
        // Once the sample holds enough tasks the prior is dropped: φ is the
        // sample's own (0.5 + 2 ms of compute in 2 + 2 ms).
        obs.now = Duration::from_millis(5);
        obs.sampled_tasks = FIRST_SAMPLE_TASKS;
        obs.sampled_task_cpu = Duration::from_millis(2);
        p.decide(&obs);
        assert!(
            (p.cpu_fraction() - 0.625).abs() < 1e-3,
            "{}",
            p.cpu_fraction()
        );
        assert!(!p.schedule().on_at_max);
    }
}
