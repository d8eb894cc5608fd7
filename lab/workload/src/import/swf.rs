//! Standard Workload Format (Parallel Workloads Archive, Feitelson et al.).
//!
//! 18 whitespace-separated numeric fields per job, `;` header/comment lines,
//! `-1` for unknown. tidepool uses field 1 (job number → request id), field 2
//! (submit time, s → arrival), field 4 (run time, s → service time) and field
//! 12 (user id → application id; `-1` becomes 0). Jobs whose submit or run
//! time is `-1` are counted in [`Imported::skipped_unknown`], not imported.
//! Any other malformed line is an error naming file, line and field.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{check_free, check_range, Imported, COMPRESS_RANGE, SCALE_RANGE};
use crate::error::TraceError;
use crate::generate::split_free;
use crate::limits::{secs_saturating, secs_to_duration, shown, shown_f64, Limits};
use crate::lines::Lines;
use crate::trace::{TaskSpec, Trace};

/// SWF field names, in order (1-based field k is `FIELDS[k - 1]`).
pub const FIELDS: [&str; 18] = [
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable_number",
    "queue_number",
    "partition_number",
    "preceding_job",
    "think_time",
];

/// How to turn an SWF log into a thread-pool trace.
///
/// ```
/// use tidepool_workload::import::swf::{parse_swf_str, SwfOptions};
/// let log = "; Version: 2.2\n1 0 -1 100 8 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n\
///            2 10 -1 50 8 -1 -1 -1 -1 -1 1 2 1 -1 -1 -1 -1 -1\n";
/// let opts = SwfOptions { compress: 1000.0, service_scale: 1e-5, ..SwfOptions::default() };
/// let imp = parse_swf_str(log, "mini.swf", &opts).unwrap();
/// // 10 s of trace in 10 ms; 100 s of run time → 1 ms of service
/// assert_eq!(imp.trace.tasks[1].start_delay.as_micros(), 10_000);
/// assert_eq!(imp.trace.tasks[0].exec().as_micros(), 1_000);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwfOptions {
    /// Trace seconds per replay second (arrival-time compression), > 0.
    pub compress: f64,
    /// Service time = run time × `service_scale` (both in seconds), > 0.
    pub service_scale: f64,
    /// Upper bound on a task's service time (long jobs are clamped).
    pub max_service: Duration,
    /// Percent (0–100) of each task's service time spent blocked.
    pub free: f64,
    /// Import at most this many jobs (after skipping unknowns).
    pub limit: Option<usize>,
}

impl Default for SwfOptions {
    /// 1 hour of trace per second of replay; 1 s of run time → 10 µs of
    /// service, at most 50 ms; all compute.
    fn default() -> Self {
        SwfOptions {
            compress: 3600.0,
            service_scale: 1e-5,
            max_service: Duration::from_millis(50),
            free: 0.0,
            limit: None,
        }
    }
}

/// The largest SWF submit or run time accepted, in seconds (about 317
/// years; SWF times are seconds since the start of the log).
pub const MAX_SECONDS: f64 = 1e10;

/// Import an SWF log from a reader with the default [`Limits`]; `source`
/// names it in errors.
pub fn parse_swf<R: Read>(
    reader: R,
    source: &str,
    opts: &SwfOptions,
) -> Result<Imported, TraceError> {
    parse_swf_with(reader, source, opts, &Limits::default())
}

/// Import an SWF log from a reader within `limits`.
pub fn parse_swf_with<R: Read>(
    reader: R,
    source: &str,
    opts: &SwfOptions,
    limits: &Limits,
) -> Result<Imported, TraceError> {
    check_range("compress", opts.compress, COMPRESS_RANGE)?;
    check_range("service_scale", opts.service_scale, SCALE_RANGE)?;
    check_free(opts.free)?;
    let mut jobs: Vec<(f64, u64, u64, Duration)> = Vec::new(); // submit, id, app, service
    let mut seen: HashMap<u64, usize> = HashMap::new();
    let mut skipped = 0;
    let mut records = 0;
    let mut lines = Lines::new(reader, source, limits.max_line_bytes);
    while let Some((lineno, line)) = lines.next_line()? {
        let content = line.trim();
        if content.is_empty() || content.starts_with(';') {
            continue;
        }
        if opts.limit.is_some_and(|l| jobs.len() >= l) {
            break;
        }
        let fields: Vec<&str> = content.split_whitespace().collect();
        if fields.len() < FIELDS.len() {
            return Err(TraceError::parse(
                source,
                lineno,
                FIELDS[fields.len()],
                format!("missing (line has {} of 18 fields)", fields.len()),
            ));
        }
        if fields.len() > FIELDS.len() {
            return Err(TraceError::parse(
                source,
                lineno,
                "#19",
                format!(
                    "unexpected extra field `{}` (SWF has 18 fields)",
                    shown(fields[18])
                ),
            ));
        }
        let mut values = [0f64; 18];
        for (i, f) in fields.iter().enumerate() {
            values[i] = f
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| {
                    TraceError::parse(
                        source,
                        lineno,
                        FIELDS[i],
                        format!("`{}` is not a number", shown(f)),
                    )
                })?;
        }
        records += 1;
        let (submit, run, user) = (values[1], values[3], values[11]);
        let whole = |i: usize| -> Result<u64, TraceError> {
            let v = values[i];
            if v >= 0.0 && v.fract() == 0.0 && v <= MAX_EXACT {
                Ok(v as u64)
            } else {
                Err(TraceError::parse(
                    source,
                    lineno,
                    FIELDS[i],
                    format!(
                        "`{}` is not a whole number in 0..={MAX_EXACT}",
                        shown(fields[i])
                    ),
                ))
            }
        };
        let job = whole(0)?;
        // -1 (unknown) and other negative user ids become application 0.
        let app = if user < 0.0 { 0 } else { whole(11)? };
        if submit == -1.0 || run == -1.0 {
            skipped += 1;
            continue;
        }
        for (i, v) in [(1, submit), (3, run)] {
            if v < 0.0 {
                return Err(TraceError::parse(
                    source,
                    lineno,
                    FIELDS[i],
                    format!(
                        "`{}` is negative (only -1, unknown, may be)",
                        shown(fields[i])
                    ),
                ));
            }
            if v > MAX_SECONDS {
                return Err(TraceError::parse(
                    source,
                    lineno,
                    FIELDS[i],
                    format!(
                        "`{}` is out of range (seconds, 0 to {MAX_SECONDS:e}, or -1 for unknown)",
                        shown(fields[i])
                    ),
                ));
            }
        }
        if let Some(prev) = seen.insert(job, lineno) {
            return Err(TraceError::parse(
                source,
                lineno,
                FIELDS[0],
                format!("job number {job} already used on line {prev}"),
            ));
        }
        if jobs.len() >= limits.max_tasks {
            return Err(TraceError::too_many_tasks(source, lineno, limits.max_tasks));
        }
        let service = secs_saturating(run * opts.service_scale).min(opts.max_service);
        jobs.push((submit, job, app, service));
    }
    // SWF logs are sorted by submit time; keep the order stable if one is not.
    jobs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut trace = Trace::new(source);
    let t0 = jobs.first().map(|j| j.0).unwrap_or(0.0);
    let mut prev = Duration::ZERO;
    for (submit, id, app, service) in jobs {
        let at = secs_to_duration((submit - t0) / opts.compress).ok_or_else(|| {
            TraceError::option(
                "compress",
                format!(
                    "{} puts job {id} ({submit} s after the first) beyond 2^64 - 1 ns, about 584 years",
                    shown_f64(opts.compress)
                ),
            )
        })?;
        let (cpu, blocked) = split_free(service, opts.free);
        trace.push(TaskSpec {
            request_id: id,
            app_id: app,
            start_delay: at.saturating_sub(prev),
            cpu,
            blocked,
        });
        prev = prev.max(at);
    }
    Ok(Imported {
        trace,
        skipped_unknown: skipped,
        records,
    })
}

/// Whole numbers up to 2^53 are exact in an `f64`, which SWF fields are read as.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// Import an SWF log held in a string.
pub fn parse_swf_str(text: &str, source: &str, opts: &SwfOptions) -> Result<Imported, TraceError> {
    parse_swf(text.as_bytes(), source, opts)
}

/// Import an SWF file with the default [`Limits`].
pub fn read_swf_file(path: impl AsRef<Path>, opts: &SwfOptions) -> Result<Imported, TraceError> {
    read_swf_file_with(path, opts, &Limits::default())
}

/// Import an SWF file within `limits`.
pub fn read_swf_file_with(
    path: impl AsRef<Path>,
    opts: &SwfOptions,
    limits: &Limits,
) -> Result<Imported, TraceError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
    parse_swf_with(file, &name, opts, limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "-1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1";

    fn job(id: u64, submit: i64, run: i64) -> String {
        format!("{id} {submit} -1 {run} {LINE}\n")
    }

    #[test]
    fn imports_and_skips_unknown() {
        let text = format!(
            "; header\n;\n{}{}{}",
            job(1, 0, 100),
            job(2, 5, -1),
            job(3, 20, 40)
        );
        let opts = SwfOptions {
            compress: 10.0,
            service_scale: 1e-4,
            ..Default::default()
        };
        let imp = parse_swf_str(&text, "x.swf", &opts).unwrap();
        assert_eq!(imp.records, 3);
        assert_eq!(imp.skipped_unknown, 1);
        let t = &imp.trace.tasks;
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].request_id, 1);
        assert_eq!(t[1].start_delay, Duration::from_secs(2));
        assert_eq!(t[0].exec(), Duration::from_millis(10));
        assert_eq!(t[1].exec(), Duration::from_millis(4));
        assert_eq!(t[0].app_id, 0);
    }

    #[test]
    fn clamps_free_and_limit() {
        let text = format!("{}{}{}", job(1, 0, 1_000_000), job(2, 1, 10), job(3, 2, 10));
        let opts = SwfOptions {
            free: 50.0,
            limit: Some(2),
            ..Default::default()
        };
        let imp = parse_swf_str(&text, "x.swf", &opts).unwrap();
        assert_eq!(imp.trace.len(), 2);
        assert_eq!(imp.trace.tasks[0].exec(), Duration::from_millis(50));
        assert_eq!(imp.trace.tasks[0].blocked, Duration::from_millis(25));
    }

    #[test]
    fn errors_name_file_line_field() {
        let e = |t: &str| {
            parse_swf_str(t, "bad.swf", &SwfOptions::default())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e("; h\n1 0 -1 10\n"),
            "bad.swf:2: field `allocated_processors`: missing (line has 4 of 18 fields)"
        );
        assert_eq!(
            e(&format!("1 zero -1 10 {LINE}\n")),
            "bad.swf:1: field `submit_time`: `zero` is not a number"
        );
        assert!(e(&format!("1 0 -1 -5 {LINE}\n"))
            .starts_with("bad.swf:1: field `run_time`: `-5` is negative"));
        assert!(e(&format!("1 0 -1 5 {LINE} 7\n")).starts_with("bad.swf:1: field `#19`"));
        let opts = SwfOptions {
            compress: 0.0,
            ..Default::default()
        };
        assert!(parse_swf_str("", "x", &opts)
            .unwrap_err()
            .to_string()
            .contains("compress"));
    }

    #[test]
    fn reads_the_nasa_trace() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/traces/nasa-ipsc-1993-first2000.swf"
        );
        if !Path::new(path).exists() {
            eprintln!("skipping: {path} not present");
            return;
        }
        let imp = read_swf_file(path, &SwfOptions::default()).unwrap();
        assert_eq!(imp.records, 2000);
        assert_eq!(imp.trace.len() + imp.skipped_unknown, 2000);
        assert!(imp.trace.len() > 1900);
        let s = imp.trace.stats();
        assert!(s.span_s > 0.0 && s.mean_exec_us > 0.0, "{s:?}");
        assert_eq!(imp.trace.tasks[0].request_id, 1);
        assert_eq!(
            imp.trace.tasks[1].start_delay,
            Duration::from_secs_f64(1460.0 / 3600.0)
        );
    }
}
