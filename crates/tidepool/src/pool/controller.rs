//! The controller: calls the sizing policy when it asked to be called, turns
//! the pool's statistics into an `Observation`, applies the `Decision`, and
//! logs it.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::builder::MAX_THREADS;
use super::shared::{slice_ns, ControlFlags, Shared};
use super::{apply_target, snapshot};
use crate::metrics::{DecisionRecord, PoolStats};
use crate::policy::{Decision, Observation, Schedule, SizingPolicy, Trigger};
use crate::sync::{lock, Arc};

struct Controller {
    shared: Arc<Shared>,
    policy: Box<dyn SizingPolicy>,
    previous: PoolStats,
}

/// Make the policy's first decision now; start a controller thread if the
/// policy's schedule asks for later calls.
pub(crate) fn start(
    shared: &Arc<Shared>,
    policy: Box<dyn SizingPolicy>,
) -> std::io::Result<Option<std::thread::JoinHandle<()>>> {
    let mut ctl = Controller {
        shared: shared.clone(),
        previous: snapshot(shared),
        policy,
    };
    ctl.call(Trigger::Start);
    let schedule = ctl.policy.schedule();
    if schedule == Schedule::default() {
        return Ok(None);
    }
    arm(shared, &schedule);
    let name = format!("{}-controller", shared.config.name);
    std::thread::Builder::new()
        .name(name)
        .spawn(move || ctl.run(schedule))
        .map(Some)
}

/// Tell the pool which events the policy wants to hear about.
fn arm(shared: &Shared, schedule: &Schedule) {
    let signal = &shared.control;
    signal
        .every_completions
        .store(schedule.every_completions.unwrap_or(0), Relaxed);
    signal.want_starved.store(schedule.on_starved, Relaxed);
    signal.want_retired.store(schedule.on_retired, Relaxed);
    signal.want_at_max.store(schedule.on_at_max, Relaxed);
}

/// The shortest time between two [`Trigger::AtMax`] calls: a pool pinned at
/// its `max` would otherwise call its policy on every submit.
const AT_MAX_INTERVAL: Duration = Duration::from_millis(1);

impl Controller {
    fn run(mut self, mut schedule: Schedule) {
        let mut next_tick = schedule.every.map(|p| Instant::now() + p);
        let mut at_max_ready = Instant::now();
        loop {
            let flags = self.wait(next_tick, at_max_ready);
            if flags.stop {
                return;
            }
            let trigger = if flags.starved {
                Trigger::Starved
            } else if flags.at_max {
                Trigger::AtMax
            } else if flags.retired {
                Trigger::Retired
            } else if flags.completions {
                Trigger::Completions
            } else {
                Trigger::Tick
            };
            if trigger == Trigger::Tick {
                next_tick = schedule.every.map(|p| Instant::now() + p);
            }
            self.call(trigger);
            if flags.at_max {
                at_max_ready = Instant::now() + AT_MAX_INTERVAL;
                // Let the pool raise the next one (events during the call
                // were seen by its snapshot).
                self.shared.control.at_max_taken();
            }
            let now = self.policy.schedule();
            if now != schedule {
                if now.every != schedule.every {
                    next_tick = now.every.map(|p| Instant::now() + p);
                }
                arm(&self.shared, &now);
                schedule = now;
            }
        }
    }

    /// Sleep until the next tick or a raised flag (an at-max flag counts from
    /// `at_max_ready` on); return (and clear) the flags.
    fn wait(&self, next_tick: Option<Instant>, at_max_ready: Instant) -> ControlFlags {
        let signal = &self.shared.control;
        let mut flags = lock(&signal.flags);
        loop {
            if flags.stop || flags.starved || flags.retired || flags.completions {
                break;
            }
            let now = Instant::now();
            let mut deadline = next_tick;
            if flags.at_max {
                if now >= at_max_ready {
                    break;
                }
                deadline = Some(deadline.map_or(at_max_ready, |t| t.min(at_max_ready)));
            }
            match deadline {
                None => flags = signal.cv.wait(flags).unwrap_or_else(|e| e.into_inner()),
                Some(t) => {
                    if now >= t {
                        break;
                    }
                    flags = signal
                        .cv
                        .wait_timeout(flags, t - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        let mut out = *flags;
        // Woken for something else before an at-max call is due: it waits.
        let early = out.at_max && Instant::now() < at_max_ready;
        out.at_max &= !early;
        *flags = ControlFlags {
            stop: flags.stop,
            at_max: early,
            ..ControlFlags::default()
        };
        out
    }

    fn call(&mut self, trigger: Trigger) {
        let now = snapshot(&self.shared);
        let obs = observation(trigger, &now, &now.since(&self.previous));
        self.previous = now;
        let decision = self.policy.decide(&obs);
        if decision.is_hold() {
            return;
        }
        let old_target = self.shared.target();
        let new_target = apply(&self.shared, &decision);
        lock(&self.shared.decisions).push(DecisionRecord {
            at: obs.now,
            trigger,
            old_target,
            new_target,
            reason: decision.reason.to_string(),
            observation: obs,
        });
    }
}

/// The policy's view of one window.
fn observation(trigger: Trigger, now: &PoolStats, w: &PoolStats) -> Observation {
    Observation {
        trigger,
        now: now.elapsed,
        window: w.elapsed,
        arrivals: w.submitted,
        completions: w.completed,
        mean_wait: w.wait.mean(),
        p99_wait: w.wait.quantile(0.99),
        mean_service: w.service.mean(),
        mean_interarrival: (w.submitted > 0)
            .then(|| w.elapsed / w.submitted.min(u32::MAX as u64) as u32),
        queue_len: now.queue_len,
        live: now.live_threads,
        busy: now.busy_threads,
        idle: now.idle_threads,
        target: now.target_size,
        min: now.min_threads,
        max: now.max_threads,
        threads_created: w.threads_created,
        threads_retired: w.threads_retired,
        busy_time: w.busy_time(),
        cpu_time: w.worker_cpu_time,
        run_delay: w.worker_run_delay,
        sampled_task_cpu: w.sampled_task_cpu,
        sampled_task_time: w.sampled_task_time,
        sampled_tasks: w.sampled_tasks,
        cores: now.cores,
    }
}

/// Apply a decision's settings; returns the resulting target. Invalid bounds
/// (min > max, max = 0 or too large) are ignored rather than trusted.
fn apply(shared: &Arc<Shared>, d: &Decision) -> usize {
    let sizes = &shared.sizes;
    let min = d.min.unwrap_or_else(|| sizes.min.load(Relaxed));
    let max = d.max.unwrap_or_else(|| sizes.max.load(Relaxed));
    if min <= max && (1..=MAX_THREADS).contains(&max) {
        sizes.min.store(min, Relaxed);
        sizes.max.store(max, Relaxed);
    }
    if let Some(k) = d.keep_alive.filter(|k| !k.is_zero()) {
        shared
            .keep_alive_ns
            .store(k.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
    }
    if let Some(g) = d.grow_on_demand {
        shared.grow_on_demand.store(g, Relaxed);
    }
    if let Some(s) = d.worker_slice {
        shared.worker_slice_ns.store(slice_ns(s), Relaxed);
    }
    let target = d.target.unwrap_or_else(|| shared.target());
    apply_target(shared, target)
}
