//! What a simulated run returns: the same [`RunResult`] as a real replay,
//! plus what only a simulator can know exactly.

use serde::Serialize;
use tidepool_workload::RunResult;

/// The result of one simulated run.
#[derive(Debug, Clone)]
pub struct SimOutcome {
    /// The same result type as the real replay (tables, reports, plots).
    pub result: RunResult,
    /// Events handled (arrivals, ends of compute and sleep, wake-ups, …).
    pub events: u64,
    /// Both sides of Little's law, measured independently.
    pub littles_law: LittlesLaw,
    /// Statistics of the tasks after the warm-up.
    pub steady: Steady,
}

/// Little's law, `L = λW`, for the tasks in the system and in the queue.
/// `L` is integrated over time as tasks come and go, `W` summed over tasks:
/// two independent tallies of the same quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct LittlesLaw {
    /// From the first arrival to the last completion, ns.
    pub span_ns: u64,
    /// Tasks accepted.
    pub accepted: u64,
    /// ∫ tasks in the system dt, task·ns.
    pub in_system_ns: u128,
    /// Σ turnaround over tasks, ns.
    pub turnaround_sum_ns: u128,
    /// ∫ tasks accepted but not started dt, task·ns.
    pub queue_ns: u128,
    /// Σ wait over tasks, ns.
    pub wait_sum_ns: u128,
}

impl LittlesLaw {
    /// Mean tasks in the system, `L`.
    pub fn l(&self) -> f64 {
        self.in_system_ns as f64 / self.span_ns.max(1) as f64
    }

    /// `λW`: the arrival rate times the mean turnaround.
    pub fn lambda_w(&self) -> f64 {
        let lambda = self.accepted as f64 / self.span_ns.max(1) as f64;
        let w = self.turnaround_sum_ns as f64 / self.accepted.max(1) as f64;
        lambda * w
    }

    /// Whether `L = λW` and `L_q = λW_q` hold: every task that arrived has
    /// left, so the integrals equal the sums exactly (in integer ns).
    pub fn holds(&self) -> bool {
        self.in_system_ns == self.turnaround_sum_ns && self.queue_ns == self.wait_sum_ns
    }
}

/// Tallies of the tasks that arrived in the measured window: from the
/// arrival of task `warmup_tasks` to that of task `warmup_tasks +
/// steady_tasks` (in an open loop: those tasks).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Steady {
    /// Tasks that arrived.
    pub submitted: u64,
    /// Of them, rejected by a full queue.
    pub rejected: u64,
    /// Of them, started.
    pub waited: u64,
    /// Σ wait, ns.
    pub wait_sum_ns: u128,
    /// Waits longer than the configured threshold.
    pub waits_over: u64,
    /// Of them, completed.
    pub completed: u64,
    /// Σ turnaround, ns.
    pub turnaround_sum_ns: u128,
    /// From the first steady arrival to the last arrival, ns.
    pub span_ns: u64,
    /// ∫ live threads dt over that span, thread·ns.
    pub threads_ns: u128,
    /// Per task-size bin (when asked for).
    pub bins: Vec<Bin>,
}

impl Steady {
    /// Mean wait, seconds.
    pub fn mean_wait_s(&self) -> f64 {
        self.wait_sum_ns as f64 / self.waited.max(1) as f64 / 1e9
    }

    /// Fraction of waits longer than the threshold.
    pub fn wait_tail(&self) -> f64 {
        self.waits_over as f64 / self.waited.max(1) as f64
    }

    /// Fraction of arrivals rejected.
    pub fn blocking(&self) -> f64 {
        self.rejected as f64 / self.submitted.max(1) as f64
    }

    /// Mean live threads over the span.
    pub fn mean_threads(&self) -> f64 {
        self.threads_ns as f64 / self.span_ns.max(1) as f64
    }
}

/// Tasks of one size bin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Bin {
    /// Tasks completed.
    pub tasks: u64,
    /// Σ turnaround, ns.
    pub turnaround_sum_ns: u128,
    /// Σ size (cpu + blocked), ns.
    pub size_sum_ns: u128,
}

impl Bin {
    /// Σ turnaround / Σ size: the mean slowdown of the bin's work.
    pub fn slowdown(&self) -> f64 {
        self.turnaround_sum_ns as f64 / self.size_sum_ns.max(1) as f64
    }
}
