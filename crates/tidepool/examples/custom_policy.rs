//! A custom sizing policy: a pure state machine that sees an `Observation`
//! and returns a `Decision`. This one keeps one thread per task waiting in
//! the queue or running, within the pool's bounds, re-deciding every 10 ms.
//!
//! Run with `cargo run --release -p tidepool-rs --example custom_policy`.

use std::time::Duration;

use tidepool::policy::{Decision, Observation, Schedule, SizingPolicy};
use tidepool::Pool;

/// Size the pool to the work in sight: busy threads plus queued tasks.
#[derive(Debug, Default)]
struct WorkInSight;

impl SizingPolicy for WorkInSight {
    fn name(&self) -> &str {
        "work-in-sight"
    }

    fn schedule(&self) -> Schedule {
        Schedule::default().with_every(Duration::from_millis(10))
    }

    fn decide(&mut self, obs: &Observation) -> Decision {
        let want = (obs.busy + obs.queue_len).clamp(obs.min, obs.max);
        Decision::default()
            .with_target(want)
            .with_reason(format!("{} busy + {} queued", obs.busy, obs.queue_len))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(32)
        .policy(WorkInSight)
        .build()?;
    for _ in 0..200 {
        pool.execute(|| std::thread::sleep(Duration::from_millis(5)))?;
    }
    pool.wait_idle();
    for d in pool.decisions().iter().rev().take(3) {
        println!(
            "{:?}: {} -> {} ({})",
            d.at, d.old_target, d.new_target, d.reason
        );
    }
    println!("{} threads created", pool.stats().threads_created);
    Ok(())
}
