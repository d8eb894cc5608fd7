//! The statistics and decision types as data (feature `serde`).
#![cfg(feature = "serde")]

use std::time::Duration;

use tidepool::policy::{Decision, Observation, Schedule, Trigger};
use tidepool::{DecisionRecord, LiveThreadsSample, Pool, PoolStats};

#[test]
fn pool_statistics_round_trip_through_json() {
    let pool = Pool::builder().name("ser").threads(2).build().unwrap();
    for i in 0..20u64 {
        pool.submit(move || std::thread::sleep(Duration::from_micros(100 * i)))
            .unwrap()
            .join()
            .unwrap();
    }
    pool.wait_idle(); // the last task's record is written after its result
    let stats = pool.stats();
    let json = serde_json::to_string(&stats).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["completed"], 20);
    assert_eq!(v["live_threads"], 2);
    assert_eq!(v["service"]["count"], 20);
    assert!(v["service"]["p99_ns"].as_u64().unwrap() >= 1_900_000);
    let back: PoolStats = serde_json::from_str(&json).unwrap();
    assert_eq!(back.completed, stats.completed);
    assert_eq!(back.elapsed, stats.elapsed);
    assert_eq!(back.service.count(), 20);
    assert_eq!(back.mean_service(), stats.mean_service());
    assert_eq!(back.service.quantile(0.9), stats.service.quantile(0.9));
    assert_eq!(back.load_average, stats.load_average);

    let series: Vec<LiveThreadsSample> = pool.live_threads_series();
    let json = serde_json::to_string(&series).unwrap();
    assert_eq!(
        serde_json::from_str::<Vec<LiveThreadsSample>>(&json).unwrap(),
        series
    );
}

#[test]
fn decisions_round_trip_through_json() {
    let mut obs = Observation::default();
    (obs.trigger, obs.queue_len, obs.live) = (Trigger::Tick, 7, 3);
    let d = Decision::resize(5, "queue is long").with_keep_alive(Duration::from_secs(2));
    let json = serde_json::to_string(&d).unwrap();
    assert!(json.contains("\"reason\":\"queue is long\""), "{json}");
    assert_eq!(serde_json::from_str::<Decision>(&json).unwrap(), d);
    let json = serde_json::to_string(&obs).unwrap();
    assert!(json.contains("\"trigger\":\"Tick\""), "{json}");
    assert_eq!(serde_json::from_str::<Observation>(&json).unwrap(), obs);
    let s = Schedule::default().with_every(Duration::from_millis(10));
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(serde_json::from_str::<Schedule>(&json).unwrap(), s);

    // The log of a pool whose policy made a decision.
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(4)
        .policy(Fixed3)
        .build()
        .unwrap();
    let log: Vec<DecisionRecord> = pool.decisions();
    assert_eq!(log.len(), 1);
    let json = serde_json::to_string(&log).unwrap();
    assert_eq!(
        serde_json::from_str::<Vec<DecisionRecord>>(&json).unwrap(),
        log
    );
}

#[test]
fn policy_specs_are_their_spec_strings() {
    let spec = tidepool::policy::PolicySpec::parse("watermark:3..100").unwrap();
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(json, format!("\"{spec}\""));
    let back: tidepool::policy::PolicySpec = serde_json::from_str(&json).unwrap();
    assert_eq!(back, spec);
    let err = serde_json::from_str::<tidepool::policy::PolicySpec>("\"nope:1\"").unwrap_err();
    assert!(err.to_string().contains("valid forms"), "{err}");
}

/// Sets the size to 3 at start.
struct Fixed3;

impl tidepool::policy::SizingPolicy for Fixed3 {
    fn name(&self) -> &str {
        "three"
    }
    fn decide(&mut self, _obs: &Observation) -> Decision {
        Decision::resize(3, "three")
    }
}
