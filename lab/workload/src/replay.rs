//! The replay driver (Xu 2004, figure 5.2): real-time submission of a trace
//! to any [`Executor`], measuring every task. Open loop by default; a trace
//! with [`Trace::clients`] set is replayed as a closed loop (each client
//! submits its next task a think time after its previous one was answered).
//!
//! The driver sleeps until shortly before each arrival and spins the rest
//! (spin-sleep hybrid, with the thread's timer slack lowered to 1 µs on
//! Linux, and the lead following its sleeps' lateness: [`crate::pace`]), then calls [`Executor::execute_job`] with a wrapper that stamps
//! when the body starts and finishes. It never waits for a task before
//! submitting the next one (open loop): a late arrival is dispatched at once,
//! and the lateness is reported. A sampler thread reads
//! [`Executor::counts`] every millisecond for the threads-kept average and
//! the pool-size trajectory.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tidepool::sys;

use crate::body::{BusyLoop, TaskBody};
use crate::executor::Executor;
use crate::limits::{secs_saturating, MAX_TIME};
use crate::metrics::{summarize, thread_metrics, TaskRecord, ThreadSample};
use crate::pace::Lead;
use crate::result::{DecisionEntry, RunResult};
use crate::trace::Trace;

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Replay speed: 2.0 halves every arrival gap (task bodies unchanged).
    pub speed: f64,
    /// The most the driver spins before an arrival: it stops sleeping as
    /// long before each arrival as its sleeps have lately been late
    /// ([`Lead`]), never earlier than this.
    pub spin: Duration,
    /// Thread-count sampling interval (1 ms, as Oh & Kim).
    pub sample_interval: Duration,
    /// Most thread-count samples kept (default 2,000,000: 80 MB, 33 minutes
    /// at 1 ms). Past it, every other sample is dropped and the interval
    /// doubles, so a replay of any length holds bounded memory.
    pub max_samples: usize,
    /// How often the progress hook is called.
    pub progress_interval: Duration,
    /// Give up waiting for stragglers this long after the last submission
    /// (the result is then marked `cancelled`). `None`: wait for all.
    pub drain_timeout: Option<Duration>,
    /// Stop early when this becomes true (Ctrl-C); what was measured is
    /// still returned.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Keep per-task records in the result.
    pub keep_records: bool,
    /// The busy loop for compute; `None` uses [`BusyLoop::global`].
    pub busy: Option<BusyLoop>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            speed: 1.0,
            spin: Duration::from_micros(100),
            sample_interval: Duration::from_millis(1),
            max_samples: 2_000_000,
            progress_interval: Duration::from_millis(100),
            drain_timeout: None,
            cancel: None,
            keep_records: false,
            busy: None,
        }
    }
}

/// A progress report, passed to the progress hook on the driver's thread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Time since the replay started.
    pub elapsed: Duration,
    /// Tasks in the trace.
    pub total: usize,
    /// Tasks submitted so far.
    pub submitted: usize,
    /// Tasks finished so far.
    pub completed: u64,
    /// Live threads now.
    pub live_threads: usize,
    /// Queued jobs now.
    pub queued: usize,
    /// False while submitting, true while waiting for the last tasks.
    pub draining: bool,
}

/// Optional hooks into a replay.
#[derive(Default)]
pub struct ReplayHooks<'a> {
    /// Called about every [`ReplayOptions::progress_interval`] on the
    /// driver thread (keep it cheap).
    pub progress: Option<&'a mut dyn FnMut(&Progress)>,
    /// Read by the sampler every sample, e.g. `&|| pool.target_size()`, to
    /// record the target size beside the live count.
    pub target_size: Option<&'a (dyn Fn() -> usize + Sync)>,
}

#[derive(Default)]
struct Slot {
    started: AtomicU64, // ns since epoch + 1; 0 = not yet
    finished: AtomicU64,
}

/// Raises its flag when dropped, also while unwinding from a panic.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

fn ns_since(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

/// Replay `trace` against `executor` with default hooks.
///
/// ```
/// use std::time::Duration;
/// use tidepool_workload::{replay, GenSpec, ReplayOptions, ThreadPerRequest};
/// let trace = "periodic:rate=1000,n=20,service=const:100us".parse::<GenSpec>().unwrap().generate();
/// let r = replay(&trace, &ThreadPerRequest::new(), &ReplayOptions::default());
/// assert_eq!(r.completed, 20);
/// assert_eq!(r.threads_created, 20);
/// ```
pub fn replay(trace: &Trace, executor: &dyn Executor, opts: &ReplayOptions) -> RunResult {
    replay_with(trace, executor, opts, ReplayHooks::default())
}

/// Replay `trace` against a [`tidepool::Pool`]: like [`replay_with`], plus the
/// pool's target size in every sample and its decision log in the result.
///
/// ```
/// use tidepool::Pool;
/// use tidepool_workload::{replay_pool, GenSpec, ReplayOptions};
/// let pool = Pool::new(2).unwrap();
/// let trace = "poisson:rate=2000,n=40,service=exp:50us".parse::<GenSpec>().unwrap().generate();
/// let r = replay_pool(&trace, &pool, &ReplayOptions::default(), None);
/// assert_eq!(r.completed, 40);
/// assert!(r.size_series.iter().all(|p| p.target == Some(2)));
/// ```
pub fn replay_pool(
    trace: &Trace,
    pool: &tidepool::Pool,
    opts: &ReplayOptions,
    mut progress: Option<&mut dyn FnMut(&Progress)>,
) -> RunResult {
    let offset = pool.stats().elapsed;
    let target = || pool.target_size();
    let mut r = replay_with(
        trace,
        pool,
        opts,
        ReplayHooks {
            progress: progress
                .as_mut()
                .map(|p| &mut **p as &mut dyn FnMut(&Progress)),
            target_size: Some(&target),
        },
    );
    r.decisions = pool
        .decisions()
        .iter()
        .map(|d| DecisionEntry::from_record(d, offset))
        .collect();
    r
}

/// Which task of a trace is due next, and when (time since the replay's
/// start, at the replay's speed).
struct Due<'a> {
    trace: &'a Trace,
    speed: f64,
    /// Tasks submitted so far.
    popped: usize,
    /// Open loop: the next task in trace order, and the last arrival time.
    next: usize,
    last_at: Duration,
    /// Closed loop: each client's next task whose time is known.
    ready: BinaryHeap<Reverse<(Duration, usize)>>,
}

impl<'a> Due<'a> {
    fn new(trace: &'a Trace, speed: f64) -> Due<'a> {
        let mut due = Due {
            trace,
            speed,
            popped: 0,
            next: 0,
            last_at: Duration::ZERO,
            ready: BinaryHeap::new(),
        };
        if let Some(c) = trace.clients {
            // Each client's first task: its think time from the start.
            for i in 0..c.min(trace.len()) {
                due.ready.push(Reverse((due.think(i), i)));
            }
        }
        due
    }

    fn closed(&self) -> bool {
        self.trace.clients.is_some()
    }

    fn think(&self, i: usize) -> Duration {
        secs_saturating(self.trace.tasks[i].start_delay.as_secs_f64() / self.speed)
    }

    fn done(&self) -> bool {
        self.popped >= self.trace.len()
    }

    /// Task `i` was answered at `t` (finished, or rejected): in a closed loop
    /// its client's next task is due a think time later.
    fn answered(&mut self, i: usize, t: Duration) {
        if let Some(c) = self.trace.clients {
            let j = i + c;
            if j < self.trace.len() {
                self.ready
                    .push(Reverse((t.saturating_add(self.think(j)).min(MAX_TIME), j)));
            }
        }
    }

    /// The next task and its time, if known yet.
    fn peek(&self) -> Option<(usize, Duration)> {
        if self.closed() {
            self.ready.peek().map(|Reverse((at, i))| (*i, *at))
        } else {
            (self.next < self.trace.len()).then(|| {
                let at = self.last_at.saturating_add(self.think(self.next));
                (self.next, at.min(MAX_TIME))
            })
        }
    }

    /// Take the task [`Due::peek`] gave.
    fn pop(&mut self) {
        self.popped += 1;
        if self.closed() {
            self.ready.pop();
        } else if let Some((_, at)) = self.peek() {
            self.last_at = at;
            self.next += 1;
        }
    }
}

/// Replay `trace` against `executor` with hooks.
pub fn replay_with(
    trace: &Trace,
    executor: &dyn Executor,
    opts: &ReplayOptions,
    mut hooks: ReplayHooks<'_>,
) -> RunResult {
    let busy = opts.busy.unwrap_or_else(BusyLoop::global);
    let speed = if opts.speed.is_finite() && opts.speed > 0.0 {
        opts.speed
    } else {
        1.0
    };
    let cancelled = || {
        opts.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    };
    let n = trace.len();
    let slots: Arc<Vec<Slot>> = Arc::new((0..n).map(|_| Slot::default()).collect());
    let completed = Arc::new(AtomicU64::new(0));
    let stop_sampler = AtomicBool::new(false);
    let counts0 = executor.counts();
    let cores = sys::cores();
    let _slack = sys::TimerSlack::lower(Duration::from_micros(1));

    let cpu0 = sys::process_cpu_time().unwrap_or_default();
    let epoch = Instant::now();
    let mut records: Vec<TaskRecord> = Vec::with_capacity(n);
    // Index in the trace of each record (a closed loop submits out of order).
    let mut order: Vec<usize> = Vec::with_capacity(n);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<usize>();
    let mut was_cancelled = false;
    let target_probe = hooks.target_size;

    let (samples, interval) = std::thread::scope(|scope| {
        // Whatever happens below, even a panic, the sampler stops, so the
        // scope can end (otherwise it would wait for the sampler forever).
        let stop = StopOnDrop(&stop_sampler);
        let sampler = scope.spawn(|| {
            let mut samples = Vec::new();
            let mut interval = opts.sample_interval;
            let mut next = Duration::ZERO;
            // At least one sample, and one after the stop: a short replay
            // can end before this thread first gets a core.
            loop {
                let stopping = stop_sampler.load(Ordering::Acquire);
                let c = executor.counts();
                samples.push(ThreadSample {
                    at_ns: ns_since(epoch),
                    live: c.live_threads,
                    queued: c.queued,
                    target: target_probe.map(|f| f()),
                });
                // Bounded memory however long the replay: past the cap, keep
                // every other sample and sample half as often.
                if samples.len() >= opts.max_samples.max(2) {
                    samples = samples.into_iter().step_by(2).collect();
                    interval = interval.saturating_mul(2);
                }
                if stopping {
                    break;
                }
                next += interval;
                let now = epoch.elapsed();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now; // fell behind: don't burst to catch up
                }
            }
            (samples, interval)
        });

        let mut last_progress = Instant::now();
        let mut report = |submitted: usize, draining: bool, force: bool| {
            if let Some(p) = hooks.progress.as_mut() {
                if force || last_progress.elapsed() >= opts.progress_interval {
                    last_progress = Instant::now();
                    let c = executor.counts();
                    p(&Progress {
                        elapsed: epoch.elapsed(),
                        total: n,
                        submitted,
                        completed: completed.load(Ordering::Relaxed),
                        live_threads: c.live_threads,
                        queued: c.queued,
                        draining,
                    });
                }
            }
        };

        // What is due next: the trace's order in an open loop; in a closed
        // loop, the earliest of each client's next task, known once its
        // previous task was answered (think time after the answer).
        let mut due = Due::new(trace, speed);
        let mut lead = Lead::new(opts.spin);
        let mut accepted = 0u64;
        // The arrival the driver last chose to spin for (asked once, so a
        // spin does not read the executor's counts in its loop).
        let mut spinning_for = None;
        let finished_at = |i: usize| {
            Duration::from_nanos(slots[i].finished.load(Ordering::Acquire).saturating_sub(1))
        };
        while !due.done() {
            if cancelled() {
                was_cancelled = true;
                break;
            }
            while let Ok(j) = done_rx.try_recv() {
                due.answered(j, finished_at(j));
            }
            let Some((i, at)) = due.peek() else {
                // Closed loop, every client waiting for its answer.
                if let Ok(j) = done_rx.recv_timeout(Duration::from_millis(20)) {
                    due.answered(j, finished_at(j));
                }
                report(records.len(), false, false);
                continue;
            };
            let now = epoch.elapsed();
            if now < at {
                // pace: sleep until the lead before the arrival, then spin
                let left = at - now;
                let mut ahead = lead.get();
                if spinning_for != Some(i) {
                    // No spin while tasks queue ([`Lead::before`]; a nap
                    // then goes straight to the arrival): the core is the
                    // workers' — a pool of 2 on 2 cores lost ~5% of its
                    // throughput to the spin against a pool of 32, which
                    // outnumbered the driver for the cores
                    // (`docs/notebook/policies.md`, "Growing to 2 × cores").
                    let in_flight = accepted.saturating_sub(completed.load(Ordering::Relaxed));
                    ahead = lead.before(in_flight, executor.counts().live_threads);
                    if left <= ahead {
                        spinning_for = Some(i);
                    }
                }
                if left > ahead {
                    let nap = (left - ahead).min(Duration::from_millis(20));
                    if due.closed() {
                        if let Ok(j) = done_rx.recv_timeout(nap) {
                            due.answered(j, finished_at(j));
                        } else {
                            lead.observe(nap, epoch.elapsed() - now);
                        }
                    } else {
                        std::thread::sleep(nap);
                        lead.observe(nap, epoch.elapsed() - now);
                    }
                    report(records.len(), false, false);
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            due.pop();
            let task = &trace.tasks[i];
            let body = TaskBody::of(task);
            let slots_c = Arc::clone(&slots);
            let done = Arc::clone(&completed);
            let tell = due.closed().then(|| done_tx.clone());
            let job = Box::new(move || {
                slots_c[i]
                    .started
                    .store(ns_since(epoch) + 1, Ordering::Relaxed);
                body.run(&busy);
                slots_c[i]
                    .finished
                    .store(ns_since(epoch) + 1, Ordering::Release);
                done.fetch_add(1, Ordering::Release);
                if let Some(tx) = tell {
                    let _ = tx.send(i);
                }
            });
            let submitted_ns = ns_since(epoch);
            let ok = executor.execute_job(job).is_ok();
            let accepted_ns = ns_since(epoch);
            accepted += u64::from(ok);
            if !ok {
                // The client gets no answer: it thinks from now on.
                due.answered(i, epoch.elapsed());
            }
            order.push(i);
            records.push(TaskRecord {
                request_id: task.request_id,
                app_id: task.app_id,
                scheduled_ns: u64::try_from(at.as_nanos()).unwrap_or(u64::MAX),
                submitted_ns,
                accepted_ns: ok.then_some(accepted_ns),
                started_ns: None,
                finished_ns: None,
            });
            report(records.len(), false, false);
        }
        // drain: wait for every accepted task, polling so cancel still works
        let drain_start = Instant::now();
        while completed.load(Ordering::Acquire) < accepted {
            if cancelled()
                || opts
                    .drain_timeout
                    .is_some_and(|t| drain_start.elapsed() >= t)
            {
                was_cancelled = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
            report(records.len(), true, false);
        }
        report(records.len(), true, true);
        drop(stop);
        sampler
            .join()
            .unwrap_or_else(|_| (Vec::new(), opts.sample_interval))
    });

    let wall = epoch.elapsed().as_secs_f64();
    let cpu = sys::process_cpu_time()
        .unwrap_or_default()
        .saturating_sub(cpu0)
        .as_secs_f64();
    for (r, &i) in records.iter_mut().zip(&order) {
        let get = |a: &AtomicU64| match a.load(Ordering::Acquire) {
            0 => None,
            v => Some(v - 1),
        };
        r.finished_ns = get(&slots[i].finished);
        r.started_ns = get(&slots[i].started);
    }
    let m = summarize(&records);
    let t = thread_metrics(&samples);
    let counts1 = executor.counts();
    RunResult {
        executor: executor.name(),
        workload: trace.name.clone(),
        tasks: n,
        submitted: m.submitted,
        accepted: m.accepted,
        rejected: m.rejected,
        completed: m.completed,
        cancelled: was_cancelled,
        duration_s: m.duration_s,
        throughput: m.throughput,
        mean_wait_us: m.wait.mean_us,
        p99_wait_us: m.wait.p99_us,
        mean_submit_blocked_us: m.submit_blocked.mean_us,
        p99_submit_blocked_us: m.submit_blocked.p99_us,
        mean_turnaround_us: m.turnaround.mean_us,
        p99_turnaround_us: m.turnaround.p99_us,
        submit_blocked: m.submit_blocked,
        wait: m.wait,
        processing: m.processing,
        turnaround: m.turnaround,
        lateness: m.lateness,
        process_cpu_time_s: cpu,
        process_cpu_utilization: if wall > 0.0 {
            cpu / wall / cores as f64
        } else {
            0.0
        },
        cores,
        load_average: sys::load_average(),
        threads_created: counts1
            .threads_created
            .saturating_sub(counts0.threads_created),
        avg_threads: t.avg_threads,
        max_threads: t.max_threads,
        avg_queue: t.avg_queue,
        max_queue: t.max_queue,
        sample_interval_ms: interval.as_secs_f64() * 1e3,
        size_series: t.size_series,
        decisions: Vec::new(),
        records: if opts.keep_records {
            records
        } else {
            Vec::new()
        },
    }
}
