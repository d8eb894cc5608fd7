//! `block_in_place`: a worker that says it will block gets a compensating
//! worker at once; elsewhere the call just runs its closure.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use tidepool::policy::Fixed;
use tidepool::{block_in_place, Pool};

/// The two workers stay blocked until every other task has finished: without
/// compensating workers those tasks could never run, so the test fails by
/// its time limit (generous: it guards against a hang, not for speed).
#[test]
fn blocked_workers_are_compensated_at_once() {
    // A static pool of 2 with room to grow to 16 (no on-demand growth).
    let pool = Pool::builder()
        .min_threads(2)
        .max_threads(16)
        .initial_threads(2)
        .policy(Fixed::keep())
        .build()
        .unwrap();
    let created_before = pool.stats().threads_created;
    let (inside, blocked) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let released = std::sync::Arc::new(std::sync::Mutex::new(released));
    let sleepers: Vec<_> = (0..2)
        .map(|_| {
            let (inside, released) = (inside.clone(), released.clone());
            pool.submit(move || {
                block_in_place(|| {
                    inside.send(()).unwrap();
                    released.lock().unwrap().recv().unwrap();
                })
            })
            .unwrap()
        })
        .collect();
    blocked.recv().unwrap();
    blocked.recv().unwrap();
    assert_eq!(pool.stats().blocked_threads, 2);
    let started = Instant::now();
    let (done, finished) = mpsc::channel::<()>();
    for _ in 0..20 {
        let done = done.clone();
        pool.execute(move || {
            std::thread::sleep(Duration::from_millis(2));
            done.send(()).unwrap();
        })
        .unwrap();
    }
    for n in 0..20 {
        finished
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{n} of 20 tasks ran while both workers were blocked"));
    }
    eprintln!(
        "twenty 2 ms tasks beside two blocked workers: {:?}",
        started.elapsed()
    );
    assert!(
        pool.stats().threads_created > created_before,
        "no compensating worker was started"
    );
    release.send(()).unwrap();
    release.send(()).unwrap();
    for s in sleepers {
        s.join().unwrap();
    }
    assert_eq!(pool.stats().blocked_threads, 0);
}

#[test]
fn a_panic_inside_still_unblocks() {
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(4)
        .policy(Fixed::keep())
        .build()
        .unwrap();
    let h = pool
        .submit(|| block_in_place(|| -> u8 { panic!("inside") }))
        .unwrap();
    assert_eq!(h.join().unwrap_err().panic_message(), Some("inside"));
    // With a worker busy, a blocked count left behind would show.
    let (started, running) = mpsc::channel::<()>();
    let (release, gate) = mpsc::channel::<()>();
    let busy = pool
        .submit(move || {
            started.send(()).unwrap();
            gate.recv().unwrap();
        })
        .unwrap();
    running.recv().unwrap();
    // (A compensating worker just started may not count as idle yet.)
    let stats = pool.stats();
    let (blocked, running_now) = (stats.blocked_threads, stats.busy_threads);
    assert!(
        blocked == 0 && running_now >= 1,
        "blocked {blocked}, busy {running_now}"
    );
    release.send(()).unwrap();
    busy.join().unwrap();
}

#[test]
fn outside_a_pool_it_just_runs_f() {
    assert_eq!(block_in_place(|| 6 * 7), 42);
    let me = std::thread::current().id();
    assert_eq!(block_in_place(|| std::thread::current().id()), me);
}
