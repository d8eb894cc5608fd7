//! One task's CPU sample: how much of its execution time was compute.
//!
//! A task's execution time splits three ways: compute (its thread's CPU
//! time), time preempted (runnable, waiting for a core: the thread's run
//! delay) and blocking. The first two are not blocking, and more threads
//! would not help them. But a virtual machine loses time the guest's
//! scheduler never sees: while the host runs another guest on our virtual
//! core, or while the guest handles interrupts, the wall clock advances, the
//! thread's CPU clock does not, and no run delay is counted. A 1 ms compute
//! task on a contended machine read as 15 % compute that way, and `auto`
//! grew the pool for CPU-bound work. A thread can only block by giving up its
//! core (a voluntary context switch), so a task during which its thread made
//! none did not block, whatever its clocks say: its sample is all compute.

use std::time::Duration;

use super::record::WorkerRecord;
use crate::sys as os;

/// What a sampled task's thread had used before the task.
pub(crate) struct CpuSample {
    cpu: Duration,
    /// The run delay before the task, when it is measured.
    delay: Option<Duration>,
    /// Voluntary context switches before the task, where the OS counts them.
    switches: Option<u64>,
}

impl CpuSample {
    /// Read the calling thread's counters before a task; `with_delay` also
    /// reads its run delay (a `/proc` read, worth it for long tasks only).
    /// `None` without a thread CPU clock.
    pub(crate) fn start(record: &WorkerRecord, with_delay: bool) -> Option<CpuSample> {
        let delay = if with_delay { record.run_delay() } else { None };
        let switches = os::voluntary_switches();
        let cpu = os::thread_cpu_time()?;
        Some(CpuSample {
            cpu,
            delay,
            switches,
        })
    }

    /// After the task, which ran for `service_ns` on this thread: its compute
    /// and its execution time less the time it spent preempted, in ns.
    pub(crate) fn finish(self, record: &WorkerRecord, service_ns: u64) -> Option<(u64, u64)> {
        let cpu = os::thread_cpu_time()?.saturating_sub(self.cpu);
        let switches = os::voluntary_switches();
        let preempted = match (self.delay, self.delay.and(record.run_delay())) {
            (Some(before), Some(after)) => after.saturating_sub(before),
            _ => Duration::ZERO,
        };
        let blocked = match (self.switches, switches) {
            (Some(before), Some(after)) => after > before,
            _ => true,
        };
        Some(attribute(
            cpu.as_nanos() as u64,
            service_ns,
            preempted.as_nanos() as u64,
            blocked,
        ))
    }
}

/// A task's compute and its execution time less the time it spent
/// preempted (`wanted`), in ns. A task that never gave up its core
/// (`blocked` false) computed all its wanted time.
fn attribute(cpu_ns: u64, service_ns: u64, preempted_ns: u64, blocked: bool) -> (u64, u64) {
    let wanted = service_ns.saturating_sub(preempted_ns);
    if blocked {
        (cpu_ns.min(wanted), wanted)
    } else {
        (wanted, wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_lost_without_a_switch_is_compute() {
        // 1.2 ms of wall time, 0.17 ms on the thread's CPU clock, no run
        // delay and no voluntary switch: the virtual core was taken away,
        // not the task blocked. Measured so on this project's machine.
        assert_eq!(
            attribute(166_000, 1_235_000, 0, false),
            (1_235_000, 1_235_000)
        );
    }

    #[test]
    fn a_task_that_blocked_keeps_its_measured_compute() {
        assert_eq!(
            attribute(300_000, 1_000_000, 200_000, true),
            (300_000, 800_000)
        );
        // The CPU clock never counts more than the wanted time.
        assert_eq!(
            attribute(900_000, 1_000_000, 200_000, true),
            (800_000, 800_000)
        );
    }

    #[test]
    fn a_sleeping_task_reads_as_blocking_and_a_spinning_one_as_compute() {
        let record = WorkerRecord::for_current_thread();
        let timed = |f: &dyn Fn()| {
            let sample = CpuSample::start(&record, true)?;
            let t = std::time::Instant::now();
            f();
            sample.finish(&record, t.elapsed().as_nanos() as u64)
        };
        let Some((cpu, wanted)) = timed(&|| std::thread::sleep(Duration::from_millis(5))) else {
            return; // no thread CPU clock here
        };
        if os::voluntary_switches().is_some() {
            assert!(
                cpu * 2 < wanted,
                "a sleep read as {cpu} of {wanted} ns compute"
            );
        }
        let spin = || {
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_millis(5) {
                std::hint::spin_loop();
            }
        };
        let (cpu, wanted) = timed(&spin).unwrap();
        if os::voluntary_switches().is_some() {
            // Preempted or not, a spin never gives up its core.
            assert_eq!(cpu, wanted);
        }
    }
}
