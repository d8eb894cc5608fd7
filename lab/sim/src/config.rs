//! What to simulate: the machine, the executor (a pool and its policy, or a
//! thread per request), and what to measure.

use std::time::Duration;

use tidepool::policy::{PolicySpec, SizingPolicy};

use crate::costs::Costs;

/// The default keep-alive of a pool (as `tidepool::Builder`'s).
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// A modelled pool: bounds, keep-alive, queue capacity and sizing policy.
pub struct PoolModel {
    /// Lower bound (keep-alive never retires below it).
    pub min: usize,
    /// Upper bound (never spawns above it).
    pub max: usize,
    /// Workers started before the first task.
    pub initial: usize,
    /// How long an idle worker waits before it may retire.
    pub keep_alive: Duration,
    /// Most tasks waiting in the queue; a submit beyond it is rejected.
    /// `Some(0)` means no waiting room at all (a task is taken by an idle
    /// worker at once or rejected: the M/M/c/c loss system, which the real
    /// pool's builder does not offer).
    pub capacity: Option<usize>,
    /// The sizing policy (`None`: a static pool, never called).
    pub policy: Option<Box<dyn SizingPolicy>>,
}

impl std::fmt::Debug for PoolModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolModel")
            .field("min", &self.min)
            .field("max", &self.max)
            .field("initial", &self.initial)
            .field("keep_alive", &self.keep_alive)
            .field("capacity", &self.capacity)
            .field(
                "policy",
                &self.policy.as_ref().map(|p| p.name().to_string()),
            )
            .finish()
    }
}

impl PoolModel {
    /// A static pool of `n` workers (as `Pool::builder().threads(n)`).
    pub fn fixed(n: usize) -> PoolModel {
        PoolModel {
            min: n,
            max: n,
            initial: n,
            keep_alive: DEFAULT_KEEP_ALIVE,
            capacity: None,
            policy: None,
        }
    }

    /// A pool bounded by `min..=max` starting at `min`, run by `policy` (as
    /// the CLI builds its adaptive pools).
    pub fn adaptive(min: usize, max: usize, policy: Box<dyn SizingPolicy>) -> PoolModel {
        PoolModel {
            min,
            max,
            initial: min,
            keep_alive: DEFAULT_KEEP_ALIVE,
            capacity: None,
            policy: Some(policy),
        }
    }

    /// The same pool with a bounded queue.
    pub fn with_capacity(mut self, capacity: usize) -> PoolModel {
        self.capacity = Some(capacity);
        self
    }
}

/// The executor under test.
#[derive(Debug)]
pub enum ExecutorModel {
    /// A pool of workers.
    Pool(PoolModel),
    /// A new thread for every task, gone when the task ends.
    PerRequest,
}

impl ExecutorModel {
    /// The executor a policy spec names, as `tidepool run` builds it:
    /// `fixed:N` a static pool, `tpr` a thread per request, any other policy
    /// a pool bounded by `min..=max`.
    pub fn for_spec(spec: &PolicySpec, min: usize, max: usize) -> ExecutorModel {
        match (spec, spec.build()) {
            (PolicySpec::Fixed(n), _) => ExecutorModel::Pool(PoolModel::fixed(*n)),
            (_, Some(policy)) => ExecutorModel::Pool(PoolModel::adaptive(min, max, policy)),
            (_, None) => ExecutorModel::PerRequest,
        }
    }
}

/// Everything a run needs besides its tasks.
#[derive(Debug)]
pub struct SimConfig {
    /// Cores of the modelled machine.
    pub cores: usize,
    /// Thread start, wake-up and oversleep costs.
    pub costs: Costs,
    /// The executor.
    pub executor: ExecutorModel,
    /// Interval of the thread-count samples (1 ms, as the real replay).
    pub sample_interval: Duration,
    /// Keep per-task records in the result (memory grows with the trace).
    pub keep_records: bool,
    /// Keep the policy's decision log in the result.
    pub keep_decisions: bool,
    /// Tasks at the start left out of the [`Steady`](crate::Steady)
    /// statistics (the warm-up of a queueing experiment).
    pub warmup_tasks: u64,
    /// Tasks after the warm-up in the [`Steady`](crate::Steady) statistics
    /// (`None`: all the rest). The measured window ends when task
    /// `warmup_tasks + steady_tasks` arrives: a closed loop's stream needs
    /// tasks beyond it, since its clients finish at different times and
    /// the load falls as they do.
    pub steady_tasks: Option<u64>,
    /// [`Steady::waits_over`](crate::Steady::waits_over) counts waits longer than this.
    pub wait_threshold: Option<Duration>,
    /// `Some(n)`: a closed loop of `n` clients — task `i` belongs to client
    /// `i mod n` and arrives its start delay (a think time) after the
    /// answer to the client's previous task, as the replay drives a trace
    /// with [`Trace::clients`](tidepool_workload::Trace::clients) set.
    /// `None`: start delays are gaps between arrivals.
    pub clients: Option<usize>,
    /// Upper edges of the task-size bins of
    /// [`Steady::bins`](crate::Steady::bins) (sizes above the last go to a
    /// last bin).
    pub size_bins: Vec<Duration>,
}

impl SimConfig {
    /// `executor` on `cores` cores with calibrated costs, 1 ms samples, no
    /// records, the decision log kept, no warm-up.
    pub fn new(cores: usize, executor: ExecutorModel) -> SimConfig {
        SimConfig {
            cores,
            costs: Costs::default(),
            executor,
            sample_interval: Duration::from_millis(1),
            keep_records: false,
            keep_decisions: true,
            warmup_tasks: 0,
            steady_tasks: None,
            wait_threshold: None,
            clients: None,
            size_bins: Vec::new(),
        }
    }

    /// The same configuration as a closed loop of `clients` clients
    /// (`None`: open).
    pub fn with_clients(mut self, clients: Option<usize>) -> SimConfig {
        self.clients = clients;
        self
    }

    /// The same configuration with other costs.
    pub fn with_costs(mut self, costs: Costs) -> SimConfig {
        self.costs = costs;
        self
    }
}
