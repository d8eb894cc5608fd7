//! When the policy is called: its periodic tick, the events it asked for and
//! their priority, and the at-max throttle.
//!
//! The rules, as the pool's controller applies them:
//! - After [`Trigger::Start`], a policy whose [`Schedule`] is empty is never
//!   called again ([`Scheduler::is_idle`]).
//! - Pending events are taken in this order: [`Trigger::Starved`],
//!   [`Trigger::AtMax`], [`Trigger::Retired`], [`Trigger::Completions`];
//!   without any, a due [`Trigger::Tick`]. One call takes every pending event
//!   at once (the policy's observation covers them all).
//! - The tick is due `every` after the previous *tick* (calls for events do
//!   not postpone it), or after the schedule changed its `every`.
//! - An at-max call is made at most once per [`AT_MAX_INTERVAL`]: an at-max
//!   event raised sooner waits (it is neither lost nor taken by an earlier
//!   call for another reason); further at-max events while one is pending
//!   are the same event.
//! - The schedule is read again after every call, and applies from then on.
//!
//! The controller feeds [`Scheduler`] its clock and the events the pool
//! raised; a simulator feeds it virtual time and its own events.

use std::time::Duration;

use crate::policy::{Schedule, Trigger};

/// The shortest time between two [`Trigger::AtMax`] calls: a pool pinned at
/// its `max` would otherwise call its policy on every submit.
pub const AT_MAX_INTERVAL: Duration = Duration::from_millis(1);

/// Events raised since the policy's last call, not yet taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Events {
    /// A worker was spawned on demand ([`Trigger::Starved`]).
    pub starved: bool,
    /// A worker retired after its keep-alive ([`Trigger::Retired`]).
    pub retired: bool,
    /// A task waited at the pool's `max` ([`Trigger::AtMax`]).
    pub at_max: bool,
    /// `every_completions` more tasks completed ([`Trigger::Completions`]).
    pub completions: bool,
}

/// A call of the policy that is due now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Call {
    /// Why: the highest-priority reason taken.
    pub trigger: Trigger,
    /// This call took a pending at-max event (whatever its trigger): the next
    /// at-max call waits [`AT_MAX_INTERVAL`] after it, and the pool may raise
    /// the next at-max event.
    pub took_at_max: bool,
}

/// What the scheduler wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Next {
    /// Call the policy now (the events it took are cleared).
    Call(Call),
    /// Nothing is due before this instant (unless an event arrives).
    At(Duration),
    /// Nothing is due until an event arrives.
    Wait,
}

/// When to call the policy, given the time and the pending events.
///
/// Create it after the [`Trigger::Start`] call with the policy's schedule;
/// then, whenever time passes or an event arrives, ask [`next`](Self::next),
/// and after every call report it with [`called`](Self::called).
///
/// ```
/// # #[cfg(feature = "sim-hooks")] {
/// use std::time::Duration;
/// use tidepool::control::{Events, Next, Scheduler};
/// use tidepool::policy::{Schedule, Trigger};
///
/// let ms = Duration::from_millis;
/// let schedule = Schedule::default().with_every(ms(10)).with_on_starved(true);
/// let mut scheduler = Scheduler::new(schedule, ms(0));
/// let mut events = Events::default();
/// assert_eq!(scheduler.next(&mut events, ms(3)), Next::At(ms(10)));
/// scheduler.starved(&mut events);
/// let Next::Call(call) = scheduler.next(&mut events, ms(4)) else { panic!() };
/// assert_eq!(call.trigger, Trigger::Starved);
/// scheduler.called(call, ms(4), schedule);
/// // Calls for events do not move the tick.
/// assert_eq!(scheduler.next(&mut events, ms(5)), Next::At(ms(10)));
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduler {
    schedule: Schedule,
    next_tick: Option<Duration>,
    at_max_ready: Duration,
    completions: u64,
}

impl Scheduler {
    /// A scheduler for `schedule`, started at `now` (the first tick is due
    /// `every` later; an at-max call may be made at once).
    pub fn new(schedule: Schedule, now: Duration) -> Self {
        Scheduler {
            next_tick: schedule.every.map(|p| now + p),
            schedule,
            at_max_ready: now,
            completions: 0,
        }
    }

    /// The schedule in force.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The schedule asks for nothing: the policy is never called again.
    pub fn is_idle(&self) -> bool {
        self.schedule == Schedule::default()
    }

    /// When the next tick is due, if the schedule has one.
    pub fn next_tick(&self) -> Option<Duration> {
        self.next_tick
    }

    /// Whether to call the policy at `now` and why, or until when nothing is
    /// due. A call takes (clears) the pending events, except an at-max event
    /// that must still wait for its interval.
    pub fn next(&mut self, events: &mut Events, now: Duration) -> Next {
        let at_max = events.at_max && now >= self.at_max_ready;
        let tick = self.next_tick.is_some_and(|t| now >= t);
        let trigger = if events.starved {
            Trigger::Starved
        } else if at_max {
            Trigger::AtMax
        } else if events.retired {
            Trigger::Retired
        } else if events.completions {
            Trigger::Completions
        } else if tick {
            Trigger::Tick
        } else {
            let at_max_due = events.at_max.then_some(self.at_max_ready);
            return match (self.next_tick, at_max_due) {
                (Some(a), Some(b)) => Next::At(a.min(b)),
                (Some(t), None) | (None, Some(t)) => Next::At(t),
                (None, None) => Next::Wait,
            };
        };
        if trigger == Trigger::Tick {
            self.next_tick = self.schedule.every.map(|p| now + p);
        }
        *events = Events {
            at_max: events.at_max && !at_max,
            ..Events::default()
        };
        Next::Call(Call {
            trigger,
            took_at_max: at_max,
        })
    }

    /// The policy was called for `call` and finished at `now`; `schedule` is
    /// what it asks for now. Returns true when the schedule changed (the
    /// pool then re-arms the events it raises).
    pub fn called(&mut self, call: Call, now: Duration, schedule: Schedule) -> bool {
        if call.took_at_max {
            self.at_max_ready = now + AT_MAX_INTERVAL;
        }
        if schedule == self.schedule {
            return false;
        }
        if schedule.every != self.schedule.every {
            self.next_tick = schedule.every.map(|p| now + p);
        }
        self.schedule = schedule;
        true
    }

    /// A worker was spawned on demand: raise [`Trigger::Starved`] if the
    /// schedule asks for it.
    pub fn starved(&self, events: &mut Events) {
        events.starved |= self.schedule.on_starved;
    }

    /// A worker retired after its keep-alive: raise [`Trigger::Retired`] if
    /// the schedule asks for it.
    pub fn retired(&self, events: &mut Events) {
        events.retired |= self.schedule.on_retired;
    }

    /// A task waited at the pool's `max`: raise [`Trigger::AtMax`] if the
    /// schedule asks for it (while one is pending, this is the same event).
    pub fn at_max(&self, events: &mut Events) {
        events.at_max |= self.schedule.on_at_max;
    }

    /// A task completed: raise [`Trigger::Completions`] every
    /// `every_completions` of them, if the schedule asks for it. (The count
    /// carries over schedule changes, as the pool's shared counter does.)
    pub fn completed(&mut self, events: &mut Events) {
        let every = self.schedule.every_completions.unwrap_or(0);
        if every > 0 {
            self.completions += 1;
            if self.completions >= every {
                self.completions = 0;
                events.completions = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn every(p: Duration) -> Schedule {
        Schedule {
            every: Some(p),
            ..Schedule::default()
        }
    }

    fn all_events() -> Schedule {
        Schedule {
            on_starved: true,
            on_retired: true,
            on_at_max: true,
            every_completions: Some(1),
            ..Schedule::default()
        }
    }

    fn call(trigger: Trigger, took_at_max: bool) -> Next {
        Next::Call(Call {
            trigger,
            took_at_max,
        })
    }

    /// Take the call that is due at `now` and report it done at `now`.
    fn take(s: &mut Scheduler, e: &mut Events, now: Duration) -> Option<Trigger> {
        match s.next(e, now) {
            Next::Call(c) => {
                let schedule = *s.schedule();
                s.called(c, now, schedule);
                Some(c.trigger)
            }
            _ => None,
        }
    }

    #[test]
    fn empty_schedule_is_idle_and_never_due() {
        let mut s = Scheduler::new(Schedule::default(), ms(0));
        assert!(s.is_idle());
        assert_eq!(s.next_tick(), None);
        let mut e = Events::default();
        assert_eq!(s.next(&mut e, ms(1_000_000)), Next::Wait);
    }

    #[test]
    fn any_request_makes_it_not_idle() {
        assert!(!Scheduler::new(every(ms(1)), ms(0)).is_idle());
        let starved = Schedule {
            on_starved: true,
            ..Schedule::default()
        };
        assert!(!Scheduler::new(starved, ms(0)).is_idle());
    }

    #[test]
    fn tick_is_due_every_period_from_the_start() {
        let mut s = Scheduler::new(every(ms(10)), ms(5));
        let mut e = Events::default();
        assert_eq!(s.next_tick(), Some(ms(15)));
        assert_eq!(s.next(&mut e, ms(5)), Next::At(ms(15)));
        assert_eq!(s.next(&mut e, ms(14)), Next::At(ms(15)));
        assert_eq!(s.next(&mut e, ms(15)), call(Trigger::Tick, false));
        assert_eq!(s.next_tick(), Some(ms(25)));
    }

    #[test]
    fn a_late_tick_counts_the_period_from_when_it_ran() {
        let mut s = Scheduler::new(every(ms(10)), ms(0));
        let mut e = Events::default();
        // The controller woke late (a loaded machine): no catching up.
        assert_eq!(s.next(&mut e, ms(37)), call(Trigger::Tick, false));
        assert_eq!(s.next(&mut e, ms(38)), Next::At(ms(47)));
    }

    #[test]
    fn events_need_their_schedule_flag() {
        let s = Scheduler::new(every(ms(10)), ms(0));
        let mut e = Events::default();
        s.starved(&mut e);
        s.retired(&mut e);
        s.at_max(&mut e);
        assert_eq!(e, Events::default());
        let mut s = Scheduler::new(every(ms(10)), ms(0));
        for _ in 0..100 {
            s.completed(&mut e);
        }
        assert_eq!(e, Events::default());
    }

    #[test]
    fn events_are_due_at_once() {
        let mut s = Scheduler::new(all_events(), ms(0));
        for raise in [
            Scheduler::starved as fn(&Scheduler, &mut Events),
            Scheduler::retired,
            Scheduler::at_max,
        ] {
            let mut e = Events::default();
            raise(&s, &mut e);
            assert!(matches!(s.next(&mut e, ms(0)), Next::Call(_)));
            assert_eq!(e, Events::default());
        }
        let mut e = Events::default();
        s.completed(&mut e);
        assert_eq!(s.next(&mut e, ms(0)), call(Trigger::Completions, false));
    }

    #[test]
    fn priority_starved_at_max_retired_completions_tick() {
        let schedule = Schedule {
            every: Some(ms(1)),
            ..all_events()
        };
        let mut s = Scheduler::new(schedule, ms(0));
        let mut e = Events {
            starved: true,
            retired: true,
            at_max: true,
            completions: true,
        };
        let now = ms(5); // the tick is due too
        let c = s.next(&mut e, now);
        assert_eq!(c, call(Trigger::Starved, true));
        // One call takes every pending event.
        assert_eq!(e, Events::default());

        let order = [
            (
                Events {
                    at_max: true,
                    retired: true,
                    completions: true,
                    ..Events::default()
                },
                Trigger::AtMax,
            ),
            (
                Events {
                    retired: true,
                    completions: true,
                    ..Events::default()
                },
                Trigger::Retired,
            ),
            (
                Events {
                    completions: true,
                    ..Events::default()
                },
                Trigger::Completions,
            ),
            (Events::default(), Trigger::Tick),
        ];
        for (mut e, want) in order {
            let mut s = Scheduler::new(schedule, ms(0));
            match s.next(&mut e, now) {
                Next::Call(c) => assert_eq!(c.trigger, want),
                other => panic!("{other:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn event_calls_do_not_move_the_tick() {
        let schedule = Schedule {
            every: Some(ms(10)),
            ..all_events()
        };
        let mut s = Scheduler::new(schedule, ms(0));
        let mut e = Events::default();
        s.starved(&mut e);
        assert_eq!(take(&mut s, &mut e, ms(9)), Some(Trigger::Starved));
        assert_eq!(s.next(&mut e, ms(9)), Next::At(ms(10)));
        assert_eq!(take(&mut s, &mut e, ms(10)), Some(Trigger::Tick));
    }

    #[test]
    fn an_overdue_tick_follows_an_event_call() {
        let schedule = Schedule {
            every: Some(ms(10)),
            ..all_events()
        };
        let mut s = Scheduler::new(schedule, ms(0));
        let mut e = Events::default();
        s.retired(&mut e);
        assert_eq!(take(&mut s, &mut e, ms(12)), Some(Trigger::Retired));
        assert_eq!(take(&mut s, &mut e, ms(12)), Some(Trigger::Tick));
        assert_eq!(s.next(&mut e, ms(12)), Next::At(ms(22)));
    }

    #[test]
    fn at_max_is_throttled_to_one_call_per_interval() {
        let mut s = Scheduler::new(all_events(), ms(0));
        let mut e = Events::default();
        s.at_max(&mut e);
        assert_eq!(s.next(&mut e, us(100)), call(Trigger::AtMax, true));
        s.called(
            Call {
                trigger: Trigger::AtMax,
                took_at_max: true,
            },
            us(150),
            all_events(),
        );
        // Raised again at once: waits until 1 ms after the call finished.
        s.at_max(&mut e);
        assert_eq!(s.next(&mut e, us(200)), Next::At(us(1150)));
        assert!(e.at_max, "a waiting at-max event stays pending");
        assert_eq!(s.next(&mut e, us(1149)), Next::At(us(1150)));
        assert_eq!(s.next(&mut e, us(1150)), call(Trigger::AtMax, true));
    }

    #[test]
    fn at_max_may_be_called_at_once_after_start() {
        let mut s = Scheduler::new(all_events(), ms(7));
        let mut e = Events::default();
        s.at_max(&mut e);
        assert_eq!(s.next(&mut e, ms(7)), call(Trigger::AtMax, true));
    }

    #[test]
    fn an_early_at_max_survives_a_call_for_another_reason() {
        let mut s = Scheduler::new(all_events(), ms(0));
        let mut e = Events::default();
        s.at_max(&mut e);
        assert_eq!(take(&mut s, &mut e, ms(1)), Some(Trigger::AtMax));
        // Within the interval, a starved call comes first and leaves the
        // at-max event pending.
        s.at_max(&mut e);
        s.starved(&mut e);
        assert_eq!(
            s.next(&mut e, ms(1) + us(10)),
            call(Trigger::Starved, false)
        );
        assert_eq!(
            e,
            Events {
                at_max: true,
                ..Events::default()
            }
        );
        s.called(
            Call {
                trigger: Trigger::Starved,
                took_at_max: false,
            },
            ms(1) + us(10),
            all_events(),
        );
        // The starved call did not restart the interval.
        assert_eq!(s.next(&mut e, ms(1) + us(20)), Next::At(ms(2)));
        assert_eq!(s.next(&mut e, ms(2)), call(Trigger::AtMax, true));
    }

    #[test]
    fn a_ready_at_max_is_taken_by_a_starved_call() {
        let mut s = Scheduler::new(all_events(), ms(0));
        let mut e = Events {
            starved: true,
            at_max: true,
            ..Events::default()
        };
        let Next::Call(c) = s.next(&mut e, ms(3)) else {
            panic!("due")
        };
        assert_eq!(
            c,
            Call {
                trigger: Trigger::Starved,
                took_at_max: true
            }
        );
        s.called(c, ms(3), all_events());
        // ...so it starts the interval.
        s.at_max(&mut e);
        assert_eq!(s.next(&mut e, ms(3)), Next::At(ms(4)));
    }

    #[test]
    fn next_due_is_the_earlier_of_tick_and_at_max() {
        let schedule = Schedule {
            every: Some(ms(10)),
            ..all_events()
        };
        let mut s = Scheduler::new(schedule, ms(0));
        let mut e = Events::default();
        s.at_max(&mut e);
        assert_eq!(take(&mut s, &mut e, ms(9) + us(500)), Some(Trigger::AtMax));
        s.at_max(&mut e);
        // Tick at 10 ms, at-max ready at 10.5 ms.
        assert_eq!(s.next(&mut e, ms(9) + us(600)), Next::At(ms(10)));
        assert_eq!(take(&mut s, &mut e, ms(10)), Some(Trigger::Tick));
        assert_eq!(s.next(&mut e, ms(10)), Next::At(ms(10) + us(500)));
        assert_eq!(take(&mut s, &mut e, ms(10) + us(500)), Some(Trigger::AtMax));
    }

    #[test]
    fn at_max_without_tick_waits_for_its_interval_only() {
        let mut s = Scheduler::new(all_events(), ms(0));
        let mut e = Events::default();
        s.at_max(&mut e);
        take(&mut s, &mut e, ms(0));
        assert_eq!(s.next(&mut e, ms(0)), Next::Wait);
        s.at_max(&mut e);
        assert_eq!(s.next(&mut e, ms(0)), Next::At(AT_MAX_INTERVAL));
    }

    #[test]
    fn completions_are_counted_in_groups() {
        let schedule = Schedule {
            every_completions: Some(3),
            ..Schedule::default()
        };
        let mut s = Scheduler::new(schedule, ms(0));
        let mut e = Events::default();
        s.completed(&mut e);
        s.completed(&mut e);
        assert!(!e.completions);
        s.completed(&mut e);
        assert!(e.completions);
        assert_eq!(take(&mut s, &mut e, ms(1)), Some(Trigger::Completions));
        for _ in 0..2 {
            s.completed(&mut e);
        }
        assert!(!e.completions);
        s.completed(&mut e);
        assert!(e.completions);
    }

    #[test]
    fn completions_beyond_a_pending_group_are_one_event() {
        let schedule = Schedule {
            every_completions: Some(2),
            ..Schedule::default()
        };
        let mut s = Scheduler::new(schedule, ms(0));
        let mut e = Events::default();
        for _ in 0..7 {
            s.completed(&mut e);
        }
        assert_eq!(take(&mut s, &mut e, ms(1)), Some(Trigger::Completions));
        // The seventh completion is counted toward the next group.
        assert_eq!(s.next(&mut e, ms(1)), Next::Wait);
        s.completed(&mut e);
        assert!(e.completions);
    }

    #[test]
    fn zero_completions_means_not_asked() {
        let schedule = Schedule {
            every_completions: Some(0),
            ..Schedule::default()
        };
        let mut s = Scheduler::new(schedule, ms(0));
        let mut e = Events::default();
        for _ in 0..10 {
            s.completed(&mut e);
        }
        assert!(!e.completions);
    }

    #[test]
    fn called_with_the_same_schedule_changes_nothing() {
        let mut s = Scheduler::new(every(ms(10)), ms(0));
        let before = s.clone();
        let c = Call {
            trigger: Trigger::Tick,
            took_at_max: false,
        };
        assert!(!s.called(c, ms(4), every(ms(10))));
        assert_eq!(s, before);
    }

    #[test]
    fn a_new_period_restarts_the_tick_from_the_call() {
        let mut s = Scheduler::new(every(ms(10)), ms(0));
        let c = Call {
            trigger: Trigger::Tick,
            took_at_max: false,
        };
        assert!(s.called(c, ms(4), every(ms(50))));
        assert_eq!(s.next_tick(), Some(ms(54)));
        assert_eq!(s.schedule().every, Some(ms(50)));
    }

    #[test]
    fn a_schedule_change_without_a_new_period_keeps_the_tick() {
        let mut s = Scheduler::new(every(ms(10)), ms(0));
        let c = Call {
            trigger: Trigger::Tick,
            took_at_max: false,
        };
        let more = Schedule {
            on_at_max: true,
            ..every(ms(10))
        };
        assert!(s.called(c, ms(4), more));
        assert_eq!(s.next_tick(), Some(ms(10)));
        let mut e = Events::default();
        s.at_max(&mut e);
        assert!(e.at_max, "the new schedule's events are raised from now on");
    }

    #[test]
    fn dropping_the_period_stops_the_ticks() {
        let mut s = Scheduler::new(every(ms(10)), ms(0));
        let c = Call {
            trigger: Trigger::Tick,
            took_at_max: false,
        };
        let events_only = Schedule {
            on_starved: true,
            ..Schedule::default()
        };
        assert!(s.called(c, ms(4), events_only));
        assert_eq!(s.next_tick(), None);
        let mut e = Events::default();
        assert_eq!(s.next(&mut e, ms(1000)), Next::Wait);
    }

    #[test]
    fn an_emptied_schedule_makes_it_idle() {
        let mut s = Scheduler::new(every(ms(10)), ms(0));
        let c = Call {
            trigger: Trigger::Tick,
            took_at_max: false,
        };
        assert!(s.called(c, ms(4), Schedule::default()));
        assert!(s.is_idle());
    }

    #[test]
    fn a_new_period_starts_ticking() {
        let events_only = Schedule {
            on_starved: true,
            ..Schedule::default()
        };
        let mut s = Scheduler::new(events_only, ms(0));
        let c = Call {
            trigger: Trigger::Starved,
            took_at_max: false,
        };
        assert!(s.called(c, ms(3), every(ms(2))));
        let mut e = Events::default();
        assert_eq!(s.next(&mut e, ms(4)), Next::At(ms(5)));
        assert_eq!(s.next(&mut e, ms(5)), call(Trigger::Tick, false));
    }

    #[test]
    fn the_same_inputs_give_the_same_calls() {
        // Deterministic: a scripted run, twice.
        let run = || {
            let schedule = Schedule {
                every: Some(ms(3)),
                ..all_events()
            };
            let mut s = Scheduler::new(schedule, ms(0));
            let mut e = Events::default();
            let mut log = Vec::new();
            for t in 0..40u64 {
                let now = us(t * 250);
                if t % 5 == 0 {
                    s.at_max(&mut e);
                }
                if t % 11 == 0 {
                    s.retired(&mut e);
                }
                while let Some(trigger) = take(&mut s, &mut e, now) {
                    log.push((now, trigger));
                }
            }
            log
        };
        let a = run();
        assert_eq!(a, run());
        // At-max calls at least a millisecond apart.
        let at_max: Vec<_> = a.iter().filter(|(_, t)| *t == Trigger::AtMax).collect();
        assert!(at_max.len() >= 3);
        for w in at_max.windows(2) {
            assert!(w[1].0 - w[0].0 >= AT_MAX_INTERVAL, "{w:?}");
        }
    }
}
