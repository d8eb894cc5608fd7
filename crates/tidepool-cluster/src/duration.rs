//! Duration options: a number with a unit (`30s`, `250ms`, `1h`, `1m30s`),
//! parsed by `humantime`, and checked against the option's range. A bare
//! number is refused: `--drain-timeout 30` could mean seconds or
//! microseconds, and guessing wrong silently is worse than an error.

use std::ops::RangeInclusive;
use std::time::Duration;

/// The units a duration may use, as said in error messages.
pub const UNITS: &str = "ns, us, ms, s, m, h, d (e.g. 30s, 250ms, 1h, 1m30s)";

/// Parse `text` as a duration with a unit, within `range`.
pub fn parse_within(text: &str, range: RangeInclusive<Duration>) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(format!(
            "empty duration: give a number with a unit: {UNITS}"
        ));
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(format!(
            "`{t}` has no unit: write {t}s or {t}ms; units: {UNITS}"
        ));
    }
    let d = humantime::parse_duration(t)
        .map_err(|e| format!("`{t}` is not a duration ({e}); units: {UNITS}"))?;
    if !range.contains(&d) {
        return Err(format!(
            "{} is out of range: allowed {}..={}",
            show(d),
            show(*range.start()),
            show(*range.end())
        ));
    }
    Ok(d)
}

/// A duration as the options write it (`1h`, `250ms`, `0s`).
pub fn show(d: Duration) -> String {
    if d.is_zero() {
        "0s".into()
    } else {
        humantime::format_duration(d).to_string()
    }
}

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// `--ack-wait`: 1s..=1h (the broker's redelivery timer).
pub fn ack_wait(s: &str) -> Result<Duration, String> {
    parse_within(s, SEC..=HOUR)
}

/// `--drain-timeout`: 0s..=1h.
pub fn drain_timeout(s: &str) -> Result<Duration, String> {
    parse_within(s, Duration::ZERO..=HOUR)
}

/// `--max-task-time`: 1s..=1d.
pub fn max_task_time(s: &str) -> Result<Duration, String> {
    parse_within(s, SEC..=DAY)
}

/// A wait for results (`--timeout`): 1s..=1d.
pub fn result_timeout(s: &str) -> Result<Duration, String> {
    parse_within(s, SEC..=DAY)
}

/// Listening for status reports (`--listen`): 100ms..=1m.
pub fn listen(s: &str) -> Result<Duration, String> {
    parse_within(s, 100 * MS..=60 * SEC)
}

/// A task's length in a scenario (`--task`): 0s..=1m.
pub fn task_length(s: &str) -> Result<Duration, String> {
    parse_within(s, Duration::ZERO..=60 * SEC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_required_and_ranges_checked() {
        assert_eq!(drain_timeout("30s"), Ok(30 * SEC));
        assert_eq!(max_task_time("1h"), Ok(HOUR));
        assert_eq!(listen("250ms"), Ok(250 * MS));
        assert_eq!(ack_wait("1m30s"), Ok(90 * SEC));
        let bare = drain_timeout("30").unwrap_err();
        assert!(
            bare.contains("no unit") && bare.contains("30s") && bare.contains("ms"),
            "{bare}"
        );
        let e = max_task_time("3600").unwrap_err();
        assert!(e.contains("no unit"), "{e}");
        let e = max_task_time("10ms").unwrap_err();
        assert!(e.contains("out of range") && e.contains("1s..=1day"), "{e}");
        let e = ack_wait("2h").unwrap_err();
        assert!(e.contains("1s..=1h"), "{e}");
        let e = listen("soon").unwrap_err();
        assert!(e.contains("not a duration") && e.contains("units"), "{e}");
        assert!(drain_timeout("").unwrap_err().contains("empty"));
        assert_eq!(drain_timeout("0s"), Ok(Duration::ZERO));
    }
}
