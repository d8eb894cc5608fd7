//! `tidepool_stats`: the thesis's statistics (tables 4.1 and 4.2) as a C struct.
//!
//! Table 4.1 stamps each task when it is submitted (`submitted_t`), accepted
//! into the queue (`accepted_t`), started (`exe_t`) and finished
//! (`finished_t`); the three intervals between them are the `submit_blocked`
//! (the thesis's response time: how long `submit` blocked), `wait` (time in the queue: the thesis's idle time)
//! and `service` (execution) distributions. Table 4.2's pool-wide variables
//! are the first five fields.

use std::ffi::c_int;
use std::sync::atomic::Ordering::Relaxed;

use tidepool::{Latency, PoolStats};

use crate::boundary::code;
use crate::error::Error;
use crate::handle::{self, tidepool_pool, Entry};

/// `tidepool_stats_quantile` distribution: submitted → accepted.
pub const TIDEPOOL_LATENCY_SUBMIT_BLOCKED: c_int = 0;
/// `tidepool_stats_quantile` distribution: accepted → started (idle time).
pub const TIDEPOOL_LATENCY_WAIT: c_int = 1;
/// `tidepool_stats_quantile` distribution: started → finished.
pub const TIDEPOOL_LATENCY_SERVICE: c_int = 2;

/// A latency distribution in microseconds. With no sample, every field is 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct tidepool_latency {
    /// Tasks timed.
    pub count: u64,
    /// Exact mean.
    pub mean_us: f64,
    /// Median (quantiles are exact to 2 significant digits).
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest.
    pub max_us: f64,
}

/// A snapshot of a pool's statistics since it started: a plain struct the
/// caller owns, filled by `tidepool_stats_get()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct tidepool_stats {
    /// Table 4.2 `threadNum`: worker threads alive.
    pub thread_num: u64,
    /// Table 4.2 `submittedJob`: tasks accepted into the queue.
    pub submitted_jobs: u64,
    /// Table 4.2 `completedJob`: tasks finished (also those that failed).
    pub completed_jobs: u64,
    /// Table 4.2 `executionTime`: seconds since the pool started.
    pub execution_time_s: f64,
    /// Table 4.2 `throughput`: `completed_jobs / execution_time_s`, per second.
    pub throughput: f64,
    /// Workers running a task.
    pub busy_threads: u64,
    /// Workers waiting for a task.
    pub idle_threads: u64,
    /// The size the pool is steering toward (resize or the policy).
    pub target_threads: u64,
    /// Lower bound on the size.
    pub min_threads: u64,
    /// Upper bound on the size.
    pub max_threads: u64,
    /// Tasks waiting in the queue now.
    pub queue_len: u64,
    /// Submits refused because the queue was full (reject, try, timeout).
    pub rejected_jobs: u64,
    /// Tasks or completion callbacks written in Rust that panicked (the
    /// pool caught it and went on).
    pub panicked_jobs: u64,
    /// Tasks dropped unrun because `tidepool_shutdown_now` or their cancel
    /// token cancelled them.
    pub cancelled_jobs: u64,
    /// Tasks the pool ran at once on the submitting thread, inside the submit
    /// call, instead of queueing them: a task of the pool submitting to its
    /// own full queue (not counted in `submitted_jobs` or the latencies).
    pub inline_jobs: u64,
    /// Worker threads created since the start.
    pub threads_created: u64,
    /// Worker threads retired since the start.
    pub threads_retired: u64,
    /// Time the submitter was blocked in submit, the thesis's response time:
    /// `submitted_t` → `accepted_t` (table 4.1).
    pub submit_blocked: tidepool_latency,
    /// Time in the queue, the thesis's idle time: `accepted_t` → `exe_t`.
    pub wait: tidepool_latency,
    /// Execution time: `exe_t` → `finished_t`.
    pub service: tidepool_latency,
    /// Tasks dropped unrun because they had not started by their deadline
    /// (`tidepool_submit_with`).
    pub expired_jobs: u64,
    /// Threads blocked now in `tidepool_block_in_place()`; the pool may run
    /// this many extra workers, up to its maximum, to make up for them.
    pub blocked_threads: u64,
}

fn us(d: Option<std::time::Duration>) -> f64 {
    d.map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

impl From<&Latency> for tidepool_latency {
    fn from(l: &Latency) -> Self {
        tidepool_latency {
            count: l.count(),
            mean_us: us(l.mean()),
            p50_us: us(l.quantile(0.5)),
            p90_us: us(l.quantile(0.9)),
            p99_us: us(l.quantile(0.99)),
            max_us: us(l.quantile(1.0)),
        }
    }
}

/// The C struct for a snapshot of `entry`.
pub(crate) fn snapshot(entry: &Entry, s: &PoolStats) -> tidepool_stats {
    let c = &entry.tasks;
    tidepool_stats {
        thread_num: s.live_threads as u64,
        submitted_jobs: s.submitted,
        completed_jobs: s.completed,
        execution_time_s: s.elapsed.as_secs_f64(),
        throughput: s.throughput(),
        busy_threads: s.busy_threads as u64,
        idle_threads: s.idle_threads as u64,
        target_threads: s.target_size as u64,
        min_threads: s.min_threads as u64,
        max_threads: s.max_threads as u64,
        queue_len: s.queue_len as u64,
        rejected_jobs: s.rejected,
        panicked_jobs: s.panicked + c.panicked.load(Relaxed),
        cancelled_jobs: c.cancelled.load(Relaxed) + s.cancelled,
        inline_jobs: c.inline.load(Relaxed),
        threads_created: s.threads_created,
        threads_retired: s.threads_retired,
        submit_blocked: (&s.submit_blocked).into(),
        wait: (&s.wait).into(),
        service: (&s.service).into(),
        expired_jobs: s.expired,
        blocked_threads: s.blocked_threads as u64,
    }
}

/// Store the pool's statistics since it started in `*out` (owned by the
/// caller). Works on a shut-down pool until it is destroyed.
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_ARGUMENT` (`out` NULL) or
/// `TIDEPOOL_ERR_INVALID_POOL`. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_stats_get(
    pool: *mut tidepool_pool,
    out: *mut tidepool_stats,
) -> c_int {
    code(|| {
        let entry = handle::lookup(pool)?;
        // SAFETY: per this function's contract.
        let out = unsafe { out.as_mut() }.ok_or_else(|| Error::invalid("out is NULL"))?;
        *out = snapshot(&entry, &entry.pool.stats());
        Ok(())
    })
}

/// Store any quantile `q` (0 to 1) of one latency distribution
/// (`TIDEPOOL_LATENCY_SUBMIT_BLOCKED`, `_WAIT` or `_SERVICE`), in microseconds, in
/// `*out_us` (0 when no task was timed).
/// Returns `TIDEPOOL_OK`, `TIDEPOOL_ERR_INVALID_ARGUMENT` (`q` out of range,
/// unknown distribution, `out_us` NULL) or `TIDEPOOL_ERR_INVALID_POOL`.
/// Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn tidepool_stats_quantile(
    pool: *mut tidepool_pool,
    distribution: c_int,
    q: f64,
    out_us: *mut f64,
) -> c_int {
    code(|| {
        let entry = handle::lookup(pool)?;
        if !(0.0..=1.0).contains(&q) {
            return Err(Error::invalid(format!(
                "quantile {q}: must be between 0 and 1"
            )));
        }
        // SAFETY: per this function's contract.
        let out = unsafe { out_us.as_mut() }.ok_or_else(|| Error::invalid("out_us is NULL"))?;
        let stats = entry.pool.stats();
        let latency = match distribution {
            TIDEPOOL_LATENCY_SUBMIT_BLOCKED => &stats.submit_blocked,
            TIDEPOOL_LATENCY_WAIT => &stats.wait,
            TIDEPOOL_LATENCY_SERVICE => &stats.service,
            other => {
                return Err(Error::invalid(format!(
                    "distribution {other}: must be TIDEPOOL_LATENCY_SUBMIT_BLOCKED (0), _WAIT (1) or _SERVICE (2)"
                )))
            }
        };
        *out = us(latency.quantile(q));
        Ok(())
    })
}
