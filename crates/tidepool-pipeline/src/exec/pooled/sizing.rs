//! The pooled run's sizing policy: what its workers measure per task, the
//! [`Observation`] built from it, and the limit on running tasks that the
//! policy's [`Decision`] sets (see the parent module's doc, "Blocking
//! stages: a sizing policy sizes the workers").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use tidepool::policy::{Decision, Observation, Schedule, SizingPolicy, Trigger};

/// One worker's counts since the run began, written only by that worker
/// (its own line: no contention), read by whichever worker calls the
/// policy.
#[derive(Default)]
pub(super) struct Meter {
    /// Buffers its tasks completed.
    items: AtomicU64,
    /// Time its tasks ran, in ns.
    busy: AtomicU64,
    /// Thread CPU time and run time of its sampled tasks, in ns, and how
    /// many.
    cpu: AtomicU64,
    time: AtomicU64,
    sampled: AtomicU64,
}

/// Tasks sampled for CPU time: each worker's first [`FIRST`], then one in
/// [`EVERY`].
const FIRST: u64 = 4;
const EVERY: u64 = 16;

impl Meter {
    /// Whether this worker's next task (its `tasks`-th) is sampled.
    pub(super) fn samples(tasks: u64) -> bool {
        tasks < FIRST || tasks.is_multiple_of(EVERY)
    }

    /// Count a task of `items` buffers that ran `busy`, with its thread
    /// CPU time if sampled.
    pub(super) fn record(&self, items: u64, busy: Duration, cpu: Option<Duration>) {
        let ns = |d: Duration| d.as_nanos() as u64;
        // Only this worker writes: a load and a store, no read-modify-write.
        let add = |a: &AtomicU64, v: u64| a.store(a.load(Ordering::Relaxed) + v, Ordering::Relaxed);
        add(&self.items, items);
        add(&self.busy, ns(busy));
        if let Some(c) = cpu {
            add(&self.cpu, ns(c));
            add(&self.time, ns(busy));
            add(&self.sampled, 1);
        }
    }
}

/// The sums of every worker's [`Meter`] at one call of the policy.
#[derive(Default, Clone, Copy)]
struct Totals {
    items: u64,
    busy: u64,
    cpu: u64,
    time: u64,
    sampled: u64,
}

fn totals(meters: &[CachePadded<Meter>]) -> Totals {
    let mut t = Totals::default();
    for m in meters {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        t.items += l(&m.items);
        t.busy += l(&m.busy);
        t.cpu += l(&m.cpu);
        t.time += l(&m.time);
        t.sampled += l(&m.sampled);
    }
    t
}

/// What the run tells the policy at a call, read under the run's lock.
pub(super) struct Now {
    pub(super) at: Duration,
    pub(super) queued: usize,
    pub(super) running: usize,
    pub(super) parked: usize,
    pub(super) limit: usize,
}

/// The policy and what it saw at its last call.
pub(super) struct Sizer {
    policy: Box<dyn SizingPolicy>,
    schedule: Schedule,
    last: Duration,
    seen: Totals,
    /// The most workers: one per group instance.
    workers: usize,
    cores: usize,
}

impl Sizer {
    pub(super) fn new(policy: Box<dyn SizingPolicy>, workers: usize) -> Self {
        let schedule = policy.schedule();
        Sizer {
            policy,
            schedule,
            last: Duration::ZERO,
            seen: Totals::default(),
            workers,
            cores: tidepool::sys::cores(),
        }
    }

    /// When the policy wants its next call (after one at `at`): its
    /// schedule's period, else never.
    pub(super) fn next_call(&self, at: Duration) -> Duration {
        self.schedule.every.map_or(Duration::MAX, |e| at + e)
    }

    /// Call the policy; the limit on running tasks it sets (`None`: as is).
    pub(super) fn decide(
        &mut self,
        trigger: Trigger,
        now: Now,
        meters: &[CachePadded<Meter>],
    ) -> Option<usize> {
        let t = totals(meters);
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let items = d(t.items, self.seen.items);
        let busy = Duration::from_nanos(d(t.busy, self.seen.busy));
        // Field by field: `Observation` is non-exhaustive.
        let mut obs = Observation::default();
        obs.trigger = trigger;
        obs.now = now.at;
        obs.window = now.at.saturating_sub(self.last);
        // A pipeline is a closed loop: every buffer done moves on.
        obs.arrivals = items;
        obs.completions = items;
        obs.mean_service = (items > 0).then(|| busy.div_f64(items as f64));
        obs.queue_len = now.queued;
        obs.in_flight = now.queued + now.running;
        obs.live = self.workers;
        obs.busy = now.running;
        obs.idle = now.parked;
        obs.target = now.limit;
        obs.min = 1;
        obs.max = self.workers;
        obs.busy_time = busy;
        obs.cores = self.cores;
        obs.sampled_task_cpu = Duration::from_nanos(d(t.cpu, self.seen.cpu));
        obs.sampled_task_time = Duration::from_nanos(d(t.time, self.seen.time));
        obs.sampled_tasks = d(t.sampled, self.seen.sampled);
        self.seen = t;
        self.last = now.at;
        let decision = self.policy.decide(&obs);
        self.schedule = self.policy.schedule();
        limit(&decision).map(|n| n.clamp(1, self.workers))
    }
}

/// A decision's limit on running tasks: its spawn limit while it lets the
/// pool grow on demand (a runnable task waiting with every worker busy is
/// that demand), else its target.
fn limit(d: &Decision) -> Option<usize> {
    match (d.grow_on_demand, d.spawn_limit, d.target) {
        (Some(false), _, t) => t,
        (_, Some(l), t) => Some(l.max(t.unwrap_or(1))),
        (_, None, t) => t,
    }
}

/// The policy under `loom`: one task at a time until its second call after
/// the start (a task has completed while buffers wait upstream), then
/// every worker, then never called again, so that the models cover a
/// raised limit's wake-up (module doc, "Blocking stages").
#[cfg(loom)]
#[derive(Default)]
pub(super) struct Script {
    calls: u32,
}

#[cfg(loom)]
impl SizingPolicy for Script {
    fn name(&self) -> &str {
        "loom-script"
    }
    fn schedule(&self) -> Schedule {
        if self.calls > 2 {
            Schedule::default()
        } else {
            Schedule::default().with_every(Duration::ZERO)
        }
    }
    fn decide(&mut self, obs: &Observation) -> Decision {
        self.calls += 1;
        let n = if self.calls <= 2 { 1 } else { obs.max };
        Decision::resize(n, "loom script").with_grow_on_demand(false)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// `fixed:N` limits to N; `auto` starts at its spawn limit (at least
    /// the cores), never past the workers.
    #[test]
    fn decisions_become_limits_within_the_workers() {
        let meters: Vec<CachePadded<Meter>> = (0..2).map(|_| CachePadded::default()).collect();
        let now = || Now {
            at: Duration::ZERO,
            queued: 0,
            running: 0,
            parked: 0,
            limit: 8,
        };
        let fixed = tidepool::policy::PolicySpec::parse("fixed:3").unwrap();
        let mut s = Sizer::new(fixed.build().unwrap(), 8);
        assert_eq!(s.decide(Trigger::Start, now(), &meters), Some(3));
        let fixed = tidepool::policy::PolicySpec::parse("fixed:30").unwrap();
        let mut s = Sizer::new(fixed.build().unwrap(), 8);
        assert_eq!(s.decide(Trigger::Start, now(), &meters), Some(8));
        let mut s = Sizer::new(tidepool::policy::PolicySpec::Auto.build().unwrap(), 64);
        let l = s.decide(Trigger::Start, now(), &meters).unwrap();
        assert!(l >= tidepool::sys::cores().min(64), "{l}");
        assert!(s.next_call(Duration::ZERO) < Duration::from_secs(1));
    }

    #[test]
    fn a_meter_counts_only_sampled_tasks_cpu() {
        let m = Meter::default();
        m.record(2, Duration::from_micros(10), None);
        m.record(1, Duration::from_micros(30), Some(Duration::from_micros(3)));
        let t = totals(&[CachePadded::new(m)]);
        assert_eq!(
            (t.items, t.busy, t.cpu, t.time, t.sampled),
            (3, 40_000, 3_000, 30_000, 1)
        );
        assert!(Meter::samples(0) && Meter::samples(3) && !Meter::samples(5) && Meter::samples(16));
    }
}
