//! The default pool sizes itself; a static pool is one explicit call; a
//! named policy widens nothing; the user's settings win over a policy's.

use std::time::{Duration, Instant};

use tidepool::policy::{Decision, Observation, SizingPolicy};
use tidepool::{Pool, DEFAULT_MAX_THREADS, DEFAULT_MIN_THREADS};

#[test]
fn the_default_pool_is_auto_between_the_default_bounds() {
    for pool in [Pool::builder().build().unwrap(), Pool::auto().unwrap()] {
        let s = pool.stats();
        assert_eq!(
            (s.min_threads, s.max_threads),
            (DEFAULT_MIN_THREADS, DEFAULT_MAX_THREADS)
        );
        assert!(pool.decisions()[0].reason.starts_with("auto"));
    }
}

#[test]
fn a_static_pool_is_one_call() {
    for pool in [
        Pool::new(3).unwrap(),
        Pool::fixed(3).unwrap(),
        Pool::builder().threads(3).build().unwrap(),
    ] {
        let s = pool.stats();
        assert_eq!((s.min_threads, s.max_threads, s.live_threads), (3, 3, 3));
    }
}

#[test]
fn the_default_pool_grows_for_blocking_tasks() {
    // 64 tasks sleeping 50 ms: one thread per CPU would need
    // 64 / cores × 50 ms; the default pool takes less than half of that.
    let cores = tidepool::sys::cores();
    let one_per_cpu = Duration::from_millis(50) * 64u32.div_ceil(cores as u32);
    let pool = Pool::builder().build().unwrap();
    let started = Instant::now();
    let handles: Vec<_> = (0..64)
        .map(|_| {
            pool.submit(|| std::thread::sleep(Duration::from_millis(50)))
                .unwrap()
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let took = started.elapsed();
    if !tidepool::sys::SUPPORT.cpu_clocks {
        // No CPU clock: `auto` cannot tell blocking from compute.
        return;
    }
    assert!(
        took < one_per_cpu / 2,
        "{took:?}, one thread per CPU: {one_per_cpu:?}"
    );
}

#[test]
fn a_named_policy_without_room_to_move_is_an_error() {
    let e = Pool::builder()
        .threads(4)
        .policy_spec("auto")
        .unwrap()
        .build()
        .unwrap_err();
    assert_eq!(e.field, "policy");
    assert_eq!(e.value, "auto");
    assert!(e.allowed.contains("room to move"), "{e}");
    // `fixed` needs none; and without bounds the default range applies.
    assert!(Pool::builder()
        .threads(4)
        .policy_spec("fixed:4")
        .unwrap()
        .build()
        .is_ok());
    let p = Pool::builder()
        .policy_spec("watermark:1..8")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(p.stats().max_threads, DEFAULT_MAX_THREADS);
}

#[test]
fn statistics_off_under_an_adaptive_policy_is_an_error_naming_both() {
    let e = Pool::builder().statistics(false).build().unwrap_err();
    assert_eq!(e.field, "statistics");
    assert!(e.allowed.contains("`auto`"), "{e}");
    let e = Pool::builder()
        .min_threads(1)
        .max_threads(8)
        .policy_spec("watermark:1..8")
        .unwrap()
        .statistics(false)
        .build()
        .unwrap_err();
    assert!(e.allowed.contains("`watermark`"), "{e}");
    let quiet = Pool::builder()
        .threads(2)
        .statistics(false)
        .build()
        .unwrap();
    assert_eq!(quiet.submit(|| 1).unwrap().join().unwrap(), 1);
}

/// Prefers a 1 ms keep-alive and a first target of 6.
struct Eager;

impl SizingPolicy for Eager {
    fn name(&self) -> &str {
        "eager"
    }

    fn decide(&mut self, _: &Observation) -> Decision {
        Decision::resize(6, "eager").with_keep_alive(Duration::from_millis(1))
    }
}

#[test]
fn the_users_keep_alive_and_initial_size_win_over_the_policys() {
    // The policy's preferences apply where the user set nothing...
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(8)
        .policy(Eager)
        .build()
        .unwrap();
    assert_eq!(pool.target_size(), 6);
    // ...and never over the user's.
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(8)
        .initial_threads(2)
        .keep_alive(Duration::from_secs(30))
        .policy(Eager)
        .build()
        .unwrap();
    assert_eq!(pool.target_size(), 2, "the user's initial size");
    pool.resize(8);
    // With the policy's 1 ms keep-alive the six extra workers would retire
    // at once; with the user's 30 s they stay.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(pool.live_threads(), 8, "the user's keep-alive");
}
