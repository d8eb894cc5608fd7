//! What `submit_with` costs beside `submit`: paired, interleaved rounds on
//! one pool, each submitting a burst of empty tasks from one thread and
//! joining them; per round the ratio of the two arms' times; the median
//! ratio and a 95% interval of the mean log ratio.
//!
//! ```text
//! cargo run --release -p tidepool-rs --example submit_with_cost -- [ROUNDS] [TASKS]
//! ```

use std::time::{Duration, Instant};

use tidepool::{Pool, TaskOptions};

/// One arm: submit `n` empty tasks with `submit` (or `submit_with` and
/// `options`) and join them all.
fn burst(pool: &Pool, n: usize, options: Option<&TaskOptions>) -> Duration {
    let started = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|i| match options {
            None => pool.submit(move || i).unwrap(),
            Some(o) => pool.submit_with(o.clone(), move || i).unwrap(),
        })
        .collect();
    for h in handles {
        std::hint::black_box(h.join().unwrap());
    }
    started.elapsed()
}

/// Median, and the 95% interval of the geometric mean, of `ratios`.
fn summary(ratios: &mut [f64]) -> (f64, f64, f64) {
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let half = 1.96 * (var / n).sqrt();
    (median, (mean - half).exp(), (mean + half).exp())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(30);
    let tasks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let pool = Pool::fixed(2).unwrap();
    let default = TaskOptions::new();
    let far = TaskOptions::new().deadline(Instant::now() + Duration::from_secs(3600));
    burst(&pool, tasks, None); // warm up
    let (mut plain_ratio, mut deadline_ratio) = (Vec::new(), Vec::new());
    // Two pairs a round (submit vs default options, submit vs a deadline),
    // each in alternating order, so drift and warm-up hit both arms alike.
    let pair = |options: &TaskOptions, first: bool| {
        if first {
            let s = burst(&pool, tasks, None);
            (s, burst(&pool, tasks, Some(options)))
        } else {
            let w = burst(&pool, tasks, Some(options));
            (burst(&pool, tasks, None), w)
        }
    };
    for round in 0..rounds {
        let (s, w) = pair(&default, round % 2 == 0);
        plain_ratio.push(w.as_secs_f64() / s.as_secs_f64());
        let (s, d) = pair(&far, round % 2 == 1);
        deadline_ratio.push(d.as_secs_f64() / s.as_secs_f64());
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{rounds} rounds of {tasks} tasks, load average {}",
        load.trim()
    );
    for (name, ratios) in [
        ("submit_with(TaskOptions::new()) / submit", &mut plain_ratio),
        ("submit_with(deadline) / submit", &mut deadline_ratio),
    ] {
        let (median, lo, hi) = summary(ratios);
        println!("{name}: median {median:.3}, 95% interval of the mean [{lo:.3}, {hi:.3}]");
    }
}
