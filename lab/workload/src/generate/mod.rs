//! Seeded, reproducible workload generators and their spec-string form.
//!
//! A spec is `KIND:key=value,key=value,...`, for example
//! `poisson:rate=2000,service=exp:200us,n=5000,free=50,seed=1`.
//!
//! | kind | arrivals | kind-specific keys |
//! |---|---|---|
//! | `poisson` | exponential inter-arrival times | `rate` (required, tasks/s) |
//! | `periodic` | constant inter-arrival times | `rate` (required) |
//! | `normal` | normal inter-arrival times (truncated at 0) | `rate` (required), `cv` (default 0.25) |
//! | `lognormal` | log-normal inter-arrival times | `rate` (required), `cv` (default 1.0) |
//! | `steps` | Oh & Kim's load steps: Poisson at `rate`, raised by `step`% of `rate` every `step_time`, `steps` steps | `rate` (required), `step` (10), `steps` (10), `step_time` (1s); no `n` |
//! | `onoff` | bursts: Poisson at `rate` for `on`, then at `off_rate` for `off`, repeated | `rate` (required), `on` (100ms), `off` (100ms), `off_rate` (0) |
//! | `closed` | closed loop: `clients` clients, each submits a task, waits for its answer, thinks for a `think` time, submits the next | `clients` (required), `think` (a [`Dist`], default `exp:1ms`); no `rate` |
//!
//! Keys every kind takes: `n` (tasks, default 1000; not for `steps`),
//! `service` (a [`Dist`], default `exp:200us`), `free` (the thesis's
//! `free_workload` as a percentage 0–100 of each task's service time spent
//! blocked, default 0), `free_after` (the `free` of the second half of the
//! tasks, when the CPU/IO mix should change halfway; default: no change),
//! `apps` (application ids, assigned round-robin, default 1), `seed`
//! (default 1).
//!
//! **Closed loop.** A `closed` trace's start delays are think times, not
//! arrival gaps: task `i` belongs to client `i mod clients`, and the replay
//! driver submits it its think time after the client's previous task
//! finished ([`Trace::clients`]). This is how servers are load-tested: the
//! offered load falls when the pool is slow, so pool size decides
//! throughput.
//!
//! **`free_workload` interpretation.** Xu's thesis (§5.1) adds a knob
//! `free_workload`: "the larger `free_workload` is, the more time spent on
//! sleep". Its figure 5.4, which defined it exactly, is lost. tidepool reads
//! it as the percentage of a task's execution time `e` that is blocked:
//! blocked = e·free/100, compute = e − blocked. Thus `free=0` is all compute,
//! `free=100` all sleep, and the task's total service time stays `e`
//! whatever the knob, so the offered load in task-seconds does not change
//! when only the CPU/IO mix does.
//!
//! Arrivals and service times come from two independent random streams
//! derived from `seed`, so changing `service` or `free` leaves the arrival
//! times unchanged.
//!
//! Here the spec and its checks; its text form (parse, display) is in
//! `text.rs`, the lazy generation of its tasks in `stream.rs`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::dist::Dist;
use crate::error::SpecError;
use crate::limits::{shown_f64, Limits, MAX_TIME};
use crate::trace::Trace;

mod stream;
mod text;

pub use stream::TaskStream;

/// Allowed arrival rates (`rate`, a non-zero `off_rate`, every step's rate),
/// tasks per second.
pub const RATE_RANGE: (f64, f64) = (1e-3, 1e9);
/// Largest `cv` of `normal` and `lognormal` arrivals.
pub const MAX_CV: f64 = 100.0;
/// Most steps of a `steps` workload.
pub const MAX_STEPS: u32 = 10_000;
/// Most on/off cycles an `onoff` workload may take to reach its `n` tasks.
pub const MAX_CYCLES: f64 = 1e8;

fn too_many(max: usize, what: &str) -> SpecError {
    SpecError::bad(
        "n",
        format!("{what} is more than {max} tasks, the limit (raise it with --max-tasks)"),
    )
}

/// How arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Arrivals {
    /// Independent inter-arrival times drawn from a distribution (a renewal
    /// process: `poisson`, `periodic`, `normal`, `lognormal`).
    Renewal {
        /// Spec kind name, for display.
        name: RenewalKind,
        /// Mean arrival rate, tasks per second.
        rate: f64,
        /// Coefficient of variation (for `normal`/`lognormal`).
        cv: f64,
    },
    /// Oh & Kim's load steps.
    Steps {
        /// Rate of the first step, tasks per second.
        rate: f64,
        /// Increment per step, percent of `rate`.
        step_pct: f64,
        /// Number of steps.
        steps: u32,
        /// Length of each step.
        step_time: Duration,
    },
    /// A closed loop of clients that each wait for their answer and think.
    Closed {
        /// Number of clients.
        clients: usize,
        /// Think time between an answer and the client's next request.
        think: Dist,
    },
    /// On/off bursts.
    OnOff {
        /// Rate while on.
        rate: f64,
        /// Rate while off.
        off_rate: f64,
        /// Length of an on phase.
        on: Duration,
        /// Length of an off phase.
        off: Duration,
    },
}

/// The inter-arrival distribution of a renewal process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RenewalKind {
    /// Exponential gaps.
    Poisson,
    /// Constant gaps.
    Periodic,
    /// Normal gaps.
    Normal,
    /// Log-normal gaps.
    LogNormal,
}

/// A parsed generator spec. [`GenSpec::generate`] turns it into a [`Trace`];
/// `Display` gives back the canonical spec string.
///
/// ```
/// use tidepool_workload::GenSpec;
/// let spec: GenSpec = "poisson:rate=2000,service=exp:200us,n=5000,free=50,seed=1".parse().unwrap();
/// let a = spec.generate();
/// let b = spec.generate();
/// assert_eq!(a, b); // same seed, same trace
/// assert_eq!(a.len(), 5000);
/// assert_eq!(spec.to_string().parse::<GenSpec>().unwrap(), spec);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenSpec {
    /// How arrivals are spaced.
    pub arrivals: Arrivals,
    /// Service (execution) time distribution.
    pub service: Dist,
    /// Number of tasks (for `steps`, derived from the steps).
    pub n: usize,
    /// Percent (0–100) of each task's service time spent blocked.
    pub free: f64,
    /// Percent blocked for the second half of the tasks (`None`: `free`
    /// throughout).
    pub free_after: Option<f64>,
    /// Number of application ids.
    pub apps: u64,
    /// Random seed.
    pub seed: u64,
}

const COMMON: [&str; 6] = ["n", "service", "free", "free_after", "apps", "seed"];

impl GenSpec {
    /// A Poisson workload: `n` tasks at `rate` per second, all compute,
    /// with the given service distribution.
    pub fn poisson(rate: f64, service: Dist, n: usize) -> GenSpec {
        GenSpec {
            arrivals: Arrivals::Renewal {
                name: RenewalKind::Poisson,
                rate,
                cv: 1.0,
            },
            service,
            n,
            free: 0.0,
            free_after: None,
            apps: 1,
            seed: 1,
        }
    }

    /// The same spec with a different `free` percentage.
    pub fn with_free(mut self, free: f64) -> GenSpec {
        self.free = free;
        self
    }

    /// The same spec with a different seed.
    pub fn with_seed(mut self, seed: u64) -> GenSpec {
        self.seed = seed;
        self
    }

    /// Generate the trace. Same spec, same trace, on every run.
    ///
    /// Every parsed spec is within the default [`Limits`]; a spec built by
    /// hand is generated as given (check it with [`validate`](Self::validate)
    /// or use [`try_generate`](Self::try_generate)).
    pub fn generate(&self) -> Trace {
        self.generate_at_most(usize::MAX)
            .unwrap_or_else(|| unreachable!("no cap"))
    }

    /// Check the spec against `limits`, then generate it. A `steps` or
    /// `onoff` workload whose random count of tasks ends above the limit is
    /// an error too (generation stops there).
    pub fn try_generate(&self, limits: &Limits) -> Result<Trace, SpecError> {
        self.validate(limits)?;
        self.generate_at_most(limits.max_tasks)
            .ok_or_else(|| too_many(limits.max_tasks, "generates"))
    }

    /// `None` when the arrivals exceed `cap` tasks.
    fn generate_at_most(&self, cap: usize) -> Option<Trace> {
        let mut tasks = Vec::with_capacity(self.n.min(cap).min(1 << 20));
        for task in self.stream() {
            if tasks.len() >= cap {
                return None;
            }
            tasks.push(task);
        }
        let mut trace = Trace::from_tasks(self.to_string(), tasks);
        if let Arrivals::Closed { clients, .. } = self.arrivals {
            trace.clients = Some(clients);
        }
        Some(trace)
    }

    /// Check every number against its allowed range and the trace it would
    /// make against `limits`: the count of tasks (expected, for `steps`), the
    /// span (at most [`MAX_TIME`]) and the work to generate it. Errors name
    /// the key and the range.
    pub fn validate(&self, limits: &Limits) -> Result<(), SpecError> {
        let max_span = MAX_TIME.as_secs_f64();
        let rate_ok = |key: &str, r: f64| -> Result<(), SpecError> {
            if r >= RATE_RANGE.0 && r <= RATE_RANGE.1 {
                Ok(())
            } else {
                Err(SpecError::bad(
                    key,
                    format!(
                        "{} is outside {:e}..={:e} (tasks per second)",
                        shown_f64(r),
                        RATE_RANGE.0,
                        RATE_RANGE.1
                    ),
                ))
            }
        };
        let n_ok = |n: usize| -> Result<(), SpecError> {
            if (1..=limits.max_tasks).contains(&n) {
                Ok(())
            } else if n == 0 {
                Err(SpecError::bad("n", "must be at least 1"))
            } else {
                Err(too_many(limits.max_tasks, &format!("`n` = {n}")))
            }
        };
        let span_ok = |key: &str, secs: f64| -> Result<(), SpecError> {
            if secs <= max_span {
                Ok(())
            } else {
                Err(SpecError::bad(
                    key,
                    format!("makes the trace last about {secs:.3e} s, longer than 2^64 - 1 ns (about 584 years)"),
                ))
            }
        };
        if !(0.0..=100.0).contains(&self.free) {
            return Err(SpecError::bad(
                "free",
                format!(
                    "{} is outside 0..=100 (percent of service time blocked)",
                    shown_f64(self.free)
                ),
            ));
        }
        if self.apps == 0 {
            return Err(SpecError::bad("apps", "must be at least 1"));
        }
        match self.arrivals {
            Arrivals::Renewal { rate, cv, .. } => {
                rate_ok("rate", rate)?;
                if !(0.0..=MAX_CV).contains(&cv) {
                    return Err(SpecError::bad(
                        "cv",
                        format!("{} is outside 0..={MAX_CV}", shown_f64(cv)),
                    ));
                }
                n_ok(self.n)?;
                span_ok("n", self.n as f64 / rate)
            }
            Arrivals::Steps {
                rate,
                step_pct,
                steps,
                step_time,
            } => {
                rate_ok("rate", rate)?;
                if !(1..=MAX_STEPS).contains(&steps) {
                    return Err(SpecError::bad(
                        "steps",
                        format!("{steps} is outside 1..={MAX_STEPS}"),
                    ));
                }
                let last = rate * (1.0 + f64::from(steps - 1) * step_pct / 100.0);
                if !(last >= RATE_RANGE.0 && last <= RATE_RANGE.1) {
                    return Err(SpecError::bad(
                        "step",
                        format!(
                            "{}% over {steps} steps takes the rate of the last step to {}/s, outside {:e}..={:e}",
                            shown_f64(step_pct),
                            shown_f64(last),
                            RATE_RANGE.0,
                            RATE_RANGE.1
                        ),
                    ));
                }
                if step_time.is_zero() {
                    return Err(SpecError::bad("step_time", "must be > 0"));
                }
                let len = step_time.as_secs_f64();
                span_ok("step_time", len * f64::from(steps))?;
                let expected = (rate + last) / 2.0 * f64::from(steps) * len;
                if expected > limits.max_tasks as f64 {
                    return Err(too_many(
                        limits.max_tasks,
                        &format!("about {expected:.0} expected tasks"),
                    ));
                }
                Ok(())
            }
            Arrivals::Closed { clients, .. } => {
                if clients == 0 {
                    return Err(SpecError::bad("clients", "must be at least 1"));
                }
                n_ok(self.n)
            }
            Arrivals::OnOff {
                rate,
                off_rate,
                on,
                off,
            } => {
                rate_ok("rate", rate)?;
                if off_rate != 0.0 {
                    rate_ok("off_rate", off_rate)?;
                }
                if on.is_zero() {
                    return Err(SpecError::bad("on", "must be > 0"));
                }
                n_ok(self.n)?;
                // Each on/off cycle costs a few random draws even when it
                // holds no task: bound the cycles the n tasks need.
                let per_cycle = rate * on.as_secs_f64() + off_rate * off.as_secs_f64();
                let cycles = self.n as f64 / per_cycle;
                if cycles > MAX_CYCLES {
                    return Err(SpecError::bad(
                        "on",
                        format!(
                            "rate × on + off_rate × off = {per_cycle:.3e} tasks per cycle needs about {cycles:.3e} cycles for {} tasks, more than {MAX_CYCLES:e} (raise rate or on)",
                            self.n
                        ),
                    ));
                }
                span_ok("on", cycles * (on + off).as_secs_f64())
            }
        }
    }

    fn kind_name(&self) -> &'static str {
        match self.arrivals {
            Arrivals::Renewal { name, .. } => match name {
                RenewalKind::Poisson => "poisson",
                RenewalKind::Periodic => "periodic",
                RenewalKind::Normal => "normal",
                RenewalKind::LogNormal => "lognormal",
            },
            Arrivals::Steps { .. } => "steps",
            Arrivals::OnOff { .. } => "onoff",
            Arrivals::Closed { .. } => "closed",
        }
    }
}

/// Split an execution time into (compute, blocked) for a `free` percentage.
///
/// ```
/// use std::time::Duration;
/// use tidepool_workload::generate::split_free;
/// let (cpu, blocked) = split_free(Duration::from_micros(1000), 90.0);
/// assert_eq!((cpu, blocked), (Duration::from_micros(100), Duration::from_micros(900)));
/// ```
pub fn split_free(exec: Duration, free: f64) -> (Duration, Duration) {
    if free == 0.0 {
        // Nothing blocked (what the general case computes, without the
        // float round trip: the simulator streams millions of these).
        return (exec, Duration::ZERO);
    }
    let ns = exec.as_nanos() as f64;
    let blocked = Duration::from_nanos((ns * free.clamp(0.0, 100.0) / 100.0).round() as u64);
    let blocked = blocked.min(exec);
    (exec - blocked, blocked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(s: &str) -> Trace {
        s.parse::<GenSpec>().unwrap().generate()
    }

    #[test]
    fn seeded_reproducible_and_seed_sensitive() {
        let a = gen("poisson:rate=2000,service=exp:200us,n=2000,free=50,seed=1");
        let b = gen("poisson:rate=2000,service=exp:200us,n=2000,free=50,seed=1");
        let c = gen("poisson:rate=2000,service=exp:200us,n=2000,free=50,seed=2");
        assert_eq!(a, b);
        assert_ne!(a.tasks, c.tasks);
        // arrivals don't depend on the service model
        let d = gen("poisson:rate=2000,service=const:1ms,n=2000,free=0,seed=1");
        assert_eq!(a.arrival_offsets(), d.arrival_offsets());
    }

    #[test]
    fn poisson_rate_and_service_mean() {
        let t = gen("poisson:rate=2000,service=exp:200us,n=40000,seed=7");
        let s = t.stats();
        assert!((s.arrival_rate - 2000.0).abs() / 2000.0 < 0.03, "{s:?}");
        assert!((s.mean_exec_us - 200.0).abs() / 200.0 < 0.03, "{s:?}");
        assert_eq!(s.mean_blocked_us, 0.0);
    }

    #[test]
    fn other_renewals_have_the_right_rate() {
        for kind in ["periodic", "normal", "lognormal"] {
            let t = gen(&format!("{kind}:rate=1000,n=20000,service=const:10us"));
            let r = t.stats().arrival_rate;
            assert!((r - 1000.0).abs() / 1000.0 < 0.03, "{kind}: {r}");
        }
        let t = gen("periodic:rate=1000,n=3");
        assert_eq!(t.tasks[1].start_delay, Duration::from_millis(1));
    }

    #[test]
    fn free_splits_service_time() {
        let t = gen("poisson:rate=1000,service=const:1ms,n=10,free=90");
        for task in &t.tasks {
            assert_eq!(task.cpu, Duration::from_micros(100));
            assert_eq!(task.blocked, Duration::from_micros(900));
        }
        let s = gen("poisson:rate=1000,service=exp:1ms,n=20000,free=25").stats();
        assert!((s.mean_blocked_us / s.mean_exec_us - 0.25).abs() < 1e-6);
    }

    #[test]
    fn steps_raise_the_rate_by_ten_percent() {
        let t = gen("steps:rate=2000,steps=5,step_time=2s,seed=3");
        let offs = t.arrival_offsets();
        for k in 0..5u32 {
            let lo = Duration::from_secs(2 * k as u64);
            let hi = lo + Duration::from_secs(2);
            let count = offs.iter().filter(|&&o| o >= lo && o < hi).count() as f64;
            let expect = 2000.0 * (1.0 + 0.1 * k as f64) * 2.0;
            assert!(
                (count - expect).abs() / expect < 0.05,
                "step {k}: {count} vs {expect}"
            );
        }
        assert!(offs.last().unwrap() < &Duration::from_secs(10));
    }

    #[test]
    fn onoff_is_bursty() {
        let t = gen("onoff:rate=5000,on=100ms,off=100ms,n=5000,seed=4");
        let offs = t.arrival_offsets();
        let in_off = offs
            .iter()
            .filter(|o| (o.as_secs_f64() / 0.1) as u64 % 2 == 1)
            .count();
        assert_eq!(in_off, 0);
        assert_eq!(offs.len(), 5000);
        // about 500 tasks per on phase, so ~10 cycles = 2 s
        let span = t.span().as_secs_f64();
        assert!(span > 1.6 && span < 2.2, "{span}");
    }

    #[test]
    fn closed_loop_delays_are_think_times() {
        let t = gen("closed:clients=8,think=const:2ms,n=100,service=const:1ms,seed=2");
        assert_eq!(t.clients, Some(8));
        assert_eq!(t.len(), 100);
        assert!(t
            .tasks
            .iter()
            .all(|t| t.start_delay == Duration::from_millis(2)));
        let e = |s: &str| s.parse::<GenSpec>().unwrap_err().to_string();
        assert_eq!(e("closed:n=10"), "missing required key `clients`");
        assert!(e("closed:clients=0").contains("`clients`"));
        assert!(e("closed:clients=2,rate=5").starts_with("unknown key `rate` for `closed`"));
        assert_eq!(gen("poisson:rate=10,n=3").clients, None);
    }

    #[test]
    fn free_after_changes_the_mix_halfway() {
        let t = gen("poisson:rate=1000,service=const:1ms,n=5,free=90,free_after=10");
        let blocked: Vec<u128> = t.tasks.iter().map(|t| t.blocked.as_micros()).collect();
        assert_eq!(blocked, vec![900, 900, 900, 100, 100]);
        let e = |s: &str| s.parse::<GenSpec>().unwrap_err().to_string();
        assert!(e("poisson:rate=10,free_after=101").contains("`free_after`"));
    }

    #[test]
    fn apps_round_robin() {
        let t = gen("poisson:rate=100,n=6,apps=3");
        let apps: Vec<u64> = t.tasks.iter().map(|t| t.app_id).collect();
        assert_eq!(apps, vec![1, 2, 3, 1, 2, 3]);
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "poisson:rate=2000,n=5000,service=exp:200us,free=50,apps=1,seed=1",
            "lognormal:rate=100,cv=2,n=10,service=normal:1ms:100us,free=0,apps=2,seed=9",
            "steps:rate=500,step=10,steps=4,step_time=250ms,service=exp:1ms,free=50,apps=1,seed=1",
            "onoff:rate=3000,on=200ms,off=300ms,off_rate=10,n=100,service=const:1ms,free=70,apps=1,seed=1",
            "closed:clients=16,think=exp:5ms,n=100,service=exp:2ms,free=70,apps=1,seed=3",
            "poisson:rate=100,n=10,service=exp:1ms,free=90,free_after=10,apps=1,seed=1",
        ] {
            let spec: GenSpec = s.parse().unwrap();
            assert_eq!(spec.to_string(), s);
        }
    }

    #[test]
    fn spec_errors_are_clear() {
        let e = |s: &str| s.parse::<GenSpec>().unwrap_err().to_string();
        assert!(e("bogus:rate=1").starts_with("unknown workload kind `bogus`"));
        assert_eq!(e("poisson:n=10"), "missing required key `rate`");
        assert!(e("poisson:rate=0").contains("`rate`"));
        assert!(e("poisson:rate=10,free=150").contains("`free`"));
        assert!(e("poisson:rate=10,service=exp").contains("`service`"));
        assert!(e("poisson:rate=10,on=1s").starts_with("unknown key `on` for `poisson`"));
        assert!(e("steps:rate=10,n=5").starts_with("unknown key `n` for `steps`"));
        assert!(e("poisson:rate=10,rate=20").starts_with("malformed pair"));
        assert!(e("poisson:rate").starts_with("malformed pair `rate`"));
        assert!(e("poisson:rate=10,seed=-1").contains("`seed`"));
    }
}
