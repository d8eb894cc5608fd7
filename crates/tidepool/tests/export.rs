//! The `metrics` exporter, read back through the Prometheus text format,
//! and the statistics' `serde` form (features `metrics` and `serde`).
#![cfg(feature = "metrics")]

use std::collections::HashMap;

use metrics_exporter_prometheus::PrometheusBuilder;
use tidepool::export::MetricsExporter;
use tidepool::Pool;
use tidepool_test_support::eventually;

/// `name{labels}` → value, for every sample line of a Prometheus text page.
fn parse(page: &str) -> HashMap<String, f64> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (key, value) = l.rsplit_once(' ').expect("`name value`");
            let value = value.parse().unwrap_or_else(|_| panic!("value in {l:?}"));
            (key.to_string(), value)
        })
        .collect()
}

#[test]
fn exporter_output_parses_back_to_the_pool_statistics() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let pool = Pool::builder().name("exp").threads(2).build().unwrap();
    let mut exporter = MetricsExporter::new("exp");

    let handles: Vec<_> = (0..40)
        .map(|i| pool.submit(move || std::hint::black_box(i)).unwrap())
        .collect();
    handles.into_iter().for_each(|h| drop(h.join()));
    pool.wait_idle();
    let first = pool.stats();
    metrics::with_local_recorder(&recorder, || {
        MetricsExporter::describe();
        exporter.publish(&first);
    });
    let page = handle.render();
    let m = parse(&page);
    let get = |k: &str| {
        *m.get(&format!("{k}{{pool=\"exp\"}}"))
            .unwrap_or_else(|| panic!("{k} missing from\n{page}"))
    };
    assert_eq!(
        get("tidepool_tasks_completed_total"),
        first.completed as f64
    );
    assert_eq!(get("tidepool_tasks_completed_total"), 40.0);
    assert_eq!(get("tidepool_tasks_submitted_total"), 40.0);
    assert_eq!(get("tidepool_tasks_rejected_total"), 0.0);
    assert_eq!(get("tidepool_threads_live"), first.live_threads as f64);
    assert_eq!(get("tidepool_threads_min"), 2.0);
    assert_eq!(get("tidepool_threads_max"), 2.0);
    assert_eq!(get("tidepool_threads_spawn_limit"), 2.0);
    assert_eq!(get("tidepool_queue_length"), 0.0);
    assert_eq!(get("tidepool_threads_created_total"), 2.0);
    // Histograms (rendered as summaries): one sample per finished task.
    assert_eq!(get("tidepool_task_service_seconds_count"), 40.0);
    assert_eq!(get("tidepool_task_wait_seconds_count"), 40.0);
    assert!(page.contains("# TYPE tidepool_task_service_seconds summary"));
    assert!(page.contains("# HELP tidepool_threads_live Worker threads alive"));
    let p99 = m
        .get("tidepool_task_service_seconds{pool=\"exp\",quantile=\"0.99\"}")
        .expect("p99 of the service time");
    assert!(*p99 > 0.0 && *p99 < 60.0, "{p99}");

    // A second publish adds only the tasks finished since the first.
    for _ in 0..10 {
        pool.submit(|| ()).unwrap().join().unwrap();
    }
    pool.wait_idle();
    metrics::with_local_recorder(&recorder, || exporter.publish(&pool.stats()));
    let m = parse(&handle.render());
    assert_eq!(m["tidepool_tasks_completed_total{pool=\"exp\"}"], 50.0);
    assert_eq!(m["tidepool_task_service_seconds_count{pool=\"exp\"}"], 50.0);
}

#[test]
fn histograms_are_bounded_per_publish() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let pool = Pool::builder().name("bounded").threads(1).build().unwrap();
    for _ in 0..300 {
        pool.execute(|| ()).unwrap();
    }
    pool.wait_idle();
    let mut exporter = MetricsExporter::new("bounded").max_samples(50);
    let stats = pool.stats();
    metrics::with_local_recorder(&recorder, || exporter.publish(&stats));
    let m = parse(&handle.render());
    assert_eq!(m["tidepool_tasks_completed_total{pool=\"bounded\"}"], 300.0);
    let samples = m["tidepool_task_service_seconds_count{pool=\"bounded\"}"] as usize;
    // More timed tasks than the budget (very short tasks are sampled one in
    // 16 after the first 256, so not all 300 are timed).
    assert!(stats.service.count() > 200, "{}", stats.service.count());
    // 50 spread in proportion: within rounding, plus one per bucket at most.
    let buckets = stats.service.buckets().count();
    assert!(samples >= buckets, "{samples} samples, {buckets} buckets");
    assert!(
        samples <= 50 + buckets,
        "{samples} samples, {buckets} buckets"
    );
}

#[test]
fn the_spawn_limit_gauge_is_the_policys_not_the_users_max() {
    // `auto` starts with its spawn limit at the cores (its CPU-bound
    // guess), far inside a user's max of 500.
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let pool = Pool::builder()
        .name("lim")
        .min_threads(1)
        .max_threads(500)
        .policy_spec("auto")
        .unwrap()
        .build()
        .unwrap();
    let stats = pool.stats();
    assert!(stats.spawn_limit < 500, "{}", stats.spawn_limit);
    metrics::with_local_recorder(&recorder, || {
        MetricsExporter::new("lim").publish(&stats);
    });
    let m = parse(&handle.render());
    assert_eq!(
        m["tidepool_threads_spawn_limit{pool=\"lim\"}"],
        stats.spawn_limit as f64
    );
    assert_eq!(m["tidepool_threads_max{pool=\"lim\"}"], 500.0);
    pool.shutdown_now();
}

#[test]
fn the_blocked_threads_gauge_counts_workers_inside_block_in_place() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let pool = Pool::builder()
        .name("blk")
        .min_threads(2)
        .max_threads(4)
        .build()
        .unwrap();
    let mut exporter = MetricsExporter::new("blk");
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let task = pool
        .submit(move || tidepool::block_in_place(|| wait.recv()))
        .unwrap();
    eventually("the task to block", || pool.stats().blocked_threads == 1);
    let blocked = |exporter: &mut MetricsExporter| {
        let stats = pool.stats();
        metrics::with_local_recorder(&recorder, || exporter.publish(&stats));
        parse(&handle.render())["tidepool_threads_blocked{pool=\"blk\"}"]
    };
    assert_eq!(blocked(&mut exporter), 1.0);
    release.send(()).unwrap();
    task.join().unwrap().unwrap();
    eventually("the task to leave block_in_place", || {
        pool.stats().blocked_threads == 0
    });
    assert_eq!(blocked(&mut exporter), 0.0);
}
