//! The pool as a user reaches for it: the self-sizing default, priorities,
//! deadlines and cancellation, a join that helps, and `block_in_place`.
//!
//! ```text
//! cargo run -p tidepool-rs --example features
//! ```

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tidepool::policy::Fixed;
use tidepool::{block_in_place, CancelToken, OnFull, Pool, Priority, TaskOptions};

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // The default pool sizes itself: 64 tasks that each sleep 50 ms take
    // far less than 64 × 50 ms / cores.
    let pool = Pool::builder().build()?;
    let started = Instant::now();
    let sleepers: Vec<_> = (0..64)
        .map(|_| pool.submit(|| std::thread::sleep(Duration::from_millis(50))))
        .collect::<Result<_, _>>()?;
    for h in sleepers {
        h.join()?;
    }
    println!(
        "64 sleeps of 50 ms in {:?} on up to {} workers",
        started.elapsed(),
        pool.stats().threads_created
    );

    // A static pool is one call. Hold its only worker so tasks queue up.
    let one = Pool::fixed(1)?;
    let (release, gate) = mpsc::channel::<()>();
    let busy = one.submit(move || gate.recv().unwrap_or(()))?;

    // Priorities: queued High tasks start before Normal ones, Normal
    // before Low.
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for p in [Priority::Low, Priority::Normal, Priority::High] {
        let order = order.clone();
        handles.push(one.submit_with(TaskOptions::new().priority(p), move || {
            order.lock().unwrap().push(p)
        })?);
    }

    // A deadline: not started by then, the task never runs.
    let late = one.submit_with(
        TaskOptions::new().deadline(Instant::now() + Duration::from_millis(10)),
        || unreachable!("started after its deadline"),
    )?;

    // A cancel token shared by a group of tasks.
    let token = CancelToken::new();
    let group: Vec<_> = (0..5)
        .map(|i| one.submit_with(TaskOptions::new().cancel_token(token.clone()), move || i))
        .collect::<Result<_, _>>()?;
    token.cancel();
    for h in group {
        assert!(h.join().unwrap_err().is_cancelled());
    }

    std::thread::sleep(Duration::from_millis(20));
    release.send(())?;
    busy.join()?;
    for h in handles {
        h.join()?;
    }
    assert!(late.join().unwrap_err().is_expired());
    assert_eq!(
        *order.lock().unwrap(),
        [Priority::High, Priority::Normal, Priority::Low]
    );
    one.wait_idle();
    let stats = one.stats();
    println!(
        "priorities ran in order; {} expired, {} cancelled",
        stats.expired, stats.cancelled
    );
    assert_eq!((stats.expired, stats.cancelled), (1, 5));

    // A join that helps: two workers, a queue of two that blocks, and
    // tasks that submit into their own pool and join what they submitted.
    let small = Arc::new(
        Pool::builder()
            .threads(2)
            .queue_capacity(2)
            .on_full(OnFull::Block)
            .build()?,
    );
    let outer: Vec<_> = (0..2u64)
        .map(|i| {
            let inner = small.clone();
            small.submit(move || {
                let parts: Vec<_> = (0..6u64)
                    .map(|j| inner.submit(move || i * 6 + j).unwrap())
                    .collect();
                parts.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
            })
        })
        .collect::<Result<_, _>>()?;
    let total: u64 = outer.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, (0..12).sum());
    println!("nested submit-and-join on 2 workers: sum {total}");

    // block_in_place: two workers blocked for 600 ms, and twenty short
    // tasks still run at once on compensating workers.
    let static2 = Pool::builder()
        .min_threads(2)
        .max_threads(16)
        .policy(Fixed::keep())
        .build()?;
    let (inside, blocked) = mpsc::channel::<()>();
    let long: Vec<_> = (0..2)
        .map(|_| {
            let inside = inside.clone();
            static2.submit(move || {
                block_in_place(|| {
                    inside.send(()).unwrap();
                    std::thread::sleep(Duration::from_millis(600));
                })
            })
        })
        .collect::<Result<_, _>>()?;
    blocked.recv()?;
    blocked.recv()?;
    let started = Instant::now();
    let short: Vec<_> = (0..20)
        .map(|_| static2.submit(|| std::thread::sleep(Duration::from_millis(2))))
        .collect::<Result<_, _>>()?;
    for h in short {
        h.join()?;
    }
    println!(
        "twenty 2 ms tasks beside two blocked workers: {:?}, {} threads created",
        started.elapsed(),
        static2.stats().threads_created
    );
    for h in long {
        h.join()?;
    }
    Ok(())
}
