//! A scoped parallel computation: tasks borrow the caller's data (no `Arc`,
//! no `'static`), as with `rayon::scope` or `std::thread::scope`.
//!
//! Run with `cargo run --release -p tidepool-rs --example scoped`.

use std::sync::atomic::{AtomicU64, Ordering};

use tidepool::Pool;

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let pool = Pool::new(4)?;
    let data: Vec<u64> = (1..=1_000_000).collect();
    let mut partial = [0u64; 8];

    // Each task sums one chunk into its own slot of `partial`.
    pool.scope(|s| {
        for (chunk, slot) in data
            .chunks(data.len() / partial.len())
            .zip(partial.iter_mut())
        {
            s.spawn(move || *slot = chunk.iter().sum());
        }
    });
    let total: u64 = partial.iter().sum();
    assert_eq!(total, 1_000_000 * 1_000_001 / 2);

    // Tasks may also share a borrowed counter.
    let evens = AtomicU64::new(0);
    pool.scope(|s| {
        for chunk in data.chunks(100_000) {
            let evens = &evens;
            s.spawn(move || {
                let n = chunk.iter().filter(|x| *x % 2 == 0).count() as u64;
                evens.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    println!("sum {total}, {} even numbers", evens.into_inner());
    Ok(())
}
