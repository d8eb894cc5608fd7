use std::time::Instant;
use tidepool_pipeline::{Context, Flow, Pipeline};

fn spin(ns: u64) {
    if ns == 0 { return; }
    let t = Instant::now();
    while (t.elapsed().as_nanos() as u64) < ns { std::hint::spin_loop(); }
}

fn pooled(items: u64, workers: usize, ns: u64) -> f64 {
    let t = Instant::now();
    let b = Pipeline::builder("z")
        .buffers(8, || vec![0u64; 512])
        .source("read", move |b: &mut Vec<u64>, cx: &Context| -> Result<Flow, tidepool_pipeline::BoxError> {
            spin(ns); b[0] += 1;
            Ok(if cx.round() + 1 >= items { Flow::Last } else { Flow::More })
        })
        .then("a", move |b: &mut Vec<u64>, _: &Context| -> Result<(), tidepool_pipeline::BoxError> { spin(ns); b[0] += 1; Ok(()) })
        .stage("b", move |b: &mut Vec<u64>, _: &Context| -> Result<(), tidepool_pipeline::BoxError> { spin(ns); b[0] += 1; Ok(()) })
        .then("w", move |b: &mut Vec<u64>, _: &Context| -> Result<(), tidepool_pipeline::BoxError> { spin(ns); b[0] += 1; Ok(()) });
    let b = if workers > 0 { b.pooled_threads(workers) } else { b };
    b.build().unwrap().run().unwrap();
    t.elapsed().as_secs_f64() * 1e9 / items as f64
}

fn xbeam(items: u64, ns: u64) -> f64 {
    let t = Instant::now();
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u64>>(4);
    std::thread::scope(|s| {
        s.spawn(move || for _ in 0..items { let mut v = vec![0u64; 512]; spin(ns); v[0]+=1; spin(ns); v[0]+=1; tx.send(v).unwrap(); });
        for mut v in rx { spin(ns); v[0]+=1; spin(ns); v[0]+=1; }
    });
    t.elapsed().as_secs_f64() * 1e9 / items as f64
}

fn main() {
    let ns: u64 = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(0);
    clockcost();
    let items = 200_000u64;
    for _ in 0..5 {
        let p1 = pooled(items, 1, ns);
        let p2 = pooled(items, 2, ns);
        let t = pooled(items, 0, ns);
        let x = xbeam(items, ns);
        println!("ns/item: pooled1 {p1:.0} pooled2 {p2:.0} tps {t:.0} crossbeam {x:.0}");
    }
}
#[allow(dead_code)]
pub fn clockcost() {
    let n = 2_000_000;
    let t = Instant::now();
    let mut x = t;
    for _ in 0..n { x = std::hint::black_box(Instant::now()); }
    let _ = x;
    println!("Instant::now {:.1} ns", t.elapsed().as_secs_f64()*1e9/n as f64);
    let m = std::sync::Mutex::new(0u64);
    let t = Instant::now();
    for _ in 0..n { *std::hint::black_box(&m).lock().unwrap() += 1; }
    println!("mutex lock+unlock {:.1} ns", t.elapsed().as_secs_f64()*1e9/n as f64);
}
