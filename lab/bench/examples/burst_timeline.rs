//! Where a burst into an idle pool spends its time (the `burst-idle`
//! scenario, taken apart).
//!
//! ```text
//! cargo run --release -p tidepool-bench --example burst_timeline -- [IMPL] [BURSTS] [TASKS]
//! ```
//!
//! Each burst: sleep 500 µs (every worker parks), then submit `TASKS` empty
//! tasks (200) from this thread and wait for them. Per burst it records
//! when the last task was submitted, when the first and the last task ran,
//! on which CPU the first one ran, and how many workers ran tasks; it prints
//! the medians over `BURSTS` (1,000) of
//!
//! - `submit`: the first submit to the last (the submitter's own cost,
//!   including the one wake-up it pays),
//! - `gap`: the last submit to the first task's start,
//! - `drain`: the first task's start to the last task's end,
//!
//! and the share of bursts whose first task ran on the CPU the submitter
//! started on, and the share that two or more workers ran.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tidepool_bench::subject::{now_ns, Subject, Visit};
use tidepool_bench::subjects::Impl;
use tidepool_workload::median;

static REMAINING: AtomicUsize = AtomicUsize::new(0);
static FIRST_NS: AtomicU64 = AtomicU64::new(0);
static FIRST_CPU: AtomicU64 = AtomicU64::new(u64::MAX);
static LAST_NS: AtomicU64 = AtomicU64::new(0);
/// Tasks run per worker in the current burst (workers numbered on first use).
static RAN: [AtomicUsize; 16] = [const { AtomicUsize::new(0) }; 16];
static NEXT_WORKER: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static WORKER: usize = NEXT_WORKER.fetch_add(1, Ordering::Relaxed) % RAN.len();
}

/// The CPU the calling thread runs on (`u64::MAX` if unknown).
fn cpu() -> u64 {
    // SAFETY: sched_getcpu has no preconditions; it returns -1 on error.
    let c = unsafe { libc::sched_getcpu() };
    u64::try_from(c).unwrap_or(u64::MAX)
}

/// One burst's times (ns, from its first submit) and where it ran.
struct Burst {
    submitted: u64,
    first: u64,
    last: u64,
    first_on_submitters_cpu: bool,
    workers: usize,
}

struct Timeline {
    bursts: usize,
    tasks: usize,
}

impl Visit for Timeline {
    type Output = Vec<Burst>;

    fn visit<S: Subject>(self, s: &S) -> Vec<Burst> {
        let me = Arc::new(std::thread::current());
        (0..self.bursts)
            .map(|_| {
                std::thread::sleep(Duration::from_micros(500));
                RAN.iter().for_each(|r| r.store(0, Ordering::Relaxed));
                REMAINING.store(self.tasks, Ordering::SeqCst);
                let n = self.tasks;
                let cpu0 = cpu();
                let start = now_ns();
                for _ in 0..n {
                    let waiter = me.clone();
                    s.spawn(move || {
                        WORKER.with(|w| RAN[*w].fetch_add(1, Ordering::Relaxed));
                        let left = REMAINING.fetch_sub(1, Ordering::AcqRel);
                        if left == n {
                            FIRST_NS.store(now_ns(), Ordering::Relaxed);
                            FIRST_CPU.store(cpu(), Ordering::Relaxed);
                        }
                        if left == 1 {
                            LAST_NS.store(now_ns(), Ordering::Release);
                            waiter.unpark();
                        }
                    });
                }
                let submitted = now_ns() - start;
                while REMAINING.load(Ordering::Acquire) != 0 {
                    std::thread::park_timeout(Duration::from_millis(50));
                }
                Burst {
                    submitted,
                    first: FIRST_NS.load(Ordering::Relaxed).saturating_sub(start),
                    last: LAST_NS.load(Ordering::Acquire).saturating_sub(start),
                    first_on_submitters_cpu: FIRST_CPU.load(Ordering::Relaxed) == cpu0,
                    workers: RAN.iter().filter(|r| r.load(Ordering::Relaxed) > 0).count(),
                }
            })
            .collect()
    }
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let which: Impl = args.next().as_deref().unwrap_or("tidepool").parse()?;
    let number = |a: Option<String>, default: usize, what: &str| -> Result<usize, String> {
        match a {
            None => Ok(default),
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
                _ => Err(format!(
                    "{what} must be a whole number from 1 to 1000000, not `{s}`"
                )),
            },
        }
    };
    let bursts = number(args.next(), 1000, "BURSTS")?;
    let tasks = number(args.next(), 200, "TASKS")?;
    let threads = tidepool::sys::cores();
    let runs = which.with(threads, Timeline { bursts, tasks });
    let share = |f: &dyn Fn(&Burst) -> bool| {
        100.0 * runs.iter().filter(|b| f(b)).count() as f64 / runs.len() as f64
    };
    // The median over the bursts of a nanosecond figure, in microseconds.
    let median_us = |f: &dyn Fn(&Burst) -> u64| {
        median(runs.iter().map(|b| f(b) as f64)).unwrap_or(0.0) / 1000.0
    };
    println!(
        "{which}: {bursts} bursts of {tasks}, {threads} threads; medians: submit {:.1} µs, gap {:.1} µs, drain {:.1} µs, whole burst {:.1} µs; first task on the submitter's CPU {:.0}%; two or more workers {:.0}%",
        median_us(&|b| b.submitted),
        median_us(&|b| b.first.saturating_sub(b.submitted)),
        median_us(&|b| b.last.saturating_sub(b.first)),
        median_us(&|b| b.last),
        share(&|b| b.first_on_submitters_cpu),
        share(&|b| b.workers > 1),
    );
    Ok(())
}
