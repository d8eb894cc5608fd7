//! Forks and broadcasts in pooled mode give what thread-per-stage mode
//! gives: random pipelines (nested route forks and broadcasts, replicated
//! and repeating stages, either order) over random inputs, run both ways.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use common::{refused, scrambled, Buffers, Counted, Notices, Rng};
use proptest::prelude::*;
use tidepool_pipeline::{BoxError, Builder, Context, Order, Pipeline};

type R = Result<(), BoxError>;

#[derive(Clone, Debug)]
struct StageDesc {
    id: u64,
    replicas: usize,
    repeat: usize,
    order: Order,
    fork: Option<ForkDesc>,
}

#[derive(Clone, Debug)]
struct ForkDesc {
    broadcast: bool,
    order: Order,
    branches: Vec<Vec<StageDesc>>,
}

/// A random chain. `repeat` only on single-instance groups outside forks'
/// branches: the builder refuses it in a branch and on an ordered
/// replicated stage (a join or reorder ring would wait for a buffer the
/// repeating group holds).
fn chain(rng: &mut Rng, depth: u32, next_id: &mut u64, len: u64) -> Vec<StageDesc> {
    (0..len)
        .map(|_| {
            *next_id += 1;
            let id = *next_id;
            let replicas = if rng.below(3) == 0 { 2 } else { 1 };
            let fork = (replicas == 1 && depth < 2 && rng.below(3) == 0).then(|| {
                let n = 2 + rng.below(2);
                ForkDesc {
                    broadcast: rng.below(2) == 0,
                    order: rng.order(),
                    branches: (0..n)
                        .map(|_| {
                            let l = 1 + rng.below(2);
                            chain(rng, depth + 1, next_id, l)
                        })
                        .collect(),
                }
            });
            StageDesc {
                id,
                replicas,
                repeat: if depth == 0 && replicas == 1 && rng.below(4) == 0 {
                    2
                } else {
                    1
                },
                order: rng.order(),
                fork,
            }
        })
        .collect()
}

/// Whether every output keeps the stream's order.
fn ordered(c: &[StageDesc]) -> bool {
    c.iter().all(|s| {
        (s.replicas == 1 || s.order == Order::Ordered)
            && s.fork.as_ref().is_none_or(|f| {
                (f.broadcast || f.order == Order::Ordered) && f.branches.iter().all(|b| ordered(b))
            })
    })
}

/// What a run saw: the sink's (round, value, last) in arrival order, and
/// per stage its notices (empty or not).
type Seen = (Vec<(u64, u64, bool)>, BTreeMap<String, Vec<bool>>);

fn stage(id: u64, notices: &Notices) -> impl FnMut(&mut Counted, &Context) -> R + Send + 'static {
    let n = notices.clone();
    move |b: &mut Counted, cx: &Context| -> R {
        n.see(cx);
        if !cx.is_empty() {
            b.value = b.value.wrapping_mul(31).wrapping_add(id);
        }
        Ok(())
    }
}

fn add(mut b: Builder<Counted>, c: &[StageDesc], notices: &Notices) -> Builder<Counted> {
    for s in c {
        let name = format!("s{}", s.id);
        b = if s.replicas > 1 {
            let n = notices.clone();
            let id = s.id;
            b.replicated(name, s.replicas, move || stage(id, &n))
                .order(s.order)
        } else {
            b.stage(name, stage(s.id, notices))
        };
        b = b.repeat(s.repeat);
        if let Some(f) = &s.fork {
            let branches = f
                .branches
                .iter()
                .map(|br| add(Builder::branch(), br, notices))
                .collect();
            let n = f.branches.len() as u64;
            b = if f.broadcast {
                b.broadcast(
                    branches,
                    |from: &Counted, to: &mut Counted, _| {
                        to.round = from.round;
                        to.value = from.value;
                    },
                    |into: &mut Counted, from: &Counted, br| -> R {
                        into.value = into
                            .value
                            .wrapping_add(from.value.wrapping_mul(br as u64 + 7));
                        Ok(())
                    },
                )
            } else {
                b.fork(
                    move |b: &Counted, _: &Context| (b.value % n) as usize,
                    branches,
                    f.order,
                )
            };
        }
    }
    b
}

/// Run `c` over `rounds` rounds (0: a source that ends at once with an
/// empty buffer) on `buffers` buffers, pooled or not.
fn run(c: &[StageDesc], rounds: u64, buffers: usize, pooled: Option<Option<usize>>) -> Seen {
    let notices = Notices::default();
    let out = Arc::new(Mutex::new(Vec::new()));
    let bufs = Buffers::default();
    let o = out.clone();
    let b = Pipeline::builder("random")
        .buffers(buffers, bufs.maker())
        .source("read", scrambled(rounds));
    let b = add(b, c, &notices).stage("sink", move |b: &mut Counted, cx: &Context| -> R {
        if !cx.is_empty() {
            o.lock().unwrap().push((b.round, b.value, cx.is_last()));
        }
        Ok(())
    });
    let b = match pooled {
        None => b,
        Some(None) => b.pooled(),
        Some(Some(n)) => b.pooled_threads(n),
    };
    if std::env::var("FORKS_DEBUG").is_ok() {
        eprintln!("run {rounds} rounds, {buffers} buffers, {pooled:?}: {c:?}");
    }
    let report = b.build().expect("valid").run().expect("runs");
    assert_eq!(bufs.live.load(Ordering::SeqCst), 0, "every buffer dropped");
    assert_eq!(report.pipelines[0].rounds, rounds.max(1));
    let mut by_stage: BTreeMap<String, Vec<bool>> = BTreeMap::new();
    for (s, _, empty) in notices.0.lock().unwrap().iter() {
        by_stage.entry(s.clone()).or_default().push(*empty);
    }
    let out = out.lock().unwrap().clone();
    (out, by_stage)
}

/// The fewest buffers `c` builds with (groups that repeat or fork hold some).
fn buffers_for(c: &[StageDesc], want: usize) -> usize {
    (want..64)
        .find(|&n| {
            add(
                Pipeline::builder("x")
                    .buffers(n, Buffers::default().maker())
                    .source("read", common::counter(1)),
                c,
                &Notices::default(),
            )
            .build()
            .is_ok()
        })
        .expect("some pool size builds")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_forks_and_broadcasts_pooled_match_thread_per_stage(
        seed in 1u64..u64::MAX,
        rounds in prop_oneof![Just(0u64), Just(1u64), 2u64..150],
        want in 1usize..6,
        workers in 0usize..4,
    ) {
        let mut rng = Rng(seed);
        let mut id = 0;
        let len = 1 + rng.below(3);
        let mut c = chain(&mut rng, 0, &mut id, len);
        // At least one fork.
        if c.iter().all(|s| s.fork.is_none()) {
            c[0].replicas = 1;
            c[0].fork = Some(ForkDesc {
                broadcast: true,
                order: Order::Ordered,
                branches: vec![
                    chain(&mut rng, 1, &mut id, 1),
                    chain(&mut rng, 1, &mut id, 2),
                ],
            });
        }
        let buffers = buffers_for(&c, want);
        let (mut want_out, want_notices) = run(&c, rounds, buffers, None);
        if ordered(&c) {
            prop_assert!(want_notices.values().all(|v| v.len() == 1));
        }
        let pooled = if workers == 0 { None } else { Some(workers) };
        let (mut got_out, got_notices) = run(&c, rounds, buffers, Some(pooled));
        if ordered(&c) {
            prop_assert_eq!(&got_out, &want_out, "in order: {:?}", c);
            prop_assert_eq!(got_notices, want_notices, "{:?}", c);
        } else {
            // Which round comes last, and so which branches get an empty
            // notice, depends on timing; each stage still gets one notice.
            let once = |n: &BTreeMap<String, Vec<bool>>| -> Vec<(String, usize)> {
                n.iter().map(|(k, v)| (k.clone(), v.len())).collect()
            };
            prop_assert_eq!(once(&got_notices), once(&want_notices), "{:?}", c);
            prop_assert!(got_notices.values().all(|v| v.len() == 1), "{:?}", got_notices);
            let lasts = got_out.iter().filter(|x| x.2).count();
            prop_assert_eq!(lasts, usize::from(rounds > 0), "one last at the sink");
            for o in [&mut got_out, &mut want_out] {
                for x in o.iter_mut() {
                    x.2 = false;
                }
                o.sort_unstable();
            }
            prop_assert_eq!(got_out, want_out, "{:?}", c);
        }
    }
}

/// A broadcast's copies in pooled mode: `branches − 1` per root (buffer or
/// notice), made once before the run, never per round.
#[test]
fn pooled_broadcast_makes_its_copies_once() {
    let bufs = Buffers::default();
    let out = Arc::new(Mutex::new(Vec::new()));
    let o = out.clone();
    let pass = |_: &mut Counted, _: &Context| -> R { Ok(()) };
    Pipeline::builder("copies")
        .buffers(4, bufs.maker())
        .source("read", common::counter(500))
        .stage("a", pass)
        .broadcast(
            vec![
                Builder::branch().stage("x", pass),
                Builder::branch().stage("y", pass),
                Builder::branch().stage("z", pass),
            ],
            |f: &Counted, t: &mut Counted, _| t.value = f.value,
            |i: &mut Counted, f: &Counted, _| -> R {
                i.value += f.value;
                Ok(())
            },
        )
        .stage("write", move |b: &mut Counted, _: &Context| -> R {
            o.lock().unwrap().push(b.value);
            Ok(())
        })
        .pooled()
        .build()
        .unwrap()
        .run()
        .unwrap();
    assert_eq!(
        *out.lock().unwrap(),
        (0..500).map(|r| 3 * r).collect::<Vec<_>>()
    );
    assert_eq!(bufs.made.load(Ordering::SeqCst), 4 * 3);
    assert_eq!(bufs.live.load(Ordering::SeqCst), 0);
}

/// A route that names a branch the fork lacks fails the pooled run by
/// name, as it does thread per stage.
#[test]
fn a_route_out_of_range_fails_a_pooled_run_by_name() {
    let pass = |_: &mut Counted, _: &Context| -> R { Ok(()) };
    let e = Pipeline::builder("bad")
        .buffers(4, Buffers::default().maker())
        .source("read", common::counter(10))
        .stage("a", pass)
        .fork(
            |b: &Counted, _: &Context| if b.round == 5 { 7 } else { 0 },
            vec![
                Builder::branch().stage("p", pass),
                Builder::branch().stage("q", pass),
            ],
            Order::Ordered,
        )
        .pooled_threads(2)
        .build()
        .unwrap()
        .run()
        .expect_err("route out of range");
    let msg = e.to_string();
    assert!(
        msg.contains("route chose branch 7") && msg.contains("0..2"),
        "{msg}"
    );
    assert_eq!(e.round, Some(5));
}

/// What pooled mode still refuses inside a fork's branch, by name.
#[test]
fn pooled_refuses_priorities_inside_a_branch() {
    let pass = |_: &mut Counted, _: &Context| -> R { Ok(()) };
    let e = refused(
        Pipeline::builder("x")
            .buffers(4, Buffers::default().maker())
            .source("read", common::counter(3))
            .stage("a", pass)
            .fork(
                |_: &Counted, _: &Context| 0,
                vec![
                    Builder::branch()
                        .stage("p", pass)
                        .priority(tidepool_pipeline::PrioritySpec::parse("nice:5").unwrap()),
                    Builder::branch().stage("q", pass),
                ],
                Order::Ordered,
            )
            .pooled(),
    );
    assert!(e.contains("stage `p`") && e.contains("priorit"), "{e}");
}
