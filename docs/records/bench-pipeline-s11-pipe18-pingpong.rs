// Session 11 (pipe18): cross-core round trip of one cache line between the two CPUs (threads pinned with
// sched_setaffinity via taskset per thread is not available here; the process runs under taskset -c 0,1 and
// the two threads spin, so each holds one CPU). Prints the median round trip in ns over 20 batches of 20,000.
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::Instant;
fn main() {
    let flag = Arc::new(AtomicU64::new(0));
    let f2 = flag.clone();
    const N: u64 = 20_000;
    const B: u64 = 20;
    let t = std::thread::spawn(move || {
        for i in 0..N * B {
            while f2.load(Acquire) != 2 * i + 1 { std::hint::spin_loop(); }
            f2.store(2 * i + 2, Release);
        }
    });
    let mut v = Vec::new();
    for b in 0..B {
        let t0 = Instant::now();
        for j in 0..N {
            let i = b * N + j;
            flag.store(2 * i + 1, Release);
            while flag.load(Acquire) != 2 * i + 2 { std::hint::spin_loop(); }
        }
        v.push(t0.elapsed().as_nanos() as f64 / N as f64);
    }
    t.join().unwrap();
    v.sort_by(f64::total_cmp);
    println!("round trip ns: median {:.0} min {:.0} max {:.0}", v[v.len() / 2], v[0], v[v.len() - 1]);
}
