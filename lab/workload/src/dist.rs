//! Time distributions for service and inter-arrival times, with a compact
//! string form used by generator specs.
//!
//! | form | meaning |
//! |---|---|
//! | `const:200us` or `200us` | always 200 µs |
//! | `exp:200us` | exponential, mean 200 µs |
//! | `normal:200us:50us` | normal, mean 200 µs, std dev 50 µs, truncated at 0 (redrawn) |
//! | `lognormal:200us:100us` | log-normal with that mean and std dev (of the variable itself) |
//! | `uniform:100us:300us` | uniform between the two bounds |
//!
//! Durations take a unit `ns`, `us`, `ms` or `s`; a bare number is µs.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal, Normal};
use serde::{Deserialize, Serialize};

use crate::error::SpecError;
use crate::limits::{secs_saturating, shown};

/// A distribution of durations.
///
/// ```
/// use std::time::Duration;
/// use rand::SeedableRng;
/// use tidepool_workload::Dist;
/// let d: Dist = "exp:200us".parse().unwrap();
/// assert_eq!(d.mean(), Duration::from_micros(200));
/// let mut rng = rand::rngs::StdRng::seed_from_u64(1);
/// let _sample: Duration = d.sample(&mut rng);
/// assert_eq!(d.to_string(), "exp:200us");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Dist {
    /// Always the same value.
    Const {
        /// The value.
        value: Duration,
    },
    /// Exponential with the given mean.
    Exp {
        /// Mean.
        mean: Duration,
    },
    /// Normal, truncated at zero by redrawing negative samples.
    Normal {
        /// Mean (before truncation).
        mean: Duration,
        /// Standard deviation.
        sd: Duration,
    },
    /// Log-normal parameterised by the mean and standard deviation of the
    /// variable itself (not of its logarithm).
    LogNormal {
        /// Mean.
        mean: Duration,
        /// Standard deviation.
        sd: Duration,
    },
    /// Uniform on `[lo, hi]`.
    Uniform {
        /// Lower bound.
        lo: Duration,
        /// Upper bound.
        hi: Duration,
    },
}

impl Dist {
    /// Exponential distribution with the given mean.
    pub fn exp(mean: Duration) -> Dist {
        Dist::Exp { mean }
    }

    /// Constant distribution.
    pub fn constant(value: Duration) -> Dist {
        Dist::Const { value }
    }

    /// The distribution's mean (for `Normal`, the mean before truncation).
    pub fn mean(&self) -> Duration {
        match *self {
            Dist::Const { value } => value,
            Dist::Exp { mean } | Dist::Normal { mean, .. } | Dist::LogNormal { mean, .. } => mean,
            Dist::Uniform { lo, hi } => (lo + hi) / 2,
        }
    }

    /// Draw one value.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        self.sampler().sample(rng)
    }

    /// The distribution ready to draw from many times: its parameters are
    /// converted once instead of per draw (two float divisions for `exp`);
    /// the draws are [`sample`](Self::sample)'s.
    pub fn sampler(&self) -> Sampler {
        Sampler(match *self {
            Dist::Const { value } => Draw::Fixed(value),
            Dist::Exp { mean } if mean.is_zero() => Draw::Fixed(Duration::ZERO),
            Dist::Exp { mean } => match Exp::new(1.0 / mean.as_secs_f64()) {
                Ok(e) => Draw::Exp(e),
                Err(_) => Draw::Fixed(mean),
            },
            Dist::Normal { mean, sd } => match Normal::new(mean.as_secs_f64(), sd.as_secs_f64()) {
                Ok(n) => Draw::Normal(n),
                Err(_) => Draw::Fixed(mean),
            },
            Dist::LogNormal { mean, .. } if mean.is_zero() => Draw::Fixed(Duration::ZERO),
            Dist::LogNormal { mean, sd } => {
                let cv = sd.as_secs_f64() / mean.as_secs_f64();
                match LogNormal::from_mean_cv(mean.as_secs_f64(), cv) {
                    Ok(d) => Draw::LogNormal(d),
                    Err(_) => Draw::Fixed(mean),
                }
            }
            Dist::Uniform { lo, hi } => Draw::Uniform(lo.as_secs_f64(), hi.as_secs_f64()),
        })
    }

    fn validate(self, key: &str) -> Result<Dist, SpecError> {
        match self {
            Dist::Uniform { lo, hi } if lo > hi => Err(SpecError::bad(
                key,
                "uniform lower bound is above the upper bound",
            )),
            Dist::Normal { mean, sd } | Dist::LogNormal { mean, sd }
                if mean.is_zero() && !sd.is_zero() =>
            {
                Err(SpecError::bad(key, "mean must be > 0 when sd > 0"))
            }
            d => Ok(d),
        }
    }

    /// Parse the string form, naming `key` in errors.
    pub fn parse_for(s: &str, key: &str) -> Result<Dist, SpecError> {
        let parts: Vec<&str> = s.split(':').collect();
        let dur = |i: usize| -> Result<Duration, SpecError> {
            parts
                .get(i)
                .ok_or_else(|| SpecError::bad(key, format!("`{}` needs {i} value(s)", shown(s))))
                .and_then(|v| parse_duration(v).map_err(|m| SpecError::bad(key, m)))
        };
        let arity = |n: usize| -> Result<(), SpecError> {
            if parts.len() == n + 1 {
                Ok(())
            } else {
                Err(SpecError::bad(
                    key,
                    format!(
                        "`{}` takes {n} value(s) separated by `:`, got {}",
                        shown(parts[0]),
                        parts.len() - 1
                    ),
                ))
            }
        };
        let d = match parts[0] {
            "const" | "constant" => {
                arity(1)?;
                Dist::Const { value: dur(1)? }
            }
            "exp" | "exponential" | "poisson" => {
                arity(1)?;
                Dist::Exp { mean: dur(1)? }
            }
            "normal" => {
                arity(2)?;
                Dist::Normal {
                    mean: dur(1)?,
                    sd: dur(2)?,
                }
            }
            "lognormal" => {
                arity(2)?;
                Dist::LogNormal {
                    mean: dur(1)?,
                    sd: dur(2)?,
                }
            }
            "uniform" => {
                arity(2)?;
                Dist::Uniform {
                    lo: dur(1)?,
                    hi: dur(2)?,
                }
            }
            _ if parts.len() == 1 => match parse_duration(s) {
                Ok(value) => Dist::Const { value },
                // A number: say what is wrong with it as a duration.
                Err(m) if s.trim_start().starts_with(|c: char| c.is_ascii_digit() || c == '-') => {
                    return Err(SpecError::bad(key, m))
                }
                Err(_) => {
                    return Err(SpecError::bad(
                        key,
                        format!(
                            "`{}` is not a distribution (const:D, exp:D, normal:M:SD, lognormal:M:SD, uniform:LO:HI or a duration)",
                            shown(s)
                        ),
                    ))
                }
            },
            other => {
                return Err(SpecError::bad(
                    key,
                    format!(
                        "unknown distribution `{}` (const, exp, normal, lognormal, uniform)",
                        shown(other)
                    ),
                ))
            }
        };
        d.validate(key)
    }
}

impl FromStr for Dist {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Dist, SpecError> {
        Dist::parse_for(s, "distribution")
    }
}

/// A [`Dist`] ready to draw from ([`Dist::sampler`]).
#[derive(Debug, Clone, Copy)]
pub struct Sampler(Draw);

#[derive(Debug, Clone, Copy)]
enum Draw {
    Fixed(Duration),
    Exp(Exp<f64>),
    Normal(Normal<f64>),
    LogNormal(LogNormal<f64>),
    Uniform(f64, f64),
}

impl Sampler {
    /// Draw one value.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        let secs = match self.0 {
            Draw::Fixed(value) => return value,
            Draw::Exp(e) => e.sample(rng),
            Draw::Normal(n) => {
                let mut v = n.sample(rng);
                let mut tries = 0;
                while v < 0.0 && tries < 1000 {
                    v = n.sample(rng);
                    tries += 1;
                }
                v.max(0.0)
            }
            Draw::LogNormal(d) => d.sample(rng),
            Draw::Uniform(lo, hi) => {
                let u: f64 = rand_distr::StandardUniform.sample(rng);
                lo + u * (hi - lo)
            }
        };
        // Unbounded tails (log-normal) saturate instead of panicking.
        secs_saturating(secs)
    }
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = format_duration;
        match *self {
            Dist::Const { value } => write!(f, "const:{}", d(value)),
            Dist::Exp { mean } => write!(f, "exp:{}", d(mean)),
            Dist::Normal { mean, sd } => write!(f, "normal:{}:{}", d(mean), d(sd)),
            Dist::LogNormal { mean, sd } => write!(f, "lognormal:{}:{}", d(mean), d(sd)),
            Dist::Uniform { lo, hi } => write!(f, "uniform:{}:{}", d(lo), d(hi)),
        }
    }
}

/// The longest duration a spec may give, in seconds (about 31.7 years).
pub const MAX_DURATION_SECS: f64 = 1e9;

/// Parse a duration such as `200us`, `1.5ms`, `2s`, `500ns`; a bare number
/// is microseconds. At most [`MAX_DURATION_SECS`].
///
/// ```
/// use std::time::Duration;
/// use tidepool_workload::dist::parse_duration;
/// assert_eq!(parse_duration("1.5ms"), Ok(Duration::from_micros(1500)));
/// assert_eq!(parse_duration("200"), Ok(Duration::from_micros(200)));
/// assert!(parse_duration("-1s").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix('-') {
        if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            return Err(format!("`{}` is negative (durations are >= 0)", shown(s)));
        }
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" | "" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => {
            return Err(format!(
                "`{}` has an unknown unit `{}` (use ns, us, ms or s)",
                shown(s),
                shown(unit)
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{}` is not a non-negative duration", shown(s)))?;
    let secs = v * scale;
    if !(secs.is_finite() && secs <= MAX_DURATION_SECS) {
        return Err(format!(
            "`{}` is out of range (0 to {MAX_DURATION_SECS:e} s)",
            shown(s)
        ));
    }
    Ok(secs_saturating(secs))
}

/// Shortest exact-ish rendering of a duration with a unit (`200us`, `1.5ms`).
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0us".to_string()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn mean_of(d: &Dist, n: usize) -> f64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        (0..n)
            .map(|_| d.sample(&mut rng).as_secs_f64())
            .sum::<f64>()
            / n as f64
    }

    #[test]
    fn parse_and_display_round_trip() {
        for s in [
            "const:200us",
            "exp:1500us",
            "normal:200us:50us",
            "lognormal:2ms:1ms",
            "uniform:100us:300us",
        ] {
            let d: Dist = s.parse().unwrap();
            assert_eq!(d.to_string(), s);
            assert_eq!(d.to_string().parse::<Dist>().unwrap(), d);
        }
        assert_eq!(
            "250".parse::<Dist>().unwrap(),
            Dist::constant(Duration::from_micros(250))
        );
    }

    #[test]
    fn parse_errors() {
        assert!("exp".parse::<Dist>().is_err());
        assert!("exp:1:2".parse::<Dist>().is_err());
        assert!("gamma:1ms".parse::<Dist>().is_err());
        assert!("uniform:3ms:1ms".parse::<Dist>().is_err());
        assert!("normal:1ms:xs".parse::<Dist>().is_err());
        let e = Dist::parse_for("weird", "service").unwrap_err();
        assert!(e.to_string().starts_with("bad value for `service`"));
    }

    #[test]
    fn sample_means_within_tolerance() {
        let n = 40_000;
        for (s, mean) in [
            ("exp:200us", 200e-6),
            ("const:200us", 200e-6),
            ("normal:200us:50us", 200e-6),
            ("lognormal:200us:200us", 200e-6),
            ("uniform:100us:300us", 200e-6),
        ] {
            let d: Dist = s.parse().unwrap();
            let m = mean_of(&d, n);
            assert!((m - mean).abs() / mean < 0.03, "{s}: mean {m}");
        }
    }

    #[test]
    fn normal_never_negative() {
        let d: Dist = "normal:10us:100us".parse().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..1000 {
            let _ = d.sample(&mut rng); // Duration can't be negative; must not panic
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ns"), Ok(Duration::from_nanos(500)));
        assert!(parse_duration("5min").is_err());
        assert_eq!(
            parse_duration("-1ms").unwrap_err(),
            "`-1ms` is negative (durations are >= 0)"
        );
        assert!(parse_duration("99999999999999999999s")
            .unwrap_err()
            .contains("out of range (0 to 1e9 s)"));
        assert!(parse_duration("1000000001s").is_err());
        assert_eq!(
            parse_duration("1000000000s"),
            Ok(Duration::from_secs(1_000_000_000))
        );
        let e = parse_duration(&format!("{}x", "9".repeat(10_000))).unwrap_err();
        assert!(e.len() < 200, "{e}");
        assert!(parse_duration("").is_err());
        assert_eq!(format_duration(Duration::from_micros(1500)), "1500us");
        assert_eq!(format_duration(Duration::from_millis(3)), "3ms");
    }
}
