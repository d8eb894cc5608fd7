//! tidepool as a rayon or tokio user would write it: a cloneable `Pool`
//! handle shared by threads, `scope` for borrowing parallelism, named
//! threads with hooks, a panic handler, cancellation, caller-runs for a
//! refused task, a timed shutdown, and errors carried by `anyhow` with `?`.
//!
//! Run with `cargo run -p tidepool-rs --example rayon_tokio_user`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tidepool::{OnFull, Pool};

fn main() -> anyhow::Result<()> {
    let started = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicUsize::new(0));
    let (s, t) = (started.clone(), stopped.clone());
    let pool = Pool::builder()
        .min_threads(2)
        .max_threads(8)
        .policy_spec("auto")?
        .thread_name(|i| format!("demo-{i}"))
        .stack_size(512 * 1024)
        .on_thread_start(move || {
            s.fetch_add(1, Ordering::Relaxed);
        })
        .on_thread_stop(move || {
            t.fetch_add(1, Ordering::Relaxed);
        })
        .panic_handler(|panic| eprintln!("a background task panicked: {}", panic.message()))
        .build()
        .context("building the pool")?;

    // A `Pool` is a cheap handle: clone it into threads, no `Arc` needed.
    let producers: Vec<_> = (0..3u64)
        .map(|p| {
            let pool = pool.clone();
            std::thread::spawn(move || -> anyhow::Result<u64> {
                let handles = (0..100u64)
                    .map(|i| pool.submit(move || p * 1000 + i))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut sum = 0;
                for h in handles {
                    sum += h.join()?; // JoinError is Send + Sync: `?` into anyhow
                }
                Ok(sum)
            })
        })
        .collect();
    let mut total = 0;
    for p in producers {
        total += p.join().expect("producer thread")?;
    }
    println!("three producers summed {total}");

    // `scope`: tasks borrow from this stack frame, as with rayon::scope.
    let words = ["tide", "pool", "scoped", "tasks", "borrow"];
    let mut lengths = [0usize; 5];
    pool.scope(|s| {
        for (word, len) in words.iter().zip(lengths.iter_mut()) {
            s.spawn(move || *len = word.len());
        }
    });
    println!("lengths {lengths:?}");

    // A panic in a task without a handle goes to the panic handler.
    pool.execute(|| panic!("deliberate, for the demo"))?;

    // Cancel a task that has not started: it never runs. (Whether it has
    // started depends on the free workers; `cancel` says which happened.)
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = std::sync::Mutex::new(gate);
    let held = pool.submit(move || {
        let _ = gate.lock().unwrap().recv();
    })?;
    let maybe = pool.submit(|| "ran")?;
    let cancelled = maybe.cancel();
    println!(
        "cancel() {}",
        if cancelled {
            "stopped the task before it ran"
        } else {
            "was too late: the task had started"
        }
    );
    match maybe.join() {
        Ok(v) => println!("the task {v}"),
        Err(e) if e.is_cancelled() => println!("join: {e}"),
        Err(e) => return Err(e.into()),
    }

    // Java's CallerRuns: a pool that rejects when its queue is full hands
    // the refused task back from the plain `submit`, to run right here.
    let small = Pool::builder()
        .threads(1)
        .queue_capacity(2)
        .on_full(OnFull::Reject)
        .build()?;
    let (mut sum, mut ran_here, mut handles) = (0u64, 0, Vec::new());
    for i in 0..50u64 {
        match small.submit(move || i * i) {
            Ok(handle) => handles.push(handle),
            Err(rejected) => {
                sum += rejected.into_inner()();
                ran_here += 1;
            }
        }
    }
    let in_pool = handles.len();
    for h in handles {
        sum += h.join()?;
    }
    anyhow::ensure!(sum == (0..50u64).map(|i| i * i).sum::<u64>(), "lost a task");
    println!("caller-runs: {ran_here} ran here, {in_pool} in the pool, none lost");

    // A timed shutdown: the held task is still running, so it reports false.
    let finished = pool.shutdown_timeout(Duration::from_millis(100));
    println!("shutdown_timeout(100ms): every task finished in time? {finished}");
    release.send(()).ok();
    held.join()?;
    println!(
        "threads started {}, stopped so far {}",
        started.load(Ordering::Relaxed),
        stopped.load(Ordering::Relaxed)
    );
    Ok(())
}
