//! Policy spec strings: `fixed:8`, `tpr`, `watermark:3..100`, `xu-bode`,
//! `xu-bode:initial=4,stride=2`, `hisdyn:max=100,p=0.01`, `frequency`,
//! `hill-climb`, `auto`.
//!
//! Names are case-insensitive and `_` may stand for `-`. Parameters that equal
//! their defaults are left out of the canonical form ([`Display`](std::fmt::Display)),
//! so `parse(spec.to_string()) == spec` for every spec.

use std::fmt;
use std::str::FromStr;

use super::{Auto, Fixed, Frequency, HillClimb, HisDyn, SizingPolicy, Watermark, XuBode};
use crate::limits::MAX_THREADS;

/// Every accepted form, for error messages and help texts. Thread counts
/// (`N`, `MIN`, `MAX`) are at most [`MAX_THREADS`](crate::MAX_THREADS).
pub const VALID_FORMS: &[&str] = &[
    "fixed:N (1 <= N <= 32768)",
    "tpr (thread per request)",
    "watermark[:MIN..MAX] (default 3..100, MIN <= MAX, 1 <= MAX <= 32768)",
    "xu-bode[:initial=N,stride=N] (defaults 4 and 2, both 1..=32768)",
    "hisdyn[:max=N,p=P] (defaults 100 and 0.01; 1 <= N <= 32768, 0 < P < 1)",
    "frequency",
    "hill-climb",
    "auto",
];

/// A parsed sizing-policy spec. Build the policy with [`build`](Self::build).
///
/// ```
/// use tidepool::policy::PolicySpec;
///
/// let spec: PolicySpec = "xu-bode:initial=16".parse().unwrap();
/// assert_eq!(spec, PolicySpec::XuBode { initial: 16, stride: 2 });
/// assert_eq!(spec.to_string(), "xu-bode:initial=16");
/// assert_eq!(spec.build().unwrap().name(), "xu-bode");
/// assert!("tpr".parse::<PolicySpec>().unwrap().build().is_none());
/// assert!("watermark:9..3".parse::<PolicySpec>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum PolicySpec {
    /// `fixed:N` — a static pool of `N` threads.
    Fixed(usize),
    /// `tpr` — a thread per request: an executor, not a pool policy.
    ThreadPerRequest,
    /// `watermark:MIN..MAX` — Oh & Kim's watermark pool.
    Watermark {
        /// Threads always kept.
        min: usize,
        /// Most threads created on demand.
        max: usize,
    },
    /// `xu-bode:initial=N,stride=N` — Xu & Bode's `dynamicThreadPool`.
    XuBode {
        /// Initial pool size.
        initial: usize,
        /// Step of each change.
        stride: usize,
    },
    /// `hisdyn:max=N,p=P` — Oh & Kim's history-based pool.
    HisDyn {
        /// Upper limit of the thread range.
        max: usize,
        /// User job waiting probability.
        p: f64,
    },
    /// `frequency` — Bahadur et al.'s request-rate tuner.
    Frequency,
    /// `hill-climb` — the .NET thread pool's hill climbing.
    HillClimb,
    /// `auto` — tidepool's default policy.
    #[default]
    Auto,
}

/// A spec string that could not be parsed: what was wrong, and every valid form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid policy spec `{spec}`: {problem}; valid forms: {}",
    VALID_FORMS.join(", ")
)]
#[non_exhaustive]
pub struct SpecError {
    /// The spec as given.
    pub spec: String,
    /// What was wrong with it.
    pub problem: String,
}

impl PolicySpec {
    /// Parse a spec string (the same as [`str::parse`]).
    pub fn parse(spec: &str) -> Result<PolicySpec, SpecError> {
        parse(spec).map_err(|problem| SpecError {
            spec: spec.to_string(),
            problem,
        })
    }

    /// The policy's canonical name, without parameters.
    pub fn name(&self) -> &'static str {
        match self {
            PolicySpec::Fixed(_) => "fixed",
            PolicySpec::ThreadPerRequest => "tpr",
            PolicySpec::Watermark { .. } => "watermark",
            PolicySpec::XuBode { .. } => "xu-bode",
            PolicySpec::HisDyn { .. } => "hisdyn",
            PolicySpec::Frequency => "frequency",
            PolicySpec::HillClimb => "hill-climb",
            PolicySpec::Auto => "auto",
        }
    }

    /// The sizing policy, or `None` for `tpr`, which is not a pool policy but
    /// an executor of its own (a new thread per task; the laboratory's
    /// `tidepool_workload::ThreadPerRequest`).
    pub fn build(&self) -> Option<Box<dyn SizingPolicy>> {
        Some(match *self {
            PolicySpec::Fixed(n) => Box::new(Fixed::new(n)),
            PolicySpec::ThreadPerRequest => return None,
            PolicySpec::Watermark { min, max } => Box::new(Watermark::new(min, max)),
            PolicySpec::XuBode { initial, stride } => Box::new(XuBode::new(initial, stride)),
            PolicySpec::HisDyn { max, p } => Box::new(HisDyn::new(max, p)),
            PolicySpec::Frequency => Box::new(Frequency::new()),
            PolicySpec::HillClimb => Box::new(HillClimb::new()),
            PolicySpec::Auto => Box::new(Auto::new()),
        })
    }
}

impl FromStr for PolicySpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicySpec::parse(s)
    }
}

/// As its spec string (feature `serde`): `"watermark:3..100"`.
#[cfg(feature = "serde")]
impl serde::Serialize for PolicySpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// From a spec string (feature `serde`); a bad one is refused with the
/// [`SpecError`] message (every valid form).
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for PolicySpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spec = String::deserialize(d)?;
        PolicySpec::parse(&spec).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        match *self {
            PolicySpec::Fixed(n) => write!(f, ":{n}"),
            PolicySpec::Watermark { min, max } => write!(f, ":{min}..{max}"),
            PolicySpec::XuBode { initial, stride } => {
                let mut params = Vec::new();
                if initial != XuBode::DEFAULT_INITIAL {
                    params.push(format!("initial={initial}"));
                }
                if stride != XuBode::DEFAULT_STRIDE {
                    params.push(format!("stride={stride}"));
                }
                write_params(f, &params)
            }
            PolicySpec::HisDyn { max, p } => {
                let mut params = Vec::new();
                if max != HisDyn::DEFAULT_MAX {
                    params.push(format!("max={max}"));
                }
                if p != HisDyn::DEFAULT_PROBABILITY {
                    // `{}` on f64 prints the shortest string that reads back exactly.
                    params.push(format!("p={p}"));
                }
                write_params(f, &params)
            }
            _ => Ok(()),
        }
    }
}

fn write_params(f: &mut fmt::Formatter<'_>, params: &[String]) -> fmt::Result {
    if params.is_empty() {
        Ok(())
    } else {
        write!(f, ":{}", params.join(","))
    }
}

/// Parse, with the problem as a plain message.
fn parse(spec: &str) -> Result<PolicySpec, String> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err("the spec is empty".into());
    }
    let (name, args) = match spec.split_once(':') {
        Some((name, args)) => (name.trim(), Some(args.trim())),
        None => (spec, None),
    };
    let name = name.to_ascii_lowercase().replace('_', "-");
    match name.as_str() {
        "fixed" | "static" => {
            let args = args.ok_or("`fixed` needs a size, as in `fixed:8`")?;
            let n = number(args, "the size of `fixed`")?;
            if n == 0 {
                return Err("a fixed pool needs at least 1 thread".into());
            }
            Ok(PolicySpec::Fixed(threads(n, "the size of `fixed`")?))
        }
        "tpr" | "thread-per-request" => no_args(&name, args, PolicySpec::ThreadPerRequest),
        "frequency" => no_args(&name, args, PolicySpec::Frequency),
        "hill-climb" | "hillclimb" => no_args(&name, args, PolicySpec::HillClimb),
        "auto" => no_args(&name, args, PolicySpec::Auto),
        "watermark" | "wm" => watermark(args),
        "xu-bode" | "xubode" => {
            let (mut initial, mut stride) = (XuBode::DEFAULT_INITIAL, XuBode::DEFAULT_STRIDE);
            for (key, value) in params(args, &["initial", "stride"])? {
                let v = number(value, key)?;
                if v == 0 {
                    return Err(format!("`{key}` must be at least 1"));
                }
                let v = threads(v, &format!("`{key}`"))?;
                match key {
                    "initial" => initial = v,
                    _ => stride = v,
                }
            }
            Ok(PolicySpec::XuBode { initial, stride })
        }
        "hisdyn" => {
            let (mut max, mut p) = (HisDyn::DEFAULT_MAX, HisDyn::DEFAULT_PROBABILITY);
            for (key, value) in params(args, &["max", "p"])? {
                if key == "max" {
                    max = number(value, key)?;
                    if max == 0 {
                        return Err("`max` must be at least 1".into());
                    }
                    threads(max, "`max`")?;
                } else {
                    p = value
                        .parse::<f64>()
                        .map_err(|_| format!("`p` must be a probability, not `{value}`"))?;
                    if !(p > 0.0 && p < 1.0) {
                        return Err(format!(
                            "`p` must be strictly between 0 and 1, not `{value}`"
                        ));
                    }
                }
            }
            Ok(PolicySpec::HisDyn { max, p })
        }
        _ => Err(format!("unknown policy `{name}`")),
    }
}

fn no_args(name: &str, args: Option<&str>, spec: PolicySpec) -> Result<PolicySpec, String> {
    match args {
        None => Ok(spec),
        Some(a) => Err(format!("`{name}` takes no parameters, got `{a}`")),
    }
}

fn number(text: &str, what: &str) -> Result<usize, String> {
    text.trim()
        .parse::<usize>()
        .map_err(|_| format!("{what} must be a whole number, not `{text}`"))
}

/// A thread count no pool could have is a spec error, not a build failure later.
fn threads(n: usize, what: &str) -> Result<usize, String> {
    if n > MAX_THREADS {
        return Err(format!(
            "{what} is {n}, above the {MAX_THREADS} threads a pool may have"
        ));
    }
    Ok(n)
}

fn watermark(args: Option<&str>) -> Result<PolicySpec, String> {
    let Some(args) = args else {
        return Ok(PolicySpec::Watermark {
            min: Watermark::DEFAULT_MIN,
            max: Watermark::DEFAULT_MAX,
        });
    };
    let (min, max) = args
        .split_once("..")
        .ok_or_else(|| format!("`watermark` needs a range MIN..MAX, got `{args}`"))?;
    let min = number(min, "the lower watermark")?;
    let max = number(max, "the upper watermark")?;
    if max == 0 {
        return Err("the upper watermark must be at least 1".into());
    }
    threads(max, "the upper watermark")?;
    if min > max {
        return Err(format!("the range {min}..{max} is empty (MIN > MAX)"));
    }
    Ok(PolicySpec::Watermark { min, max })
}

/// `key=value,key=value` with keys from `known`, each at most once.
fn params<'a>(
    args: Option<&'a str>,
    known: &[&'static str],
) -> Result<Vec<(&'static str, &'a str)>, String> {
    let mut out: Vec<(&'static str, &'a str)> = Vec::new();
    let Some(args) = args else {
        return Ok(out);
    };
    for item in args.split(',') {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("expected key=value, got `{}`", item.trim()))?;
        let key = key.trim().to_ascii_lowercase();
        let Some(&key) = known.iter().find(|k| **k == key) else {
            return Err(format!(
                "unknown parameter `{key}` (known: {})",
                known.join(", ")
            ));
        };
        if out.iter().any(|(k, _)| *k == key) {
            return Err(format!("parameter `{key}` given twice"));
        }
        out.push((key, value.trim()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(s: &str) -> PolicySpec {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> SpecError {
        s.parse::<PolicySpec>().expect_err(s)
    }

    #[test]
    fn parses_every_form_of_the_brief() {
        assert_eq!(ok("fixed:8"), PolicySpec::Fixed(8));
        assert_eq!(ok("tpr"), PolicySpec::ThreadPerRequest);
        assert_eq!(
            ok("watermark:3..100"),
            PolicySpec::Watermark { min: 3, max: 100 }
        );
        assert_eq!(
            ok("xu-bode"),
            PolicySpec::XuBode {
                initial: 4,
                stride: 2
            }
        );
        assert_eq!(
            ok("xu-bode:initial=4,stride=2"),
            PolicySpec::XuBode {
                initial: 4,
                stride: 2
            }
        );
        assert_eq!(
            ok("hisdyn:max=100,p=0.01"),
            PolicySpec::HisDyn { max: 100, p: 0.01 }
        );
        assert_eq!(ok("frequency"), PolicySpec::Frequency);
        assert_eq!(ok("hill-climb"), PolicySpec::HillClimb);
        assert_eq!(ok("auto"), PolicySpec::Auto);
    }

    #[test]
    fn lenient_spelling() {
        assert_eq!(
            ok("  Xu_Bode : Stride=3 "),
            PolicySpec::XuBode {
                initial: 4,
                stride: 3
            }
        );
        assert_eq!(ok("HILL_CLIMB"), PolicySpec::HillClimb);
        assert_eq!(ok("thread-per-request"), PolicySpec::ThreadPerRequest);
        assert_eq!(ok("watermark"), PolicySpec::Watermark { min: 3, max: 100 });
        assert_eq!(
            ok("hisdyn:p=0.05"),
            PolicySpec::HisDyn { max: 100, p: 0.05 }
        );
    }

    #[test]
    fn canonical_display() {
        for (input, canonical) in [
            ("fixed:8", "fixed:8"),
            ("tpr", "tpr"),
            ("watermark", "watermark:3..100"),
            ("xu-bode:initial=4,stride=2", "xu-bode"),
            ("xu-bode:stride=3,initial=16", "xu-bode:initial=16,stride=3"),
            ("hisdyn:max=100,p=0.01", "hisdyn"),
            ("hisdyn:p=0.05,max=50", "hisdyn:max=50,p=0.05"),
            ("HillClimb", "hill-climb"),
            ("auto", "auto"),
        ] {
            assert_eq!(ok(input).to_string(), canonical, "{input}");
        }
    }

    #[test]
    fn errors_name_the_problem_and_list_all_forms() {
        for (bad, problem) in [
            ("", "empty"),
            ("bogus", "unknown policy `bogus`"),
            ("fixed", "needs a size"),
            ("fixed:0", "at least 1"),
            ("fixed:eight", "whole number"),
            ("fixed:-3", "whole number"),
            ("fixed:99999999", "above the 32768 threads"),
            ("fixed:32769", "above the 32768 threads"),
            ("fixed:99999999999999999999999", "whole number"),
            ("watermark:1..40000", "above the 32768"),
            ("xu-bode:initial=40000", "above the 32768"),
            ("xu-bode:stride=40000", "above the 32768"),
            ("hisdyn:max=40000", "above the 32768"),
            ("watermark:10..3", "empty"),
            ("watermark:3-100", "MIN..MAX"),
            ("watermark:0..0", "at least 1"),
            ("xu-bode:initial=0", "at least 1"),
            ("xu-bode:speed=2", "unknown parameter `speed`"),
            ("xu-bode:stride", "key=value"),
            ("xu-bode:stride=1,stride=2", "twice"),
            ("hisdyn:p=1", "between 0 and 1"),
            ("hisdyn:p=NaN", "between 0 and 1"),
            ("hisdyn:p=lots", "probability"),
            ("auto:fast", "takes no parameters"),
        ] {
            let e = err(bad);
            assert_eq!(e.spec, bad);
            assert!(e.problem.contains(problem), "{bad}: {}", e.problem);
            let text = e.to_string();
            for form in VALID_FORMS {
                assert!(text.contains(form), "{bad}: message lacks {form}");
            }
        }
    }

    #[test]
    fn the_forms_state_the_thread_limit() {
        let limit = MAX_THREADS.to_string();
        assert_eq!(VALID_FORMS.iter().filter(|f| f.contains(&limit)).count(), 4);
    }

    #[test]
    fn builds_the_named_policy() {
        for s in [
            "fixed:8",
            "watermark:3..100",
            "xu-bode",
            "hisdyn",
            "frequency",
            "hill-climb",
            "auto",
        ] {
            let spec = ok(s);
            assert_eq!(spec.build().unwrap().name(), spec.name(), "{s}");
        }
        assert!(ok("tpr").build().is_none());
        assert_eq!(PolicySpec::default(), PolicySpec::Auto);
    }

    fn any_spec() -> impl Strategy<Value = PolicySpec> {
        prop_oneof![
            (1usize..10_000).prop_map(PolicySpec::Fixed),
            Just(PolicySpec::ThreadPerRequest),
            (0usize..500, 1usize..500).prop_map(|(a, b)| PolicySpec::Watermark {
                min: a.min(b),
                max: a.max(b)
            }),
            (1usize..1000, 1usize..64)
                .prop_map(|(initial, stride)| PolicySpec::XuBode { initial, stride }),
            (1usize..1000, 1e-9f64..0.999_999).prop_map(|(max, p)| PolicySpec::HisDyn { max, p }),
            Just(PolicySpec::Frequency),
            Just(PolicySpec::HillClimb),
            Just(PolicySpec::Auto),
        ]
    }

    proptest! {
        #[test]
        fn arbitrary_strings_never_panic(s in any::<String>()) {
            let _ = s.parse::<PolicySpec>();
        }

        #[test]
        fn spec_like_strings_never_panic(
            s in "[a-zA-Z_-]{0,12}(:[-a-z0-9=.,_ ]{0,24})?"
        ) {
            if let Ok(spec) = s.parse::<PolicySpec>() {
                // Whatever parses prints canonically and reads back the same.
                prop_assert_eq!(spec.to_string().parse::<PolicySpec>().unwrap(), spec);
            }
        }

        #[test]
        fn display_round_trips(spec in any_spec()) {
            let text = spec.to_string();
            prop_assert_eq!(text.parse::<PolicySpec>().unwrap(), spec);
        }
    }
}
