//! Per-task options: priorities, deadlines, cancel tokens.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tidepool::{CancelToken, JoinHandle, OnFull, Pool, Priority, SubmitError, TaskOptions};

/// A one-worker pool whose worker is busy until the returned sender is
/// used (or dropped).
fn held_busy() -> (Pool, mpsc::Sender<()>, JoinHandle<()>) {
    let pool = Pool::fixed(1).unwrap();
    let (release, gate) = mpsc::channel::<()>();
    let (started, running) = mpsc::channel::<()>();
    let busy = pool
        .submit(move || {
            started.send(()).unwrap();
            let _ = gate.recv();
        })
        .unwrap();
    running.recv().unwrap();
    (pool, release, busy)
}

#[test]
fn higher_priorities_start_first_and_equal_ones_keep_their_order() {
    let (pool, release, busy) = held_busy();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..40 {
        for p in [Priority::Low, Priority::Normal, Priority::High] {
            let order = order.clone();
            let options = TaskOptions::new().priority(p);
            handles.push(
                pool.submit_with(options, move || order.lock().unwrap().push((p, i)))
                    .unwrap(),
            );
        }
    }
    assert_eq!(pool.stats().queue_len, 120);
    release.send(()).unwrap();
    busy.join().unwrap();
    for h in handles {
        h.join().unwrap();
    }
    let order = order.lock().unwrap();
    let mut expected = Vec::new();
    for p in [Priority::High, Priority::Normal, Priority::Low] {
        expected.extend((0..40).map(|i| (p, i)));
    }
    assert_eq!(*order, expected);
}

#[test]
fn tasks_not_started_by_their_deadline_never_run() {
    let pool = Pool::fixed(1).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let long = pool
        .submit(|| std::thread::sleep(Duration::from_millis(120)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_millis(30);
    let handles: Vec<_> = (0..10)
        .map(|_| {
            let ran = ran.clone();
            pool.submit_with(TaskOptions::new().deadline(deadline), move || {
                ran.fetch_add(1, SeqCst);
            })
            .unwrap()
        })
        .collect();
    long.join().unwrap();
    for h in handles {
        let e = h.join().unwrap_err();
        assert!(e.is_expired(), "{e}");
        assert!(!e.is_cancelled());
    }
    pool.wait_idle();
    assert_eq!(ran.load(SeqCst), 0);
    assert_eq!(pool.stats().expired, 10);
}

#[test]
fn cancelling_a_token_drops_every_queued_task_that_carries_it() {
    let (pool, release, busy) = held_busy();
    let token = CancelToken::new();
    let ran = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..20)
        .map(|_| {
            let ran = ran.clone();
            let options = TaskOptions::new().cancel_token(token.clone());
            pool.submit_with(options, move || {
                ran.fetch_add(1, SeqCst);
            })
            .unwrap()
        })
        .collect();
    let untouched = pool.submit(|| 7).unwrap();
    token.cancel();
    // At once, while the worker is still busy.
    for h in handles {
        assert!(h.join().unwrap_err().is_cancelled());
    }
    release.send(()).unwrap();
    busy.join().unwrap();
    assert_eq!(untouched.join().unwrap(), 7);
    pool.wait_idle();
    assert_eq!(ran.load(SeqCst), 0);
    assert_eq!(pool.stats().cancelled, 20);
}

#[test]
fn a_running_task_watches_its_own_token() {
    let pool = Pool::fixed(1).unwrap();
    let token = CancelToken::new();
    let mine = token.clone();
    let (started, running) = mpsc::channel::<()>();
    let h = pool
        .submit_with(TaskOptions::new().cancel_token(token.clone()), move || {
            started.send(()).unwrap();
            let mut spins = 0u64;
            while !mine.is_cancelled() {
                spins += 1;
                std::thread::yield_now();
            }
            spins
        })
        .unwrap();
    running.recv().unwrap();
    token.cancel();
    assert!(h.join().is_ok(), "a running task is never interrupted");
    assert_eq!(pool.stats().cancelled, 0);
}

#[test]
fn execute_with_honours_the_token_and_the_deadline() {
    let (pool, release, busy) = held_busy();
    let token = CancelToken::new();
    let ran = Arc::new(AtomicUsize::new(0));
    for i in 0..4 {
        let ran = ran.clone();
        let options = if i % 2 == 0 {
            TaskOptions::new().cancel_token(token.clone())
        } else {
            TaskOptions::new().deadline(Instant::now())
        };
        pool.execute_with(options, move || {
            ran.fetch_add(1, SeqCst);
        })
        .unwrap();
    }
    token.cancel();
    release.send(()).unwrap();
    busy.join().unwrap();
    pool.wait_idle();
    assert_eq!(ran.load(SeqCst), 0);
    let s = pool.stats();
    assert_eq!((s.cancelled, s.expired), (2, 2));
}

#[test]
fn a_token_cancelled_before_submit_cancels_at_once() {
    let pool = Pool::fixed(1).unwrap();
    let token = CancelToken::new();
    token.cancel();
    let h = pool
        .submit_with(TaskOptions::new().cancel_token(token), || 1)
        .unwrap();
    assert!(h.join().unwrap_err().is_cancelled());
}

#[test]
fn a_full_bounded_queue_refuses_prioritised_tasks_at_once() {
    let pool = Pool::builder()
        .threads(1)
        .queue_capacity(2)
        .on_full(OnFull::Block)
        .build()
        .unwrap();
    let (release, gate) = mpsc::channel::<()>();
    let (started, running) = mpsc::channel::<()>();
    pool.execute(move || {
        started.send(()).unwrap();
        let _ = gate.recv();
    })
    .unwrap();
    running.recv().unwrap();
    let high = || TaskOptions::new().priority(Priority::High);
    pool.submit_with(high(), || 1).unwrap();
    pool.submit_with(high(), || 2).unwrap();
    let refused = pool.submit_with(high(), || 3).unwrap_err();
    assert_eq!(*refused.error(), SubmitError::Full);
    assert_eq!(refused.into_inner()(), 3);
    release.send(()).unwrap();
}

#[test]
fn default_options_are_the_plain_path() {
    let pool = Pool::fixed(2).unwrap();
    assert_eq!(
        pool.submit_with(TaskOptions::new(), || 5)
            .unwrap()
            .join()
            .unwrap(),
        5
    );
    pool.execute_with(TaskOptions::default(), || {}).unwrap();
    pool.wait_idle();
    let s = pool.stats();
    assert_eq!((s.completed, s.cancelled, s.expired), (2, 0, 0));
}
