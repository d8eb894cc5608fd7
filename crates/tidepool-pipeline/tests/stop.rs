//! Stopping a run from outside, and the whole-run deadline: the run ends
//! soon after, every item filled goes through every stage, every thread is
//! joined and every buffer is given back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tidepool_pipeline::{BoxError, Builder, Context, Flow, Order, Pipeline, Report};

type R = Result<(), BoxError>;

/// A buffer that counts how many of its kind are alive.
struct Counted {
    value: u64,
    alive: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.alive.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A stage's state that counts how many stage instances are alive (dropped
/// on the thread that ran it, as it ends).
struct Alive(Arc<AtomicUsize>);

impl Alive {
    fn new(n: &Arc<AtomicUsize>) -> Self {
        n.fetch_add(1, Ordering::SeqCst);
        Alive(n.clone())
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Endless {
    builder: Builder<Counted>,
    seen: Arc<Mutex<Vec<u64>>>,
    buffers: Arc<AtomicUsize>,
    stages: Arc<AtomicUsize>,
}

/// A source that never ends, four stages (one replicated, ordered) and a
/// sink that records every round it sees.
fn endless(buffers: usize) -> Endless {
    let alive = Arc::new(AtomicUsize::new(0));
    let stages = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let a = alive.clone();
    let (s1, s2, s3, s4) = (
        Alive::new(&stages),
        Alive::new(&stages),
        stages.clone(),
        Alive::new(&stages),
    );
    let out = seen.clone();
    let builder = Pipeline::builder("endless")
        .buffers(buffers, move || {
            a.fetch_add(1, Ordering::SeqCst);
            Counted {
                value: 0,
                alive: a.clone(),
            }
        })
        .source(
            "count",
            move |b: &mut Counted, cx: &Context| -> Result<Flow, BoxError> {
                let _ = &s1;
                b.value = cx.round();
                Ok(Flow::More)
            },
        )
        .stage("double", move |b: &mut Counted, _: &Context| -> R {
            let _ = &s2;
            b.value *= 2;
            Ok(())
        })
        .replicated("spin", 2, move || {
            let mine = Alive::new(&s3);
            move |b: &mut Counted, _: &Context| -> R {
                let _ = &mine;
                std::thread::sleep(Duration::from_micros(50));
                b.value += 1;
                Ok(())
            }
        })
        .order(Order::Ordered)
        .stage("sink", move |b: &mut Counted, cx: &Context| -> R {
            let _ = &s4;
            if !cx.is_empty() {
                assert_eq!(b.value, 2 * cx.round() + 1);
                out.lock().unwrap().push(cx.round());
            }
            Ok(())
        });
    Endless {
        builder,
        seen,
        buffers: alive,
        stages,
    }
}

/// What every stopped run must show: every round filled went through
/// every stage in order, and every buffer and stage instance is gone
/// (every thread that held one has ended).
fn check(report: &Report, e: &Endless) {
    assert!(report.stopped(), "the report says stopped");
    let seen = e.seen.lock().unwrap();
    let rounds = report.pipelines[0].rounds;
    // The source's last round is the empty one that ends the stream.
    assert!(rounds >= 1);
    assert_eq!(seen.len() as u64, rounds - 1, "no filled item lost");
    assert!(seen.iter().copied().eq(0..rounds - 1), "in order");
    assert_eq!(
        e.buffers.load(Ordering::SeqCst),
        0,
        "every buffer given back"
    );
}

fn stop_from_another_thread(pooled: bool) {
    let mut e = endless(6);
    if pooled {
        e.builder = e.builder.pooled_threads(3);
    }
    let pipeline = std::mem::replace(&mut e.builder, Pipeline::builder("unused"))
        .build()
        .unwrap();
    let handle = pipeline.stop_handle();
    let h2 = handle.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        h2.stop();
        Instant::now()
    });
    let report = pipeline.run().unwrap();
    let ended = Instant::now();
    let stopped_at = stopper.join().unwrap();
    assert!(handle.is_stopped());
    assert!(
        ended.duration_since(stopped_at) < Duration::from_secs(1),
        "ended {:?} after the stop",
        ended.duration_since(stopped_at)
    );
    check(&report, &e);
    assert!(!e.seen.lock().unwrap().is_empty(), "ran before the stop");
    // Every stage instance was dropped with its thread's work.
    assert_eq!(e.stages.load(Ordering::SeqCst), 0, "every stage dropped");
}

#[test]
fn stop_from_another_thread_ends_an_endless_pipeline() {
    stop_from_another_thread(false);
}

#[test]
fn stop_from_another_thread_ends_an_endless_pooled_pipeline() {
    stop_from_another_thread(true);
}

#[test]
fn the_deadline_ends_an_endless_pipeline() {
    for pooled in [false, true] {
        let mut e = endless(4);
        e.builder = std::mem::replace(&mut e.builder, Pipeline::builder("unused"))
            .deadline(Duration::from_millis(100));
        if pooled {
            e.builder = e.builder.pooled_threads(2);
        }
        let b = std::mem::replace(&mut e.builder, Pipeline::builder("unused"));
        let t = Instant::now();
        let report = b.build().unwrap().run().unwrap();
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(100), "{took:?}");
        assert!(took < Duration::from_millis(1100), "{took:?}");
        check(&report, &e);
    }
}

#[test]
fn a_stop_before_the_run_ends_it_at_once_with_nothing_filled() {
    let mut e = endless(4);
    let pipeline = std::mem::replace(&mut e.builder, Pipeline::builder("unused"))
        .build()
        .unwrap();
    pipeline.stop_handle().stop();
    let report = pipeline.run().unwrap();
    check(&report, &e);
    assert_eq!(report.pipelines[0].rounds, 1);
}

#[test]
fn a_run_that_ends_by_itself_is_not_stopped() {
    let report = Pipeline::builder("short")
        .buffers(2, || 0u64)
        .source(
            "read",
            |b: &mut u64, cx: &Context| -> Result<Flow, BoxError> {
                *b = cx.round();
                Ok(if cx.round() == 9 {
                    Flow::Last
                } else {
                    Flow::More
                })
            },
        )
        .stage("sink", |_: &mut u64, _: &Context| -> R { Ok(()) })
        .deadline(Duration::from_secs(60))
        .build()
        .unwrap()
        .run()
        .unwrap();
    assert!(!report.stopped());
    assert_eq!(report.pipelines[0].rounds, 10);
}
