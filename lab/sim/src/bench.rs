//! The simulator's speed benchmark (`tidepool sim --bench`): three 64-core
//! scenarios from streamed generators, timed in the simulating thread's CPU
//! time, which a busy machine does not inflate.

use std::time::{Duration, Instant};

use tidepool_workload::{GenSpec, Limits};

use crate::config::{ExecutorModel, PoolModel, SimConfig};
use crate::simulate;

/// One benchmark scenario: a generator on a static pool.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// What it measures.
    pub name: &'static str,
    /// The generator spec (streamed).
    pub spec: String,
    /// Cores of the machine.
    pub cores: usize,
    /// Workers of the static pool.
    pub threads: usize,
}

/// The scenarios, `tasks` tasks each: single-slice compute tasks on 64
/// workers; 50/50 compute/sleep tasks in 2 slices on 256 workers; and tasks
/// blocked 99.5% of the time in 8 slices, ~5,000 of them in flight, on 10,000
/// workers. Each is a stable system under the default costs (its queue stays
/// short; a test checks it): a speed figure for an overloaded run would also
/// measure its growing queue. The third blocked 99% until the
/// measured costs (25 µs of CPU per sleep, 29 µs per hand-off) put its load
/// at 63 of the 64 cores and its queue on a steady climb.
pub fn scenarios(tasks: usize) -> Vec<Scenario> {
    vec![
        Scenario {
            name: "compute, 64 cores, fixed:64",
            spec: format!("poisson:rate=50000,n={tasks},service=exp:1ms,free=0,seed=1"),
            cores: 64,
            threads: 64,
        },
        Scenario {
            name: "mixed 50/50 in 2 slices, 64 cores, fixed:256",
            spec: format!("poisson:rate=40000,n={tasks},service=exp:2ms,free=50,seed=1"),
            cores: 64,
            threads: 256,
        },
        Scenario {
            name: "5,000 blocked threads, 64 cores, fixed:10000",
            spec: format!("poisson:rate=100000,n={tasks},service=exp:50ms,free=99.5,seed=1"),
            cores: 64,
            threads: 10_000,
        },
    ]
}

/// What one scenario took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Tasks completed.
    pub tasks: u64,
    /// Events handled.
    pub events: u64,
    /// CPU time of the simulating thread (zero where the OS cannot tell).
    pub cpu: Duration,
    /// Wall-clock time.
    pub wall: Duration,
    /// The longest the pool's queue got: short in a stable run.
    pub max_queue: usize,
}

impl Measured {
    /// Tasks per second of CPU time.
    pub fn tasks_per_s(&self) -> f64 {
        self.tasks as f64 / self.cpu.as_secs_f64().max(1e-9)
    }

    /// Events per second of CPU time.
    pub fn events_per_s(&self) -> f64 {
        self.events as f64 / self.cpu.as_secs_f64().max(1e-9)
    }
}

/// Run `scenario` once, streamed (the count of tasks costs no memory, so
/// the generator's task limit does not apply).
pub fn run(scenario: &Scenario) -> Result<Measured, tidepool_workload::SpecError> {
    let limits = Limits {
        max_tasks: usize::MAX,
        ..Default::default()
    };
    let spec = GenSpec::parse_with(&scenario.spec, &limits)?;
    let mut config = SimConfig::new(
        scenario.cores,
        ExecutorModel::Pool(PoolModel::fixed(scenario.threads)),
    );
    config.keep_decisions = false;
    let cpu = || tidepool::sys::thread_cpu_time().unwrap_or_default();
    let (wall0, cpu0) = (Instant::now(), cpu());
    let out = simulate(spec.stream(), scenario.name, config);
    Ok(Measured {
        tasks: out.result.completed,
        events: out.events,
        cpu: cpu().saturating_sub(cpu0),
        wall: wall0.elapsed(),
        max_queue: out.result.max_queue,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every scenario is a stable system under the default costs: its queue
    /// (after the start, while 10,000 threads come up) does not grow with the
    /// run's length. The 99%-blocked scenario, under the measured
    /// costs, went from a longest queue of ~4,000 at 20,000 tasks to ~13,000
    /// at 200,000.
    #[test]
    fn every_scenario_is_stable_under_the_default_costs() {
        let longest = |tasks: usize| -> Vec<usize> {
            scenarios(tasks)
                .iter()
                .map(|s| {
                    let m = run(s).expect("scenario spec parses");
                    assert_eq!(m.tasks, tasks as u64, "{}", s.name);
                    m.max_queue
                })
                .collect()
        };
        let (short, long) = (longest(20_000), longest(200_000));
        for ((s, a), b) in scenarios(0).iter().zip(short).zip(long) {
            assert!(
                b <= a + a / 2 + 50,
                "{}: longest queue {a} over 20,000 tasks, {b} over 200,000",
                s.name
            );
        }
    }
}
