//! The standard workload suite: twelve named workloads, each a generator
//! (or the embedded Azure trace) with a `scale` factor and the static sizes
//! its oracle sweep covers.
//!
//! `scale` stretches a workload's *length* (number of tasks, or step length
//! for `steps`) and leaves its rates alone, so the best static pool size
//! does not move with it. At scale 1.0 each takes about 7–8 s of replay.
//!
//! | name | definition at scale 1.0 | offered CPU (2 cores) | character |
//! |---|---|---|---|
//! | `cpu` | `poisson:rate=1000,n=8000,service=normal:1ms:100us,free=0` | 1.0 core | all compute: best ≈ cores |
//! | `io` | `poisson:rate=2000,n=16000,service=exp:5ms,free=90` | 1.0 core | mostly blocked: ~10 tasks in service on average, best size large |
//! | `mixed` | `poisson:rate=1000,n=8000,service=lognormal:2ms:2ms,free=50` | 1.0 core | half compute, heavy-tailed |
//! | `steps` | `steps:rate=500,step=10,steps=10,step_time=800ms,service=exp:2ms,free=50` | 0.5 → 0.95 cores | Oh & Kim's load raised in 10 % steps |
//! | `bursty` | `onoff:rate=4000,on=200ms,off=400ms,off_rate=100,n=11000,service=exp:1ms,free=70` | 1.2 cores in bursts | on/off bursts |
//! | `azure` | first 2,000 requests of the embedded Azure LLM trace, 60× compressed; 1 ms + 4 µs/context token + 40 µs/generated token, ≤ 100 ms; free 85 | ≈ 0.7 cores | real arrivals (bursty), sizes from token counts |
//! | `sat100` | `poisson:rate=5000,n=30000,service=exp:2ms,free=100` | 0 | thesis fig. 6.1: all blocked; throughput grows with size up to ≈ 10 (λ·S), then flat |
//! | `sat50` | `poisson:rate=4000,n=12000,service=exp:2ms,free=50` | 4 cores (2× the machine) | thesis fig. 6.2: arrivals faster than the CPU serves; the backlog drains at the CPU's pace |
//! | `sat10` | `poisson:rate=4000,n=6000,service=exp:2ms,free=10` | 7.2 cores (3.6×) | thesis fig. 6.3: nearly all compute, overloaded |
//! | `closed` | `closed:clients=64,think=exp:10ms,n=20000,service=exp:2ms,free=70` | up to 3.8 cores | 64 clients that wait for their answer, then think: a slow pool lowers the offered load |
//! | `overload` | `poisson:rate=3000,n=12000,service=normal:1ms:100us,free=0` | 3 cores (1.5×) | CPU-bound overload: more threads than cores cannot help |
//! | `shift` | `poisson:rate=1000,n=8000,service=exp:4ms,free=95,free_after=60` | 0.2 → 1.6 cores | the CPU/IO mix changes halfway: the best size falls |
//!
//! The first six offer less work than the machine can do, so every sizing
//! policy that keeps up reaches the oracle's throughput and they differ only
//! in waits. The last six are where the pool size decides throughput:
//! arrivals faster than small pools serve (`sat*`, `overload`), or a closed
//! loop whose throughput is set by how fast answers come back.
//!
//! The Azure slice (header + first 4,000 requests of
//! `AzureLLMInferenceTrace_conv`, 2023-11-16) is embedded in the crate so
//! the suite works standalone. Azure Public Dataset, CC-BY 4.0; Patel et
//! al., "Splitwise", ISCA 2024. Its scale is capped at 2.0 (the slice's
//! length).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::SpecError;
use crate::generate::{Arrivals, GenSpec};
use crate::import::azure::{parse_azure_with, AzureOptions};
use crate::limits::{secs_saturating, shown_f64, Limits};
use crate::trace::Trace;

/// The Azure LLM inference trace slice (CC-BY 4.0, Azure Public Dataset;
/// Patel et al., "Splitwise", ISCA 2024): header + first 4,000 requests.
pub const AZURE_SLICE: &str = include_str!("../data/azure-conv-2023-first4000.csv");

/// Requests of the Azure slice used at scale 1.0.
pub const AZURE_REQUESTS: usize = 2000;

/// Names of the suite's workloads, in a fixed order: the six light ones,
/// then the six where size decides throughput.
pub const SUITE: [&str; 12] = [
    "cpu", "io", "mixed", "steps", "bursty", "azure", "sat100", "sat50", "sat10", "closed",
    "overload", "shift",
];

/// The workloads of [`SUITE`] where the pool size decides throughput.
pub const SATURATED: [&str; 6] = ["sat100", "sat50", "sat10", "closed", "overload", "shift"];

/// Static sizes each suite workload's oracle sweep covers by default: from
/// below its best size to at least the policies' default `max` (100) where
/// the workload can use that many threads.
pub const SWEEP_SIZES: [(&str, &[usize]); 12] = [
    ("cpu", &[1, 2, 3, 4, 8, 16]),
    ("io", &[8, 16, 32, 64, 128]),
    ("mixed", &[2, 4, 8, 16, 32, 64]),
    ("steps", &[2, 4, 8, 16, 32, 64]),
    ("bursty", &[2, 4, 8, 16, 32, 64, 128]),
    ("azure", &[2, 4, 8, 16, 32, 64, 128]),
    ("sat100", &[4, 8, 12, 16, 24, 32, 64, 128]),
    ("sat50", &[2, 4, 8, 16, 32, 64, 128]),
    ("sat10", &[1, 2, 3, 4, 8, 16, 32]),
    ("closed", &[4, 8, 16, 32, 64, 128]),
    ("overload", &[1, 2, 3, 4, 8, 16]),
    ("shift", &[2, 4, 8, 16, 32, 64, 128]),
];

/// Sizes swept when the workload is not a suite workload: powers of two up
/// to 128, past the policies' default `max` of 100.
pub const DEFAULT_SWEEP_SIZES: [usize; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// The static sizes swept for a workload named `name` by default.
///
/// ```
/// use tidepool_workload::suite::sweep_sizes;
/// assert_eq!(sweep_sizes("io"), &[8, 16, 32, 64, 128]);
/// assert_eq!(sweep_sizes("poisson:rate=10"), &[1, 2, 4, 8, 16, 32, 64, 128]);
/// ```
pub fn sweep_sizes(name: &str) -> &'static [usize] {
    SWEEP_SIZES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(&DEFAULT_SWEEP_SIZES[..], |(_, s)| s)
}

/// Where a suite workload's tasks come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "lowercase")]
pub enum SuiteSource {
    /// A generator.
    Generated {
        /// The generator spec.
        spec: GenSpec,
    },
    /// The embedded Azure slice.
    Azure {
        /// Import options.
        options: AzureOptions,
    },
}

/// A suite workload at a given scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteEntry {
    /// Suite name (`cpu`, `io`, …).
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Scale factor applied.
    pub scale: f64,
    /// Where the tasks come from.
    #[serde(flatten)]
    pub source: SuiteSource,
}

impl SuiteEntry {
    /// Build the trace within the default [`Limits`]. Named `suite:NAME@SCALE`.
    pub fn trace(&self) -> Result<Trace, SpecError> {
        self.trace_with(&Limits::default())
    }

    /// Build the trace within `limits`: a scale that makes more tasks than
    /// the limit is an error naming the scale.
    pub fn trace_with(&self, limits: &Limits) -> Result<Trace, SpecError> {
        let mut t = match &self.source {
            SuiteSource::Generated { spec } => spec.try_generate(limits).map_err(|e| {
                let why = match e {
                    SpecError::BadValue { message, .. } => message,
                    other => other.to_string(),
                };
                SpecError::bad(
                    "scale",
                    format!(
                        "{} makes `{}` too large: {why}",
                        shown_f64(self.scale),
                        self.name
                    ),
                )
            })?,
            SuiteSource::Azure { options } => {
                match parse_azure_with(AZURE_SLICE.as_bytes(), "azure", options, limits) {
                    Ok(imported) => imported.trace,
                    Err(e) => return Err(SpecError::bad("scale", e.to_string())),
                }
            }
        };
        t.name = format!("suite:{}@{}", self.name, self.scale);
        Ok(t)
    }
}

/// Allowed suite `scale`: the smallest keeps every step of `steps` longer
/// than a nanosecond; the task limit bounds the largest first.
pub const SCALE_RANGE: (f64, f64) = (1e-6, 1e6);

/// Look up a suite workload.
///
/// ```
/// use tidepool_workload::suite::suite_entry;
/// let e = suite_entry("io", 0.1).unwrap();
/// let t = e.trace().unwrap();
/// assert_eq!(t.len(), 1600);
/// assert!(suite_entry("nope", 1.0).is_err());
/// ```
pub fn suite_entry(name: &str, scale: f64) -> Result<SuiteEntry, SpecError> {
    if !(scale >= SCALE_RANGE.0 && scale <= SCALE_RANGE.1) {
        return Err(SpecError::bad(
            "scale",
            format!(
                "{} is outside {:e}..={:e}",
                shown_f64(scale),
                SCALE_RANGE.0,
                SCALE_RANGE.1
            ),
        ));
    }
    let n = |base: usize| ((base as f64 * scale).round() as usize).max(1);
    // The task limit is checked when the trace is built (it can be raised).
    let unlimited = Limits {
        max_tasks: usize::MAX,
        ..Limits::default()
    };
    let gen = |s: &str| GenSpec::parse_with(s, &unlimited);
    let (description, source) = match name {
        "cpu" => (
            "all compute, half of 2 cores: best static size near the core count",
            gen(&format!(
                "poisson:rate=1000,n={},service=normal:1ms:100us,free=0,seed=11",
                n(8_000)
            ))?,
        ),
        "io" => (
            "90% blocked, ~10 tasks in service on average: best static size large",
            gen(&format!(
                "poisson:rate=2000,n={},service=exp:5ms,free=90,seed=12",
                n(16_000)
            ))?,
        ),
        "mixed" => (
            "half compute, half blocked, heavy-tailed service times",
            gen(&format!(
                "poisson:rate=1000,n={},service=lognormal:2ms:2ms,free=50,seed=13",
                n(8_000)
            ))?,
        ),
        "steps" => {
            let mut spec = gen("steps:rate=500,step=10,steps=10,step_time=800ms,service=exp:2ms,free=50,seed=14")?;
            if let Arrivals::Steps { step_time, .. } = &mut spec.arrivals {
                *step_time = secs_saturating(step_time.as_secs_f64() * scale);
            }
            ("Oh & Kim's load steps: arrival rate raised by 10% ten times", spec)
        }
        "bursty" => (
            "on/off bursts: 4000/s for 200 ms, 100/s for 400 ms",
            gen(&format!(
                "onoff:rate=4000,on=200ms,off=400ms,off_rate=100,n={},service=exp:1ms,free=70,seed=15",
                n(11_000)
            ))?,
        ),
        "sat100" => (
            "thesis fig. 6.1 (free 100): all blocked, 5000/s; throughput grows with size to ~10",
            gen(&format!(
                "poisson:rate=5000,n={},service=exp:2ms,free=100,seed=21",
                n(30_000)
            ))?,
        ),
        "sat50" => (
            "thesis fig. 6.2 (free 50): arrivals at twice what the CPU serves",
            gen(&format!(
                "poisson:rate=4000,n={},service=exp:2ms,free=50,seed=22",
                n(12_000)
            ))?,
        ),
        "sat10" => (
            "thesis fig. 6.3 (free 10): nearly all compute, 3.6x overloaded",
            gen(&format!(
                "poisson:rate=4000,n={},service=exp:2ms,free=10,seed=23",
                n(6_000)
            ))?,
        ),
        "closed" => (
            "closed loop: 64 clients wait for their answer, think 10 ms, send again",
            gen(&format!(
                "closed:clients=64,think=exp:10ms,n={},service=exp:2ms,free=70,seed=24",
                n(20_000)
            ))?,
        ),
        "overload" => (
            "CPU-bound overload: 1.5x what 2 cores serve; best size = cores",
            gen(&format!(
                "poisson:rate=3000,n={},service=normal:1ms:100us,free=0,seed=25",
                n(12_000)
            ))?,
        ),
        "shift" => (
            "CPU/IO mix changes halfway: 95% blocked, then 60% blocked",
            gen(&format!(
                "poisson:rate=1000,n={},service=exp:4ms,free=95,free_after=60,seed=26",
                n(8_000)
            ))?,
        ),
        "azure" => {
            let options = AzureOptions {
                compress: 60.0,
                base: Duration::from_millis(1),
                per_context_token: Duration::from_micros(4),
                per_generated_token: Duration::from_micros(40),
                max_service: Duration::from_millis(100),
                free: 85.0,
                limit: Some(n(AZURE_REQUESTS).min(2 * AZURE_REQUESTS)),
            };
            return Ok(SuiteEntry {
                name: name.to_string(),
                description: "real Azure LLM inference arrivals (60x compressed), service from token counts, 85% blocked".into(),
                scale,
                source: SuiteSource::Azure { options },
            });
        }
        other => return Err(SpecError::UnknownSuite(other.to_string())),
    };
    Ok(SuiteEntry {
        name: name.to_string(),
        description: description.to_string(),
        scale,
        source: SuiteSource::Generated { spec: source },
    })
}

/// Build a suite workload's trace within the default [`Limits`].
pub fn suite_trace(name: &str, scale: f64) -> Result<Trace, SpecError> {
    suite_trace_with(name, scale, &Limits::default())
}

/// Build a suite workload's trace within `limits`.
pub fn suite_trace_with(name: &str, scale: f64, limits: &Limits) -> Result<Trace, SpecError> {
    suite_entry(name, scale)?.trace_with(limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TaskSpec;

    #[test]
    fn every_entry_builds_and_lasts_a_few_seconds() {
        for name in SUITE {
            let t = suite_trace(name, 1.0).unwrap();
            let s = t.stats();
            // At least as long as the arrivals, or as 2 cores take to compute it all.
            let run_s = s.span_s.max(s.offered_cores * s.span_s / 2.0);
            assert!(run_s > 5.0 && run_s < 15.0, "{name}: {s:?}");
            if !SATURATED.contains(&name) {
                assert!(s.offered_cores < 1.6, "{name}: {s:?}");
            }
            assert_eq!(t.name, format!("suite:{name}@1"));
            assert!(sweep_sizes(name).len() >= 5, "{name}");
        }
    }

    #[test]
    fn saturated_entries_offer_more_than_small_pools_serve() {
        // Offered work per second in busy workers (λ·S): above what 4
        // threads can hold, so size decides throughput.
        for name in ["sat100", "sat50", "sat10", "overload"] {
            let s = suite_trace(name, 0.2).unwrap().stats();
            let busy_workers = s.arrival_rate * s.mean_exec_us / 1e6;
            assert!(busy_workers > 2.5, "{name}: {s:?}");
        }
        for name in ["sat50", "sat10", "overload"] {
            let s = suite_trace(name, 0.2).unwrap().stats();
            assert!(
                s.offered_cores > 2.5,
                "{name}: more than 2 cores of work: {s:?}"
            );
        }
        let closed = suite_trace("closed", 0.1).unwrap();
        assert_eq!(closed.clients, Some(64));
        let shift = suite_trace("shift", 0.1).unwrap();
        let (a, b) = shift.tasks.split_at(shift.len() / 2);
        let share = |ts: &[TaskSpec]| {
            ts.iter().map(|t| t.blocked.as_secs_f64()).sum::<f64>()
                / ts.iter().map(|t| t.exec().as_secs_f64()).sum::<f64>()
        };
        assert!((share(a) - 0.95).abs() < 0.01 && (share(b) - 0.60).abs() < 0.01);
        // the sweeps cover the policies' default max (100) where it matters
        for name in [
            "io", "bursty", "azure", "sat100", "sat50", "closed", "shift",
        ] {
            assert!(*sweep_sizes(name).last().unwrap() >= 100, "{name}");
        }
    }

    #[test]
    fn scale_changes_length_not_rate() {
        for name in SUITE {
            let a = suite_trace(name, 1.0).unwrap().stats();
            let b = suite_trace(name, 0.5).unwrap().stats();
            assert!(
                (b.span_s / a.span_s - 0.5).abs() < 0.1,
                "{name}: {a:?} {b:?}"
            );
            assert!(
                (b.arrival_rate / a.arrival_rate - 1.0).abs() < 0.15,
                "{name}"
            );
        }
    }

    #[test]
    fn characters_differ() {
        let cpu = suite_trace("cpu", 0.2).unwrap().stats();
        let io = suite_trace("io", 0.2).unwrap().stats();
        assert_eq!(cpu.mean_blocked_us, 0.0);
        assert!(io.mean_blocked_us > 8.0 * io.mean_cpu_us);
        let az = suite_trace("azure", 1.0).unwrap();
        assert_eq!(az.len(), AZURE_REQUESTS);
        assert_eq!(
            suite_trace("azure", 10.0).unwrap().len(),
            2 * AZURE_REQUESTS
        );
        assert!(suite_entry("cpu", 0.0).is_err());
        assert!(matches!(
            suite_entry("x", 1.0),
            Err(SpecError::UnknownSuite(_))
        ));
    }
}
