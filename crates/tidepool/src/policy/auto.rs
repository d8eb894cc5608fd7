//! `auto` — tidepool's default policy: no parameters, sized from what the pool
//! measures. The design (see `docs/policies.md` for the argument):
//!
//! 1. **Useful concurrency from CPU use.** A busy worker is on a CPU a fraction
//!    φ of its time ([`Observation::cpu_fraction`]); to keep about `cores`
//!    workers runnable the pool needs `cores / φ` workers. The *ceiling*
//!    `cores + cores·(1/φ − 1)·1.25` adds headroom on the blocked part only, so
//!    a CPU-bound load (φ ≈ 1) gets exactly `cores`. φ may only *fall* on a
//!    window where no more than `cores` workers were busy on average: with
//!    more, time spent waiting for a CPU (behind our own threads or other
//!    processes) inflates busy time and would make φ look small, a feedback
//!    loop that would grow a CPU-bound pool without end. It may rise any time.
//! 2. **Demand by Little's law.** The offered load is `a = λ·S` busy workers
//!    (arrival rate × mean service); the demand size is the smallest `n` whose
//!    Erlang-C wait probability is at most 5%, capped by the ceiling.
//! 3. **Backlog.** When tasks queue with nobody idle at a tick and the queue
//!    is real pressure (more arrivals than completions, or tasks waiting at
//!    least as long as they run), grow by an escalating step (1, 2, 4, … up to
//!    16) toward the ceiling — never while the CPU is saturated (more threads
//!    cannot add throughput then).
//! 4. **Throughput feedback refines, only under backlog.** If a ≥25% larger
//!    pool did not deliver a quarter of the proportional throughput gain, the
//!    smaller size is remembered as a cap (tasks that block on a shared
//!    resource: more threads, no more work done) and the pool shrinks to it
//!    through the usual hysteresis. The cap is forgotten after 5 s so the size
//!    is probed again; each time the probe confirms it, the memory doubles (up
//!    to 60 s), so a pointless size is not re-created every few seconds.
//! 5. **Starvation.** The pool spawns on demand up to a spawn limit that the
//!    policy sets as `max` at each tick: `min(ceiling, max(2·target,
//!    target + 4))`, room for a burst without letting a burst run away. Each
//!    on-demand spawn calls the policy, which adopts the new worker into the
//!    target (so it is kept, not re-created for the next burst) and injects
//!    escalating extra ones (0, 1, 3, 7, … never more than the tasks waiting,
//!    never past the spawn limit) until a calm tick.
//! 6. **Shrink with hysteresis.** A smaller size is applied only after 1 s of
//!    consecutive low-demand ticks (ticks are every 50 ms), half the gap at a
//!    time every further 0.5 s, and surplus workers still get a 1 s
//!    keep-alive: threads are not created and destroyed over and over.

use std::time::Duration;

use super::{Decision, Observation, Schedule, SizingPolicy, Trigger};

/// How often `auto` looks at the pool.
const TICK: Duration = Duration::from_millis(50);
/// Time constant of the smoothed estimates.
const SMOOTHING: Duration = Duration::from_millis(500);
/// Erlang-C wait probability the demand size aims for.
const WAIT_PROBABILITY: f64 = 0.05;
/// Headroom on the blocked share of the ceiling.
const BLOCKED_HEADROOM: f64 = 1.25;
/// Smallest φ believed (the ceiling is then 50 × cores at most).
const MIN_CPU_FRACTION: f64 = 0.02;
/// Process CPU use (of all cores) from which the CPU counts as saturated.
const CPU_SATURATED: f64 = 0.9;
/// Busy time needed in a window before φ is trusted.
const MIN_BUSY_FOR_CPU: Duration = Duration::from_millis(5);
/// Largest escalating step.
const MAX_STEP: usize = 16;
/// Sustained low demand (consecutive low ticks) before a shrink.
const SHRINK_AFTER: Duration = Duration::from_secs(1);
/// Keep-alive of workers above the target.
const KEEP_ALIVE: Duration = Duration::from_secs(1);
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

/// A throughput sample taken under backlog.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Probe {
    threads: usize,
    throughput: f64,
}

/// tidepool's default sizing policy (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Auto {
    floor: usize,
    ceiling: usize,
    cores: usize,
    target: usize,
    limit: usize,
    arrival_rate: Smoothed,
    service: Smoothed,
    cpu_fraction: Smoothed,
    step: usize,
    injection: usize,
    low_for: Duration,
    probe: Option<Probe>,
    learned_cap: Option<(usize, Duration)>,
    cap_memory: Duration,
    sent_limit: Option<usize>,
}

impl Auto {
    /// The default policy; it learns everything from the pool.
    pub fn new() -> Self {
        Auto {
            floor: 1,
            ceiling: usize::MAX,
            cores: 1,
            target: 1,
            limit: 1,
            arrival_rate: Smoothed::starting_at(0.0),
            service: Smoothed::starting_at(0.0),
            // Until measured, assume CPU-bound: the cautious guess.
            cpu_fraction: Smoothed::starting_at(1.0),
            step: 1,
            injection: 0,
            low_for: Duration::ZERO,
            probe: None,
            learned_cap: None,
            cap_memory: CAP_MEMORY,
            sent_limit: None,
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

    /// The smoothed fraction of busy time spent on a CPU.
    pub fn cpu_fraction(&self) -> f64 {
        self.cpu_fraction.value
    }

    /// The useful-concurrency ceiling `cores + cores·(1/φ − 1)·headroom`.
    pub fn ceiling(&self) -> usize {
        let phi = self.cpu_fraction.value.clamp(MIN_CPU_FRACTION, 1.0);
        let cores = self.cores as f64;
        let n = cores + cores * (1.0 / phi - 1.0) * BLOCKED_HEADROOM;
        self.clamp((n - 1e-9).ceil() as usize)
    }

    fn clamp(&self, n: usize) -> usize {
        n.clamp(self.floor, self.ceiling)
    }

    /// Feed the window's samples into the smoothed estimates.
    fn learn(&mut self, obs: &Observation, utilization: Option<f64>) {
        let secs = obs.window.as_secs_f64();
        if secs > 0.0 {
            self.arrival_rate
                .update(obs.arrivals as f64 / secs, obs.window);
        }
        if let Some(s) = obs.mean_service {
            self.service.update(s.as_secs_f64(), obs.window);
        }
        if obs.busy_time < MIN_BUSY_FOR_CPU || secs <= 0.0 {
            return;
        }
        if let Some(phi) = obs.cpu_fraction() {
            // Average number of workers busy over the window.
            let concurrency = obs.busy_time.as_secs_f64() / secs;
            let uncontended =
                concurrency <= self.cores as f64 && utilization.is_some_and(|u| u < CPU_SATURATED);
            if uncontended || phi > self.cpu_fraction.value {
                self.cpu_fraction.update(phi, obs.window);
            }
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
        erlang_c_servers(offered, WAIT_PROBABILITY, self.ceiling.min(SEARCH_LIMIT))
    }

    /// The learned throughput cap, if still fresh.
    fn learned_cap(&self, now: Duration) -> Option<usize> {
        self.learned_cap
            .and_then(|(cap, until)| (now < until).then_some(cap))
    }

    /// Under backlog, compare throughput with the last backlogged window.
    fn feedback(&mut self, obs: &Observation) {
        if obs.completions < FEEDBACK_MIN_COMPLETIONS || obs.window.is_zero() {
            return;
        }
        let now = Probe {
            threads: obs.live.max(1),
            throughput: obs.throughput(),
        };
        if let Some(before) = self.probe {
            let growth = now.threads as f64 / before.threads as f64 - 1.0;
            if growth >= FEEDBACK_MIN_GROWTH {
                let expected = before.throughput * (1.0 + FEEDBACK_MIN_GAIN * growth);
                if now.throughput < expected {
                    let confirmed = self.learned_cap.is_some();
                    if confirmed {
                        self.cap_memory = (self.cap_memory * 2).min(MAX_CAP_MEMORY);
                    }
                    let cap = before.threads.max(self.floor);
                    self.learned_cap = Some((cap, obs.now + self.cap_memory));
                } else {
                    // Growth paid: forget any cap and its long memory.
                    self.learned_cap = None;
                    self.cap_memory = CAP_MEMORY;
                }
            }
        }
        self.probe = Some(now);
    }

    fn tick(&mut self, obs: &Observation, utilization: Option<f64>) -> Decision {
        let saturated = utilization.is_some_and(|u| u >= CPU_SATURATED);
        let pressure = obs.arrivals > obs.completions
            || matches!((obs.mean_wait, obs.mean_service), (Some(w), Some(s)) if w >= s);
        let backlog = obs.queue_len > 0 && obs.idle == 0 && pressure;
        let ceiling = self.ceiling();
        let mut desired = self.demand(obs).min(ceiling);
        let mut why = "demand";

        if backlog {
            self.feedback(obs);
            if !saturated {
                let grown = (obs.live.max(self.target) + self.step).min(ceiling);
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
        }
        if let Some(cap) = self.learned_cap(obs.now) {
            if desired > cap {
                desired = cap;
                // Re-probe gently once the cap expires.
                self.step = 1;
                why = "throughput stopped growing";
            }
        }
        if saturated {
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
                self.target -= (gap / 2).max(1);
                // Keep shrinking every half second while demand stays low.
                self.low_for = SHRINK_AFTER / 2;
                why = "shrink after sustained low demand";
            }
        }
        self.limit = spawn_limit(self.target, ceiling);
        self.emit(old, ceiling, why)
    }

    fn starved(&mut self, obs: &Observation, utilization: Option<f64>) -> Decision {
        let saturated = utilization.is_some_and(|u| u >= CPU_SATURATED);
        let old = self.target;
        // Adopt the worker the pool just spawned.
        let mut desired = obs.live.max(self.target);
        if !saturated {
            // 1, 3, 7, 15, …: inject 0, 1, 3, 7, … extra workers.
            self.injection = (self.injection * 2 + 1).min(2 * MAX_STEP - 1);
            let extra = (self.injection / 2).min(obs.queue_len);
            desired = (obs.live + extra).max(desired);
        }
        // Injection stays within the spawn limit set at the last tick, so a
        // burst cannot ratchet the limit up through its own spawns.
        let mut desired = self.clamp(desired.min(self.limit.max(obs.live)));
        if let Some(cap) = self.learned_cap(obs.now) {
            desired = desired.min(cap.max(old));
        }
        self.target = desired.max(old);
        self.low_for = Duration::ZERO;
        let ceiling = self.ceiling();
        self.emit(old, ceiling, "starved: adopt and inject")
    }

    fn emit(&mut self, old: usize, ceiling: usize, why: &'static str) -> Decision {
        let limit = self.limit.max(self.target);
        self.limit = limit;
        if self.target == old && Some(limit) == self.sent_limit {
            return Decision::hold();
        }
        self.sent_limit = Some(limit);
        Decision {
            target: Some(self.target),
            max: Some(limit),
            reason: format!(
                "auto: {why} (phi {:.2}, ceiling {ceiling})",
                self.cpu_fraction.value
            )
            .into(),
            ..Decision::default()
        }
    }
}

impl Default for Auto {
    fn default() -> Self {
        Auto::new()
    }
}

/// Where on-demand spawning stops between ticks: room for a burst above the
/// target, never past the useful-concurrency ceiling (nor below the target).
fn spawn_limit(target: usize, ceiling: usize) -> usize {
    (2 * target).max(target + 4).min(ceiling).max(target)
}

/// Process CPU use over the window as a fraction of all cores.
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
            ..Schedule::default()
        }
    }

    fn decide(&mut self, obs: &Observation) -> Decision {
        let util = utilization(obs);
        match obs.trigger {
            Trigger::Start => {
                // Remember the user's bounds: `max` is ours from now on.
                self.floor = obs.min.max(1);
                self.ceiling = if obs.max == 0 {
                    usize::MAX
                } else {
                    obs.max.max(self.floor)
                };
                self.cores = obs.cores.max(1);
                self.target = self.clamp(self.cores);
                self.limit = spawn_limit(self.target, self.ceiling());
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
                self.learn(obs, util);
                self.tick(obs, util)
            }
            Trigger::Starved => {
                self.learn(obs, util);
                self.starved(obs, util)
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
    fn start_is_one_worker_per_core_with_on_demand_growth() {
        let mut p = Auto::new();
        let d = start(&mut p);
        assert_eq!(d.target, Some(CORES));
        assert_eq!(d.max, Some(CORES), "assumed CPU-bound until measured");
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
        // saturated, phi looks like 1/3, but auto must not take that as blocking.
        let mut p = Auto::new();
        start(&mut p);
        let mut live = 12;
        for at in 1..=50 {
            let d = p.decide(&busy_tick(at, live, 1.0, 1000, 400));
            apply(&mut live, &d);
            assert!(live <= 12);
        }
        assert!(p.cpu_fraction() > 0.99);
        assert_eq!(p.ceiling(), CORES);
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
        // phi = 0.1: ceiling = 4 + 4·9·1.25 = 49.
        assert_eq!(p.ceiling(), 49);
        assert!(live > 5 * CORES, "only reached {live}: {trace:?}");
        assert!(live <= 49, "{trace:?}");
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
        assert!((14..=18).contains(&expected), "{expected}");
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
        let d = p.decide(&quiet_tick(30, live));
        apply(&mut live, &d);
        assert!(live < grown, "did not shrink after {ticks} quiet ticks");
        assert!(live >= grown / 2, "shrinks half the gap at a time");
        for at in 31..200 {
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
        assert!(p.ceiling() > 40);
        let starved = |live: usize, queue_len: usize| Observation {
            trigger: Trigger::Starved,
            now: Duration::from_millis(550),
            window: Duration::from_millis(1),
            live,
            busy: live,
            queue_len,
            target: 4,
            min: 1,
            max: 512,
            cores: CORES,
            ..Observation::default()
        };
        // Target 4: the pool may spawn up to spawn_limit(4) = 8 on demand.
        assert_eq!(p.limit(), 8);
        // 1st: adopt the spawned worker; 2nd: +1; 3rd: +3 but the limit is 8.
        assert_eq!(p.decide(&starved(5, 50)).target, Some(5));
        assert_eq!(p.decide(&starved(6, 50)).target, Some(7));
        assert_eq!(p.decide(&starved(8, 50)).target, Some(8));
        assert_eq!(p.limit(), 8, "spawns must not raise the spawn limit");
        // A calm tick resets the escalation and moves the limit to 2 × 8.
        let mut calm = busy_tick(7, 8, 0.1, 0, 100);
        calm.arrivals = 10;
        calm.idle = 2;
        p.decide(&calm);
        assert_eq!(p.limit(), 16);
        assert_eq!(p.decide(&starved(9, 50)).target, Some(9));
        assert_eq!(p.decide(&starved(10, 50)).target, Some(11));
        // Never more extra workers than tasks waiting (+3 wanted, 2 waiting).
        assert_eq!(p.decide(&starved(12, 2)).target, Some(14));
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
}
