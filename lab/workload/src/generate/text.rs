//! A spec's text form: parsing `KIND:key=value,...` with errors that name
//! the key, and writing it back in the same form.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::{Arrivals, GenSpec, RenewalKind, COMMON};
use crate::dist::{format_duration, parse_duration, Dist};
use crate::error::SpecError;
use crate::limits::{shown, shown_f64, Limits};

fn parse_num<T: FromStr>(key: &str, v: &str, what: &str) -> Result<T, SpecError> {
    v.parse::<T>()
        .map_err(|_| SpecError::bad(key, format!("`{}` is not {what}", shown(v))))
}

fn positive_rate(key: &str, v: &str) -> Result<f64, SpecError> {
    let r: f64 = parse_num(key, v, "a number")?;
    if !(r.is_finite() && r > 0.0) {
        return Err(SpecError::bad(
            key,
            format!("`{}` must be a rate > 0 (tasks per second)", shown(v)),
        ));
    }
    Ok(r)
}

impl FromStr for GenSpec {
    type Err = SpecError;

    /// Parse and [`validate`](GenSpec::validate) with the default [`Limits`].
    fn from_str(s: &str) -> Result<GenSpec, SpecError> {
        GenSpec::parse_with(s, &Limits::default())
    }
}

impl GenSpec {
    /// Parse a spec string and [`validate`](GenSpec::validate) it against `limits`.
    pub fn parse_with(s: &str, limits: &Limits) -> Result<GenSpec, SpecError> {
        let spec = GenSpec::parse_unchecked(s)?;
        spec.validate(limits)?;
        Ok(spec)
    }

    fn parse_unchecked(s: &str) -> Result<GenSpec, SpecError> {
        let s = s.trim();
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        let specific: &[&str] = match kind {
            "poisson" | "periodic" => &["rate"],
            "normal" | "lognormal" => &["rate", "cv"],
            "steps" => &["rate", "step", "steps", "step_time"],
            "onoff" => &["rate", "on", "off", "off_rate"],
            "closed" => &["clients", "think"],
            _ => return Err(SpecError::UnknownKind(shown(kind))),
        };
        let mut kv: BTreeMap<&str, &str> = BTreeMap::new();
        for pair in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| SpecError::Malformed(shown(pair)))?;
            let (k, v) = (k.trim(), v.trim());
            let allowed = specific
                .iter()
                .chain(COMMON.iter())
                .any(|a| *a == k && !(kind == "steps" && k == "n"));
            if !allowed {
                let mut list: Vec<&str> = specific.to_vec();
                list.extend(COMMON.iter().filter(|c| !(kind == "steps" && **c == "n")));
                return Err(SpecError::UnknownKey {
                    kind: kind.to_string(),
                    key: shown(k),
                    allowed: list.join(", "),
                });
            }
            if kv.insert(k, v).is_some() {
                return Err(SpecError::Malformed(shown(pair)));
            }
        }
        let get = |k: &str| kv.get(k).copied();
        let rate = if kind == "closed" {
            0.0
        } else {
            positive_rate(
                "rate",
                get("rate").ok_or(SpecError::Missing("rate".into()))?,
            )?
        };
        let dur = |k: &str, default: Duration| -> Result<Duration, SpecError> {
            match get(k) {
                Some(v) => parse_duration(v).map_err(|m| SpecError::bad(k, m)),
                None => Ok(default),
            }
        };
        let arrivals = match kind {
            "poisson" | "periodic" | "normal" | "lognormal" => {
                let (name, default_cv) = match kind {
                    "poisson" => (RenewalKind::Poisson, 1.0),
                    "periodic" => (RenewalKind::Periodic, 0.0),
                    "normal" => (RenewalKind::Normal, 0.25),
                    _ => (RenewalKind::LogNormal, 1.0),
                };
                let cv = match get("cv") {
                    Some(v) => {
                        let cv: f64 = parse_num("cv", v, "a number")?;
                        if !(cv.is_finite() && cv >= 0.0) {
                            return Err(SpecError::bad("cv", "must be >= 0"));
                        }
                        cv
                    }
                    None => default_cv,
                };
                Arrivals::Renewal { name, rate, cv }
            }
            "steps" => {
                let step_pct = match get("step") {
                    Some(v) => parse_num::<f64>("step", v.trim_end_matches('%'), "a percentage")?,
                    None => 10.0,
                };
                if !(step_pct.is_finite() && step_pct > -100.0) {
                    return Err(SpecError::bad("step", "must be a percentage > -100"));
                }
                let steps = match get("steps") {
                    Some(v) => parse_num::<u32>("steps", v, "a positive integer")?,
                    None => 10,
                };
                if steps == 0 {
                    return Err(SpecError::bad("steps", "must be >= 1"));
                }
                let step_time = dur("step_time", Duration::from_secs(1))?;
                if step_time.is_zero() {
                    return Err(SpecError::bad("step_time", "must be > 0"));
                }
                Arrivals::Steps {
                    rate,
                    step_pct,
                    steps,
                    step_time,
                }
            }
            "closed" => {
                let clients = parse_num::<usize>(
                    "clients",
                    get("clients").ok_or(SpecError::Missing("clients".into()))?,
                    "a positive integer",
                )?;
                if clients == 0 {
                    return Err(SpecError::bad("clients", "must be >= 1"));
                }
                let think = match get("think") {
                    Some(v) => Dist::parse_for(v, "think")?,
                    None => Dist::exp(Duration::from_millis(1)),
                };
                Arrivals::Closed { clients, think }
            }
            _ => {
                let off_rate = match get("off_rate") {
                    Some(v) => {
                        let r: f64 = parse_num("off_rate", v, "a number")?;
                        if !(r.is_finite() && r >= 0.0) {
                            return Err(SpecError::bad("off_rate", "must be >= 0"));
                        }
                        r
                    }
                    None => 0.0,
                };
                let on = dur("on", Duration::from_millis(100))?;
                let off = dur("off", Duration::from_millis(100))?;
                if on.is_zero() {
                    return Err(SpecError::bad("on", "must be > 0"));
                }
                Arrivals::OnOff {
                    rate,
                    off_rate,
                    on,
                    off,
                }
            }
        };
        let service = match get("service") {
            Some(v) => Dist::parse_for(v, "service")?,
            None => Dist::exp(Duration::from_micros(200)),
        };
        let free = match get("free") {
            Some(v) => parse_num::<f64>("free", v.trim_end_matches('%'), "a percentage")?,
            None => 0.0,
        };
        if !(0.0..=100.0).contains(&free) {
            return Err(SpecError::bad(
                "free",
                format!(
                    "{} is outside 0..=100 (percent of service time blocked)",
                    shown_f64(free)
                ),
            ));
        }
        let free_after = match get("free_after") {
            Some(v) => {
                let f = parse_num::<f64>("free_after", v.trim_end_matches('%'), "a percentage")?;
                if !(0.0..=100.0).contains(&f) {
                    return Err(SpecError::bad(
                        "free_after",
                        format!("{f} is outside 0..=100 (percent of service time blocked)"),
                    ));
                }
                Some(f)
            }
            None => None,
        };
        let apps = match get("apps") {
            Some(v) => parse_num::<u64>("apps", v, "a positive integer")?,
            None => 1,
        };
        if apps == 0 {
            return Err(SpecError::bad("apps", "must be >= 1"));
        }
        let seed = match get("seed") {
            Some(v) => parse_num::<u64>("seed", v, "a non-negative integer")?,
            None => 1,
        };
        let mut spec = GenSpec {
            arrivals,
            service,
            n: 1000,
            free,
            free_after,
            apps,
            seed,
        };
        match get("n") {
            Some(v) => spec.n = parse_num::<usize>("n", v, "a non-negative integer")?,
            None => {
                if let Arrivals::Steps { .. } = spec.arrivals {
                    spec.n = 0; // derived when generating
                }
            }
        }
        Ok(spec)
    }
}

impl fmt::Display for GenSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.kind_name())?;
        match self.arrivals {
            Arrivals::Renewal { name, rate, cv } => {
                write!(f, "rate={rate}")?;
                if matches!(name, RenewalKind::Normal | RenewalKind::LogNormal) {
                    write!(f, ",cv={cv}")?;
                }
            }
            Arrivals::Steps {
                rate,
                step_pct,
                steps,
                step_time,
            } => write!(
                f,
                "rate={rate},step={step_pct},steps={steps},step_time={}",
                format_duration(step_time)
            )?,
            Arrivals::OnOff {
                rate,
                off_rate,
                on,
                off,
            } => write!(
                f,
                "rate={rate},on={},off={},off_rate={off_rate}",
                format_duration(on),
                format_duration(off)
            )?,
            Arrivals::Closed { clients, think } => write!(f, "clients={clients},think={think}")?,
        }
        if !matches!(self.arrivals, Arrivals::Steps { .. }) {
            write!(f, ",n={}", self.n)?;
        }
        write!(f, ",service={},free={}", self.service, self.free)?;
        if let Some(after) = self.free_after {
            write!(f, ",free_after={after}")?;
        }
        write!(f, ",apps={},seed={}", self.apps, self.seed)
    }
}
