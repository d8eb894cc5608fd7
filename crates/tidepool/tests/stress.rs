//! Concurrent submit / resize / shutdown_now from several threads: every
//! accepted task runs exactly once or comes back from `shutdown_now`.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tidepool::{OnFull, Pool, QueueFlavor, SubmitError};

const SUBMITTERS: usize = 3;

fn run_round(flavor: QueueFlavor, capacity: Option<usize>, seed: u64, per_submitter: usize) {
    #[allow(non_snake_case)]
    let PER_SUBMITTER = per_submitter;
    let mut builder = Pool::builder()
        .min_threads(1)
        .max_threads(6)
        .initial_threads(3)
        .keep_alive(Duration::from_millis(1))
        .queue(flavor)
        .on_full(OnFull::Block);
    if let Some(c) = capacity {
        builder = builder.queue_capacity(c);
    }
    let pool = Arc::new(builder.build().unwrap());
    let runs: Arc<Vec<AtomicU8>> = Arc::new(
        (0..SUBMITTERS * PER_SUBMITTER)
            .map(|_| AtomicU8::new(0))
            .collect(),
    );
    let accepted: Arc<Vec<AtomicBool>> = Arc::new(
        (0..SUBMITTERS * PER_SUBMITTER)
            .map(|_| AtomicBool::new(false))
            .collect(),
    );
    let submitted = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));

    let submitters: Vec<_> = (0..SUBMITTERS)
        .map(|s| {
            let (pool, runs, accepted, submitted) = (
                pool.clone(),
                runs.clone(),
                accepted.clone(),
                submitted.clone(),
            );
            std::thread::spawn(move || {
                for i in 0..PER_SUBMITTER {
                    let id = s * PER_SUBMITTER + i;
                    let runs = runs.clone();
                    let job = move || {
                        runs[id].fetch_add(1, Ordering::SeqCst);
                    };
                    let result = if i % 3 == 0 {
                        pool.submit(job).map(drop).map_err(SubmitError::from)
                    } else {
                        pool.execute(job).map_err(SubmitError::from)
                    };
                    match result {
                        Ok(()) => {
                            accepted[id].store(true, Ordering::SeqCst);
                            submitted.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(SubmitError::ShutDown) => return,
                        Err(e) => panic!("unexpected {e}"),
                    }
                }
            })
        })
        .collect();

    let resizer = {
        let (pool, stop) = (pool.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut x = seed;
            while !stop.load(Ordering::SeqCst) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                pool.resize((x % 7) as usize);
                std::thread::yield_now();
            }
        })
    };

    // Shut down once part of the work is in (a different part each round).
    let part = 1 + (seed % 5) as usize;
    while submitted.load(Ordering::SeqCst) < SUBMITTERS * PER_SUBMITTER * part / 6 {
        std::thread::yield_now();
    }
    let pending = pool.shutdown_now();
    stop.store(true, Ordering::SeqCst);
    for t in submitters {
        t.join().unwrap();
    }
    resizer.join().unwrap();
    let returned = pending.len();
    for task in pending {
        task.run();
    }

    let mut ran = 0;
    for id in 0..runs.len() {
        let n = runs[id].load(Ordering::SeqCst);
        let was_accepted = accepted[id].load(Ordering::SeqCst);
        assert!(n <= 1, "task {id} ran {n} times");
        assert_eq!(
            n == 1,
            was_accepted,
            "task {id}: accepted={was_accepted} but ran {n} times ({flavor}, {capacity:?})"
        );
        ran += n as usize;
    }
    assert_eq!(ran, submitted.load(Ordering::SeqCst));
    assert!(returned <= ran);
    assert_eq!(pool.live_threads(), 0);
}

#[test]
fn nothing_lost_nothing_duplicated() {
    for (i, flavor) in [
        QueueFlavor::LockFree,
        QueueFlavor::Mutex,
        QueueFlavor::Spin,
        QueueFlavor::Hybrid {
            attempts: 3,
            sleep: Duration::from_micros(20),
        },
    ]
    .into_iter()
    .enumerate()
    {
        run_round(flavor, None, 0x9e37_79b9 + i as u64, 20_000);
        run_round(flavor, Some(64), 0x7f4a_7c15 + i as u64, 20_000);
    }
}

#[test]
fn many_short_races_with_shutdown_now() {
    // Short rounds put many submits right at the moment of shutdown.
    for round in 0..40u64 {
        run_round(QueueFlavor::LockFree, None, round * 7919 + 1, 1_000);
    }
}

#[test]
fn graceful_shutdown_under_concurrent_submit_runs_every_accepted_task() {
    for round in 0..5 {
        let pool = Arc::new(Pool::builder().threads(2).build().unwrap());
        let ran = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let submitters: Vec<_> = (0..3)
            .map(|_| {
                let (pool, ran, accepted) = (pool.clone(), ran.clone(), accepted.clone());
                std::thread::spawn(move || loop {
                    let ran = ran.clone();
                    match pool.execute(move || {
                        ran.fetch_add(1, Ordering::SeqCst);
                    }) {
                        Ok(()) => {
                            accepted.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(_) => return,
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(5 + round));
        pool.shutdown();
        for t in submitters {
            t.join().unwrap();
        }
        assert_eq!(ran.load(Ordering::SeqCst), accepted.load(Ordering::SeqCst));
    }
}

/// A worker that is spinning for work when the pool shrinks leaves instead of
/// taking the task its submitter counted on it for; the task must reach a
/// parked worker at once, not wait for the next submit or a keep-alive (an
/// hour here). Each task is submitted alone, so nothing else could rescue it.
/// The race itself is narrow (the loom model
/// `loom_a_leaving_searcher_hands_the_task_on` catches it every time); this
/// test exercises shrinking under submits with nothing to mask a stranding.
#[test]
fn a_task_is_never_stranded_by_a_shrinking_pool() {
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(4)
        .initial_threads(4)
        .keep_alive(Duration::from_secs(3600))
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let resizer = {
        let (pool, stop) = (pool.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 1;
            while !stop.load(Ordering::Relaxed) {
                n = if n == 1 { 4 } else { 1 };
                pool.resize(n);
                std::thread::yield_now();
            }
        })
    };
    for i in 0..20_000u32 {
        let handle = pool.submit(move || i).unwrap();
        // Far beyond any scheduling delay: a stranded task waits an hour.
        match handle.join_timeout(Duration::from_secs(60)) {
            Ok(result) => assert_eq!(result.unwrap(), i),
            Err(_) => panic!("task {i} was stranded in the queue"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    resizer.join().unwrap();
}
