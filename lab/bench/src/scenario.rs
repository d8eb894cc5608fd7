//! The measured scenarios.
//!
//! Every task reports to the global [`LATCH`]; a scenario arms it, submits,
//! and parks until the last task finished. Throughput is
//! `tasks / (last completion - first submit)`; with several submitters the
//! first submit is the earliest submitter's start (taken by the submitters
//! themselves, so a main thread that is descheduled on a loaded machine
//! cannot start the clock late).

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Duration;

use crate::harness::rotated;
use crate::subject::{now_ns, task_done, Subject, LATCH};
use tidepool::sys::process_cpu_time;
use tidepool_workload::metrics::LatencyAccumulator;
use tidepool_workload::BusyLoop;

/// A scenario of the `dispatch` benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// Throughput of empty tasks from one submitting thread.
    Empty1,
    /// Throughput of empty tasks from two submitting threads.
    Empty2,
    /// Throughput of empty tasks from four submitting threads (more
    /// submitters than cores, as on a server).
    Empty4,
    /// Throughput of empty tasks from eight submitting threads.
    Empty8,
    /// Throughput of ~1 µs (calibrated spin) tasks from one submitter.
    Work1us,
    /// Bursts of empty tasks separated by idle gaps long enough for the
    /// workers to park: throughput while bursts run, so waking the pool counts.
    BurstIdle,
    /// Submit-to-start latency of a lone task into an idle pool.
    LatencyIdle,
}

impl Scenario {
    /// Every scenario, in report order.
    pub const ALL: [Scenario; 7] = [
        Scenario::Empty1,
        Scenario::Empty2,
        Scenario::Empty4,
        Scenario::Empty8,
        Scenario::Work1us,
        Scenario::BurstIdle,
        Scenario::LatencyIdle,
    ];

    /// The scenario's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Empty1 => "empty-1-submitter",
            Scenario::Empty2 => "empty-2-submitters",
            Scenario::Empty4 => "empty-4-submitters",
            Scenario::Empty8 => "empty-8-submitters",
            Scenario::Work1us => "work-1us",
            Scenario::BurstIdle => "burst-idle",
            Scenario::LatencyIdle => "latency-idle",
        }
    }

    /// Whether the scenario measures latency (p50/p99) rather than only
    /// throughput.
    pub fn measures_latency(self) -> bool {
        matches!(self, Scenario::LatencyIdle)
    }

    /// Whether the scenario samples an idle pool (lone tasks or bursts
    /// after a pause): those run every implementation at once, interleaved
    /// in short blocks of samples ([`run_interleaved`]).
    pub fn is_idle(self) -> bool {
        matches!(self, Scenario::LatencyIdle | Scenario::BurstIdle)
    }
}

/// Sizes of the scenarios.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Tasks per empty-task throughput run.
    pub tasks: usize,
    /// Tasks per `work-1us` run.
    pub work_tasks: usize,
    /// Lone tasks per `latency-idle` run.
    pub samples: usize,
    /// Pause between two latency samples (and between two bursts), so the
    /// pool goes idle.
    pub idle_gap: Duration,
    /// Bursts per `burst-idle` run.
    pub bursts: usize,
    /// Empty tasks per burst.
    pub burst_tasks: usize,
    /// Throughput tasks capture nothing (a zero-sized closure, which no pool
    /// needs to allocate for) instead of an 8-byte payload.
    pub zero_sized: bool,
    /// Back-to-back runs per throughput measurement; the best one counts
    /// (interference from other processes only ever slows a run down).
    pub inner: usize,
}

/// The outcome of one run of one scenario on one implementation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Tasks per second. For `latency-idle`: lone-task round trips per
    /// second (submit until the waiter is woken), pauses excluded.
    pub tasks_per_sec: f64,
    /// Median submit-to-start latency (latency scenarios only).
    pub p50_ns: Option<u64>,
    /// 99th percentile submit-to-start latency (latency scenarios only).
    pub p99_ns: Option<u64>,
    /// Process CPU time (all threads) per task during the run, in ns
    /// (throughput scenarios only; a noise-robust view of per-task cost).
    pub cpu_ns_per_task: Option<f64>,
}

/// Measure `scenario` once on `s`: for throughput scenarios and
/// `burst-idle` the best of `p.inner` back-to-back runs, for latency one run
/// of `p.samples` samples.
pub fn run<S: Subject>(scenario: Scenario, s: &S, p: &Params) -> Sample {
    if scenario.measures_latency() {
        return run_once(scenario, s, p);
    }
    best_of(
        (0..p.inner.max(1))
            .map(|_| run_once(scenario, s, p))
            .collect(),
    )
}

/// The run with the highest throughput, with the lowest CPU per task of all
/// runs (interference from other processes only ever slows a run down).
pub fn best_of(runs: Vec<Sample>) -> Sample {
    let cpu = runs
        .iter()
        .filter_map(|r| r.cpu_ns_per_task)
        .min_by(f64::total_cmp);
    let best = runs
        .into_iter()
        .max_by(|a, b| a.tasks_per_sec.total_cmp(&b.tasks_per_sec))
        .expect("at least one run");
    Sample {
        cpu_ns_per_task: cpu,
        ..best
    }
}

/// Measure an idle scenario on every one of `subjects` at once, as
/// [`run`] does for one: [`run_interleaved`], `p.inner` times over for
/// `burst-idle` (the best run of each subject counts), once for
/// `latency-idle`. One [`Sample`] per subject, in order.
pub fn run_idle(
    scenario: Scenario,
    subjects: &[&dyn Idle],
    p: &Params,
    rotate: usize,
) -> Vec<Sample> {
    let passes = if scenario.measures_latency() {
        1
    } else {
        p.inner.max(1)
    };
    let mut runs: Vec<Vec<Sample>> = vec![Vec::new(); subjects.len()];
    for pass in 0..passes {
        for (j, sample) in run_interleaved(scenario, subjects, p, rotate + pass)
            .into_iter()
            .enumerate()
        {
            runs[j].push(sample);
        }
    }
    runs.into_iter().map(best_of).collect()
}

/// Run `scenario` exactly once on `s`.
pub fn run_once<S: Subject>(scenario: Scenario, s: &S, p: &Params) -> Sample {
    let z = p.zero_sized;
    match scenario {
        Scenario::Empty1 => throughput(s, p.tasks, 1, z, Body::Empty),
        Scenario::Empty2 => throughput(s, p.tasks, 2, z, Body::Empty),
        Scenario::Empty4 => throughput(s, p.tasks, 4, z, Body::Empty),
        Scenario::Empty8 => throughput(s, p.tasks, 8, z, Body::Empty),
        Scenario::Work1us => throughput(s, p.work_tasks, 1, z, Body::Work1us),
        Scenario::BurstIdle | Scenario::LatencyIdle => {
            run_interleaved(scenario, &[s as &dyn Idle], p, 0)
                .pop()
                .expect("one sample per subject")
        }
    }
}

/// Warm a freshly built implementation up for `scenario`: start its threads,
/// fault in its queues and allocator caches with a short run of the same
/// scenario, so the measured run is not a cold one.
pub fn warm_up<S: Subject>(scenario: Scenario, s: &S, p: &Params) {
    run_once(scenario, s, &warm_up_params(p));
}

/// [`warm_up`] for the idle scenarios' subjects, all alive at once.
pub fn warm_up_idle(scenario: Scenario, subjects: &[&dyn Idle], p: &Params) {
    run_interleaved(scenario, subjects, &warm_up_params(p), 0);
}

fn warm_up_params(p: &Params) -> Params {
    Params {
        tasks: (p.tasks / 10).max(1_000),
        work_tasks: (p.work_tasks / 20).max(500),
        samples: 20,
        bursts: 5,
        ..*p
    }
}

/// What a throughput task does before it reports completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Empty,
    Work1us,
}

/// Submit `n` tasks running `body`: closures capturing an 8-byte payload, or
/// nothing at all with `zero_sized`. Monomorphised per body so the task
/// itself carries no branch or indirection added by the harness.
#[inline]
fn submit_n<S: Subject>(s: &S, n: usize, zero_sized: bool, body: Body) {
    match (body, zero_sized) {
        (Body::Empty, false) => {
            for i in 0..n as u64 {
                s.spawn(move || {
                    black_box(i);
                    task_done();
                });
            }
        }
        (Body::Empty, true) => {
            for _ in 0..n {
                s.spawn(task_done);
            }
        }
        (Body::Work1us, false) => {
            for i in 0..n as u64 {
                s.spawn(move || {
                    black_box(i);
                    BusyLoop::global().burn(Duration::from_micros(1));
                    task_done();
                });
            }
        }
        (Body::Work1us, true) => {
            for _ in 0..n {
                s.spawn(|| {
                    BusyLoop::global().burn(Duration::from_micros(1));
                    task_done();
                });
            }
        }
    }
}

/// `tasks` tasks from `submitters` threads; the harness adds no per-task
/// allocation or reference count.
fn throughput<S: Subject>(
    s: &S,
    tasks: usize,
    submitters: usize,
    zero_sized: bool,
    body: Body,
) -> Sample {
    let submitters = submitters.max(1);
    let tasks = tasks.max(submitters);
    LATCH.arm(tasks);
    let cpu_start = process_cpu_time().unwrap_or_default();
    let start = if submitters == 1 {
        let start = now_ns();
        submit_n(s, tasks, zero_sized, body);
        start
    } else {
        let barrier = Barrier::new(submitters);
        let per = tasks / submitters;
        let extra = tasks % submitters;
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..submitters)
                .map(|i| {
                    let n = per + usize::from(i < extra);
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        let start = now_ns();
                        submit_n(s, n, zero_sized, body);
                        start
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a submitter panicked"))
                .min()
                .expect("at least one submitter")
        })
    };
    let end = LATCH.wait();
    let cpu = process_cpu_time()
        .unwrap_or_default()
        .saturating_sub(cpu_start)
        .as_nanos() as u64;
    let secs = end.saturating_sub(start).max(1) as f64 / 1e9;
    Sample {
        tasks_per_sec: tasks as f64 / secs,
        p50_ns: None,
        p99_ns: None,
        cpu_ns_per_task: Some(cpu as f64 / tasks as f64),
    }
}

/// The idle scenarios' unit of work on one implementation: one burst, or
/// one lone task. Object-safe, so the harness can keep every implementation
/// of a scenario alive at once and take their samples in turn
/// ([`run_interleaved`]); each call is monomorphised per pool, so the tasks
/// themselves carry no indirection added by the harness.
pub trait Idle {
    /// Submit `burst` empty tasks from this thread and wait for them;
    /// returns (first submit to last completion, process CPU time), in ns.
    fn burst(&self, burst: usize, zero_sized: bool) -> (u64, u64);
    /// Submit one lone task and wait for it; returns (submit to start,
    /// submit until the waiter is woken), in ns.
    fn lone_task(&self) -> (u64, u64);
}

impl<S: Subject> Idle for S {
    fn burst(&self, burst: usize, zero_sized: bool) -> (u64, u64) {
        LATCH.arm(burst);
        let cpu_start = process_cpu_time().unwrap_or_default();
        let start = now_ns();
        submit_n(self, burst, zero_sized, Body::Empty);
        let end = LATCH.wait();
        let cpu = process_cpu_time()
            .unwrap_or_default()
            .saturating_sub(cpu_start)
            .as_nanos() as u64;
        (end.saturating_sub(start).max(1), cpu)
    }

    fn lone_task(&self) -> (u64, u64) {
        use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
        static STARTED: AtomicU64 = AtomicU64::new(0);
        STARTED.store(0, Relaxed);
        LATCH.arm(1);
        let submitted = now_ns();
        self.spawn(|| {
            STARTED.store(now_ns(), Relaxed);
            task_done();
        });
        LATCH.wait();
        let woken = now_ns();
        // The latch's AcqRel decrement orders the task's store before our read.
        let started = STARTED.load(Relaxed);
        (
            started.saturating_sub(submitted).max(1),
            woken.saturating_sub(submitted),
        )
    }
}

/// One implementation's running totals in an idle scenario.
struct IdleTotals {
    /// Submit-to-start latencies (`latency-idle`).
    hist: LatencyAccumulator,
    /// Summed round trips (`latency-idle`) or burst times (`burst-idle`).
    busy_ns: u64,
    /// Summed process CPU time of the bursts.
    cpu_ns: u64,
}

/// Samples (lone tasks or bursts) of one pool taken back to back, each after
/// the idle gap, before the next pool's block: about 5 ms at the default
/// 500 µs gap.
pub const BLOCK: usize = 10;

/// Run an idle scenario (`burst-idle` or `latency-idle`) on every one of
/// `subjects` at once, interleaved in short blocks: [`BLOCK`] samples (bursts
/// or lone tasks) of each subject in turn, in an order rotated by `rotate`
/// plus the block's number, then the next block of each. Before every sample
/// the harness sleeps `p.idle_gap`, so the pool about to be sampled, and the
/// one sampled just before it, have parked, and within a block a pool's
/// samples are `p.idle_gap` apart, as the scenario defines them. A host
/// slowdown lasting more than a few milliseconds thus lands on every pool
/// alike instead of on one pool's whole run. (Sample by sample instead, a
/// pool's own samples would be the gap times the number of pools apart: with
/// eleven pools, 5.5 ms of other pools' work between two of its samples, a
/// colder regime in which every pool's p50, the floor row's included, was
/// 2–3 times the one at a 500 µs gap.) Returns one [`Sample`] per subject,
/// in `subjects` order.
pub fn run_interleaved(
    scenario: Scenario,
    subjects: &[&dyn Idle],
    p: &Params,
    rotate: usize,
) -> Vec<Sample> {
    assert!(
        scenario.is_idle(),
        "{} is not an idle scenario",
        scenario.name()
    );
    let latency = scenario == Scenario::LatencyIdle;
    let rounds = if latency { p.samples } else { p.bursts }.max(1);
    let burst = p.burst_tasks.max(1);
    let mut totals: Vec<IdleTotals> = subjects
        .iter()
        .map(|_| IdleTotals {
            hist: LatencyAccumulator::default(),
            busy_ns: 0,
            cpu_ns: 0,
        })
        .collect();
    let order: Vec<usize> = (0..subjects.len()).collect();
    for (block, first) in (0..rounds).step_by(BLOCK).enumerate() {
        for j in rotated(&order, rotate + block) {
            for _ in first..rounds.min(first + BLOCK) {
                std::thread::sleep(p.idle_gap);
                let t = &mut totals[j];
                if latency {
                    let (start, round_trip) = subjects[j].lone_task();
                    t.hist.record(start);
                    t.busy_ns += round_trip;
                } else {
                    let (busy, cpu) = subjects[j].burst(burst, p.zero_sized);
                    t.busy_ns += busy;
                    t.cpu_ns += cpu;
                }
            }
        }
    }
    totals
        .into_iter()
        .map(|t| {
            let secs = t.busy_ns.max(1) as f64 / 1e9;
            if latency {
                let s = t.hist.summary();
                let ns = |us: f64| Some((us * 1e3).round() as u64);
                Sample {
                    // Lone-task round trips per second, pauses excluded.
                    tasks_per_sec: rounds as f64 / secs,
                    p50_ns: ns(s.p50_us),
                    p99_ns: ns(s.p99_us),
                    cpu_ns_per_task: None,
                }
            } else {
                let tasks = (rounds * burst) as f64;
                Sample {
                    // Tasks over the time the bursts ran (first submit to
                    // last completion, summed): waking the pool counts.
                    tasks_per_sec: tasks / secs,
                    p50_ns: None,
                    p99_ns: None,
                    cpu_ns_per_task: Some(t.cpu_ns as f64 / tasks),
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs every task on the submitting thread: enough to drive the
    /// scenarios' bookkeeping without a pool.
    struct Inline;

    impl Subject for Inline {
        fn spawn<F>(&self, f: F)
        where
            F: FnOnce() + Send + 'static,
        {
            f();
        }
    }

    /// Every scenario completes and reports a sane sample (one test: they
    /// share the global latch).
    #[test]
    fn every_scenario_runs_and_reports() {
        BusyLoop::global();
        let p = Params {
            tasks: 2_000,
            work_tasks: 200,
            samples: 5,
            idle_gap: Duration::from_micros(50),
            bursts: 3,
            burst_tasks: 10,
            zero_sized: false,
            inner: 2,
        };
        for sc in Scenario::ALL {
            warm_up(sc, &Inline, &p);
            let s = run(sc, &Inline, &p);
            assert!(
                s.tasks_per_sec.is_finite() && s.tasks_per_sec > 0.0,
                "{}: {s:?}",
                sc.name()
            );
            assert_eq!(s.p50_ns.is_some(), sc.measures_latency(), "{}", sc.name());
            assert_eq!(
                s.cpu_ns_per_task.is_some(),
                !sc.measures_latency(),
                "{}",
                sc.name()
            );
            assert_eq!(LATCH.remaining(), 0);
        }
        // Eight submitters of 2 000 tasks that each take ~1 µs: the clock
        // starts at the earliest submitter's start, so the rate cannot exceed
        // what eight threads could do (a late start once gave 2e14 tasks/s).
        let s = throughput(&Inline, 2_000, 8, false, Body::Work1us);
        assert!(s.tasks_per_sec < 8.0 * 2e6, "{s:?}");

        // The idle scenarios take a block of samples of every subject, in an
        // order rotated per block, before the next block of any; the last
        // block may be short.
        let log = std::sync::Mutex::new(Vec::new());
        let (a, b) = (Logged(0, &log), Logged(1, &log));
        let subjects: [&dyn Idle; 2] = [&a, &b];
        let p = Params {
            samples: BLOCK + 2,
            ..p
        };
        let samples = run_interleaved(Scenario::LatencyIdle, &subjects, &p, 0);
        let want: Vec<u8> = [(0, BLOCK), (1, BLOCK), (1, 2), (0, 2)]
            .iter()
            .flat_map(|&(who, n)| std::iter::repeat_n(who, n))
            .collect();
        assert_eq!(*log.lock().unwrap(), want);
        assert_eq!(samples.len(), 2);
        assert!(samples.iter().all(|s| s.p50_ns.is_some()));
        log.lock().unwrap().clear();
        let samples = run_idle(Scenario::BurstIdle, &subjects, &p, 1);
        // Two passes (`inner`) of three bursts of ten tasks, starting at b.
        let log = log.into_inner().unwrap();
        assert_eq!(log.len(), 2 * 3 * 2 * 10);
        // One block: b's three bursts, then a's.
        assert_eq!(
            &log[..31],
            &[1; 30].iter().chain(&[0]).copied().collect::<Vec<_>>()[..]
        );
        assert!(samples.iter().all(|s| s.cpu_ns_per_task.is_some()));
        assert_eq!(LATCH.remaining(), 0);
    }

    /// Runs tasks inline and logs which subject ran each.
    struct Logged<'a>(u8, &'a std::sync::Mutex<Vec<u8>>);

    impl Subject for Logged<'_> {
        fn spawn<F>(&self, f: F)
        where
            F: FnOnce() + Send + 'static,
        {
            self.1.lock().unwrap().push(self.0);
            f();
        }
    }
}
