//! Sizing policies on the real pool: adaptive policies grow under I/O-bound
//! load, `auto` stays near the core count under CPU-bound load, and surplus
//! threads retire once the load stops.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tidepool::policy::PolicySpec;
use tidepool::Pool;
use tidepool_test_support::wait_until;

/// These tests measure how policies react to the load they offer, on a
/// machine of a few cores: run one at a time, so that another test's threads
/// do not take the cores (a CPU-bound task that loses its core reads as
/// blocking, and `auto` rightly grows).
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn pool(spec: &str, min: usize, max: usize) -> Pool {
    let policy = PolicySpec::parse(spec).unwrap().build().unwrap();
    Pool::builder()
        .min_threads(min)
        .max_threads(max)
        .policy_boxed(policy)
        .build()
        .unwrap()
}

/// Submit `task` every `gap` for `dur` (open loop); returns the largest pool
/// size seen.
fn drive(pool: &Pool, dur: Duration, gap: Duration, task: fn()) -> usize {
    let start = Instant::now();
    let mut next = start;
    let mut biggest = pool.live_threads();
    while start.elapsed() < dur {
        pool.execute(task).unwrap();
        biggest = biggest.max(pool.live_threads());
        next += gap;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    biggest
}

fn io_task() {
    std::thread::sleep(Duration::from_millis(4));
}

fn cpu_task() {
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(1) {
        std::hint::spin_loop();
    }
}

/// Poll until the pool has at most `n` workers, for up to `limit`.
fn shrinks_to(pool: &Pool, n: usize, limit: Duration) -> bool {
    wait_until(limit, || pool.live_threads() <= n)
}

#[test]
fn adaptive_policies_grow_under_io_bound_load() {
    let _serial = one_at_a_time();
    // ~2000 tasks/s of 4 ms sleeps need ~8 threads; each policy starts small.
    // Hill climbing moves at most a few threads a second by design.
    let handles: Vec<_> = [
        ("auto", 3),
        ("watermark:1..64", 3),
        ("xu-bode:initial=1", 3),
        ("hisdyn:max=64", 3),
        ("frequency", 3),
        ("hill-climb", 1),
    ]
    .into_iter()
    .map(|(spec, growth)| {
        std::thread::spawn(move || {
            let pool = pool(spec, 1, 64);
            let start = pool.live_threads();
            let biggest = drive(
                &pool,
                Duration::from_millis(2500),
                Duration::from_micros(500),
                io_task,
            );
            (spec, growth, start, biggest, pool.decisions().len())
        })
    })
    .collect();
    for h in handles {
        let (spec, growth, start, biggest, decisions) = h.join().unwrap();
        if spec == "auto" && !tidepool::sys::SUPPORT.cpu_clocks {
            // No CPU clock: `auto` cannot tell blocking from compute and
            // stays near the core count (README, "Platforms").
            continue;
        }
        assert!(
            biggest >= start + growth,
            "{spec}: grew only from {start} to {biggest} ({decisions} decisions)"
        );
    }
}

#[test]
fn auto_stays_near_the_core_count_under_cpu_bound_load() {
    let _serial = one_at_a_time();
    let cores = tidepool::sys::cores();
    let pool = pool("auto", 1, 64);
    // Offer more CPU work than the cores can do: a backlog builds up.
    let gap = Duration::from_micros(1000 / cores as u64 * 8 / 10);
    let biggest = drive(&pool, Duration::from_millis(2000), gap, cpu_task);
    let growth: Vec<_> = pool
        .decisions()
        .iter()
        .take(40)
        .map(|d| {
            let o = &d.observation;
            format!(
                "{:?} {:?} -> {}: {} (window {:?}, busy {:?}, cpu {:?}, run delay {:?}, \
                 sampled {:?}/{:?} of {} tasks, live {}, busy workers {}, created {})",
                d.at,
                d.trigger,
                d.new_target,
                d.reason,
                o.window,
                o.busy_time,
                o.worker_cpu_time,
                o.run_delay,
                o.sampled_task_cpu,
                o.sampled_task_time,
                o.sampled_tasks,
                o.live,
                o.busy,
                o.threads_created
            )
        })
        .collect();
    assert!(
        biggest <= 2 * cores + 1,
        "auto grew to {biggest} threads for CPU-bound work on {cores} cores: {growth:#?}"
    );
    pool.shutdown_now();
}

#[test]
fn surplus_threads_retire_after_the_load_stops() {
    let _serial = one_at_a_time();
    for spec in ["auto", "watermark:1..64"] {
        let pool = pool(spec, 1, 64);
        let biggest = drive(
            &pool,
            Duration::from_millis(1500),
            Duration::from_micros(500),
            io_task,
        );
        assert!(biggest > 2, "{spec}: never grew ({biggest})");
        assert!(
            shrinks_to(&pool, 2, Duration::from_secs(20)),
            "{spec}: still {} threads long after the load stopped",
            pool.live_threads()
        );
        // Counted as retired right after leaving the live count.
        wait_until(Duration::from_secs(10), || pool.stats().threads_retired > 0);
        assert!(pool.stats().threads_retired > 0);
    }
}

#[test]
fn watermark_keeps_its_low_mark() {
    let _serial = one_at_a_time();
    let pool = pool("watermark:3..16", 0, 16);
    assert_eq!(pool.live_threads(), 3);
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..64 {
        let ran = ran.clone();
        pool.execute(move || {
            std::thread::sleep(Duration::from_millis(5));
            ran.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    pool.wait_idle();
    assert_eq!(ran.load(Ordering::SeqCst), 64);
    assert!(
        pool.stats().threads_created > 3,
        "extras were created on demand: {:?}",
        pool.stats()
    );
    assert!(shrinks_to(&pool, 3, Duration::from_secs(10)));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(pool.live_threads(), 3, "never below the low watermark");
}

/// Sets only the spawn limit: on its first call, and on every tick after.
struct SpawnLimitOnly(usize);

impl tidepool::policy::SizingPolicy for SpawnLimitOnly {
    fn name(&self) -> &str {
        "spawn-limit-only"
    }

    fn decide(&mut self, _: &tidepool::policy::Observation) -> tidepool::policy::Decision {
        tidepool::policy::Decision::hold()
            .with_spawn_limit(self.0)
            .with_reason("spawn limit only")
    }
}

#[test]
fn a_decision_that_sets_only_the_spawn_limit_is_applied() {
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(8)
        .policy(SpawnLimitOnly(3))
        .build()
        .unwrap();
    let stats = pool.stats();
    assert_eq!(stats.spawn_limit, 3, "the decision was dropped");
    assert_eq!(stats.max_threads, 8, "the user's bound stays");
    assert_eq!(pool.decisions().len(), 1, "the decision is logged");
}
