//! `frequency` — Bahadur et al.'s frequency-based pool tuner (§3.3 of "Hybrid
//! Synchronization Based Distributed Thread Pool"; the DFBTP of their earlier
//! work).
//!
//! Every second the load monitor reads the request counter (arrivals in the
//! last second) and resets it; the pool tuner compares that rate with the
//! previous second's and, if it is rising, makes the pool size equal to the
//! rate. Threads are never removed by the tuner: each thread has a timer that
//! deletes it after five seconds free.
//!
//! In tidepool terms: on each 1 s tick a rising rate sets the target to the
//! rate; otherwise the policy holds, and (as in the paper) any worker idle
//! for the 5 s keep-alive retires while busy workers stay — the pool lowers
//! the target with each such retirement. The pool does not spawn on demand:
//! only the tuner adds threads.

use std::time::Duration;

use super::{Decision, Observation, Schedule, SizingPolicy, Trigger};

/// Bahadur et al.'s request-rate tuner.
#[derive(Debug, Clone, PartialEq)]
pub struct Frequency {
    prev_rate: f64,
}

impl Frequency {
    /// The load monitor and the pool tuner activate every second.
    pub const PERIOD: Duration = Duration::from_secs(1);
    /// A thread free for five seconds is deleted.
    pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

    /// A tuner that has seen no requests yet (previous rate 0).
    pub fn new() -> Self {
        Frequency { prev_rate: 0.0 }
    }

    /// The request rate (per second) measured at the previous tick.
    pub fn previous_rate(&self) -> f64 {
        self.prev_rate
    }
}

impl Default for Frequency {
    fn default() -> Self {
        Frequency::new()
    }
}

impl SizingPolicy for Frequency {
    fn name(&self) -> &str {
        "frequency"
    }

    fn schedule(&self) -> Schedule {
        Schedule {
            every: Some(Self::PERIOD),
            ..Schedule::default()
        }
    }

    fn decide(&mut self, obs: &Observation) -> Decision {
        match obs.trigger {
            Trigger::Start => Decision {
                keep_alive: Some(Self::KEEP_ALIVE),
                grow_on_demand: Some(false),
                reason: "frequency: 5 s idle threads retire".into(),
                ..Decision::default()
            },
            Trigger::Tick => {
                let secs = obs.window.as_secs_f64();
                if secs <= 0.0 {
                    return Decision::hold();
                }
                // Requests per second; with the 1 s period this is the counter.
                let rate = obs.arrivals as f64 / secs;
                let prev = std::mem::replace(&mut self.prev_rate, rate);
                if rate > prev {
                    let size = (rate.round() as usize).max(1);
                    Decision::resize(size, format!("frequency: rate up {prev:.0} -> {rate:.0}/s"))
                } else {
                    // Not rising: keep the size; the pool's 5 s keep-alive
                    // retires each thread that stays idle (and lowers the
                    // target with it), which is the paper's retirement rule.
                    Decision::hold()
                }
            }
            _ => Decision::hold(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(arrivals: u64, min: usize) -> Observation {
        Observation {
            trigger: Trigger::Tick,
            window: Duration::from_secs(1),
            arrivals,
            min,
            ..Observation::default()
        }
    }

    #[test]
    fn schedule_is_every_second() {
        let s = Frequency::new().schedule();
        assert_eq!(s.every, Some(Duration::from_secs(1)));
        assert_eq!(s.every_completions, None);
    }

    #[test]
    fn start_sets_five_second_retirement() {
        let d = Frequency::new().decide(&Observation::default());
        assert_eq!(d.keep_alive, Some(Duration::from_secs(5)));
        assert_eq!(d.grow_on_demand, Some(false));
        assert_eq!(d.target, None);
    }

    #[test]
    fn rising_rate_sets_size_to_rate() {
        let mut p = Frequency::new();
        p.decide(&Observation::default());
        // First second: 0 -> 40 is a rise.
        assert_eq!(p.decide(&tick(40, 1)).target, Some(40));
        assert_eq!(p.decide(&tick(95, 1)).target, Some(95));
        assert_eq!(p.previous_rate(), 95.0);
    }

    #[test]
    fn flat_or_falling_rate_lets_idle_threads_time_out() {
        let mut p = Frequency::new();
        p.decide(&tick(100, 2));
        // Same or lower rate: not rising, so the size is kept and only the
        // 5 s idle timers decide who leaves.
        assert!(p.decide(&tick(100, 2)).is_hold());
        assert!(p.decide(&tick(60, 2)).is_hold());
        // Rising again relative to the previous second (60), not to the peak.
        assert_eq!(p.decide(&tick(80, 2)).target, Some(80));
    }

    #[test]
    fn rate_is_per_second_for_other_window_lengths() {
        let mut p = Frequency::new();
        let obs = Observation {
            window: Duration::from_millis(500),
            ..tick(30, 1)
        };
        assert_eq!(p.decide(&obs).target, Some(60));
    }

    #[test]
    fn empty_window_holds() {
        let mut p = Frequency::new();
        let obs = Observation {
            window: Duration::ZERO,
            ..tick(30, 1)
        };
        assert!(p.decide(&obs).is_hold());
        assert!(p
            .decide(&Observation {
                trigger: Trigger::Starved,
                ..tick(30, 1)
            })
            .is_hold());
    }
}
