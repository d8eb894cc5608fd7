//! Typed pipelines give what a sequential loop gives, in every mode.

use std::time::Duration;

use tidepool::policy::PolicySpec;
use tidepool_pipeline::{BoxError, Order, Pipeline};

/// 100,000 pseudo-random inputs (xorshift64*, fixed seed).
fn inputs() -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..100_000)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        })
        .collect()
}

fn format(x: u64) -> String {
    format!("{x:x}")
}

fn parse(s: String) -> Result<(usize, u64), BoxError> {
    Ok((s.len(), u64::from_str_radix(&s, 16)?))
}

fn combine((len, v): (usize, u64)) -> u64 {
    v.rotate_left(len as u32) ^ len as u64
}

fn sequential(xs: &[u64]) -> Vec<u64> {
    xs.iter()
        .map(|&x| combine(parse(format(x)).unwrap()))
        .collect()
}

/// Four stages, three types between them (`String`, `(usize, u64)`,
/// `u64`), a replicated stage in the middle.
fn typed(xs: Vec<u64>, order: Order, pooled: bool) -> Vec<u64> {
    let n = xs.len() as u64;
    let mut t = Pipeline::typed("typed")
        .source_iter("read", xs)
        .stage("format", |x: u64| Ok(format(x)))
        .replicated("parse", 3, || parse)
        .order(order)
        .stage("combine", |p: (usize, u64)| Ok(combine(p)))
        .buffers(12);
    if pooled {
        t = t.pooled_threads(3);
    }
    let (out, report) = t.collect("write").unwrap().run().unwrap();
    assert_eq!(report.pipelines[0].rounds, n + 1); // and the empty end
    assert!(!report.stopped());
    out
}

#[test]
fn a_typed_pipeline_gives_what_a_sequential_loop_gives() {
    let xs = inputs();
    let want = sequential(&xs);
    assert_eq!(typed(xs.clone(), Order::Ordered, false), want);
    assert_eq!(typed(xs, Order::Ordered, true), want);
}

#[test]
fn an_unordered_replicated_stage_gives_the_same_items() {
    let xs: Vec<u64> = inputs().into_iter().take(20_000).collect();
    let mut want = sequential(&xs);
    want.sort_unstable();
    for pooled in [false, true] {
        let mut got = typed(xs.clone(), Order::Unordered, pooled);
        got.sort_unstable();
        assert_eq!(got, want);
    }
}

#[test]
fn fused_self_sizing_and_repeated_stages_keep_their_meaning() {
    let (sum, report) = Pipeline::typed("fused")
        .source_iter("read", 0..10_000u64)
        .then("square", |x: u64| Ok(x * x))
        .sized("half", PolicySpec::default(), 4, || |x: u64| Ok(x / 2))
        .stage("as-text", |x: u64| Ok(x.to_string()))
        .repeat(4)
        .then("length", |s: String| Ok(s.len()))
        .fold("sum", 0usize, |a, n| Ok(a + n))
        .unwrap()
        .run()
        .unwrap();
    let want: usize = (0..10_000u64).map(|x| (x * x / 2).to_string().len()).sum();
    assert_eq!(sum, want);
    // The source and `square` share a thread, as do `as-text` and `length`.
    let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["read+square", "half", "as-text+length", "sum"]);
}

#[test]
fn a_stage_error_fails_the_run_naming_the_stage() {
    let err = Pipeline::typed("bad")
        .source_iter("read", ["1", "2", "x", "4"].map(String::from))
        .stage("parse", |s: String| Ok(s.parse::<u32>()?))
        .sink("drop", |_| Ok(()))
        .unwrap()
        .run()
        .unwrap_err();
    assert_eq!(err.stage, "parse");
    assert_eq!(err.round, Some(2));
}

#[test]
fn a_typed_pipeline_stops_from_outside() {
    let p = Pipeline::typed("endless")
        .source("count", {
            let mut n = 0u64;
            move || {
                n += 1;
                Ok(Some(n))
            }
        })
        .stage("double", |x: u64| Ok(2 * x))
        .fold("count", 0u64, |c, _| Ok(c + 1))
        .unwrap();
    let stop = p.stop_handle();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        stop.stop();
    });
    let (count, report) = p.run().unwrap();
    t.join().unwrap();
    assert!(report.stopped());
    assert_eq!(count + 1, report.pipelines[0].rounds);
}

#[test]
fn bad_options_are_refused_naming_them() {
    let err = Pipeline::typed("bad")
        .source_iter("read", 0..10u32)
        .replicated("zero", 0, || |x: u32| Ok(x))
        .buffers(0)
        .sink("drop", |_| Ok(()))
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(msg.contains("buffers must be at least 1"), "{msg}");
    assert!(msg.contains("replicas must be at least 1"), "{msg}");
}

#[test]
fn a_last_stage_that_yields_nothing_is_the_sink() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let ((), report) = Pipeline::typed("fused-sink")
        .source_iter("read", 0..1000u32)
        .replicated("double", 2, || |x: u32| Ok(2 * x))
        .then_each("write", move || {
            let s = s.clone();
            move |x: u32| {
                s.lock().unwrap().push(x);
                Ok(())
            }
        })
        .build()
        .unwrap()
        .run()
        .unwrap();
    let mut got = seen.lock().unwrap().clone();
    got.sort_unstable();
    assert_eq!(got, (0..1000).map(|x| 2 * x).collect::<Vec<_>>());
    assert_eq!(report.stages.len(), 2); // read, double+write
}
