//! Turning a policy's [`Decision`] into the pool's new settings and target.
//!
//! A policy's answer is advice, not trusted input: invalid bounds (`min >
//! max`, `max = 0` or above [`MAX_THREADS`]) are ignored as a pair, a zero
//! keep-alive is ignored, and the target is clamped into the resulting
//! `min..=max`.

use std::time::Duration;

use crate::policy::Decision;

pub use crate::limits::MAX_THREADS;

/// The settings a [`Decision`] may change, besides the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// The pool never retires below this many workers through keep-alive.
    pub min: usize,
    /// The pool never spawns above this many workers.
    pub max: usize,
    /// The policy's spawn limit, as it asked (`None`: it set none): on-demand
    /// growth stops there, clamped into `min..=max`
    /// ([`Limits::effective_spawn_limit`]).
    pub spawn_limit: Option<usize>,
    /// How long an idle worker waits before it retires (see
    /// [`Sizes::expire`](super::Sizes::expire)).
    pub keep_alive: Duration,
    /// Whether a task that waits with nobody idle spawns a worker.
    pub grow_on_demand: bool,
    /// The scheduler slice asked for each worker (`None`: never asked;
    /// `Some(Duration::ZERO)`: the system default again).
    pub worker_slice: Option<Duration>,
}

/// What a decision left: the new settings and the new target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Applied {
    /// The settings after the decision.
    pub limits: Limits,
    /// The target after the decision, inside `limits.min..=limits.max`.
    pub target: usize,
}

/// The longest keep-alive the pool can hold (it stores nanoseconds in 64 bits).
pub const MAX_KEEP_ALIVE: Duration = Duration::from_nanos(u64::MAX);

/// Whether `min..=max` is a range a pool accepts from a decision.
#[inline]
pub fn valid_bounds(min: usize, max: usize) -> bool {
    min <= max && (1..=MAX_THREADS).contains(&max)
}

impl Limits {
    /// `n` clamped into `min..=max`: every target the pool takes, from a
    /// decision or from `Pool::resize`.
    #[inline]
    pub fn clamp(&self, n: usize) -> usize {
        n.clamp(self.min, self.max)
    }

    /// The spawn limit in force, where on-demand growth stops: the policy's
    /// one inside `min..=max`, or `max` without one.
    #[inline]
    pub fn effective_spawn_limit(&self) -> usize {
        effective_spawn_limit(self.spawn_limit.unwrap_or(usize::MAX), self.min, self.max)
    }

    /// The settings after `decision`; fields it leaves `None` keep their
    /// value, invalid bounds and a zero keep-alive are ignored.
    pub fn apply(&self, decision: &Decision) -> Limits {
        let mut new = *self;
        let min = decision.min.unwrap_or(self.min);
        let max = decision.max.unwrap_or(self.max);
        if valid_bounds(min, max) {
            new.min = min;
            new.max = max;
        }
        if let Some(l) = decision.spawn_limit {
            new.spawn_limit = Some(l);
        }
        if let Some(k) = decision.keep_alive.filter(|k| !k.is_zero()) {
            new.keep_alive = k.min(MAX_KEEP_ALIVE);
        }
        if let Some(g) = decision.grow_on_demand {
            new.grow_on_demand = g;
        }
        if let Some(s) = decision.worker_slice {
            new.worker_slice = Some(s);
        }
        new
    }
}

/// `spawn_limit` (`usize::MAX`: none) inside `min..=max`; never panics, even
/// on bounds read apart while they change (`min > max` for an instant).
#[inline]
pub fn effective_spawn_limit(spawn_limit: usize, min: usize, max: usize) -> usize {
    spawn_limit.min(max).max(min)
}

/// Apply `decision` to a pool with `limits` and `target`: its settings first,
/// then its target (or the current one, if it names none) clamped into the
/// new bounds.
pub fn apply(decision: &Decision, limits: &Limits, target: usize) -> Applied {
    let limits = limits.apply(decision);
    Applied {
        target: limits.clamp(decision.target.unwrap_or(target)),
        limits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            min: 2,
            max: 8,
            spawn_limit: None,
            keep_alive: Duration::from_secs(1),
            grow_on_demand: false,
            worker_slice: None,
        }
    }

    fn decision() -> Decision {
        Decision::default()
    }

    #[test]
    fn hold_changes_nothing() {
        let l = limits();
        assert_eq!(l.apply(&Decision::hold()), l);
        assert_eq!(
            apply(&Decision::hold(), &l, 5),
            Applied {
                limits: l,
                target: 5
            }
        );
    }

    #[test]
    fn hold_still_clamps_an_out_of_range_target() {
        // The target in force is re-clamped into the (unchanged) bounds.
        assert_eq!(apply(&Decision::hold(), &limits(), 20).target, 8);
        assert_eq!(apply(&Decision::hold(), &limits(), 0).target, 2);
    }

    #[test]
    fn target_is_clamped_into_the_bounds() {
        let l = limits();
        assert_eq!(apply(&Decision::resize(5, ""), &l, 3).target, 5);
        assert_eq!(apply(&Decision::resize(100, ""), &l, 3).target, 8);
        assert_eq!(apply(&Decision::resize(0, ""), &l, 3).target, 2);
        assert_eq!(apply(&Decision::resize(2, ""), &l, 3).target, 2);
        assert_eq!(apply(&Decision::resize(8, ""), &l, 3).target, 8);
    }

    #[test]
    fn target_is_clamped_into_the_new_bounds() {
        let d = Decision {
            target: Some(20),
            max: Some(16),
            ..decision()
        };
        let a = apply(&d, &limits(), 3);
        assert_eq!(a.limits.max, 16);
        assert_eq!(a.target, 16);
    }

    #[test]
    fn new_bounds_move_the_current_target() {
        // No target named: the current one is clamped into the new range.
        let d = Decision {
            min: Some(6),
            ..decision()
        };
        assert_eq!(apply(&d, &limits(), 3).target, 6);
        let d = Decision {
            max: Some(4),
            ..decision()
        };
        assert_eq!(apply(&d, &limits(), 7).target, 4);
    }

    #[test]
    fn one_bound_alone_is_checked_against_the_other() {
        let l = limits();
        let d = Decision {
            min: Some(5),
            ..decision()
        };
        assert_eq!((l.apply(&d).min, l.apply(&d).max), (5, 8));
        let d = Decision {
            max: Some(3),
            ..decision()
        };
        assert_eq!((l.apply(&d).min, l.apply(&d).max), (2, 3));
        // min above the current max: invalid, both kept.
        let d = Decision {
            min: Some(9),
            ..decision()
        };
        assert_eq!((l.apply(&d).min, l.apply(&d).max), (2, 8));
        // max below the current min: invalid, both kept.
        let d = Decision {
            max: Some(1),
            ..decision()
        };
        assert_eq!((l.apply(&d).min, l.apply(&d).max), (2, 8));
    }

    #[test]
    fn invalid_bounds_are_ignored_as_a_pair() {
        let l = limits();
        for (min, max) in [(5, 4), (0, 0), (1, MAX_THREADS + 1), (3, 0)] {
            let d = Decision {
                min: Some(min),
                max: Some(max),
                target: Some(6),
                ..decision()
            };
            let a = apply(&d, &l, 3);
            assert_eq!((a.limits.min, a.limits.max), (2, 8), "{min}..{max}");
            assert_eq!(a.target, 6, "{min}..{max}");
        }
    }

    #[test]
    fn valid_bounds_edges() {
        assert!(valid_bounds(0, 1));
        assert!(valid_bounds(1, 1));
        assert!(valid_bounds(MAX_THREADS, MAX_THREADS));
        assert!(valid_bounds(0, MAX_THREADS));
        assert!(!valid_bounds(0, 0));
        assert!(!valid_bounds(2, 1));
        assert!(!valid_bounds(1, MAX_THREADS + 1));
        assert!(!valid_bounds(usize::MAX, usize::MAX));
    }

    #[test]
    fn min_zero_is_accepted() {
        let d = Decision {
            min: Some(0),
            target: Some(0),
            ..decision()
        };
        let a = apply(&d, &limits(), 3);
        assert_eq!(a.limits.min, 0);
        assert_eq!(a.target, 0);
    }

    #[test]
    fn zero_keep_alive_is_ignored() {
        let d = Decision {
            keep_alive: Some(Duration::ZERO),
            ..decision()
        };
        assert_eq!(limits().apply(&d).keep_alive, Duration::from_secs(1));
    }

    #[test]
    fn keep_alive_is_taken_and_saturated() {
        let d = Decision {
            keep_alive: Some(Duration::from_millis(30)),
            ..decision()
        };
        assert_eq!(limits().apply(&d).keep_alive, Duration::from_millis(30));
        let d = Decision {
            keep_alive: Some(Duration::MAX),
            ..decision()
        };
        assert_eq!(limits().apply(&d).keep_alive, MAX_KEEP_ALIVE);
        let d = Decision {
            keep_alive: Some(Duration::from_nanos(1)),
            ..decision()
        };
        assert_eq!(limits().apply(&d).keep_alive, Duration::from_nanos(1));
    }

    #[test]
    fn grow_on_demand_turns_on_and_off() {
        let on = Decision {
            grow_on_demand: Some(true),
            ..decision()
        };
        let off = Decision {
            grow_on_demand: Some(false),
            ..decision()
        };
        let l = limits().apply(&on);
        assert!(l.grow_on_demand);
        assert!(!l.apply(&off).grow_on_demand);
        // Left None: unchanged.
        assert!(l.apply(&decision()).grow_on_demand);
    }

    #[test]
    fn worker_slice_is_recorded_including_zero() {
        let d = Decision {
            worker_slice: Some(Duration::from_micros(100)),
            ..decision()
        };
        let l = limits().apply(&d);
        assert_eq!(l.worker_slice, Some(Duration::from_micros(100)));
        let back = Decision {
            worker_slice: Some(Duration::ZERO),
            ..decision()
        };
        assert_eq!(l.apply(&back).worker_slice, Some(Duration::ZERO));
        assert_eq!(l.apply(&decision()).worker_slice, l.worker_slice);
    }

    #[test]
    fn other_fields_survive_invalid_bounds() {
        let d = Decision {
            min: Some(9),
            max: Some(3),
            keep_alive: Some(Duration::from_millis(5)),
            grow_on_demand: Some(true),
            ..decision()
        };
        let l = limits().apply(&d);
        assert_eq!((l.min, l.max), (2, 8));
        assert_eq!(l.keep_alive, Duration::from_millis(5));
        assert!(l.grow_on_demand);
    }

    #[test]
    fn clamp_edges() {
        let l = limits();
        assert_eq!(l.clamp(0), 2);
        assert_eq!(l.clamp(usize::MAX), 8);
        let one = Limits {
            min: 1,
            max: 1,
            ..l
        };
        assert_eq!(one.clamp(0), 1);
        assert_eq!(one.clamp(7), 1);
    }

    #[test]
    fn the_spawn_limit_moves_inside_the_bounds_and_leaves_them_alone() {
        let l = limits();
        assert_eq!(l.effective_spawn_limit(), 8, "no spawn limit: the max");
        let d = Decision {
            spawn_limit: Some(4),
            ..decision()
        };
        let a = apply(&d, &l, 3);
        assert_eq!((a.limits.min, a.limits.max), (2, 8));
        assert_eq!(a.limits.spawn_limit, Some(4));
        assert_eq!(a.limits.effective_spawn_limit(), 4);
        // Outside the bounds it is clamped into them; the bounds win.
        let low = a.limits.apply(&Decision {
            spawn_limit: Some(1),
            ..decision()
        });
        assert_eq!(low.effective_spawn_limit(), 2);
        let high = a.limits.apply(&Decision {
            spawn_limit: Some(100),
            ..decision()
        });
        assert_eq!(high.effective_spawn_limit(), 8);
        // The user's new bounds take effect around the limit at once.
        let raised = Limits { min: 6, ..a.limits };
        assert_eq!(raised.effective_spawn_limit(), 6);
        // Bounds read apart mid-change do not panic.
        assert_eq!(effective_spawn_limit(4, 10, 5), 10);
        // The target stays clamped into the user's bounds only.
        let t = apply(
            &Decision {
                target: Some(7),
                spawn_limit: Some(3),
                ..decision()
            },
            &l,
            3,
        );
        assert_eq!(t.target, 7);
    }

    #[test]
    fn the_users_bounds_win_over_the_watermarks() {
        use crate::policy::{Observation, SizingPolicy, Watermark};
        // `watermark:3..100` in a pool the user bounded to 5..=50: the
        // floor is the user's 5, growth stops at the user's 50, and the
        // user's bounds stay as they were.
        let obs = Observation {
            min: 5,
            max: 50,
            ..Observation::default()
        };
        let d = Watermark::default().decide(&obs);
        assert_eq!((d.target, d.min, d.max), (Some(5), Some(5), None));
        let limits = Limits {
            min: 5,
            max: 50,
            spawn_limit: None,
            keep_alive: Duration::from_secs(1),
            grow_on_demand: false,
            worker_slice: None,
        };
        let applied = apply(&d, &limits, 1);
        assert_eq!((applied.limits.min, applied.limits.max), (5, 50));
        assert_eq!(applied.limits.effective_spawn_limit(), 50);
        assert_eq!(applied.target, 5);
        // Inside roomy user bounds the watermarks are the policy's.
        let obs = Observation {
            min: 1,
            max: 500,
            ..Observation::default()
        };
        let d = Watermark::default().decide(&obs);
        let applied = apply(
            &d,
            &Limits {
                max: 500,
                min: 1,
                ..limits
            },
            1,
        );
        assert_eq!((applied.limits.min, applied.limits.max), (3, 500));
        assert_eq!(applied.limits.effective_spawn_limit(), 100);
        // A user's max below the lower watermark caps the floor too.
        let obs = Observation {
            min: 1,
            max: 2,
            ..Observation::default()
        };
        assert_eq!(Watermark::default().decide(&obs).min, Some(2));
    }
}
