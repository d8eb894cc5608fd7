//! # tidepool-sim
//!
//! Virtual time for tidepool: a discrete-event simulator that runs the same
//! sizing policies, through the same control rules (`tidepool::control`), on
//! a modelled machine of any size — 2 cores or 256, ten thousand threads —
//! in seconds and deterministically, and that is validated against
//! closed-form queueing results ([`validate`]).
//!
//! | module | what |
//! |---|---|
//! | `arrivals` | open-loop arrivals, or a closed loop of clients that think between answers |
//! | [`bench`](mod@bench) | the speed benchmark's scenarios (`tidepool sim --bench`) |
//! | [`config`] | the machine, the executor (a pool and its policy, or a thread per request), what to measure |
//! | [`costs`] | thread start, wake-up, oversleep and preemption delays, the scheduler's slice, the CPU of sleeps, hand-offs and the replay's driver; measured on this machine |
//! | `cpu` | the cores: processor sharing with a virtual clock |
//! | `events` | the event calendar, ordered by (time, insertion) |
//! | [`load`] | a workload's offered load scaled `k`-fold by shifted copies (a closed loop: `k` times the clients) |
//! | `model` | the pool and its workers, driven by `tidepool::control` |
//! | [`outcome`] | the run's [`RunResult`](tidepool_workload::RunResult), Little's law, steady-state tallies |
//! | `wheel` | the calendar's timing wheel |
//! | [`validate`] | closed forms (Erlang B/C, M/M/c/K, M/M/∞, Pollaczek–Khinchine, M/M/1-PS) and the validation table |
//!
//! ```
//! use tidepool::policy::PolicySpec;
//! use tidepool_sim::{simulate, ExecutorModel, SimConfig};
//! use tidepool_workload::GenSpec;
//!
//! let spec: GenSpec = "poisson:rate=20000,service=exp:1ms,n=20000,free=50".parse().unwrap();
//! let executor = ExecutorModel::for_spec(&PolicySpec::parse("auto").unwrap(), 1, 1000);
//! let out = simulate(spec.stream(), &spec.to_string(), SimConfig::new(64, executor));
//! assert_eq!(out.result.completed, 20_000);
//! assert!(out.littles_law.holds());
//! ```

mod arrivals;
pub mod bench;
pub mod config;
pub mod costs;
mod cpu;
mod events;
pub mod load;
mod model;
pub mod outcome;
pub mod validate;
mod wheel;

pub use config::{ExecutorModel, PoolModel, SimConfig};
pub use costs::Costs;
pub use outcome::{Bin, LittlesLaw, SimOutcome, Steady};

use tidepool_workload::TaskSpec;

/// Run `tasks` (a trace's tasks or a generator's stream) through the
/// configured executor and machine, to the last task's completion; with
/// [`SimConfig::clients`] set, as a closed loop (start delays are think
/// times, as in [`Trace::clients`](tidepool_workload::Trace::clients)). Memory
/// grows with the tasks and threads in flight, not with the stream's length
/// (unless `keep_records` is set). The same inputs give the same outcome.
pub fn simulate(
    tasks: impl IntoIterator<Item = TaskSpec>,
    workload: &str,
    config: SimConfig,
) -> SimOutcome {
    let clients = config.clients;
    model::Sim::new(config).run(tasks.into_iter(), workload, clients)
}
