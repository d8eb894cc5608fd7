//! Run one scenario of `tidepool sim --bench` (for `perf record`):
//!
//! ```text
//! cargo run --release -p tidepool-sim --example bench_one -- 0 2000000
//! #                                          scenario (0, 1, 2) tasks
//! ```

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let i: usize = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let n: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(2_000_000);
    let scenarios = tidepool_sim::bench::scenarios(n);
    let Some(s) = scenarios.get(i) else {
        eprintln!("usage: bench_one SCENARIO(0..{}) TASKS", scenarios.len());
        std::process::exit(2);
    };
    match tidepool_sim::bench::run(s) {
        Ok(m) => println!(
            "{}: {} tasks, {} events, {:.2} s CPU, {:.3} M tasks/s, {:.1} M events/s",
            s.name,
            m.tasks,
            m.events,
            m.cpu.as_secs_f64(),
            m.tasks_per_s() / 1e6,
            m.events_per_s() / 1e6
        ),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
