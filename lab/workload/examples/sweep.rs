//! Sweep static pool sizes over a suite workload and print the analysis.
//!
//! `cargo run --release -p tidepool-workload --example sweep -- io 0.3 1,2,4,8,16,32,64`

use tidepool::Pool;
use tidepool_workload::{analyze_sweep, load_workload, replay_pool, ReplayOptions, SweepPoint};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map_or("cpu", String::as_str);
    let scale: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.3);
    let sizes: Vec<usize> = args
        .get(3)
        .map_or("1,2,4,8,16,32", String::as_str)
        .split(',')
        .map(|s| s.parse().expect("size"))
        .collect();
    let trace = load_workload(name, scale).expect("workload");
    eprintln!("{}: {:?}", trace.name, trace.stats());
    let mut points = Vec::new();
    for &size in &sizes {
        let pool = Pool::new(size).expect("pool");
        let r = replay_pool(&trace, &pool, &ReplayOptions::default(), None);
        println!(
            "size {size:3}: thr {:8.1}/s  AIT {:9.1}us  p99 wait {:9.1}us  mean turn {:9.1}us  p99 turn {:9.1}us  late p99 {:6.1}us  cpu {:.2}",
            r.throughput, r.mean_wait_us, r.p99_wait_us, r.mean_turnaround_us, r.p99_turnaround_us,
            r.lateness.p99_us, r.process_cpu_utilization
        );
        points.push(SweepPoint::from_run(size, &r));
    }
    let a = analyze_sweep(&points, 0.05).expect("analysis");
    println!(
        "stable {} degradation {:?} safe zone {:?} oracle {}",
        a.stable_point, a.degradation_point, a.safe_zone, a.oracle_size
    );
}
