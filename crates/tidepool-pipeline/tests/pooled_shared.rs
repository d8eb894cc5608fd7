//! Shared stages in pooled mode give what thread-per-stage mode gives:
//! random pipelines that share random stages (on one instance or
//! replicated, either order) over random inputs, run both ways with
//! `run_all`; and a failure or a stop in one pipeline of a pooled
//! `run_all` ends the run as it does thread per stage.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::{counter, scrambled, Buffers, Counted, Notices, Rng};
use proptest::prelude::*;
use tidepool_pipeline::{
    run_all, BoxError, Builder, Context, Flow, Order, Pipeline, PipelineError, Report, SharedStage,
    Step,
};

type R = Result<(), BoxError>;

/// How a run's pipelines run.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Threads,
    /// Pooled on workers that size themselves.
    Sized,
    /// Pooled on this many workers.
    Fixed(usize),
}

impl Mode {
    fn apply(self, b: Builder<Counted>) -> Builder<Counted> {
        match self {
            Mode::Threads => b,
            Mode::Sized => b.pooled(),
            Mode::Fixed(n) => b.pooled_threads(n),
        }
    }
}

#[derive(Clone, Debug)]
enum StepDesc {
    Own {
        id: u64,
        replicas: usize,
        repeat: usize,
        order: Order,
    },
    Shared(usize),
}

#[derive(Clone, Debug)]
struct PipeDesc {
    rounds: u64,
    buffers: usize,
    steps: Vec<StepDesc>,
}

#[derive(Clone, Debug)]
struct Desc {
    shared: Vec<(usize, Order)>,
    pipes: Vec<PipeDesc>,
}

/// Two or three pipelines, one or two shared stages, each pipeline passing
/// each shared stage at most once (the builder's rule), in a random place
/// among stages of its own.
fn describe(rng: &mut Rng) -> Desc {
    let shared: Vec<(usize, Order)> = (0..1 + rng.below(2))
        .map(|_| (1 + rng.below(3) as usize, rng.order()))
        .collect();
    let mut id = 0;
    let pipes = (0..2 + rng.below(2))
        .map(|p| {
            let mut steps = Vec::new();
            for _ in 0..rng.below(3) {
                id += 1;
                let replicas = if rng.below(3) == 0 { 2 } else { 1 };
                steps.push(StepDesc::Own {
                    id,
                    replicas,
                    repeat: if replicas == 1 && rng.below(4) == 0 {
                        2
                    } else {
                        1
                    },
                    order: rng.order(),
                });
            }
            // The first two pipelines pass every shared stage, the third
            // some of them.
            for k in 0..shared.len() {
                if p < 2 || rng.below(2) == 0 {
                    let at = rng.below(steps.len() as u64 + 1) as usize;
                    steps.insert(at, StepDesc::Shared(k));
                }
            }
            let repeating = steps
                .iter()
                .filter(|s| matches!(s, StepDesc::Own { repeat: 2, .. }))
                .count();
            PipeDesc {
                rounds: [0, 1, 2 + rng.below(120)][rng.below(3) as usize],
                buffers: 1 + rng.below(5) as usize + repeating,
                steps,
            }
        })
        .collect();
    Desc { shared, pipes }
}

/// Whether pipeline `p`'s outputs keep its stream's order.
fn ordered(d: &Desc, p: &PipeDesc) -> bool {
    p.steps.iter().all(|s| match s {
        StepDesc::Own {
            replicas, order, ..
        } => *replicas == 1 || *order == Order::Ordered,
        StepDesc::Shared(k) => d.shared[*k].0 == 1 || d.shared[*k].1 == Order::Ordered,
    })
}

fn mix(b: &mut Counted, cx: &Context, salt: u64) {
    if !cx.is_empty() {
        b.value = b.value.wrapping_mul(31).wrapping_add(salt);
    }
}

/// A sink's (round, value, last) in arrival order.
type Out = Vec<(u64, u64, bool)>;

/// What a run saw: per pipeline its sink's [`Out`]; per (stage, pipeline)
/// its last-buffer notices; the report.
struct Seen {
    out: Vec<Out>,
    notices: BTreeMap<(String, String), usize>,
    report: Report,
}

fn run(d: &Desc, mode: Mode) -> Seen {
    let notices = Notices::default();
    let shared: Vec<SharedStage<Counted>> = d
        .shared
        .iter()
        .enumerate()
        .map(|(k, &(replicas, order))| {
            let name = format!("shared{k}");
            let salt = 1000 + k as u64;
            let n = notices.clone();
            if replicas == 1 {
                SharedStage::new(name, move |b: &mut Counted, cx: &Context| -> R {
                    n.see(cx);
                    mix(b, cx, salt);
                    Ok(())
                })
            } else {
                SharedStage::replicated(name, replicas, order, None, move || {
                    let n = n.clone();
                    move |b: &mut Counted, cx: &Context| -> R {
                        n.see(cx);
                        mix(b, cx, salt);
                        Ok(())
                    }
                })
            }
        })
        .collect();
    let bufs = Buffers::default();
    let outs: Vec<Arc<Mutex<Out>>> = d.pipes.iter().map(|_| Arc::default()).collect();
    let pipelines = d
        .pipes
        .iter()
        .enumerate()
        .map(|(p, pd)| {
            let rounds = pd.rounds;
            let mut b = Pipeline::builder(format!("p{p}"))
                .buffers(pd.buffers, bufs.maker())
                .source("read", scrambled(rounds));
            for s in &pd.steps {
                b = match *s {
                    StepDesc::Shared(k) => b.shared(&shared[k]),
                    StepDesc::Own {
                        id,
                        replicas,
                        repeat,
                        order,
                    } => {
                        let n = notices.clone();
                        let stage = move || {
                            let n = n.clone();
                            move |b: &mut Counted, cx: &Context| -> R {
                                n.see(cx);
                                mix(b, cx, id);
                                Ok(())
                            }
                        };
                        let name = format!("s{id}");
                        let b = if replicas > 1 {
                            b.replicated(name, replicas, stage).order(order)
                        } else {
                            b.stage(name, stage())
                        };
                        b.repeat(repeat)
                    }
                };
            }
            let o = outs[p].clone();
            let n = notices.clone();
            let b = b.stage("sink", move |b: &mut Counted, cx: &Context| -> R {
                n.see(cx);
                if !cx.is_empty() {
                    o.lock().unwrap().push((b.round, b.value, cx.is_last()));
                }
                Ok(())
            });
            mode.apply(b).build().expect("valid")
        })
        .collect();
    let report = run_all(pipelines).expect("runs");
    assert_eq!(bufs.live.load(Ordering::SeqCst), 0, "every buffer dropped");
    let mut by: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (s, p, _) in notices.0.lock().unwrap().iter() {
        *by.entry((s.clone(), p.clone())).or_default() += 1;
    }
    Seen {
        out: outs.iter().map(|o| o.lock().unwrap().clone()).collect(),
        notices: by,
        report,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_shared_stages_pooled_match_thread_per_stage(
        seed in 1u64..u64::MAX,
        workers in 0usize..4,
    ) {
        let d = describe(&mut Rng(seed));
        let mode = if workers == 0 { Mode::Sized } else { Mode::Fixed(workers) };
        let want = run(&d, Mode::Threads);
        let got = run(&d, mode);
        // Every stage, shared or not, sees each of its pipelines' last
        // buffer once, both ways.
        prop_assert!(want.notices.values().all(|&n| n == 1), "{:?}", want.notices);
        prop_assert_eq!(&got.notices, &want.notices, "{:?}", d);
        for (p, pd) in d.pipes.iter().enumerate() {
            let (mut g, mut w) = (got.out[p].clone(), want.out[p].clone());
            prop_assert_eq!(g.len() as u64, pd.rounds, "pipeline p{}: {:?}", p, d);
            if !ordered(&d, pd) {
                let lasts = g.iter().filter(|x| x.2).count();
                prop_assert_eq!(lasts, usize::from(pd.rounds > 0), "one last at the sink");
                for o in [&mut g, &mut w] {
                    for x in o.iter_mut() {
                        x.2 = false;
                    }
                    o.sort_unstable();
                }
            }
            prop_assert_eq!(g, w, "pipeline p{} ({:?}, {:?})", p, mode, d);
            let r = &got.report.pipelines[p];
            prop_assert_eq!((r.rounds, r.buffers), (pd.rounds.max(1), pd.buffers));
        }
        // A shared stage reports once, with every buffer of every
        // pipeline that passes it, and those pipelines' names.
        for (k, _) in d.shared.iter().enumerate() {
            let name = format!("shared{k}");
            let passing: Vec<usize> = (0..d.pipes.len())
                .filter(|&p| d.pipes[p].steps.iter().any(|s| matches!(s, StepDesc::Shared(j) if *j == k)))
                .collect();
            for seen in [&want, &got] {
                let rows: Vec<_> = seen.report.stages.iter().filter(|s| s.name == name).collect();
                prop_assert_eq!(rows.len(), usize::from(!passing.is_empty()));
                if let Some(row) = rows.first() {
                    let items: u64 = passing.iter().map(|&p| d.pipes[p].rounds.max(1)).sum();
                    prop_assert_eq!(row.items, items);
                    let names: Vec<String> = passing.iter().map(|p| format!("p{p}")).collect();
                    prop_assert_eq!(&row.pipelines, &names);
                }
            }
        }
    }
}

/// A shared stage's one instance serves every pipeline's buffers in pooled
/// mode too, and is handed back after the run: a second run uses it again.
#[test]
fn a_pooled_shared_stage_is_one_instance_handed_back_after_the_run() {
    let served = Arc::new(Mutex::new(Vec::new()));
    let sv = served.clone();
    // One instance: its own count of the buffers it served, all pipelines.
    let mut mine = 0u64;
    let shared = SharedStage::new("disk", move |b: &mut Counted, cx: &Context| -> R {
        mine += 1;
        sv.lock().unwrap().push((cx.pipeline().to_string(), mine));
        b.value += 1000;
        Ok(())
    });
    let make = |name: &str, n: u64| {
        Pipeline::builder(name)
            .buffers(3, Buffers::default().maker())
            .source("read", counter(n))
            .shared(&shared)
            .stage("sum", |_: &mut Counted, _: &Context| -> R { Ok(()) })
            .pooled_threads(3)
            .build()
            .unwrap()
    };
    run_all(vec![make("a", 100), make("b", 50)]).unwrap();
    let seen = served.lock().unwrap().clone();
    assert_eq!(seen.len(), 150);
    assert!(seen.iter().map(|s| s.1).eq(1..=150), "one instance's count");
    run_all(vec![make("a", 10)]).unwrap();
    assert_eq!(served.lock().unwrap().last().map(|s| s.1), Some(160));
}

/// Run `pipelines` on a thread of their own; `None` if the run has not
/// ended after a minute (hung).
fn guarded(pipelines: Vec<Pipeline<Counted>>) -> Option<Result<Report, PipelineError>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run_all(pipelines));
    });
    // Not a timing margin: runs of milliseconds that have not ended
    // after a minute are hung.
    rx.recv_timeout(Duration::from_secs(60)).ok()
}

const MODES: [Mode; 4] = [Mode::Threads, Mode::Sized, Mode::Fixed(1), Mode::Fixed(3)];

/// A source that never ends by itself, counting its rounds in `count`.
fn endless(count: Arc<AtomicU64>) -> impl FnMut(&mut Counted, &Context) -> Result<Flow, BoxError> {
    move |b, cx| {
        b.round = cx.round();
        b.value = cx.round();
        count.fetch_add(1, Ordering::SeqCst);
        Ok(Flow::More)
    }
}

/// A failure in one pipeline of a run (in its own stage, or in the shared
/// stage on its buffer) ends the whole run with that failure, the other
/// pipeline's endless source included, pooled as thread per stage.
#[test]
fn a_failure_in_one_pipeline_ends_every_pipeline_of_the_run() {
    for in_shared in [false, true] {
        for mode in MODES {
            let bufs = Buffers::default();
            let shared = SharedStage::replicated("shared", 2, Order::Ordered, None, move || {
                move |_: &mut Counted, cx: &Context| -> R {
                    if in_shared && cx.pipeline() == "b" && cx.round() == 7 {
                        return Err("disk full".into());
                    }
                    Ok(())
                }
            });
            let a = Pipeline::builder("a")
                .buffers(4, bufs.maker())
                .source("read", endless(Arc::default()))
                .shared(&shared)
                .stage("sink", common::pass);
            let b = Pipeline::builder("b")
                .buffers(4, bufs.maker())
                .source("read", counter(1000))
                .shared(&shared)
                .stage("boom", |_: &mut Counted, cx: &Context| -> R {
                    if cx.round() == 20 {
                        return Err("boom".into());
                    }
                    Ok(())
                });
            let ps = vec![
                mode.apply(a).build().unwrap(),
                mode.apply(b).build().unwrap(),
            ];
            let what = format!("{mode:?}, in the shared stage: {in_shared}");
            let e = guarded(ps)
                .unwrap_or_else(|| panic!("{what}: hung"))
                .expect_err("failed");
            let (stage, round) = if in_shared {
                ("shared", 7)
            } else {
                ("boom", 20)
            };
            assert_eq!(
                (e.pipeline.as_str(), e.stage.as_str(), e.round, e.step),
                ("b", stage, Some(round), Step::Process),
                "{what}: {e}"
            );
            assert_eq!(
                bufs.live.load(Ordering::SeqCst),
                0,
                "{what}: buffers dropped"
            );
        }
    }
}

/// `stop()` on one pipeline of a run ends that pipeline's stream; the
/// others go on to their own end, and the run then returns `Ok` with only
/// that pipeline stopped; stopping every pipeline ends a run of endless
/// sources. Pooled as thread per stage.
#[test]
fn a_stop_in_one_pipeline_ends_its_stream_and_the_run_ends_with_the_others() {
    for stop_both in [false, true] {
        for mode in MODES {
            let bufs = Buffers::default();
            let shared = SharedStage::new("shared", common::pass);
            let count = Arc::new(AtomicU64::new(0));
            let sunk = Arc::new(AtomicU64::new(0));
            let a = Pipeline::builder("a")
                .buffers(4, bufs.maker())
                .source("read", endless(count.clone()))
                .shared(&shared)
                .stage("sink", common::pass);
            let s = sunk.clone();
            let b = Pipeline::builder("b")
                .buffers(4, bufs.maker())
                .source(
                    "read",
                    if stop_both {
                        Box::new(endless(Arc::default()))
                            as Box<
                                dyn FnMut(&mut Counted, &Context) -> Result<Flow, BoxError> + Send,
                            >
                    } else {
                        Box::new(counter(300))
                    },
                )
                .shared(&shared)
                .stage("sink", move |_: &mut Counted, _: &Context| -> R {
                    s.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                });
            let (a, b) = (
                mode.apply(a).build().unwrap(),
                mode.apply(b).build().unwrap(),
            );
            let (stop_a, stop_b) = (a.stop_handle(), b.stop_handle());
            let c = count.clone();
            let stopper = std::thread::spawn(move || {
                // Once `a` has run a while (bounded: a run that never gets
                // there fails below, not here).
                for _ in 0..60_000 {
                    if c.load(Ordering::SeqCst) >= 50 {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                stop_a.stop();
                if stop_both {
                    stop_b.stop();
                }
            });
            let what = format!("{mode:?}, both stopped: {stop_both}");
            let report = guarded(vec![a, b])
                .unwrap_or_else(|| panic!("{what}: hung"))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            stopper.join().unwrap();
            let (ra, rb) = (&report.pipelines[0], &report.pipelines[1]);
            assert!(ra.stopped && ra.rounds >= 50, "{what}: {ra:?}");
            assert_eq!(rb.stopped, stop_both, "{what}: {rb:?}");
            if !stop_both {
                assert_eq!(rb.rounds, 300, "{what}: b runs to its end");
                assert_eq!(sunk.load(Ordering::SeqCst), 300, "{what}");
            }
            assert_eq!(
                bufs.live.load(Ordering::SeqCst),
                0,
                "{what}: buffers dropped"
            );
        }
    }
}

/// Pipelines run together run the same way: mixing pooled and thread per
/// stage, or two pooled worker counts, is refused by name.
#[test]
fn run_all_refuses_pipelines_that_run_differently() {
    let shared = SharedStage::new("sh", common::pass);
    let make = |name: &str| {
        Pipeline::builder(name)
            .buffers(2, Buffers::default().maker())
            .source("read", counter(3))
            .shared(&shared)
    };
    let e = run_all(vec![
        make("a").pooled().build().unwrap(),
        make("b").build().unwrap(),
    ])
    .expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("`a` runs pooled_policy(auto)") && msg.contains("`b` thread per stage"),
        "{msg}"
    );
    let e = run_all(vec![
        make("a").pooled_threads(2).build().unwrap(),
        make("b").pooled_threads(3).build().unwrap(),
    ])
    .expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("pooled_threads(2)") && msg.contains("pooled_threads(3)"),
        "{msg}"
    );
}
