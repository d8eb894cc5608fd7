//! `block_in_place`: a worker that says it will block gets a compensating
//! worker at once; elsewhere the call just runs its closure.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use tidepool::policy::Fixed;
use tidepool::{block_in_place, Pool};

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
    let sleepers: Vec<_> = (0..2)
        .map(|_| {
            let inside = inside.clone();
            pool.submit(move || {
                block_in_place(|| {
                    inside.send(()).unwrap();
                    std::thread::sleep(Duration::from_millis(600));
                })
            })
            .unwrap()
        })
        .collect();
    blocked.recv().unwrap();
    blocked.recv().unwrap();
    assert_eq!(pool.stats().blocked_threads, 2);
    let started = Instant::now();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            pool.submit(|| std::thread::sleep(Duration::from_millis(2)))
                .unwrap()
        })
        .collect();
    for t in tasks {
        t.join().unwrap();
    }
    let took = started.elapsed();
    // The two blocked workers hold them up 600 ms without compensation.
    assert!(took < Duration::from_millis(450), "{took:?}");
    assert!(
        pool.stats().threads_created > created_before,
        "no compensating worker was started"
    );
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
