//! Pooled mode (`Builder::pooled`): the same programs give the same results
//! as with a thread per stage — every round once, order kept, one buffer at
//! a time per serial stage, at most the replica count at once, the
//! last-buffer notice once — on 1 to 4 workers; and what it refuses, it
//! refuses at `build`. (In-flight bounded by the pool and `repeat`: `pipeline.rs`,
//! which runs those tests in both modes; failures: `failures.rs`.)

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{counter, lifecycle, pass, refused, spin, Buffers, Counted, Notices};
use tidepool::policy::PolicySpec;
use tidepool_pipeline::{
    BoxError, Builder, Context, Flow, Order, Pipeline, PrioritySpec, SharedStage, Stage,
};

type R = Result<(), BoxError>;

/// Worker counts every test runs with: fewer, as many as and more workers
/// than stages.
const WORKERS: [usize; 4] = [1, 2, 3, 4];

/// A stage that checks it never runs twice at once and sees rounds in
/// order (a serial stage), and records the notice.
fn serial(name: &'static str, n: &Notices) -> impl Stage<Counted> {
    let busy = Arc::new(AtomicUsize::new(0));
    let n = n.clone();
    let mut next = 0u64;
    move |b: &mut Counted, cx: &Context| -> R {
        assert_eq!(
            busy.fetch_add(1, Ordering::SeqCst),
            0,
            "{name} ran twice at once"
        );
        assert_eq!(b.round, next, "{name} out of order");
        assert_eq!(cx.stage(), name);
        next += 1;
        n.see(cx);
        b.value = spin(cx.round(), b.value);
        b.path.push(name);
        busy.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// The rounds and stage paths a [`recorder`] sink saw, in arrival order.
type Seen = Arc<Mutex<Vec<(u64, Vec<&'static str>)>>>;

/// A sink stage that records each buffer's round and path into `seen`.
fn recorder(seen: &Seen) -> impl FnMut(&mut Counted, &Context) -> R + Send + 'static {
    let seen = seen.clone();
    move |b: &mut Counted, _: &Context| -> R {
        seen.lock().unwrap().push((b.round, b.path.clone()));
        Ok(())
    }
}

/// `seen` holds `rounds` rounds in input order, each through `path`, and
/// every stage on `path` saw the last-buffer notice once.
fn in_order_through(seen: &Seen, rounds: usize, path: &[&str], notices: &Notices, workers: usize) {
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), rounds, "{workers} workers");
    for (i, (round, p)) in seen.iter().enumerate() {
        assert_eq!(*round, i as u64);
        assert_eq!(p, path);
    }
    for s in path {
        assert_eq!(notices.of(s), 1, "{s}, {workers} workers");
    }
}

#[test]
fn serial_stages_take_one_buffer_at_a_time_in_order_and_see_the_notice_once() {
    for workers in WORKERS {
        let bufs = Buffers::default();
        let notices = Notices::default();
        let seen = Seen::default();
        let report = Pipeline::builder("linear")
            .buffers(4, bufs.maker())
            .source("read", counter(500))
            .stage("a", serial("a", &notices))
            .stage("b", serial("b", &notices))
            .then("c", serial("c", &notices))
            .stage("d", recorder(&seen))
            .pooled_threads(workers)
            .build()
            .unwrap()
            .run()
            .unwrap();
        in_order_through(&seen, 500, &["a", "b", "c"], &notices, workers);
        assert_eq!(report.pipelines[0].rounds, 500);
        let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read", "a", "b+c", "d"]);
        assert!(report.stages.iter().all(|s| s.items == 500), "{report:?}");
        assert!(report.notes[0].contains(&format!("pooled: {workers} workers")));
        assert_eq!(bufs.made.load(Ordering::SeqCst), 4);
        assert_eq!(bufs.live.load(Ordering::SeqCst), 0);
    }
}

/// A replicated stage runs at most its replica count at once (and, with
/// more workers than replicas, really runs them side by side), ordered
/// replicas keep the order downstream, unordered ones lose nothing.
#[test]
fn replicas_run_at_most_their_count_at_once_and_keep_the_order_if_asked() {
    for workers in WORKERS {
        for order in [Order::Ordered, Order::Unordered] {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let notices = Notices::default();
            let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let (s, n1, n2) = (seen.clone(), notices.clone(), notices.clone());
            let (now1, peak1) = (now.clone(), peak.clone());
            Pipeline::builder("replicas")
                .buffers(8, Buffers::default().maker())
                .source("read", counter(400))
                .replicated("work", 3, move || {
                    let (n, now, peak) = (n1.clone(), now1.clone(), peak1.clone());
                    move |b: &mut Counted, cx: &Context| -> R {
                        let k = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(k, Ordering::SeqCst);
                        n.see(cx);
                        b.value = spin(cx.round(), cx.replica() as u64);
                        now.fetch_sub(1, Ordering::SeqCst);
                        Ok(())
                    }
                })
                .order(order)
                .stage("check", move |b: &mut Counted, cx: &Context| -> R {
                    n2.see(cx);
                    s.lock().unwrap().push(b.round);
                    Ok(())
                })
                .pooled_threads(workers)
                .build()
                .unwrap()
                .run()
                .unwrap();
            let mut seen = seen.lock().unwrap().clone();
            if order == Order::Unordered {
                seen.sort_unstable();
            }
            assert_eq!(seen, (0..400).collect::<Vec<_>>(), "{order:?}, {workers}");
            assert!(peak.load(Ordering::SeqCst) <= 3);
            assert_eq!((notices.of("work"), notices.of("check")), (1, 1));
        }
    }
}

/// `then_each`: each replica's instances stay together (a round's sort and
/// write run on the same instance, one after the other on one worker).
#[test]
fn then_each_keeps_a_round_on_one_replica_and_one_worker() {
    for workers in WORKERS {
        type Seen = Arc<Mutex<BTreeMap<u64, (usize, u64)>>>;
        let (sorted, written): (Seen, Seen) = Default::default();
        let made = Arc::new(AtomicUsize::new(0));
        let (s1, w1, m1) = (sorted.clone(), written.clone(), made.clone());
        let out = Arc::new(Mutex::new(Vec::new()));
        let o = out.clone();
        Pipeline::builder("fused replicas")
            .buffers(6, Buffers::default().maker())
            .source("read", counter(300))
            .replicated("sort", 3, move || {
                let s = s1.clone();
                move |b: &mut Counted, cx: &Context| -> R {
                    let t = tidepool_pipeline::sys::thread_id().expect("a thread id on Linux");
                    assert!(s
                        .lock()
                        .unwrap()
                        .insert(b.round, (cx.replica(), t))
                        .is_none());
                    Ok(())
                }
            })
            .then_each("write", move || {
                m1.fetch_add(1, Ordering::SeqCst);
                let w = w1.clone();
                move |b: &mut Counted, cx: &Context| -> R {
                    let t = tidepool_pipeline::sys::thread_id().expect("a thread id on Linux");
                    w.lock().unwrap().insert(b.round, (cx.replica(), t));
                    Ok(())
                }
            })
            .stage("sink", move |b: &mut Counted, _: &Context| -> R {
                o.lock().unwrap().push(b.round);
                Ok(())
            })
            .pooled_threads(workers)
            .build()
            .unwrap()
            .run()
            .unwrap();
        assert_eq!(*sorted.lock().unwrap(), *written.lock().unwrap());
        assert_eq!(made.load(Ordering::SeqCst), 3);
        assert_eq!(*out.lock().unwrap(), (0..300).collect::<Vec<_>>());
    }
}

/// A source that repeats, and one that ends with an empty buffer.
#[test]
fn a_repeating_source_and_an_empty_end_reach_every_stage() {
    for workers in WORKERS {
        let notices = Notices::default();
        let count = Arc::new(AtomicUsize::new(0));
        let (n1, c) = (notices.clone(), count.clone());
        let mut left = 7u64;
        let report = Pipeline::builder("empty end")
            .buffers(5, Buffers::default().maker())
            .source("read", move |b: &mut Counted, cx: &Context| {
                b.round = cx.round();
                if left == 0 {
                    return Ok(Flow::End);
                }
                left -= 1;
                Ok(Flow::More)
            })
            .repeat(3)
            .stage("a", move |_: &mut Counted, cx: &Context| -> R {
                n1.see(cx);
                Ok(())
            })
            .stage("b", move |_: &mut Counted, cx: &Context| -> R {
                if cx.is_last() {
                    assert!(cx.is_empty());
                }
                c.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .pooled_threads(workers)
            .build()
            .unwrap()
            .run()
            .unwrap();
        assert_eq!(report.pipelines[0].rounds, 8, "7 filled, 1 empty");
        assert_eq!(count.load(Ordering::SeqCst), 8);
        assert_eq!(notices.of("a"), 1);
        assert!(notices.0.lock().unwrap().iter().all(|n| n.2), "empty last");
    }
}

#[test]
fn init_and_cleanup_run_once_per_stage_instance() {
    let log = lifecycle(|b| b.pooled());
    let count = |s: &str| log.iter().filter(|e| e.0 == s).count();
    assert_eq!((count("init a"), count("cleanup a")), (1, 1));
    assert_eq!((count("init b"), count("cleanup b")), (2, 2));
    assert_eq!(log.len(), 6);
}

/// A stage that blocks does not stall the run, even on one worker.
#[test]
fn blocking_stages_finish_on_any_worker_count() {
    for workers in WORKERS {
        let n = Arc::new(AtomicUsize::new(0));
        let n1 = n.clone();
        Pipeline::builder("io")
            .buffers(4, Buffers::default().maker())
            .source("read", counter(40))
            .stage("sleep", |_: &mut Counted, _: &Context| -> R {
                std::thread::sleep(std::time::Duration::from_micros(200));
                Ok(())
            })
            .stage("count", move |_: &mut Counted, _: &Context| -> R {
                n1.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .pooled_threads(workers)
            .build()
            .unwrap()
            .run()
            .unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 40);
    }
}

/// Blocking stages between computing ones, their calls of uneven length
/// (0, the usual, twice the usual: a worker that times its wake-up by a
/// stage's past durations is early or late), give every round once, in
/// order, one at a time per stage, and the notice once, on 1 to 5 workers.
#[test]
fn blocking_stages_of_uneven_length_lose_and_reorder_nothing() {
    for workers in [1, 2, 3, 4, 5] {
        let bufs = Buffers::default();
        let notices = Notices::default();
        let seen = Seen::default();
        let blocking = |us: u64| {
            move |_: &mut Counted, cx: &Context| -> R {
                // Mostly 200 µs, now and then much shorter or longer.
                let d = match cx.round() % 7 {
                    0 => 0,
                    3 => 2 * us,
                    _ => us,
                };
                std::thread::sleep(std::time::Duration::from_micros(d));
                Ok(())
            }
        };
        let report = Pipeline::builder("uneven-io")
            .buffers(4, bufs.maker())
            .source("read", counter(300))
            .stage("io", blocking(200))
            .stage("a", serial("a", &notices))
            .stage("io2", blocking(150))
            .stage("b", serial("b", &notices))
            .stage("d", recorder(&seen))
            .pooled_threads(workers)
            .build()
            .unwrap()
            .run()
            .unwrap();
        in_order_through(&seen, 300, &["a", "b"], &notices, workers);
        assert_eq!(report.pipelines[0].rounds, 300);
        assert_eq!(bufs.live.load(Ordering::SeqCst), 0);
    }
}

fn base() -> Builder<Counted> {
    Pipeline::builder("x")
        .buffers(4, Buffers::default().maker())
        .source("read", counter(3))
}

/// Pooled mode keeps its counters small (pooled.rs, "Layout"): past the
/// limits it refuses the pipeline, naming the option and its range, before
/// it makes a buffer.
#[test]
fn pooled_limits_are_refused_by_name_before_anything_is_made() {
    let e = refused(base().stage("a", pass).pooled_threads(65_536));
    assert!(e.contains("pooled_threads must be at most 65535"), "{e}");
    assert!(base()
        .stage("a", pass)
        .pooled_threads(65_535)
        .build()
        .is_ok());
    let e = refused(base().replicated("a", 65_536, || pass).pooled_threads(2));
    assert!(
        e.contains("stage `a`") && e.contains("at most 65535 replicas"),
        "{e}"
    );
    // No buffer is made: the maker would take 4 billion of them.
    let huge = Pipeline::builder("x")
        .buffers(u32::MAX as usize, Buffers::default().maker())
        .source("read", counter(3))
        .stage("a", pass)
        .pooled_threads(2);
    let e = refused(huge);
    assert!(e.contains("fewer than 4294967295 buffers"), "{e}");
}

#[test]
fn features_that_need_a_thread_per_stage_are_refused_by_name() {
    let e = refused(
        base()
            .stage("a", pass)
            .priority(PrioritySpec::parse("nice:5").unwrap())
            .pooled(),
    );
    assert!(
        e.contains("stage `a`") && e.contains("priorit") && e.contains("pooled"),
        "{e}"
    );
    let e = refused(
        base()
            .sized("s", PolicySpec::parse("auto").unwrap(), 4, || pass)
            .pooled(),
    );
    assert!(
        e.contains("stage `s`") && e.contains("self-sizing") && e.contains("pooled_threads"),
        "{e}"
    );
    // A shared stage's priority is its threads' too.
    let shared = SharedStage::with_priority("sh", pass, PrioritySpec::parse("nice:5").ok());
    let e = refused(base().shared(&shared).pooled());
    assert!(
        e.contains("stage `sh`") && e.contains("priorit") && e.contains("pooled"),
        "{e}"
    );
    let e = refused(base().stage("a", pass).pooled_threads(0));
    assert!(e.contains("pooled_threads must be at least 1"), "{e}");
    let e = refused(base().stage("a", pass).fork(
        |_: &Counted, _: &Context| 0,
        vec![
            Builder::branch().stage("p", pass).pooled(),
            Builder::branch().stage("q", pass),
        ],
        Order::Ordered,
    ));
    assert!(e.contains("branch cannot be pooled"), "{e}");
    // The same pipelines without `pooled` build.
    base()
        .stage("a", pass)
        .priority(PrioritySpec::parse("nice:5").unwrap())
        .build()
        .unwrap();
}

/// Counts a stage's calls by the scheduling class its worker was in.
#[derive(Clone, Default)]
struct Classes {
    batch: Arc<AtomicUsize>,
    other: Arc<AtomicUsize>,
}

impl Classes {
    fn see(&self) {
        use tidepool_pipeline::sys::{sched_class, SchedClass};
        match sched_class().expect("the thread's class") {
            Some(SchedClass::Batch) => &self.batch,
            Some(SchedClass::Other) => &self.other,
            c => panic!("unexpected class {c:?}"),
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    fn counts(&self) -> (usize, usize) {
        (
            self.batch.load(Ordering::Relaxed),
            self.other.load(Ordering::Relaxed),
        )
    }
}

/// A pipeline of a computing and a blocking stage on three workers, run on
/// a fresh thread that starts in `class`; the two stages' class counts and
/// the thread's class after the run.
#[cfg(target_os = "linux")]
fn classes_seen(
    class: tidepool_pipeline::sys::SchedClass,
    rounds: u64,
) -> (
    (usize, usize),
    (usize, usize),
    Option<tidepool_pipeline::sys::SchedClass>,
) {
    use tidepool_pipeline::sys::{sched_class, set_sched_class};
    std::thread::spawn(move || {
        set_sched_class(class).expect("allowed: checked by the caller");
        let (compute, block) = (Classes::default(), Classes::default());
        let (c, b) = (compute.clone(), block.clone());
        Pipeline::builder("classes")
            .buffers(4, Buffers::default().maker())
            .source("read", counter(rounds))
            .stage("compute", move |x: &mut Counted, cx: &Context| -> R {
                c.see();
                x.value = spin(cx.round(), 1);
                Ok(())
            })
            .stage("block", move |_: &mut Counted, _: &Context| -> R {
                b.see();
                std::thread::sleep(std::time::Duration::from_micros(50));
                Ok(())
            })
            .pooled_threads(3)
            .build()
            .unwrap()
            .run()
            .unwrap();
        (compute.counts(), block.counts(), sched_class().unwrap())
    })
    .join()
    .unwrap()
}

/// Whether this process may put a thread in SCHED_BATCH and back.
#[cfg(target_os = "linux")]
fn batch_allowed() -> bool {
    use tidepool_pipeline::sys::{set_sched_class, SchedClass};
    std::thread::spawn(|| {
        set_sched_class(SchedClass::Batch).is_ok() && set_sched_class(SchedClass::Other).is_ok()
    })
    .join()
    .unwrap()
}

/// Workers run a computing stage in SCHED_BATCH (so that waking one does
/// not preempt the worker that woke it), a blocking stage in SCHED_OTHER,
/// and the calling thread gets SCHED_OTHER back.
#[cfg(target_os = "linux")]
#[test]
fn workers_compute_in_sched_batch_and_block_in_sched_other() {
    use tidepool_pipeline::sys::SchedClass;
    if !batch_allowed() {
        eprintln!("skipped: this process may not switch threads to SCHED_BATCH and back");
        return;
    }
    let rounds = 200;
    let ((batch, other), block, after) = classes_seen(SchedClass::Other, rounds);
    assert_eq!(batch + other, rounds as usize);
    // A stage counts as blocking until its first sampled call shows it
    // does not (`running.rs`, `Blocking`): only the first calls may run in
    // SCHED_OTHER.
    assert!(
        batch >= rounds as usize / 2,
        "compute: {batch} batch, {other} other"
    );
    assert_eq!(block, (0, rounds as usize), "block: (batch, other)");
    assert_eq!(
        after,
        Some(SchedClass::Other),
        "the caller's class restored"
    );
}

/// A caller that chose a class other than SCHED_OTHER keeps it, and so do
/// the workers: pooled mode switches classes only from the default one.
#[cfg(target_os = "linux")]
#[test]
fn a_caller_in_sched_batch_keeps_every_worker_in_it() {
    use tidepool_pipeline::sys::SchedClass;
    if !batch_allowed() {
        eprintln!("skipped: this process may not switch threads to SCHED_BATCH and back");
        return;
    }
    let rounds = 100;
    let (compute, block, after) = classes_seen(SchedClass::Batch, rounds);
    assert_eq!(compute, (rounds as usize, 0));
    assert_eq!(block, (rounds as usize, 0));
    assert_eq!(after, Some(SchedClass::Batch));
}
