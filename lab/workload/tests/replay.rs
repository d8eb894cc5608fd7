//! Replay driver tests with deterministic fake executors and ThreadPerRequest.
//! No test asserts a tight wall-clock bound.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tidepool::SubmitError;
use tidepool_workload::format::parse_trace_str;
use tidepool_workload::{
    replay, replay_with, Executor, ExecutorCounts, Job, Progress, ReplayHooks, ReplayOptions,
    RunResult, ThreadPerRequest,
};

/// Runs every job on the submitting thread, before `execute_job` returns.
#[derive(Default)]
struct Inline {
    ran: AtomicU64,
}

impl Executor for Inline {
    fn name(&self) -> String {
        "inline".into()
    }
    fn execute_job(&self, job: Job) -> Result<(), SubmitError> {
        job();
        self.ran.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn counts(&self) -> ExecutorCounts {
        ExecutorCounts::new(1, 0, 0)
    }
    fn wait_idle(&self) {}
}

/// Rejects every second job; runs the others inline.
#[derive(Default)]
struct RejectOdd {
    n: AtomicU64,
}

impl Executor for RejectOdd {
    fn name(&self) -> String {
        "reject-odd".into()
    }
    fn execute_job(&self, job: Job) -> Result<(), SubmitError> {
        if self.n.fetch_add(1, Ordering::Relaxed) % 2 == 1 {
            return Err(SubmitError::Full);
        }
        job();
        Ok(())
    }
    fn counts(&self) -> ExecutorCounts {
        ExecutorCounts::default()
    }
    fn wait_idle(&self) {}
}

/// Accepts jobs and never runs them.
#[derive(Default)]
struct Hoard {
    jobs: Mutex<Vec<Job>>,
}

impl Executor for Hoard {
    fn name(&self) -> String {
        "hoard".into()
    }
    fn execute_job(&self, job: Job) -> Result<(), SubmitError> {
        self.jobs.lock().unwrap().push(job);
        Ok(())
    }
    fn counts(&self) -> ExecutorCounts {
        ExecutorCounts::new(0, 0, self.jobs.lock().unwrap().len())
    }
    fn wait_idle(&self) {}
}

const TINY: &str = "# the thesis's figure 5.3, in µs\n\
                    1 1 0 200\n2 2 0 150\n3 1 300 100 40 60\n4 2 0 100\n5 1 1000 50\n";

fn tiny() -> tidepool_workload::Trace {
    parse_trace_str(TINY, "tiny").unwrap()
}

fn opts() -> ReplayOptions {
    ReplayOptions {
        keep_records: true,
        ..ReplayOptions::default()
    }
}

#[test]
fn inline_executor_gives_consistent_records() {
    let ex = Inline::default();
    let r = replay(&tiny(), &ex, &opts());
    assert_eq!(r.executor, "inline");
    assert_eq!(r.workload, "tiny");
    assert_eq!(
        (r.tasks, r.submitted, r.accepted, r.rejected, r.completed),
        (5, 5, 5, 0, 5)
    );
    assert!(!r.cancelled);
    assert_eq!(r.threads_created, 0);
    assert_eq!(r.records.len(), 5);
    let mut prev_sched = 0;
    for rec in &r.records {
        let (s, f) = (rec.started_ns.unwrap(), rec.finished_ns.unwrap());
        assert!(rec.submitted_ns >= rec.scheduled_ns);
        assert!(rec.scheduled_ns >= prev_sched);
        prev_sched = rec.scheduled_ns;
        assert!(rec.submitted_ns <= s && s <= f);
        // inline: the job ran inside execute_job, so it never waited in a queue
        assert_eq!(rec.wait_ns(), Some(0));
        assert_eq!(
            rec.submit_blocked_ns().unwrap()
                + rec.wait_ns().unwrap()
                + rec.processing_ns().unwrap(),
            rec.turnaround_ns().unwrap()
        );
    }
    // arrivals are paced: task 3 is scheduled 300 µs in, task 5 at 1300 µs
    assert_eq!(r.records[2].scheduled_ns, 300_000);
    assert_eq!(r.records[4].scheduled_ns, 1_300_000);
    assert!(r.records[4].submitted_ns >= 1_300_000);
    // processing is at least the blocked part of task 3
    assert!(r.records[2].processing_ns().unwrap() >= 60_000);
    assert_eq!(r.mean_wait_us, 0.0);
    assert_eq!(r.wait.count, 5);
    assert!(r.throughput > 0.0);
    assert_eq!(r.lateness.count, 5);
}

#[test]
fn rejected_jobs_are_counted_exactly() {
    let trace = "periodic:rate=20000,n=10,service=const:10us"
        .parse::<tidepool_workload::GenSpec>()
        .unwrap()
        .generate();
    let r = replay(&trace, &RejectOdd::default(), &opts());
    assert_eq!(
        (r.submitted, r.accepted, r.rejected, r.completed),
        (10, 5, 5, 5)
    );
    assert_eq!(r.submit_blocked.count, 5);
    assert!(r
        .records
        .iter()
        .skip(1)
        .step_by(2)
        .all(|x| x.accepted_ns.is_none()));
}

#[test]
fn cancel_flag_stops_early_and_returns_measurements() {
    let trace = "periodic:rate=10000,n=1000,service=const:10us"
        .parse::<tidepool_workload::GenSpec>()
        .unwrap()
        .generate();
    let cancel = Arc::new(AtomicBool::new(false));
    let o = ReplayOptions {
        cancel: Some(cancel.clone()),
        progress_interval: Duration::ZERO,
        ..opts()
    };
    let mut calls = 0;
    let mut on_progress = |p: &Progress| {
        calls += 1;
        assert_eq!(p.total, 1000);
        if p.submitted >= 7 {
            cancel.store(true, Ordering::Relaxed);
        }
    };
    let ex = Hoard::default();
    let r = replay_with(
        &trace,
        &ex,
        &o,
        ReplayHooks {
            progress: Some(&mut on_progress),
            target_size: None,
        },
    );
    assert!(r.cancelled);
    assert_eq!(r.submitted, 7);
    assert_eq!(r.accepted, 7);
    assert_eq!(r.completed, 0);
    assert!(calls >= 7);
    assert_eq!(ex.jobs.lock().unwrap().len(), 7);
}

#[test]
fn drain_timeout_gives_up_on_stragglers() {
    let o = ReplayOptions {
        drain_timeout: Some(Duration::from_millis(5)),
        ..opts()
    };
    let r = replay(&tiny(), &Hoard::default(), &o);
    assert!(r.cancelled);
    assert_eq!((r.submitted, r.accepted, r.completed), (5, 5, 0));
    assert_eq!(r.wait.count, 0);
    assert!(r.max_queue <= 5);
}

#[test]
fn thread_per_request_replays_a_tiny_trace() {
    let tpr = ThreadPerRequest::new();
    let target = || 42usize;
    let r = replay_with(
        &tiny(),
        &tpr,
        &opts(),
        ReplayHooks {
            progress: None,
            target_size: Some(&target),
        },
    );
    assert_eq!(r.executor, "tpr");
    assert_eq!(r.completed, 5);
    assert_eq!(r.threads_created, 5);
    assert!(!r.size_series.is_empty());
    assert!(r.size_series.iter().all(|p| p.target == Some(42)));
    assert!(r.max_threads <= 5);
    assert!(r.process_cpu_time_s >= 0.0 && r.cores >= 1);
    for rec in &r.records {
        assert!(rec.processing_ns().unwrap() > 0);
    }
}

#[test]
fn result_serialises_with_stable_field_names() {
    let r = replay(&tiny(), &Inline::default(), &ReplayOptions::default());
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    for key in [
        "executor",
        "workload",
        "throughput",
        "mean_wait_us",
        "p99_wait_us",
        "p99_response_us",
        "threads_created",
        "avg_threads",
        "size_series",
        "wait",
        "turnaround",
        "lateness",
        "cpu_utilisation",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert!(
        v.get("records").is_none(),
        "records are skipped when not kept"
    );
    assert!(v["wait"].get("p99_us").is_some());
    let back: RunResult = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
}

#[test]
fn fixed_pool_replays_and_creates_its_threads_once() {
    let pool = tidepool::Pool::new(3).unwrap();
    let trace = "poisson:rate=5000,n=200,service=exp:100us,free=50,seed=5"
        .parse::<tidepool_workload::GenSpec>()
        .unwrap()
        .generate();
    let r = tidepool_workload::replay_pool(&trace, &pool, &opts(), None);
    assert_eq!(r.completed, 200);
    assert_eq!(r.rejected, 0);
    // a fixed pool of 3 starts its threads before the replay: none created during it
    assert!(r.threads_created <= 3, "{}", r.threads_created);
    assert!(r.max_threads <= 3);
    assert!(r.size_series.iter().all(|p| p.target == Some(3)));
    assert!(r.records.iter().all(|x| x.wait_ns().is_some()));
}

#[test]
fn load_workload_reads_files_by_extension() {
    let dir = std::env::temp_dir().join(format!("tp-wl-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = dir.join("x.trace");
    std::fs::write(&t, TINY).unwrap();
    assert_eq!(
        tidepool_workload::load_workload(t.to_str().unwrap(), 1.0)
            .unwrap()
            .len(),
        5
    );
    let bad = dir.join("bad.trace");
    std::fs::write(&bad, "1 1 0 x\n").unwrap();
    let e = tidepool_workload::load_workload(bad.to_str().unwrap(), 1.0).unwrap_err();
    assert!(
        e.to_string().contains("bad.trace:1: field `exec_us`"),
        "{e}"
    );
    let swf = dir.join("x.swf");
    std::fs::write(
        &swf,
        "; h\n1 0 -1 10 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1\n",
    )
    .unwrap();
    assert_eq!(
        tidepool_workload::load_workload(swf.to_str().unwrap(), 1.0)
            .unwrap()
            .len(),
        1
    );
    std::fs::remove_dir_all(&dir).ok();
    assert!(tidepool_workload::load_workload("poisson:rate=0", 1.0).is_err());
}

/// A panic inside the replay (here: in the progress hook) propagates; the
/// sampler thread still stops, so the thread scope ends instead of hanging.
#[test]
fn a_panic_in_the_replay_does_not_hang_it() {
    let trace = parse_trace_str("1 1 0 10\n2 1 1000 10\n3 1 1000 10\n", "t").unwrap();
    let pool = tidepool::Pool::new(1).unwrap();
    let opts = ReplayOptions {
        progress_interval: Duration::ZERO,
        ..ReplayOptions::default()
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut boom = |_: &Progress| panic!("hook failed");
        tidepool_workload::replay_pool(&trace, &pool, &opts, Some(&mut boom))
    }));
    assert!(r.is_err(), "the panic propagates");
}

/// However long a replay runs, its thread-count samples stay bounded: past
/// `max_samples` every other one is dropped and the interval doubles.
#[test]
fn thread_samples_stay_bounded() {
    let trace = parse_trace_str("1 1 0 10\n2 1 300000 10\n", "t").unwrap();
    let opts = ReplayOptions {
        max_samples: 8,
        ..ReplayOptions::default()
    };
    let r = replay(&trace, &ThreadPerRequest::new(), &opts);
    assert_eq!(r.completed, 2);
    // 300 ms at 1 ms is about 300 samples: at most 8 kept, so the interval grew
    assert!(r.sample_interval_ms >= 2.0, "{}", r.sample_interval_ms);
    assert!(r.size_series.len() <= 8, "{}", r.size_series.len());
}

/// A closed loop: every client's next task is submitted only after its
/// previous one finished, a think time later, so at most `clients` tasks are
/// ever in flight, whatever the executor.
#[test]
fn closed_loop_waits_for_each_answer_then_thinks() {
    let trace = "closed:clients=3,think=const:1ms,n=30,service=const:2ms,free=100,seed=1"
        .parse::<tidepool_workload::GenSpec>()
        .unwrap()
        .generate();
    let o = ReplayOptions {
        keep_records: true,
        ..opts()
    };
    let r = replay(&trace, &ThreadPerRequest::new(), &o);
    assert_eq!(r.completed, 30);
    let mut by_task = vec![None; 30];
    for rec in &r.records {
        by_task[(rec.request_id - 1) as usize] = Some(*rec);
    }
    let by_task: Vec<_> = by_task.into_iter().map(Option::unwrap).collect();
    for j in 3..30 {
        let before = by_task[j - 3].finished_ns.unwrap();
        let rec = by_task[j];
        assert!(
            rec.scheduled_ns >= before + 1_000_000,
            "task {j} scheduled {} before its client's previous answer {before} + think",
            rec.scheduled_ns
        );
        assert!(rec.submitted_ns >= rec.scheduled_ns);
    }
    // never more than 3 in flight: each submission comes after all but two
    // of the earlier tasks finished
    for (k, rec) in r.records.iter().enumerate() {
        let finished_before = r.records[..k]
            .iter()
            .filter(|p| p.finished_ns.is_some_and(|f| f <= rec.submitted_ns))
            .count();
        assert!(k - finished_before < 3, "{k}: {finished_before}");
    }
}

/// A rejected task in a closed loop still lets its client go on.
#[test]
fn closed_loop_survives_rejections() {
    let trace = "closed:clients=2,think=const:100us,n=10,service=const:100us,seed=1"
        .parse::<tidepool_workload::GenSpec>()
        .unwrap()
        .generate();
    let r = replay(&trace, &RejectOdd::default(), &opts());
    assert_eq!(r.submitted, 10);
    assert_eq!(r.rejected + r.completed, 10);
}
