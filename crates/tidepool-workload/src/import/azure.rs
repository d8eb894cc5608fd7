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

use super::{check_free, check_positive, Imported};
use crate::error::TraceError;
use crate::generate::split_free;
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
        let mul =
            |d: Duration, n: u64| Duration::from_nanos((d.as_nanos() as u64).saturating_mul(n));
        (self.base
            + mul(self.per_context_token, context)
            + mul(self.per_generated_token, generated))
        .min(self.max_service)
    }
}

/// Import the Azure CSV from a reader; `source` names it in errors.
pub fn parse_azure<R: Read>(
    reader: R,
    source: &str,
    opts: &AzureOptions,
) -> Result<Imported, TraceError> {
    check_positive("compress", opts.compress)?;
    check_free(opts.free)?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(reader);
    let headers = rdr.headers().map_err(|e| csv_error(source, e))?.clone();
    for (i, want) in COLUMNS.iter().enumerate() {
        match headers.get(i) {
            Some(h) if h.eq_ignore_ascii_case(want) => {}
            got => {
                return Err(TraceError::parse(
                    source,
                    1,
                    want,
                    format!(
                        "header has `{}` where `{want}` was expected (header must be {})",
                        got.unwrap_or(""),
                        COLUMNS.join(",")
                    ),
                ))
            }
        }
    }
    let mut trace = Trace::new(source);
    let mut t0: Option<i64> = None;
    let mut prev = Duration::ZERO;
    let mut records = 0;
    for rec in rdr.records() {
        if opts.limit.is_some_and(|l| trace.len() >= l) {
            break;
        }
        let rec = rec.map_err(|e| csv_error(source, e))?;
        let line = rec.position().map(|p| p.line() as usize).unwrap_or(0);
        if rec.len() == 1 && rec.get(0) == Some("") {
            continue; // blank line
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
        records += 1;
        let ts = parse_timestamp(&rec[0]).ok_or_else(|| {
            TraceError::parse(
                source,
                line,
                COLUMNS[0],
                format!(
                    "`{}` is not a timestamp like 2023-11-16 18:15:46.6805900",
                    &rec[0]
                ),
            )
        })?;
        let tokens = |i: usize| -> Result<u64, TraceError> {
            rec[i].parse::<u64>().map_err(|_| {
                TraceError::parse(
                    source,
                    line,
                    COLUMNS[i],
                    format!("`{}` is not a non-negative token count", &rec[i]),
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
        let at = Duration::from_secs_f64((ts - base) as f64 / 1e9 / opts.compress);
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
    Ok(Imported {
        trace,
        skipped_unknown: 0,
        records,
    })
}

fn csv_error(source: &str, e: csv::Error) -> TraceError {
    let line = e.position().map(|p| p.line() as usize).unwrap_or(0);
    match e.into_kind() {
        csv::ErrorKind::Io(io) => TraceError::io(source, io),
        other => TraceError::parse(source, line, "record", format!("{other:?}")),
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

/// Import an Azure CSV file.
pub fn read_azure_file(
    path: impl AsRef<Path>,
    opts: &AzureOptions,
) -> Result<Imported, TraceError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
    parse_azure(file, &name, opts)
}

/// Nanoseconds since 1970-01-01 of `YYYY-MM-DD HH:MM:SS[.fraction]` (UTC,
/// fraction up to 9 digits; a `T` may separate date and time).
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = s.split_once([' ', 'T'])?;
    let mut d = date.split('-');
    let (y, m, day): (i64, i64, i64) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':');
    let (hh, mm, ss): (i64, i64, i64) = (
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
    );
    if t.next().is_some() || hh > 23 || mm > 59 || ss > 60 || hh < 0 || mm < 0 || ss < 0 {
        return None;
    }
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut nanos: i64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..9 {
        nanos *= 10;
    }
    // days from civil (Howard Hinnant's algorithm)
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1_000_000_000) + nanos)
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
        assert_eq!(
            parse_timestamp("1970-01-01 00:00:01.5"),
            Some(1_500_000_000)
        );
        assert_eq!(
            parse_timestamp("1970-01-02 00:00:00"),
            Some(86_400_000_000_000)
        );
        let a = parse_timestamp("2023-11-16 23:59:59.9").unwrap();
        let b = parse_timestamp("2023-11-17 00:00:00.1").unwrap();
        assert_eq!(b - a, 200_000_000);
        assert_eq!(
            parse_timestamp("2000-03-01 00:00:00").unwrap() / 1_000_000_000,
            951_868_800
        );
        assert!(parse_timestamp("2023-13-01 00:00:00").is_none());
        assert!(parse_timestamp("yesterday").is_none());
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
            "az.csv:2: field `GeneratedTokens`: `x` is not a non-negative token count"
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
