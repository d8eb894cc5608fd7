//! `auto` — tidepool's default policy: no parameters, sized from what the pool
//! measures. The design (see `docs/policies.md` for the argument):
//!
//! 1. **Useful concurrency from the tasks' compute share.** φ = CPU time over
//!    busy time less run delay (the time runnable but waiting for a core):
//!    the tasks' own compute share, whoever holds the cores. Smoothed as a
//!    ratio of fading sums with a prior of φ = 1 worth 5 ms; busy time is
//!    also bounded below by the workers busy through the window, so the
//!    first spawns already measure it; a change of the task mix (per-task
//!    samples of 4 tasks in a row beyond a factor of 2 from φ, on one side)
//!    restarts the estimate from them; when it raised φ, the target comes
//!    down to the burst ceiling at once (no shrink hysteresis: the surplus
//!    workers would run, not idle). Keeping the cores busy takes
//!    `cores / φ` workers on average; the *ceiling* is the fewest workers
//!    that, all busy and each runnable with probability φ, keep every core
//!    busy 99% of the time (a binomial count; a blocked-to-compute ratio
//!    of up to 0.25 is a dead band, as VM steal time reads as blocking), so
//!    CPU-bound work (φ ≈ 1) gets exactly `cores`, and an oversubscribed
//!    CPU-bound pool still reads φ ≈ 1 (its wait is run delay): no feedback
//!    loop. Without run-delay data φ may only fall on windows with at most
//!    `cores` busy workers; with it, thread totals of a window whose run
//!    delay is a tenth of its wanted CPU time or more, or from a window in
//!    which the machine had no free core, are no evidence (a wait for a
//!    core is credited only once the core is back), so on an
//!    oversubscribed machine φ waits for the per-task samples.
//! 2. **Demand by Little's law.** The offered load is `a = λ·S` busy workers
//!    (arrival rate × mean service); the demand size is the smallest `n` whose
//!    Erlang-C wait probability is at most 1% (so the 99th percentile task
//!    does not wait), capped by the ceiling.
//! 3. **Bursts are met by spawning.** The pool spawns on demand (a task waits,
//!    nobody idle) up to the *burst ceiling* the policy sets as its spawn limit:
//!    while no backlog is sustained, the fewest workers that keep every core
//!    busy 90% of the time (the pool keeps up, and workers past that only
//!    share the cores by time slices, stretching every running task; the
//!    demand size stops there too); under a saturated sustained backlog, the
//!    ceiling; under a *sustained backlog* (every tick for 75 ms found one,
//!    or the queue takes the workers 75 ms to start) while the workers do
//!    not want every core (CPU time plus run delay below the window times
//!    the cores), the ceiling stretched by contention (point 8) and at
//!    least `2 × cores`: runnable workers past the cores then fill
//!    the gaps blocking and the scheduler leave, where in a short burst of
//!    CPU-bound work they would only share the cores by time slices (and
//!    lengthen every task of the burst). Each spawn calls the policy, which
//!    adopts the new worker
//!    into the target (it is kept, not re-created for the next burst) and
//!    injects escalating extra ones (0, 1, 3, 7, …, never more than the tasks
//!    waiting).
//! 4. **Backlog.** When tasks queue with nobody idle at a tick under real
//!    pressure (more arrivals than completions, or waits as long as service),
//!    grow by an escalating step (1, 2, 4, … 16) toward the burst ceiling.
//!    Neither backlog growth nor injection happens while the pool's workers
//!    use ≥ 90% of the cores: more threads cannot add throughput then.
//! 5. **Throughput feedback under backlog** (backlogged windows pooled
//!    into spans of ≥ 30 completions; point 9 while others hold the
//!    cores). If a ≥ 25% larger pool did
//!    not deliver a quarter of the proportional throughput gain although enough
//!    tasks were queued to show it, the smaller size becomes a cap (tasks that
//!    block on a shared resource). Growth up to `2 × cores` (point 3) need
//!    only not lose throughput, while others hold less than half the
//!    machine: the 8–15% it brings is less than a quarter. The cap is
//!    forgotten after 5 s so the size is probed again; each confirmation
//!    doubles its memory (up to 60 s).
//! 6. **Shrink with hysteresis.** A smaller size is applied only after 2 s of
//!    consecutive low-demand ticks (ticks are every 25 ms), half the gap at a
//!    time every further 0.5 s; surplus workers keep a 2 s keep-alive. Threads
//!    are created once per level of load, not once per burst.
//! 7. **Short scheduler slices for blocking work.** Once φ is settled below
//!    0.75, the workers ask the scheduler for 100 µs slices (Linux EEVDF), so
//!    a woken worker starts its task sooner; above 0.85, the default again.
//!    Only while contention is low (below 0.25; default again above 0.4):
//!    beside other processes, short-sliced workers lost throughput. Not
//!    while the workers use 90% of the cores: a woken worker finds no free
//!    core to start on sooner.
//! 8. **Contention.** While the workers leave a tenth of the cores unused,
//!    the share of their wanted CPU time spent waiting for a core is time
//!    other processes hold it (smoothed). A pool then wins CPU in
//!    proportion to its runnable workers, so a sustained backlog may grow
//!    past the ceiling: to the ceiling on `cores / (1 − contention)` cores
//!    (at most `2 × cores`). Bursts stop at the ceiling: in a burst the
//!    reading is mostly the workers' own queueing for the cores.
//! 9. **Growth stops where it cannot help** (`growth.rs`). Never more
//!    workers than the peak of tasks present (queued or running) over the
//!    last 2–4 s plus one per core: a worker woken for a task another took
//!    reads busy, so spawns alone overshoot (8 clients grew 43 workers).
//!    And while the machine's cores are ≥ 90% busy (`/proc/stat`, read over
//!    spans of ≥ 12 ms pooled across calls) with other processes holding a
//!    tenth or more, blocking may be a wait on one of them (a database on
//!    the same cores: φ 0.02, ceiling past 150): growth then goes only to
//!    twice the last size measured with every worker given a task (≥ 50 ms
//!    from a tick after the size last changed and no new worker is in its
//!    start hook or first task, which carry its setup, for up to 0.5 s; two completions
//!    per worker),
//!    and is kept only if throughput rose by a quarter of the proportional
//!    gain (up to `2 × cores`, did not fall: point 5), judged once the pool
//!    is 1.6 times that size (smaller steps are within the noise; a span
//!    with idle workers is a verdict but never a base); otherwise the pool
//!    goes back to the measured size at once, which becomes the learned
//!    cap. A size the pool reached before proof
//!    began doubles only after a trial of half of it (point 10) served
//!    less, while one may come. Tasks that block on something else double
//!    every ~50 ms. On such a machine thread totals are no evidence of
//!    blocking either (point 1), and a change of φ is no new mix for the
//!    proof and the cap (until the machine frees up), nor takes the pool
//!    below the size last measured with every worker busy: waits in a
//!    saturated database stretch with the size itself (φ halves with each
//!    doubling). A throughput at the measured size half what it was is:
//!    other tasks.
//!    Proof, once needed, lasts until the machine is below 75% busy or the
//!    others below 5%, and through the first second of a trial of other
//!    sizes (point 10), whose own doing the machine's reading then is.
//! 10. **Other sizes on trial** (`descent.rs`). While growth needs proof
//!     and other processes hold half the machine or more, the pool tries
//!     half its size (over spans of 200 ms): kept if it
//!     serves at least as much, else back at once (at its first tick if
//!     that serves a quarter less), and the next trial waits
//!     5 s, twice as long after each failure (at most 60 s; at once if
//!     the pool doubled while the machine read free); half that
//!     served less but not a quarter less is followed at once by three
//!     quarters, the best size lying between; a doubling that raised
//!     throughput, but not enough, by four thirds (kept if they raise it
//!     by a quarter of their proportional gain, then the next step). A
//!     pool that grew before the machine read busy comes down to what the
//!     database serves.
//!
//! **Bounds, one name each.** `min`/`max`: the user's bounds. *Ceiling*
//! ([`Auto::ceiling`]): the useful concurrency φ allows. *Burst ceiling*:
//! how far bursts and backlog may go (the cores busy 90% of the time
//! without a sustained backlog; the ceiling under a saturated one; under a sustained
//! backlog while the cores are not saturated, the ceiling on the cores
//! stretched by contention, and at least `2 × cores`). *Spawn limit* ([`Auto::spawn_limit`]): sent to
//! the pool as [`Decision::spawn_limit`], where on-demand spawning stops;
//! the pool keeps it inside the user's bounds, which `auto` never changes. *Learned cap*: the
//! size past which growth did not raise throughput. *Growth bound*: the
//! tasks present plus one per core, and the proof gate (point 9).
//!
//! | file | idea |
//! |---|---|
//! | `mod.rs` | parameters, state, the decision on each tick and each spawn |
//! | `phi.rs` | the compute-share (φ) estimate and the ceiling it gives |
//! | `feedback.rs` | the throughput feedback loop and the learned cap |
//! | `contention.rs` | the share of the cores other processes take |
//! | `growth.rs` | where growth stops: the tasks present, proof on a busy machine |
//! | `descent.rs` | fewer workers on trial while growth needs proof |
//! | `../queueing.rs` | Erlang C and the binomial core count (shared with `hisdyn`) |
//! | `tests.rs` | scripted observations |

use std::time::Duration;

pub use super::queueing::{cores_busy_workers, erlang_c_servers};
use super::{Decision, Observation, Schedule, SizingPolicy, Trigger};
use feedback::{Pending, Probe};
use growth::{MachineSpan, Peak, Proof};
use phi::{PendingSample, Smoothed};

mod contention;
mod descent;
mod feedback;
mod growth;
mod phi;
#[cfg(test)]
mod tests;

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
/// The same probability for the *burst* ceiling, where bursts stop while
/// the backlog is not sustained: there the pool keeps up, and each worker
/// past the cores' need shares them by time slices with the others and
/// stretches every running task, where a task queued a moment waits only
/// its own turn. On `shift` and `bursty` (tasks computing 30–40% of the
/// time, 1.2–1.6 cores offered) static pools of 8 gave a lower p99
/// turnaround than 12 or 16 (`docs/policies.md`, "`auto` (default)").
const BURST_CORES_BUSY_PROBABILITY: f64 = 0.9;
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
/// starts its task sooner (`docs/notebook/policies.md`, "Short scheduler slices").
const SHORT_SLICE: Duration = Duration::from_micros(100);
/// φ below which the workers ask for [`SHORT_SLICE`]...
const SHORT_SLICE_BELOW: f64 = 0.75;
/// ...and above which they ask for the system default again.
const DEFAULT_SLICE_ABOVE: f64 = 0.85;
/// Contention below which short slices may be asked for...
const SHORT_SLICE_CONTENTION_BELOW: f64 = 0.25;
/// ...and above which the workers go back to the default slice: sharing
/// the cores with other processes, short-sliced workers lost up to half
/// their throughput (`docs/notebook/policies.md`, "Short scheduler slices under contention").
const DEFAULT_SLICE_CONTENTION_ABOVE: f64 = 0.4;
/// Shortest window the thread-level φ estimate uses.
const MIN_THREAD_WINDOW: Duration = Duration::from_millis(5);
/// Sampled tasks needed before the sample's compute share replaces the
/// starting guess (a smaller sample is weighed with it).
const FIRST_SAMPLE_TASKS: u64 = 4;
/// Factor by which the compute share of consecutive per-task samples must
/// differ from φ, all on one side, to read as a change of the task mix...
const SHIFT_FACTOR: f64 = 2.0;
/// ...once they hold this many tasks (one odd task is not a change)...
const SHIFT_TASKS: u64 = 4;
/// ...and span this much time: longer than a stall of the virtual machine.
/// A stall stops every worker at once, so the tasks in flight all read as
/// blocked in one window. Measured in `tests/policies.rs`
/// (`auto_stays_near…`, 3 failures in 80 runs): a tick of CPU-bound 1 ms tasks
/// read φ = 0.05, with ~24 ms of its 25 ms neither CPU time nor run delay,
/// and the pool spawned 38 workers on 2 cores before the next samples took
/// φ back to 1. Two ticks of a real change span 50 ms.
const SHIFT_SPAN: Duration = Duration::from_millis(40);
/// Share of a window's wanted CPU time (CPU time plus run delay) spent
/// waiting for a core from which its thread totals are no evidence of
/// blocking. On an oversubscribed machine a worker waiting for a core has
/// no run delay credited yet (the kernel adds it when the worker gets a
/// core back), and a stalled process gets neither CPU time nor run delay:
/// either reads as blocking. Measured in `tests/policies.rs`
/// (`auto_stays_near…`, 10 failures in 260 runs at load 15–38 on 2
/// cores): first windows of 1 ms CPU-bound tasks read φ = 0.01–0.6 from
/// thread totals whose run delay was a quarter to ten times their CPU time,
/// or which had neither, and the pool spawned up to 52 workers before
/// per-task samples (whose waits are all credited: a task's end is read
/// on a core) took φ back to 1. Blocking work on a quiet machine waits for
/// a core a few percent of its CPU time (wake-ups) and still learns early;
/// on a contended one it waits for its first finished tasks.
const CONTENDED_DELAY_SHARE: f64 = 0.1;
/// Busy time needed in a window before φ is trusted.
const MIN_BUSY_FOR_CPU: Duration = Duration::from_millis(2);
/// A sustained backlog may take the pool to this many workers per core even
/// for CPU-bound work, while the pool's workers do not saturate the cores:
/// runnable workers past the cores fill the gaps blocking and the
/// scheduler leave (on the quiet 2-core machine a static pool of 2 served
/// `sat10` and `overload` 8–12% slower than 4–16).
const BURST_CORES: usize = 2;
/// A backlog found at every tick for this long is sustained, and so is a
/// queue that takes the workers this long to start. Shorter backlogs are
/// bursts: CPU-bound work spread over more workers than cores then only
/// shares the cores by time slices, which lengthens every task.
const SUSTAINED_BACKLOG: Duration = Duration::from_millis(75);
/// Largest factor by which contention (other processes holding the cores)
/// stretches the cores the burst ceiling is sized for: CPU-bound work then
/// gets at most `2 × cores`, like the burst floor.
const MAX_CONTENTION_STRETCH: f64 = 2.0;
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
/// Largest size searched when the pool has no upper bound.
const SEARCH_MAX: usize = 100_000;

/// tidepool's default sizing policy (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Auto {
    /// The user's lower bound.
    min: usize,
    /// The user's upper bound (`usize::MAX`: none).
    max: usize,
    cores: usize,
    target: usize,
    spawn_limit: usize,
    arrival_rate: Smoothed,
    service: Smoothed,
    cpu_fraction: Smoothed,
    /// Share of the workers' wanted CPU time lost to other processes.
    contention: Smoothed,
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
    /// Samples that disagree with φ on one side (`true`: higher), pooled
    /// until they are enough to read as a change of the task mix.
    shift: Option<(bool, PendingSample)>,
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
    /// The first of the consecutive ticks that found a backlog (`None`:
    /// the last tick found none).
    backlog_since: Option<Duration>,
    /// Whether the last call found tasks queued, with nobody idle, that
    /// the workers it saw take at least [`SUSTAINED_BACKLOG`] to start.
    deep_queue: bool,
    probe: Option<Probe>,
    pending: Pending,
    learned_cap: Option<(usize, Duration)>,
    cap_memory: Duration,
    sent_spawn_limit: Option<usize>,
    /// Whether a change of the task mix raised φ since the last tick.
    mix_rose: bool,
    /// Whether the workers should ask for the short scheduler slice.
    short_slice: bool,
    /// Share of the whole machine's CPU time busy (smoothed).
    machine: Smoothed,
    /// Whether the last window long enough to tell found the machine busy.
    machine_was_busy: bool,
    /// Calls' machine-wide readings pooled until they span enough time.
    machine_span: MachineSpan,
    /// Share of the machine's CPU time busy with other processes than the
    /// pool's workers (smoothed).
    others: Smoothed,
    /// The recent peak of tasks present.
    peak: Peak,
    /// Growth that must prove itself while others hold the cores.
    proof: Proof,
    /// Whether growth needs proof (entered and left with hysteresis).
    proving: bool,
    /// Whether the spawn limit is the tasks present lately plus one per
    /// core (a burst lifts it: the pool calls when it reaches it).
    at_tasks_present: bool,
    /// The last call at the spawn limit changed nothing: no more such calls
    /// until the next tick. Each takes a statistics snapshot (0.3 ms at about
    /// 70 workers), and 64 clients at the tasks present raised 270 a second,
    /// 9% of a core beside a database that needed it; a burst is seen at the
    /// first call.
    at_max_held: bool,
    /// What the pool was last told about the slice.
    sent_short_slice: bool,
}

impl Auto {
    /// The default policy; it learns everything from the pool.
    pub fn new() -> Self {
        Auto {
            min: 1,
            max: usize::MAX,
            cores: 1,
            target: 1,
            spawn_limit: 1,
            arrival_rate: Smoothed::starting_at(0.0),
            service: Smoothed::starting_at(0.0),
            // Until measured, assume CPU-bound: the cautious guess.
            cpu_fraction: Smoothed::starting_at(1.0),
            contention: Smoothed::starting_at(0.0),
            compute_sum: 0.0,
            wanted_sum: 0.0,
            // The CPU-bound guess as a prior worth a few ms of task time: a
            // single short, noisy window cannot make φ small on its own.
            prior: PRIOR_BUSY.as_secs_f64(),
            sampled: false,
            pending_sample: PendingSample::default(),
            shift: None,
            sampled_tasks: 0,
            completions_seen: 0,
            last_busy: 0,
            measured: false,
            saturated: false,
            step: 1,
            injection: 0,
            low_for: Duration::ZERO,
            backlog_since: None,
            deep_queue: false,
            probe: None,
            pending: Pending::default(),
            learned_cap: None,
            cap_memory: CAP_MEMORY,
            sent_spawn_limit: None,
            mix_rose: false,
            short_slice: false,
            sent_short_slice: false,
            machine: Smoothed::starting_at(0.0),
            machine_was_busy: false,
            machine_span: MachineSpan::default(),
            others: Smoothed::starting_at(0.0),
            peak: Peak::default(),
            proof: Proof::default(),
            proving: false,
            at_tasks_present: false,
            at_max_held: false,
        }
    }

    /// The target size the policy last asked for.
    pub fn target(&self) -> usize {
        self.target
    }

    /// The spawn limit the policy last asked for
    /// ([`Decision::spawn_limit`]; inside the user's bounds).
    pub fn spawn_limit(&self) -> usize {
        self.spawn_limit
    }

    /// The user's bounds as the pool enforces them now: read at every
    /// call, as the user may change them at any time
    /// (`Pool::set_min_threads`). `auto` moves only its spawn limit; its
    /// target follows new bounds at once, as the pool's did.
    fn read_bounds(&mut self, obs: &Observation) {
        (self.min, self.max) = obs.user_bounds();
        self.target = self.clamp(self.target);
        self.spawn_limit = self.clamp(self.spawn_limit);
    }

    fn clamp(&self, n: usize) -> usize {
        n.clamp(self.min, self.max)
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
        self.learn_machine(obs);
        self.prove(obs);
        self.learn_phi(obs);
        self.learn_contention(obs);
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
        erlang_c_servers(offered, WAIT_PROBABILITY, self.max.min(SEARCH_MAX))
    }

    fn tick(&mut self, obs: &Observation) -> Decision {
        let pressure = obs.arrivals > obs.completions
            || matches!((obs.mean_wait, obs.mean_service), (Some(w), Some(s)) if w >= s);
        // A queue that takes the workers 75 ms to start is pressure in
        // itself, whatever a (possibly tiny) window's counts say: a tick
        // that comes just after a spawn's call sees a window of
        // microseconds with no arrival in it.
        let deep = self.queue_is_deep(obs);
        let backlog = obs.queue_len > 0 && obs.idle == 0 && (pressure || deep);
        let ceiling = self.ceiling();
        let mut why = "demand";

        self.backlog_since = if backlog {
            self.backlog_since.or(Some(obs.now))
        } else {
            None
        };
        self.deep_queue = backlog && deep;
        // Under a sustained backlog every moment a core idles is lost
        // throughput: the cores are saturated only once the workers want
        // every one of them (running or waiting for one), not at 90% use —
        // 2 workers of tasks that compute 90% of the time use 90% of 2
        // cores and leave the rest idle while tasks wait (`sat10`).
        self.saturated = utilization(obs).is_some_and(|u| u >= CPU_SATURATED)
            && !(self.sustained_backlog(obs.now) && leaves_a_core_unwanted(obs));
        // Demand stops where bursts do: past the burst ceiling, workers
        // of a pool that keeps up only share the cores.
        // Workers blocked in place serve nobody: the demand is for
        // available workers, on top of them.
        let mut desired = self
            .demand(obs)
            .min(ceiling)
            .min(self.burst_ceiling(ceiling, obs.now))
            .saturating_add(obs.blocked);
        let old = self.target;
        if self.follow_mix_change(ceiling, obs.now) {
            why = "the mix changed: surplus past the ceiling";
        }
        let moved = self.follow_proof();
        if backlog {
            // While growth must prove itself, its longer spans decide.
            if !self.needs_proof() {
                self.feedback(obs);
            }
            if !self.saturated {
                let grown = (obs.live.max(self.target) + self.step)
                    .min(self.burst_ceiling(ceiling, obs.now));
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
        let bound = self.growth_bound();
        if desired > bound {
            desired = bound;
            why = if self.needs_proof() {
                "growth unproven while others hold the cores"
            } else {
                "no more workers than tasks present"
            };
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
        self.set_spawn_limit(ceiling, obs.now);
        self.emit(old, ceiling, moved.as_deref().unwrap_or(why))
    }

    fn starved(&mut self, obs: &Observation) -> Decision {
        let old = self.target;
        // A spawn means a task found nobody idle.
        self.deep_queue = self.queue_is_deep(obs);
        // φ may have just been learned from this window (the first spawns
        // come before the first tick): the limit follows the ceiling, which
        // depends on φ only, so spawns cannot ratchet it up.
        let ceiling = self.ceiling();
        self.set_spawn_limit(ceiling, obs.now);
        // Adopt the worker the pool just spawned (it raised its target to
        // the live workers). Not workers past the target that have yet to
        // finish their task and leave: at its limit, the pool calls with
        // them still counted live, and adopting them undid each step down
        // (81 workers back to 45 and, 4 ms later, to 81 again).
        let present = obs.live.min(obs.target);
        let mut desired = present.max(self.target);
        // Until φ is measured, only adopt: each further spawn then calls
        // again with a longer window to measure it, where injecting up to
        // the limit at once would silence the pool until the next tick.
        if !self.saturated && self.measured {
            // 1, 3, 7, 15, …: inject 0, 1, 3, 7, … extra workers.
            self.injection = (self.injection * 2 + 1).min(2 * MAX_STEP - 1);
            let extra = (self.injection / 2).min(obs.queue_len);
            desired = (present + extra).max(desired);
            // Tasks wait with nobody idle: go straight to what the traffic
            // needs (at a run's start, as soon as φ is known) rather than
            // escalating one spawn at a time.
            desired = desired.max(self.demand(obs));
        }
        // Within the spawn limit set at the last tick, and where growth
        // stops now (the tasks present, proof).
        // A worker spawned before a trial of fewer workers began leaves.
        let bound = self
            .trial_size()
            .unwrap_or_else(|| self.growth_bound().max(present));
        let mut desired = self.clamp(desired.min(self.spawn_limit.max(present)).min(bound));
        if let Some(cap) = self.learned_cap(obs.now) {
            // The cap stops further growth; a worker already spawned (the
            // limit was higher when it came) is kept, not retired at once
            // to be spawned again by the next backlog: the shrink
            // hysteresis takes the surplus down.
            desired = desired.min(cap.max(old).max(present));
        }
        self.target = desired.max(old);
        self.low_for = Duration::ZERO;
        self.emit(old, ceiling, "starved: adopt and inject")
    }

    /// How far bursts and backlog may take the pool: without a sustained
    /// backlog, the workers that keep the cores busy 90% of the time
    /// ([`BURST_CORES_BUSY_PROBABILITY`]); under a saturated sustained
    /// backlog, the ceiling; under a
    /// sustained backlog while the pool's workers leave a tenth of the
    /// cores unused, the ceiling on the cores stretched by contention
    /// (other processes hold them, and a pool wins CPU in proportion to its
    /// runnable workers), and at least `2 × cores`. Never past the user's
    /// `max`. `ceiling` is [`Auto::ceiling`], computed once per call (a
    /// binomial search).
    fn burst_ceiling(&self, ceiling: usize, now: Duration) -> usize {
        if !self.sustained_backlog(now) {
            // A burst: workers past the cores' need would share them by
            // time slices and lengthen its tasks (contention measured in
            // a burst is mostly the workers' own queueing for the cores).
            self.ceiling_at(BURST_CORES_BUSY_PROBABILITY).min(ceiling)
        } else if !self.saturated {
            self.clamp(
                self.contended_ceiling(ceiling)
                    .max(BURST_CORES * self.cores),
            )
        } else {
            // Saturated: every core is wanted, and more workers would only
            // share them.
            ceiling
        }
    }

    /// After a change of the task mix raised φ, the target comes down to
    /// the burst ceiling at once, not after the shrink hysteresis: workers
    /// past it are not idle spares for the next burst but runnable ones
    /// that share the cores by time slices and stretch every running task
    /// (on `shift` the pool kept the 17 workers of its I/O-bound first half
    /// for the whole CPU-heavier second half). While growth needs proof,
    /// not below the size last measured with every worker given a task.
    /// Returns whether it moved.
    fn follow_mix_change(&mut self, ceiling: usize, now: Duration) -> bool {
        if !std::mem::take(&mut self.mix_rose) {
            return false;
        }
        let mut limit = self.burst_ceiling(ceiling, now);
        if self.needs_proof() {
            // φ there moves with the size (`phi.rs`): keep the size last
            // measured with every worker given a task.
            limit = limit.max(self.measured_size());
        }
        if self.target <= limit {
            return false;
        }
        self.target = self.clamp(limit);
        self.low_for = Duration::ZERO;
        true
    }

    /// Whether the backlog is sustained by `now`: the ticks have found one
    /// without a break for [`SUSTAINED_BACKLOG`], or the queue the last
    /// call saw takes the workers that long to start (it lasts that long
    /// whatever comes next, so waiting for it to prove so only loses time).
    fn sustained_backlog(&self, now: Duration) -> bool {
        self.deep_queue
            || self
                .backlog_since
                .is_some_and(|since| now.saturating_sub(since) >= SUSTAINED_BACKLOG)
    }

    /// Whether the tasks queued in `obs` take its workers at least
    /// [`SUSTAINED_BACKLOG`] to start: `queue_len` over the window's
    /// completion rate, or — in a window too short to have one — tasks of
    /// the smoothed mean service, `live` at a time. The rate first: the
    /// first tasks to finish are the short ones, and at a run's start the
    /// smoothed service read 0.6 ms for `sat10`'s 2 ms tasks.
    fn queue_is_deep(&self, obs: &Observation) -> bool {
        if obs.idle > 0 || obs.queue_len == 0 {
            return false;
        }
        let queued = obs.queue_len as f64;
        let to_start = if obs.window >= MIN_THREAD_WINDOW && obs.completions > 0 {
            queued * obs.window.as_secs_f64() / obs.completions as f64
        } else {
            queued * self.service.value / obs.live.max(1) as f64
        };
        to_start >= SUSTAINED_BACKLOG.as_secs_f64()
    }

    /// Where on-demand spawning stops: the burst ceiling, a fresh learned
    /// cap, or where growth stops now ([`Auto::growth_bound`]), never
    /// below the target. Notes whether the tasks present are what binds.
    fn set_spawn_limit(&mut self, ceiling: usize, now: Duration) {
        let cap = self.learned_cap(now).unwrap_or(usize::MAX);
        let others = self.burst_ceiling(ceiling, now).min(cap);
        let bound = self.growth_bound();
        // A burst lifts the tasks present, not proof or a learned cap.
        self.at_tasks_present = bound < others && bound == self.present_bound();
        self.spawn_limit = others.min(bound).max(self.target);
    }

    fn emit(&mut self, old: usize, ceiling: usize, why: &str) -> Decision {
        let limit = self.spawn_limit.max(self.target);
        self.spawn_limit = limit;
        let slice = (self.short_slice != self.sent_short_slice).then(|| {
            self.sent_short_slice = self.short_slice;
            if self.short_slice {
                SHORT_SLICE
            } else {
                Duration::ZERO
            }
        });
        if self.target == old && Some(limit) == self.sent_spawn_limit && slice.is_none() {
            return Decision::hold();
        }
        self.sent_spawn_limit = Some(limit);
        Decision {
            target: Some(self.target),
            spawn_limit: Some(limit),
            worker_slice: slice,
            reason: format!(
                "auto: {why} (phi {:.2}, ceiling {ceiling}, spawn limit {limit})",
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

/// Whether the workers wanted fewer cores than there are over the window:
/// CPU time plus run delay (the time runnable but waiting for a core) less
/// than the window times the cores. `false` without run-delay data.
fn leaves_a_core_unwanted(obs: &Observation) -> bool {
    let (Some(cpu), Some(delay)) = (obs.worker_cpu_time, obs.run_delay) else {
        return false;
    };
    (cpu + delay).as_secs_f64() < obs.window.as_secs_f64() * obs.cores.max(1) as f64
}

/// CPU use of the pool's workers over the window, as a fraction of all cores.
fn utilization(obs: &Observation) -> Option<f64> {
    let cpu = obs.worker_cpu_time?.as_secs_f64();
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
            // So must a pool stuck at the tasks present lately plus one
            // per core: a burst raises them.
            on_at_max: !self.settled() || (self.at_tasks_present && !self.at_max_held),
            ..Schedule::default()
        }
    }

    fn decide(&mut self, obs: &Observation) -> Decision {
        match obs.trigger {
            Trigger::Start => {
                self.read_bounds(obs);
                self.cores = obs.cores.max(1);
                self.target = self.clamp(self.cores);
                self.set_spawn_limit(self.ceiling(), obs.now);
                self.sent_spawn_limit = Some(self.spawn_limit);
                Decision {
                    target: Some(self.target),
                    spawn_limit: Some(self.spawn_limit),
                    keep_alive: Some(KEEP_ALIVE),
                    grow_on_demand: Some(true),
                    reason: "auto: one worker per core to start".into(),
                    ..Decision::default()
                }
            }
            Trigger::Tick | Trigger::Completions | Trigger::Retired => {
                if obs.trigger == Trigger::Tick {
                    self.at_max_held = false;
                }
                self.read_bounds(obs);
                self.learn(obs);
                self.choose_slice(obs);
                self.tick(obs)
            }
            Trigger::Starved | Trigger::AtMax => {
                self.read_bounds(obs);
                self.learn(obs);
                self.choose_slice(obs);
                let decision = self.starved(obs);
                if obs.trigger == Trigger::AtMax {
                    self.at_max_held = decision.is_hold();
                }
                decision
            }
        }
    }
}
