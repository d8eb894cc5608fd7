//! Smoke test: many tiny tasks through a default pool.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tidepool::Pool;

#[test]
fn runs_many_tasks() {
    let pool = Pool::new(2).unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    for _ in 0..100_000 {
        let n = n.clone();
        pool.execute(move || {
            n.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    pool.wait_idle();
    assert_eq!(n.load(Ordering::Relaxed), 100_000);
    let s = pool.stats();
    assert_eq!(s.completed, 100_000);
    println!("{s:?}");
}
