//! Per-worker task statistics. Each worker writes only its own record, with
//! plain relaxed stores (no lock, no read-modify-write); readers merge all
//! records into hdrhistograms when they take a snapshot.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::metrics::clock::Clock;
use crate::metrics::histogram::{bump, AtomicLatency, BucketSums};
use crate::metrics::latency::Latency;
use crate::sync::{lock, Arc, Mutex};
use crate::sys::{SchedStat, ThreadClock};

/// Everything counted per task, summed over some workers.
#[derive(Debug, Clone, Default)]
pub(crate) struct TaskTotals {
    /// CPU time the workers' threads consumed.
    pub(crate) cpu: std::time::Duration,
    /// Time the workers' threads were runnable but waiting for a CPU (zero
    /// where the kernel keeps no scheduler statistics).
    pub(crate) run_delay: std::time::Duration,
    pub(crate) started: u64,
    pub(crate) completed: u64,
    pub(crate) panicked: u64,
    /// Queue wait (thesis: idle time), accepted → started.
    pub(crate) wait: Latency,
    /// Execution (thesis: processing time), started → finished.
    pub(crate) service: Latency,
    /// Submission latency (thesis: response time) of submissions that blocked.
    pub(crate) submit_blocked: Latency,
    /// Tasks whose submission did not block (response time 0).
    pub(crate) unblocked: u64,
    /// Thread CPU time of a sample of timed tasks, measured around each task.
    pub(crate) sampled_cpu: std::time::Duration,
    /// Execution time of the same sample.
    pub(crate) sampled_service: std::time::Duration,
    /// How many tasks the sample holds.
    pub(crate) sampled_tasks: u64,
}

impl TaskTotals {
    /// The submit-blocked distribution including the unblocked submissions.
    pub(crate) fn submit_blocked_with_zeros(&self) -> Latency {
        let mut r = self.submit_blocked.clone();
        r.record_zeros(self.unblocked);
        r
    }
}

/// One worker's record; written only by that worker.
#[derive(Debug)]
pub(crate) struct WorkerRecord {
    /// The worker thread's CPU clock (readable by the controller).
    cpu_clock: Option<ThreadClock>,
    /// The worker's scheduler statistics (its run delay).
    sched: SchedStat,
    /// CPU time and run delay at exit (read by the worker itself).
    final_cpu: std::sync::Mutex<Option<(std::time::Duration, std::time::Duration)>>,
    started: AtomicU64,
    completed: AtomicU64,
    panicked: AtomicU64,
    unblocked: AtomicU64,
    wait: AtomicLatency,
    service: AtomicLatency,
    submit_blocked: AtomicLatency,
    /// Thread CPU nanoseconds of the tasks whose CPU time was sampled.
    sampled_cpu_ns: AtomicU64,
    /// Execution nanoseconds of the same tasks.
    sampled_service_ns: AtomicU64,
    /// Tasks whose CPU time was sampled.
    sampled_tasks: AtomicU64,
}

impl WorkerRecord {
    /// A record for the calling (worker) thread.
    pub(crate) fn for_current_thread() -> Self {
        WorkerRecord {
            cpu_clock: ThreadClock::current(),
            sched: SchedStat::current(),
            final_cpu: std::sync::Mutex::new(None),
            started: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
            unblocked: AtomicU64::new(0),
            wait: AtomicLatency::default(),
            service: AtomicLatency::default(),
            submit_blocked: AtomicLatency::default(),
            sampled_cpu_ns: AtomicU64::new(0),
            sampled_service_ns: AtomicU64::new(0),
            sampled_tasks: AtomicU64::new(0),
        }
    }

    /// A task was taken from the queue. Owner thread only.
    #[inline]
    pub(crate) fn task_started(&self) {
        bump(&self.started, 1);
    }

    /// The thread's CPU time and run delay so far (frozen once it retired).
    /// Read under the record's own lock, which `Records::retire` takes to
    /// freeze them before the thread exits: a live thread's clock is never
    /// read after the thread is gone.
    fn cpu_and_delay(&self) -> (std::time::Duration, std::time::Duration) {
        let frozen = self.final_cpu.lock().unwrap_or_else(|e| e.into_inner());
        match *frozen {
            Some(done) => done,
            None => self.read_cpu(),
        }
    }

    fn read_cpu(&self) -> (std::time::Duration, std::time::Duration) {
        (
            self.cpu_clock
                .and_then(ThreadClock::read)
                .unwrap_or_default(),
            self.run_delay().unwrap_or_default(),
        )
    }

    /// The worker thread's run delay so far. Owner thread only (or under
    /// the record's lock, as `cpu_and_delay` does).
    pub(crate) fn run_delay(&self) -> Option<std::time::Duration> {
        self.sched.run_delay()
    }

    /// Record the thread CPU time a timed task used, with its execution
    /// time. Owner thread only.
    #[inline]
    pub(crate) fn task_cpu(&self, cpu_ns: u64, service_ns: u64) {
        bump(&self.sampled_cpu_ns, cpu_ns);
        bump(&self.sampled_service_ns, service_ns);
        bump(&self.sampled_tasks, 1);
    }

    /// Record a finished task that was not timed. Owner thread only.
    #[inline]
    pub(crate) fn task_untimed(&self, panicked: bool) {
        if panicked {
            bump(&self.panicked, 1);
        }
        self.completed.store(
            self.completed.load(Relaxed) + 1,
            std::sync::atomic::Ordering::Release,
        );
    }

    /// Record one finished task from its clock ticks. Owner thread only.
    #[inline]
    pub(crate) fn task_done(
        &self,
        submitted: u64,
        accepted: u64,
        started: u64,
        finished: u64,
        panicked: bool,
    ) {
        self.wait.record(Clock::nanos_between(accepted, started));
        self.service.record(Clock::nanos_between(started, finished));
        if accepted == submitted {
            bump(&self.unblocked, 1);
        } else {
            self.submit_blocked
                .record(Clock::nanos_between(submitted, accepted));
        }
        if panicked {
            bump(&self.panicked, 1);
        }
        // Last, so a reader that sees the count sees the latencies too (mostly:
        // snapshots are approximate while tasks run).
        self.completed.store(
            self.completed.load(Relaxed) + 1,
            std::sync::atomic::Ordering::Release,
        );
    }

    /// Valid only while the worker thread lives: callers hold `Records::live`,
    /// which a worker must take (in `retire`) before it exits.
    pub(crate) fn add_into(&self, sum: &mut TaskTotals) {
        let mut latencies = LatencySums::default();
        self.add_counts(sum, &mut latencies);
        latencies.add_into(sum);
    }

    /// [`add_into`](Self::add_into), the latencies summed into
    /// `latencies` for the caller to convert once for all workers.
    fn add_counts(&self, sum: &mut TaskTotals, latencies: &mut LatencySums) {
        let (cpu, delay) = self.cpu_and_delay();
        sum.cpu += cpu;
        sum.run_delay += delay;
        sum.sampled_cpu += std::time::Duration::from_nanos(self.sampled_cpu_ns.load(Relaxed));
        sum.sampled_service +=
            std::time::Duration::from_nanos(self.sampled_service_ns.load(Relaxed));
        sum.sampled_tasks += self.sampled_tasks.load(Relaxed);
        sum.completed += self.completed.load(std::sync::atomic::Ordering::Acquire);
        sum.started += self.started.load(Relaxed);
        sum.panicked += self.panicked.load(Relaxed);
        sum.unblocked += self.unblocked.load(Relaxed);
        latencies.wait.add(&self.wait);
        latencies.service.add(&self.service);
        latencies.submit_blocked.add(&self.submit_blocked);
    }
}

/// The latency buckets of [`TaskTotals`], summed over workers.
#[derive(Debug, Default)]
struct LatencySums {
    wait: BucketSums,
    service: BucketSums,
    submit_blocked: BucketSums,
}

impl LatencySums {
    fn add_into(&self, sum: &mut TaskTotals) {
        self.wait.add_into(&mut sum.wait);
        self.service.add_into(&mut sum.service);
        self.submit_blocked.add_into(&mut sum.submit_blocked);
    }
}

/// All workers' records, plus what retired workers left behind.
#[derive(Debug, Default)]
pub(crate) struct Records {
    live: Mutex<Vec<Arc<WorkerRecord>>>,
    retired: Mutex<TaskTotals>,
}

impl Records {
    /// A record for a new worker; call it on the worker's own thread.
    pub(crate) fn register(&self) -> Arc<WorkerRecord> {
        let r = Arc::new(WorkerRecord::for_current_thread());
        lock(&self.live).push(r.clone());
        r
    }

    /// Fold a retiring worker's record into the retired totals. Called on
    /// the worker's own thread, just before it exits.
    pub(crate) fn retire(&self, record: &Arc<WorkerRecord>) {
        {
            let mut frozen = record.final_cpu.lock().unwrap_or_else(|e| e.into_inner());
            *frozen = Some(record.read_cpu());
        }
        let mut live = lock(&self.live);
        if let Some(i) = live.iter().position(|r| Arc::ptr_eq(r, record)) {
            live.swap_remove(i);
        }
        // Under the `live` lock, so a reader never sees the record twice or never.
        record.add_into(&mut lock(&self.retired));
    }

    /// Totals over every worker that ever ran. The list of live records and
    /// the retired totals are copied together under the lock; the slow part
    /// (histograms, and a `/proc` read per worker for its run delay) happens
    /// after, so spawning and retiring workers never wait for a snapshot. A
    /// worker that retires meanwhile is counted once: in the copied list,
    /// with its frozen values, and not in the copied retired totals.
    pub(crate) fn totals(&self) -> TaskTotals {
        let (live, mut sum) = {
            let live = lock(&self.live);
            (live.clone(), lock(&self.retired).clone())
        };
        let mut latencies = LatencySums::default();
        for r in &live {
            r.add_counts(&mut sum, &mut latencies);
        }
        latencies.add_into(&mut sum);
        sum
    }
}
