//! `hisdyn` — Oh & Kim's history-based dynamic thread pool (HisDyn), §III.
//!
//! HisDyn is the watermark pool (extra threads on demand up to `max`) plus two
//! components:
//! - the **data manager** accumulates every job arrival interval and every job
//!   processing time seen since the start and keeps their means `i` and `c`
//!   (the whole history, as the paper says: "accumulates … calculates their
//!   mean values");
//! - the **range manager** estimates the lower limit of the `(min, max)` range
//!   as the smallest thread count whose job waiting probability
//!   `(c / (i·n))^n` is below a user probability `p` (default 1%), by the
//!   linear search of the paper's figure 3 ([`adjust_thread_range`]).
//!
//! The range manager runs only on the paper's two symptoms: "a thread is newly
//! created due to thread shortage" ([`Trigger::Starved`]) and "existing threads
//! are more than needed" — a thread waited for a job longer than the job
//! waiting time and retired ([`Trigger::Retired`]). The job waiting time,
//! `(i·n)·t` with `t = 2` (§IV: "double the mean job arrival time"), is the
//! keep-alive of idle threads above the lower limit.
//!
//! The range is the policy's, not the user's bounds: its upper limit is its
//! spawn limit (the pool keeps it under the user's `max`), and its lower
//! limit becomes the pool's floor clamped into the user's `min..=max` as
//! the pool reported them at start.

use std::time::Duration;

use super::watermark::Watermark;
use super::{Decision, Observation, Schedule, SizingPolicy, Trigger};

pub use super::queueing::wait_probability;

/// Figure 3's `AdjustThreadRange`, line for line: the new lower limit of the
/// thread range, searched linearly from `current` threads.
///
/// Upwards it stops at `max`; downwards its loop stops at 2 threads and the
/// final `no_threads++` then yields 3, a quirk of the paper's code kept as is
/// (the result is the smallest count below `p` only when the search stops
/// above that floor).
pub fn adjust_thread_range(
    current: usize,
    interval: f64,
    processing: f64,
    user_prob: f64,
    max: usize,
) -> usize {
    let mut n = current;
    let mut prob = wait_probability(interval, processing, n);
    if prob >= user_prob {
        while prob > user_prob {
            if n >= max {
                break;
            }
            n += 1;
            prob = wait_probability(interval, processing, n);
        }
    } else {
        while prob < user_prob {
            if n <= 2 {
                break;
            }
            n -= 1;
            prob = wait_probability(interval, processing, n);
        }
        n += 1;
    }
    n
}

/// A running mean over the whole history (the data manager's accumulator).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct HistoryMean {
    sum_secs: f64,
    count: u64,
}

impl HistoryMean {
    fn add(&mut self, mean: Option<Duration>, count: u64) {
        if let Some(m) = mean {
            if count > 0 {
                self.sum_secs += m.as_secs_f64() * count as f64;
                self.count += count;
            }
        }
    }

    fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_secs / self.count as f64)
    }
}

/// Oh & Kim's HisDyn: a watermark pool whose lower limit follows the history.
#[derive(Debug, Clone, PartialEq)]
pub struct HisDyn {
    max: usize,
    user_prob: f64,
    wait_factor: f64,
    interarrival: HistoryMean,
    processing: HistoryMean,
    lower: usize,
    /// The user's bounds, read at start (afterwards the pool's `min` is
    /// the lower limit this policy set).
    user: (usize, usize),
}

impl HisDyn {
    /// The upper limit of the paper's experiments (§IV).
    pub const DEFAULT_MAX: usize = 100;
    /// The user-specified job waiting probability of §IV ("less than 1%").
    pub const DEFAULT_PROBABILITY: f64 = 0.01;
    /// `t` of the job waiting time `(i·n)·t` (§IV: double).
    pub const DEFAULT_WAIT_FACTOR: f64 = 2.0;
    /// The lower limit before the first estimate: the WM setting the paper
    /// compares against, so both start alike.
    pub const INITIAL_MIN: usize = Watermark::DEFAULT_MIN;

    /// HisDyn with upper limit `max` (at least 1) and user job waiting
    /// probability `p` (clamped into `0.0..=1.0`; NaN becomes the default).
    pub fn new(max: usize, p: f64) -> Self {
        let user_prob = if p.is_nan() {
            Self::DEFAULT_PROBABILITY
        } else {
            p.clamp(0.0, 1.0)
        };
        let max = max.max(1);
        HisDyn {
            max,
            user_prob,
            wait_factor: Self::DEFAULT_WAIT_FACTOR,
            interarrival: HistoryMean::default(),
            processing: HistoryMean::default(),
            lower: Self::INITIAL_MIN.min(max),
            user: (1, usize::MAX),
        }
    }

    /// Use another `t` in the job waiting time `(i·n)·t`.
    pub fn with_wait_factor(mut self, t: f64) -> Self {
        if t.is_finite() && t >= 0.0 {
            self.wait_factor = t;
        }
        self
    }

    /// The upper limit.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The user job waiting probability.
    pub fn probability(&self) -> f64 {
        self.user_prob
    }

    /// The current lower limit of the thread range.
    pub fn lower_limit(&self) -> usize {
        self.lower
    }

    /// The data manager's mean arrival interval and mean processing time, in
    /// seconds, once both have samples.
    pub fn means(&self) -> Option<(f64, f64)> {
        Some((self.interarrival.mean()?, self.processing.mean()?))
    }

    fn record(&mut self, obs: &Observation) {
        self.interarrival
            .add(obs.mean_interarrival, obs.arrivals.max(1));
        self.processing.add(obs.mean_service, obs.completions);
    }

    /// The lower limit as the pool's floor: inside the user's bounds.
    fn floor(&self) -> usize {
        self.lower.clamp(self.user.0, self.user.1)
    }

    /// The job waiting time `(i·n)·t`, used as the idle threads' keep-alive
    /// (at least the watermark's 1 ms: the pool ignores a zero keep-alive).
    fn job_waiting_time(&self, interval: f64, threads: usize) -> Option<Duration> {
        Duration::try_from_secs_f64(interval * threads.max(1) as f64 * self.wait_factor)
            .ok()
            .map(|d| d.max(Watermark::DEFAULT_KEEP_ALIVE))
    }
}

impl Default for HisDyn {
    fn default() -> Self {
        HisDyn::new(Self::DEFAULT_MAX, Self::DEFAULT_PROBABILITY)
    }
}

impl SizingPolicy for HisDyn {
    fn name(&self) -> &str {
        "hisdyn"
    }

    fn schedule(&self) -> Schedule {
        Schedule {
            on_starved: true,
            on_retired: true,
            ..Schedule::default()
        }
    }

    fn decide(&mut self, obs: &Observation) -> Decision {
        // Every window feeds the history, whatever the trigger.
        self.record(obs);
        match obs.trigger {
            Trigger::Start => {
                self.user = obs.user_bounds();
                Decision {
                    target: Some(self.floor()),
                    min: Some(self.floor()),
                    spawn_limit: Some(self.max),
                    keep_alive: Some(Watermark::DEFAULT_KEEP_ALIVE),
                    grow_on_demand: Some(true),
                    reason: "hisdyn: watermark start, range from history later".into(),
                    ..Decision::default()
                }
            }
            Trigger::Starved | Trigger::Retired => {
                let Some((i, c)) = self.means() else {
                    return Decision::hold();
                };
                let n = obs.live.max(1);
                self.lower = adjust_thread_range(n, i, c, self.user_prob, self.max).min(self.max);
                Decision {
                    target: Some(self.floor()),
                    min: Some(self.floor()),
                    spawn_limit: Some(self.max),
                    keep_alive: self.job_waiting_time(i, n),
                    reason: format!(
                        "hisdyn: i={:.3}ms c={:.3}ms n={n} -> min {}",
                        i * 1e3,
                        c * 1e3,
                        self.lower
                    )
                    .into(),
                    ..Decision::default()
                }
            }
            _ => Decision::hold(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: f64 = 0.020; // 50 arrivals per second, as in §IV
    const C: f64 = 0.060; // c / i = 3

    #[test]
    fn wait_probability_by_hand() {
        // (60 / (20·4))^4 = 0.75^4
        assert!((wait_probability(I, C, 4) - 0.316_406_25).abs() < 1e-9);
        assert!((wait_probability(I, C, 6) - 0.015_625).abs() < 1e-9);
        assert_eq!(wait_probability(I, C, 3), 1.0);
        assert_eq!(wait_probability(I, 0.0, 3), 0.0);
        assert_eq!(wait_probability(0.0, 0.0, 3), 0.0);
        assert_eq!(wait_probability(0.0, C, 3), f64::INFINITY);
    }

    #[test]
    fn search_up_from_below() {
        // P(3) = 1, P(4) = .316, P(5) = .0778, P(6) = .0156, P(7) = .00266.
        assert_eq!(adjust_thread_range(3, I, C, 0.01, 100), 7);
        // A 2% target stops at 6 (.0156 <= .02).
        assert_eq!(adjust_thread_range(3, I, C, 0.02, 100), 6);
    }

    #[test]
    fn search_down_from_above_ends_one_past_the_first_too_small() {
        // P(10) = 5.9e-6 < 1%: down to 6 (P = .0156 >= 1%), then ++ -> 7.
        assert_eq!(adjust_thread_range(10, I, C, 0.01, 100), 7);
    }

    #[test]
    fn search_up_stops_at_max() {
        // c / i = 200: hopeless, stop at max.
        assert_eq!(adjust_thread_range(3, 0.001, 0.2, 0.01, 100), 100);
        assert_eq!(adjust_thread_range(3, I, C, 0.01, 5), 5);
    }

    #[test]
    fn search_down_floor_quirk() {
        // c / i = 0.1: P(2) = 0.0025 < 1%. Down from 5 the loop stops at 2 and
        // the final ++ gives 3; up from 1 (P(1) = .1) it stops at 2.
        assert_eq!(adjust_thread_range(5, 0.1, 0.01, 0.01, 100), 3);
        assert_eq!(adjust_thread_range(2, 0.1, 0.01, 0.01, 100), 3);
        assert_eq!(adjust_thread_range(1, 0.1, 0.01, 0.01, 100), 2);
    }

    #[test]
    fn probability_exactly_at_target_keeps_count() {
        // P(6) = 0.015625 exactly: enters the upward branch, the loop does not run.
        assert_eq!(adjust_thread_range(6, I, C, 0.015_625, 100), 6);
    }

    #[test]
    fn data_manager_keeps_the_whole_history() {
        let mut p = HisDyn::default();
        let w1 = Observation {
            trigger: Trigger::Start,
            arrivals: 10,
            mean_interarrival: Some(Duration::from_millis(10)),
            completions: 4,
            mean_service: Some(Duration::from_millis(40)),
            ..Observation::default()
        };
        let w2 = Observation {
            trigger: Trigger::Tick,
            arrivals: 30,
            mean_interarrival: Some(Duration::from_millis(30)),
            completions: 12,
            mean_service: Some(Duration::from_millis(80)),
            ..Observation::default()
        };
        p.decide(&w1);
        p.decide(&w2);
        let (i, c) = p.means().unwrap();
        // (10·10 + 30·30) / 40 = 25 ms; (4·40 + 12·80) / 16 = 70 ms.
        assert!((i - 0.025).abs() < 1e-12, "{i}");
        assert!((c - 0.070).abs() < 1e-12, "{c}");
    }

    fn history_obs(trigger: Trigger, live: usize) -> Observation {
        Observation {
            trigger,
            arrivals: 100,
            mean_interarrival: Some(Duration::from_millis(20)),
            completions: 100,
            mean_service: Some(Duration::from_millis(60)),
            live,
            ..Observation::default()
        }
    }

    #[test]
    fn start_is_a_watermark_pool() {
        let d = HisDyn::default().decide(&Observation::default());
        assert_eq!((d.target, d.min, d.max), (Some(3), Some(3), None));
        assert_eq!(d.spawn_limit, Some(100));
        assert_eq!(d.grow_on_demand, Some(true));
    }

    #[test]
    fn starved_sets_the_range_and_keep_alive() {
        let mut p = HisDyn::default();
        p.decide(&Observation::default());
        let d = p.decide(&history_obs(Trigger::Starved, 4));
        assert_eq!((d.target, d.min, d.max), (Some(7), Some(7), None));
        assert_eq!(d.spawn_limit, Some(100));
        // (i·n)·t = 20 ms · 4 · 2
        assert_eq!(d.keep_alive, Some(Duration::from_millis(160)));
        assert_eq!(p.lower_limit(), 7);
    }

    #[test]
    fn retired_lowers_the_range_when_load_drops() {
        let mut p = HisDyn::default();
        p.decide(&history_obs(Trigger::Start, 3));
        p.decide(&history_obs(Trigger::Starved, 4));
        assert_eq!(p.lower_limit(), 7);
        // Thousands of light jobs dilute the history: c = (200·60 + 9900·1)/10100
        // ≈ 2.17 ms, i = 20 ms, c/i ≈ 0.11: the search from 7 falls to the floor.
        let light = Observation {
            trigger: Trigger::Retired,
            arrivals: 9_900,
            mean_interarrival: Some(Duration::from_millis(20)),
            completions: 9_900,
            mean_service: Some(Duration::from_millis(1)),
            live: 7,
            ..Observation::default()
        };
        let d = p.decide(&light);
        assert_eq!(d.min, Some(3));
    }

    #[test]
    fn runs_only_on_its_triggers() {
        let mut p = HisDyn::default();
        let s = p.schedule();
        assert!(s.on_starved && s.on_retired);
        assert_eq!((s.every, s.every_completions), (None, None));
        p.decide(&Observation::default());
        for t in [Trigger::Tick, Trigger::Completions] {
            assert!(p.decide(&history_obs(t, 4)).is_hold());
        }
        assert_eq!(p.lower_limit(), 3);
    }

    #[test]
    fn no_history_holds() {
        let mut p = HisDyn::default();
        let obs = Observation {
            trigger: Trigger::Starved,
            live: 4,
            ..Observation::default()
        };
        assert!(p.decide(&obs).is_hold());
    }

    #[test]
    fn the_lower_limit_stays_inside_the_users_bounds() {
        // The user bounded the pool to 4..=6: the range manager's 7 (see
        // `starved_sets_the_range_and_keep_alive`) becomes 6, its start of
        // 3 becomes 4, and the user's max is never sent.
        let mut p = HisDyn::default();
        let start = Observation {
            min: 4,
            max: 6,
            ..Observation::default()
        };
        let d = p.decide(&start);
        assert_eq!((d.target, d.min, d.max), (Some(4), Some(4), None));
        let d = p.decide(&history_obs(Trigger::Starved, 4));
        assert_eq!((d.target, d.min, d.max), (Some(6), Some(6), None));
        assert_eq!(p.lower_limit(), 7, "the policy's own estimate is kept");
    }

    #[test]
    fn lower_limit_never_exceeds_max() {
        let mut p = HisDyn::new(5, 0.01);
        let d = p.decide(&history_obs(Trigger::Starved, 9));
        assert_eq!(d.min, Some(5));
    }
}
