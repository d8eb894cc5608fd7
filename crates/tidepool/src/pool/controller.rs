//! The controller: calls the sizing policy when it asked to be called, turns
//! the pool's statistics into an `Observation`, applies the `Decision`, and
//! logs it.

use std::sync::atomic::Ordering::Relaxed;

use super::shared::Shared;
use super::{apply_target, snapshot};
use crate::control::{self, Call, Next, Scheduler};
use crate::metrics::PoolStats;
use crate::policy::DecisionRecord;
use crate::policy::{Decision, Schedule, SizingPolicy, Trigger};
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
    super::spawn::thread(std::thread::Builder::new().name(name), move || {
        ctl.run(schedule)
    })
    .map(Some)
}

/// Tell the pool which events the policy wants to hear about (the pool's
/// lock-free version of `Scheduler::starved`, `retired`, `at_max` and
/// `completed`).
fn arm(shared: &Shared, schedule: &Schedule) {
    let signal = &shared.control;
    signal
        .every_completions
        .store(schedule.every_completions.unwrap_or(0), Relaxed);
    signal.want_starved.store(schedule.on_starved, Relaxed);
    signal.want_retired.store(schedule.on_retired, Relaxed);
    signal.want_at_max.store(schedule.on_at_max, Relaxed);
}

impl Controller {
    /// Call the policy whenever the scheduler says so, until the pool stops.
    fn run(mut self, schedule: Schedule) {
        let mut scheduler = Scheduler::new(schedule, self.shared.elapsed());
        while let Some(call) = self.wait(&mut scheduler) {
            self.call(call.trigger);
            let now = self.shared.elapsed();
            if call.took_at_max {
                // Let the pool raise the next one (events during the call
                // were seen by its snapshot).
                self.shared.control.at_max_taken();
            }
            let schedule = self.policy.schedule();
            if scheduler.called(call, now, schedule) {
                arm(&self.shared, &schedule);
            }
        }
    }

    /// Sleep until the scheduler has a call due (taking the events it
    /// covers), or until the pool stops (`None`).
    fn wait(&self, scheduler: &mut Scheduler) -> Option<Call> {
        let signal = &self.shared.control;
        let mut flags = lock(&signal.flags);
        loop {
            if flags.stop {
                return None;
            }
            let now = self.shared.elapsed();
            flags = match scheduler.next(&mut flags.events, now) {
                Next::Call(call) => return Some(call),
                Next::Wait => signal.cv.wait(flags).unwrap_or_else(|e| e.into_inner()),
                Next::At(t) => {
                    signal
                        .cv
                        .wait_timeout(flags, t - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    fn call(&mut self, trigger: Trigger) {
        let now = snapshot(&self.shared);
        let obs = control::observation(trigger, &now, &now.since(&self.previous));
        self.previous = now;
        let mut decision = self.policy.decide(&obs);
        users_settings_win(&self.shared, &mut decision, trigger);
        if decision.is_hold() {
            return;
        }
        let old_target = self.shared.target();
        let new_target = apply(&self.shared, &decision);
        let record = DecisionRecord {
            at: obs.now,
            trigger,
            old_target,
            new_target,
            reason: decision.reason.to_string(),
            observation: obs,
        };
        crate::events::decided(&self.shared.config.name, &record);
        lock(&self.shared.decisions).push(record);
    }
}

/// A policy's preferences apply only where the user set nothing: its
/// keep-alive never over one the user chose, its first target never over
/// the user's initial size.
fn users_settings_win(shared: &Shared, d: &mut Decision, trigger: Trigger) {
    if shared.user_keep_alive.load(Relaxed) {
        d.keep_alive = None;
    }
    if trigger == Trigger::Start && shared.config.initial_set {
        d.target = None;
    }
}

/// Apply a decision's settings (see [`control::apply`]); returns the
/// resulting target.
fn apply(shared: &Arc<Shared>, d: &Decision) -> usize {
    let mut target = shared.target();
    shared.change_limits(|limits| {
        let applied = control::apply(d, limits, target);
        target = applied.target;
        Some(applied.limits)
    });
    apply_target(shared, target)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::policy::Observation;
    use crate::Pool;
    use std::time::Duration;

    /// Changes the keep-alive at every call: every call is a logged
    /// decision, and none starts or stops a thread.
    struct Flip(bool);

    impl SizingPolicy for Flip {
        fn name(&self) -> &str {
            "flip"
        }

        fn decide(&mut self, _: &Observation) -> Decision {
            self.0 = !self.0;
            Decision {
                keep_alive: Some(Duration::from_secs(10 + self.0 as u64)),
                reason: "flip".into(),
                ..Decision::default()
            }
        }
    }

    #[test]
    fn a_day_of_decisions_keeps_the_log_at_its_length() {
        const LEN: usize = 512;
        // One decision a second for a day, through the controller's own path.
        const DAY: usize = 86_400;
        let pool = Pool::builder().threads(1).history_len(LEN).build().unwrap();
        let mut ctl = Controller {
            shared: pool.inner.shared.clone(),
            policy: Box::new(Flip(false)),
            previous: snapshot(&pool.inner.shared),
        };
        // The pool's own policy may have logged its start.
        let logged_before = pool.decisions().len();
        let mut allocated_after_an_hour = 0;
        for i in 0..DAY {
            ctl.call(Trigger::Tick);
            if i == 3600 {
                allocated_after_an_hour = lock(&pool.inner.shared.decisions).allocated();
            }
        }
        let log = lock(&pool.inner.shared.decisions);
        assert_eq!(log.len(), LEN);
        assert_eq!(log.allocated(), allocated_after_an_hour, "the log grew");
        assert!(log.allocated() < 2 * LEN, "{}", log.allocated());
        drop(log);
        assert_eq!(pool.decisions().len(), LEN);
        assert_eq!(
            pool.stats().decisions_dropped,
            (logged_before + DAY - LEN) as u64
        );
    }

    #[test]
    fn the_size_series_is_a_ring_too() {
        let pool = Pool::builder()
            .threads(1)
            .record_live_threads_series(true)
            .history_len(64)
            .build()
            .unwrap();
        for i in 0..10_000 {
            // Alternate targets, so every sample is a change worth keeping.
            pool.inner.shared.set_target(1 + i % 2);
            pool.inner.shared.sample_size();
        }
        let series = pool.live_threads_series();
        assert_eq!(series.len(), 64);
        assert_eq!(series.last().map(|s| s.target), Some(2));
        assert!(lock(pool.inner.shared.series.as_ref().unwrap()).allocated() < 128);
    }
}
