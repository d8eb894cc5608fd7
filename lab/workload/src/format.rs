//! The thesis's trace file format (Xu 2004, table 5-1), extended with an
//! optional compute/blocked split. See `docs/trace-format.md`.
//!
//! ```text
//! # request_id app_id start_delay_us exec_us [cpu_us blocked_us]
//! 1 1 0   200
//! 2 2 0   150
//! 3 1 300 100  40 60
//! 4 2 0   100
//! ```
//!
//! One task per line, fields separated by spaces or tabs. `#` starts a
//! comment (whole line or trailing). Blank lines are ignored. The first
//! non-comment line may be a column header whose first field is `request_id`.
//! Times are microseconds, non-negative, with at most three decimals
//! (nanosecond precision). A line `clients N` before the first task makes
//! the trace a closed loop of `N` clients ([`Trace::clients`]: start delays
//! are then think times). Any other malformed line is an error naming the
//! file, the line and the field: nothing is silently skipped.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use crate::error::TraceError;
use crate::limits::{shown, Limits, MAX_TIME};
use crate::lines::Lines;
use crate::trace::{TaskSpec, Trace};

/// The directive that makes a trace a closed loop: `clients N`, before the
/// first task. A reader that does not know it fails on it (the first field
/// is not a request id) rather than replaying the trace as an open loop.
pub const CLIENTS: &str = "clients";

/// Column names, in order. The last two are optional (both or neither).
pub const COLUMNS: [&str; 6] = [
    "request_id",
    "app_id",
    "start_delay_us",
    "exec_us",
    "cpu_us",
    "blocked_us",
];

/// Parse a trace from any reader with the default [`Limits`]. `source`
/// names it in error messages.
pub fn parse_trace<R: Read>(reader: R, source: &str) -> Result<Trace, TraceError> {
    parse_trace_with(reader, source, &Limits::default())
}

/// Parse a trace from any reader, within `limits` (tasks, line length).
pub fn parse_trace_with<R: Read>(
    reader: R,
    source: &str,
    limits: &Limits,
) -> Result<Trace, TraceError> {
    let mut lines = Lines::new(reader, source, limits.max_line_bytes);
    let mut trace = Trace::new(source);
    let mut seen: HashMap<u64, usize> = HashMap::new();
    let mut header_allowed = true;
    let mut arrival = Duration::ZERO;
    while let Some((lineno, line)) = lines.next_line()? {
        let content = line.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let fields: Vec<&str> = content.split_whitespace().collect();
        if header_allowed && fields[0].eq_ignore_ascii_case("request_id") {
            header_allowed = false;
            continue;
        }
        if fields[0].eq_ignore_ascii_case(CLIENTS) {
            trace.clients = Some(parse_clients(&fields, &trace, source, lineno)?);
            continue;
        }
        header_allowed = false;
        let task = parse_line(&fields, source, lineno)?;
        if let Some(prev) = seen.insert(task.request_id, lineno) {
            return Err(TraceError::parse(
                source,
                lineno,
                COLUMNS[0],
                format!("request id {} already used on line {prev}", task.request_id),
            ));
        }
        arrival = arrival
            .checked_add(task.start_delay)
            .filter(|a| *a <= MAX_TIME)
            .ok_or_else(|| {
                TraceError::parse(
                    source,
                    lineno,
                    COLUMNS[2],
                    "puts the arrival (the sum of the start delays) beyond 2^64 - 1 ns, about 584 years",
                )
            })?;
        if trace.len() >= limits.max_tasks {
            return Err(TraceError::too_many_tasks(source, lineno, limits.max_tasks));
        }
        trace.push(task);
    }
    Ok(trace)
}

/// Parse a trace held in a string.
pub fn parse_trace_str(text: &str, source: &str) -> Result<Trace, TraceError> {
    parse_trace(text.as_bytes(), source)
}

/// Read a trace file with the default [`Limits`]. The trace is named after the file.
pub fn read_trace_file(path: impl AsRef<Path>) -> Result<Trace, TraceError> {
    read_trace_file_with(path, &Limits::default())
}

/// Read a trace file within `limits`.
pub fn read_trace_file_with(path: impl AsRef<Path>, limits: &Limits) -> Result<Trace, TraceError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
    parse_trace_with(file, &name, limits)
}

/// The `clients N` directive: once, before the first task, `N` ≥ 1.
fn parse_clients(
    fields: &[&str],
    trace: &Trace,
    source: &str,
    line: usize,
) -> Result<usize, TraceError> {
    let bad = |why: String| TraceError::parse(source, line, CLIENTS, why);
    if !trace.is_empty() {
        return Err(bad(
            "must come before the first task (it makes the whole trace a closed loop)".into(),
        ));
    }
    if trace.clients.is_some() {
        return Err(bad("given twice".into()));
    }
    match fields {
        [_, n] => match n.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(bad(format!(
                "`{}` is not a whole number in 1..={}",
                shown(n),
                usize::MAX
            ))),
        },
        _ => Err(bad(format!(
            "takes one value, the number of clients (line has {} field(s))",
            fields.len()
        ))),
    }
}

fn parse_line(fields: &[&str], source: &str, line: usize) -> Result<TaskSpec, TraceError> {
    if fields.len() < 4 {
        return Err(TraceError::parse(
            source,
            line,
            COLUMNS[fields.len()],
            format!(
                "missing (line has {} field(s), need 4 or 6: {})",
                fields.len(),
                COLUMNS.join(" ")
            ),
        ));
    }
    if fields.len() == 5 {
        return Err(TraceError::parse(
            source,
            line,
            COLUMNS[5],
            "missing (cpu_us and blocked_us come together)",
        ));
    }
    if fields.len() > 6 {
        return Err(TraceError::parse(
            source,
            line,
            &format!("#{}", 7),
            format!(
                "unexpected extra field `{}` (at most 6 fields)",
                shown(fields[6])
            ),
        ));
    }
    let int = |i: usize| -> Result<u64, TraceError> {
        fields[i].parse::<u64>().map_err(|_| {
            TraceError::parse(
                source,
                line,
                COLUMNS[i],
                format!(
                    "`{}` is not a whole number in 0..={}",
                    shown(fields[i]),
                    u64::MAX
                ),
            )
        })
    };
    let time = |i: usize| -> Result<Duration, TraceError> {
        parse_micros(fields[i]).map_err(|m| {
            TraceError::parse(
                source,
                line,
                COLUMNS[i],
                format!("`{}` {m}", shown(fields[i])),
            )
        })
    };
    let request_id = int(0)?;
    let app_id = int(1)?;
    let start_delay = time(2)?;
    let exec = time(3)?;
    let mut task = TaskSpec::new(request_id, app_id, start_delay, exec);
    if fields.len() == 6 {
        let cpu = time(4)?;
        let blocked = time(5)?;
        if cpu + blocked != exec {
            return Err(TraceError::parse(
                source,
                line,
                COLUMNS[5],
                format!(
                    "cpu_us + blocked_us = {} but exec_us = {}",
                    format_micros(cpu + blocked),
                    format_micros(exec)
                ),
            ));
        }
        task = task.with_split(cpu, blocked);
    }
    Ok(task)
}

/// Parse a non-negative decimal number of microseconds with at most three
/// decimals into a `Duration`, exactly (no floating point).
fn parse_micros(s: &str) -> Result<Duration, &'static str> {
    const BAD: &str = "is not a non-negative number of microseconds";
    const TOO_LARGE: &str =
        "is too large (at most 18446744073709551.615 µs = 2^64 - 1 ns, about 584 years)";
    if s.starts_with('-') {
        return Err("is negative (times are non-negative microseconds)");
    }
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BAD);
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) || (s.contains('.') && frac.is_empty()) {
        return Err(BAD);
    }
    if frac.len() > 3 {
        return Err("has more than 3 decimals (nanosecond precision is the limit)");
    }
    let us: u64 = int.parse().map_err(|_| TOO_LARGE)?;
    let mut ns_frac: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| BAD)?
    };
    for _ in frac.len()..3 {
        ns_frac *= 10;
    }
    let ns = us
        .checked_mul(1000)
        .and_then(|v| v.checked_add(ns_frac))
        .ok_or(TOO_LARGE)?;
    Ok(Duration::from_nanos(ns))
}

/// Microseconds with up to three decimals, trailing zeros dropped (exact).
pub fn format_micros(d: Duration) -> String {
    let ns = d.as_nanos();
    let (us, frac) = (ns / 1000, ns % 1000);
    if frac == 0 {
        us.to_string()
    } else {
        let f = format!("{frac:03}");
        format!("{us}.{}", f.trim_end_matches('0'))
    }
}

/// Write a trace in the format [`parse_trace`] reads. Tasks with a blocked
/// part get the optional `cpu_us blocked_us` columns; all-compute tasks get
/// four fields. Writing then parsing gives back the same tasks.
///
/// ```
/// use std::time::Duration;
/// use tidepool_workload::format::{parse_trace_str, write_trace};
/// use tidepool_workload::{TaskSpec, Trace};
/// let mut t = Trace::new("x");
/// t.push(TaskSpec::new(1, 1, Duration::ZERO, Duration::from_nanos(200_500)));
/// let mut out = Vec::new();
/// write_trace(&t, &mut out).unwrap();
/// let back = parse_trace_str(std::str::from_utf8(&out).unwrap(), "x").unwrap();
/// assert_eq!(back.tasks, t.tasks);
/// ```
pub fn write_trace<W: Write>(trace: &Trace, mut out: W) -> std::io::Result<()> {
    writeln!(
        out,
        "# tidepool trace (Xu 2004 table 5-1 + cpu/blocked split)"
    )?;
    if !trace.name.is_empty() {
        writeln!(out, "# name: {}", trace.name.replace('\n', " "))?;
    }
    if let Some(clients) = trace.clients {
        writeln!(
            out,
            "# a closed loop: each client waits for its answer; start_delay_us is its think time"
        )?;
        writeln!(out, "{CLIENTS} {clients}")?;
    }
    writeln!(out, "# {}", COLUMNS.join(" "))?;
    for t in &trace.tasks {
        write!(
            out,
            "{} {} {} {}",
            t.request_id,
            t.app_id,
            format_micros(t.start_delay),
            format_micros(t.exec())
        )?;
        if t.blocked > Duration::ZERO {
            write!(
                out,
                " {} {}",
                format_micros(t.cpu),
                format_micros(t.blocked)
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Write a trace to a file.
pub fn write_trace_file(trace: &Trace, path: impl AsRef<Path>) -> Result<(), TraceError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = std::fs::File::create(path).map_err(|e| TraceError::io(&name, e))?;
    let mut w = std::io::BufWriter::new(file);
    write_trace(trace, &mut w).map_err(|e| TraceError::io(&name, e))?;
    w.flush().map_err(|e| TraceError::io(&name, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn parses_thesis_example() {
        let text = "# figure 5.3\n1 1 0 200\n2 2 0 150\n3 1 300 100\n4 2 0 100\n";
        let t = parse_trace_str(text, "fig53").unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.tasks[2], TaskSpec::new(3, 1, us(300), us(100)));
        assert_eq!(t.span(), us(300));
        assert_eq!(t.arrival_offsets(), vec![us(0), us(0), us(300), us(300)]);
    }

    #[test]
    fn header_comments_split_and_decimals() {
        let text = "request_id app_id start_delay_us exec_us cpu_us blocked_us\n\
                    \t1\t7\t0.5\t200  50 150 # trailing comment\n\n2 7 1 10.25\n";
        let t = parse_trace_str(text, "h").unwrap();
        assert_eq!(t.tasks[0].cpu, us(50));
        assert_eq!(t.tasks[0].blocked, us(150));
        assert_eq!(t.tasks[0].start_delay, Duration::from_nanos(500));
        assert_eq!(t.tasks[1].cpu, Duration::from_nanos(10_250));
    }

    fn err(text: &str) -> String {
        parse_trace_str(text, "bad.trace").unwrap_err().to_string()
    }

    #[test]
    fn errors_name_file_line_and_field() {
        assert_eq!(
            err("1 1 0 200\n\n# c\nx 1 0 1\n"),
            "bad.trace:4: field `request_id`: `x` is not a whole number in 0..=18446744073709551615"
        );
        assert_eq!(
            err("1 -2 0 200\n"),
            "bad.trace:1: field `app_id`: `-2` is not a whole number in 0..=18446744073709551615"
        );
        assert_eq!(
            err("1 1 -5 200\n"),
            "bad.trace:1: field `start_delay_us`: `-5` is negative (times are non-negative microseconds)"
        );
        assert!(err("1 1 0\n").starts_with("bad.trace:1: field `exec_us`: missing"));
        assert!(err("1 1 0 10 5\n").starts_with("bad.trace:1: field `blocked_us`: missing"));
        assert_eq!(
            err("1 1 0 10 5 6\n"),
            "bad.trace:1: field `blocked_us`: cpu_us + blocked_us = 11 but exec_us = 10"
        );
        assert!(err("1 1 0 10 5 5 9\n").starts_with("bad.trace:1: field `#7`"));
        assert!(err("1 1 0 1.0001\n").contains("more than 3 decimals"));
        assert!(err("1 1 0 1.\n").contains("field `exec_us`"));
        assert!(err("1 1 0 nan\n").contains("field `exec_us`"));
        assert_eq!(
            err("1 1 0 1\n1 1 0 1\n"),
            "bad.trace:2: field `request_id`: request id 1 already used on line 1"
        );
        // a header is only allowed first
        assert!(err("1 1 0 1\nrequest_id app_id x y\n").starts_with("bad.trace:2:"));
    }

    #[test]
    fn missing_file_is_io_error_naming_it() {
        let e = read_trace_file("/nonexistent/nope.trace").unwrap_err();
        assert!(matches!(e, TraceError::Io { .. }));
        assert!(e.to_string().starts_with("/nonexistent/nope.trace: "));
    }

    #[test]
    fn round_trip_through_text_and_file() {
        let mut t = Trace::new("rt");
        t.push(TaskSpec::new(1, 1, us(0), us(200)));
        t.push(TaskSpec::new(2, 3, Duration::from_nanos(1_001), us(0)));
        t.push(
            TaskSpec::new(3, 2, us(300), us(0))
                .with_split(Duration::from_nanos(123_456), us(999_999)),
        );
        let mut out = Vec::new();
        write_trace(&t, &mut out).unwrap();
        let back = parse_trace_str(std::str::from_utf8(&out).unwrap(), "rt").unwrap();
        assert_eq!(back.tasks, t.tasks);

        let dir = std::env::temp_dir().join(format!("tp-wl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rt.trace");
        write_trace_file(&t, &path).unwrap();
        assert_eq!(read_trace_file(&path).unwrap().tasks, t.tasks);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_closed_loop_round_trips_and_bad_directives_are_errors() {
        let mut t = Trace::new("closed");
        t.clients = Some(3);
        for i in 0..5 {
            t.push(TaskSpec::new(i, 1, us(10 * i), us(100)));
        }
        let mut out = Vec::new();
        write_trace(&t, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\nclients 3\n"), "{text}");
        let back = parse_trace_str(&text, "closed").unwrap();
        assert_eq!(back.clients, Some(3));
        assert_eq!(back.tasks, t.tasks);
        // An open loop writes no directive and reads back open.
        t.clients = None;
        let mut out = Vec::new();
        write_trace(&t, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("clients"), "{text}");
        assert_eq!(parse_trace_str(&text, "open").unwrap().clients, None);
        // After a header too, case-insensitive.
        let h = parse_trace_str(
            "request_id app_id start_delay_us exec_us\nCLIENTS 2\n1 1 0 5\n",
            "h",
        );
        assert_eq!(h.unwrap().clients, Some(2));

        assert_eq!(
            err("1 1 0 1\nclients 2\n"),
            "bad.trace:2: field `clients`: must come before the first task (it makes the whole trace a closed loop)"
        );
        assert_eq!(
            err("clients 0\n1 1 0 1\n"),
            format!(
                "bad.trace:1: field `clients`: `0` is not a whole number in 1..={}",
                usize::MAX
            )
        );
        assert!(err("clients\n").starts_with("bad.trace:1: field `clients`: takes one value"));
        assert!(err("clients 2 3\n").contains("takes one value"));
        assert_eq!(
            err("clients 2\nclients 2\n"),
            "bad.trace:2: field `clients`: given twice"
        );
    }

    #[test]
    fn format_micros_is_exact() {
        assert_eq!(format_micros(us(5)), "5");
        assert_eq!(format_micros(Duration::from_nanos(5_500)), "5.5");
        assert_eq!(format_micros(Duration::from_nanos(5_001)), "5.001");
        assert_eq!(parse_micros("5.001"), Ok(Duration::from_nanos(5_001)));
    }
}
