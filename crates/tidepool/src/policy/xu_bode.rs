//! `xu-bode` — the `dynamicThreadPool` algorithm of Xu's thesis (figure 6.8,
//! §6.3.1; figure 9 of the Xu & Bode paper), transcribed branch for branch.
//!
//! ```text
//! if (|currentAIT - preAIT| / preAIT > 1%) {
//!     if (currentAIT > preAIT) {
//!         if (preAIT < prepreAIT) poolSize -= stride;       // branch A
//!         else                    poolSize += stride;       // branch B
//!     } else if (currentAIT < preAIT && preAIT < prepreAIT)
//!                                 poolSize += stride;       // branch C
//!                                                           // (else: D, no change)
//! } else if (prePoolSize == poolSize) poolSize += stride;   // branch E
//!                                                           // (else: F, no change)
//! if (poolSize <= 0) poolSize = 1;
//! adjustPoolSize(poolSize);
//! prepreAIT = preAIT; preAIT = currentAIT; prePoolSize = poolSize;
//! ```
//!
//! It runs at the end of every cycle of five completed tasks (§6.3.2). AIT is
//! the mean queue wait of the tasks of the cycle ([`Observation::mean_wait`]).
//!
//! Choices where the pseudocode is silent (see `docs/policies.md`):
//! - `poolSize` (an input) is the pool's current target as the pool reports it
//!   ([`Observation::target`], already clamped to `min..=max`); `prePoolSize` is
//!   the size this algorithm asked for at the end of the previous cycle (the
//!   initial size before the first). So branch E grows only when the pool took
//!   the last request as given: at `max` the request is clamped, the sizes
//!   differ, and the proactive growth pauses instead of running away.
//! - `preAIT` and `prepreAIT` start at 0 (uninitialised globals in C). A
//!   relative change from a zero `preAIT` is infinite when `currentAIT > 0`
//!   (so the first cycle takes branch B) and zero when `currentAIT == 0` too.
//! - A cycle whose AIT is unknown (no task started in the window) is skipped:
//!   no change, and the history does not shift.

use std::time::Duration;

use super::{Decision, Observation, Schedule, SizingPolicy, Trigger};

/// Which branch of figure 6.8 the last cycle took (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XuBodeBranch {
    /// AIT rose by more than 1% after falling: the last increase hurt, shrink.
    RoseAfterFall,
    /// AIT rose by more than 1% and was not falling before: grow.
    Rose,
    /// AIT fell by more than 1% after falling before too: grow.
    FellAfterFall,
    /// AIT fell by more than 1% after rising: keep the size.
    Fell,
    /// AIT changed by at most 1% and the pool is at the size asked last: grow.
    FlatAtSize,
    /// AIT changed by at most 1% but the pool is not at the size asked last: keep.
    FlatOffSize,
    /// No AIT in the window: cycle skipped.
    NoData,
}

/// Xu & Bode's average-idle-time heuristic (`dynamicThreadPool`).
#[derive(Debug, Clone, PartialEq)]
pub struct XuBode {
    initial: usize,
    stride: usize,
    // AITs in nanoseconds: integers make the 1% test exact.
    pre_ait: u128,
    prepre_ait: u128,
    pre_pool_size: usize,
    last_branch: Option<XuBodeBranch>,
}

impl XuBode {
    /// Initial size of the thesis's first experiment (§6.3.2 uses 4 and 16).
    pub const DEFAULT_INITIAL: usize = 4;
    /// The stride of the thesis's experiments (§6.3.1: "we set the initial value
    /// of `stride` to be 2").
    pub const DEFAULT_STRIDE: usize = 2;
    /// A cycle is this many completed tasks (§6.3.2).
    pub const CYCLE_COMPLETIONS: u64 = 5;
    /// Idle time after which a worker above the size leaves: as good as none.
    pub const KEEP_ALIVE: Duration = Duration::from_millis(1);

    /// Start at `initial` threads and move by `stride` (both at least 1).
    pub fn new(initial: usize, stride: usize) -> Self {
        let initial = initial.max(1);
        XuBode {
            initial,
            stride: stride.max(1),
            pre_ait: 0,
            prepre_ait: 0,
            pre_pool_size: initial,
            last_branch: None,
        }
    }

    /// The initial pool size.
    pub fn initial(&self) -> usize {
        self.initial
    }

    /// The stride.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The branch the last cycle took, if a cycle ran.
    pub fn last_branch(&self) -> Option<XuBodeBranch> {
        self.last_branch
    }

    /// One run of figure 6.8 with `pool_size` as the current size and
    /// `current_ait` in nanoseconds; returns the new size and the branch taken.
    fn cycle(&mut self, pool_size: usize, current_ait: u128) -> (usize, XuBodeBranch) {
        let stride = self.stride as i64;
        let mut size = pool_size as i64;
        let (pre, prepre) = (self.pre_ait, self.prepre_ait);

        let branch = if changed_by_more_than_one_percent(current_ait, pre) {
            if current_ait > pre {
                if pre < prepre {
                    size -= stride;
                    XuBodeBranch::RoseAfterFall
                } else {
                    size += stride;
                    XuBodeBranch::Rose
                }
            } else if current_ait < pre && pre < prepre {
                size += stride;
                XuBodeBranch::FellAfterFall
            } else {
                XuBodeBranch::Fell
            }
        } else if self.pre_pool_size == pool_size {
            size += stride;
            XuBodeBranch::FlatAtSize
        } else {
            XuBodeBranch::FlatOffSize
        };

        if size <= 0 {
            size = 1;
        }
        let size = size as usize;
        self.prepre_ait = pre;
        self.pre_ait = current_ait;
        self.pre_pool_size = size;
        (size, branch)
    }
}

/// `|current - pre| / pre > 1%`, computed exactly as `100·|current - pre| >
/// pre`; with `pre = 0` that is true exactly when `current > 0` (an infinite
/// relative change) and false for 0 → 0 (no change), as the module docs say.
fn changed_by_more_than_one_percent(current: u128, pre: u128) -> bool {
    current.abs_diff(pre) * 100 > pre
}

impl Default for XuBode {
    fn default() -> Self {
        XuBode::new(Self::DEFAULT_INITIAL, Self::DEFAULT_STRIDE)
    }
}

impl SizingPolicy for XuBode {
    fn name(&self) -> &str {
        "xu-bode"
    }

    fn schedule(&self) -> Schedule {
        Schedule {
            every_completions: Some(Self::CYCLE_COMPLETIONS),
            ..Schedule::default()
        }
    }

    fn decide(&mut self, obs: &Observation) -> Decision {
        match obs.trigger {
            Trigger::Start => Decision {
                target: Some(self.initial),
                // The thesis's pool has no on-demand threads, and its
                // adjustPoolSize removes threads at once: no keep-alive grace
                // (1 ms, the pool ignores zero).
                grow_on_demand: Some(false),
                keep_alive: Some(Self::KEEP_ALIVE),
                reason: "xu-bode: initial size".into(),
                ..Decision::default()
            },
            Trigger::Completions => {
                let Some(ait) = obs.mean_wait else {
                    self.last_branch = Some(XuBodeBranch::NoData);
                    return Decision::hold();
                };
                let (size, branch) = self.cycle(obs.target, ait.as_nanos());
                self.last_branch = Some(branch);
                Decision::resize(size, format!("xu-bode: {branch:?}"))
            }
            // Figure 6.8 runs only at the end of a cycle.
            _ => Decision::hold(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Option<Duration> {
        Some(Duration::from_millis(v))
    }

    fn cycle_obs(target: usize, ait: Option<Duration>) -> Observation {
        Observation {
            trigger: Trigger::Completions,
            completions: 5,
            mean_wait: ait,
            target,
            ..Observation::default()
        }
    }

    /// A policy with a given history: preAIT, prepreAIT (ms) and prePoolSize.
    fn with_history(pre: f64, prepre: f64, pre_size: usize) -> XuBode {
        let mut p = XuBode::new(4, 2);
        p.pre_ait = (pre * 1e6) as u128;
        p.prepre_ait = (prepre * 1e6) as u128;
        p.pre_pool_size = pre_size;
        p
    }

    fn run(p: &mut XuBode, target: usize, ait_ms: u64) -> (Option<usize>, XuBodeBranch) {
        let d = p.decide(&cycle_obs(target, ms(ait_ms)));
        (d.target, p.last_branch().unwrap())
    }

    #[test]
    fn schedule_is_every_five_completions_only() {
        let s = XuBode::default().schedule();
        assert_eq!(s.every_completions, Some(5));
        assert_eq!(s.every, None);
        assert!(!s.on_starved && !s.on_retired);
    }

    #[test]
    fn start_sets_initial_size_without_on_demand_growth() {
        let d = XuBode::new(16, 2).decide(&Observation::default());
        assert_eq!(d.target, Some(16));
        assert_eq!(d.grow_on_demand, Some(false));
    }

    #[test]
    fn branch_a_rise_after_fall_shrinks() {
        // pre (100) < prepre (200), current 150 > pre by 50%.
        let mut p = with_history(100.0, 200.0, 10);
        assert_eq!(run(&mut p, 10, 150), (Some(8), XuBodeBranch::RoseAfterFall));
    }

    #[test]
    fn branch_b_rise_not_after_fall_grows() {
        // pre (100) >= prepre (50).
        let mut p = with_history(100.0, 50.0, 10);
        assert_eq!(run(&mut p, 10, 150), (Some(12), XuBodeBranch::Rose));
        // Equal pre and prepre also counts as "not falling".
        let mut p = with_history(100.0, 100.0, 10);
        assert_eq!(run(&mut p, 10, 150), (Some(12), XuBodeBranch::Rose));
    }

    #[test]
    fn branch_c_fall_after_fall_grows() {
        let mut p = with_history(100.0, 200.0, 10);
        assert_eq!(run(&mut p, 10, 50), (Some(12), XuBodeBranch::FellAfterFall));
    }

    #[test]
    fn branch_d_fall_after_rise_keeps_size() {
        let mut p = with_history(100.0, 50.0, 10);
        assert_eq!(run(&mut p, 10, 50), (Some(10), XuBodeBranch::Fell));
    }

    #[test]
    fn branch_e_flat_at_requested_size_grows() {
        // 100 -> 100.5 ms is a 0.5% change: within the 1% threshold.
        let mut p = with_history(100.0, 300.0, 10);
        let d = p.decide(&cycle_obs(10, Some(Duration::from_micros(100_500))));
        assert_eq!(d.target, Some(12));
        assert_eq!(p.last_branch(), Some(XuBodeBranch::FlatAtSize));
    }

    #[test]
    fn branch_f_flat_off_requested_size_keeps() {
        // The pool clamped the last request (12) to its max 10.
        let mut p = with_history(100.0, 300.0, 12);
        assert_eq!(run(&mut p, 10, 100), (Some(10), XuBodeBranch::FlatOffSize));
    }

    #[test]
    fn exactly_one_percent_is_not_a_change() {
        // |101 - 100| / 100 = 1%, not > 1%: the flat branch.
        let mut p = with_history(100.0, 50.0, 10);
        assert_eq!(run(&mut p, 10, 101), (Some(12), XuBodeBranch::FlatAtSize));
        // Just above 1% is a rise.
        let mut p = with_history(100.0, 200.0, 10);
        let d = p.decide(&cycle_obs(10, Some(Duration::from_micros(101_100))));
        assert_eq!(d.target, Some(8));
    }

    #[test]
    fn floor_is_one() {
        let mut p = with_history(100.0, 200.0, 2);
        assert_eq!(run(&mut p, 2, 150), (Some(1), XuBodeBranch::RoseAfterFall));
        let mut p = with_history(100.0, 200.0, 1);
        p.stride = 5;
        assert_eq!(run(&mut p, 1, 150).0, Some(1));
    }

    #[test]
    fn history_shifts_each_cycle() {
        let mut p = XuBode::new(4, 2);
        p.decide(&Observation::default());
        // Cycle 1: preAIT = 0, AIT 10 ms: infinite change, rise, prepre (0) not
        // above pre (0): grow to 6.
        assert_eq!(run(&mut p, 4, 10), (Some(6), XuBodeBranch::Rose));
        // Cycle 2: 10 -> 20 rises, pre (10) >= prepre (0): grow to 8.
        assert_eq!(run(&mut p, 6, 20), (Some(8), XuBodeBranch::Rose));
        // Cycle 3: 20 -> 5 falls, pre (20) >= prepre (10): keep.
        assert_eq!(run(&mut p, 8, 5), (Some(8), XuBodeBranch::Fell));
        // Cycle 4: 5 -> 2 falls, pre (5) < prepre (20): grow.
        assert_eq!(run(&mut p, 8, 2), (Some(10), XuBodeBranch::FellAfterFall));
        // Cycle 5: 2 -> 4 rises, pre (2) < prepre (5): the increase hurt, shrink.
        assert_eq!(run(&mut p, 10, 4), (Some(8), XuBodeBranch::RoseAfterFall));
    }

    #[test]
    fn zero_ait_history_is_defined() {
        let mut p = XuBode::new(4, 2);
        p.decide(&Observation::default());
        // 0 -> 0 is no change; prePoolSize (initial 4) == 4: grow.
        assert_eq!(run(&mut p, 4, 0), (Some(6), XuBodeBranch::FlatAtSize));
    }

    #[test]
    fn a_cycle_without_ait_is_skipped() {
        let mut p = with_history(100.0, 200.0, 10);
        let d = p.decide(&cycle_obs(10, None));
        assert!(d.is_hold());
        assert_eq!(p.last_branch(), Some(XuBodeBranch::NoData));
        // History untouched: the next cycle still sees pre = 100, prepre = 200.
        assert_eq!(run(&mut p, 10, 150), (Some(8), XuBodeBranch::RoseAfterFall));
    }

    #[test]
    fn other_triggers_hold() {
        let mut p = with_history(100.0, 200.0, 10);
        for trigger in [Trigger::Tick, Trigger::Starved, Trigger::Retired] {
            let obs = Observation {
                trigger,
                ..cycle_obs(10, ms(150))
            };
            assert!(p.decide(&obs).is_hold());
        }
        assert_eq!(p.last_branch(), None);
    }
}
