//! What a trace may hold: caps that keep a hostile or mistaken input from
//! running away with memory or time. Documented in `docs/trace-format.md`.
//!
//! | cap | default | why |
//! |---|---|---|
//! | tasks per trace | 1,000,000 | a task costs about 200 bytes across the trace, the replay's records and its slots, so a trace at the cap replays in about 200 MB; raise it with [`Limits::max_tasks`] (`tidepool --max-tasks N`) |
//! | bytes per line | 65,536 | a trace line is under 100 bytes; a file with no newline (`/dev/zero`) must not be read whole |
//! | a time | 2⁶⁴ − 1 ns (about 584 years) | the replay counts nanoseconds in a `u64` |

use std::time::Duration;

/// Caps on the size of a trace, for parsers, importers and generators.
///
/// ```
/// use tidepool_workload::format::parse_trace_with;
/// use tidepool_workload::Limits;
/// let small = Limits { max_tasks: 2, ..Limits::default() };
/// let err = parse_trace_with("1 1 0 1\n2 1 0 1\n3 1 0 1\n".as_bytes(), "t", &small).unwrap_err();
/// assert_eq!(err.to_string(), "t:3: the trace has more than 2 tasks, the limit (raise it with --max-tasks)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most tasks in one trace (parsed, imported or generated).
    pub max_tasks: usize,
    /// Longest line of a trace file, in bytes (the newline not counted).
    pub max_line_bytes: usize,
}

impl Limits {
    /// Default [`max_tasks`](Self::max_tasks).
    pub const DEFAULT_MAX_TASKS: usize = 1_000_000;
    /// Default [`max_line_bytes`](Self::max_line_bytes).
    pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_tasks: Self::DEFAULT_MAX_TASKS,
            max_line_bytes: Self::DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// The longest time a trace may hold (an arrival offset, a service time):
/// the replay keeps nanoseconds in a `u64`.
pub const MAX_TIME: Duration = Duration::from_nanos(u64::MAX);

/// Seconds as a [`Duration`], or `None` when negative, not finite or above
/// [`MAX_TIME`] (where `Duration::from_secs_f64` would panic or the replay
/// would wrap).
pub fn secs_to_duration(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    // Fast path (generators convert two samples per task): below 1,000 s
    // the product `secs·1e9` is within 2⁻¹⁴ ns of the exact one, so away
    // from a half it rounds to the same whole ns as the exact conversion.
    if secs < 1_000.0 {
        let x = secs * 1e9;
        // Through i64 (x < 10¹², exact either way): one instruction each
        // way, where u64 ↔ f64 takes a sequence on x86-64.
        let t = x as i64;
        let f = x - t as f64;
        let t = t as u64;
        // One branch that is almost always taken: whether to round up is a
        // coin flip for random samples, so it is data, not a jump.
        if (f - 0.5).abs() > 0.001 {
            return Some(Duration::from_nanos(t + u64::from(f > 0.5)));
        }
    }
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| *d <= MAX_TIME)
}

/// Seconds as a [`Duration`], clamped to `0..=MAX_TIME` (NaN is zero): for
/// samples of distributions whose tails are unbounded.
pub fn secs_saturating(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        Duration::ZERO
    } else {
        secs_to_duration(secs).unwrap_or(MAX_TIME)
    }
}

/// A user's token for an error message: at most 40 characters, invisible
/// and control characters escaped (a BOM shows as `\u{feff}`), and the
/// length of what was cut.
///
/// ```
/// use tidepool_workload::limits::shown;
/// assert_eq!(shown("\u{feff}2023"), "\\u{feff}2023");
/// assert_eq!(shown(&"9".repeat(1000)), format!("{}… (1000 bytes)", "9".repeat(40)));
/// ```
pub fn shown(token: &str) -> String {
    const MAX_CHARS: usize = 40;
    let mut out = String::new();
    for c in token.chars().take(MAX_CHARS) {
        match c {
            '"' | '\'' | '\\' => out.push(c),
            c => out.extend(c.escape_debug()),
        }
    }
    if token.chars().nth(MAX_CHARS).is_some() {
        out.push_str(&format!("… ({} bytes)", token.len()));
    }
    out
}

/// A number for an error message: plain when of ordinary size, in
/// scientific notation when tiny or huge (`1e-300`, not 300 zeros).
///
/// ```
/// use tidepool_workload::limits::shown_f64;
/// assert_eq!(shown_f64(2000.0), "2000");
/// assert_eq!(shown_f64(1e-300), "1e-300");
/// assert_eq!(shown_f64(-1e300), "-1e300");
/// ```
pub fn shown_f64(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || !a.is_finite() || (1e-4..1e15).contains(&a) {
        v.to_string()
    } else {
        format!("{v:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_never_panic() {
        assert_eq!(secs_to_duration(1.5), Some(Duration::from_millis(1500)));
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e300, 1.9e10] {
            assert_eq!(secs_to_duration(bad), None, "{bad}");
        }
        assert_eq!(secs_saturating(1e300), MAX_TIME);
        assert_eq!(secs_saturating(-5.0), Duration::ZERO);
        assert_eq!(secs_saturating(f64::NAN), Duration::ZERO);
    }

    #[test]
    fn tokens_are_short_and_visible() {
        assert_eq!(shown("abc"), "abc");
        assert_eq!(shown("a\tb\0"), "a\\tb\\0");
        assert_eq!(shown("\"x\""), "\"x\"");
        let long = "é".repeat(100);
        assert!(shown(&long).ends_with("… (200 bytes)"));
    }
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;

    #[test]
    fn the_fast_conversion_equals_the_exact_one() {
        let exact = |s: f64| Duration::try_from_secs_f64(s).ok();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..200_000u32 {
            // xorshift: values spread over 1e-12 .. 1e3 s
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mantissa = (x >> 11) as f64 / (1u64 << 53) as f64;
            let s = mantissa * 10f64.powi((i % 15) as i32 - 12);
            assert_eq!(secs_to_duration(s), exact(s), "{s:e}");
        }
        for s in [
            0.0,
            1e-9,
            1.5e-9,
            2.5e-9,
            0.4999999e-9,
            999.999_999_999_5,
            1e-6,
            1e-5,
        ] {
            assert_eq!(secs_to_duration(s), exact(s), "{s:e}");
        }
    }
}
