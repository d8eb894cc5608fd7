//! `tracing` events for decisions, spawns and retirements (feature
//! `tracing`). The subscriber is process-wide (workers and the controller
//! emit on their own threads), so this file holds one test.
#![cfg(feature = "tracing")]

use std::collections::BTreeMap;
use std::sync::Mutex;

use tidepool::policy::{Decision, Observation, SizingPolicy};
use tidepool::Pool;
use tidepool_test_support::eventually;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One event: its level, target and fields as text.
#[derive(Debug, Clone)]
struct Seen {
    level: tracing::Level,
    target: String,
    fields: BTreeMap<String, String>,
}

static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());

/// Keeps every event; no spans.
struct Collect;

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl Subscriber for Collect {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        SEEN.lock().unwrap().push(Seen {
            level: *event.metadata().level(),
            target: event.metadata().target().to_string(),
            fields,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Three workers at start.
struct Three;

impl SizingPolicy for Three {
    fn name(&self) -> &str {
        "three"
    }
    fn decide(&mut self, _obs: &Observation) -> Decision {
        Decision::resize(3, "start with three")
    }
}

fn events(message: &str) -> Vec<Seen> {
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|e| e.fields.get("message").map(String::as_str) == Some(message))
        .cloned()
        .collect()
}

#[test]
fn decisions_spawns_and_retirements_are_traced() {
    tracing::subscriber::set_global_default(Collect).unwrap();
    let pool = Pool::builder()
        .name("traced")
        .min_threads(1)
        .max_threads(4)
        .policy(Three)
        .build()
        .unwrap();
    // A worker's event comes just after it counts in `live_threads()`.
    eventually("three spawns traced", || {
        events("worker spawned").len() == 3
    });
    assert_eq!(pool.live_threads(), 3);

    let decisions = events("policy decision");
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    let d = &decisions[0];
    assert_eq!(d.level, tracing::Level::INFO);
    assert_eq!(d.target, "tidepool");
    assert_eq!(d.fields["pool"], "traced");
    assert_eq!(d.fields["trigger"], "Start");
    assert_eq!(d.fields["new_target"], "3");
    assert_eq!(d.fields["reason"], "start with three");

    let spawned = events("worker spawned");
    assert_eq!(spawned.len(), 3, "{spawned:?}");
    assert!(spawned
        .iter()
        .all(|e| e.level == tracing::Level::DEBUG && e.fields["pool"] == "traced"));

    pool.resize(1);
    eventually("two retirements traced", || {
        events("worker retired").len() == 2
    });
    let retired = events("worker retired");
    assert!(
        retired.iter().all(|e| e.fields["cause"] == "shrink"),
        "{retired:?}"
    );
    // Each retired worker is one that was spawned.
    let ids: Vec<&String> = spawned.iter().map(|e| &e.fields["worker"]).collect();
    assert!(retired.iter().all(|e| ids.contains(&&e.fields["worker"])));

    // Tasks themselves are not traced.
    let before = SEEN.lock().unwrap().len();
    for _ in 0..100 {
        pool.submit(|| ()).unwrap().join().unwrap();
    }
    assert_eq!(SEEN.lock().unwrap().len(), before);
    pool.shutdown();
}
