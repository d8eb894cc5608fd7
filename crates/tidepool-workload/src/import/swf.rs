//! Standard Workload Format (Parallel Workloads Archive, Feitelson et al.).
//!
//! 18 whitespace-separated numeric fields per job, `;` header/comment lines,
//! `-1` for unknown. tidepool uses field 1 (job number → request id), field 2
//! (submit time, s → arrival), field 4 (run time, s → service time) and field
//! 12 (user id → application id; `-1` becomes 0). Jobs whose submit or run
//! time is `-1` are counted in [`Imported::skipped_unknown`], not imported.
//! Any other malformed line is an error naming file, line and field.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{check_free, check_positive, Imported};
use crate::error::TraceError;
use crate::generate::split_free;
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

/// Import an SWF log from a reader; `source` names it in errors.
pub fn parse_swf<R: Read>(
    reader: R,
    source: &str,
    opts: &SwfOptions,
) -> Result<Imported, TraceError> {
    check_positive("compress", opts.compress)?;
    check_positive("service_scale", opts.service_scale)?;
    check_free(opts.free)?;
    let mut jobs: Vec<(f64, u64, u64, Duration)> = Vec::new(); // submit, id, app, service
    let mut skipped = 0;
    let mut records = 0;
    for (idx, line) in BufReader::new(reader).lines().enumerate() {
        let lineno = idx + 1;
        let line = line.map_err(|e| TraceError::io(source, e))?;
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
                    fields[18]
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
                    TraceError::parse(source, lineno, FIELDS[i], format!("`{f}` is not a number"))
                })?;
        }
        records += 1;
        let (job, submit, run, user) = (values[0], values[1], values[3], values[11]);
        if job < 0.0 || job.fract() != 0.0 {
            return Err(TraceError::parse(
                source,
                lineno,
                FIELDS[0],
                format!("`{}` is not a job number", fields[0]),
            ));
        }
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
                    format!("`{}` is negative (only -1, unknown, may be)", fields[i]),
                ));
            }
        }
        let service = Duration::from_secs_f64(run * opts.service_scale).min(opts.max_service);
        let app = if user >= 0.0 { user as u64 } else { 0 };
        jobs.push((submit, job as u64, app, service));
    }
    // SWF logs are sorted by submit time; keep the order stable if one is not.
    jobs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut trace = Trace::new(source);
    let t0 = jobs.first().map(|j| j.0).unwrap_or(0.0);
    let mut prev = Duration::ZERO;
    for (submit, id, app, service) in jobs {
        let at = Duration::from_secs_f64((submit - t0) / opts.compress);
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

/// Import an SWF log held in a string.
pub fn parse_swf_str(text: &str, source: &str, opts: &SwfOptions) -> Result<Imported, TraceError> {
    parse_swf(text.as_bytes(), source, opts)
}

/// Import an SWF file.
pub fn read_swf_file(path: impl AsRef<Path>, opts: &SwfOptions) -> Result<Imported, TraceError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
    parse_swf(file, &name, opts)
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
