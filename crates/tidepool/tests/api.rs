//! The public API as a rayon, tokio or Java user expects it: errors that work
//! with `?`, a cloneable handle, thread hooks, cancellation, timed shutdown,
//! rejected tasks handed back, runtime limits, scoped tasks, policy specs.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use tidepool::{JoinError, OnFull, Pool, Rejected, SubmitError};

fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn every_error_is_send_sync_static() {
    assert_error::<JoinError>();
    assert_error::<SubmitError>();
    assert_error::<tidepool::BuildError>();
    assert_error::<tidepool::policy::SpecError>();
    // A task that is `Send` but not `Sync` (it holds a `Cell`) still makes
    // a `Sync` error: checked at compile time, for a named type and for the
    // closures that the plain and `try_` calls hand back.
    assert_error::<Rejected<std::cell::Cell<u32>>>();
    assert_error::<Rejected<Box<dyn FnOnce() + Send>>>();
    fn sync_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    let pool = Pool::new(1).unwrap();
    pool.shutdown();
    let cell = std::cell::Cell::new(1);
    let rejected: Rejected<_> = pool.execute(move || cell.set(2)).unwrap_err();
    sync_error(&rejected);
    let cell = std::cell::Cell::new(1);
    let rejected: Rejected<_> = pool.try_submit(move || cell.get()).unwrap_err();
    sync_error(&rejected);
    assert_eq!(rejected.into_inner()(), 1);
}

/// `Debug` and `Display` show the refusal, never the task (which need not
/// be `Debug`), and a `{:#}` chain does not repeat the message.
#[test]
fn a_rejection_prints_its_reason_once() {
    let pool = Pool::new(1).unwrap();
    pool.shutdown();
    let rejected = pool.submit(|| 1).unwrap_err();
    assert_eq!(rejected.to_string(), "the pool is shut down");
    assert_eq!(format!("{rejected:?}"), "Rejected { error: ShutDown, .. }");
    let e = anyhow::Error::from(rejected);
    assert_eq!(format!("{e:#}"), "the pool is shut down");
}

fn with_anyhow(pool: &Pool) -> anyhow::Result<u32> {
    let v = pool.submit(|| 41)?.join()?;
    let boxed: Result<u32, Box<dyn std::error::Error + Send + Sync>> =
        (|| Ok(pool.submit(|| 1)?.join()?))();
    Ok(v + boxed.map_err(anyhow::Error::from_boxed)?)
}

#[test]
fn join_errors_go_through_anyhow_and_keep_the_panic() {
    let pool = Pool::new(1).unwrap();
    assert_eq!(with_anyhow(&pool).unwrap(), 42);
    let failing = || -> anyhow::Result<()> {
        pool.submit(|| panic!("deliberate"))?.join()?;
        Ok(())
    };
    let e = failing().unwrap_err();
    assert!(e.to_string().contains("deliberate"), "{e}");
    let join = e.downcast::<JoinError>().unwrap();
    assert!(join.is_panic());
    let payload = join.into_panic().unwrap();
    let resumed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        std::panic::resume_unwind(payload)
    }));
    assert_eq!(
        resumed.unwrap_err().downcast_ref::<&str>(),
        Some(&"deliberate")
    );
}

#[test]
fn clones_share_one_pool_and_the_last_drop_shuts_it_down() {
    let pool = Pool::new(2).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let pool = pool.clone();
            let ran = ran.clone();
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let ran = ran.clone();
                    pool.execute(move || {
                        ran.fetch_add(1, SeqCst);
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let other = pool.clone();
    drop(pool);
    assert!(!other.is_shutdown(), "a clone keeps the pool alive");
    let slow = Arc::new(AtomicUsize::new(0));
    let s = slow.clone();
    other
        .execute(move || {
            std::thread::sleep(Duration::from_millis(20));
            s.fetch_add(1, SeqCst);
        })
        .unwrap();
    drop(other); // the last handle: a graceful shutdown runs everything queued
    assert_eq!(ran.load(SeqCst), 40);
    assert_eq!(slow.load(SeqCst), 1);
}

#[test]
fn hooks_run_once_per_thread_on_the_worker_itself() {
    let starts = Arc::new(Mutex::new(Vec::new()));
    let stops = Arc::new(Mutex::new(Vec::new()));
    let (s1, s2) = (starts.clone(), stops.clone());
    let pool = Pool::builder()
        .threads(3)
        .thread_name(|i| format!("hooked-{i}"))
        .stack_size(256 * 1024)
        .on_thread_start(move || {
            s1.lock()
                .unwrap()
                .push(std::thread::current().name().unwrap().to_string())
        })
        .on_thread_stop(move || {
            s2.lock()
                .unwrap()
                .push(std::thread::current().name().unwrap().to_string())
        })
        .build()
        .unwrap();
    // Tasks do not call hooks: many tasks, still three starts.
    let hs: Vec<_> = (0..50).map(|_| pool.submit(|| ()).unwrap()).collect();
    for h in hs {
        h.join().unwrap();
    }
    // A 128 KiB frame fits the 256 KiB stack asked for (its size itself is
    // checked in `builder::thread_tests`).
    pool.submit(|| {
        let buf = [0u8; 128 * 1024];
        std::hint::black_box(&buf);
    })
    .unwrap()
    .join()
    .unwrap();
    pool.shutdown();
    let mut starts = starts.lock().unwrap().clone();
    let mut stops = stops.lock().unwrap().clone();
    starts.sort();
    stops.sort();
    let expected = vec!["hooked-0", "hooked-1", "hooked-2"];
    assert_eq!(starts, expected);
    assert_eq!(stops, expected);
}

#[test]
fn hooks_follow_threads_that_retire() {
    let starts = Arc::new(AtomicUsize::new(0));
    let stops = Arc::new(AtomicUsize::new(0));
    let (a, b) = (starts.clone(), stops.clone());
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(4)
        .policy(tidepool::policy::Fixed::keep())
        .on_thread_start(move || {
            a.fetch_add(1, SeqCst);
        })
        .on_thread_stop(move || {
            b.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap();
    pool.resize(4);
    pool.resize(1);
    let deadline = Instant::now() + Duration::from_secs(30);
    while stops.load(SeqCst) < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        stops.load(SeqCst),
        3,
        "three retired workers ran the stop hook"
    );
    pool.shutdown();
    assert_eq!(starts.load(SeqCst), 4);
    assert_eq!(stops.load(SeqCst), 4);
}

#[test]
fn the_panic_handler_sees_panics_of_handleless_tasks() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let pool = Pool::builder()
        .threads(1)
        .panic_handler(move |p| s.lock().unwrap().push(p.message().to_string()))
        .build()
        .unwrap();
    pool.execute(|| panic!("no handle")).unwrap();
    // With a handle, the handle gets the panic, not the handler.
    let e = pool.submit(|| panic!("has a handle")).unwrap().join();
    assert!(e.unwrap_err().is_panic());
    pool.execute(|| panic!("again")).unwrap();
    pool.shutdown();
    assert_eq!(*seen.lock().unwrap(), vec!["no handle", "again"]);
    assert_eq!(pool.stats().panicked, 3);
}

/// Hold `pool`'s (one) worker in a task until the returned sender sends.
fn hold_the_worker(pool: &Pool) -> mpsc::Sender<()> {
    let (tx, rx) = mpsc::channel();
    let started = Arc::new(Barrier::new(2));
    let s = started.clone();
    pool.execute(move || {
        s.wait();
        let _ = rx.recv();
    })
    .unwrap();
    started.wait();
    tx
}

/// A one-worker pool whose worker is held until the returned sender sends.
fn busy_pool() -> (Pool, mpsc::Sender<()>) {
    let pool = Pool::new(1).unwrap();
    let tx = hold_the_worker(&pool);
    (pool, tx)
}

/// A one-worker `OnFull::Reject` pool with its worker held (until the sender
/// sends) and its one queue slot taken: the next submit is refused.
fn full_rejecting_pool() -> (Pool, mpsc::Sender<()>) {
    let pool = Pool::builder()
        .threads(1)
        .queue_capacity(1)
        .on_full(OnFull::Reject)
        .build()
        .unwrap();
    let tx = hold_the_worker(&pool);
    pool.execute(|| {}).unwrap(); // fills the queue
    (pool, tx)
}

#[test]
fn cancel_before_start_prevents_the_run() {
    let (pool, release) = busy_pool();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let h = pool
        .submit(move || {
            r.fetch_add(1, SeqCst);
        })
        .unwrap();
    assert!(h.cancel(), "queued behind a busy worker: cancelled");
    assert!(!h.cancel(), "only once");
    assert!(h.is_finished());
    release.send(()).unwrap();
    pool.shutdown();
    assert_eq!(ran.load(SeqCst), 0, "a cancelled task never runs");
    assert!(h.join().unwrap_err().is_cancelled());
}

#[test]
fn cancel_after_start_does_not_stop_the_task() {
    let pool = Pool::new(1).unwrap();
    let started = Arc::new(Barrier::new(2));
    let (tx, rx) = mpsc::channel::<()>();
    let s = started.clone();
    let h = pool
        .submit(move || {
            s.wait();
            rx.recv().unwrap();
            7
        })
        .unwrap();
    started.wait();
    assert!(!h.cancel(), "already running");
    tx.send(()).unwrap();
    assert_eq!(h.join().unwrap(), 7);
    let done = pool.submit(|| 1).unwrap();
    while !done.is_finished() {
        std::thread::yield_now();
    }
    assert!(!done.cancel(), "already finished");
    assert_eq!(done.join().unwrap(), 1);
}

#[test]
fn shutdown_timeout_returns_with_work_still_running() {
    let (pool, release) = busy_pool();
    let queued = pool.submit(|| 5).unwrap();
    let t = Instant::now();
    assert!(!pool.shutdown_timeout(Duration::from_millis(50)));
    assert!(t.elapsed() >= Duration::from_millis(50));
    assert!(!queued.is_finished(), "the blocked worker still holds it");
    assert!(pool.is_shutdown());
    // The work goes on after the timeout and finishes.
    release.send(()).unwrap();
    assert_eq!(queued.join().unwrap(), 5);
    drop(pool); // does not wait, does not hang

    let pool = Pool::new(2).unwrap();
    let hs: Vec<_> = (0..10).map(|i| pool.submit(move || i).unwrap()).collect();
    assert!(pool.shutdown_timeout(Duration::from_secs(600)));
    assert!(hs.iter().all(|h| h.is_finished()));
    assert_eq!(pool.live_threads(), 0);
}

#[test]
fn a_rejected_task_comes_back_and_the_caller_can_run_it() {
    let (pool, tx) = full_rejecting_pool();
    let ran_here = Arc::new(AtomicUsize::new(0));
    let r = ran_here.clone();
    let rejected = pool
        .try_submit(move || {
            r.fetch_add(1, SeqCst);
            std::thread::current().id()
        })
        .unwrap_err();
    assert_eq!(*rejected.error(), SubmitError::Full);
    assert_eq!(rejected.into_inner()(), std::thread::current().id());
    assert_eq!(ran_here.load(SeqCst), 1, "ran once, by the caller");

    let r = ran_here.clone();
    let (error, task) = pool
        .try_execute(move || {
            r.fetch_add(1, SeqCst);
        })
        .unwrap_err()
        .into_parts();
    assert_eq!(error, SubmitError::Full);
    task();
    assert_eq!(ran_here.load(SeqCst), 2);
    tx.send(()).unwrap();
    pool.shutdown();
    let back = pool.try_submit(|| 3).unwrap_err();
    assert_eq!(*back.error(), SubmitError::ShutDown);
    assert_eq!(back.into_inner()(), 3);
    assert_eq!(
        pool.stats().completed,
        2,
        "the pool never ran the rejected ones"
    );
}

/// The plain `submit` and `execute` hand a refused task back too: from a
/// full `OnFull::Reject` pool and from a shut-down one.
#[test]
fn plain_submit_and_execute_hand_back_what_they_refuse() {
    let (pool, tx) = full_rejecting_pool();

    let ran_here = Arc::new(AtomicUsize::new(0));
    let r = ran_here.clone();
    let rejected = pool
        .submit(move || {
            r.fetch_add(1, SeqCst);
            std::thread::current().id()
        })
        .unwrap_err();
    assert_eq!(*rejected.error(), SubmitError::Full);
    assert_eq!(rejected.into_inner()(), std::thread::current().id());
    let r = ran_here.clone();
    let rejected = pool
        .execute(move || {
            r.fetch_add(10, SeqCst);
        })
        .unwrap_err();
    assert_eq!(*rejected.error(), SubmitError::Full);
    rejected.into_inner()();
    assert_eq!(ran_here.load(SeqCst), 11, "each ran once, by the caller");
    tx.send(()).unwrap();
    pool.shutdown();
    assert_eq!(pool.stats().completed, 2, "the pool ran neither");

    // A shut-down pool, of either `OnFull`, refuses and hands back.
    for on_full in [OnFull::Reject, OnFull::Block] {
        let pool = Pool::builder().threads(1).on_full(on_full).build().unwrap();
        pool.shutdown();
        let (error, task) = pool.submit(|| 7).unwrap_err().into_parts();
        assert_eq!(error, SubmitError::ShutDown);
        assert_eq!(task(), 7);
        let r = ran_here.clone();
        let back = pool
            .execute(move || {
                r.fetch_add(100, SeqCst);
            })
            .unwrap_err();
        assert_eq!(*back.error(), SubmitError::ShutDown);
        back.into_inner()();
    }
    assert_eq!(ran_here.load(SeqCst), 211);
}

#[test]
fn under_auto_the_users_bounds_are_not_its_spawn_limit() {
    // `auto` starts with a spawn limit of the cores (CPU-bound until it
    // measures otherwise); the user's bounds are 1..=cores + 8 and stay
    // theirs: a floor above the cores is accepted and held.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let max = cores + 8;
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(max)
        .build()
        .unwrap();
    let stats = pool.stats();
    assert_eq!((stats.min_threads, stats.max_threads), (1, max));
    assert!(stats.spawn_limit <= max, "{stats:?}");
    pool.set_min_threads(cores + 1).unwrap();
    assert!(pool.live_threads() > cores);
    for _ in 0..50 {
        // Whatever `auto` decides meanwhile stays inside the user's bounds.
        let stats = pool.stats();
        assert_eq!((stats.min_threads, stats.max_threads), (cores + 1, max));
        assert!(stats.target_size > cores, "{stats:?}");
        assert!((cores + 1..=max).contains(&stats.spawn_limit), "{stats:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(pool.set_min_threads(max + 1).is_err());
    pool.set_max_threads(cores + 1).unwrap();
    assert_eq!(pool.stats().spawn_limit, cores + 1);
}

#[test]
fn limits_change_at_run_time_by_the_control_rules() {
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(4)
        .policy(tidepool::policy::Fixed::keep())
        .build()
        .unwrap();
    pool.set_min_threads(3).unwrap();
    assert_eq!(pool.stats().min_threads, 3);
    assert_eq!(pool.target_size(), 3, "the target follows the new floor");
    assert_eq!(pool.live_threads(), 3);
    let e = pool.set_min_threads(5).unwrap_err();
    assert_eq!(e.field, "min_threads");
    assert_eq!(
        pool.stats().min_threads,
        3,
        "a refused change changes nothing"
    );
    let e = pool.set_max_threads(2).unwrap_err();
    assert_eq!(e.field, "max_threads");
    let e = pool.set_max_threads(0).unwrap_err();
    assert_eq!(e.field, "max_threads");
    pool.set_max_threads(8).unwrap();
    assert_eq!(pool.stats().max_threads, 8);
    assert_eq!(pool.resize(100), 8);
    pool.set_max_threads(3).unwrap();
    assert_eq!(
        pool.target_size(),
        3,
        "the target is clamped to the new max"
    );
    assert_eq!(
        pool.set_keep_alive(Duration::ZERO).unwrap_err().field,
        "keep_alive"
    );
    pool.set_keep_alive(Duration::from_millis(5)).unwrap();
}

#[test]
fn scoped_tasks_borrow_the_callers_stack() {
    let pool = Pool::new(2).unwrap();
    let data: Vec<u64> = (1..=1000).collect();
    let mut sums = [0u64; 10];
    pool.scope(|s| {
        for (chunk, sum) in data.chunks(100).zip(sums.iter_mut()) {
            s.spawn(move || *sum = chunk.iter().sum());
        }
    });
    assert_eq!(sums.iter().sum::<u64>(), 500_500);
    assert!(sums.iter().all(|&s| s > 0));
    // The scope returns the closure's value and may nest spawns.
    let counter = AtomicUsize::new(0);
    let n = pool.scope(|s| {
        s.spawn(|| {
            counter.fetch_add(1, SeqCst);
        });
        s.spawn(|| {
            s.spawn(|| {
                counter.fetch_add(10, SeqCst);
            });
        });
        5
    });
    assert_eq!(n, 5);
    assert_eq!(counter.load(SeqCst), 11);
}

#[test]
fn scoped_panics_propagate_after_every_task_finished() {
    let pool = Pool::new(2).unwrap();
    let finished = AtomicUsize::new(0);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn(|| panic!("task failed"));
            for _ in 0..4 {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(5));
                    finished.fetch_add(1, SeqCst);
                });
            }
        })
    }));
    assert_eq!(
        caught.unwrap_err().downcast_ref::<&str>(),
        Some(&"task failed")
    );
    assert_eq!(finished.load(SeqCst), 4, "the scope waited for all of them");

    // The closure's own panic, too, waits for the tasks.
    let finished = AtomicUsize::new(0);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                finished.fetch_add(1, SeqCst);
            });
            panic!("scope body failed");
        })
    }));
    assert_eq!(
        caught.unwrap_err().downcast_ref::<&str>(),
        Some(&"scope body failed")
    );
    assert_eq!(finished.load(SeqCst), 1);
}

#[test]
fn a_scope_inside_a_task_of_a_one_worker_pool_does_not_deadlock() {
    let pool = Pool::new(1).unwrap();
    let inner = pool.clone();
    let total = pool
        .submit(move || {
            let mut parts = [0u32; 4];
            inner.scope(|s| {
                for (i, p) in parts.iter_mut().enumerate() {
                    s.spawn(move || *p = i as u32 + 1);
                }
            });
            parts.iter().sum::<u32>()
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(total, 10);
}

#[test]
fn a_policy_is_chosen_by_its_spec() {
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(4)
        .policy_spec("fixed:3")
        .unwrap()
        .build()
        .unwrap();
    // The policy's first decision sets the size it names.
    let deadline = Instant::now() + Duration::from_secs(30);
    while pool.target_size() != 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(pool.target_size(), 3);
    let e = Pool::builder().policy_spec("bogus").unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
    let e = Pool::builder().policy_spec("tpr").unwrap_err();
    assert!(e.problem.contains("not a pool"), "{e}");
}

#[test]
fn a_scoped_task_dropped_by_shutdown_now_ends_the_scope_with_a_panic() {
    let (pool, release) = busy_pool();
    let stopper = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            while pool.stats().queue_len == 0 {
                std::thread::yield_now();
            }
            drop(pool.shutdown_now()); // drops the scoped task unrun
        })
    };
    let releaser = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            // The worker is blocked, so an empty queue after shutdown means
            // `shutdown_now` took the scoped task; now let it join the worker.
            while !(pool.is_shutdown() && pool.stats().queue_len == 0) {
                std::thread::yield_now();
            }
            release.send(()).unwrap();
        })
    };
    let mut touched = false;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.scope(|s| s.spawn(|| touched = true));
    }));
    let payload = caught.unwrap_err();
    let message = payload.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(message.contains("dropped unrun"), "{message}");
    stopper.join().unwrap();
    releaser.join().unwrap();
    assert!(!touched);
}

#[test]
fn a_panicking_start_hook_does_not_lose_the_worker() {
    let pool = Pool::builder()
        .threads(1)
        .on_thread_start(|| panic!("hook failed"))
        .build()
        .unwrap();
    assert_eq!(pool.submit(|| 3).unwrap().join().unwrap(), 3);
    assert!(pool.shutdown_timeout(Duration::from_secs(600)));
}

#[test]
fn is_worker_thread_is_true_only_on_this_pools_workers() {
    let pool = Arc::new(Pool::new(2).unwrap());
    let other = Arc::new(Pool::new(1).unwrap());
    assert!(!pool.is_worker_thread(), "the test's own thread");
    let (p, o) = (pool.clone(), other.clone());
    let in_task = pool
        .submit(move || (p.is_worker_thread(), o.is_worker_thread()))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(
        in_task,
        (true, false),
        "a task of this pool, asking both pools"
    );
    let p = pool.clone();
    let in_other = other
        .submit(move || p.is_worker_thread())
        .unwrap()
        .join()
        .unwrap();
    assert!(!in_other, "a task of another pool");
    let p = pool.clone();
    let spawned = std::thread::spawn(move || p.is_worker_thread())
        .join()
        .unwrap();
    assert!(!spawned, "a thread the pool did not start");
}
