//! Contention: the share of the cores other processes take from the
//! workers (module docs of [`super`], point 8; it also turns the short
//! slices of point 7 off). While the workers do not saturate the cores,
//! the time they spend runnable but waiting for a core is time another
//! process holds it; a pool then wins CPU in proportion to its runnable
//! workers, and a backlog is worked off by more of them than the ceiling
//! (sized for cores of its own) allows.

use std::time::Duration;

use super::super::Observation;
use super::{
    cores_busy_workers, utilization, Auto, CORES_BUSY_PROBABILITY, CPU_SATURATED,
    MAX_CONTENTION_STRETCH, MIN_BUSY_FOR_CPU, MIN_THREAD_WINDOW, SEARCH_MAX,
};

impl Auto {
    /// The smoothed share of the workers' wanted CPU time (CPU time plus
    /// run delay) spent waiting for a core held by another process; 0 while
    /// the workers saturate the cores themselves.
    pub fn contention(&self) -> f64 {
        self.contention.value
    }

    /// How much longer the workers' compute takes because of contention:
    /// `1 / (1 − contention)`, at most [`MAX_CONTENTION_STRETCH`].
    pub(super) fn stretch(&self) -> f64 {
        (1.0 / (1.0 - self.contention.value).max(f64::MIN_POSITIVE))
            .clamp(1.0, MAX_CONTENTION_STRETCH)
    }

    /// The ceiling on `cores × stretch` cores: the runnable workers it
    /// takes to win back, under fair sharing, the CPU other processes take.
    /// Equal to [`Auto::ceiling`] without contention.
    pub(super) fn contended_ceiling(&self, ceiling: usize) -> usize {
        let stretch = self.stretch();
        if stretch <= 1.0 {
            return ceiling;
        }
        let cores = (self.cores as f64 * stretch).round() as usize;
        let limit = self.max.min(SEARCH_MAX);
        let contended = cores_busy_workers(
            cores.max(self.cores),
            self.runnable(),
            CORES_BUSY_PROBABILITY,
            limit,
        );
        self.clamp(contended.max(ceiling))
    }

    /// Feed the window's CPU time and run delay into the contention estimate.
    pub(super) fn learn_contention(&mut self, obs: &Observation) {
        if obs.window < MIN_THREAD_WINDOW {
            return;
        }
        let (Some(cpu), Some(delay)) = (obs.worker_cpu_time, obs.run_delay) else {
            return;
        };
        let wanted = cpu + delay;
        if wanted < MIN_BUSY_FOR_CPU {
            return;
        }
        // Workers that hold (nearly) every core wait for each other, not
        // for another process: more of them would only queue for the cores.
        let share = if utilization(obs).is_some_and(|u| u >= CPU_SATURATED) {
            0.0
        } else {
            others_share(cpu, wanted, obs.window, self.cores)
        };
        self.contention.update(share, obs.window);
    }
}

/// The share of the cores other processes held while the workers wanted
/// them: of the `min(runnable, cores)` cores the workers could have used
/// alone (`runnable`: the average number of them running or waiting for a
/// core, `wanted / window`), those they did not get. Run delay past that —
/// more runnable workers than cores, queueing for each other — is their
/// own, not contention (counting it made a burst of many workers stretch
/// its own ceiling).
fn others_share(cpu: Duration, wanted: Duration, window: Duration, cores: usize) -> f64 {
    let window = window.as_secs_f64();
    let usable = (wanted.as_secs_f64() / window).min(cores as f64);
    if usable <= 0.0 {
        return 0.0;
    }
    ((usable - cpu.as_secs_f64() / window) / usable).clamp(0.0, 1.0)
}
