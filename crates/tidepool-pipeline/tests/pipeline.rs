//! The pipeline's features, each with a test that fails when it breaks.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{counter, lifecycle, mode, pass, refused, spin, Buffers, Counted, Notices};
use tidepool::policy::PolicySpec;
use tidepool_pipeline::{
    run_all, BoxError, Builder, Context, Flow, Order, Pipeline, SharedStage, Stage, Step,
};

type R = Result<(), BoxError>;

#[test]
fn a_linear_pipeline_passes_every_round_and_notifies_every_stage_once() {
    let bufs = Buffers::default();
    let notices = Notices::default();
    let (n1, n2) = (notices.clone(), notices.clone());
    let sum = Arc::new(Mutex::new(0u64));
    let s2 = sum.clone();
    let report = Pipeline::builder("linear")
        .buffers(3, bufs.maker())
        .source("read", counter(1000))
        .stage("double", move |b: &mut Counted, cx: &Context| -> R {
            n1.see(cx);
            b.value *= 2;
            Ok(())
        })
        .stage("sum", move |b: &mut Counted, cx: &Context| -> R {
            n2.see(cx);
            *s2.lock().unwrap() += b.value;
            Ok(())
        })
        .build()
        .unwrap()
        .run()
        .unwrap();
    assert_eq!(*sum.lock().unwrap(), 999 * 1000);
    assert_eq!(report.pipelines[0].rounds, 1000);
    assert_eq!((notices.of("double"), notices.of("sum")), (1, 1));
    assert_eq!(report.stages.len(), 3);
    assert!(report.stages.iter().all(|s| s.items == 1000), "{report:?}");
    assert!(report.limiting().is_some());
    // Buffers: made once, all gone with the run.
    assert_eq!(bufs.made.load(Ordering::SeqCst), 3);
    assert_eq!(bufs.live.load(Ordering::SeqCst), 0);
}

#[test]
fn a_stage_may_share_its_context_with_scoped_threads() {
    Pipeline::builder("scoped")
        .buffers(2, Buffers::default().maker())
        .source("read", counter(3))
        .stage("split", |b: &mut Counted, cx: &Context| -> R {
            let (lo, hi) = std::thread::scope(|s| {
                let h = s.spawn(|| cx.round() * 2);
                (cx.round(), h.join().unwrap())
            });
            b.value = lo + hi;
            assert_eq!(cx.stage(), "split");
            Ok(())
        })
        .build()
        .unwrap()
        .run()
        .unwrap();
}

/// Also in pooled mode (`None`: a thread per stage).
#[test]
fn buffers_in_flight_never_exceed_the_pool() {
    for (pool, workers) in [1, 2, 5]
        .into_iter()
        .flat_map(|p| [None, Some(2), Some(4)].map(|w| (p, w)))
    {
        let bufs = Buffers::default();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (f1, f2, p1) = (in_flight.clone(), in_flight.clone(), peak.clone());
        let mut src = counter(500);
        let b = Pipeline::builder("bound")
            .buffers(pool, bufs.maker())
            .source("read", move |b: &mut Counted, cx: &Context| {
                let now = f1.fetch_add(1, Ordering::SeqCst) + 1;
                p1.fetch_max(now, Ordering::SeqCst);
                src(b, cx)
            })
            .replicated("work", 3, || {
                |b: &mut Counted, cx: &Context| -> R {
                    b.value = spin(cx.round(), 1);
                    Ok(())
                }
            })
            .order(Order::Unordered)
            .stage("write", move |_: &mut Counted, _: &Context| -> R {
                f2.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            });
        mode(b, workers).build().unwrap().run().unwrap();
        assert!(
            peak.load(Ordering::SeqCst) <= pool,
            "pool {pool}, {workers:?}"
        );
        assert_eq!(
            bufs.made.load(Ordering::SeqCst),
            pool,
            "no allocation per round"
        );
    }
}

#[test]
fn ordered_replicas_keep_the_input_order_and_unordered_ones_lose_nothing() {
    for order in [Order::Ordered, Order::Unordered] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let notices = Notices::default();
        let (s, n1, n2) = (seen.clone(), notices.clone(), notices.clone());
        Pipeline::builder("replicas")
            .buffers(8, Buffers::default().maker())
            .source("read", counter(400))
            .replicated("work", 4, move || {
                let n = n1.clone();
                move |b: &mut Counted, cx: &Context| -> R {
                    n.see(cx);
                    b.value = spin(cx.round(), cx.replica() as u64);
                    Ok(())
                }
            })
            .order(order)
            .stage("check", move |b: &mut Counted, cx: &Context| -> R {
                n2.see(cx);
                s.lock().unwrap().push(b.round);
                Ok(())
            })
            .build()
            .unwrap()
            .run()
            .unwrap();
        let seen = seen.lock().unwrap().clone();
        if order == Order::Ordered {
            assert_eq!(seen, (0..400).collect::<Vec<_>>());
        } else {
            let mut sorted = seen.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..400).collect::<Vec<_>>());
        }
        assert_eq!(
            (notices.of("work"), notices.of("check")),
            (1, 1),
            "{order:?}"
        );
    }
}

#[test]
fn then_puts_stages_on_one_thread_and_stage_on_its_own() {
    let tids = Arc::new(Mutex::new(std::collections::BTreeMap::<
        String,
        std::collections::BTreeSet<u64>,
    >::new()));
    let rec = |name: &'static str,
               t: &Arc<
        Mutex<std::collections::BTreeMap<String, std::collections::BTreeSet<u64>>>,
    >| {
        let t = t.clone();
        move |_: &mut Counted, _: &Context| -> R {
            t.lock()
                .unwrap()
                .entry(name.into())
                .or_default()
                .insert(tidepool_pipeline::sys::thread_id().expect("a thread id on Linux"));
            Ok(())
        }
    };
    let report = Pipeline::builder("multistage")
        .buffers(4, Buffers::default().maker())
        .source("read", counter(50))
        .then("a", rec("a", &tids))
        .stage("b", rec("b", &tids))
        .then("c", rec("c", &tids))
        .stage("d", rec("d", &tids))
        .build()
        .unwrap()
        .run()
        .unwrap();
    let t = tids.lock().unwrap();
    assert!(t.values().all(|s| s.len() == 1));
    assert_eq!(t["b"], t["c"], "then runs on the previous stage's thread");
    assert_ne!(t["a"], t["b"]);
    assert_ne!(t["c"], t["d"]);
    let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["read+a", "b+c", "d"]);
}

/// `then_each` puts a stage on every thread of a replicated group, an
/// instance per thread: each round runs both stages on one thread, every
/// round passes once, the group's order still holds downstream, and each
/// stage sees the last-buffer notice once.
#[test]
fn then_each_runs_a_stage_on_each_replica_thread() {
    type Seen = Arc<Mutex<std::collections::BTreeMap<u64, u64>>>;
    let (sorted, written): (Seen, Seen) = Default::default();
    let (made, notices, out) = (
        Arc::new(AtomicUsize::new(0)),
        Notices::default(),
        Arc::new(Mutex::new(Vec::new())),
    );
    let (s1, w1, m1, n1, n2, o1) = (
        sorted.clone(),
        written.clone(),
        made.clone(),
        notices.clone(),
        notices.clone(),
        out.clone(),
    );
    let report = Pipeline::builder("fused replicas")
        .buffers(6, Buffers::default().maker())
        .source("read", counter(300))
        .replicated("sort", 3, move || {
            let (s, n) = (s1.clone(), n1.clone());
            move |b: &mut Counted, cx: &Context| -> R {
                n.see(cx);
                b.value = spin(cx.round(), b.value);
                let old = s.lock().unwrap().insert(
                    b.round,
                    tidepool_pipeline::sys::thread_id().expect("a thread id on Linux"),
                );
                assert!(old.is_none(), "round {} sorted twice", b.round);
                Ok(())
            }
        })
        .then_each("write", move || {
            m1.fetch_add(1, Ordering::SeqCst);
            let (w, n) = (w1.clone(), n2.clone());
            move |b: &mut Counted, cx: &Context| -> R {
                n.see(cx);
                w.lock().unwrap().insert(
                    b.round,
                    tidepool_pipeline::sys::thread_id().expect("a thread id on Linux"),
                );
                Ok(())
            }
        })
        .order(Order::Ordered)
        .stage("sink", move |b: &mut Counted, _: &Context| -> R {
            o1.lock().unwrap().push(b.round);
            Ok(())
        })
        .build()
        .unwrap()
        .run()
        .unwrap();
    let (sorted, written) = (sorted.lock().unwrap(), written.lock().unwrap());
    assert_eq!(sorted.len(), 300);
    assert_eq!(
        *sorted, *written,
        "each round's write ran on its sort's thread"
    );
    assert_eq!(
        made.load(Ordering::SeqCst),
        3,
        "one write instance per replica"
    );
    assert_eq!(*out.lock().unwrap(), (0..300).collect::<Vec<_>>());
    assert_eq!((notices.of("sort"), notices.of("write")), (1, 1));
    let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["read", "sort+write", "sink"]);
}

#[test]
fn then_on_a_replicated_stage_asks_for_then_each() {
    let e = refused(
        Pipeline::builder("x")
            .buffers(4, Buffers::default().maker())
            .source("read", counter(1))
            .replicated("r", 2, || pass)
            .then("w", pass),
    );
    assert!(e.contains("stage `w`") && e.contains("then_each"), "{e}");
    // One replica: `then` is fine.
    Pipeline::builder("x")
        .buffers(4, Buffers::default().maker())
        .source("read", counter(3))
        .replicated("r", 1, || pass)
        .then("w", pass)
        .build()
        .unwrap()
        .run()
        .unwrap();
}

/// Also in pooled mode on 1, 2 and 4 workers (`None`: a thread per stage).
#[test]
fn repeat_runs_each_stage_on_k_buffers_before_the_next_stage() {
    for workers in [None, Some(1), Some(2), Some(4)] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (l1, l2) = (log.clone(), log.clone());
        let b = Pipeline::builder("repeat")
            .buffers(3, Buffers::default().maker())
            .source("read", counter(5))
            .stage("in", move |b: &mut Counted, _: &Context| -> R {
                l1.lock().unwrap().push(("in", b.round));
                Ok(())
            })
            .then("out", move |b: &mut Counted, _: &Context| -> R {
                l2.lock().unwrap().push(("out", b.round));
                Ok(())
            })
            .repeat(2);
        mode(b, workers).build().unwrap().run().unwrap();
        let log = log.lock().unwrap().clone();
        assert_eq!(
            log,
            [
                ("in", 0),
                ("in", 1),
                ("out", 0),
                ("out", 1),
                ("in", 2),
                ("in", 3),
                ("out", 2),
                ("out", 3),
                ("in", 4),
                ("out", 4)
            ],
            "{workers:?}"
        );
    }
}

#[test]
fn repeat_needs_enough_buffers() {
    let e = Pipeline::builder("starved")
        .buffers(2, Buffers::default().maker())
        .source("read", counter(5))
        .stage("a", pass)
        .repeat(2)
        .stage("b", pass)
        .repeat(2)
        .build()
        .err()
        .expect("2 buffers cannot feed two groups that each hold one while waiting");
    assert!(e.to_string().contains("at least 3"), "{e}");
}

/// Configurations that would wait forever, whatever the buffer count: a
/// replica holding half a round while the reorder ring holds every other
/// buffer for it, and a branch holding one its join waits for. (Unordered,
/// the replicated stage runs: its neighbours do not wait for it.)
#[test]
fn a_repeat_that_would_deadlock_is_refused() {
    let base = || {
        Pipeline::builder("cycle")
            .buffers(16, Buffers::default().maker())
            .source("read", counter(100))
    };
    let e = refused(base().replicated("r", 2, || pass).repeat(2));
    assert!(
        e.contains("stage `r`") && e.contains("Order::Unordered"),
        "{e}"
    );
    let e = refused(base().stage("a", pass).fork(
        |b: &Counted, _: &Context| (b.round % 2) as usize,
        vec![
            Builder::branch().stage("b", pass).repeat(2),
            Builder::branch().stage("c", pass),
        ],
        Order::Ordered,
    ));
    assert!(
        e.contains("stage `b`") && e.contains("fork's branch"),
        "{e}"
    );
    let b = base()
        .replicated("r", 2, || pass)
        .order(Order::Unordered)
        .repeat(2)
        .stage("w", pass);
    b.build().unwrap().run().unwrap();
}

fn tag(name: &'static str, n: &Notices) -> impl Stage<Counted> {
    let n = n.clone();
    move |b: &mut Counted, cx: &Context| -> R {
        n.see(cx);
        if !cx.is_empty() {
            b.path.push(name);
        }
        Ok(())
    }
}

#[test]
fn fork_routes_each_buffer_down_one_branch_and_the_join_restores_order() {
    for order in [Order::Ordered, Order::Unordered] {
        let notices = Notices::default();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s, n) = (seen.clone(), notices.clone());
        Pipeline::builder("fork")
            .buffers(6, Buffers::default().maker())
            .source("read", counter(301))
            .stage("split", tag("split", &notices))
            .fork(
                |b: &Counted, _: &Context| (b.value % 3) as usize,
                vec![
                    Builder::branch().stage("zero", tag("zero", &notices)),
                    Builder::branch()
                        .replicated("one", 2, {
                            let n = notices.clone();
                            move || tag("one", &n)
                        })
                        .stage("one-b", tag("one-b", &notices)),
                    Builder::branch().stage("two", tag("two", &notices)),
                ],
                order,
            )
            .stage("merge", move |b: &mut Counted, cx: &Context| -> R {
                n.see(cx);
                s.lock().unwrap().push((b.round, b.path.clone()));
                Ok(())
            })
            .build()
            .unwrap()
            .run()
            .unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 301);
        let rounds: Vec<u64> = seen.iter().map(|x| x.0).collect();
        if order == Order::Ordered {
            assert_eq!(rounds, (0..301).collect::<Vec<_>>());
        }
        for (r, path) in &seen {
            let want: &[&str] = match r % 3 {
                0 => &["split", "zero"],
                1 => &["split", "one", "one-b"],
                _ => &["split", "two"],
            };
            assert_eq!(path, want, "round {r}");
        }
        for st in ["split", "zero", "one", "one-b", "two", "merge"] {
            assert_eq!(notices.of(st), 1, "{st} {order:?}");
        }
        // Round 300 (the last) goes down branch 0: the others get an empty last.
        let empties: Vec<String> = notices
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|n| n.2)
            .map(|n| n.0.clone())
            .collect();
        let mut empties = empties;
        empties.sort();
        assert_eq!(empties, ["one", "one-b", "two"]);
    }
}

#[test]
fn a_source_that_ends_empty_still_notifies_every_stage() {
    let notices = Notices::default();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let report = Pipeline::builder("empty")
        .buffers(2, Buffers::default().maker())
        .source("read", |_: &mut Counted, _: &Context| Ok(Flow::End))
        .stage("a", tag("a", &notices))
        .fork(
            |_: &Counted, _: &Context| 1,
            vec![
                Builder::branch().stage("x", tag("x", &notices)),
                Builder::branch().stage("y", tag("y", &notices)),
            ],
            Order::Ordered,
        )
        .stage("b", move |_: &mut Counted, cx: &Context| -> R {
            assert!(cx.is_last() && cx.is_empty());
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .build()
        .unwrap()
        .run()
        .unwrap();
    assert_eq!(report.pipelines[0].rounds, 1);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    for st in ["a", "x", "y"] {
        assert_eq!(notices.of(st), 1, "{st}");
    }
    assert!(notices.0.lock().unwrap().iter().all(|n| n.2));
}

#[test]
fn two_pipelines_share_a_stage() {
    let notices = Notices::default();
    let n = notices.clone();
    let served = Arc::new(Mutex::new(Vec::new()));
    let sv = served.clone();
    let shared = SharedStage::new("disk", move |b: &mut Counted, cx: &Context| -> R {
        n.see(cx);
        sv.lock().unwrap().push((
            cx.pipeline().to_string(),
            tidepool_pipeline::sys::thread_id().expect("a thread id on Linux"),
        ));
        b.value += 1000;
        Ok(())
    });
    let sums: Vec<Arc<Mutex<u64>>> = (0..2).map(|_| Arc::default()).collect();
    let make = |name: &str, n: u64, sum: Arc<Mutex<u64>>| {
        Pipeline::builder(name)
            .buffers(3, Buffers::default().maker())
            .source("read", counter(n))
            .shared(&shared)
            .stage("sum", move |b: &mut Counted, _: &Context| -> R {
                *sum.lock().unwrap() += b.value;
                Ok(())
            })
            .build()
            .unwrap()
    };
    let report = run_all(vec![
        make("a", 100, sums[0].clone()),
        make("b", 50, sums[1].clone()),
    ])
    .unwrap();
    assert_eq!(*sums[0].lock().unwrap(), (0..100).sum::<u64>() + 100 * 1000);
    assert_eq!(*sums[1].lock().unwrap(), (0..50).sum::<u64>() + 50 * 1000);
    let served_now = served.lock().unwrap().clone();
    assert_eq!(served_now.len(), 150);
    let tids: std::collections::BTreeSet<u64> = served_now.iter().map(|s| s.1).collect();
    assert_eq!(tids.len(), 1, "one thread serves both pipelines");
    let mut lasts: Vec<String> = notices
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|n| n.1.clone())
        .collect();
    lasts.sort();
    assert_eq!(
        lasts,
        ["a", "b"],
        "the shared stage sees each pipeline's last once"
    );
    let disk = report.stages.iter().find(|s| s.name == "disk").unwrap();
    assert_eq!((disk.items, disk.pipelines.len()), (150, 2));
    // The shared stage is handed back after a run: a second run uses it again.
    run_all(vec![make("a", 10, Arc::default())]).unwrap();
    assert_eq!(served.lock().unwrap().len(), 160);
}

#[test]
fn a_self_sizing_stage_runs_under_a_tidepool_policy() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let inits = Arc::new(AtomicUsize::new(0));
    let cleanups = Arc::new(AtomicUsize::new(0));
    struct Io(Arc<AtomicUsize>, Arc<AtomicUsize>);
    impl Stage<Counted> for Io {
        fn init(&mut self) -> R {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn process(&mut self, b: &mut Counted, _: &Context) -> R {
            std::thread::sleep(std::time::Duration::from_micros(200));
            b.value += 1;
            Ok(())
        }
        fn cleanup(&mut self) -> R {
            self.1.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }
    let (i, c) = (inits.clone(), cleanups.clone());
    let report = Pipeline::builder("sized")
        .buffers(8, Buffers::default().maker())
        .source("read", counter(300))
        .sized(
            "fetch",
            PolicySpec::parse("fixed:3").unwrap(),
            3,
            move || Io(i.clone(), c.clone()),
        )
        .stage("check", move |b: &mut Counted, _: &Context| -> R {
            s.lock().unwrap().push((b.round, b.value));
            Ok(())
        })
        .build()
        .unwrap()
        .run()
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        (0..300).map(|r| (r, r + 1)).collect::<Vec<_>>(),
        "ordered by default"
    );
    let fetch = report.stages.iter().find(|s| s.name == "fetch").unwrap();
    assert_eq!(fetch.items, 300);
    assert!(
        fetch.threads >= 1 && fetch.threads <= 3,
        "{}",
        fetch.threads
    );
    assert!(inits.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        inits.load(Ordering::SeqCst),
        cleanups.load(Ordering::SeqCst)
    );
}

#[test]
fn init_and_cleanup_run_once_per_stage_instance_on_its_thread() {
    let log = lifecycle(|b| b);
    let count = |s: &str| log.iter().filter(|e| e.0 == s).count();
    assert_eq!((count("init a"), count("cleanup a")), (1, 1));
    assert_eq!((count("init b"), count("cleanup b")), (2, 2));
    let tid = |s: &str| log.iter().find(|e| e.0 == s).unwrap().1;
    assert_eq!(tid("init a"), tid("cleanup a"));
}

#[test]
fn build_errors_name_the_problem() {
    let e = refused(Pipeline::<Counted>::builder("x"));
    assert!(e.contains("no source") && e.contains("no buffers"), "{e}");
    let e = refused(
        Pipeline::builder("x")
            .buffers(2, Buffers::default().maker())
            .source("read", counter(1))
            .replicated("r", 0, || pass),
    );
    assert!(e.contains("replicas must be at least 1"), "{e}");
    let e = refused(
        Pipeline::builder("x")
            .buffers(2, Buffers::default().maker())
            .source("read", counter(1))
            .stage("a", pass)
            .fork(
                |_: &Counted, _: &Context| 0,
                vec![Builder::branch().stage("only", pass)],
                Order::Ordered,
            ),
    );
    assert!(e.contains("two or more branches"), "{e}");
    // A fork holds the last buffer while it takes empty ones: one buffer
    // would deadlock, so it is refused.
    let e = refused(
        Pipeline::builder("x")
            .buffers(1, Buffers::default().maker())
            .source("read", counter(3))
            .stage("a", pass)
            .fork(
                |_: &Counted, _: &Context| 0,
                vec![
                    Builder::branch().stage("p", pass),
                    Builder::branch().stage("q", pass),
                ],
                Order::Ordered,
            ),
    );
    assert!(e.contains("at least 2"), "{e}");
}

#[test]
fn a_route_out_of_range_is_an_error_not_a_hang() {
    let e = Pipeline::builder("x")
        .buffers(2, Buffers::default().maker())
        .source("read", counter(10))
        .stage("a", pass)
        .fork(
            |b: &Counted, _: &Context| if b.round == 4 { 7 } else { 0 },
            vec![
                Builder::branch().stage("p", pass),
                Builder::branch().stage("q", pass),
            ],
            Order::Ordered,
        )
        .build()
        .unwrap()
        .run()
        .unwrap_err();
    assert_eq!((e.step, e.round), (Step::Route, Some(4)));
    assert!(e.to_string().contains("branch 7"), "{e}");
}

/// Copies a `Counted` into a branch's buffer (value, round, path).
fn copy_counted(from: &Counted, to: &mut Counted, _branch: usize) {
    to.round = from.round;
    to.value = from.value;
    to.path.clear();
    to.path.extend_from_slice(&from.path);
}

/// Adds a branch's value into the original and appends its path.
fn merge_counted(into: &mut Counted, from: &Counted, _branch: usize) -> R {
    into.value += from.value;
    for p in &from.path {
        if !into.path.contains(p) {
            into.path.push(p);
        }
    }
    Ok(())
}

/// A stage that records the rounds it sees and adds `add` to the value.
fn adder(
    name: &'static str,
    add: u64,
    n: &Notices,
    seen: &Arc<Mutex<Vec<u64>>>,
) -> impl Stage<Counted> {
    let (n, seen) = (n.clone(), seen.clone());
    move |b: &mut Counted, cx: &Context| -> R {
        n.see(cx);
        if !cx.is_empty() {
            assert_eq!(
                b.round,
                cx.round(),
                "{name} got round {}'s buffer as {}",
                b.round,
                cx.round()
            );
            b.value += add;
            b.path.push(name);
            seen.lock().unwrap().push(cx.round());
        }
        Ok(())
    }
}

#[test]
fn broadcast_sends_every_buffer_down_every_branch_and_joins_after_all() {
    for pool in [1, 2, 5] {
        let bufs = Buffers::default();
        let notices = Notices::default();
        let seen: Vec<Arc<Mutex<Vec<u64>>>> = (0..3).map(|_| Arc::default()).collect();
        let out = Arc::new(Mutex::new(Vec::new()));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (f1, f2, p1, o) = (
            in_flight.clone(),
            in_flight.clone(),
            peak.clone(),
            out.clone(),
        );
        let n2 = notices.clone();
        let mut src = counter(200);
        let report = Pipeline::builder("broadcast")
            .buffers(pool, bufs.maker())
            .source("read", move |b: &mut Counted, cx: &Context| {
                let now = f1.fetch_add(1, Ordering::SeqCst) + 1;
                p1.fetch_max(now, Ordering::SeqCst);
                src(b, cx)
            })
            .broadcast(
                vec![
                    Builder::branch().stage("x", adder("x", 1, &notices, &seen[0])),
                    Builder::branch()
                        .replicated("y", 2, {
                            let (n, s) = (notices.clone(), seen[1].clone());
                            move || adder("y", 10, &n, &s)
                        })
                        .order(Order::Unordered),
                    Builder::branch()
                        .stage("z", adder("z", 100, &notices, &seen[2]))
                        .stage("z2", move |b: &mut Counted, cx: &Context| -> R {
                            n2.see(cx);
                            std::hint::black_box(spin(cx.round(), b.value));
                            Ok(())
                        }),
                ],
                copy_counted,
                merge_counted,
            )
            .stage("write", move |b: &mut Counted, cx: &Context| -> R {
                o.lock().unwrap().push((b.round, b.value, cx.is_last()));
                f2.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            })
            .build()
            .unwrap()
            .run()
            .unwrap();
        let out = out.lock().unwrap().clone();
        // In order, each round once, with every branch's work merged in:
        // round r → (r + 1) + (r + 10) + (r + 100).
        let want: Vec<(u64, u64, bool)> = (0..200).map(|r| (r, 3 * r + 111, r == 199)).collect();
        assert_eq!(out, want, "pool {pool}");
        for (i, s) in seen.iter().enumerate() {
            let mut s = s.lock().unwrap().clone();
            s.sort_unstable();
            assert_eq!(
                s,
                (0..200).collect::<Vec<_>>(),
                "branch {i} sees every round once"
            );
        }
        for st in ["x", "y", "z", "z2"] {
            assert_eq!(notices.of(st), 1, "{st}: one last notice, pool {pool}");
        }
        // Rounds in flight stay within the pool; the copies are made once:
        // (branches − 1) per pipeline buffer, and all dropped with the run.
        assert!(peak.load(Ordering::SeqCst) <= pool, "pool {pool}");
        assert_eq!(
            bufs.made.load(Ordering::SeqCst),
            pool * 3,
            "no allocation per round"
        );
        assert_eq!(bufs.live.load(Ordering::SeqCst), 0);
        assert!(report.stages.iter().all(|s| s.items == 200), "{report:?}");
    }
}

#[test]
fn forks_nest_route_in_broadcast_and_broadcast_in_route() {
    // 101 rounds: the last is even and takes the broadcast's branch; 102:
    // it is odd, and the broadcast copies the outer fork's empty notice.
    for (order, rounds) in [
        (Order::Ordered, 101),
        (Order::Unordered, 101),
        (Order::Ordered, 102),
        (Order::Unordered, 102),
    ] {
        let bufs = Buffers::default();
        let notices = Notices::default();
        let out = Arc::new(Mutex::new(Vec::new()));
        let o = out.clone();
        let t = |name: &'static str| tag(name, &notices);
        // read → route{ even: broadcast{ [a], [route{ b | c }] }, odd: [d → route{ e | f }] } → write
        let inner_route = |x: &'static str, y: &'static str| {
            Builder::branch().stage("pre", pass).fork(
                |b: &Counted, _: &Context| (b.round / 2 % 2) as usize,
                vec![
                    Builder::branch().stage(x, t(x)),
                    Builder::branch().stage(y, t(y)),
                ],
                order,
            )
        };
        let report = Pipeline::builder("nested")
            .buffers(4, bufs.maker())
            .source("read", counter(rounds))
            .stage("split", t("split"))
            .fork(
                |b: &Counted, _: &Context| (b.round % 2) as usize,
                vec![
                    Builder::branch().stage("even", t("even")).broadcast(
                        vec![Builder::branch().stage("a", t("a")), inner_route("b", "c")],
                        copy_counted,
                        merge_counted,
                    ),
                    Builder::branch().stage("d", t("d")).fork(
                        |b: &Counted, _: &Context| (b.round / 2 % 2) as usize,
                        vec![
                            Builder::branch().stage("e", t("e")),
                            Builder::branch().stage("f", t("f")),
                        ],
                        order,
                    ),
                ],
                order,
            )
            .stage("write", move |b: &mut Counted, cx: &Context| -> R {
                o.lock()
                    .unwrap()
                    .push((b.round, b.path.clone(), cx.is_last()));
                Ok(())
            })
            .build()
            .unwrap()
            .run()
            .unwrap();
        let mut out = out.lock().unwrap().clone();
        assert_eq!(out.len(), rounds as usize, "{order:?}");
        assert_eq!(
            out.iter().filter(|x| x.2).count(),
            1,
            "one last at the sink"
        );
        if order == Order::Ordered {
            let got: Vec<u64> = out.iter().map(|x| x.0).collect();
            assert_eq!(got, (0..rounds).collect::<Vec<_>>());
        }
        out.sort_by_key(|x| x.0);
        for (r, path, _) in &out {
            let q = r / 2 % 2 == 0;
            let want: Vec<&str> = match (r % 2 == 0, q) {
                (true, true) => vec!["split", "even", "a", "b"],
                (true, false) => vec!["split", "even", "a", "c"],
                (false, true) => vec!["split", "d", "e"],
                (false, false) => vec!["split", "d", "f"],
            };
            assert_eq!(path, &want, "round {r} {order:?}");
        }
        for st in ["split", "even", "a", "b", "c", "d", "e", "f"] {
            assert_eq!(notices.of(st), 1, "{st}: one last notice ({order:?})");
        }
        assert_eq!(bufs.live.load(Ordering::SeqCst), 0);
        // 4 pipeline buffers + 4 copies for the two-branch broadcast.
        assert_eq!(bufs.made.load(Ordering::SeqCst), 8);
        let write = report.stages.iter().find(|s| s.name == "write").unwrap();
        assert_eq!(write.items, rounds);
    }
}

#[test]
fn a_replicated_shared_stage_keeps_each_pipelines_order() {
    for order in [Order::Ordered, Order::Unordered] {
        let notices = Notices::default();
        let n = notices.clone();
        let shared = SharedStage::replicated("disk", 3, order, None, move || {
            let n = n.clone();
            move |b: &mut Counted, cx: &Context| -> R {
                n.see(cx);
                std::hint::black_box(spin(cx.round(), 3));
                b.value += 1000;
                Ok(())
            }
        });
        let outs: Vec<Arc<Mutex<Vec<u64>>>> = (0..2).map(|_| Arc::default()).collect();
        let bufs = Buffers::default();
        let make = |name: &str, rounds: u64, out: Arc<Mutex<Vec<u64>>>| {
            Pipeline::builder(name)
                .buffers(5, bufs.maker())
                .source("read", counter(rounds))
                .shared(&shared)
                .stage("sink", move |b: &mut Counted, _: &Context| -> R {
                    assert_eq!(b.value, b.round + 1000);
                    out.lock().unwrap().push(b.round);
                    Ok(())
                })
                .build()
                .unwrap()
        };
        let report = run_all(vec![
            make("a", 300, outs[0].clone()),
            make("b", 120, outs[1].clone()),
        ])
        .unwrap();
        for (out, rounds) in outs.iter().zip([300u64, 120]) {
            let mut got = out.lock().unwrap().clone();
            if order == Order::Ordered {
                assert_eq!(got, (0..rounds).collect::<Vec<_>>());
            }
            got.sort_unstable();
            assert_eq!(got, (0..rounds).collect::<Vec<_>>(), "{order:?}");
        }
        let mut lasts: Vec<String> = notices
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|n| n.1.clone())
            .collect();
        lasts.sort();
        assert_eq!(lasts, ["a", "b"], "each pipeline's notice once");
        let disk = report.stages.iter().find(|s| s.name == "disk").unwrap();
        assert_eq!((disk.threads, disk.items), (3, 420));
        assert_eq!(bufs.live.load(Ordering::SeqCst), 0);
    }
}

#[test]
fn a_failing_copy_or_merge_is_the_runs_error() {
    for (copy_fails, round) in [(true, 0), (true, 7), (false, 0), (false, 9)] {
        let bufs = Buffers::default();
        let err = Pipeline::builder("bc")
            .buffers(3, bufs.maker())
            .source("read", counter(20))
            .stage("pre", pass)
            .broadcast(
                vec![
                    Builder::branch().stage("x", pass),
                    Builder::branch().stage("y", pass),
                ],
                move |f: &Counted, t: &mut Counted, b| {
                    assert!(!(copy_fails && f.round == round), "copy {b} broke");
                    copy_counted(f, t, b)
                },
                move |i: &mut Counted, _: &Counted, _| -> R {
                    if !copy_fails && i.round == round {
                        return Err("merge broke".into());
                    }
                    Ok(())
                },
            )
            .build()
            .unwrap()
            .run()
            .unwrap_err();
        let step = if copy_fails { Step::Copy } else { Step::Merge };
        assert_eq!((err.step, err.round), (step, Some(round)), "{err}");
        assert!(err.stage.starts_with("pre"), "{err}");
        assert_eq!(bufs.live.load(Ordering::SeqCst), 0);
    }
}

/// Deferred wake-ups (more stage threads than cores, so pushes leave
/// wake-ups owed): stages that compute, stages that block in user code
/// and stages that switch between the two, with replicas, over a few
/// buffers. Every run passes every round in order, and none hangs (a lost
/// wake-up would: each run is watched; not a timing margin, a run of
/// milliseconds that has not ended after two minutes is hung).
#[test]
fn deferred_wake_ups_lose_nothing_with_blocking_and_computing_stages() {
    for case in 0..40u64 {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rounds = 50 + case * 7;
            let bufs = Buffers::default();
            let seen = Arc::new(Mutex::new(Vec::new()));
            let s2 = seen.clone();
            // Blocks on some rounds only: its thread's sampled calls flip
            // between blocking and computing.
            let flaky = move |b: &mut Counted, cx: &Context| -> R {
                if (cx.round() + case) % 5 < 2 {
                    std::thread::sleep(std::time::Duration::from_micros(30));
                }
                b.value = spin(cx.round(), b.value);
                Ok(())
            };
            let report = Pipeline::builder("mixed")
                .buffers(2 + (case % 4) as usize, bufs.maker())
                .source("read", counter(rounds))
                .stage("compute", |b: &mut Counted, cx: &Context| -> R {
                    b.value = spin(cx.round(), b.value);
                    Ok(())
                })
                .stage("flaky", flaky)
                .replicated("wide", 1 + (case % 3) as usize, || {
                    |b: &mut Counted, cx: &Context| -> R {
                        b.value = spin(cx.round(), b.value);
                        Ok(())
                    }
                })
                .order(Order::Ordered)
                .stage("block", |_: &mut Counted, _: &Context| -> R {
                    std::thread::sleep(std::time::Duration::from_micros(20));
                    Ok(())
                })
                .then("sink", move |b: &mut Counted, _: &Context| -> R {
                    s2.lock().unwrap().push(b.round);
                    Ok(())
                })
                .build()
                .unwrap()
                .run();
            let ok = report.is_ok()
                && *seen.lock().unwrap() == (0..rounds).collect::<Vec<_>>()
                && bufs.live.load(Ordering::SeqCst) == 0;
            let _ = tx.send(ok);
        });
        match rx.recv_timeout(std::time::Duration::from_secs(120)) {
            Ok(ok) => assert!(
                ok,
                "case {case}: a round lost, out of order, or a buffer kept"
            ),
            Err(_) => panic!("case {case} hung"),
        }
    }
}
