//! How early the replay's driver stops sleeping before an arrival.
//!
//! The driver sleeps, then spins the rest of the way to each arrival. A
//! sleep wakes late — on this 2-core VM 30–50 µs when the machine is quiet
//! (an idle virtual CPU wakes slowly), 15–25 µs when it is busy, with the
//! timer slack at 1 µs — and every microsecond it spins is a microsecond of
//! a core the pool under test does not get: a fixed 100 µs lead cost 0.2–0.3
//! of a core at 3,000–4,000 arrivals per second, which a pool of 16
//! threads won back from the driver and a pool sized to the cores did not.
//! So the lead follows the sleeps' measured lateness, as TCP's retransmit
//! timer follows round trips: the mean plus four mean deviations, each an
//! exponentially weighted average (gains 1/8 and 1/4), never more than the
//! configured ceiling, which is also where it starts.

use std::time::Duration;

/// The driver's lead before each arrival: how long before it to stop
/// sleeping and spin.
#[derive(Debug, Clone)]
pub struct Lead {
    /// Mean lateness of a sleep, ns.
    mean: f64,
    /// Mean deviation of the lateness, ns.
    dev: f64,
    /// The most lead, ns.
    ceiling: f64,
}

impl Lead {
    /// A lead of `ceiling` until sleeps have been measured.
    pub fn new(ceiling: Duration) -> Self {
        let ceiling = ceiling.as_nanos() as f64;
        Lead {
            mean: ceiling,
            dev: 0.0,
            ceiling,
        }
    }

    /// Stop sleeping this long before an arrival, with `in_flight` accepted
    /// tasks unfinished on an executor of `threads` threads: no lead at all
    /// while they outnumber its threads (a backlog — the next task queues
    /// behind others whenever it comes), so the spin takes no core the
    /// workers want then.
    pub fn before(&self, in_flight: u64, threads: usize) -> Duration {
        if in_flight > threads as u64 {
            Duration::ZERO
        } else {
            self.get()
        }
    }

    /// Stop sleeping this long before an arrival.
    pub fn get(&self) -> Duration {
        Duration::from_nanos((self.mean + 4.0 * self.dev).min(self.ceiling).max(0.0) as u64)
    }

    /// A sleep asked for `asked` lasted `slept`.
    pub fn observe(&mut self, asked: Duration, slept: Duration) {
        let late = slept.saturating_sub(asked).as_nanos() as f64;
        let err = late - self.mean;
        self.mean += err / 8.0;
        self.dev += (err.abs() - self.dev) / 4.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn starts_at_the_ceiling_and_follows_steady_lateness() {
        let mut l = Lead::new(100 * US);
        assert_eq!(l.get(), 100 * US);
        for _ in 0..200 {
            l.observe(500 * US, 520 * US);
        }
        let g = l.get().as_secs_f64() * 1e6;
        assert!((19.0..=22.0).contains(&g), "{g} µs");
    }

    #[test]
    fn jitter_widens_the_lead_and_the_ceiling_caps_it() {
        let mut l = Lead::new(100 * US);
        for i in 0..200 {
            let late = if i % 2 == 0 { 10 } else { 30 };
            l.observe(500 * US, (500 + late) * US);
        }
        let g = l.get().as_secs_f64() * 1e6;
        assert!(
            g > 40.0 && g < 100.0,
            "mean 20 µs, deviation ~10 µs: {g} µs"
        );
        for _ in 0..50 {
            l.observe(500 * US, 900 * US);
        }
        assert_eq!(l.get(), 100 * US);
    }

    #[test]
    fn an_early_return_counts_as_on_time() {
        let mut l = Lead::new(100 * US);
        for _ in 0..200 {
            l.observe(500 * US, 100 * US);
        }
        assert_eq!(l.get(), Duration::ZERO);
    }

    #[test]
    fn no_lead_while_tasks_queue() {
        let lead = Lead::new(100 * US);
        assert_eq!(lead.before(0, 2), 100 * US);
        assert_eq!(lead.before(2, 2), 100 * US, "all running, none queued");
        assert_eq!(lead.before(3, 2), Duration::ZERO);
        assert_eq!(lead.before(1, 0), Duration::ZERO);
    }
}
