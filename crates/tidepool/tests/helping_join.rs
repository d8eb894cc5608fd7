//! A join that helps: a task that submits into its own small pool and joins
//! what it submitted finishes, because a join on a worker runs a task that
//! has not started right there.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use tidepool::{OnFull, Pool};

/// Run `f` on a thread; fail the test if it takes longer than `limit`
/// instead of hanging.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("did not finish within {limit:?}: deadlocked"))
}

#[test]
fn nested_submit_and_join_on_two_workers_with_a_full_queue_finishes() {
    let sum = within(Duration::from_secs(20), || {
        let pool = Arc::new(
            Pool::builder()
                .threads(2)
                .queue_capacity(2)
                .on_full(OnFull::Block)
                .build()
                .unwrap(),
        );
        let outer: Vec<_> = (0..2u64)
            .map(|i| {
                let inner_pool = pool.clone();
                pool.submit(move || {
                    let handles: Vec<_> = (0..6u64)
                        .map(|j| {
                            inner_pool
                                .submit(move || {
                                    std::thread::sleep(Duration::from_millis(2));
                                    i * 6 + j
                                })
                                .unwrap()
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
                })
                .unwrap()
            })
            .collect();
        outer.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(sum, (0..12).sum());
}

#[test]
fn a_join_on_a_worker_runs_a_queued_task_right_there() {
    // One worker, held by the outer task: the inner task can only run if
    // the join runs it on the joining thread.
    let pool = Arc::new(Pool::fixed(1).unwrap());
    let inner_pool = pool.clone();
    let outer = pool
        .submit(move || {
            let me = std::thread::current().id();
            let h = inner_pool
                .submit(move || std::thread::current().id())
                .unwrap();
            (
                me,
                h.join_timeout(Duration::from_secs(20))
                    .ok()
                    .map(|r| r.unwrap()),
            )
        })
        .unwrap();
    let (me, ran_on) = within(Duration::from_secs(20), move || outer.join().unwrap());
    assert_eq!(ran_on, Some(me));
}

#[test]
fn a_task_run_by_its_joiner_does_not_run_again() {
    let runs = Arc::new(AtomicUsize::new(0));
    let pool = Arc::new(Pool::fixed(1).unwrap());
    let (inner_pool, counted) = (pool.clone(), runs.clone());
    pool.submit(move || {
        let h = inner_pool
            .submit(move || counted.fetch_add(1, SeqCst))
            .unwrap();
        h.join().unwrap()
    })
    .unwrap()
    .join()
    .unwrap();
    // The queued copy has been reached (and skipped) once the pool is idle.
    pool.wait_idle();
    assert_eq!(runs.load(SeqCst), 1);
}

#[test]
fn a_worker_waiting_on_a_running_task_counts_as_blocked() {
    let pool = Arc::new(
        Pool::builder()
            .min_threads(2)
            .max_threads(4)
            .initial_threads(2)
            .policy(tidepool::policy::Fixed::keep())
            .build()
            .unwrap(),
    );
    let (started, running) = mpsc::channel::<()>();
    let (release, gate) = mpsc::channel::<()>();
    let long = pool
        .submit(move || {
            started.send(()).unwrap();
            gate.recv().unwrap();
        })
        .unwrap();
    running.recv().unwrap();
    let waiter = pool.submit(move || long.join().unwrap()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while pool.stats().blocked_threads != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "never counted blocked"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    release.send(()).unwrap();
    waiter.join().unwrap();
    assert_eq!(pool.stats().blocked_threads, 0);
}
