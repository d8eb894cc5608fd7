//! Azure LLM inference trace (Azure Public Dataset, `AzureLLMInferenceTrace`,
//! CC-BY 4.0; Patel et al., "Splitwise", ISCA 2024).
//!
//! CSV with header `TIMESTAMP,ContextTokens,GeneratedTokens`; the timestamp
//! is `YYYY-MM-DD HH:MM:SS[.fraction]` (sub-millisecond resolution), the token
//! counts stand for the request's size. Arrivals are the timestamps relative
//! to the first, divided by the compression; service time is
//! `base + ContextTokens × per_context_token + GeneratedTokens × per_generated_token`,
//! clamped to `max_service`, then split by `free`.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{check_free, check_range, Imported, COMPRESS_RANGE};
use crate::error::TraceError;
use crate::generate::split_free;
use crate::limits::{secs_to_duration, shown, shown_f64, Limits};
use crate::lines::Lines;
use crate::trace::{TaskSpec, Trace};

/// Column names, in order.
pub const COLUMNS: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

/// How to turn the Azure CSV into a thread-pool trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AzureOptions {
    /// Trace seconds per replay second (arrival-time compression), > 0.
    pub compress: f64,
    /// Fixed part of every request's service time.
    pub base: Duration,
    /// Service time per context (prompt) token.
    pub per_context_token: Duration,
    /// Service time per generated token.
    pub per_generated_token: Duration,
    /// Upper bound on a task's service time.
    pub max_service: Duration,
    /// Percent (0–100) of service time spent blocked (an inference request
    /// mostly waits for an accelerator: default 80).
    pub free: f64,
    /// Import at most this many requests.
    pub limit: Option<usize>,
}

impl Default for AzureOptions {
    /// One minute of trace per replay second; 1 ms + 2 µs/context token +
    /// 20 µs/generated token, at most 100 ms; 80 % blocked.
    fn default() -> Self {
        AzureOptions {
            compress: 60.0,
            base: Duration::from_millis(1),
            per_context_token: Duration::from_micros(2),
            per_generated_token: Duration::from_micros(20),
            max_service: Duration::from_millis(100),
            free: 80.0,
            limit: None,
        }
    }
}

impl AzureOptions {
    /// The service time this model gives a request of the given size.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tidepool_workload::import::azure::AzureOptions;
    /// let o = AzureOptions::default();
    /// assert_eq!(o.service_time(500, 100), Duration::from_micros(1000 + 1000 + 2000));
    /// ```
    pub fn service_time(&self, context: u64, generated: u64) -> Duration {
        let mul = |d: Duration, n: u64| Duration::from_nanos(nanos(d).saturating_mul(n));
        self.base
            .saturating_add(mul(self.per_context_token, context))
            .saturating_add(mul(self.per_generated_token, generated))
            .min(self.max_service)
    }
}

/// Import the Azure CSV from a reader with the default [`Limits`]; `source`
/// names it in errors.
pub fn parse_azure<R: Read>(
    reader: R,
    source: &str,
    opts: &AzureOptions,
) -> Result<Imported, TraceError> {
    parse_azure_with(reader, source, opts, &Limits::default())
}

/// Import the Azure CSV from a reader within `limits`. Lines are read (and
/// capped, and checked for UTF-8) before the CSV parser splits them: a record
/// never spans lines in this format.
pub fn parse_azure_with<R: Read>(
    reader: R,
    source: &str,
    opts: &AzureOptions,
    limits: &Limits,
) -> Result<Imported, TraceError> {
    check_range("compress", opts.compress, COMPRESS_RANGE)?;
    check_free(opts.free)?;
    let mut lines = Lines::new(reader, source, limits.max_line_bytes);
    let mut trace = Trace::new(source);
    let mut t0: Option<i128> = None;
    let mut prev = Duration::ZERO;
    let mut records = 0;
    let mut header = true;
    while let Some((line, text)) = lines.next_line()? {
        if text.trim().is_empty() {
            continue;
        }
        let rec = csv_fields(text);
        if header {
            header = false;
            check_header(&rec, source, line)?;
            continue;
        }
        if opts.limit.is_some_and(|l| trace.len() >= l) {
            break;
        }
        if rec.len() != COLUMNS.len() {
            let field = COLUMNS.get(rec.len()).copied().unwrap_or("#4");
            return Err(TraceError::parse(
                source,
                line,
                field,
                format!("line has {} fields, expected 3", rec.len()),
            ));
        }
        if trace.len() >= limits.max_tasks {
            return Err(TraceError::too_many_tasks(source, line, limits.max_tasks));
        }
        records += 1;
        let ts = parse_timestamp(&rec[0]).map_err(|m| {
            TraceError::parse(
                source,
                line,
                COLUMNS[0],
                format!("`{}` {m}", shown(&rec[0])),
            )
        })?;
        let tokens = |i: usize| -> Result<u64, TraceError> {
            rec[i].parse::<u64>().map_err(|_| {
                TraceError::parse(
                    source,
                    line,
                    COLUMNS[i],
                    format!(
                        "`{}` is not a token count (a whole number in 0..={})",
                        shown(&rec[i]),
                        u64::MAX
                    ),
                )
            })
        };
        let (ctx, gen) = (tokens(1)?, tokens(2)?);
        let base = *t0.get_or_insert(ts);
        if ts < base {
            return Err(TraceError::parse(
                source,
                line,
                COLUMNS[0],
                "timestamp is before the first request's (the trace must be in arrival order)",
            ));
        }
        let after = (ts - base) as f64 / 1e9;
        let at = secs_to_duration(after / opts.compress).ok_or_else(|| {
            TraceError::parse(
                source,
                line,
                COLUMNS[0],
                format!(
                    "is {after:.0} s after the first request: divided by compress {} that is beyond 2^64 - 1 ns, about 584 years",
                    shown_f64(opts.compress)
                ),
            )
        })?;
        let at = at.max(prev);
        let (cpu, blocked) = split_free(opts.service_time(ctx, gen), opts.free);
        trace.push(TaskSpec {
            request_id: records as u64,
            app_id: 1,
            start_delay: at - prev,
            cpu,
            blocked,
        });
        prev = at;
    }
    if header {
        return Err(TraceError::parse(
            source,
            1,
            COLUMNS[0],
            format!(
                "missing header (the file must start with {})",
                COLUMNS.join(",")
            ),
        ));
    }
    Ok(Imported {
        trace,
        skipped_unknown: 0,
        records,
    })
}

fn check_header(rec: &[String], source: &str, line: usize) -> Result<(), TraceError> {
    for (i, want) in COLUMNS.iter().enumerate() {
        match rec.get(i) {
            Some(h) if h.eq_ignore_ascii_case(want) => {}
            got => {
                return Err(TraceError::parse(
                    source,
                    line,
                    want,
                    format!(
                        "header has `{}` where `{want}` was expected (header must be {})",
                        shown(got.map_or("", |s| s.as_str())),
                        COLUMNS.join(",")
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// The fields of one CSV line (quotes handled by the `csv` crate), trimmed.
fn csv_fields(line: &str) -> Vec<String> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(line.as_bytes());
    let mut rec = csv::StringRecord::new();
    // One valid UTF-8 line held in memory: reading it cannot fail.
    match rdr.read_record(&mut rec) {
        Ok(true) => rec.iter().map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

/// Import the Azure CSV held in a string.
pub fn parse_azure_str(
    text: &str,
    source: &str,
    opts: &AzureOptions,
) -> Result<Imported, TraceError> {
    parse_azure(text.as_bytes(), source, opts)
}

/// Import an Azure CSV file with the default [`Limits`].
pub fn read_azure_file(
    path: impl AsRef<Path>,
    opts: &AzureOptions,
) -> Result<Imported, TraceError> {
    read_azure_file_with(path, opts, &Limits::default())
}

/// Import an Azure CSV file within `limits`.
pub fn read_azure_file_with(
    path: impl AsRef<Path>,
    opts: &AzureOptions,
    limits: &Limits,
) -> Result<Imported, TraceError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
    parse_azure_with(file, &name, opts, limits)
}

/// A duration in nanoseconds, saturating at `u64::MAX`.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds since 1970-01-01 of `YYYY-MM-DD HH:MM:SS[.fraction]` (UTC,
/// years 1 to 9999, fraction up to 9 digits; a `T` may separate date and
/// time). The error says what is wrong, to follow the quoted timestamp.
///
/// ```
/// use tidepool_workload::import::azure::parse_timestamp;
/// assert_eq!(parse_timestamp("1970-01-01 00:00:01.5"), Ok(1_500_000_000));
/// assert_eq!(
///     parse_timestamp("2023-02-31 00:00:00").unwrap_err(),
///     "has day 31, but 2023-02 has 28 days"
/// );
/// ```
pub fn parse_timestamp(s: &str) -> Result<i128, String> {
    const FORM: &str = "is not a timestamp like 2023-11-16 18:15:46.6805900";
    let s = s.trim();
    let (date, time) = s.split_once([' ', 'T']).ok_or(FORM)?;
    let num = |t: &str, digits: std::ops::RangeInclusive<usize>| -> Result<i64, String> {
        if digits.contains(&t.len()) && t.bytes().all(|b| b.is_ascii_digit()) {
            t.parse().map_err(|_| FORM.to_string())
        } else {
            Err(FORM.to_string())
        }
    };
    let mut d = date.split('-');
    let (y, m, day) = (
        num(d.next().ok_or(FORM)?, 1..=4)?,
        num(d.next().ok_or(FORM)?, 1..=2)?,
        num(d.next().ok_or(FORM)?, 1..=2)?,
    );
    if d.next().is_some() {
        return Err(FORM.into());
    }
    if y == 0 {
        return Err("has year 0 (years run from 1 to 9999)".into());
    }
    if !(1..=12).contains(&m) {
        return Err(format!("has month {m} (months run from 1 to 12)"));
    }
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1..=month_days).contains(&day) {
        return Err(format!(
            "has day {day}, but {y:04}-{m:02} has {month_days} days"
        ));
    }
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':');
    let (hh, mm, ss) = (
        num(t.next().ok_or(FORM)?, 1..=2)?,
        num(t.next().ok_or(FORM)?, 1..=2)?,
        num(t.next().ok_or(FORM)?, 1..=2)?,
    );
    if t.next().is_some() {
        return Err(FORM.into());
    }
    if hh > 23 || mm > 59 || ss > 60 {
        return Err(format!(
            "has time {hh:02}:{mm:02}:{ss:02} (hours 0-23, minutes 0-59, seconds 0-60)"
        ));
    }
    if time.contains('.') && frac.is_empty() || frac.len() > 9 {
        return Err(format!("{FORM} (the fraction has 1 to 9 digits)"));
    }
    let mut nanos = if frac.is_empty() {
        0
    } else {
        num(frac, 1..=9)?
    };
    for _ in frac.len()..9 {
        nanos *= 10;
    }
    // days from civil (Howard Hinnant's algorithm); i128 holds any year's ns
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = i128::from(era * 146_097 + doe - 719_468);
    let secs = days * 86_400 + i128::from(hh * 3600 + mm * 60 + ss);
    Ok(secs * 1_000_000_000 + i128::from(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
        2023-11-16 18:15:46.6805900,374,44\n\
        2023-11-16 18:15:50.9951690,396,109\n\
        2023-11-16 18:15:51.2224670,879,55\n";

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("1970-01-01 00:00:01.5"), Ok(1_500_000_000));
        assert_eq!(
            parse_timestamp("1970-01-02 00:00:00"),
            Ok(86_400_000_000_000)
        );
        let a = parse_timestamp("2023-11-16 23:59:59.9").unwrap();
        let b = parse_timestamp("2023-11-17 00:00:00.1").unwrap();
        assert_eq!(b - a, 200_000_000);
        assert_eq!(
            parse_timestamp("2000-03-01 00:00:00").unwrap() / 1_000_000_000,
            951_868_800
        );
        assert!(parse_timestamp("2023-13-01 00:00:00").is_err());
        assert!(parse_timestamp("yesterday").is_err());
        assert!(parse_timestamp("2024-02-29 00:00:00").is_ok());
        assert!(parse_timestamp("2100-02-29 00:00:00").is_err());
        assert!(parse_timestamp("2000-02-29 00:00:00").is_ok());
        assert!(parse_timestamp("2023-04-31 00:00:00").is_err());
        assert!(parse_timestamp("+2023-04-01 00:00:00").is_err());
        assert!(parse_timestamp("2023-04-01 00:00:00.").is_err());
        // the whole range of years fits, at both ends
        let first = parse_timestamp("0001-01-01 00:00:00").unwrap();
        let last = parse_timestamp("9999-12-31 23:59:60.999999999").unwrap();
        assert!(last - first > 0);
    }

    #[test]
    fn imports_sample_with_compression_and_token_model() {
        let opts = AzureOptions {
            compress: 10.0,
            free: 50.0,
            ..Default::default()
        };
        let imp = parse_azure_str(SAMPLE, "s.csv", &opts).unwrap();
        let t = &imp.trace.tasks;
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].start_delay, Duration::ZERO);
        assert_eq!(t[1].start_delay.as_micros(), 431_457); // 4.314579 s / 10
        let exec = Duration::from_micros(1000 + 2 * 374 + 20 * 44);
        assert_eq!(t[0].exec(), exec);
        assert_eq!(t[0].blocked, exec / 2);
        assert_eq!(imp.records, 3);
    }

    #[test]
    fn errors_name_file_line_field() {
        let e = |t: &str| {
            parse_azure_str(t, "az.csv", &AzureOptions::default())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,12,x\n"),
            "az.csv:2: field `GeneratedTokens`: `x` is not a token count (a whole number in 0..=18446744073709551615)"
        );
        assert!(e(
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,12,1\nnope,1,1\n"
        )
        .starts_with("az.csv:3: field `TIMESTAMP`: `nope` is not a timestamp"));
        assert!(
            e("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,12\n")
                .starts_with("az.csv:2: field `GeneratedTokens`")
        );
        assert!(e("when,ctx,gen\n").starts_with("az.csv:1: field `TIMESTAMP`: header"));
        assert!(e("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n2023-11-16 18:15:45,1,1\n")
            .starts_with("az.csv:3: field `TIMESTAMP`"));
    }

    #[test]
    fn reads_the_real_trace() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/traces/azure-llm-inference-conv-2023.csv"
        );
        if !Path::new(path).exists() {
            eprintln!("skipping: {path} not present");
            return;
        }
        let imp = read_azure_file(
            path,
            &AzureOptions {
                compress: 3600.0,
                ..Default::default()
            },
        )
        .unwrap();
        // the README says 19,365 requests; the file holds 19,366 records
        assert_eq!(imp.trace.len(), 19_366);
        let s = imp.trace.stats();
        // one hour compressed 3600x ≈ 1 s
        assert!(s.span_s > 0.9 && s.span_s < 1.01, "{s:?}");
        assert!((s.mean_blocked_us / s.mean_exec_us - 0.8).abs() < 1e-3);
    }
}
