//! `watermark:MIN..MAX` — Oh & Kim's watermark pool (WM), their §II and §IV.
//!
//! The pool keeps `MIN` threads, creates extra threads on demand (a task waits
//! and nobody is idle) up to `MAX`, and removes an extra thread once it is no
//! longer needed. The policy only sets the numbers once, at start; all the
//! dynamics are the pool's on-demand spawning and keep-alive retirement.
//!
//! `MIN..MAX` are the policy's watermarks, not the user's bounds: `MAX` is
//! its spawn limit (the pool keeps it under the user's `max`), and `MIN`
//! becomes the pool's floor clamped into the user's `min..=max`.

use std::time::Duration;

use super::{Decision, Observation, SizingPolicy, Trigger};

/// Oh & Kim's watermark pool: `min` threads always, up to `max` on demand.
///
/// Extra threads retire after [`Watermark::DEFAULT_KEEP_ALIVE`] idle (1 ms:
/// the paper removes an additional thread as soon as it has finished its job
/// and finds nothing to do), which [`with_keep_alive`](Self::with_keep_alive)
/// can change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermark {
    min: usize,
    max: usize,
    keep_alive: Duration,
}

impl Watermark {
    /// The lower watermark of the paper's experiments (§IV: "the minimum number
    /// of threads is set to 3 for WM").
    pub const DEFAULT_MIN: usize = 3;
    /// The upper watermark of the paper's experiments (§IV: 100 for both methods).
    pub const DEFAULT_MAX: usize = 100;
    /// How long an extra thread may stay idle before it is removed. The paper
    /// removes additional threads "after they complete their jobs", i.e. as
    /// soon as there is no job for them; 1 ms is the smallest keep-alive the
    /// pool accepts (it ignores zero) and amounts to no grace period.
    pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_millis(1);

    /// A watermark pool between `min` and `max` threads (`max` is raised to
    /// `min` if smaller, so the pair is always a valid range).
    pub fn new(min: usize, max: usize) -> Self {
        Watermark {
            min,
            max: max.max(min),
            keep_alive: Self::DEFAULT_KEEP_ALIVE,
        }
    }

    /// Use another keep-alive for the extra threads.
    pub fn with_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// The lower watermark.
    pub fn min(&self) -> usize {
        self.min
    }

    /// The upper watermark.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The keep-alive of extra threads.
    pub fn keep_alive(&self) -> Duration {
        self.keep_alive
    }
}

impl Default for Watermark {
    fn default() -> Self {
        Watermark::new(Self::DEFAULT_MIN, Self::DEFAULT_MAX)
    }
}

impl SizingPolicy for Watermark {
    fn name(&self) -> &str {
        "watermark"
    }

    fn decide(&mut self, obs: &Observation) -> Decision {
        // Only the start sets anything; the schedule asks for nothing else, but
        // a stray call must not re-apply settings someone changed since.
        if obs.trigger != Trigger::Start {
            return Decision::hold();
        }
        let (lo, hi) = obs.user_bounds();
        let floor = self.min.clamp(lo, hi);
        Decision {
            target: Some(floor),
            min: Some(floor),
            spawn_limit: Some(self.max),
            keep_alive: Some(self.keep_alive),
            grow_on_demand: Some(true),
            reason: "watermark: keep min, extra threads on demand up to max".into(),
            ..Decision::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Schedule;

    #[test]
    fn start_sets_the_watermarks_and_on_demand_growth() {
        let d = Watermark::default().decide(&Observation::default());
        assert_eq!((d.target, d.min, d.max), (Some(3), Some(3), None));
        assert_eq!(d.spawn_limit, Some(100));
        assert_eq!(d.grow_on_demand, Some(true));
        assert_eq!(d.keep_alive, Some(Duration::from_millis(1)));
    }

    #[test]
    fn custom_range_and_keep_alive() {
        let mut p = Watermark::new(5, 7).with_keep_alive(Duration::from_millis(250));
        let d = p.decide(&Observation::default());
        assert_eq!(
            (d.target, d.min, d.spawn_limit),
            (Some(5), Some(5), Some(7))
        );
        assert_eq!(d.keep_alive, Some(Duration::from_millis(250)));
    }

    #[test]
    fn inverted_range_is_repaired() {
        let p = Watermark::new(10, 4);
        assert_eq!((p.min(), p.max()), (10, 10));
    }

    #[test]
    fn needs_no_calls_after_start_and_holds_if_called() {
        let mut p = Watermark::default();
        assert_eq!(p.schedule(), Schedule::default());
        let obs = Observation {
            trigger: Trigger::Starved,
            queue_len: 50,
            ..Observation::default()
        };
        assert!(p.decide(&obs).is_hold());
    }
}
