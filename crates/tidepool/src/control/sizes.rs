//! The size transitions: how `(live, target)` changes when a worker is
//! reserved, retires as surplus, expires after its keep-alive, or is spawned
//! on demand.
//!
//! The pool applies each one as a single compare-and-swap over its packed
//! `(live, target)` word; a simulator applies them to a plain value. Each
//! returns `None` when the transition does not apply, and then nothing
//! changes.
//!
//! The sequences the pool builds from them:
//! - growing to a target: set the target (clamped, see
//!   [`Limits::clamp`](super::Limits::clamp)), then
//!   [`reserve`](Sizes::reserve) with `limit = target` and spawn, until it
//!   fails; idle surplus workers are woken and leave through
//!   [`release_surplus`](Sizes::release_surplus);
//! - on-demand growth (a task waits and nobody is idle): if growth is on, or
//!   no worker is alive, [`reserve`](Sizes::reserve) with `limit = max`, then
//!   [`raise_target_to_live`](Sizes::raise_target_to_live) and spawn; if the
//!   reservation fails the pool is at its limit ([`Trigger::AtMax`](crate::policy::Trigger::AtMax));
//! - a worker between two tasks leaves if
//!   [`release_surplus`](Sizes::release_surplus) succeeds;
//! - a worker idle for the keep-alive leaves if [`expire`](Sizes::expire)
//!   succeeds ([`Trigger::Retired`](crate::policy::Trigger::Retired));
//! - a worker that never started, or that leaves at shutdown:
//!   [`drop_live`](Sizes::drop_live).

/// Workers alive and the size the pool steers toward.
///
/// `live_threads` may differ from `target` for a while: a pool above its target
/// shrinks as workers finish their current task, one below it grows as
/// threads are spawned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Sizes {
    /// Workers that exist (or have a reserved slot and are being spawned).
    pub live_threads: usize,
    /// The size the pool steers toward.
    pub target: usize,
}

impl Sizes {
    /// `live_threads` workers steering toward `target`.
    #[inline]
    pub const fn new(live_threads: usize, target: usize) -> Self {
        Sizes {
            live_threads,
            target,
        }
    }

    /// More workers are alive than the target: one of them should go.
    #[inline]
    pub const fn has_surplus(self) -> bool {
        self.live_threads > self.target
    }

    /// How many workers are alive above the target.
    #[inline]
    pub const fn surplus(self) -> usize {
        self.live_threads.saturating_sub(self.target)
    }

    /// The same live count steering toward `target` (the caller clamps it).
    #[inline]
    pub const fn with_target(self, target: usize) -> Self {
        Sizes { target, ..self }
    }

    /// Reserve a slot for one more worker if `live < limit`.
    #[inline]
    pub fn reserve(self, limit: usize) -> Option<Self> {
        (self.live_threads < limit).then_some(Sizes {
            live_threads: self.live_threads + 1,
            ..self
        })
    }

    /// Give back one worker's slot if `live > target`: that worker retires.
    #[inline]
    pub fn release_surplus(self) -> Option<Self> {
        self.has_surplus().then(|| Sizes {
            live_threads: self.live_threads - 1,
            ..self
        })
    }

    /// A worker's keep-alive ran out: it is not needed. It retires if the
    /// pool stays at or above both `min` and `target - 1`, and the target
    /// follows it down (never below `min`), so the target never claims
    /// workers that are gone.
    #[inline]
    pub fn expire(self, min: usize) -> Option<Self> {
        let floor = self.target.saturating_sub(1).max(min);
        (self.live_threads > floor).then(|| {
            let live = self.live_threads - 1;
            Sizes {
                live_threads: live,
                target: self.target.min(live).max(min),
            }
        })
    }

    /// A worker was spawned on demand: the target follows `live_threads` up, so the
    /// new worker is not surplus (it leaves only through its keep-alive).
    #[inline]
    pub fn raise_target_to_live(self) -> Option<Self> {
        (self.target < self.live_threads).then_some(Sizes {
            target: self.live_threads,
            ..self
        })
    }

    /// One fewer live worker, whatever the target: a worker that failed to
    /// start, or one leaving at shutdown (no floor to respect then).
    #[inline]
    pub const fn drop_live(self) -> Self {
        Sizes {
            live_threads: self.live_threads.saturating_sub(1),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Sizes;

    fn s(live: usize, target: usize) -> Sizes {
        Sizes::new(live, target)
    }

    #[test]
    fn surplus_is_live_above_target() {
        assert!(s(3, 2).has_surplus());
        assert!(!s(2, 2).has_surplus());
        assert!(!s(1, 2).has_surplus());
        assert_eq!(s(5, 2).surplus(), 3);
        assert_eq!(s(2, 2).surplus(), 0);
        assert_eq!(s(0, 7).surplus(), 0);
    }

    #[test]
    fn with_target_keeps_live() {
        assert_eq!(s(3, 2).with_target(9), s(3, 9));
        assert_eq!(s(3, 2).with_target(0), s(3, 0));
    }

    #[test]
    fn reserve_stops_at_the_limit() {
        assert_eq!(s(0, 0).reserve(1), Some(s(1, 0)));
        assert_eq!(s(2, 4).reserve(4), Some(s(3, 4)));
        assert_eq!(s(4, 4).reserve(4), None);
        assert_eq!(s(5, 4).reserve(4), None);
        assert_eq!(s(0, 0).reserve(0), None);
    }

    #[test]
    fn reserve_leaves_the_target_alone() {
        // On-demand growth raises the target in a second step.
        assert_eq!(s(3, 3).reserve(8), Some(s(4, 3)));
    }

    #[test]
    fn repeated_reserves_fill_exactly_to_the_limit() {
        let mut sizes = s(1, 5);
        let mut spawned = 0;
        while let Some(next) = sizes.reserve(sizes.target) {
            sizes = next;
            spawned += 1;
        }
        assert_eq!(spawned, 4);
        assert_eq!(sizes, s(5, 5));
    }

    #[test]
    fn release_surplus_only_above_target() {
        assert_eq!(s(3, 2).release_surplus(), Some(s(2, 2)));
        assert_eq!(s(2, 2).release_surplus(), None);
        assert_eq!(s(1, 2).release_surplus(), None);
        assert_eq!(s(0, 0).release_surplus(), None);
        assert_eq!(s(1, 0).release_surplus(), Some(s(0, 0)));
    }

    #[test]
    fn release_surplus_never_undershoots_the_target() {
        let mut sizes = s(9, 4);
        while let Some(next) = sizes.release_surplus() {
            sizes = next;
        }
        assert_eq!(sizes, s(4, 4));
    }

    #[test]
    fn expire_above_min_lowers_the_target_with_live() {
        // At target, above min: retire and the target follows.
        assert_eq!(s(4, 4).expire(1), Some(s(3, 3)));
        assert_eq!(s(2, 2).expire(1), Some(s(1, 1)));
    }

    #[test]
    fn expire_stops_at_min() {
        assert_eq!(s(1, 1).expire(1), None);
        assert_eq!(s(3, 3).expire(3), None);
        assert_eq!(s(0, 0).expire(0), None);
        // The target never drops below min either.
        assert_eq!(s(2, 1).expire(1), Some(s(1, 1)));
    }

    #[test]
    fn expire_with_min_zero_can_empty_the_pool() {
        assert_eq!(s(1, 1).expire(0), Some(s(0, 0)));
        assert_eq!(s(1, 0).expire(0), Some(s(0, 0)));
    }

    #[test]
    fn expire_below_target_waits_for_the_spawns() {
        // Live below target - 1 (spawns under way): an idle worker does not
        // retire, the pool is still growing.
        assert_eq!(s(2, 5).expire(1), None);
        // Live exactly target - 1: also kept (floor is target - 1).
        assert_eq!(s(4, 5).expire(1), None);
    }

    #[test]
    fn expire_above_target_keeps_the_target() {
        // A surplus worker that expires: the target stays where it was.
        assert_eq!(s(5, 3).expire(1), Some(s(4, 3)));
    }

    #[test]
    fn expire_with_target_below_min_raises_it_to_min() {
        // The pool's clamping keeps target >= min, but a min raised by a
        // decision may meet an old target: the result respects min.
        assert_eq!(s(4, 1).expire(3), Some(s(3, 3)));
    }

    #[test]
    fn repeated_expiry_settles_at_min() {
        let mut sizes = s(8, 8);
        while let Some(next) = sizes.expire(2) {
            sizes = next;
        }
        assert_eq!(sizes, s(2, 2));
    }

    #[test]
    fn raise_target_to_live_only_raises() {
        assert_eq!(s(4, 3).raise_target_to_live(), Some(s(4, 4)));
        assert_eq!(s(4, 4).raise_target_to_live(), None);
        assert_eq!(s(2, 4).raise_target_to_live(), None);
        assert_eq!(s(1, 0).raise_target_to_live(), Some(s(1, 1)));
    }

    #[test]
    fn on_demand_growth_adds_a_worker_that_is_not_surplus() {
        let grown = s(3, 3).reserve(8).unwrap().raise_target_to_live().unwrap();
        assert_eq!(grown, s(4, 4));
        assert!(!grown.has_surplus());
        assert_eq!(grown.release_surplus(), None);
    }

    #[test]
    fn drop_live_saturates_and_keeps_the_target() {
        assert_eq!(s(3, 3).drop_live(), s(2, 3));
        assert_eq!(s(0, 2).drop_live(), s(0, 2));
        assert_eq!(s(1, 0).drop_live(), s(0, 0));
    }

    #[test]
    fn transitions_never_exceed_the_reserve_limit_or_go_negative() {
        // Every sequence of transitions over a small space keeps live within
        // 0..=limit and target within min..: an exhaustive walk.
        let (min, limit) = (1, 4);
        for live in 0..=limit {
            for target in min..=limit {
                let start = s(live, target);
                for next in [
                    start.reserve(limit),
                    start.release_surplus(),
                    start.expire(min),
                    start.raise_target_to_live(),
                    Some(start.drop_live()),
                ]
                .into_iter()
                .flatten()
                {
                    assert!(next.live_threads <= limit, "{start:?} -> {next:?}");
                    assert!(next.target >= min, "{start:?} -> {next:?}");
                    assert!(
                        next.live_threads.abs_diff(start.live_threads) <= 1,
                        "{start:?} -> {next:?}"
                    );
                }
            }
        }
    }
}
