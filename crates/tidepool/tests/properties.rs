//! Property tests: any sequence of submits and resizes leaves the pool
//! consistent — every task runs once, sizes stay in bounds, and the pool
//! settles at its target.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use tidepool::policy::Fixed;
use tidepool::{Pool, QueueFlavor};

#[derive(Debug, Clone)]
enum Op {
    Submit(usize),
    Resize(usize),
    Expand(usize),
    Shrink(usize),
    WaitIdle,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..200).prop_map(Op::Submit),
        2 => (0usize..12).prop_map(Op::Resize),
        1 => (0usize..12).prop_map(Op::Expand),
        1 => (0usize..12).prop_map(Op::Shrink),
        1 => Just(Op::WaitIdle),
    ]
}

fn flavor() -> impl Strategy<Value = QueueFlavor> {
    prop_oneof![
        Just(QueueFlavor::LockFree),
        Just(QueueFlavor::Mutex),
        Just(QueueFlavor::Spin),
        Just(QueueFlavor::Hybrid {
            attempts: 3,
            sleep: Duration::from_micros(50)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_op_sequence_keeps_the_pool_consistent(
        ops in proptest::collection::vec(op(), 1..25),
        flavor in flavor(),
        min in 1usize..3,
        extra in 0usize..6,
    ) {
        let max = min + extra;
        let pool = Pool::builder()
            .min_threads(min)
            .max_threads(max)
            .queue(flavor)
            .policy(Fixed::keep())
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let mut submitted = 0;
        for op in &ops {
            match *op {
                Op::Submit(n) => {
                    for _ in 0..n {
                        let ran = ran.clone();
                        pool.execute(move || { ran.fetch_add(1, Ordering::SeqCst); }).unwrap();
                    }
                    submitted += n;
                }
                Op::Resize(n) => {
                    let t = pool.resize(n);
                    prop_assert_eq!(t, n.clamp(min, max));
                }
                Op::Expand(n) => {
                    let before = pool.target_size();
                    let t = pool.expand(n);
                    prop_assert!(t >= before && t <= max);
                }
                Op::Shrink(n) => {
                    let before = pool.target_size();
                    let t = pool.shrink(n);
                    prop_assert!(t <= before && t >= min);
                }
                Op::WaitIdle => pool.wait_idle(),
            }
            prop_assert!(pool.live_threads() <= max, "live {} above max {}", pool.live_threads(), max);
        }
        pool.wait_idle();
        prop_assert_eq!(ran.load(Ordering::SeqCst), submitted);
        let target = pool.target_size();
        prop_assert!((min..=max).contains(&target));
        let deadline = Instant::now() + Duration::from_secs(10);
        // A retiring worker is counted retired right after it leaves the
        // live count: wait for both.
        let settled = |p: &Pool| {
            let s = p.stats();
            p.live_threads() == target && s.threads_created - s.threads_retired == target as u64
        };
        while !settled(&pool) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        prop_assert_eq!(pool.live_threads(), target);
        let stats = pool.stats();
        prop_assert_eq!(stats.completed as usize, submitted);
        prop_assert_eq!(
            stats.threads_created - stats.threads_retired,
            target as u64
        );
    }
}
