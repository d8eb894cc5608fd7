//! Per-worker task statistics: each worker writes only its own record, so the
//! hot path takes an uncontended lock; readers merge all records.

use crate::metrics::clock::Clock;
use crate::metrics::latency::Latency;
use crate::sync::{lock, Arc, Mutex};

/// Everything counted per task, summed over the tasks one worker (or all
/// retired workers) ran.
#[derive(Debug, Clone, Default)]
pub(crate) struct TaskTotals {
    pub(crate) completed: u64,
    pub(crate) panicked: u64,
    /// Queue wait (thesis: idle time), accepted → started.
    pub(crate) wait: Latency,
    /// Execution (thesis: processing time), started → finished.
    pub(crate) service: Latency,
    /// Submission latency (thesis: response time), submitted → accepted.
    pub(crate) response: Latency,
    /// Tasks whose submission did not block (response time 0, recorded lazily).
    pub(crate) unblocked: u64,
}

impl TaskTotals {
    pub(crate) fn add(&mut self, other: &TaskTotals) {
        self.completed += other.completed;
        self.panicked += other.panicked;
        self.wait.add(&other.wait);
        self.service.add(&other.service);
        self.response.add(&other.response);
        self.unblocked += other.unblocked;
    }

    /// The response distribution including the unblocked submissions.
    pub(crate) fn response_with_zeros(&self) -> Latency {
        let mut r = self.response.clone();
        r.record_zeros(self.unblocked);
        r
    }
}

/// One worker's record.
#[derive(Debug, Default)]
pub(crate) struct WorkerRecord {
    totals: Mutex<TaskTotals>,
}

impl WorkerRecord {
    /// Record one finished task from its clock ticks.
    #[inline]
    pub(crate) fn task_done(
        &self,
        submitted: u64,
        accepted: u64,
        started: u64,
        finished: u64,
        panicked: bool,
    ) {
        let mut t = lock(&self.totals);
        t.completed += 1;
        t.panicked += panicked as u64;
        t.wait.record(Clock::nanos_between(accepted, started));
        t.service.record(Clock::nanos_between(started, finished));
        if accepted == submitted {
            t.unblocked += 1;
        } else {
            t.response.record(Clock::nanos_between(submitted, accepted));
        }
    }

    pub(crate) fn totals(&self) -> TaskTotals {
        lock(&self.totals).clone()
    }

    pub(crate) fn add_into(&self, sum: &mut TaskTotals) {
        sum.add(&lock(&self.totals));
    }
}

/// All workers' records, plus what retired workers left behind.
#[derive(Debug, Default)]
pub(crate) struct Records {
    live: Mutex<Vec<Arc<WorkerRecord>>>,
    retired: Mutex<TaskTotals>,
}

impl Records {
    /// A record for a new worker.
    pub(crate) fn register(&self) -> Arc<WorkerRecord> {
        let r = Arc::new(WorkerRecord::default());
        lock(&self.live).push(r.clone());
        r
    }

    /// Fold a retiring worker's record into the retired totals.
    pub(crate) fn retire(&self, record: &Arc<WorkerRecord>) {
        let mut live = lock(&self.live);
        if let Some(i) = live.iter().position(|r| Arc::ptr_eq(r, record)) {
            live.swap_remove(i);
        }
        // Under the `live` lock, so a reader never sees the record twice or never.
        lock(&self.retired).add(&record.totals());
    }

    /// Totals over every worker that ever ran.
    pub(crate) fn totals(&self) -> TaskTotals {
        let live = lock(&self.live);
        let mut sum = lock(&self.retired).clone();
        for r in live.iter() {
            r.add_into(&mut sum);
        }
        sum
    }
}
