//! What the machine model charges for what the pool does besides running
//! tasks: starting a thread, waking a parked one, the oversleep of a task's
//! blocked part, the CPU that sleeping and waking take, and the wait of a
//! thread that becomes runnable while every core computes.
//! [`Costs::measure`] times them on this machine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tidepool_workload::median;

/// Delays the model adds (pure delays: they hold no core).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Costs {
    /// From a spawn decision to the new worker taking work.
    pub spawn: Duration,
    /// From a submit waking a parked worker to that worker running.
    pub wake: Duration,
    /// Extra time each sleep of a task's blocked part takes beyond what it
    /// asked (timer slack and the wake-up; the replay's task bodies sleep in
    /// up to 8 slices).
    pub oversleep: Duration,
    /// Longest a thread that becomes runnable (woken, its sleep over, just
    /// started) waits for a core while every core computes: it runs when a
    /// core frees or, at the latest, after this (the scheduler preempts a
    /// running thread for it). Zero: it shares the cores at once (processor
    /// sharing). The mean wake-up latency with every core busy.
    #[serde(default)]
    pub preempt: Duration,
    /// The scheduler's slice (EEVDF's `base_slice_ns`, Linux 6.6+): a
    /// thread that becomes runnable while every core computes lands on one
    /// of the cores (evenly) and waits there for the compute part running
    /// on it to end — RUN_TO_PARITY protects the running thread from
    /// wake-up preemption for its slice — at most this long, and no idle
    /// core pulls it sooner; the replay's driver, woken to spin, too.
    /// Zero: it shares the cores at
    /// once (processor sharing, the validation's model). With `preempt`
    /// also set, `preempt` applies.
    #[serde(default)]
    pub slice: Duration,
    /// How long before each arrival the replay's driver spins on a core
    /// (`ReplayOptions::spin`: it sleeps until then, then spins to the
    /// arrival's instant to submit on time): a compute part of no task that
    /// takes a core from the workers (with `slice`, a spin that lands
    /// behind a running part is cut short by its wait). Zero (the
    /// default): arrivals cost no CPU; `tidepool sim` charges the replay's
    /// spin, as the real runs it is compared with pay it.
    #[serde(default)]
    pub driver: Duration,
    /// CPU a thread spends on each sleep besides sleeping (the system call,
    /// arming the timer, the switches out and back; a VM exit or two on a
    /// virtual machine): charged to the compute before each blocked part,
    /// and to each of the driver's naps.
    #[serde(default)]
    pub sleep_cpu: Duration,
    /// CPU of handing a task to a parked worker, the worker's side: what a
    /// worker that parks between two tasks spends between them (its spin,
    /// yields, the park and the wake-up, the switches): charged to the
    /// task's first compute.
    #[serde(default)]
    pub handoff_cpu: Duration,
}

impl Costs {
    /// No costs: the textbook queueing models the validation runs.
    pub const ZERO: Costs = Costs {
        spawn: Duration::ZERO,
        wake: Duration::ZERO,
        oversleep: Duration::ZERO,
        preempt: Duration::ZERO,
        slice: Duration::ZERO,
        driver: Duration::ZERO,
        sleep_cpu: Duration::ZERO,
        handoff_cpu: Duration::ZERO,
    };

    /// Measured on the project's 2-core machine (docs/sim.md): spawn and
    /// wake by `tidepool sim --measure-costs` at load average 48; the
    /// oversleep, the sleeps' and the hand-offs' CPU in the real replay on
    /// the quiet machine (`examples/wait_probe.rs`); no
    /// preemption (its mean follows the load) and no driver (not a cost of
    /// the pool): the default.
    pub const CALIBRATED: Costs = Costs {
        spawn: Duration::from_micros(42),
        wake: Duration::from_micros(18),
        // The replay's own sleeps on the quiet machine (`wait_probe`,
        // processing
        // less CPU, the sleeps asked and the wait for a core, per sleep):
        // median 61 µs of 10 runs (57.6–64.0). An isolated 100 µs sleep
        // at load 48 gave 89 µs.
        oversleep: Duration::from_micros(61),
        // Not in the default: its mean swings from hundreds of µs to tens
        // of ms with the machine's load (docs/notebook/sim.md); give
        // `--preempt` as measured when the real runs are.
        preempt: Duration::ZERO,
        // `sysctl_sched_base_slice` in /sys/kernel/debug/sched/debug on this
        // machine (Linux 6.18, 2 CPUs: 0.7 ms × (1 + ilog2 2)); docs/sim.md.
        slice: Duration::from_micros(1_400),
        driver: Duration::ZERO,
        // Thread CPU time per sleep of a task body in the real replay on
        // the quiet machine (`wait_probe`, the same 10 runs): a task's CPU
        // from start to finish, less its compute and the busy loop's excess
        // CPU in the same runs' `cpu` workload (1.7–3.4%), per sleep: median
        // 25 µs (18.7–35.7; docs/notebook/sim.md). An isolated
        // 100 µs sleep at load 8–22 gave 14 µs.
        sleep_cpu: Duration::from_micros(25),
        // Measured in the real replay (`examples/wait_probe.rs`): a worker's
        // CPU between two tasks when it parked (its spin, yields, park and
        // wake-up), median 29 µs of 14 quiet runs
        // (22.3–34.1; docs/notebook/sim.md). The model charges a
        // worker nothing between tasks otherwise, so the spin before the
        // park (~10 µs, what one that takes the next task spinning pays)
        // is in it; without it the figure is 20 µs. The isolated condvar
        // ping-pong of `Costs::measure` (6 µs) has no spin,
        // yields or pool.
        handoff_cpu: Duration::from_micros(29),
    };

    /// Time the costs here, `rounds` times each: medians of the first
    /// three, the mean of `preempt` (its tail is what it models); about a
    /// second for 50 rounds.
    pub fn measure(rounds: usize) -> Costs {
        let rounds = rounds.max(1);
        let median_of = |once: fn() -> Duration| {
            let ns = median((0..rounds).map(|_| once().as_nanos() as f64));
            Duration::from_nanos(ns.unwrap_or(0.0).round() as u64)
        };
        Costs {
            spawn: median_of(spawn_once),
            wake: median_of(wake_once),
            oversleep: median_of(oversleep_once),
            preempt: preempt_mean(rounds),
            slice: base_slice().unwrap_or(Costs::CALIBRATED.slice),
            driver: Duration::ZERO,
            sleep_cpu: sleep_cpu(rounds * 4),
            handoff_cpu: handoff_cpu(rounds * 40),
        }
    }
}

impl Default for Costs {
    fn default() -> Self {
        Costs::CALIBRATED
    }
}

/// Spawn a thread and time until its first instruction.
fn spawn_once() -> Duration {
    let t0 = Instant::now();
    std::thread::spawn(move || t0.elapsed())
        .join()
        .unwrap_or_default()
}

/// Park a thread on a condvar, notify it, and time until it runs.
fn wake_once() -> Duration {
    let pair = Arc::new((Mutex::new(None::<Instant>), Condvar::new()));
    let theirs = Arc::clone(&pair);
    let waiter = std::thread::spawn(move || {
        let (m, cv) = &*theirs;
        let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(t) = *g {
                return t.elapsed();
            }
            g = cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    });
    // Let it park first.
    std::thread::sleep(Duration::from_millis(2));
    let (m, cv) = &*pair;
    *m.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    cv.notify_one();
    waiter.join().unwrap_or_default()
}

/// The mean wake-up latency of a parked thread while one spinning thread
/// per core keeps every core busy (at the caller's priority, as a pool's
/// workers computing tasks).
fn preempt_mean(rounds: usize) -> Duration {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..cores)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    // Let them take the cores.
    std::thread::sleep(Duration::from_millis(20));
    let total: Duration = (0..rounds).map(|_| wake_once()).sum();
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        let _ = s.join();
    }
    total / u32::try_from(rounds).unwrap_or(u32::MAX)
}

/// The scheduler's base slice, as the kernel reports it: debugfs's
/// `sched/base_slice_ns`, or the `sysctl_sched_base_slice` line (ms) of
/// `sched/debug` (readable where the former is not, as on this machine);
/// `None` where neither is (not Linux, no debugfs, not root).
fn base_slice() -> Option<Duration> {
    let dir = std::path::Path::new("/sys/kernel/debug/sched");
    if let Ok(s) = std::fs::read_to_string(dir.join("base_slice_ns")) {
        if let Ok(ns) = s.trim().parse::<u64>() {
            return Some(Duration::from_nanos(ns));
        }
    }
    parse_base_slice(&std::fs::read_to_string(dir.join("debug")).ok()?)
}

/// The `.sysctl_sched_base_slice : 1.400000` line (milliseconds) of
/// `/sys/kernel/debug/sched/debug`.
fn parse_base_slice(debug: &str) -> Option<Duration> {
    let line = debug
        .lines()
        .find(|l| l.trim_start().starts_with(".sysctl_sched_base_slice"))?;
    let ms: f64 = line.split(':').nth(1)?.trim().parse().ok()?;
    (ms.is_finite() && ms > 0.0 && ms < 1e3).then(|| Duration::from_secs_f64(ms / 1e3))
}

fn thread_cpu() -> Duration {
    tidepool::sys::thread_cpu_time().unwrap_or_default()
}

/// Thread CPU time per 100 µs sleep, over `n` sleeps (zero where the OS
/// has no thread CPU clock).
fn sleep_cpu(n: usize) -> Duration {
    let n = n.max(1);
    let c0 = thread_cpu();
    for _ in 0..n {
        std::thread::sleep(Duration::from_micros(100));
    }
    thread_cpu().saturating_sub(c0) / u32::try_from(n).unwrap_or(u32::MAX)
}

/// CPU time of both threads per hand-off, over `n` hand-offs of a token
/// between two threads through a condvar (as a submit wakes a worker).
fn handoff_cpu(n: usize) -> Duration {
    let rounds = u64::try_from(n.max(2) / 2).unwrap_or(u64::MAX);
    let pair = Arc::new((Mutex::new(0u64), Condvar::new()));
    let theirs = Arc::clone(&pair);
    // The token is odd while it is the partner's turn.
    let partner = std::thread::spawn(move || take_turns(&theirs, 1, rounds));
    let mine = take_turns(&pair, 0, rounds);
    let total = mine + partner.join().unwrap_or_default();
    total / u32::try_from(2 * rounds).unwrap_or(u32::MAX)
}

/// One side of [`handoff_cpu`]'s ping-pong: pass the token on whenever its
/// parity is `turn`, wait otherwise, until both sides had `rounds` turns.
/// Returns this thread's CPU time.
fn take_turns(pair: &(Mutex<u64>, Condvar), turn: u64, rounds: u64) -> Duration {
    let c0 = thread_cpu();
    let (m, cv) = pair;
    let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
    while *g < 2 * rounds {
        if *g % 2 == turn {
            *g += 1;
            cv.notify_one();
        } else {
            g = cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
    drop(g);
    thread_cpu().saturating_sub(c0)
}

/// Sleep 1 ms on a fresh thread (default timer slack, like a worker) and
/// time the excess.
fn oversleep_once() -> Duration {
    std::thread::spawn(|| {
        let asked = Duration::from_millis(1);
        let t0 = Instant::now();
        std::thread::sleep(asked);
        t0.elapsed().saturating_sub(asked)
    })
    .join()
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_costs_are_positive_and_bounded() {
        let c = Costs::measure(3);
        // A sleep never returns early; nothing here takes a second.
        for d in [
            c.spawn,
            c.wake,
            c.oversleep,
            c.preempt,
            c.slice,
            c.sleep_cpu,
            c.handoff_cpu,
        ] {
            assert!(d < Duration::from_secs(1), "{c:?}");
        }
        assert!(c.spawn > Duration::ZERO && c.wake > Duration::ZERO, "{c:?}");
    }

    #[test]
    fn the_base_slice_is_read_from_the_schedulers_debug_file() {
        let debug = "Sched Debug Version: v0.11, 6.18.44\n\nsysctl_sched\n  \
                     .sysctl_sched_base_slice                 : 1.400000\n  \
                     .sysctl_sched_features                   : 99674079\n";
        assert_eq!(parse_base_slice(debug), Some(Duration::from_micros(1_400)));
        assert_eq!(parse_base_slice("nothing here"), None);
        assert_eq!(parse_base_slice(".sysctl_sched_base_slice : -1"), None);
        assert_eq!(parse_base_slice(".sysctl_sched_base_slice : x"), None);
    }
}
